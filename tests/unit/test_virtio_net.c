/*
 * test_virtio_net.c - virtio-net: the transmit parser's header and frame checks at every boundary
 * (docs/security.md case 10: empty and oversized frames, offloads not negotiated, checksum offsets past the
 * frame, headers split over buffers); --net parsing (keys, MACs, CIDRs, hostfwd) with the derived MAC;
 * and the device behind the real transport and event loop (no KVM) on a socketpair backend: transmit,
 * drops, receive with and without MRG_RXBUF (a frame held over chains posted later), a chain too small,
 * frames waiting for buffers, back-pressure, the backend gone, reset with a frame half delivered.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "brisk/bus.h"
#include "brisk/config.h"
#include "brisk/devices.h"
#include "brisk/devmgr.h"
#include "brisk/evloop.h"
#include "brisk/log.h"
#include "brisk/mem.h"
#include "brisk/virtio.h"
#include "brisk/virtio_net.h"
#include "fake_vm.h"
#include "virtio_driver.h"

#define BIG (NET_GSO_FRAME_MAX + 64)

static uint8_t buf[BIG + NET_HDR_SIZE];
static struct virtq_seg segs[NET_MAX_SEGS + 2];
static struct net_tx tx; /* large: not on the stack */

static const struct net_limits plain = {.features = 0, .max_frame = NET_MTU + NET_L2_OVERHEAD};
static const struct net_limits csum = {.features = VIRTIO_NET_F_CSUM, .max_frame = NET_MTU + NET_L2_OVERHEAD};
static const struct net_limits tso = {.features = VIRTIO_NET_F_CSUM | VIRTIO_NET_F_HOST_TSO4,
				      .max_frame = NET_GSO_FRAME_MAX};

/* A chain of one readable buffer holding a header and `len` frame bytes (pattern i & 0xff). */
static struct virtq_chain chain1(const struct virtio_net_hdr *h, uint32_t len)
{
	memcpy(buf, h, NET_HDR_SIZE);
	for (uint32_t i = 0; i < len; i++)
		buf[NET_HDR_SIZE + i] = (uint8_t)i;
	segs[0] = (struct virtq_seg){.ptr = buf, .len = NET_HDR_SIZE + len};
	return (struct virtq_chain){.nr_out = 1, .out_bytes = NET_HDR_SIZE + len, .seg = segs};
}

static enum net_tx_result parse(const struct net_limits *l, const struct virtio_net_hdr *h, uint32_t len)
{
	struct virtq_chain c = chain1(h, len);

	return net_tx_parse(l, &c, &tx);
}

static void test_lengths(void **state)
{
	const struct virtio_net_hdr h = {0};

	(void)state;
	assert_int_equal(parse(&plain, &h, 60), NET_TX_OK);
	assert_int_equal(tx.len, 60);
	assert_int_equal(tx.niov, 1);
	assert_ptr_equal(tx.iov[0].iov_base, buf + NET_HDR_SIZE);
	assert_int_equal(parse(&plain, &h, 0), NET_TX_DROP); /* docs/security.md case 10: length 0 */
	assert_string_equal(tx.why, "a frame of length 0");
	assert_int_equal(parse(&plain, &h, NET_ETH_MIN - 1), NET_TX_DROP);
	assert_int_equal(parse(&plain, &h, NET_ETH_MIN), NET_TX_OK);
	assert_int_equal(parse(&plain, &h, NET_MTU + NET_L2_OVERHEAD), NET_TX_OK); /* the last byte allowed */
	assert_int_equal(parse(&plain, &h, NET_MTU + NET_L2_OVERHEAD + 1), NET_TX_DROP);
	assert_string_equal(tx.why, "a frame above the negotiated maximum");
	assert_int_equal(parse(&tso, &h, NET_GSO_FRAME_MAX), NET_TX_OK);
	assert_int_equal(parse(&tso, &h, NET_GSO_FRAME_MAX + 1), NET_TX_DROP);
}

