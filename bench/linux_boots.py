#!/usr/bin/python3
"""linux_boots.py - how often a real Linux boot fails, and how long it takes, under brisk and under QEMU microvm,
interleaved (docs/performance.md "Linux boots: failures and times"). bench/linux-boots.sh runs it (inside
scripts/nested-kvm.sh with BENCH_NESTED=1: the harness whose failures this counts).

Each round boots the real-kernel tier's kernel (vmlinux, PVH entry) and initramfs-virtio.cpio.gz with its root on
a virtio-blk disk made by tests/linux/mkrootfs.sh, 256 MiB, 1 vCPU, the same command line for both (brisk's default
Linux command line + "brisk.virtio=1 brisk.root=/dev/vda brisk.poweroff=auto"):
  brisk: brisk run --kernel K --initrd I --memory 256M --disk ROOT --cmdline CMDLINE
  QEMU:  qemu-system-x86_64 -M microvm,acpi=on,rtc=on -accel kvm -cpu host,-arch-capabilities -m 256M -smp 1
         -nodefaults -no-user-config -display none -no-reboot -serial stdio -global virtio-mmio.force-legacy=false
         -drive id=root,file=ROOT,format=raw,if=none -device virtio-blk-device,drive=root -kernel K -initrd I
         -append CMDLINE
A boot passes when the root disk's init ran ("brisk-init: disk stage:" and "brisk-init: wrote" on the console)
and the VMM exited 0 within the timeout; anything else is a failure, kept with its output. Rounds alternate which
VMM goes first. Prints, per VMM: passed/failed, and exec -> "disk stage" line (median, min-max, of the passed),
then the medians of exec -> each console milestone (the first byte, init started, modules loaded, root switched,
disk stage, httpd listening; the HTTP answer; the VMM's exit) and the guest's uptime at init, so that the table
says in which part of the boot one VMM is ahead. Each VMM's console goes to a file, read every 10 ms (as the
real-kernel tier's boots: a pipe reader woken by every console write makes the nested harness fail more boots);
the kept outputs carry each line's host time since exec.
With BRISK_BASE=PATH an earlier brisk binary boots too ("base"), with the same options, in the same rounds.

With --quiet both get the kernel's `quiet` word (no kernel messages on the console: what a production boot
prints), so the time measured is the boot's, not the UART's.

With --http the boot ends as a service's does: both also get a virtio-net interface on user-mode networking
(libslirp; the same network, 10.0.2.0/24, and a host port forwarded to the guest's port 80):
  brisk: --net user,net=10.0.2.0/24,hostfwd=tcp:127.0.0.1:HP-:80
  QEMU:  -netdev user,id=n0,hostfwd=tcp:127.0.0.1:HP-:80 -device virtio-net-device,netdev=n0
and the command line "brisk.ip=eth0,10.0.2.15/24,10.0.2.2 brisk.httpd=80": the root disk's init answers one
HTTP request (tests/linux/init_net.c) before it writes its file. The host sends GET / to HP from exec on,
every 20 ms (each try gives up after TRY_S, 0.25 s; the guest answers every request until none came for 2 s,
so one its client gave up on costs one retry), and a boot's time is exec -> the first 200 response.

Usage: linux_boots.py [-n ROUNDS] [--timeout S] [--kernel vmlinux|vmlinuz] [--quiet] [--http]
       (defaults 10 rounds, 300 s, vmlinux)
"""
import argparse
import http.client
import socket
import threading
import os
import statistics as st
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from net_linux import BRISK, default_cmdline  # noqa: E402  (brisk's default Linux command line, from --help)

BUILD = ROOT / os.environ.get("BUILD", "build")
LINUX = Path(os.environ.get("BRISK_LINUX_DIR", BUILD / "linux"))
DONE = "brisk-init: disk stage:"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Each try gives up after this long. User-mode networking accepts the host's connection at once, whether or not
# the guest listens yet, and retransmits its SYN to the guest on its own schedule (1 s, 2 s, ...): with 2 s tries
# every boot of both VMMs measured 4.4-4.9 s, the schedule's steps rather than the boot. A fresh connection every
# TRY_S sends a fresh SYN, so the first answer comes within TRY_S of the guest's listening.
TRY_S = 0.25


