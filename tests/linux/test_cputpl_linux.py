"""Firecracker's CPU templates under a real kernel (docs/cpuid.md "Firecracker's CPU templates").

One boot: Debian's kernel with the plain initramfs from a Firecracker --config-file whose "cpu-config" names
a custom template (Firecracker's JSON) that gives leaf 1 EAX another family/model/stepping and leaves
0x80000002-4 a brand string. The kernel's own boot line ("smpboot: CPU0: AMD BRAND (family: 0x19, model: 0x21,
stepping: 0x2)", arch/x86/kernel/cpu/common.c print_cpu_info) must show both, and init must run.
Without a boot: the static templates this host's KVM cannot take are refused with Firecracker's message
(nested QEMU's qemu64 has no leaf 0xD subleaf 1, which T2A sets; an AMD host refuses the Intel ones).
"""
import json
import re
import subprocess
import time

import pytest

from .conftest import BRISK, DEFAULT_CMDLINE, HELLO, INT3PROBE, MEMORY, TIMEOUT, kernel

import hangdiag  # noqa: E402

pytestmark = pytest.mark.usefixtures("linux_kvm")

BRAND = "brisk custom template CPU"


def brand_modifiers(text):
    raw = text.encode().ljust(48, b"\0")
    mods = []
    for i, leaf in enumerate((0x80000002, 0x80000003, 0x80000004)):
        regs = [int.from_bytes(raw[16 * i + 4 * r:16 * i + 4 * r + 4], "little") for r in range(4)]
        mods.append({"leaf": hex(leaf), "subleaf": "0x0", "flags": 0,
                     "modifiers": [{"register": name, "bitmap": "0b" + format(v, "032b")}
                                   for name, v in zip(("eax", "ebx", "ecx", "edx"), regs)]})
    return mods


# family 0xf + extended family 0xa = 0x19; model 1 + extended model 2 = 0x21; stepping 2
TEMPLATE = {"cpuid_modifiers": [
    {"leaf": "0x1", "subleaf": "0x0", "flags": 0,
     "modifiers": [{"register": "eax", "bitmap": "0bxxxx_00001010_0010_xx_xx_1111_0001_0010"}]},
    *brand_modifiers(BRAND)]}


def test_custom_template_in_the_kernel(tmp_path, initramfs):
    tmpl = tmp_path / "cpu.json"
    tmpl.write_text(json.dumps(TEMPLATE))
    cfg = {"boot-source": {"kernel_image_path": str(kernel("vmlinuz")), "initrd_path": str(initramfs),
                           "boot_args": DEFAULT_CMDLINE},
           "machine-config": {"vcpu_count": 1, "mem_size_mib": int(MEMORY.rstrip("M"))},
           "cpu-config": str(tmpl)}
    path = tmp_path / "vm.json"
    path.write_text(json.dumps(cfg))
    t0 = time.monotonic()
    p = hangdiag.run([str(BRISK), "--config-file", str(path), "--no-api"], stdin=subprocess.DEVNULL,
                     timeout=TIMEOUT, out_files=True)
    wall = time.monotonic() - t0
    tail = "\n".join(p.stdout.splitlines()[-40:])
    assert HELLO in p.stdout, f"init did not run (exit {p.returncode}, {wall:.1f} s):\n{tail}\n{p.stderr[-2000:]}"
    # print_cpu_info puts the vendor's name first unless the brand string starts with it
    m = re.search(r"CPU0: (?:AMD |Intel )?(.*) \(family: (0x[0-9a-f]+), model: (0x[0-9a-f]+), stepping: "
                  r"(0x[0-9a-f]+)\)", p.stdout)
    assert m, tail
    assert m.groups() == (BRAND, "0x19", "0x21", "0x2"), m.group(0)


@pytest.mark.parametrize("name", ["C3", "T2", "T2S", "T2CL", "T2A"])
def test_static_template_verdict(name):
    """Each static template either builds a VM here (the probe guest runs) or is refused, before any guest
    code, with Firecracker's message: the vendor, or a leaf this KVM lacks."""
    p = subprocess.run([str(BRISK), "run", "--kernel", str(INT3PROBE), "--cpu-template", name],
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    if p.returncode == 0:
        return
    assert p.returncode == 2, p.stderr
    assert re.fullmatch(r"brisk: error: (Failed to get CPU template: CPU vendor mismatched between actual CPU and "
                        r"CPU template\.|Failed to create guest config: Template changes a CPUID entry not "
                        r"supported by KVM: Leaf: [0-9a-f]+, Subleaf: [0-9a-f]+)\n", p.stderr), p.stderr
