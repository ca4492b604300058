/*
 * init.c - PID 1 of brisk's real-kernel test tier (tests/linux/, docs/boot.md
 * "Booting a real Linux kernel"). Built static (gcc -static -O2) and packed as
 * /init into an initramfs by tests/linux/mkinitramfs.sh.
 *
 * What it does, in order, each step also recorded as a boot marker:
 *   marker 1      init started (written as soon as /dev/port can be opened)
 *   marker 2      /proc and /sys mounted
 *   marker 3      uptime and command line printed
 *   0xb15c0004    a 32-bit marker through /dev/mem (MMIO 0xd0000000), when the
 *                 kernel allows mapping it (CONFIG_DEVMEM); else skipped
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
 * Why RB_AUTOBOOT and not RB_POWER_OFF: brisk provides no ACPI, and with
 * acpi=off Linux has no power-off method (no pm_power_off), so the kernel
 * turns LINUX_REBOOT_CMD_POWER_OFF into a halt (kernel/reboot.c): the CPUs
 * stop with interrupts off and the VM never ends. A reboot with brisk's
 * default "reboot=k" goes through the keyboard controller (0xfe to port
 * 0x64), which brisk turns into a clean exit with status 0.
 *
 * Kernel argument brisk.poweroff=1 makes init try RB_POWER_OFF first (to
 * observe that behaviour); brisk.shell=1 execs /bin/sh (busybox, for make
 * demo-linux) instead of rebooting, and reboots when the shell exits.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define BOOTMARK_PORT 0x440	   /* BRISK_BOOTMARK_PORT, include/brisk/abi.h */
#define BOOTMARK_MMIO 0xd0000000UL /* BRISK_BOOTMARK_MMIO */

static int port_fd = -1;

static void say(const char *fmt, ...)
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

static int has_arg(const char *cmdline, const char *arg)
{
	size_t len = strlen(arg);
	for (const char *p = cmdline; (p = strstr(p, arg)); p += len)
		if ((p == cmdline || p[-1] == ' ') && (p[len] == ' ' || p[len] == 0))
			return 1;
	return 0;
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
	/* The kernel opened fds 0-2 on /dev/console before init; if that failed, do it now. */
	if (fcntl(1, F_GETFD) < 0) {
		int fd = open("/dev/console", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
	}
}

int main(void)
{
	char uptime[128], cmdline[4096], release[128];

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
			char *argv[] = {"/bin/sh", "-l", NULL};
			char *envp[] = {"PATH=/bin:/sbin:/usr/bin:/usr/sbin", "HOME=/", "TERM=linux", "PS1=brisk# ",
					NULL};
			execve("/bin/sh", argv, envp);
			_exit(127);
		}
		while (pid > 0 && waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
	}

	marker(5);
	sync();
	if (has_arg(cmdline, "brisk.poweroff=1")) {
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
