/*
 * test_virtio_vsock.c - virtio-vsock's pure parts: the transmit packet parser on well-formed, split and
 * malformed chains (docs/security.md case 11), the credit arithmetic at its boundaries and across the 2^32
 * wrap (virtio 1.2 section 5.10.6.3), the hybrid "CONNECT <port>" line, --vsock's parsing and
 * validation; and the device behind the virtio-mmio transport and a real event loop (no KVM), driven as a
 * guest driver against real AF_UNIX peers: both directions, device reset and transport reset.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "brisk/bus.h"
#include "brisk/config.h"
#include "brisk/devmgr.h"
#include "brisk/evloop.h"
#include "brisk/layout.h"
#include "brisk/mem.h"
#include "brisk/virtio.h"
#include "brisk/virtio_vsock.h"
#include "fake_vm.h"
#include "virtio_driver.h"

#define CID 42u

static uint8_t pktbuf[2][VSOCK_HDR_SIZE + 128];
static struct virtq_seg segs[4];

static struct virtio_vsock_hdr good(void)
{
	return (struct virtio_vsock_hdr){.src_cid = CID,
					 .dst_cid = VSOCK_HOST_CID,
					 .src_port = 1000,
					 .dst_port = 5000,
					 .len = 16,
					 .type = VSOCK_TYPE_STREAM,
					 .op = VSOCK_OP_RW,
					 .buf_alloc = 4096};
}

/* A chain of the header h plus `data` bytes, cut into readable segments at `cut` (0: one segment). */
static struct virtq_chain chain(const struct virtio_vsock_hdr *h, uint32_t data, uint32_t cut)
{
	struct virtq_chain c = {.seg = segs};
	uint32_t total = VSOCK_HDR_SIZE + data;

	memcpy(pktbuf[0], h, VSOCK_HDR_SIZE);
	memset(pktbuf[0] + VSOCK_HDR_SIZE, 0x5a, data);
	if (cut && cut < total) {
		memcpy(pktbuf[1], pktbuf[0] + cut, total - cut);
		segs[0] = (struct virtq_seg){pktbuf[0], cut};
		segs[1] = (struct virtq_seg){pktbuf[1], total - cut};
		c.nr_out = 2;
	} else {
		segs[0] = (struct virtq_seg){pktbuf[0], total};
		c.nr_out = 1;
	}
	c.out_bytes = total;
	return c;
}

static enum vsock_fault parse(const struct virtio_vsock_hdr *h, uint32_t data, uint32_t cut,
			      struct virtio_vsock_hdr *out)
{
	struct virtq_chain c = chain(h, data, cut);

	return vsock_parse(&c, CID, out);
}

static void test_parse_good(void **state)
{
	struct virtio_vsock_hdr h = good(), out;

	(void)state;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_OK);
	assert_memory_equal(&out, &h, VSOCK_HDR_SIZE);
	/* a header spread over two buffers (2.7.4: no framing assumed), at every cut */
	for (uint32_t cut = 1; cut < VSOCK_HDR_SIZE + 16; cut++) {
		assert_int_equal(parse(&h, 16, cut, &out), VSOCK_OK);
		assert_memory_equal(&out, &h, VSOCK_HDR_SIZE);
	}
	/* len 0 with a header alone; len smaller than what the chain carries */
	h.len = 0;
	assert_int_equal(parse(&h, 0, 0, &out), VSOCK_OK);
	assert_int_equal(parse(&h, 100, 0, &out), VSOCK_OK);
	/* every op */
	for (uint16_t op = VSOCK_OP_REQUEST; op <= VSOCK_OP_CREDIT_REQUEST; op++) {
		h.op = op;
		assert_int_equal(parse(&h, 0, 0, &out), VSOCK_OK);
	}
}

