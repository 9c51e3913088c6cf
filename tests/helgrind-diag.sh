#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# helgrind-diag.sh - ep_symbolize() reads the table of names without a lock
# while another thread names and frees code (tests/hg-symbolize.c): helgrind
# must report nothing, the lock-free reads being annotated.
# SKIP without valgrind.  Environment: top_builddir (make check).
set -u
if [ -n "${EP_SANITIZER:-}" ]; then
	echo "SKIP: Valgrind cannot run a program built with ${EP_SANITIZER}"
	exit 77
fi
builddir=${top_builddir:-.}
prog=$builddir/tests/hg-symbolize
VALGRIND=${VALGRIND:-valgrind}

if ! command -v "$VALGRIND" >/dev/null 2>&1; then
	echo "SKIP: valgrind is not installed"
	exit 77
fi
[ -x "$prog" ] || { echo "ERROR: $prog not built"; exit 99; }
# not when this script itself runs under make check-valgrind's valgrind
unset LD_PRELOAD
tmp=$(mktemp -d "${TMPDIR:-/tmp}/helgrind-diag.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

"$VALGRIND" --tool=helgrind --error-exitcode=3 --log-file="$tmp/hg.log" "$prog"
rc=$?
case $rc in
0) echo "PASS: no helgrind report" ;;
77) echo "SKIP: no executable memory"; exit 77 ;;
3) echo "FAIL: helgrind reports:"; cat "$tmp/hg.log"; exit 1 ;;
*) echo "FAIL: exit $rc"; cat "$tmp/hg.log"; exit 1 ;;
esac
