#!/usr/bin/python3
"""restore.py - snapshot/restore benchmark (docs/performance.md "Snapshot and restore").

For each guest memory size (default 128 MiB and 1 GiB):
  1. boots build/guests/counter.elf through the API (`brisk --api-sock`), lets it count, pauses it and
     times PUT /snapshot/create (client-side, request sent -> 204) and the files' sizes (apparent and
     on disk: the memory file is sparse);
  2. restores it N times, interleaving the two ways, each in a fresh process:
       cli  `brisk restore --snapshot S --mem M --report-json R`
       api  `brisk --api-sock P --report-json R`, then PUT /snapshot/load {"resume_vm": true}
     and reads brisk's own timeline (µs since exec) from R: every restore phase, exec -> first KVM_RUN,
     exec -> the guest's next serial byte, and for the API the request -> first KVM_RUN;
  3. for comparison, boots the same guest N times (`brisk run`): exec -> first serial byte.
Then the API's own cost (hello.elf): exec -> first serial byte for a plain `brisk run`, a
`--config-file --no-api` boot and an API boot (configure + InstanceStart), and InstanceStart -> first
KVM_RUN. With --base B, only the API's load and boot, by B and by --brisk interleaved (bench_api_ab).
Medians (and min/max) per figure; no thresholds. Standard library only.
"""

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class UnixHTTP(http.client.HTTPConnection):
    def __init__(self, path, timeout=60):
        super().__init__("localhost", timeout=timeout)
        self.path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(self.timeout)
        self.sock.connect(self.path)


def api(sock, method, path, body=None):
    c = UnixHTTP(sock)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"Content-Type": "application/json"} if body is not None else {})
    r = c.getresponse()
    data = r.read()
    c.close()
    if r.status >= 300:
        raise RuntimeError(f"{method} {path}: {r.status} {data.decode(errors='replace')}")
    return data


def wait_socket(path, proc, timeout=10):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if os.path.exists(path):
            return
        if proc.poll() is not None:
            raise RuntimeError(f"brisk exited ({proc.returncode}) before serving {path}")
        time.sleep(0.002)
    raise RuntimeError(f"no socket at {path}")


def wait_line(proc, prefix, timeout=30):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"guest output ended before '{prefix}'")
        if line.startswith(prefix):
            return line
    raise RuntimeError(f"no '{prefix}' line")


def phases(report):
    with open(report) as f:
        data = json.load(f)
    return {p["name"]: p["us"] for p in data["phases"] if p.get("us") is not None}


def take_snapshot(brisk, guest, mem_mib, tmp):
    sock = os.path.join(tmp, f"snap-{mem_mib}.sock")  # not the last size's: its file may still be there
    state, mem = os.path.join(tmp, f"{mem_mib}.state"), os.path.join(tmp, f"{mem_mib}.mem")
    p = subprocess.Popen([brisk, "--api-sock", sock], stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "snap.err"), "w"),
                         stdin=subprocess.DEVNULL, text=True)
    try:
        wait_socket(sock, p)
        # A line every 5 ms; the restored guest prints the rest of its 400 lines and resets (brisk exits 0).
        api(sock, "PUT", "/boot-source", {"kernel_image_path": guest, "boot_args": "period_ms=5 stop=400"})
        api(sock, "PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": mem_mib})
        api(sock, "PUT", "/actions", {"action_type": "InstanceStart"})
        wait_line(p, "count 20 ")
        api(sock, "PATCH", "/vm", {"state": "Paused"})
        t0 = time.perf_counter_ns()
        api(sock, "PUT", "/snapshot/create", {"snapshot_type": "Full", "snapshot_path": state, "mem_file_path": mem})
        create_ms = (time.perf_counter_ns() - t0) / 1e6
    except Exception:
        p.kill()
        p.wait()
        sys.stderr.write(open(os.path.join(tmp, "snap.err")).read())
        raise
    finally:
        p.kill()
        p.wait()
    st, sm = os.stat(state), os.stat(mem)
    return state, mem, {"create_ms": create_ms, "state_bytes": st.st_size, "mem_bytes": sm.st_size,
                        "mem_disk_bytes": sm.st_blocks * 512}


