/* fcj_args.c - brisk-jailer's command line and checks: Firecracker v1.7.0 src/utils/src/arg_parser.rs, env.rs Env::new.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "brisk/errmsg.h"
#include "brisk/fc_args.h"
#include "brisk/fc_jailer.h"

/* Firecracker's options, in its BTreeMap's (alphabetical) order: the order "required" is checked in. */
enum { A_CGROUP, A_CGVER, A_BASE, A_DAEMON, A_EXEC, A_GID, A_ID, A_NETNS, A_PIDNS, A_PARENT, A_RLIMIT, A_UID, A__N };
static const struct {
	const char *name;
	bool value, multiple, required;
} opts[A__N] = {
    [A_CGROUP] = {"cgroup", true, true, false},
    [A_CGVER] = {"cgroup-version", true, false, false},
    [A_BASE] = {"chroot-base-dir", true, false, false},
    [A_DAEMON] = {"daemonize", false, false, false},
    [A_EXEC] = {"exec-file", true, false, true},
    [A_GID] = {"gid", true, false, true},
    [A_ID] = {"id", true, false, true},
    [A_NETNS] = {"netns", true, false, false},
    [A_PIDNS] = {"new-pid-ns", false, false, false},
    [A_PARENT] = {"parent-cgroup", true, false, false},
    [A_RLIMIT] = {"resource-limit", true, true, false},
    [A_UID] = {"uid", true, false, true},
};

/* The option named `name` (after "--"), or -1. */
static int find_opt(const char *name)
{
	for (int i = 0; i < A__N; i++)
		if (strcmp(opts[i].name, name) == 0)
			return i;
	return -1;
}

/* Stores one value (or flag) of option o. Returns 0 or -EINVAL (too many repeats). */
static int store(struct fcj_args *a, int o, const char *v, char *err, size_t errlen)
{
	const char **single[A__N] = {[A_CGVER] = &a->cgroup_version,
				     [A_BASE] = &a->chroot_base,
				     [A_EXEC] = &a->exec_file,
				     [A_GID] = &a->gid,
				     [A_ID] = &a->id,
				     [A_NETNS] = &a->netns,
				     [A_PARENT] = &a->parent_cgroup,
				     [A_UID] = &a->uid};

	if (o == A_DAEMON)
		a->daemonize = true;
	else if (o == A_PIDNS)
		a->new_pid_ns = true;
	else if (o == A_CGROUP || o == A_RLIMIT) {
		unsigned *n = o == A_CGROUP ? &a->nr_cgroup : &a->nr_rlimit;

		if (*n == FCJ_MAX_CGROUPS)
			return err_set(err, errlen, -EINVAL, "The argument '%s' was provided more than %d times.",
				       opts[o].name, FCJ_MAX_CGROUPS);
		(o == A_CGROUP ? a->cgroup : a->rlimit)[(*n)++] = v;
	} else
		*single[o] = v;
	return 0;
}

/* The words before "--" (argv[1..n)), as arg_parser's populate_args and validate_requirements. */
static int populate(int n, char **argv, struct fcj_args *a, char *err, size_t errlen)
{
	bool seen[A__N] = {0};

	for (int i = 1; i < n; i++) {
		const char *w = argv[i];
		int o = strncmp(w, "--", 2) == 0 ? find_opt(w + 2) : -1;

		if (o < 0)
			return err_set(err, errlen, -EINVAL,
				       "Found argument '%s' which wasn't expected, or isn't valid in this context.",
				       strncmp(w, "--", 2) == 0 ? w + 2 : w);
		if (seen[o] && !opts[o].multiple)
			return err_set(err, errlen, -EINVAL, "The argument '%s' was provided more than once.",
				       opts[o].name);
		seen[o] = true;
		if (opts[o].value && (i + 1 >= n || strncmp(argv[i + 1], "--", 2) == 0))
			return err_set(err, errlen, -EINVAL,
				       "The argument '%s' requires a value, but none was supplied.", opts[o].name);
		if (store(a, o, opts[o].value ? argv[++i] : NULL, err, errlen))
			return -EINVAL;
	}
	for (int o = 0; o < A__N; o++)
		if (opts[o].required && !seen[o])
			return err_set(err, errlen, -EINVAL, "Argument '%s' required, but not found.", opts[o].name);
	return 0;
}

