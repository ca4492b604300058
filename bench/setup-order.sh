#!/usr/bin/env bash
# setup-order.sh - `make bench-order`: which order of the VM set-up ioctls is cheapest on this host?
# Then: what a cross-process cache of KVM's supported CPUID would save (bench/cpuid_cache_cost.c).
# Builds bench/setup_order.c and runs it (pairs of steps in both orders, whole recipes; medians of
# interleaved rounds). Writes build/bench/setup_order.json. See bench/README.md, "Set-up order".
#
#   bench/setup-order.sh [setup_order options]      e.g. bench/setup-order.sh -n 31
#   BENCH_NESTED=1 bench/setup-order.sh             no /dev/kvm here: inside scripts/nested-kvm.sh
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build}
OUT=$BUILD/bench

if [[ ! -e /dev/kvm && -z ${NESTED_KVM_GUEST:-} ]]; then
	if [[ ${BENCH_NESTED:-0} = 1 ]]; then
		echo "setup-order: no /dev/kvm here; running inside scripts/nested-kvm.sh (times not representative)" >&2
		exec scripts/nested-kvm.sh -- bench/setup-order.sh "$@"
	fi
	echo "setup-order: SKIPPED: this host has no /dev/kvm (BENCH_NESTED=1 runs it in a nested KVM)."
	exit 0
fi

mkdir -p "$OUT"
${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -Werror -o "$OUT/setup_order" bench/setup_order.c
echo "+ $OUT/setup_order --json $OUT/setup_order.json $*"
echo "host: $(uname -r), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'),"\
	"KVM module: $(ls -d /sys/module/kvm_intel /sys/module/kvm_amd /sys/module/kvm_pvm 2>/dev/null | xargs -n1 basename | tr '\n' ' ')"
"$OUT/setup_order" --json "$OUT/setup_order.json" "$@"

# Would a cross-process cache of KVM's supported CPUID pay? (docs/performance.md)
${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -Werror -o "$OUT/cpuid_cache_cost" bench/cpuid_cache_cost.c
echo
echo "cross-process CPUID cache: the ioctls it would skip vs computing its key (fresh process each)"
exec "$OUT/cpuid_cache_cost" -n 9
