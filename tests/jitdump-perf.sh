#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# jitdump-perf.sh - perf annotate on JIT code through the jitdump file
# (libexecpack/diag/jitdump.c): tests/jitdump-prog runs a JIT loop named
# ep_jd_hot_loop under `perf record -k 1 -e cpu-clock` (the software clock:
# no hardware counters needed), `perf inject --jit` turns jit-<pid>.dump
# into ELF files, and `perf annotate` must show the loop's instructions
# with samples in them.  SKIPs, saying why, without perf or where
# perf_event_open is refused (perf_event_paranoid, containers, seccomp).
set -u
builddir=${top_builddir:-.}
prog=$builddir/tests/jitdump-prog
[ -x "$prog" ] || { echo "ERROR: $prog not built"; exit 99; }
unset LD_PRELOAD

if ! command -v perf >/dev/null 2>&1; then
	echo "SKIP: perf is not installed (Debian: linux-perf)"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/jitdump-perf.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
# perf keeps its build-id cache in $HOME/.debug: a scratch one here
HOME=$tmp
EXECPACK_JITDUMP_DIR=$tmp
export HOME EXECPACK_JITDUMP_DIR

if ! perf record -q -k 1 -e cpu-clock -o "$tmp/perf.data" -- "$prog" 300 \
	>"$tmp/record.out" 2>&1; then
	if grep -qi 'perf_event_paranoid\|permission\|not permitted\|not supported' \
		"$tmp/record.out"; then
		echo "SKIP: perf record cannot sample here:"
		sed 's/^/  /' "$tmp/record.out" | head -n 5
		exit 77
	fi
	echo "FAIL: perf record failed:"
	cat "$tmp/record.out"
	exit 1
fi
cat "$tmp/record.out"
addr=$(sed -n 's/^jitdump-prog: .* calls at \(0x[0-9a-f]*\).*/\1/p' "$tmp/record.out")
[ -n "$addr" ] || { echo "FAIL: jitdump-prog did not run"; exit 1; }
dump=$(ls "$tmp"/jit-*.dump 2>/dev/null | head -n 1)
[ -n "$dump" ] || { echo "FAIL: no jit-<pid>.dump in the dump directory"; exit 1; }

if ! perf inject --jit -i "$tmp/perf.data" -o "$tmp/perf.jit.data" >"$tmp/inject.out" 2>&1; then
	echo "FAIL: perf inject --jit failed:"
	cat "$tmp/inject.out"
	exit 1
fi
ls "$tmp"/jitted-*.so >/dev/null 2>&1 || {
	echo "FAIL: perf inject --jit wrote no jitted-*.so from $dump"
	cat "$tmp/inject.out"
	exit 1
}

perf annotate -i "$tmp/perf.jit.data" --stdio -s ep_jd_hot_loop >"$tmp/annotate.out" 2>&1
failures=0
# each instruction of the loop, as objdump prints it (AT&T syntax)
for insn in 'xor +%eax,%eax' 'mov +\$0x100000,%ecx' 'add +%ecx,%eax' 'imul +\$0x3,%eax,%eax' \
	'dec +%ecx' 'jne ' 'ret'; do
	grep -Eq "^ +[0-9.]+ +: +[0-9a-f]+: +$insn" "$tmp/annotate.out" || {
		echo "FAIL: perf annotate does not show '$insn'"
		failures=$((failures + 1))
	}
done
# and samples in the loop: some line of it has a nonzero percentage
grep -Eq '^ +([1-9][0-9]*\.[0-9]+|0\.[0-9]*[1-9][0-9]*) +: +[0-9a-f]+: +(add|imul|dec|jne)' \
	"$tmp/annotate.out" || {
	echo "FAIL: no samples in the loop's instructions"
	failures=$((failures + 1))
}
if [ "$failures" -ne 0 ]; then
	echo "--- perf annotate:"
	head -n 30 "$tmp/annotate.out"
	exit 1
fi
head -n 16 "$tmp/annotate.out"
echo "PASS: perf annotate shows ep_jd_hot_loop's instructions"
exit 0
