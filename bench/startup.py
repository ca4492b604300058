#!/usr/bin/python3
"""startup.py - start-up benchmark: brisk vs the KVM floor vs QEMU microvm.

Boots the same PVH test guest (build/guests/hello.elf) with each contender,
interleaved (A B C A B C ...), and reports per contender:
  exec -> first line   perf_counter_ns() just before Popen to the first
                       complete line on the child's stdout (the guest's COM1)
  exec -> reaped       same start to os.wait4() returning (includes KVM's
                       teardown of the VM after exit_group)
  CPU per boot         user + system time of the child, from the same wait4()
  burst                separate pass: --burst copies started at once, wall time
                       until every copy printed its first line -> VMs/s (median
                       of --burst-reps bursts per contender, interleaved)
  exec -> boot marker  separate pass: the VMM's own clock when the guest
                       writes boot marker 1 (brisk --timeline, floor stderr)
  peak RSS             separate pass: ru_maxrss of the command run under
                       bench/maxrss.c (a tiny static launcher; spawned straight
                       from Python, ru_maxrss would include Python's own RSS)
  KVM ioctls / boot    one run of each under strace -f, counted by request
Every run's exit status and first line are checked; a failed run is reported
and excluded from the statistics. See bench/README.md.

Standard library only (Debian's /usr/bin/python3).
"""

import argparse
import json
import os
import platform
import re
import selectors
import shlex
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time

EXPECTED_LINE = "Hello from brisk test guest"
# Start-up targets, printed as met / NOT met, never asserted: brisk/floor at most TARGET_FLOOR[key] (the
# burst: the rate at least TARGET_BURST x the floor's), QEMU microvm at least TARGET_QEMU x slower than brisk.
TARGET_FLOOR = {"line": 1.1, "cpu": 1.2, "reap": 1.5}
TARGET_BURST = 0.8
TARGET_QEMU = 12
MAXRSS_RE = re.compile(r"^maxrss: status (-?\d+) maxrss_kib (\d+)\s*$", re.M)
MARKER_RE = re.compile(r"^boot marker 0x0*1\s+([0-9.]+)\s*$", re.M)
IOCTL_RE = re.compile(r"ioctl\(\d+, (KVM_[A-Z0-9_]+)")
IOCTL_RAW_RE = re.compile(r"ioctl\(\d+, _IOC\([^,]*, 0xae, (0x[0-9a-f]+)")


class Contender:
    def __init__(self, name, argv, status, marker_argv=None, kvm=True):
        self.name = name
        self.argv = argv
        self.status = status          # expected exit status
        self.marker_argv = marker_argv  # argv whose output carries the boot marker
        self.kvm = kvm                # needs /dev/kvm
        self.skip = None              # reason, if not run
        self.runs = []                # dicts, one per measured run
        self.markers = []             # ns, exec -> boot marker 1
        self.marker_failures = []
        self.rss = []                 # KiB, peak RSS per run (maxrss pass)
        self.rss_failures = []
        self.ioctls = None


def spawn_and_time(argv, timeout_s):
    """Run argv; return dict with line_ns, reap_ns, status, stdout, stderr."""
    err = tempfile.TemporaryFile()
    t0 = time.perf_counter_ns()
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
    fd = p.stdout.fileno()
    out = bytearray()
    t_line = None
    deadline = time.monotonic() + timeout_s
    timed_out = False
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                p.send_signal(signal.SIGKILL)
                break
            if not sel.select(left):
                continue
            chunk = os.read(fd, 65536)
            if not chunk:
                break
            out += chunk
            if t_line is None and b"\n" in chunk:
                t_line = time.perf_counter_ns()
    _, wstatus, ru = os.wait4(p.pid, 0)
    t_reap = time.perf_counter_ns()
    p.returncode = os.waitstatus_to_exitcode(wstatus)  # reaped here; keep Popen from waiting
    p.stdout.close()
    err.seek(0)
    stderr = err.read().decode(errors="replace")
    err.close()
    return {
        "line_ns": None if t_line is None else t_line - t0,
        "reap_ns": t_reap - t0,
        "cpu_ns": int((ru.ru_utime + ru.ru_stime) * 1e9),
        "faults": ru.ru_minflt + ru.ru_majflt,
        "status": p.returncode,
        "timed_out": timed_out,
        "stdout": out.decode(errors="replace"),
        "stderr": stderr,
    }


