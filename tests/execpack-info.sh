#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# execpack-info.sh - the execpack-info command: --version names the
# library's version; --json is valid JSON (python3 -m json.tool) and says
# what the text output says (backends in AUTO's order, which work, AUTO's
# pick, the hardware guards of its pool with their reasons), even with
# bytes in EXECPACK_BACKEND that are not UTF-8 or need escaping;
# EXECPACK_BACKEND naming no backend is named in the text, --quiet and
# --json outputs; EXECPACK_PKEY=0 turns the key off and says so; a usage
# error (an unknown option, --path without its argument, --quiet with
# --json) says what is wrong before the usage.
set -u
builddir=${top_builddir:-.}
info=$builddir/libexecpack/execpack-info
[ -x "$info" ] || { echo "ERROR: $info not built"; exit 99; }
command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 is not installed"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/execpack-info.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# --- --version ---------------------------------------------------------------
ver=$("$info" --version) || fail "--version exited $?"
text_ver=$("$info" | sed -n '1s/^libexecpack //p')
echo "$ver" | grep -Eq '^execpack-info \(libexecpack\) [0-9]+\.[0-9]+\.[0-9]+$' ||
	fail "--version printed '$ver'"
[ "$ver" = "execpack-info (libexecpack) $text_ver" ] ||
	fail "--version '$ver' against the text output's 'libexecpack $text_ver'"

