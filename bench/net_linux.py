#!/usr/bin/python3
"""net_linux.py - virtio-net and vsock from inside a Linux guest, brisk against QEMU microvm
(docs/performance.md "virtio-net and vsock inside a Linux guest"). bench/net-linux.sh runs it (inside
scripts/nested-kvm.sh with BENCH_NESTED=1).

Both VMMs boot the real-kernel tier's kernel and initramfs-virtio.cpio.gz (--memory 256M, 1 vCPU) in a network
namespace this script creates, with a tap (192.0.2.1/24 on the host side, 192.0.2.2 in the guest) and a vsock
device (guest CID 3):
  brisk: brisk run --net tap=TAP --vsock cid=3,uds=DIR/v.sock ...
  QEMU:  qemu-system-x86_64 -M microvm,acpi=on,rtc=on -accel kvm -cpu host,-arch-capabilities -m 256M -smp 1
         -nodefaults -no-user-config -display none -no-reboot -serial stdio -global virtio-mmio.force-legacy=false
         -netdev tap,id=n0,ifname=TAP,script=no,downscript=no -device virtio-net-device,netdev=n0
         [-device vhost-vsock-device,guest-cid=3, where /dev/vhost-vsock exists] -kernel K -initrd I -append ...
QEMU's virtio-net is its userspace device (vhost=off, QEMU's default for -netdev tap), like brisk's; its vsock
is vhost-vsock (the kernel's device: brisk's is in userspace, bridged to AF_UNIX).
The guest's init (tests/linux/init_net.c) does, in order:
  brisk.tcp=192.0.2.1:5001:BYTES     BYTES to the host and BYTES back: the host times guest -> host, the guest
                                     host -> guest (first byte to last)
  brisk.tcpping=192.0.2.1:5003:PINGS 64-byte round trips, TCP_NODELAY
  brisk.vsock=5002:BYTES, brisk.vsockping=5004:PINGS   the same over vsock to the host (CID 2)
Rounds alternate which VMM goes first. Prints medians (min-max) per row and brisk/QEMU (of the medians and the
median of the per-round ratios). Then one brisk boot under `brisk profile --no-trace`: exits to brisk at each
device's window against the frames moved (QueueNotify: 0 is the ioeventfd working).

Usage: net_linux.py [-n ROUNDS] [--bytes N] [--pings N]   (defaults 5, 16 MiB, 2000)
"""
import argparse
import json
import os
import re
import socket
import statistics as st
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "linux"))
import netpeer  # noqa: E402

BUILD = ROOT / os.environ.get("BUILD", "build")
BRISK = Path(os.environ.get("BRISK", BUILD / "brisk"))
LINUX = Path(os.environ.get("BRISK_LINUX_DIR", BUILD / "linux"))
HOST, GUEST, CID = "192.0.2.1", "192.0.2.2", 3
P_TCP, P_VSOCK, P_TCPPING, P_VSOCKPING = 5001, 5002, 5003, 5004


def default_cmdline():
    h = subprocess.run([str(BRISK), "run", "--help"], capture_output=True, text=True).stdout
    m = re.search(r'which is\s+"([^"]+)"\s+for a Linux kernel', h)
    if not m:
        sys.exit("net_linux: cannot read the default command line from brisk run --help")
    return m.group(1)


def peers(ns, who, tmp, timeout):
    """Starts the host's side for one boot; returns (results, threads)."""
    res = {k: netpeer.Result() for k in ("tcp", "tcpping", "vsock", "vsockping")}
    th = []

    def tcp_listen(port):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((HOST, port))
        s.listen(1)
        return s

    def in_ns(fn):
        def run():
            ns.enter_this_thread()
            fn()
        return netpeer.thread(run)

    th.append(in_ns(lambda: netpeer.serve_once(tcp_listen(P_TCP), res["tcp"], timeout)))
    th.append(in_ns(lambda: netpeer.serve_echo(tcp_listen(P_TCPPING), res["tcpping"], timeout)))
    for port, key, fn in ((P_VSOCK, "vsock", netpeer.serve_once), (P_VSOCKPING, "vsockping", netpeer.serve_echo)):
        if who == "brisk":
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(f"{tmp}/v.sock_{port}")
        else:  # vhost-vsock: the guest's CID 2 is this kernel's AF_VSOCK
            s = socket.socket(socket.AF_VSOCK, socket.SOCK_STREAM)
            s.bind((socket.VMADDR_CID_ANY, port))
        s.listen(1)
        th.append(netpeer.thread(fn, s, res[key], timeout))
    return res, th


