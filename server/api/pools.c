/*
 * pools.c - project quotas (GET/PUT/DELETE /v1/projects/{project}/quota),
 * pool views (GET /v1/projects/{project}/pools, GET /v1/pools/{id}) and
 * the JSON shapes the pool handlers share.
 */
#include "pools.h"

#include "db/db_projects.h"

#include <string.h>

/* ---- item lists ---- */

/* One entry of an item array into s; errors are recorded on err under path. */
static void
item_read(struct request *req, struct json_object *v, const char *path, struct spec_count *s,
    struct gp_error *err)
{
	const struct catalog *c = api_app(req)->catalog;
	struct gp_error e;

	gp_error_clear(&e);
	memset(s, 0, sizeof(*s));
	if (json_object_is_type(v, json_type_string)) {
		if (spec_parse(json_object_get_string(v), s, path, &e) < 0 ||
		    spec_validate(s, c, path, NULL, NULL, &e) < 0)
			goto copy;
	} else if (json_object_is_type(v, json_type_object)) {
		struct jfields f;
		const char *model = NULL, *profile = NULL;
		int64_t count = 0;
		bool has = false;

		jf_init(&f, req->arena, v, path, &e);
		jf_string(&f, "model", true, CATALOG_NAME_MAX - 1, &model);
		jf_string(&f, "profile", true, CATALOG_NAME_MAX - 1, &profile);
		jf_int(&f, "count", true, 1, SPEC_COUNT_MAX, &count, &has);
		if (jf_finish(&f) < 0 || spec_set(s, model, profile, (int)count, path, &e) < 0 ||
		    spec_validate(s, c, path, NULL, NULL, &e) < 0)
			goto copy;
	} else {
		gp_error_field(&e, path,
		    "must be a SpecAndCount object or its text form "
		    "MODEL/PROFILE=COUNT");
	}
copy:
	for (int k = 0; k < e.nfields; k++)
		gp_error_field(err, e.fields[k].field, "%s", e.fields[k].message);
	if (gp_error_isset(&e) && e.nfields == 0)
		gp_error_field(err, path, "%s", e.message);
}

int
pools_items_read(struct request *req, struct json_object *arr, struct spec_count *out, int *n,
    struct gp_error *err)
{
	size_t len = json_object_array_length(arr);
	struct spec_count items[POOL_MAX_ITEMS];
	bool bad = false;

	*n = 0;
	if (len == 0)
		return gp_error_field(err, "items", "must list at least one item");
	if (len > POOL_MAX_ITEMS)
		return gp_error_field(err, "items", "must list at most %d items", POOL_MAX_ITEMS);
	for (size_t i = 0; i < len; i++) {
		const char *path = arena_printf(req->arena, "items[%zu]", i);
		int before = err->nfields;

		item_read(req, json_object_array_get_idx(arr, i), path, &items[i], err);
		if (gp_error_isset(err) && err->nfields != before) {
			bad = true;
			continue;
		}
		for (size_t j = 0; j < i; j++) {
			if (spec_same_kind(&items[j], &items[i])) {
				gp_error_field(err, path, "%s/%s is listed twice", items[i].model,
				    items[i].profile);
				bad = true;
				break;
			}
		}
	}
	if (bad || gp_error_isset(err))
		return -1;
	memcpy(out, items, sizeof(*out) * len);
	*n = pool_items_canonical(out, (int)len);
	return 0;
}

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
		gp_error_set(err, 500, "internal", "a stored item list is malformed");
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
static struct json_object *
stored_items_json(const char *text)
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
	json_add_str(o, "status", p->status);
	json_object_object_add(o, "items", stored_items_json(p->items_json));
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
			a[i].profile, a[i].start, a[i].size, a[i].state, a[i].device_uuid));
	}
	json_object_object_add(o, "allocations", arr);
	return o;
}

