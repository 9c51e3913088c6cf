#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# check-debian.sh - build the Debian packages from a clean copy of the tree
# and check what they contain.  Slow (a full build and make check), so it is
# not part of make check; CI runs it.
#
# Usage: tests/check-debian.sh [SOURCE-TARBALL]
#   Without an argument the copy is made from the git work tree (tracked
#   files and new files not ignored, with their current contents); with one,
#   from a `make dist` tarball.
# Steps: the source package (dpkg-source -b) and lintian -I --pedantic on
# it, dpkg-buildpackage -us -uc -b, lintian -I --pedantic on the binaries
# (no error or warning on either), the .debs unpacked with dpkg-deb -x into
# a throwaway root and their contents checked, the pkg-config consumer
# compiled and run against that root (shared, and static from libexecpack.a); the module built with
# dkms from execpack-dkms in a scratch tree (never the machine's) and the
# kmod suite run with it in a kernel under qemu; the Python package
# installed into a fresh venv with the README's commands, offline, and its
# tests run there and, with pytest, from python3-execpack.
# Exit: 0 all passed, 1 a check failed, 77 dpkg-buildpackage is unavailable.
# EP_KEEP=1 keeps the work directory.  EP_DEBIAN_KMOD=0 leaves out the qemu
# boot (it is a minute or more without KVM).
set -u

here=$(cd "$(dirname "$0")/.." && pwd)
# The distribution's tools first: a python3 from elsewhere on PATH (pyenv)
# has none of Debian's modules that pybuild and the tests use.
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH
export PATH
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

# --- the source package, and lintian on it ---------------------------------------
# dpkg-source -b on the clean copy (before the build leaves files in it):
# the .dsc and tarball that an upload would carry, linted like the binaries.
if (cd "$work" && dpkg-source -b libexecpack) >"$work/source.log" 2>&1; then
	pass "dpkg-source -b (the source package)"
else
	cat "$work/source.log"
	fail "dpkg-source -b (the source package)"
fi
dsc=$(ls "$work"/libexecpack_*.dsc 2>/dev/null | head -n 1)
if [ -z "$dsc" ]; then
	:
elif command -v lintian >/dev/null 2>&1; then
	lintian -I --pedantic --tag-display-limit 0 "$dsc" >"$work/lintian-source.log" 2>&1
	sed 's/^/  lintian (source): /' "$work/lintian-source.log" | head -n 60
	if grep -qE '^[EW]: ' "$work/lintian-source.log"; then
		fail "lintian -I --pedantic on the source package reports no error or warning"
	else
		pass "lintian -I --pedantic on the source package reports no error or warning ($(grep -c '^[IP]: ' "$work/lintian-source.log") info and pedantic tags)"
	fi
else
	echo "SKIP: lintian on the source package: lintian is not installed"
fi

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
	# the checks that failed, by name (CI shows only the end of this)
	grep -E '^(FAIL|ERROR): |:[0-9]+:[FE]:' "$work/build.log" | sort -u | head -n 20 |
		sed 's/^/  failed: /'
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
packages="libexecpack0 libexecpack-dev libexecpack-llvm0 libexecpack-llvm-dev execpack-tools execpack-dkms python3-execpack"
for p in $packages; do
	check "package $p built" test -n "$(deb "$p")"
done

# --- lintian ----------------------------------------------------------------
if command -v lintian >/dev/null 2>&1; then
	lintian -I --pedantic --tag-display-limit 0 "$changes" >"$work/lintian.log" 2>&1
	sed 's/^/  lintian: /' "$work/lintian.log" | head -n 60
	if grep -qE '^[EW]: ' "$work/lintian.log"; then
		fail "lintian -I --pedantic reports no error or warning"
	else
		pass "lintian -I --pedantic reports no error or warning ($(grep -c '^[IP]: ' "$work/lintian.log") info and pedantic tags)"
	fi
else
	echo "SKIP: lintian is not installed"
