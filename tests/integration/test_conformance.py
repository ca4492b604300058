"""Boot-protocol conformance: guests that check, from inside, what brisk hands a kernel (needs KVM).

Each conformance guest (guests/conf-pvh.c, guests/conf64.c) prints one
"NAME: CHECK what: PASS|FAIL (values)" line per check and ends with
"NAME: PASS" (i8042 reset, status 0) or "NAME: FAIL: ..." (status 255). The
host side of every check travels on the command line: cpus=, mem_mib=,
initrd_size= and initrd_sum= (FNV-1a 32 of the initrd file), and acpi_off=1
with brisk's --acpi off (then no RSDP may be handed over or found by the
legacy scan; otherwise both must name the same one).
"""
import os
import re

import pytest

from conftest import EXIT_GUEST_OK, EXIT_USAGE, GUESTS, guest, run_brisk

pytestmark = pytest.mark.usefixtures("kvm")

# name -> image file; the same checks over the three boot paths.
FORMATS = {
    "conf-pvh": "conf-pvh.elf",  # ELF with the PVH note: 32-bit entry, hvm_start_info
    "conf-elf64": "conf-elf64.elf",  # ELF without the note: 64-bit entry, boot_params
    "conf-bzimage": "conf-bzimage.img",  # bzImage: 64-bit boot protocol, relocatable payload
}
CPUS = [1, 2, 4]
# (--memory, MiB); 4200M puts RAM above 4 GiB (the map gains an entry there).
MEMORY = [("128M", 128), ("1G", 1024), ("4200M", 4200)]
INITRD_SIZE = 65536 + 4096 + 7  # not a page multiple: the size must be passed exactly


def fnv1a32(data):
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def host_mem_mib():
    """RAM + swap in MiB, the limit brisk's config_validate applies to --memory."""
    total = 0
    with open("/proc/meminfo") as f:
        for line in f:
            key, value = line.split(":", 1)
            if key in ("MemTotal", "SwapTotal"):
                total += int(value.split()[0]) // 1024
    return total


@pytest.fixture(scope="module")
def initrd(tmp_path_factory):
    data = os.urandom(INITRD_SIZE)
    path = tmp_path_factory.mktemp("conf") / "initrd.bin"
    path.write_bytes(data)
    return str(path), len(data), fnv1a32(data)


def image(name):
    if name == "conf-pvh":
        return guest("conf-pvh")
    path = GUESTS / FORMATS[name]
    assert path.exists(), f"{path} missing: run make guests"
    return str(path)


def run_conf(name, cpus, memory, mib, initrd, acpi=True):
    path, size, digest = initrd
    if mib > host_mem_mib():
        pytest.skip(f"--memory {memory} exceeds this host's RAM + swap")
    cmdline = f"conf cpus={cpus} mem_mib={mib} initrd_size={size} initrd_sum={digest:#x}"
    extra = []
    if not acpi:
        cmdline += " acpi_off=1"
        extra = ["--acpi", "off"]
    p = run_brisk("run", "--kernel", image(name), "--cpus", str(cpus), "--memory", memory, "--initrd", path,
                  "--cmdline", cmdline, *extra, timeout=90)
    return p, cmdline


def assert_conformant(name, p, cmdline, acpi=True):
    out = p.stdout
    failed = [line for line in out.splitlines() if "FAIL" in line]
    assert not failed, "\n".join(failed) + "\n---\n" + out + p.stderr
    assert p.returncode == EXIT_GUEST_OK, out + p.stderr
    assert f"{name}: PASS" in out, out
    # the command line arrived byte for byte, with its length
    assert f"{name}: cmdline [{cmdline}] len {len(cmdline)}" in out, out
    checks = re.findall(rf"^{name}: CHECK (\S+): PASS", out, re.M)
    rsdp = ("rsdp_handed", "rsdp_scan_equals_handed") if acpi else ("rsdp_absent_without_acpi",)
    for must in ("memmap_ram_total", "initrd_fnv1a32", "mptable_cpus", "mptable_isa_irqs", *rsdp):
        assert must in checks, f"{must} not checked:\n{out}"
    if acpi:  # the RSDP where docs/acpi.md puts it (LAYOUT_ACPI)
        assert re.search(rf"^{name}: CHECK rsdp_handed: PASS \(0xe0000\)$", out, re.M), out


@pytest.mark.parametrize("memory,mib", MEMORY, ids=[m for m, _ in MEMORY])
@pytest.mark.parametrize("cpus", CPUS)
@pytest.mark.parametrize("name", list(FORMATS))
def test_conformance(name, cpus, memory, mib, initrd):
    p, cmdline = run_conf(name, cpus, memory, mib, initrd)
    assert_conformant(name, p, cmdline)


@pytest.mark.parametrize("cpus", [1, 4])
@pytest.mark.parametrize("name", list(FORMATS))
def test_conformance_without_acpi(name, cpus, initrd):
    """--acpi off: no RSDP in start_info / boot_params nor in the legacy scan; the rest as with ACPI."""
    p, cmdline = run_conf(name, cpus, "128M", 128, initrd, acpi=False)
    assert_conformant(name, p, cmdline, acpi=False)


@pytest.mark.parametrize("cpus", CPUS)
def test_smpboot_every_ap_arrives(cpus):
    p = run_brisk("run", "--kernel", guest("smpboot"), "--cpus", str(cpus), "--cmdline", f"cpus={cpus}",
                  timeout=120)
    out = p.stdout
    assert p.returncode == EXIT_GUEST_OK, out + p.stderr
    assert "smpboot: PASS" in out, out
    ids = sorted(int(m) for m in re.findall(r"^smpboot: cpu \d+ apic id (\d+) online", out, re.M))
    assert ids == list(range(cpus)), out
    assert f"smpboot: {cpus - 1} of {cpus - 1} APs reached long mode" in out, out


@pytest.mark.parametrize("topology,ids", [
    ("sockets=2,cores=3,threads=1", [0, 1, 2, 4, 5, 6]),
    ("sockets=1,cores=3,threads=2", [0, 1, 2, 3, 4, 5]),
    ("sockets=3,cores=1,threads=1", [0, 1, 2]),
])
def test_smpboot_topology_with_apic_id_gaps(topology, ids):
    """Each vCPU's LAPIC has the APIC ID CPUID and the MP table give it, also where the IDs have gaps
    (KVM_CREATE_VCPU's id is the initial LAPIC ID: it used to be the vCPU index, so APIC ID 6 never arrived)."""
    cpus = len(ids)
    p = run_brisk("run", "--kernel", guest("smpboot"), "--cpus", str(cpus), "--topology", topology,
                  "--cmdline", f"cpus={cpus}", timeout=120)
    out = p.stdout
    assert p.returncode == EXIT_GUEST_OK, out + p.stderr
    assert "smpboot: PASS" in out, out
    seen = sorted(int(m) for m in re.findall(r"^smpboot: cpu \d+ apic id (\d+) online", out, re.M))
    assert seen == ids, out


def test_too_many_cpus_for_the_mp_table():
    """255 vCPUs would need APIC ID 255, the broadcast ID: refused with a usage error."""
    p = run_brisk("run", "--kernel", guest("hello"), "--cpus", "255", timeout=60)
    assert p.returncode == EXIT_USAGE, p.stderr
    assert "255" in p.stderr, p.stderr
