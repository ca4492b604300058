/*
 * cpuid_cache_cost.c - would a cross-process cache of KVM's supported CPUID pay?  *
 * A cache file could replace KVM_GET_SUPPORTED_CPUID (+ KVM_GET_MSR_INDEX_LIST)
 * in every process after the first, but only behind a key that proves the
 * table is still current: the boot (/proc/sys/kernel/random/boot_id), KVM's
 *  module parameters (every parameter file of each /sys/module/kvm... module), the
 * kernel (uname) and the CPU (CPUID signature; microcode from /proc/cpuinfo).
 * This measures both sides in a fresh process each time: what the ioctls
 * cost, and what computing that key costs. docs/performance.md has the
 * result and the decision.
 *
 * Usage: cpuid_cache_cost [-n RUNS]   (each run forks a fresh process)
 * Exit status: 0, 1 when /dev/kvm cannot be used.
 */
#include <dirent.h>
#include <fcntl.h>
#include <linux/kvm.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUID_ENTRIES 256
#define MAX_MSRS	  1024

static uint64_t hash = 5381;

static double now_us(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void hash_file(const char *path)
{
	char buf[4096];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			hash = hash * 33 + (uint8_t)buf[i];
	close(fd);
}

static unsigned hash_dir(const char *dir)
{
	char path[1024];
	struct dirent *e;
	unsigned n = 0;
	DIR *d = opendir(dir);

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		hash_file(path);
		n++;
	}
	closedir(d);
	return n;
}

/* Every parameter file of every module named kvm*: what a key must cover. */
static unsigned hash_kvm_params(void)
{
	char path[512];
	struct dirent *e;
	unsigned n = 0;
	DIR *d = opendir("/sys/module");

	if (!d)
		return 0;
	while ((e = readdir(d))) {
		if (strncmp(e->d_name, "kvm", 3) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/module/%s/parameters", e->d_name);
		n += hash_dir(path);
	}
	closedir(d);
	return n;
}

static int one_run(void)
{
	struct kvm_cpuid2 *c = calloc(1, sizeof(*c) + MAX_CPUID_ENTRIES * sizeof(c->entries[0]));
	struct {
		struct kvm_msr_list l;
		uint32_t idx[MAX_MSRS];
	} ml = {.l.nmsrs = MAX_MSRS};
	uint32_t a, b, cx, dx;
	struct utsname u;
	double t0, t1, t2, t3, t4;
	unsigned params;
	int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);

	if (kvm < 0 || !c) {
		perror("/dev/kvm");
		return 1;
	}
	c->nent = MAX_CPUID_ENTRIES;
	t0 = now_us();
	if (ioctl(kvm, KVM_GET_SUPPORTED_CPUID, c) < 0) {
		perror("KVM_GET_SUPPORTED_CPUID");
		return 1;
	}
	t1 = now_us();
	if (ioctl(kvm, KVM_GET_MSR_INDEX_LIST, &ml) < 0) {
		perror("KVM_GET_MSR_INDEX_LIST");
		return 1;
	}
	t2 = now_us();
	hash_file("/proc/sys/kernel/random/boot_id");
	params = hash_kvm_params();
	uname(&u);
	hash ^= (uint64_t)strlen(u.release);
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(cx), "=d"(dx) : "a"(1), "c"(0));
	hash ^= a;
	t3 = now_us();
	hash_file("/proc/cpuinfo"); /* the microcode revision is only there */
	t4 = now_us();
	printf("GET_SUPPORTED_CPUID %6.0f us  GET_MSR_INDEX_LIST %4.0f us  key: boot_id + %u kvm params + uname + "
	       "cpuid %6.0f us, + /proc/cpuinfo %4.0f us  (hash %016llx)\n",
	       t1 - t0, t2 - t1, params, t3 - t2, t4 - t3, (unsigned long long)hash);
	return 0;
}

int main(int argc, char **argv)
{
	int runs = 9;

	if (argc == 3 && strcmp(argv[1], "-n") == 0)
		runs = atoi(argv[2]);
	else if (argc != 1) {
		fprintf(stderr, "usage: cpuid_cache_cost [-n RUNS]\n");
		return 2;
	}
	fflush(stdout);
	for (int i = 0; i < runs; i++) {
		int st;
		pid_t p = fork();

		if (p == 0) {
			int r = one_run();

			fflush(stdout);
			_exit(r);
		}
		if (p < 0 || waitpid(p, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st))
			return 1;
	}
	return 0;
}
