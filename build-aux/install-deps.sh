#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs the Debian packages libexecpack needs to build and test.
# Usage: build-aux/install-deps.sh [base|kmod|all]
#   base: compiler toolchain, Autotools, Check, Valgrind, libunwind (default)
#   kmod: what `make check-kmod` needs to boot a real kernel under qemu
#   all:  both, plus the optional peers and tools used by benchmarks, packaging
#         and the Python package's tests
set -e
set_name=${1:-base}

base="build-essential autoconf automake libtool pkg-config check libunwind-dev valgrind
autoconf-archive clang llvm libclang-rt-14-dev groff-base python3"
kmod="qemu-system-x86 linux-image-amd64 linux-headers-amd64 busybox-static cpio kmod dwarves
binutils liblzma-dev"
# packaging: the Debian packages (with DKMS and pybuild), the Python
# package's tests (pytest, a venv, mypy --strict)
extra="libasmjit-dev debhelper devscripts lintian fakeroot dpkg-dev dkms dh-dkms
dh-python pybuild-plugin-pyproject python3-all python3-setuptools python3-pytest
python3-venv mypy"
# perf annotate on jitdump files; the eBPF example's --dump-jited
base="$base linux-perf libcapstone-dev"

case "$set_name" in
base) want=$base ;;
kmod) want=$kmod ;;
all) want="$base $kmod $extra" ;;
*) echo "usage: $0 [base|kmod|all]" >&2; exit 2 ;;
esac

missing=""
for p in $want; do
	dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q '^install ok installed' ||
		missing="$missing $p"
done
[ -z "$missing" ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
