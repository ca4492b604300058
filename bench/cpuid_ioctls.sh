#!/usr/bin/env bash
# cpuid_ioctls.sh - KVM ioctls per boot by request for --cpus 1 2 4 8 16, and the time to configure the vCPUs
# split into per-VM and per-vCPU cost; QEMU microvm's counts for the same guest beside them (docs/performance.md,
# "Guest CPUID").
#
#   bench/cpuid_ioctls.sh [CPUS...]        default: 1 2 4 8 16; writes $BUILD/bench/cpuid_ioctls.md
#   BENCH_NESTED=1 bench/cpuid_ioctls.sh   no /dev/kvm here: run inside scripts/nested-kvm.sh (TCG-emulated SVM:
#                                          counts are exact, times are not representative)
#
# Counts come from two sources that must agree: brisk's own per-request accounting (`brisk run --timeline`,
# every KVM ioctl goes through kvm_ioctl) and `strace -f -c -e trace=ioctl` (all ioctls of the process).
# Per-VM cost = KVM_GET_SUPPORTED_CPUID + KVM_GET_MSR_INDEX_LIST (once per process); per-vCPU cost =
# (KVM_SET_CPUID2 + KVM_SET_MSRS) / N, both as brisk timed the ioctls.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
BUILD=${BUILD:-build}
OUT=$BUILD/bench
GUEST=$BUILD/guests/hello.elf

if [[ ! -e /dev/kvm ]]; then
	if [[ ${BENCH_NESTED:-0} = 1 ]]; then
		exec scripts/nested-kvm.sh -- bench/cpuid_ioctls.sh "$@"
	fi
	echo "cpuid_ioctls: SKIPPED: no /dev/kvm (BENCH_NESTED=1 runs it under scripts/nested-kvm.sh)"
	exit 0
fi
[[ -x $BUILD/brisk && -e $GUEST ]] || { echo "cpuid_ioctls: run make all guests first" >&2; exit 2; }
cpus_list=("$@")
[[ ${#cpus_list[@]} -gt 0 ]] || cpus_list=(1 2 4 8 16)
mkdir -p "$OUT"
report=$OUT/cpuid_ioctls.md

# count NAME FILE: calls of KVM ioctl NAME in a --timeline report
count() { awk -v n="$1" '$1 == n { print $2; f = 1 } END { if (!f) print 0 }' "$2"; }
usec() { awk -v n="$1" '$1 == n { print $3; f = 1 } END { if (!f) print 0 }' "$2"; }

{
	echo "| --cpus | GET_SUPPORTED_CPUID | GET_MSR_INDEX_LIST | SET_CPUID2 | SET_MSRS | all KVM ioctls (brisk) | ioctl(2) (strace) | per-VM us | per-vCPU us | QEMU GET_SUPPORTED_CPUID | QEMU SET_CPUID2 | QEMU ioctl(2) |"
	echo "|---|---|---|---|---|---|---|---|---|---|---|---|"
} >"$report"

for n in "${cpus_list[@]}"; do
	tl=$OUT/cpuid_tl_$n.txt
	"$BUILD/brisk" run --kernel "$GUEST" --cpus "$n" --serial none --timeline >"$tl" 2>/dev/null || true
	st=$(strace -f -c -e trace=ioctl -o /dev/stdout "$BUILD/brisk" run --kernel "$GUEST" --cpus "$n" \
		--serial none 2>/dev/null | awk '$NF == "ioctl" { print $4 }')
	total=$(awk '$1 == "total" { print $2 }' "$tl")
	pervm=$(awk -v a="$(usec KVM_GET_SUPPORTED_CPUID "$tl")" -v b="$(usec KVM_GET_MSR_INDEX_LIST "$tl")" \
		'BEGIN { printf "%.1f", a + b }')
	pervcpu=$(awk -v a="$(usec KVM_SET_CPUID2 "$tl")" -v b="$(usec KVM_SET_MSRS "$tl")" -v n="$n" \
		'BEGIN { printf "%.1f", (a + b) / n }')
	# QEMU microvm, same guest (ENVIRONMENT.md's command line), strace decodes the request names.
	q=$OUT/cpuid_qemu_$n.txt
	timeout 120 strace -f -e trace=ioctl -o "$q" qemu-system-x86_64 -accel kvm \
		-machine microvm,acpi=off,pit=off,pic=off,rtc=off -cpu host,-arch-capabilities -smp "$n" -m 128M \
		-nodefaults -no-user-config -display none -serial none -device isa-debug-exit,iobase=0xf4,iosize=4 \
		-kernel "$GUEST" >/dev/null 2>&1 || true
	qs=$(grep -c 'KVM_GET_SUPPORTED_CPUID' "$q" || true)
	qc=$(grep -c 'KVM_SET_CPUID2' "$q" || true)
	qt=$(grep -c 'ioctl(' "$q" || true)
	echo "| $n | $(count KVM_GET_SUPPORTED_CPUID "$tl") | $(count KVM_GET_MSR_INDEX_LIST "$tl") |" \
		"$(count KVM_SET_CPUID2 "$tl") | $(count KVM_SET_MSRS "$tl") | $total | $st | $pervm | $pervcpu |" \
		"$qs | $qc | $qt |" >>"$report"
done
cat "$report"