static void test_parse_malformed(void **state)
{
	struct virtio_vsock_hdr h = good(), out;
	struct virtq_chain c;

	(void)state;
	/* shorter than the header: nothing read */
	c = chain(&h, 0, 0);
	c.out_bytes = segs[0].len = VSOCK_HDR_SIZE - 1;
	assert_int_equal(vsock_parse(&c, CID, &out), VSOCK_SHORT);
	c.nr_out = 0;
	c.out_bytes = 0;
	assert_int_equal(vsock_parse(&c, CID, &out), VSOCK_SHORT);
	/* a writable buffer on the transmit queue */
	c = chain(&h, 16, 0);
	c.nr_in = 1;
	c.in_bytes = 8;
	segs[1] = (struct virtq_seg){pktbuf[1], 8};
	assert_int_equal(vsock_parse(&c, CID, &out), VSOCK_BAD_CHAIN);
	/* len: above 64 KiB, past the data (by one), with the header filled for the caller's RST */
	h.len = VSOCK_MAX_PKT + 1;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_LEN_TOO_BIG);
	assert_int_equal(out.src_port, 1000);
	assert_int_equal(out.dst_port, 5000);
	h.len = 0xffffffffu;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_LEN_TOO_BIG);
	h.len = 17;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_LEN_PAST_DATA);
	assert_int_equal(parse(&h, 16, 30, &out), VSOCK_LEN_PAST_DATA);
	h.len = 16;
	/* addresses */
	h.src_cid = CID + 1;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_BAD_SRC_CID);
	h.src_cid = CID | (1ull << 32); /* the reserved upper half */
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_BAD_SRC_CID);
	h.src_cid = CID;
	h.dst_cid = 3;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_BAD_DST_CID);
	h.dst_cid = VSOCK_HOST_CID;
	/* type and op */
	h.type = VSOCK_TYPE_SEQPACKET;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_BAD_TYPE);
	h.type = 0;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_BAD_TYPE);
	h.type = VSOCK_TYPE_STREAM;
	h.op = 0;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_BAD_OP);
	h.op = 8;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_BAD_OP);
	h.op = 0xffff;
	assert_int_equal(parse(&h, 16, 0, &out), VSOCK_BAD_OP);
	for (int f = 0; f <= VSOCK_FAULT__COUNT; f++)
		assert_non_null(vsock_fault_name((enum vsock_fault)f));
}

static void test_credit(void **state)
{
	(void)state;
	assert_int_equal(vsock_credit(VSOCK_BUF_ALLOC, 0, 0), VSOCK_BUF_ALLOC);
	assert_int_equal(vsock_credit(VSOCK_BUF_ALLOC, 0, VSOCK_BUF_ALLOC), 0);
	assert_int_equal(vsock_credit(VSOCK_BUF_ALLOC, 0, VSOCK_BUF_ALLOC - 1), 1);
	assert_int_equal(vsock_credit(VSOCK_BUF_ALLOC, 100, 100), VSOCK_BUF_ALLOC);
	assert_int_equal(vsock_credit(0, 0, 0), 0);
	/* across the 2^32 wrap of the counters */
	assert_int_equal(vsock_credit(4096, 0xfffffff0u, 0x10u), 4096 - 0x20);
	assert_int_equal(vsock_credit(4096, 0xfffff800u, 0x800u), 0);
	/* numbers that do not add up: in flight above buf_alloc, fwd_cnt ahead of what was sent */
	assert_int_equal(vsock_credit(4096, 0, 5000), 0);
	assert_int_equal(vsock_credit(4096, 10, 5), 0);
	/* the receiver's side */
	assert_true(vsock_credit_allows(4096, 0, 0, 4096));
	assert_false(vsock_credit_allows(4096, 0, 0, 4097));
	assert_true(vsock_credit_allows(4096, 1000, 5000, 96));
	assert_false(vsock_credit_allows(4096, 1000, 5000, 97));
	assert_true(vsock_credit_allows(4096, 0xffffff00u, 0x100u, 4096 - 0x200));
	assert_false(vsock_credit_allows(4096, 0xffffff00u, 0x100u, 4096 - 0x1ff));
	assert_true(vsock_credit_allows(4096, 0, 4096, 0));
}

