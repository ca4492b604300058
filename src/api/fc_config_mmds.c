/*
 * fc_config_mmds.c - PUT /mmds/config and a config file's "mmds-config" (fc_config.h), as Firecracker v1.7.0's
 * MmdsConfig (src/vmm/src/vmm_config/mmds.rs, VmResources::set_mmds_config): "network_interfaces" (required,
 * not empty, every id an interface configured before), "version" "V1" (default) or "V2", "ipv4_address"
 * (default 169.254.169.254; 169.254.1.0 to 169.254.254.255, is_link_local_valid), and "imds_compat" (a later
 * Firecracker's: IMDS output whatever the Accept header), no other key. GET /vm/config shows it back.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "fc_config_internal.h"

#define ERR_PREFIX "MMMDS config error: " /* sic: Firecracker's VmmActionError::MmdsConfig */

static const char *const versions[] = {"V1", "V2", NULL};

static int mmds_fail(const struct fcj *c, const char *msg)
{
	snprintf(c->err, c->errlen, ERR_PREFIX "%s", msg);
	return -EINVAL;
}

/* The interfaces named by array `a`: their bits in *mask. */
static int ifaces(const struct fc_vm *f, const struct fcj *c, json_object *a, uint32_t *mask)
{
	size_t n;

	if (!a)
		return fcj_fail(c, "missing field `network_interfaces`");
	if (!json_object_is_type(a, json_type_array))
		return fcj_fail(c, "network_interfaces: expected an array of strings");
	n = json_object_array_length(a);
	if (n == 0)
		return mmds_fail(c, "The list of network interface IDs that allow forwarding MMDS requests is empty.");
	*mask = 0;
	for (size_t i = 0; i < n; i++) {
		json_object *v = json_object_array_get_idx(a, i);
		unsigned k;

		if (!json_object_is_type(v, json_type_string))
			return fcj_fail(c, "network_interfaces[%zu]: expected a string", i);
		for (k = 0; k < f->cfg.nr_nets && strcmp(f->net[k].id, json_object_get_string(v)) != 0; k++)
			;
		if (k == f->cfg.nr_nets)
			return mmds_fail(c, "The list of network interface IDs provided contains at least one ID that "
					    "does not correspond to any existing network interface.");
		*mask |= 1u << k;
	}
	return 0;
}

int fc_apply_mmds_config(struct fc_vm *f, const struct fcj *c, json_object *o)
{
	static const char *const keys[] = {"version", "network_interfaces", "ipv4_address", "imds_compat", NULL};
	struct mmds_config m = {.set = true, .version = MMDS_V1, .ipv4 = MMDS_DEFAULT_IPV4};
	const char *ip = NULL;
	unsigned v = 0;
	struct in_addr a;
	int r;

	if (fcj_keys(c, o, keys) || fcj_enum(c, o, "version", versions, false, &v) < 0 ||
	    fcj_bool(c, o, "imds_compat", &m.imds_compat) < 0 || (r = fcj_str(c, o, "ipv4_address", 1, 15, &ip)) < 0)
		return -EINVAL;
	m.version = v ? MMDS_V2 : MMDS_V1;
	if (ip) {
		if (inet_pton(AF_INET, ip, &a) != 1)
			return fcj_fail(c, "ipv4_address: invalid IP address syntax");
		m.ipv4 = ntohl(a.s_addr);
		if (!mmds_ipv4_valid(m.ipv4))
			return mmds_fail(c, "The MMDS IPv4 address is not link local.");
	}
	if (ifaces(f, c, fcj_get(o, "network_interfaces"), &m.ifaces))
		return -EINVAL;
	f->mmds = m;
	return 0;
}

int fc_put_mmds_config(struct fc_vm *f, const char *text, size_t len, char *err, size_t errlen)
{
	const struct fcj c = {"mmds-config", err, errlen};
	json_object *o;
	int ret = fcj_parse(&c, text, len, &o);

	if (!ret)
		ret = fc_apply_mmds_config(f, &c, o);
	json_object_put(o);
	return ret;
}

json_object *fc_mmds_config_to_json(const struct fc_vm *f)
{
	json_object *o, *ifs;
	struct in_addr a = {.s_addr = htonl(f->mmds.ipv4)};
	char ip[INET_ADDRSTRLEN];

	if (!f->mmds.set || !(o = json_object_new_object()))
		return NULL;
	json_object_object_add(o, "version", json_object_new_string(versions[f->mmds.version == MMDS_V2]));
	ifs = json_object_new_array();
	for (unsigned i = 0; i < f->cfg.nr_nets; i++)
		if (f->mmds.ifaces & (1u << i))
			json_object_array_add(ifs, json_object_new_string(f->net[i].id));
	json_object_object_add(o, "network_interfaces", ifs);
	inet_ntop(AF_INET, &a, ip, sizeof(ip));
	json_object_object_add(o, "ipv4_address", json_object_new_string(ip));
	if (f->mmds.imds_compat)
		json_object_object_add(o, "imds_compat", json_object_new_boolean(true));
	return o;
}