fi

# --- contents ---------------------------------------------------------------
root=$work/root
mkdir -p "$root"
for p in $packages; do
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
check "libexecpack-dev holds the static library" in_pkg libexecpack-dev "/usr/lib/$ma/libexecpack.a"
# the LLVM ORC memory manager (llvm/): its own SONAME, header and .pc
llvm_soname=$(LC_ALL=C readelf -d "$libdir/libexecpack-llvm.so.0.0.0" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
check "libexecpack-llvm0 holds libexecpack-llvm.so.0.0.0, SONAME libexecpack-llvm.so.0 (got '$llvm_soname')" \
	sh -c "grep -qx '/usr/lib/$ma/libexecpack-llvm.so.0.0.0' '$work/libexecpack-llvm0.list' &&
	       test '$llvm_soname' = libexecpack-llvm.so.0"
check "libexecpack-llvm-dev holds execpack/llvm.h, the .so link and execpack-llvm.pc" \
	sh -c "grep -qx /usr/include/execpack/llvm.h '$work/libexecpack-llvm-dev.list' &&
	       grep -qx '/usr/lib/$ma/libexecpack-llvm.so' '$work/libexecpack-llvm-dev.list' &&
	       grep -qx '/usr/lib/$ma/pkgconfig/execpack-llvm.pc' '$work/libexecpack-llvm-dev.list'"

# every EP_API function has a man page in -dev
missing=""
for fn in $(sed -n 's/^[[:space:]]*EP_API[^(]*[^A-Za-z0-9_]\(ep_[A-Za-z0-9_]*\)[[:space:]]*(.*/\1/p' "$src/include/execpack.h"); do
	test -e "$root/usr/share/man/man3/$fn.3.gz" || missing="$missing $fn"
done
check "libexecpack-dev holds a man page for every header function${missing:+ (missing:$missing)}" test -z "$missing"
check "execpack-tools holds /usr/bin/execpack-info" in_pkg execpack-tools /usr/bin/execpack-info
check "execpack-tools holds execpack-info(1)" in_pkg execpack-tools /usr/share/man/man1/execpack-info.1.gz
check "execpack-tools holds execpack-ebpf-run and its page" \
	sh -c "grep -qx /usr/bin/execpack-ebpf-run '$work/execpack-tools.list' &&
	       grep -qx /usr/share/man/man1/execpack-ebpf-run.1.gz '$work/execpack-tools.list'"
check "no program without the execpack prefix in /usr/bin" \
	sh -c "! grep '^/usr/bin/.' '$work/execpack-tools.list' | grep -v '^/usr/bin/execpack-'"
version=$(dpkg-parsechangelog -l "$src/debian/changelog" -SVersion | sed 's/-[^-]*$//')
ksrc=/usr/src/execpack-$version
for f in dkms.conf Kbuild execpack.c execpack_uapi.h; do
	check "execpack-dkms holds $ksrc/$f" in_pkg execpack-dkms "$ksrc/$f"
done
check "dkms.conf names the package's version" grep -qx "PACKAGE_VERSION=\"$version\"" "$root$ksrc/dkms.conf"
check "execpack-dkms holds the udev rule for /dev/execpack" \
	sh -c "grep -h 'KERNEL==\"execpack\"' '$root'/lib/udev/rules.d/*execpack* '$root'/usr/lib/udev/rules.d/*execpack* 2>/dev/null |
	       grep 'GROUP=\"execpack\"' | grep -q 'MODE=\"0660\"'"
check "execpack-dkms loads the module at boot" grep -qx execpack "$root/usr/lib/modules-load.d/execpack.conf"
dpkg-deb -e "$(deb execpack-dkms)" "$work/dkms-control" 2>/dev/null
check "execpack-dkms's postinst makes the system group and runs dkms" \
	sh -c "grep -q 'addgroup --system' '$work/dkms-control/postinst' &&
	       grep -q 'dkms' '$work/dkms-control/postinst'"
pydir=$root/usr/lib/python3/dist-packages
check "python3-execpack holds the package and its py.typed" \
	test -f "$pydir/execpack/__init__.py" -a -f "$pydir/execpack/py.typed"

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

# --- the static library: what pkg-config --static says is all it needs ------
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
PKG_CONFIG_PATH=$libdir/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$root
sflags=$(pkg-config --static --cflags --libs execpack 2>&1)
unset PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
# shellcheck disable=SC2086 # flags are words
if ${CC:-cc} -std=c11 -Wall -Wextra -Werror -static -o "$work/consumer-static" \
	"$here/tests/pkgconfig-consumer.c" $sflags 2>"$work/cc-static.err"; then
	pass "consumer links statically with pkg-config --static ($sflags)"
	check "the static consumer needs no libexecpack.so" \
		sh -c "! LC_ALL=C readelf -d '$work/consumer-static' 2>/dev/null | grep -q 'libexecpack'"
	"$work/consumer-static" "$version" >"$work/run-static.out" 2>&1
	rc=$?
	case $rc in
	0) pass "static consumer runs JIT code" ;;
	77) echo "SKIP: no executable memory here" ;;
	*) cat "$work/run-static.out"; fail "static consumer runs JIT code (exit $rc)" ;;
	esac
