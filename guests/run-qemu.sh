#!/bin/sh
# run-qemu.sh - run a test guest under QEMU's microvm (the reference the virtio guests were developed against).
#
# usage: guests/run-qemu.sh NAME [QEMU ARGS...]
#   NAME       a guest: runs $BUILD/guests/NAME.elf (BUILD defaults to "build"; NAME may also be a path to an ELF)
#   QEMU ARGS  appended: devices, -append '...', -serial file:X, ...
# environment: BUILD, QEMU (default qemu-system-x86_64), TIMEOUT (seconds, default 60; 0: none)
#
# The machine: KVM, microvm without ACPI (so QEMU appends one
# virtio_mmio.device=512@0xADDR:IRQ word per device to the command line),
# no PIT/PIC/RTC, 128 MiB, the guest's serial on stdio unless the arguments
# take stdio (then pass -serial file:PATH or -serial none after them: a
# later -serial replaces nothing, so this script adds -serial stdio only when
# no -serial is given), the debug-exit port at 0xf4, -no-reboot so that a
# reset ends QEMU. virtio-mmio is made modern (Version 2) with
# force-legacy=false: QEMU 7.2 defaults to the legacy interface.
#
# Examples:
#   guests/run-qemu.sh virtio-rng -object rng-random,filename=/dev/urandom,id=rng0 -device virtio-rng-device,rng=rng0
#   guests/run-qemu.sh virtio-blk -drive file=disk.img,if=none,id=d0,format=raw \
#       -device virtio-blk-device,drive=d0,serial=brisk0 -append 'id=brisk0 pattern=0x5a sectors=64'
#   guests/run-qemu.sh virtio-console -serial file:serial.log -device virtio-serial-device \
#       -chardev stdio,id=c0 -device virtconsole,chardev=c0
#
# Exit status: QEMU's. The guests end through the debug-exit port
# (status ((V & 0x7f) << 1) | 1: guest_pass gives 1 on microvm, guest_fail
# 255) or a reset (0); 124 when TIMEOUT expired.
set -eu

if [ $# -lt 1 ]; then
	echo "usage: $0 NAME [QEMU ARGS...]" >&2
	exit 2
fi
name=$1
shift
case $name in
*/* | *.elf) elf=$name ;;
*) elf=${BUILD:-build}/guests/$name.elf ;;
esac
if [ ! -r "$elf" ]; then
	echo "$0: $elf: no such guest (build it: make BUILD=${BUILD:-build} guests)" >&2
	exit 2
fi

serial="-serial stdio"
for a in "$@"; do
	[ "$a" = "-serial" ] && serial=""
done

timeout_cmd=""
if [ "${TIMEOUT:-60}" != 0 ]; then
	timeout_cmd="timeout --foreground ${TIMEOUT:-60}"
fi

# shellcheck disable=SC2086 # $serial and $timeout_cmd are word lists
exec $timeout_cmd "${QEMU:-qemu-system-x86_64}" -accel kvm \
	-machine microvm,acpi=off,pit=off,pic=off,rtc=off -cpu host,-arch-capabilities -m 128M \
	-nodefaults -no-user-config -display none -no-reboot $serial \
	-device isa-debug-exit,iobase=0xf4,iosize=4 -global virtio-mmio.force-legacy=false \
	-kernel "$elf" "$@"
