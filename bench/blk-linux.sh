#!/usr/bin/env bash
# blk-linux.sh - virtio-blk from inside a Linux guest, brisk against QEMU microvm
# (docs/performance.md "virtio-blk inside a Linux guest (nested)"), and in the same session the
# boot measurements of "Linux boot with root on virtio-blk" and "hvc0 against ttyS0".
#
# 1. Block rows, ROUNDS rounds interleaved (brisk and QEMU alternate which goes first; the host's own run
#    last): the real-kernel tier's kernel and initramfs-virtio.cpio.gz (tests/linux/run.sh builds them in
#    $BUILD/linux), --memory 256M, 1 vCPU, one raw disk: a MIB MiB image of random bytes in a scratch
#    directory (a tmpfs inside the nested VM: the image is in the host's page cache, both VMMs use it in
#    their default cache mode, which is the host page cache: brisk cache=writeback, QEMU cache=writeback).
#    The guest's init (tests/linux/init.c, brisk.blkbench=/dev/vda) runs, one thread at queue depth 1 with
#    O_DIRECT: seqread (1 MiB reads), seqwrite (1 MiB writes + fdatasync), randread4k (RAND 4 KiB reads).
#      brisk: brisk run --kernel K --initrd I --memory 256M --disk IMG --cmdline "DEFAULT WORDS"
#      QEMU:  qemu-system-x86_64 -M microvm,acpi=on,rtc=on -accel kvm -cpu host,-arch-capabilities -m 256M
#             -smp 1 -nodefaults -no-user-config -display none -no-reboot -serial stdio
#             -global virtio-mmio.force-legacy=false
#             -drive id=d0,file=IMG,format=raw,if=none -device virtio-blk-device,drive=d0
#             -kernel K -initrd I -append "DEFAULT WORDS"
#      host:  $BUILD/linux/init --blkbench IMG (the init's own rows on the image file, in the VM that runs
#             both VMMs: O_DIRECT where the file system has it; tmpfs on Linux 6.1 has not, so there it reads
#             the page cache: o_direct=0, what a VMM in writeback mode does too)
#    DEFAULT is brisk's default Linux command line as `brisk run --help` states it, WORDS
#    "brisk.virtio=1 brisk.blkbench=/dev/vda brisk.blkbench.mib=MIB brisk.blkbench.rand=RAND brisk.poweroff=auto".
#    Prints per row the median (min-max) of each and the ratios brisk/QEMU and brisk/host (of medians, and
#    the median of the per-round brisk/QEMU ratios).
# 2. Once, to see where brisk's time goes: one bench boot under `brisk profile --no-trace --log-level info`
#    (userspace exits by address, KVM's exit counts, the disk's request counts) and one under `strace -c -f`.
# 3. Boots (BOOTS of each, interleaved), each under `brisk profile --no-trace` (the --timeline phases and
#    markers, userspace exits by port/address and KVM's count of every exit):
#      root: --disk ROOT.img (tests/linux/mkrootfs.sh) + "brisk.virtio=1 brisk.root=/dev/vda
#            brisk.poweroff=auto": marker 0x1 = the initramfs's init, 0x4 = the root disk's init
#      hvc0:  --console virtio, DEFAULT with console=hvc0 in place of console=ttyS0, + brisk.virtio=1
#      ttyS0: --console virtio, DEFAULT (console=ttyS0), + brisk.virtio=1
#
# Usage: bench/blk-linux.sh [-n ROUNDS] [--mib MIB] [--rand RAND] [--boots BOOTS] [--no-blk] [--no-boots]
#        [--no-investigate] [KERNEL]      (defaults: 5 rounds, 64 MiB, 4096 reads, 2 boots, $BUILD/linux/vmlinux)
# Output: the summary on stdout; every boot's output and results.tsv in $BUILD/bench/blk-linux/DATE/.
# Needs a KVM that runs Linux and qemu-system-x86_64: on a host without one, `BENCH_NESTED=1
# bench/blk-linux.sh` runs it inside scripts/nested-kvm.sh (times there are 10-100x a hardware host's and
# noisy; compare only side by side, as here).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
if [ "${BENCH_NESTED:-0}" = 1 ] && [ -z "${BRISK_IN_NESTED:-}" ]; then
	exec env NESTED_KVM_ENV="BUILD" scripts/nested-kvm.sh -- env BRISK_IN_NESTED=1 BENCH_NESTED=0 "$0" "$@"
