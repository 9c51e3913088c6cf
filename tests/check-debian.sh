#!/bin/sh
# check-debian.sh - build the Debian packages from a clean copy of the tree
# and check what they contain.  Slow (a full build and make check), so it is
# not part of make check; CI runs it.
#
# Usage: tests/check-debian.sh [SOURCE-TARBALL]
#   Without an argument the copy is made from the git work tree (tracked
#   files and new files not ignored, with their current contents); with one,
#   from a `make dist` tarball.
# Steps: dpkg-buildpackage -us -uc -b, lintian (no errors), the .debs
# unpacked with dpkg-deb -x into a throwaway root and their contents checked,
# and the pkg-config consumer compiled and run against that root.
# Exit: 0 all passed, 1 a check failed, 77 dpkg-buildpackage is unavailable.
# EP_KEEP=1 keeps the work directory.
set -u

here=$(cd "$(dirname "$0")/.." && pwd)
tarball=${1:-}

for tool in dpkg-buildpackage dpkg-deb dh; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "SKIP: $tool is not installed (build-aux/install-deps.sh all)"
		exit 77
	fi
done

passed=0
failed=0
pass() {
	echo "PASS: $*"
	passed=$((passed + 1))
}
fail() {
	echo "FAIL: $*"
	failed=$((failed + 1))
}
check() { # check DESCRIPTION COMMAND...
	what=$1
	shift
	if "$@"; then pass "$what"; else fail "$what"; fi
}
finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ] || exit 1
	exit 0
}

work=$(mktemp -d "${TMPDIR:-/tmp}/check-debian.XXXXXX") || exit 99
if [ "${EP_KEEP:-0}" = 1 ]; then
	echo "work directory: $work"
else
	trap 'rm -rf "$work"' EXIT INT TERM
fi
src=$work/libexecpack
mkdir -p "$src"

# --- a clean copy of the source ---------------------------------------------
if [ -n "$tarball" ]; then
	tar -xf "$tarball" -C "$src" --strip-components=1 || { fail "unpack $tarball"; finish; }
elif git -C "$here" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	# deleted but still tracked files are skipped by --ignore-failed-read
	(cd "$here" && git ls-files -z --cached --others --exclude-standard |
		tar --null -T - --ignore-failed-read -cf - 2>/dev/null) | tar -xf - -C "$src" ||
		{ fail "copy of the git work tree"; finish; }
else
	echo "ERROR: not a git work tree; pass a tarball from make dist"
	exit 99
fi
[ -f "$src/debian/control" ] || { fail "debian/control in the copy"; finish; }
pass "clean copy of the source in $src"

if ! (cd "$src" && dpkg-checkbuilddeps) >"$work/builddeps.log" 2>&1; then
	fail "build dependencies installed: $(cat "$work/builddeps.log")"
	finish
fi

# --- build ----------------------------------------------------------------
echo "building (log: $work/build.log) ..."
if (cd "$src" && dpkg-buildpackage -us -uc -b) >"$work/build.log" 2>&1; then
	pass "dpkg-buildpackage -us -uc -b"
else
	tail -n 60 "$work/build.log"
	fail "dpkg-buildpackage -us -uc -b"
	finish
fi
grep -E '^(PASS|SKIP|FAIL|XFAIL|XPASS|ERROR):' "$work/build.log" | sed 's/^/  make check: /' | sort -u |
	head -n 60
if grep -q 'dpkg-gensymbols: warning' "$work/build.log"; then
	grep -A 20 'dpkg-gensymbols: warning' "$work/build.log" | head -n 30
	fail "debian/libexecpack0.symbols matches the library (dpkg-gensymbols)"
else
	pass "debian/libexecpack0.symbols matches the library (dpkg-gensymbols)"
fi
if grep -q 'dh_missing: warning' "$work/build.log"; then
	grep 'dh_missing' "$work/build.log" | head -n 20
	fail "every installed file is in a package (dh_missing)"
else
	pass "every installed file is in a package (dh_missing)"
fi

changes=$(ls "$work"/libexecpack_*.changes 2>/dev/null | head -n 1)
deb() { ls "$work/$1"_*.deb 2>/dev/null | head -n 1; }
for p in libexecpack0 libexecpack-dev execpack-tools; do
	check "package $p built" test -n "$(deb "$p")"
done

# --- lintian ----------------------------------------------------------------
if command -v lintian >/dev/null 2>&1; then
	lintian --tag-display-limit 0 "$changes" >"$work/lintian.log" 2>&1
	sed 's/^/  lintian: /' "$work/lintian.log" | head -n 40
	if grep -q '^E: ' "$work/lintian.log"; then
		fail "lintian reports no errors"
	else
		pass "lintian reports no errors ($(grep -c '^W: ' "$work/lintian.log") warnings)"
	fi
else
	echo "SKIP: lintian is not installed"
fi

# --- contents ---------------------------------------------------------------
root=$work/root
mkdir -p "$root"
for p in libexecpack0 libexecpack-dev execpack-tools; do
	f=$(deb "$p")
	[ -n "$f" ] && dpkg-deb -x "$f" "$root"
	[ -n "$f" ] && dpkg-deb -c "$f" | awk '{ print $6 }' | sed 's|^\./|/|' >"$work/$p.list"
