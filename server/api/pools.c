/*
 * pools.c - project quotas (GET/PUT/DELETE /v1/projects/{project}/quota),
 * pool views (GET /v1/projects/{project}/pools, GET /v1/pools/{id}) and
 * the JSON shapes the pool handlers share.
 */
#include "pools.h"
#include "projects.h"
#include "core/problem.h"

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

/* ---- quotas ---- */

/* A quota in the audit log: an object (the audit schema's before/after), {"items": [...]}. */
static struct json_object *
quota_audit_json(const char *items_json)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "items", pools_stored_items_json(items_json));
	return o;
}

static struct json_object *
quota_json(struct request *req, const char *project, bool has, const char *items_json,
    const char *usage_json, int64_t generation, int64_t updated_us)
{
	struct json_object *o = json_object_new_object();

	(void)req;
	json_add_str(o, "project", project);
	/* no quota: no item is limited ("limited": false), an empty list, not null */
	json_object_object_add(o, "items",
	    has ? pools_stored_items_json(items_json) : json_object_new_array());
	json_add_bool(o, "limited", has);
	json_object_object_add(o, "usage", pools_stored_items_json(usage_json));
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
	/* "0": no quota yet (a quota's generations start at 1), so If-None-Match works too */
	api_etag(req, res, has ? gen : 0);
	return 0;
}

struct quota_change {
	struct request *req;
	const char *items_json; /* NULL: delete */
	struct api_if_match if_match;
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
	if (c->if_match.value != NULL) {
		int64_t gen = 0, upd = 0, guard;
		const char *ignored;
		bool has;

		/* locked above; no quota is shown as items [] with ETag "0" */
		if (db_quota_get(db, req->arena, c->project.id, &has, &ignored, &gen, &upd, err) <
			0 ||
		    api_if_match_check(&c->if_match, has ? gen : 0, "quota", &guard, err) < 0)
			return -1;
	}
	if (c->items_json != NULL) {
		if (db_quota_put(db, req->arena, c->project.id, c->items_json, &c->generation,
			&c->updated_us, err) < 0)
			return -1;
	} else {
		if (db_quota_delete(db, req->arena, c->project.id, &existed, err) < 0)
			return -1;
		if (!existed)
			return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "project %s has no quota",
			    c->project.name);
	}
	if (db_project_usage(db, req->arena, c->project.id, &c->usage, err) < 0)
		return -1;
	return api_audit(db, req, c->items_json ? "project.quota.put" : "project.quota.delete",
	    "project_quota", c->project.name, c->project.id,
	    c->had ? json_own(req->arena, quota_audit_json(c->before)) : NULL,
	    c->items_json ? json_own(req->arena, quota_audit_json(c->items_json)) : NULL, err);
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
	if (api_if_match(req, &c.if_match, err) < 0)
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
	if (api_if_match(req, &c.if_match, err) < 0)
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
	if (db_pools_list(db_thread(), req->arena, p.id, status != NULL ? &st : NULL, cursor,
		limit + 1, &rows, &n, err) < 0)
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
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such pool: %s",
		    req->params[0]);
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
