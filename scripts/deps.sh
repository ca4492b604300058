#!/usr/bin/env bash
# deps.sh - install the Debian packages brisk needs, only those missing (idempotent).
#   scripts/deps.sh            build + test dependencies (what `make demo` and `make check` need)
#   scripts/deps.sh bench      + what bench/ needs (QEMU for the side-by-side run, strace)
#   scripts/deps.sh fuzz       + clang's libFuzzer runtime
#   scripts/deps.sh linux-mmio KVER DEBVER
#                              only the real-kernel tier's kernel headers and source, of that kernel
#                              (tests/linux/build-virtio-mmio.sh: KVER e.g. 6.1.0-57-amd64, DEBVER its
#                              Debian version 6.1.192-3; the tier's kernel is known only once fetched)
set -euo pipefail

build=(gcc make libc6-dev libjson-c-dev libslirp-dev node-llhttp libseccomp-dev) # libslirp: brisk-slirp, --net user's helper; node-llhttp: llhttp's C sources, compiled into brisk for the API socket's HTTP helper; libseccomp: the per-thread filters
check=(libcmocka-dev python3 python3-pytest python3-pytest-timeout strace qemu-system-x86 busybox-static cpio
	xz-utils kmod coreutils util-linux gzip e2fsprogs # the second line: scripts/nested-kvm.sh and the Linux tier
	acpica-tools # iasl: tests/integration/test_acpi.py disassembles brisk acpi --dump's tables
	iproute2 # ip netns/tuntap, ss: the virtio-net tests (a tap in a private namespace)
	time # GNU time: tests/integration/test_endurance.py measures each run's peak RSS
	clang-format git) # scripts/lint.sh: the format and commit-subject checks
bench=(qemu-system-x86 strace liburing-dev) # liburing: bench/blk_engine.c (docs/performance.md)
fuzz=(clang libclang-rt-14-dev)

want=("${build[@]}" "${check[@]}")
case "${1:-}" in
bench) want+=("${bench[@]}") ;;
fuzz) want+=("${fuzz[@]}") ;;
linux-mmio)
	[ $# -eq 3 ] || { echo "usage: $0 linux-mmio KVER DEBVER" >&2; exit 2; }
	# linux-headers-KVER pulls linux-headers-KVER-common and linux-kbuild-M.m; the source is pinned
	want=("linux-headers-$2=$3" "linux-source-$(echo "$2" | cut -d. -f1,2)=$3") ;;
"") ;;
*) echo "usage: $0 [bench|fuzz|linux-mmio KVER DEBVER]" >&2; exit 2 ;;
esac

missing=()
for p in "${want[@]}"; do # NAME or NAME=VERSION (that version installed)
	got=$(dpkg-query -W -f='${Status} ${Version}' "${p%%=*}" 2>/dev/null) || got=
	case $p in
	*=*) [ "$got" = "install ok installed ${p#*=}" ] || missing+=("$p") ;;
	*) case $got in "install ok installed"*) ;; *) missing+=("$p") ;; esac ;;
	esac
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "deps: installing ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
