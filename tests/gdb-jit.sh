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
#            and that nothing is writable and executable);
#   many:    tests/gdb-jit-many names 1,000 and then 10,000 functions under
#            gdb (EXECPACK_DEBUG=1): the CPU time of 10,000 (gdb's and the
#            program's; wall time is printed too) must stay near linear,
#            under 20 times that of 1,000 (one file per name made it
#            quadratic: minutes); among 10,000, bt names the JIT frames
#            of five functions, info symbol and disassemble name two, a
#            break set before the function exists and one set after are
#            hit; a freed function's name is gone, its address has no
#            symbol, then the new one's name once taken again; a renamed
#            one has its new name only;
#   attach:  gdb -p on the program with 10,000 names, waiting in a C
#            function called from JIT code: under 10 times the CPU time
#            of the run with 1,000 (one file per name: minutes), bt names
#            the JIT frame, and info symbol the renamed, freed and reused
#            functions as above.
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
many=$builddir/tests/gdb-jit-many
for p in "$prog" "$foreign" "$static" "$static_foreign" "$many"; do
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

# --- many ------------------------------------------------------------------
# (first alone: it checks what it can itself, or says why it cannot run)
"$many" 100 >/dev/null
rc=$?
if [ $rc -eq 77 ]; then
	echo "SKIP (many, attach): $("$many" 100)"
	[ "$failures" -eq 0 ] || exit 1
	echo "PASS"
	exit 0
fi
[ $rc -eq 0 ] || fail "many: tests/gdb-jit-many 100 failed without gdb (exit $rc)"
now() { date +%s.%N; }
# gdb_many N [timeout]: the program with N names under gdb, all checks
many_out=$builddir/tests/gdb-jit-many.out
gdb_many() {
	n=$1
	EXECPACK_DEBUG=1 ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	timeout "${2:-600}" gdb -batch -nx -ex 'set debuginfod enabled off' \
		-ex 'set startup-with-shell off' -ex 'set breakpoint pending on' \
		-ex 'break jit_many_7' -ex 'break gdb_many_ready' -ex 'break gdb_many_stop' \
		-ex 'break gdb_many_freed' -ex 'break gdb_many_reused' -ex run \
		-ex "break jit_many_$((n - 2))" -ex "disassemble jit_many_$((n / 2))" \
		-ex "info symbol (char *)jit_many_$((n / 2)) + 5" \
		-ex 'info symbol (char *)jit_many_7 + 5' \
		-ex continue -ex bt -ex continue -ex continue -ex bt -ex continue -ex bt \
		-ex continue -ex continue -ex bt -ex continue -ex bt \
		-ex continue -ex 'echo at-freed\n' -ex 'info symbol g_freed' \
		-ex "print jit_many_$((n / 2 + 1))" -ex 'info symbol g_renamed' \
		-ex 'print jit_many_1' \
		-ex continue -ex 'echo at-reused\n' -ex 'info symbol g_freed' -ex continue \
		--args "$many" "$n" >"$many_out" 2>&1
}
# CPU time (gdb's and the program's, through `times` in this shell): less
# sensitive than wall time to a machine busy with other work
# (cpu_mark in this shell, not in a subshell: one has no children)
cpu_mark() { times >"$many_out.t"; }
cpu_read() {
	awk 'NR == 2 { split($1, u, "m"); split($2, s, "m");
		printf "%.3f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' "$many_out.t"
}
span() { echo "$1 $2" | awk '{ printf "%.2f", $2 - $1 }'; }
cpu_mark
t0=$(now) c0=$(cpu_read)
gdb_many 1000
cpu_mark
t1=$(now) c1=$(cpu_read)
t_1k=$(span "$t0" "$t1") c_1k=$(span "$c0" "$c1")
# a bound for the 10,000 run, so that the old quadratic cost fails in
# minutes, not hours
limit=$(echo "$t_1k" | awk '{ l = 40 * $1; printf "%d", l < 60 ? 60 : l }')
cpu_mark
t0=$(now) c0=$(cpu_read)
gdb_many 10000 "$limit"
rc=$?
cpu_mark
t1=$(now) c1=$(cpu_read)
t_10k=$(span "$t0" "$t1") c_10k=$(span "$c0" "$c1")
out=$(cat "$many_out")
echo "$out" | grep -v '^\[' | grep -v '^ *0x[0-9a-f]* <+' | head -120
echo "many: under gdb, 1,000 names: $t_1k s ($c_1k s CPU); 10,000 names: $t_10k s ($c_10k s CPU)"
if [ $rc -eq 124 ]; then
	fail "many: 10,000 names under gdb took over $limit s (1,000: $t_1k s)"
elif ! echo "$c_1k $c_10k" | awk '{ exit !($2 < 20 * $1) }'; then
	fail "many: 10,000 names under gdb took $c_10k s of CPU, over 20 times the $c_1k s of 1,000"
fi
n=10000
if ! echo "$out" | grep -q 'Breakpoint 2, .*gdb_many_ready'; then
	fail "many: gdb did not stop in gdb_many_ready"
