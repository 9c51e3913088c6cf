#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# secure-env.sh - the EXECPACK_* variables are ignored in a set-user-ID
# program: the library reads them with secure_getenv().  A copy of
# tests/secure-env-prog owned by root with the set-user-ID bit is run as
# uid 65534 (nobody) with the variables set; a copy without the bit, run
# the same way, shows that each of them counts where it is honoured:
#   - jitdump dir: the plain copy writes its jit-<pid>.dump into
#     EXECPACK_JITDUMP_DIR; the set-user-ID one writes /tmp's, not there;
#   - backend: EXECPACK_BACKEND=bogus makes the plain copy's pool fail;
#     the set-user-ID one gets its pool all the same;
#   - jitdump and perf map: for a pool without the flags, EXECPACK_JITDUMP=1
#     and EXECPACK_PERFMAP=1 make the plain copy write jit-<pid>.dump and
#     /tmp/perf-<pid>.map; the set-user-ID one writes neither.
# SKIP (77) without root, uid 65534 or setpriv(1), where the set-user-ID
# bit does not take effect (a nosuid mount, no_new_privs), where uid 65534
# cannot run programs from the build tree, and in sanitizer builds.
set -u
builddir=${top_builddir:-.}
prog=$builddir/tests/secure-env-prog
[ -x "$prog" ] || { echo "ERROR: $prog not built"; exit 99; }
unset LD_PRELOAD EXECPACK_BACKEND EXECPACK_JITDUMP EXECPACK_JITDUMP_DIR EXECPACK_PERFMAP

skip() {
	echo "SKIP: $*"
	exit 77
}
if [ -n "${EP_SANITIZER:-}" ]; then
	# the runtimes are not made for set-user-ID programs (LeakSanitizer's
	# check at exit, TSan's re-exec); the plain build covers the library
	skip "the program is built with ${EP_SANITIZER}: not run set-user-ID"
fi
[ "$(id -u)" = 0 ] || skip "needs root (a set-user-ID root copy of a program, run as uid 65534)"
command -v setpriv >/dev/null 2>&1 || skip "setpriv(1) (util-linux) is not installed"
getent passwd 65534 >/dev/null 2>&1 || skip "no user 65534 (nobody)"

tmp=$(mktemp -d "$builddir/tests/secure-env.XXXXXX") && tmp=$(cd "$tmp" && pwd) || exit 99
made=""
trap 'rm -rf "$tmp"; for f in $made; do rm -f "$f"; done' EXIT INT TERM
chmod 755 "$tmp"
dumps=$tmp/dumps
mkdir "$dumps" && chmod 1777 "$dumps" || exit 99
cp "$prog" "$tmp/plain" && cp "$prog" "$tmp/setuid" || exit 99
chown root:root "$tmp/plain" "$tmp/setuid" && chmod 755 "$tmp/plain" && chmod 4755 "$tmp/setuid" ||
	exit 99

failures=0
fail() {
	echo "FAIL: $*"
	failures=$((failures + 1))
}

# run NAME MODE VAR=VALUE...: the copy NAME as uid 65534 with the variables;
# sets out, rc and pid.
run() {
	name=$1 mode=$2
	shift 2
	out=$(setpriv --reuid=65534 --regid=65534 --clear-groups -- env "$@" "$tmp/$name" "$mode" 2>&1)
	rc=$?
	pid=$(echo "$out" | sed -n '1s/^pid \([0-9]*\) .*/\1/p')
	echo "$name $mode $*: exit $rc: $out"
	for f in "/tmp/jit-$pid.dump" "/tmp/perf-$pid.map"; do
		[ -n "$pid" ] && made="$made $f"
	done
}

# --- the plain copy: every variable counts ---------------------------------
run plain jitdump EXECPACK_JITDUMP_DIR="$dumps"
if [ "$rc" -ne 0 ] || [ -z "$pid" ]; then
	skip "uid 65534 cannot run the test program here (the build tree must be readable to it)"
fi
case $out in
*"secure 0"*) ;;
*) fail "the plain copy runs in secure mode: $out" ;;
esac
[ -f "$dumps/jit-$pid.dump" ] ||
	fail "the plain copy did not write its jitdump file into EXECPACK_JITDUMP_DIR"
run plain jitdump EXECPACK_BACKEND=bogus
[ "$rc" -eq 1 ] || fail "EXECPACK_BACKEND=bogus did not make the plain copy's pool fail (exit $rc)"
run plain env EXECPACK_JITDUMP=1 EXECPACK_PERFMAP=1 EXECPACK_JITDUMP_DIR="$dumps"
[ "$rc" -eq 0 ] || fail "the plain copy failed with EXECPACK_JITDUMP=1 EXECPACK_PERFMAP=1"
[ -f "$dumps/jit-$pid.dump" ] || fail "EXECPACK_JITDUMP=1: the plain copy wrote no jitdump file"
[ -f "/tmp/perf-$pid.map" ] || fail "EXECPACK_PERFMAP=1: the plain copy wrote no /tmp/perf-$pid.map"

# --- the set-user-ID copy: none does ---------------------------------------
run setuid jitdump EXECPACK_JITDUMP_DIR="$dumps"
case $out in
*"euid 0 secure 1"*) ;;
*)
	opts=$(findmnt -no OPTIONS -T "$tmp" 2>/dev/null)
	skip "the set-user-ID bit did not take effect (mount options: ${opts:-unknown}; no_new_privs: $(sed -n 's/^NoNewPrivs:[[:space:]]*//p' /proc/self/status))"
	;;
esac
[ "$rc" -eq 0 ] || fail "the set-user-ID copy failed (exit $rc)"
[ -e "$dumps/jit-$pid.dump" ] &&
	fail "the set-user-ID copy wrote its jitdump file into EXECPACK_JITDUMP_DIR"
[ -f "/tmp/jit-$pid.dump" ] ||
	fail "the set-user-ID copy did not write its jitdump file into /tmp, the default"
run setuid jitdump EXECPACK_BACKEND=bogus
[ "$rc" -eq 0 ] || fail "the set-user-ID copy honoured EXECPACK_BACKEND=bogus (exit $rc)"
run setuid env EXECPACK_JITDUMP=1 EXECPACK_PERFMAP=1 EXECPACK_JITDUMP_DIR="$dumps"
[ "$rc" -eq 0 ] || fail "the set-user-ID copy failed with EXECPACK_JITDUMP=1 EXECPACK_PERFMAP=1"
[ -e "$dumps/jit-$pid.dump" ] || [ -e "/tmp/jit-$pid.dump" ] &&
	fail "the set-user-ID copy honoured EXECPACK_JITDUMP=1"
[ -e "/tmp/perf-$pid.map" ] && fail "the set-user-ID copy honoured EXECPACK_PERFMAP=1"

[ "$failures" -eq 0 ] || exit 1
echo "PASS: the set-user-ID copy ignored every EXECPACK_* variable"
