#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The clients stage of build-aux/run.sh: a real JIT on libexecpack.
#
# PCRE2 from Debian's source package (`apt-get source pcre2`: deb-src
# entries, build-aux/install-deps.sh src) is built three ways, JIT on:
#   stock     sljit's own allocator; 8-, 16- and 32-bit libraries
#   execpack  the JIT's code in libexecpack through examples/sljit/
#             (SLJIT_HAVE_CONFIG_PRE), as shipped: kept staging; 8/16/32
#   nokeep    the same with EP_SLJIT_POOL_FLAGS=0 (what PCRE2 needs: it
#             never patches published code); 8-bit
# Each runs pcre2_jit_test and every RunTest test, one test number and one
# width at a time so that a failure hides no other test.  A result is one
# line RunTest prints ("OK", "OK with JIT", "OK with DFA" of a test and a
# width) or one summary of pcre2_jit_test; every result stock passes must
# pass on the libexecpack builds.  Then examples/sljit/sljit-patch drives
# sljit's patching calls through the adapter, and examples/sljit/pcre2-pss
# prints what 10,000 JIT-compiled patterns cost (Pss) on each build.
#
#   build-aux/clients.sh BUILD_DIR RESULTS_DIR
# BUILD_DIR/main is the library's build (made by run.sh), BUILD_DIR/clients
# gets PCRE2's source and builds, RESULTS_DIR/clients/ the results.
# Exit: 0 all passed, 1 something failed, 77 not run (the reason printed).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$1
results=$2
w=$build/clients
r=$results/clients
jobs=$(nproc 2>/dev/null || echo 2)
t0=$(date +%s)
lib=$build/main/libexecpack/.libs
mkdir -p "$w" "$r"

say() { printf 'clients: %s  [%ss]\n' "$*" $(($(date +%s) - t0)); }
skip() {
	echo "SKIP: clients: $*"
	echo "0 passed, 0 failed, 1 skipped" >"$r/stage.results"
	exit 77
}

[ -f "$lib/libexecpack.so" ] || skip "no libexecpack.so in $lib (build BUILD_DIR/main first)"
for t in apt-get dpkg-source cc make; do
	command -v $t >/dev/null 2>&1 || skip "$t not found (build-aux/install-deps.sh src)"
done

# --- the source: the suite's newest, else the release's ---------------------
pc=$(ls -d "$w"/src/pcre2-*/ 2>/dev/null | head -1)
if [ -z "$pc" ]; then
	say "apt-get source pcre2"
	mkdir -p "$w/src"
	codename=$(. /etc/os-release 2>/dev/null && echo "${VERSION_CODENAME:-}")
	if ! (cd "$w/src" && apt-get source -qq pcre2) >"$w/fetch.out" 2>&1 &&
		! { [ -n "$codename" ] && (cd "$w/src" && apt-get source -qq "pcre2/$codename") >>"$w/fetch.out" 2>&1; }; then
		grep -E '^E:' "$w/fetch.out" | tail -3
		rm -rf "$w/src"
		skip "apt-get source pcre2 failed (deb-src entries: build-aux/install-deps.sh src)"
	fi
	pc=$(ls -d "$w"/src/pcre2-*/ 2>/dev/null | head -1)
	[ -n "$pc" ] || skip "apt-get source pcre2 unpacked nothing"
fi
pc=${pc%/}
echo "clients: $(basename "$pc") from $(ls "$w"/src/*.dsc 2>/dev/null | xargs -n1 basename | tr '\n' ' ')"

# The nokeep build is right only if PCRE2 never rewrites published code.
if grep -nE 'sljit_set_(jump_addr|const)[[:space:]]*\(' "$pc"/src/pcre2_*.c; then
	echo "clients: PCRE2 patches published code: the nokeep build would be wrong"
	echo "0 passed, 1 failed" >"$r/nokeep-premise.results"
fi

# --- builds ------------------------------------------------------------------
adapter="-DSLJIT_HAVE_CONFIG_PRE=1 -I$top/examples/sljit -I$top/include"
linklib="-L$lib -Wl,-rpath,$lib"
status=0

# build NAME CONFIGURE-ARGS...: configure (again only when the arguments
# changed) and make; a failure is a failed result of its own.
build() {
	name=$1
	shift
	# -O0: a tenth of -O2's compile time for pcre2_jit_compile.c (the
	# stage's cost on a busy machine); the code the JIT generates is the
	# same whatever the compiler made of the JIT itself.
	set -- CFLAGS="-O0 -g0" "$@"
	d=$w/$name
	if [ ! -f "$d/Makefile" ] || [ "$(cat "$d/args" 2>/dev/null)" != "$*" ]; then
		rm -rf "$d"
		mkdir -p "$d"
		echo "$*" >"$d/args"
		(cd "$d" && "$pc/configure" -q --enable-jit --disable-shared "$@") >"$d/configure.out" 2>&1 ||
			{ tail -n 20 "$d/configure.out"; return 1; }
	fi
	make -C "$d" -j"$jobs" >"$d/make.out" 2>&1 || { grep -E 'error|Error' "$d/make.out" | head -20; return 1; }
	"$d/pcre2test" -C jit >/dev/null
	[ $? -eq 1 ] || { echo "clients: $name: pcre2test says JIT is not available"; return 1; }
}

for b in stock execpack nokeep; do
	say "build $b"
	case $b in
	stock) build stock --enable-pcre2-16 --enable-pcre2-32 ;;
	execpack) build execpack --enable-pcre2-16 --enable-pcre2-32 \
		CPPFLAGS="$adapter" LDFLAGS="$linklib" LIBS="-lexecpack -lpthread" ;;
	nokeep) build nokeep CPPFLAGS="$adapter -DEP_SLJIT_POOL_FLAGS=0" \
		LDFLAGS="$linklib" LIBS="-lexecpack -lpthread" ;;
	esac || { echo "0 passed, 1 failed" >"$r/build-$b.results"; status=1; }
