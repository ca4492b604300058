#!/usr/bin/python3
"""wset.py - working-set prefetch against a lazy restore (docs/performance.md "Working set").

  1. boots build/guests/wset.elf (--memory 320, pages=N: N scattered pages over 256 MiB, default 16384 = 64 MiB)
     with the API, snapshots it while it waits for its go byte, into DIR (not tmpfs: drop_caches must be able to
     drop the memory file's pages);
  2. records the working set once: `brisk restore --working-set record=60000` (ended by the guest's boot marker);
  3. restores it ROUNDS times in each of six ways, interleaved, each in a fresh process with "g" already on its
     stdin: lazy (`--working-set off`), prefetch (the default: pages mapped by a thread while the vCPUs run) and
     wait (`--working-set wait`: mapped before the vCPUs run), each with the page cache cold (`echo 3 >
     /proc/sys/vm/drop_caches` first: needs root) and warm (the file read just before);
and reports, medians (min-max): exec -> the guest's done marker (brisk's timeline, --report-json: the restore,
the prefetch and the guest's touching of every page), split at the first KVM_RUN (before it: the restore and the
prefetch), the guest's own cycles for the touching (rdtsc), the process's page faults (minor, major: wait4's
rusage; the vCPU thread's KVM faults count there too) and the prefetch's two phases (brisk's log).
Standard library only.
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from restore import api  # noqa: E402  (bench/restore.py: the API over its Unix socket)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DONE = 0x57530002  # guests/wset.c WSET_DONE_MARKER
TOUCHED_RE = re.compile(r"wset: touched (\d+) pages \((\d+) MiB\) in (\d+) cycles, checksum OK")


def snapshot(brisk, d, pages):
    # the socket on tmpfs: the nested harness's 9p share takes none
    sock = os.path.join(tempfile.mkdtemp(prefix="wsb", dir=os.environ.get("TMPDIR") or "/tmp"), "api.sock")
    p = subprocess.Popen([brisk, "run", "--kernel", os.path.join(ROOT, "build/guests/wset.elf"), "--memory", "320",
                          "--cmdline", f"pages={pages}", "--api-sock", sock], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    out = b""
    while b"wset: ready" not in out:
        b = p.stdout.read1(4096)
        if not b:
            sys.exit(f"wset guest ended early: {out!r} {p.stderr.read()!r}")
        out += b
    api(sock, "PATCH", "/vm", {"state": "Paused"})
    state, mem = os.path.join(d, "w.state"), os.path.join(d, "w.mem")
    t0 = time.monotonic()
    api(sock, "PUT", "/snapshot/create", {"snapshot_type": "Full", "snapshot_path": state, "mem_file_path": mem})
    print(f"snapshot: {pages} pages, create {time.monotonic() - t0:.2f} s, memory file "
          f"{os.stat(mem).st_blocks * 512 >> 20} MiB on disk", flush=True)
    p.kill()
    p.wait()
    return state, mem


def drop_caches():
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 20):
            pass


def restore(brisk, state, mem, report, extra):
    """One restore; returns (exec -> done marker us, exec -> first KVM_RUN us, guest cycles, minor faults, major
    faults, brisk's stderr)."""
    p = subprocess.Popen([brisk, "restore", "--snapshot", state, "--mem", mem, "--report-json", report,
                          "--log-level", "info", *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdin.write(b"g")
    p.stdin.close()
    out, err = p.stdout.read(), p.stderr.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    m = TOUCHED_RE.search(out.decode(errors="replace"))
    if p.returncode != 0 or not m:
        sys.exit(f"restore {extra} failed ({p.returncode}):\n{out.decode()[-1500:]}\n{err.decode()[-1500:]}")
    with open(report) as f:
        rep = json.load(f)
    done = [x["us"] for x in rep["markers"] if x["value"] == DONE]
    run = [x["us"] for x in rep["phases"] if x["name"] == "first KVM_RUN"]
    return done[0], run[0], int(m.group(3)), ru.ru_minflt, ru.ru_majflt, err.decode(errors="replace")


def med(xs):
    return f"{statistics.median(xs):,.0f} ({min(xs):,.0f}-{max(xs):,.0f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--brisk", default=os.path.join(ROOT, "build/brisk"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "build/wset-bench"), help="not tmpfs")
    ap.add_argument("--pages", type=int, default=16384)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    os.makedirs(a.dir, exist_ok=True)
    state, mem = snapshot(a.brisk, a.dir, a.pages)
    report = os.path.join(a.dir, "report.json")
    _, _, _, _, _, err = restore(a.brisk, state, mem, report, ["--working-set", "record=60000"])
    rec = re.search(r"working set: .*recorded in \S+", err)
    print(rec.group(0) if rec else err[-1000:], flush=True)
    ways = [(w, c, x) for c in ("cold", "warm")
            for w, x in (("lazy", ["--working-set", "off"]), ("prefetch", []), ("wait", ["--working-set", "wait"]))]
    rows = {(w, c): [] for w, c, _ in ways}
    for r in range(a.rounds):
        for way, cache, extra in ways:
            if cache == "cold":
                drop_caches()
            else:
                warm(mem)
            done, run, cycles, minflt, majflt, err = restore(a.brisk, state, mem, report, extra)
            pf = re.search(r"reads started in ([\d.]+) ms, mapped in ([\d.]+) ms", err)
            rows[(way, cache)].append((done, run, done - run, cycles, minflt, majflt,
                                       float(pf.group(1)) * 1000 if pf else 0.0,
                                       float(pf.group(2)) * 1000 if pf else 0.0))
            print(f"round {r + 1} {way:8} {cache}: first KVM_RUN at {run:,.0f} us, done at {done:,.0f} us, "
                  f"{cycles:,} cycles, faults {minflt:,} minor {majflt:,} major" +
                  (f", prefetch: reads started in {pf.group(1)} ms, mapped in {pf.group(2)} ms" if pf else ""),
                  flush=True)
    print("\n| restore | page cache | exec -> done marker, us | exec -> first KVM_RUN, us | first KVM_RUN -> "
          "done, us | guest's touch, cycles | minor faults | major faults | prefetch advise, us | "
          "prefetch populate, us |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for way, cache, _ in ways:
        v = rows[(way, cache)]
        print(f"| {way} | {cache} | " + " | ".join(med([x[i] for x in v]) for i in range(8)) + " |")
    for cache in ("cold", "warm"):
        lazy = statistics.median(x[0] for x in rows[("lazy", cache)])
        for way in ("prefetch", "wait"):
            print(f"{cache}: {way} / lazy = {statistics.median(x[0] for x in rows[(way, cache)]) / lazy:.2f}")


if __name__ == "__main__":
    main()
