#!/usr/bin/env bash
# run.sh - the start-up benchmark (`make bench`): builds the KVM floor and the
# peak-RSS launcher, runs bench/startup.py (brisk vs floor vs QEMU microvm,
# interleaved) and writes build/bench/startup.json. See bench/README.md.
#
#   bench/run.sh [startup.py options]     e.g. bench/run.sh -n 100
#   BENCH_NESTED=1 bench/run.sh           no /dev/kvm here: run inside scripts/nested-kvm.sh
#                                         (TCG-emulated SVM; numbers not representative)
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
OUT=$BUILD/bench

if [[ ! -e /dev/kvm && -z ${NESTED_KVM_GUEST:-} ]]; then
	if [[ ${BENCH_NESTED:-0} = 1 ]]; then
		echo "bench: no /dev/kvm here; running inside scripts/nested-kvm.sh (numbers not representative)" >&2
		exec scripts/nested-kvm.sh -- bench/run.sh "$@"
	fi
	echo "bench: SKIPPED: this host has no /dev/kvm, and brisk and the floor need KVM."
	echo "bench: run it on a host with /dev/kvm, or BENCH_NESTED=1 make bench to run it"
	echo "bench: inside a TCG-emulated nested KVM (checks the benchmark; its numbers mean nothing)."
	exit 0
fi

scripts/deps.sh bench
mkdir -p "$OUT"
${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -Werror -o "$OUT/floor" bench/floor.c
# Static, so the launcher's own RSS (the floor of what it can report) stays ~100 KiB.
${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -Werror -static -o "$OUT/maxrss" bench/maxrss.c

# What a page fault and a system call cost on this host: a start-up is mostly the kernel's work.
${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -Werror -o "$OUT/faultcost" bench/faultcost.c

for f in "$BUILD/brisk" "$BUILD/guests/hello.elf"; do
	[[ -e $f ]] || { echo "bench: $f is missing; run 'make bench' (it builds brisk and the guests)" >&2; exit 1; }
done
echo "+ $OUT/faultcost $BUILD/brisk"
"$OUT/faultcost" "$BUILD/brisk" || echo "bench: faultcost failed (the benchmark goes on without it)"

cmd=("$PYTHON" bench/startup.py --brisk "$BUILD/brisk" --floor "$OUT/floor" --maxrss "$OUT/maxrss"
	--guest "$BUILD/guests/hello.elf" --json "$OUT/startup.json" --strace-dir "$OUT/strace" "$@")
echo "+ ${cmd[*]}"
"${cmd[@]}"
