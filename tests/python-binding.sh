#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# python-binding.sh - runs the Python package's tests (python/tests/) from
# the source tree against the library in the build tree (make check), with
# unittest: pytest is not needed here (tests/check-debian.sh runs them with
# pytest on the installed package), and mypy --strict on the package, its
# build backend and python/tests/typing_results.py (what calls return, as
# a type checker sees it).  Then the README's install commands,
# word for word (a fresh `python3 -m venv`, pip offline), in a scratch
# directory: the package must build there with what such a venv has (pip
# and, on Debian 12, setuptools without wheel) and import from the venv.
# SKIP (77) without python3; the venv part says SKIP where python3 cannot
# make a venv with pip (Debian: python3-venv).
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
for t in test_execpack test_api test_shrink_near test_patch test_stage test_module; do
	"$python" -B "$srcdir/python/tests/$t.py"
	r=$?
	# a failure wins over a skip
	if [ "$r" -ne 0 ] && [ "$rc" -ne 1 ]; then rc=$r; fi
done

# --- mypy --strict: the package, its build backend, and the types calls return ---
# (test_api.py does the same where $python has mypy; Debian's mypy command
# runs on the system's python3, which may not be $python)
if command -v mypy >/dev/null 2>&1; then
	if (cd "$srcdir/python" && mypy --strict --no-incremental --cache-dir /dev/null \
		execpack backend tests/typing_results.py); then
		echo "PASS: mypy --strict on the package, its backend and tests/typing_results.py"
	else
		echo "FAIL: mypy --strict"
		rc=1
	fi
else
	echo "SKIP (mypy): mypy is not installed"
fi

# --- the README's install commands in a fresh venv ------------------------------
venv_cmd=$(grep -E '^python3 -m venv venv$' "$srcdir/README")
pip_cmd=$(grep -E '^venv/bin/pip install .* \./python$' "$srcdir/README")
if [ -z "$venv_cmd" ] || [ -z "$pip_cmd" ] || [ "$(echo "$pip_cmd" | wc -l)" -ne 1 ]; then
	echo "FAIL: README does not show the venv and pip install commands"
	exit 1
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/python-venv.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT INT TERM
ln -s "$(cd "$srcdir" && pwd)/python" "$tmp/python"
unset PYTHONPATH
# word for word, from the scratch directory; the README's python3 is the
# one under test
pypath=$(dirname "$(command -v "$python")"):$PATH
echo "+ $venv_cmd"
if ! (cd "$tmp" && PATH=$pypath sh -c "$venv_cmd") >"$tmp/venv.log" 2>&1 ||
	[ ! -x "$tmp/venv/bin/pip" ]; then
	cat "$tmp/venv.log"
	echo "SKIP (venv): $python cannot make a venv with pip here (Debian: python3-venv)"
	exit "$rc"
fi
echo "+ $pip_cmd"
if ! (cd "$tmp" && PATH=$pypath sh -c "$pip_cmd") >"$tmp/pip.log" 2>&1; then
	cat "$tmp/pip.log"
	echo "FAIL: the README's '$pip_cmd' failed in a fresh venv"
	exit 1
fi
where=$(cd "$tmp" && venv/bin/python -c 'import execpack; print(execpack.__file__)' 2>&1)
case $where in
"$tmp"/venv/*) echo "PASS: the README's commands install execpack into a fresh venv ($where)" ;;
*) echo "FAIL: the venv's execpack is not its own: $where"; rc=1 ;;
esac
ver=$(cd "$tmp" && venv/bin/python -c 'import execpack; print(execpack.__version__, execpack.version())' 2>&1)
pkgver=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' "$srcdir/python/execpack/__init__.py")
[ "$ver" = "$pkgver $pkgver" ] ||
	{ echo "FAIL: the venv's execpack and its library say '$ver', not '$pkgver $pkgver'"; rc=1; }
[ -f "$(dirname "$where")/py.typed" ] || { echo "FAIL: py.typed is not installed"; rc=1; }
exit "$rc"