static void test_short_header_and_writable(void **state)
{
	struct virtq_chain c = {.nr_out = 1, .out_bytes = NET_HDR_SIZE - 1, .seg = segs};

	(void)state;
	segs[0] = (struct virtq_seg){.ptr = buf, .len = NET_HDR_SIZE - 1};
	assert_int_equal(net_tx_parse(&plain, &c, &tx), NET_TX_DROP);
	c = (struct virtq_chain){.nr_out = 0, .out_bytes = 0, .seg = segs};
	assert_int_equal(net_tx_parse(&plain, &c, &tx), NET_TX_DROP); /* nothing at all */
	c = chain1(&(struct virtio_net_hdr){0}, 60);
	c.nr_in = 1;
	segs[1] = (struct virtq_seg){.ptr = buf + 200, .len = 10};
	c.in_bytes = 10;
	assert_int_equal(net_tx_parse(&plain, &c, &tx), NET_TX_DROP);
	assert_string_equal(tx.why, "a writable buffer on the transmit queue");
	c = chain1(&(struct virtio_net_hdr){0}, 60);
	c.nr_out = NET_MAX_SEGS + 1;
	assert_int_equal(net_tx_parse(&plain, &c, &tx), NET_TX_DROP);
}

/* The header over three buffers (5, 7 and 2 bytes, the last two frame bytes with it), the frame after. */
static void test_split_header(void **state)
{
	struct virtio_net_hdr h = {.csum_start = 7};
	struct virtq_chain c;

	(void)state;
	memcpy(buf, &h, NET_HDR_SIZE);
	memset(buf + NET_HDR_SIZE, 0xab, 100);
	segs[0] = (struct virtq_seg){.ptr = buf, .len = 5};
	segs[1] = (struct virtq_seg){.ptr = buf + 5, .len = 7};
	segs[2] = (struct virtq_seg){.ptr = buf + 12, .len = 2};
	segs[3] = (struct virtq_seg){.ptr = buf + 14, .len = 98};
	c = (struct virtq_chain){.nr_out = 4, .out_bytes = 112, .seg = segs};
	assert_int_equal(net_tx_parse(&plain, &c, &tx), NET_TX_OK);
	assert_int_equal(tx.hdr.csum_start, 7);
	assert_int_equal(tx.len, 100);
	assert_int_equal(tx.niov, 2);
	assert_ptr_equal(tx.iov[0].iov_base, buf + 12);
	assert_int_equal(tx.iov[0].iov_len, 2);
	assert_int_equal(tx.iov[1].iov_len, 98);
}

static void test_checksum_offload(void **state)
{
	struct virtio_net_hdr h = {.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM, .csum_start = 34, .csum_offset = 16};

	(void)state;
	assert_int_equal(parse(&plain, &h, 100), NET_TX_DROP); /* CSUM not negotiated */
	assert_string_equal(tx.why, "NEEDS_CSUM without VIRTIO_NET_F_CSUM");
	assert_int_equal(parse(&csum, &h, 100), NET_TX_OK);
	assert_int_equal(parse(&csum, &h, 34 + 16 + 2), NET_TX_OK); /* the checksum's last byte is the frame's */
	assert_int_equal(parse(&csum, &h, 34 + 16 + 1), NET_TX_DROP);
	h.csum_start = 0xffff;
	h.csum_offset = 0xffff; /* no 16-bit wrap-around */
	assert_int_equal(parse(&csum, &h, 1000), NET_TX_DROP);
}

static void test_segmentation_offload(void **state)
{
	struct virtio_net_hdr h = {.flags = VIRTIO_NET_HDR_F_NEEDS_CSUM,
				   .gso_type = VIRTIO_NET_HDR_GSO_TCPV4,
				   .gso_size = 1448,
				   .csum_start = 34,
				   .csum_offset = 16};

	(void)state;
	assert_int_equal(parse(&csum, &h, 3000), NET_TX_DROP); /* HOST_TSO4 not negotiated (and too big) */
	assert_int_equal(parse(&csum, &h, 1000), NET_TX_DROP);
	assert_string_equal(tx.why, "a segmentation offload that was not negotiated");
	assert_int_equal(parse(&tso, &h, 30000), NET_TX_OK);
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV6; /* only TSO4 negotiated */
	assert_int_equal(parse(&tso, &h, 30000), NET_TX_DROP);
	h.gso_type = 3; /* UDP: never offered */
	assert_int_equal(parse(&tso, &h, 30000), NET_TX_DROP);
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4 | VIRTIO_NET_HDR_GSO_ECN;
	assert_int_equal(parse(&tso, &h, 30000), NET_TX_DROP);
	h.gso_type = VIRTIO_NET_HDR_GSO_TCPV4;
	h.gso_size = 0;
	assert_int_equal(parse(&tso, &h, 30000), NET_TX_DROP);
	h.gso_size = 1448;
	h.flags = 0;
	assert_int_equal(parse(&tso, &h, 30000), NET_TX_DROP);
}

