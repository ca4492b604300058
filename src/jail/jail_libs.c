/* jail_libs.c - the shared objects a dynamically linked helper needs: found by its loader, placed in the jail. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/exitcode.h"
#include "brisk/jail.h"

#define LIST_TIMEOUT_MS 10000 /* the loader lists in milliseconds; a hang is not waited out */
#define PT_INTERP_TYPE	3     /* ELF program header type (System V gABI, "Program Header") */

/* err_set for the exit-status convention of jail_fs.c. */
#define FAIL(status, ...) (err_set(err, errlen, 0, __VA_ARGS__), (status))

/* PT_INTERP of an open ELF64 file (little-endian, as x86-64): 1 with out filled, 0 none, -EINVAL malformed. */
static int read_interp(int fd, char *out, size_t len)
{
	unsigned char eh[64], ph[56];
	uint64_t phoff, off, size;
	uint16_t phentsize, phnum;
	uint32_t type;

	if (pread(fd, eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) || memcmp(eh, "\177ELF", 4) || eh[4] != 2)
		return 0; /* not ELF64 */
	memcpy(&phoff, eh + 0x20, 8);
	memcpy(&phentsize, eh + 0x36, 2);
	memcpy(&phnum, eh + 0x38, 2);
	for (unsigned i = 0; i < phnum && phentsize >= sizeof(ph); i++) {
		if (pread(fd, ph, sizeof(ph), (off_t)(phoff + (uint64_t)i * phentsize)) != (ssize_t)sizeof(ph))
			return 0;
		memcpy(&type, ph, 4);
		if (type != PT_INTERP_TYPE)
			continue;
		memcpy(&off, ph + 0x08, 8);  /* p_offset */
		memcpy(&size, ph + 0x20, 8); /* p_filesz, the terminating NUL included */
		if (size < 2 || size > len || off > INT64_MAX ||
		    pread(fd, out, (size_t)size, (off_t)off) != (ssize_t)size || out[size - 1] != '\0' ||
		    strlen(out) != size - 1)
			return -EINVAL;
		return 1;
	}
	return 0;
}

int jail_elf_interp(const char *path, char *out, size_t len)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* O_NONBLOCK: a FIFO would block open() */
	int ret;

	if (fd < 0)
		return 0;
	ret = read_interp(fd, out, len);
	close(fd);
	return ret;
}

/* ---- the loader's list ---------------------------------------------------------------------------------- */

/* The vDSO: mapped by the kernel, no file ("linux-vdso.so.1"; "linux-gate.so.1" on i386). */
static bool is_vdso(const char *name)
{
	return !strchr(name, '/') && (strncmp(name, "linux-vdso", 10) == 0 || strncmp(name, "linux-gate", 10) == 0);
}

/*
 * Why path cannot be placed at the same place in the jail, or NULL: it must
 * be absolute, below a directory (the jail's "/" holds brisk, the helpers
 * and the placed files), of components 1..NAME_MAX long that are not "." or
 * "..", and shorter than PATH_MAX.
 */
