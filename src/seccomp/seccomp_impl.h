/* seccomp_impl.h - what the seccomp files share: the role table, the rules, the embedded programs. */
#ifndef BRISK_SECCOMP_IMPL_H
#define BRISK_SECCOMP_IMPL_H

#include <linux/filter.h>
#include <seccomp.h> /* SCMP_SYS: syscall numbers only (brisk links no libseccomp; seccomp_rules.c does) */
#include <stdbool.h>
#include <stdint.h>

#include "brisk/seccomp.h"

/* One allowed syscall: its number on x86-64 (SCMP_SYS) and its name. */
struct sc_call {
	int nr;
	const char *name;
};
#define SC(x)                                                                                                          \
	{                                                                                                              \
		SCMP_SYS(x), #x                                                                                        \
	}

struct sc_role {
	const char *name;
	const struct sc_call *calls; /* ends with {0, NULL} */
};

/* The ioctl requests a role may make (ioctl is allowed by request number only). */
struct sc_ioctls {
	const unsigned long *req;
	unsigned n;
};

/* Indexed by enum seccomp_role (seccomp_lists.c). */
extern const struct sc_role sc_roles[SECCOMP_ROLES];
extern const struct sc_ioctls sc_role_ioctls[SECCOMP_ROLES];

/* Whether `c` repeats a call earlier in `calls` (the lists may name a call twice; the filter has one rule). */
bool sc_seen_before(const struct sc_call *calls, const struct sc_call *c);

/*
 * A role's program as brisk embeds it (generated at build time by seccomp_gen.c into the build directory's
 * gen/seccomp_bpf.c). tgkill is allowed to this process only: its rule compares the first argument with a pid,
 * which the generator writes as SC_PID_PLACEHOLDER (no pid can be one: pid_max is at most 2^22) and lists in
 * `site`; seccomp.c writes the real pid there before the first filter is attached.
 */
#define SC_PID_PLACEHOLDER 0x7ffffff5u
#define SC_PID_SITES_MAX   4
struct sc_bpf {
	struct sock_filter *insns;
	unsigned short len;
	unsigned short nsites;
	unsigned short site[SC_PID_SITES_MAX]; /* indices of the BPF_JMP|BPF_JEQ|BPF_K comparing with the pid */
};
extern struct sc_bpf sc_bpf[SECCOMP_ROLES];

/*
 * Build time (seccomp_rules.c, linked with libseccomp; never into brisk): the role's filter with `pid` in its
 * tgkill rule, exported as classic BPF into out[max]. Returns 0 with *len set, -E2BIG when it does not fit, or a
 * libseccomp -errno.
 */
int sc_rules_export(enum seccomp_role role, uint32_t pid, struct sock_filter *out, unsigned max, unsigned *len);

#endif
