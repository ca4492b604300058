#!/usr/bin/env bash
# net-linux.sh - virtio-net (tap) and vsock from inside a Linux guest, brisk against QEMU microvm, interleaved
# (docs/performance.md "virtio-net and vsock inside a Linux guest"): bench/net_linux.py
# says what runs and what is printed. Needs root (a network namespace with a tap), qemu-system-x86_64 and the
# real-kernel tier's kernel and initramfs (tests/linux/run.sh builds them in $BUILD/linux).
# Usage: bench/net-linux.sh [-n ROUNDS] [--bytes N] [--pings N]
# Needs a KVM that runs Linux: on a host without one, `BENCH_NESTED=1 bench/net-linux.sh` runs it inside
# scripts/nested-kvm.sh (times there are 10-100x a hardware host's and noisy; compare only side by side).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${BENCH_NESTED:-0}" = 1 ] && [ -z "${BRISK_IN_NESTED:-}" ]; then
	exec env NESTED_KVM_ENV="BUILD" scripts/nested-kvm.sh -- env BRISK_IN_NESTED=1 BENCH_NESTED=0 "$0" "$@"
fi
PATH=$PATH:/sbin:/usr/sbin
exec /usr/bin/python3 bench/net_linux.py "$@"
