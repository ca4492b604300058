"""virtio-mmio transport and the entropy device: the conformance guest (guests/virtio-rng.c) against brisk,
the device announced on the command line, notifications without userspace exits, the rate limit, and the
options' errors. Disks and the console have their own suites (test_virtio_blk.py, test_virtio_console.py),
hostile rings test_virtio_hostile.py."""
import re
import time

import pytest

from conftest import EXIT_GUEST_OK, EXIT_USAGE, boot, guest, run_brisk

pytestmark = pytest.mark.usefixtures("kvm")

WINDOW0 = 0xD0001000
NOTIFY0 = WINDOW0 + 0x50


@pytest.mark.parametrize("words", ["", "event_idx=0", "indirect=0", "event_idx=0 indirect=0"])
def test_rng_conformance(words):
    args = ["--rng", "--timeline"] + (["--cmdline", words] if words else [])
    p = boot("virtio-rng", *args, timeout=120)
    fails = [line for line in p.stdout.splitlines() if "FAIL" in line]
    assert p.returncode == EXIT_GUEST_OK, f"{fails}\n{p.stdout}\n{p.stderr}"
    assert "virtio-rng: PASS" in p.stdout
    # the guest found the device where the command line said (virtio_mmio.device=4K@0xd0001000:5)
    assert "4096@0xd0001000:5" in p.stdout
    # QueueNotify went through KVM_IOEVENTFD: no exit to userspace at the notify register
    notify_exits = re.findall(rf"^\d+\s+mmio\s+write\s+0x{NOTIFY0:x}\s+(\d+)", p.stdout, re.M)
    assert notify_exits == [], f"QueueNotify exits: {notify_exits}"


def test_device_words_for_every_kernel():
    """Each device adds one virtio_mmio.device word; the user's --cmdline is kept in front of them.
    The built-in demo guest prints the command line it was given."""
    p = run_brisk("run", "--rng", "--cmdline", "event_idx=1 marker=xyz", timeout=120)
    assert p.returncode == EXIT_GUEST_OK, p.stdout + p.stderr
    assert re.search(r"^cmdline: event_idx=1 marker=xyz virtio_mmio.device=4K@0xd0001000:5$", p.stdout, re.M), \
        p.stdout
    p = run_brisk("run", "--cmdline", "event_idx=1", timeout=120)
    assert re.search(r"^cmdline: event_idx=1$", p.stdout, re.M), p.stdout  # no device, no word


@pytest.mark.security
def test_rng_rate_limit_throttles():
    """At 64 bytes/s the guest's requests (1+16+64+256+16+512+64+64 bytes) are served at most 64 bytes
    (a one-second burst) plus 64 per second: answers shrink (5.4.6.1 allows fewer bytes than asked), the
    device throttles and retries on a timer, it never spins and never serves more than the rate."""
    t0 = time.monotonic()
    p = boot("virtio-rng", "--rng=64", "--log-level", "info", timeout=180)
    elapsed = time.monotonic() - t0
    assert p.returncode == EXIT_GUEST_OK, p.stdout + p.stderr
    m = re.search(r"virtio-rng: (\d+) bytes served, throttled (\d+) times", p.stderr)
    assert m, p.stderr
    served, throttled = int(m.group(1)), int(m.group(2))
    assert served <= 64 + 64 * elapsed + 1, (served, elapsed)
    assert served < 1 + 16 + 64 + 256 + 16 + 512 + 64 + 64, p.stderr  # the limit held answers back
    assert "used length 1)" in p.stdout  # a shrunk answer: what the limit leaves
    # unthrottled, the same guest gets every byte it asks for
    q = boot("virtio-rng", "--rng", "--log-level", "info", timeout=180)
    m = re.search(r"virtio-rng: (\d+) bytes served, throttled (\d+) times", q.stderr)
    assert m and int(m.group(2)) == 0 and int(m.group(1)) >= 1 + 16 + 64 + 256 + 16 + 512, q.stderr
    if throttled == 0:
        # the bucket refills a byte every 15.6 ms: a guest whose requests come further apart (an emulated KVM)
        # always finds a byte or more, and the empty-bucket timer is never needed
        pytest.skip(f"the guest's requests came slower than the bucket refills ({served} bytes in {elapsed:.1f} s): "
                    "the empty-bucket timer was not reached")
    assert throttled >= 1, p.stderr


@pytest.mark.parametrize("value", ["0", "x", "-5", "1Q"])
def test_rng_bad_rate(value):
    p = run_brisk("run", "--kernel", guest("hello"), f"--rng={value}")
    assert p.returncode == EXIT_USAGE
    assert "invalid --rng" in p.stderr


def test_too_many_virtio_devices(tmp_path):
    disks = []
    for i in range(18):
        disks += ["--disk", str(tmp_path / f"d{i}.img")]
    p = run_brisk("run", "--kernel", guest("hello"), "--rng", *disks)
    assert p.returncode == EXIT_USAGE
    assert "at most 16 disks" in p.stderr or "virtio devices" in p.stderr, p.stderr


@pytest.mark.parametrize("value,why", [
    ("", "needs a PATH"),
    (",ro", "needs a PATH"),
    ("x.img,bogus", "unknown option 'bogus'"),
    ("x.img,id=" + "a" * 21, "id= must be 1..20 bytes"),
    ("x.img,,ro", "empty or overlong option"),
])
def test_disk_option_errors(value, why):
    p = run_brisk("run", "--kernel", guest("hello"), "--disk", value)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert why in p.stderr


def test_console_option_errors():
    p = run_brisk("run", "--kernel", guest("hello"), "--console", "tty")
    assert p.returncode == EXIT_USAGE
    assert "invalid --console 'tty'" in p.stderr
