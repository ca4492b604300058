/* helper.h - finding brisk's helper programs (brisk-slirp): an env override or the binary's dir. */
#ifndef BRISK_HELPER_H
#define BRISK_HELPER_H

#include <stddef.h>

/*
 * Finds helper program `name`: $env_var when set and non-empty (it must be executable), else `name` next to
 * the running binary (/proc/self/exe), else one directory up (build/asan/brisk finds build/brisk-slirp;
 * build/tests/x finds build/brisk-slirp). Writes the path to out[0..len). Returns 0, -ENOENT (not found),
 * -ENAMETOOLONG, or the -errno of access() for the $env_var path.
 */
int helper_find(const char *name, const char *env_var, char *out, size_t len);

/*
 * Resolves /proc/self/exe now and has every later helper_find use that path. For a process about to
 * enter another mount namespace (brisk profile's private tracefs mount): there, /proc/self/exe names the
 * binary as the old namespace sees it, which under a chroot is a path that does not exist (the
 * chroot's own prefix included). Idempotent. Returns 0 or -errno of readlink (helper_find then reads
 * /proc/self/exe itself, as without this call).
 */
int helper_pin_self(void);

#endif
