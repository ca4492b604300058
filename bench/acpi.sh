#!/usr/bin/env bash
# acpi.sh - what ACPI costs brisk's start-up (docs/performance.md "ACPI or the MP table"):
#   1. bench/acpi_build.c: acpi_build() alone, for 1..254 vCPUs and 0..18 virtio devices;
#   2. brisk compare: the same test guest booted with --acpi off (A) and --acpi on (B), interleaved,
#      per start-up phase medians, ratio B/A with its CI, and a Mann-Whitney verdict.
# Usage: bench/acpi.sh [-n PAIRS] [GUEST]   (default 40 pairs, build/guests/hello.elf)
# Run by `make bench-acpi`, after `make all guests`. BUILD selects the build directory (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
pairs=40
if [ "${1:-}" = -n ]; then
	pairs=$2
	shift 2
fi
guest=${1:-$BUILD/guests/hello.elf}
out=$BUILD/bench
mkdir -p "$out"

${CC:-gcc} -O2 -std=gnu11 -Wall -Wextra -Werror -Iinclude -D_GNU_SOURCE -o "$out/acpi_build" bench/acpi_build.c \
	"$BUILD/libbrisk.a" -pthread -ljson-c -lm
"$out/acpi_build"
echo
exec "$BUILD/brisk" compare -n "$pairs" --shuffle --json "$out/acpi_compare.json" \
	--a "--kernel $guest --acpi off --serial none" --b "--kernel $guest --acpi on --serial none"
