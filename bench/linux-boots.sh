#!/usr/bin/env bash
# linux-boots.sh - real Linux boots (root on virtio-blk) under brisk and QEMU microvm, interleaved: how many
# fail and how long they take (bench/linux_boots.py says what runs). Needs a KVM that runs Linux and
# qemu-system-x86_64, and the real-kernel tier's kernel and initramfs (tests/linux/run.sh builds them in
# $BUILD/linux). On a host without such a KVM, `BENCH_NESTED=1 bench/linux-boots.sh` runs it inside
# scripts/nested-kvm.sh (times there are 10-100x a hardware host's and noisy: compare only side by side).
# Usage: bench/linux-boots.sh [-n ROUNDS] [--timeout S] [--kernel vmlinux|vmlinuz] [--quiet] [--http]
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${BENCH_NESTED:-0}" = 1 ] && [ -z "${BRISK_IN_NESTED:-}" ]; then
	exec env NESTED_KVM_ENV="${NESTED_KVM_ENV:-BUILD}" scripts/nested-kvm.sh -- env BRISK_IN_NESTED=1 BENCH_NESTED=0 "$0" "$@"
fi
PATH=$PATH:/sbin:/usr/sbin
exec /usr/bin/python3 bench/linux_boots.py "$@"
