#!/usr/bin/env python3
"""ioctls.py - every KVM ioctl of a brisk boot with its cost, and every start-up phase: medians of N boots.

Runs `brisk run --kernel GUEST --timeline` N times (sequentially), parses the timeline table and the
"KVM ioctl / calls / total us" table brisk prints (src/vmm/kvm.c counts every KVM ioctl it makes), and
prints per request: calls per boot, and the median, p10 and p90 of its total time per boot; per phase
the median time since exec and the median step (+us). KVM_RUN is listed last: its time is guest time.
This is the table of docs/performance.md "Start-up at the floor"; bench/README.md has the rest.

Usage: bench/ioctls.py [-n N] [--brisk PATH] [--guest PATH] [--json FILE] [-- extra brisk run options]
Exit status: 0, 1 if a boot failed, 2 on bad usage.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys

PHASE_RE = re.compile(r"^([A-Za-z/][A-Za-z0-9/ _-]*?)\s+(\d+\.\d)\s+(\d+\.\d)?\s*$")
IOCTL_RE = re.compile(r"^(KVM_[A-Z0-9_]+|ioctl_0x[0-9a-f]+)\s+(\d+)\s+(\d+\.\d)\s*$")


def quantile(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    pos = (len(xs) - 1) * q
    lo, hi = int(pos), min(int(pos) + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def one_boot(brisk, guest, extra):
    p = subprocess.run([brisk, "run", "--kernel", guest, "--timeline", "--serial", "none", *extra],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if p.returncode != 0:
        raise RuntimeError(f"brisk exited {p.returncode}: {p.stderr.strip()[-300:]}")
    phases, ioctls, section = {}, {}, "phases"
    for line in p.stdout.splitlines():
        if line.startswith("KVM ioctl"):
            section = "ioctls"
            continue
        if line.startswith("vcpu "):
            section = "exits"
        if section == "phases":
            m = PHASE_RE.match(line)
            if m and m.group(1) != "phase":
                phases[m.group(1)] = (float(m.group(2)), float(m.group(3) or 0))
        elif section == "ioctls":
            m = IOCTL_RE.match(line)
            if m:
                ioctls[m.group(1)] = (int(m.group(2)), float(m.group(3)))
    if not ioctls or "exit" not in phases:
        raise RuntimeError("no timeline/ioctl table in brisk's output")
    return phases, ioctls


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-n", type=int, default=21)
    ap.add_argument("--brisk", default="build/brisk")
    ap.add_argument("--guest", default="build/guests/hello.elf")
    ap.add_argument("--json")
    ap.add_argument("extra", nargs="*")
    a = ap.parse_args()
    if a.n < 1:
        ap.error("-n must be at least 1")
    boots = []
    for i in range(a.n + 1):  # one warm-up boot, discarded
        try:
            b = one_boot(a.brisk, a.guest, a.extra)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"ioctls: boot {i}: {e}", file=sys.stderr)
            return 1
        if i:
            boots.append(b)
    order = list(boots[0][0])
    print(f"start-up phases, median of {a.n} boots ({a.brisk} run --kernel {a.guest} --serial none)")
    print(f"{'phase':24} {'us since exec':>14} {'+us':>10}")
    for name in order:
        at = [b[0][name][0] for b in boots if name in b[0]]
        step = [b[0][name][1] for b in boots if name in b[0]]
        print(f"{name:24} {statistics.median(at):14.1f} {statistics.median(step):10.1f}")
    names = sorted({n for b in boots for n in b[1]}, key=lambda n: (n == "KVM_RUN", n))
    rows = []
    print(f"\nKVM ioctls per boot, total us per boot: median (p10-p90) of {a.n} boots")
    print(f"{'request':32} {'calls':>6} {'median':>9} {'p10':>9} {'p90':>9}")
    for n in names:
        calls = statistics.median([b[1].get(n, (0, 0))[0] for b in boots])
        us = [b[1].get(n, (0, 0.0))[1] for b in boots]
        rows.append({"request": n, "calls": calls, "median_us": statistics.median(us),
                     "p10_us": quantile(us, 0.1), "p90_us": quantile(us, 0.9)})
        print(f"{n:32} {calls:6.0f} {statistics.median(us):9.1f} {quantile(us, 0.1):9.1f} {quantile(us, 0.9):9.1f}")
    before_run = sum(r["median_us"] for r in rows if r["request"] != "KVM_RUN")
    print(f"{'sum before KVM_RUN (medians)':32} {'':6} {before_run:9.1f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"boots": a.n, "brisk": a.brisk, "guest": a.guest, "ioctls": rows,
                       "phases": {n: statistics.median([b[0][n][0] for b in boots if n in b[0]]) for n in order}},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
