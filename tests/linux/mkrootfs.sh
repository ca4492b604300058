#!/usr/bin/env bash
# mkrootfs.sh -- an ext4 root disk image for the real-kernel tier, made without root privileges.
#
# Usage: tests/linux/mkrootfs.sh [--init BIN] [--size SIZE] [--add DIR] IMG
#
# Fills a directory and turns it into IMG with `mkfs.ext4 -d DIR -F IMG SIZE`
# (e2fsprogs: the files are copied into the new file system by mke2fs itself,
# so no loop device, mount or root is needed):
#   /sbin/init          BIN (default: the static init mkinitramfs.sh left in
#                       build/linux/init, i.e. tests/linux/init.c); run by the
#                       initramfs's init after switch_root as
#                       "/sbin/init brisk.stage=disk"
#   /etc/brisk-rootfs   one line naming this image (the initramfs's init
#                       prints it after mounting the disk)
#   /dev /proc /sys /tmp /bin /lib
#                       empty directories (/dev /proc /sys receive the
#                       initramfs's mounts at switch_root)
#   everything in DIR   with --add DIR (copied over the above)
# SIZE: default 32M (mkfs.ext4's size syntax). The image is a sparse file of
# that size in mke2fs's defaults for that size (ext4 with a journal and
# metadata_csum: the kernel needs crc32c for it). After a boot the test reads
# files back with `debugfs -R 'cat /brisk-wrote' IMG` and checks the file
# system with `e2fsck -fn IMG`.
# Exit status 0; 1 with a one-line reason on stderr.
set -euo pipefail
die() { echo "mkrootfs: $*" >&2; exit 1; }
HERE=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")" && pwd -P)
ROOT=$(cd "$HERE/../.." && pwd -P)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
init=$BUILD/linux/init size=32M add=
while [[ $# -gt 1 ]]; do
	case $1 in
	--init) init=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--add) add=$2; shift 2 ;;
	*) die "unknown option $1" ;;
	esac
done
[[ $# -eq 1 ]] || die "usage: $0 [--init BIN] [--size SIZE] [--add DIR] IMG"
img=$1
PATH=$PATH:/sbin:/usr/sbin
command -v mkfs.ext4 >/dev/null || die "mkfs.ext4 not found (apt-get install e2fsprogs)"
[[ -x $init ]] || die "no init binary $init (tests/linux/mkinitramfs.sh builds it)"
[[ -z $add || -d $add ]] || die "--add $add: not a directory"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/brisk-rootfs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{sbin,etc,dev,proc,sys,tmp,bin,lib}
chmod 1777 "$tmp/tmp"
cp "$init" "$tmp/sbin/init"
chmod 755 "$tmp/sbin/init"
echo "brisk rootfs $(basename "$img") made by tests/linux/mkrootfs.sh" > "$tmp/etc/brisk-rootfs"
[[ -z $add ]] || cp -a "$add/." "$tmp/"
rm -f "$img"
# root_owner: / owned by root whoever runs this; -q: quiet; -F: IMG is a regular file
mkfs.ext4 -q -F -E root_owner=0:0 -L brisk-root -d "$tmp" "$img" "$size" >"$tmp.log" 2>&1 ||
	{ sed 's/^/mkrootfs: /' "$tmp.log" >&2; rm -f "$tmp.log"; die "mkfs.ext4 -d failed"; }
rm -f "$tmp.log"
echo "mkrootfs: $img ($size, ext4, /sbin/init from $init)" >&2