static void
add_time_or_null(struct json_object *o, const char *key, int64_t us)
{
	if (us != 0)
		json_add_time(o, key, us);
	else
		json_add_str(o, key, NULL);
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
	json_add_str(o, "action", r->action);
	json_add_str(o, "state", r->state);
	json_object_object_add(o, "items", stored_items_json(r->items_json));
	json_add_str(o, "justification", r->justification);
	add_time_or_null(o, "ends_at", r->ends_us);
	json_add_str(o, "requested_by", r->requested_by);
	add_time_or_null(o, "requested_at", r->requested_us);
	add_time_or_null(o, "expires_at", r->expires_us);
	json_add_str(o, "decided_by", r->decided_by);
	add_time_or_null(o, "decided_at", r->decided_us);
	json_add_str(o, "note", r->note);
	json_add_str(o, "reason", strcmp(r->state, "rejected") == 0 ? r->note : NULL);
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

/* ---- quotas ---- */

static struct json_object *
quota_json(struct request *req, const char *project, bool has, const char *items_json,
    const char *usage_json, int64_t generation, int64_t updated_us)
{
	struct json_object *o = json_object_new_object();

	(void)req;
	json_add_str(o, "project", project);
	if (has)
		json_object_object_add(o, "items", stored_items_json(items_json));
	else
		json_object_object_add(o, "items", NULL);
	json_add_bool(o, "limited", has);
	json_object_object_add(o, "usage", stored_items_json(usage_json));
	if (has) {
		json_add_int(o, "generation", generation);
		json_add_time(o, "updated_at", updated_us);
	}
	return o;
}

int
api_quota_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct project_row p;
	const char *items = NULL, *usage = NULL;
	int64_t gen = 0, upd = 0;
	bool has;

	if (api_project_access(db_thread(), req, req->params[0], PROJECT_READ, &p, NULL, err) < 0)
		return -1;
	if (db_quota_get(db_thread(), req->arena, p.id, &has, &items, &gen, &upd, err) < 0 ||
	    db_project_usage(db_thread(), req->arena, p.id, &usage, err) < 0)
		return -1;
	response_json(req, res, 200, quota_json(req, p.name, has, items, usage, gen, upd));
	if (has)
		api_etag(req, res, gen);
	return 0;
}

struct quota_change {
	struct request *req;
	const char *items_json; /* NULL: delete */
	int64_t expected;
	struct project_row project;
	bool had;
	const char *before;
	int64_t before_gen;
	int64_t generation;
	int64_t updated_us;
	const char *usage;
};

static int
quota_change_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct quota_change *c = arg;
	struct request *req = c->req;
	bool existed;

	if (api_project_access(db, req, req->params[0], PROJECT_READ, &c->project, NULL, err) < 0)
		return -1;
	if (db_quota_lock(db, req->arena, c->project.id, &c->had, &c->before, err) < 0)
		return -1;
	if (c->expected != 0) {
		int64_t gen = 0, upd = 0;
		const char *ignored;
		bool has;

		if (db_quota_get(db, req->arena, c->project.id, &has, &ignored, &gen, &upd, err) <
		    0)
			return -1;
		if (!has || gen != c->expected)
			return gp_error_set(err, 412, "precondition_failed",
			    "the quota changed since it was read (ETag mismatch)");
	}
	if (c->items_json != NULL) {
		if (db_quota_put(db, req->arena, c->project.id, c->items_json, &c->generation,
			&c->updated_us, err) < 0)
			return -1;
	} else {
		if (db_quota_delete(db, req->arena, c->project.id, &existed, err) < 0)
			return -1;
		if (!existed)
			return gp_error_set(err, 404, "not_found", "project %s has no quota",
			    c->project.name);
	}
	if (db_project_usage(db, req->arena, c->project.id, &c->usage, err) < 0)
		return -1;
	return api_audit(db, req, c->items_json ? "project.quota.put" : "project.quota.delete",
	    "project_quota", c->project.name, c->project.id,
	    c->had ? json_own(req->arena, stored_items_json(c->before)) : NULL,
	    c->items_json ? json_own(req->arena, stored_items_json(c->items_json)) : NULL, err);
}

