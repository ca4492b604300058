/*
 * init.c - PID 1 of brisk's real-kernel test tier (tests/linux/, docs/boot.md
 * "Booting a real Linux kernel"). Built static (gcc -static -O2) and packed as
 * /init into an initramfs by tests/linux/mkinitramfs.sh; the same binary is
 * /sbin/init on the root disk tests/linux/mkrootfs.sh makes.
 *
 * What it does, in order, each step also recorded as a boot marker:
 *   marker 1      init started (written as soon as /dev/port can be opened)
 *   marker 2      /proc and /sys mounted
 *   marker 3      uptime and command line printed
 *   0xb15c0004    a 32-bit marker through /dev/mem (MMIO 0xd0000000), when the
 *                 kernel allows mapping it (CONFIG_DEVMEM); else skipped
 *   (virtio mode, below)
 *   marker 4      the root disk's init started (disk stage, below: PID 1 after
 *                 switch_root)
 *   marker 5      about to reboot
 * then prints "brisk-init: hello from init" (the line the tests look for),
 * and ends the VM with reboot(RB_AUTOBOOT).
 *
 * Markers by port: /dev/port turns each byte of a write into one outb to
 * consecutive ports, so only 8-bit values reach the marker at 0x440 (the
 * bytes at 0x441.. land on offsets the device ignores); init writes exactly
 * one byte with pwrite(fd, &b, 1, 0x440). By MMIO the full 32 bits arrive
 * (a volatile 32-bit store into an mmap of /dev/mem at 0xd0000000).
 *
 * Why RB_AUTOBOOT and not RB_POWER_OFF by default: with acpi=off (brisk's
 * --acpi off, or ACPI tables without an S5 sleep state) Linux has no
 * power-off method (no pm_power_off), so the kernel turns
 * LINUX_REBOOT_CMD_POWER_OFF into a halt (kernel/reboot.c): the CPUs stop
 * with interrupts off and the VM never ends. A reboot ends it in both of
 * brisk's modes: "reboot=acpi" (ACPI, the default) writes the FADT's reset
 * register, "reboot=k" (--acpi off) sends 0xfe to the keyboard controller;
 * brisk turns either into a clean exit with status 0.
 *
 * Kernel command-line words (read from /proc/cmdline):
 *   brisk.poweroff=1  try RB_POWER_OFF first (to observe that behaviour)
 *   brisk.poweroff=auto  RB_POWER_OFF when the kernel's log says it supports
 *                     ACPI S5 ("ACPI: PM: (supports S0 S5)"), else RB_AUTOBOOT
 *   brisk.shell=1     exec /bin/sh (busybox, for make demo-linux) instead of
 *                     rebooting, and reboot when the shell exits
 *   brisk.virtio=1    virtio mode (tests/linux/test_virtio_linux.py), after
 *                     marker 3:
 *     1. load the modules listed in /lib/modules/order, in that order, from
 *        /lib/modules/NAME.ko with finit_module (uncompressed: fetch-kernel.sh
 *        decompresses .ko.xz/.zst/.gz at build time); "already loaded" is fine;
 *        each gets the command line's NAME.PARAM=VALUE words as its parameters,
 *        as modprobe does ("brisk-init: module NAME: parameters from the command
 *        line: ..."; init_modparams.c), e.g. virtio_mmio.device= words;
 *        then list the virtio devices the kernel bound ("brisk-init: virtio:
 *        ..."); steps 2 and 4 are skipped, not waited for, when no device of
 *        their type is bound (probing is synchronous in finit_module)
 *     2. with console=hvc0 on the command line: wait (bounded) for /dev/hvc0,
 *        write "brisk-hvc0: <id> ..." to it directly, then reopen /dev/console
 *        (hvc0 once it is the preferred console) as fds 0-2, so the rest of
 *        the init's output goes through the virtio console
 *     3. read 64 bytes from /dev/hwrng (bounded by an alarm), print how many
 *        arrived and from which rng (/sys/class/misc/hw_random/rng_current)
 *     4. with brisk.root=DEV (e.g. /dev/vda): wait (bounded) for DEV, mount
 *        it (brisk.rootfstype=, default ext4) on /newroot, check that it holds
 *        /sbin/init, and switch_root into it: the initramfs emptied, /dev
 *        /proc /sys moved into the new root, the new root moved onto /,
 *        chroot, exec /sbin/init with argument "brisk.stage=disk"
 *     3b. with brisk.blkbench=DEV (e.g. /dev/vda, a raw disk that is not the
 *        root: its first N MiB are overwritten): the block benchmark below
 *     3c. the network and vsock words (brisk.ip=, brisk.tcp=, brisk.tcplisten=,
 *        brisk.vsock=, brisk.vsocklisten=): init_net.c says what each does
 *     3d. brisk.snapshot=1: snapshot mode (tests/linux/test_snapshot_linux.py): mounts
 *        the disk on /mnt, ticks every 200 ms (uptime, a write and read-back on the
 *        disk) and serves vsock commands until the host says stop; init_net.c says more
 *     3e. brisk.swapwait=NAME (e.g. vdb, a placeholder drive of 0 sectors): say "brisk-init: swap:
 *        waiting for NAME", wait (at most 120 s) until /sys/block/NAME/size is not 0 (the host's
 *        PATCH /drives after boot: the kernel re-reads the capacity on the config interrupt), say the new
 *        size, mount /dev/NAME (ext4, read-only) on /swapped and say the first line of its brisk-token
 *        (tests/linux/test_disk_swap_linux.py)
 *     3f. brisk.balloon=MIB: balloon mode (tests/linux/test_balloon_linux.py, init_balloon.c)
 *   brisk.id=TOKEN    the token the disk stage writes (default "none")
 *   brisk.httpd=PORT  the disk stage first answers one HTTP request on TCP PORT
 *                     (init_net.c; bench/linux_http.py times exec -> that answer)
 *   brisk.blkbench.mib=N   MiB the sequential rows move (default 64, at most
 *                     the device's size)
 *   brisk.blkbench.rand=N  4 KiB random reads (default 4096)
 *
 * Host mode, "init --blkbench FILE [brisk.blkbench.* words]": the same rows on
 * a file of the host (O_DIRECT where its file system allows it, buffered
 * otherwise: o_direct=0 on the last line), bench/blk-linux.sh's reference.
 *
 * Block benchmark (bench/blk-linux.sh), one thread, queue depth 1, every
 * transfer O_DIRECT (the guest's page cache is bypassed; the host's is the
 * VMM's business) from a posix_memalign'd buffer, timed with CLOCK_MONOTONIC:
 *   seqread     N MiB in 1 MiB pread()s from offset 0
 *   seqwrite    N MiB in 1 MiB pwrite()s from offset 0, then fdatasync (timed
 *               with it: the device's FLUSH); the data is the pattern seqread got
 *   randread4k  COUNT 4 KiB pread()s at 4 KiB-aligned offsets over the whole
 *               device, from a fixed xorshift64 sequence (the same every run)
 * Output: "brisk-blkbench: queue ..." (the queue limits the driver set), then
 * one line "brisk-blkbench: ROW key=value ..." per row, with the block layer's
 * own count of the requests it sent the device for that row (from
 * /sys/block/NAME/stat), so a VMM's request-size limits show, then
 * "brisk-blkbench: done ...".
 *
 * Disk stage (argv[1] = "brisk.stage=disk", PID 1 on the root disk): writes
 * "brisk-wrote id=TOKEN\n" to /brisk-wrote, fsync()s it and /, sync()s,
 * remounts / read-only (which checkpoints ext4's journal, so debugfs on the
 * host sees the file without a journal replay), prints
 * "brisk-init: wrote /brisk-wrote id=TOKEN" and ends the VM as above
 * (test_virtio_linux.py passes brisk.poweroff=auto).
 * Every failure is printed as a "brisk-init: ..." line; the VM still ends.
 */
