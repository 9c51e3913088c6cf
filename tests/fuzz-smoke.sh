#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Fuzz smoke test for CI: build the libFuzzer targets and run each for a few
# seconds (FUZZ_SECONDS, default 10).  Run from a configured build tree.
# Exit 77 (skip) without clang.
set -u
secs=${FUZZ_SECONDS:-10}
make=${MAKE:-make}
if ! grep -q '^CLANG = ..*' Makefile 2>/dev/null; then
	echo "SKIP: no clang in this build tree (configure found none)"
	exit 77
fi
exec $make fuzz FUZZ_SECONDS="$secs"