int
api_quota_put(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *arr = NULL;
	struct spec_count items[POOL_MAX_ITEMS];
	struct jfields f;
	struct quota_change c;
	int n = 0;

	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.expected, err) < 0)
		return -1;
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_array(&f, "items", true, &arr) == 0 && arr != NULL &&
	    json_object_array_length(arr) > 0 && pools_items_read(req, arr, items, &n, err) < 0)
		n = 0;
	if (jf_finish(&f) < 0)
		return -1;
	c.req = req;
	c.items_json = pools_items_text(req->arena, items, n);
	if (db_tx(db_thread(), quota_change_tx, &c, err) < 0)
		return -1;
	response_json(req, res, c.had ? 200 : 201,
	    quota_json(req, c.project.name, true, c.items_json, c.usage, c.generation,
		c.updated_us));
	api_etag(req, res, c.generation);
	return 0;
}

int
api_quota_delete(struct request *req, struct response *res, struct gp_error *err)
{
	struct quota_change c;

	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.expected, err) < 0)
		return -1;
	c.req = req;
	if (db_tx(db_thread(), quota_change_tx, &c, err) < 0)
		return -1;
	response_empty(res, 204);
	return 0;
}

/* ---- pools ---- */

int
api_pools_list(struct request *req, struct response *res, struct gp_error *err)
{
	const char *status = req->query(req, "status");
	struct project_row p;
	struct pool_row *rows;
	struct pool_alloc_row *allocs;
	struct json_object *items;
	enum pool_status st;
	int64_t cursor, *ids;
	int limit, n, na, shown;

	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (status != NULL && pool_status_parse(status, &st) < 0)
		return gp_error_field(err, "status",
		    "must be one of pending, provisioning, active, "
		    "degraded, releasing, released");
	if (api_project_access(db_thread(), req, req->params[0], PROJECT_READ, &p, NULL, err) < 0)
		return -1;
	if (db_pools_list(db_thread(), req->arena, p.id, status, cursor, limit + 1, &rows, &n,
		err) < 0)
		return -1;
	shown = n < limit ? n : limit;
	ids = arena_alloc(req->arena, sizeof(*ids) * (size_t)(shown + 1));
	for (int i = 0; i < shown; i++)
		ids[i] = rows[i].id;
	if (db_pool_allocations(db_thread(), req->arena, ids, shown, 0, &allocs, &na, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < shown; i++)
		json_object_array_add(items, pools_pool_json(&rows[i], allocs, na));
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

int
api_pools_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct project_row proj;
	struct pool_row p;
	struct pool_alloc_row *allocs;
	struct gp_error ignored;
	int64_t id;
	bool found;
	int na;

	if (api_param_id(req, 0, &id, err) < 0)
		return -1;
	if (db_pool_get(db_thread(), req->arena, id, &p, &found, err) < 0)
		return -1;
	gp_error_clear(&ignored);
	/* another tenant's pool is indistinguishable from a missing one */
	if (!found ||
	    api_project_access(db_thread(), req, p.project, PROJECT_READ, &proj, NULL, &ignored) <
		0) {
		if (found && ignored.status >= 500) {
			*err = ignored;
			return -1;
		}
		return gp_error_set(err, 404, "not_found", "no such pool: %s", req->params[0]);
	}
	if (db_pool_allocations(db_thread(), req->arena, &p.id, 1, 0, &allocs, &na, err) < 0)
		return -1;
	response_json(req, res, 200, pools_pool_json(&p, allocs, na));
	api_etag(req, res, p.generation);
	return 0;
}

/* ---- /metrics ---- */

const char *
pools_metrics_text(struct arena *a)
{
	struct gp_error err;
	int64_t pending, backlog;

	gp_error_clear(&err);
	if (db_pools_gauges(db_thread(), &pending, &backlog, &err) < 0)
		return NULL;
	return arena_printf(a,
	    "# HELP gpupool_pool_requests_pending Pool requests waiting for a decision.\n"
	    "# TYPE gpupool_pool_requests_pending gauge\n"
	    "gpupool_pool_requests_pending %lld\n"
	    "# HELP gpupool_outbox_backlog Desired-state changes not yet delivered to agents.\n"
	    "# TYPE gpupool_outbox_backlog gauge\n"
	    "gpupool_outbox_backlog %lld\n",
	    (long long)pending, (long long)backlog);
}
