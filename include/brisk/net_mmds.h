/*
 * net_mmds.h - virtio-net's in-VMM metadata responder (net_mmds.c), Firecracker v1.7.0's MmdsNetworkStack on
 * dumbo: ARP for the MMDS address, a minimal passive TCP on port 80, HTTP by mmds_http_respond (mmds.h).
 * Frames from the guest to the MMDS address are consumed here and never reach the backend; the replies wait
 * in fixed memory until the device's receive path takes them.
 */
#ifndef BRISK_NET_MMDS_H
#define BRISK_NET_MMDS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MMDS_MAX_CONNECTIONS 30u   /* dumbo's DEFAULT_MAX_CONNECTIONS */
#define MMDS_MAX_RESETS	     100u  /* dumbo's DEFAULT_MAX_PENDING_RESETS */
#define MMDS_RCV_BUF	     2500u /* dumbo's RCV_BUF_MAX_SIZE: a request line and headers, at most */
#define MMDS_FRAME_MAX	     1514u /* frames to the MMDS address above this are dropped (no offloads) */
#define MMDS_MSS_DEFAULT     536u  /* RFC 1122 4.2.2.6, without an MSS option */
#define MMDS_MSS_MAX	     1460u
#define MMDS_PORT	     80u
#define MMDS_EVICT_MS	     40000u /* dumbo's EVICTION_THRESHOLD: an idle connection may be replaced */

/* What the stack counted (besides Firecracker's "mmds" metrics group). */
struct net_mmds_stats {
	uint64_t frames;       /* frames consumed */
	uint64_t bad;	       /* malformed: runt, bad header, bad checksum (docs/security.md case 52) */
	uint64_t fragments;    /* IPv4 fragments: dropped (dumbo does not reassemble) */
	uint64_t not_tcp;      /* IPv4 to the address that is not TCP */
	uint64_t out_of_order; /* data not at rcv_nxt: dropped, ACKed */
	uint64_t resets_sent, resets_dropped, evicted, refused;
	uint64_t oversized; /* requests over MMDS_RCV_BUF: connection reset */
	uint64_t requests, frames_out;
};

struct net_mmds;

/* A stack for one interface whose driver uses MAC `guest_mac` (unused: replies go to each frame's source). */
struct net_mmds *net_mmds_new(void);
void net_mmds_free(struct net_mmds *m);

/*
 * Whether the Ethernet frame `f` (len bytes) is for the MMDS at `ipv4` (host order): an ARP whose target is
 * it, an IPv4 packet to it (Firecracker's is_mmds_frame). When it is, the stack takes it (answering or
 * dropping and counting it) and returns true: the caller must not forward it. `csum_partial`: the driver
 * left the TCP checksum to the device (VIRTIO_NET_HDR_F_NEEDS_CSUM): not verified.
 */
bool net_mmds_is_for(uint32_t ipv4, const uint8_t *f, size_t len);
void net_mmds_input(struct net_mmds *m, uint32_t ipv4, const uint8_t *f, size_t len, bool csum_partial);

/* Writes the next reply frame (Ethernet) into buf (cap >= 1514); returns its length, 0 when none waits. */
size_t net_mmds_output(struct net_mmds *m, uint8_t *buf, size_t cap);
/* Whether a reply waits (net_mmds_output would write one). */
bool net_mmds_pending(const struct net_mmds *m);

const struct net_mmds_stats *net_mmds_stats(const struct net_mmds *m);

struct net_tx;
/*
 * virtio-net's transmit hook: when interface `index` answers MMDS (mmds_iface) and the parsed frame `t` is for
 * its address, the frame is copied once out of guest memory into the stack (*m made at the first one) and
 * true returned: the caller completes the chain and never gives the frame to the backend. Else false.
 */
bool net_mmds_tx(struct net_mmds **m, unsigned index, const struct net_tx *t);
/*
 * virtio-net's receive side: the stack's next reply as the backend would deliver it into buf (cap bytes): a
 * 12-byte virtio_net_hdr (no offloads, num_buffers 1) then the frame. Returns the total, 0 when none waits
 * (or m is NULL).
 */
uint32_t net_mmds_rx(struct net_mmds *m, uint8_t *buf, size_t cap);

#endif
