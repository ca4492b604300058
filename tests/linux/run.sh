#!/usr/bin/env bash
# run.sh -- the real-kernel tier: `make check-linux` (and the last step of `make check`).
#
# 1. tests/linux/fetch-kernel.sh   Debian's stock kernel -> build/linux/vmlinuz (+ vmlinux with PVH)
#    and the virtio tests' modules -> build/linux/modules/
# 2. tests/linux/mkinitramfs.sh    static init (tests/linux/init.c) -> build/linux/initramfs.cpio.gz,
#                                  and with the modules -> build/linux/initramfs-virtio.cpio.gz;
#    tests/linux/build-virtio-mmio.sh  virtio_mmio.ko with CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES (Debian's
#                                  lacks it) -> build/linux/initramfs-kata.cpio.gz, the modules with that
#                                  one replaced (test_kata_linux.py: an acpi=off boot as Kata's)
# 3. pytest tests/linux            boots it with brisk (bzImage, PVH, SMP; test_linux.py), and on
#                                  virtio-blk/rng/console (test_virtio_linux.py: makes its root disk
#                                  with tests/linux/mkrootfs.sh), net/vsock (test_net_linux.py), ...
#
# Where this host's KVM cannot run Linux (no /dev/kvm, or one whose KVM
# cannot emulate what Linux executes: scripts/linux-probe.sh finds out by
# probing), step 3 runs inside scripts/nested-kvm.sh (QEMU TCG with an
# emulated AMD SVM: a real KVM), unless BRISK_NO_NESTED is set; if that VM
# cannot run, pytest runs here and skips with the reason.
# Everything that stops the tier from running (no kernel package, no
# nested VM) ends as pytest skips with a one-line reason, so the summary line
# is always a pytest one (scripts/check.sh counts it).
#
# Environment: BUILD (default build), BRISK (brisk binary, default $BUILD/brisk), BRISK_LINUX_TIMEOUT
# (seconds per boot, default 300; 150 in the nested VM), NESTED_KVM_TIMEOUT (default here 600), NESTED_KVM_ALIVE
# (default here 90: a VM whose kernel sent no heartbeat for that long is wedged), NESTED_KVM_IDLE
# (default here 2 x BRISK_LINUX_TIMEOUT + 60),
# BRISK_LINUX_NESTED=0 (never use the nested VM), PYTHON (default /usr/bin/python3); in the nested VM,
# BRISK_LINUX_ATTEMPTS (attempts per test file, default 5) and BRISK_LINUX_BUDGET (seconds of tier time after
# which no fourth or later attempt starts, default 2700); BRISK_LINUX_FILES (the test files, default
# tests/linux/test_*.py; e.g. BRISK_LINUX_FILES=tests/linux/test_kata_linux.py for one); BRISK_LINUX_DEADLINE
# (epoch seconds by which the tier must end: scripts/check.sh sets it so that `make check` ends inside CI's
# limit; no attempt starts with less than BRISK_LINUX_MIN_LEFT s, default 300, left, and each runs only until
# the deadline: files not run, or cut by it, count as skipped with that reason; unset: no deadline).
set -uo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.." || exit 1
BUILD=${BUILD:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
export BRISK=${BRISK:-$BUILD/brisk}
OUT=$BUILD/linux
# (the nested VM passes on BRISK_* variables only)
export BRISK_BUILD=$BUILD BRISK_LINUX_DIR=${BRISK_LINUX_DIR:-$OUT}

skip=
if ! tests/linux/fetch-kernel.sh; then
	skip="Debian's kernel could not be fetched (tests/linux/fetch-kernel.sh failed; apt-get download needs the network)"
elif ! tests/linux/mkinitramfs.sh "$OUT/initramfs.cpio.gz"; then
	skip="the initramfs could not be built (tests/linux/mkinitramfs.sh failed)"
elif ! tests/linux/mkinitramfs.sh --modules "$OUT/modules" "$OUT/initramfs-virtio.cpio.gz"; then
	rm -f "$OUT/initramfs-virtio.cpio.gz" # test_virtio_linux.py skips, naming it
fi
if [ -z "$skip" ]; then
	# test_kata_linux.py skips with the one-line reason when this cannot be had
	if ! why=$(tests/linux/build-virtio-mmio.sh 2>&1 >/dev/null); then
		export BRISK_LINUX_KATA_SKIP="${why##*$'\n'}"
	elif ! tests/linux/mkinitramfs.sh --modules "$OUT/modules" --override "$OUT/modules-cmdline/virtio_mmio.ko" \
		"$OUT/initramfs-kata.cpio.gz"; then
		export BRISK_LINUX_KATA_SKIP="the initramfs with the rebuilt virtio_mmio.ko could not be built (mkinitramfs.sh)"
	fi
	[ -z "${BRISK_LINUX_KATA_SKIP:-}" ] || echo "check-linux: test_kata_linux.py will skip: $BRISK_LINUX_KATA_SKIP"
fi
[ -z "$skip" ] || export BRISK_LINUX_SKIP="$skip"

host_why=
if [ -z "$skip" ]; then
	host_why=$(scripts/linux-probe.sh)
	case $? in
	0) host_why= ;;
	1) ;;
	*) echo "check-linux: FAILED: scripts/linux-probe.sh could not tell whether this host's KVM runs Linux"; exit 1 ;;
	esac
