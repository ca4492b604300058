/* procmem.h - another process's memory, read through /proc/PID/mem, as a guestmem.h byte space (brisk trace). */
#ifndef BRISK_PROCMEM_H
#define BRISK_PROCMEM_H

#include <sys/types.h>

#include "brisk/guestmem.h"

#define PROCMEM_MIN_RAM (16u << 20)  /* a mapping smaller than this is not a VM's RAM */
#define PROCMEM_MAX_RAM (1ull << 40) /* nor one larger (a sanitizer's shadow reserves terabytes) */

struct procmem {
	int fd;
};

/*
 * Opens /proc/PID/mem (needs ptrace read access: root, or the same user
 * without Yama's restriction) and makes *g read it: its ranges are the
 * process's readable and writable mappings of PROCMEM_MIN_RAM bytes to
 * PROCMEM_MAX_RAM (the largest GSPACE_MAX_RANGES), where a VMM keeps guest RAM; addresses
 * are the process's virtual addresses. 0, or -errno with err naming the file.
 * procmem_close in either case.
 */
int procmem_open(struct procmem *pm, struct gspace *g, pid_t pid, char *err, size_t errlen);
void procmem_close(struct procmem *pm);

#endif