static void test_max_frame(void **state)
{
	(void)state;
	assert_int_equal(net_max_frame(0, 1500), 1518);
	assert_int_equal(net_max_frame(VIRTIO_NET_F_CSUM, 1500), 1518);
	assert_int_equal(net_max_frame(VIRTIO_NET_F_HOST_TSO6, 1500), NET_GSO_FRAME_MAX);
}

/* ---- --net ---------------------------------------------------------------------------------------------- */

static int net_err(const char *s, const char *want)
{
	static struct vm_config c;
	char err[256] = "";
	int ret;

	config_defaults(&c);
	ret = config_parse_net(s, &c, err, sizeof(err));
	if (want && !strstr(err, want))
		fail_msg("--net %s: error '%s', expected '%s'", s, err, want);
	return ret;
}

static void test_parse_tap(void **state)
{
	static struct vm_config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_parse_net("tap=tap0", &c, err, sizeof(err)), 0);
	assert_int_equal(config_parse_net("tap=abcdefghijklmno,mac=02:AB:cd:00:00:01", &c, err, sizeof(err)), 0);
	assert_int_equal(c.nr_nets, 2);
	assert_int_equal(c.net[0].kind, NET_TAP);
	assert_string_equal(c.net[0].tap, "tap0");
	assert_false(c.net[0].has_mac);
	assert_true(c.net[1].has_mac);
	assert_memory_equal(c.net[1].mac, ((uint8_t[]){2, 0xab, 0xcd, 0, 0, 1}), 6);
	assert_int_equal(net_err("tap=abcdefghijklmnop", "1..15 bytes"), -EINVAL);
	assert_int_equal(net_err("tap=", "1..15 bytes"), -EINVAL);
	assert_int_equal(net_err("tap=a/b", "without '/'"), -EINVAL);
	assert_int_equal(net_err("tap=a:b", "':' or blanks"), -EINVAL);
	assert_int_equal(net_err("tap=.", "not . or .."), -EINVAL);
	assert_int_equal(net_err("tap=tap%d", "'%' makes the kernel pick the name"), -EINVAL);
	assert_int_equal(net_err("tap=t,mac=02:00:00:00:00", "six hex bytes"), -EINVAL);
	assert_int_equal(net_err("tap=t,mac=02:00:00:00:00:0g", "six hex bytes"), -EINVAL);
	assert_int_equal(net_err("tap=t,mac=02:00:00:00:00:011", "six hex bytes"), -EINVAL);
	assert_int_equal(net_err("tap=t,mac=01:00:00:00:00:01", "multicast"), -EINVAL);
	assert_int_equal(net_err("tap=t,mac=00:00:00:00:00:00", "all-zero"), -EINVAL);
	assert_int_equal(net_err("tap=t,hostfwd=tcp::1-:2", "unknown key"), -EINVAL);
	assert_int_equal(net_err("tap=t,", "an empty item"), -EINVAL);
	assert_int_equal(net_err("tapx", "expected tap=NAME or user"), -EINVAL);
}

