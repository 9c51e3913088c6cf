#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# abi-symbols.sh - the shared library exports exactly the public interface.
#
# The list of functions is derived from include/execpack.h (every EP_API
# declaration), never written down here, so that adding a function to the
# header without exporting it (or exporting something that is not in the
# header) fails this test.  Checks:
#   - libexecpack/libexecpack.map lists exactly the header's names, each in
#     one version node: EXECPACK_1.0 (the first release), which ends in
#     "local: *;", then one node per later release, each inheriting the one
#     before it (EXECPACK_1.1 { ... } EXECPACK_1.0;);
#   - every EP_API name is exported as NAME@@NODE (a function), NODE being
#     the node the map lists it in;
#   - nothing else is exported (apart from the version nodes themselves);
#   - the SONAME is libexecpack.so.0.
# Environment: top_srcdir, top_builddir (set by make check); NM, READELF.
set -u

srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
header=$srcdir/include/execpack.h
map=$srcdir/libexecpack/libexecpack.map
lib=$builddir/libexecpack/.libs/libexecpack.so
node=EXECPACK_1.0 # the first node; later ones are read from the map
soname=libexecpack.so.0
NM=${NM_FOR_ABI:-nm}
READELF=${READELF:-readelf}

# Exported on purpose without being API: the GDB JIT interface (diag.c),
# whose names GDB looks up; they are in the map too.
extra_exports="__jit_debug_descriptor __jit_debug_register_code"

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

for f in "$header" "$map"; do
	[ -r "$f" ] || { echo "ERROR: cannot read $f"; exit 99; }
done
[ -e "$lib" ] || { echo "ERROR: $lib not built"; exit 99; }
if ! command -v "$NM" >/dev/null 2>&1; then
	echo "SKIP: $NM (binutils) not available"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/abi-symbols.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

# --- 1. the header's public names -------------------------------------------
# Join each declaration that starts with EP_API up to its ';', drop
# attributes, and take the identifier before the parameter list (or, for
# an object, the last identifier).
awk '
	/^[ \t]*EP_API[ \t]/ { decl = ""; collecting = 1 }
	collecting {
		decl = decl " " $0
		if (index($0, ";")) {
			collecting = 0
			sub(/;.*/, "", decl)
			while (match(decl, /__attribute__[ \t]*\(\([^()]*(\([^()]*\)[^()]*)*\)\)/))
				decl = substr(decl, 1, RSTART - 1) substr(decl, RSTART + RLENGTH)
			if (match(decl, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
				name = substr(decl, RSTART, RLENGTH)
				sub(/[ \t]*\($/, "", name)
			} else {
				sub(/(\[[^]]*\])*[ \t]*$/, "", decl)
				match(decl, /[A-Za-z_][A-Za-z0-9_]*$/)
				name = substr(decl, RSTART, RLENGTH)
			}
			print name
		}
	}
' "$header" | sort -u >"$tmp/header"

if [ ! -s "$tmp/header" ]; then
	echo "ERROR: no EP_API declarations found in $header"
	exit 99
fi
echo "header: $(wc -l <"$tmp/header") public names"
while read -r name; do
	case $name in
	ep_*) ;;
	*) fail "header declares EP_API '$name' without the ep_ prefix" ;;
	esac
done <"$tmp/header"

# --- 2. the version script ---------------------------------------------------
# In the map's order: "@node NODE PARENT" at each node's end (PARENT "-"
# for none), "NAME NODE" for each name under "global:", and
# "@local-star NODE" where a node has "local: *;".  Comments removed.
sed -e 's|/\*.*\*/||g' -e 's|#.*||' "$map" | awk '
	{ gsub(/[ \t]+/, " ") }
	!in_node && /^ ?[A-Za-z_][A-Za-z0-9_.]* ?\{/ {
		cur = $0; sub(/^ /, "", cur); sub(/ ?\{.*/, "", cur)
		in_node = 1; scope = "global"; next
	}
	in_node && /^ ?\}/ {
		parent = $0; sub(/^ ?\} ?/, "", parent); sub(/ ?;.*/, "", parent)
		print "@node", cur, (parent == "" ? "-" : parent)
		in_node = 0; next
	}
	in_node && /global:/ { scope = "global"; next }
	in_node && /local:/ { scope = "local"; if ($0 ~ /local: ?\* ?;/) print "@local-star", cur; next }
	in_node && scope == "local" && /^ ?\* ?;/ { print "@local-star", cur; next }
	in_node && scope == "global" && /;/ {
		n = split($0, parts, ";")
		for (i = 1; i <= n; i++) {
			gsub(/ /, "", parts[i])
			if (parts[i] != "") print parts[i], cur
		}
	}