fi
rounds=5 mib=64 rand=4096 boots=2 do_blk=1 do_boots=1 do_inv=1
while [ $# -gt 0 ]; do
	case $1 in
	-n) rounds=$2 && shift 2 ;;
	--mib) mib=$2 && shift 2 ;;
	--rand) rand=$2 && shift 2 ;;
	--boots) boots=$2 && shift 2 ;;
	--no-blk) do_blk=0 && shift ;;
	--no-boots) do_boots=0 && shift ;;
	--no-investigate) do_inv=0 && shift ;;
	-*) echo "usage: $0 [-n ROUNDS] [--mib MIB] [--rand RAND] [--boots BOOTS] [--no-blk] [--no-boots] [--no-investigate] [KERNEL]" >&2 && exit 2 ;;
	*) break ;;
	esac
done
PATH=$PATH:/sbin:/usr/sbin
PY=/usr/bin/python3
BRISK=${BRISK:-$BUILD/brisk}
linux=${BRISK_LINUX_DIR:-$BUILD/linux}
kernel=${1:-$linux/vmlinux}
initrd=$linux/initramfs-virtio.cpio.gz
for f in "$BRISK" "$kernel" "$initrd" "$linux/init"; do
	[ -e "$f" ] || { echo "blk-linux: $f missing: run make and tests/linux/run.sh first" >&2 && exit 2; }
done
# (an init without host mode would run as an init here: mount, then reboot this machine)
grep -qa -- '--blkbench FILE' "$linux/init" ||
	{ echo "blk-linux: $linux/init has no --blkbench host mode: rebuild it (tests/linux/mkinitramfs.sh)" >&2 && exit 2; }
command -v qemu-system-x86_64 >/dev/null || { echo "blk-linux: qemu-system-x86_64 not found" >&2 && exit 2; }
DEF=$("$BRISK" run --help | sed -n 's/^ *"\(console=ttyS0 [^"]*\)"$/\1/p' | head -n 1)
[ -n "$DEF" ] || { echo "blk-linux: cannot read the default command line from $BRISK run --help" >&2 && exit 2; }
out=$BUILD/bench/blk-linux/$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$out"
scratch=$(mktemp -d "${TMPDIR:-/tmp}/blk-linux.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
img=$scratch/bench.img
words="brisk.virtio=1 brisk.blkbench=/dev/vda brisk.blkbench.mib=$mib brisk.blkbench.rand=$rand brisk.poweroff=auto"
TO=${BLK_LINUX_TIMEOUT:-600}

echo "== blk-linux $(date -u '+%Y-%m-%d %H:%M UTC'), $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)${BRISK_IN_NESTED:+, inside scripts/nested-kvm.sh}"
echo "kernel $kernel, initrd $initrd, brisk $BRISK, $(qemu-system-x86_64 --version | head -n1)"
echo "scratch $scratch on $(stat -f -c %T "$scratch"); results in $out"

run_brisk() { # output file, extra brisk run options...
	local f=$1
	shift
	timeout "$TO" "$BRISK" run --kernel "$kernel" --initrd "$initrd" --memory 256M "$@" </dev/null >"$f" 2>&1 ||
		echo "blk-linux: brisk exited with status $? ($f)" >&2
}
run_qemu() { # output file, -append words
	timeout "$TO" qemu-system-x86_64 -M microvm,acpi=on,rtc=on -accel kvm -cpu host,-arch-capabilities \
		-m 256M -smp 1 -nodefaults -no-user-config -display none -no-reboot -serial stdio \
		-global virtio-mmio.force-legacy=false \
		-drive id=d0,file="$img",format=raw,if=none -device virtio-blk-device,drive=d0 \
		-kernel "$kernel" -initrd "$initrd" -append "$2" </dev/null >"$1" 2>&1 ||
		echo "blk-linux: QEMU exited with status $? ($1)" >&2
}
record() { # round, who, output file: its brisk-blkbench rows into results.tsv
	local line row v req
	grep -h '^brisk-blkbench: \(seqread\|seqwrite\|randread4k\|queue\|done\|.*failed\)' "$3" | sed "s/^/[$2] /" >&2 || true
	grep '^brisk-blkbench: \(seqread\|seqwrite\|randread4k\) ' "$3" | while read -r line; do
		row=$(echo "$line" | cut -d' ' -f2)
		v=$(echo "$line" | grep -o '\(MiB/s\|iops\)=[0-9.]*' | cut -d= -f2)
		req=$(echo "$line" | grep -o 'requests=[0-9]*' | cut -d= -f2 || true)
		printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$row" "$v" "${req:--}" >>"$out/results.tsv"
	done
}

if [ "$do_blk" = 1 ]; then
	t0=$(date +%s)
	head -c "$((mib << 20))" /dev/urandom >"$img"
	echo "image: $mib MiB of random bytes ($(($(date +%s) - t0)) s to write); sanity, host dd: $(
		dd if="$img" of=/dev/null bs=1M 2>&1 | tail -n1); with iflag=direct: $(
		dd if="$img" of=/dev/null bs=1M iflag=direct 2>&1 | tail -n1)"
	printf 'round\twho\trow\tvalue\trequests\n' >"$out/results.tsv"
	for r in $(seq 1 "$rounds"); do
		if [ $((r % 2)) = 1 ]; then order="brisk qemu"; else order="qemu brisk"; fi
		for who in $order host; do
			f=$out/r$r-$who.out
			t=$(date +%s.%N)
			case $who in
			brisk) run_brisk "$f" --disk "$img" --cmdline "$DEF $words" ;;
			qemu) run_qemu "$f" "$DEF $words" ;;
			host) "$linux/init" --blkbench "$img" "brisk.blkbench.mib=$mib" "brisk.blkbench.rand=$rand" >"$f" 2>&1 ;;
			esac
			echo "round $r $who: $(echo "$(date +%s.%N) - $t" | bc | cut -c1-6) s" >&2
			record "$r" "$who" "$f"
		done
	done
	echo
	echo "== virtio-blk from inside the guest: $rounds rounds, $mib MiB sequential in 1 MiB requests, $rand random 4 KiB reads; queue depth 1, O_DIRECT in the guest"
	$PY - "$out/results.tsv" <<'PY'