static void test_parse_user(void **state)
{
	static struct vm_config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	assert_int_equal(config_parse_net("user", &c, err, sizeof(err)), 0);
	assert_int_equal(c.net[0].kind, NET_USER);
	assert_int_equal(c.net[0].user_net, VM_NET_USER_DEFAULT);
	assert_int_equal(c.net[0].user_prefix, 24);
	assert_int_equal(
	    config_parse_net("user,net=10.1.0.0/16,hostfwd=tcp::8080-:80,hostfwd=udp:0.0.0.0:53-10.1.0.15:5353", &c,
			     err, sizeof(err)),
	    0);
	assert_int_equal(c.net[1].user_net, 0x0a010000u);
	assert_int_equal(c.net[1].user_prefix, 16);
	assert_int_equal(c.net[1].nr_fwds, 2);
	assert_false(c.net[1].fwd[0].udp);
	assert_int_equal(c.net[1].fwd[0].host_addr, 0x7f000001u); /* loopback unless told */
	assert_int_equal(c.net[1].fwd[0].host_port, 8080);
	assert_int_equal(c.net[1].fwd[0].guest_addr, 0);
	assert_int_equal(c.net[1].fwd[0].guest_port, 80);
	assert_true(c.net[1].fwd[1].udp);
	assert_int_equal(c.net[1].fwd[1].host_addr, 0);
	assert_int_equal(c.net[1].fwd[1].guest_addr, 0x0a01000fu);
	assert_int_equal(net_err("user,net=10.1.0.1/16", "host bits set"), -EINVAL);
	assert_int_equal(net_err("user,net=10.1.0.0/28", "N from 8 to 27"), -EINVAL);
	assert_int_equal(net_err("user,net=10.1.0.0", "A.B.C.D/N"), -EINVAL);
	assert_int_equal(net_err("user,net=256.1.0.0/16", "A.B.C.D/N"), -EINVAL);
	assert_int_equal(net_err("user,net=10.1.0/16", "A.B.C.D/N"), -EINVAL);
	assert_int_equal(net_err("user,hostfwd=tcp::0-:80", "hostfwd=tcp::0-:80: expected"), -EINVAL);
	assert_int_equal(net_err("user,hostfwd=tcp::80-:65536", "expected"), -EINVAL);
	assert_int_equal(net_err("user,hostfwd=tcp::80:80", "expected"), -EINVAL);
	assert_int_equal(net_err("user,hostfwd=icmp::80-:80", "expected"), -EINVAL);
	assert_int_equal(net_err("user,hostfwd=tcp:1.2.3:80-:80", "expected"), -EINVAL);
	assert_int_equal(net_err("user,mtu=9000", "unknown key 'mtu=9000'"), -EINVAL);
	assert_int_equal(net_err("user,net=127.0.0.0/8", "the loopback network"), -EINVAL);
	assert_int_equal(net_err("user,net=0.0.0.0/8", "\"this network\""), -EINVAL);
	assert_int_equal(net_err("user,net=224.0.0.0/8", "multicast"), -EINVAL);
	assert_int_equal(net_err("user,net=255.255.255.0/24", "broadcast"), -EINVAL);
	assert_int_equal(net_err("user,net=1.0.0.0/8", NULL), 0);
	assert_int_equal(net_err("user,net=223.255.255.0/24", NULL), 0);
}

static void test_limits_and_slots(void **state)
{
	static struct vm_config c;
	char err[256];

	(void)state;
	config_defaults(&c);
	for (int i = 0; i < VM_MAX_NETS; i++)
		assert_int_equal(config_parse_net("user", &c, err, sizeof(err)), 0);
	assert_int_equal(config_parse_net("user", &c, err, sizeof(err)), -E2BIG);
	assert_non_null(strstr(err, "at most 8 interfaces"));
	config_defaults(&c);
	for (int i = 0; i < VM_MAX_NETS; i++)
		assert_int_equal(config_parse_net("user", &c, err, sizeof(err)), 0);
	c.nr_disks = VM_MAX_DISKS; /* 16 + 8 windows: more than there are */
	assert_int_equal(config_validate(&c, 2, 1ull << 34, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "--net"));
}

static void test_default_mac(void **state)
{
	struct vm_net a = {.kind = NET_TAP, .tap = "tap0"}, b = {.kind = NET_TAP, .tap = "tap1"},
		      u = {.kind = NET_USER};
	uint8_t m1[6], m2[6], m3[6], m4[6];

	(void)state;
	config_net_mac(&a, 0, m1);
	config_net_mac(&a, 0, m2);
	assert_memory_equal(m1, m2, 6); /* stable */
	assert_int_equal(m1[0], 0x02);	/* locally administered, unicast */
	config_net_mac(&b, 0, m3);
	assert_memory_not_equal(m1, m3, 6);
	config_net_mac(&u, 0, m3);
	config_net_mac(&u, 1, m4);
	assert_memory_not_equal(m3, m4, 6);
	a.has_mac = true;
	memcpy(a.mac, (uint8_t[]){0x52, 0x54, 0, 1, 2, 3}, 6);
	config_net_mac(&a, 0, m1);
	assert_memory_equal(m1, a.mac, 6);
}

/* ---- the device, driven as a guest driver (virtio_driver.h) ------------------------------------------------ */

#define RX_Q  0
#define TX_Q  1
#define BUFS  0x400000 /* buffers: 4 KiB per descriptor slot, rx then tx */
#define BASIC (VIRTIO_NET_F_MAC | VIRTIO_NET_F_STATUS | VIRTIO_NET_F_MTU)