def boot(who, ns, tap, words, tmp, log, vhost_vsock, timeout):
    kernel, initrd = LINUX / "vmlinux", LINUX / "initramfs-virtio.cpio.gz"
    if who == "brisk":
        cmd = [str(BRISK), "run", "--kernel", str(kernel), "--initrd", str(initrd), "--memory", "256M",
               "--net", f"tap={tap}", "--vsock", f"cid={CID},uds={tmp}/v.sock", "--log-level", "info",
               "--cmdline", words]
    else:
        cmd = ["qemu-system-x86_64", "-M", "microvm,acpi=on,rtc=on", "-accel", "kvm", "-cpu", "host,-arch-capabilities",
               "-m", "256M", "-smp", "1", "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
               "-serial", "stdio", "-global", "virtio-mmio.force-legacy=false",
               "-netdev", f"tap,id=n0,ifname={tap},script=no,downscript=no", "-device", "virtio-net-device,netdev=n0",
               *(["-device", f"vhost-vsock-device,guest-cid={CID}"] if vhost_vsock else []),
               "-kernel", str(kernel), "-initrd", str(initrd), "-append", words]
    t0 = time.monotonic()
    with open(log, "w") as f:
        p = subprocess.run(ns.wrap() + cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                           timeout=timeout)
    return p.returncode, time.monotonic() - t0


