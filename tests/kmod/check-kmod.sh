#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# check-kmod.sh - run tests/check_kmod inside a real kernel with the execpack
# module loaded.  Called by `make check-kmod`:
#   check-kmod.sh ABS_TOP_SRCDIR ABS_TOP_BUILDDIR TEST_BINARY
# Builds the module against an installed kernel's headers (by default the
# newest /boot/vmlinuz-* that has /lib/modules/<version>/build), or an
# unpacked one (tests/kmod/fetch-kernel.sh), boots that kernel under qemu
# with a busybox initramfs, and reads the result the guest prints on its
# serial console.  Exit: 0 pass, 1 fail, 77 skip.
#
# Environment:
#   KVER                 kernel version to build for and boot
#   EP_KMOD_KERNEL, EP_KMOD_KDIR   the kernel image and its headers' build
#                        directory, when not /boot/vmlinuz-KVER and
#                        /lib/modules/KVER/build (fetch-kernel.sh's kernel.env)
#   EP_KMOD_ARCH         x86_64 (default) or aarch64: the guest's architecture;
#                        aarch64 cross-builds the module and boots qemu's virt
#                        machine under TCG, with EP_KMOD_BUSYBOX
#   EP_KMOD_BUSYBOX      a static busybox for the guest (the host's)
#   EP_KMOD_SUITES       a directory of static test programs that the guest
#                        runs before the module's suite; their output goes to
#                        EP_KMOD_WORK/suites/NAME.log and .trs (automake's form)
#   EP_KMOD_SUITE_TIMEOUT  seconds each of those suites may take (300)
#   EP_KMOD_SUITE_JOBS   how many of those suites run at a time (1)
#   EP_KMOD_WORK, EP_KMOD_LOG   work directory and log (tests/kmod/build and
#                        tests/kmod/check-kmod.log under the build directory)
#   QEMU                 qemu binary (qemu-system-x86_64, qemu-system-aarch64)
#   EP_KMOD_ACCEL        auto (KVM if it boots, else TCG), kvm or tcg
#   EP_KMOD_KVM_PROBE    seconds KVM gets to reach /init before TCG (20)
#   EP_KMOD_KVM_CPU      qemu -cpu model under KVM (host)
#   EP_KMOD_TCG_THREAD   qemu's TCG threading under TCG: single or multi
#                        (qemu's default for the guest)
#   EP_KMOD_TIMEOUT      seconds for the whole boot and test run (600)
#   EP_KMOD_USER_LIMIT   the module's user_limit for the run (16 MiB)
#   EP_KMOD_SMP, EP_KMOD_MEM   guest CPUs (2) and memory in MiB (512)
#   EP_KMOD_MODULE       a module already built for KVER (e.g. by dkms from
#                        the Debian package) to test instead of building one
#   EP_KMOD_SUITES_ONLY  1: no module: the guest runs EP_KMOD_SUITES only
#                        (TEST_BINARY may be "-"; no kernel headers needed),
#                        and the run fails if one of them fails
set -u

srcdir=$1
builddir=$2
test_bin=$3

work=${EP_KMOD_WORK:-$builddir/tests/kmod/build}
log=${EP_KMOD_LOG:-$builddir/tests/kmod/check-kmod.log}
serial=$work/serial.log
mkdir -p "$work" || exit 1
: >"$log"

say() {
	echo "$*"
	echo "$*" >>"$log"
}
skip() {
	say "SKIP: check-kmod: $*"
	exit 77
}
fail() {
	say "FAIL: check-kmod: $*"
	exit 1
}

arch=${EP_KMOD_ARCH:-x86_64}
case $arch in
x86_64)
	QEMU=${QEMU:-qemu-system-x86_64}
	machine="" console=ttyS0 kbuild_args="" qemu_pkg=qemu-system-x86
	;;
aarch64)
	QEMU=${QEMU:-qemu-system-aarch64}
	machine="-M virt" console=ttyAMA0 qemu_pkg=qemu-system-arm
	kbuild_args="ARCH=arm64 CROSS_COMPILE=aarch64-linux-gnu-"
	;;
