#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Adds up test results from automake test logs and prints them.
# Usage: summarize-tests.sh DIR...   (searches DIR for *.trs and their .log)
#
# A Check suite counts as its individual checks ("Checks: N, Failures: F,
# Errors: E" in its log); any other test counts as one, by its .trs result.
# Extra result files "*.results" (lines "N passed, N failed[, N skipped]")
# written by non-automake steps are added too.
pass=0 fail=0 skip=0
for dir in "$@"; do
	[ -d "$dir" ] || continue
	for trs in $(find "$dir" -name '*.trs' | sort); do
		log=${trs%.trs}.log
		res=$(sed -n 's/^:test-result: //p' "$trs" | head -1)
		line=""
		[ -f "$log" ] && line=$(grep -E '^[0-9]+%: Checks: [0-9]+' "$log" | tail -1)
		if [ -n "$line" ] && [ "$res" != SKIP ]; then
			n=$(echo "$line" | sed 's/.*Checks: \([0-9]*\).*/\1/')
			f=$(echo "$line" | sed 's/.*Failures: \([0-9]*\).*/\1/')
			e=$(echo "$line" | sed 's/.*Errors: \([0-9]*\).*/\1/')
			pass=$((pass + n - f - e))
			fail=$((fail + f + e))
			# a suite that passed its checks but failed (e.g. valgrind) counts once
			if [ "$res" != PASS ] && [ $((f + e)) -eq 0 ]; then fail=$((fail + 1)); fi
		else
			case $res in
			PASS | XFAIL) pass=$((pass + 1)) ;;
			SKIP) skip=$((skip + 1)) ;;
			*) fail=$((fail + 1)) ;;
			esac
		fi
	done
	for r in $(find "$dir" -name '*.results' | sort); do
		l=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$r" | tail -1)
		[ -n "$l" ] || { fail=$((fail + 1)); continue; }
		p=$(echo "$l" | sed 's/^\([0-9]*\) passed.*/\1/')
		f=$(echo "$l" | sed 's/.* \([0-9]*\) failed.*/\1/')
		s=$(echo "$l" | sed -n 's/.* \([0-9]*\) skipped.*/\1/p')
		pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + ${s:-0}))
	done
done
echo "$skip skipped"
echo "$pass passed, $fail failed"
