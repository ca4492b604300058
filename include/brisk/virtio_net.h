/*
 * virtio_net.h - the virtio network device (virtio 1.2 section 5.1): feature bits, the header, the limits,
 * the transmit-chain parser and receive-side copy (net_frame.c, exposed for the unit tests and the fuzzer),
 * and the backend interface the device (net.c) drives: a tap (net_tap.c) or user-mode networking through
 * the brisk-slirp helper process (net_user.c, src/helpers/slirp_helper.c).
 */
#ifndef BRISK_VIRTIO_NET_H
#define BRISK_VIRTIO_NET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#include "brisk/virtq.h"

#define VIRTIO_ID_NET 1

/* Feature bits (section 5.1.3). */
#define VIRTIO_NET_F_CSUM	(1ull << 0)
#define VIRTIO_NET_F_GUEST_CSUM (1ull << 1)
#define VIRTIO_NET_F_MTU	(1ull << 3)
#define VIRTIO_NET_F_MAC	(1ull << 5)
#define VIRTIO_NET_F_GUEST_TSO4 (1ull << 7)
#define VIRTIO_NET_F_GUEST_TSO6 (1ull << 8)
#define VIRTIO_NET_F_HOST_TSO4	(1ull << 11)
#define VIRTIO_NET_F_HOST_TSO6	(1ull << 12)
#define VIRTIO_NET_F_MRG_RXBUF	(1ull << 15)
#define VIRTIO_NET_F_STATUS	(1ull << 16)

#define VIRTIO_NET_S_LINK_UP 1u

/* struct virtio_net_hdr (5.1.6): flags and gso_type values. */
#define VIRTIO_NET_HDR_F_NEEDS_CSUM 1u
#define VIRTIO_NET_HDR_F_DATA_VALID 2u
#define VIRTIO_NET_HDR_GSO_NONE	    0u
#define VIRTIO_NET_HDR_GSO_TCPV4    1u
#define VIRTIO_NET_HDR_GSO_TCPV6    4u
#define VIRTIO_NET_HDR_GSO_ECN	    0x80u

/* struct virtio_net_config (5.1.4): mac[6], status, max_virtqueue_pairs, mtu. */
#define VIRTIO_NET_CFG_MAC    0
#define VIRTIO_NET_CFG_STATUS 6
#define VIRTIO_NET_CFG_PAIRS  8
#define VIRTIO_NET_CFG_MTU    10
#define VIRTIO_NET_CFG_SIZE   12

/* The header with VIRTIO_F_VERSION_1 (5.1.6: num_buffers always present): 12 bytes, little-endian. */
struct virtio_net_hdr {
	uint8_t flags;
	uint8_t gso_type;
	uint16_t hdr_len;
	uint16_t gso_size;
	uint16_t csum_start;
	uint16_t csum_offset;
	uint16_t num_buffers;
};
#define NET_HDR_SIZE 12u
_Static_assert(sizeof(struct virtio_net_hdr) == NET_HDR_SIZE, "virtio_net_hdr_v1 is 12 bytes");

/* The device's limits (docs/devices.md, "virtio-net"). */
#define NET_QUEUE_SIZE	   256u		  /* QueueNumMax of rx and tx */
#define NET_MAX_SEGS	   64u		  /* buffers of one chain looked at; more is a malformed chain */
#define NET_MTU		   1500u	  /* config mtu (VIRTIO_NET_F_MTU) */
#define NET_L2_OVERHEAD	   18u		  /* Ethernet header 14 + one VLAN tag 4 */
#define NET_ETH_MIN	   14u		  /* a frame shorter than its Ethernet header is dropped */
#define NET_GSO_FRAME_MAX  (65535u + 18u) /* with HOST_TSO4/6: an IP packet of 64 KiB + L2 header */
#define NET_RX_BUF_SIZE	   (NET_HDR_SIZE + NET_GSO_FRAME_MAX) /* one frame from the backend, with its header */
#define NET_RX_MAX_BUFFERS NET_QUEUE_SIZE		      /* MRG_RXBUF: chains one frame may take */

/* What the parser needs to know of the negotiation. */
struct net_limits {
	uint64_t features;  /* negotiated device feature bits */
	uint32_t max_frame; /* frame bytes after the header: MTU + 18, or NET_GSO_FRAME_MAX with HOST_TSO4/6 */
};

/* The largest frame a driver with `features` may send (section 5.1.6.2, docs/security.md case 10). */
uint32_t net_max_frame(uint64_t features, uint32_t mtu);

/* One parsed transmit chain: the header copied out of guest memory, the frame as iovecs into guest RAM. */
struct net_tx {
	struct virtio_net_hdr hdr;
	uint32_t len; /* frame bytes (after the header) */
	unsigned niov;
	struct iovec iov[NET_MAX_SEGS];
	const char *why; /* NET_TX_DROP: what was wrong */
};

enum net_tx_result {
	NET_TX_OK = 0,
	NET_TX_DROP, /* malformed or over the limits: drop, count, return the chain with 0 bytes (docs/security.md case
			10) */
};

/*
 * Parses the transmit chain `c` (walked and checked by virtq_pop) as
 * header + frame (5.1.6.2), however the driver split them over buffers
 * (2.6.4): the 12-byte header is copied out once, before it is looked at.
 * Dropped: a writable buffer, no complete header, a frame of 0 bytes or
 * shorter than an Ethernet header, above l->max_frame; a gso_type other
 * than NONE without HOST_TSO4/6 negotiated (or not TCPV4/TCPV6), with a
 * gso_size of 0, or without NEEDS_CSUM; NEEDS_CSUM without CSUM negotiated
 * or with csum_start + csum_offset + 2 past the frame. Never reads outside
 * the chain's segments.
 */
