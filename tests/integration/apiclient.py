"""A plain HTTP/1.1 client for brisk's Firecracker-compatible API on a Unix socket (http.client over AF_UNIX),
and a helper that starts brisk with --api-sock and waits for the socket. Shared by the API tests."""
import http.client
import json
import os
import signal
import socket
import subprocess
import tempfile
import threading
import time


class UnixHTTPConnection(http.client.HTTPConnection):
    """http.client.HTTPConnection whose transport is a Unix stream socket (Host: localhost, as curl sends)."""

    def __init__(self, sock_path, timeout=30):
        super().__init__("localhost", timeout=timeout)
        self.sock_path = str(sock_path)

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self.sock_path)
        self.sock = s


class Response:
    """status, reason, raw body, and the body parsed as JSON (None when empty or not JSON)."""

    def __init__(self, status, reason, body, headers):
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = headers
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None

    @property
    def fault(self):
        """The fault_message of an error body (Firecracker's shape), or None."""
        return self.json.get("fault_message") if isinstance(self.json, dict) else None

    def __repr__(self):
        return f"<{self.status} {self.reason} {self.body[:400]!r}>"


class ApiClient:
    """One request per connection (as Firecracker's SDKs do with short-lived clients); bodies are JSON."""

    def __init__(self, sock_path, timeout=30):
        self.sock_path = str(sock_path)
        self.timeout = timeout

    def request(self, method, path, body=None, raw=None, headers=None):
        c = UnixHTTPConnection(self.sock_path, timeout=self.timeout)
        try:
            h = {"Accept": "application/json"}
            data = raw
            if body is not None:
                data = json.dumps(body).encode()
            if data is not None:
                h["Content-Type"] = "application/json"
            h.update(headers or {})
            c.request(method, path, body=data, headers=h)
            r = c.getresponse()
            return Response(r.status, r.reason, r.read(), dict(r.getheaders()))
        finally:
            c.close()

    def get(self, path):
        return self.request("GET", path)

    def put(self, path, body=None, **kw):
        return self.request("PUT", path, body, **kw)

    def patch(self, path, body=None, **kw):
        return self.request("PATCH", path, body, **kw)

    # ---- Firecracker's calls, each asserting its documented success status -------------------------------

    def ok(self, method, path, body=None, status=204):
        r = self.request(method, path, body)
        assert r.status == status, f"{method} {path} {body}: {r}"
        return r

    def boot_source(self, kernel, boot_args=None):
        body = {"kernel_image_path": str(kernel)}
        if boot_args is not None:
            body["boot_args"] = boot_args
        return self.ok("PUT", "/boot-source", body)

    def machine_config(self, vcpu_count=1, mem_size_mib=128, **extra):
        return self.ok("PUT", "/machine-config", {"vcpu_count": vcpu_count, "mem_size_mib": mem_size_mib, **extra})

    def drive(self, drive_id, path, root=False, read_only=False):
        return self.ok("PUT", f"/drives/{drive_id}", {"drive_id": drive_id, "path_on_host": str(path),
                                                      "is_root_device": root, "is_read_only": read_only})

    def start(self):
        return self.ok("PUT", "/actions", {"action_type": "InstanceStart"})

    def pause(self):
        return self.ok("PATCH", "/vm", {"state": "Paused"})

    def resume(self):
        return self.ok("PATCH", "/vm", {"state": "Resumed"})

    def snapshot_create(self, state, mem, snapshot_type="Full"):
        return self.ok("PUT", "/snapshot/create", {"snapshot_type": snapshot_type, "snapshot_path": str(state),
                                                   "mem_file_path": str(mem)})

    def snapshot_load(self, state, mem, resume_vm=True, legacy_mem_field=False):
        body = {"snapshot_path": str(state), "resume_vm": resume_vm}
        if legacy_mem_field:
            body["mem_file_path"] = str(mem)
        else:
            body["mem_backend"] = {"backend_type": "File", "backend_path": str(mem)}
        return self.ok("PUT", "/snapshot/load", body)


def wait_for_socket(path, proc=None, timeout=10.0):
    """Waits until something accepts connections on the Unix socket at path. Raises with brisk's stderr when
    proc exits first or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"brisk exited with {proc.returncode} before serving {path}: {err}")
        if os.path.exists(path):
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
                return
            except OSError:
                pass
            finally:
                s.close()
        time.sleep(0.02)
    raise AssertionError(f"no API socket at {path} after {timeout} s")


def spawn_brisk(brisk, args, stdout=subprocess.PIPE, stderr=subprocess.PIPE):
    """Starts brisk with args (a list), stdin closed, text mode off (the serial is read in bytes)."""
    return subprocess.Popen([str(brisk), *args], stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)


class BriskProcess:
    """One brisk process: stdout (the guest's COM1) and stderr collected by threads, its API client when it has a
    socket. stdin is closed unless `stdin` says otherwise (subprocess.PIPE: the guest's serial input); `env` adds
    to the environment."""

    def __init__(self, brisk, args, sock=None, stdin=subprocess.DEVNULL, env=None, out_files=False):
        """out_files: stdout and stderr go to temporary files, read when asked, not to pipes drained by threads
        (the real-kernel tier: scripts/nested-kvm.md "A pipe on brisk's stdout")."""
        self.args = [str(a) for a in args]
        self.sock = sock
        self._out, self._err = bytearray(), bytearray()
        self._lock = threading.Lock()
        self._files = []
        if out_files:
            # the child appends through a description of its own; ours reads from where it last stopped
            self._files = [tempfile.NamedTemporaryFile(prefix="brisk-out-") for _ in range(2)]
            ends = [open(f.name, "ab") for f in self._files]
            try:
                self.proc = subprocess.Popen([str(brisk), *self.args], stdin=stdin, stdout=ends[0], stderr=ends[1],
                                             env={**os.environ, **(env or {})})
            finally:
                for e in ends:
                    e.close()
            self._threads = []
        else:
            self.proc = subprocess.Popen([str(brisk), *self.args], stdin=stdin, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, env={**os.environ, **(env or {})})
            self._threads = [threading.Thread(target=self._pump, args=(f, b), daemon=True)
                             for f, b in ((self.proc.stdout, self._out), (self.proc.stderr, self._err))]
            for t in self._threads:
                t.start()
        self.api = None
        if sock:
            wait_for_socket(sock, self.proc)
            self.api = ApiClient(sock)

    def _pump(self, f, buf):
        fd = f.fileno()
        while True:
            try:
                b = os.read(fd, 65536)
            except OSError:
                return
            if not b:
                return
            with self._lock:
                buf.extend(b)

    def _collect(self):
        """With out_files: what the process wrote since the last look, into the buffers (under the lock)."""
        for f, buf in zip(self._files, (self._out, self._err)):
            buf.extend(f.read())

    @property
    def out(self):
        with self._lock:
            self._collect()
            return self._out.decode(errors="replace")

    @property
    def err(self):
        with self._lock:
            self._collect()
            return self._err.decode(errors="replace")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.join()

    def join(self):
        """Waits for the pump threads (after the process ended): out and err are then complete."""
        for t in self._threads:
            t.join(timeout=5)

    def wait(self, timeout=30):
        """Waits for the process; kills it and fails when it is still running after `timeout` s."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"brisk {self.args} still running after {timeout} s\nstdout:\n"
                                 f"{self.out[-3000:]}\nstderr:\n{self.err[-3000:]}")
        self.join()
        return self.proc.returncode
