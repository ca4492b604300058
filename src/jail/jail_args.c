/* jail_args.c - `brisk jail`'s command line: its own options, and the RUN-ARGS rewritten to in-jail paths. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/errmsg.h"
#include "brisk/exitcode.h"
#include "brisk/jail.h"
#include "brisk/opts.h"
#include "brisk/run_opts.h"

bool jail_id_valid(const char *id)
{
	size_t n = strlen(id);

	if (n == 0 || n > JAIL_ID_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = id[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
	}
	return true;
}

/* The interface files that decide who is in a cgroup: the jail writes the child's pid itself. */
static const char *const cgroup_reserved[] = {"cgroup.procs", "cgroup.threads", "cgroup.subtree_control"};

int jail_parse_cgroup(char *arg, struct jail_cgroup_kv *kv, char *err, size_t errlen)
{
	char *eq = strchr(arg, '=');

	if (!eq || eq == arg || !eq[1])
		return err_set(err, errlen, -EINVAL, "--cgroup %s: expected KEY=VALUE, e.g. memory.max=256M", arg);
	*eq = '\0';
	kv->key = arg;
	kv->value = eq + 1;
	for (const char *p = arg; *p; p++) {
		char c = *p;

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
		      c == '_' || c == '-')) {
			*eq = '=';
			return err_set(err, errlen, -EINVAL,
				       "--cgroup %s: KEY must be a cgroup file name such as cpu.max (no '/')", arg);
		}
	}
	if (!strchr(arg, '.') || strcmp(arg, ".") == 0 || strcmp(arg, "..") == 0 || arg[0] == '.' ||
	    strstr(arg, "..")) {
		*eq = '=';
		return err_set(err, errlen, -EINVAL, "--cgroup %s: KEY must be CONTROLLER.FILE, e.g. pids.max", arg);
	}
	for (size_t i = 0; i < sizeof(cgroup_reserved) / sizeof(cgroup_reserved[0]); i++)
		if (strcmp(arg, cgroup_reserved[i]) == 0) {
			*eq = '=';
			return err_set(err, errlen, -EINVAL, "--cgroup %s: the jail manages %s itself", arg,
				       cgroup_reserved[i]);
		}
	if (strchr(kv->value, '\n')) {
		*eq = '=';
		return err_set(err, errlen, -EINVAL, "--cgroup %s: VALUE must be one line", arg);
	}
	return 0;
}

int jail_parse_rlimit(const char *arg, struct jail_config *cfg, char *err, size_t errlen)
{
	const char *eq = strchr(arg, '=');
	unsigned long long v;
	char *end;

	if (!eq)
		return err_set(err, errlen, -EINVAL, "--resource-limit %s: expected no-file=N or fsize=N", arg);
	errno = 0;
	v = strtoull(eq + 1, &end, 10);
	if (eq[1] < '0' || eq[1] > '9' || *end || errno || v > (unsigned long long)INT64_MAX)
		return err_set(err, errlen, -EINVAL, "--resource-limit %s: N must be a number, 0..2^63", arg);
	if ((size_t)(eq - arg) == 7 && strncmp(arg, "no-file", 7) == 0) {
		cfg->has_nofile = true;
		cfg->nofile = v;
	} else if ((size_t)(eq - arg) == 5 && strncmp(arg, "fsize", 5) == 0) {
		cfg->has_fsize = true;
		cfg->fsize = v;
	} else {
		return err_set(err, errlen, -EINVAL, "--resource-limit %s: unknown resource (no-file or fsize)", arg);
	}
	return 0;
}

int jail_check_inner_path(const char *what, const char *path, char *err, size_t errlen)
{
	const char *p = path;

	if (!*path)
		return err_set(err, errlen, -EINVAL, "%s: an empty path", what);
	if (strlen(path) >= PATH_MAX)
		return err_set(err, errlen, -EINVAL, "%s: the path is too long", what);
	/* A ".." component could name a directory outside the jail root while the jail builds it. */
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return err_set(err, errlen, -EINVAL, "%s %s: a path inside the jail may not contain '..'", what,
				       path);
		p += n;
		p += strspn(p, "/");
	}
	return 0;
}