int fcj_parse_args(int argc, char **argv, struct fcj_args *a, char *err, size_t errlen)
{
	int n = argc;

	*a = (struct fcj_args){.chroot_base = FCJ_DEFAULT_BASE, .cgroup_version = "1"};
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			n = i;
			break;
		}
	a->extra = argv + (n < argc ? n + 1 : argc);
	a->nr_extra = n < argc ? argc - n - 1 : 0;
	/* --help, then --version, anywhere before "--" (even as another option's value) ends the parse. */
	for (int i = 1; i < n; i++)
		a->help |= strcmp(argv[i], "--help") == 0;
	for (int i = 1; i < n && !a->help; i++)
		a->version |= strcmp(argv[i], "--version") == 0;
	if (a->help || a->version)
		return 0;
	return populate(n, argv, a, err, errlen);
}

bool fcj_relative_path_ok(const char *path)
{
	const char *p = path;

	if (path[0] == '/')
		return false;
	while (*p) {
		size_t len = strcspn(p, "/");

		if ((len == 1 && p[0] == '.') || (len == 2 && p[0] == '.' && p[1] == '.'))
			return false;
		p += len;
		p += strspn(p, "/");
	}
	return true;
}

int fcj_mount_line(const char *line, char *dir, size_t dirlen, char *opts_out, size_t optslen)
{
	char dev[256], d[PATH_MAX], type[32], o[1024];

	if (sscanf(line, "%255s %4095s %31s %1023s", dev, d, type, o) != 4 || strchr(d, '\\'))
		return 0;
	if (strcmp(type, "cgroup") != 0 && strcmp(type, "cgroup2") != 0)
		return 0;
	snprintf(dir, dirlen, "%s", d);
	snprintf(opts_out, optslen, "%s", o);
	return strcmp(type, "cgroup2") == 0 ? 2 : 1;
}

/* Rust's io::Error display: "No such file or directory (os error 2)". */
static const char *os_error(int e)
{
	static char buf[128];

	snprintf(buf, sizeof(buf), "%s (os error %d)", strerror(e), e);
	return buf;
}

/* validate_exec_file: canonical, a regular file, its name containing "firecracker". */
static int check_exec_file(const char *path, struct fcj_env *e, char *err, size_t errlen)
{
	struct stat st;
	const char *name;

	if (!realpath(path, e->exec_path))
		return err_set(err, errlen, -errno, "Failed to canonicalize path %s: %s", path, os_error(errno));
	if (stat(e->exec_path, &st) || !S_ISREG(st.st_mode))
		return err_set(err, errlen, -EINVAL, "%s is not a file", e->exec_path);
	name = strrchr(e->exec_path, '/') + 1;
	snprintf(e->exec_name, sizeof(e->exec_name), "%s", name);
	if (!strstr(name, FCJ_EXEC_NAME_MUST))
		return err_set(
		    err, errlen, -EINVAL,
		    "Invalid filename. The filename of `--exec-file` option must contain \"firecracker\": %s", name);
	return 0;
}

/* <base>/<exec name>/<id>/root, the base canonical and a directory. */
static int chroot_dir(const char *base, struct fcj_env *e, char *err, size_t errlen)
{
	char real[PATH_MAX];
	struct stat st;

	if (!realpath(base, real))
		return err_set(err, errlen, -errno, "Failed to canonicalize path %s: %s", base, os_error(errno));
	if (stat(real, &st) || !S_ISDIR(st.st_mode))
		return err_set(err, errlen, -ENOTDIR, "%s is not a directory", real);
	if ((size_t)snprintf(e->chroot_dir, sizeof(e->chroot_dir), "%s/%s/%s/root", strcmp(real, "/") ? real : "",
			     e->exec_name, e->id) >= sizeof(e->chroot_dir))
		return err_set(err, errlen, -ENAMETOOLONG, "Failed to create directory %s/...: path too long", real);
	return 0;
}

