#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# fetch-kernel.sh - unpack a Debian kernel and its headers into a directory,
# for check-kmod.sh to build the module against and boot, without
# installing either on this machine.
#   fetch-kernel.sh DIR ARCH IMAGE-PACKAGE
# ARCH is the Debian architecture (amd64, arm64); IMAGE-PACKAGE a kernel
# image package or a meta-package that depends on one
# (linux-image-6.12-amd64, linux-image-arm64).  The headers come for ARCH,
# the kbuild tools (fixdep, modpost) for this machine's architecture, so
# that a module cross-builds with ARCH=... CROSS_COMPILE=....
# Writes DIR/kernel.env (KVER, EP_KMOD_KERNEL, EP_KMOD_KDIR) and prints
# KVER.  Exit: 0 done, 77 the packages are not to be had (the reason on
# stderr), 1 other errors.  A DIR that already holds KVER's tree, unpacked
# there, is reused.
set -u
dir=$1
arch=$2
pkg=$3
host_arch=$(dpkg --print-architecture) || exit 1

skip() {
	echo "fetch-kernel: $*" >&2
	exit 77
}

# The package's first dependency named linux-image-*, the concrete image
# behind a meta-package (or the package itself when it holds a kernel).
field() { # package field
	LC_ALL=C apt-cache show --no-all-versions "$1" 2>/dev/null | sed -n "s/^$2: //p" | head -n 1
}
image=${pkg%:*}
for _ in 1 2 3; do
	deps=$(field "$image:$arch" Depends)
	[ -n "$(field "$image:$arch" Package)" ] ||
		skip "no package $image:$arch (dpkg --add-architecture $arch; apt-get update)"
	case $image in
	linux-image-[0-9]*.[0-9]*.[0-9]*) break ;;
	esac
	next=$(echo "$deps" | tr ',|' '\n\n' | sed 's/^ *//; s/ .*//' | grep -m 1 '^linux-image-')
	[ -n "$next" ] || skip "$image:$arch depends on no linux-image package"
	image=$next
done
# linux-image-6.12.118+deb12-amd64(-unsigned) -> 6.12.118+deb12-amd64
kver=${image#linux-image-}
kver=${kver%-unsigned}
headers=linux-headers-$kver
hdeps=$(field "$headers:$arch" Depends)
[ -n "$hdeps" ] || skip "no package $headers:$arch"
common=$(echo "$hdeps" | tr ',|' '\n\n' | sed 's/^ *//; s/ .*//' | grep -m 1 '^linux-headers-.*-common')
kbuild=$(echo "$hdeps" | tr ',|' '\n\n' | sed 's/^ *//; s/ .*//' | grep -m 1 '^linux-kbuild-')
[ -n "$common" ] && [ -n "$kbuild" ] || skip "$headers:$arch names no common headers or kbuild"

root=$dir/root
# (a tree unpacked elsewhere and copied here names its old place: fetch again)
if [ ! -e "$dir/kernel.env" ] || ! grep -qx "KVER=$kver" "$dir/kernel.env" ||
	! grep -qxF "EP_KMOD_KERNEL=$root/boot/vmlinuz-$kver" "$dir/kernel.env"; then
	rm -rf "$dir"
	mkdir -p "$dir/debs" "$root" || exit 1
	# apt-get download writes to the current directory.
	(cd "$dir/debs" && apt-get download -q=2 "$image:$arch" "$headers:$arch" \
		"$common" "$kbuild:$host_arch") >"$dir/download.log" 2>&1 ||
		{ cat "$dir/download.log" >&2; skip "cannot download $image and its headers"; }
	for d in "$dir"/debs/*.deb; do
		dpkg -x "$d" "$root" || exit 1
	done
	# The headers' Makefile includes the common headers by absolute path.
	sed -i "s|/usr/src/|$root/usr/src/|g" "$root/usr/src/$headers/Makefile" || exit 1
	rm -rf "$dir/debs" "$root/lib/modules/$kver/kernel"
	{
		echo "KVER=$kver"
		echo "EP_KMOD_KERNEL=$root/boot/vmlinuz-$kver"
		echo "EP_KMOD_KDIR=$root/usr/src/$headers"
	} >"$dir/kernel.env"
fi
[ -r "$root/boot/vmlinuz-$kver" ] || { echo "fetch-kernel: no vmlinuz in $image" >&2; exit 1; }
echo "$kver"
