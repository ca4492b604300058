#!/usr/bin/env bash
# kernel-load.sh - loading a kernel (and initrd) into guest RAM: pread into RAM (brisk) against memcpy from the
# file's mapping, side by side, no KVM needed (bench/kernel_load.c; docs/performance.md "Loading the kernel").
# Usage: bench/kernel-load.sh [-n RUNS] [--memory MiB] [KERNEL [INITRD]]
#        (default: the real-kernel tier's build/linux/vmlinux and vmlinuz with initramfs-virtio.cpio.gz)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
make -s "$BUILD/libbrisk.a"
mkdir -p "$BUILD/bench"
${CC:-cc} -std=gnu11 -O2 -Wall -Wextra -Werror -Iinclude -D_GNU_SOURCE bench/kernel_load.c "$BUILD/libbrisk.a" \
	-o "$BUILD/bench/kernel_load" -pthread -ljson-c -lm
opts=()
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do opts+=("$1" "$2"); shift 2; done
if [ $# -gt 0 ]; then
	exec "$BUILD/bench/kernel_load" "${opts[@]}" "$@"
fi
L=$BUILD/linux
for k in vmlinux vmlinuz; do
	[ -f "$L/$k" ] || { echo "kernel-load: $L/$k missing: run tests/linux/fetch-kernel.sh first" >&2; exit 1; }
	"$BUILD/bench/kernel_load" "${opts[@]}" "$L/$k" "$L/initramfs-virtio.cpio.gz"
done
