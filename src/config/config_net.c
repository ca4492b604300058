/*
 * config_net.c - parsing --net (docs/cli.md): the tap and user-mode backends' keys, MAC addresses, the
 * user-mode network's CIDR and hostfwd rules, and the derived default MAC. Every error names the key and
 * the value; nothing here touches the host.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/config.h"

#define KEY_MAX 256 /* one ",key=value" item */

/* Parses a dotted quad into host byte order. Returns 0 or -EINVAL. */
static int parse_ipv4(const char *s, size_t len, uint32_t *out)
{
	uint32_t v = 0;
	unsigned parts = 0;
	size_t i = 0;

	while (parts < 4) {
		unsigned n = 0, digits = 0;

		while (i < len && s[i] >= '0' && s[i] <= '9' && digits < 4) {
			n = n * 10 + (unsigned)(s[i++] - '0');
			digits++;
		}
		if (!digits || n > 255)
			return -EINVAL;
		v = v << 8 | n;
		if (++parts < 4 && (i >= len || s[i++] != '.'))
			return -EINVAL;
	}
	if (i != len)
		return -EINVAL;
	*out = v;
	return 0;
}

/* A decimal port 1..65535 in [s, s+len). */
static int parse_port(const char *s, size_t len, uint16_t *out)
{
	unsigned long n = 0;

	if (len == 0 || len > 5)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		n = n * 10 + (unsigned long)(s[i] - '0');
	}
	if (n == 0 || n > 65535)
		return -EINVAL;
	*out = (uint16_t)n;
	return 0;
}

static int hex_digit(char c)
{
	return c >= '0' && c <= '9'   ? c - '0'
	       : c >= 'a' && c <= 'f' ? c - 'a' + 10
	       : c >= 'A' && c <= 'F' ? c - 'A' + 10
				      : -1;
}

/* "xx:xx:xx:xx:xx:xx", unicast and not all zero. */
int config_parse_mac(const char *s, uint8_t mac[6], char *err, size_t errlen)
{
	for (unsigned i = 0; i < 6; i++) {
		const char *p = s + 3 * i; /* each test stops at the string's end: no read past it */
		int hi = hex_digit(p[0]), lo = hi < 0 ? -1 : hex_digit(p[1]);

		if (lo < 0 || p[2] != (i < 5 ? ':' : '\0')) {
			snprintf(err, errlen, "mac=%s: expected six hex bytes separated by ':' (02:00:00:00:00:01)", s);
			return -EINVAL;
		}
		mac[i] = (uint8_t)(hi << 4 | lo);
	}
	if (mac[0] & 1) {
		snprintf(err, errlen, "mac=%s is a multicast address (the first byte's lowest bit is set)", s);
		return -EINVAL;
	}
	if (!(mac[0] | mac[1] | mac[2] | mac[3] | mac[4] | mac[5])) {
		snprintf(err, errlen, "mac=%s: the all-zero address is not a station address", s);
		return -EINVAL;
	}
	return 0;
}

/*
 * What a network starting at addr (a prefix of 8 or more: inside one /8) cannot be used for a guest
 * network, or NULL: "this network" 0/8 (RFC 1122: not a destination), loopback 127/8 (the host's own:
 * slirp would hand the guest addresses that mean the host to everything else), multicast 224/4 and the
 * reserved 240/4 with the limited broadcast 255.255.255.255 (no unicast host, gateway or DHCP lease there).
 */
static const char *reserved_net(uint32_t addr)
{
	unsigned first = addr >> 24;

	if (first == 0)
		return "inside 0.0.0.0/8, \"this network\" (RFC 1122)";
	if (first == 127)
		return "inside 127.0.0.0/8, the loopback network";
	if (first >= 224 && first <= 239)
		return "inside 224.0.0.0/4, multicast";
	if (first >= 240)
		return "inside 240.0.0.0/4, reserved (with the broadcast address 255.255.255.255)";
	return NULL;
}

/*
 * "A.B.C.D/N" with N in 8..27 (room for the gateway .2, DNS .3 and DHCP from .15), no host bits set, and a
 * unicast network (reserved_net).
 */
static int parse_cidr(const char *s, struct vm_net *n, char *err, size_t errlen)
{
	const char *why;
	const char *slash = strchr(s, '/');
	unsigned long prefix;
	uint32_t addr;

	if (!slash || parse_ipv4(s, (size_t)(slash - s), &addr) || config_parse_uint(slash + 1, 8, 27, &prefix)) {
		snprintf(err, errlen, "net=%s: expected an IPv4 network A.B.C.D/N with N from 8 to 27", s);
		return -EINVAL;
	}
	if (addr & ~(0xffffffffu << (32 - prefix))) {
		snprintf(err, errlen, "net=%s: host bits set (the network address, e.g. %u.%u.%u.0/%lu)", s, addr >> 24,
			 (addr >> 16) & 0xff, (addr >> 8) & 0xff, prefix);
		return -EINVAL;
	}
	if ((why = reserved_net(addr))) {
		snprintf(err, errlen,
			 "net=%s is %s: a guest network is a range of unicast addresses such as 10.0.2.0/24", s, why);
		return -EINVAL;
	}
	n->user_net = addr;
	n->user_prefix = (unsigned)prefix;
	return 0;
}

