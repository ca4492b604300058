#!/usr/bin/env python3
"""A userfaultfd page-fault handler written to Firecracker v1.7.0's format, for brisk's tests.

It follows Firecracker's example handlers (src/firecracker/examples/uffd/uffd_utils.rs,
valid_handler.rs): bind and listen on a Unix socket, accept one connection, receive one message
holding the JSON array of GuestRegionUffdMapping
(`[{"base_host_virt_addr":N,"size":N,"offset":N,"page_size_kib":4}]`, serde's field order) with the
userfaultfd as SCM_RIGHTS, check that the regions add up to the memory file's size, then serve each
page fault by UFFDIO_COPY from the memory file mapped privately, and track UFFD_EVENT_REMOVE (a
balloon's madvise(MADV_DONTNEED)) so that a removed page is served as zeros afterwards.

Usage: uffd_handler.py SOCKET MEMFILE [--mode MODE] [--stats FILE] [--chunk PAGES]

Modes (the hostile ones are docs/security.md cases 80-82):
  valid      serve faults as above (the default)
  fault_all  on the first fault copy every region whole (Firecracker's fault_all_handler)
  close      accept, wait for brisk's message and close the connection without reading it
  noaccept   listen, never accept
  exit       receive the message, then exit (the handler "crashes")
  silent     receive the message and never serve a fault (stays alive)
  zero       serve every fault with zero pages (UFFDIO_ZEROPAGE)
  reply      write junk back on the socket, then serve as valid
SIGUSR1 stops serving (the handler stays alive, reading nothing), a second SIGUSR1 resumes it.
--stats FILE is rewritten with one JSON object (message, faults, pages copied, removes) after each
event, for the tests to read. The handler exits when brisk's process is gone (a pidfd of the peer that
SO_PEERCRED names, as Firecracker's documentation recommends).
"""

import argparse
import array
import ctypes
import fcntl
import json
import mmap
import os
import select
import signal
import socket
import struct
import sys
import time

UFFDIO_COPY = 0xC028AA03  # _IOWR(0xAA, 0x03, struct uffdio_copy): dst, src, len, mode, copy
UFFDIO_ZEROPAGE = 0xC020AA04  # _IOWR(0xAA, 0x04, struct uffdio_zeropage): start, len, mode, zeropage
UFFD_EVENT_PAGEFAULT = 0x12
UFFD_EVENT_REMOVE = 0x15
UFFD_MSG_SIZE = 32
PAGE = 4096
KEYS = ["base_host_virt_addr", "size", "offset", "page_size_kib"]


class Handler:
    def __init__(self, uffd, regions, backing, backing_addr, page_size, mode, chunk, stats_path, raw):
        self.uffd = uffd
        self.regions = regions
        self.backing = backing
        self.backing_addr = backing_addr
        self.page = page_size
        self.mode = mode
        self.chunk = chunk
        self.stats_path = stats_path
        self.removed = set()
        self.stalled = False  # SIGUSR1 toggles it
        self.stats = {"message": raw, "regions": regions, "faults": 0, "copied_pages": 0,
                      "zero_pages": 0, "removes": 0, "eexist": 0}
        self.write_stats()

    def write_stats(self):
        if not self.stats_path:
            return
        tmp = self.stats_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.stats, f)
        os.replace(tmp, self.stats_path)

    def region_of(self, addr):
        for r in self.regions:
            base = r["base_host_virt_addr"]
            if base <= addr < base + r["size"]:
                return r
        raise SystemExit("uffd_handler: fault at 0x%x outside every region" % addr)

    def copy(self, dst, src, length):
        buf = bytearray(struct.pack("QQQQq", dst, src, length, 0, 0))
        try:
            fcntl.ioctl(self.uffd, UFFDIO_COPY, buf, True)
        except OSError as e:
            if e.errno == 17:  # EEXIST: part of the range is there (served, or written by brisk)
                self.stats["eexist"] += 1
                return struct.unpack("QQQQq", buf)[4]
            if e.errno == 11:  # EAGAIN: the mapping changed under us; the fault is retried
                return 0
            raise
        return struct.unpack("QQQQq", buf)[4]

    def zero(self, dst, length):
        buf = bytearray(struct.pack("QQQq", dst, length, 0, 0))
        try:
            fcntl.ioctl(self.uffd, UFFDIO_ZEROPAGE, buf, True)
        except OSError as e:
            if e.errno not in (17, 11):
                raise
        self.stats["zero_pages"] += length // self.page

    def serve(self, addr):
        page = addr & ~(self.page - 1)
        r = self.region_of(page)
        self.stats["faults"] += 1
        if self.mode == "zero" or page in self.removed:
            self.zero(page, self.page)
            return
        if self.mode == "fault_all":
            for reg in self.regions:
                src = self.backing_addr + reg["offset"]
                n = self.copy(reg["base_host_virt_addr"], src, reg["size"])
                if n < reg["size"]:  # EEXIST part way: the rest page by page
                    for off in range(0, reg["size"], self.page):
                        self.copy(reg["base_host_virt_addr"] + off, src + off, self.page)
                self.stats["copied_pages"] += reg["size"] // self.page
            return
        base = r["base_host_virt_addr"]
        end = base + r["size"]
        # `chunk` pages aligned around the fault (1: Firecracker's valid handler), never a removed one.
        start = max(base, page - (page - base) % (self.chunk * self.page))
        stop = min(end, start + self.chunk * self.page)
        if any(p in self.removed for p in range(start, stop, self.page)):
            start, stop = page, page + self.page
        n = self.copy(start, self.backing_addr + r["offset"] + (start - base), stop - start)
        if n < stop - start:
            self.copy(page, self.backing_addr + r["offset"] + (page - base), self.page)
        self.stats["copied_pages"] += max(n, self.page) // self.page

    def run(self, peer_pidfd=-1):
        p = select.poll()
        p.register(self.uffd, select.POLLIN)
        if peer_pidfd >= 0:  # Firecracker's documented way to notice the VMM is gone: its pid (SO_PEERCRED)
            p.register(peer_pidfd, select.POLLIN)
        signal.signal(signal.SIGUSR1, lambda *_: setattr(self, "stalled", not self.stalled))
        while True:
            if self.stalled:  # serving nothing, only watching for brisk's end
                if peer_pidfd >= 0 and select.select([peer_pidfd], [], [], 0.05)[0]:
                    return
                time.sleep(0.05)
                continue
            for fd, ev in p.poll(100):
                if fd == peer_pidfd or ev & (select.POLLHUP | select.POLLERR):
                    return
                if self.mode == "silent":
                    time.sleep(3600)
                try:
                    msg = os.read(self.uffd, UFFD_MSG_SIZE)
                except BlockingIOError:
                    continue
                if len(msg) < UFFD_MSG_SIZE:
                    continue
                event = msg[0]
                a, b = struct.unpack_from("QQ", msg, 8)
                if event == UFFD_EVENT_PAGEFAULT:
                    self.serve(b)
                elif event == UFFD_EVENT_REMOVE:
                    self.stats["removes"] += 1
                    for pg in range(a, b, self.page):
                        self.removed.add(pg)
                else:
                    raise SystemExit("uffd_handler: unexpected event 0x%x" % event)
                self.write_stats()


