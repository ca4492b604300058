#!/usr/bin/python3
"""api-ready.py - how long `brisk --api-sock S` takes from its exec until S accepts a connection, and until
it answers a first request.

    bench/api-ready.py [--runs N] BRISK [BRISK ...]

Each run spawns one binary with a fresh socket path (os.posix_spawn, timed from just before the call),
connects to the path in a tight loop until a connect succeeds ("accept": the listening socket exists; brisk
publishes the path only once it listens), then sends GET / and waits for the status line ("answer": the HTTP
helper and brisk's loop both serve); then SIGTERM and a wait. The binaries take turns, in an order that
alternates from round to round (interleaved runs: a change of the host's load hits each alike); prints each
binary's medians, min and max in ms. docs/performance.md "The API socket ready" has the numbers.
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import tempfile
import time


def one(brisk, d):
    sock = os.path.join(d, "api.sock")
    devnull = os.open(os.devnull, os.O_RDWR)
    t0 = time.perf_counter()
    pid = os.posix_spawn(brisk, [brisk, "--api-sock", sock], os.environ,
                         file_actions=[(os.POSIX_SPAWN_DUP2, devnull, 0), (os.POSIX_SPAWN_DUP2, devnull, 1),
                                       (os.POSIX_SPAWN_DUP2, devnull, 2)])
    s = socket.socket(socket.AF_UNIX)
    try:
        while True:
            try:
                s.connect(sock)
                break
            except (FileNotFoundError, ConnectionRefusedError):
                if time.perf_counter() - t0 > 10:
                    raise RuntimeError(f"{brisk}: no socket after 10 s")
        accepted = time.perf_counter() - t0
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        if not s.recv(16).startswith(b"HTTP/1.1 200"):
            raise RuntimeError(f"{brisk}: GET / not answered 200")
        answered = time.perf_counter() - t0
    finally:
        s.close()
        os.kill(pid, signal.SIGTERM)
        os.waitpid(pid, 0)
        os.close(devnull)
    return accepted * 1000, answered * 1000


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=25)
    ap.add_argument("brisk", nargs="+")
    a = ap.parse_args()
    times = {b: [] for b in a.brisk}
    d = tempfile.mkdtemp(prefix="bar", dir="/tmp")
    try:
        for i in range(a.runs):
            for b in (a.brisk if i % 2 == 0 else a.brisk[::-1]):
                times[b].append(one(os.path.abspath(b), d))
    finally:
        shutil.rmtree(d, ignore_errors=True)
    for b, t in times.items():
        acc, ans = [x[0] for x in t], [x[1] for x in t]
        print(f"{b}: accept median {statistics.median(acc):.2f} ms (min {min(acc):.2f}, max {max(acc):.2f}); "
              f"answer median {statistics.median(ans):.2f} ms (min {min(ans):.2f}, max {max(ans):.2f}); "
              f"{len(t)} runs")


if __name__ == "__main__":
    main()