else
	cat "$work/cc-static.err"
	fail "consumer links statically with pkg-config --static ($sflags)"
fi

# --- the module from execpack-dkms, built by dkms ----------------------------
# A scratch dkms tree and source tree: nothing of the machine's dkms state
# or kernel changes.  sign_file names no signing tool, so dkms neither
# signs nor makes a key in /var/lib/dkms.
kver=""
for f in /boot/vmlinuz-*; do
	[ -e "$f" ] || continue
	v=${f#/boot/vmlinuz-}
	[ -e "/lib/modules/$v/build/Makefile" ] && echo "$v"
done | sort -V | tail -n 1 >"$work/kver"
kver=$(cat "$work/kver")
if ! command -v dkms >/dev/null 2>&1; then
	echo "SKIP: dkms build: dkms is not installed (build-aux/install-deps.sh all)"
elif [ -z "$kver" ]; then
	echo "SKIP: dkms build: no /boot/vmlinuz-* with headers (linux-image-amd64 linux-headers-amd64)"
else
	mkdir -p "$work/dkms/tree"
	if sign_file=/nonexistent dkms build -m execpack -v "$version" -k "$kver" \
		--dkmstree "$work/dkms/tree" --sourcetree "$root/usr/src" >"$work/dkms.log" 2>&1; then
		ko=$(find "$work/dkms/tree/execpack/$version/$kver" -name 'execpack.ko*' | head -n 1)
		check "dkms builds execpack.ko from execpack-dkms for $kver" test -n "$ko"
	else
		cat "$work/dkms.log"
		find "$work/dkms/tree" -name make.log -exec tail -n 30 {} \;
		fail "dkms builds execpack.ko from execpack-dkms for $kver"
		ko=""
	fi
	if [ -n "$ko" ] && grep -q 'warning:' "$work/dkms/tree/execpack/$version/$kver"/*/log/make.log; then
		grep 'warning:' "$work/dkms/tree/execpack/$version/$kver"/*/log/make.log
		fail "the dkms build has no compiler warnings"
	fi
	if [ -n "$ko" ] && [ "${EP_DEBIAN_KMOD:-1}" != 0 ]; then
		# The kmod suite in a kernel under qemu, with this module: the
		# static test program comes from the package build's tree.
		if make -C "$src" tests/kmod/check_kmod_static >"$work/kmod-build.log" 2>&1; then
			KVER=$kver EP_KMOD_MODULE=$ko sh "$src/tests/kmod/check-kmod.sh" "$src" "$src" \
				tests/kmod/check_kmod_static >"$work/kmod.out" 2>&1
			rc=$?
			grep -E '^(PASS|FAIL|SKIP)|check-kmod: ' "$work/kmod.out" | sed 's/^/  /'
			case $rc in
			0) pass "kmod suite in qemu with the dkms-built module" ;;
			77) echo "SKIP: kmod suite with the dkms-built module: $(grep SKIP "$work/kmod.out" | head -n 1)" ;;
			*) tail -n 40 "$src/tests/kmod/check-kmod.log"; fail "kmod suite in qemu with the dkms-built module" ;;
			esac
		else
			tail -n 20 "$work/kmod-build.log"
			fail "build tests/kmod/check_kmod_static for the dkms module's run"
		fi
	fi
