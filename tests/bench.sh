#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# bench.sh - run the benchmark suite for `make bench`.
#
# As root, with /proc/sys/vm/nr_hugepages writable, reserve the 2 MiB huge
# pages that the hugetlb workload needs for the length of the run and put
# the old value back afterwards (also on error or interrupt).  Otherwise
# run without them: the suite prints "SKIP: <reason>" for hugetlb.
#
# Usage: bench.sh PROGRAM [ARGS...]
#   EP_BENCH_HUGEPAGES: free huge pages wanted (default 24)
set -u
prog=$1
shift
knob=/proc/sys/vm/nr_hugepages
want=${EP_BENCH_HUGEPAGES:-24}

free_pages() {
	awk '/^HugePages_Free:/ { print $2 }' /proc/meminfo
}

if [ "$(id -u)" = 0 ] && [ -w "$knob" ]; then
	old=$(cat "$knob")
	free=$(free_pages)
	free=${free:-0}
	if [ "$free" -lt "$want" ]; then
		new=$((old + want - free))
		restore() {
			echo "$old" > "$knob" &&
				echo "bench.sh: vm.nr_hugepages restored to $old"
		}
		trap restore EXIT
		trap 'exit 130' INT TERM HUP
		if echo "$new" > "$knob"; then
			echo "bench.sh: vm.nr_hugepages $old -> $(cat "$knob") for the run" \
				"($(free_pages) free)"
		else
			EP_BENCH_HUGETLB_NOTE="make bench could not raise vm.nr_hugepages"
			export EP_BENCH_HUGETLB_NOTE
		fi
	else
		echo "bench.sh: $free huge pages free already; vm.nr_hugepages left at $old"
	fi
elif [ "$(id -u)" != 0 ]; then
	EP_BENCH_HUGETLB_NOTE="make bench reserves huge pages only when run as root"
	export EP_BENCH_HUGETLB_NOTE
else
	EP_BENCH_HUGETLB_NOTE="$knob is not writable here"
	export EP_BENCH_HUGETLB_NOTE
fi

"$prog" "$@"
