/* config_vsock.c - parsing --vsock cid=N,uds=PATH into struct vm_config (include/brisk/config.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "brisk/config.h"

/* One "key=value" of --vsock. */
static int vsock_key(const char *tok, size_t n, struct vm_vsock *vs, char *err, size_t errlen)
{
	unsigned long cid;
	char num[16];

	if (n > 4 && strncmp(tok, "cid=", 4) == 0) {
		if (vs->cid) {
			snprintf(err, errlen, "cid= given twice");
			return -EINVAL;
		}
		if (n - 4 >= sizeof(num)) {
			snprintf(err, errlen, "cid= must be a number from 3 to 4294967294");
			return -EINVAL;
		}
		memcpy(num, tok + 4, n - 4);
		num[n - 4] = '\0';
		/* 0-2 are reserved (hypervisor, local, host), 0xffffffff is VMADDR_CID_ANY (virtio 1.2 5.10.4). */
		if (config_parse_uint(num, 3, 0xfffffffeul, &cid)) {
			snprintf(err, errlen, "cid= must be a number from 3 to 4294967294, got '%s'", num);
			return -EINVAL;
		}
		vs->cid = (uint32_t)cid;
		return 0;
	}
	if (n > 4 && strncmp(tok, "uds=", 4) == 0) {
		if (vs->uds[0]) {
			snprintf(err, errlen, "uds= given twice");
			return -EINVAL;
		}
		if (n - 4 > VM_VSOCK_UDS_MAX) {
			snprintf(err, errlen, "uds= PATH is %zu bytes: at most %d (a socket address holds PATH_<port>)",
				 n - 4, VM_VSOCK_UDS_MAX);
			return -EINVAL;
		}
		memcpy(vs->uds, tok + 4, n - 4);
		vs->uds[n - 4] = '\0';
		return 0;
	}
	snprintf(err, errlen, "unknown or empty option '%.*s' (expected cid=N and uds=PATH)", (int)(n > 64 ? 64 : n),
		 tok);
	return -EINVAL;
}

int config_parse_vsock(const char *s, struct vm_config *cfg, char *err, size_t errlen)
{
	struct vm_vsock vs = {0};

	if (cfg->vsock.uds[0]) {
		snprintf(err, errlen, "only one --vsock device");
		return -EINVAL;
	}
	for (const char *p = s;;) {
		const char *comma = strchr(p, ',');
		size_t n = comma ? (size_t)(comma - p) : strlen(p);

		if (vsock_key(p, n, &vs, err, errlen))
			return -EINVAL;
		if (!comma)
			break;
		p = comma + 1;
	}
	if (!vs.cid || !vs.uds[0]) {
		snprintf(err, errlen, "both cid=N and uds=PATH are needed");
		return -EINVAL;
	}
	cfg->vsock = vs;
	return 0;
}

int config_move_vsock(struct vm_config *cfg, const char *uds)
{
	size_t n = strlen(uds);

	if (!cfg->vsock.uds[0])
		return -ENODEV;
	if (n == 0 || n > VM_VSOCK_UDS_MAX)
		return -EINVAL;
	memcpy(cfg->vsock.uds, uds, n + 1);
	return 0;
}

int config_vsock_check(const struct vm_config *cfg, char *err, size_t errlen)
{
	char dir[VM_VSOCK_UDS_MAX + 1];
	const char *slash;
	struct stat st;

	if (!cfg->vsock.uds[0])
		return 0;
	slash = strrchr(cfg->vsock.uds, '/');
	if (!slash)
		strcpy(dir, ".");
	else if (slash == cfg->vsock.uds)
		strcpy(dir, "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - cfg->vsock.uds), cfg->vsock.uds);
	if ((slash && slash[1] == '\0') || stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
		snprintf(err, errlen, "--vsock uds=%s: %s", cfg->vsock.uds,
			 slash && slash[1] == '\0' ? "PATH names a directory, not a socket"
						   : "its directory does not exist");
		return -EINVAL;
	}
	return 0;
}
