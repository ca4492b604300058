#!/usr/bin/env bash
# qemu-virtio.sh -- the virtio boot of test_virtio_linux.py under QEMU's microvm instead of brisk.
#
# Usage: tests/linux/qemu-virtio.sh [--kvm] [--hvc-only]
#
# A reference for the guest side (tests/linux/init.c's virtio mode, the modules
# fetch-kernel.sh keeps, mkinitramfs.sh --modules, mkrootfs.sh): QEMU 7.2's
# microvm describes its virtio-mmio devices in an ACPI DSDT (LNRO0005), which is
# how Debian's kernel (no CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES) finds them, so this
# works on any host, even before brisk has ACPI. It boots build/linux/vmlinuz
# with build/linux/initramfs-virtio.cpio.gz, a fresh root disk from mkrootfs.sh
# (virtio-blk-device), virtio-rng-device and a virtconsole (hvc0, to a file),
# then reads /brisk-wrote back with debugfs and checks the file system with
# e2fsck -fn, as the test does. Takes ~7 s with TCG (the default: no /dev/kvm
# needed); --kvm uses -accel kvm. --hvc-only: console=hvc0 alone (the init's
# output appears only in the hvc0 file, from when hvc0 exists).
# Run tests/linux/run.sh (or fetch-kernel.sh + mkinitramfs.sh) first. Under
# TCG on a loaded host the kernel's TSC calibration against the PIT can fail
# ("tsc: Unable to calibrate against PIT") and the boot then hangs: QEMU is
# stopped after 180 s; run it again.
# Exit status 0 when the file came back; 1 otherwise. Output in $TMPDIR/brisk-qemu-virtio.*/.
set -euo pipefail
die() { echo "qemu-virtio: $*" >&2; exit 1; }
ROOT=$(cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." && pwd -P)
BUILD=${BUILD:-build}
[[ $BUILD = /* ]] || BUILD=$ROOT/$BUILD
L=$BUILD/linux
accel=tcg consoles="console=ttyS0 console=hvc0"
for a in "$@"; do
	case $a in
	--kvm) accel=kvm ;;
	--hvc-only) consoles="console=hvc0" ;;
	*) die "usage: $0 [--kvm] [--hvc-only]" ;;
	esac
done
for f in vmlinuz initramfs-virtio.cpio.gz init; do [[ -f $L/$f ]] || die "no $L/$f (run tests/linux/run.sh first)"; done
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 not found (apt-get install qemu-system-x86)"
PATH=$PATH:/sbin:/usr/sbin
out=$(mktemp -d "${TMPDIR:-/tmp}/brisk-qemu-virtio.XXXXXX")
"$ROOT/tests/linux/mkrootfs.sh" --init "$L/init" "$out/root.img"
id=$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
cpu=max
[[ $accel = kvm ]] && cpu=host,-arch-capabilities # (ENVIRONMENT.md: -cpu host alone fails on MSR 0x10a)
t0=$(date +%s.%N)
timeout 180 qemu-system-x86_64 -machine microvm,acpi=on,rtc=on -accel $accel -cpu $cpu -m 256M -smp 1 \
	-nodefaults -no-user-config -display none -no-reboot -serial stdio \
	-global virtio-mmio.force-legacy=false \
	-drive id=root,file="$out/root.img",format=raw,if=none -device virtio-blk-device,drive=root \
	-device virtio-rng-device \
	-device virtio-serial-device -chardev file,id=hvc,path="$out/hvc0.out" -device virtconsole,chardev=hvc \
	-kernel "$L/vmlinuz" -initrd "$L/initramfs-virtio.cpio.gz" \
	-append "$consoles reboot=k panic=1 pci=off brisk.virtio=1 brisk.root=/dev/vda brisk.id=$id brisk.poweroff=auto" \
	</dev/null >"$out/ttyS0.out" 2>&1 || echo "qemu-virtio: QEMU exited with status $?" >&2
echo "qemu-virtio: QEMU ran $(echo "$(date +%s.%N) - $t0" | bc) s; ttyS0 in $out/ttyS0.out, hvc0 in $out/hvc0.out" >&2
grep -h '^brisk-' "$out/ttyS0.out" "$out/hvc0.out" >&2 || true
want="brisk-wrote id=$id"
got=$(debugfs -R 'cat /brisk-wrote' "$out/root.img" 2>/dev/null || true)
e2fsck -fn "$out/root.img" >"$out/e2fsck.out" 2>&1 || die "e2fsck -fn: the file system is not clean ($out/e2fsck.out)"
[[ $got = "$want" ]] || die "debugfs cat /brisk-wrote: '$got', want '$want'"
echo "qemu-virtio: OK: /brisk-wrote read back from the image ('$got'), e2fsck clean" >&2
