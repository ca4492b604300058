"""A FIFO's lines, read the way the programs that drive Firecracker read its logger and metrics FIFOs (Kata's
fcListenToFifo, the Go SDK's captureFifoToFile): they wait for a writer, then read whole lines until the writer
has gone. Shared by tests/integration/test_orchestrators.py and tests/linux/test_kata_linux.py."""
import os
import threading
import time


class FifoReader(threading.Thread):
    """Reads the FIFO at `path` once started, until EOF after a writer came (a read before any writer opened it
    is EOF too: retried) or `deadline_s`. `open_first`: open it O_RDONLY|O_NONBLOCK now, as Kata does before it
    starts Firecracker. `lines` holds the complete lines read."""

    def __init__(self, path, deadline_s=120, open_first=False):
        super().__init__(daemon=True)
        self.path, self.deadline_s, self.lines = path, deadline_s, []
        self.fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK) if open_first else None

    def run(self):
        fd = self.fd if self.fd is not None else os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        buf, seen, deadline = b"", False, time.monotonic() + self.deadline_s
        while time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                chunk = None
            if chunk:
                seen = True
                buf += chunk
                *done, buf = buf.split(b"\n")
                self.lines += [d.decode(errors="replace") for d in done]
            elif chunk == b"" and seen:
                break
            else:
                time.sleep(0.02)
        os.close(fd)
