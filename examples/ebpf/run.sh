#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# run.sh - ebpf-run's command line: the bpf_conformance plugin protocol.
set -u
case ${EP_ARCH:-x86_64} in
x86_64) ;;
*) echo "SKIP: the eBPF example's JIT emits x86-64 code, not $EP_ARCH"; exit 77 ;;
esac
top_builddir=${top_builddir:-.}
run="$top_builddir/examples/ebpf/execpack-ebpf-run"
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
trap 'rm -f "$tmp" "$tmp.xdp"' EXIT
printf '\267\000\000\000\052\000\000\000\225\000\000\000\000\000\000\000' >"$tmp"
expect "" 2a 0 --raw --file "$tmp"
printf 'b7 00 00 00 2b 00 00 00 95 00 00 00 00 00 00 00' >"$tmp"
expect "" 2b 0 "" "$tmp"
n=$((n + 1))
"$run" --help | grep -q "bpf_conformance" || { echo "FAIL: --help"; fail=1; }

# An ELF object is recognised by its magic, without --elf (execpack-ebpf-run(1)):
# it was parsed as bytecode.  A minimal one, written byte by byte so that
# no compiler is needed: .text = `r0 = 0x2c; exit`, and .shstrtab.
z() { i=0; while [ "$i" -lt "$1" ]; do printf '00 '; i=$((i + 1)); done; }
le8() { printf '%02x 00 00 00 00 00 00 00 ' "$1"; }
bin() { for b in $*; do printf "\\$(printf %03o "0x$b")"; done; }
elf="7f 45 4c 46 02 01 01 00 $(z 8) 01 00 f7 00 01 00 00 00 $(z 16) $(le8 104) $(z 4)
40 00 00 00 00 00 40 00 03 00 02 00
b7 00 00 00 2c 00 00 00 95 00 00 00 00 00 00 00
00 2e 74 65 78 74 00 2e 73 68 73 74 72 74 61 62 00 $(z 7)
$(z 64)
01 00 00 00 01 00 00 00 $(le8 6) $(z 8) $(le8 64) $(le8 16) $(z 24)
07 00 00 00 03 00 00 00 $(z 16) $(le8 80) $(le8 17) $(z 24)"
bin $elf >"$tmp"
[ "$(wc -c <"$tmp")" -eq 296 ] || { echo "FAIL: the test ELF has $(wc -c <"$tmp") bytes, not 296"; fail=1; }
for m in --jit --interp; do
	expect "" 2c 0 --file "$tmp" $m
	expect "" 2c 0 "" "$tmp" $m
	expect "" 2c 0 --elf --file "$tmp" $m
	expect "" 2c 0 --section .text --file "$tmp" $m
	expect "$elf" 2c 0 $m
done
expect "" "no code section or function named 'nosuch'" 1 --section nosuch --file "$tmp"
expect "$p" "needs an ELF object" 1 --section .text
# Code in a section of its own and an empty .text (clang's output for a
# function in SEC("xdp")): the error lists the code sections and names the
# option that picks one; --section xdp runs it.  Sections: null, .text
# (empty), xdp (`r0 = 0x2d; exit`), .shstrtab.
elf="7f 45 4c 46 02 01 01 00 $(z 8) 01 00 f7 00 01 00 00 00 $(z 16) $(le8 104) $(z 4)
40 00 00 00 00 00 40 00 04 00 03 00
b7 00 00 00 2d 00 00 00 95 00 00 00 00 00 00 00
00 2e 74 65 78 74 00 78 64 70 00 2e 73 68 73 74 72 74 61 62 00 $(z 3)
$(z 64)
01 00 00 00 01 00 00 00 $(le8 6) $(z 8) $(le8 64) $(z 8) $(z 8) $(le8 8) $(z 8)
07 00 00 00 01 00 00 00 $(le8 6) $(z 8) $(le8 64) $(le8 16) $(z 8) $(le8 8) $(z 8)
0b 00 00 00 03 00 00 00 $(z 16) $(le8 80) $(le8 21) $(z 8) $(le8 1) $(z 8)"
xdp=$tmp.xdp
bin $elf >"$xdp"
[ "$(wc -c <"$xdp")" -eq 360 ] || { echo "FAIL: the xdp ELF has $(wc -c <"$xdp") bytes, not 360"; fail=1; }
expect "" "load failed: section .text is empty or not a multiple of 8 bytes; code sections: xdp (--section NAME picks one)" \
	1 --file "$xdp"
