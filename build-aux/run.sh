#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Sets up a bare Debian machine for libexecpack and runs the demo or the
# whole test suite.  Used by the README's quick start and by CI.
#
#   build-aux/run.sh demo   install what is missing, build, run the demo
#   build-aux/run.sh test   install what is missing, build, run every test
#                           stage; ends with "N passed, N failed"
#
# Environment: BUILD_DIR (default ./_build), STAGES (test stages to run,
# default all: check rust llvm valgrind kmod pku aarch64 riscv64 sanitizers fuzz clients debian distcheck),
# EP_TEST_BUDGET (seconds the whole test run may take, default 5100: CI allows 5400).
#
# Every stage runs under timeout(1) with its own limit, cut to what is left
# of the budget: a hung test fails its stage and the run still ends with
# its totals, instead of the run being killed from outside with none.
set -u
started=$(date +%s)
budget=${EP_TEST_BUDGET:-5100}
top=$(cd "$(dirname "$0")/.." && pwd)
mode=${1:-test}
build=${BUILD_DIR:-$top/_build}
results=$build/results
jobs=$(nproc 2>/dev/null || echo 2)

say() { printf '\n=== %s  [%ss]\n' "$*" $(($(date +%s) - started)); }

case $mode in
demo) sh "$top/build-aux/install-deps.sh" base || exit 1 ;;
test) sh "$top/build-aux/install-deps.sh" all || exit 1 ;;
*) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

say "configure and build"
(cd "$top" && ./bootstrap) || exit 1
mkdir -p "$build/main"
if [ ! -f "$build/main/Makefile" ]; then
	(cd "$build/main" && "$top/configure" --enable-werror) || exit 1
fi
make -C "$build/main" -j"$jobs" || exit 1

if [ "$mode" = demo ]; then
	say "demo"
	if [ -x "$build/main/examples/ebpf/ebpf-demo" ]; then
		exec "$build/main/examples/ebpf/ebpf-demo"
	fi
	exec "$build/main/examples/pack-demo"
fi

rm -rf "$results"
mkdir -p "$results"
status=0

# Keep a stage's automake logs: later stages reuse the same file names.
keep_logs() {
	mkdir -p "$results/$1"
	(cd "$2" && find . -name '*.trs' | while read -r t; do
		d=$results/$1/$(dirname "$t")
		mkdir -p "$d"
		cp "$t" "$d/"
		[ -f "${t%.trs}.log" ] && cp "${t%.trs}.log" "$d/"
	done)
	return 0
}

# A stage that failed without leaving test logs still counts as a failure.
record() { # name passed failed [skipped]
	mkdir -p "$results/$1"
	echo "$2 passed, $3 failed, ${4:-0} skipped" > "$results/$1/stage.results"
}

# limit NAME SECONDS: run the rest of the line under timeout(1) with the
# stage's limit, or what is left of the budget (minus a margin for the
# totals) if that is less.  A stage that ran out of time is recorded as a
# failure of its own, "NAME-timeout".
limit() {
	lname=$1 lsecs=$2
	shift 2
	left=$((budget - ($(date +%s) - started) - 120))
	[ "$left" -lt "$lsecs" ] && lsecs=$left
	if [ "$lsecs" -lt 30 ]; then
		echo "$lname: not run, the test budget (${budget}s) is spent"
		record "$lname-timeout" 0 1
		return 124
	fi
	timeout -k 30 "$lsecs" "$@"
	lrc=$?
	if [ "$lrc" -eq 124 ] || [ "$lrc" -eq 137 ]; then
		echo "$lname: timed out after ${lsecs}s"
		record "$lname-timeout" 0 1
	fi
	return "$lrc"
}

want() { case " ${STAGES:-check rust llvm valgrind kmod pku aarch64 riscv64 sanitizers fuzz clients debian distcheck} " in *" $1 "*) return 0 ;; esac; return 1; }

# Huge pages for the hugetlb tests; the old value is put back at exit.
old_hp=""
if [ -w /proc/sys/vm/nr_hugepages ]; then
	old_hp=$(cat /proc/sys/vm/nr_hugepages)
	want_hp=$((old_hp < 16 ? 16 : old_hp))
	echo "$want_hp" > /proc/sys/vm/nr_hugepages 2>/dev/null || true
	trap 'echo "$old_hp" > /proc/sys/vm/nr_hugepages' EXIT
	# a signal ends the run (the EXIT trap still restores the setting)
	trap 'exit 143' INT TERM
	echo "vm.nr_hugepages: $old_hp -> $(cat /proc/sys/vm/nr_hugepages) for the tests"
fi

if want check; then
	say "make check"
	limit check 1800 make -C "$build/main" -j"$jobs" check || status=1
	keep_logs check "$build/main"
fi