done
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || echo x86_64-linux-gnu)
libdir=$root/usr/lib/$ma
in_pkg() { grep -qx "$2" "$work/$1.list" 2>/dev/null; }

check "libexecpack0 holds usr/lib/$ma/libexecpack.so.0.0.0" in_pkg libexecpack0 "/usr/lib/$ma/libexecpack.so.0.0.0"
check "libexecpack.so.0.0.0 is a regular file" test -f "$libdir/libexecpack.so.0.0.0" -a ! -h "$libdir/libexecpack.so.0.0.0"
soname=$(LC_ALL=C readelf -d "$libdir/libexecpack.so.0.0.0" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
check "SONAME is libexecpack.so.0 (got '$soname')" test "$soname" = libexecpack.so.0
check "libexecpack0 holds the symlink libexecpack.so.0 -> libexecpack.so.0.0.0" \
	test -h "$libdir/libexecpack.so.0" -a "$(readlink "$libdir/libexecpack.so.0")" = libexecpack.so.0.0.0
check "libexecpack-dev holds the symlink libexecpack.so -> the SONAME file" \
	sh -c "in_dev=\$(grep -cx '/usr/lib/$ma/libexecpack.so' '$work/libexecpack-dev.list'); \
	       test \"\$in_dev\" = 1 && test -h '$libdir/libexecpack.so' && \
	       case \$(readlink '$libdir/libexecpack.so') in libexecpack.so.0*) true ;; *) false ;; esac"
check "no RPATH or RUNPATH in the library" \
	sh -c "! LC_ALL=C readelf -d '$libdir/libexecpack.so.0.0.0' | grep -Eq '\((RPATH|RUNPATH)\)'"
check "no .la file in any package" sh -c "! grep -h '\.la\$' '$work'/*.list"
check "libexecpack0 has a symbols file" sh -c "dpkg-deb -I '$(deb libexecpack0)' symbols >/dev/null"
check "libexecpack0 holds only the library and its docs" \
	sh -c "! grep -Ev '^/(|usr/?|usr/lib/?|usr/lib/$ma/?|usr/lib/$ma/libexecpack\.so\.0.*|usr/share/?|usr/share/doc/?|usr/share/doc/libexecpack0/?.*)\$' '$work/libexecpack0.list'"
check "libexecpack-dev holds /usr/include/execpack.h" in_pkg libexecpack-dev /usr/include/execpack.h
check "libexecpack-dev holds the pkg-config file" in_pkg libexecpack-dev "/usr/lib/$ma/pkgconfig/execpack.pc"
check "libexecpack-dev holds libexecpack(7)" in_pkg libexecpack-dev /usr/share/man/man7/libexecpack.7.gz

# every EP_API function has a man page in -dev
missing=""
for fn in $(sed -n 's/^[[:space:]]*EP_API[^(]*[^A-Za-z0-9_]\(ep_[A-Za-z0-9_]*\)[[:space:]]*(.*/\1/p' "$src/include/execpack.h"); do
	test -e "$root/usr/share/man/man3/$fn.3.gz" || missing="$missing $fn"
done
check "libexecpack-dev holds a man page for every header function${missing:+ (missing:$missing)}" test -z "$missing"
check "execpack-tools holds /usr/bin/execpack-info" in_pkg execpack-tools /usr/bin/execpack-info
check "execpack-tools holds execpack-info(1)" in_pkg execpack-tools /usr/share/man/man1/execpack-info.1.gz

# --- the consumer against the unpacked root ----------------------------------
PKG_CONFIG_PATH=$libdir/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$root
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
if flags=$(pkg-config --cflags --libs execpack 2>"$work/pc.err"); then
	pass "pkg-config --cflags --libs execpack: $flags"
	# shellcheck disable=SC2086 # flags are words
	if ${CC:-cc} -std=c11 -Wall -Wextra -Werror -o "$work/consumer" "$here/tests/pkgconfig-consumer.c" $flags 2>"$work/cc.err"; then
		pass "consumer compiles against the packages"
		LD_LIBRARY_PATH=$libdir "$work/consumer" "$(pkg-config --modversion execpack)" >"$work/run.out" 2>&1
		rc=$?
		cat "$work/run.out"
		case $rc in
		0) pass "consumer runs JIT code from the packaged library" ;;
		77) echo "SKIP: no executable memory here" ;;
		*) fail "consumer runs JIT code from the packaged library (exit $rc)" ;;
		esac
	else
		cat "$work/cc.err"
		fail "consumer compiles against the packages"
	fi
else
	cat "$work/pc.err"
	fail "pkg-config --cflags --libs execpack"
fi
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
if [ -x "$root/usr/bin/execpack-info" ]; then
	check "packaged execpack-info --help runs" \
		sh -c "LD_LIBRARY_PATH='$libdir' '$root/usr/bin/execpack-info' --help >/dev/null"
	check "packaged execpack-info is linked against the packaged library" \
		sh -c "LD_LIBRARY_PATH='$libdir' ldd '$root/usr/bin/execpack-info' | grep -q '$libdir/libexecpack.so.0'"
fi
finish