static void test_connect_line(void **state)
{
	static const char *const bad[] = {
	    "",		  "CONNECT",	   "CONNECT ",	 "connect 1",	 "CONNECT -1", "CONNECT 4294967296",
	    "CONNECT 1 ", "CONNECT 1\r\r", " CONNECT 1", "CONNECT 0x10", "CONNECT  1", "CONNECT 99999999999999999999",
	    "CONNECTX 1", "OK 1"};
	uint32_t port;

	(void)state;
	assert_int_equal(vsock_parse_connect("CONNECT 0", 9, &port), 0);
	assert_int_equal(port, 0);
	assert_int_equal(vsock_parse_connect("CONNECT 52", 10, &port), 0);
	assert_int_equal(port, 52);
	assert_int_equal(vsock_parse_connect("CONNECT 4294967295", 18, &port), 0);
	assert_int_equal(port, 4294967295u);
	assert_int_equal(vsock_parse_connect("CONNECT 7\r", 10, &port), 0);
	assert_int_equal(port, 7);
	assert_int_equal(vsock_parse_connect("CONNECT 0007", 12, &port), 0);
	assert_int_equal(port, 7);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(vsock_parse_connect(bad[i], strlen(bad[i]), &port), -1);
	/* the length given is what counts, not a NUL */
	assert_int_equal(vsock_parse_connect("CONNECT 12345", 9, &port), 0);
	assert_int_equal(port, 1);
}

static int parse_opt(struct vm_config *c, const char *s, char *err)
{
	return config_parse_vsock(s, c, err, 256);
}

/* config_move_vsock: a restore's device onto another socket; none to move, or a path that cannot be one, refused. */
static void test_move(void **state)
{
	char path[VM_VSOCK_UDS_MAX + 2];
	struct vm_config c;

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_move_vsock(&c, "/tmp/m.sock"), -ENODEV);
	assert_string_equal(c.vsock.uds, "");
	snprintf(c.vsock.uds, sizeof(c.vsock.uds), "/tmp/v.sock");
	assert_int_equal(config_move_vsock(&c, ""), -EINVAL);
	memset(path, 'a', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0'; /* VM_VSOCK_UDS_MAX + 1 bytes */
	assert_int_equal(config_move_vsock(&c, path), -EINVAL);
	assert_string_equal(c.vsock.uds, "/tmp/v.sock");
	path[VM_VSOCK_UDS_MAX] = '\0';
	assert_int_equal(config_move_vsock(&c, path), 0);
	assert_string_equal(c.vsock.uds, path);
}

static void test_option(void **state)
{
	struct vm_config c;
	char err[256], path[VM_VSOCK_UDS_MAX + 16];

	(void)state;
	config_defaults(&c);
	assert_int_equal(c.vsock.cid, 0);
	assert_int_equal(parse_opt(&c, "cid=3,uds=/tmp/v.sock", err), 0);
	assert_int_equal(c.vsock.cid, 3);
	assert_string_equal(c.vsock.uds, "/tmp/v.sock");
	assert_int_equal(parse_opt(&c, "uds=/tmp/w.sock,cid=4", err), -EINVAL); /* once */
	assert_non_null(strstr(err, "only one"));
	config_defaults(&c);
	assert_int_equal(parse_opt(&c, "uds=/tmp/w.sock,cid=4294967294", err), 0);
	assert_int_equal(c.vsock.cid, 4294967294u);

	static const char *const bad[] = {"cid=2,uds=/tmp/x",
					  "cid=0,uds=/tmp/x",
					  "cid=4294967295,uds=/tmp/x",
					  "cid=-3,uds=/tmp/x",
					  "cid=3",
					  "uds=/tmp/x",
					  "cid=3,uds=",
					  "cid=3,uds=/tmp/x,",
					  "cid=3,,uds=/tmp/x",
					  "cid=3,uds=/a,uds=/b",
					  "cid=3,cid=3,uds=/tmp/x",
					  "cid=3,uds=/tmp/x,ro",
					  "",
					  "cid=99999999999999999999,uds=/x"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		config_defaults(&c);
		err[0] = '\0';
		assert_int_equal(parse_opt(&c, bad[i], err), -EINVAL);
		assert_true(err[0] != '\0');
		assert_int_equal(c.vsock.cid, 0); /* nothing half-set */
	}
	/* the path's length: PATH_<port> must fit a socket address */
	memset(path, 0, sizeof(path));
	memcpy(path, "cid=3,uds=/", 11);
	memset(path + 11, 'a', VM_VSOCK_UDS_MAX - 1);
	config_defaults(&c);
	assert_int_equal(parse_opt(&c, path, err), 0);
	assert_int_equal(strlen(c.vsock.uds), VM_VSOCK_UDS_MAX);
	path[11 + VM_VSOCK_UDS_MAX - 1] = 'a';
	config_defaults(&c);
	assert_int_equal(parse_opt(&c, path, err), -EINVAL);
	assert_non_null(strstr(err, "at most"));
	_Static_assert(VM_VSOCK_UDS_MAX + VSOCK_PORT_SUFFIX_MAX < 108, "PATH_<port> fits sun_path");
}

