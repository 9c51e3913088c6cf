#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# llvm-perfmap.sh - perf's map names a function inside a JIT module:
# tests/llvm-perfmap.c compiled by clang 19 to bitcode and run by
# execpack-lli with EXECPACK_PERFMAP=1; the program finds the entry of its
# middle function in /tmp/perf-<pid>.map by its own address
# (ExecpackMemoryManager names a module's functions with ep_set_symbols()).
set -u
builddir=${top_builddir:-.}
srcdir=${top_srcdir:-.}
lli=$builddir/examples/llvm-orc/execpack-lli
[ -x "$lli" ] || { echo "ERROR: $lli not built"; exit 99; }
clang=${EP_LLVM_BINDIR:-/usr/lib/llvm-19/bin}/clang
[ -x "$clang" ] || { echo "SKIP: no $clang (Debian's clang-19)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llvm-perfmap.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
"$clang" -O1 -emit-llvm -c "$srcdir/tests/llvm-perfmap.c" -o "$tmp/p.bc" ||
	{ echo "ERROR: clang failed"; exit 99; }
EXECPACK_PERFMAP=1 "$lli" "$tmp/p.bc" > "$tmp/out" &
pid=$!
wait "$pid"
rc=$?
cat "$tmp/out"
rm -f "/tmp/perf-$pid.map"
if [ "$rc" -eq 0 ]; then
	echo "PASS: perf's map names llvm_perfmap_inner at its address"
	exit 0
fi
echo "FAIL: exit $rc"
exit 1
