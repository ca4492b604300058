/* jail.c - `brisk jail --id ID --uid U --gid G [...] -- RUN-ARGS`: brisk run confined, after Firecracker's jailer. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "brisk/cli.h"
#include "brisk/exitcode.h"
#include "brisk/jail.h"

#ifndef NSFS_MAGIC
#define NSFS_MAGIC 0x6e736673
#endif

static volatile sig_atomic_t child_pid;

/*
 * SIGTERM/SIGHUP/SIGINT sent to the jail (kill, a supervisor) go on to
 * brisk. A terminal's Ctrl-C (SI_KERNEL) already reached brisk, which is in
 * the same process group: it is not sent twice.
 */
static void forward(int sig, siginfo_t *si, void *ctx)
{
	(void)ctx;
	if (child_pid > 0 && si->si_code != SI_KERNEL)
		kill(child_pid, sig);
}

static void forward_signals(void)
{
	struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
	const int sigs[] = {SIGTERM, SIGHUP, SIGINT, SIGQUIT};

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaction(sigs[i], &sa, NULL);
}

/* --netns PATH: checked to be a namespace file (nsfs), then joined, so the child is born in it. */
static int join_netns(const char *path, char *err, size_t errlen)
{
	struct statfs sfs;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		snprintf(err, errlen, "--netns %s: %s", path, strerror(errno));
		return EXIT_USAGE;
	}
	if (fstatfs(fd, &sfs) || sfs.f_type != NSFS_MAGIC) {
		close(fd);
		snprintf(err, errlen, "--netns %s: not a namespace file (e.g. /var/run/netns/NAME)", path);
		return EXIT_USAGE;
	}
	if (setns(fd, CLONE_NEWNET)) {
		int e = errno;

		close(fd);
		snprintf(err, errlen, "--netns %s: setns(CLONE_NEWNET): %s", path,
			 e == EINVAL ? "not a network namespace" : strerror(e));
		return e == EINVAL ? EXIT_USAGE : EXIT_HOST;
	}
	close(fd);
	return 0;
}

/* <ID>/brisk.pid, outside the jail's root: the jailed brisk's pid as the host sees it. */
static void write_pid_file(const struct jail_tree *t, pid_t pid)
{
	char path[sizeof(t->id_dir) + 16];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", t->id_dir, JAIL_PID_FILE);
	f = fopen(path, "wxe");
	if (!f || fprintf(f, "%d\n", (int)pid) < 0 || fclose(f))
		fprintf(stderr, "brisk jail: warning: writing %s: %s\n", path, strerror(errno));
}

