#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# abi-symbols.sh - the shared library exports exactly the public interface.
#
# The list of functions is derived from include/execpack.h (every EP_API
# declaration), never written down here, so that adding a function to the
# header without exporting it (or exporting something that is not in the
# header) fails this test.  Checks:
#   - libexecpack/libexecpack.map lists exactly the header's names, each in
#     one version node (EXECPACK_1.0, then one node per release that added
#     names, each inheriting the one before it); EXECPACK_1.0 ends in
#     "local: *;";
#   - every EP_API name is exported as NAME@@NODE (a function), NODE the
#     node that the map lists it in;
#   - nothing else is exported (apart from the version nodes themselves);
#   - the SONAME is libexecpack.so.0.
# Environment: top_srcdir, top_builddir (set by make check); NM, READELF.
set -u

srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
header=$srcdir/include/execpack.h
map=$srcdir/libexecpack/libexecpack.map
lib=$builddir/libexecpack/.libs/libexecpack.so
first_node=EXECPACK_1.0
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

# --- 2. the version script ----------------------------------------------------
# "NODE NAME" for every name under "global:" of each node, comments
# removed; "NODE @local-star" where a node says "local: *;"; "NODE @parent
# PARENT" for the node a node inherits ("} PARENT;").
sed -e 's|/\*.*\*/||g' -e 's|#.*||' "$map" | awk '
	{ gsub(/[ \t]+/, " ") }
	!in_node && match($0, /^ ?[A-Za-z0-9_.]+ ?\{/) {
		node = substr($0, RSTART, RLENGTH)
		gsub(/[ {]/, "", node)
		in_node = 1; scope = "global"; next
	}
	in_node && /^ ?\}/ {
		parent = $0
		gsub(/[ };]/, "", parent)
		if (parent != "") print node, "@parent", parent
		in_node = 0; next
	}
	in_node && /global:/ { scope = "global"; next }
	in_node && /local:/ { scope = "local"; if ($0 ~ /local: ?\* ?;/) print node, "@local-star"; next }
	in_node && scope == "local" && /^ ?\* ?;/ { print node, "@local-star"; next }
	in_node && scope == "global" && /;/ {
		n = split($0, parts, ";")
		for (i = 1; i <= n; i++) {
			gsub(/ /, "", parts[i])
			if (parts[i] != "") print node, parts[i]
		}
	}
' >"$tmp/map.raw"

nodes=$(awk '!seen[$1]++ { print $1 }' "$tmp/map.raw")
[ "$(echo "$nodes" | head -n 1)" = "$first_node" ] ||
	fail "$map: the first version node is '$(echo "$nodes" | head -n 1)', not $first_node"
grep -qx "$first_node @local-star" "$tmp/map.raw" ||
	fail "$map: node $first_node does not end in 'local: *;'"
prev=""
for n in $nodes; do
	if [ -n "$prev" ]; then
		grep -qx "$n @parent $prev" "$tmp/map.raw" ||
			fail "$map: node $n does not inherit $prev ('} $prev;')"
	fi
	prev=$n
done
awk '$2 !~ /^@/' "$tmp/map.raw" | grep -vE " (${extra_exports% *}|${extra_exports#* })\$" |
	sort -k2 >"$tmp/map.nodes"
awk '{ print $2 }' "$tmp/map.nodes" >"$tmp/map.all"
sort -u "$tmp/map.all" >"$tmp/map"
if [ ! -s "$tmp/map" ]; then
	fail "$map: no global names"
fi
dups=$(uniq -d "$tmp/map.all")
[ -z "$dups" ] || fail "$map: listed twice: $dups"
for name in $(comm -13 "$tmp/header" "$tmp/map"); do
	fail "$map lists $name, which include/execpack.h does not declare EP_API"
done
for name in $(comm -23 "$tmp/header" "$tmp/map"); do
	fail "$map does not list $name (EP_API in include/execpack.h)"
done
# node_of NAME: the node the map lists NAME in ($first_node if none)
node_of() {
	n=$(awk -v s="$1" '$2 == s { print $1; exit }' "$tmp/map.nodes")
	echo "${n:-$first_node}"
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
# lines: ADDRESS TYPE NAME[@[@]VERSION]; a version node is an absolute symbol
awk 'NF >= 3 && !($2 == "A" && $3 ~ /^[A-Z0-9_.]+$/) { print $2, $3 }' "$tmp/nm" |
	sort >"$tmp/exports"

while read -r type sym; do
	base=${sym%%@*}
	case " $extra_exports " in *" $base "*) continue ;; esac
	node=$(node_of "$base")
	case $sym in
	*@@"$node") ;;
	*@*) fail "$base is exported under version '${sym#*@}', not @@$node" ;;
	*) fail "$base is exported without a symbol version" ;;
	esac
	if ! grep -qx "$base" "$tmp/header"; then
		fail "$base is exported but not declared EP_API in include/execpack.h"
	fi
done <"$tmp/exports"

while read -r name; do
	node=$(node_of "$name")
	if ! grep -q " $name@@$node\$" "$tmp/exports"; then
		fail "$name (EP_API in the header) is not exported as $name@@$node"
		continue
	fi
	type=$(awk -v s="$name@@$node" '$2 == s { print $1 }' "$tmp/exports")
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
echo "PASS: $(wc -l <"$tmp/header") functions exported, each @@ its node of the map" \
	"($(echo $nodes)), nothing else; SONAME $soname"
exit 0
