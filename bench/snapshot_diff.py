#!/usr/bin/python3
"""snapshot_diff.py - Diff snapshots and hugetlbfs restores, measured (docs/performance.md "Diff snapshots and
hugetlbfs restores").

1. Diff: boots build/guests/counter.elf through the API with track_dirty_pages, `--size` MiB of RAM,
   `spread=N` (N = --dirty percent of its pages: the pages every line writes) and `fill=F` (F = --fill percent
   of its pages, written once at boot and checked every line: memory a Diff leaves to its base), takes a Full
   snapshot at line 5 (the base), lets it run 3 lines, pauses and takes a Diff and, at the same pause, a Full
   snapshot; times each create (client side, request -> 204) and reports each memory file's apparent and
   allocated size (st_blocks). Then merges the Diff onto a copy of the base with `brisk snapshot-editor
   edit-memory rebase` (timed), checks the merge equals the second Full snapshot byte for byte, and restores
   both N times, interleaved (`brisk restore --report-json`): exec -> first KVM_RUN and exec -> the guest's end
   (stop=).
2. hugetlbfs (--huge-size MiB, 0: skipped; needs that many free 2 MiB pages twice, /proc/sys/vm/nr_hugepages):
   the same guest (--fill percent of its pages written at boot) booted with huge_pages "2M" and with None, a
   Full snapshot of each at line 5, then N restores of each, interleaved: exec -> memory mapped (the hugetlbfs
   load copies the file's data there), exec -> first KVM_RUN, exec -> the guest's end.
Medians and min..max. Standard library only; reuses bench/restore.py's helpers.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import restore  # noqa: E402  (bench/restore.py)

ROOT = restore.ROOT


def mib(n):
    return n / 1048576


def boot(brisk, guest, tmp, name, mem_mib, args, machine):
    sock = os.path.join(tmp, f"{name}.sock")
    p = subprocess.Popen([brisk, "--api-sock", sock], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         stderr=open(os.path.join(tmp, f"{name}.err"), "w"), text=True)
    restore.wait_socket(sock, p)
    restore.api(sock, "PUT", "/boot-source", {"kernel_image_path": guest, "boot_args": args})
    restore.api(sock, "PUT", "/machine-config", {"vcpu_count": 1, "mem_size_mib": mem_mib, **machine})
    restore.api(sock, "PUT", "/actions", {"action_type": "InstanceStart"})
    return p, sock


def create(sock, kind, state, mem):
    t0 = time.perf_counter_ns()
    restore.api(sock, "PUT", "/snapshot/create", {"snapshot_type": kind, "snapshot_path": state, "mem_file_path": mem})
    return (time.perf_counter_ns() - t0) / 1e6


def sizes(path):
    st = os.stat(path)
    return st.st_size, st.st_blocks * 512


def restore_once(brisk, state, mem, report):
    t0 = time.perf_counter_ns()
    p = subprocess.run([brisk, "restore", "--snapshot", state, "--mem", mem, "--report-json", report],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                       timeout=600)
    wall = (time.perf_counter_ns() - t0) / 1e3
    if p.returncode != 0 or "counter: PASS" not in p.stdout:
        raise RuntimeError(f"restore exited {p.returncode}: {p.stderr.strip()[-400:]}")
    ph = restore.phases(report)
    ph["wall"] = wall
    return ph


def same(a, b, chunk=1 << 22):
    with open(a, "rb") as fa, open(b, "rb") as fb:
        while True:
            x, y = fa.read(chunk), fb.read(chunk)
            if x != y:
                return False
            if not x:
                return True


def bench_diff(args, tmp):
    pages = args.size * 256
    spread = max(1, round(pages * args.dirty / 100))
    fill = round(pages * args.fill / 100)
    p, sock = boot(args.brisk, args.guest, tmp, "diff", args.size,
                   f"period_ms=30 spread={spread} fill={fill} stop=20",
                   {"track_dirty_pages": True})
    f = {k: os.path.join(tmp, k) for k in ("base.state", "base.mem", "d.state", "d.mem", "f.state", "f.mem")}
    try:
        restore.wait_line(p, "count 5 ", timeout=300)
        restore.api(sock, "PATCH", "/vm", {"state": "Paused"})
        t_base = create(sock, "Full", f["base.state"], f["base.mem"])
        restore.api(sock, "PATCH", "/vm", {"state": "Resumed"})
        restore.wait_line(p, "count 8 ", timeout=300)
        restore.api(sock, "PATCH", "/vm", {"state": "Paused"})
        t_diff = create(sock, "Diff", f["d.state"], f["d.mem"])
        t_full = create(sock, "Full", f["f.state"], f["f.mem"])
    finally:
        p.kill()
        p.wait()
    merged = os.path.join(tmp, "merged.mem")
    shutil.copy(f["base.mem"], merged)
    t0 = time.perf_counter_ns()
    m = subprocess.run([args.brisk, "snapshot-editor", "edit-memory", "rebase", "--memory-path", merged,
                        "--diff-path", f["d.mem"]], capture_output=True, text=True)
    t_merge = (time.perf_counter_ns() - t0) / 1e6
    if m.returncode:
        raise RuntimeError(f"merge: {m.stderr}")
    equal = same(merged, f["f.mem"])
    size = args.size << 20
    print(f"\n== Diff of a {args.size} MiB guest writing {spread} pages ({100 * spread / pages:.2f}% of its "
          f"{pages} pages) per line, 3 lines after a Full base; {fill} pages ({args.fill:g}%) written once at boot")
    for name, key, ms in (("Full base (line 5)", "base.mem", t_base), ("Diff (line 8)", "d.mem", t_diff),
                          ("Full at the Diff's pause", "f.mem", t_full)):
        app, alloc = sizes(f[key])
        print(f"  {name:28s} create {ms:8.1f} ms; memory file {mib(app):.0f} MiB apparent, "
              f"{mib(alloc):8.2f} MiB allocated ({100 * alloc / size:.2f}% of RAM)")
    print(f"  merge (brisk snapshot-editor) {t_merge:.1f} ms; base + Diff == Full at the same pause: {equal}")
    runs = {"chain": [], "full": []}
    report = os.path.join(tmp, "r.json")
    for _ in range(args.rounds):
        runs["chain"].append(restore_once(args.brisk, f["d.state"], merged, report))
        runs["full"].append(restore_once(args.brisk, f["f.state"], f["f.mem"], report))
    restore.table(f"restores, {args.rounds} each, interleaved (µs since exec)", [
        (f"{k}: exec -> {ph}", [r[ph] for r in runs[k] if ph in r])
        for k in ("chain", "full") for ph in ("memory mapped", "first KVM_RUN", "guest ended")])
    return equal


def bench_huge(args, tmp):
    free = int(open("/sys/kernel/mm/hugepages/hugepages-2048kB/free_hugepages").read())
    need = args.huge_size // 2
    if free < need:
        print(f"\n== hugetlbfs: skipped, {free} free 2 MiB pages, {need} needed (raise /proc/sys/vm/nr_hugepages)")
        return
    snaps = {}
    for kind, machine in (("2M", {"huge_pages": "2M"}), ("4K", {})):
        fill = round(args.huge_size * 256 * args.fill / 100)
        p, sock = boot(args.brisk, args.guest, tmp, f"h{kind}", args.huge_size, f"period_ms=30 fill={fill} stop=12",
                       machine)
        st, mem = os.path.join(tmp, f"h{kind}.state"), os.path.join(tmp, f"h{kind}.mem")
        try:
            restore.wait_line(p, "count 5 ", timeout=300)
            restore.api(sock, "PATCH", "/vm", {"state": "Paused"})
            ms = create(sock, "Full", st, mem)
        finally:
            p.kill()
            p.wait()
        snaps[kind] = (st, mem, ms)
    runs = {"2M": [], "4K": []}
    report = os.path.join(tmp, "h.json")
    for _ in range(args.rounds):
        for kind in runs:
            runs[kind].append(restore_once(args.brisk, snaps[kind][0], snaps[kind][1], report))
    print(f"\n== hugetlbfs: a {args.huge_size} MiB guest ({args.fill:g}% written at boot), Full snapshots at line 5 "
          f"(create: 2M {snaps['2M'][2]:.1f} ms, 4K {snaps['4K'][2]:.1f} ms; memory files "
          f"{mib(sizes(snaps['2M'][1])[1]):.2f} / {mib(sizes(snaps['4K'][1])[1]):.2f} MiB allocated)")
    restore.table(f"restores, {args.rounds} each, interleaved (µs since exec)", [
        (f"{k}: exec -> {ph}", [r[ph] for r in runs[k] if ph in r])
        for k in runs for ph in ("memory mapped", "first KVM_RUN", "guest ended")])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    build = os.environ.get("BUILD", "build")
    ap.add_argument("--brisk", default=os.path.join(ROOT, build, "brisk"))
    ap.add_argument("--guest", default=os.path.join(ROOT, build, "guests", "counter.elf"))
    ap.add_argument("-n", "--rounds", type=int, default=5)
    ap.add_argument("--size", type=int, default=1024, help="the Diff guest's memory in MiB (default 1024)")
    ap.add_argument("--dirty", type=float, default=1.0, help="percent of its pages a line writes (default 1)")
    ap.add_argument("--fill", type=float, default=25.0,
                    help="percent of its pages written once at boot, left to the base by the Diff (default 25)")
    ap.add_argument("--huge-size", type=int, default=256, help="the hugetlbfs guest's memory in MiB; 0: skip")
    args = ap.parse_args()
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        print("snapshot_diff.py: no usable /dev/kvm here (scripts/nested-kvm.sh provides one)", file=sys.stderr)
        return 2
    print(f"bench/snapshot_diff.py: {args.brisk}, {args.rounds} rounds, host {os.uname().release}")
    with tempfile.TemporaryDirectory(prefix="brisk-diff-") as tmp:
        ok = bench_diff(args, tmp)
        if args.huge_size:
            bench_huge(args, tmp)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
