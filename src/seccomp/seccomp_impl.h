/* seccomp_impl.h - what seccomp.c and seccomp_lists.c share: the role table. */
#ifndef BRISK_SECCOMP_IMPL_H
#define BRISK_SECCOMP_IMPL_H

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

/* Indexed by enum seccomp_role. */
extern const struct sc_role sc_roles[SECCOMP_ROLES];

#endif
