#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# crash-handler.sh - examples/crash-handler runs into the INT3 fill after
# its JIT program; its handler must name the spot with ep_symbolize() and
# print an ep_backtrace() with the JIT frame named.
set -u
if [ -n "${EP_SANITIZER:-}" ]; then
	echo "SKIP: the ${EP_SANITIZER} runtime owns the fatal-signal handlers this example installs"
	exit 77
fi
builddir=${top_builddir:-.}
prog=$builddir/examples/crash-handler
[ -x "$prog" ] || { echo "ERROR: $prog not built"; exit 99; }
out=$("$prog" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 77 ] && exit 77
# 128 + SIGTRAP (5)
[ $rc -eq 133 ] || { echo "FAIL: exit status $rc, expected 133 (SIGTRAP handled)"; exit 1; }
echo "$out" | grep -qx 'SIGTRAP in JIT code bpf_prog_x+0x1c' ||
	{ echo "FAIL: no 'SIGTRAP in JIT code bpf_prog_x+0x1c' line"; exit 1; }
# The interrupted pc: one past INT3 on x86-64; BRK and ebreak are reported
# at themselves.  The frame-pointer walk crosses signal frames on x86-64
# only, so elsewhere the JIT frame is named only with libunwind.
case $(uname -m) in
x86_64)
	echo "$out" | grep -Eq '^#[0-9]+ 0x[0-9a-f]+ in bpf_prog_x\+0x1d \[jit\]$' ||
		{ echo "FAIL: the backtrace does not name the JIT frame bpf_prog_x"; exit 1; } ;;
*)
	echo "$out" | grep -Eq '^#[0-9]+ 0x[0-9a-f]+ in bpf_prog_x\+0x1c \[jit\]$' ||
		echo "note: the backtrace does not name the JIT frame (no libunwind on $(uname -m))" ;;
esac
echo "PASS"
