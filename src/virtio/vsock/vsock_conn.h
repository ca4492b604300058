/*
 * vsock_conn.h - private to the virtio-vsock device: its state, shared by vsock.c (the virtqueues and
 * packets) and vsock_conn.c (the connection table and the host's AF_UNIX sockets).
 *
 * Threads: everything here runs on the VM's I/O event loop with the transport's I/O lock held (notify,
 * the watched fds), or under that lock from activate/reset; nothing is shared with another thread but
 * `reset_requested`.
 *
 * Memory: at most VSOCK_MAX_CONNS connections (host clients still writing their CONNECT line included),
 * each with a transmit buffer of VSOCK_BUF_ALLOC bytes that exists only while its host socket would block,
 * and a fixed ring of VSOCK_RST_QUEUE resets. Nothing the guest or a host client does allocates more.
 */
#ifndef BRISK_VSOCK_CONN_H
#define BRISK_VSOCK_CONN_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/un.h>

#include "brisk/virtio_vsock.h"

struct virtio_mmio;

#define VSOCK_HASH 256u /* buckets of the (local port, peer port) table */

enum conn_state {
	CONN_LINE,	  /* a host client; its "CONNECT <port>\n" not read yet: no ports, not in the table */
	CONN_CONNECTING,  /* host-initiated: REQUEST queued or sent, waiting for the guest's RESPONSE */
	CONN_ESTABLISHED, /* bytes flow */
};

/* What a connection has to tell the guest (besides data): sent in this order, one packet each. */
#define PEND_REQUEST  1u
#define PEND_RESPONSE 2u
#define PEND_CREDIT   4u /* CREDIT_UPDATE, unless another packet carried fwd_cnt first */
#define PEND_SHUTDOWN 8u /* shut_flags */

/* Bytes from the guest that the host socket did not take yet: a ring of VSOCK_BUF_ALLOC bytes. */
struct vsock_txbuf {
	uint8_t *data; /* NULL while empty */
	uint32_t head, len;
};

struct vsock_conn {
	struct vsock_dev *v;
	int fd; /* the host's AF_UNIX stream, non-blocking */
	enum conn_state state;
	uint32_t local_port; /* brisk's side (the host's port: P, or an ephemeral one for host clients) */
	uint32_t peer_port;  /* the guest's port */
	unsigned pending;    /* PEND_* */
	uint32_t shut_flags; /* SHUTDOWN flags to send */
	bool rx_ready;	     /* the host socket may hold data or EOF for the guest (EPOLLIN seen) */
	bool eof;	     /* the host socket's EOF was read: no more data for the guest */
	bool hup;	     /* the host socket hung up both ways */
	bool dead;	     /* killed: freed by vsock_reap, ignored until then */
	uint32_t peer_shut;  /* SHUTDOWN flags the guest sent */
	/* Credit (5.10.6.3). Towards the guest: */
	uint32_t peer_buf_alloc, peer_fwd_cnt; /* as the guest last advertised */
	uint32_t tx_cnt;		       /* bytes sent to the guest */
	/* From the guest: */
	uint32_t rx_cnt;   /* bytes the guest sent */
	uint32_t fwd_cnt;  /* of them, written to the host socket */
	uint32_t fwd_sent; /* fwd_cnt as last told to the guest */
	struct vsock_txbuf buf;
	uint32_t events; /* epoll interest now registered (when in_epoll) */
	bool in_epoll;
	uint64_t deadline_ms; /* CLOCK_MONOTONIC; 0: none */
	char line[VSOCK_CONNECT_MAX];
	uint32_t line_len;
	struct vsock_conn *hnext;	  /* table bucket */
	struct vsock_conn *pnext, *pprev; /* the pending list, while `queued` */
	bool queued;
	struct vsock_conn *next, *prev; /* every live connection */
};

struct vsock_rst {
	uint32_t local_port, peer_port;
};

struct vsock_stats {
	uint64_t conns_host, conns_guest; /* connections established, by who asked */
	uint64_t bytes_to_host, bytes_to_guest;
	uint64_t rst_sent, rst_dropped; /* resets sent; resets lost to a full reset ring */
	uint64_t malformed;		/* packets refused (vsock_parse) or out of protocol */
	uint64_t credit_violations;	/* the guest sent beyond the credit it was given */
	uint64_t refused;		/* guest connections nobody listened for (PATH_P) */
	uint64_t over_limit;		/* connections refused at VSOCK_MAX_CONNS */
	uint64_t bad_lines;		/* host clients whose CONNECT line was wrong, late or missing */
	uint64_t timeouts;		/* guest RESPONSE or clean shutdown that never came */
	uint64_t events_missed;		/* transport resets with no event buffer posted */
};

