#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Run `make check` under ThreadSanitizer, AddressSanitizer (+LeakSanitizer)
# and UndefinedBehaviorSanitizer, each in its own out-of-tree build.
#
# Usage: build-aux/sanitizers.sh [tsan] [asan] [ubsan]   (default: all three)
# Environment:
#   CC            compiler (default: clang if installed, else gcc)
#   SAN_BUILDDIR  where the build trees go (default: a new temporary directory)
#   SAN_JOBS      parallel make jobs (default: number of CPUs)
#   SAN_CONFIGURE_FLAGS  extra configure arguments (default --without-llvm:
#                        LLVM's own libraries are not instrumented)
#
# A sanitizer report fails the test that triggered it (halt_on_error, and
# -fno-sanitize-recover=all for UBSan).  Tests that cannot run under a given
# sanitizer say so themselves with a SKIP line and exit status 77; this
# script lists those SKIP reasons per run.  Exit status: 0 only if every
# run passed.
set -u

srcdir=$(cd "$(dirname "$0")/.." && pwd)
if [ ! -x "$srcdir/configure" ]; then
	(cd "$srcdir" && ./bootstrap) || { echo "sanitizers: bootstrap failed" >&2; exit 2; }
fi

if [ -z "${CC:-}" ]; then
	if command -v clang >/dev/null 2>&1; then CC=clang; else CC=gcc; fi
fi
jobs=${SAN_JOBS:-$(nproc 2>/dev/null || echo 2)}
root=${SAN_BUILDDIR:-}
if [ -z "$root" ]; then
	root=$(mktemp -d "${TMPDIR:-/tmp}/execpack-san.XXXXXX") || exit 2
fi
mkdir -p "$root" || exit 2

runs=${*:-tsan asan ubsan}
common="-O1 -g -fno-omit-frame-pointer"
summary=""
failed=0

# Options that make every report fatal and readable.  handle_segv=0 and
# handle_sigbus=0: the crash tests expect a process to die of SIGSEGV or
# SIGBUS (a store through the exec view); the sanitizers' own handlers would
# turn that into exit(1).  An unexpected fault still fails its test.
sig="handle_segv=0:handle_sigbus=0"
export ASAN_OPTIONS="$sig:detect_leaks=1:halt_on_error=1:abort_on_error=0:detect_stack_use_after_return=1:strict_string_checks=1:check_initialization_order=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="report_objects=1${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
export UBSAN_OPTIONS="$sig:print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export TSAN_OPTIONS="$sig:halt_on_error=1:second_deadlock_stack=1:die_after_fork=0${TSAN_OPTIONS:+:$TSAN_OPTIONS}"

for san in $runs; do
	case $san in
	tsan) flags="-fsanitize=thread" ;;
	asan) flags="-fsanitize=address" ;;
	ubsan) flags="-fsanitize=undefined -fno-sanitize-recover=all" ;;
	*) echo "sanitizers: unknown run '$san' (tsan, asan, ubsan)" >&2; exit 2 ;;
	esac
	dir=$root/$san
	rm -rf "$dir"
	mkdir -p "$dir"
	echo "=== $san: $CC $flags, in $dir"
	start=$(date +%s)
	result=PASS
	# shellcheck disable=SC2086
	if ! (cd "$dir" && "$srcdir/configure" -q CC="$CC" CFLAGS="$flags $common" \
		LDFLAGS="$flags" ${SAN_CONFIGURE_FLAGS:---without-llvm} >configure.out 2>&1); then
		result="FAIL (configure; see $dir/config.log)"
	elif ! (cd "$dir" && make -j"$jobs" >build.out 2>&1); then
		result="FAIL (build; see $dir/build.out)"
		tail -n 20 "$dir/build.out"
	# EP_SANITIZER tells tests which sanitizer they run under, for those
	# that must SKIP (e.g. loading the instrumented library into an
	# uninstrumented interpreter cannot work).
	elif ! (cd "$dir" && EP_SANITIZER=$san make -j"$jobs" check >check.out 2>&1); then
		result="FAIL (make check)"
	fi
	end=$(date +%s)
	counts=""
	if [ -f "$dir/test-suite.log" ] || [ -f "$dir/check.out" ]; then
		counts=$(grep -E '^# (TOTAL|PASS|SKIP|FAIL|ERROR|XPASS):' "$dir/check.out" 2>/dev/null |
			sed 's/^# //' | tr '\n' ' ')
		grep -E '^(FAIL|ERROR|XPASS): ' "$dir/check.out" 2>/dev/null | sed "s/^/  $san: /"
		# what was skipped, and why (whole programs and single tests)
		find "$dir" -name '*.log' ! -name 'config.log' ! -name 'test-suite.log' \
			-exec grep -H '^SKIP:' {} + 2>/dev/null | sort -u | sed "s|^$dir/|  $san skip: |"
		# sanitizer reports, wherever they ended up
		grep -rlE '(Sanitizer|runtime error:)' --include='*.log' "$dir" 2>/dev/null |
			grep -v config.log | sed "s|^|  $san report in: |"
	fi
	line="$san: $result in $((end - start)) s${counts:+ -- $counts}"
	echo "$line"
	summary="$summary$line
"
	case $result in PASS) ;; *) failed=1 ;; esac
done

echo "=== summary (build trees in $root)"
printf '%s' "$summary"
exit $failed