# rust: the binding's crates (rust/) against the library just built, with
# Debian's cargo and rustc (build-aux/rust.sh; SKIP without them).
if want rust; then
	say "rust: cargo build, test and doc (offline) of rust/, and its examples"
	limit rust 900 sh "$top/build-aux/rust.sh" "$build/main" "$results"
	rc=$?
	if [ "$rc" -eq 77 ]; then
		record rust 0 0 1
	elif [ "$rc" -ne 0 ]; then
		status=1
		[ -f "$results/rust/stage.results" ] || record rust 0 1
	fi
fi

# llvm: csmith's random C programs under LLJIT on ExecpackMemoryManager,
# checksums against native builds at -O0 and -O2, a C++ exception through
# JIT frames, perf's map, ORC's threads (build-aux/llvm.sh; SKIP without
# LLVM 19, clang-19 or csmith).
if want llvm; then
	say "llvm: csmith programs under LLJIT on libexecpack (build-aux/llvm.sh)"
	limit llvm 600 sh "$top/build-aux/llvm.sh" "$build/main" "$results"
	rc=$?
	if [ "$rc" -eq 77 ]; then
		record llvm 0 0 1
	elif [ "$rc" -ne 0 ]; then
		status=1
		[ -f "$results/llvm/stage.results" ] || record llvm 0 1
	fi
fi

if want valgrind; then
	say "make check-valgrind"
	limit valgrind 2400 make -C "$build/main" -j"$jobs" check-valgrind || status=1
	keep_logs valgrind "$build/main"
fi

# kmod_record NAME LOG RC: the result of a check-kmod.sh run, by the last
# Check summary in its log.
kmod_record() {
	line=$(grep -E '^check-kmod: .*[0-9]+%: Checks: [0-9]+' "$2" 2>/dev/null | tail -1)
	if [ "$3" -eq 0 ] && [ -n "$line" ]; then
		n=$(echo "$line" | sed 's/.*Checks: \([0-9]*\).*/\1/')
		f=$(echo "$line" | sed 's/.*Failures: \([0-9]*\).*/\1/')
		e=$(echo "$line" | sed 's/.*Errors: \([0-9]*\).*/\1/')
		record "$1" $((n - f - e)) $((f + e))
	elif grep -q '^SKIP' "$2" 2>/dev/null || [ "$3" -eq 77 ]; then
		grep '^SKIP' "$2" 2>/dev/null | head -1
		record "$1" 0 0 1
	else
		record "$1" 0 1
		status=1
	fi
}

if want kmod; then
	say "make check-kmod (kernel module in a real kernel under qemu)"
	limit kmod 1200 make -C "$build/main" check-kmod
	kmod_record kmod "$build/main/tests/kmod/check-kmod.log" $?
	# Debian's 6.12 kernel too (bookworm-security), unpacked, not installed:
	# the module's code for 6.3 and later is built and run there.
	say "check-kmod on Debian's 6.12 kernel"
	k=$build/kernels/amd64-6.12
	log=$build/main/tests/kmod/check-kmod-6.12.log
	if sh "$top/tests/kmod/fetch-kernel.sh" "$k" amd64 linux-image-6.12-amd64 >/dev/null 2>"$results/fetch-6.12.err"; then
		(set -a && . "$k/kernel.env" && EP_KMOD_WORK=$build/main/tests/kmod/build-6.12 \
			EP_KMOD_LOG=$log limit kmod-6.12 900 make -C "$build/main" check-kmod)
		kmod_record kmod-6.12 "$log" $?
	else
		cat "$results/fetch-6.12.err"
		echo "SKIP: check-kmod 6.12: $(tail -n 1 "$results/fetch-6.12.err")" | tee "$log"
		record kmod-6.12 0 0 1
	fi
fi

# pku: the protection key on the writable alias, in a CPU that has keys
# whatever this machine's: qemu-system-x86_64 -accel tcg -cpu max, Debian's
# 6.12 kernel, the suites that must pass with the key on (about 2 minutes).
if want pku; then
	say "pku: protection keys under qemu-system-x86_64 -cpu max (TCG)"
	limit pku 900 sh "$top/build-aux/pku.sh" "$build" "$results"
	rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		status=1
		ls "$results"/pku/*.trs "$results"/pku/*.results >/dev/null 2>&1 || record pku 0 1
	fi
fi

if want aarch64; then
	say "aarch64: the suites and the module on Debian's arm64 kernels under qemu"
	limit aarch64 2700 sh "$top/build-aux/aarch64.sh" "$build" "$results"
	rc=$?
	if [ "$rc" -eq 77 ]; then
		record aarch64 0 0 1
	elif [ "$rc" -ne 0 ]; then
		status=1
		ls "$results"/aarch64-*/stage.results >/dev/null 2>&1 || record aarch64 0 1
	fi
fi

