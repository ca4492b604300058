/* helper.c - finding brisk's helper programs next to the brisk binary (include/brisk/helper.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brisk/helper.h"

/* The running binary's path, once helper_pin_self resolved it ("" until then). */
static char pinned[PATH_MAX];

/* /proc/self/exe into exe[0..len). Returns 0 or -errno. */
static int read_self(char *exe, size_t len)
{
	ssize_t n = readlink("/proc/self/exe", exe, len - 1);

	if (n < 0)
		return -errno;
	exe[n] = '\0';
	return 0;
}

int helper_pin_self(void)
{
	return pinned[0] ? 0 : read_self(pinned, sizeof(pinned));
}

int helper_find(const char *name, const char *env_var, char *out, size_t len)
{
	const char *env = getenv(env_var);
	char exe[PATH_MAX];
	char *slash;
	int ret;

	if (env && *env) {
		if ((size_t)snprintf(out, len, "%s", env) >= len)
			return -ENAMETOOLONG;
		return access(out, X_OK) == 0 ? 0 : -errno;
	}
	if (pinned[0])
		memcpy(exe, pinned, sizeof(exe));
	else if ((ret = read_self(exe, sizeof(exe))))
		return ret;
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