def http_poll(port, t0, stop, result):
    """GET / on 127.0.0.1:port until a 200 answer (result[0] = seconds since t0) or stop is set."""
    while not stop.is_set():
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=TRY_S)
            c.request("GET", "/")
            if c.getresponse().status == 200:
                result[0] = time.monotonic() - t0
                return
        except (OSError, http.client.HTTPException):
            pass
        time.sleep(0.02)


# Milestones on the console, in boot order: each boot's time to each is kept (host clock since exec, as its line
# was read), so that the table says where one VMM's boot is ahead of the other's.
MILESTONES = (
    ("console", None),  # the first byte on the console
    ("init", "brisk-init: started as pid 1"),
    ("modules", "brisk-init: modules:"),
    ("root", "brisk-init: root: switched"),
    ("disk", DONE),
    ("listen", "brisk-net: httpd listening"),
)


def boot(argv, timeout, http_port=None):
    """Runs one boot; returns (passed, seconds from exec to the disk stage line, or with http_port to the first
    HTTP 200 answer from it, or None, {milestone: seconds}, output with each line's host time since exec).

    The console goes to a file, read every 10 ms, not to a pipe: a reader woken by every console write makes the
    nested harness's emulator fail guests far more often (scripts/nested-kvm.md "A pipe on brisk's stdout"), and
    the tier's boots use files for that reason too."""
    with tempfile.TemporaryFile() as f:
        t0 = time.monotonic()
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=f, stderr=subprocess.STDOUT)
        stop, answered, poller = threading.Event(), [None], None
        if http_port:
            poller = threading.Thread(target=http_poll, args=(http_port, t0, stop, answered), daemon=True)
            poller.start()
        lines, partial, marks, pos = [], b"", {}, 0
        while True:
            ended = p.poll() is not None
            now = time.monotonic() - t0
            chunk = os.pread(f.fileno(), 1 << 20, pos)
            pos += len(chunk)
            if chunk and "console" not in marks:
                marks["console"] = now
            *done, partial = (partial + chunk).split(b"\n")
            for raw in done:
                line = raw.decode(errors="replace").rstrip("\r")
                lines.append((now, line))
                for name, text in MILESTONES:
                    if text and name not in marks and text in line:
                        marks[name] = now
                if line.startswith("brisk-init: uptime ") and "uptime" not in marks:
                    try:  # the guest's own clock when init started: the kernel's boot, without the VMM's start
                        marks["uptime"] = float(line.split()[2])
                    except (IndexError, ValueError):
                        pass
            if ended and not chunk:
                break
            if now > timeout:
                p.kill()
                p.wait()
                continue
            time.sleep(0.01)
        if partial:
            lines.append((time.monotonic() - t0, partial.decode(errors="replace")))
    stop.set()
    seen = marks.get("disk")
    if poller:
        poller.join()
        seen = answered[0]
        if seen is not None:
            marks["http"] = seen
    marks["exit"] = time.monotonic() - t0
    text = "".join(f"[{t:8.3f}] {line}\n" for t, line in lines)
    ok = p.returncode == 0 and seen is not None and "brisk-init: wrote" in text
    return ok, seen, marks, text


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10, dest="rounds")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--kernel", choices=("vmlinux", "vmlinuz"), default="vmlinux",
                    help="vmlinux: the PVH entry (default); vmlinuz: the bzImage, through its decompressor")
    ap.add_argument("--quiet", action="store_true", help="the kernel's quiet word for both VMMs")
    ap.add_argument("--http", action="store_true", help="user networking; time exec -> the guest's first HTTP answer")
    a = ap.parse_args()
    kernel, initrd, init = LINUX / a.kernel, LINUX / "initramfs-virtio.cpio.gz", LINUX / "init"
    for f in (BRISK, kernel, initrd, init):
        if not f.exists():
            sys.exit(f"linux_boots: {f} missing: run make and tests/linux/run.sh first")
    cmdline = default_cmdline() + " brisk.virtio=1 brisk.root=/dev/vda brisk.poweroff=auto" + (" quiet" if a.quiet else "")
    if a.http:
        cmdline += " brisk.ip=eth0,10.0.2.15/24,10.0.2.2 brisk.httpd=80"
    what = "exec -> first HTTP answer" if a.http else "exec -> disk stage"
    out = BUILD / "bench" / "linux-boots" / time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="linux-boots.") as scratch:
        root = Path(scratch) / "root.img"
        subprocess.run([str(ROOT / "tests/linux/mkrootfs.sh"), "--init", str(init), str(root)], check=True,
                       stdout=subprocess.DEVNULL)
        argv = {
            "brisk": [str(BRISK), "run", "--kernel", str(kernel), "--initrd", str(initrd), "--memory", "256M",
                      "--disk", str(root), "--cmdline", cmdline],
            "qemu": ["qemu-system-x86_64", "-M", "microvm,acpi=on,rtc=on", "-accel", "kvm", "-cpu",
                     "host,-arch-capabilities", "-m", "256M", "-smp", "1", "-nodefaults", "-no-user-config",
                     "-display", "none", "-no-reboot", "-serial", "stdio", "-global",
                     "virtio-mmio.force-legacy=false", "-drive", f"id=root,file={root},format=raw,if=none",
                     "-device", "virtio-blk-device,drive=root", "-kernel", str(kernel), "-initrd", str(initrd),
                     "-append", cmdline],
        }
        if os.environ.get("BRISK_BASE"):  # an earlier brisk build beside this one (e.g. before a change)
            argv["base"] = [os.environ["BRISK_BASE"], *argv["brisk"][1:]]
        res = {k: [] for k in argv}
        for r in range(a.rounds):
            order = list(argv) if r % 2 == 0 else list(reversed(argv))
            for who in order:
                hp, net = None, []
                if a.http:
                    hp = free_port()
                    fwd = f"hostfwd=tcp:127.0.0.1:{hp}-:80"
                    net = (["-netdev", f"user,id=n0,{fwd}", "-device", "virtio-net-device,netdev=n0"] if who == "qemu"
                           else ["--net", f"user,net=10.0.2.0/24,{fwd}"])
                ok, t, marks, text = boot(argv[who][:-6] + net + argv[who][-6:] if who == "qemu" else argv[who] + net,
                                   a.timeout, hp)
                res[who].append((ok, t, marks))
                (out / f"round{r + 1}-{who}.out").write_text(text)
                print(f"round {r + 1} {who:<5} {'pass' if ok else 'FAIL'} "
                      f"{'%.2f s' % t if t is not None else '-'}", flush=True)
    print(f"\n== {a.rounds} interleaved rounds; outputs in {out}")
    for who, rows in res.items():
        times = [t for ok, t, _ in rows if ok]
        fails = sum(1 for ok, _, _ in rows if not ok)
        span = f"{st.median(times):.2f} s ({min(times):.2f}-{max(times):.2f})" if times else "n/a"
        print(f"{who:<5} passed {len(rows) - fails} of {len(rows)}, failed {fails}; {what} {span}")
    b = [t for ok, t, _ in res["brisk"] if ok]
    q = [t for ok, t, _ in res["qemu"] if ok]
    if b and q:
        print(f"brisk/QEMU (medians) {st.median(b) / st.median(q):.2f}")
    milestone_table(res)


def milestone_table(res):
    """Medians of the passed boots' times to each console milestone (host clock since exec), per VMM."""
    names = [n for n, _ in MILESTONES] + ["http", "exit", "uptime"]
    names = [n for n in names if any(n in m for rows in res.values() for ok, _, m in rows if ok)]
    print("\nmedians of the passed boots, s since exec (uptime: the guest's own clock at init)")
    print(" " * 36 + " ".join(f"{n:>8}" for n in names))
    for who, rows in res.items():
        cells = []
        for n in names:
            v = [m[n] for ok, _, m in rows if ok and n in m]
            cells.append(f"{st.median(v):8.2f}" if v else f"{'-':>8}")
        print(f"{who:<35} " + " ".join(cells))


if __name__ == "__main__":
    main()
