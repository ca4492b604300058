"""Debian's stock kernel reads brisk's metadata service (docs/devices.md, "MMDS") over its virtio-net driver.

Two boots (V1, V2), each started as flintlock starts Firecracker: `brisk --no-api --config-file F --metadata M`, the config
file with one network interface (a tap nobody needs to bring up: the frames for the MMDS never reach it) and
`mmds-config` {"version": "V1" or "V2", "network_interfaces": ["eth0"]}; the metadata file
{"latest": {"meta-data": {"ami-id": "ami-linux", ...}}}. The init (tests/linux/init_net.c, brisk.mmds=eth0)
gives eth0 an address, adds a host route to 169.254.169.254 and makes four requests with Linux's own TCP
stack, each on a connection of its own: GET without a token (401, V2), PUT /latest/api/token (200, a token),
GET with it (200 "ami-linux"), GET /latest/meta-data as JSON with it; V1: the GET answers, the PUT is a 405.
"""
import json
import re
import subprocess
import time

import pytest

from .conftest import BRISK, LINUX, TIMEOUT, Boot, brisk_default_cmdline, brisk_run_help, kernel

import hangdiag  # noqa: E402

pytestmark = pytest.mark.usefixtures("linux_kvm")

INITRD = LINUX / "initramfs-virtio.cpio.gz"
META = {"latest": {"meta-data": {"ami-id": "ami-linux", "hostname": "brisk-guest"}}}


@pytest.fixture(scope="module", params=["V1", "V2"])
def mmds_boot(request, tmp_path_factory):
    if not INITRD.exists():
        pytest.skip(f"{INITRD} missing: tests/linux/run.sh builds it")
    tmp = tmp_path_factory.mktemp("mmds")
    words = [w for w in brisk_default_cmdline(brisk_run_help()).split() if w != "acpi=off"]
    words += ["brisk.virtio=1", "brisk.poweroff=auto", "brisk.ip=eth0,192.0.2.2/24", "brisk.mmds=eth0"]
    cfg = {
        "boot-source": {"kernel_image_path": str(kernel("vmlinuz")), "initrd_path": str(INITRD),
                        "boot_args": " ".join(words)},
        "machine-config": {"vcpu_count": 1, "mem_size_mib": 256},
        "network-interfaces": [{"iface_id": "eth0", "host_dev_name": "bskmmdsl0", "guest_mac": "02:b5:00:00:00:07"}],
        "mmds-config": {"version": request.param, "network_interfaces": ["eth0"]},
    }
    (tmp / "vm.json").write_text(json.dumps(cfg))
    (tmp / "meta.json").write_text(json.dumps(META))
    cmd = [str(BRISK), "--no-api", "--config-file", str(tmp / "vm.json"), "--metadata", str(tmp / "meta.json")]
    t0 = time.monotonic()
    try:
        p = hangdiag.run(cmd, stdin=subprocess.DEVNULL, timeout=TIMEOUT, out_files=True)
    except hangdiag.Timeout as e:
        pytest.fail(f"no exit within {TIMEOUT:.0f} s; console so far:\n" + "\n".join((e.stdout or "").splitlines()[-40:]))
    for marker in ("AddressSanitizer", "runtime error:", "UndefinedBehaviorSanitizer"):
        assert marker not in p.stderr, f"sanitizer report:\n{p.stderr}"
    b = Boot(p, time.monotonic() - t0)
    b.version = request.param
    return b


def line(b, name):
    m = re.search(rf"^brisk-net: mmds {name}: (-?\d+) '(.*)'$", b.stdout, re.M)
    assert m, f"no 'brisk-net: mmds {name}' line\n{b.describe()}"
    return int(m.group(1)), m.group(2)


def test_boot_ends_cleanly(mmds_boot):
    assert mmds_boot.status == 0, mmds_boot.describe()


def test_get_without_a_token(mmds_boot):
    """V1 answers; V2 wants a token (401)."""
    st, body = line(mmds_boot, "get")
    if mmds_boot.version == "V1":
        assert (st, body) == (200, "ami-linux"), mmds_boot.describe()
    else:
        assert st == 401 and body.startswith("No MMDS token provided."), mmds_boot.describe()


def test_token_flow(mmds_boot):
    """V2: PUT /latest/api/token, then GETs with it; V1: the PUT is a 405 and a GET with any header answers."""
    st, token = line(mmds_boot, "token")
    if mmds_boot.version == "V1":
        assert (st, token) == (405, "Not allowed HTTP method."), mmds_boot.describe()
        assert line(mmds_boot, "get with token") == (200, "ami-linux"), mmds_boot.describe()
        return
    assert st == 200 and re.fullmatch(r"[A-Za-z0-9+/=]{44}", token), mmds_boot.describe()
    st, body = line(mmds_boot, "get with token")
    assert (st, body) == (200, "ami-linux"), mmds_boot.describe()
    st, body = line(mmds_boot, "get json")
    assert st == 200 and json.loads(body) == META["latest"]["meta-data"], mmds_boot.describe()
