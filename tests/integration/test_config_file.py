"""`brisk --config-file vm.json` (Firecracker's configuration file, docs/api.md "Configuration file"): the file's
VM boots with its vcpu_count, mem_size_mib and drives, with no API round trip; every kind of bad file is exit
status 2 with one stderr line naming the section and the key; the option combinations brisk refuses.

The guests: counter.elf with stop=N prints "counter: N cpus", "counter: history at ..., 8 RAM pages up to
TOP" (TOP = the last page of RAM), N count lines, "counter: PASS", then resets (exit 0); hello.elf prints one
line and resets."""
import json

import pytest

from conftest import EXIT_USAGE, guest, run_brisk

RAM_TOP_64M = "up to 0x3fff000"


def write(tmp_path, cfg, name="vm.json"):
    path = tmp_path / name
    path.write_text(cfg if isinstance(cfg, str) else json.dumps(cfg))
    return str(path)


def counter_cfg(tmp_path, vcpus=2, mem=64, stop=3):
    disk = tmp_path / "data.img"
    with open(disk, "wb") as f:
        f.truncate(1 << 20)
    return {
        "boot-source": {"kernel_image_path": guest("counter"), "boot_args": f"stop={stop}"},
        "machine-config": {"vcpu_count": vcpus, "mem_size_mib": mem},
        "drives": [{"drive_id": "data", "path_on_host": str(disk), "is_root_device": False,
                    "is_read_only": False}],
    }


def one_line_error(p, *words):
    """Exit 2 and exactly one stderr line holding every word."""
    assert p.returncode == EXIT_USAGE, (p.returncode, p.stderr)
    lines = [line for line in p.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, p.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])
    return lines[0]


# ---- the file's VM boots ---------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [["--config-file"], ["run", "--config-file"]], ids=["api-cmd", "run"])
def test_config_file_boots(kvm, tmp_path, argv):
    path = write(tmp_path, counter_cfg(tmp_path))
    extra = ["--no-api"] if argv[0] != "run" else []
    p = run_brisk(*argv, path, *extra, "--log-level", "info", timeout=60)
    assert p.returncode == 0, p.stderr
    assert "counter: 2 cpus" in p.stdout, p.stdout
    assert RAM_TOP_64M in p.stdout, p.stdout
    assert "counter: PASS" in p.stdout
    assert "virtio-blk" in p.stderr, p.stderr  # the file's drive was attached


