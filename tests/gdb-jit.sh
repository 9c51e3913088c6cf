#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# gdb-jit.sh - JIT code and gdb (tests/gdb-jit.c):
#   foreign: a program that defines the GDB JIT interface symbols itself
#            (another JIT's) keeps its list as it made it: the library does
#            not write to it (runs without gdb);
#   docs:    libexecpack(7) and ep_set_name(3) say to use hbreak;
#   bt:      gdb names JIT frames registered through the GDB JIT
#            interface: `bt` from a C function called by JIT code shows
#            gdb_jit_prog;
#   disassemble: gdb's symbol for the JIT function covers its code (up to
#            the size given to ep_shrink), not the trap fill after its ret;
#   hbreak:  a hardware breakpoint on the JIT function by name is hit
#            (software ones cannot be written into the read-only view).
# The gdb parts SKIP without gdb or when gdb cannot run programs here
# (ptrace refused); hbreak SKIPs where hardware breakpoints do not work at
# all (some virtual machines), which a breakpoint on a C function shows.
set -u
srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
prog=$builddir/tests/gdb-jit
foreign=$builddir/tests/gdb-jit-foreign
for p in "$prog" "$foreign"; do
	[ -x "$p" ] || { echo "ERROR: $p not built"; exit 99; }
done
unset LD_PRELOAD

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# --- foreign ---------------------------------------------------------------
# Two definitions of the descriptor are the point here: not an ASan ODR error.
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0" "$foreign"
rc=$?
[ $rc -eq 77 ] && exit 77
[ $rc -eq 0 ] || fail "the library changed the program's own GDB JIT list (exit $rc)"

# --- docs ------------------------------------------------------------------
for page in doc/libexecpack.7 doc/man3/ep_set_name.3; do
	grep -q '^\.B hbreak' "$srcdir/$page" || fail "$page does not say to use hbreak"
done

if ! command -v gdb >/dev/null 2>&1; then
	echo "SKIP: gdb is not installed"
	[ "$failures" -eq 0 ] && exit 77
	exit 1
fi
gdbx() {
	gdb -batch -nx -ex 'set debuginfod enabled off' -ex 'set startup-with-shell off' "$@" 2>&1
}

# --- bt --------------------------------------------------------------------
out=$(gdbx -ex 'break gdb_stop_here' -ex run -ex bt -ex 'info symbol $pc' \
	-ex 'disassemble gdb_jit_prog' -ex kill "$prog")
echo "$out"
if ! echo "$out" | grep -q 'Breakpoint 1, .*gdb_stop_here'; then
	echo "SKIP: gdb could not run the program to its breakpoint here"
	[ "$failures" -eq 0 ] && exit 77
	exit 1
fi
echo "$out" | grep -Eq '^#1 +0x[0-9a-f]+ in gdb_jit_prog \(\)' ||
	fail "frame #1 is not named gdb_jit_prog"
echo "$out" | grep -Eq '^#2 .* main \(' ||
	fail "gdb did not unwind through the JIT frame to main"

# --- disassemble -------------------------------------------------------------
dis=$(echo "$out" | sed -n '/^Dump of assembler code for function gdb_jit_prog/,/^End of assembler dump/p')
if [ -z "$dis" ]; then
	fail "disassemble gdb_jit_prog printed no dump"
elif echo "$dis" | grep -q 'int3'; then
	fail "gdb's gdb_jit_prog runs on into the trap fill past its ret"
elif ! echo "$dis" | grep -B1 '^End of assembler dump' | grep -q 'ret'; then
	fail "gdb's gdb_jit_prog does not end with its ret"
fi

# --- hbreak ----------------------------------------------------------------
out=$(gdbx -ex 'hbreak gdb_jit_ready' -ex run -ex 'hbreak gdb_jit_prog' -ex continue \
	-ex kill "$prog")
echo "$out"
if ! echo "$out" | grep -q 'Breakpoint 1, .*gdb_jit_ready'; then
	echo "SKIP (hbreak): a hardware breakpoint on a C function was not hit either:" \
		"no hardware breakpoints here"
elif echo "$out" | grep -Eq 'Breakpoint 2, (0x[0-9a-f]+ in )?gdb_jit_prog \(\)'; then
	echo "PASS: hbreak gdb_jit_prog stops in the JIT code"
else
	fail "hbreak gdb_jit_prog was not hit"
fi

[ "$failures" -eq 0 ] || exit 1
echo "PASS"
