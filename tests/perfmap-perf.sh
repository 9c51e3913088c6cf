#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# perfmap-perf.sh - perf report and perf top name JIT code from the perf
# map, with the default backend: tests/jitdump-prog runs a JIT loop named
# ep_pm_hot_loop (EP_F_PERFMAP) under `perf record -e cpu-clock` (the
# software clock: no hardware counters needed), and `perf report --sort
# dso,sym` must name it; then again, watched by `perf top --stdio`.
# perf reads /tmp/perf-<pid>.map only for samples in mappings it takes for
# anonymous memory (//anon, /dev/zero, /anon_hugepage, MAP_HUGETLB): a
# view of a memfd, "/memfd:execpack (deleted)", shows as an address in
# that file instead.  SKIPs, saying why, without perf or where
# perf_event_open is refused (perf_event_paranoid, containers, seccomp).
set -u
builddir=${top_builddir:-.}
prog=$builddir/tests/jitdump-prog
[ -x "$prog" ] || { echo "ERROR: $prog not built"; exit 99; }
unset LD_PRELOAD EXECPACK_BACKEND EXECPACK_DEBUG

if ! command -v perf >/dev/null 2>&1; then
	echo "SKIP: perf is not installed (Debian: linux-perf)"
	exit 77
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/perfmap-perf.XXXXXX") || exit 99
map=""
top_pid=""
trap 'rm -rf "$tmp"; [ -z "$map" ] || rm -f "$map"; [ -z "$top_pid" ] || rm -f "/tmp/perf-$top_pid.map"' EXIT
# perf keeps its build-id cache in $HOME/.debug: a scratch one here
HOME=$tmp
export HOME

if ! perf record -q -e cpu-clock -o "$tmp/perf.data" -- "$prog" 300 perfmap \
	>"$tmp/record.out" 2>&1; then
	if grep -qi 'perf_event_paranoid\|permission\|not permitted\|not supported' \
		"$tmp/record.out"; then
		echo "SKIP: perf record cannot sample here:"
		sed 's/^/  /' "$tmp/record.out" | head -n 5
		exit 77
	fi
	echo "FAIL: perf record failed:"
	cat "$tmp/record.out"
	exit 1
fi
cat "$tmp/record.out"
pid=$(sed -n 's/^jitdump-prog: .*, pid \([0-9]*\),.*/\1/p' "$tmp/record.out")
[ -n "$pid" ] || { echo "FAIL: jitdump-prog did not run"; exit 1; }
map=/tmp/perf-$pid.map
[ -f "$map" ] || { echo "FAIL: no $map"; exit 1; }
grep ' ep_pm_hot_loop$' "$map" || { echo "FAIL: $map does not list ep_pm_hot_loop"; exit 1; }

failures=0
perf report -i "$tmp/perf.data" --stdio --sort dso,sym >"$tmp/report.out" 2>"$tmp/report.err"
grep -v '^#' "$tmp/report.out" | sed '/^$/d' | head -n 8
if grep -Eq '^ +([1-9][0-9]*|0)\.[0-9]+%.*\[\.\] ep_pm_hot_loop *$' "$tmp/report.out"; then
	echo "PASS: perf report names ep_pm_hot_loop from $map"
else
	echo "FAIL: perf report does not name ep_pm_hot_loop (the JIT code's mapping, as perf" \
		"saw it: $(grep -o 'memfd:[^ ]*' "$tmp/report.out" | head -n 1))"
	cat "$tmp/report.err"
	failures=1
fi

# --- perf top, on the running program ----------------------------------------
"$prog" 4000 perfmap >"$tmp/top-prog.out" 2>&1 &
top_pid=$!
sleep 1
timeout -s INT 3 perf top --stdio -p "$top_pid" -e cpu-clock -d 1 >"$tmp/top.out" 2>&1
wait "$top_pid"
if grep -q '\[\.\] ep_pm_hot_loop' "$tmp/top.out"; then
	echo "PASS: perf top names ep_pm_hot_loop"
elif ! grep -q '%' "$tmp/top.out"; then
	echo "SKIP (perf top): it showed no samples here:"
	head -n 5 "$tmp/top.out" | sed 's/^/  /'
else
	echo "FAIL: perf top does not name ep_pm_hot_loop:"
	grep '%' "$tmp/top.out" | head -n 5
	failures=1
fi
exit "$failures"