/* Rust's u32 / u64 from_str: an optional '+', then decimal digits only. */
static int parse_unsigned(const char *s, unsigned long long max, unsigned long long *v)
{
	char *end;

	if (*s == '+')
		s++;
	if (!isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	*v = strtoull(s, &end, 10);
	return *end || errno || *v > max ? -EINVAL : 0;
}

/* ParseIntError's display for a --resource-limit value. */
static const char *int_error(const char *s)
{
	const char *p = s + (*s == '+');

	if (!*p)
		return "cannot parse integer from empty string";
	for (; *p; p++)
		if (!isdigit((unsigned char)*p))
			return "invalid digit found in string";
	return "number too large to fit in target type";
}

static int parse_rlimits(const struct fcj_args *a, struct fcj_env *e, char *err, size_t errlen)
{
	e->nofile = FCJ_DEFAULT_NOFILE;
	for (unsigned i = 0; i < a->nr_rlimit; i++) {
		const char *arg = a->rlimit[i], *eq = strchr(arg, '=');
		unsigned long long v;

		if (!eq)
			return err_set(err, errlen, -EINVAL, "Invalid format for resources limits: %s", arg);
		if (parse_unsigned(eq + 1, UINT64_MAX, &v))
			return err_set(err, errlen, -EINVAL, "Invalid limit value for resource: %s: %s", eq + 1,
				       int_error(eq + 1));
		if (eq - arg == 5 && strncmp(arg, "fsize", 5) == 0)
			e->has_fsize = true, e->fsize = v;
		else if (eq - arg == 7 && strncmp(arg, "no-file", 7) == 0)
			e->nofile = v;
		else
			return err_set(err, errlen, -EINVAL, "Invalid resource argument: %.*s", (int)(eq - arg), arg);
	}
	return 0;
}

/* The cgroup hierarchies of mounts_path: the first cgroup2 mount, or the v1 mounts and their controllers. */
struct hierarchies {
	char v2[PATH_MAX];
	char v1_dir[32][PATH_MAX];
	char v1_opts[32][1024];
	unsigned nr_v1;
};

static int read_mounts(const char *mounts_path, unsigned ver, struct hierarchies *h, char *err, size_t errlen)
{
	char line[4096], dir[PATH_MAX], o[1024];
	FILE *f = fopen(mounts_path, "re");

	if (ver != 1 && ver != 2)
		return err_set(err, errlen, -EINVAL, "%u is an invalid cgroup version specifier", ver);
	if (!f)
		return err_set(err, errlen, -errno, "Failed to open file %s: %s", mounts_path, os_error(errno));
	h->v2[0] = '\0';
	h->nr_v1 = 0;
	while (fgets(line, sizeof(line), f)) {
		int kind = fcj_mount_line(line, dir, sizeof(dir), o, sizeof(o));

		if (ver == 2 && kind == 2) {
			snprintf(h->v2, sizeof(h->v2), "%s", dir);
			break;
		}
		if (ver == 1 && kind == 1 && h->nr_v1 < 32) {
			snprintf(h->v1_dir[h->nr_v1], sizeof(h->v1_dir[0]), "%s", dir);
			snprintf(h->v1_opts[h->nr_v1++], sizeof(h->v1_opts[0]), "%s", o);
		}
	}
	fclose(f);
	if (!h->v2[0] && !h->nr_v1)
		return err_set(err, errlen, -ENOENT,
			       "Hierarchy not found: No hierarchy found for this cgroup version.");
	return 0;
}

/* Whether word w is one of the sep-separated words of list. */
static bool has_word(const char *list, const char *w, const char *sep)
{
	size_t n = strlen(w);

	for (const char *p = list; *p; p += strspn(p, sep)) {
		size_t len = strcspn(p, sep);

		if (len == n && strncmp(p, w, n) == 0)
			return true;
		p += len;
	}
	return false;
}

/* v2: the controller listed in <unified>/cgroup.controllers (CgroupV2::controller_available). */
static bool v2_available(const char *unified, const char *controller)
{
	char path[PATH_MAX + 32], line[1024];
	bool found = false;
	FILE *f;

	snprintf(path, sizeof(path), "%s/cgroup.controllers", unified);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f))
		found = has_word(line, controller, " \n");
	fclose(f);
	return found;
}

