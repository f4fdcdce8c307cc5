/*
 * gpus.c - GpuCapacity: GPUs registered on nodes by hand (agents report
 * them in a later issue), with their health, MIG mode and current layout
 * (the live allocations on them). Addressed by UUID.
 *
 * A GPU may be registered together with the instances already on it
 * ("instances": [{"profile", "start"}]): they are checked against the
 * hardware rules with the placement engine and stored as allocations
 * without a pool (not managed by gpupool, but holding their slices).
 */
#include "gpus.h"
#include "projects.h"
#include "capacity.h"

#include "db/db_capacity.h"
#include "db/db_projects.h"
#include "domain/catalog.h"
#include "domain/placement.h"
#include "domain/spec.h"

#include <string.h>

#define GPU_INDEX_MAX 15 /* 16 GPUs per node at most */
#define GPU_UUID_LEN 40  /* "GPU-" + 36 */
#define INSTANCES_MAX CATALOG_MAX_SLICES
#define REASON_MAX 500

struct gpu_view {
	const struct gpu_row *g;
	const struct alloc_row *allocs;
	int nallocs;
};

static struct json_object *
gpu_json(const struct catalog *c, const struct gpu_view *v)
{
	const struct gpu_row *g = v->g;
	const struct gpu_model *m = catalog_model(c, g->model);
	struct json_object *o = json_object_new_object();
	struct json_object *layout = json_object_new_array();
	int slices = m == NULL ? 0 : m->mig_capable ? m->memory_slices : m->full_slices;
	int used = 0;

	for (int b = 0; b < 8; b++)
		used += (g->used_mask >> b) & 1;
	json_add_str(o, "uuid", g->uuid);
	json_add_str(o, "node", g->node);
	json_add_str(o, "cluster", g->cluster);
	json_add_int(o, "index", g->index);
	json_add_str(o, "model", g->model);
	json_add_int(o, "memory_mib", g->memory_mib);
	json_add_bool(o, "mig_enabled", g->mig_enabled);
	json_add_str(o, "health", g->health);
	json_add_str(o, "health_reason", g->health_reason);
	json_add_bool(o, "placeable",
	    strcmp(g->health, "ok") == 0 && strcmp(g->node_status, "ready") == 0);
	json_add_int(o, "memory_slices", slices);
	json_add_int(o, "used_mask", g->used_mask);
	json_add_int(o, "free_slices", slices - used);
	for (int i = 0; i < v->nallocs; i++) {
		const struct alloc_row *a = &v->allocs[i];
		struct json_object *x = json_object_new_object();

		json_add_int(x, "allocation_id", a->id);
		json_add_str(x, "profile", a->profile);
		json_add_int(x, "start", a->start);
		json_add_int(x, "size", a->size);
		json_add_str(x, "state", a->state);
		json_add_bool(x, "managed", a->pool_id != 0);
		if (a->pool_id != 0)
			json_add_int(x, "pool_id", a->pool_id);
		else
			json_add_str(x, "pool_id", NULL);
		json_add_str(x, "device_uuid", a->device_uuid);
		json_object_array_add(layout, x);
	}
	json_object_object_add(o, "layout", layout);
	json_add_int(o, "generation", g->generation);
	json_add_time(o, "created_at", g->created_us);
	json_add_time(o, "updated_at", g->updated_us);
	return o;
}

/* JSON of one GPU with its layout read now. */
static int
gpu_json_load(struct db *db, struct request *req, const struct gpu_row *g, struct json_object **out,
    struct gp_error *err)
{
	struct gpu_view v = { g, NULL, 0 };
	struct alloc_row *allocs;

	if (db_allocations_live(db, req->arena, &g->id, 1, &allocs, &v.nallocs, err) < 0)
		return -1;
	v.allocs = allocs;
	*out = gpu_json(api_app(req)->catalog, &v);
	return 0;
}

