#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# gdb-jit.sh - JIT code and gdb (tests/gdb-jit.c):
#   foreign: a program that defines the GDB JIT interface symbols itself
#            (another JIT's) keeps its list as it made it: the library does
#            not write to it (runs without gdb);
#   static:  the same program linked with libexecpack.a links (the
#            library's definitions are weak; two strong ones were a
#            "multiple definition" error) and keeps its list too, and the
#            program without definitions of its own, linked the same way,
#            has its JIT frames named by gdb (bt, below);
#   docs:    libexecpack(7) and ep_set_name(3) say to use hbreak;
#   bt:      gdb names JIT frames registered through the GDB JIT
#            interface: `bt` from a C function called by JIT code shows
#            gdb_jit_prog;
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
static=$builddir/tests/gdb-jit-static
static_foreign=$builddir/tests/gdb-jit-static-foreign
for p in "$prog" "$foreign" "$static" "$static_foreign"; do
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

# --- static ----------------------------------------------------------------
# Built with libtool's -static: libexecpack.a, unless configure had
# --disable-static (then they are linked with the shared library).
progs=$prog
if LC_ALL=C readelf -d "$static_foreign" 2>/dev/null | grep -q 'NEEDED.*libexecpack'; then
	echo "SKIP (static): no libexecpack.a in this build (configure --disable-static)"
else
	ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0" "$static_foreign"
	rc=$?
	[ $rc -eq 0 ] || [ $rc -eq 77 ] ||
		fail "linked with libexecpack.a, the library changed the program's own GDB JIT list (exit $rc)"
	progs="$prog $static"
fi

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
for p in $progs; do
	out=$(gdbx -ex 'break gdb_stop_here' -ex run -ex bt -ex 'info symbol $pc' -ex kill "$p")
	echo "$out"
	if ! echo "$out" | grep -q 'Breakpoint 1, .*gdb_stop_here'; then
		echo "SKIP: gdb could not run the program to its breakpoint here"
		[ "$failures" -eq 0 ] && exit 77
		exit 1
	fi
	echo "$out" | grep -Eq '^#1 +0x[0-9a-f]+ in gdb_jit_prog \(\)' ||
		fail "$p: frame #1 is not named gdb_jit_prog"
	echo "$out" | grep -Eq '^#2 .* main \(' ||
		fail "$p: gdb did not unwind through the JIT frame to main"
done

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