done
[ -x "$w/stock/pcre2test" ] || { echo "clients: the stock build failed"; exit 1; }

# --- tests -------------------------------------------------------------------
numbers=$(cd "$w/stock" && srcdir=$pc sh "$pc/RunTest" list | sed -n 's/^Test \([0-9][0-9]*\):.*/\1/p')

# results NAME: each passing result as one line, in BUILD/NAME/passed.
results() {
	d=$w/$1
	: >"$d/passed"
	(cd "$d" && timeout 300 ./pcre2_jit_test >jit_test.out 2>&1)
	echo "pcre2_jit_test exit $?" >>"$d/jit_test.out"
	sed -n 's/^\(All .*successfully passed\)\.$/pcre2_jit_test: \1/p' "$d/jit_test.out" >>"$d/passed"
	grep -E '^Successful test ratio' "$d/jit_test.out"
	echo "clients: $1: pcre2_jit_test ran $(grep -E '^\.+$' "$d/jit_test.out" | tr -d '\n' | wc -c) tests"
	for width in 8 16 32; do
		[ "$("$d/pcre2test" -C pcre2-$width 2>/dev/null)" = 1 ] || continue
		for n in $numbers; do
			(cd "$d" && srcdir=$pc timeout 300 sh "$pc/RunTest" -$width $n) >"$d/runtest.out" 2>&1
			rc=$?
			awk -v w=$width -v n=$n '/^  OK/ { sub(/^  /, ""); print "RunTest -" w " " n ": " $0 }' \
				"$d/runtest.out" >>"$d/passed"
			if [ $rc -ne 0 ]; then
				echo "clients: $1: RunTest -$width $n: exit $rc"
				grep -E '^\*\*' "$d/runtest.out" | head -3
			fi
		done
	done
	sort -u -o "$d/passed" "$d/passed"
}

for b in stock execpack nokeep; do
	[ -x "$w/$b/pcre2test" ] || continue
	say "tests on $b"
	results $b
	echo "clients: $b: $(wc -l <"$w/$b/passed") results passed"
done

# compare NAME: what stock passes with the widths NAME has must pass on it.
compare() {
	d=$w/$1
	[ -f "$d/passed" ] || return 0
	ws=$(for x in 8 16 32; do [ "$("$d/pcre2test" -C pcre2-$x 2>/dev/null)" = 1 ] && printf '%s|' $x; done)
	ws=${ws%|}
	grep -E "^(pcre2_jit_test: All JIT|pcre2_jit_test: All invalid UTF($ws) |RunTest -($ws) )" \
		"$w/stock/passed" >"$d/expected"
	missing=$(comm -23 "$d/expected" "$d/passed")
	np=$(comm -12 "$d/expected" "$d/passed" | wc -l)
	nf=$(comm -23 "$d/expected" "$d/passed" | wc -l)
	echo "$np passed, $nf failed" >"$r/$1.results"
	echo "clients: $1: $np of the $(wc -l <"$d/expected") results stock passes pass (JIT: $(grep -c 'JIT\|pcre2_jit_test' "$d/expected"))"
	if [ "$nf" -ne 0 ]; then
		echo "clients: $1: failed where stock passes:"
		echo "$missing" | head -40
		status=1
	fi
	extra=$(comm -13 "$d/expected" "$d/passed" | wc -l)
	[ "$extra" -eq 0 ] || echo "clients: $1: $extra results pass that fail on stock"
}
compare execpack
compare nokeep

# --- the adapter's own test and the memory figure ----------------------------
say "examples/sljit/sljit-patch"
sljit_cflags="-O2 -I$pc/src/sljit $adapter"
if cc $sljit_cflags -o "$w/sljit-patch" "$top/examples/sljit/sljit-patch.c" $linklib -lexecpack -lpthread \
	>"$w/sljit-patch.build" 2>&1; then
	if timeout 120 "$w/sljit-patch"; then
		echo "1 passed, 0 failed" >"$r/sljit-patch.results"
	else
		echo "0 passed, 1 failed" >"$r/sljit-patch.results"
		status=1
	fi
else
	tail -n 20 "$w/sljit-patch.build"
	echo "0 passed, 1 failed" >"$r/sljit-patch.results"
	status=1
fi

say "examples/sljit/pcre2-pss: 10,000 patterns"
for b in stock execpack nokeep; do
	[ -f "$w/$b/.libs/libpcre2-8.a" ] || continue
	with=""
	[ $b = stock ] || with="$linklib -lexecpack -lpthread"
	# shellcheck disable=SC2086
	if cc -O2 -I"$w/$b/src" -o "$w/$b/pcre2-pss" "$top/examples/sljit/pcre2-pss.c" \
		"$w/$b/.libs/libpcre2-8.a" $with >"$w/$b/pss.build" 2>&1 &&
		(cd "$w/$b" && timeout 300 ./pcre2-pss 10000 &&
			{ [ $b != stock ] || timeout 300 ./pcre2-pss 10000 --no-jit; }) >"$w/$b/pss.out" 2>&1; then
		sed "s/^/clients: $b: /" "$w/$b/pss.out"
		echo "1 passed, 0 failed" >"$r/pss-$b.results"
	else
		cat "$w/$b/pss.build" "$w/$b/pss.out" | tail -n 10
		echo "0 passed, 1 failed" >"$r/pss-$b.results"
		status=1
	fi
done

say "done"
exit $status
