/*
 * test_seccomp_bpf.c - the BPF programs brisk embeds (generated at build time by seccomp-gen) are exactly what
 * libseccomp makes of the rules now (src/seccomp/seccomp_rules.c over seccomp_lists.c), before and after the
 * pid is written into them; and the pid goes only where the tgkill rule compares it.
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

#include "../../src/seccomp/seccomp_impl.h"

#define MAX 4096

static struct sock_filter want[MAX];

/* The embedded program of `r` equals libseccomp's export of the rules with `pid`. */
static void assert_same(enum seccomp_role r, uint32_t pid)
{
	unsigned len = 0;

	assert_int_equal(sc_rules_export(r, pid, want, MAX, &len), 0);
	if (len != sc_bpf[r].len)
		fail_msg("role %s: %u instructions from the rules, %u embedded: rebuild (make)", sc_roles[r].name, len,
			 sc_bpf[r].len);
	for (unsigned i = 0; i < len; i++)
		if (memcmp(&want[i], &sc_bpf[r].insns[i], sizeof(want[i])))
			fail_msg("role %s: instruction %u differs: rules {0x%04x %u %u 0x%x}, embedded {0x%04x %u %u "
				 "0x%x}",
				 sc_roles[r].name, i, want[i].code, want[i].jt, want[i].jf, want[i].k,
				 sc_bpf[r].insns[i].code, sc_bpf[r].insns[i].jt, sc_bpf[r].insns[i].jf,
				 sc_bpf[r].insns[i].k);
}

static bool allows_tgkill(enum seccomp_role r)
{
	for (const struct sc_call *c = sc_roles[r].calls; c->name; c++)
		if (c->nr == SCMP_SYS(tgkill))
			return true;
	return false;
}

/* Before seccomp_configure: the programs as generated, with the placeholder; the sites are the tgkill rule's. */
static void test_as_generated(void **state)
{
	(void)state;
	for (int r = 0; r < SECCOMP_ROLES; r++) {
		assert_same((enum seccomp_role)r, SC_PID_PLACEHOLDER);
		assert_true(sc_bpf[r].len > 0 && sc_bpf[r].len <= MAX);
		assert_int_equal(sc_bpf[r].nsites > 0, allows_tgkill((enum seccomp_role)r));
		for (unsigned i = 0; i < sc_bpf[r].nsites; i++) {
			assert_int_equal(sc_bpf[r].insns[sc_bpf[r].site[i]].k, SC_PID_PLACEHOLDER);
			assert_int_equal(sc_bpf[r].insns[sc_bpf[r].site[i]].code, BPF_JMP | BPF_JEQ | BPF_K);
		}
	}
}

/* After it: this process's pid where the rules put it, and nothing else changed. */
static void test_pid_written(void **state)
{
	(void)state;
	assert_int_equal(seccomp_configure(true), 0);
	for (int r = 0; r < SECCOMP_ROLES; r++)
		assert_same((enum seccomp_role)r, (uint32_t)getpid());
}

/* A program that would not fit is refused, not cut short. */
static void test_too_small(void **state)
{
	unsigned len = 0;

	(void)state;
	assert_int_equal(sc_rules_export(SECCOMP_MAIN, 1, want, 8, &len), -E2BIG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_as_generated),
	    cmocka_unit_test(test_pid_written),
	    cmocka_unit_test(test_too_small),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
