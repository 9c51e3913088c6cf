#!/bin/sh
# check_diag-dwarf.sh - tests/check_diag again with EXECPACK_UNWIND=dwarf:
# JIT code is described to libunwind with DWARF CFI by default.
builddir=${top_builddir:-.}
EXECPACK_UNWIND=dwarf
export EXECPACK_UNWIND
exec "$builddir/tests/check_diag"
