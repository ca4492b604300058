"""The build from a clean clone, as a new user or CI runs it.

Copies what a commit would hold (tracked files plus untracked ones git does not ignore) into a fresh
directory and runs the README's commands there: `make` alone must produce build/brisk (the test guests
alone once were all it built); `make -n demo` and `make -n check` must parse; on a machine that lacks a
build dependency, `make` says which and what to run before compiling anything. Runs on the host
(scripts/check.sh), never inside the nested KVM.
"""
import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def tree_files():
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: nothing to clone")
    return [f for f in out.decode().split("\0") if f and (ROOT / f).is_file()]


@pytest.fixture(scope="module")
def clone(tmp_path_factory):
    dst = tmp_path_factory.mktemp("clone")
    for f in tree_files():
        (dst / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, dst / f)
    return dst


def make(clone, *args, timeout=900):
    env = {k: v for k, v in os.environ.items() if k not in ("BUILD", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "BRISK")}
    return subprocess.run(["make", "-C", str(clone), *args], env=env, capture_output=True, text=True, timeout=timeout)


def test_plain_make_builds_brisk(clone):
    p = make(clone)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    brisk = clone / "build" / "brisk"
    assert brisk.exists(), f"plain `make` did not produce build/brisk:\n{p.stdout[-2000:]}"
    assert (clone / "build" / "brisk-jailer").exists(), "plain `make` did not produce build/brisk-jailer"
    v = subprocess.run([str(brisk), "--version"], capture_output=True, text=True, timeout=30)
    # Firecracker's API level as Kata's version check reads it (second word), and brisk's own version
    assert v.returncode == 0 and v.stdout.split(" ")[1] == "v1.7.0" and "(brisk " in v.stdout, v.stdout + v.stderr


@pytest.mark.parametrize("target", ["demo", "check", "bench", "bench-order", "check-linux", "demo-linux", "fuzz"])
def test_readme_targets_parse(clone, target):
    p = make(clone, "-n", target)
    assert p.returncode == 0, p.stderr[-2000:]


# A compiler that behaves as gcc on a machine without libjson-c-dev: json-c/json.h is not found (neither by
# the preprocessor nor in any source file) and neither is libjson-c.a.
NO_JSON_C_CC = r"""#!/bin/sh
for a; do
	case $a in
	-print-file-name=libjson-c*) echo "${a#-print-file-name=}"; exit 0 ;;
	-) src=$(cat); case $src in *json-c/*) echo "<stdin>:1:10: fatal error: json-c/json.h: No such file or directory" >&2; exit 1 ;; esac
	   printf '%s\n' "$src" | exec gcc "$@" ;;
	*.c) if grep -q 'json-c/' "$a" 2>/dev/null; then
		echo "$a: fatal error: json-c/json.h: No such file or directory" >&2; exit 1
	     fi ;;
	esac
done
exec gcc "$@"
"""


def test_missing_dependency_says_what_to_run(clone, tmp_path):
    """`make` where libjson-c-dev is missing (emulated by a compiler wrapper): it stops before compiling
    anything, with one message naming the header, the library and the package, and telling to run `make deps`;
    once the dependency is there, the check costs nothing more (a stamp)."""
    cc = tmp_path / "cc"
    cc.write_text(NO_JSON_C_CC)
    cc.chmod(0o755)
    p = make(clone, "BUILD=build-nodeps", f"CC={cc}")
    out = p.stdout + p.stderr
    assert p.returncode != 0, out[-2000:]
    assert "json-c/json.h (Debian package libjson-c-dev)" in out, out[-2000:]
    assert "libjson-c.a (Debian package libjson-c-dev)" in out, out[-2000:]
    assert "make deps" in out, out[-2000:]
    assert "fatal error" not in out, f"a compile ran before the check:\n{out[-2000:]}"
    assert not (clone / "build-nodeps" / "obj").exists(), "objects were compiled before the check"
    p = make(clone, "BUILD=build-nodeps", "-n", "all")
    assert "scripts/build-deps.sh" in p.stdout, "the check does not run until it passed"
    p = make(clone, "BUILD=build-nodeps", "build-nodeps/.build-deps")
    assert p.returncode == 0, p.stderr
    p = make(clone, "BUILD=build-nodeps", "-n", "all")
    assert "scripts/build-deps.sh" not in p.stdout, "the check runs again although it passed"
