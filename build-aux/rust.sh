#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The rust stage of build-aux/run.sh: the Rust binding (rust/) built, tested
# and documented offline against the library just built, with Debian's
# cargo and rustc (the crates promise rustc 1.63, and depend on nothing
# outside the workspace), then its examples run.
#   build-aux/rust.sh BUILD_DIR RESULTS_DIR
# BUILD_DIR is a configured and built tree (its libexecpack/.libs is linked
# through EXECPACK_LIB_DIR and loaded through LD_LIBRARY_PATH); cargo's
# output goes to BUILD_DIR/rust-target.  RESULTS_DIR/rust/ gets the logs
# and stage.results.
# Exit: 0 all passed, 1 something failed, 77 not run (the reason printed).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
out=$2/rust
mkdir -p "$out"

# Debian's toolchain before any other on PATH: it is the one promised.
if [ -x /usr/bin/cargo ] && [ -x /usr/bin/rustc ]; then
	PATH=/usr/bin:$PATH
	export PATH
fi
if ! command -v cargo >/dev/null 2>&1 || ! command -v rustc >/dev/null 2>&1; then
	echo "SKIP: rust: cargo or rustc not found (build-aux/install-deps.sh: cargo rustc)"
	exit 77
fi
lib=$build/libexecpack/.libs
[ -e "$lib/libexecpack.so" ] || { echo "rust: $lib/libexecpack.so is not built"; exit 1; }
if [ -n "${EP_SANITIZER:-}" ]; then
	echo "SKIP: rust: the library is built with $EP_SANITIZER"
	exit 77
fi

EXECPACK_LIB_DIR=$lib
LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
CARGO_TARGET_DIR=$build/rust-target
export EXECPACK_LIB_DIR LD_LIBRARY_PATH CARGO_TARGET_DIR
unset EXECPACK_BACKEND RUSTFLAGS
cd "$top/rust" || exit 1
echo "rust: $(cargo --version), $(rustc --version), library $lib"

passed=0
failed=0
step() { # name command...
	n=$1
	shift
	if "$@" >"$out/$n.log" 2>&1; then
		echo "PASS: $n"
		passed=$((passed + 1))
	else
		tail -n 40 "$out/$n.log"
		echo "FAIL: $n (log: $out/$n.log)"
		failed=$((failed + 1))
	fi
}

# the tarball carries the binding: rust/local.am names every file of it
if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
	listed=$(tr -s ' \t\\' '\n\n\n' <"$top/rust/local.am")
	unlisted=$(git -C "$top" ls-files rust | while read -r f; do
		[ "$f" = rust/local.am ] || echo "$listed" | grep -qxF "$f" || echo "$f"
	done)
	if [ -n "$unlisted" ]; then
		echo "FAIL: rust/local.am (EXTRA_DIST) does not name: $unlisted"
		failed=$((failed + 1))
	else
		passed=$((passed + 1))
	fi
fi

step build cargo build --offline --locked --all-targets
# every test of every crate counts: the totals of cargo's "test result:" lines
cargo test --offline --locked >"$out/test.log" 2>&1
rc=$?
tp=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\1/p' "$out/test.log" |
	awk '{ s += $1 } END { print s + 0 }')
tf=$(sed -n 's/^test result: .* \([0-9]*\) passed; \([0-9]*\) failed.*/\2/p' "$out/test.log" |
	awk '{ s += $1 } END { print s + 0 }')
grep -E '^test .* \.\.\. (ok|FAILED)|^test result:' "$out/test.log"
if [ "$rc" -ne 0 ] && [ "$tf" -eq 0 ]; then
	tail -n 40 "$out/test.log"
	tf=1 # it failed before a test could
fi
passed=$((passed + tp))
failed=$((failed + tf))
step doc cargo doc --offline --locked --no-deps
case $(uname -m) in
x86_64 | aarch64)
	# the README's expression, on execpack and on bare mmap/mprotect
	for ex in jit jit_mmap; do
		step "example-$ex" sh -c "o=\$(cargo run --offline --locked --example $ex -- '(2+3)*x-4' 10) &&
			echo \"\$o\" && [ \"\$o\" = 46 ]"
	done
	step example-perf-names cargo run --offline --locked --example perf_names
	;;
esac

echo "$passed passed, $failed failed, 0 skipped" >"$out/stage.results"
echo "rust: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
