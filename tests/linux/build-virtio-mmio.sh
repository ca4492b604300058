#!/usr/bin/env bash
# build-virtio-mmio.sh -- Debian's own virtio_mmio module, rebuilt with the command-line devices.
#
# Usage: tests/linux/build-virtio-mmio.sh        (after tests/linux/fetch-kernel.sh)
#
# Why: a Linux guest booted with acpi=off (Kata Containers' fc driver puts it
# in every guest's boot_args) ignores the DSDT, so it finds virtio-mmio
# devices only through virtio_mmio.device=SIZE@ADDR:IRQ words on its command
# line, which needs CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=y. Firecracker's and
# Kata's guest kernels have it; Debian's (6.1.0-57-amd64, -cloud-amd64) have
# CONFIG_VIRTIO_MMIO=m with "# CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES is not set".
# So the tier builds this one module again, the kernel's other modules stay
# Debian's:
#   drivers/virtio/virtio_mmio.c, unchanged, from /usr/src/linux-source-M.m.tar.xz
#   (only that file is extracted), as an out-of-tree module with
#   -DCONFIG_VIRTIO_MMIO_CMDLINE_DEVICES, against /usr/src/linux-headers-<ver>
#   (<ver> = build/linux/kernel.version, the kernel fetch-kernel.sh fetched).
# The source package must be the kernel's own Debian version (e.g. 6.1.192-3,
# read from the bzImage's version string "... Debian 6.1.192-3 ..."): checked,
# and the pinned version is what gets installed.
# Packages: linux-headers-<ver> (pulls linux-headers-<ver>-common and
# linux-kbuild-M.m) and linux-source-M.m, through scripts/deps.sh linux-mmio
# (apt-get, only what is missing; root needed only then).
# Output: build/linux/modules-cmdline/virtio_mmio.ko (+ .done, its stamp).
# mkinitramfs.sh --override puts it in place of the stock one in a separate
# initramfs only (tests/linux/run.sh: build/linux/initramfs-kata.cpio.gz), so
# the other boots keep Debian's module. Cached: nothing is done while the
# stamp (kernel version, Debian version, this script) matches.
# Exit status 0; 1 with a one-line reason on stderr (run.sh turns it into the
# skip reason of tests/linux/test_kata_linux.py).
set -euo pipefail
die() { echo "build-virtio-mmio: $*" >&2; exit 1; }
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd -P)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
OUT=$BUILD/linux
DEST=$OUT/modules-cmdline
SRC_FILE=drivers/virtio/virtio_mmio.c

kver=$(cat "$OUT/kernel.version" 2>/dev/null) || die "no $OUT/kernel.version (run tests/linux/fetch-kernel.sh first)"
[[ $kver =~ ^([0-9]+\.[0-9]+)\.[0-9]+-[0-9]+-[a-z0-9-]+$ ]] || die "kernel version '$kver' is not Debian's form (6.1.0-57-amd64)"
series=${BASH_REMATCH[1]}
# The kernel's Debian package version, as the image says it ("#1 SMP PREEMPT_DYNAMIC Debian 6.1.192-3 (date)")
kdeb=$(LC_ALL=C grep -aoE "#[0-9]+ [A-Z_ ]*Debian [0-9][0-9A-Za-z.+~-]*" "$OUT/vmlinuz" 2>/dev/null | head -n1 | sed 's/.*Debian //') ||
	true
[[ -n $kdeb ]] || die "no 'Debian <version>' in $OUT/vmlinuz's version string: cannot tell which linux-source-$series matches"

stamp="$kver $kdeb $(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)"
if [[ -f $DEST/virtio_mmio.ko && $(cat "$DEST/.done" 2>/dev/null) = "$stamp" ]]; then
	echo "build-virtio-mmio: $DEST/virtio_mmio.ko cached ($kver, Debian $kdeb)" >&2
	exit 0
fi

"$ROOT/scripts/deps.sh" linux-mmio "$kver" "$kdeb" ||
	die "cannot install linux-headers-$kver and linux-source-$series=$kdeb (scripts/deps.sh linux-mmio: apt-get needs the network and root)"
srcver=$(dpkg-query -W -f='${Version}' "linux-source-$series" 2>/dev/null) || srcver=none
[[ $srcver = "$kdeb" ]] || die "linux-source-$series is $srcver but the kernel is Debian $kdeb: not the same source"
hdrver=$(dpkg-query -W -f='${Version}' "linux-headers-$kver" 2>/dev/null) || hdrver=none
[[ $hdrver = "$kdeb" ]] || die "linux-headers-$kver is $hdrver but the kernel is Debian $kdeb"
tarball=/usr/src/linux-source-$series.tar.xz
kdir=/usr/src/linux-headers-$kver
[[ -f $tarball ]] || die "$tarball missing although linux-source-$series is installed"
[[ -f $kdir/Makefile && -f $kdir/Module.symvers ]] || die "$kdir has no Makefile or Module.symvers"

work=$OUT/virtio-mmio.tmp
rm -rf "$work"
mkdir -p "$work"
# only the one file (--occurrence=1: tar stops reading once it has it)
tar -xJf "$tarball" --occurrence=1 -O "linux-source-$series/$SRC_FILE" > "$work/virtio_mmio.c" ||
	die "no $SRC_FILE in $tarball"
grep -q 'CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES' "$work/virtio_mmio.c" ||
	die "$SRC_FILE of $tarball has no CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES part"
cat > "$work/Kbuild" <<'EOF'
# virtio_mmio.c as Debian ships it; only the configuration differs (autoconf.h leaves this one undefined)
ccflags-y := -DCONFIG_VIRTIO_MMIO_CMDLINE_DEVICES=1
obj-m := virtio_mmio.o
EOF
make -s -C "$kdir" M="$work" modules > "$work/build.log" 2>&1 ||
	die "the module did not build against $kdir: $(grep -m1 -E 'error|Error' "$work/build.log" || tail -n1 "$work/build.log")"

# What the kernel will check (load_module: vermagic) and what the tier needs (the "device" parameter)
stock=$OUT/modules/virtio_mmio.ko
magic=$(modinfo -F vermagic "$work/virtio_mmio.ko")
[[ ! -f $stock || $magic = "$(modinfo -F vermagic "$stock")" ]] ||
	die "vermagic '$magic' differs from the stock module's '$(modinfo -F vermagic "$stock")'"
# (device_param_cb declares no parmtype/parm for modinfo: the parameter's symbol shows it)
nm "$work/virtio_mmio.ko" | grep -q ' __param_device$' || die "the built module has no 'device' parameter"
mkdir -p "$DEST"
cp "$work/virtio_mmio.ko" "$DEST/virtio_mmio.ko.tmp"
mv "$DEST/virtio_mmio.ko.tmp" "$DEST/virtio_mmio.ko"
echo "$stamp" > "$DEST/.done"
rm -rf "$work"
echo "build-virtio-mmio: $DEST/virtio_mmio.ko ($kver, Debian $kdeb, with CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES)" >&2