enum net_tx_result net_tx_parse(const struct net_limits *l, const struct virtq_chain *c, struct net_tx *t);

/* ---- backends -------------------------------------------------------------------------------------- */

struct net_backend;

struct net_backend_ops {
	/*
	 * Sends one frame: `hdr` (NULL-free; a backend without offloads drops
	 * it) and the frame's iovecs. Returns the bytes taken, -EAGAIN (full:
	 * wait for EPOLLOUT on fd), or another -errno.
	 */
	ssize_t (*send)(struct net_backend *b, const struct virtio_net_hdr *hdr, const struct iovec *iov,
			unsigned niov);
	/*
	 * Receives one frame into buf as header + frame (the header as the
	 * backend has it: a tap's vnet header, else zeros). Returns the total
	 * length (>= NET_HDR_SIZE), -EAGAIN when none waits, -EPIPE when the
	 * backend is gone, or another -errno.
	 */
	ssize_t (*recv)(struct net_backend *b, uint8_t *buf, size_t len);
	/* The driver accepted `features`: tell the backend what it may send us (TUNSETOFFLOAD). 0 or -errno. */
	int (*set_offload)(struct net_backend *b, uint64_t features);
	/* Frees the backend and closes its fd. */
	void (*destroy)(struct net_backend *b);
};

struct net_backend {
	const struct net_backend_ops *ops;
	int fd;		   /* non-blocking; readable: a frame waits; writable: send may succeed */
	uint64_t features; /* device features this backend supports (offloads), besides MAC/STATUS/MTU/MRG_RXBUF */
	char name[40];	   /* "tap0", "user": for logs */
};

/*
 * Opens tap `name` (/dev/net/tun, IFF_TAP | IFF_NO_PI | IFF_VNET_HDR; the
 * interface may exist already), vnet header size 12, non-blocking, and
 * probes TUNSETOFFLOAD for the offloads it accepts. On failure `err` names
 * the ioctl and the tap. Returns 0 and *out, or -errno.
 */
int net_tap_open(const char *name, struct net_backend **out, char *err, size_t errlen);
/*
 * Whether tap `name` opens as net_tap_open would open it (then closed again): a PUT's check, as Firecracker's
 * Tap::open_named at PUT /network-interfaces. A tap that did not exist exists while this runs only. 0 or
 * -errno with err as net_tap_open's.
 */
int net_tap_probe(const char *name, char *err, size_t errlen);

/*
 * A backend on a connected SOCK_SEQPACKET socket `fd` (non-blocking, one
 * frame per message, no virtio header), taking ownership of the fd; `pid`
 * > 0 is a helper process that serves the other end, waited for (then
 * killed) at destroy. The user-mode backend is one; unit tests use one on
 * a socketpair. Returns 0 and *out, or -ENOMEM.
 */
int net_seqpacket_backend(int fd, pid_t pid, const char *name, struct net_backend **out);

struct vm_net;
/*
 * Starts the user-mode backend: the brisk-slirp helper process (next to the
 * brisk binary, or $BRISK_SLIRP_HELPER) on one end of a SOCK_SEQPACKET
 * socketpair, one frame per message, configured from `n` (network,
 * hostfwd). Waits (bounded) for the helper to say it is ready: a hostfwd
 * port in use is an error here, in `err` (-EINVAL). Returns 0 and *out, or
 * -errno: -ECHILD when the helper itself could not run (not found, not
 * startable, exited or silent before it was ready: the host's failure).
 */
int net_user_open(const struct vm_net *n, uint32_t mtu, struct net_backend **out, char *err, size_t errlen);
/*
 * net_user_open in two halves, so that the helper's exec and libslirp's set-up (3-4 ms on a host, more than
 * brisk's whole start) run while the VM is built: net_user_start spawns the helper and returns its backend at
 * once (its errors: the helper not found or not startable, -ECHILD; the socketpair); net_user_wait waits for
 * the helper's "OK" the first time it is called on that backend (net_user_open's wait and errors; a no-op
 * after, and for any backend not net_user_start's). After a failed wait the caller destroys the backend.
 */
int net_user_start(const struct vm_net *n, uint32_t mtu, struct net_backend **out, char *err, size_t errlen);
int net_user_wait(struct net_backend *b, char *err, size_t errlen);

struct bus;
struct devctx;
struct devmgr_window;
/*
 * The device on backend `be` (owned from here on, also on failure) with MAC
 * `mac`, interface `index` (for logs): what virtio_net_create does once it
 * has opened the backend its configuration names; unit tests call it with a
 * backend of their own. Returns 0 or -errno (with `err`).
 */
int virtio_net_create_on(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
			 struct net_backend *be, const uint8_t mac[6], unsigned index, char *err, size_t errlen);
/* virtio_net_create_on with cfg's rx_rl/tx_rl (cfg NULL: none) and *dev (may be NULL) its backend. */
int virtio_net_open_on(const struct devctx *ctx, struct bus *bus, const struct devmgr_window *win,
		       struct net_backend *be, const uint8_t mac[6], unsigned index, const struct vm_net *cfg,
		       void **dev, char *err, size_t errlen);

#endif
