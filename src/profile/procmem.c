/* procmem.c - another process's memory as a byte space (/proc/PID/mem): where brisk trace finds a guest's RAM. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/procmem.h"

static int procmem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct procmem *pm = ctx;

	if (addr > (uint64_t)INT64_MAX || len > (uint64_t)INT64_MAX - addr)
		return -EFAULT;
	return pread(pm->fd, buf, len, (off_t)addr) == (ssize_t)len ? 0 : -EFAULT;
}

/* Keeps the PROCMEM's GSPACE_MAX_RANGES largest candidates: writable mappings of at least PROCMEM_MIN_RAM bytes. */
static void keep(struct gspace *g, uint64_t start, uint64_t size)
{
	unsigned at = g->nr;

	if (g->nr == GSPACE_MAX_RANGES) {
		at = 0;
		for (unsigned i = 1; i < g->nr; i++)
			if (g->range[i].size < g->range[at].size)
				at = i;
		if (g->range[at].size >= size)
			return;
	} else {
		g->nr++;
	}
	g->range[at].start = start;
	g->range[at].size = size;
}

int procmem_open(struct procmem *pm, struct gspace *g, pid_t pid, char *err, size_t errlen)
{
	char path[64], line[512];
	FILE *maps;

	pm->fd = -1;
	*g = (struct gspace){.read = procmem_read, .ctx = pm};
	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	maps = fopen(path, "re");
	if (!maps)
		return err_set(err, errlen, -errno, "%s: %s", path, strerror(errno));
	/* "start-end perms offset dev inode [path]" (proc(5)); every line is read whole or skipped */
	while (fgets(line, sizeof(line), maps)) {
		uint64_t start, end;
		char perms[5];

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %4s", &start, &end, perms) == 3 && perms[0] == 'r' &&
		    perms[1] == 'w' && end > start && end - start >= PROCMEM_MIN_RAM && end - start <= PROCMEM_MAX_RAM)
			keep(g, start, end - start);
	}
	fclose(maps);
	if (!g->nr)
		return err_set(err, errlen, -ENOENT, "%s: no writable mapping of %u MiB or more (no guest RAM)", path,
			       PROCMEM_MIN_RAM >> 20);
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)pid);
	pm->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (pm->fd < 0)
		return err_set(err, errlen, -errno, "%s: %s", path, strerror(errno));
	return 0;
}

void procmem_close(struct procmem *pm)
{
	if (pm->fd >= 0)
		close(pm->fd);
	pm->fd = -1;
}