#define _GNU_SOURCE /* O_DIRECT */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "init.h"

#define BOOTMARK_PORT 0x440	   /* BRISK_BOOTMARK_PORT, include/brisk/abi.h */
#define BOOTMARK_MMIO 0xd0000000UL /* BRISK_BOOTMARK_MMIO */

#define MODULE_DIR	  "/lib/modules"
#define NEWROOT		  "/newroot"
#define STAGE_DISK	  "brisk.stage=disk"
#define WROTE_PATH	  "/brisk-wrote"
#define HWRNG_WAIT	  10 /* seconds for 64 bytes from /dev/hwrng */
#define VIRTIO_ID_BLOCK	  2  /* virtio 1.2 section 5 */
#define VIRTIO_ID_CONSOLE 3
#define BENCH_CHUNK	  (1u << 20) /* sequential rows: bytes per request */
#define BENCH_SMALL	  4096u	     /* random row: bytes per request */

static int port_fd = -1;

void say(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(buf))
		n = sizeof(buf) - 1;
	/* stdout is /dev/console (ttyS0); unbuffered write so nothing is lost at reboot */
	(void)!write(1, buf, (size_t)n);
}

static void marker(uint8_t v)
{
	if (port_fd < 0)
		port_fd = open("/dev/port", O_WRONLY | O_CLOEXEC);
	if (port_fd < 0 || pwrite(port_fd, &v, 1, BOOTMARK_PORT) != 1)
		say("brisk-init: marker %u not written: /dev/port: %s\n", v, strerror(errno));
}

static int marker32_mmio(uint32_t v)
{
	int fd = open("/dev/mem", O_RDWR | O_SYNC | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, BOOTMARK_MMIO);
	int err = p == MAP_FAILED ? -errno : 0;
	close(fd);
	if (err)
		return err;
	*(volatile uint32_t *)p = v;
	munmap(p, 4096);
	return 0;
}

static void read_file(const char *path, char *buf, size_t size)
{
	buf[0] = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	ssize_t n = read(fd, buf, size - 1);
	close(fd);
	if (n < 0)
		n = 0;
	buf[n] = 0;
	char *nl = strchr(buf, '\n');
	if (nl)
		*nl = 0;
}

int has_arg(const char *cmdline, const char *arg)
{
	size_t len = strlen(arg);
	for (const char *p = cmdline; (p = strstr(p, arg)); p += len)
		if ((p == cmdline || p[-1] == ' ') && (p[len] == ' ' || p[len] == 0))
			return 1;
	return 0;
}