import statistics as st, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]).readlines()[1:]]
val = {}
req = {}
for r, who, row, v, n in rows:
    val.setdefault((row, who), {})[int(r)] = float(v)
    if n != "-":
        req.setdefault((row, who), []).append(int(n))
def cell(row, who):
    v = list(val.get((row, who), {}).values())
    if not v:
        return "n/a", None
    m = st.median(v)
    return f"{m:.1f} ({min(v):.1f}-{max(v):.1f})", m
print(f"{'row':<11} {'unit':<6} {'brisk median (min-max)':<26} {'QEMU median (min-max)':<26} {'host median (min-max)':<26} "
      f"{'brisk/QEMU':>10} {'paired':>7} {'brisk/host':>10}  requests brisk/QEMU")
for row, unit in (("seqread", "MiB/s"), ("seqwrite", "MiB/s"), ("randread4k", "IOPS")):
    (b, bm), (q, qm), (h, hm) = cell(row, "brisk"), cell(row, "qemu"), cell(row, "host")
    bq = f"{bm / qm:.2f}" if bm and qm else "n/a"
    bh = f"{bm / hm:.3f}" if bm and hm else "n/a"
    bv, qv = val.get((row, "brisk"), {}), val.get((row, "qemu"), {})
    pr = [bv[k] / qv[k] for k in bv if k in qv]
    paired = f"{st.median(pr):.2f}" if pr else "n/a"
    rq = "/".join(str(st.median(req[(row, w)])) if req.get((row, w)) else "-" for w in ("brisk", "qemu"))
    print(f"{row:<11} {unit:<6} {b:<26} {q:<26} {h:<26} {bq:>10} {paired:>7} {bh:>10}  {rq}")
PY
fi

if [ "$do_blk" = 1 ] && [ "$do_inv" = 1 ]; then
	echo
	echo "== where brisk's time goes: one bench boot under brisk profile --no-trace --log-level info"
	f=$out/inv-profile.out
	timeout "$TO" "$BRISK" profile --no-trace --json "$out/inv-profile.json" --log-level info --kernel "$kernel" \
		--initrd "$initrd" --memory 256M --disk "$img" --cmdline "$DEF $words" </dev/null >"$f" 2>&1 || true
	grep -E '^brisk-blkbench: (seqread|seqwrite|randread4k)|virtio-blk .*reads' "$f" || true
	$PY - "$out/inv-profile.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ex = d["exits"]
print("userspace exits by reason:", ", ".join(f"{e['reason']} {e['count']} ({e['total_us'] / 1e3:.1f} ms)" for e in ex["by_reason"]))
top = sorted(ex["by_address"], key=lambda a: -a["count"])[:12]
print("top addresses:", ", ".join(f"{a['kind']} {a['dir']} {a['addr_hex']} {a['count']}" for a in top))
for v in d["kvm_stats"].get("vcpus", []):
    s = {x["name"]: x["deltas"][-1] for x in v["stats"]}
    print(f"KVM vcpu{v['vcpu']}:", ", ".join(f"{k} {s[k]}" for k in ("exits", "io_exits", "mmio_exits", "halt_exits",
          "irq_injections", "irq_exits", "signal_exits", "halt_wakeup") if k in s))
