"""PUT /actions SendCtrlAltDel, proved from inside the guest: brisk's i8042 presses Ctrl+Alt+Del on its keyboard and
the kbd guest (guests/kbd.c) reads the scan codes as Linux's i8042 driver would, one byte per IRQ 1, in set 1 when
its command byte has XLATE and set 2 when not; it then resets, which ends brisk with status 0 (as a Linux guest's
reboot would). Also: the action before InstanceStart is refused, and with the keyboard interrupt off the bytes wait
in the controller's bounded queue (a further press that does not fit is refused) until the guest polls them.
Needs KVM."""
import os
import re
import subprocess
import time

import pytest

from apiclient import BriskProcess
from conftest import BRISK, EXIT_GUEST_OK, check_sanitizers, guest

pytestmark = pytest.mark.usefixtures("kvm")

CAD = {"action_type": "SendCtrlAltDel"}


class KbdVM(BriskProcess):
    """`brisk --api-sock SOCK` with the kbd guest configured over the API (apiclient.BriskProcess), stdin a pipe
    (the guest's serial input)."""

    def __init__(self, sockdir, name="api.sock"):
        sock = os.path.join(sockdir, name)
        super().__init__(BRISK, ["--api-sock", sock], sock, stdin=subprocess.PIPE)

    def boot(self, args):
        self.api.boot_source(guest("kbd"), boot_args=args)
        self.api.machine_config(vcpu_count=1, mem_size_mib=64)
        self.api.start()

    def wait_for(self, regex, timeout=30.0):
        r = re.compile(regex, re.M)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = r.search(self.out)
            if m:
                return m
            if self.proc.poll() is not None:
                self.join()
                m = r.search(self.out)
                if m:
                    return m
                break
            time.sleep(0.02)
        raise AssertionError(f"no /{regex}/ (exit {self.proc.poll()})\nstdout:\n{self.out[-3000:]}\n"
                             f"stderr:\n{self.err[-3000:]}")

    def finish(self, timeout=30):
        """Waits for brisk to end; returns (status, stdout, stderr), stderr checked for sanitizer reports."""
        self.proc.stdin.close()
        code = self.wait(timeout)
        check_sanitizers(self.err)
        return code, self.out, self.err


@pytest.fixture
def vm(sockdir):
    v = KbdVM(sockdir)
    yield v
    v.kill()


@pytest.mark.parametrize("xlate", [1, 0])
def test_ctrl_alt_del_reaches_guest(vm, xlate):
    """The guest gets Ctrl, Alt, Delete pressed and released, in the set its command byte asks for, one byte per
    interrupt; its reset ends brisk with status 0."""
    vm.boot(f"xlate={xlate}")
    vm.wait_for(r"^kbd: ready$")
    r = vm.api.put("/actions", CAD)
    assert r.status == 204, r
    status, out, err = vm.finish()
    assert "kbd: PASS ctrl-alt-del" in out, out + err
    assert status == EXIT_GUEST_OK, out + err


def test_ctrl_alt_del_before_start(vm):
    """No guest, no keyboard yet: 400 with a fault message, and brisk serves on."""
    r = vm.api.put("/actions", CAD)
    assert r.status == 400, r
    assert r.fault, r
    vm.boot("xlate=1")
    vm.wait_for(r"^kbd: ready$")
    assert vm.api.put("/actions", CAD).status == 204
    status, out, err = vm.finish()
    assert "kbd: PASS ctrl-alt-del" in out and status == EXIT_GUEST_OK, out + err


@pytest.mark.parametrize("xlate,fits", [(1, 2), (0, 1)])
def test_ctrl_alt_del_without_kbd_interrupt(vm, xlate, fits):
    """KBDINT clear: every press is accepted while the 16-byte queue has room for a whole sequence (8 bytes in
    set 1, 11 in set 2), the next is refused with 400, and the guest later polls exactly the accepted ones."""
    vm.boot(f"xlate={xlate} kbdint=0")
    vm.wait_for(r"^kbd: ready$")
    for _ in range(fits):
        r = vm.api.put("/actions", CAD)
        assert r.status == 204, r
    r = vm.api.put("/actions", CAD)
    assert r.status == 400, r
    assert "SendCtrlAltDel" in (r.fault or ""), r
    vm.proc.stdin.write(b"g")  # the guest's go: poll the controller now
    vm.proc.stdin.flush()
    status, out, err = vm.finish()
    assert f"kbd: PASS polled {fits} sequences" in out, out + err
    assert status == EXIT_GUEST_OK, out + err