/* The value of the last "key=value" word (key given with its '='), or def. */
const char *arg_value(const char *cmdline, const char *key, char *out, size_t size, const char *def)
{
	size_t len = strlen(key);
	const char *found = NULL;
	for (const char *p = cmdline; (p = strstr(p, key)); p += len)
		if (p == cmdline || p[-1] == ' ')
			found = p + len;
	if (!found)
		return def;
	size_t n = strcspn(found, " ");
	if (n >= size)
		n = size - 1;
	memcpy(out, found, n);
	out[n] = 0;
	return out;
}

/* /dev: devtmpfs when the kernel has it, else the nodes we need by hand. */
static void setup_dev(void)
{
	mkdir("/dev", 0755);
	if (mount("devtmpfs", "/dev", "devtmpfs", 0, "") != 0 && errno != EBUSY) {
		mknod("/dev/console", S_IFCHR | 0600, makedev(5, 1));
		mknod("/dev/port", S_IFCHR | 0600, makedev(1, 4));
		mknod("/dev/mem", S_IFCHR | 0600, makedev(1, 1));
		mknod("/dev/null", S_IFCHR | 0666, makedev(1, 3));
	}
	/* The kernel opened fds 0-2 on /dev/console before init; if that failed, do it now. With
	 * console=hvc0 alone there is no console yet (virtio_console is a module): then /dev/null
	 * holds fds 0-2, so files opened later do not land there (use_hvc0 replaces them). */
	if (fcntl(1, F_GETFD) < 0) {
		int fd = open("/dev/console", O_RDWR);
		if (fd < 0)
			fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
	}
}

long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

/* Waits up to DEV_WAIT_MS for path to exist with the given file type (S_IFBLK, S_IFCHR); ms waited or -1. */
static long wait_for_node(const char *path, mode_t type)
{
	long t0 = now_ms();
	struct stat st;
	for (;;) {
		if (stat(path, &st) == 0 && (st.st_mode & S_IFMT) == type)
			return now_ms() - t0;
		if (now_ms() - t0 > DEV_WAIT_MS)
			return -1;
		usleep(20000);
	}
}

/* 1. The modules in /lib/modules/order, in order, each with its parameters from the command line (as modprobe
 * passes them: init_modparams.c). Returns how many failed. */
static int load_modules(const char *cmdline)
{
	FILE *f = fopen(MODULE_DIR "/order", "re");
	if (!f) {
		say("brisk-init: modules: no " MODULE_DIR "/order: %s\n", strerror(errno));
		return 1;
	}
	char name[128], path[256], params[4096];
	int loaded = 0, present = 0, failed = 0;
	long t0 = now_ms();
	while (fgets(name, sizeof(name), f)) {
		name[strcspn(name, " \t\r\n")] = 0;
		if (!name[0] || name[0] == '#')
			continue;
		snprintf(path, sizeof(path), MODULE_DIR "/%s.ko", name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			say("brisk-init: module %s: %s: %s\n", name, path, strerror(errno));
			failed++;
			continue;
		}
		if (module_params(cmdline, name, params, sizeof(params)) < 0)
			say("brisk-init: module %s: its command-line parameters do not fit in %zu bytes: only '%s'\n",
			    name, sizeof(params), params);
		if (params[0])
			say("brisk-init: module %s: parameters from the command line: %s\n", name, params);
		if (syscall(SYS_finit_module, fd, params, 0) == 0) {
			loaded++;
		} else if (errno == EEXIST) {
			present++;
		} else {
			say("brisk-init: module %s: finit_module: %s\n", name, strerror(errno));
			failed++;
		}
		close(fd);
	}
	fclose(f);
	say("brisk-init: modules: %d loaded, %d already present, %d failed (%ld ms)\n", loaded, present, failed,
	    now_ms() - t0);
	return failed;
}

/* 2. hvc0: one line straight to the device, then /dev/console (now hvc0) as fds 0-2. */
static void use_hvc0(const char *id)
{
	long ms = wait_for_node("/dev/hvc0", S_IFCHR);
	if (ms < 0) {
		say("brisk-init: hvc0: /dev/hvc0 did not appear within %d ms\n", DEV_WAIT_MS);
		return;
	}
	int fd = open("/dev/hvc0", O_WRONLY | O_NOCTTY | O_CLOEXEC);
	if (fd < 0) {
		say("brisk-init: hvc0: open /dev/hvc0: %s\n", strerror(errno));
		return;
	}
	char line[256];
	int n = snprintf(line, sizeof(line), "brisk-hvc0: %s written to /dev/hvc0 by pid %d\n", id, (int)getpid());
	ssize_t w = write(fd, line, (size_t)n);
	close(fd);
	say("brisk-init: hvc0: appeared after %ld ms, %zd bytes written to it\n", ms, w);

	char active[256];
	read_file("/sys/class/tty/console/active", active, sizeof(active));
	fd = open("/dev/console", O_RDWR | O_NOCTTY);
	if (fd < 0) {
		say("brisk-init: hvc0: reopen /dev/console: %s\n", strerror(errno));
		return;
	}
	dup2(fd, 0);
	dup2(fd, 1);
	dup2(fd, 2);
	if (fd > 2)
		close(fd);
	/* the last entry of console/active is the device behind /dev/console (sysfs-tty ABI) */
	say("brisk-init: /dev/console reopened; consoles active: %s\n", active);
}

static void on_alarm(int sig)
{
	(void)sig;
}

