#!/usr/bin/python3
"""clones.py - many VMs restored from one snapshot at once (docs/performance.md "Clones").

1. Boots build/guests/vmgenid.elf (hold=1) with --memory MIB (default 128) through `brisk run --api-sock`, lets it
   reach "vmgenid: waiting", pauses it and takes a Full snapshot.
2. Restores it N times at once (default 100), each `brisk restore --snapshot S --mem M --report-json R` in its own
   process, all started back to back. Each clone sees a new VM Generation ID, writes it over 256 pages (1 MiB) of
   its RAM, prints "vmgenid: written" and waits for a byte on COM1. With all N alive and waiting:
     memory per clone   /proc/PID/smaps_rollup of each brisk: Pss (the page cache pages of the memory file the
                        clones share are split between them), Private_Dirty, Rss; and the host's MemAvailable
                        before the clones and with all alive, divided by N
     beyond the guest's writes   Pss minus the 1 MiB + 1 page each guest wrote itself
3. Then a byte to each: each reads its pages back (CHECK private), exits 0; reports come from --report-json:
     clone request -> first KVM_RUN   exec -> "first KVM_RUN" of brisk's own timeline, per clone (µs)
     clones per second                N / (last clone's "written" line - first exec), wall clock
4. For comparison, the same restore one at a time (--rounds, default 10): exec -> first KVM_RUN alone.
With --server, steps 2-4 run three times in the same run: fresh `brisk restore` processes as above; clones forked
per request by one `brisk restore --clone-server SOCK` ("server"); and clones from another such server that keeps
--pool N (default 1) of them built ahead (`--clone-pool N`, "warm"). A served clone is asked for over the socket
with its stdin and stdout pipes; its "clone request -> first KVM_RUN" is its own timeline, which starts when the
server receives the request. The rounds one at a time alternate the three kinds.
With --vsock, the snapshot's VM has a vsock device and each clone listens on a socket of its own (`brisk restore
--vsock-uds`, a served request's `vsock_override`), so that all N run at once.
Medians (min-max). No thresholds. Standard library only. Needs a usable /dev/kvm.
"""

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from itertools import count

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restore import api, phases, wait_socket  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WRITTEN = "vmgenid: written: 256 pages"
GUEST_WRITES_KIB = 256 * 4 + 4  # the 256 pages and the VMGenID page brisk writes for it
CLONE_NR = count()  # each clone's vsock socket (--vsock): DIR/v<n>.sock


def fmt(values, unit=""):
    if not values:
        return "-"
    return (f"median {statistics.median(values):.0f}{unit} ({min(values):.0f}-{max(values):.0f}), "
            f"n={len(values)}")


def meminfo(key):
    with open("/proc/meminfo") as f:
        m = re.search(rf"^{key}:\s+(\d+) kB", f.read(), re.M)
    return int(m.group(1))


def rollup(pid):
    """{Rss, Pss, Private_Dirty, Shared_Clean, ...} in KiB from /proc/PID/smaps_rollup."""
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            m = re.match(r"^(\w+):\s+(\d+) kB", line)
            if m:
                out[m.group(1)] = int(m.group(2))
    return out


def largest_private(pid, n=6):
    """The n mappings of pid with the most Private_Dirty: [(KiB, "range perms name")]."""
    rows, cur = [], None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            if re.match(r"^[0-9a-f]+-[0-9a-f]+ ", line):
                parts = line.split()
                cur = " ".join([parts[0], parts[1]] + parts[5:])
            m = re.match(r"^Private_Dirty:\s+(\d+) kB", line)
            if m:
                rows.append((int(m.group(1)), cur))
    return sorted(rows, reverse=True)[:n]


def vsock_path(args):
    """A fresh socket path for one clone's vsock device (--vsock), or None."""
    return os.path.join(args.tmp, f"v{next(CLONE_NR)}.sock") if args.vsock else None


def take_snapshot(brisk, guest, mem_mib, tmp, vsock=False):
    sock = os.path.join(tmp, "snap.sock")
    state, mem = os.path.join(tmp, "c.state"), os.path.join(tmp, "c.mem")
    extra = ["--vsock", f"cid=3,uds={os.path.join(tmp, 'snap-v.sock')}"] if vsock else []
    p = subprocess.Popen([brisk, "run", "--kernel", guest, "--memory", str(mem_mib), "--cmdline", "hold=1",
                          "--api-sock", sock, *extra], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                         stdin=subprocess.DEVNULL, text=True)
    try:
        wait_socket(sock, p)
        for line in p.stdout:
            if line.startswith("vmgenid: waiting"):
                break
        else:
            raise RuntimeError("the guest ended before 'vmgenid: waiting'")
        api(sock, "PATCH", "/vm", {"state": "Paused"})
        api(sock, "PUT", "/snapshot/create", {"snapshot_type": "Full", "snapshot_path": state, "mem_file_path": mem})
    finally:
        p.kill()
        p.wait()
    return state, mem