# --- --json --------------------------------------------------------------------
# compare_once: the JSON against the text output of the same environment;
# prints what differs, exits 1 then
compare_once() {
	"$info" --json >"$tmp/out.json"
	jrc=$?
	"$info" >"$tmp/out.txt"
	trc=$?
	[ "$jrc" = "$trc" ] || { echo "FAIL: $1: --json exits $jrc, the text output $trc"; return 1; }
	python3 -m json.tool "$tmp/out.json" >/dev/null 2>"$tmp/err" || {
		echo "FAIL: $1: --json is not valid JSON: $(cat "$tmp/err")"
		cat "$tmp/out.json"
		return 1
	}
	python3 - "$tmp/out.json" "$tmp/out.txt" "$text_ver" "$1" <<'PY'
import json, os, re, sys
j = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
ver, what = sys.argv[3], sys.argv[4]
bad = []
if j["version"] != ver:
    bad.append("version %r, text %r" % (j["version"], ver))
names = [b["name"] for b in j["backends"]]
if names != ["hugetlb", "memfd", "kmod"]:
    bad.append("backends %r" % names)
for b in j["backends"]:
    works = re.search(r"^  %-8s works$" % b["name"], text, re.M) is not None
    if b["works"] != works:
        bad.append("%s works=%r, text says %r" % (b["name"], b["works"], works))
    if not b["works"] and not (b["reason"] and b["errno"] > 0 and b["error"]):
        bad.append("%s: no reason or errno" % b["name"])
m = re.search(r"^AUTO picks: (\S+)", text, re.M)
pick = None if m is None or m.group(1) == "nothing" else m.group(1)
if j["auto"]["backend"] != pick:
    bad.append("auto %r, text %r" % (j["auto"]["backend"], pick))
g = j["guards"]
if pick is None:
    if g is not None:
        bad.append("guards %r with no backend" % (g,))
elif sorted(g) != ["bti", "pkey"]:
    bad.append("guards %r" % (g,))
else:
    for name in ("pkey", "bti"):
        m = re.search(r"^  %-8s (on|off): (.*)$" % name, text, re.M)
        if m is None:
            bad.append("text has no %s guard line" % name)
        elif g[name]["on"] != (m.group(1) == "on"):
            bad.append("%s on=%r, text %r" % (name, g[name]["on"], m.group(1)))
        elif not g[name]["on"] and g[name].get("reason") != m.group(2):
            bad.append("%s reason %r, text %r" % (name, g[name].get("reason"), m.group(2)))
    if os.environ.get("EXECPACK_PKEY") == "0" and (g["pkey"]["on"] or
            g["pkey"]["reason"] != "turned off by EXECPACK_PKEY=0"):
        bad.append("EXECPACK_PKEY=0 gives pkey %r" % (g["pkey"],))
for k in ("vm.nr_hugepages", "vm.memfd_noexec", "vm.max_map_count", "page_size",
          "huge_page_size"):
    if k not in j["system"]:
        bad.append("system lacks %s" % k)
page, huge = j["system"].get("page_size"), j["system"].get("huge_page_size")
if page not in (4096, 16384, 65536):
    bad.append("page_size %r" % page)
if not isinstance(huge, int) or huge < 2 * 1024 * 1024 or huge & (huge - 1):
    bad.append("huge_page_size %r" % huge)
elif "free_hugepages_%dkB" % (huge // 1024) not in j["system"]:
    bad.append("system lacks free_hugepages_%dkB" % (huge // 1024))
for b in bad:
    print("FAIL: %s: %s" % (what, b))
sys.exit(1 if bad else 0)
PY
}
# Huge pages are shared with every other process: one may take the last
# free ones between the two runs.  A difference that goes away on a retry
# was such a change; one that stays is a failure.
compare() {
	for try in 1 2 3; do
		compare_once "$1" >"$tmp/cmp.out" 2>&1 && return 0
		sleep 1
	done
	cat "$tmp/cmp.out"
	failures=$((failures + 1))
}
unset EXECPACK_BACKEND
compare "default"
EXECPACK_BACKEND=memfd compare "EXECPACK_BACKEND=memfd"
EXECPACK_BACKEND=bogus compare "EXECPACK_BACKEND=bogus"
EXECPACK_PKEY=0 compare "EXECPACK_PKEY=0"
# quotes, a backslash, a control character and a byte that is not UTF-8
odd=$(printf 'a"b\\c\001d\377e')
EXECPACK_BACKEND=$odd "$info" --json >"$tmp/odd.json"
python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["environment"]["EXECPACK_BACKEND"]; sys.exit(e != "a\"b\\c\x01d\ufffde")' \
	"$tmp/odd.json" || fail "EXECPACK_BACKEND with odd bytes: $(cat "$tmp/odd.json")"

# --- EXECPACK_BACKEND naming no backend: every output says which setting --------
EXECPACK_BACKEND=bogus "$info" >"$tmp/bogus.txt" 2>&1
grep -q '^AUTO picks: nothing works: EXECPACK_BACKEND=bogus: not a backend' "$tmp/bogus.txt" ||
	fail "EXECPACK_BACKEND=bogus: the text output does not name it: $(grep AUTO "$tmp/bogus.txt")"
EXECPACK_BACKEND=bogus "$info" --quiet >"$tmp/bogus.q" 2>&1
[ $? -eq 1 ] || fail "EXECPACK_BACKEND=bogus: --quiet does not exit 1"
grep -q '^execpack-info: no backend works: EXECPACK_BACKEND=bogus: not a backend' "$tmp/bogus.q" ||
	fail "EXECPACK_BACKEND=bogus: --quiet says: $(cat "$tmp/bogus.q")"
EXECPACK_BACKEND=bogus "$info" --json >"$tmp/bogus.json"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1]))["auto"]["reason"]; sys.exit(not r.startswith("EXECPACK_BACKEND=bogus: "))' \
	"$tmp/bogus.json" || fail "EXECPACK_BACKEND=bogus: --json's auto.reason: $(grep reason "$tmp/bogus.json")"

# --- usage: an error names what is wrong, then the usage -------------------------
# usage_error WHAT ARGS...: exit 2, and stderr's first line is WHAT
usage_error() {
	what=$1
	shift
	"$info" "$@" >"$tmp/usage.out" 2>"$tmp/usage.err"
	rc=$?
	[ $rc -eq 2 ] || fail "execpack-info $*: exit $rc, not 2 (a usage error)"
	[ "$(head -n 1 "$tmp/usage.err")" = "execpack-info: $what" ] ||
		fail "execpack-info $*: the first line is '$(head -n 1 "$tmp/usage.err")', not 'execpack-info: $what'"
	grep -q '^usage: execpack-info' "$tmp/usage.err" || fail "execpack-info $*: no usage after the error"
	[ -s "$tmp/usage.out" ] && fail "execpack-info $*: wrote to standard output"
}
usage_error "--quiet and --json cannot be used together" --json --quiet
usage_error "unknown option '--bogus'" --bogus
usage_error "unknown option 'stray'" stray
usage_error "option '--path' needs an argument" --path

[ "$failures" -eq 0 ] || exit 1
echo "PASS: execpack-info --version and --json"