/* The status `brisk jail` ends with: brisk's own, or 128+N when signal N ended it. */
static int wait_child(pid_t pid)
{
	int st;

	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return EXIT_HOST;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Lets the reaper watch the cgroup (one byte), or lets it go at once (EOF, ok false): see jail.h. */
static void release_reaper(int *go_fd, bool ok)
{
	unsigned char go = 1;

	if (*go_fd < 0)
		return;
	if (ok && write(*go_fd, &go, 1) != 1)
		fprintf(stderr, "brisk jail: write to the cgroup's reaper: %s\n", strerror(errno));
	close(*go_fd);
	*go_fd = -1;
}

/*
 * The child is forked into a new PID namespace (brisk is its PID 1: when it
 * ends, every helper it started ends with it), moved into the cgroup, then
 * let go. Without --daemonize the jail waits and returns brisk's status;
 * with it, the jail returns 0 as soon as the exec succeeded. The cgroup's
 * reaper (forked first, in the host's PID namespace) watches the cgroup from
 * the moment the child is in it.
 */
static int launch(const struct jail_config *cfg, struct jail_tree *t, struct jail_cgroup *cg, int *go_fd, bool *ran)
{
	int sync_fds[2], status_fds[2], ret;
	unsigned char go = 1, status;
	char err[512];
	pid_t pid;
	ssize_t n;

	if (pipe2(sync_fds, O_CLOEXEC) || pipe2(status_fds, O_CLOEXEC)) {
		fprintf(stderr, "brisk jail: pipe2: %s\n", strerror(errno));
		return EXIT_HOST;
	}
	if (unshare(CLONE_NEWPID)) {
		fprintf(stderr, "brisk jail: unshare(CLONE_NEWPID): %s\n", strerror(errno));
		return EXIT_HOST;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		fprintf(stderr, "brisk jail: fork into a new PID namespace: %s\n", strerror(errno));
		return EXIT_HOST;
	}
	if (pid == 0) {
		close(sync_fds[1]);
		close(status_fds[0]);
		jail_child(cfg, t, sync_fds[0], status_fds[1]);
	}
	child_pid = pid;
	close(sync_fds[0]);
	close(status_fds[1]);
	write_pid_file(t, pid);
	if ((ret = jail_cgroup_enter(cg, pid, err, sizeof(err)))) {
		if (cfg->nr_cg) {
			fprintf(stderr, "brisk jail: %s\n", err);
			close(sync_fds[1]); /* the child sees EOF and ends */
			wait_child(pid);
			return ret;
		}
		fprintf(stderr, "brisk jail: note: %s: the VM stays in the jail's cgroup\n", err);
	}
	release_reaper(go_fd, ret == 0);
	forward_signals();
	if (write(sync_fds[1], &go, 1) != 1)
		fprintf(stderr, "brisk jail: write to the child: %s\n", strerror(errno));
	close(sync_fds[1]);
	while ((n = read(status_fds[0], &status, 1)) < 0 && errno == EINTR)
		;
	close(status_fds[0]);
	*ran = n == 0;
	if (n == 0 && cfg->daemonize)
		return 0; /* brisk runs; its exit status is its supervisor's business */
	ret = wait_child(pid);
	child_pid = 0;
	return n == 1 ? EXIT_HOST : ret;
}

/* The jail removed the cgroup itself: its reaper is not needed any more (killed and reaped, no zombie left). */
static void stop_reaper(pid_t reaper)
{
	if (reaper <= 0)
		return;
	kill(reaper, SIGKILL);
	while (waitpid(reaper, NULL, 0) < 0 && errno == EINTR)
		;
}

int cmd_jail(int argc, char **argv)
{
	struct jail_config cfg;
	struct jail_tree t = {.root_fd = -1};
	struct jail_cgroup cg = {{0}};
	char err[1024];
	bool ran = false;
	int ret, go_fd = -1;
	pid_t reaper;

	ret = jail_parse_args(argc, argv, &cfg, err, sizeof(err));
	if (ret) {
		if (ret < 0)
			cli_usage(stdout, "jail");
		else
			fprintf(stderr, "brisk jail: %s; try 'brisk help jail'\n", err);
		jail_config_free(&cfg);
		return ret < 0 ? 0 : ret;
	}
	if (geteuid() != 0) {
		fprintf(stderr, "brisk jail: must run as root (it creates namespaces, device nodes and cgroups)\n");
		jail_config_free(&cfg);
		return EXIT_USAGE;
	}
	if (cfg.uid == 0 || cfg.gid == 0)
		fprintf(stderr, "brisk jail: warning: --uid/--gid 0: brisk keeps no capabilities, but root's id "
				"owns files (and /dev/kvm) outside the jail too; use an unprivileged user\n");
	ret = jail_check_inputs(&cfg, &t, err, sizeof(err));
	if (!ret && cfg.netns)
		ret = join_netns(cfg.netns, err, sizeof(err));
	/* The jail directory first: its exclusive mkdir claims the ID, so a cgroup of that ID found then is stale. */
	if (!ret && !(ret = jail_build(&cfg, &t, err, sizeof(err))))
		ret = jail_cgroup_create(&cfg, &cg, err, sizeof(err));
	if (ret) {
		fprintf(stderr, "brisk jail: %s\n", err);
		jail_cgroup_remove(&cg);
		jail_remove(&t);
		jail_config_free(&cfg);
		return ret;
	}
	reaper = jail_cgroup_reaper(&cg, &go_fd);
	if (reaper < 0)
		fprintf(stderr,
			"brisk jail: warning: fork of the cgroup's reaper: %s: %s stays if the jail is killed\n",
			strerror((int)-reaper), cg.dir);
	ret = launch(&cfg, &t, &cg, &go_fd, &ran);
	release_reaper(&go_fd, false);
	if (!cfg.daemonize || !ran) {
		jail_cgroup_remove(&cg);
		stop_reaper(reaper);
	}
	if (ran)
		t.created = false; /* the jail's files (socket, logs, reports) are the caller's now */
	jail_remove(&t);
	jail_config_free(&cfg);
	return ret;
}
