#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# python-binding.sh - runs the Python package's tests (python/tests/) from
# the source tree against the library in the build tree (make check), with
# unittest: pytest is not needed here (tests/check-debian.sh runs them with
# pytest on the installed package).  SKIP (77) without python3.
set -u
srcdir=${top_srcdir:-.}
builddir=${top_builddir:-.}
python=${PYTHON:-python3}

if ! command -v "$python" >/dev/null 2>&1 ||
	! "$python" -c 'import ctypes' >/dev/null 2>&1; then
	echo "SKIP: $python with ctypes is not available"
	exit 77
fi
if [ -n "${EP_SANITIZER:-}" ]; then
	# a sanitizer runtime must be the first library of a process; python3 is
	# not built with one, so an instrumented libexecpack cannot load into it
	echo "SKIP: the library is built with ${EP_SANITIZER}; python3 cannot load it"
	exit 77
fi
lib=$builddir/libexecpack/.libs/libexecpack.so.0
[ -e "$lib" ] || { echo "ERROR: $lib not built"; exit 99; }
case $lib in /*) ;; *) lib=$(pwd)/$lib ;; esac

EXECPACK_LIBRARY=$lib
EXECPACK_HEADER=$srcdir/include/execpack.h
PYTHONPATH=$srcdir/python${PYTHONPATH:+:$PYTHONPATH}
# the source tree is read-only under make distcheck: no __pycache__
PYTHONDONTWRITEBYTECODE=1
export EXECPACK_LIBRARY EXECPACK_HEADER PYTHONPATH PYTHONDONTWRITEBYTECODE
unset EXECPACK_BACKEND
rc=0
for t in test_execpack test_api test_shrink_near; do
	"$python" -B "$srcdir/python/tests/$t.py"
	r=$?
	# a failure wins over a skip
	if [ "$r" -ne 0 ] && [ "$rc" -ne 1 ]; then rc=$r; fi
done
exit "$rc"
