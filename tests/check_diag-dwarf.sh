#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# check_diag-dwarf.sh - tests/check_diag again with EXECPACK_UNWIND=dwarf
# (JIT code is described to libunwind with DWARF CFI by default) and
# EXECPACK_PERFMAP=1 (every pool writes the perf map).
builddir=${top_builddir:-.}
EXECPACK_UNWIND=dwarf
EXECPACK_PERFMAP=1
export EXECPACK_UNWIND EXECPACK_PERFMAP
exec "$builddir/tests/check_diag"
