"""brisk bench and brisk compare: option errors and the whole pipeline without KVM; real boots with KVM."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import BRISK, EXIT_HOST, EXIT_IMAGE, EXIT_STOPPED, EXIT_USAGE, check_sanitizers, guest, run_brisk

# A "kernel" brisk rejects before it opens /dev/kvm: every boot exits EXIT_IMAGE
# on any host, so the child/report/statistics pipeline is testable without KVM.
NOT_A_KERNEL = "/etc/passwd"
PHASE_COLUMNS = ("median", "p95", "MAD", "CI low", "CI high", "min", "max")


@pytest.mark.parametrize("n", ["0", "-1", "abc", "", "100001"])
def test_bench_bad_n(n):
    p = run_brisk("bench", "-n", n, "--kernel", NOT_A_KERNEL)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "-n" in p.stderr


@pytest.mark.parametrize("args,needle", [
    ([], "-n N"),
    (["-n"], "needs a value"),
    (["-n", "2", "--warmup", "x"], "--warmup"),
    (["-n", "2", "--expect-status", "256"], "--expect-status"),
    (["-n", "2", "--resamples", "0"], "--resamples"),
])
def test_bench_bad_options(args, needle):
    p = run_brisk("bench", *args)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert needle in p.stderr


def test_bench_rejected_run_options():
    p = run_brisk("bench", "-n", "2", "--no-such-option")
    assert p.returncode == EXIT_USAGE
    assert "rejected the options" in p.stderr


@pytest.mark.parametrize("n", ["0", "-1", "abc"])
def test_compare_bad_n(n):
    p = run_brisk("compare", "-n", n, "--a", "--kernel x", "--b", "--kernel y")
    assert p.returncode == EXIT_USAGE, p.stderr


@pytest.mark.parametrize("args", [
    ["-n", "2"],
    ["-n", "2", "--a", "--prefault"],
    ["-n", "2", "--b", "--prefault"],
    ["--a", "--prefault", "--b", "--prefault"],
])
def test_compare_missing_required(args):
    p = run_brisk("compare", *args)
    assert p.returncode == EXIT_USAGE
    assert "required" in p.stderr


@pytest.mark.parametrize("args,needle", [
    (["--alpha", "0"], "--alpha"),
    (["--alpha", "0.7"], "--alpha"),
    (["--alpha", "x"], "--alpha"),
    (["--frobnicate"], "unexpected argument"),
])
def test_compare_bad_options(args, needle):
    p = run_brisk("compare", "-n", "2", "--a", "--prefault", "--b", "--prefault", *args)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert needle in p.stderr


def test_compare_unterminated_quote():
    p = run_brisk("compare", "-n", "2", "--a", "--cmdline 'open", "--b", "--prefault")
    assert p.returncode == EXIT_USAGE
    assert "unterminated quote" in p.stderr


def test_help_texts():
    p = run_brisk("help")
    assert "bench" in p.stdout and "compare" in p.stdout
    for cmd, opts in (("bench", ("-n", "--warmup", "--json", "--expect-status", "--seed")),
                      ("compare", ("--a", "--b", "--alpha", "--shuffle", "--json"))):
        p = run_brisk("help", cmd)
        assert p.returncode == 0
        for opt in opts:
            assert opt in p.stdout
        assert run_brisk(cmd, "--help").returncode == 0
    assert "--report-json" in run_brisk("help", "run").stdout


def test_bench_pipeline_without_kvm(tmp_path):
    out = tmp_path / "bench.json"
    p = run_brisk("bench", "-n", "3", "--warmup", "0", "--json", str(out), "--kernel", NOT_A_KERNEL)
    assert p.returncode == 0, p.stderr
    assert "first boot ended with brisk's own status 6" in p.stderr
    assert "3 of 3 boots counted" in p.stdout
    for row in ("main entered", "wall (parent)"):
        assert any(line.startswith(row) for line in p.stdout.splitlines()), p.stdout
    d = json.loads(out.read_text())
    assert d["schema"] == "brisk-bench/1"
    assert d["n"] == 3 and d["warmup"] == 0 and d["resamples"] == 2000
    assert d["run"]["expected_status"] == EXIT_IMAGE
    assert d["run"]["options"] == ["--kernel", NOT_A_KERNEL]
    assert [r["status"] for r in d["run"]["runs"]] == [EXIT_IMAGE] * 3
    wall = next(ph for ph in d["phases"] if ph["name"] == "wall (parent)")
    assert wall["n"] == 3 and len(wall["samples"]) == 3
    assert wall["min"] <= wall["ci"][0] <= wall["median"] <= wall["ci"][1] <= wall["max"]


def test_bench_failed_boots_are_excluded(tmp_path):
    out = tmp_path / "bench.json"
    p = run_brisk("bench", "-n", "2", "--expect-status", "0", "--json", str(out), "--kernel", NOT_A_KERNEL)
    assert p.returncode == EXIT_HOST
    assert "exit status 6, expected 0; excluded" in p.stderr
    assert "2 of 2 boots failed" in p.stderr
    d = json.loads(out.read_text())
    assert d["run"]["failed"] == 2 and d["run"]["counted"] == 0 and d["phases"] == []


def test_compare_pipeline_without_kvm(tmp_path):
    out = tmp_path / "compare.json"
    p = run_brisk("compare", "-n", "3", "--shuffle", "--json", str(out), "--a", f"--kernel {NOT_A_KERNEL}",
                  "--b", f"--kernel '{NOT_A_KERNEL}' --memory 64M")
    assert p.returncode == 0, p.stderr
    assert "order shuffled per pair" in p.stdout
    d = json.loads(out.read_text())
    assert d["schema"] == "brisk-compare/1"
    assert d["order"] == "shuffled" and d["alpha"] == 0.05
    assert d["b"]["options"] == ["--kernel", NOT_A_KERNEL, "--memory", "64M"]
    assert d["a"]["counted"] == 3 and d["b"]["counted"] == 3
    names = [ph["name"] for ph in d["phases"]]
    assert "wall (parent)" in names
    for ph in d["phases"]:
        assert ph["verdict"] in ("B faster", "B slower", "no significant difference")
        assert 0 <= ph["p"] <= 1 and ph["p_method"] in ("exact", "normal")


def test_bench_hello(kvm, tmp_path):
    out = tmp_path / "bench.json"
    p = run_brisk("bench", "-n", "3", "--json", str(out), "--kernel", guest("hello"), timeout=300)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    header = next(line for line in lines if line.startswith("phase"))
    for col in PHASE_COLUMNS:
        assert col in header
    for row in ("VM created", "first KVM_RUN", "guest ended", "wall (parent)"):
        assert any(line.startswith(row) and " 3 " in line for line in lines), p.stdout
    d = json.loads(out.read_text())
    assert d["schema"] == "brisk-bench/1" and d["unit"] == "us" and d["ci_level"] == 0.95
    assert d["run"]["expected_status"] == 0 and d["run"]["failed"] == 0
    for ph in d["phases"]:
        assert set(ph) >= {"name", "n", "median", "p95", "mad", "mad_scaled", "ci", "min", "max", "samples"}


def test_compare_hello(kvm, tmp_path):
    # B prefaults guest memory: the same guest, a different host-side cost.
    hello = guest("hello")
    p = run_brisk("compare", "-n", "4", "--a", f"--kernel {hello}", "--b", f"--kernel {hello} --prefault",
                  timeout=300)
    assert p.returncode == 0, p.stderr
    rows = [line for line in p.stdout.splitlines() if line.startswith(("VM created", "guest ended", "wall"))]
    assert len(rows) == 3, p.stdout
    for row in rows:
        assert row.endswith(("B faster", "B slower", "no significant difference")), row


# ---- stopped by a signal ----------------------------------------------------------

FLOOD_FOREVER = "bytes=100000000000"  # a boot that runs until it is stopped


def children_of(pid):
    """Pids whose parent is pid (from /proc/*/stat)."""
    kids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                stat = open(f"/proc/{d}/stat").read()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                kids.append(int(d))
    return kids


def group_alive(pgid):
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("cmd", ["bench", "compare"])
def test_signal_stops_boot_and_cleans_up(kvm, tmp_path, cmd, sig):
    """A signal stops the boot in progress, removes the temporary directory and exits EXIT_STOPPED."""
    flood = guest("flood")
    run_opts = f"--kernel {flood} --cmdline {FLOOD_FOREVER}"
    argv = [str(BRISK), "bench", "-n", "100", *run_opts.split()] if cmd == "bench" else \
        [str(BRISK), "compare", "-n", "100", "--a", run_opts, "--b", run_opts]
    tmp = tmp_path / "tmp"  # private TMPDIR: nothing else creates brisk-bench-* there
    tmp.mkdir()
    # A session of its own: whatever brisk leaves behind is still in its process group afterwards.
    p = subprocess.Popen(argv, env={**os.environ, "TMPDIR": str(tmp)}, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while not children_of(p.pid) and time.monotonic() < deadline:
            assert p.poll() is None, p.communicate()
            time.sleep(0.05)
        time.sleep(0.3)  # the child is booting, not just forked
        kids = children_of(p.pid)
        assert kids, "no boot started within 60 s"
        assert list(tmp.glob("brisk-bench-*")), f"brisk {cmd} did not put its directory in $TMPDIR"
        os.kill(p.pid, sig)
        status = p.wait(timeout=30)
        assert all(not os.path.exists(f"/proc/{k}") for k in kids), "a child boot outlived brisk " + cmd
        assert not group_alive(p.pid), "processes left in brisk's process group"
        out, err = p.communicate(timeout=30)
        check_sanitizers(err)
        assert status == EXIT_STOPPED, err
        assert f"stopped by {sig.name}" in err
        assert list(tmp.iterdir()) == []
    finally:
        if group_alive(p.pid):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
