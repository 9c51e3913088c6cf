#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The llvm stage of build-aux/run.sh: programs nobody here wrote, run under
# ORC's LLJIT with their code and data in libexecpack (ExecpackMemoryManager,
# examples/llvm-orc/execpack-lli).  Debian's csmith writes random C programs
# that print a checksum of their globals; each, with fixed seeds, is built
# by clang-19 to bitcode at -O0 and at -O2 and natively (linked from the
# -O0 bitcode), and the JIT's checksum must equal the native program's.  Programs whose native run takes
# more than a second (or that do not finish cleanly) are skipped and
# counted.  Then the C++ exception through JIT frames (tests/llvm-eh.sh),
# perf's map naming a function inside a module (tests/llvm-perfmap.sh) and
# ORC on several threads (tests/llvm-threads).
#   build-aux/llvm.sh BUILD_DIR RESULTS_DIR
# BUILD_DIR: a tree configured with LLVM 19 and built.  RESULTS_DIR/llvm/
# gets the log of every failure and stage.results.  EP_LLVM_PROGRAMS:
# seeds to try (default 600: at least EP_LLVM_MIN, 500, must be compared at
# each level, skips included).  EP_LLVM_MM=llvm runs the programs on LLVM's
# own manager instead (the stage's own check).  About 6 minutes on 2 busy
# cores.
# Exit: 0 all passed, 1 something failed, 77 not run (the reason printed).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)

# One program (run by xargs): prints "SEED LEVEL pass|fail" or "SEED skip WHY".
if [ "${1:-}" = --one ]; then
	seed=$2
	w=$EP_LLVM_WORK/$seed
	mkdir -p "$w" || exit 1
	# small programs: a few functions, shallow blocks (a native run of most
	# is milliseconds; the compiles are what the stage spends its time on)
	# (csmith writes platform.info where it runs)
	if ! (cd "$w" && csmith --seed "$seed" --max-funcs 4 --max-block-depth 3 --max-expr-complexity 6 \
		--max-array-dim 2 -o p.c >/dev/null 2>&1); then
		echo "$seed skip csmith"
		exit 0
	fi
	cc="$EP_CLANG -w -I$EP_CSMITH_INC"
	# the native program from the -O0 bitcode: one front-end run less
	# (the checksum is the C program's, whatever the pipeline)
	for level in O0 O2; do
		if ! $cc -"$level" -emit-llvm -c "$w/p.c" -o "$w/p.$level.bc" 2>"$w/err"; then
			echo "$seed skip clang"
			rm -rf "$w"
			exit 0
		fi
	done
	if ! $EP_CLANG -O0 "$w/p.O0.bc" -o "$w/native" 2>"$w/err"; then
		echo "$seed skip native-link"
		rm -rf "$w"
		exit 0
	fi
	if ! timeout 1 "$w/native" >"$w/want" 2>/dev/null || ! grep -q '^checksum = ' "$w/want"; then
		echo "$seed skip native-run"
		rm -rf "$w"
		exit 0
	fi
	for level in O0 O2; do
		timeout 30 "$EP_LLI" --mm="$EP_LLVM_MM" "$w/p.$level.bc" >"$w/got.$level" 2>"$w/err.$level"
		rc=$?
		if [ "$rc" -eq 0 ] && cmp -s "$w/want" "$w/got.$level"; then
			echo "$seed $level pass"
		else
			echo "$seed $level fail (exit $rc)"
			cp "$w/p.c" "$EP_LLVM_OUT/fail-$seed.c"
			{ echo "want: $(cat "$w/want")"; echo "got:"; cat "$w/got.$level" "$w/err.$level"; } \
				>"$EP_LLVM_OUT/fail-$seed.$level.log"
		fi
	done
	rm -rf "$w"
	exit 0
fi

build=$(cd "$1" && pwd)
out=$2/llvm
mkdir -p "$out"
lli=$build/examples/llvm-orc/execpack-lli
bindir=$(sed -n 's/^LLVM_BINDIR = //p' "$build/Makefile" 2>/dev/null)
bindir=${bindir:-/usr/lib/llvm-19/bin}
if [ ! -x "$lli" ]; then
	echo "SKIP: llvm: $lli is not built (configure found no LLVM 19: build-aux/install-deps.sh)"
	exit 77
fi
for tool in "$bindir/clang" "$bindir/clang++"; do
	[ -x "$tool" ] || { echo "SKIP: llvm: no $tool (Debian's clang-19)"; exit 77; }
done
command -v csmith >/dev/null 2>&1 || { echo "SKIP: llvm: no csmith (Debian's csmith)"; exit 77; }
inc=/usr/include/csmith
[ -f "$inc/csmith.h" ] || { echo "SKIP: llvm: no $inc/csmith.h (Debian's libcsmith-dev)"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/llvm-stage.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
EP_LLVM_WORK=$work EP_LLVM_OUT=$out EP_LLI=$lli EP_CLANG=$bindir/clang EP_CSMITH_INC=$inc
EP_LLVM_MM=${EP_LLVM_MM:-execpack}
export EP_LLVM_WORK EP_LLVM_OUT EP_LLI EP_CLANG EP_CSMITH_INC EP_LLVM_MM
programs=${EP_LLVM_PROGRAMS:-600}
min=${EP_LLVM_MIN:-500}
jobs=$(nproc 2>/dev/null || echo 2)

started=$(date +%s)
seq 1 "$programs" | xargs -P "$jobs" -n 1 sh "$0" --one >"$out/programs.log"
passed=0
failed=0
skipped=$(grep -c ' skip ' "$out/programs.log")
for level in O0 O2; do
	p=$(grep -c " $level pass" "$out/programs.log")
	f=$(grep -c " $level fail" "$out/programs.log")
	echo "csmith at -$level: $p checksums equal the native build's, $f differ" \
		"($skipped of $programs programs skipped: $(grep ' skip ' "$out/programs.log" |
			awk '{ n[$3]++ } END { for (k in n) printf "%s%s %d", s, k, n[k]; s = ", " }'))"
	passed=$((passed + p))
	failed=$((failed + f))
	if [ "$p" -lt "$min" ]; then
		echo "FAIL: csmith at -$level: only $p programs compared, fewer than $min"
		failed=$((failed + 1))
	fi
done
echo "csmith: $(($(date +%s) - started)) s"
grep ' fail' "$out/programs.log" | head -20

# The C++ exception, perf's map and the threads: the tests of make check,
# run here too so that the stage stands on its own.
for t in tests/llvm-eh.sh tests/llvm-perfmap.sh tests/llvm-threads; do
	name=$(basename "$t")
	case $t in
	*.sh) cmd="sh $top/$t" ;;
	*) cmd="$build/$t" ;;
	esac
	(cd "$build" && top_srcdir=$top top_builddir=$build EP_LLVM_BINDIR=$bindir $cmd) \
		>"$out/$name.log" 2>&1
	rc=$?
	if [ "$rc" -eq 0 ]; then
		passed=$((passed + 1))
		echo "PASS: $name"
	elif [ "$rc" -eq 77 ]; then
		skipped=$((skipped + 1))
		echo "SKIP: $name: $(grep -m1 SKIP "$out/$name.log")"
	else
		failed=$((failed + 1))
		echo "FAIL: $name (exit $rc)"
		tail -5 "$out/$name.log"
	fi
done

echo "$passed passed, $failed failed, $skipped skipped" >"$out/stage.results"
echo "llvm: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
