/*
 * clusters.c - the Kubernetes clusters nodes belong to (operators and
 * admins write; billing reads too).
 */
#include "clusters.h"

#include "db/db_capacity.h"

#include <string.h>

static struct json_object *
cluster_json(const struct cluster_row *c)
{
	struct json_object *o = json_object_new_object();

	json_add_str(o, "name", c->name);
	json_add_str(o, "region", c->region);
	json_add_str(o, "description", c->description);
	json_add_int(o, "nodes", c->nodes);
	json_add_int(o, "gpus", c->gpus);
	json_add_int(o, "generation", c->generation);
	json_add_time(o, "created_at", c->created_us);
	json_add_time(o, "updated_at", c->updated_us);
	return o;
}

/* Printable text without control characters. */
static bool
plain_text(const char *s)
{
	for (; *s != '\0'; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

static void
read_texts(struct jfields *f, const char **region, const char **description)
{
	if (jf_string(f, "region", false, 63, region) == 0 && *region != NULL &&
	    !plain_text(*region))
		gp_error_field(f->err, "region", "must not contain control characters");
	if (jf_string(f, "description", false, 500, description) == 0 && *description != NULL &&
	    !plain_text(*description))
		gp_error_field(f->err, "description", "must not contain control characters");
}

struct cluster_change {
	struct request *req;
	const char *name;
	const char *region;
	const char *description;
	struct api_if_match if_match;
	struct cluster_row before;
	struct cluster_row row;
};

static int
cluster_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct cluster_change *c = arg;

	if (db_cluster_insert(db, c->req->arena, c->name, c->region, c->description, &c->row, err) <
	    0)
		return -1;
	return api_audit(db, c->req, "cluster.create", "cluster", c->row.name, 0, NULL,
	    json_own(c->req->arena, cluster_json(&c->row)), err);
}

int
api_clusters_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body;
	struct jfields f;
	struct cluster_change c;

	memset(&c, 0, sizeof(c));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "name", true, 63, &c.name) == 0 && !api_dns_label(c.name))
		gp_error_field(err, "name",
		    "must be a DNS label: lower-case letters, digits and '-'");
	read_texts(&f, &c.region, &c.description);
	if (jf_finish(&f) < 0)
		return -1;
	if (c.region == NULL)
		c.region = "";
	if (c.description == NULL)
		c.description = "";
	c.req = req;
	if (db_tx(db_thread(), cluster_create_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 201, cluster_json(&c.row));
	api_etag(req, res, c.row.generation);
	response_header(res, "Location", arena_printf(req->arena, "/v1/clusters/%s", c.row.name));
	return 0;
}

int
api_clusters_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct cluster_row *rows;
	struct json_object *items;
	int limit, n;
	int64_t cursor;

	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (db_clusters_list(db_thread(), req->arena, cursor, limit + 1, &rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, cluster_json(&rows[i]));
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

static int
cluster_load(struct db *db, struct request *req, struct cluster_row *out, struct gp_error *err)
{
	bool found;

	if (strlen(req->params[0]) > 63)
		return gp_error_set(err, 404, "not_found", "no such cluster");
	if (db_cluster_get(db, req->arena, req->params[0], out, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such cluster: %s", req->params[0]);
	return 0;
}

int
api_clusters_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct cluster_row c;

	if (cluster_load(db_thread(), req, &c, err) < 0)
		return -1;
	response_json(req, res, 200, cluster_json(&c));
	api_etag(req, res, c.generation);
	return 0;
}

static int
cluster_patch_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct cluster_change *c = arg;
	bool stale;
	int64_t guard;

	if (cluster_load(db, c->req, &c->before, err) < 0)
		return -1;
	if (api_if_match_check(&c->if_match, c->before.generation, "cluster", &guard, err) < 0)
		return -1;
	if (db_cluster_update(db, c->req->arena, c->before.id, c->region, c->description, guard,
		&c->row, &stale, err) < 0)
		return -1;
	if (stale)
		return gp_error_set(err, 412, "precondition_failed",
		    "the cluster changed since it was read (ETag mismatch)");
	return api_audit(db, c->req, "cluster.update", "cluster", c->row.name, 0,
	    json_own(c->req->arena, cluster_json(&c->before)),
	    json_own(c->req->arena, cluster_json(&c->row)), err);
}

int
api_clusters_patch(struct request *req, struct response *res, struct gp_error *err)
{
	static const char *const keys[] = { "region", "description", NULL };
	struct json_object *body;
	struct jfields f;
	struct cluster_change c;

	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.if_match, err) < 0)
		return -1;
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	(void)api_patch_not_null(req, body, keys, err);
	read_texts(&f, &c.region, &c.description);
	if (jf_finish(&f) < 0)
		return -1;
	c.req = req;
	if (db_tx(db_thread(), cluster_patch_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 200, cluster_json(&c.row));
	api_etag(req, res, c.row.generation);
	return 0;
}

static int
cluster_delete_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct cluster_change *c = arg;
	bool stale;
	int64_t guard;

	if (cluster_load(db, c->req, &c->before, err) < 0)
		return -1;
	if (api_if_match_check(&c->if_match, c->before.generation, "cluster", &guard, err) < 0)
		return -1;
	if (c->before.nodes > 0)
		return gp_error_set(err, 409, "conflict",
		    "cluster %s still has %lld nodes; remove them first", c->before.name,
		    (long long)c->before.nodes);
	if (db_cluster_delete(db, c->before.id, c->before.generation, &stale, err) < 0)
		return -1;
	if (stale)
		return gp_error_set(err, 412, "precondition_failed",
		    "the cluster changed while it was being deleted");
	return api_audit(db, c->req, "cluster.delete", "cluster", c->before.name, 0,
	    json_own(c->req->arena, cluster_json(&c->before)), NULL, err);
}

int
api_clusters_delete(struct request *req, struct response *res, struct gp_error *err)
{
	struct cluster_change c;

	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.if_match, err) < 0)
		return -1;
	c.req = req;
	if (db_tx(db_thread(), cluster_delete_tx, &c, err) < 0)
		return -1;
	response_empty(res, 204);
	return 0;
}
