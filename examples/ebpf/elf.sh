#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# elf.sh - C programs compiled with clang to eBPF, loaded from ELF, must give
# the same answers as the same C compiled natively (ebpf-native), under
# both the JIT and the interpreter.  Skips (77) without clang.
set -u
case ${EP_ARCH:-x86_64} in
x86_64) ;;
*) echo "SKIP: the eBPF example's JIT emits x86-64 code, not $EP_ARCH"; exit 77 ;;
esac
srcdir=${srcdir:-.}
top_builddir=${top_builddir:-.}
CLANG=${EBPF_CLANG:-}
if [ -z "$CLANG" ] || ! command -v "$CLANG" >/dev/null 2>&1; then
	echo "SKIP: clang not found (configure looks for it; needed to build eBPF objects)"
	exit 77
fi
run="$top_builddir/examples/ebpf/execpack-ebpf-run"
native="$top_builddir/examples/ebpf/ebpf-native"
progs="$srcdir/examples/ebpf/progs"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ebpf-elf.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# A clang built without the BPF back end cannot take part.
printf 'int f(void) { return 0; }\n' >"$tmp/probe.c"
if ! "$CLANG" -target bpf -O2 -c "$tmp/probe.c" -o "$tmp/probe.o" >"$tmp/probe.err" 2>&1; then
	echo "SKIP: $CLANG cannot compile for the bpf target: $(head -1 "$tmp/probe.err")"
	exit 77
fi
for p in filter checksum multi; do
	# Debian's clang 14 emits eBPF up to -mcpu=v3.
	if ! "$CLANG" -target bpf -mcpu=v3 -O2 -c "$progs/$p.c" -o "$tmp/$p.o"; then
		echo "FAIL: clang could not compile $p.c"
		exit 1
	fi
done

# Deterministic byte strings in hex: bytes N SEED
bytes() {
	awk -v n="$1" -v s="$2" 'BEGIN { x = s; for (i = 0; i < n; i++) {
		x = (x * 1103515245 + 12345) % 2147483648; printf "%02x ", int(x / 65536) % 256 } }'
}
eth="00 11 22 33 44 55 66 77 88 99 aa bb"
tcp80="$eth 08 00 45 00 00 28 00 01 00 00 40 06 00 00 0a 00 00 01 0a 00 00 02 c0 00 00 50 00 00"
tcp443_opts="$eth 08 00 46 00 00 2c 00 01 40 00 40 06 00 00 0a 00 00 01 0a 00 00 02 01 01 01 01 c0 00 01 bb"
tcp22="$eth 08 00 45 00 00 28 00 01 00 00 40 06 00 00 0a 00 00 01 0a 00 00 02 c0 00 00 16 00 00"
udp53="$eth 08 00 45 00 00 1c 00 01 00 00 40 11 00 00 0a 00 00 01 0a 00 00 02 d0 00 00 35 00 08"
frag="$eth 08 00 45 00 00 28 00 01 20 00 40 06 00 00 0a 00 00 01 0a 00 00 02 c0 00 00 50 00 00"
ipv6="$eth 86 dd 60 00 00 00"
arp="$eth 08 06 00 01 08 00 06 04 00 01"
short="$eth 08"
text=$(printf 'the quick  brown\tfox\njumps over the lazy dog ' | od -An -tx1 -v | tr -s ' \n' '  ')

fail=0 n=0
check() { # object function memhex [native function, when $2 is a section]
	want=$("$native" "${4:-$2}" "$3") || { echo "FAIL: ebpf-native ${4:-$2}"; fail=1; return; }
	for mode in --jit --interp; do
		got=$("$run" "$3" --elf --section "$2" --file "$tmp/$1.o" $mode 2>&1)
		n=$((n + 1))
		if [ "$got" != "$want" ]; then
			echo "FAIL: $1.o $2 $mode: got '$got', native '$want'"
			fail=1
		fi
	done
}
for pkt in "$tcp80" "$tcp443_opts" "$tcp22" "$udp53" "$frag" "$ipv6" "$arp" "$short" ""; do
	check filter filter "$pkt"
done
for len in 0 1 2 3 64 65 1000 1501 4096; do
	data=$(bytes "$len" "$len")
	check checksum checksum "$data"
	check checksum crc32 "$data"
done
check checksum count_words "$text"
check checksum count_words "$(bytes 300 7)"
# Several functions in one object, each by name: functions were delimited
# only at call targets, so those nobody calls merged into the one before
# ("recursive call"), and scan() ends in a goto (the verifier wanted exit).
for data in "$(bytes 100 9)" "05 07 00 09"; do
	for f in byte_sum scan sum_twice classify; do
		check multi "$f" "$data"
	done
	check multi .text "$data" byte_sum
	check multi xdp "$data" classify
done

# The ELF as hex on stdin (the bpf_conformance --elf form), .text default:
# checksum() is first in .text.
want=$("$native" checksum "$tcp80")
got=$(od -An -tx1 -v "$tmp/checksum.o" | "$run" "$tcp80" --elf)
n=$((n + 1))
[ "$got" = "$want" ] || { echo "FAIL: hex ELF on stdin: got '$got', want '$want'"; fail=1; }

# The ELF magic is enough: ebpf-run(1) promises it without --elf.
for f in "--file $tmp/multi.o" "$tmp/multi.o"; do
	want=$("$native" sum_twice "01 02 03")
	got=$("$run" "01 02 03" --section sum_twice $f 2>&1)
	n=$((n + 1))
	[ "$got" = "$want" ] || { echo "FAIL: ELF without --elf ($f): got '$got', want '$want'"; fail=1; }
done

# Clear errors for what is not there.
n=$((n + 1))
if out=$("$run" --elf --section nosuch --file "$tmp/filter.o" 2>&1); then
	echo "FAIL: unknown section accepted"; fail=1
else
	case $out in *"nosuch"*) ;; *) echo "FAIL: unclear error: $out"; fail=1 ;; esac
fi
echo "elf.sh: $n comparisons"
exit $fail
