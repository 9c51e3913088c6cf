#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The safe layer's cost in instructions, which a loaded machine does not
# change: benches/churn.rs once under callgrind (1 round of OPS ops, 4000 by
# default), and for each side the instructions of its ops loop (the
# instructions of ops_c, ops_c_counted, ops_owned or ops_scoped, callees included),
# then the same less what the library's calls ran (ep_alloc, ep_finalize,
# ep_free): the binding's and the bench's own.
#   sh benches/instructions.sh [OPS]        (from rust/, the library found as
#                                            for cargo bench: EXECPACK_LIB_DIR...)
set -eu
ops=${1:-4000}
command -v valgrind >/dev/null 2>&1 || { echo "SKIP: valgrind not found"; exit 77; }
exe=$(cargo bench --offline --bench churn --no-run --message-format=short 2>&1 |
	sed -n 's/.*Executable .*(\(.*\)).*/\1/p' | tail -n 1)
[ -x "$exe" ] || { echo "the bench was not built"; exit 1; }
out=$(mktemp "${TMPDIR:-/tmp}/churn-cg.XXXXXX")
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" "$exe" 1 "$ops" >/dev/null 2>&1
# callgrind_annotate's tree: a "*" line per function (per source file it was
# inlined from), then a ">" line per callee, inclusive counts first.
callgrind_annotate --tree=calling --inclusive=yes "$out" 2>/dev/null | awk -v ops="$ops" '
	/^ *[0-9,]+ .*\* .*:churn::ops_(c|c_counted|owned|scoped)( |$)/ {
		side = ($0 ~ /ops_owned/) ? "Rust, Code" : ($0 ~ /ops_scoped/) ? "Rust, Code<&Pool>" : ($0 ~ /ops_c_counted/) ? "C + a count" : "C"
		n = $1; gsub(",", "", n)
		if ($0 ~ /\[/) total[side] = n # the whole function: the line with its object
		cur = side; next
	}
	/^ *[0-9,]+ .*\* / { cur = ""; next }
	cur != "" && /> .*api\.c:ep_(alloc|finalize|free) / {
		n = $1; gsub(",", "", n); lib[cur] += n
	}
	END {
		split("C|C + a count|Rust, Code|Rust, Code<&Pool>", names, "|")
		for (i = 1; i <= 4; i++) {
			s = names[i]
			printf "%-18s %7.1f instructions/op, %6.1f of them outside the library\n",
				s, total[s] / ops, (total[s] - lib[s]) / ops
		}
		# the safe layer against the C calls doing the same work
		split("Rust, Code|C + a count|Rust, Code<&Pool>|C", pair, "|")
		for (i = 1; i <= 4; i += 2) {
			s = pair[i]; c = pair[i + 1]
			printf "ratio %s / %s: %.4f (instructions); the safe layer: %+.1f instructions/op outside the library\n",
				s, c, total[s] / total[c], ((total[s] - lib[s]) - (total[c] - lib[c])) / ops
		}
	}'
