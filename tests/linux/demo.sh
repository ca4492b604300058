#!/usr/bin/env bash
# demo.sh -- `make demo-linux`: boot Debian's stock kernel under brisk to a
# busybox shell on the console (stdin/stdout). Exit the shell (or Ctrl-A x)
# to end the VM. Where this host's KVM cannot run Linux (found by probing:
# scripts/linux-probe.sh), boots it inside scripts/nested-kvm.sh instead,
# where there is no terminal: the shell then runs a short scripted session.
# Environment: BRISK (default build/brisk), BRISK_DEMO_KERNEL (vmlinuz or
# vmlinux, default vmlinuz), BRISK_DEMO_ARGS (extra brisk run options).
set -euo pipefail
cd "$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")/../.."
BUILD=${BUILD:-build}
BRISK=${BRISK:-$BUILD/brisk}
OUT=$BUILD/linux
# brisk's default Linux command line as `brisk run --help` states it (KERNEL_LINUX_CMDLINE + KERNEL_LINUX_ACPI)
DEF=$("$BRISK" run --help | sed -n 's/^ *"\(console=ttyS0 [^"]*\)"$/\1/p' | head -n 1)
[ -n "$DEF" ] || { echo "demo-linux: cannot read the default command line from $BRISK run --help" >&2 && exit 1; }

# The scripted session of the nested case: the nested VM has no terminal, so the shell reads these lines.
SCRIPT='echo "== a shell on Debian'"'"'s kernel under brisk (scripted: the nested VM has no terminal)"; uname -a; cat /proc/cmdline; grep -m1 "model name" /proc/cpuinfo; head -n 3 /proc/meminfo; exit'
# Where can it boot? Asked first, so that nothing is downloaded for a demo that cannot run. (Under set -e
# a bare why=$(...) would end this script silently at the probe's status 1, which is the answer "no".)
rc=0
why=$(scripts/linux-probe.sh) || rc=$?
if [ $rc -eq 1 ] && { [ ! -x scripts/nested-kvm.sh ] || [ -n "${BRISK_NO_NESTED:-}" ]; }; then
	echo "demo-linux: $why; nothing to boot it in (BRISK_NO_NESTED is set or scripts/nested-kvm.sh is missing)"
	exit 0
fi
if [ $rc -gt 1 ]; then
	echo "demo-linux: scripts/linux-probe.sh could not tell whether this host's KVM runs Linux (exit $rc; its reason is above)" >&2
	exit 1
fi
fetch() { tests/linux/fetch-kernel.sh && tests/linux/mkinitramfs.sh --busybox "$OUT/initramfs-busybox.cpio.gz"; }
fetch || { echo "demo-linux: Debian's kernel could not be fetched or its initramfs built (above); nothing to boot"; exit 0; }
if [ $rc -eq 1 ]; then
	echo "demo-linux: $why; booting it inside a nested KVM (scripts/nested-kvm.sh, software-emulated CPU: tens of times slower) with a scripted shell session"
	exec scripts/nested-kvm.sh -- sh -c 'printf "%s\n" "$1" | "$2" run --kernel "$3" --initrd "$4" --memory 256M --cmdline "$5" '"${BRISK_DEMO_ARGS:-}" \
		sh "$SCRIPT" "$BRISK" "$OUT/${BRISK_DEMO_KERNEL:-vmlinuz}" "$OUT/initramfs-busybox.cpio.gz" "$DEF brisk.shell=1"
fi
echo "demo-linux: booting $OUT/${BRISK_DEMO_KERNEL:-vmlinuz} ($(cat "$OUT/kernel.version")) to a busybox shell; exit the shell or press Ctrl-A x to end"
exec "$BRISK" run --kernel "$OUT/${BRISK_DEMO_KERNEL:-vmlinuz}" --initrd "$OUT/initramfs-busybox.cpio.gz" \
	--memory 256M --cmdline "$DEF brisk.shell=1" ${BRISK_DEMO_ARGS:-}