/* "[tcp|udp]:[HOSTADDR]:HOSTPORT-[GUESTADDR]:GUESTPORT" (QEMU's -netdev user hostfwd=). */
static int parse_hostfwd(const char *s, struct vm_net *n, char *err, size_t errlen)
{
	struct vm_net_fwd f = {.host_addr = 0x7f000001u};
	const char *p = s, *colon, *dash;

	if (n->nr_fwds == VM_NET_MAX_FWDS) {
		snprintf(err, errlen, "at most %d hostfwd= per interface", VM_NET_MAX_FWDS);
		return -EINVAL;
	}
	if (strncmp(p, "tcp:", 4) == 0) {
		p += 4;
	} else if (strncmp(p, "udp:", 4) == 0) {
		f.udp = true;
		p += 4;
	} else if (*p == ':') {
		p++;
	}
	colon = strchr(p, ':');
	dash = colon ? strchr(colon, '-') : NULL;
	if (!colon || !dash || (colon > p && parse_ipv4(p, (size_t)(colon - p), &f.host_addr)) ||
	    parse_port(colon + 1, (size_t)(dash - colon - 1), &f.host_port))
		goto bad;
	p = dash + 1;
	colon = strchr(p, ':');
	if (!colon || (colon > p && parse_ipv4(p, (size_t)(colon - p), &f.guest_addr)) ||
	    parse_port(colon + 1, strlen(colon + 1), &f.guest_port))
		goto bad;
	n->fwd[n->nr_fwds++] = f;
	return 0;
bad:
	snprintf(err, errlen, "hostfwd=%s: expected [tcp|udp]:[HOSTADDR]:HOSTPORT-[GUESTADDR]:GUESTPORT", s);
	return -EINVAL;
}

static int net_key(const char *kv, struct vm_net *n, char *err, size_t errlen)
{
	if (strncmp(kv, "mac=", 4) == 0) {
		if (config_parse_mac(kv + 4, n->mac, err, errlen))
			return -EINVAL;
		n->has_mac = true;
		return 0;
	}
	if (n->kind == NET_USER && strncmp(kv, "net=", 4) == 0)
		return parse_cidr(kv + 4, n, err, errlen);
	if (n->kind == NET_USER && strncmp(kv, "hostfwd=", 8) == 0)
		return parse_hostfwd(kv + 8, n, err, errlen);
	snprintf(err, errlen, "unknown key '%s' (expected %s)", kv,
		 n->kind == NET_TAP ? "mac=MAC" : "net=CIDR, hostfwd=... or mac=MAC");
	return -EINVAL;
}

/* The first item: "tap=NAME" or "user". */
static int net_kind(const char *item, struct vm_net *n, char *err, size_t errlen)
{
	if (strcmp(item, "user") == 0) {
		n->kind = NET_USER;
		n->user_net = VM_NET_USER_DEFAULT;
		n->user_prefix = 24;
		return 0;
	}
	if (strncmp(item, "tap=", 4) == 0) {
		size_t len = strlen(item + 4);

		if (len == 0 || len > VM_NET_IFNAME_MAX || strpbrk(item + 4, "/: \t\n") || strcmp(item + 4, ".") == 0 ||
		    strcmp(item + 4, "..") == 0) {
			snprintf(err, errlen,
				 "tap=%s: an interface name of 1..%d bytes without '/', ':' or blanks, not . or ..",
				 item + 4, VM_NET_IFNAME_MAX);
			return -EINVAL;
		}
		if (strchr(item + 4, '%')) {
			snprintf(err, errlen,
				 "tap=%s: '%%' makes the kernel pick the name (tap%%d: tap0, tap1, ...), which brisk "
				 "would not know; name the interface (ip tuntap add dev NAME mode tap)",
				 item + 4);
			return -EINVAL;
		}
		n->kind = NET_TAP;
		memcpy(n->tap, item + 4, len + 1);
		return 0;
	}
	snprintf(err, errlen, "'%s': expected tap=NAME or user first", item);
	return -EINVAL;
}

int config_parse_net(const char *s, struct vm_config *cfg, char *err, size_t errlen)
{
	struct vm_net n = {0};
	char item[KEY_MAX];
	bool first = true;

	if (cfg->nr_nets == VM_MAX_NETS) {
		snprintf(err, errlen, "at most %d interfaces", VM_MAX_NETS);
		return -E2BIG;
	}
	for (const char *p = s;; first = false) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (len == 0 || len >= sizeof(item)) {
			snprintf(err, errlen, len ? "an item longer than %zu bytes" : "an empty item",
				 sizeof(item) - 1);
			return -EINVAL;
		}
		memcpy(item, p, len);
		item[len] = '\0';
		if (first ? net_kind(item, &n, err, errlen) : net_key(item, &n, err, errlen))
			return -EINVAL;
		if (!comma)
			break;
		p = comma + 1;
	}
	cfg->net[cfg->nr_nets++] = n;
	return 0;
}

void config_net_mac(const struct vm_net *n, unsigned index, uint8_t mac[6])
{
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a 64 */
	char key[64];
	int len;

	if (n->has_mac) {
		memcpy(mac, n->mac, 6);
		return;
	}
	len = snprintf(key, sizeof(key), "%u/%s%s", index, n->kind == NET_TAP ? "tap:" : "user",
		       n->kind == NET_TAP ? n->tap : "");
	for (int i = 0; i < len && i < (int)sizeof(key); i++) {
		h ^= (uint8_t)key[i];
		h *= 0x100000001b3ull;
	}
	mac[0] = 0x02; /* locally administered, unicast */
	for (unsigned i = 1; i < 6; i++)
		mac[i] = (uint8_t)(h >> (8 * (i - 1)));
}
