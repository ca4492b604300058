/*
 * maxrss.c - run a command and report its peak RSS, free of the launcher's.
 *
 * Linux's ru_maxrss of a process is the maximum over its whole life, and exec
 * records the RSS of the image it replaces (fs/exec.c: exec_mmap() ->
 * setmax_mm_hiwater_rss()). A command spawned straight from Python therefore
 * reports at least the Python interpreter's RSS (~10-15 MiB). This launcher is
 * linked statically and is tiny: its child starts from its ~100 KiB image, so
 * the child's ru_maxrss is the command's own peak.
 *
 * Usage: maxrss COMMAND [ARGS...]
 * After COMMAND ends, prints "maxrss: status S maxrss_kib N" as the last line
 * on stderr and exits with COMMAND's exit status (128+signal if killed).
 */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct rusage ru;
	int ws, status;
	pid_t pid;

	if (argc < 2) {
		fprintf(stderr, "usage: %s COMMAND [ARGS...]\n", argv[0]);
		return 2;
	}
	pid = fork();
	if (pid < 0) {
		perror("maxrss: fork");
		return 127;
	}
	if (pid == 0) {
		execvp(argv[1], argv + 1);
		perror("maxrss: exec");
		_exit(127);
	}
	if (wait4(pid, &ws, 0, &ru) < 0) {
		perror("maxrss: wait4");
		return 127;
	}
	status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	fprintf(stderr, "maxrss: status %d maxrss_kib %ld\n", status, ru.ru_maxrss);
	return status;
}
