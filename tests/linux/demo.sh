#!/usr/bin/env bash
# demo.sh -- `make demo-linux`: boot Debian's stock kernel under brisk to a
# busybox shell on the console (stdin/stdout). Exit the shell (or Ctrl-A x)
# to end the VM. Where this host's KVM cannot run Linux, prints why (found
# by probing, as the test tier does) and exits 0.
# Environment: BRISK (default build/brisk), BRISK_DEMO_KERNEL (vmlinuz or
# vmlinux, default vmlinuz), BRISK_DEMO_ARGS (extra brisk run options).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
BUILD=${BUILD:-build}
BRISK=${BRISK:-$BUILD/brisk}
OUT=$BUILD/linux
DEF="console=ttyS0 reboot=k panic=1 pci=off i8042.noaux i8042.nomux i8042.nopnp i8042.dumbkbd acpi=off"

tests/linux/fetch-kernel.sh || { echo "demo-linux: Debian's kernel could not be fetched; nothing to boot"; exit 0; }
tests/linux/mkinitramfs.sh --busybox "$OUT/initramfs-busybox.cpio.gz"

if [ ! -e /dev/kvm ]; then
	echo "demo-linux: cannot boot Linux interactively on this host: no /dev/kvm"
	[ -x scripts/nested-kvm.sh ] && echo "demo-linux: (scripts/nested-kvm.sh has a KVM but no terminal input; make check-linux boots the same kernel there)"
	exit 0
fi
rc=0
"$BRISK" run --kernel "$BUILD/guests/int3probe.elf" </dev/null >/dev/null 2>&1 || rc=$?
if [ $rc -eq 10 ]; then
	echo "demo-linux: KVM on this host cannot run Linux: int3 at CPL 0 ends in KVM_EXIT_INTERNAL_ERROR (emulation failure)"
	exit 0
elif [ $rc -ne 0 ]; then
	echo "demo-linux: the int3 probe guest failed (exit $rc): cannot tell whether Linux can run here"
	exit 1
fi
echo "demo-linux: booting $OUT/${BRISK_DEMO_KERNEL:-vmlinuz} ($(cat "$OUT/kernel.version")) to a busybox shell; exit the shell or press Ctrl-A x to end"
exec "$BRISK" run --kernel "$OUT/${BRISK_DEMO_KERNEL:-vmlinuz}" --initrd "$OUT/initramfs-busybox.cpio.gz" \
	--memory 256M --cmdline "$DEF brisk.shell=1" ${BRISK_DEMO_ARGS:-}