def receive(conn):
    """One message and one fd, as Firecracker's recv_with_fd into a 1024-byte buffer."""
    fds = array.array("i")
    msg, anc, _, _ = conn.recvmsg(1024, socket.CMSG_SPACE(4 * fds.itemsize))
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    if len(fds) != 1:
        raise SystemExit("uffd_handler: expected exactly one fd, got %d" % len(fds))
    return msg.decode(), fds[0]


def parse(raw, memsize):
    """Firecracker's checks (uffd_utils.rs from_unix_stream), and its exact key order."""
    regions = json.loads(raw)
    if not isinstance(regions, list) or not regions:
        raise SystemExit("uffd_handler: the message is not a non-empty JSON array: %r" % raw)
    for r in regions:
        if list(r.keys()) != KEYS or not all(isinstance(r[k], int) for k in KEYS):
            raise SystemExit("uffd_handler: region %r is not a GuestRegionUffdMapping" % r)
    total = sum(r["size"] for r in regions)
    page_kib = regions[0]["page_size_kib"]
    if total != memsize:
        raise SystemExit("uffd_handler: regions add up to %d bytes, the memory file has %d" % (total, memsize))
    if page_kib & (page_kib - 1):
        raise SystemExit("uffd_handler: page_size_kib %d is not a power of two" % page_kib)
    return regions, page_kib * 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("memfile")
    ap.add_argument("--mode", default="valid",
                    choices=["valid", "fault_all", "close", "noaccept", "exit", "silent", "zero", "reply"])
    ap.add_argument("--stats")
    ap.add_argument("--chunk", type=int, default=1)
    args = ap.parse_args()

    fd = os.open(args.memfile, os.O_RDONLY)
    size = os.fstat(fd).st_size
    # Private and writable so that ctypes can take its address; never written.
    backing = mmap.mmap(fd, size, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
    backing_addr = ctypes.addressof(ctypes.c_char.from_buffer(backing))

    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(args.socket)
    srv.listen(1)
    print("uffd_handler: listening on %s (mode %s)" % (args.socket, args.mode), flush=True)
    if args.mode == "noaccept":
        time.sleep(3600)
        return 0
    conn, _ = srv.accept()
    if args.mode == "close":
        # Once brisk's message is there (so that its send succeeded, not raced an EPIPE), closed unread.
        select.select([conn], [], [], 30)
        conn.close()
        time.sleep(3600)
        return 0
    raw, uffd = receive(conn)
    regions, page = parse(raw, size)
    print("uffd_handler: got %s" % raw, flush=True)
    if args.mode == "exit":
        return 3
    if args.mode == "reply":
        try:
            conn.sendall(b'{"this": "is not what brisk expects"}\n' * 64)
        except OSError:
            pass
    pid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))[0]
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        pidfd = -1
    h = Handler(uffd, regions, backing, backing_addr, page, args.mode, max(1, args.chunk), args.stats, raw)
    h.run(pidfd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