fi
if [ -z "$skip" ] && [ -n "$host_why" ] && [ -x scripts/nested-kvm.sh ] &&
	[ -z "${BRISK_NO_NESTED:-}" ] && [ "${BRISK_LINUX_NESTED:-1}" != 0 ]; then
	echo "== $host_why: booting Linux inside a nested KVM (scripts/nested-kvm.sh, QEMU TCG)"
	errf=$(mktemp)
	cache=(-o "cache_dir=$BUILD/linux/.pytest_cache")
	outf=$(mktemp)
	# A boot under nested TCG takes 10-30 s (7.5-12 s in CI): a hung one is given up after 150 s, not
	# 300, and a nested VM the emulator wedges (it prints nothing more) after 2 x 150 + 60 s of silence,
	# not at the file's 600 s limit; either way the file's next attempt runs in a fresh VM.
	export BRISK_LINUX_TIMEOUT=${BRISK_LINUX_TIMEOUT:-150}
	idle=${NESTED_KVM_IDLE:-$((2 * ${BRISK_LINUX_TIMEOUT%.*} + 60))}
	vm_timeout=${NESTED_KVM_TIMEOUT:-600} deadline=${BRISK_LINUX_DEADLINE:-} min_left=${BRISK_LINUX_MIN_LEFT:-300}
	clipped=0
	# Whether an attempt may start: with a deadline, only while min_left s remain; sets `timeout` (the
	# attempt's cap: the deadline's remainder when that is sooner than vm_timeout) and `clipped`.
	# `clipped` keeps the last attempt's when none may start.
	may_start() {
		local left
		[ -n "$deadline" ] || { timeout=$vm_timeout clipped=0; return 0; }
		left=$((deadline - $(date +%s)))
		[ $left -ge "$min_left" ] || return 1
		timeout=$vm_timeout clipped=0
		[ $left -ge "$timeout" ] || timeout=$left clipped=1
	}
	nested_pytest() { # pytest arguments (ending with the test file); sets rc, output also in $outf
		NESTED_KVM_TIMEOUT=$timeout NESTED_KVM_IDLE=$idle NESTED_KVM_ALIVE=${NESTED_KVM_ALIVE:-90} \
			scripts/nested-kvm.sh -- env BRISK_IN_NESTED=1 "$PYTHON" -m pytest -rs "${cache[@]}" "$@" \
			2> >(tee "$errf" >&2) | tee "$outf"
		rc=${PIPESTATUS[0]}
		wait
	}
	# Died or timed out (125 after the command started), or tests failed: the harness,
	# QEMU's TCG, has rare failures of its own (scripts/nested-kvm.md "Known problems"),
	# and a Linux boot, with its tens of thousands of exits, meets them more often than
	# any other test. So each test file runs in its own nested VM (a VM that dies takes
	# only that file's boots with it) and gets up to $attempts attempts (three at least;
	# a fourth or fifth only while the tier has run less than $budget s), each in a fresh
	# nested VM: the later ones run the tests that failed, or all of the file's when the
	# attempt did not finish. Every result is shown and the last verdict of each file
	# counts: a brisk bug fails every time. The tier's summary line adds up the files'
	# last attempts. (Up to five, not three, since a CI run of the tier ended with two
	# files failing their last attempt, each with one of the emulator's signatures in
	# scripts/nested-kvm.md: a vCPU looping npf -> emulate -> #PF, an early triple fault.)
	attempts=${BRISK_LINUX_ATTEMPTS:-5} budget=${BRISK_LINUX_BUDGET:-2700}
	vm_died() { [ $rc -eq 125 ] && grep -qE '^nested-kvm: (timed out|VM died while running)' "$errf"; }
	tier_rc=0 tot_p=0 tot_f=0 tot_s=0 t0=$(date +%s) out_of_time= rc=0 timeout=$vm_timeout
	# a file's tests (its `def test_` lines: parametrised ones count once), for the skipped count
	tests_in() { grep -c '^def test_' "$1"; }
	for file in ${BRISK_LINUX_FILES:-tests/linux/test_*.py}; do
		rm -rf "$BUILD/linux/.pytest_cache" # no failures recorded by an earlier run
		if [ -n "$out_of_time" ] || ! may_start; then
			out_of_time=1
			echo "== real-kernel tier: $file: not run, fewer than $min_left s left before make check's deadline (BRISK_LINUX_DEADLINE)"
			tot_s=$((tot_s + $(tests_in "$file")))
			continue
		fi
		echo "== real-kernel tier: $file"
		nested_pytest "$file"
		for ((attempt = 2; attempt <= attempts; attempt++)); do
			[ $rc -eq 1 ] || vm_died || break
			if [ $attempt -gt 3 ] && [ $(($(date +%s) - t0)) -ge "$budget" ]; then
				echo "== real-kernel tier: $file: no attempt $attempt, the tier has run $(($(date +%s) - t0)) s (budget $budget s)"
				break
			fi
			if ! may_start; then
				echo "== real-kernel tier: $file: no attempt $attempt, fewer than $min_left s left before make check's deadline"
				out_of_time=1
				break
			fi
			echo "== real-kernel tier: $file, attempt $attempt of $attempts, in a fresh nested VM (the failed tests, or all if none were recorded)"
			nested_pytest --last-failed --last-failed-no-failures all "$file"
		done
		if [ $clipped = 1 ] && vm_died && grep -q '^nested-kvm: timed out after' "$errf"; then
			# the deadline, not the file, ended the attempt: what it did not finish is not a verdict
			echo "== real-kernel tier: $file: cut by make check's deadline after $timeout s: counted as skipped"
			out_of_time=1
			tot_s=$((tot_s + $(tests_in "$file")))
			continue
		fi
		[ $rc -ne 125 ] || vm_died || break # the nested VM cannot run here at all: the skip path below
		line=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error|errors)\b.* in [0-9.]+s' "$outf" | tail -n 1)
		n() { echo "$line" | grep -oE "[0-9]+ $1\b" | awk '{s += $1} END {print s + 0}'; }
		# a --last-failed attempt deselects what passed before: those count as passed
		tot_p=$((tot_p + $(n passed) + $(n deselected))) tot_s=$((tot_s + $(n skipped)))
		tot_f=$((tot_f + $(n failed) + $(n error) + $(n errors)))
		if [ $rc -ne 0 ]; then
			tier_rc=1
			if vm_died; then
				echo "check-linux: FAILED: $file: the nested VM: $(grep '^nested-kvm:' "$errf" | tail -n1 | sed 's/^nested-kvm: //')"
				[ -n "$line" ] || tot_f=$((tot_f + 1))
			fi
		fi
	done
	if [ $rc -ne 125 ] || vm_died; then
		rm -f "$errf" "$outf"
		# pytest's form, for scripts/check.sh's count
		echo "== $tot_p passed, $tot_f failed, $tot_s skipped in $(($(date +%s) - t0))s (real-kernel tier: each file's last attempt) =="
		exit $tier_rc
	fi
	rm -f "$outf"
	[ $tier_rc = 0 ] || { echo "check-linux: FAILED: a test file failed before the nested VM stopped starting"; exit 1; }

	why=$(grep '^nested-kvm:' "$errf" | tail -n1 | sed 's/^nested-kvm: //')
	rm -f "$errf"
	case $why in
	"timed out"* | *"died while running"*)
		# pytest was running: a hang or a crash is a failure, not a reason to skip
		echo "check-linux: FAILED: the nested VM running the Linux tier: $why"
		exit 1 ;;
	esac
	# 125 before pytest ran: the nested VM cannot run here; run pytest on this host, where it skips with the reason
	export BRISK_LINUX_SKIP="$host_why (and the nested KVM could not run: ${why:-no reason given})"
fi
# shellcheck disable=SC2086 # one word per file
"$PYTHON" -m pytest -rs -p no:cacheprovider ${BRISK_LINUX_FILES:-tests/linux}
