#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# run.sh - make check's test of the asmjit example, which is built only
# when configure found asmjit (then EP_ASMJIT_EXAMPLE names it).
if [ -z "${EP_ASMJIT_EXAMPLE:-}" ]; then
	echo "SKIP: built without asmjit (Debian: libasmjit-dev; configure again after installing it)"
	exit 77
fi
exec "$EP_ASMJIT_EXAMPLE"
