/*
 * api_names.c - brisk's VM code words its errors for the command line ("--disk PATH: cannot open the image");
 * an API client never typed those options, so its messages name the API's fields and objects instead
 * ("drives[rootfs]: path_on_host PATH: cannot open the image"), the ids from the configuration (api.h).
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "brisk/api.h"

/* A command-line option, the API field it stands for, and the object to name when a message starts with it. */
static const struct {
	const char *cli, *api, *object;
} names[] = {
    {"--cpus", "vcpu_count", "machine-config"},
    {"--memory", "mem_size_mib", "machine-config"},
    {"--topology", "the vCPU topology smt asks for", "machine-config"},
    {"--cpu-template", "cpu_template", "machine-config"},
    {"--hugetlbfs", "huge_pages \"2M\"", "machine-config"},
    {"--hugepages", "huge_pages \"Transparent\"", "machine-config"},
    {"--kernel", "kernel_image_path", "boot-source"},
    {"--initrd", "initrd_path", "boot-source"},
    {"--cmdline", "boot_args", "boot-source"},
    {"--console virtio", "a virtio console", NULL},
    {"--rng", "entropy", NULL},
    {"--disk", "drives", NULL},
    {"--net", "network-interfaces", NULL},
    {"--vsock", "vsock", NULL},
    {"--balloon", "balloon", NULL},
};

struct out {
	char *p;
	size_t cap, len;
};

static void out_put(struct out *o, const char *s, size_t n)
{
	for (size_t i = 0; i < n && o->len + 1 < o->cap; i++)
		o->p[o->len++] = s[i];
	o->p[o->len] = '\0';
}

static void puts_(struct out *o, const char *s)
{
	out_put(o, s, strlen(s));
}

/* The longest of the n strings cand[] that `s` starts with: its index or -1. */
static int longest_prefix(const char *s, const char *const *cand, unsigned n)
{
	size_t best = 0;
	int found = -1;

	for (unsigned i = 0; i < n; i++) {
		size_t len = strlen(cand[i]);

		if (len > best && strncmp(s, cand[i], len) == 0) {
			best = len;
			found = (int)i;
		}
	}
	return found;
}

/* "--disk PATH", "--net tap=NAME", "--vsock uds=PATH": the object with its id and the field. Returns the bytes
 * of msg consumed (after the option), 0 when the form is not this one. */
static size_t device_field(const struct fc_vm *f, const char *opt, const char *rest, struct out *o)
{
	const char *paths[VM_MAX_DISKS], *taps[VM_MAX_NETS];
	char head[FC_ID_MAX + 64];
	int i;

	for (unsigned k = 0; k < f->cfg.nr_disks; k++)
		paths[k] = f->cfg.disk[k].path;
	for (unsigned k = 0; k < f->cfg.nr_nets; k++)
		taps[k] = f->cfg.net[k].tap;
	if (strcmp(opt, "--disk") == 0 && rest[0] == ' ' &&
	    (i = longest_prefix(rest + 1, paths, f->cfg.nr_disks)) >= 0) {
		snprintf(head, sizeof(head), "drives[%s]: path_on_host ", f->drive[i].id);
		puts_(o, head);
		return 1;
	}
	if (strcmp(opt, "--net") == 0 && strncmp(rest, " tap=", 5) == 0 &&
	    (i = longest_prefix(rest + 5, taps, f->cfg.nr_nets)) >= 0) {
		snprintf(head, sizeof(head), "network-interfaces[%s]: host_dev_name ", f->net[i].id);
		puts_(o, head);
		return 5;
	}
	if (strcmp(opt, "--vsock") == 0 && strncmp(rest, " uds=", 5) == 0) {
		puts_(o, "vsock: uds_path ");
		return 5;
	}
	return 0;
}

void api_field_names(const struct fc_vm *f, const char *msg, char *out, size_t cap)
{
	struct out o = {out, cap, 0};
	const char *s = msg;

	if (!cap)
		return;
	out[0] = '\0';
	while (*s) {
		const char *dash = strstr(s, "--");
		unsigned k;
		size_t n;

		if (!dash) {
			puts_(&o, s);
			break;
		}
		out_put(&o, s, (size_t)(dash - s));
		for (k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			n = strlen(names[k].cli);
			if (strncmp(dash, names[k].cli, n) == 0 && (dash[n] < 'a' || dash[n] > 'z') && dash[n] != '-')
				break;
		}
		if (k == sizeof(names) / sizeof(names[0])) { /* not an option of the VM's: as it is */
			out_put(&o, dash, 2);
			s = dash + 2;
			continue;
		}
		s = dash + n;
		if ((n = device_field(f, names[k].cli, s, &o))) {
			s += n;
			continue;
		}
		if (dash == msg && names[k].object) {
			puts_(&o, names[k].object);
			puts_(&o, ": ");
		}
		puts_(&o, names[k].api);
	}
}
