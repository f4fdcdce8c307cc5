/*
 * health.c - GPU health decisions (health.h).
 */
#include "domain/health.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"

#define XID_MAX 1024 /* Xid codes are small integers; the table is indexed by code */

struct xid_catalog {
	struct arena *arena;
	unsigned char action[XID_MAX]; /* enum xid_action */
	const char *name[XID_MAX];
};

extern const char gp_xid_catalog_json[];
extern const size_t gp_xid_catalog_json_len;

static int
parse_action(const char *s, enum xid_action *out)
{
	static const struct {
		const char *name;
		enum xid_action action;
	} actions[] = {
		{ "ignore", XID_IGNORE },
		{ "restart_app", XID_RESTART_APP },
		{ "reset_gpu", XID_RESET_GPU },
		{ "reboot", XID_REBOOT },
		{ "contained", XID_CONTAINED },
		{ "recovery_action", XID_RECOVERY },
	};

	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (strcmp(s, actions[i].name) == 0) {
			*out = actions[i].action;
			return 0;
		}
	return -1;
}

int
xid_catalog_load(struct xid_catalog **out, const char *json, size_t len, struct gp_error *err)
{
	struct arena *tmp = arena_create();
	struct json_object *root = NULL, *xids = NULL, *actions = NULL;
	struct xid_catalog *c = calloc(1, sizeof(*c));
	const char *about = NULL;
	struct jfields f;

	*out = NULL;
	if (c == NULL) {
		arena_destroy(tmp);
		return gp_error_set(err, 500, "internal", "could not allocate the xid catalog");
	}
	c->arena = arena_create();
	if (json_parse_object(tmp, json, len, &root, err) < 0)
		goto fail;
	jf_init(&f, tmp, root, "", err);
	if (jf_string(&f, "about", false, 65536, &about) < 0 ||
	    jf_object(&f, "actions", false, &actions) < 0 ||
	    jf_array(&f, "xids", true, &xids) < 0 || jf_finish(&f) < 0)
		goto fail;
	for (size_t i = 0; i < json_object_array_length(xids); i++) {
		struct json_object *e = json_object_array_get_idx(xids, i);
		char path[32];
		const char *name = NULL, *action = NULL;
		int64_t xid = 0;
		enum xid_action act;
		struct jfields g;

		snprintf(path, sizeof(path), "xids[%zu]", i);
		if (!json_object_is_type(e, json_type_object)) {
			gp_error_field(err, path, "must be an object");
			goto fail;
		}
		jf_init(&g, tmp, e, path, err);
		if (jf_int(&g, "xid", true, 1, XID_MAX - 1, &xid, NULL) < 0 ||
		    jf_string(&g, "name", true, 200, &name) < 0 ||
		    jf_string(&g, "action", true, 32, &action) < 0 || jf_finish(&g) < 0)
			goto fail;
		if (parse_action(action, &act) < 0) {
			gp_error_field(err, jf_path(&g, "action"), "unknown action %s", action);
			goto fail;
		}
		c->action[xid] = (unsigned char)act;
		c->name[xid] = arena_strdup(c->arena, name);
	}
	arena_destroy(tmp);
	*out = c;
	return 0;
fail:
	if (!gp_error_isset(err))
		gp_error_set(err, 500, "internal", "bad xid catalog");
	arena_destroy(tmp);
	xid_catalog_free(c);
	return -1;
}

int
xid_catalog_load_builtin(struct xid_catalog **out, struct gp_error *err)
{
	return xid_catalog_load(out, gp_xid_catalog_json, gp_xid_catalog_json_len, err);
}

void
xid_catalog_free(struct xid_catalog *c)
{
	if (c == NULL)
		return;
	arena_destroy(c->arena);
	free(c);
}

enum xid_action
xid_lookup(const struct xid_catalog *c, int xid, const char **name)
{
	if (name != NULL)
		*name = NULL;
	if (c == NULL || xid <= 0 || xid >= XID_MAX)
		return XID_UNKNOWN;
	if (name != NULL)
		*name = c->name[xid];
	return (enum xid_action)c->action[xid];
}

bool
health_recovery_action_valid(const char *action)
{
	static const char *const valid[] = { "none", "gpu_reset", "node_reboot", "drain_p2p",
		"drain_and_reset" };

	if (action == NULL)
		return true;
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++)
		if (strcmp(action, valid[i]) == 0)
			return true;
	return false;
}

static bool
action_is(const char *action, const char *v)
{
	return action != NULL && strcmp(action, v) == 0;
}

void
health_assess(const struct xid_catalog *c, const struct gpu_health_report *r, struct arena *a,
    struct gpu_health_verdict *out)
{
	const char *action = r->recovery_action;
	bool contained = false;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < r->nxids && out->fail == NULL; i++) {
		const char *name = NULL;
		enum xid_action act = xid_lookup(c, r->xids[i], &name);

		if (act == XID_RESET_GPU)
			out->fail =
			    arena_printf(a, "Xid %d (%s): the GPU needs a reset", r->xids[i], name);
		else if (act == XID_REBOOT)
			out->fail = arena_printf(a, "Xid %d (%s): the node needs a reboot",
			    r->xids[i], name);
		else if (act == XID_CONTAINED) {
			contained = true;
			if (out->degrade == NULL)
				out->degrade = arena_printf(a, "Xid %d (%s): a contained error",
				    r->xids[i], name);
		} else if (act == XID_RECOVERY && out->degrade == NULL &&
		    !action_is(action, "gpu_reset") && !action_is(action, "node_reboot") &&
		    !action_is(action, "drain_and_reset"))
			out->degrade = arena_printf(a, "Xid %d (%s): recovery action %s",
			    r->xids[i], name, action ? action : "not reported");
	}
	if (out->fail == NULL && r->remapped_rows_failure)
		out->fail = arena_strdup(a, "a row remapping failed");
	if (out->fail == NULL && action_is(action, "gpu_reset"))
		out->fail = arena_strdup(a, "NVML recovery action GPU_RESET");
	if (out->fail == NULL && action_is(action, "node_reboot"))
		out->fail = arena_strdup(a, "NVML recovery action NODE_REBOOT");
	if (out->fail == NULL && action_is(action, "drain_and_reset"))
		out->fail = arena_strdup(a, "NVML recovery action DRAIN_AND_RESET");
	if (out->degrade == NULL && r->remapped_rows_pending)
		out->degrade = arena_strdup(a, "a row remapping is pending (contained)");
	if (out->degrade == NULL && action_is(action, "drain_p2p"))
		out->degrade = arena_strdup(a, "NVML recovery action DRAIN_P2P");
	if (r->ecc_uncorrected > 0) {
		if (contained && out->degrade != NULL)
			out->degrade = arena_printf(a, "%s, %lld uncorrectable ECC errors",
			    out->degrade, (long long)r->ecc_uncorrected);
		else if (!contained)
			out->ecc = arena_printf(a, "%lld uncorrectable ECC errors",
			    (long long)r->ecc_uncorrected);
	}
}