static const char *bad_path(const char *path)
{
	const char *c = path + 1;

	if (path[0] != '/')
		return "not an absolute path";
	if (strlen(path) >= PATH_MAX)
		return "longer than PATH_MAX";
	if (!strchr(c, '/'))
		return "directly in /, where the jail keeps its own files";
	for (const char *next; c; c = next) {
		size_t n = (next = strchr(c, '/')) ? (size_t)(next - c) : strlen(c);

		if (next)
			next++;
		if (n == 0)
			return "an empty component";
		if (n > NAME_MAX)
			return "a component longer than NAME_MAX";
		if ((n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return "a '.' or '..' component";
	}
	return NULL;
}

/* s without its trailing " (0xHEX)" (the load address), cut in place; false when it has none. */
static bool cut_address(char *s)
{
	char *addr = NULL, *hex;

	for (char *p = strstr(s, " (0x"); p; p = strstr(p + 1, " (0x"))
		addr = p;
	if (!addr)
		return false;
	hex = addr + 4;
	if (strlen(hex) < 2 || strspn(hex, "0123456789abcdefABCDEF") != strlen(hex) - 1 || hex[strlen(hex) - 1] != ')')
		return false;
	*addr = '\0';
	return true;
}

/* Adds path to libs unless it is there already. Returns 0 or -E2BIG. */
static int add_path(struct jail_libs *libs, char *path)
{
	for (unsigned i = 0; i < libs->nr; i++)
		if (strcmp(libs->path[i], path) == 0)
			return 0;
	if (libs->nr == JAIL_MAX_LIBS)
		return -E2BIG;
	libs->path[libs->nr++] = path;
	return 0;
}

/* One line (no newline) into libs; n is its number for messages. */
static int parse_line(char *line, unsigned n, struct jail_libs *libs, char *err, size_t errlen)
{
	char *s = line + 1, *arrow, *name = NULL;
	const char *why;

	if (strlen(line) > JAIL_LD_LINE_MAX)
		return err_set(err, errlen, -EINVAL, "line %u of the loader's list: longer than %d bytes", n,
			       JAIL_LD_LINE_MAX);
	if (line[0] != '\t')
		return err_set(err, errlen, -EINVAL, "line %u of the loader's list: unexpected '%.80s'", n, line);
	if ((arrow = strstr(s, " => "))) {
		*arrow = '\0';
		name = s;
		s = arrow + 4;
		if (strcmp(s, "not found") == 0)
			return err_set(err, errlen, -ENOENT, "the shared object %s: not found", name);
		if (is_vdso(name))
			return 0; /* old glibc: "linux-vdso.so.1 =>  (0x...)" */
	}
	if (!cut_address(s))
		return err_set(err, errlen, -EINVAL, "line %u of the loader's list: no load address in '%.80s'", n, s);
	if (!name && is_vdso(s))
		return 0;
	if ((why = bad_path(s)))
		return err_set(err, errlen, -EINVAL, "the shared object %s%s%.200s: %s", name ? name : "",
			       name ? " => " : "", s, why);
	if (add_path(libs, s))
		return err_set(err, errlen, -E2BIG, "more than %d shared objects: brisk jail places at most %d",
			       JAIL_MAX_LIBS, JAIL_MAX_LIBS);
	return 0;
}

int jail_ld_list_parse(char *text, struct jail_libs *libs, char *err, size_t errlen)
{
	unsigned n = 0;
	int ret;

	libs->nr = 0;
	for (char *line = text, *next; line; line = next) {
		if ((next = strchr(line, '\n')))
			*next++ = '\0';
		n++;
		if (*line && (ret = parse_line(line, n, libs, err, errlen)))
			return ret;
	}
	return 0;
}

/* ---- running the loader --------------------------------------------------------------------------------- */

/*
 * The loader's process: stdin /dev/null, stdout and stderr the two pipes,
 * no other fd, an empty environment (no LD_LIBRARY_PATH, LD_PRELOAD or
 * anything else steers it), chrooted into root_fd when that is >= 0.
 * Single-threaded parent: what it calls after fork is safe. Never returns.
 */
_Noreturn static void list_child(const char *interp, const char *prog, int root_fd, int out, int errp)
{
	char *argv[] = {(char *)interp, "--list", (char *)prog, NULL};
	char *envp[] = {NULL};
	int null = open("/dev/null", O_RDONLY);
	const char *what = "dup2";

	/* Above 2 first: the pipes may have been given fds 0-2 if the jail's caller closed them. */
	out = fcntl(out, F_DUPFD, 10);
	errp = fcntl(errp, F_DUPFD, 10);
	if (null < 0 || out < 0 || errp < 0 || dup2(null, 0) < 0 || dup2(out, 1) < 0 || dup2(errp, 2) < 0)
		goto fail;
	what = "chroot into the jail";
	if (root_fd >= 0 && (fchdir(root_fd) || chroot(".")))
		goto fail;
#ifdef SYS_close_range
	syscall(SYS_close_range, 3U, ~0U, 0U); /* before 5.9: brisk jail opens its own fds O_CLOEXEC */
#endif
	what = "execve";
	execve(interp, argv, envp);
fail:
	dprintf(2, "%s %s: %s\n", what, interp, strerror(errno)); /* the pipe, or the jail's stderr */
	_exit(127);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One read from pf->fd into buf[*len..cap), or discarded once full; at EOF pf->fd is closed and set to -1. */
static int read_some(struct pollfd *pf, char *buf, size_t *len, size_t cap)
{
	char sink[512];
	bool room = *len < cap;
	ssize_t n = read(pf->fd, room ? buf + *len : sink, room ? cap - *len : sizeof(sink));

	if (n < 0)
		return errno == EINTR ? 0 : -errno;
	if (n == 0) {
		close(pf->fd);
		pf->fd = -1;
	} else if (room) {
		*len += (size_t)n;
	}
	return 0;
}

/*
 * Both pipes read to their end: stdout into text (more than JAIL_LD_OUT_MAX
 * bytes: -EFBIG), stderr's first msglen - 1 bytes into msg (the rest
 * discarded). Closes both fds. Returns 0, -EFBIG, -ETIMEDOUT or -errno.
 */
static int collect(int fds[2], char *text, size_t *len, char *msg, size_t msglen, size_t *mlen)
{
	struct pollfd pf[2] = {{.fd = fds[0], .events = POLLIN}, {.fd = fds[1], .events = POLLIN}};
	int64_t deadline = now_ms() + LIST_TIMEOUT_MS;
	int ret = 0;

	while (!ret && (pf[0].fd >= 0 || pf[1].fd >= 0)) {
		int64_t left = deadline - now_ms();
		int n = left > 0 ? poll(pf, 2, (int)left) : 0;

		if (n < 0 && errno == EINTR)
			continue; /* revents are stale: poll again */
		if (n <= 0)
			ret = n == 0 ? -ETIMEDOUT : -errno;
		if (!ret && pf[0].fd >= 0 && pf[0].revents)
			ret = read_some(&pf[0], text, len, JAIL_LD_OUT_MAX + 1);
		if (!ret && pf[1].fd >= 0 && pf[1].revents)
			ret = read_some(&pf[1], msg, mlen, msglen - 1);
		if (!ret && *len > JAIL_LD_OUT_MAX)
			ret = -EFBIG;
	}
	for (int i = 0; i < 2; i++)
		if (pf[i].fd >= 0)
			close(pf[i].fd);
	return ret;
}

/*
 * Runs `interp --list prog` (list_child), its stdout NUL-terminated into
 * text[0..JAIL_LD_OUT_MAX], the first line of its stderr into msg. Returns 0
 * with its wait status in *status, or -errno (-EFBIG, -ETIMEDOUT: the loader
 * was killed).
 */
static int run_list(const char *interp, const char *prog, int root_fd, char *text, char *msg, size_t msglen,
		    int *status)
{
	int out[2], errp[2], fds[2], ret, e;
	size_t len = 0, mlen = 0;
	pid_t pid;

	if (pipe2(out, O_CLOEXEC))
		return -errno;
	if (pipe2(errp, O_CLOEXEC)) {
		e = errno;
		close(out[0]);
		close(out[1]);
		return -e;
	}
	pid = fork();
	if (pid == 0)
		list_child(interp, prog, root_fd, out[1], errp[1]);
	e = errno;
	close(out[1]);
	close(errp[1]);
	fds[0] = out[0];
	fds[1] = errp[0];
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -e;
	}
	ret = collect(fds, text, &len, msg, msglen, &mlen);
	if (ret)
		kill(pid, SIGKILL);
	while (waitpid(pid, status, 0) < 0)
		if (errno != EINTR)
			return ret ? ret : -errno;
	text[len <= JAIL_LD_OUT_MAX ? len : JAIL_LD_OUT_MAX] = '\0';
	msg[mlen] = '\0';
	msg[strcspn(msg, "\n")] = '\0';
	return ret;
}

/* run_list's outcome as this file's exit-status convention; `where` says on the host or in the jail. */
static int list_status(int ret, int status, const char *name, const char *interp, const char *where, const char *msg,
		       char *err, size_t errlen)
{
	if (ret == -EFBIG)
		return FAIL(EXIT_USAGE, "%s: `%s --list` %s printed more than %d bytes", name, interp, where,
			    JAIL_LD_OUT_MAX);
	if (ret == -ETIMEDOUT)
		return FAIL(EXIT_HOST, "%s: `%s --list` %s did not end within %d s (killed)", name, interp, where,
			    LIST_TIMEOUT_MS / 1000);
	if (ret)
		return FAIL(EXIT_HOST, "%s: running `%s --list` %s: %s", name, interp, where, strerror(-ret));
	if (WIFSIGNALED(status))
		return FAIL(EXIT_HOST, "%s: `%s --list` %s ended by signal %d", name, interp, where, WTERMSIG(status));
	if (WEXITSTATUS(status))
		return FAIL(EXIT_USAGE, "%s: `%s --list` %s failed (exit %d): %s", name, interp, where,
			    WEXITSTATUS(status), *msg ? msg : "no message");
	return 0;
}

/* The interpreter brisk jail runs as root: absolute, placeable, and a regular file only root can change. */
static int check_interp(const char *name, const char *helper, const char *interp, char *err, size_t errlen)
{
	const char *why = bad_path(interp);
	struct stat st;

	if (why)
		return FAIL(EXIT_USAGE, "%s %s: its program interpreter %.200s: %s", name, helper, interp, why);
	if (stat(interp, &st))
		return FAIL(EXIT_USAGE, "%s %s: its program interpreter %s: %s", name, helper, interp, strerror(errno));
	if (!S_ISREG(st.st_mode))
		return FAIL(EXIT_USAGE, "%s %s: its program interpreter %s is not a regular file", name, helper,
			    interp);
	if (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)))
		return FAIL(EXIT_USAGE,
			    "%s %s: its program interpreter %s is not root's or is writable by group or others: "
			    "brisk jail would run it as root",
			    name, helper, interp);
	return 0;
}