static const uint8_t MAC[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55};

static struct {
	struct vdrv drv;
	int sv[2]; /* sv[0]: the backend's (the device owns it); sv[1]: the "network" */
} fx;

static void bring_up(uint64_t features)
{
	vdrv_bring_up(&fx.drv, features, 2);
}

static uint64_t slot_buf(unsigned q, uint16_t head)
{
	return BUFS + q * 0x100000 + head * 0x1000ull;
}

/* A one-descriptor chain of `len` bytes in the head's buffer slot; notifies; returns the head. */
static uint16_t post(unsigned q, uint32_t len, uint16_t flags)
{
	return vdrv_post(&fx.drv, q, slot_buf(q, vdrv_next_head(&fx.drv, q)), len, flags);
}

/* Transmits header + `len` frame bytes (byte i = i + seed) in one buffer; returns the used length. */
static int64_t transmit(uint32_t len, uint8_t seed)
{
	uint16_t head = vdrv_next_head(&fx.drv, TX_Q);
	uint8_t *p = vdrv_gpa(&fx.drv, slot_buf(TX_Q, head), NET_HDR_SIZE + len);

	memset(p, 0, NET_HDR_SIZE);
	for (uint32_t i = 0; i < len; i++)
		p[NET_HDR_SIZE + i] = (uint8_t)(i + seed);
	post(TX_Q, NET_HDR_SIZE + len, 0);
	return vdrv_wait_used(&fx.drv, TX_Q, 2000, NULL);
}

/* A frame from the "network" of `len` bytes, byte i = i + seed. */
static void network_send(uint32_t len, uint8_t seed)
{
	static uint8_t f[4096];

	for (uint32_t i = 0; i < len; i++)
		f[i] = (uint8_t)(i + seed);
	assert_int_equal(send(fx.sv[1], f, len, 0), (ssize_t)len);
}

static void check_frame(const uint8_t *p, uint32_t len, uint8_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		if (p[i] != (uint8_t)(i + seed))
			fail_msg("byte %u: 0x%02x, expected 0x%02x", i, p[i], (uint8_t)(i + seed));
}

static int dev_setup(void **state)
{
	struct devctx ctx = {.ops = &fake_ops};
	const struct devmgr_window *slot;
	struct net_backend *be;
	char err[128];

	(void)state;
	memset(&fx, 0, sizeof(fx));
	log_set_level(LOG_ERROR);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fx.sv), 0);
	slot = vdrv_open(&fx.drv, "virtio-net", &ctx);
	assert_int_equal(net_seqpacket_backend(fx.sv[0], 0, "test", &be), 0);
	assert_int_equal(virtio_net_create_on(&ctx, &fx.drv.bus, slot, be, MAC, 0, err, sizeof(err)), 0);
	vdrv_start(&fx.drv);
	return 0;
}

static void *limited_dev;

/* dev_setup with rate limiters: transmit 2 frames a second (ops), receive 1 a second (ops). */
static int dev_setup_limited(void **state)
{
	struct devctx ctx = {.ops = &fake_ops};
	struct vm_net cfg = {.tx_rl = {.ops = {2, 0, 1000}}, .rx_rl = {.ops = {1, 0, 1000}}};
	const struct devmgr_window *slot;
	struct net_backend *be;
	char err[128];

	(void)state;
	memset(&fx, 0, sizeof(fx));
	log_set_level(LOG_ERROR);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fx.sv), 0);
	slot = vdrv_open(&fx.drv, "virtio-net", &ctx);
	assert_int_equal(net_seqpacket_backend(fx.sv[0], 0, "test", &be), 0);
	assert_int_equal(virtio_net_open_on(&ctx, &fx.drv.bus, slot, be, MAC, 0, &cfg, &limited_dev, err, sizeof(err)),
			 0);
	vdrv_start(&fx.drv);
	return 0;
}

static int dev_teardown(void **state)
{
	(void)state;
	vdrv_close(&fx.drv); /* closes sv[0] with the backend */
	if (fx.sv[1] >= 0)
		close(fx.sv[1]);
	return 0;
}