/* Reply with a page of GPUs, their layouts read in one query. */
static int
reply_gpus(struct request *req, struct response *res, const struct gpu_row *rows, int n, int limit,
    struct gp_error *err)
{
	int count = n < limit ? n : limit;
	int64_t *ids = arena_alloc(req->arena, sizeof(*ids) * (size_t)(count + 1));
	struct alloc_row *allocs;
	struct json_object *items;
	int nallocs, k = 0;

	for (int i = 0; i < count; i++)
		ids[i] = rows[i].id;
	if (db_allocations_live(db_thread(), req->arena, ids, count, &allocs, &nallocs, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < count; i++) {
		struct gpu_view v = { &rows[i], NULL, 0 };

		while (k < nallocs && allocs[k].gpu_id < rows[i].id)
			k++;
		v.allocs = &allocs[k];
		while (k < nallocs && allocs[k].gpu_id == rows[i].id) {
			k++;
			v.nallocs++;
		}
		json_object_array_add(items, gpu_json(api_app(req)->catalog, &v));
	}
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

/* "GPU-" and 8-4-4-4-12 hex digits; the hex is lowered into out. */
static bool
uuid_normalize(const char *s, char *out)
{
	static const char pattern[] = "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";

	if (strlen(s) != GPU_UUID_LEN)
		return false;
	for (int i = 0; i < GPU_UUID_LEN; i++) {
		char ch = s[i];

		if (pattern[i] != 'x') {
			if (ch != pattern[i])
				return false;
			out[i] = ch;
		} else if (ch >= '0' && ch <= '9') {
			out[i] = ch;
		} else if (ch >= 'a' && ch <= 'f') {
			out[i] = ch;
		} else if (ch >= 'A' && ch <= 'F') {
			out[i] = (char)(ch - 'A' + 'a');
		} else {
			return false;
		}
	}
	out[GPU_UUID_LEN] = '\0';
	return true;
}

struct gpu_instance {
	const char *profile;
	int start;
	int size;
};

struct gpu_change {
	struct request *req;
	/* create */
	int index;
	char uuid[GPU_UUID_LEN + 1];
	const struct gpu_model *model;
	int memory_mib;
	bool mig_enabled;
	struct gpu_instance instances[INSTANCES_MAX];
	int ninstances;
	/* patch */
	const char *health;
	bool reason_set;
	const char *reason;
	int mig; /* -1 keep */
	struct api_if_match if_match;
	struct gpu_row before;
	struct gpu_row row;
	struct json_object *json;
};

static int
gpu_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct gpu_change *c = arg;
	struct request *req = c->req;
	struct node_row node;
	bool found;

	if (strlen(req->params[0]) > 253)
		return gp_error_set(err, 404, "not_found", "no such node");
	if (db_node_get(db, req->arena, req->params[0], true, &node, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such node: %s", req->params[0]);
	if (db_gpu_insert(db, req->arena, node.id, c->index, c->uuid, c->model->id, c->memory_mib,
		c->mig_enabled, &c->row, err) < 0)
		return -1;
	for (int i = 0; i < c->ninstances; i++) {
		if (db_allocation_insert_unmanaged(db, req->arena, c->row.id,
			c->instances[i].profile, c->instances[i].start, c->instances[i].size,
			"ready", err) < 0)
			return -1;
	}
	if (db_gpu_get(db, req->arena, c->uuid, false, &c->row, &found, err) < 0)
		return -1;
	if (gpu_json_load(db, req, &c->row, &c->json, err) < 0)
		return -1;
	json_own(req->arena, c->json);
	return api_audit(db, req, "gpu.create", "gpu", c->row.uuid, 0, NULL, c->json, err);
}

/* Check "instances" with the engine; fills c->instances and c->mig_enabled. */
static void
read_instances(struct request *req, struct json_object *arr, struct gpu_change *c, bool mig_given,
    struct gp_error *err)
{
	size_t n = json_object_array_length(arr);
	struct placement_gpu g;
	bool any_mig = false, any_full = false;

	if (n > INSTANCES_MAX) {
		gp_error_field(err, "instances", "must hold at most %d instances", INSTANCES_MAX);
		return;
	}
	placement_gpu_init(&g, c->model, 0, 0, c->index, c->mig_enabled);
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(arr, i);
		const char *path = arena_printf(req->arena, "instances[%zu]", i);
		const struct mig_profile *p = NULL;
		const char *profile = NULL;
		struct jfields f;
		struct gp_error e;
		int64_t start = 0;
		bool has;

		if (!json_object_is_type(v, json_type_object)) {
			gp_error_field(err, path, "must be an object {\"profile\", \"start\"}");
			continue;
		}
		jf_init(&f, req->arena, v, path, err);
		if (jf_string(&f, "profile", true, CATALOG_NAME_MAX - 1, &profile) < 0 ||
		    jf_int(&f, "start", true, 0, CATALOG_MAX_SLICES - 1, &start, &has) < 0 ||
		    jf_finish(&f) < 0)
			continue;
		if (strcmp(profile, SPEC_FULL) != 0) {
			p = catalog_profile(c->model, profile);
			if (p == NULL) {
				gp_error_field(err, jf_path(&f, "profile"),
				    "model %s offers no MIG profile %s", c->model->id, profile);
				continue;
			}
		}
		gp_error_clear(&e);
		if (placement_gpu_add(&g, p, (int)start, &e) < 0) {
			gp_error_field(err, path, "%s", e.message);
			continue;
		}
		any_mig = any_mig || p != NULL;
		any_full = any_full || p == NULL;
		c->instances[c->ninstances].profile = p ? p->name : SPEC_FULL;
		c->instances[c->ninstances].start = (int)start;
		c->instances[c->ninstances].size = p ? p->memory_slices : c->model->full_slices;
		c->ninstances++;
	}
	if (gp_error_isset(err))
		return;
	if (mig_given && any_mig && !c->mig_enabled)
		gp_error_field(err, "mig_enabled", "must be true when MIG instances are listed");
	else if (mig_given && any_full && c->mig_enabled)
		gp_error_field(err, "mig_enabled", "must be false when the whole gpu is in use");
	else if (c->ninstances > 0)
		c->mig_enabled = g.mig_enabled;
}

int
api_gpus_create(struct request *req, struct response *res, struct gp_error *err)
{
	const struct catalog *cat = api_app(req)->catalog;
	struct json_object *body, *instances = NULL;
	struct jfields f;
	struct gpu_change *c = arena_alloc(req->arena, sizeof(*c));
	const char *uuid = NULL, *model = NULL;
	int64_t index = 0, mem = 0;
	bool has_index, has_mig, has_mem;

	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	jf_int(&f, "index", true, 0, GPU_INDEX_MAX, &index, &has_index);
	if (jf_string(&f, "uuid", true, 64, &uuid) == 0 && !uuid_normalize(uuid, c->uuid))
		gp_error_field(err, "uuid",
		    "must be an NVIDIA GPU UUID: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx");
	if (jf_string(&f, "model", true, 63, &model) == 0 &&
	    capacity_model_param(cat, model, "model", err) == 0)
		c->model = catalog_model(cat, model);
	jf_bool(&f, "mig_enabled", false, &c->mig_enabled, &has_mig);
	jf_int(&f, "memory_mib", false, 1, INT32_MAX, &mem, &has_mem);
	jf_array(&f, "instances", false, &instances);
	if (c->model != NULL && has_mig && c->mig_enabled && !c->model->mig_capable)
		gp_error_field(err, "mig_enabled", "model %s does not support MIG", c->model->id);
	c->index = (int)index;
	if (c->model != NULL && instances != NULL && !gp_error_isset(err))
		read_instances(req, instances, c, has_mig, err);
	if (jf_finish(&f) < 0)
		return -1;
	c->memory_mib = has_mem ? (int)mem : c->model->memory_mib;
	c->req = req;
	if (db_tx(db_thread(), gpu_create_tx, c, err) < 0)
		return -1;
	response_json(req, res, 201, json_object_get(c->json));
	api_etag(req, res, c->row.generation);
	response_header(res, "Location", arena_printf(req->arena, "/v1/gpus/%s", c->row.uuid));
	return 0;
}

static int
read_filter(struct request *req, struct gpu_filter *f, struct gp_error *err)
{
	const struct catalog *cat = api_app(req)->catalog;
	const char *mig = req->query(req, "mig_enabled");
	const char *node = req->query(req, "node");
	const char *project = req->query(req, "project");

	f->mig_enabled = -1;
	f->pool_name = req->query(req, "pool");
	if (f->pool_name != NULL && project == NULL)
		gp_error_field(err, "pool", "needs project: a pool's name is its project's");
	else if (f->pool_name != NULL &&
	    (strlen(f->pool_name) > 63 || !api_dns_label(f->pool_name)))
		gp_error_field(err, "pool",
		    "must be a DNS label: lower-case letters, digits and '-'");
	f->model = req->query(req, "model");
	if (capacity_model_param(cat, f->model, "model", err) < 0)
		f->model = NULL;
	f->health = req->query(req, "health");
	if (f->health != NULL && strcmp(f->health, "ok") != 0 &&
	    strcmp(f->health, "degraded") != 0 && strcmp(f->health, "failed") != 0)
		gp_error_field(err, "health", "must be one of ok, degraded, failed");
	if (mig != NULL) {
		if (strcmp(mig, "true") == 0)
			f->mig_enabled = 1;
		else if (strcmp(mig, "false") == 0)
			f->mig_enabled = 0;
		else
			gp_error_field(err, "mig_enabled", "must be true or false");
	}
	if (gp_error_isset(err))
		return -1;
	if (capacity_cluster_id(db_thread(), req->arena, req->query(req, "cluster"), "cluster",
		&f->cluster_id, err) < 0)
		return -1;
	if (node != NULL) {
		struct node_row n;
		bool found = false;

		if (strlen(node) <= 253 &&
		    db_node_get(db_thread(), req->arena, node, false, &n, &found, err) < 0)
			return -1;
		if (!found)
			return gp_error_field(err, "node", "no such node: %s", node);
		f->node_id = n.id;
	}
	if (project != NULL) {
		struct project_row p;

		if (api_project_access(db_thread(), req, project, PROJECT_READ, &p, NULL, err) < 0)
			return -1;
		f->project_id = p.id;
	}
	return 0;
}

int
api_gpus_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct gpu_filter f;
	struct gpu_row *rows;
	int limit, n;
	int64_t cursor;

	memset(&f, 0, sizeof(f));
	if (api_page(req, &limit, &cursor, err) < 0 || read_filter(req, &f, err) < 0)
		return -1;
	if (db_gpus_list(db_thread(), req->arena, &f, cursor, limit + 1, &rows, &n, err) < 0)
		return -1;
	return reply_gpus(req, res, rows, n, limit, err);
}

int
api_node_gpus_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct gpu_filter f;
	struct gpu_row *rows;
	struct node_row node;
	int limit, n;
	int64_t cursor;
	bool found = false;