struct vsock_dev {
	struct virtio_mmio *t;
	uint64_t cid;
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	int listen_fd, ep_fd, timer_fd, kick_fd;
	bool active; /* between activate and reset */
	bool timer_on;
	struct vsock_conn *table[VSOCK_HASH];
	struct vsock_conn *all;
	struct vsock_conn *pend_head, *pend_tail;
	struct vsock_conn *dead;
	unsigned nr_conns;
	uint32_t next_port; /* the next ephemeral port to try for a host client */
	struct vsock_rst rst[VSOCK_RST_QUEUE];
	unsigned rst_head, rst_len;
	_Atomic bool reset_requested;
	struct vsock_stats stats;
};

/* ---- vsock_conn.c --------------------------------------------------------------------------------- */

/* The connection (local_port, peer_port), or NULL. */
struct vsock_conn *vsock_conn_find(struct vsock_dev *v, uint32_t local_port, uint32_t peer_port);
/*
 * Ends `c`: closes its host socket, takes it out of every list and frees it at the next vsock_reap.
 * `rst`: tell the guest (a RST queued, when c had ports and the device is active).
 */
void vsock_conn_kill(struct vsock_dev *v, struct vsock_conn *c, bool rst);
/*
 * Kills every connection without telling the guest (device reset, transport reset, destroy) and forgets
 * the queued resets. `keep_lines`: host clients still writing their CONNECT line stay (they have no guest
 * side yet; a driver reset at boot must not cost them their connection).
 */
void vsock_conn_kill_all(struct vsock_dev *v, bool keep_lines);
/* Frees the connections killed since the last call (after an event batch: no stale pointer is used). */
void vsock_reap(struct vsock_dev *v);
/* Puts c on the pending list if it has something for the guest and is not there yet. */
void vsock_conn_schedule(struct vsock_conn *c);
/* Takes the first connection off the pending list, or NULL. */
struct vsock_conn *vsock_conn_next(struct vsock_dev *v);
/* Bytes c may send to the guest now (its credit). */
uint32_t vsock_conn_credit(const struct vsock_conn *c);
/* Queues a RST for (local_port, peer_port); a full ring drops it (counted). */
void vsock_rst_push(struct vsock_dev *v, uint32_t local_port, uint32_t peer_port);
/* Registers c's epoll interest from its state. */
void vsock_conn_update_epoll(struct vsock_conn *c);
/*
 * The guest asked for (cid 2, local_port) from peer_port: connects to PATH_<local_port> (non-blocking).
 * Returns the new connection (RESPONSE pending), or NULL (refused, over the limit: a RST is queued).
 */
struct vsock_conn *vsock_conn_connect(struct vsock_dev *v, uint32_t local_port, uint32_t peer_port);
/*
 * Forwards `len` bytes of the chain's readable data from byte `off` on to c's host socket, buffering what
 * it does not take (the caller checked the credit, so it fits). Returns 0, or -1 when the socket failed
 * (the caller resets the connection).
 */
int vsock_conn_to_host(struct vsock_conn *c, const struct virtq_chain *ch, uint64_t off, uint32_t len);
/* The guest shut c down (flags) or c's buffer drained: shuts the host socket, ends c once both sides are done. */
void vsock_conn_shutdown_progress(struct vsock_conn *c);
/* The inner epoll fd is readable: serves the listener and the host sockets. */
void vsock_host_events(struct vsock_dev *v);
/* The timer ticked: ends connections past their deadline. */
void vsock_tick(struct vsock_dev *v);
/* Arms the tick timer (idempotent). */
void vsock_timer_arm(struct vsock_dev *v);
/* Milliseconds on CLOCK_MONOTONIC. */
uint64_t vsock_now_ms(void);

/* ---- vsock.c ----------------------------------------------------------------------------------------- */

/* Fills receive buffers from the reset ring and the pending connections, while both last. */
void vsock_fill_rx(struct vsock_dev *v);

#endif