/* The hierarchy directory a cgroup file's controller lives in, or NULL with err. */
static const char *hierarchy_of(const struct hierarchies *h, unsigned ver, const char *controller, char *err,
				size_t errlen)
{
	if (ver == 2) {
		if (v2_available(h->v2, controller))
			return h->v2;
	} else {
		for (unsigned i = 0; i < h->nr_v1; i++)
			if (has_word(h->v1_opts[i], controller, ","))
				return h->v1_dir[i];
	}
	err_set(err, errlen, -ENOENT, "Controller %s is unavailable", controller);
	return NULL;
}

/* One --cgroup FILE=VALUE into e->cg[] (Env::new's loop and CgroupBuilder::new_cgroup). */
static int add_cgroup(const char *arg, const char *parent, const struct hierarchies *h, unsigned ver, struct fcj_env *e,
		      char *err, size_t errlen)
{
	const char *eq = strchr(arg, '='), *dot, *dir;
	struct fcj_cgroup *cg = &e->cg[e->nr_cg];
	char controller[NAME_MAX + 1];

	if (!eq || strchr(eq + 1, '=') || !eq[1] || (size_t)(eq - arg) > NAME_MAX ||
	    strlen(eq + 1) >= sizeof(cg->value))
		return err_set(err, errlen, -EINVAL, "Invalid format for cgroups: %s", arg);
	snprintf(cg->file, sizeof(cg->file), "%.*s", (int)(eq - arg), arg);
	snprintf(cg->value, sizeof(cg->value), "%s", eq + 1);
	/* brisk: a cgroup file is a name, never a path (Firecracker refuses only "." and ".." components). */
	if (!fcj_relative_path_ok(cg->file) || strchr(cg->file, '/') || !(dot = strchr(cg->file, '.')))
		return err_set(err, errlen, -EINVAL, "Cgroup invalid file: %s", arg);
	snprintf(controller, sizeof(controller), "%.*s", (int)(dot - cg->file), cg->file);
	if (!(dir = hierarchy_of(h, ver, controller, err, errlen)))
		return -ENOENT;
	if ((size_t)snprintf(cg->dir, sizeof(cg->dir), "%s/%s/%s", dir, parent, e->id) >= sizeof(cg->dir))
		return err_set(err, errlen, -ENAMETOOLONG, "Cgroup invalid file: %s (path too long)", arg);
	cg->parent_depth = 0;
	for (const char *p = parent; *p; p += strspn(p, "/")) {
		cg->parent_depth++;
		p += strcspn(p, "/");
	}
	e->nr_cg++;
	return 0;
}

/* With cgroup v2 and no --cgroup, the jailer moves itself into the parent cgroup when that exists. */
static int v2_join_parent(const struct hierarchies *h, const char *parent, char *err, size_t errlen)
{
	char path[PATH_MAX * 2], pid[24];
	int fd, n;

	snprintf(path, sizeof(path), "%s/%s", h->v2, parent);
	if (access(path, F_OK))
		return 0;
	snprintf(path, sizeof(path), "%s/%s/cgroup.procs", h->v2, parent);
	n = snprintf(pid, sizeof(pid), "%d", (int)getpid());
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0 || write(fd, pid, (size_t)n) != n) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		return err_set(err, errlen, -e, "Failed to write to cgroups file: %s", os_error(e));
	}
	close(fd);
	return 0;
}

