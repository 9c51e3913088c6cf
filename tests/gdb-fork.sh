#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# gdb-fork.sh - a forking program under gdb with detach-on-fork off
# (tests/gdb-fork.c): gdb keeps the new child stopped before it runs
# anything; the parent's fork() must return and the parent go on changing
# its code (it exits normally).  Then gdb lets the child run, and it must
# still run the code it had at the fork.  SKIPs without gdb, or where gdb
# cannot run programs (ptrace refused).
set -u
builddir=${top_builddir:-.}
prog=$builddir/tests/gdb-fork
[ -x "$prog" ] || { echo "ERROR: $prog not built"; exit 99; }
unset LD_PRELOAD
if ! command -v gdb >/dev/null 2>&1; then
	echo "SKIP: gdb is not installed"
	exit 77
fi
# (timeout: a fork() that waits for the held child hangs gdb's run; the
# program's own alarm ends it first)
# (LeakSanitizer cannot run under ptrace: off, in an ASan build)
out=$(ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
	timeout 60 gdb -batch -nx -ex 'set debuginfod enabled off' \
	-ex 'set startup-with-shell off' -ex 'set detach-on-fork off' \
	-ex 'set follow-fork-mode parent' -ex 'set schedule-multiple off' \
	-ex run -ex 'info inferiors' -ex 'inferior 2' -ex continue "$prog" 2>&1)
echo "$out"
if echo "$out" | grep -q '^SKIP'; then
	exit 77
fi
if ! echo "$out" | grep -q 'Inferior 1 .*exited\|PARENT OK'; then
	if echo "$out" | grep -qi 'ptrace\|not permitted\|Could not trace\|During startup program exited'; then
		echo "SKIP: gdb cannot run programs here"
		exit 77
	fi
fi
failures=0
echo "$out" | grep -q '^PARENT OK' ||
	{ echo "FAIL: the parent did not go on after fork() while gdb held the child"; failures=1; }
echo "$out" | grep -q 'Inferior 1 (process [0-9]*) exited normally' ||
	{ echo "FAIL: the parent did not exit normally"; failures=1; }
echo "$out" | grep -q '^CHILD OK' ||
	{ echo "FAIL: the child, let run, did not find the code of the fork"; failures=1; }
echo "$out" | grep -q 'Inferior 2 (process [0-9]*) exited normally' ||
	{ echo "FAIL: the child did not exit normally"; failures=1; }
exit $failures
