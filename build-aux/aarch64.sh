#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The aarch64 stage of build-aux/run.sh: cross-builds the library and the
# Check suites (static) for aarch64, then boots Debian's arm64 kernels
# under qemu-system-aarch64 (TCG) with a busybox initramfs, through
# tests/kmod/check-kmod.sh: every suite runs inside, then the kernel
# module's suite with the module cross-built for that kernel.
#   build-aux/aarch64.sh BUILD_DIR RESULTS_DIR
# BUILD_DIR/aarch64 holds the build, BUILD_DIR/kernels the unpacked kernels.
# EP_AARCH64_SUITES (names such as "check_patch rust-patch") and
# EP_AARCH64_KERNELS ("4k", "16k") narrow a run to those;
# EP_AARCH64_SUITE_JOBS (1) is how many suites a multi-threaded boot runs
# at a time.
# Each kernel's results go to RESULTS_DIR/aarch64-<kernel>/ (automake-style
# .log/.trs per suite, stage.results for the module's suite).
# Exit: 0 all passed, 1 something failed, 77 not run (the reason printed).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$1
results=$2
b=$build/aarch64
jobs=$(nproc 2>/dev/null || echo 2)
host=aarch64-linux-gnu
t0=$(date +%s)

skip() {
	echo "SKIP: aarch64: $*"
	exit 77
}

for t in $host-gcc $host-pkg-config qemu-system-aarch64 cpio gzip; do
	command -v $t >/dev/null 2>&1 || skip "$t not found (build-aux/install-deps.sh cross)"
done
$host-pkg-config --exists check ||
	skip "no Check for arm64 (build-aux/install-deps.sh cross: check:arm64)"

# busybox for the guest: Debian's arm64 busybox-static, unpacked.
bb=$build/kernels/busybox-arm64
if [ ! -x "$bb/bin/busybox" ]; then
	rm -rf "$bb"
	mkdir -p "$bb/debs"
	(cd "$bb/debs" && apt-get download -q=2 busybox-static:arm64) >/dev/null 2>&1 &&
		dpkg -x "$bb"/debs/*.deb "$bb" || skip "cannot download busybox-static:arm64"
fi

# --- the build -----------------------------------------------------------------
echo "aarch64: cross build in $b"
mkdir -p "$b"
if [ ! -f "$b/Makefile" ]; then
	(cd "$b" && "$top/configure" --host=$host --enable-werror --enable-static \
		--disable-shared >configure.out 2>&1) || { tail -n 30 "$b/configure.out"; exit 1; }
fi
# The Check suites are tests/check_*; check_kmod runs after the module loads.
printf 'ep-print-suites:\n\t@echo $(check_PROGRAMS)\n' >"$b/print-suites.mk"
suites=$(make -s -C "$b" -f Makefile -f print-suites.mk ep-print-suites | tr ' ' '\n' |
	grep '^tests/check_' | grep -v '^tests/check_kmod$')
[ -n "$suites" ] || skip "configure did not find Check for $host"
if [ -n "${EP_AARCH64_SUITES:-}" ]; then
	want=$(for w in $EP_AARCH64_SUITES; do echo "tests/$w"; done)
	suites=$(echo "$suites" | grep -x -F "$want")
fi
# Everything static: the initramfs has no libc.  libunwind's static
# library needs liblzma.
# Relinked each time: make does not relink for other LDFLAGS.
(cd "$b" && rm -f $suites tests/kmod/check_kmod_static libexecpack/execpack-info tests/smc-probe)
# execpack-info runs in the guest too: what it says of the backends and
# page sizes is in its log.
make -C "$b" -j"$jobs" -k LDFLAGS=-all-static LIBS=-llzma $suites \
	tests/kmod/check_kmod_static libexecpack/execpack-info tests/smc-probe >"$b/make.out" 2>&1 || {
	grep -E 'error|Error' "$b/make.out" | head -n 20
	echo "aarch64: some programs did not build (they count as failures)"
}
rm -rf "$b/initrd-suites" "$b/initrd-single"
mkdir -p "$b/initrd-suites" "$b/initrd-single"
missing=""
for s in $suites libexecpack/execpack-info tests/smc-probe; do
	if [ -x "$b/$s" ]; then
		# Debug info out, symbols kept: check_diag names main in backtraces.
		$host-strip --strip-debug -o "$b/initrd-suites/${s##*/}" "$b/$s" || exit 1
	else
		missing="$missing ${s##*/}"
	fi
done

# The Rust binding's tests (rust/), cross-built static against this
# build's libexecpack.a with Debian's cargo and its arm64 standard library
# (libstd-rust-dev:arm64), run in the guest as suites named rust-*.  The
# compile-fail test needs a compiler and runs in the rust stage instead.
# (Debian's toolchain first, as in build-aux/rust.sh)
rpath=$PATH
[ -x /usr/bin/cargo ] && rpath=/usr/bin:$PATH
rsys=$(PATH=$rpath rustc --print sysroot 2>/dev/null)
case "${EP_AARCH64_SUITES:-rust-}" in *rust-*) want_rust=1 ;; *) want_rust=0 ;; esac
if [ $want_rust = 0 ]; then
	:
elif PATH=$rpath command -v cargo >/dev/null 2>&1 &&
	[ -d "$rsys/lib/rustlib/aarch64-unknown-linux-gnu" ]; then
	rt=aarch64-unknown-linux-gnu
	if (cd "$top/rust" && PATH=$rpath EXECPACK_STATIC=1 EXECPACK_LIB_DIR="$b/libexecpack/.libs" \
		PKG_CONFIG=$host-pkg-config PKG_CONFIG_PATH="$b" CARGO_TARGET_DIR="$b/rust-target" \
		CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=$host-gcc \
		RUSTFLAGS="-C target-feature=+crt-static" \
		cargo test --offline --locked --target $rt --no-run) >"$b/rust.out" 2>&1; then
		n=0
		for t in $(sed -n 's/^ *Executable tests\/\([a-z_]*\)\.rs (\(.*\))$/\1:\2/p' "$b/rust.out"); do
			[ "${t%%:*}" = compile_fail ] && continue
			case " ${EP_AARCH64_SUITES:-rust-${t%%:*}} " in *" rust-${t%%:*} "*) ;; *) continue ;; esac
			$host-strip --strip-debug -o "$b/initrd-suites/rust-${t%%:*}" "${t#*:}" || exit 1
			n=$((n + 1))
		done
		echo "aarch64: $n test programs of the Rust binding built"
		[ "$n" -gt 0 ] || missing="$missing rust-tests"
	else
		tail -n 20 "$b/rust.out"
		missing="$missing rust-tests"
	fi
else
	echo "aarch64: the Rust binding's tests are not run: no cargo, or no arm64 standard library (libstd-rust-dev:arm64; build-aux/install-deps.sh cross)"
fi
echo "aarch64: built in $(($(date +%s) - t0))s"

# qemu's multi-threaded TCG (its default here) misses some code changes
# made beside a thread running that code: a stale translation stays in
# use, with no libexecpack involved (tests/smc-probe shows it in each run:
# thousands of 20,000).  The suites that change code under a running
# thread therefore run in a second boot, with single-threaded TCG (two
# vCPUs still, taking turns), where the probe must see every change.
single="check_patch check_relink check_lookup rust-patch"
for s in $single; do
	[ -e "$b/initrd-suites/$s" ] && mv "$b/initrd-suites/$s" "$b/initrd-single/$s"
done
[ -e "$b/initrd-suites/smc-probe" ] && cp "$b/initrd-suites/smc-probe" "$b/initrd-single/smc-probe-strict"

# The 16 KiB-page kernel runs the suites whose work depends on the page
# size (packs, commit, alignment, placement, staging, patching); the rest
# do the same on both kernels and run on 4k only.  EP_AARCH64_16K="all"
# runs every suite there too.
p16="${EP_AARCH64_16K:-check_align check_auto check_commit check_data check_grain check_group check_hugetlb check_memfd check_near check_patch check_pool check_range check_relink check_route check_seal check_shrink check_stage check_symbols execpack-info rust-layout rust-stage smc-probe smc-probe-strict}"
for d in suites single; do
	rm -rf "$b/initrd-$d-16k"
	mkdir -p "$b/initrd-$d-16k"
	for f in "$b/initrd-$d"/*; do
		[ -e "$f" ] || continue
		case " $p16 " in *" all "* | *" ${f##*/} "*) ln "$f" "$b/initrd-$d-16k/" ;; esac
	done
done

# --- the kernels -----------------------------------------------------------------
rc=0
kernels=""
for k in 4k:linux-image-arm64 16k:linux-image-6.12-arm64-16k; do
	kn=${k%%:*}
	name=aarch64-$kn
	case " ${EP_AARCH64_KERNELS:-$kn} " in *" $kn "*) ;; *) continue ;; esac
	r=$results/$name
	rm -rf "$r"
	mkdir -p "$r"
	for m in $missing; do
		echo "$m did not build (see $b/make.out)" >"$r/$m.log"
		echo ":test-result: FAIL" >"$r/$m.trs"
		rc=1
	done
	if ! sh "$top/tests/kmod/fetch-kernel.sh" "$build/kernels/arm64-$kn" arm64 "${k#*:}" \
		>/dev/null 2>"$r/fetch.err"; then
		echo "SKIP: $name: $(tail -n 1 "$r/fetch.err")"
		echo "0 passed, 0 failed, 1 skipped" >"$r/stage.results"
		continue
	fi
	kernels="$kernels $kn"
done