*) fail "EP_KMOD_ARCH must be x86_64 or aarch64, not $arch" ;;
esac
accel_mode=${EP_KMOD_ACCEL:-auto}
[ "$arch" = "$(uname -m)" ] || accel_mode=tcg
kvm_probe=${EP_KMOD_KVM_PROBE:-20}
kvm_cpu=${EP_KMOD_KVM_CPU:-host}
timeout=${EP_KMOD_TIMEOUT:-600}
user_limit=${EP_KMOD_USER_LIMIT:-16777216}
smp=${EP_KMOD_SMP:-2}
mem=${EP_KMOD_MEM:-512}

# --- tools and a kernel --------------------------------------------------------
command -v "$QEMU" >/dev/null 2>&1 ||
	skip "$QEMU not found (apt install $qemu_pkg)"
for t in cpio gzip; do
	command -v $t >/dev/null 2>&1 || skip "$t not found (build-aux/install-deps.sh kmod)"
done
busybox=${EP_KMOD_BUSYBOX:-$(command -v busybox 2>/dev/null || true)}
[ -n "$busybox" ] && [ -x "$busybox" ] || skip "busybox not found (apt install busybox-static)"
# The initramfs has no libc: busybox and the test must be static.
is_static() {
	! LC_ALL=C readelf -l "$1" 2>/dev/null | grep -q 'program interpreter'
}
command -v readelf >/dev/null 2>&1 || skip "readelf not found (binutils)"
is_static "$busybox" || skip "$busybox is dynamically linked (apt install busybox-static)"

if [ -z "${KVER:-}" ]; then
	for f in /boot/vmlinuz-*; do
		[ -e "$f" ] || continue
		v=${f#/boot/vmlinuz-}
		[ -e "/lib/modules/$v/build/Makefile" ] && echo "$v"
	done | sort -V | tail -n 1 >"$work/kver"
	KVER=$(cat "$work/kver")
fi
[ -n "$KVER" ] ||
	skip "no /boot/vmlinuz-* with matching headers (apt install linux-image-amd64 linux-headers-amd64)"
kernel=${EP_KMOD_KERNEL:-/boot/vmlinuz-$KVER}
kdir=${EP_KMOD_KDIR:-/lib/modules/$KVER/build}
suites_only=${EP_KMOD_SUITES_ONLY:-0}
[ "$suites_only" != 1 ] || [ -n "${EP_KMOD_SUITES:-}" ] ||
	fail "EP_KMOD_SUITES_ONLY=1 without EP_KMOD_SUITES"
[ -r "$kernel" ] || skip "$kernel not readable"
[ "$suites_only" = 1 ] || [ -e "$kdir/Makefile" ] ||
	skip "no headers for $KVER in $kdir (apt install linux-headers-amd64)"
say "check-kmod: kernel $KVER (host runs $(uname -r))"

# --- the module --------------------------------------------------------------------
mod=$work/module
rm -rf "$mod"
mkdir -p "$mod" || exit 1
if [ "$suites_only" = 1 ]; then
	say "check-kmod: no module (EP_KMOD_SUITES_ONLY=1): the suites only"
elif [ -n "${EP_KMOD_MODULE:-}" ]; then
	case $EP_KMOD_MODULE in
	*.ko.xz) xz -dc "$EP_KMOD_MODULE" >"$mod/execpack.ko" ;;
	*) cp "$EP_KMOD_MODULE" "$mod/execpack.ko" ;;
	esac || fail "cannot read $EP_KMOD_MODULE"
	v=$(LC_ALL=C modinfo -F vermagic "$mod/execpack.ko" 2>/dev/null | cut -d' ' -f1)
	[ -z "$v" ] || [ "$v" = "$KVER" ] || fail "$EP_KMOD_MODULE is built for $v, not $KVER"
	say "check-kmod: module $EP_KMOD_MODULE"
else
	cp "$srcdir/libexecpack/kmod/Kbuild" "$srcdir/libexecpack/kmod/execpack.c" \
		"$srcdir/libexecpack/kmod/execpack_uapi.h" "$mod/" || exit 1
	# Not the outer make's flags or variables: they are not meant for Kbuild.
	# shellcheck disable=SC2086
	if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -C "$kdir" M="$mod" $kbuild_args modules \
		>"$work/module-build.log" 2>&1; then
		cat "$work/module-build.log" >>"$log"
		tail -n 20 "$work/module-build.log"
		skip "the module does not build against $kdir (log above)"
	fi
	cat "$work/module-build.log" >>"$log"
	if grep -q 'warning:' "$work/module-build.log"; then
		grep 'warning:' "$work/module-build.log"
		fail "the module builds with warnings"
	fi
