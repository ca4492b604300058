"""subprocess.run with a look inside before a timeout kills the process (shared by the test suites).

When a brisk run does not end in time, the test fails either way; what matters for the
log is where it hung. run() then calls scripts/kvm-diag.sh on the still-running process
(thread stacks, KVM's counters over two seconds, a second of kvm tracepoints) and puts
its report into the TimeoutExpired it raises (attribute `diag`, and in its message), so
pytest prints it with the failure. Without root the report says what it could not read.
"""
import subprocess
import tempfile
from pathlib import Path

DIAG = Path(__file__).resolve().parents[1] / "scripts" / "kvm-diag.sh"


class Timeout(subprocess.TimeoutExpired):
    """TimeoutExpired whose message carries kvm-diag.sh's report."""

    def __init__(self, cmd, timeout, output, stderr, diag):
        super().__init__(cmd, timeout, output=output, stderr=stderr)
        self.diag = diag

    def __str__(self):
        return f"{super().__str__()}\n--- scripts/kvm-diag.sh before the kill ---\n{self.diag}"


def diagnose(pid):
    """kvm-diag.sh's report on pid, or why there is none."""
    try:
        p = subprocess.run([str(DIAG), str(pid)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                           timeout=60)
        return p.stdout + p.stderr
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"kvm-diag.sh did not run: {e}"


def _text(f):
    """A capture file's bytes as subprocess's text mode gives them (universal newlines)."""
    f.seek(0)
    return f.read().decode(errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def run(cmd, *, input=None, timeout=None, stdin=None, out_files=False, **kw):
    """Like subprocess.run(cmd, capture_output=True, text=True, ...); on timeout raises Timeout.

    out_files: stdout and stderr go to temporary files, read back when the process has ended, instead of
    pipes read while it runs. The real-kernel tier's boots use them: in the nested harness, a reader woken
    by every console write made the emulator fail the guest far more often (scripts/nested-kvm.md "Known
    problems": "A pipe on brisk's stdout")."""
    if out_files:
        return _run_files(cmd, input=input, timeout=timeout, stdin=stdin, **kw)
    with subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else stdin, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, **kw) as proc:
        try:
            out, err = proc.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired as e:
            diag = diagnose(proc.pid)
            proc.kill()
            out, err = proc.communicate()
            raise Timeout(cmd, timeout, out or e.output, err or e.stderr, diag) from None
        return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _run_files(cmd, *, input, timeout, stdin, **kw):
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        with subprocess.Popen(cmd, stdin=subprocess.PIPE if input is not None else stdin, stdout=out, stderr=err,
                              **kw) as proc:
            try:
                proc.communicate(input.encode() if input is not None else None, timeout=timeout)
            except subprocess.TimeoutExpired:
                diag = diagnose(proc.pid)
                proc.kill()
                proc.wait()
                raise Timeout(cmd, timeout, _text(out), _text(err), diag) from None
        return subprocess.CompletedProcess(cmd, proc.returncode, _text(out), _text(err))