def guest_rows(text):
    rows = {}
    for kind, key in (("tcp connect", "tcp"), ("vsock connect", "vsock")):
        m = re.search(rf"^brisk-net: {kind} \S+: sent \d+ received \d+ ok, recv [0-9.]+ ms \(([0-9.]+) MiB/s\)", text,
                      re.M)
        if m:
            rows[f"{key} host->guest MiB/s"] = float(m.group(1))
    for kind, key in (("tcp ping", "tcp"), ("vsock ping", "vsock")):
        m = re.search(rf"^brisk-net: {kind} \S+: \d+ round trips of \d+ bytes, median ([0-9.]+) us", text, re.M)
        if m:
            rows[f"{key} round trip us"] = float(m.group(1))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--bytes", type=int, default=16 << 20)
    ap.add_argument("--pings", type=int, default=2000)
    a = ap.parse_args()
    for f in (BRISK, LINUX / "vmlinux", LINUX / "initramfs-virtio.cpio.gz"):
        if not f.exists():
            sys.exit(f"net_linux: {f} missing: run make and tests/linux/run.sh first")
    vhost_vsock = os.path.exists("/dev/vhost-vsock")
    words = (f"{default_cmdline()} brisk.virtio=1 brisk.poweroff=auto brisk.ip=eth0,{GUEST}/24 "
             f"brisk.tcp={HOST}:{P_TCP}:{a.bytes} brisk.tcpping={HOST}:{P_TCPPING}:{a.pings} "
             f"brisk.vsock={P_VSOCK}:{a.bytes} brisk.vsockping={P_VSOCKPING}:{a.pings}")
    out = BUILD / "bench" / "net-linux" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    ns = netpeer.NetNS(f"bnet{os.getpid()}", "btap0", f"{HOST}/24")
    q = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
    print(f"== net-linux {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.uname().release}, "
          f"{os.cpu_count()} CPUs{', inside scripts/nested-kvm.sh' if os.environ.get('BRISK_IN_NESTED') else ''}")
    print(f"brisk {BRISK}, {q}; QEMU's vsock: {'vhost-vsock-device' if vhost_vsock else 'none (no /dev/vhost-vsock)'}")
    print(f"{a.n} rounds, {a.bytes >> 20} MiB each way per stream, {a.pings} round trips of 64 bytes; results in {out}")
    vals = {}
    try:
        for r in range(1, a.n + 1):
            for who in (("brisk", "qemu") if r % 2 else ("qemu", "brisk")):
                with tempfile.TemporaryDirectory() as tmp:
                    res, th = peers(ns, who, tmp, 600)
                    log = out / f"r{r}-{who}.out"
                    rc, wall = boot(who, ns, "btap0", words, tmp, log, vhost_vsock, 900)
                    for t in th:
                        t.join(timeout=10)
                    rows = guest_rows(log.read_text(errors="replace"))
                    for key in ("tcp", "vsock"):
                        if res[key].ok:
                            rows[f"{key} guest->host MiB/s"] = res[key].mib_s()
                    print(f"round {r} {who}: exit {rc}, {wall:.1f} s, " + ", ".join(f"{k} {v:.1f}" for k, v in
                                                                                sorted(rows.items())), flush=True)
                    for k, v in rows.items():
                        vals.setdefault(k, {}).setdefault(who, {})[r] = v
        print("\n== medians (min-max) of the rounds; brisk/QEMU: of the medians, and the median of per-round ratios"
              " (round trips: QEMU/brisk, so that > 1 means brisk is better everywhere)")
        print(f"{'row':<26} {'brisk':<24} {'QEMU':<24} {'brisk/QEMU':>10} {'paired':>7}")
        for k in sorted(vals):
            b, q = vals[k].get("brisk", {}), vals[k].get("qemu", {})

            def cell(d):
                return f"{st.median(d.values()):.1f} ({min(d.values()):.1f}-{max(d.values()):.1f})" if d else "n/a"
            inv = k.endswith(" us")
            ratio = paired = "n/a"
            if b and q:
                bm, qm = st.median(b.values()), st.median(q.values())
                ratio = f"{(qm / bm if inv else bm / qm):.2f}"
                pr = [(q[i] / b[i] if inv else b[i] / q[i]) for i in b if i in q]
                paired = f"{st.median(pr):.2f}" if pr else "n/a"
            print(f"{k:<26} {cell(b):<24} {cell(q):<24} {ratio:>10} {paired:>7}")

        # where brisk's exits go: one boot under brisk profile
        with tempfile.TemporaryDirectory() as tmp:
            res, th = peers(ns, "brisk", tmp, 600)
            j = out / "profile.json"
            kernel, initrd = LINUX / "vmlinux", LINUX / "initramfs-virtio.cpio.gz"
            with open(out / "profile.out", "w") as f:
                subprocess.run(ns.wrap() + [str(BRISK), "profile", "--no-trace", "--json", str(j), "--kernel",
                                            str(kernel), "--initrd", str(initrd), "--memory", "256M", "--net",
                                            "tap=btap0", "--vsock", f"cid={CID},uds={tmp}/v.sock", "--log-level",
                                            "info", "--cmdline", words],
                               stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=900)
            for t in th:
                t.join(timeout=10)
        d = json.loads(j.read_text())
        text = (out / "profile.out").read_text(errors="replace")
        print("\n== one brisk boot under brisk profile --no-trace: exits to brisk at each virtio window")
        for m in re.findall(r"^brisk: info: (virtio-(?:net|vsock).*)$", text, re.M):
            print("  " + m[:200])
        win = {}
        for e in d["exits"]["by_address"]:
            if e["kind"] == "mmio" and 0xD0001000 <= e["addr"] < 0xD0003000:
                name = "net (0xd0001000)" if e["addr"] < 0xD0002000 else "vsock (0xd0002000)"
                reg = e["addr"] & 0xFFF
                win.setdefault(name, {}).setdefault(f"{e['dir']} 0x{reg:03x}", 0)
                win[name][f"{e['dir']} 0x{reg:03x}"] += e["count"]
        for name, regs in win.items():
            notify = regs.get("write 0x050", 0)
            print(f"  {name}: {sum(regs.values())} exits, QueueNotify (write 0x050) {notify}; "
                  + ", ".join(f"{k} {v}" for k, v in sorted(regs.items(), key=lambda kv: -kv[1])[:6]))
    finally:
        ns.close()


if __name__ == "__main__":
    main()