expect "" "no code section or function named 'nosuch'; code sections: xdp$" 1 --section nosuch --file "$xdp"
expect "" 2d 0 --section xdp --file "$xdp"
# a file that cannot be read says why
expect "" "cannot open /nonexistent/prog.o: No such file or directory" 1 --file /nonexistent/prog.o
dir=$(dirname "$tmp")
expect "" "cannot read $dir: it is a directory" 1 --file "$dir"

# --dump lists the bytecode instead of running it (execpack-ebpf-run(1)); a program
# that does not load is listed as given, then the error follows.
p="b7 00 00 00 07 00 00 00 07 00 00 00 03 00 00 00 95 00 00 00 00 00 00 00"
expect "$p" "<bpf_prog_0>: 3 instructions
    0: b7 00 00 00 07 00 00 00  r0 = 7
    1: 07 00 00 00 03 00 00 00  r0 += 3
    2: 95 00 00 00 00 00 00 00  exit" 0 --dump
expect "b7 00 00 00 07 00 00 00" "0: b7 00 00 00 07 00 00 00  r0 = 7" 1 --dump
expect "b7 00 00 00 07 00 00 00" "does not end with exit" 1 --dump
expect "" "<.text>: 2 instructions
    0: b7 00 00 00 2c 00 00 00  r0 = 44
    1: 95 00 00 00 00 00 00 00  exit" 0 --dump --file "$tmp"
# --dump-jited: the x86-64 code through Capstone, where the build has it
# (EBPF_HAVE_CAPSTONE from configure); else a clear error and status 1.
expect "$p" "not with --interp" 1 --dump-jited --interp
if [ "${EBPF_HAVE_CAPSTONE:-no}" = yes ]; then
	n=$((n + 1))
	got=$(printf '%s\n' "$p" | "$run" --dump-jited 2>&1)
	rc=$?
	if [ "$rc" -ne 0 ] || ! printf '%s\n' "$got" | head -n 1 | grep -Eq '^<bpf_prog_0>: [0-9]+ bytes at 0x[0-9a-f]+$' ||
	   ! printf '%s\n' "$got" | grep -Eq '^ +[0-9a-f]+:  (c3 +)ret$' ||
	   ! printf '%s\n' "$got" | grep -Eq '^ +[0-9a-f]+:  b8 07 00 00 00 +mov eax, 7$'; then
		echo "FAIL: ebpf-run --dump-jited: status $rc, output:"
		printf '%s\n' "$got"
		fail=1
	fi
	n=$((n + 1))
	got=$(printf '%s\n' "$p" | "$run" --dump --dump-jited 2>&1)
	if ! printf '%s\n' "$got" | grep -q '  r0 += 3$' || ! printf '%s\n' "$got" | grep -q ' ret$'; then
		echo "FAIL: ebpf-run --dump --dump-jited does not give both listings: $got"
		fail=1
	fi
else
	expect "$p" "needs the Capstone disassembler, and this execpack-ebpf-run was built without it" 1 \
		--dump-jited
fi

# The other tools: usage on --help (status 0) or a bad argument (status 2),
# promptly.  ebpf-bench read both as 0 iterations (2^64 rounds), ebpf-demo
# as seed 0.
tool() { # want-status want-text program args...
	st=$1 want=$2
	shift 2
	if command -v timeout >/dev/null 2>&1; then
		got=$(timeout 60 "$@" 2>&1)
	else
		got=$("$@" 2>&1)
	fi
	rc=$?
	n=$((n + 1))
	if [ "$rc" -ne "$st" ] || ! printf '%s' "$got" | grep -q "$want"; then
		echo "FAIL: $*: status $rc (want $st), output '$(printf '%s' "$got" | head -3)'"
		fail=1
	fi
}
bench="$top_builddir/examples/ebpf/ebpf-bench"
demo="$top_builddir/examples/ebpf/ebpf-demo"
tool 0 "usage: ebpf-bench" "$bench" --help
tool 0 "usage: ebpf-bench" "$bench" -h
tool 2 "bad argument '0'" "$bench" 0
tool 2 "bad argument 'many'" "$bench" many
tool 2 "bad argument '-5'" "$bench" -5
tool 2 "bad argument '10x'" "$bench" 10x
tool 2 "bad argument '99999999999999999999'" "$bench" 99999999999999999999
tool 2 "bad argument 'extra'" "$bench" 10 extra
tool 0 "usage: ebpf-demo" "$demo" --help
tool 2 "bad argument '0'" "$demo" 0
tool 2 "bad argument '--seed'" "$demo" --seed
tool 2 "bad argument 'x1'" "$demo" x1
echo "run.sh: $n checks"
exit $fail
