#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The safe layer's cost in instructions, which a loaded machine does not
# change: benches/churn.rs once under callgrind (1 round of OPS ops, 4000 by
# default), and for each side the instructions of its ops loop (the
# instructions of CSide::ops or RustSide::ops, their callees included),
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
	/^ *[0-9,]+ .*\* .*:churn::(CSide|RustSide)::ops/ {
		side = ($0 ~ /RustSide/) ? "Rust" : "C"
		n = $1; gsub(",", "", n)
		if ($0 ~ /\[/) total[side] = n # the whole function: the line with its object
		cur = side; next
	}
	/^ *[0-9,]+ .*\* / { cur = ""; next }
	cur != "" && /> .*api\.c:ep_(alloc|finalize|free) / {
		n = $1; gsub(",", "", n); lib[cur] += n
	}
	END {
		for (s in total) {
			printf "%-4s %7.1f instructions/op, %6.1f of them outside the library\n",
				s, total[s] / ops, (total[s] - lib[s]) / ops
		}
		printf "ratio Rust / C: %.4f (instructions)\n", total["Rust"] / total["C"]
		printf "the safe layer: %+.1f instructions/op outside the library\n",
			((total["Rust"] - lib["Rust"]) - (total["C"] - lib["C"])) / ops
	}'