def test_config_file_one_cpu_128m(kvm, tmp_path):
    path = write(tmp_path, counter_cfg(tmp_path, vcpus=1, mem=128))
    p = run_brisk("run", "--config-file", path, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "counter: 1 cpus" in p.stdout and "up to 0x7fff000" in p.stdout, p.stdout


def test_config_file_hello(kvm, tmp_path):
    path = write(tmp_path, {"boot-source": {"kernel_image_path": guest("hello")}})
    p = run_brisk("--config-file", path, "--no-api", timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Hello from brisk test guest" in p.stdout


def test_config_file_null_sections(kvm, tmp_path):
    """What Firecracker's GET /vm/config writes for what is absent is accepted."""
    cfg = {"boot-source": {"kernel_image_path": guest("hello")}, "balloon": None, "mmds-config": None,
           "drives": [], "network-interfaces": [], "vsock": None, "entropy": None, "logger": None,
           "metrics": None}
    p = run_brisk("run", "--config-file", write(tmp_path, cfg), timeout=60)
    assert p.returncode == 0, p.stderr


def test_config_file_logger_honoured(kvm, tmp_path):
    log = tmp_path / "brisk.log"
    cfg = {"boot-source": {"kernel_image_path": guest("hello")}, "logger": {"log_path": str(log), "level": "Debug"}}
    p = run_brisk("run", "--config-file", write(tmp_path, cfg), timeout=60)
    assert p.returncode == 0, p.stderr
    assert log.exists() and "[anonymous-instance:main] VM ended" in log.read_text()


def test_config_file_metrics_honoured(kvm, tmp_path):
    metrics = tmp_path / "metrics.json"
    cfg = {"boot-source": {"kernel_image_path": guest("hello")}, "metrics": {"metrics_path": str(metrics)}}
    p = run_brisk("run", "--config-file", write(tmp_path, cfg), timeout=60)
    assert p.returncode == 0, p.stderr
    assert metrics.exists() and "utc_timestamp_ms" in metrics.read_text()


# ---- bad files: exit 2, one line naming the section and the key ----------------------------------------

BOOT = {"kernel_image_path": "/k"}


@pytest.mark.parametrize("cfg, words", [
    ({"boot-source": BOOT, "foo": {}}, ["unknown key 'foo'"]),
    ({"boot-source": BOOT, "machine-config": {"vcpu_count": 1, "mem_size_mib": 128, "bar": 1}},
     ["machine-config", "unknown key 'bar'"]),
    ({"boot-source": {"kernel_image_path": "/k", "initrd": "/i"}}, ["boot-source", "unknown key 'initrd'"]),
    ({"boot-source": BOOT, "machine-config": {"vcpu_count": "2", "mem_size_mib": 128}},
     ["machine-config", "vcpu_count", "expected"]),
    ({"boot-source": BOOT, "machine-config": {"vcpu_count": 0, "mem_size_mib": 128}},
     ["machine-config", "vcpu_count", "out of range"]),
    ({"boot-source": BOOT, "machine-config": {"vcpu_count": 1, "mem_size_mib": 1}},
     ["machine-config", "mem_size_mib", "out of range"]),
    ({"boot-source": BOOT, "drives": [{"drive_id": "a", "path_on_host": "/a", "is_root_device": False},
                                      {"drive_id": "b", "path_on_host": "/b", "is_root_device": "no"}]},
     ["drives[1]", "is_root_device"]),
    ({"boot-source": BOOT, "drives": {"drive_id": "a"}}, ["drives", "array"]),
    ({"boot-source": BOOT, "vsock": {"uds_path": "/v"}}, ["vsock", "guest_cid"]),
    ({"boot-source": BOOT, "network-interfaces": [{"iface_id": "e", "host_dev_name": "x" * 16}]},
     ["network-interfaces[0]", "host_dev_name"]),
    ({"boot-source": BOOT, "logger": {"level": "Loud"}}, ["logger", "level"]),
    ({"boot-source": BOOT, "metrics": {}}, ["metrics", "metrics_path"]),
    ({"boot-source": BOOT, "balloon": {"amount_mib": 1}}, ["balloon"]),
    ({"machine-config": {"vcpu_count": 1, "mem_size_mib": 128}}, ["boot-source"]),
    ({}, ["boot-source"]),
])
@pytest.mark.security
def test_bad_config_file(tmp_path, cfg, words):
    p = run_brisk("--config-file", write(tmp_path, cfg), "--no-api")
    one_line_error(p, *words)


@pytest.mark.parametrize("text, words", [
    ('{"boot-source": {"kernel_image_path": "/k"},, }', ["bad JSON at byte 44"]),
    ('{"boot-source": {"kernel_image_path": "/k"}} trailing', ["bad JSON at byte", "trailing"]),
    ('{"boot-source": {"kernel_image_path": "/k"}', ["bad JSON"]),
    ('{"boot-source": {"kernel_image_path": "/k"}, "boot-source": {"kernel_image_path": "/j"}}', ["duplicate key"]),
    ("[]", ["expected a JSON object"]),
    ("", ["empty"]),
    ('{"boot-source": ' + "[" * 40 + "]" * 40 + "}", ["bad JSON at byte", "nest"]),
])
@pytest.mark.security
def test_bad_json_file(tmp_path, text, words):
    path = write(tmp_path, text)
    one_line_error(run_brisk("run", "--config-file", path), path, *words)


def test_config_file_is_a_directory(tmp_path):
    one_line_error(run_brisk("--config-file", str(tmp_path), "--no-api"), str(tmp_path))


def test_config_file_missing(tmp_path):
    path = str(tmp_path / "nosuch.json")
    one_line_error(run_brisk("run", "--config-file", path), path)


@pytest.mark.security
def test_config_file_over_1mib(tmp_path):
    cfg = json.dumps({"boot-source": {"kernel_image_path": "/k", "boot_args": "x"}})
    text = cfg[:-1] + " " * (1 << 20) + "}"
    line = one_line_error(run_brisk("run", "--config-file", write(tmp_path, text)))
    assert "1048576" in line or "1 MiB" in line or "at most" in line, line


def test_config_file_kernel_missing_at_boot(kvm, tmp_path):
    """A well-formed file whose kernel does not exist: refused before anything runs, naming the file."""
    cfg = {"boot-source": {"kernel_image_path": str(tmp_path / "nokernel")}}
    p = run_brisk("run", "--config-file", write(tmp_path, cfg))
    assert p.returncode != 0
    assert "nokernel" in p.stderr


# ---- option combinations refused ---------------------------------------------------------------------------


@pytest.mark.parametrize("opt", [["--cpus", "2"], ["--memory", "256M"], ["--kernel", "/k"], ["--disk", "/d"],
                                 ["--cmdline", "x"], ["--hugepages"]])
def test_vm_option_next_to_config_file(tmp_path, opt):
    path = write(tmp_path, {"boot-source": BOOT})
    one_line_error(run_brisk("run", "--config-file", path, *opt), f"--{opt[0].lstrip('-')}", "--config-file")
    one_line_error(run_brisk("--config-file", path, "--no-api", *opt), opt[0])


def test_process_options_next_to_config_file(kvm, tmp_path):
    """--serial, --timeline, --log-level are the process's own: accepted next to --config-file."""
    path = write(tmp_path, {"boot-source": {"kernel_image_path": guest("hello")}})
    out = tmp_path / "serial.txt"
    p = run_brisk("run", "--config-file", path, "--serial", f"file:{out}", "--log-level", "warn", timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Hello from brisk test guest" in out.read_text()


def test_restore_with_vm_option(tmp_path):
    one_line_error(run_brisk("restore", "--snapshot", str(tmp_path / "s"), "--mem", str(tmp_path / "m"),
                             "--kernel", guest("hello")), "--kernel")


@pytest.mark.parametrize("opt", [["--console", "virtio"], ["--console", "serial"], ["--disk", "d.img"],
                                 ["--net", "user"], ["--vsock", "cid=3,uds=v.sock"], ["--rng"]])
def test_restore_with_device_option(tmp_path, opt):
    """Every device kind's option is refused by restore (exit 2, one line naming it): the snapshot holds the
    devices. --console included, though it stays a process option next to --config-file and the API."""
    line = one_line_error(run_brisk("restore", "--snapshot", str(tmp_path / "s"), "--mem", str(tmp_path / "m"),
                                    *opt), f"brisk restore: {opt[0]}:", "the snapshot holds")
    assert "only process options apply" in line, line


def test_console_next_to_config_file(kvm, tmp_path):
    """--console stays the process's next to --config-file (Firecracker's file has no console device)."""
    path = write(tmp_path, {"boot-source": {"kernel_image_path": guest("hello")}})
    out = tmp_path / "serial.txt"
    p = run_brisk("run", "--config-file", path, "--console", "serial", "--serial", f"file:{out}", timeout=60)
    assert p.returncode == 0, p.stderr
    assert "Hello from brisk test guest" in out.read_text()


def test_restore_with_config_file(tmp_path):
    path = write(tmp_path, {"boot-source": BOOT})
    one_line_error(run_brisk("restore", "--snapshot", str(tmp_path / "s"), "--mem", str(tmp_path / "m"),
                             "--config-file", path), "--config-file")


def test_paused_without_api_sock(tmp_path):
    one_line_error(run_brisk("restore", "--snapshot", str(tmp_path / "s"), "--mem", str(tmp_path / "m"),
                             "--paused"), "--paused", "--api-sock")


def test_paused_outside_restore(tmp_path):
    path = write(tmp_path, {"boot-source": BOOT})
    one_line_error(run_brisk("run", "--config-file", path, "--paused", "--api-sock", str(tmp_path / "s.sock")),
                   "--paused")