/* The cgroup part of Env::new: --parent-cgroup, --cgroup-version, each --cgroup. */
static int parse_cgroups(const struct fcj_args *a, const char *mounts_path, struct fcj_env *e, char *err, size_t errlen)
{
	const char *parent = a->parent_cgroup ? a->parent_cgroup : e->exec_name;
	struct hierarchies *h;
	unsigned long long ver;
	int ret = 0;

	if (!fcj_relative_path_ok(parent) || !*parent)
		return err_set(err, errlen, -EINVAL,
			       "Parent cgroup path is invalid. Path should not be absolute or contain '..' or '.'");
	if (parse_unsigned(a->cgroup_version, 255, &ver))
		return err_set(err, errlen, -EINVAL, "%s is an invalid cgroup version specifier", a->cgroup_version);
	e->cgroup_version = (unsigned)ver;
	if (!a->nr_cgroup && ver != 2)
		return 0; /* Firecracker looks at no hierarchy then: --cgroup-version 3 alone is accepted */
	h = malloc(sizeof(*h));
	if (!h)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	ret = read_mounts(mounts_path, e->cgroup_version, h, err, errlen);
	if (!ret && !a->nr_cgroup)
		ret = h->v2[0] ? v2_join_parent(h, parent, err, errlen)
			       : err_set(err, errlen, -ENOENT, "Hierarchy not found: cgroupsv2 hierarchy missing");
	for (unsigned i = 0; !ret && i < a->nr_cgroup; i++)
		ret = add_cgroup(a->cgroup[i], parent, h, e->cgroup_version, e, err, errlen);
	free(h);
	return ret;
}

/* /proc/misc's "MINOR userfaultfd" line (env.rs get_userfaultfd_minor_dev_number), or -1. */
static int uffd_minor(void)
{
	char line[256], name[64];
	FILE *f = fopen("/proc/misc", "re");
	int minor = -1, m;

	if (!f)
		return -1;
	while (minor < 0 && fgets(line, sizeof(line), f))
		if (sscanf(line, "%d %63s", &m, name) == 2 && strcmp(name, "userfaultfd") == 0)
			minor = m;
	fclose(f);
	return minor;
}

int fcj_env_new(const struct fcj_args *a, const char *mounts_path, struct fcj_env *e, char *err, size_t errlen)
{
	unsigned long long v;
	struct timespec ts;
	int ret;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	*e = (struct fcj_env){.id = a->id,
			      .netns = a->netns,
			      .daemonize = a->daemonize,
			      .new_pid_ns = a->new_pid_ns,
			      .extra = a->extra,
			      .nr_extra = a->nr_extra,
			      .start_time_us = (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000};
	if ((ret = fc_args_check_id(a->id, err, errlen)) || (ret = check_exec_file(a->exec_file, e, err, errlen)) ||
	    (ret = chroot_dir(a->chroot_base, e, err, errlen)))
		return ret;
	/* brisk: 4294967295 is (uid_t)-1, "unchanged" to setresuid: refused here, not at exec. */
	if (parse_unsigned(a->uid, 0xfffffffeULL, &v))
		return err_set(err, errlen, -EINVAL, "Invalid uid: %s", a->uid);
	e->uid = (uid_t)v;
	if (parse_unsigned(a->gid, 0xfffffffeULL, &v))
		return err_set(err, errlen, -EINVAL, "Invalid gid: %s", a->gid);
	e->gid = (gid_t)v;
	if ((ret = parse_cgroups(a, mounts_path, e, err, errlen)) || (ret = parse_rlimits(a, e, err, errlen)))
		return ret;
	e->uffd_minor = uffd_minor();
	return 0;
}
