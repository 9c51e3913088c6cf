#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# valgrind-diag.sh - JIT code under Valgrind memcheck (tests/vg-jit.c):
#   reuse: a freed and reused address, and code patched with ep_write(),
#          run the new code (VALGRIND_DISCARD_TRANSLATIONS), with no
#          memcheck error (--error-exitcode);
#   leak:  a JIT allocation the program lost is "definitely lost", and the
#          report points at ep_alloc;
#   clean: nothing is lost when code is freed or its pool destroyed.
# SKIP without valgrind.  Environment: top_builddir (make check).
set -u
if [ -n "${EP_SANITIZER:-}" ]; then
	echo "SKIP: Valgrind cannot run a program built with ${EP_SANITIZER}"
	exit 77
fi
builddir=${top_builddir:-.}
prog=$builddir/tests/vg-jit
VALGRIND=${VALGRIND:-valgrind}

if ! command -v "$VALGRIND" >/dev/null 2>&1; then
	echo "SKIP: valgrind is not installed"
	exit 77
fi
[ -x "$prog" ] || { echo "ERROR: $prog not built"; exit 99; }
# not when this script itself runs under make check-valgrind's valgrind
unset LD_PRELOAD
tmp=$(mktemp -d "${TMPDIR:-/tmp}/valgrind-diag.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}
vg() {
	log=$1
	shift
	"$VALGRIND" --tool=memcheck --error-exitcode=3 --log-file="$log" "$@"
}

# --- reuse ----------------------------------------------------------------
vg "$tmp/reuse.log" "$prog" reuse >"$tmp/reuse.out" 2>&1
rc=$?
cat "$tmp/reuse.out"
case $rc in
0) echo "PASS: reused and patched code runs the new bytes under memcheck" ;;
77) echo "SKIP: no executable memory"; exit 77 ;;
3) fail "memcheck errors in reuse:"; cat "$tmp/reuse.log" ;;
*) fail "reuse exit $rc (stale translation?)"; cat "$tmp/reuse.log" ;;
esac

# --- leak -----------------------------------------------------------------
vg "$tmp/leak.log" --leak-check=full --errors-for-leak-kinds=none "$prog" leak >"$tmp/leak.out" 2>&1
rc=$?
[ $rc -eq 0 ] || { fail "leak exit $rc"; cat "$tmp/leak.out" "$tmp/leak.log"; }
if grep -Eq 'bytes in 1 blocks are definitely lost' "$tmp/leak.log" &&
	grep -A8 'definitely lost in loss record' "$tmp/leak.log" | grep -q 'ep_alloc'; then
	echo "PASS: the lost JIT allocation is reported:"
	grep -A6 'definitely lost in loss record' "$tmp/leak.log" | sed 's/^==[0-9]*== /  /'
else
	fail "no 'definitely lost' block from ep_alloc in the leak report:"
	cat "$tmp/leak.log"
fi

# --- clean ----------------------------------------------------------------
vg "$tmp/clean.log" --leak-check=full --errors-for-leak-kinds=definite,possible "$prog" clean \
	>"$tmp/clean.out" 2>&1
rc=$?
if [ $rc -ne 0 ] || grep -q 'definitely lost: [1-9]' "$tmp/clean.log" ||
	grep -q 'are definitely lost' "$tmp/clean.log"; then
	fail "clean program: exit $rc or a leak reported:"
	cat "$tmp/clean.out" "$tmp/clean.log"
else
	echo "PASS: no leak when code is freed or its pool destroyed"
fi

[ "$failures" -eq 0 ] || exit 1
exit 0