/* 3. 64 bytes from /dev/hwrng. */
static void read_hwrng(void)
{
	char current[128], avail[256];
	read_file("/sys/class/misc/hw_random/rng_current", current, sizeof(current));
	read_file("/sys/class/misc/hw_random/rng_available", avail, sizeof(avail));
	int fd = open("/dev/hwrng", O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		say("brisk-init: hwrng: no bytes: open /dev/hwrng: %s (rng_current '%s')\n", strerror(errno), current);
		return;
	}
	struct sigaction sa = {.sa_handler = on_alarm}; /* no SA_RESTART: the read returns EINTR */
	sigaction(SIGALRM, &sa, NULL);
	alarm(HWRNG_WAIT);
	unsigned char buf[64];
	size_t got = 0;
	int err = 0;
	long t0 = now_ms();
	while (got < sizeof(buf)) {
		ssize_t n = read(fd, buf + got, sizeof(buf) - got);
		if (n <= 0) {
			err = n < 0 ? errno : 0;
			break;
		}
		got += (size_t)n;
	}
	alarm(0);
	close(fd);
	int nonzero = 0;
	for (size_t i = 0; i < got; i++)
		nonzero += buf[i] != 0;
	if (got == 0) {
		say("brisk-init: hwrng: no bytes from %s: %s (available: %s)\n", current,
		    err ? strerror(err) : "end of file", avail);
		return;
	}
	say("brisk-init: hwrng: %zu bytes from %s in %ld ms, %d non-zero, first 8: "
	    "%02x%02x%02x%02x%02x%02x%02x%02x%s%s\n",
	    got, current, now_ms() - t0, nonzero, buf[0], buf[1], buf[2], buf[3], buf[4], buf[5], buf[6], buf[7],
	    got < sizeof(buf) ? " then: " : "", got < sizeof(buf) ? strerror(err) : "");
}

/* The initramfs's files (those on the same device as dirfd's directory), as switch_root deletes them. */
static void delete_tree(int dirfd, dev_t rootdev)
{
	DIR *d = fdopendir(dirfd);
	if (!d) {
		close(dirfd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_dev != rootdev)
			continue; /* a mount point (/newroot, /dev, ...): not ours to delete */
		if (S_ISDIR(st.st_mode)) {
			int sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (sub >= 0)
				delete_tree(sub, rootdev);
			unlinkat(dirfd, e->d_name, AT_REMOVEDIR);
		} else {
			unlinkat(dirfd, e->d_name, 0);
		}
	}
	closedir(d);
}

/* 4. Mount dev on /newroot and switch_root into it; returns only on failure. */
static void switch_root(const char *dev, const char *fstype)
{
	long ms = wait_for_node(dev, S_IFBLK);
	if (ms < 0) {
		say("brisk-init: root: %s did not appear within %d ms\n", dev, DEV_WAIT_MS);
		return;
	}
	mkdir(NEWROOT, 0755);
	if (mount(dev, NEWROOT, fstype, 0, "") != 0) {
		say("brisk-init: root: mount %s on " NEWROOT " (%s): %s\n", dev, fstype, strerror(errno));
		return;
	}
	char stamp[256];
	read_file(NEWROOT "/etc/brisk-rootfs", stamp, sizeof(stamp));
	if (access(NEWROOT "/sbin/init", X_OK) != 0) {
		say("brisk-init: root: %s mounted but has no executable /sbin/init: %s\n", dev, strerror(errno));
		return;
	}
	say("brisk-init: root: %s appeared after %ld ms, mounted (%s), /sbin/init found, stamp '%s'\n", dev, ms, fstype,
	    stamp);

	/* switch_root, as busybox and util-linux do it */
	static const char *const moved[] = {"/dev", "/proc", "/sys"};
	char target[64];
	for (size_t i = 0; i < sizeof(moved) / sizeof(moved[0]); i++) {
		snprintf(target, sizeof(target), NEWROOT "%s", moved[i]);
		mkdir(target, 0755);
		if (mount(moved[i], target, NULL, MS_MOVE, NULL) != 0) {
			say("brisk-init: root: mount --move %s %s: %s\n", moved[i], target, strerror(errno));
			return;
		}
	}
	if (chdir(NEWROOT) != 0) {
		say("brisk-init: root: chdir " NEWROOT ": %s\n", strerror(errno));
		return;
	}
	struct stat rootst, newst;
	int rootfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (rootfd >= 0 && fstat(rootfd, &rootst) == 0 && stat(".", &newst) == 0 && rootst.st_dev != newst.st_dev)
		delete_tree(rootfd, rootst.st_dev); /* frees the initramfs's memory; closes rootfd */
	else if (rootfd >= 0)
		close(rootfd);
	if (mount(".", "/", NULL, MS_MOVE, NULL) != 0) {
		say("brisk-init: root: mount --move . /: %s\n", strerror(errno));
		return;
	}
	if (chroot(".") != 0 || chdir("/") != 0) {
		say("brisk-init: root: chroot: %s\n", strerror(errno));
		return;
	}
	if (port_fd >= 0) {
		close(port_fd); /* reopened from the new root's /dev */
		port_fd = -1;
	}
	say("brisk-init: root: switched to %s, exec /sbin/init " STAGE_DISK "\n", dev);
	char *argv[] = {"/sbin/init", STAGE_DISK, NULL};
	char *envp[] = {"PATH=/sbin:/bin", "HOME=/", NULL};
	execve("/sbin/init", argv, envp);
	say("brisk-init: root: exec /sbin/init: %s\n", strerror(errno));
}