def check_run(c, r):
    """Return None if the run is good, else why not."""
    if r["timed_out"]:
        return "timed out"
    first = r["stdout"].split("\n", 1)[0].rstrip("\r")
    if r["line_ns"] is None:
        return "no complete line on stdout"
    if first != EXPECTED_LINE:
        return "first line %r, expected %r" % (first[:80], EXPECTED_LINE)
    if r["status"] != c.status:
        return "exit status %s, expected %d" % (r["status"], c.status)
    return None


def describe_failure(c, r, why):
    tail = (r["stderr"].strip().splitlines() or [""])[-1][:200]
    return "%s: %s%s" % (c.name, why, ("; stderr: " + tail) if tail else "")


def quantile(sorted_xs, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not sorted_xs:
        return None
    pos = (len(sorted_xs) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (pos - lo)


def summary(xs):
    if not xs:
        return None
    s = sorted(xs)
    return {"n": len(s), "median": statistics.median(s), "p10": quantile(s, 0.10),
            "p90": quantile(s, 0.90), "min": s[0], "max": s[-1]}


def guest_touched_kib(path):
    """Pages of guest RAM a loader must write: the ELF's PT_LOAD pages plus the
    boot-info pages (GDT/zero page and start info) - an upper bound on what
    this tiny guest touches, so peak RSS minus this is the VMM's overhead."""
    pages = set()
    try:
        with open(path, "rb") as f:
            img = f.read()
        if img[:4] != b"\x7fELF" or img[4] != 2:
            return None
        phoff, = struct.unpack_from("<Q", img, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", img, 0x36)
        for i in range(phnum):
            p_type, _, _, _, paddr, _, memsz = struct.unpack_from("<IIQQQQQ", img, phoff + i * phentsize)
            if p_type == 1 and memsz:
                pages.update(range(paddr >> 12, (paddr + memsz - 1 >> 12) + 1))
    except (OSError, struct.error):
        return None
    return (len(pages) + 2) * 4


def parse_strace(text):
    counts = {}
    for line in text.splitlines():
        m = IOCTL_RE.search(line)
        if m:
            name = m.group(1)
        else:
            m = IOCTL_RAW_RE.search(line)
            if not m:
                continue
            name = "KVM_ioctl_nr_%s" % m.group(1)  # not decoded by this strace
        counts[name] = counts.get(name, 0) + 1
    return counts


def strace_counts(c, strace, outdir, timeout_s):
    path = os.path.join(outdir, "strace-%s.txt" % c.name)
    argv = [strace, "-f", "-qq", "-e", "trace=ioctl", "-o", path] + c.argv
    r = spawn_and_time(argv, timeout_s)
    why = check_run(c, r)
    if why:
        return {"error": "under strace: " + why, "file": path}
    with open(path, errors="replace") as f:
        counts = parse_strace(f.read())
    return {"counts": counts, "total": sum(counts.values()), "file": path}


def ms(ns):
    return "-" if ns is None else "%.3f" % (ns / 1e6)


def fmt_ratio(a, b):
    if not a or not b:
        return None
    return a["median"] / b["median"]


def host_info():
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    virt = "?"
    try:
        with open("/proc/cpuinfo") as f:
            flags = f.read()
        virt = "vmx" if " vmx" in flags else ("svm" if " svm" in flags else "none")
    except OSError:
        pass
    thp = "?"
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            thp = re.search(r"\[(\w+)\]", f.read()).group(1)
    except (OSError, AttributeError):
        pass
    kvm_mod = [m for m in ("kvm_intel", "kvm_amd", "kvm_pvm") if os.path.isdir("/sys/module/" + m)]
    return {"kernel": platform.release(), "machine": platform.machine(), "cpu": cpu,
            "cpus": os.cpu_count(), "thp": thp, "cpu_virt_flag": virt, "kvm_modules": kvm_mod,
            "dev_kvm": os.path.exists("/dev/kvm"), "nested_kvm_sh": os.environ.get("NESTED_KVM_GUEST") == "1"}


def burst(argv, n, timeout_s):
    """Starts n copies of argv at once; returns (seconds until every copy printed its first line, None) or
    (None, why) when a copy failed. Every copy is reaped before returning."""
    t0 = time.perf_counter_ns()
    ps = [subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
          for _ in range(n)]
    why = None
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        bufs = {p.stdout.fileno(): bytearray() for p in ps}
        for p in ps:
            sel.register(p.stdout.fileno(), selectors.EVENT_READ)
        waiting = set(bufs)
        while waiting and why is None:
            left = deadline - time.monotonic()
            if left <= 0:
                why = "timed out with %d of %d copies before their first line" % (len(waiting), n)
                break
            for key, _ in sel.select(left):
                chunk = os.read(key.fd, 65536)
                bufs[key.fd] += chunk
                if not chunk or b"\n" in bufs[key.fd]:
                    sel.unregister(key.fd)
                    waiting.discard(key.fd)
                    if not bufs[key.fd].startswith(EXPECTED_LINE.encode()):
                        why = "a copy's first line was %r" % bytes(bufs[key.fd][:60])
    t_all = time.perf_counter_ns()
    for p in ps:
        if why:
            p.kill()
        p.stdout.read()
        p.stdout.close()
        p.wait()
    return (None, why) if why else ((t_all - t0) / 1e9, None)


def build_contenders(a):
    have_kvm = os.access("/dev/kvm", os.R_OK | os.W_OK)
    cs = []
    extra = shlex.split(a.brisk_args)
    brisk = Contender("brisk", [a.brisk, "run", "--kernel", a.guest, *extra], 0,
                      marker_argv=[a.brisk, "run", "--kernel", a.guest, *extra, "--timeline"])
    floor = Contender("floor", [a.floor, a.guest], 0, marker_argv=[a.floor, a.guest])
    base = Contender("base", [a.base, "run", "--kernel", a.guest, *extra], 0,
                     marker_argv=[a.base, "run", "--kernel", a.guest, *extra, "--timeline"]) if a.base else None
    qemu_bin = shutil.which(a.qemu) if a.qemu else None
    qargv = [qemu_bin or a.qemu, "-accel", a.accel,
             "-machine", "microvm,acpi=off,pit=off,pic=off,rtc=off"]
    if a.accel == "kvm":
        qargv += ["-cpu", "host,-arch-capabilities"]
    qargv += ["-m", "128M", "-nodefaults", "-no-user-config", "-display", "none",
              "-serial", "stdio", "-device", "isa-debug-exit,iobase=0xf4,iosize=4",
              "-kernel", a.guest]
    qemu = Contender("qemu", qargv, 1, kvm=(a.accel == "kvm"))
    for c, path in ((brisk, a.brisk), (floor, a.floor)) + (((base, a.base),) if base else ()):
        if not path:
            c.skip = "disabled on the command line"
        elif not (os.path.isfile(path) and os.access(path, os.X_OK)):
            c.skip = "%s is not an executable file" % path
    if not a.qemu:
        qemu.skip = "disabled on the command line"
    elif not qemu_bin:
        qemu.skip = "%s not found" % a.qemu
    for c in (brisk, floor, qemu) + ((base,) if base else ()):
        if not c.skip and c.kvm and not have_kvm:
            c.skip = "/dev/kvm is missing or not read-write"
        cs.append(c)
    return cs


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("-n", "--runs", type=int, default=30, help="interleaved rounds (default 30)")
    ap.add_argument("--warmup", type=int, default=1, help="discarded rounds first (default 1)")
    ap.add_argument("--brisk", default="build/brisk", help="brisk binary ('' to skip)")
    ap.add_argument("--floor", default="build/bench/floor", help="floor binary ('' to skip)")
    ap.add_argument("--base", default="", help="a second brisk binary, 'base' (e.g. before a change), run as brisk is")
    ap.add_argument("--brisk-args", default="",
                    help="more options for brisk and base (shell words), e.g. '--net user': what a device costs")
    ap.add_argument("--burst", type=int, default=20, help="copies started at once in the burst pass (0: skip)")
    ap.add_argument("--burst-reps", type=int, default=3, help="bursts per contender, interleaved (default 3)")
    ap.add_argument("--qemu", default="qemu-system-x86_64", help="QEMU binary ('' to skip)")
    ap.add_argument("--maxrss", default="build/bench/maxrss",
                    help="peak-RSS launcher built from bench/maxrss.c ('' to skip the RSS pass)")
    ap.add_argument("--rss-runs", type=int, default=10, help="interleaved rounds of the RSS pass (default 10)")
    ap.add_argument("--guest", default="build/guests/hello.elf", help="PVH guest ELF")
    ap.add_argument("--accel", choices=("kvm", "tcg"), default="kvm",
                    help="QEMU accelerator (tcg only to test this script)")
    ap.add_argument("--no-strace", action="store_true", help="skip the ioctl-count pass")
    ap.add_argument("--strace-dir", default=None, help="keep strace logs here (default: temporary)")
    ap.add_argument("--timeout", type=float, default=30.0, help="seconds per run (default 30)")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress lines on stderr")
    ap.add_argument("--json", metavar="FILE", help="also write all results and samples as JSON")
    a = ap.parse_args()

    if not os.path.isfile(a.guest):
        sys.exit("startup.py: guest %s not found (make guests)" % a.guest)
    cs = build_contenders(a)
    active = [c for c in cs if not c.skip]
    host = host_info()
    print("start-up benchmark: %d interleaved rounds of %s (%d warm-up round(s) discarded)"
          % (a.runs, " ".join(c.name for c in active) or "nothing", a.warmup))
    print("guest %s; host %s %s, %s, %s CPUs, THP %s, /dev/kvm %s (modules: %s)%s"
          % (a.guest, host["kernel"], host["machine"], host["cpu"], host["cpus"], host["thp"],
             "yes" if host["dev_kvm"] else "no", ",".join(host["kvm_modules"]) or "none",
             "; inside scripts/nested-kvm.sh (TCG-emulated SVM: numbers NOT representative)"
             if host["nested_kvm_sh"] else ""))
    for c in cs:
        if c.skip:
            print("skipped %s: %s" % (c.name, c.skip))
    if not active:
        sys.exit("startup.py: no contender can run here")
    print("commands:")
    for c in active:
        print("  %-6s %s" % (c.name, " ".join(c.argv)))
    sys.stdout.flush()

    failures = []

    def progress(msg):
        if not a.quiet:
            print(msg, file=sys.stderr, flush=True)

    # Pass 1: exec -> first line, exec -> reaped, peak RSS.
    for rnd in range(a.warmup + a.runs):
        progress("timing round %d/%d%s" % (rnd + 1, a.warmup + a.runs, " (warm-up)" if rnd < a.warmup else ""))
        for c in active:
            r = spawn_and_time(c.argv, a.timeout)
            why = check_run(c, r)
            if rnd < a.warmup:
                if why:
                    failures.append("warm-up " + describe_failure(c, r, why))
                continue
            r["round"] = rnd - a.warmup
            r["error"] = why
            if why:
                failures.append("round %d %s" % (r["round"], describe_failure(c, r, why)))
            del r["stdout"], r["stderr"]
            c.runs.append(r)

    # Pass 2: peak RSS, each command under the tiny launcher (see bench/maxrss.c).
    rss_skip = None
    if not a.maxrss:
        rss_skip = "disabled on the command line"
    elif not (os.path.isfile(a.maxrss) and os.access(a.maxrss, os.X_OK)):
        rss_skip = "%s is not an executable file (bench/run.sh builds it)" % a.maxrss
    for rnd in range(0 if rss_skip else a.rss_runs):
        progress("RSS round %d/%d" % (rnd + 1, a.rss_runs))
        for c in active:
            r = spawn_and_time([a.maxrss] + c.argv, a.timeout)
            why = check_run(c, r)
            m = None
            for m in MAXRSS_RE.finditer(r["stderr"]):
                pass
            if not why and not m:
                why = "no 'maxrss:' line from %s" % a.maxrss
            if why:
                c.rss_failures.append(why)
                failures.append("RSS pass round %d %s" % (rnd, describe_failure(c, r, why)))
            else:
                c.rss.append(int(m.group(2)))

    # Pass 3: exec -> boot marker 1, by the VMM's own clock (not every VMM has one).
    mcs = [c for c in active if c.marker_argv]
    for rnd in range(a.runs if mcs else 0):
        progress("boot-marker round %d/%d" % (rnd + 1, a.runs))
        for c in mcs:
            r = spawn_and_time(c.marker_argv, a.timeout)
            why = check_run(c, r)
            m = MARKER_RE.search(r["stdout"] + "\n" + r["stderr"])
            if not why and not m:
                why = "no 'boot marker 0x1' line"
            if why:
                c.marker_failures.append(why)
                failures.append("marker pass round %d %s" % (rnd, describe_failure(c, r, why)))
            else:
                c.markers.append(int(float(m.group(1)) * 1000))

    # Pass 4: bursts, contenders interleaved, each burst's copies all at once (QEMU skipped above 20 copies:
    # its ~35 MiB each).
    bursts = {c.name: [] for c in active}
    for rnd in range(a.burst_reps if a.burst > 0 else 0):
        for c in active:
            if c.name == "qemu" and a.burst > 20:
                continue
            progress("burst %d/%d: %d x %s" % (rnd + 1, a.burst_reps, a.burst, c.name))
            t, why = burst(c.argv, a.burst, a.timeout * 4)
            if why:
                failures.append("burst %d %s: %s" % (rnd, c.name, why))
            else:
                bursts[c.name].append(t)

    # Pass 5: KVM ioctls per boot.
    strace = shutil.which("strace")
    tmp = None
    if not a.no_strace and strace:
        outdir = a.strace_dir
        if outdir:
            os.makedirs(outdir, exist_ok=True)
        else:
            tmp = tempfile.TemporaryDirectory()
            outdir = tmp.name
        for c in active:
            progress("strace %s" % c.name)
            c.ioctls = strace_counts(c, strace, outdir, a.timeout * 4)
            if "error" in c.ioctls:
                failures.append("strace %s: %s" % (c.name, c.ioctls["error"]))

    # ---- report ----
    res = {}
    for c in active:
        ok = [r for r in c.runs if not r["error"]]
        res[c.name] = {
            "line": summary([r["line_ns"] for r in ok]),
            "reap": summary([r["reap_ns"] for r in ok]),
            "cpu": summary([r["cpu_ns"] for r in ok]),
            "faults": summary([r["faults"] for r in ok]),
            "burst_s": summary(bursts[c.name]),
            "marker": summary(c.markers),
            "rss": summary(c.rss),
            "ok": len(ok), "runs": len(c.runs),
        }

    print()
    hdr = "%-28s %9s %9s %9s %9s %9s %8s" % ("", "median", "p10", "p90", "min", "max", "ok/runs")
    for key, title in (("line", "exec -> first serial line (ms)"),
                       ("reap", "exec -> process reaped (ms)"),
                       ("cpu", "CPU per boot, user + system (ms, wait4)"),
                       ("marker", "exec -> boot marker 1 (ms, VMM's clock)")):
        print(hdr if key == "line" else "")
        print(title)
        for c in active:
            s = res[c.name][key]
            if key == "marker" and not c.marker_argv:
                print("  %-26s n/a (no boot-marker device)" % c.name)
                continue
            n_ok = len(c.markers) if key == "marker" else res[c.name]["ok"]
            n_all = (len(c.markers) + len(c.marker_failures)) if key == "marker" else res[c.name]["runs"]
            if not s:
                print("  %-26s no successful run (%d/%d)" % (c.name, n_ok, n_all))
                continue
            print("  %-26s %9s %9s %9s %9s %9s %8s" % (c.name, ms(s["median"]), ms(s["p10"]), ms(s["p90"]),
                                                      ms(s["min"]), ms(s["max"]), "%d/%d" % (n_ok, n_all)))

    # Page faults: exact and the same on every run of a binary and host kernel; each costs 10-25 us on a
    # virtualised host, much less on hardware (docs/performance.md "The start path in one place").
    print()
    print("page faults per boot (ru_minflt + ru_majflt, wait4)   median       min       max")
    for c in active:
        s = res[c.name]["faults"]
        if s:
            print("  %-48s %8d  %8d  %8d" % (c.name, s["median"], s["min"], s["max"]))

    touched = guest_touched_kib(a.guest)
    print()
    print("peak RSS (ru_maxrss, MiB)   median       min       max   overhead = median - guest pages loaded (%s KiB)"
          % (touched if touched is not None else "?"))
    if rss_skip:
        print("  skipped: " + rss_skip)
    for c in active:
        s = res[c.name]["rss"]
        if s:
            over = (s["median"] - (touched or 0)) / 1024
            res[c.name]["rss_overhead_kib"] = s["median"] - (touched or 0)
            print("  %-24s %8.2f  %8.2f  %8.2f   %.2f MiB   (%d/%d runs)"
                  % (c.name, s["median"] / 1024, s["min"] / 1024, s["max"] / 1024, over,
                     len(c.rss), len(c.rss) + len(c.rss_failures)))

    if a.burst > 0:
        print()
        print("burst: %d copies started at once, until every one printed its first line (median of %d)"
              % (a.burst, a.burst_reps))
        for c in active:
            s = res[c.name]["burst_s"]
            if s:
                res[c.name]["burst_vms_per_s"] = a.burst / s["median"]
                print("  %-26s %8.1f ms  %7.0f VMs/s   (%d bursts)" % (c.name, s["median"] * 1e3,
                                                                     a.burst / s["median"], s["n"]))
            else:
                print("  %-26s %s" % (c.name, "skipped (QEMU above 20 copies)" if c.name == "qemu" else "no burst"))

    ratios = {}
    print()
    print("ratios of medians")
    for key, title in (("line", "exec -> first line"), ("reap", "exec -> reaped"), ("cpu", "CPU per boot"),
                       ("marker", "exec -> boot marker")):
        b, f, q = (res.get(n, {}).get(key) for n in ("brisk", "floor", "qemu"))
        bf, qb = fmt_ratio(b, f), fmt_ratio(q, b)
        ratios[key] = {"brisk/floor": bf, "qemu/brisk": qb}
        parts = []
        if bf is not None:
            t = TARGET_FLOOR.get(key)
            parts.append("brisk/floor %.2f%s" % (bf, " (target <= %.1f: %s)" % (t, "met" if bf <= t else "NOT met")
                                                    if t else ""))
        if qb is not None:
            parts.append("qemu/brisk %.1f%s" % (qb, " (target >= %d: %s)" % (TARGET_QEMU, "met" if qb >= TARGET_QEMU else "NOT met")
                                                  if key == "line" else ""))
        print("  %-22s %s" % (title, "; ".join(parts) if parts else "n/a"))
    bb, fb = (res.get(n, {}).get("burst_s") for n in ("brisk", "floor"))
    if bb and fb:
        ratios["burst"] = {"brisk/floor rate": fb["median"] / bb["median"]}
        r = fb["median"] / bb["median"]
        print("  %-22s brisk/floor %.2f (VMs/s; target >= %.1f: %s)" % ("burst rate", r, TARGET_BURST,
                                                                       "met" if r >= TARGET_BURST else "NOT met"))
    if "base" in res:
        for key, title in (("line", "exec -> first line"), ("cpu", "CPU per boot"), ("reap", "exec -> reaped")):
            r = fmt_ratio(res["brisk"].get(key), res["base"].get(key))
            if r is not None:
                print("  %-22s brisk/base %.3f" % (title, r))
    rb = res.get("brisk", {}).get("rss")
    if rb and touched is not None:
        over = rb["median"] - touched
        print("  brisk peak RSS beyond guest pages: %.2f MiB (target < 4 MiB: %s)"
              % (over / 1024, "met" if over < 4096 else "NOT met"))

    if not a.no_strace:
        print()
        if not strace:
            print("KVM ioctls per boot: skipped (strace not installed)")
        else:
            print("KVM ioctls per boot (strace -f -e trace=ioctl, one run each)")
            names = sorted({n for c in active if c.ioctls and "counts" in c.ioctls for n in c.ioctls["counts"]})
            print("  %-30s %s" % ("request", " ".join("%8s" % c.name for c in active)))
            for n in names:
                print("  %-30s %s" % (n, " ".join("%8s" % (c.ioctls["counts"].get(n, 0)
                                                            if c.ioctls and "counts" in c.ioctls else "-")
                                                   for c in active)))
            print("  %-30s %s" % ("total", " ".join("%8s" % (c.ioctls["total"]
                                                           if c.ioctls and "total" in c.ioctls else "error")
                                                      for c in active)))
            if a.accel == "tcg" and any(c.name == "qemu" for c in active):
                print("  (qemu runs with -accel tcg: no KVM ioctls expected)")

    if failures:
        print()
        print("FAILED runs (excluded from the statistics): %d" % len(failures))
        for f in failures:
            print("  " + f)

    if a.json:
        doc = {"argv": sys.argv, "host": host, "guest": a.guest, "runs": a.runs, "warmup": a.warmup,
               "accel": a.accel, "rss_runs": 0 if rss_skip else a.rss_runs, "guest_touched_kib": touched, "failures": failures, "ratios": ratios,
               "skipped": {c.name: c.skip for c in cs if c.skip},
               "contenders": {c.name: dict(res[c.name], argv=c.argv, samples=c.runs,
                                           marker_ns=c.markers, rss_kib=c.rss, ioctls=c.ioctls) for c in active},
               "time": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
        with open(a.json, "w") as f:
            json.dump(doc, f, indent=1)
        print("\nwrote %s" % a.json)
    if tmp:
        tmp.cleanup()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
