"""The command line: help, version, option validation and bad kernel images (no KVM needed)."""
import os

import pytest

from conftest import (EXIT_GUEST_OK, EXIT_HOST, EXIT_IMAGE, EXIT_USAGE, KVM_REASON, boot, guest, run_brisk)


def test_version():
    p = run_brisk("--version")
    assert p.returncode == 0
    # Kata's fc.go parseVersion: the second word of the first line, 'v' stripped, a semver >= 0.21.1
    first = p.stdout.splitlines()[0]
    assert first.split(" ")[1] == "v1.7.0", first
    assert "(brisk " in first, first


def test_help_lists_run():
    p = run_brisk("help")
    assert p.returncode == 0
    assert "run" in p.stdout
    p = run_brisk("help", "run")
    assert p.returncode == 0
    for opt in ("--kernel", "--cmdline", "--cpus", "--memory", "--serial", "--hugepages", "--prefault",
                "--timeline", "--log-level"):
        assert opt in p.stdout
    assert run_brisk("run", "--help").returncode == 0
    # A command's --help is its own usage, the same as `brisk help COMMAND` (restore's was run's).
    p = run_brisk("restore", "--help")
    assert p.returncode == 0 and p.stdout == run_brisk("help", "restore").stdout, p.stdout[:300]
    for opt in ("usage: brisk restore", "--snapshot", "--mem", "--uffd", "--working-set record=MS|wait|off",
                "--paused", "--clone-server"):
        assert opt in p.stdout, opt
    p = run_brisk("profile", "--kernel", "k", "--help")  # --help among the RUN-OPTIONS: profile's usage, once
    assert p.returncode == 0 and p.stdout.count("usage: ") == 1 and "usage: brisk profile" in p.stdout, p.stdout


def test_unknown_command_and_option():
    p = run_brisk("frobnicate")
    assert p.returncode == EXIT_USAGE
    assert "unknown command 'frobnicate'" in p.stderr
    assert run_brisk("help", "frobnicate").returncode == EXIT_USAGE
    p = run_brisk("run", "--no-such-option")
    assert p.returncode == EXIT_USAGE
    p = run_brisk("run", "stray")
    assert p.returncode == EXIT_USAGE
    assert "unexpected argument 'stray'" in p.stderr


def test_no_command():
    assert run_brisk().returncode == EXIT_USAGE


@pytest.mark.parametrize("args,needle", [
    (["--cpus", "0"], "--cpus"),
    (["--cpus", "255"], "--cpus"),
    (["--cpus", "two"], "--cpus"),
    (["--memory", "1M"], "too small"),
    (["--memory", "64Q"], "--memory"),
    (["--memory", "1048576T"], "--memory"),
    (["--memory", "100000G"], "exceeds"),
    (["--memory", "16777217B"], "4 KiB"),
    (["--serial", "tcp:1"], "--serial"),
    (["--log-level", "loud"], "--log-level"),
])
@pytest.mark.security
def test_bad_values(args, needle):
    p = run_brisk("run", *args)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert needle in p.stderr


@pytest.mark.security
def test_missing_kernel(tmp_path):
    p = run_brisk("run", "--kernel", str(tmp_path / "nope"))
    assert p.returncode == EXIT_IMAGE
    assert "nope" in p.stderr


@pytest.mark.security
def test_directory_as_kernel(tmp_path):
    p = run_brisk("run", "--kernel", str(tmp_path))
    assert p.returncode == EXIT_IMAGE


@pytest.mark.security
def test_empty_kernel(tmp_path):
    k = tmp_path / "empty"
    k.write_bytes(b"")
    p = run_brisk("run", "--kernel", str(k))
    assert p.returncode == EXIT_IMAGE
    assert "empty" in p.stderr


@pytest.mark.security
def test_garbage_kernel(tmp_path):
    k = tmp_path / "garbage"
    k.write_bytes(os.urandom(4096))
    p = run_brisk("run", "--kernel", str(k))
    assert p.returncode == EXIT_IMAGE
    assert "not a kernel brisk can boot" in p.stderr


@pytest.mark.parametrize("cut", [16, 64, 100, 300])
@pytest.mark.security
def test_truncated_kernel(tmp_path, cut):
    data = open(guest("hello"), "rb").read()
    k = tmp_path / "truncated"
    k.write_bytes(data[:cut])
    p = run_brisk("run", "--kernel", str(k))
    assert p.returncode == EXIT_IMAGE, p.stderr
    assert "brisk: error:" in p.stderr


@pytest.mark.skipif(KVM_REASON is None, reason="this host has a usable /dev/kvm")
def test_no_kvm_is_a_clear_host_error():
    p = run_brisk("run")
    assert p.returncode == EXIT_HOST
    assert "/dev/kvm" in p.stderr


# Long options are spelled in full in every subcommand (docs/cli.md, "Options"): an abbreviation that
# getopt_long would take ("--kern" for "--kernel") is refused with exit 2, before any file is opened, so that
# what `brisk jail` rewrites and what brisk reads are the same words (docs/security.md, case 27).
ABBREVIATIONS = [
    (["run", "--kern", "K"], "brisk run: --kern: an abbreviation of --kernel"),
    (["run", "--kernel=K", "--cmdl=x"], "brisk run: --cmdl: an abbreviation of --cmdline"),
    (["run", "--cpu", "2"], "--cpu: an abbreviation of --cpu-template, --cpus"),
    (["restore", "--snap", "S", "--mem", "M"], "brisk restore: --snap: an abbreviation of --snapshot"),
    (["profile", "--kern", "K"], "brisk profile: --kern: an abbreviation of --kernel"),
    (["acpi", "--dump", "D", "--kern", "K"], "brisk acpi: --kern: an abbreviation of --kernel"),
    (["cpuid", "--vcp", "0"], "brisk cpuid: --vcp: an abbreviation of --vcpu"),
    # Firecracker's own parser (arg_parser.rs) names the word it does not know
    (["--api-sock", "S", "--time"], "Found argument 'time' which wasn't expected"),
    (["--config-file", "F", "--no-a"], "Found argument 'no-a' which wasn't expected"),
    (["bench", "-n", "1", "--kern", "K"], "--kern: an abbreviation of --kernel"),
    (["compare", "-n", "1", "--a", "", "--b", "", "--shuf"], "unexpected argument '--shuf'"),
    (["trace", "--pi", "1"], "unexpected argument '--pi'"),
]


@pytest.mark.parametrize("args,needle", ABBREVIATIONS, ids=[" ".join(a[0][:2]) for a in ABBREVIATIONS])
@pytest.mark.security
def test_abbreviated_options_refused(tmp_path, args, needle):
    p = run_brisk(*args, cwd=tmp_path)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert needle in p.stderr, p.stderr
    assert os.listdir(tmp_path) == [], "something was created before the refusal"


@pytest.mark.security
def test_value_that_looks_abbreviated_is_a_value(kvm):
    """The word after an option that takes a value is its value, never an option: `--cmdline --kern` boots."""
    p = boot("hello", "--cmdline", "--kern", "--log-level", "info", timeout=60)
    assert p.returncode == EXIT_GUEST_OK, p.stderr
    assert "Hello from brisk test guest" in p.stdout