/* What the kernel bound: "virtio0 type 2 at LNRO0005:00" per device (type: virtio device ID, 2 block,
 * 3 console, 4 entropy; "at": the platform device, named after the ACPI _HID or the command line's). */
static unsigned list_virtio(void) /* returns a bit per device type bound */
{
	unsigned types = 0;
	char line[900] = "", dev[64], path[300], link[300];
	int count = 0;
	DIR *d = opendir("/sys/bus/virtio/devices");
	struct dirent *e;
	while (d && (e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/bus/virtio/devices/%s/device", e->d_name);
		read_file(path, dev, sizeof(dev));
		snprintf(path, sizeof(path), "/sys/bus/virtio/devices/%s", e->d_name);
		ssize_t n = readlink(path, link, sizeof(link) - 1);
		link[n > 0 ? n : 0] = 0;
		/* .../devices/platform/LNRO0005:00/virtio0: the path component before the device's own */
		char *last = strrchr(link, '/');
		if (last)
			*last = 0;
		const char *parent = strrchr(link, '/') ? strrchr(link, '/') + 1 : "?";
		size_t used = strlen(line);
		long type = strtol(dev, NULL, 0);
		snprintf(line + used, sizeof(line) - used, "%s%s type %ld at %s", count ? ", " : "", e->d_name, type,
			 parent);
		if (type > 0 && type < 32)
			types |= 1u << type;
		count++;
	}
	if (d)
		closedir(d);
	say("brisk-init: virtio: %d device%s bound%s%s\n", count, count == 1 ? "" : "s", count ? ": " : "", line);
	return types;
}

/* ---- the block benchmark (brisk.blkbench=DEV; the header comment says what each row does) ---- */

struct bench {
	const char *dev;
	char name[128]; /* DEV's /sys/block name; empty for a file (host mode): no block-layer counts */
	int fd;
	int direct;    /* opened O_DIRECT (a file on a file system without it, e.g. tmpfs before 6.6: not) */
	uint64_t size; /* bytes */
	uint8_t *buf;  /* BENCH_CHUNK bytes, 4 KiB aligned (O_DIRECT) */
};

/* The block layer's counters of a disk (/sys/block/NAME/stat, Documentation/block/stat.rst): [0] read
 * requests, [2] sectors read, [4] write requests, [6] sectors written, [15] flush requests. */
struct blkstat {
	unsigned long long v[17];
};

static void read_blkstat(const struct bench *b, struct blkstat *st)
{
	char path[160], line[512];
	const char *p = line;
	memset(st, 0, sizeof(*st));
	if (!b->name[0])
		return;
	snprintf(path, sizeof(path), "/sys/block/%s/stat", b->name);
	read_file(path, line, sizeof(line));
	for (size_t i = 0; i < sizeof(st->v) / sizeof(st->v[0]); i++) {
		char *end;
		st->v[i] = strtoull(p, &end, 10);
		if (end == p)
			break;
		p = end;
	}
}

/* " requests=R sectors=S flushes=F" for a row that moved data in direction w (0 read, 4 write); "" for a file. */
static const char *stat_words(const struct bench *b, const struct blkstat *s0, const struct blkstat *s1, int w,
			      char *out, size_t size)
{
	out[0] = 0;
	if (b->name[0])
		snprintf(out, size, " requests=%llu sectors=%llu flushes=%llu", s1->v[w] - s0->v[w],
			 s1->v[w + 2] - s0->v[w + 2], s1->v[15] - s0->v[15]);
	return out;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One 1 MiB or 4 KiB transfer; 0 or -errno (-EIO for a short one). */
static int bench_io(const struct bench *b, int write, size_t len, uint64_t off)
{
	ssize_t n = write ? pwrite(b->fd, b->buf, len, (off_t)off) : pread(b->fd, b->buf, len, (off_t)off);
	return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

/* seqread / seqwrite: `bytes` from offset 0 in BENCH_CHUNK requests (a write ends with fdatasync). */
static void bench_seq(const struct bench *b, int write, uint64_t bytes)
{
	const char *row = write ? "seqwrite" : "seqread";
	struct blkstat s0, s1;
	char words[128];
	int err = 0;
	read_blkstat(b, &s0);
	double t0 = now_s();
	for (uint64_t off = 0; off < bytes && !err; off += BENCH_CHUNK)
		err = bench_io(b, write, BENCH_CHUNK, off);
	if (!err && write && fdatasync(b->fd) != 0)
		err = -errno;
	double secs = now_s() - t0;
	read_blkstat(b, &s1);
	if (err) {
		say("brisk-blkbench: %s dev=%s failed: %s\n", row, b->dev, strerror(-err));
		return;
	}
	say("brisk-blkbench: %s dev=%s MiB=%llu s=%.6f MiB/s=%.1f%s\n", row, b->dev, (unsigned long long)(bytes >> 20),
	    secs, (double)bytes / 1048576.0 / secs, stat_words(b, &s0, &s1, write ? 4 : 0, words, sizeof(words)));
}

/* randread4k: `count` 4 KiB reads at 4 KiB-aligned offsets over the whole device, a fixed xorshift64 sequence. */
static void bench_rand(const struct bench *b, unsigned count)
{
	uint64_t x = 0x9e3779b97f4a7c15ull, blocks = b->size / BENCH_SMALL;
	struct blkstat s0, s1;
	char words[128];
	int err = 0;
	read_blkstat(b, &s0);
	double t0 = now_s();
	for (unsigned i = 0; i < count && !err; i++) {
		x ^= x << 13; /* xorshift64 (Marsaglia 2003) */
		x ^= x >> 7;
		x ^= x << 17;
		err = bench_io(b, 0, BENCH_SMALL, x % blocks * BENCH_SMALL);
	}
	double secs = now_s() - t0;
	read_blkstat(b, &s1);
	if (err) {
		say("brisk-blkbench: randread4k dev=%s failed: %s\n", b->dev, strerror(-err));
		return;
	}
	say("brisk-blkbench: randread4k dev=%s count=%u s=%.6f iops=%.0f%s\n", b->dev, count, secs, count / secs,
	    stat_words(b, &s0, &s1, 0, words, sizeof(words)));
}

/* The queue limits the driver set (virtio-blk's seg_max and size_max end up in max_segments, max_segment_size). */
static void bench_queue(const struct bench *b)
{
	static const char *const keys[] = {"max_sectors_kb",   "max_hw_sectors_kb",  "max_segments",
					   "max_segment_size", "logical_block_size", "scheduler"};
	char line[512] = "", path[200], v[128];
	int used = 0;
	for (size_t i = 0; b->name[0] && i < sizeof(keys) / sizeof(keys[0]); i++) {
		snprintf(path, sizeof(path), "/sys/block/%s/queue/%s", b->name, keys[i]);
		read_file(path, v, sizeof(v));
		for (char *c = v; *c; c++)
			if (*c == ' ')
				*c = ','; /* "[none] mq-deadline": one word */
		used += snprintf(line + used, sizeof(line) - (size_t)used, " %s=%s", keys[i], v[0] ? v : "?");
		if (used >= (int)sizeof(line))
			break;
	}
	say("brisk-blkbench: queue dev=%s size_MiB=%llu%s\n", b->dev, (unsigned long long)(b->size >> 20), line);
}

/* Opens DEV (a block device; a regular file in host mode) O_DIRECT, a file without it where refused. */
static int bench_open(struct bench *b)
{
	struct stat st;
	if (stat(b->dev, &st) != 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		const char *slash = strrchr(b->dev, '/');
		snprintf(b->name, sizeof(b->name), "%s", slash ? slash + 1 : b->dev);
	}
	b->direct = 1;
	b->fd = open(b->dev, O_RDWR | O_DIRECT | O_CLOEXEC);
	if (b->fd < 0 && errno == EINVAL && S_ISREG(st.st_mode)) {
		b->direct = 0;
		b->fd = open(b->dev, O_RDWR | O_CLOEXEC);
	}
	if (b->fd < 0)
		return -errno;
	off_t end = lseek(b->fd, 0, SEEK_END);
	if (end <= 0)
		return end < 0 ? -errno : -ENOSPC;
	b->size = (uint64_t)end;
	if (posix_memalign((void **)&b->buf, 4096, BENCH_CHUNK))
		return -ENOMEM;
	memset(b->buf, 0x5a, BENCH_CHUNK); /* the pages present before the clock starts */
	return 0;
}

/* The benchmark on DEV with the brisk.blkbench.* words of `cmdline`. */
static void blkbench(const char *cmdline, const char *dev)
{
	char num[32], root[128];
	struct bench b = {.dev = dev, .fd = -1};
	if (arg_value(cmdline, "brisk.root=", root, sizeof(root), NULL) && !strcmp(root, dev)) {
		say("brisk-blkbench: %s is the root disk (brisk.root=): not overwriting it\n", dev);
		return;
	}
	struct stat st;
	if ((stat(dev, &st) != 0 || !S_ISREG(st.st_mode)) && wait_for_node(dev, S_IFBLK) < 0) {
		say("brisk-blkbench: %s did not appear within %d ms\n", dev, DEV_WAIT_MS);
		return;
	}
	int err = bench_open(&b);
	if (err) {
		say("brisk-blkbench: %s: %s\n", dev, strerror(-err));
	} else {
		uint64_t mib = strtoull(arg_value(cmdline, "brisk.blkbench.mib=", num, sizeof(num), "64"), NULL, 0);
		if (mib == 0 || mib > (b.size >> 20))
			mib = b.size >> 20;
		unsigned count =
		    (unsigned)strtoul(arg_value(cmdline, "brisk.blkbench.rand=", num, sizeof(num), "4096"), NULL, 0);
		bench_queue(&b);
		if (mib) {
			bench_seq(&b, 0, mib << 20);
			bench_seq(&b, 1, mib << 20);
		}
		if (count && b.size >= BENCH_SMALL)
			bench_rand(&b, count);
		say("brisk-blkbench: done dev=%s threads=1 qd=1 o_direct=%d\n", dev, b.direct);
	}
	free(b.buf);
	if (b.fd >= 0)
		close(b.fd);
}

/* 3e. brisk.swapwait=NAME: a placeholder drive swapped by the host after boot, seen and mounted. */
static void swap_wait(const char *name)
{
	char path[160], size[64] = "0", dev[160], token[256];
	long t0 = now_ms();

	snprintf(path, sizeof(path), "/sys/block/%s/size", name);
	snprintf(dev, sizeof(dev), "/dev/%s", name);
	say("brisk-init: swap: waiting for %s (size %s)\n", name, (read_file(path, size, sizeof(size)), size));
	while ((read_file(path, size, sizeof(size)), strcmp(size, "0") == 0 || !size[0]) && now_ms() - t0 < 120000)
		usleep(50000);
	say("brisk-init: swap: %s has %s sectors after %ld ms\n", name, size, now_ms() - t0);
	mkdir("/swapped", 0755);
	if (mount(dev, "/swapped", "ext4", MS_RDONLY, NULL) != 0) {
		say("brisk-init: swap: mount %s: %s\n", dev, strerror(errno));
		return;
	}
	read_file("/swapped/brisk-token", token, sizeof(token));
	say("brisk-init: swap: mounted %s, brisk-token \"%s\"\n", dev, token);
	umount("/swapped");
}

static void virtio_mode(const char *cmdline)
{
	char id[128], root[128], fstype[32];
	arg_value(cmdline, "brisk.id=", id, sizeof(id), "none");
	load_modules(cmdline);
	/* probing is synchronous in finit_module: a device not bound by now will not appear (no waiting) */
	unsigned types = list_virtio();
	if (has_arg(cmdline, "console=hvc0")) {
		if (types & (1u << VIRTIO_ID_CONSOLE))
			use_hvc0(id);
		else
			say("brisk-init: hvc0: no virtio console bound\n");
	}
	read_hwrng();
	net_mode(cmdline); /* brisk.ip=, brisk.tcp=, brisk.vsock=, ...: init_net.c */
	char balloon[16];
	if (arg_value(cmdline, "brisk.balloon=", balloon, sizeof(balloon), NULL))
		balloon_mode(cmdline); /* returns once inflated and deflated: init_balloon.c */
	if (has_arg(cmdline, "brisk.snapshot=1"))
		snapshot_mode(cmdline); /* ticks until the host says stop: init_net.c */
	char bench_dev[128];
	if (arg_value(cmdline, "brisk.blkbench=", bench_dev, sizeof(bench_dev), NULL)) {
		if (types & (1u << VIRTIO_ID_BLOCK) || strncmp(bench_dev, "/dev/vd", 7))
			blkbench(cmdline, bench_dev);
		else
			say("brisk-blkbench: no virtio block device bound for %s\n", bench_dev);
	}
	char swap_dev[64];
	if (arg_value(cmdline, "brisk.swapwait=", swap_dev, sizeof(swap_dev), NULL))
		swap_wait(swap_dev);
	if (arg_value(cmdline, "brisk.root=", root, sizeof(root), NULL)) {
		if (strncmp(root, "/dev/vd", 7) || (types & (1u << VIRTIO_ID_BLOCK)))
			switch_root(root, arg_value(cmdline, "brisk.rootfstype=", fstype, sizeof(fstype), "ext4"));
		else
			say("brisk-init: root: no virtio block device bound for %s\n", root);
	}
}

/* Whether the kernel can power off through ACPI S5: its log says "ACPI: PM: (supports S0 S5)" (acpi_sleep_init).
 * Without that, RB_POWER_OFF is a halt and the VM would never end. */
static int kernel_has_s5(void)
{
	static char log[1 << 18];
	int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, sizeof(log) - 1);
	if (n <= 0)
		return 0;
	log[n] = 0;
	const char *p = strstr(log, "ACPI: PM: (supports");
	if (!p)
		return 0;
	size_t len = strcspn(p, "\n");
	const char *s5 = strstr(p, " S5");
	return s5 && s5 < p + len;
}

__attribute__((noreturn)) static void finish(const char *cmdline)
{
	marker(5);
	sync();
	int s5 = has_arg(cmdline, "brisk.poweroff=auto") && kernel_has_s5();
	if (has_arg(cmdline, "brisk.poweroff=auto"))
		say("brisk-init: power-off through ACPI S5 %s\n", s5 ? "supported" : "not supported: rebooting");
	if (s5 || has_arg(cmdline, "brisk.poweroff=1")) {
		say("brisk-init: reboot(RB_POWER_OFF)\n");
		reboot(RB_POWER_OFF);
		say("brisk-init: RB_POWER_OFF returned: %s\n", strerror(errno));
	}
	say("brisk-init: reboot(RB_AUTOBOOT)\n");
	reboot(RB_AUTOBOOT);
	say("brisk-init: reboot failed: %s\n", strerror(errno));
	for (;;)
		pause();
}

/* PID 1 on the root disk: write the file the test reads back from the image, make it durable, end the VM. */
__attribute__((noreturn)) static void disk_stage(void)
{
	char cmdline[4096], id[128], mnt[512] = "?";
	marker(4); /* the root disk's init runs: the end of a boot with its root on the disk */
	/* /proc, /sys and /dev were moved here by the initramfs's init */
	read_file("/proc/cmdline", cmdline, sizeof(cmdline));
	arg_value(cmdline, "brisk.id=", id, sizeof(id), "none");
	FILE *m = fopen("/proc/self/mounts", "re");
	char line[512];
	while (m && fgets(line, sizeof(line), m)) {
		char src[256], dir[256], type[64];
		if (sscanf(line, "%255s %255s %63s", src, dir, type) == 3 && !strcmp(dir, "/"))
			snprintf(mnt, sizeof(mnt), "%s (%s)", src, type); /* the last "/" entry is the visible one */
	}
	if (m)
		fclose(m);
	say("brisk-init: disk stage: pid %d, / is %s\n", (int)getpid(), mnt);
	httpd_once(cmdline); /* brisk.httpd=PORT: bench/linux_http.py's first response */

	char content[192];
	int len = snprintf(content, sizeof(content), "brisk-wrote id=%s\n", id);
	const char *step = "open";
	int fd = open(WROTE_PATH, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int ok = fd >= 0;
	if (ok) {
		step = "write";
		ok = write(fd, content, (size_t)len) == len;
	}
	if (ok) {
		step = "fsync";
		ok = fsync(fd) == 0;
	}
	if (fd >= 0)
		close(fd);
	if (ok) {
		step = "fsync of / after creating";
		int dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		ok = dfd >= 0 && fsync(dfd) == 0;
		if (dfd >= 0)
			close(dfd);
	}
	if (!ok) {
		say("brisk-init: disk stage: %s %s failed: %s\n", step, WROTE_PATH, strerror(errno));
		finish(cmdline);
	}
	sync();
	char back[192];
	read_file(WROTE_PATH, back, sizeof(back));
	int same = !strncmp(back, content, strlen(back)) && strlen(back) + 1 == (size_t)len;
	/* read-only: ext4 checkpoints its journal, so the host's debugfs sees the file without a replay */
	int ro = mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL);
	int ro_errno = errno;
	say("brisk-init: wrote %s id=%s (fsync, sync; read back %s; / remounted read-only: %s)\n", WROTE_PATH, id,
	    same ? "the same" : "DIFFERENT", ro == 0 ? "yes" : strerror(ro_errno));
	finish(cmdline);
}

/* Host mode, "init --blkbench FILE [brisk.blkbench.* words]": the same rows on a file or block device of the
 * host (bench/blk-linux.sh's reference: the host's own read of the image the guests use). */
static int host_blkbench(int argc, char **argv)
{
	char words[1024] = "";
	size_t used = 0;
	for (int i = 1; i < argc && used < sizeof(words); i++)
		used += (size_t)snprintf(words + used, sizeof(words) - used, "%s%s", i > 1 ? " " : "", argv[i]);
	blkbench(words, argv[0]);
	return 0;
}

int main(int argc, char **argv)
{
	char uptime[128], cmdline[4096], release[128];

	if (argc > 1 && !strcmp(argv[1], STAGE_DISK))
		disk_stage(); /* does not return */
	if (argc > 2 && !strcmp(argv[1], "--blkbench"))
		return host_blkbench(argc - 2, argv + 2);
	if (getpid() != 1) { /* run by hand on a host: the rest mounts, and ends by rebooting the machine */
		fprintf(stderr, "usage: %s --blkbench FILE [brisk.blkbench.* words] (otherwise only PID 1 of a VM)\n",
			argv[0]);
		return 2;
	}

	setup_dev();
	marker(1);
	say("brisk-init: started as pid %d\n", (int)getpid());

	mkdir("/proc", 0555);
	mkdir("/sys", 0555);
	if (mount("proc", "/proc", "proc", 0, "") != 0)
		say("brisk-init: mount /proc: %s\n", strerror(errno));
	if (mount("sysfs", "/sys", "sysfs", 0, "") != 0)
		say("brisk-init: mount /sys: %s\n", strerror(errno));
	marker(2);

	read_file("/proc/uptime", uptime, sizeof(uptime));
	read_file("/proc/cmdline", cmdline, sizeof(cmdline));
	read_file("/proc/sys/kernel/osrelease", release, sizeof(release));
	char *sp = strchr(uptime, ' ');
	if (sp)
		*sp = 0;
	say("brisk-init: kernel %s\n", release);
	say("brisk-init: uptime %s s\n", uptime);
	say("brisk-init: cmdline %s\n", cmdline);
	marker(3);

	int err = marker32_mmio(0xb15c0004u);
	if (err)
		say("brisk-init: 32-bit MMIO marker skipped: /dev/mem at 0x%lx: %s\n", BOOTMARK_MMIO, strerror(-err));
	else
		say("brisk-init: 32-bit MMIO marker 0xb15c0004 written\n");

	if (has_arg(cmdline, "brisk.virtio=1"))
		virtio_mode(cmdline); /* with brisk.root=: returns only when the switch failed */

	say("brisk-init: hello from init\n");

	if (has_arg(cmdline, "brisk.shell=1") && access("/bin/sh", X_OK) == 0) {
		say("brisk-init: starting /bin/sh (exit the shell to end the VM)\n");
		pid_t pid = fork();
		if (pid == 0) {
			setsid();
			/* ttyS0 rather than /dev/console: the console can't be a controlling tty (job control) */
			int fd = open("/dev/ttyS0", O_RDWR);
			if (fd < 0)
				fd = open("/dev/console", O_RDWR);
			if (fd >= 0) {
				dup2(fd, 0);
				dup2(fd, 1);
				dup2(fd, 2);
			}
			char *sh_argv[] = {"/bin/sh", "-l", NULL};
			char *sh_envp[] = {"PATH=/bin:/sbin:/usr/bin:/usr/sbin", "HOME=/", "TERM=linux", "PS1=brisk# ",
					   NULL};
			execve("/bin/sh", sh_argv, sh_envp);
			_exit(127);
		}
		while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}

	finish(cmdline);
}
