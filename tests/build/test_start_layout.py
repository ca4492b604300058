"""The start path in one place: scripts/start-layout.sh and the layout of the brisk it builds.

`brisk run`'s functions and variables (scripts/start-path.syms) are linked first, in `.text.start` and
`.data.start` and `.bss.start`, so that exec and start-up touch a few pages of the binary (docs/performance.md "The start
path in one place"). These tests check the generator on small lists and the built binary's layout; they
run on the host (scripts/check.sh), never inside the nested KVM.
"""
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYOUT = ROOT / "scripts" / "start-layout.sh"
BRISK = ROOT / os.environ.get("BUILD", "build") / "brisk"
CC = os.environ.get("CC", "cc")


def layout(tmp_path, names):
    lst = tmp_path / "list.syms"
    lst.write_text("# a comment\n\n" + "\n".join(names) + "\n")
    out = tmp_path / "start.ld"
    r = subprocess.run([str(LAYOUT), CC, str(lst), str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return out.read_text()


def libc_static():
    p = subprocess.run([CC, "-print-file-name=libc.a"], capture_output=True, text=True).stdout.strip()
    return os.path.isfile(p)


def section(text, name):
    """The body of output section `name` in a generated script."""
    m = re.search(r"\n  %s :\n  \{\n(.*?)\n  \}" % re.escape(name), text, re.S)
    assert m, "no %s in:\n%s" % (name, text)
    return m.group(1).splitlines()


def start_sections(text):
    """The lines of the three output sections a generated script makes: (.text.start, .data.start, .bss.start)."""
    return section(text, ".text.start"), section(text, ".data.start"), section(text, ".bss.start (NOLOAD)")


def test_brisk_names_become_their_sections(tmp_path):
    text = layout(tmp_path, ["vcpu_thread", "stamp", "no_such_function_anywhere"])
    t, d, b = start_sections(text)
    assert "    *(.text.vcpu_thread .text.startup.vcpu_thread .text.hot.vcpu_thread)" in t
    assert "    *(.data.stamp .data.rel.stamp .data.rel.local.stamp)" in d
    assert "    *(.bss.stamp)" in b
    # a name nobody defines costs nothing but a pattern that matches nothing
    assert any("no_such_function_anywhere" in line for line in t)
    for where in (".text", ".data", ".bss"):
        assert "INSERT BEFORE %s;" % where in text


@pytest.mark.skipif(not libc_static(), reason="no static libc.a to look names up in")
def test_libc_names_place_their_members(tmp_path):
    text = layout(tmp_path, ["__libc_start_main", "environ", "__memmove_sse2_unaligned_erms"])
    t, d, b = start_sections(text)
    assert "    *libc.a:libc-start.o(.text .text.*)" in t
    # a variable's member goes to .data.start and .bss.start, not its code to .text.start
    assert "    *libc.a:environ.o(.data .data.rel .data.rel.local)" in d
    assert "    *libc.a:environ.o(.bss)" in b
    assert not any("environ.o" in line for line in t)
    # one variant of a string function recorded: every variant of the family placed, and its selector
    for m in ("memmove.o", "memmove-sse2-unaligned-erms.o", "memmove-avx-unaligned-erms.o",
              "memmove-evex-unaligned-erms.o", "memmove-avx512-unaligned-erms.o"):
        assert "    *libc.a:%s(.text .text.*)" % m in t, m


def elf_sections(path):
    out = subprocess.run(["readelf", "-SW", str(path)], capture_output=True, text=True, check=True).stdout
    secs = {}
    for line in out.splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", line)
        if m:
            secs[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16))
    return secs


def elf_symbols(path):
    out = subprocess.run(["nm", str(path)], capture_output=True, text=True, check=True).stdout
    syms = {}
    for line in out.splitlines():
        p = line.split()
        if len(p) == 3:
            syms.setdefault(p[2], int(p[0], 16))
    return syms


@pytest.fixture(scope="module")
def built():
    if not BRISK.is_file():
        pytest.skip("%s not built" % BRISK)
    return elf_sections(BRISK), elf_symbols(BRISK)


def inside(secs, name, addr):
    base, size = secs[name]
    return base <= addr < base + size


def test_brisk_start_path_is_first(built):
    secs, syms = built
    assert {".text.start", ".data.start", ".bss.start"} <= set(secs), sorted(secs)
    for fn in ("main", "run_vm", "vm_create", "vcpu_thread", "kvm_ioctl", "seccomp_enter", "elf_load"):
        assert inside(secs, ".text.start", syms[fn]), fn
    for var in ("stamp", "markers", "guard", "table_lock"):  # zero-initialised: .bss
        assert inside(secs, ".bss.start", syms[var]), var
    # the seccomp filters, which brisk writes its pid into before attaching the first
    assert inside(secs, ".data.start", syms["prog_0"])
    # what `brisk run` does not use stays behind: the profiler's SVG report, the jailer
    for fn in ("report_svg", "cmd_jailer"):
        if fn in syms:
            assert not inside(secs, ".text.start", syms[fn]), fn
    # the paths a boot and a restore take, not the whole of brisk: less than half of its code
    assert secs[".text.start"][1] < (secs[".text.start"][1] + secs[".text"][1]) / 2


def test_static_brisk_has_libc_start_path_first(built):
    secs, syms = built
    if "__libc_start_main" not in syms:
        pytest.skip("a dynamically linked brisk (STATIC=0): the C library is not in the binary")
    for fn in ("__libc_start_main", "_dl_aux_init", "__libc_setup_tls", "malloc", "pthread_create",
               "__memmove_avx_unaligned_erms", "__memmove_evex_unaligned_erms", "__memmove_sse2_unaligned_erms"):
        assert inside(secs, ".text.start", syms[fn]), fn
    for var in ("main_arena", "_dl_pagesize"):
        assert inside(secs, ".data.start", syms[var]), var