/* Device ID 1; MAC, STATUS, MTU and MRG_RXBUF offered, no offload on this backend; the config space. */
static void test_dev_identity(void **state)
{
	uint32_t lo, hi;

	(void)state;
	assert_int_equal(vdrv_rd(&fx.drv, 0x008), VIRTIO_ID_NET);
	vdrv_wr(&fx.drv, 0x014, 0);
	lo = vdrv_rd(&fx.drv, 0x010);
	vdrv_wr(&fx.drv, 0x014, 1);
	hi = vdrv_rd(&fx.drv, 0x010);
	assert_int_equal(lo & (uint32_t)(BASIC | VIRTIO_NET_F_MRG_RXBUF), (uint32_t)(BASIC | VIRTIO_NET_F_MRG_RXBUF));
	assert_int_equal(lo & (uint32_t)(VIRTIO_NET_F_CSUM | VIRTIO_NET_F_HOST_TSO4 | VIRTIO_NET_F_GUEST_CSUM), 0);
	assert_true(hi & 1); /* VERSION_1 */
	for (unsigned i = 0; i < 6; i++)
		assert_int_equal(vdrv_rd_n(&fx.drv, 0x100 + VIRTIO_NET_CFG_MAC + i, 1), MAC[i]);
	assert_int_equal(vdrv_rd_n(&fx.drv, 0x100 + VIRTIO_NET_CFG_STATUS, 2), VIRTIO_NET_S_LINK_UP);
	assert_int_equal(vdrv_rd_n(&fx.drv, 0x100 + VIRTIO_NET_CFG_PAIRS, 2), 1);
	assert_int_equal(vdrv_rd_n(&fx.drv, 0x100 + VIRTIO_NET_CFG_MTU, 2), NET_MTU);
}

/* Frames out, the header stripped for this backend; hostile ones dropped, nothing sent for them. */
static void test_dev_transmit(void **state)
{
	uint8_t f[2048];

	(void)state;
	bring_up(BASIC);
	assert_int_equal(transmit(60, 7), 0);
	assert_int_equal(recv(fx.sv[1], f, sizeof(f), 0), 60);
	check_frame(f, 60, 7);
	assert_int_equal(transmit(0, 0), 0);				 /* length 0 */
	assert_int_equal(transmit(NET_MTU + NET_L2_OVERHEAD + 1, 0), 0); /* above the maximum */
	assert_int_equal(transmit(NET_MTU + NET_L2_OVERHEAD, 3), 0);	 /* the largest allowed */
	assert_int_equal(recv(fx.sv[1], f, sizeof(f), 0), NET_MTU + NET_L2_OVERHEAD);
	check_frame(f, NET_MTU + NET_L2_OVERHEAD, 3);
	assert_int_equal(recv(fx.sv[1], f, sizeof(f), 0), -1); /* the two dropped ones never left */
}

static uint64_t ms_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/*
 * tx_rate_limiter ops 2/s: two frames go at once, the third waits in the ring for the limiter's timer
 * (about 500 ms: an op's refill) and then goes; rx_rate_limiter ops 1/s: the second frame from the
 * network waits in the device until the bucket's second is up. A live update turning the tx bucket off lets frames go
 * at once.
 */
static void test_dev_rate_limited(void **state)
{
	uint8_t f[2048];
	uint64_t t0;

	(void)state;
	bring_up(BASIC);
	assert_int_equal(transmit(60, 1), 0);
	assert_int_equal(transmit(60, 2), 0);
	t0 = ms_now();
	assert_int_equal(transmit(60, 3), 0);
	assert_true(ms_now() - t0 >= 300);
	for (uint8_t seed = 1; seed <= 3; seed++) {
		assert_int_equal(recv(fx.sv[1], f, sizeof(f), 0), 60);
		check_frame(f, 60, seed);
	}
	post(RX_Q, 300, VIRTQ_DESC_F_WRITE);
	post(RX_Q, 300, VIRTQ_DESC_F_WRITE);
	network_send(100, 4);
	network_send(100, 5);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 2000, NULL), NET_HDR_SIZE + 100);
	t0 = ms_now();
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 3000, NULL), NET_HDR_SIZE + 100);
	/* the refill counts from the bucket's last refill (its creation, before the transmits): ~500 ms on */
	assert_true(ms_now() - t0 >= 300);
	{ /* PATCH /network-interfaces: the event loop parked, as vm_device_call does */
		static const struct rl_config off = {.ops = {0, 0, 0}};

		evloop_stop(loop);
		virtio_net_set_limiters(limited_dev, &off, false, true, &off, false, true);
		assert_int_equal(evloop_start(loop), 0);
	}
	t0 = ms_now();
	for (uint8_t seed = 6; seed < 10; seed++)
		assert_int_equal(transmit(60, seed), 0);
	assert_true(ms_now() - t0 < 300);
}

