#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench-instructions.sh - instructions per op of workload 10's churn, for
# `make bench-instructions`.
#
# Runs tests/bench-ops under callgrind for libexecpack, for the floor, for
# the floor staged as ep_alloc() stages code and for the staged floor with
# first fit over a chunk bitmap (the library's summary) in place of its
# free lists (LIVE live programs, OPS free + JIT pairs counted after as
# many uncounted), and prints instructions per op for each, the ratios,
# the inclusive cost of each public call an op makes (exported, so never
# inlined into bench-ops), and the share of the internal steps first fit
# (ep__pack_find), take and give back where the compiler kept them out of
# line: nothing in the library keeps them so for this script, so a build
# that inlines one reports it not measured, and the totals stand.
#
# Usage: bench-instructions.sh BENCH-OPS [LIVE [OPS]]   (10000, 20000)
set -u
prog=$1
live=${2:-10000}
ops=${3:-20000}
find_fn=ep__pack_find

if ! command -v valgrind >/dev/null 2>&1; then
	echo "SKIP: valgrind not installed"
	exit 0
fi
if ! command -v callgrind_annotate >/dev/null 2>&1; then
	echo "SKIP: callgrind_annotate not installed"
	exit 0
fi
case $(uname -m) in
x86_64) ;;
*)	echo "SKIP: the programs are x86-64 code"
	exit 0 ;;
esac

tmp=$(mktemp -d) || exit 99
trap 'rm -rf "$tmp"' EXIT
trap 'exit 130' INT TERM HUP

# The Ir total of the collected part: the out file's summary (or totals) line.
total() {
	awk '/^(summary|totals):/ { print $2; exit }' "$1"
}

for who in execpack floor staged firstfit; do
	if ! valgrind --tool=callgrind --toggle-collect=run_ops \
		--callgrind-out-file="$tmp/$who.out" "$prog" "$who" "$live" "$ops" \
		>"$tmp/$who.log" 2>&1; then
		cat "$tmp/$who.log" >&2
		echo "bench-instructions: $prog $who failed under callgrind" >&2
		exit 1
	fi
	# the program says so when it cannot switch off the Valgrind paths
	grep '^bench-ops:' "$tmp/$who.log" >&2
done

ep=$(total "$tmp/execpack.out")
fl=$(total "$tmp/floor.out")
st=$(total "$tmp/staged.out")
ff=$(total "$tmp/firstfit.out")
if [ -z "$ep" ] || [ -z "$fl" ] || [ "$ep" = 0 ] || [ "$fl" = 0 ]; then
	echo "bench-instructions: no instructions collected in run_ops" >&2
	exit 1
fi
# A function's inclusive count; a recursive function may be listed more
# than once, and its largest count is the whole of it.
inclusive() {
	callgrind_annotate --inclusive=yes --auto=no "$tmp/execpack.out" |
	awk -v fn="$1" '
		{ for (i = 2; i <= NF; i++) if ($i ~ (":" fn "$")) { v = $1; gsub(",", "", v); if (v + 0 > m) m = v + 0 } }
		END { if (m) print m }'
}
find=$(inclusive "$find_fn")
# taking chunks and giving them back, the summary's upkeep included
take=$(inclusive ep__pack_take)
give=$(inclusive 'ep__pack_give_back(\\.constprop\\.[0-9]+)?')

echo "instructions per free + JIT pair, $live live programs, $ops ops counted (callgrind)"
awk -v ep="$ep" -v fl="$fl" -v st="${st:-0}" -v ff="${ff:-0}" -v ops="$ops" 'BEGIN {
	printf "  %-34s %10.0f\n", "execpack", ep / ops
	printf "  %-34s %10.0f\n", "floor", fl / ops
	printf "  %-34s %9.2fx\n", "execpack / floor", ep / fl
	if (st > 0) {
		printf "  %-34s %10.0f\n", "staged floor (ep_alloc()'"'"'s copy)", st / ops
		printf "  %-34s %9.2fx\n", "execpack / staged", ep / st
	}
	if (ff > 0) {
		printf "  %-34s %10.0f\n", "first-fit floor (staged, bitmap)", ff / ops
		printf "  %-34s %9.2fx\n", "execpack / first-fit floor", ep / ff
	}
}'
# the public calls of a free + JIT pair
for call in ep_alloc ep_finalize ep_free; do
	v=$(inclusive "$call")
	if [ -n "$v" ]; then
		awk -v fn="$call" -v v="$v" -v ops="$ops" 'BEGIN {
			printf "  %-34s %10.0f\n", fn " (inclusive)", v / ops }'
	else
		echo "  $call: not found in the profile; not measured"
	fi
done
if [ -n "$find" ]; then
	awk -v f="$find" -v ops="$ops" -v fn="$find_fn" 'BEGIN {
		printf "  %-34s %10.0f\n", "first fit (" fn ", inclusive)", f / ops }'
else
	echo "  first fit: $find_fn not found in the profile (inlined or renamed); not measured"
fi
if [ -n "$take" ] && [ -n "$give" ]; then
	awk -v t="$take" -v g="$give" -v ops="$ops" 'BEGIN {
		printf "  %-34s %10.0f\n", "take (ep__pack_take, inclusive)", t / ops
		printf "  %-34s %10.0f\n", "give back (ep__pack_give_back)", g / ops }'
else
	echo "  take, give back: ep__pack_take/_give_back not found in the profile (inlined?); not measured"
fi

echo "targets (issue 26)"
awk -v ep="$ep" -v f="${find:-}" -v ops="$ops" 'BEGIN {
	v = ep / ops
	printf "  %-34s %10.0f %10s  %s\n", "execpack instructions per op", v, "<= 900",
		v <= 900 ? "met" : "NOT MET"
	if (f == "")
		printf "  %-34s %10s %10s  SKIP: not measured\n", "first fit (the search) per op", "-", "<= 200"
	else {
		v = f / ops
		printf "  %-34s %10.0f %10s  %s\n", "first fit (the search) per op", v, "<= 200",
			v <= 200 ? "met" : "NOT MET"
	}
}'
