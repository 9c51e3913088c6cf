#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The pku stage of build-aux/run.sh: the protection key on the writable
# alias (libexecpack(7), "Hardware guards") tested in a CPU that has keys,
# whatever the machine: Debian's 6.12 amd64 kernel booted under
# qemu-system-x86_64 -accel tcg -cpu max (TCG implements PKU) with a busybox
# initramfs, through tests/kmod/check-kmod.sh without the module.  The
# guest runs, statically linked, tests/check_pkey (which must PASS here,
# never SKIP), and with the key on (the default) the suites that drive the
# library hardest: check_pool, check_threads, check_remote, check_fork and
# check_shrink; and execpack-info.
#   build-aux/pku.sh BUILD_DIR RESULTS_DIR
# BUILD_DIR/pku holds the build, BUILD_DIR/kernels/amd64-6.12 the kernel.
# RESULTS_DIR/pku/ gets an automake-style .log/.trs per suite.
# Exit: 0 all passed, 1 something failed, 77 not run (the reason printed).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$1
results=$2
b=$build/pku
r=$results/pku
jobs=$(nproc 2>/dev/null || echo 2)
t0=$(date +%s)
suites="tests/check_pkey tests/check_pool tests/check_threads tests/check_remote \
tests/check_fork tests/check_shrink"

skip() {
	echo "SKIP: pku: $*"
	mkdir -p "$r"
	echo "0 passed, 0 failed, 1 skipped" >"$r/stage.results"
	exit 77
}

[ "$(uname -m)" = x86_64 ] || skip "the guest is x86-64: run on an x86-64 machine"
for t in qemu-system-x86_64 cpio gzip; do
	command -v $t >/dev/null 2>&1 || skip "$t not found (build-aux/install-deps.sh kmod)"
done

# --- the build: static, the initramfs has no libc ------------------------------
echo "pku: static build in $b"
mkdir -p "$b"
if [ ! -f "$b/Makefile" ]; then
	(cd "$b" && "$top/configure" --enable-werror --enable-static --disable-shared \
		>configure.out 2>&1) || { tail -n 30 "$b/configure.out"; exit 1; }
fi
printf 'ep-print-suites:\n\t@echo $(check_PROGRAMS)\n' >"$b/print-suites.mk"
make -s -C "$b" -f Makefile -f print-suites.mk ep-print-suites | tr ' ' '\n' |
	grep -qx tests/check_pkey || skip "configure did not find Check"
# Relinked each time: make does not relink for other LDFLAGS.
(cd "$b" && rm -f $suites libexecpack/execpack-info)
# shellcheck disable=SC2086
make -C "$b" -j"$jobs" -k LDFLAGS=-all-static LIBS=-llzma $suites libexecpack/execpack-info \
	>"$b/make.out" 2>&1 || {
	grep -E 'error|Error' "$b/make.out" | head -n 20
	echo "pku: some programs did not build (they count as failures)"
}
rm -rf "$b/initrd-suites" "$r"
mkdir -p "$b/initrd-suites" "$r"
rc=0
for s in $suites libexecpack/execpack-info; do
	if [ -x "$b/$s" ]; then
		strip --strip-debug -o "$b/initrd-suites/${s##*/}" "$b/$s" || exit 1
	else
		echo "${s##*/} did not build (see $b/make.out)" >"$r/${s##*/}.log"
		echo ":test-result: FAIL" >"$r/${s##*/}.trs"
		rc=1
	fi
done
echo "pku: built in $(($(date +%s) - t0))s"

# --- the kernel ----------------------------------------------------------------------
kdir=$build/kernels/amd64-6.12
if ! sh "$top/tests/kmod/fetch-kernel.sh" "$kdir" amd64 linux-image-6.12-amd64 \
	>/dev/null 2>"$r/fetch.err"; then
	skip "$(tail -n 1 "$r/fetch.err")"
fi
work=$b/qemu
log=$b/check-pku.log
t1=$(date +%s)
(
	set -a
	. "$kdir/kernel.env"
	set +a
	# TCG, never KVM: the point is a CPU with keys on any machine.  1 GiB:
	# check_pool maps large regions.
	export EP_KMOD_ACCEL=tcg EP_KMOD_SUITES_ONLY=1 EP_KMOD_SUITES="$b/initrd-suites" \
		EP_KMOD_WORK="$work" EP_KMOD_LOG="$log" EP_KMOD_MEM=1024 \
		EP_KMOD_TIMEOUT="${EP_PKU_TIMEOUT:-600}" \
		EP_KMOD_SUITE_TIMEOUT="${EP_PKU_SUITE_TIMEOUT:-180}"
	sh "$top/tests/kmod/check-kmod.sh" "$top" "$b" -
)
krc=$?
echo "pku: kernel $(sed -n 's/^KVER=//p' "$kdir/kernel.env"), $(($(date +%s) - t1))s"
cp "$log" "$r/" 2>/dev/null
[ -d "$work/suites" ] && cp "$work"/suites/*.log "$work"/suites/*.trs "$r/" 2>/dev/null
# The guest's CPU has keys: check_pkey must run, a SKIP is a failure.
if ! grep -q ':test-result: PASS' "$r/check_pkey.trs" 2>/dev/null; then
	echo "pku: check_pkey did not pass in the guest: $(grep -E '^(SKIP|FAIL)' "$r/check_pkey.log" 2>/dev/null | head -n 1)"
	echo ":test-result: FAIL" >"$r/check_pkey.trs"
	rc=1
fi
grep -q ':test-result: FAIL' "$r"/*.trs 2>/dev/null && rc=1
if [ "$krc" -ne 0 ] && [ "$krc" -ne 77 ]; then
	# a boot or guest failure that left no suite failed
	grep -q ':test-result: FAIL' "$r"/*.trs 2>/dev/null || echo "0 passed, 1 failed" >"$r/boot.results"
	rc=1
fi
grep -E '^(PASS|FAIL|SKIP): ' "$log" 2>/dev/null
echo "pku: stage took $(($(date +%s) - t0))s"
exit $rc