/* Without MRG_RXBUF: one chain per frame; a chain too small drops the frame (returned empty). */
static void test_dev_receive_single(void **state)
{
	uint32_t id;
	uint16_t head;
	const struct virtio_net_hdr *h;

	(void)state;
	bring_up(BASIC);
	head = post(RX_Q, 100, VIRTQ_DESC_F_WRITE);
	network_send(200, 1);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 2000, &id), 0);
	assert_int_equal(id, head);
	head = post(RX_Q, 300, VIRTQ_DESC_F_WRITE);
	network_send(100, 9);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 2000, &id), NET_HDR_SIZE + 100);
	h = vdrv_gpa(&fx.drv, slot_buf(RX_Q, head), NET_HDR_SIZE);
	assert_int_equal(h->num_buffers, 1);
	assert_int_equal(h->flags, 0);
	assert_int_equal(h->gso_type, VIRTIO_NET_HDR_GSO_NONE);
	check_frame(vdrv_gpa(&fx.drv, slot_buf(RX_Q, head) + NET_HDR_SIZE, 100), 100, 9);
}

/* Frames arriving with no buffer posted wait (in the device and the socket) and arrive in order later. */
static void test_dev_receive_waits(void **state)
{
	(void)state;
	bring_up(BASIC);
	for (int i = 0; i < 3; i++)
		network_send(64, (uint8_t)(i * 50));
	nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 0, NULL), -1);
	for (int i = 0; i < 3; i++) {
		uint16_t head = post(RX_Q, 2048, VIRTQ_DESC_F_WRITE);

		assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 2000, NULL), NET_HDR_SIZE + 64);
		check_frame(vdrv_gpa(&fx.drv, slot_buf(RX_Q, head) + NET_HDR_SIZE, 64), 64, (uint8_t)(i * 50));
	}
}

/* MRG_RXBUF: a frame over three chains, the third posted only later; num_buffers = 3 in the first. */
static void test_dev_receive_mergeable(void **state)
{
	uint8_t all[1500];
	uint16_t heads[3];
	uint32_t id, off = 0;
	int64_t len;

	(void)state;
	bring_up(BASIC | VIRTIO_NET_F_MRG_RXBUF);
	heads[0] = post(RX_Q, 512, VIRTQ_DESC_F_WRITE);
	heads[1] = post(RX_Q, 512, VIRTQ_DESC_F_WRITE);
	network_send(1400, 5);
	nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 0, NULL), -1); /* two chains held, nothing returned yet */
	heads[2] = post(RX_Q, 512, VIRTQ_DESC_F_WRITE);
	for (int i = 0; i < 3; i++) {
		len = vdrv_wait_used(&fx.drv, RX_Q, 2000, &id);
		assert_int_equal(id, heads[i]);
		assert_int_equal(len, i < 2 ? 512 : NET_HDR_SIZE + 1400 - 1024);
		memcpy(all + off, vdrv_gpa(&fx.drv, slot_buf(RX_Q, heads[i]), (uint64_t)len), (size_t)len);
		off += (uint32_t)len;
	}
	assert_int_equal(((const struct virtio_net_hdr *)all)->num_buffers, 3);
	check_frame(all + NET_HDR_SIZE, 1400, 5);
	/* A chain shorter than the header is malformed with MRG_RXBUF: returned empty, the frame goes on. */
	heads[0] = post(RX_Q, 8, VIRTQ_DESC_F_WRITE);
	network_send(100, 2);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 2000, &id), 0);
	assert_int_equal(id, heads[0]);
	heads[1] = post(RX_Q, 512, VIRTQ_DESC_F_WRITE);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 2000, &id), NET_HDR_SIZE + 100);
	check_frame(vdrv_gpa(&fx.drv, slot_buf(RX_Q, heads[1]) + NET_HDR_SIZE, 100), 100, 2);
}