/* libs->interp run on helper, its list parsed. */
static int list_libs(const char *name, const char *helper, struct jail_libs *libs, char *err, size_t errlen)
{
	char msg[512], why[512], who[PATH_MAX + 64];
	int status = 0, ret;

	snprintf(who, sizeof(who), "%s %s", name, helper);
	ret = run_list(libs->interp, helper, -1, libs->text, msg, sizeof(msg), &status);
	if ((ret = list_status(ret, status, who, libs->interp, "on the host", msg, err, errlen)))
		return ret;
	if (jail_ld_list_parse(libs->text, libs, why, sizeof(why)))
		return FAIL(EXIT_USAGE, "%s %s: %s", name, helper, why);
	return 0;
}

int jail_libs_find(const char *name, const char *helper, struct jail_libs **libs, char *err, size_t errlen)
{
	struct jail_libs *l;
	int ret;

	*libs = NULL;
	if (!(l = calloc(1, sizeof(*l))))
		return FAIL(EXIT_HOST, "%s: %s", name, strerror(ENOMEM));
	ret = jail_elf_interp(helper, l->interp, sizeof(l->interp));
	if (ret <= 0) {
		free(l);
		return ret ? FAIL(EXIT_USAGE, "%s %s: a malformed PT_INTERP", name, helper) : 0; /* 0: static */
	}
	if ((ret = check_interp(name, helper, l->interp, err, errlen)) ||
	    (ret = list_libs(name, helper, l, err, errlen))) {
		free(l);
		return ret;
	}
	*libs = l;
	return 0;
}