	memset(&f, 0, sizeof(f));
	f.mig_enabled = -1;
	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (strlen(req->params[0]) <= 253 &&
	    db_node_get(db_thread(), req->arena, req->params[0], false, &node, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such node: %s", req->params[0]);
	f.node_id = node.id;
	if (db_gpus_list(db_thread(), req->arena, &f, cursor, limit + 1, &rows, &n, err) < 0)
		return -1;
	return reply_gpus(req, res, rows, n, limit, err);
}

static int
gpu_load(struct db *db, struct request *req, bool for_update, struct gpu_row *out,
    struct gp_error *err)
{
	char uuid[GPU_UUID_LEN + 1];
	bool found;

	if (!uuid_normalize(req->params[0], uuid))
		return gp_error_set(err, 404, "not_found", "no such gpu");
	if (db_gpu_get(db, req->arena, uuid, for_update, out, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such gpu: %s", uuid);
	return 0;
}

int
api_gpus_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct gpu_row g;
	struct json_object *o;

	if (gpu_load(db_thread(), req, false, &g, err) < 0)
		return -1;
	if (gpu_json_load(db_thread(), req, &g, &o, err) < 0)
		return -1;
	response_json(req, res, 200, o);
	api_etag(req, res, g.generation);
	return 0;
}

static int
gpu_patch_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct gpu_change *c = arg;
	struct request *req = c->req;
	const struct gpu_model *m;
	struct json_object *before;
	bool stale;
	int64_t guard;

	if (gpu_load(db, req, true, &c->before, err) < 0)
		return -1;
	if (api_if_match_check(&c->if_match, c->before.generation, "gpu", &guard, err) < 0)
		return -1;
	m = catalog_model(api_app(req)->catalog, c->before.model);
	if (c->mig == 1 && (m == NULL || !m->mig_capable))
		return gp_error_field(err, "mig_enabled", "model %s does not support MIG",
		    c->before.model);
	if (c->mig >= 0 && (c->mig == 1) != c->before.mig_enabled && c->before.layout[0] != '\0')
		return gp_error_set(err, 409, "conflict",
		    "gpu %s holds instances; its MIG mode changes only when it is empty",
		    c->before.uuid);
	if (gpu_json_load(db, req, &c->before, &before, err) < 0)
		return -1;
	json_own(req->arena, before);
	if (db_gpu_update(db, req->arena, c->before.id, c->health, c->reason_set, c->reason, c->mig,
		guard, &c->row, &stale, err) < 0)
		return -1;
	if (stale)
		return gp_error_set(err, 412, "precondition_failed",
		    "the gpu changed since it was read (ETag mismatch)");
	if (gpu_json_load(db, req, &c->row, &c->json, err) < 0)
		return -1;
	json_own(req->arena, c->json);
	return api_audit(db, req, "gpu.update", "gpu", c->row.uuid, 0, before, c->json, err);
}

int
api_gpus_patch(struct request *req, struct response *res, struct gp_error *err)
{
	static const char *const keys[] = { "health", "mig_enabled", NULL };
	struct json_object *body;
	struct jfields f;
	struct gpu_change *c = arena_alloc(req->arena, sizeof(*c));
	bool has_mig, mig = false;

	c->mig = -1;
	if (api_if_match(req, &c->if_match, err) < 0)
		return -1;
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	/* health_reason is nullable: null clears it, as in application/json */
	(void)api_patch_not_null(req, body, keys, err);
	if (jf_string(&f, "health", false, 16, &c->health) == 0 && c->health != NULL &&
	    strcmp(c->health, "ok") != 0 && strcmp(c->health, "degraded") != 0 &&
	    strcmp(c->health, "failed") != 0)
		gp_error_field(err, "health", "must be one of ok, degraded, failed");
	c->reason_set = jf_has(&f, "health_reason");
	jf_string(&f, "health_reason", false, REASON_MAX, &c->reason);
	if (jf_bool(&f, "mig_enabled", false, &mig, &has_mig) == 0 && has_mig)
		c->mig = mig ? 1 : 0;
	if (jf_finish(&f) < 0)
		return -1;
	/* back to ok without a word: the old reason no longer applies */
	if (c->health != NULL && strcmp(c->health, "ok") == 0 && !c->reason_set)
		c->reason_set = true;
	c->req = req;
	if (db_tx(db_thread(), gpu_patch_tx, c, err) < 0)
		return -1;
	response_json(req, res, 200, json_object_get(c->json));
	api_etag(req, res, c->row.generation);
	return 0;
}