static void test_validate(void **state)
{
	struct vm_config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_parse_vsock("cid=3,uds=/tmp/v.sock", &c, err, sizeof(err)), 0);
	assert_int_equal(config_validate(&c, 2, 1ULL << 34, err, sizeof(err)), 0);
	config_defaults(&c);
	assert_int_equal(config_parse_vsock("cid=3,uds=v.sock", &c, err, sizeof(err)), 0); /* relative: the cwd */
	assert_int_equal(config_validate(&c, 2, 1ULL << 34, err, sizeof(err)), 0);
	config_defaults(&c);
	assert_int_equal(config_parse_vsock("cid=3,uds=/nonexistent-brisk-dir/v.sock", &c, err, sizeof(err)), 0);
	assert_int_equal(config_validate(&c, 2, 1ULL << 34, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--vsock"));
	assert_non_null(strstr(err, "directory"));
	config_defaults(&c);
	assert_int_equal(config_parse_vsock("cid=3,uds=/tmp/", &c, err, sizeof(err)), 0);
	assert_int_equal(config_validate(&c, 2, 1ULL << 34, err, sizeof(err)), -EINVAL);
	/* it takes a virtio window */
	config_defaults(&c);
	assert_int_equal(config_parse_vsock("cid=3,uds=/tmp/v.sock", &c, err, sizeof(err)), 0);
	c.nr_disks = LAYOUT_VIRTIO_WINDOWS - 2;
	c.rng_rate = 1;
	c.console = CONSOLE_VIRTIO;
	assert_int_equal(config_validate(&c, 2, 1ULL << 34, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--vsock"));
	c.console = CONSOLE_SERIAL;
	assert_int_equal(config_validate(&c, 2, 1ULL << 34, err, sizeof(err)), 0);
}

/* ---- the device, driven as a guest driver (fake guest RAM, no KVM) ------------------------------------------ */

#define BUFS	0x400000 /* rx buffers 4 KiB per slot; tx buffers from BUFS + 0x10000 */
#define DEV_CID 7u
#define RXLEN	4096u

static struct {
	struct vdrv drv;
	struct virtio_vsock *dev;
	char dir[64], path[96];
} fx;

static void bring_up(void)
{
	vdrv_bring_up(&fx.drv, 0, 3);
}

/* Transmits one packet: header and `len` bytes of data in one buffer. */
static void send_pkt(uint16_t op, uint32_t src_port, uint32_t dst_port, const void *data, uint32_t len)
{
	uint64_t buf = BUFS + 0x10000 + vdrv_next_head(&fx.drv, VSOCK_TX_Q) * 0x1000;
	struct virtio_vsock_hdr h = {.src_cid = DEV_CID,
				     .dst_cid = VSOCK_HOST_CID,
				     .src_port = src_port,
				     .dst_port = dst_port,
				     .len = len,
				     .type = VSOCK_TYPE_STREAM,
				     .op = op,
				     .buf_alloc = 65536};
	uint8_t *p = vdrv_gpa(&fx.drv, buf, VSOCK_HDR_SIZE + len);

	memcpy(p, &h, VSOCK_HDR_SIZE);
	if (len)
		memcpy(p + VSOCK_HDR_SIZE, data, len);
	vdrv_post(&fx.drv, VSOCK_TX_Q, buf, VSOCK_HDR_SIZE + len, 0);
	assert_int_equal(vdrv_wait_used(&fx.drv, VSOCK_TX_Q, 2000, NULL), 0);
}

/* Posts a receive buffer and returns the packet the device put in it (header in *h, data into data). */
static int64_t recv_pkt(struct virtio_vsock_hdr *h, void *data, int ms)
{
	uint64_t buf = BUFS + vdrv_next_head(&fx.drv, VSOCK_RX_Q) * 0x1000;
	int64_t n;

	memset(vdrv_gpa(&fx.drv, buf, RXLEN), 0, RXLEN);
	vdrv_post(&fx.drv, VSOCK_RX_Q, buf, RXLEN, VIRTQ_DESC_F_WRITE);
	n = vdrv_wait_used(&fx.drv, VSOCK_RX_Q, ms, NULL);
	if (n >= (int64_t)VSOCK_HDR_SIZE) {
		memcpy(h, vdrv_gpa(&fx.drv, buf, VSOCK_HDR_SIZE), VSOCK_HDR_SIZE);
		if (data)
			memcpy(data, vdrv_gpa(&fx.drv, buf + VSOCK_HDR_SIZE, (uint64_t)n - VSOCK_HDR_SIZE),
			       (size_t)n - VSOCK_HDR_SIZE);
	}
	return n;
}

static int unix_listen(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	return fd;
}

static int unix_connect(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct timeval tv = {.tv_sec = 2};

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return fd;
}

/* The device, listening on fx.path, or (`later`) on nothing yet: started only then (a clone's order). */
static int dev_open(bool later)
{
	struct devctx ctx = {.ops = &fake_ops};
	const struct devmgr_window *slot;
	char err[256];

	memset(&fx, 0, sizeof(fx));
	snprintf(fx.dir, sizeof(fx.dir), "/tmp/brisk-vsock-XXXXXX");
	assert_non_null(mkdtemp(fx.dir));
	snprintf(fx.path, sizeof(fx.path), "%s/v.sock", fx.dir);
	slot = vdrv_open(&fx.drv, "virtio-vsock", &ctx);
	assert_int_equal(
	    virtio_vsock_create(&ctx, &fx.drv.bus, slot, DEV_CID, later ? NULL : fx.path, err, sizeof(err), &fx.dev),
	    0);
	if (!later)
		vdrv_start(&fx.drv);
	return 0;
}

static int dev_setup(void **state)
{
	(void)state;
	return dev_open(false);
}

static int dev_setup_later(void **state)
{
	(void)state;
	return dev_open(true);
}

static int dev_teardown(void **state)
{
	char p[128];

	(void)state;
	vdrv_close(&fx.drv);
	assert_int_equal(access(fx.path, F_OK), -1); /* the listening socket went with the device */
	snprintf(p, sizeof(p), "%s_5000", fx.dir);
	unlink(p);
	snprintf(p, sizeof(p), "%s/v.sock_5000", fx.dir);
	unlink(p);
	rmdir(fx.dir);
	return 0;
}

/* Device ID 19, stream only, guest_cid in the config space, three queues. */
static void test_dev_identity(void **state)
{
	uint32_t lo, hi;

	(void)state;
	assert_int_equal(vdrv_rd(&fx.drv, 0x008), VIRTIO_ID_VSOCK);
	vdrv_wr(&fx.drv, 0x014, 0);
	/* device bits (0..23): STREAM only, no SEQPACKET (bit 1) */
	assert_int_equal(vdrv_rd(&fx.drv, 0x010) & 0xffffffu, 1u << VIRTIO_VSOCK_F_STREAM);
	lo = vdrv_rd(&fx.drv, 0x100);
	hi = vdrv_rd(&fx.drv, 0x104);
	assert_int_equal(lo, DEV_CID);
	assert_int_equal(hi, 0);
	vdrv_wr(&fx.drv, 0x030, 2);
	assert_int_equal(vdrv_rd(&fx.drv, 0x034), VSOCK_QUEUE_SIZE);
	vdrv_wr(&fx.drv, 0x030, 3);
	assert_int_equal(vdrv_rd(&fx.drv, 0x034), 0);
}

/* A guest connection bridged both ways to PATH_5000; its RST closes the host side. */
static void test_dev_guest_to_host(void **state)
{
	struct virtio_vsock_hdr h;
	char p[128], data[RXLEN];
	int lfd, c;

	(void)state;
	snprintf(p, sizeof(p), "%s_5000", fx.path);
	lfd = unix_listen(p);
	bring_up();
	send_pkt(VSOCK_OP_REQUEST, 1000, 5000, NULL, 0);
	assert_int_equal(recv_pkt(&h, NULL, 2000), VSOCK_HDR_SIZE);
	assert_int_equal(h.op, VSOCK_OP_RESPONSE);
	assert_int_equal(h.src_port, 5000);
	assert_int_equal(h.dst_port, 1000);
	assert_int_equal(h.dst_cid, DEV_CID);
	assert_int_equal(h.buf_alloc, VSOCK_BUF_ALLOC);
	c = accept(lfd, NULL, NULL);
	assert_true(c >= 0);
	send_pkt(VSOCK_OP_RW, 1000, 5000, "hello", 5);
	assert_int_equal(recv(c, data, sizeof(data), 0), 5);
	assert_memory_equal(data, "hello", 5);
	assert_int_equal(send(c, "world!", 6, 0), 6);
	assert_int_equal(recv_pkt(&h, data, 2000), VSOCK_HDR_SIZE + 6);
	assert_int_equal(h.op, VSOCK_OP_RW);
	assert_int_equal(h.len, 6);
	assert_memory_equal(data, "world!", 6);
	/* a port nobody listens on: RST */
	send_pkt(VSOCK_OP_REQUEST, 1001, 5001, NULL, 0);
	assert_int_equal(recv_pkt(&h, NULL, 2000), VSOCK_HDR_SIZE);
	assert_int_equal(h.op, VSOCK_OP_RST);
	assert_int_equal(h.dst_port, 1001);
	/* the guest resets: the host sees EOF */
	send_pkt(VSOCK_OP_RST, 1000, 5000, NULL, 0);
	assert_int_equal(recv(c, data, sizeof(data), 0), 0);
	close(c);
	close(lfd);
	unlink(p);
}

/* A host client's CONNECT becomes a REQUEST; the guest's RESPONSE becomes "OK <port>". A device reset closes it. */
static void test_dev_host_to_guest_and_reset(void **state)
{
	struct virtio_vsock_hdr h;
	char line[32] = {0};
	int c;

	(void)state;
	bring_up();
	c = unix_connect(fx.path);
	assert_int_equal(send(c, "CONNECT 77\n", 11, 0), 11);
	assert_int_equal(recv_pkt(&h, NULL, 2000), VSOCK_HDR_SIZE);
	assert_int_equal(h.op, VSOCK_OP_REQUEST);
	assert_int_equal(h.dst_port, 77);
	assert_true(h.src_port >= 1u << 30);
	send_pkt(VSOCK_OP_RESPONSE, 77, h.src_port, NULL, 0);
	assert_true(recv(c, line, sizeof(line) - 1, 0) > 0);
	assert_int_equal(strtoul(line + 3, NULL, 10), h.src_port);
	assert_memory_equal(line, "OK ", 3);
	vdrv_wr(&fx.drv, 0x070, 0); /* device reset: the driver's connections are gone */
	assert_int_equal(recv(c, line, sizeof(line), 0), 0);
	close(c);
}

/*
 * A device created without a socket (a clone server's clone) listens where virtio_vsock_listen says, with
 * virtio_vsock_create's refusals (each leaving it without a listener), once: the host's CONNECT and the guest's
 * PATH_P both go by the new path.
 */
static void test_dev_listen_later(void **state)
{
	char other[128], p[128], err[256], line[32] = {0};
	struct virtio_vsock_hdr h;
	int fd, busy, lfd, c;

	(void)state;
	assert_int_equal(access(fx.path, F_OK), -1); /* nothing made at creation */
	snprintf(other, sizeof(other), "%s/file", fx.dir);
	fd = open(other, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(virtio_vsock_listen(fx.dev, other, err, sizeof(err)), -EEXIST);
	assert_non_null(strstr(err, "exists and is not a socket"));
	unlink(other);
	snprintf(other, sizeof(other), "%s/busy.sock", fx.dir);
	busy = unix_listen(other);
	assert_int_equal(virtio_vsock_listen(fx.dev, other, err, sizeof(err)), -EADDRINUSE);
	close(busy);
	unlink(other);
	memset(p, 'a', sizeof(p) - 1);
	p[0] = '/';
	p[sizeof(p) - 1] = '\0';
	assert_int_equal(virtio_vsock_listen(fx.dev, p, err, sizeof(err)), -EINVAL); /* PATH_P would not fit */
	assert_int_equal(virtio_vsock_listen(fx.dev, fx.path, err, sizeof(err)), 0);
	assert_int_equal(virtio_vsock_listen(fx.dev, other, err, sizeof(err)), -EBUSY);
	assert_int_equal(access(other, F_OK), -1);
	vdrv_start(&fx.drv);
	bring_up();
	c = unix_connect(fx.path);
	assert_int_equal(send(c, "CONNECT 77\n", 11, 0), 11);
	assert_int_equal(recv_pkt(&h, NULL, 2000), VSOCK_HDR_SIZE);
	assert_int_equal(h.op, VSOCK_OP_REQUEST);
	send_pkt(VSOCK_OP_RESPONSE, 77, h.src_port, NULL, 0);
	assert_true(recv(c, line, sizeof(line) - 1, 0) > 0);
	assert_memory_equal(line, "OK ", 3);
	close(c);
	snprintf(p, sizeof(p), "%s_5000", fx.path);
	lfd = unix_listen(p);
	send_pkt(VSOCK_OP_REQUEST, 1000, 5000, NULL, 0);
	do /* the closed host client's SHUTDOWN may come first */
		assert_int_equal(recv_pkt(&h, NULL, 2000), VSOCK_HDR_SIZE);
	while (h.dst_port != 1000);
	assert_int_equal(h.op, VSOCK_OP_RESPONSE);
	c = accept(lfd, NULL, NULL);
	assert_true(c >= 0);
	close(c);
	close(lfd);
	unlink(p);
}

/* virtio_vsock_transport_reset: the event in the driver's buffer, every connection dropped. */
static void test_dev_transport_reset(void **state)
{
	struct virtio_vsock_hdr h;
	char p[128], b;
	uint32_t *ev;
	int lfd, c;

	(void)state;
	snprintf(p, sizeof(p), "%s_5000", fx.path);
	lfd = unix_listen(p);
	bring_up();
	ev = vdrv_gpa(&fx.drv, BUFS + 0x20000, 8);
	ev[0] = 0xffffffffu;
	vdrv_post(&fx.drv, VSOCK_EVT_Q, BUFS + 0x20000, 8, VIRTQ_DESC_F_WRITE);
	send_pkt(VSOCK_OP_REQUEST, 1000, 5000, NULL, 0);
	assert_int_equal(recv_pkt(&h, NULL, 2000), VSOCK_HDR_SIZE);
	assert_int_equal(h.op, VSOCK_OP_RESPONSE);
	c = accept(lfd, NULL, NULL);
	assert_true(c >= 0);
	setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){.tv_sec = 2}, sizeof(struct timeval));
	assert_int_equal(virtio_vsock_transport_reset(fx.dev), 0);
	assert_int_equal(vdrv_wait_used(&fx.drv, VSOCK_EVT_Q, 2000, NULL), 4);
	assert_int_equal(ev[0], VSOCK_EVENT_TRANSPORT_RESET);
	assert_int_equal(recv(c, &b, 1, 0), 0);
	close(c);
	close(lfd);
	unlink(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_parse_good),
	    cmocka_unit_test(test_parse_malformed),
	    cmocka_unit_test(test_credit),
	    cmocka_unit_test(test_connect_line),
	    cmocka_unit_test(test_option),
	    cmocka_unit_test(test_move),
	    cmocka_unit_test(test_validate),
	    cmocka_unit_test_setup_teardown(test_dev_identity, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_guest_to_host, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_host_to_guest_and_reset, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_transport_reset, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_listen_later, dev_setup_later, dev_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