/* ---- placing them ----------------------------------------------------------------------------------------- */

int jail_copy(int in, const char *src, int dirfd, const char *name, mode_t mode, const char *shown, char *err,
	      size_t errlen)
{
	char buf[1 << 16];
	int out, ret = 0;
	ssize_t n;

	out = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (out < 0)
		return FAIL(EXIT_HOST, "create %s: %s", shown, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			ret = FAIL(EXIT_HOST, "read %s: %s", src, strerror(errno));
			break;
		}
		errno = 0;
		if (write(out, buf, (size_t)n) != n) {
			ret = FAIL(EXIT_HOST, "copy %s to %s: %s", src, shown, errno ? strerror(errno) : "short write");
			break;
		}
	}
	if (!ret && fchmod(out, mode))
		ret = FAIL(EXIT_HOST, "chmod %s: %s", shown, strerror(errno));
	close(out);
	return ret;
}

/*
 * The directory rel[0..len) under dirfd opened, each missing component
 * created root:root 0755 (whatever the umask); no symlink is followed.
 * Returns the fd or -1 (errno set).
 */
static int open_dirs(int dirfd, const char *rel, size_t len)
{
	char comp[NAME_MAX + 1];
	int fd = dup(dirfd), next;

	for (size_t at = 0, n; fd >= 0 && at < len; at += n + 1, fd = next) {
		n = strcspn(rel + at, "/");
		snprintf(comp, sizeof(comp), "%.*s", (int)n, rel + at);
		if (mkdirat(fd, comp, 0755) && errno != EEXIST) {
			next = -1;
		} else if ((next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0 &&
			   (fchown(next, 0, 0) || fchmod(next, 0755))) {
			close(next);
			next = -1;
		}
		close(fd);
	}
	return fd;
}

/* The host file path (symlinks followed) at the same path in the jail: a hard link when safe, else a copy. */
static int place_file(const struct jail_tree *t, const char *path, mode_t mode, char *err, size_t errlen)
{
	const char *leaf = strrchr(path, '/') + 1;
	char shown[sizeof(t->root) + PATH_MAX];
	struct stat st, dst;
	int dir, in, ret = 0;

	snprintf(shown, sizeof(shown), "%s%s", t->root, path);
	if ((dir = open_dirs(t->root_fd, path + 1, (size_t)(leaf - path - 2))) < 0)
		return FAIL(EXIT_HOST, "mkdir the directories of %s: %s", shown, strerror(errno));
	if (fstatat(dir, leaf, &st, AT_SYMLINK_NOFOLLOW) == 0) {
		close(dir);
		return 0; /* placed for the other helper: the same host path is the same file */
	}
	if ((in = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0 || fstat(in, &st) || fstat(dir, &dst))
		ret = FAIL(EXIT_USAGE, "shared object %s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		ret = FAIL(EXIT_USAGE, "shared object %s: not a regular file", path);
	/* A link shares the host's inode: only one nobody but root can change. Any failure (EXDEV: another
	 * mount of the same file system) leaves a copy, frozen as the file is now. */
	else if (!(st.st_dev == dst.st_dev && st.st_uid == 0 && !(st.st_mode & (S_IWGRP | S_IWOTH)) &&
		   linkat(in, "", dir, leaf, AT_EMPTY_PATH) == 0))
		ret = jail_copy(in, path, dir, leaf, mode, shown, err, errlen);
	if (in >= 0)
		close(in);
	close(dir);
	return ret;
}

/* The jail's loader, chrooted there (no ld.so.cache, no LD_* variables), lists /NAME without a miss. */
static int check_in_jail(const struct jail_tree *t, const char *name, const struct jail_libs *libs, char *err,
			 size_t errlen)
{
	char prog[64], msg[512], why[512];
	struct jail_libs *again = malloc(sizeof(*again));
	int status = 0, ret;
	bool missed;

	if (!again)
		return FAIL(EXIT_HOST, "%s: %s", name, strerror(ENOMEM));
	snprintf(prog, sizeof(prog), "/%s", name);
	ret = run_list(libs->interp, prog, t->root_fd, again->text, msg, sizeof(msg), &status);
	missed = !ret && WIFEXITED(status) && WEXITSTATUS(status);
	ret = list_status(ret, status, name, libs->interp, "in the jail", msg, err, errlen);
	if (!ret && jail_ld_list_parse(again->text, again, why, sizeof(why)))
		ret = FAIL(EXIT_USAGE, "%s: in the jail: %s", name, why);
	if (missed && err && strlen(err) + 1 < errlen)
		snprintf(err + strlen(err), errlen - strlen(err), "%s",
			 " (the host finds a library through /etc/ld.so.cache outside the loader's default "
			 "directories, or through $ORIGIN: not where the jail's loader looks)");
	free(again);
	return ret;
}

int jail_libs_place(const struct jail_tree *t, const char *name, const struct jail_libs *libs, char *err, size_t errlen)
{
	int ret = place_file(t, libs->interp, 0755, err, errlen);

	for (unsigned i = 0; !ret && i < libs->nr; i++)
		ret = place_file(t, libs->path[i], strcmp(libs->path[i], libs->interp) ? 0644 : 0755, err, errlen);
	return ret ? ret : check_in_jail(t, name, libs, err, errlen);
}
