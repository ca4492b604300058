/*
 * virtio_vsock.h - the virtio socket device (virtio 1.2 section 5.10): its packet format, limits, the pure
 * packet parser and credit arithmetic (exposed for the unit tests and the fuzzer), and the constructor.
 *
 * The device runs in userspace and bridges each stream to an AF_UNIX socket with the "hybrid vsock"
 * convention of Firecracker and Cloud Hypervisor (docs/devices.md, "virtio-vsock"):
 *   host -> guest: a host process connects to PATH and writes "CONNECT <port>\n"; brisk answers
 *                  "OK <hostport>\n" once the guest accepted, then bytes flow both ways;
 *   guest -> host: a guest connection to CID 2 port P becomes a connection to PATH_P.
 */
#ifndef BRISK_VIRTIO_VSOCK_H
#define BRISK_VIRTIO_VSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brisk/virtq.h"

struct bus;
struct devctx;
struct devmgr_window;
struct virtio_vsock;

#define VIRTIO_ID_VSOCK 19 /* section 5.10.1 */

/* Feature bits (5.10.3): stream only; SEQPACKET (bit 1) is not offered. */
#define VIRTIO_VSOCK_F_STREAM 0

/* Queues (5.10.2). */
#define VSOCK_RX_Q  0
#define VSOCK_TX_Q  1
#define VSOCK_EVT_Q 2

#define VSOCK_HOST_CID	     2u		 /* VMADDR_CID_HOST: the host's address, brisk's side */
#define VSOCK_CID_MIN	     3u		 /* guest CIDs: 0..2 are reserved (5.10.4) */
#define VSOCK_CID_MAX	     0xfffffffeu /* 0xffffffff is VMADDR_CID_ANY */
#define VSOCK_TYPE_STREAM    1u
#define VSOCK_TYPE_SEQPACKET 2u

/* Operations (5.10.6). */
enum vsock_op {
	VSOCK_OP_INVALID = 0,
	VSOCK_OP_REQUEST = 1,
	VSOCK_OP_RESPONSE = 2,
	VSOCK_OP_RST = 3,
	VSOCK_OP_SHUTDOWN = 4,
	VSOCK_OP_RW = 5,
	VSOCK_OP_CREDIT_UPDATE = 6,
	VSOCK_OP_CREDIT_REQUEST = 7,
};

#define VSOCK_SHUTDOWN_F_RECEIVE 1u /* the sender will receive no more */
#define VSOCK_SHUTDOWN_F_SEND	 2u /* the sender will send no more */
#define VSOCK_SHUTDOWN_F_BOTH	 3u

#define VSOCK_EVENT_TRANSPORT_RESET 0u /* struct virtio_vsock_event id (5.10.6.8) */

/* struct virtio_vsock_hdr (5.10.6), little-endian and packed: 44 bytes. */
struct virtio_vsock_hdr {
	uint64_t src_cid;
	uint64_t dst_cid;
	uint32_t src_port;
	uint32_t dst_port;
	uint32_t len;
	uint16_t type;
	uint16_t op;
	uint32_t flags;
	uint32_t buf_alloc;
	uint32_t fwd_cnt;
} __attribute__((packed));
#define VSOCK_HDR_SIZE 44u
_Static_assert(sizeof(struct virtio_vsock_hdr) == VSOCK_HDR_SIZE, "virtio_vsock_hdr is 44 bytes");

/*
 * The device's limits (docs/devices.md, "virtio-vsock"; docs/security.md case 11). Memory is bounded by
 * VSOCK_MAX_CONNS connections, each with at most VSOCK_BUF_ALLOC bytes buffered towards its host socket
 * (allocated only while that socket would block), and a reset queue of VSOCK_RST_QUEUE entries.
 */
#define VSOCK_QUEUE_SIZE       256u	   /* QueueNumMax of each queue */
#define VSOCK_MAX_SEGS	       64u	   /* segments of one chain we look at; more is malformed */
#define VSOCK_MAX_PKT	       (64u << 10) /* payload of one packet, either way (Linux's VIRTIO_VSOCK_MAX_PKT_BUF_SIZE) */
#define VSOCK_BUF_ALLOC	       (256u << 10) /* buf_alloc brisk advertises per connection */
#define VSOCK_CREDIT_THRESHOLD (64u << 10)  /* a CREDIT_UPDATE once this much was forwarded unannounced */
#define VSOCK_MAX_CONNS	       1024u	    /* connections per VM, both directions and pending ones together */
#define VSOCK_RST_QUEUE	       (VSOCK_MAX_CONNS + 64u) /* resets waiting for receive buffers */
#define VSOCK_CONNECT_MAX      32u		       /* bytes of a "CONNECT <port>\n" line, newline included */
#define VSOCK_TIMEOUT_MS       2000u		       /* CONNECT line, guest RESPONSE, clean shutdown: each at most */
#define VSOCK_PORT_SUFFIX_MAX  11u		       /* "_4294967295": PATH_P adds at most this to PATH */