fi

# --- the Python package ----------------------------------------------------------
# The README's commands word for word, from a scratch directory whose
# ./python is the clean copy's: a fresh venv (no --system-site-packages:
# what `python3 -m venv` gives, pip and setuptools without wheel on Debian
# 12) and pip offline.  The package's tests then run in that venv as
# scripts (it has no pytest) against the packaged library, and with
# pytest on python3-execpack's files.
python=${PYTHON:-python3}
if ! "$python" -c 'import venv, pytest' >/dev/null 2>&1; then
	echo "SKIP: python package: python3-venv or python3-pytest is not installed"
else
	venv_cmd=$(grep -E '^python3 -m venv venv$' "$src/README")
	pip_cmd=$(grep -E '^venv/bin/pip install .* \./python$' "$src/README")
	pyhome=$work/pyhome
	mkdir -p "$pyhome" && ln -s "$src/python" "$pyhome/python"
	venv=$pyhome/venv
	if [ -z "$venv_cmd" ] || [ -z "$pip_cmd" ]; then
		fail "README shows the venv and pip install commands"
	elif (cd "$pyhome" && sh -c "$venv_cmd" && sh -c "$pip_cmd") >"$work/venv.log" 2>&1; then
		pass "the README's '$venv_cmd' and '$pip_cmd' in a fresh venv"
		where=$(cd "$work" && "$venv/bin/python" -c 'import execpack; print(execpack.__file__)')
		check "the venv imports its own execpack ($where)" \
			sh -c "case '$where' in '$venv'/*) true ;; *) false ;; esac"
		pyver=$(cd "$work" && "$venv/bin/python" -c 'import execpack; print(execpack.__version__)')
		check "execpack.__version__ is the package's version ($pyver)" test "$pyver" = "$version"
		# from $work: the source tree is not on the path, the venv's copy is tested
		venv_ok=1
		for t in test_execpack test_api test_shrink_near test_patch; do
			(cd "$work" && EXECPACK_LIBRARY=$libdir/libexecpack.so.0 \
				EXECPACK_HEADER=$src/include/execpack.h PYTHONDONTWRITEBYTECODE=1 \
				"$venv/bin/python" "$src/python/tests/$t.py") >"$work/venv-$t.log" 2>&1
			trc=$?
			if [ "$trc" -ne 0 ] && [ "$trc" -ne 77 ]; then
				tail -n 40 "$work/venv-$t.log"
				venv_ok=0
			fi
		done
		check "the package's tests in the venv" test "$venv_ok" = 1
	else
		cat "$work/venv.log"
		fail "the README's '$venv_cmd' and '$pip_cmd' in a fresh venv"
	fi
	if (cd "$work" && PYTHONPATH=$pydir EXECPACK_LIBRARY=$libdir/libexecpack.so.0 \
		PYTHONDONTWRITEBYTECODE=1 "$python" -m pytest -q -p no:cacheprovider "$src/python/tests") \
		>"$work/pytest-deb.log" 2>&1; then
		pass "pytest on python3-execpack: $(tail -n 1 "$work/pytest-deb.log")"
	else
		tail -n 40 "$work/pytest-deb.log"
		fail "pytest on python3-execpack"
	fi
fi
finish