# boot KERNEL SUITES_DIR WORK LOG [ENV=VALUE ...]: one boot of that kernel
boot() {
	(
		set -a
		. "$build/kernels/arm64-$1/kernel.env"
		set +a
		# 6 GiB: check_near maps GiBs of address space, which the
		# kernel's overcommit heuristic refuses beyond the guest's memory.
		export EP_KMOD_ARCH=aarch64 EP_KMOD_BUSYBOX="$bb/bin/busybox" \
			EP_KMOD_SUITES="$2" EP_KMOD_WORK="$3" EP_KMOD_LOG="$4" EP_KMOD_MEM=6144
		shift 4
		# What keeps the stage within its time on 2 cores (doc/performance.md).
		export EP_KMOD_TIMEOUT="${EP_AARCH64_TIMEOUT:-1200}" \
			EP_KMOD_SUITE_TIMEOUT="${EP_AARCH64_SUITE_TIMEOUT:-180}" "$@"
		sh "$top/tests/kmod/check-kmod.sh" "$top" "$b" tests/kmod/check_kmod_static
	)
}
single_dir() { if [ "$1" = 16k ]; then echo "$b/initrd-single-16k"; else echo "$b/initrd-single"; fi; }

# The single-threaded boots first, the kernels' side by side: each qemu
# runs all its vCPUs in one host thread, so one alone leaves a core idle.
t1=$(date +%s)
spids=""
for kn in $kernels; do
	[ -n "$(ls "$(single_dir "$kn")")" ] || continue
	boot "$kn" "$(single_dir "$kn")" "$b/qemu-$kn-single" "$b/check-kmod-$kn.log.single" \
		EP_KMOD_SUITES_ONLY=1 EP_KMOD_TCG_THREAD=single EP_KMOD_SUITE_JOBS=1 \
		>"$b/boot-$kn-single.out" 2>&1 &
	spids="$spids $!:$kn"
done
for p in $spids; do
	wait "${p%%:*}"
	echo "${p%%:*} $?" >"$b/boot-${p#*:}-single.rc"
done
[ -z "$spids" ] || echo "aarch64: single-threaded boots (${kernels# }), $(($(date +%s) - t1))s"

for kn in $kernels; do
	name=aarch64-$kn
	r=$results/$name
	kdir=$build/kernels/arm64-$kn
	work=$b/qemu-$kn
	log=$b/check-kmod-$kn.log
	t1=$(date +%s)
	if [ -f "$b/boot-$kn-single.rc" ]; then
		cat "$b/boot-$kn-single.out"
		srpc=$(cut -d' ' -f2 "$b/boot-$kn-single.rc")
		cp "$log.single" "$r/check-kmod-single.log"
		[ -d "$work-single/suites" ] &&
			cp "$work-single"/suites/*.log "$work-single"/suites/*.trs "$r/" 2>/dev/null
		[ "$srpc" -eq 0 ] || [ "$srpc" -eq 77 ] || grep -q FAIL "$work-single"/suites/*.trs ||
			{ echo "0 passed, 1 failed" >"$r/boot-single.results"; rc=1; }
		rm -f "$b/boot-$kn-single.rc"
	fi
	sdir=$b/initrd-suites
	[ "$kn" = 16k ] && sdir=$b/initrd-suites-16k
	# EP_AARCH64_SUITE_JOBS=2 runs the other suites two at a time (the
	# guest has two vCPUs, most suites keep one busy); a suite that keeps
	# both busy shares them then, so its limit is multiplied by that.
	# Not the default: the hugetlb suites share the huge pages then
	# (doc/performance.md).
	sj=${EP_AARCH64_SUITE_JOBS:-1}
	boot "$kn" "$sdir" "$work" "$log" EP_KMOD_SUITE_JOBS="$sj" \
		EP_KMOD_SUITE_TIMEOUT=$((${EP_AARCH64_SUITE_TIMEOUT:-180} * sj))
	krc=$?
	echo "$name: kernel $(sed -n 's/^KVER=//p' "$kdir/kernel.env"), $(($(date +%s) - t1))s"
	cp "$log" "$r/"
	[ -d "$work/suites" ] && cp "$work"/suites/*.log "$work"/suites/*.trs "$r/" 2>/dev/null
	grep -q ':test-result: FAIL' "$r"/*.trs 2>/dev/null && rc=1
	# The module's suite: its last run (as uid 1000), as run.sh's kmod stage.
	line=$(grep -E '^check-kmod: .*[0-9]+%: Checks: [0-9]+' "$log" | tail -n 1)
	if [ -n "$line" ]; then
		n=$(echo "$line" | sed 's/.*Checks: \([0-9]*\).*/\1/')
		f=$(echo "$line" | sed 's/.*Failures: \([0-9]*\).*/\1/')
		e=$(echo "$line" | sed 's/.*Errors: \([0-9]*\).*/\1/')
		echo "$((n - f - e)) passed, $((f + e)) failed" >"$r/stage.results"
		[ "$krc" -eq 0 ] || [ $((f + e)) -gt 0 ] || echo "0 passed, 1 failed" >"$r/boot.results"
	elif [ "$krc" -eq 77 ]; then
		grep '^SKIP' "$log" | head -n 1
		echo "0 passed, 0 failed, 1 skipped" >"$r/stage.results"
	else
		echo "0 passed, 1 failed" >"$r/stage.results"
	fi
	[ "$krc" -eq 0 ] || [ "$krc" -eq 77 ] || rc=1
	printf '%-16s %s\n' "$name" "$(sh "$top/build-aux/summarize-tests.sh" "$r" | tail -n 1)"
done
echo "aarch64: stage took $(($(date +%s) - t0))s"
exit $rc
