#!/usr/bin/env bash
# demo.sh - `make demo`: boot the built-in demo guest with the boot timeline.
# Where /dev/kvm is missing, the same command runs inside the nested KVM of
# scripts/nested-kvm.sh (a Linux under QEMU's software emulator), and says so.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if [ -e /dev/kvm ] || [ -n "${BRISK_NO_NESTED:-}" ]; then
	exec "$BUILD/brisk" run --timeline "$@"
fi
echo "demo: /dev/kvm is missing on this host; booting the demo inside a nested KVM" \
	"(scripts/nested-kvm.sh: software-emulated CPU, so the times are tens of times slower than real)" >&2
exec scripts/nested-kvm.sh -- "$BUILD/brisk" run --timeline "$@"