/* A reset while a frame is half in the guest's chains forgets it; the driver that comes back works. */
static void test_dev_reset_mid_frame(void **state)
{
	uint16_t head;

	(void)state;
	bring_up(BASIC | VIRTIO_NET_F_MRG_RXBUF);
	post(RX_Q, 512, VIRTQ_DESC_F_WRITE);
	network_send(1400, 1);
	nanosleep(&(struct timespec){.tv_nsec = 50000000}, NULL);
	vdrv_wr(&fx.drv, 0x070, 0);
	assert_int_equal(vdrv_rd(&fx.drv, 0x070), 0);
	bring_up(BASIC | VIRTIO_NET_F_MRG_RXBUF);
	network_send(100, 4);
	head = post(RX_Q, 512, VIRTQ_DESC_F_WRITE);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 2000, NULL), NET_HDR_SIZE + 100);
	check_frame(vdrv_gpa(&fx.drv, slot_buf(RX_Q, head) + NET_HDR_SIZE, 100), 100, 4);
	assert_int_equal(transmit(60, 0), 0);
}

/* The backend full: transmission pauses (chains not returned), resumes when the network reads. */
static void test_dev_transmit_backpressure(void **state)
{
	uint8_t f[2048];
	int size = 4096, sent = 0, got = 0;

	(void)state;
	assert_int_equal(setsockopt(fx.sv[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), 0); /* the device's end */
	bring_up(BASIC);
	for (int i = 0; i < VDRV_QSIZE; i++) {
		uint16_t head = vdrv_next_head(&fx.drv, TX_Q);
		uint8_t *p = vdrv_gpa(&fx.drv, slot_buf(TX_Q, head), NET_HDR_SIZE + 1500);

		memset(p, 0, NET_HDR_SIZE);
		memset(p + NET_HDR_SIZE, i, 1500);
		post(TX_Q, NET_HDR_SIZE + 1500, 0);
	}
	while (vdrv_wait_used(&fx.drv, TX_Q, 100, NULL) == 0)
		sent++;
	assert_true(sent < VDRV_QSIZE); /* the socket is full: the rest wait in the ring */
	for (int i = 0; i < 2000 && got < VDRV_QSIZE; i++) {
		if (recv(fx.sv[1], f, sizeof(f), 0) == 1500)
			got++;
		else
			nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
		while (vdrv_wait_used(&fx.drv, TX_Q, 0, NULL) == 0)
			sent++;
	}
	assert_int_equal(got, VDRV_QSIZE);
	while (sent < VDRV_QSIZE && vdrv_wait_used(&fx.drv, TX_Q, 2000, NULL) == 0)
		sent++;
	assert_int_equal(sent, VDRV_QSIZE);
}

/* The network end closes: link down in config space, frames still returned (dropped), no hang. */
static void test_dev_backend_gone(void **state)
{
	int i;

	(void)state;
	bring_up(BASIC);
	post(RX_Q, 2048, VIRTQ_DESC_F_WRITE);
	close(fx.sv[1]);
	fx.sv[1] = -1;
	for (i = 0; i < 2000 && vdrv_rd_n(&fx.drv, 0x100 + VIRTIO_NET_CFG_STATUS, 2) != 0; i++)
		nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
	assert_int_equal(vdrv_rd_n(&fx.drv, 0x100 + VIRTIO_NET_CFG_STATUS, 2), 0);
	assert_true(vdrv_rd(&fx.drv, 0x060) & VIRTIO_MMIO_INT_CONFIG);
	for (i = 0; i < 3; i++)
		assert_int_equal(transmit(60, 0), 0);
	assert_int_equal(vdrv_wait_used(&fx.drv, RX_Q, 20, NULL), -1); /* nothing arrives, nothing breaks */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_lengths),
	    cmocka_unit_test(test_short_header_and_writable),
	    cmocka_unit_test(test_split_header),
	    cmocka_unit_test(test_checksum_offload),
	    cmocka_unit_test(test_segmentation_offload),
	    cmocka_unit_test(test_max_frame),
	    cmocka_unit_test(test_parse_tap),
	    cmocka_unit_test(test_parse_user),
	    cmocka_unit_test(test_limits_and_slots),
	    cmocka_unit_test(test_default_mac),
	    cmocka_unit_test_setup_teardown(test_dev_identity, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_transmit, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_rate_limited, dev_setup_limited, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_receive_single, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_receive_waits, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_receive_mergeable, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_reset_mid_frame, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_transmit_backpressure, dev_setup, dev_teardown),
	    cmocka_unit_test_setup_teardown(test_dev_backend_gone, dev_setup, dev_teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
