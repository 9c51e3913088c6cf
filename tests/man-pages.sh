#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# man-pages.sh - the installed man pages format cleanly and cover the API.
#
#   - every page listed in EP_MAN_PAGES (the Makefile's dist_man_MANS) formats
#     with groff -man -ww without a warning, and with mandoc -Tlint at
#     warning level too when mandoc is installed; .so links must point to a
#     page in the list;
#   - every full page has the sections NAME, SYNOPSIS, DESCRIPTION,
#     RETURN VALUE, ERRORS, THREAD SAFETY and SEE ALSO, and its NAME line
#     names the page;
#   - every EP_API function of include/execpack.h has a page of its own
#     name in section 3, and is named in the NAME line of the page it leads
#     to; every ep_*(3) cross reference resolves;
#   - `apropos execpack` finds every page (its NAME line says execpack);
#     with man-db installed this runs mandb and apropos on the pages;
#   - no phrase in \(dq quotes is split over two arguments of an
#     alternating font macro (.BR and the like join their arguments
#     without a space: "Unknownerror");
#   - libexecpack(7) refers to every function page and command page, and
#     says how to build and load the kernel module behind /dev/execpack.
# Environment: top_srcdir (make check), EP_MAN_PAGES (relative to top_srcdir).
set -u

srcdir=${top_srcdir:-.}
header=$srcdir/include/execpack.h
pages=${EP_MAN_PAGES:-}

if [ -z "$pages" ]; then
	# run by hand: every page in the source tree
	pages=$(cd "$srcdir" && ls doc/man3/*.3 doc/*.[1-8] 2>/dev/null)
fi
[ -n "$pages" ] || { echo "ERROR: no man pages listed"; exit 99; }

if ! command -v groff >/dev/null 2>&1; then
	echo "SKIP: groff is not installed (Debian: groff-base)"
	exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/man-pages.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# A tree laid out like an installed mandir, so that ".so man3/x.3" resolves.
for p in $pages; do
	f=$srcdir/$p
	[ -r "$f" ] || { fail "$p is listed but does not exist"; continue; }
	base=${p##*/}
	sec=${base##*.}
	mkdir -p "$tmp/man/man$sec"
	cp "$f" "$tmp/man/man$sec/$base"
	echo "man$sec/$base" >>"$tmp/list"
done
[ -s "$tmp/list" ] || exit 1

have_mandoc=no
command -v mandoc >/dev/null 2>&1 && have_mandoc=yes

checked=0
while read -r rel; do
	f=$tmp/man/$rel
	first=$(sed -n '1p' "$f")
	case $first in
	.so\ *)
		target=${first#.so }
		[ -f "$tmp/man/$target" ] || fail "$rel: .so link to $target, which is not installed"
		[ "$(wc -l <"$f")" -eq 1 ] || fail "$rel: a .so link must be one line"
		continue
		;;
	esac
	checked=$((checked + 1))

	# groff: -ww all warnings, -z no output; anything on stderr is a warning
	(cd "$tmp/man" && LC_ALL=C.UTF-8 groff -man -Tutf8 -ww -z "$rel") >"$tmp/groff.out" 2>&1
	if [ -s "$tmp/groff.out" ]; then
		fail "$rel: groff warnings:"
		sed 's/^/    /' "$tmp/groff.out"
	fi
	if [ "$have_mandoc" = yes ]; then
		(cd "$tmp/man" && mandoc -Tlint -Wwarning "$rel") >"$tmp/mandoc.out" 2>&1
		if [ -s "$tmp/mandoc.out" ]; then
			fail "$rel: mandoc -Tlint:"
			sed 's/^/    /' "$tmp/mandoc.out"
		fi
	fi

	for s in NAME SYNOPSIS DESCRIPTION "RETURN VALUE" ERRORS "THREAD SAFETY" "SEE ALSO"; do
		case $rel in
		man1/* | man8/*)
			# commands: EXIT STATUS instead of RETURN VALUE, no ERRORS
			case $s in "RETURN VALUE" | ERRORS | "THREAD SAFETY") continue ;; esac ;;
		esac
		grep -Eq "^\.SH \"?$s\"?[[:space:]]*\$" "$f" || fail "$rel: no $s section"
	done
	name=${rel#*/}
	name=${name%.*}
	# the line after .SH NAME: "a, b \- what"
	namel=$(awk '/^\.SH "?NAME"?/ { getline; print; exit }' "$f")
	case ", ${namel%% \\-*}," in
	*", $name,"*) ;;
	*) fail "$rel: its NAME line '$namel' does not name $name" ;;
	esac
	th=$(awk '/^\.TH / { print $2, $3; exit }' "$f")
	want="$(echo "$name" | tr '[:lower:]' '[:upper:]') ${rel##*.}"
	[ "$th" = "$want" ] || fail "$rel: .TH says '$th', expected '$want'"
done <"$tmp/list"

