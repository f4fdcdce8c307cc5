/*
 * pool_json.c - the JSON shapes of pools, pool requests, allocations and
 * item lists: what the handlers reply and what the approval workflow
 * writes into audit rows (one shape for both).
 */
#include "pool_json.h"
#include "core/problem.h"

#include <string.h>

int
pools_items_parse(const char *json, struct spec_count *out, int *n, struct gp_error *err)
{
	struct json_object *arr = json != NULL ? json_tokener_parse(json) : NULL;
	size_t len;
	int rc = -1;

	*n = 0;
	if (arr == NULL || !json_object_is_type(arr, json_type_array))
		goto fail;
	len = json_object_array_length(arr);
	if (len > POOL_MAX_ITEMS)
		goto fail;
	for (size_t i = 0; i < len; i++) {
		struct json_object *o = json_object_array_get_idx(arr, i), *m, *p, *c;
		struct gp_error e;

		if (!json_object_object_get_ex(o, "model", &m) ||
		    !json_object_object_get_ex(o, "profile", &p) ||
		    !json_object_object_get_ex(o, "count", &c))
			goto fail;
		gp_error_clear(&e);
		if (spec_set(&out[i], json_object_get_string(m), json_object_get_string(p),
			json_object_get_int(c), "items", &e) < 0)
			goto fail;
	}
	*n = pool_items_canonical(out, (int)len);
	rc = 0;
fail:
	json_object_put(arr);
	if (rc < 0)
		gp_problem_set(err, GP_PROBLEM_INTERNAL, "a stored item list is malformed");
	return rc;
}

struct json_object *
pools_items_json(const struct spec_count *items, int n)
{
	struct json_object *arr = json_object_new_array();

	for (int i = 0; i < n; i++) {
		struct json_object *o = json_object_new_object();

		json_add_str(o, "model", items[i].model);
		json_add_str(o, "profile", items[i].profile);
		json_add_int(o, "count", items[i].count);
		json_object_array_add(arr, o);
	}
	return arr;
}

const char *
pools_items_text(struct arena *a, const struct spec_count *items, int n)
{
	return json_to_arena(a, json_own(a, pools_items_json(items, n)), NULL);
}

/* Stored items as JSON, or [] when they do not parse (logged by the caller's 500s). */
struct json_object *
pools_stored_items_json(const char *text)
{
	struct spec_count items[POOL_MAX_ITEMS];
	struct gp_error e;
	int n = 0;

	gp_error_clear(&e);
	if (pools_items_parse(text, items, &n, &e) < 0)
		n = 0;
	return pools_items_json(items, n);
}

/* ---- JSON shapes ---- */

struct json_object *
pools_alloc_json(const char *node, const char *gpu_uuid, int gpu_index, const char *model,
    const char *profile, int start, int size, const char *state, const char *device_uuid)
{
	struct json_object *o = json_object_new_object();
	char k8s[SPEC_K8S_MAX];

	json_add_str(o, "node", node);
	json_add_str(o, "gpu_uuid", gpu_uuid);
	json_add_int(o, "gpu_index", gpu_index);
	json_add_str(o, "model", model);
	json_add_str(o, "profile", profile);
	json_add_int(o, "start", start);
	json_add_int(o, "size", size);
	json_add_str(o, "state", state);
	json_add_str(o, "resource_name",
	    spec_k8s_resource(profile, k8s, sizeof(k8s)) == 0 ? k8s : NULL);
	json_add_str(o, "device_uuid", device_uuid);
	return o;
}

struct json_object *
pools_pool_json(const struct pool_row *p, const struct pool_alloc_row *a, int na)
{
	struct json_object *o = json_object_new_object();
	struct json_object *arr = json_object_new_array();

	json_add_int(o, "id", p->id);
	json_add_str(o, "project", p->project);
	json_add_str(o, "name", p->name);
	json_add_str(o, "status", pool_status_name(p->status));
	json_add_str(o, "cluster", p->cluster);
	json_object_object_add(o, "items", pools_stored_items_json(p->items_json));
	if (p->ends_us != 0)
		json_add_time(o, "ends_at", p->ends_us);
	else
		json_add_str(o, "ends_at", NULL);
	json_add_int(o, "generation", p->generation);
	json_add_time(o, "created_at", p->created_us);
	json_add_time(o, "updated_at", p->updated_us);
	if (p->released_us != 0)
		json_add_time(o, "released_at", p->released_us);
	else
		json_add_str(o, "released_at", NULL);
	for (int i = 0; i < na; i++) {
		if (a[i].pool_id != p->id)
			continue;
		json_object_array_add(arr,
		    pools_alloc_json(a[i].node, a[i].gpu_uuid, a[i].gpu_index, a[i].model,
			a[i].profile, a[i].start, a[i].size, allocation_state_name(a[i].state),
			a[i].device_uuid));
	}
	json_object_object_add(o, "allocations", arr);
	return o;
}

struct json_object *
pools_request_json(const struct pool_request_row *r, const struct pool_request_event *history,
    int nhistory)
{
	struct json_object *o = json_object_new_object();

	json_add_int(o, "id", r->id);
	json_add_str(o, "project", r->project);
	json_add_str(o, "pool", r->pool);
	json_add_int(o, "pool_id", r->pool_id);
	json_add_str(o, "action", pool_action_name(r->action));
	json_add_str(o, "state", pool_request_state_name(r->state));
	json_object_object_add(o, "items", pools_stored_items_json(r->items_json));
	json_add_str(o, "justification", r->justification);
	json_add_time_or_null(o, "ends_at", r->ends_us);
	json_add_str(o, "requested_by", r->requested_by);
	json_add_time_or_null(o, "requested_at", r->requested_us);
	json_add_time_or_null(o, "expires_at", r->expires_us);
	json_add_str(o, "decided_by", r->decided_by);
	json_add_time_or_null(o, "decided_at", r->decided_us);
	json_add_str(o, "note", r->note);
	json_add_str(o, "reason", r->state == POOL_REQUEST_REJECTED ? r->note : NULL);
	json_add_int(o, "generation", r->generation);
	if (history != NULL) {
		struct json_object *arr = json_object_new_array();

		for (int i = 0; i < nhistory; i++) {
			struct json_object *e = json_object_new_object();

			json_add_time(e, "at", history[i].at_us);
			json_add_str(e, "from", history[i].from_state);
			json_add_str(e, "to", history[i].to_state);
			json_add_str(e, "actor", history[i].actor);
			json_add_str(e, "note", history[i].note);
			json_object_array_add(arr, e);
		}
		json_object_object_add(o, "history", arr);
	}
	return o;
}