else
	for f in 0 7 $((n / 2)) $((n - 2)) $((n - 1)); do
		echo "$out" | grep -Eq "^#1 +0x[0-9a-f]+ in jit_many_$f \(\)" ||
			fail "many: bt does not name jit_many_$f among $n"
	done
	echo "$out" | grep -Eq "^Breakpoint 1, (0x[0-9a-f]+ in )?jit_many_7 \(\)" ||
		fail "many: break jit_many_7, set before it existed, was not hit"
	echo "$out" | grep -Eq "^Breakpoint 6, (0x[0-9a-f]+ in )?jit_many_$((n - 2)) \(\)" ||
		fail "many: break jit_many_$((n - 2)), set once it existed, was not hit"
	echo "$out" | grep -q "^jit_many_7 + 5 in section" ||
		fail "many: info symbol does not name jit_many_7"
	echo "$out" | grep -q "^jit_many_$((n / 2)) + 5 in section" ||
		fail "many: info symbol does not name jit_many_$((n / 2))"
	dis=$(echo "$out" | sed -n "/^Dump of assembler code for function jit_many_$((n / 2)):/,/^End of assembler dump/p")
	if [ -z "$dis" ]; then
		fail "many: disassemble jit_many_$((n / 2)) printed no dump"
	elif echo "$dis" | grep -q 'int3' ||
		! echo "$dis" | grep -B1 '^End of assembler dump' | grep -q 'ret'; then
		fail "many: disassemble jit_many_$((n / 2)) does not end at its ret"
	fi
	freed=$(echo "$out" | sed -n '/^at-freed$/,/^at-reused$/p')
	echo "$freed" | grep -q '^No symbol matches g_freed' ||
		fail "many: gdb still names the freed function's address"
	echo "$freed" | grep -q "No symbol \"jit_many_$((n / 2 + 1))\" in current context" ||
		fail "many: gdb still knows the freed jit_many_$((n / 2 + 1))"
	echo "$freed" | grep -q '^jit_many_renamed in section' ||
		fail "many: info symbol does not give the renamed function's new name"
	echo "$freed" | grep -q 'No symbol "jit_many_1" in current context' ||
		fail "many: gdb still knows jit_many_1 by its old name"
	echo "$out" | sed -n '/^at-reused$/,$p' | grep -q '^jit_many_reused in section' ||
		fail "many: the address taken again is not named jit_many_reused"
	echo "$out" | grep -q 'exited normally' ||
		fail "many: the program did not end well under gdb"
fi

# --- attach ----------------------------------------------------------------
"$many" 10000 wait >"$many_out" 2>&1 &
pid=$!
i=0
while ! grep -q '^ready' "$many_out" && [ $i -lt 600 ] && kill -0 $pid 2>/dev/null; do
	sleep 0.1
	i=$((i + 1))
done
if ! grep -q '^ready' "$many_out"; then
	kill $pid 2>/dev/null
	fail "attach: the program did not get ready: $(cat "$many_out")"
else
	cpu_mark
	t0=$(now) c0=$(cpu_read)
	out=$(timeout "$limit" gdb -batch -nx -ex 'set debuginfod enabled off' -p $pid -ex bt \
		-ex 'info symbol g_freed' -ex 'info symbol g_renamed' -ex 'print jit_many_5001' \
		-ex 'info symbol (char *)jit_many_9999 + 5' -ex 'set var g_release = 1' \
		-ex detach 2>&1)
	rc=$?
	cpu_mark
	t1=$(now) c1=$(cpu_read)
	wait $pid
	echo "$out" | grep -v '^\['
	c_at=$(span "$c0" "$c1")
	echo "attach: gdb -p on 10,000 names: $(span "$t0" "$t1") s ($c_at s CPU)"
	# (one file per name: 63 s of CPU, 25 times the whole run with 1,000)
	if [ $rc -eq 124 ]; then
		fail "attach: gdb -p on 10,000 names took over $limit s"
	elif ! echo "$c_1k $c_at" | awk '{ exit !($2 < 10 * $1) }'; then
		fail "attach: gdb -p on 10,000 names took $c_at s of CPU, over 10 times the $c_1k s of the run with 1,000"
	fi
	if echo "$out" | grep -Eq 'ptrace: Operation not permitted|Could not attach'; then
		echo "SKIP (attach): gdb may not attach to a running process here"
	else
		echo "$out" | grep -Eq '^#[0-9]+ +0x[0-9a-f]+ in jit_many_9999 \(\)' ||
			fail "attach: bt does not name jit_many_9999"
		echo "$out" | grep -q '^jit_many_reused in section' ||
			fail "attach: the address taken again is not named jit_many_reused"
		echo "$out" | grep -q '^jit_many_renamed in section' ||
			fail "attach: info symbol does not give the renamed function's new name"
		echo "$out" | grep -q 'No symbol "jit_many_5001" in current context' ||
			fail "attach: gdb knows the freed jit_many_5001"
		echo "$out" | grep -q '^jit_many_9999 + 5 in section' ||
			fail "attach: info symbol does not name jit_many_9999"
		grep -q 'released: yes' "$many_out" ||
			fail "attach: gdb did not set g_release in the program"
	fi
fi
rm -f "$many_out" "$many_out.t"

[ "$failures" -eq 0 ] || exit 1
echo "PASS"
