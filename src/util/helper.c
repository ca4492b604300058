/* helper.c - finding brisk's helper programs next to the brisk binary (include/brisk/helper.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/helper.h"

int helper_find(const char *name, const char *env_var, char *out, size_t len)
{
	const char *env = getenv(env_var);
	char exe[PATH_MAX];
	ssize_t n;
	char *slash;

	if (env && *env) {
		if ((size_t)snprintf(out, len, "%s", env) >= len)
			return -ENAMETOOLONG;
		return access(out, X_OK) == 0 ? 0 : -errno;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n < 0)
		return -errno;
	exe[n] = '\0';
	for (int up = 0; up < 2; up++) {
		slash = strrchr(exe, '/');
		if (!slash)
			break;
		*slash = '\0';
		if ((size_t)snprintf(out, len, "%s/%s", exe, name) < len && access(out, X_OK) == 0)
			return 0;
	}
	return -ENOENT;
}