def restore_cli(brisk, state, mem, report):
    p = subprocess.run([brisk, "restore", "--snapshot", state, "--mem", mem, "--report-json", report],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, timeout=60)
    if p.returncode != 0 or "counter: PASS" not in p.stdout:
        raise RuntimeError(f"restore exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return phases(report)


def restore_api(brisk, state, mem, report, tmp, idle_ms=0):
    sock = os.path.join(tmp, "load.sock")
    p = subprocess.Popen([brisk, "--api-sock", sock, "--report-json", report], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        wait_socket(sock, p)
        time.sleep(idle_ms / 1000)
        api(sock, "PUT", "/snapshot/load", {"snapshot_path": state,
                                            "mem_backend": {"backend_type": "File", "backend_path": mem},
                                            "resume_vm": True})
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode != 0 or "counter: PASS" not in out:
        raise RuntimeError(f"{brisk}: API restore exited {p.returncode}: {err.strip()[-3000:]}")
    return phases(report)


def boot_run(brisk, guest, mem_mib, report, args=()):
    p = subprocess.run([brisk, "run", "--kernel", guest, "--memory", f"{mem_mib}M", "--report-json", report, *args],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                       timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"boot exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return phases(report)


def boot_config_file(brisk, guest, tmp, report):
    cfg = os.path.join(tmp, "vm.json")
    with open(cfg, "w") as f:
        json.dump({"boot-source": {"kernel_image_path": guest},
                   "machine-config": {"vcpu_count": 1, "mem_size_mib": 128}}, f)
    p = subprocess.run([brisk, "--config-file", cfg, "--no-api", "--report-json", report], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True, timeout=60)
    if p.returncode != 0:
        raise RuntimeError(f"config-file boot exited {p.returncode}: {p.stderr.strip()[-300:]}")
    return phases(report)


def boot_api(brisk, guest, tmp, report, idle_ms=0):
    sock = os.path.join(tmp, "boot.sock")
    p = subprocess.Popen([brisk, "--api-sock", sock, "--report-json", report], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        wait_socket(sock, p)
        time.sleep(idle_ms / 1000)
        api(sock, "PUT", "/boot-source", {"kernel_image_path": guest})
        api(sock, "PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": 128})
        api(sock, "PUT", "/actions", {"action_type": "InstanceStart"})
        p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    if p.returncode != 0:
        raise RuntimeError(f"API boot exited {p.returncode}")
    return phases(report)


def fmt(values):
    if not values:
        return "-"
    return f"{statistics.median(values):9.1f}  ({min(values):.1f}..{max(values):.1f})"


def table(title, rows):
    print(f"\n{title}")
    print(f"  {'figure':44s} {'median us':>9s}  (min..max)")
    for name, values in rows:
        print(f"  {name:44s} {fmt(values)}")


def delta(ph, a, b):
    return ph[b] - ph[a] if a in ph and b in ph else None


RESTORE_PHASES = ["snapshot read", "/dev/kvm opened", "VM created", "memory mapped", "irqchip created",
                  "vCPUs ready", "state restored", "first KVM_RUN", "first serial byte"]


def bench_size(args, mem_mib, tmp):
    state, mem, snap = take_snapshot(args.brisk, args.guest, mem_mib, tmp)
    runs = {"cli": [], "api": [], "boot": []}
    report = os.path.join(tmp, "r.json")
    for _ in range(args.rounds):
        runs["cli"].append(restore_cli(args.brisk, state, mem, report))
        runs["api"].append(restore_api(args.brisk, state, mem, report, tmp))
        runs["boot"].append(boot_run(args.brisk, args.guest, mem_mib, report, ["--cmdline", "period_ms=5 stop=3"]))
    print(f"\n== {mem_mib} MiB guest: snapshot/create {snap['create_ms']:.1f} ms; state file "
          f"{snap['state_bytes']} bytes; memory file {snap['mem_bytes'] >> 20} MiB apparent, "
          f"{snap['mem_disk_bytes'] / 1048576:.1f} MiB on disk")
    rows = [(f"restore (cli): exec -> {p}", [r[p] for r in runs["cli"] if p in r]) for p in RESTORE_PHASES]
    table(f"brisk restore, {args.rounds} runs, µs since exec", rows)
    table("PUT /snapshot/load (api)", [
        ("load request -> first KVM_RUN", [d for r in runs["api"] if (d := delta(r, "API start request", "first KVM_RUN")) is not None]),
        ("load request -> state restored", [d for r in runs["api"] if (d := delta(r, "API start request", "state restored")) is not None]),
        ("exec -> first serial byte (incl. client)", [r["first serial byte"] for r in runs["api"] if "first serial byte" in r]),
    ])
    table("fresh boot of the same guest (brisk run)", [
        ("exec -> first KVM_RUN", [r["first KVM_RUN"] for r in runs["boot"] if "first KVM_RUN" in r]),
        ("exec -> first serial byte", [r["first serial byte"] for r in runs["boot"] if "first serial byte" in r]),
    ])


def bench_api_boot(args, tmp):
    report = os.path.join(tmp, "b.json")
    runs = {"run": [], "config": [], "api": []}
    for _ in range(args.rounds):
        runs["run"].append(boot_run(args.brisk, args.hello, 128, report))
        runs["config"].append(boot_config_file(args.brisk, args.hello, tmp, report))
        runs["api"].append(boot_api(args.brisk, args.hello, tmp, report))
    table(f"booting hello.elf three ways, {args.rounds} runs each, interleaved", [
        ("brisk run: exec -> first serial byte", [r["first serial byte"] for r in runs["run"]]),
        ("--config-file --no-api: exec -> first serial byte", [r["first serial byte"] for r in runs["config"]]),
        ("API: InstanceStart -> first KVM_RUN", [d for r in runs["api"] if (d := delta(r, "API start request", "first KVM_RUN")) is not None]),
        ("API: InstanceStart -> first serial byte", [d for r in runs["api"] if (d := delta(r, "API start request", "first serial byte")) is not None]),
    ])


def bench_api_ab(args, tmp):
    """--base B: the API's two starts (snapshot/load of a 128 MiB counter guest, configure + InstanceStart of
    hello.elf) by B and by --brisk, interleaved (the order alternating by round), each with the client idle
    --idle ms after the socket accepts. Both brisk's clocks: request -> first KVM_RUN and exec -> first KVM_RUN.
    Each loads a snapshot it took itself: an older brisk refuses the sections of a device it does not have."""
    report = os.path.join(tmp, "ab.json")
    who = {"base": args.base, "new": args.brisk}
    snaps = {}
    for w in who:
        os.makedirs(os.path.join(tmp, w), exist_ok=True)
        snaps[w] = take_snapshot(who[w], args.guest, 128, os.path.join(tmp, w))[:2]
    runs = {(w, k): [] for w in who for k in ("load", "boot")}
    for i in range(args.rounds):
        for w in (("base", "new") if i % 2 == 0 else ("new", "base")):
            runs[(w, "load")].append(restore_api(who[w], *snaps[w], report, tmp, args.idle))
            runs[(w, "boot")].append(boot_api(who[w], args.hello, tmp, report, args.idle))
    for kind, title in (("load", "PUT /snapshot/load, 128 MiB"), ("boot", "configure + InstanceStart, hello.elf")):
        rows = []
        for w in ("base", "new"):
            rs = runs[(w, kind)]
            rows += [(f"{w}: request -> first KVM_RUN",
                      [d for r in rs if (d := delta(r, "API start request", "first KVM_RUN")) is not None]),
                     (f"{w}: exec -> first KVM_RUN", [r["first KVM_RUN"] for r in rs if "first KVM_RUN" in r])]
        table(f"{title}: {args.rounds} rounds, client idle {args.idle} ms after the socket accepts", rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.environ.get("BUILD", "build")
    ap.add_argument("--brisk", default=os.path.join(ROOT, build, "brisk"))
    ap.add_argument("--guest", default=os.path.join(ROOT, build, "guests", "counter.elf"))
    ap.add_argument("--hello", default=os.path.join(ROOT, build, "guests", "hello.elf"))
    ap.add_argument("-n", "--rounds", type=int, default=10)
    ap.add_argument("--sizes", default="128,1024", help="guest memory sizes in MiB")
    ap.add_argument("--base", help="another brisk: only the API's load and boot, A/B against --brisk")
    ap.add_argument("--idle", type=float, default=0, help="with --base: ms the client waits after the socket accepts")
    args = ap.parse_args()
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        print("restore.py: no usable /dev/kvm here; run it where KVM runs the test guests", file=sys.stderr)
        return 2
    print(f"bench/restore.py: {args.brisk}, {args.rounds} rounds, host {os.uname().release}")
    with tempfile.TemporaryDirectory(prefix="brisk-restore-") as tmp:
        if args.base:
            bench_api_ab(args, tmp)
            return 0
        for size in [int(s) for s in args.sizes.split(",")]:
            bench_size(args, size, tmp)
        bench_api_boot(args, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