/* Why a transmitted packet was refused (counted per kind; docs/security.md case 11). */
enum vsock_fault {
	VSOCK_OK = 0,
	VSOCK_BAD_CHAIN,     /* the chain is malformed or has a device-writable buffer */
	VSOCK_SHORT,	     /* the readable part is shorter than the 44-byte header */
	VSOCK_LEN_TOO_BIG,   /* len above VSOCK_MAX_PKT */
	VSOCK_LEN_PAST_DATA, /* len above the bytes the chain carries after the header */
	VSOCK_BAD_SRC_CID,   /* src_cid is not the guest's CID */
	VSOCK_BAD_DST_CID,   /* dst_cid is not the host (brisk bridges to the host only) */
	VSOCK_BAD_TYPE,	     /* not VSOCK_TYPE_STREAM */
	VSOCK_BAD_OP,	     /* not one of the seven operations */
	VSOCK_FAULT__COUNT
};

/*
 * Parses a transmit chain's header (5.10.6.4): copied once out of its readable segments (it may be spread
 * over several, section 2.7.4 framing), then checked: no writable segment, len <= VSOCK_MAX_PKT and within
 * the readable bytes after the header, src_cid == guest_cid, dst_cid == VSOCK_HOST_CID, type STREAM, op
 * known. *h is filled whenever the header could be read (also on a fault from VSOCK_LEN_TOO_BIG on), so
 * the caller can reset the connection it names. Pure: no state, no allocation.
 */
enum vsock_fault vsock_parse(const struct virtq_chain *c, uint64_t guest_cid, struct virtio_vsock_hdr *h);

/* "len above 64 KiB", ...: for log lines. */
const char *vsock_fault_name(enum vsock_fault f);

/*
 * Bytes a sender may still send to a peer that advertised `buf_alloc` and `fwd_cnt`, having sent `tx_cnt`
 * in all (5.10.6.3: buf_alloc - (tx_cnt - fwd_cnt), counters wrapping at 2^32). A peer whose numbers do
 * not add up (fwd_cnt ahead of tx_cnt, or in flight above buf_alloc) gets 0.
 */
uint32_t vsock_credit(uint32_t buf_alloc, uint32_t fwd_cnt, uint32_t tx_cnt);

/*
 * Whether a peer that has sent `rx_cnt` bytes in all may send `len` more to a receiver that advertised
 * `buf_alloc` and `fwd_cnt` (the last values the peer was told): the receiver's side of vsock_credit.
 */
bool vsock_credit_allows(uint32_t buf_alloc, uint32_t fwd_cnt, uint32_t rx_cnt, uint32_t len);

/*
 * Parses a hybrid-vsock connect line, [line, line + n) without its '\n' (a trailing '\r' is
 * tolerated): "CONNECT " then a decimal port 0..UINT32_MAX, nothing else. Returns 0 and *port, or -1.
 */
int vsock_parse_connect(const char *line, size_t n, uint32_t *port);

/*
 * Creates the device in window `win` with guest CID `cid` (any: the API takes 0..0xffffffff as
 * Firecracker, --vsock VSOCK_CID_MIN..VSOCK_CID_MAX), listening on the AF_UNIX socket `uds`
 * (created here; a stale socket there is replaced, anything else refused, removed again when the device
 * is destroyed), or on none yet when `uds` is NULL (virtio_vsock_listen below). Returns 0 and *out (may be
 * NULL; valid until the bus destroys the device), or -errno with what is wrong in `err` (-EEXIST: not a
 * socket; -EADDRINUSE: another process listens there; -EINVAL: PATH_P would not fit a socket address).
 */
__attribute__((warn_unused_result)) int virtio_vsock_create(const struct devctx *ctx, struct bus *bus,
							    const struct devmgr_window *win, uint32_t cid,
							    const char *uds, char *err, size_t errlen,
							    struct virtio_vsock **out);

/*
 * The listening socket of a device created with `uds` NULL (a clone server's clone: built ahead of its request,
 * it listens where the request says, docs/cli.md "Clone server"), made as virtio_vsock_create would, with the
 * same refusals; -EBUSY when the device listens already. Before the event loop starts (the main thread, while
 * the VM is built or restored). On failure the device still has no listener.
 */
__attribute__((warn_unused_result)) int virtio_vsock_listen(struct virtio_vsock *v, const char *uds, char *err,
							    size_t errlen);

/*
 * Asks for VIRTIO_VSOCK_EVENT_TRANSPORT_RESET on the event queue (5.10.6.8): the event loop drops every
 * connection (their host sockets are closed; the driver drops its side on the event) and sends the event
 * in the next buffer the driver posted there (none posted: counted, missed). Any thread; asynchronous.
 * Returns 0 or -errno.
 */
int virtio_vsock_transport_reset(struct virtio_vsock *v);

#endif
