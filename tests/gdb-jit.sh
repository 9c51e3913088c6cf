#!/bin/sh
# gdb-jit.sh - gdb names JIT frames registered through the GDB JIT
# interface: `bt` from a C function called by JIT code shows gdb_jit_prog.
# SKIP without gdb or when gdb cannot run programs here (ptrace refused).
set -u
builddir=${top_builddir:-.}
prog=$builddir/tests/gdb-jit
[ -x "$prog" ] || { echo "ERROR: $prog not built"; exit 99; }
if ! command -v gdb >/dev/null 2>&1; then
	echo "SKIP: gdb is not installed"
	exit 77
fi
unset LD_PRELOAD
out=$(gdb -batch -nx -ex 'set debuginfod enabled off' -ex 'set startup-with-shell off' \
	-ex 'break gdb_stop_here' -ex run -ex bt -ex 'info symbol $pc' -ex kill "$prog" 2>&1)
echo "$out"
if ! echo "$out" | grep -q 'Breakpoint 1, .*gdb_stop_here'; then
	echo "SKIP: gdb could not run the program to its breakpoint here"
	exit 77
fi
echo "$out" | grep -Eq '^#1 +0x[0-9a-f]+ in gdb_jit_prog \(\)' ||
	{ echo "FAIL: frame #1 is not named gdb_jit_prog"; exit 1; }
echo "$out" | grep -Eq '^#2 .* main \(' ||
	{ echo "FAIL: gdb did not unwind through the JIT frame to main"; exit 1; }
echo "PASS"