fi

# --- the initramfs --------------------------------------------------------------
root=$work/root
rm -rf "$root"
mkdir -p "$root/bin" || exit 1
cp "$busybox" "$root/bin/busybox" || exit 1
if [ "$suites_only" != 1 ]; then
	[ -x "$builddir/$test_bin" ] || fail "$test_bin was not built"
	is_static "$builddir/$test_bin" || fail "$test_bin is not statically linked"
	cp "$mod/execpack.ko" "$root/execpack.ko" &&
		cp "$builddir/$test_bin" "$root/check_kmod" || exit 1
fi
if [ -n "${EP_KMOD_SUITES:-}" ]; then
	mkdir -p "$root/suites" "$root/src" || exit 1
	for t in "$EP_KMOD_SUITES"/*; do
		is_static "$t" || fail "$t is not statically linked"
		cp "$t" "$root/suites/" || exit 1
	done
	# Suites that read the sources find them under $top_srcdir.
	cp -R "$srcdir/include" "$srcdir/libexecpack" "$srcdir/doc" "$root/src/" || exit 1
fi
# Check's timeouts, scaled for an emulated CPU.
ck_mult=1
[ "$accel_mode" = tcg ] && ck_mult=10
sed -e "s|@USER_LIMIT@|$user_limit|g" -e "s|@GUEST_TIMEOUT@|$((timeout - 30))|g" \
	-e "s|@CK_MULT@|$ck_mult|g" -e "s|@SUITE_TIMEOUT@|${EP_KMOD_SUITE_TIMEOUT:-300}|g" \
	-e "s|@SUITE_JOBS@|${EP_KMOD_SUITE_JOBS:-1}|g" \
	"$srcdir/tests/kmod/init.in" >"$root/init" || exit 1
chmod 755 "$root/init" "$root/bin/busybox"
[ "$suites_only" = 1 ] || chmod 755 "$root/check_kmod"
initrd=$work/initrd.gz
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) | gzip -1 >"$initrd" ||
	fail "cannot make the initramfs"

# --- boot ---------------------------------------------------------------------------
# run_qemu ACCEL PROBE: boots once; PROBE > 0 gives up early (rc 3) when
# /init has not started by then.  Sets $elapsed (seconds, ms precision).
run_qemu() {
	case $1 in
	kvm) aopt="-accel kvm -cpu $kvm_cpu" ;;
	*) aopt="-accel tcg${EP_KMOD_TCG_THREAD:+,thread=$EP_KMOD_TCG_THREAD} -cpu max" ;;
	esac
	: >"$serial"
	rm -f "$work/qemu.pid" "$work/qemu.rc"
	t0=$(date +%s%N)
	# In a subshell that records the exit status, so that a qemu dying of a
	# signal does not print a job notice here; -pidfile is what we kill.
	(
		# shellcheck disable=SC2086
		"$QEMU" $machine $aopt -smp "$smp" -m "$mem" -display none -monitor none -no-reboot \
			-serial "file:$serial" -kernel "$kernel" -initrd "$initrd" \
			-pidfile "$work/qemu.pid" -append "console=$console panic=-1 quiet" \
			</dev/null >"$work/qemu-$1.log" 2>&1
		echo $? >"$work/qemu.rc"
	) 2>>"$work/qemu-$1.log" &
	spid=$!
	ticks=0
	qrc=
	while kill -0 "$spid" 2>/dev/null; do
		if [ "$2" -gt 0 ] && [ "$ticks" -ge $(($2 * 5)) ] &&
			! grep -q 'EXECPACK-KMOD: init started' "$serial"; then
			qrc=3
		elif [ "$ticks" -ge $((timeout * 5)) ]; then
			qrc=124
		fi
		if [ -n "$qrc" ]; then
			if [ -s "$work/qemu.pid" ]; then
				kill "$(cat "$work/qemu.pid")" 2>/dev/null
			else
				kill "$spid" 2>/dev/null
			fi
			break
		fi
		sleep 0.2
		ticks=$((ticks + 1))
	done
	wait "$spid"
	[ -n "$qrc" ] || qrc=$(cat "$work/qemu.rc" 2>/dev/null || echo 1)
	t1=$(date +%s%N)
	elapsed=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
	if [ "$qrc" -ne 124 ] && ! grep -q 'EXECPACK-KMOD: init started' "$serial"; then
		qrc=3 # qemu gave up (e.g. an unsupported CPU model) before /init
	fi
	return "$qrc"
}

kvm_usable() {
	[ -c /dev/kvm ] && [ -r /dev/kvm ] && [ -w /dev/kvm ]
}

accel=
case $accel_mode in
kvm)
	kvm_usable || skip "EP_KMOD_ACCEL=kvm but /dev/kvm is not usable"
	accel=kvm
	run_qemu kvm 0
	qrc=$?
	;;
tcg)
	accel=tcg
	run_qemu tcg 0
	qrc=$?
	;;
auto)
	qrc=3
	if kvm_usable; then
		accel=kvm
		run_qemu kvm "$kvm_probe"
		qrc=$?
		if [ "$qrc" -eq 3 ]; then
			why=$(grep -m 1 "^${QEMU##*/}:" "$work/qemu-kvm.log" || tail -n 1 "$work/qemu-kvm.log")
			say "check-kmod: KVM did not reach /init (${elapsed}s: $why); using TCG"
			cat "$work/qemu-kvm.log" >>"$log"
		fi
	fi
	if [ "$qrc" -eq 3 ]; then
		accel=tcg
		run_qemu tcg 0
		qrc=$?
	fi
	;;
