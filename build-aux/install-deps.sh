#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# Installs the Debian packages libexecpack needs to build and test.
# Usage: build-aux/install-deps.sh [base|kmod|cross|src|all]
#   base: compiler toolchain, Autotools, Check, Valgrind, libunwind, cargo and
#         rustc, gdb, LLVM and clang 19 with csmith (default)
#   kmod: what `make check-kmod` needs to boot a real kernel under qemu
#   cross: cross compilers for aarch64 and riscv64, the arm64 (multiarch)
#         pkg-config, Check, libunwind and Rust standard library, and
#         qemu-system-aarch64 (the
#         aarch64 stage of build-aux/run.sh; the arm64 kernels and busybox
#         are unpacked there, not installed)
#   src:  deb-src entries for the suites the machine already uses (the
#         clients stage of build-aux/run.sh runs `apt-get source pcre2`)
#   all:  both, src, plus the optional peers and tools used by benchmarks, packaging
#         and the Python package's tests
set -e
set_name=${1:-base}

base="build-essential autoconf automake libtool pkg-config check libunwind-dev valgrind
autoconf-archive clang llvm libclang-rt-14-dev groff-base python3"
kmod="qemu-system-x86 linux-image-amd64 linux-headers-amd64 busybox-static cpio kmod dwarves
binutils liblzma-dev"
# arm64 packages come through multiarch (added below when wanted).
cross="gcc-aarch64-linux-gnu g++-aarch64-linux-gnu libc6-dev-arm64-cross qemu-system-arm
pkgconf:arm64 check:arm64 libunwind-dev:arm64 liblzma-dev:arm64
gcc-riscv64-linux-gnu libc6-dev-riscv64-cross qemu-user libstd-rust-dev:arm64"
# packaging: the Debian packages (with DKMS and pybuild), the Python
# package's tests (pytest, a venv, mypy --strict)
extra="libasmjit-dev debhelper devscripts lintian fakeroot dpkg-dev dkms dh-dkms
dh-python pybuild-plugin-pyproject python3-all python3-setuptools python3-pytest
python3-venv mypy"
# perf annotate on jitdump files; the eBPF example's --dump-jited
base="$base linux-perf libcapstone-dev"
# the Rust binding (rust/, the rust stage of build-aux/run.sh): Debian's own
# toolchain, no crate from elsewhere
base="$base cargo rustc"
# tests/gdb-jit.sh: JIT code under gdb (bt, break, gdb -p)
base="$base gdb"
# libexecpack-llvm (LLVM ORC's memory manager) and the llvm stage of
# build-aux/run.sh: LLVM 19, clang 19 for the bitcode, csmith's programs
base="$base llvm-19-dev clang-19 csmith libcsmith-dev"

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# add_deb_src: a deb-src entry for each Debian suite already listed as deb,
# in the format the machine uses (deb822 .sources or one-line
# sources.list), then the package lists.  Nothing if deb-src is there.
add_deb_src() {
	if grep -rqsE '^[[:space:]]*(deb-src|Types:.*deb-src)' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		return 0
	fi
	src=/etc/apt/sources.list.d/debian-src
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		# the same stanzas (URIs, suites, keyring), for sources
		sed 's/^Types:.*/Types: deb-src/' /etc/apt/sources.list.d/debian.sources |
			$SUDO tee "$src.sources" >/dev/null
	elif grep -qs '^deb ' /etc/apt/sources.list; then
		sed -n 's/^deb /deb-src /p' /etc/apt/sources.list | $SUDO tee "$src.list" >/dev/null
	else
		echo "$0: no Debian deb entry to add deb-src for" >&2
		return 1
	fi
	echo "added $(ls "$src".*)"
	$SUDO apt-get update -qq
}

case "$set_name" in
base) want=$base ;;
src)
	add_deb_src
	want="dpkg-dev"
	;;
kmod) want=$kmod ;;
cross) want=$cross ;;
all)
	want="$base $kmod $extra"
	add_deb_src || echo "$0: no deb-src entry; the clients stage will be skipped" >&2
	# Without the cross set only the aarch64 stage is lost: it says SKIP.
	sh "$0" cross || echo "$0: the cross packages are not installed; the aarch64 stage will be skipped" >&2
	;;
*) echo "usage: $0 [base|kmod|cross|src|all]" >&2; exit 2 ;;
esac
case " $want " in
*:arm64*)
	if ! dpkg --print-foreign-architectures | grep -qx arm64; then
		$SUDO dpkg --add-architecture arm64
		new_arch=1
	fi
	;;
esac

missing=""
native=$(dpkg --print-architecture)
for p in $want; do
	# (a name without an architecture wants the native one, or all: the
	# arm64 copy of a multiarch package, as check:arm64, is not it)
	case $p in
	*:*) arch_ok='[a-z0-9]*' ;;
	*) arch_ok="($native|all)" ;;
	esac
	dpkg-query -W -f='${Architecture} ${Status}\n' "$p" 2>/dev/null |
		grep -Eq "^$arch_ok install ok installed" ||
		missing="$missing $p"
done
# The arm64 package lists are needed to download the arm64 kernels too.
[ -z "$missing" ] && [ -z "${new_arch:-}" ] && exit 0

echo "installing:$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq || true
[ -z "$missing" ] && exit 0
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