/* Whether RUN-ARGS word a (not a file option) takes the next word as its value, as brisk run reads it. */
static bool takes_value(const char *a)
{
	const struct option *o;
	const char *spec;

	if (a[0] != '-' || !a[1])
		return false;
	if (a[1] == '-') {
		o = opts_find_exact(a, run_options());
		return o && o->has_arg == required_argument && !strchr(a, '=');
	}
	spec = a[1] == ':' ? NULL : strchr(RUN_SHORT_OPTS, a[1]);
	return spec && spec[1] == ':' && !a[2];
}

/* Keeps s in cfg->owned (freed by jail_config_free) and returns it. */
static char *own(struct jail_config *cfg, char *s)
{
	if (!s || cfg->nr_owned == JAIL_MAX_OWNED) {
		free(s);
		return NULL;
	}
	cfg->owned[cfg->nr_owned++] = s;
	return s;
}

/* Records host file `host` as /name in the jail; returns "/name" (owned) or NULL with err. */
static char *place(struct jail_config *cfg, const char *what, const char *host, const char *name, bool ro, char *err,
		   size_t errlen)
{
	struct jail_file *f;
	char *in;

	if (!*host) {
		err_set(err, errlen, -EINVAL, "%s: an empty path", what);
		return NULL;
	}
	if (cfg->nr_files == JAIL_MAX_FILES) {
		err_set(err, errlen, -EINVAL, "%s %s: at most %d files can be placed in a jail", what, host,
			JAIL_MAX_FILES);
		return NULL;
	}
	f = &cfg->files[cfg->nr_files];
	*f = (struct jail_file){.host = host, .opt = what, .ro = ro};
	snprintf(f->name, sizeof(f->name), "%s", name);
	if (asprintf(&in, "/%s", name) < 0 || !own(cfg, in)) {
		err_set(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	cfg->nr_files++;
	return in;
}

static int out_path(struct jail_config *cfg, const char *what, const char *path, char *err, size_t errlen)
{
	int ret = jail_check_inner_path(what, path, err, errlen);

	if (ret)
		return ret;
	if (cfg->nr_out == JAIL_MAX_OUT)
		return err_set(err, errlen, -EINVAL, "%s %s: too many output paths", what, path);
	cfg->out[cfg->nr_out++] = path;
	return 0;
}

/* --disk PATH[,opts]: PATH becomes /diskN, the options stay; ",ro" makes a bind mount read-only. */
static char *place_disk(struct jail_config *cfg, const char *val, char *err, size_t errlen)
{
	const char *comma = strchr(val, ',');
	size_t plen = comma ? (size_t)(comma - val) : strlen(val);
	char name[16], *host, *in, *out;
	bool ro = false;
	unsigned nr = 0;

	for (unsigned i = 0; i < cfg->nr_files; i++)
		nr += strncmp(cfg->files[i].name, "disk", 4) == 0;
	for (const char *o = comma; o; o = strchr(o + 1, ','))
		ro |= strncmp(o, ",ro", 3) == 0 && (o[3] == ',' || !o[3]);
	host = own(cfg, strndup(val, plen));
	if (!host) {
		err_set(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	snprintf(name, sizeof(name), "disk%u", nr);
	in = place(cfg, "--disk", host, name, ro, err, errlen);
	if (!in)
		return NULL;
	if (asprintf(&out, "%s%s", in, comma ? comma : "") < 0 || !own(cfg, out)) {
		err_set(err, errlen, -ENOMEM, "out of memory");
		return NULL;
	}
	return out;
}

/* --vsock cid=N,uds=PATH: PATH (and PATH_<port>) are created by brisk inside the jail. */
static int vsock_out(struct jail_config *cfg, const char *val, char *err, size_t errlen)
{
	const char *u = strstr(val, "uds=");
	char *path;
	int ret;

	if (!u || (u != val && u[-1] != ','))
		return 0; /* brisk itself will refuse it */
	path = own(cfg, strndup(u + 4, strcspn(u + 4, ",")));
	if (!path)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	ret = out_path(cfg, "--vsock uds=", path, err, errlen);
	return ret;
}

/* The rewritten value of option `opt` = `val`, or val itself; NULL with err on refusal. */
static char *rewrite_value(struct jail_config *cfg, const char *opt, char *val, char *err, size_t errlen)
{
	if (strcmp(opt, "--snapshot") == 0) /* restore's only: refuse_option refused them elsewhere */
		return place(cfg, "--snapshot", val, "snapshot.state", true, err, errlen);
	if (strcmp(opt, "--mem") == 0)
		return place(cfg, "--mem", val, "snapshot.mem", true, err, errlen);
	if (strcmp(opt, "--clone-server") == 0 || strcmp(opt, "--vsock-uds") == 0)
		return out_path(cfg, opt, val, err, errlen) ? NULL : val;
	if (strcmp(opt, "--kernel") == 0 || strcmp(opt, "-k") == 0)
		return place(cfg, "--kernel", val, "kernel", true, err, errlen);
	if (strcmp(opt, "--initrd") == 0 || strcmp(opt, "-i") == 0)
		return place(cfg, "--initrd", val, "initrd", true, err, errlen);
	if (strcmp(opt, "--disk") == 0)
		return place_disk(cfg, val, err, errlen);
	if (strcmp(opt, "--cpu-template") == 0 && (strchr(val, '/') || strstr(val, ".json")))
		return place(cfg, "--cpu-template", val, "cpu-template.json", true, err, errlen);
	if (strcmp(opt, "--api-sock") == 0 || strcmp(opt, "--report-json") == 0)
		return out_path(cfg, opt, val, err, errlen) ? NULL : val;
	if (strcmp(opt, "--serial") == 0 && strncmp(val, "file:", 5) == 0)
		return out_path(cfg, "--serial file:", val + 5, err, errlen) ? NULL : val;
	if (strcmp(opt, "--vsock") == 0)
		return vsock_out(cfg, val, err, errlen) ? NULL : val;
	return val;
}

/* Whether word a is option `name`, alone or as "name=VALUE". */
static bool is_opt(const char *a, const char *name)
{
	size_t n = strlen(name);

	return strncmp(a, name, n) == 0 && (!a[n] || a[n] == '=');
}

/* Options the jail cannot place: a config file names other files; a Uffd handler's socket is the host's. */
static int refuse_option(const char *a, bool restore, char *err, size_t errlen)
{
	if (is_opt(a, "--config-file"))
		return err_set(err, errlen, -EINVAL,
			       "RUN-ARGS --config-file: not supported inside a jail (the files it names cannot be "
			       "placed); pass the VM as brisk run options");
	if (is_opt(a, "--uffd"))
		return err_set(err, errlen, -EINVAL,
			       "RUN-ARGS --uffd: not supported inside a jail (the page-fault handler listens "
			       "outside it); use --mem");
	if (!restore && (is_opt(a, "--snapshot") || is_opt(a, "--mem")))
		return err_set(err, errlen, -EINVAL, "RUN-ARGS %s: belongs to 'restore' (-- restore --snapshot ...)",
			       is_opt(a, "--mem") ? "--mem" : "--snapshot");
	return 0;
}

/* "--opt=VALUE" and "-kVALUE" forms: the option name into opt[], the value's start returned (NULL: none). */
static char *split_attached(char *a, char *opt, size_t optlen)
{
	char *eq;

	if (a[0] == '-' && a[1] == '-' && (eq = strchr(a, '='))) {
		snprintf(opt, optlen, "%.*s", (int)(eq - a), a);
		return eq + 1;
	}
	if (a[0] == '-' && a[1] && a[1] != '-' && a[2] && strchr("kicpm", a[1])) {
		snprintf(opt, optlen, "-%c", a[1]);
		return a + 2;
	}
	snprintf(opt, optlen, "%s", a);
	return NULL;
}

static bool is_file_opt(const char *o)
{
	static const char *const names[] = {"--kernel",	      "-k",	    "--initrd",	      "-i",	     "--disk",
					    "--cpu-template", "--api-sock", "--report-json",  "--serial",    "--vsock",
					    "--snapshot",     "--mem",	    "--clone-server", "--vsock-uds", NULL};

	for (int i = 0; names[i]; i++)
		if (strcmp(o, names[i]) == 0)
			return true;
	return false;
}

/*
 * One RUN-ARGS word at argv[*i] (and its value) into out[*n]; `restore`: RUN-ARGS are brisk restore's, whose
 * --disk only places a file. Returns 0 or -errno with err.
 */
static int rewrite_one(int argc, char **argv, int *i, char **out, int *n, bool restore, struct jail_config *cfg,
		       char *err, size_t errlen)
{
	char opt[64], *a = argv[*i], *val, *nv;
	int ret;

	if ((ret = refuse_option(a, restore, err, errlen)))
		return ret;
	val = split_attached(a, opt, sizeof(opt));
	if (!is_file_opt(opt)) {
		out[(*n)++] = a;
		if (!val && takes_value(a) && *i + 1 < argc)
			out[(*n)++] = argv[++*i];
		return 0;
	}
	if (!val) {
		if (*i + 1 == argc)
			return err_set(err, errlen, -EINVAL, "RUN-ARGS %s: needs a value", a);
		val = argv[++*i];
	}
	nv = rewrite_value(cfg, opt, val, err, errlen);
	if (!nv)
		return -EINVAL;
	if (restore && (strcmp(opt, "--disk") == 0 || (strcmp(opt, "--cpu-template") == 0 && nv != val)))
		return 0; /* placed (/diskN, /cpu-template.json) where the state file names it; restore takes neither */
	/* two words, never "--opt=value": Firecracker's command line takes only that form (fc_args.h) */
	out[(*n)++] = own(cfg, strdup(opt));
	out[(*n)++] = nv;
	return out[*n - 2] ? 0 : err_set(err, errlen, -ENOMEM, "out of memory");
}

int jail_rewrite_run_args(int argc, char **argv, struct jail_config *cfg, char *err, size_t errlen)
{
	char **out;
	int n = 0, first, ret;
	bool restore;

	if (argc < 1)
		return err_set(err, errlen, -EINVAL,
			       "no RUN-ARGS: give a brisk command after --, e.g. "
			       "-- run --kernel PATH");
	restore = strcmp(argv[0], "restore") == 0;
	if (strcmp(argv[0], "run") != 0 && !restore && strncmp(argv[0], "--api-sock", 10) != 0)
		return err_set(err, errlen, -EINVAL,
			       "RUN-ARGS must start with 'run', 'restore' or '--api-sock', not '%s'", argv[0]);
	/* What brisk would refuse as an abbreviation is refused here: the jail rewrites full names only. */
	first = strcmp(argv[0], "run") == 0 || restore; /* "run|restore OPTIONS", or "--api-sock PATH OPTIONS" */
	if (opts_check_exact(argc - first, argv + first, RUN_SHORT_OPTS, run_options(), err, errlen)) {
		char why[256];

		snprintf(why, sizeof(why), "%s", err);
		return err_set(err, errlen, -EINVAL, "RUN-ARGS %s", why);
	}
	out = calloc((size_t)argc * 2 + 2, sizeof(*out)); /* each word can become two (-kPATH -> -k /kernel) */
	if (!out)
		return err_set(err, errlen, -ENOMEM, "out of memory");
	cfg->run_argv = out;
	if (first)
		out[n++] = argv[0];
	for (int i = n; i < argc; i++)
		if ((ret = rewrite_one(argc, argv, &i, out, &n, restore, cfg, err, errlen)))
			return ret;
	out[n] = NULL;
	cfg->run_argc = n;
	return 0;
}

/* A uid or gid: a decimal number below 2^32 - 1 ((uid_t)-1 means "unchanged" to setresuid). */
static int parse_id_number(const char *opt, const char *s, unsigned *v, char *err, size_t errlen)
{
	unsigned long long x;
	char *end;

	errno = 0;
	x = strtoull(s, &end, 10);
	if (!*s || *s < '0' || *s > '9' || *end || errno || x >= 0xffffffffULL)
		return err_set(err, errlen, -EINVAL, "%s %s: expected a number, 0..4294967294", opt, s);
	*v = (unsigned)x;
	return 0;
}

/* The value of option argv[*i] ("--opt VALUE" or "--opt=VALUE" with `name` = "--opt"), or NULL. */
static char *opt_value(int argc, char **argv, int *i, const char *name, bool *matched)
{
	size_t n = strlen(name);
	char *a = argv[*i];

	*matched = false;
	if (strncmp(a, name, n) != 0 || (a[n] && a[n] != '='))
		return NULL;
	*matched = true;
	if (a[n] == '=')
		return a + n + 1;
	return *i + 1 < argc ? argv[++*i] : NULL;
}

enum { O_ID, O_UID, O_GID, O_BASE, O_NETNS, O_CGROUP, O_RLIMIT, O__COUNT };
static const char *const jail_opts[O__COUNT] = {"--id",	   "--uid",    "--gid",		  "--chroot-base",
						"--netns", "--cgroup", "--resource-limit"};

static int set_opt(struct jail_config *cfg, int which, char *v, bool *seen, char *err, size_t errlen)
{
	unsigned x = 0;

	switch (which) {
	case O_ID:
		cfg->id = v;
		return jail_id_valid(v) ? 0
					: err_set(err, errlen, -EINVAL,
						  "--id %s: 1..%d characters of A-Z, a-z, 0-9 and '-'", v, JAIL_ID_MAX);
	case O_UID:
	case O_GID:
		if (parse_id_number(jail_opts[which], v, &x, err, errlen))
			return -EINVAL;
		if (which == O_UID)
			cfg->uid = x, seen[O_UID] = true;
		else
			cfg->gid = x, seen[O_GID] = true;
		return 0;
	case O_BASE:
		cfg->chroot_base = v;
		return *v ? 0 : err_set(err, errlen, -EINVAL, "--chroot-base: an empty path");
	case O_NETNS:
		cfg->netns = v;
		return *v ? 0 : err_set(err, errlen, -EINVAL, "--netns: an empty path");
	case O_CGROUP:
		if (cfg->nr_cg == JAIL_MAX_CGROUPS)
			return err_set(err, errlen, -EINVAL, "--cgroup: at most %d", JAIL_MAX_CGROUPS);
		if (jail_parse_cgroup(v, &cfg->cg[cfg->nr_cg], err, errlen))
			return -EINVAL;
		cfg->nr_cg++;
		return 0;
	default:
		return jail_parse_rlimit(v, cfg, err, errlen);
	}
}

/* One jail option at argv[*i]. Returns 0, 1 (not a jail option), or -EINVAL with err. */
static int parse_opt(int argc, char **argv, int *i, struct jail_config *cfg, bool *seen, char *err, size_t errlen)
{
	bool matched;

	for (int o = 0; o < O__COUNT; o++) {
		char *v = opt_value(argc, argv, i, jail_opts[o], &matched);

		if (!matched)
			continue;
		if (!v)
			return err_set(err, errlen, -EINVAL, "%s needs a value", jail_opts[o]);
		return set_opt(cfg, o, v, seen, err, errlen);
	}
	if (strcmp(argv[*i], "--daemonize") == 0) {
		cfg->daemonize = true;
		return 0;
	}
	return 1;
}

/* The jail's own options as getopt_long would see them, for opts_check_exact (the parser below is exact). */
static const struct option jail_long[] = {
    {"id", required_argument, NULL, 0},
    {"uid", required_argument, NULL, 0},
    {"gid", required_argument, NULL, 0},
    {"chroot-base", required_argument, NULL, 0},
    {"netns", required_argument, NULL, 0},
    {"cgroup", required_argument, NULL, 0},
    {"resource-limit", required_argument, NULL, 0},
    {"daemonize", no_argument, NULL, 0},
    {"help", no_argument, NULL, 0},
    {NULL, 0, NULL, 0},
};

int jail_parse_args(int argc, char **argv, struct jail_config *cfg, char *err, size_t errlen)
{
	bool seen[O__COUNT] = {0};
	int i, ret;

	*cfg = (struct jail_config){.chroot_base = JAIL_DEFAULT_BASE};
	/* "+": the first word that is not a jail option starts RUN-ARGS, checked with brisk run's options. */
	if (opts_check_exact(argc - 1, argv + 1, "+h", jail_long, err, errlen))
		return EXIT_USAGE;
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			i++;
			break;
		}
		if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
			return -1;
		ret = parse_opt(argc, argv, &i, cfg, seen, err, errlen);
		if (ret < 0)
			return EXIT_USAGE;
		if (ret > 0 && argv[i][0] == '-') {
			err_set(err, errlen, -EINVAL, "unknown option '%s' (RUN-ARGS go after --)", argv[i]);
			return EXIT_USAGE;
		}
		if (ret > 0)
			break; /* the first word that is not a jail option starts RUN-ARGS */
	}
	if (!cfg->id || !seen[O_UID] || !seen[O_GID]) {
		err_set(err, errlen, -EINVAL, "--%s is required", !cfg->id ? "id" : !seen[O_UID] ? "uid" : "gid");
		return EXIT_USAGE;
	}
	if (jail_rewrite_run_args(argc - i, argv + i, cfg, err, errlen))
		return EXIT_USAGE;
	return 0;
}

void jail_config_free(struct jail_config *cfg)
{
	for (unsigned i = 0; i < cfg->nr_files; i++) {
		free(cfg->files[i].real);
		cfg->files[i].real = NULL;
	}
	for (unsigned i = 0; i < cfg->nr_owned; i++)
		free(cfg->owned[i]);
	cfg->nr_owned = 0;
	free(cfg->run_argv);
	cfg->run_argv = NULL;
}