*) fail "EP_KMOD_ACCEL must be auto, kvm or tcg, not $accel_mode" ;;
esac

tr -d '\r' <"$serial" >"$work/console.log"

# Each suite's lines, as automake's test driver would keep them.
if [ -n "${EP_KMOD_SUITES:-}" ]; then
	rm -rf "$work/suites"
	mkdir -p "$work/suites"
	for t in "$EP_KMOD_SUITES"/*; do
		n=${t##*/}
		sed -n "/^EXECPACK-SUITE: start $n\$/,/^EXECPACK-SUITE: end $n rc=/p" \
			"$work/console.log" >"$work/suites/$n.log"
		r=$(sed -n "s/^EXECPACK-SUITE: end $n rc=\([0-9]*\)\$/\1/p" "$work/suites/$n.log")
		case $r in
		0) res=PASS ;;
		77) res=SKIP ;;
		*) res=FAIL ;;
		esac
		echo ":test-result: $res" >"$work/suites/$n.trs"
		say "$res: $n${r:+ (exit $r)}$(grep -E '^[0-9]+%: Checks:' "$work/suites/$n.log" | tail -n 1 | sed 's/^/: /')"
	done
fi
{
	echo "---- guest console ($accel) ----"
	cat "$work/console.log"
	echo "---- qemu ----"
	cat "$work/qemu-$accel.log"
} >>"$log"

grep -E '^EXECPACK-KMOD|^[0-9]+%: Checks:|check_kmod\.c:[0-9]+:|^(PASS|FAIL): denied' "$work/console.log"
say "check-kmod: boot+test took ${elapsed}s with $accel (qemu exit $qrc)"

# One Check summary per run of the suite (root, then uid 1000).
sed -n '/^EXECPACK-KMOD: module loaded/,$p' "$work/console.log" |
	grep -E '^EXECPACK-KMOD: suite as |^[0-9]+%: Checks: [0-9]+' |
	sed -n '/suite as /{s/.*suite as //;h;d};G;s/\(.*\)\n\(.*\)/check-kmod: \2: \1/p' >"$work/summary"
while read -r line; do say "$line"; done <"$work/summary"
result=$(sed -n 's/^EXECPACK-KMOD-RESULT rc=\([0-9]*\).*/\1/p' "$work/console.log" | tail -n 1)
if [ "$qrc" -eq 124 ]; then
	fail "qemu timed out after ${timeout}s (see $log)"
fi
if [ "$suites_only" = 1 ] && grep -q ':test-result: FAIL' "$work"/suites/*.trs 2>/dev/null; then
	fail "$(grep -l ':test-result: FAIL' "$work"/suites/*.trs | sed 's|.*/||; s|\.trs$||' |
		tr '\n' ' ')failed (see $log)"
fi
case $result in
0) say "PASS: check-kmod ($accel, ${elapsed}s)"; exit 0 ;;
'') fail "no result from the guest (see $log)" ;;
*) fail "the guest reported rc=$result (see $log)" ;;
esac