# Every EP_API function has man3/<name>.3, and is in the NAME line there.
awk '
	/^[ \t]*EP_API[ \t]/ { decl = ""; on = 1 }
	on { decl = decl " " $0; if (index($0, ";")) { on = 0
		sub(/;.*/, "", decl)
		while (match(decl, /__attribute__[ \t]*\(\([^()]*(\([^()]*\)[^()]*)*\)\)/))
			decl = substr(decl, 1, RSTART - 1) substr(decl, RSTART + RLENGTH)
		if (match(decl, /[A-Za-z_][A-Za-z0-9_]*[ \t]*\(/)) {
			n = substr(decl, RSTART, RLENGTH); sub(/[ \t]*\($/, "", n); print n
		}
	} }
' "$header" | sort -u >"$tmp/functions"
[ -s "$tmp/functions" ] || { echo "ERROR: no EP_API functions in $header"; exit 99; }
while read -r fn; do
	p=$tmp/man/man3/$fn.3
	if [ ! -f "$p" ]; then
		fail "$fn is declared in include/execpack.h but has no installed man page $fn.3"
		continue
	fi
	first=$(sed -n '1p' "$p")
	case $first in .so\ *) p=$tmp/man/${first#.so } ;; esac
	[ -f "$p" ] || continue
	awk '/^\.SH "?NAME"?/ { getline; print; exit }' "$p" | grep -Eq "(^|[ ,])$fn(,| )" ||
		fail "$fn.3 leads to a page whose NAME line does not name $fn"
	grep -q "$fn(" "$p" || fail "${p##*/} does not show $fn() in its SYNOPSIS"
done <"$tmp/functions"

# Cross references to our own pages resolve.
for f in "$tmp"/man/man*/*; do
	grep -Eo '^\.BR ep_[a-z0-9_]+ \([0-9]\)' "$f" | while read -r _ ref sec; do
		sec=${sec#(}
		sec=${sec%)}
		[ -f "$tmp/man/man$sec/$ref.$sec" ] || echo "${f##*/}: see $ref($sec)"
	done
done | sort -u >"$tmp/refs"
while read -r line; do
	fail "$line, which does not exist"
done <"$tmp/refs"

# apropos: the NAME line of every page, .so links included, mentions
# execpack.  mandb indexes the staged tree like an installed one.
: >"$tmp/apropos"
if command -v mandb >/dev/null 2>&1 && command -v apropos >/dev/null 2>&1 &&
	mandb -q -c "$tmp/man" >"$tmp/mandb.out" 2>&1; then
	how="apropos"
	apropos -M "$tmp/man" execpack 2>/dev/null |
		sed -n 's/^\([^ ]*\) (\([0-9]\)).*/\1.\2/p' | sort -u >"$tmp/apropos"
	while read -r rel; do
		grep -qx "${rel#*/}" "$tmp/apropos" || fail "$rel: apropos execpack does not find it"
	done <"$tmp/list"
else
	# without man-db: the NAME line itself (lexgrog's view of it)
	how="NAME lines"
	while read -r rel; do
		f=$tmp/man/$rel
		first=$(sed -n '1p' "$f")
		case $first in .so\ *) f=$tmp/man/${first#.so } ;; esac
		[ -f "$f" ] || continue
		awk '/^\.SH "?NAME"?/ { getline; print; exit }' "$f" | grep -qi execpack ||
			fail "$rel: its NAME line does not say execpack (apropos execpack misses it)"
	done <"$tmp/list"
fi

# Alternating font macros put no space between their arguments, so a phrase
# quoted with \(dq must be one quoted argument: .BR "\(dqUnknown error\(dq" .
while read -r rel; do
	awk -v rel="$rel" '
		/^\.(BR|RB|BI|IB|IR|RI)[ \t]/ {
			line = substr($0, 5)
			while (line != "") {
				sub(/^[ \t]+/, "", line)
				if (line == "")
					break
				if (substr(line, 1, 1) == "\"") {
					if (!match(line, /^"[^"]*"/))
						break
					line = substr(line, RLENGTH + 1)
					continue
				}
				match(line, /^[^ \t]+/)
				tok = substr(line, 1, RLENGTH)
				line = substr(line, RLENGTH + 1)
				# an opening quote glued to a word, never closed
				if (gsub(/\\\(dq/, "&", tok) == 1 && tok ~ /^\\\(dq[A-Za-z0-9]/) {
					print rel ":" FNR ": a quoted phrase split over arguments renders glued: " $0
					break
				}
			}
		}' "$tmp/man/$rel"
done <"$tmp/list" >"$tmp/glued"
while read -r line; do
	fail "$line"
done <"$tmp/glued"

# libexecpack(7): the entry page refers to the others and to the module.
overview=$tmp/man/man7/libexecpack.7
if [ -f "$overview" ]; then
	while read -r rel; do
		case $rel in man3/* | man1/execpack*) ;; *) continue ;; esac
		case $(sed -n '1p' "$tmp/man/$rel") in .so\ *) continue ;; esac
		n=${rel#*/}
		n=${n%.*}
		sec=${rel%%/*}
		sec=${sec#man}
		grep -Eq "^\.BR $(echo "$n" | sed 's/-/\\\\-/g') \($sec\)" "$overview" ||
			fail "libexecpack.7 does not refer to $n($sec)"
	done <"$tmp/list"
	for w in '/dev/execpack' 'insmod' 'M=\$PWD modules'; do
		grep -q "$w" "$overview" ||
			fail "libexecpack.7 does not say how to build and load the kernel module ($w)"
	done
fi

if [ "$failures" -ne 0 ]; then
	echo "$failures man page problem(s)"
	exit 1
fi
tools=groff
[ "$have_mandoc" = yes ] && tools="groff and mandoc"
echo "PASS: $checked pages clean under $tools; $(wc -l <"$tmp/functions") functions documented; $how finds every page"
exit 0
