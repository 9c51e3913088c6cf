#!/bin/sh
# run.sh - ebpf-run's command line: the bpf_conformance plugin protocol.
set -u
top_builddir=${top_builddir:-.}
run="$top_builddir/examples/ebpf/ebpf-run"
fail=0 n=0
expect() { # program-text want-output want-status args...
	prog=$1 want=$2 st=$3
	shift 3
	got=$(printf '%s\n' "$prog" | "$run" "$@" 2>&1)
	rc=$?
	n=$((n + 1))
	if [ "$rc" -ne "$st" ] || { [ "$st" -eq 0 ] && [ "$got" != "$want" ]; } ||
	   { [ "$st" -ne 0 ] && ! printf '%s' "$got" | grep -q "$want"; }; then
		echo "FAIL: ebpf-run $*: status $rc, output '$got' (want $st, '$want')"
		fail=1
	fi
}
# r0 = 7 + 3
p="b7 00 00 00 07 00 00 00 07 00 00 00 03 00 00 00 95 00 00 00 00 00 00 00"
for m in --jit --interp; do
	expect "$p" a 0 $m
done
expect "$p" a 0
# r0 = *(u32 *)(r1 + 0) + r2, memory given as the first argument
p="61 10 00 00 00 00 00 00 0f 20 00 00 00 00 00 00 95 00 00 00 00 00 00 00"
expect "$p" 44332215 0 "11 22 33 44" --jit
expect "$p" 44332215 0 "11223344" --interp
# helper 5 returns its argument; r0 = ~0 printed as 64-bit hex
p="b7 01 00 00 ff ff ff ff 85 00 00 00 05 00 00 00 95 00 00 00 00 00 00 00"
expect "$p" ffffffffffffffff 0
# no memory: r1 is NULL, r2 is 0
p="bf 10 00 00 00 00 00 00 4f 20 00 00 00 00 00 00 95 00 00 00 00 00 00 00"
expect "$p" 0 0
# errors: one line naming the reason, non-zero status
expect "b7 00 00 00 00 00 00 00" "does not end with exit" 1
expect "05 00 05 00 00 00 00 00 95 00 00 00 00 00 00 00" "insn 0: jump target" 1
expect "30 00 00 00 00 00 00 00 95 00 00 00 00 00 00 00" "legacy packet" 1 --interp
expect "zz" "not hex" 1
expect "b7 00 00" "multiple of 8" 1
expect "" "unknown option" 1 --bogus
# program from a file, raw and hex
tmp=$(mktemp "${TMPDIR:-/tmp}/ebpf-run.XXXXXX") || exit 99
trap 'rm -f "$tmp"' EXIT
printf '\267\000\000\000\052\000\000\000\225\000\000\000\000\000\000\000' >"$tmp"
expect "" 2a 0 --raw --file "$tmp"
printf 'b7 00 00 00 2b 00 00 00 95 00 00 00 00 00 00 00' >"$tmp"
expect "" 2b 0 "" "$tmp"
n=$((n + 1))
"$run" --help | grep -q "bpf_conformance" || { echo "FAIL: --help"; fail=1; }
echo "run.sh: $n checks"
exit $fail