' >"$tmp/map.raw"

awk '$1 == "@node" { print $2, $3 }' "$tmp/map.raw" >"$tmp/nodes"
first=$(head -n 1 "$tmp/nodes" | cut -d' ' -f1)
[ "$first" = "$node" ] || fail "$map: the first node is '$first', not $node"
grep -qx "@local-star $node" "$tmp/map.raw" || fail "$map: node $node does not end in 'local: \*;'"
prev=-
while read -r n parent; do
	[ "$parent" = "$prev" ] || fail "$map: node $n inherits '$parent', not the node before it ($prev)"
	prev=$n
done <"$tmp/nodes"
grep -v '^@' "$tmp/map.raw" | grep -vE "^(${extra_exports% *}|${extra_exports#* }) " |
	sort >"$tmp/map.all"
cut -d' ' -f1 "$tmp/map.all" | sort >"$tmp/map.names"
sort -u "$tmp/map.names" >"$tmp/map"
if [ ! -s "$tmp/map" ]; then
	fail "$map: no global names"
fi
dups=$(uniq -d "$tmp/map.names")
[ -z "$dups" ] || fail "$map: listed twice: $dups"
for name in $(comm -13 "$tmp/header" "$tmp/map"); do
	fail "$map lists $name, which include/execpack.h does not declare EP_API"
done
for name in $(comm -23 "$tmp/header" "$tmp/map"); do
	fail "$map does not list $name (EP_API in include/execpack.h)"
done
# The node the map lists a name in (the first node for a name it lacks,
# which was reported above).
node_of() {
	awk -v n="$1" -v d="$node" '$1 == n { print $2; f = 1; exit } END { if (!f) print d }' \
		"$tmp/map.all"
}

# --- 3. what the library exports --------------------------------------------
"$NM" -D --defined-only "$lib" >"$tmp/nm" 2>"$tmp/nm.err" || {
	cat "$tmp/nm.err"
	echo "ERROR: $NM -D failed on $lib"
	exit 99
}
# nm before binutils 2.35 shows versions only when asked
if ! grep -q '@' "$tmp/nm"; then
	"$NM" -D --defined-only --with-symbol-versions "$lib" >"$tmp/nm" 2>/dev/null
fi
# lines: ADDRESS TYPE NAME[@[@]VERSION]; the version node is an absolute symbol
awk 'NF >= 3 && !($2 == "A" && $3 ~ /^[A-Z0-9_.]+$/) { print $2, $3 }' "$tmp/nm" |
	sort >"$tmp/exports"

while read -r type sym; do
	base=${sym%%@*}
	case " $extra_exports " in *" $base "*) continue ;; esac
	want=$(node_of "$base")
	case $sym in
	*@@"$want") ;;
	*@*) fail "$base is exported under version '${sym#*@}', not @@$want" ;;
	*) fail "$base is exported without a symbol version" ;;
	esac
	if ! grep -qx "$base" "$tmp/header"; then
		fail "$base is exported but not declared EP_API in include/execpack.h"
	fi
done <"$tmp/exports"

while read -r name; do
	want=$(node_of "$name")
	if ! grep -q " $name@@$want\$" "$tmp/exports"; then
		fail "$name (EP_API in the header) is not exported as $name@@$want"
		continue
	fi
	type=$(awk -v s="$name@@$want" '$2 == s { print $1 }' "$tmp/exports")
	case $type in
	T | t | i) ;;
	*) grep -q "[[:space:]*]${name}[[:space:]]*(" "$header" &&
		fail "$name is a function in the header but exported with nm type '$type'" ;;
	esac
done <"$tmp/header"

# --- 4. SONAME -------------------------------------------------------------
if command -v "$READELF" >/dev/null 2>&1; then
	got=$(LC_ALL=C "$READELF" -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\].*/\1/p')
else
	got=$(LC_ALL=C objdump -p "$lib" | awk '$1 == "SONAME" { print $2 }')
fi
[ "$got" = "$soname" ] || fail "SONAME is '$got', expected $soname"
[ -e "$builddir/libexecpack/.libs/$soname" ] ||
	fail "$soname is not next to libexecpack.so in the build tree"

if [ "$failures" -ne 0 ]; then
	echo "$failures ABI problem(s); exported:"
	sed 's/^/  /' "$tmp/exports"
	exit 1
fi
echo "PASS: $(wc -l <"$tmp/header") functions exported under the map's nodes" \
	"($(cut -d' ' -f1 "$tmp/nodes" | tr '\n' ' ' | sed 's/ $//')), nothing else; SONAME $soname"
exit 0
