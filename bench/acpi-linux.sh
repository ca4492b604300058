#!/usr/bin/env bash
# acpi-linux.sh - a Linux boot to init with ACPI vs with the MP table (docs/performance.md
# "ACPI or the MP table: a Linux boot"): the real-kernel tier's kernel and initramfs (tests/linux/run.sh
# builds them in build/linux), the same options but --acpi, side by side:
#   1. brisk compare -n PAIRS: per start-up phase and boot marker (0x1 = the init started) medians,
#      B/A with its CI and a verdict; A = --acpi off, B = --acpi on;
#   2. one brisk run --timeline of each: exits by reason and port, KVM ioctls.
# No virtio devices: with --acpi off Debian's kernel (no CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES) would not
# see them, so they would not be the same machine. The init reboots (RB_AUTOBOOT): through the ACPI reset
# register with ACPI, the i8042 without.
# Usage: bench/acpi-linux.sh [-n PAIRS] [--cpus N] [KERNEL]   (default 5 pairs, 2 vCPUs, build/linux/vmlinux)
# Needs a KVM that runs Linux: on a host without one, `BENCH_NESTED=1 bench/acpi-linux.sh` runs it inside
# scripts/nested-kvm.sh (times there are 10-100x a hardware host's and noisy; compare only side by side).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if [ "${BENCH_NESTED:-0}" = 1 ] && [ -z "${BRISK_IN_NESTED:-}" ]; then
	exec env NESTED_KVM_ENV="BUILD" scripts/nested-kvm.sh -- env BRISK_IN_NESTED=1 BENCH_NESTED=0 "$0" "$@"
fi
pairs=5 cpus=2
while [ $# -gt 0 ]; do
	case $1 in
	-n) pairs=$2 && shift 2 ;;
	--cpus) cpus=$2 && shift 2 ;;
	*) break ;;
	esac
done
linux=${BRISK_LINUX_DIR:-$BUILD/linux}
kernel=${1:-$linux/vmlinux}
initrd=$linux/initramfs.cpio.gz
for f in "$kernel" "$initrd"; do
	[ -f "$f" ] || { echo "acpi-linux: $f missing: run make check-linux first (tests/linux/run.sh)" >&2 && exit 2; }
done
common="--kernel $kernel --initrd $initrd --memory 256M --cpus $cpus --serial none"
mkdir -p "$BUILD/bench"
"$BUILD/brisk" compare -n "$pairs" --warmup 1 --json "$BUILD/bench/acpi_linux_compare.json" \
	--a "$common --acpi off" --b "$common --acpi on"
for mode in off on; do
	echo
	echo "== --acpi $mode: one boot, brisk run --timeline"
	# shellcheck disable=SC2086 # $common is a list of words
	"$BUILD/brisk" run $common --acpi "$mode" --timeline
done
