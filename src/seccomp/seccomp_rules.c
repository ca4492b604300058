/*
 * seccomp_rules.c - each thread role's allow-list (seccomp_lists.c) as a libseccomp filter: the rules with their
 * argument checks. Build time only: seccomp_gen.c turns them into the BPF programs brisk embeds, and
 * tests/unit/test_seccomp_bpf.c checks the embedded programs against them; brisk itself never links libseccomp.
 */
#include <errno.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "seccomp_impl.h"

bool sc_seen_before(const struct sc_call *calls, const struct sc_call *c)
{
	for (const struct sc_call *p = calls; p < c; p++)
		if (p->nr == c->nr)
			return true;
	return false;
}

static bool role_allows(const struct sc_call *calls, int nr)
{
	for (const struct sc_call *c = calls; c->name; c++)
		if (c->nr == nr)
			return true;
	return false;
}

/* Roles with no socket of their own may only send(2) a log line to stderr (a socket stderr, log.c). */
static bool sendto_stderr_only(enum seccomp_role role)
{
	return role == SECCOMP_VCPU || role == SECCOMP_BLK;
}

/* One allow rule for `nr`, with the argument checks some calls get. Returns 0 or a libseccomp -errno. */
static int add_call(scmp_filter_ctx ctx, enum seccomp_role role, int nr, uint32_t pid)
{
	const struct sc_ioctls *io = &sc_role_ioctls[role];
	int ret = 0;

#if defined(__SANITIZE_ADDRESS__)
	if ((role == SECCOMP_MAIN || role == SECCOMP_API_HELPER || role == SECCOMP_SLIRP_HELPER) &&
	    (nr == SCMP_SYS(prctl) || nr == SCMP_SYS(clone))) /* LeakSanitizer at exit */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
#endif
	if (nr == SCMP_SYS(ioctl)) {
		for (unsigned i = 0; i < io->n && !ret; i++)
			ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
					       SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffu, io->req[i]));
		return ret;
	}
	if (nr == SCMP_SYS(mmap) || nr == SCMP_SYS(mprotect)) /* no new executable memory */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A2(SCMP_CMP_MASKED_EQ, PROT_EXEC, 0));
	if (nr == SCMP_SYS(tgkill)) /* threads of this process only */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)pid));
	if (nr == SCMP_SYS(kill)) /* a helper that would not exit */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A1(SCMP_CMP_EQ, SIGKILL));
	if (nr == SCMP_SYS(clone)) /* threads, never a process */
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1,
					SCMP_A0(SCMP_CMP_MASKED_EQ, CLONE_THREAD, CLONE_THREAD));
	if (nr == SCMP_SYS(clone3)) /* its flags are behind a pointer: glibc falls back to clone on ENOSYS */
		return seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), nr, 0);
	if (nr == SCMP_SYS(prctl)) { /* adding a filter, naming a thread */
		ret = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_NO_NEW_PRIVS));
		return ret ? ret : seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME));
	}
	if (nr == SCMP_SYS(seccomp))
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, SECCOMP_SET_MODE_FILTER));
	if (nr == SCMP_SYS(sendto) && sendto_stderr_only(role))
		return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 1, SCMP_A0(SCMP_CMP_EQ, STDERR_FILENO));
	return seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0);
}

/* The role's filter as a libseccomp context (NULL and *ret when that fails). */
static scmp_filter_ctx build(enum seccomp_role role, uint32_t pid, int *ret)
{
	const struct sc_call *calls = sc_roles[role].calls;
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_TRAP);

	*ret = 0;
	if (!ctx) {
		*ret = -ENOMEM;
		return NULL;
	}
	for (const struct sc_call *c = calls; c->name && !*ret; c++)
		if (!sc_seen_before(calls, c))
			*ret = add_call(ctx, role, c->nr, pid);
	/*
	 * A role that opens no file still gets an answer, not the report, for openat: glibc's malloc reads
	 * /proc/sys/vm/overcommit_memory the first time it shrinks a thread's heap, and copes with EACCES.
	 */
	if (!*ret && !role_allows(calls, SCMP_SYS(openat)))
		*ret = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EACCES), SCMP_SYS(openat), 0);
	if (*ret) {
		seccomp_release(ctx);
		return NULL;
	}
	return ctx;
}

int sc_rules_export(enum seccomp_role role, uint32_t pid, struct sock_filter *out, unsigned max, unsigned *len)
{
	int ret, fd = memfd_create("brisk-seccomp", MFD_CLOEXEC);
	scmp_filter_ctx ctx = build(role, pid, &ret);
	off_t size = -1;

	if (fd < 0)
		ret = -errno;
	else if (ctx && (ret = seccomp_export_bpf(ctx, fd)) == 0)
		size = lseek(fd, 0, SEEK_END);
	if (!ret && (size <= 0 || size % (off_t)sizeof(*out) || (size_t)size > max * sizeof(*out) ||
		     pread(fd, out, (size_t)size, 0) != size))
		ret = size > 0 && (size_t)size > max * sizeof(*out) ? -E2BIG : -EIO;
	if (!ret)
		*len = (unsigned)(size / (off_t)sizeof(*out));
	if (ctx)
		seccomp_release(ctx);
	if (fd >= 0)
		close(fd);
	return ret;
}