# riscv64: a cross build, and the trap fill run under qemu-user.  bookworm
# has no riscv64 port, so no Check and no kernel image for riscv64
# (doc/performance.md); qemu-user runs tests/fill-trap, which executes only
# code never run before (qemu-user does not translate code again after it
# changes through another mapping).
if want riscv64; then
	say "riscv64: cross build of the library, the trap fill under qemu-user"
	rb=$build/riscv64
	mkdir -p "$rb"
	if ! command -v riscv64-linux-gnu-gcc >/dev/null 2>&1; then
		echo "SKIP: riscv64: riscv64-linux-gnu-gcc not found (build-aux/install-deps.sh cross)"
		record riscv64 0 0 1
	elif (cd "$rb" && { [ -f Makefile ] || "$top/configure" --host=riscv64-linux-gnu \
		--enable-werror --enable-static --disable-shared; } &&
		rm -f tests/fill-trap &&
		limit riscv64 900 make -j"$jobs" libexecpack/libexecpack.la libexecpack/execpack-info \
			tests/fill-trap LDFLAGS=-all-static) \
		>"$results/riscv64.out" 2>&1; then
		echo "riscv64: libexecpack.a, execpack-info and tests/fill-trap built"
		if ! command -v qemu-riscv64 >/dev/null 2>&1; then
			echo "SKIP: riscv64: qemu-riscv64 not found (build-aux/install-deps.sh cross)"
			record riscv64 1 0 1
		elif limit riscv64-fill 300 qemu-riscv64 "$rb/tests/fill-trap"; then
			record riscv64 2 0
		else
			record riscv64 1 1
			status=1
		fi
	else
		tail -n 20 "$results/riscv64.out"
		record riscv64 0 1
		status=1
	fi
fi

if want sanitizers && [ -x "$top/build-aux/sanitizers.sh" ]; then
	say "sanitizers (TSan, ASan, UBSan)"
	SAN_BUILDDIR=$build/san
	export SAN_BUILDDIR
	limit sanitizers 2400 "$top/build-aux/sanitizers.sh" || status=1
	for d in "$build"/san/*/; do
		[ -d "$d" ] && keep_logs "san-$(basename "$d")" "$d"
	done
fi

if want fuzz && [ -x "$top/tests/fuzz-smoke.sh" ]; then
	say "fuzz smoke run"
	if (cd "$build/main" && limit fuzz 900 sh "$top/tests/fuzz-smoke.sh") > "$results/fuzz.out" 2>&1; then
		record fuzz 1 0
	elif [ $? -eq 77 ]; then
		record fuzz 0 0 1
	else
		record fuzz 0 1
		status=1
	fi
	tail -20 "$results/fuzz.out"
fi

# clients: a real JIT on libexecpack.  PCRE2 from Debian's source package
# (deb-src: install-deps.sh), stock and with its JIT's code in libexecpack
# through examples/sljit/, runs pcre2_jit_test and RunTest; every result
# that passes stock must pass on libexecpack (build-aux/clients.sh; about
# 4 minutes on 2 busy cores).
if want clients; then
	say "clients: PCRE2's JIT on libexecpack (examples/sljit/)"
	limit clients 600 sh "$top/build-aux/clients.sh" "$build" "$results"
	rc=$?
	if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
		status=1
		ls "$results"/clients/*.results >/dev/null 2>&1 || record clients 0 1
	fi
fi

if want debian && [ -f "$top/tests/check-debian.sh" ]; then
	say "Debian packages"
	limit debian 1500 sh "$top/tests/check-debian.sh" > "$results/debian.out" 2>&1
	rc=$?
	tail -30 "$results/debian.out"
	mkdir -p "$results/debian"
	if grep -qE '^[0-9]+ passed, [0-9]+ failed' "$results/debian.out"; then
		grep -E '^[0-9]+ passed, [0-9]+ failed' "$results/debian.out" | tail -1 > "$results/debian/stage.results"
	elif [ "$rc" -eq 77 ]; then
		record debian 0 0 1
	else
		record debian 0 1
	fi
	[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || status=1
fi

if want distcheck; then
	say "make distcheck"
	if limit distcheck 1500 make -C "$build/main" -j"$jobs" distcheck DISTCHECK_CONFIGURE_FLAGS=--enable-werror > "$results/distcheck.out" 2>&1; then
		record distcheck 1 0
		grep -E 'archives ready|\.tar\.gz' "$results/distcheck.out" | tail -3
	else
		tail -40 "$results/distcheck.out"
		record distcheck 0 1
		status=1
	fi
fi

say "totals"
for d in "$results"/*/; do
	printf '%-16s %s\n' "$(basename "$d")" "$(sh "$top/build-aux/summarize-tests.sh" "$d" | tail -1)"
done
# What failed, by name, where a log says: CI shows only the end of this.
if [ "$status" -ne 0 ]; then
	echo "failed:"
	find "$results" -name '*.trs' -exec grep -l ':test-result: \(FAIL\|ERROR\)' {} + 2>/dev/null |
		sed "s|^$results/|  |" | head -n 30
	find "$results" \( -name '*.log' -o -name '*.out' \) -exec grep -hE ':[0-9]+:[FE]:|^  failed: ' {} + 2>/dev/null |
		sort -u | cut -c1-300 | head -n 30 | sed 's/^/  /'
fi
sh "$top/build-aux/summarize-tests.sh" "$results"
exit $status
