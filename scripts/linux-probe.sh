#!/usr/bin/env bash
# linux-probe.sh - can THIS host's KVM run a Linux kernel? Found by probing, never by host name:
# brisk runs build/guests/int3probe.elf, which executes int3 at CPL 0 as Linux does (alternatives
# self-test, kprobes, jump labels). A KVM that emulates guest kernel code and cannot emulate int3
# ends that run with KVM_EXIT_INTERNAL_ERROR (brisk exit status 10).
#
# Usage: scripts/linux-probe.sh            (BRISK, BUILD from the environment)
# Exit status: 0 = Linux can run here; 1 = it cannot (the reason on stdout, one line);
#              2 = the probe itself failed (why on stderr).
set -uo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/.." || exit 2
BUILD=${BUILD:-build}
BRISK=${BRISK:-$BUILD/brisk}
probe=$BUILD/guests/int3probe.elf

if [ ! -e /dev/kvm ]; then
	echo "no /dev/kvm on this host"
	exit 1
fi
for f in "$BRISK" "$probe"; do
	[ -e "$f" ] || { echo "linux-probe: $f is missing (run make all guests)" >&2; exit 2; }
done
out=$("$BRISK" run --kernel "$probe" </dev/null 2>&1)
rc=$?
case $rc in
0) grep -q "int3probe: PASS" <<<"$out" && exit 0 ;;
10) echo "KVM on this host cannot run Linux: int3 at CPL 0 ends in KVM_EXIT_INTERNAL_ERROR (emulation failure)"
	exit 1 ;;
esac
echo "linux-probe: the int3 probe guest failed (exit $rc):" >&2
echo "$out" | tail -n 5 >&2
exit 2