class Fresh:
    """One `brisk restore` process: the clone's stdin and stdout are its pipes."""

    def __init__(self, args, state, mem, report):
        v = vsock_path(args)
        self.p = subprocess.Popen([args.brisk, "restore", "--snapshot", state, "--mem", mem, "--report-json",
                                   report, *(["--vsock-uds", v] if v else [])],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        self.pid, self.out_fd = self.p.pid, self.p.stdout.fileno()

    def release(self):
        self.p.stdin.write(b"x")
        self.p.stdin.close()

    def wait(self, timeout=60):
        return self.p.wait(timeout=timeout)

    def rest(self):
        return self.p.stdout.read().decode(errors="replace")

    def kill(self):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


class Served:
    """One clone asked of a clone server (include/brisk/clone.h): pipes for its stdin and stdout passed along."""

    def __init__(self, sock, report, vsock=None):
        rd, self.w = os.pipe()
        self.out_fd, wr = os.pipe()
        null = os.open("/dev/null", os.O_WRONLY)
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.connect(sock)
        req = {"report_json": report, **({"vsock_override": {"uds_path": vsock}} if vsock else {})}
        socket.send_fds(self.s, [json.dumps(req).encode()], [rd, wr, null])
        for fd in (rd, wr, null):
            os.close(fd)
        self.s.settimeout(60)
        self.pid = json.loads(self.s.recv(4096))["pid"]

    def release(self):
        os.write(self.w, b"x")
        os.close(self.w)
        self.w = -1

    def wait(self, timeout=60):
        self.s.settimeout(timeout)
        return json.loads(self.s.recv(4096))["exit_code"]

    def rest(self):
        chunks = []
        while True:
            c = os.read(self.out_fd, 65536)
            if not c:
                break
            chunks.append(c)
        os.close(self.out_fd)
        return b"".join(chunks).decode(errors="replace")

    def kill(self):
        if self.w >= 0:
            os.close(self.w)
            self.w = -1
        self.s.close()  # the server stops the clone


def start_server(args, state, mem, tmp, pool):
    sock = os.path.join(tmp, f"clones{pool}.sock")
    p = subprocess.Popen([args.brisk, "restore", "--snapshot", state, "--mem", mem, "--clone-server", sock,
                          "--clone-pool", str(pool)],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not os.path.exists(sock):
        if p.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the clone server did not start (exit {p.poll()})")
        time.sleep(0.01)
    return p, sock


def wait_written(clone, deadline):
    buf = b""
    while WRITTEN.encode() not in buf:
        if time.monotonic() > deadline:
            raise RuntimeError(f"a clone printed no '{WRITTEN}': {buf[-300:]!r}")
        chunk = os.read(clone.out_fd, 4096)
        if not chunk:
            raise RuntimeError(f"a clone exited ({clone.wait()}) before '{WRITTEN}': {buf[-300:]!r}")
        buf += chunk
    return time.monotonic()


def clones_at_once(args, make, tmp):
    avail0 = meminfo("MemAvailable")
    clones, reports = [], []
    t0 = time.monotonic()
    try:
        for i in range(args.clones):
            reports.append(os.path.join(tmp, f"clone{i}.json"))
            clones.append(make(reports[-1]))
        deadline = time.monotonic() + 60 + args.clones
        last = max(wait_written(c, deadline) for c in clones)
        time.sleep(0.2)
        mem_now = [rollup(c.pid) for c in clones]
        biggest = max(range(len(clones)), key=lambda i: mem_now[i]["Pss"])
        top = largest_private(clones[biggest].pid)
        avail1 = meminfo("MemAvailable")
        for c in clones:
            c.release()
        codes = [c.wait(timeout=60) for c in clones]
        out = "".join(c.rest() for c in clones)
    finally:
        for c in clones:
            c.kill()
    bad = [c for c in codes if c != 0]
    if bad or out.count("CHECK private: PASS") != args.clones:
        raise RuntimeError(f"{len(bad)} clones failed (exit {bad[:5]}); {out.count('CHECK private: PASS')} "
                           f"private checks passed")
    first_run = [phases(r)["first KVM_RUN"] for r in reports]
    return {"wall_s": last - t0, "first_run_us": first_run, "mem": mem_now, "avail_drop_kib": avail0 - avail1,
            "top": top}


def one_at_a_time(args, makers, tmp):
    """args.rounds restores of each kind, the kinds alternating: {kind: [phases]}."""
    report, out = os.path.join(tmp, "one.json"), {k: [] for k in makers}
    for _ in range(args.rounds):
        for kind, make in makers.items():
            c = make(report)
            try:
                wait_written(c, time.monotonic() + 60)
                c.release()
                if c.wait(timeout=60) != 0:
                    raise RuntimeError(f"a {kind} restore failed")
                c.rest()
            finally:
                c.kill()
            out[kind].append(phases(report))
    return out


def print_many(n, many):
    pss = [m["Pss"] for m in many["mem"]]
    print(f"  Pss per clone (KiB)                     {fmt(pss)}")
    print(f"  Pss beyond the guest's writes (KiB)     {fmt([p - GUEST_WRITES_KIB for p in pss])}")
    print(f"  Private_Dirty per clone (KiB)           {fmt([m['Private_Dirty'] for m in many['mem']])}")
    print(f"  Rss per clone (KiB)                     {fmt([m['Rss'] for m in many['mem']])}")
    print("  the largest clone's biggest private mappings (KiB): " +
          "; ".join(f"{kib} {what}" for kib, what in many["top"]))
    print(f"  host MemAvailable drop / clone (KiB)    {many['avail_drop_kib'] / n:.0f}")
    print(f"  clones per second (first request -> all written)  {n / many['wall_s']:.1f} "
          f"({n} in {many['wall_s']:.2f} s)")
    print(f"  clone request -> first KVM_RUN (µs)     {fmt(many['first_run_us'])}")


def print_alone(kind, alone):
    print(f"  {kind}: request -> first KVM_RUN (µs){' ' * max(1, 12 - len(kind))}"
          f"{fmt([r['first KVM_RUN'] for r in alone])}")
    for a, b in (("exec", "snapshot read"), ("snapshot read", "memory mapped"), ("exec", "memory mapped"),
                 ("memory mapped", "vCPUs ready"), ("vCPUs ready", "state restored"),
                 ("state restored", "first KVM_RUN")):
        vals = [r[b] - (r[a] if a != "exec" else 0) for r in alone if b in r and (a == "exec" or a in r)]
        if vals:
            print(f"    {a} -> {b} (µs){' ' * max(1, 22 - len(a) - len(b))}{fmt(vals)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.environ.get("BUILD", "build")
    ap.add_argument("--brisk", default=os.path.join(ROOT, build, "brisk"))
    ap.add_argument("--guest", default=os.path.join(ROOT, build, "guests", "vmgenid.elf"))
    ap.add_argument("-n", "--clones", type=int, default=100)
    ap.add_argument("--rounds", type=int, default=10, help="restores one at a time, for comparison")
    ap.add_argument("--memory", type=int, default=128, help="guest memory in MiB")
    ap.add_argument("--server", action="store_true", help="also clones forked by brisk restore --clone-server")
    ap.add_argument("--pool", type=int, default=1, help="with --server: the warm server's --clone-pool")
    ap.add_argument("--vsock", action="store_true", help="a vsock device, each clone on a socket of its own")
    args = ap.parse_args()
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        print("clones.py: no usable /dev/kvm here; run it where KVM runs the test guests", file=sys.stderr)
        return 2
    print(f"bench/clones.py: {args.brisk}, {args.clones} clones of a {args.memory} MiB guest"
          f"{' with vsock' if args.vsock else ''}, host {os.uname().release}, {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory(prefix="brisk-clones-") as tmp:
        args.tmp = tmp
        state, mem = take_snapshot(args.brisk, args.guest, args.memory, tmp, args.vsock)
        makers = {"fresh": lambda report: Fresh(args, state, mem, report)}
        servers = []
        try:
            if args.server:
                for kind, pool in (("server", 0), ("warm", args.pool)):
                    p, sock = start_server(args, state, mem, tmp, pool)
                    servers.append(p)
                    makers[kind] = lambda report, sock=sock: Served(sock, report, vsock_path(args))
            alone = one_at_a_time(args, makers, tmp)
            many = {kind: clones_at_once(args, make, tmp) for kind, make in makers.items()}
        finally:
            for p in servers:
                p.send_signal(signal.SIGTERM)
                p.wait(timeout=60)
    n = args.clones
    for kind in makers:
        print(f"\n== {n} clones alive at once, {kind} (each wrote {GUEST_WRITES_KIB} KiB of its RAM itself)")
        print_many(n, many[kind])
    print(f"\n== one restore at a time, {args.rounds} rounds{' each, alternating' if args.server else ''}")
    for kind in makers:
        print_alone(kind, alone[kind])
    return 0


if __name__ == "__main__":
    sys.exit(main())
