#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# gdb-jit.sh - JIT code and gdb (tests/gdb-jit.c):
#   foreign: a program that defines the GDB JIT interface symbols itself
#            (another JIT's): the library links its entries into that one
#            list beside the program's own and announces them through the
#            program's function, and gdb names the JIT frame from it;
#   static:  the same program linked with libexecpack.a links (the
#            library's definitions are weak; two strong ones were a
#            "multiple definition" error) and gets the entries too, and the
#            program without definitions of its own, linked the same way,
#            has its JIT frames named by gdb (bt, below);
#   docs:    libexecpack(7) and ep_set_name(3) say to use hbreak;
#   bt:      gdb names JIT frames registered through the GDB JIT
#            interface: `bt` from a C function called by JIT code shows
#            gdb_jit_prog;
#   disassemble: gdb's symbol for the JIT function covers its code (up to
#            the size given to ep_shrink), not the trap fill after its ret;
#   hbreak:  a hardware breakpoint on the JIT function by name is hit
#            (software ones cannot be written into the read-only view);
#   debug:   with EXECPACK_DEBUG=1 software breakpoints work: `break` on
#            the JIT function (pending until it is registered) is hit,
#            `finish` from a C function it called returns into it and from
#            it to main; then the program writes new code into the page
#            gdb wrote its breakpoint into, runs it, and the breakpoint is
#            hit again (the program checks the results, the private view
#            and that nothing is writable and executable).
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
[ $rc -eq 0 ] || fail "the library did not register into the program's GDB JIT list (exit $rc)"

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
		fail "linked with libexecpack.a, the library did not register into the program's GDB JIT list (exit $rc)"
	progs="$prog $static"
fi

# --- docs ------------------------------------------------------------------
for page in doc/libexecpack.7 doc/man3/ep_set_name.3; do
	grep -q '^\.B hbreak' "$srcdir/$page" || fail "$page does not say to use hbreak"
	grep -q 'EXECPACK_DEBUG' "$srcdir/$page" || fail "$page does not mention EXECPACK_DEBUG"
done
grep -q 'EXECPACK_DEBUG' "$srcdir/README" || fail "README does not mention EXECPACK_DEBUG"

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
	out=$(gdbx -ex 'break gdb_stop_here' -ex run -ex bt -ex 'info symbol $pc' \
		-ex 'disassemble gdb_jit_prog' -ex kill "$p")
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
	# the symbol covers the program's bytes, not the trap fill after it
	dis=$(echo "$out" | sed -n '/^Dump of assembler code for function gdb_jit_prog/,/^End of assembler dump/p')
	if [ -z "$dis" ]; then
		fail "$p: disassemble gdb_jit_prog printed no dump"
	elif echo "$dis" | grep -q 'int3'; then
		fail "$p: gdb's gdb_jit_prog runs on into the trap fill past its ret"
	elif ! echo "$dis" | grep -B1 '^End of assembler dump' | grep -q 'ret'; then
		fail "$p: gdb's gdb_jit_prog does not end with its ret"
	fi
done


# --- foreign, under gdb: the JIT frame named from the program's list ------
out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0" \
	gdbx -ex 'break gdb_stop_here' -ex run -ex bt -ex kill "$foreign")
echo "$out"
if echo "$out" | grep -q 'Breakpoint 1, .*gdb_stop_here'; then
	echo "$out" | grep -Eq '^#1 +0x[0-9a-f]+ in foreign_jit_prog \(\)' ||
		fail "foreign: frame #1 is not named foreign_jit_prog (the library's entry in the program's list)"
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

# --- debug: break and finish with EXECPACK_DEBUG=1 ---------------------------
# (run to its end under gdb: LeakSanitizer cannot work under ptrace)
out=$(EXECPACK_DEBUG=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	gdbx -ex 'set breakpoint pending on' -ex 'break gdb_jit_prog' \
	-ex 'break gdb_stop_here' -ex run -ex continue -ex finish -ex finish -ex continue \
	-ex continue -ex continue --args "$prog" debug)
echo "$out"
hits=$(echo "$out" | grep -Ec '^Breakpoint 1, (0x[0-9a-f]+ in )?gdb_jit_prog \(\)')
[ "$hits" -eq 2 ] ||
	fail "EXECPACK_DEBUG=1: break gdb_jit_prog was hit $hits times, not twice"
# finish from gdb_stop_here stops in the JIT code, the next one in main
echo "$out" | sed -n '/^Breakpoint 2, /,$p' | grep -Eq '^0x[0-9a-f]+ in gdb_jit_prog \(\)$' ||
	fail "EXECPACK_DEBUG=1: finish from gdb_stop_here did not stop in gdb_jit_prog"
echo "$out" | sed -n '/ in gdb_jit_prog ()$/,$p' | grep -Eq '^(0x[0-9a-f]+ in )?main \(' ||
	fail "EXECPACK_DEBUG=1: finish from gdb_jit_prog did not return to main"
echo "$out" | grep -q 'gdb_jit_neighbour returned 7' ||
	fail "EXECPACK_DEBUG=1: code written into the page with gdb's breakpoint did not run"
echo "$out" | grep -q 'exited normally' ||
	fail "EXECPACK_DEBUG=1: the program did not end well under gdb"

[ "$failures" -eq 0 ] || exit 1
echo "PASS"