PY
	if command -v strace >/dev/null; then
		echo "== one bench boot under strace -c -f (syscalls of all brisk's threads)"
		f=$out/inv-strace.out
		timeout "$TO" strace -c -f -o "$out/inv-strace.txt" "$BRISK" run --kernel "$kernel" --initrd "$initrd" \
			--memory 256M --disk "$img" --cmdline "$DEF $words" </dev/null >"$f" 2>&1 || true
		grep -E '^brisk-blkbench: (seqread|seqwrite|randread4k)' "$f" || true
		head -n 22 "$out/inv-strace.txt"
	fi
fi

if [ "$do_boots" = 1 ]; then
	root=$scratch/root.img
	"$(pwd)/tests/linux/mkrootfs.sh" --init "$linux/init" "$root" 2>&1 | tail -n1
	hvc=${DEF/console=ttyS0/console=hvc0}
	for b in $(seq 1 "$boots"); do
		for kind in root hvc0 ttyS0; do
			f=$out/boot$b-$kind
			case $kind in
			root) opts=(--disk "$root" --cmdline "$DEF brisk.virtio=1 brisk.root=/dev/vda brisk.poweroff=auto") ;;
			hvc0) opts=(--console virtio --cmdline "$hvc brisk.virtio=1") ;;
			ttyS0) opts=(--console virtio --cmdline "$DEF brisk.virtio=1") ;;
			esac
			timeout "$TO" "$BRISK" profile --no-trace --json "$f.json" --kernel "$kernel" --initrd "$initrd" \
				--memory 256M "${opts[@]}" </dev/null >"$f.out" 2>&1 || echo "blk-linux: boot $kind exited $?" >&2
		done
	done
	echo
	echo "== boots ($boots of each, interleaved; brisk profile --no-trace): times in s since brisk's exec"
	$PY - "$out" "$boots" <<'PY'
import json, re, sys
out, boots = sys.argv[1], int(sys.argv[2])
def group(a):
    if a["kind"] == "pio" and 0x3f8 <= a["addr"] <= 0x3ff:
        return "ttyS0 (0x3f8-0x3ff)"
    if a["kind"] == "mmio" and 0xd0000000 <= a["addr"] < 0xd0100000:
        return f"virtio window {(a['addr'] - 0xd0000000) >> 12}" if a["addr"] >= 0xd0001000 else "marker/other mmio"
    return "other " + a["kind"]
for b in range(1, boots + 1):
    for kind in ("root", "hvc0", "ttyS0"):
        try:
            d = json.load(open(f"{out}/boot{b}-{kind}.json"))
        except (OSError, ValueError) as e:
            print(f"boot {b} {kind}: no report ({e})")
            continue
        text = open(f"{out}/boot{b}-{kind}.out", errors="replace").read()
        ms = {m["name"]: m["us"] / 1e6 for m in d["milestones"]}
        mk = " ".join(f"{n.split()[-1]}@{t:.2f}" for n, t in ms.items() if n.startswith("boot marker"))
        up = re.search(r"^brisk-init: uptime ([0-9.]+) s", text, re.M)
        ex = d["exits"]
        total = sum(e["count"] for e in ex["by_reason"])
        groups = {}
        for a in ex["by_address"]:
            groups[group(a)] = groups.get(group(a), 0) + a["count"]
        kvm = sum(x["deltas"][-1] for v in d["kvm_stats"].get("vcpus", []) for x in v["stats"] if x["name"] == "exits")
        hvc = re.search(r"^brisk-hvc0: .*$", text, re.M)
        crng = re.search(r"^\[ *([0-9.]+)\] random: crng init done", text, re.M)
        print(f"boot {b} {kind:<5}: ended {ms.get('guest ended', float('nan')):.2f}, markers {mk or 'none'}, "
              f"uptime at init {up.group(1) if up else '?'} s, crng init done at {crng.group(1) + ' s' if crng else 'not seen'}; "
              f"userspace exits {total} ({', '.join(f'{k} {v}' for k, v in sorted(groups.items(), key=lambda kv: -kv[1]))}"
              f"{', overflow ' + str(ex.get('address_overflow')) if ex.get('address_overflow') else ''}); KVM exits {kvm}"
              f"; stdout {len(text)} bytes{'; hvc0 line seen' if hvc else ''}")
PY
fi
