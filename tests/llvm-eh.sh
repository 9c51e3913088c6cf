#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# llvm-eh.sh - a C++ exception thrown through JIT frames: tests/llvm-eh.cc
# compiled by clang++ 19 to bitcode (-fexceptions, -O0 and -O2) and run by
# execpack-lli on ExecpackMemoryManager; the module's .eh_frame is
# registered from the pool (EHFrameRegistrationPlugin), the unwinder walks
# three JIT frames, runs a destructor on the way and main catches it.
set -u
builddir=${top_builddir:-.}
srcdir=${top_srcdir:-.}
lli=$builddir/examples/llvm-orc/execpack-lli
[ -x "$lli" ] || { echo "ERROR: $lli not built"; exit 99; }
clangxx=${EP_LLVM_BINDIR:-/usr/lib/llvm-19/bin}/clang++
[ -x "$clangxx" ] || { echo "SKIP: no $clangxx (Debian's clang-19)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/llvm-eh.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failures=0
for opt in -O0 -O2; do
	"$clangxx" $opt -fexceptions -emit-llvm -c "$srcdir/tests/llvm-eh.cc" -o "$tmp/eh.bc" ||
		{ echo "ERROR: clang++ $opt failed"; exit 99; }
	out=$("$lli" "$tmp/eh.bc")
	rc=$?
	if [ "$rc" -eq 0 ] && [ "$out" = "caught 30, cleanups 1" ]; then
		echo "PASS: $opt: $out"
	else
		echo "FAIL: $opt: exit $rc, output '$out'"
		failures=$((failures + 1))
	fi
done
[ "$failures" -eq 0 ]
