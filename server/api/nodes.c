/*
 * nodes.c - NodeCapacity: GPU nodes, their labels and status, and the
 * cordon / uncordon / drain actions (operators and admins write; billing
 * reads too).
 *
 * Status: a node created here starts "ready" (placeable). cordon takes
 * it out of placement (from ready, down or unknown), drain does the same
 * and marks its work for moving off, uncordon makes it ready again. Only
 * a ready node takes new placements; existing allocations stay.
 */
#include "nodes.h"
#include "capacity.h"

#include "db/db_capacity.h"

#include <string.h>

#define LABELS_MAX 64
#define NODE_NAME_MAX 253
#define REASON_MAX 500

static struct json_object *
node_json(const struct node_row *n)
{
	struct json_object *o = json_object_new_object();
	struct json_object *agent = json_object_new_object();

	json_add_str(o, "name", n->name);
	json_add_str(o, "cluster", n->cluster);
	json_add_str(o, "hostname", n->hostname);
	json_add_str(o, "status", n->status);
	json_add_str(o, "status_reason", n->status_reason);
	json_add_bool(o, "placeable", strcmp(n->status, "ready") == 0);
	json_add_int(o, "cpu_millicores", n->cpu_millicores);
	json_add_int(o, "memory_bytes", n->memory_bytes);
	json_object_object_add(o, "labels",
	    n->labels_json ? json_tokener_parse(n->labels_json) : json_object_new_object());
	json_add_str(o, "gpu_model", n->gpu_model);
	json_object_object_add(o, "gpu_models",
	    n->gpu_models_json ? json_tokener_parse(n->gpu_models_json) : json_object_new_array());
	json_add_int(o, "gpu_count", n->gpu_count);
	json_add_str(agent, "version", n->agent_version);
	json_add_time(agent, "heartbeat_at", n->agent_heartbeat_us);
	json_object_object_add(o, "agent", agent);
	json_add_int(o, "generation", n->generation);
	json_add_int(o, "observed_generation", n->observed_generation);
	json_add_time(o, "created_at", n->created_us);
	json_add_time(o, "updated_at", n->updated_us);
	return o;
}

static bool
alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A Kubernetes node name: a DNS subdomain, lower case. */
static bool
node_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > NODE_NAME_MAX || s[0] == '-' || s[0] == '.' || s[n - 1] == '-' ||
	    s[n - 1] == '.')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
			s[i] == '.'))
			return false;
	return true;
}

static bool
hostname_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!alnum(s[i]) && s[i] != '-' && s[i] != '.')
			return false;
	return true;
}

/* A label name or value part: alphanumeric at both ends, [-_.] inside. */
static bool
label_part_valid(const char *s, size_t n, bool may_be_empty)
{
	if (n == 0)
		return may_be_empty;
	if (n > 63 || !alnum(s[0]) || !alnum(s[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

/* A Kubernetes label key: [prefix/]name, the prefix a DNS subdomain. */
static bool
label_key_valid(const char *k)
{
	const char *slash = strchr(k, '/');

	if (slash != NULL) {
		size_t pn = (size_t)(slash - k);

		if (pn == 0 || pn > 253)
			return false;
		for (size_t i = 0; i < pn; i++)
			if (!((k[i] >= 'a' && k[i] <= 'z') || (k[i] >= '0' && k[i] <= '9') ||
				k[i] == '-' || k[i] == '.'))
				return false;
		k = slash + 1;
	}
	return label_part_valid(k, strlen(k), false);
}

/* Validate a labels object; its canonical JSON text, or NULL after errors. */
static const char *
read_labels(struct request *req, struct json_object *obj, const char *field, struct gp_error *err)
{
	struct json_object *out = json_own(req->arena, json_object_new_object());
	bool bad = false;

	if (json_object_object_length(obj) > LABELS_MAX) {
		gp_error_field(err, field, "must hold at most %d labels", LABELS_MAX);
		return NULL;
	}
	json_object_object_foreach(obj, key, val)
	{
		const char *path = arena_printf(req->arena, "%s.%s", field, key);

		if (!label_key_valid(key)) {
			gp_error_field(err, path, "is not a Kubernetes label key");
			bad = true;
			continue;
		}
		if (!json_object_is_type(val, json_type_string)) {
			gp_error_field(err, path, "must be a string");
			bad = true;
			continue;
		}
		if (!label_part_valid(json_object_get_string(val),
			(size_t)json_object_get_string_len(val), true)) {
			gp_error_field(err, path, "is not a Kubernetes label value");
			bad = true;
			continue;
		}
		json_object_object_add(out, key,
		    json_object_new_string(json_object_get_string(val)));
	}
	return bad ? NULL : json_to_arena(req->arena, out, NULL);
}

/*
 * The labels of a merge patch (RFC 7396): an object whose members set a
 * label, or remove it with null. Validated like read_labels; the
 * object itself (owned by the request), or NULL after errors.
 */
static struct json_object *
read_labels_patch(struct request *req, struct json_object *obj, struct gp_error *err)
{
	bool bad = false;

	json_object_object_foreach(obj, key, val)
	{
		const char *path = arena_printf(req->arena, "labels.%s", key);

		if (!label_key_valid(key)) {
			gp_error_field(err, path, "is not a Kubernetes label key");
			bad = true;
		} else if (val != NULL && !json_object_is_type(val, json_type_string)) {
			gp_error_field(err, path, "must be a string, or null to remove the label");
			bad = true;
		} else if (val != NULL &&
		    !label_part_valid(json_object_get_string(val),
			(size_t)json_object_get_string_len(val), true)) {
			gp_error_field(err, path, "is not a Kubernetes label value");
			bad = true;
		}
	}
	return bad ? NULL : obj;
}

/* The node's labels (JSON text) with a merge patch of them applied; NULL after 422. */
static const char *
labels_merge(struct request *req, const char *labels_json, struct json_object *patch,
    struct gp_error *err)
{
	struct json_object *merged = NULL;
	size_t len = labels_json != NULL ? strlen(labels_json) : 0;
	struct gp_error ignored;

	gp_error_clear(&ignored);
	if (len == 0 || json_parse_object(req->arena, labels_json, len, &merged, &ignored) < 0)
		merged = json_own(req->arena, json_object_new_object());
	json_object_object_foreach(patch, key, val)
	{
		if (val == NULL)
			json_object_object_del(merged, key);
		else
			json_object_object_add(merged, key,
			    json_object_new_string(json_object_get_string(val)));
	}
	if (json_object_object_length(merged) > LABELS_MAX) {
		gp_error_field(err, "labels", "must hold at most %d labels (after the merge)",
		    LABELS_MAX);
		return NULL;
	}
	return json_to_arena(req->arena, merged, NULL);
}

/* The label filter "k=v,k2=v2" as a JSON object text. */
static int
label_filter(struct request *req, const char *q, const char **out, struct gp_error *err)
{
	struct json_object *o = json_own(req->arena, json_object_new_object());
	const char *s = q;

	*out = NULL;
	if (q == NULL)
		return 0;
	if (strlen(q) > 4096)
		return gp_error_field(err, "label", "is too long");
	for (;;) {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		const char *eq = memchr(s, '=', len);
		char *key, *val;

		if (eq == NULL)
			return gp_error_field(err, "label",
			    "must be key=value pairs separated by ','");
		key = arena_strndup(req->arena, s, (size_t)(eq - s));
		val = arena_strndup(req->arena, eq + 1, len - (size_t)(eq - s) - 1);
		if (!label_key_valid(key) || !label_part_valid(val, strlen(val), true))
			return gp_error_field(err, "label", "%s=%s is not a Kubernetes label", key,
			    val);
		json_object_object_add(o, key, json_object_new_string(val));
		if (end == NULL)
			break;
		s = end + 1;
	}
	*out = json_to_arena(req->arena, o, NULL);
	return 0;
}

static bool
status_valid(const char *s)
{
	static const char *const all[] = { "ready", "cordoned", "draining", "down", "unknown" };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++)
		if (strcmp(s, all[i]) == 0)
			return true;
	return false;
}

struct node_change {
	struct request *req;
	const char *name;
	const char *cluster;
	const char *hostname;
	int64_t cpu_millicores;
	int64_t memory_bytes;
	const char *labels;
	struct json_object *labels_patch; /* a merge patch's labels (RFC 7396), or NULL */
	struct api_if_match if_match;
	const char *action; /* cordon|uncordon|drain */
	const char *reason;
	bool changed;
	struct node_row before;
	struct node_row row;
};

static int
node_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct node_change *c = arg;
	int64_t cluster_id;

	if (capacity_cluster_id(db, c->req->arena, c->cluster, "cluster", &cluster_id, err) < 0)
		return -1;
	if (db_node_insert(db, c->req->arena, cluster_id, c->name, c->hostname, c->cpu_millicores,
		c->memory_bytes, c->labels, &c->row, err) < 0)
		return -1;
	return api_audit(db, c->req, "node.create", "node", c->row.name, 0, NULL,
	    json_own(c->req->arena, node_json(&c->row)), err);
}

int
api_nodes_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *labels = NULL;
	struct jfields f;
	struct node_change c;
	bool has;

	memset(&c, 0, sizeof(c));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "name", true, NODE_NAME_MAX, &c.name) == 0 && !node_name_valid(c.name))
		gp_error_field(err, "name",
		    "must be a Kubernetes node name: lower-case letters, digits, '-' and '.'");
	jf_string(&f, "cluster", true, 63, &c.cluster);
	if (jf_string(&f, "hostname", false, 253, &c.hostname) == 0 && c.hostname != NULL &&
	    !hostname_valid(c.hostname))
		gp_error_field(err, "hostname",
		    "must be a host name: letters, digits, '-' and '.'");
	jf_int(&f, "cpu_millicores", false, 0, INT64_MAX, &c.cpu_millicores, &has);
	jf_int(&f, "memory_bytes", false, 0, INT64_MAX, &c.memory_bytes, &has);
	if (jf_object(&f, "labels", false, &labels) == 0 && labels != NULL)
		c.labels = read_labels(req, labels, "labels", err);
	if (jf_finish(&f) < 0)
		return -1;
	if (c.hostname == NULL)
		c.hostname = c.name;
	if (c.labels == NULL)
		c.labels = "{}";
	c.req = req;
	if (db_tx(db_thread(), node_create_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 201, node_json(&c.row));
	api_etag(req, res, c.row.generation);
	response_header(res, "Location", arena_printf(req->arena, "/v1/nodes/%s", c.row.name));
	return 0;
}

int
api_nodes_list(struct request *req, struct response *res, struct gp_error *err)
{
	const struct catalog *cat = api_app(req)->catalog;
	struct node_filter f;
	struct node_row *rows;
	struct json_object *items;
	int limit, n;
	int64_t cursor;

	memset(&f, 0, sizeof(f));
	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	f.status = req->query(req, "status");
	if (f.status != NULL && !status_valid(f.status))
		gp_error_field(err, "status",
		    "must be one of ready, cordoned, draining, down, unknown");
	f.model = req->query(req, "model");
	if (capacity_model_param(cat, f.model, "model", err) < 0)
		f.model = NULL;
	(void)label_filter(req, req->query(req, "label"), &f.labels_json, err);
	if (gp_error_isset(err))
		return -1;
	if (capacity_cluster_id(db_thread(), req->arena, req->query(req, "cluster"), "cluster",
		&f.cluster_id, err) < 0)
		return -1;
	if (db_nodes_list(db_thread(), req->arena, &f, cursor, limit + 1, &rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, node_json(&rows[i]));
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

static int
node_load(struct db *db, struct request *req, bool for_update, struct node_row *out,
    struct gp_error *err)
{
	bool found;

	if (strlen(req->params[0]) > NODE_NAME_MAX)
		return gp_error_set(err, 404, "not_found", "no such node");
	if (db_node_get(db, req->arena, req->params[0], for_update, out, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such node: %s", req->params[0]);
	return 0;
}

int
api_nodes_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct node_row n;

	if (node_load(db_thread(), req, false, &n, err) < 0)
		return -1;
	response_json(req, res, 200, node_json(&n));
	api_etag(req, res, n.generation);
	return 0;
}

static int
node_patch_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct node_change *c = arg;
	bool stale;
	int64_t guard;

	if (node_load(db, c->req, true, &c->before, err) < 0)
		return -1;
	if (api_if_match_check(&c->if_match, c->before.generation, "node", &guard, err) < 0)
		return -1;
	if (c->labels_patch != NULL &&
	    (c->labels = labels_merge(c->req, c->before.labels_json, c->labels_patch, err)) == NULL)
		return -1;
	if (db_node_update(db, c->req->arena, c->before.id, c->hostname, c->cpu_millicores,
		c->memory_bytes, c->labels, guard, &c->row, &stale, err) < 0)
		return -1;
	if (stale)
		return gp_error_set(err, 412, "precondition_failed",
		    "the node changed since it was read (ETag mismatch)");
	return api_audit(db, c->req, "node.update", "node", c->row.name, 0,
	    json_own(c->req->arena, node_json(&c->before)),
	    json_own(c->req->arena, node_json(&c->row)), err);
}

int
api_nodes_patch(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *labels = NULL;
	struct jfields f;
	static const char *const fixed[] = { "name", "cluster", "status" };
	static const char *const keys[] = { "hostname", "cpu_millicores", "memory_bytes", "labels",
		NULL };
	struct node_change c;
	bool has_cpu, has_mem;

	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.if_match, err) < 0)
		return -1;
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "hostname", false, 253, &c.hostname) == 0 && c.hostname != NULL &&
	    !hostname_valid(c.hostname))
		gp_error_field(err, "hostname",
		    "must be a host name: letters, digits, '-' and '.'");
	jf_int(&f, "cpu_millicores", false, 0, INT64_MAX, &c.cpu_millicores, &has_cpu);
	jf_int(&f, "memory_bytes", false, 0, INT64_MAX, &c.memory_bytes, &has_mem);
	/* a merge patch merges labels (null removes one); application/json replaces them all */
	(void)api_patch_not_null(req, body, keys, err);
	if (jf_object(&f, "labels", false, &labels) == 0 && labels != NULL) {
		if (api_merge_patch(req))
			c.labels_patch = read_labels_patch(req, labels, err);
		else
			c.labels = read_labels(req, labels, "labels", err);
	}
	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
		const char *ignored;

		if (!jf_has(&f, fixed[i]))
			continue;
		(void)jf_string(&f, fixed[i], false, 1000, &ignored);
		if (strcmp(fixed[i], "status") == 0)
			gp_error_field(err, fixed[i],
			    "is changed with POST /v1/nodes/{node}/cordon, uncordon or drain");
		else
			gp_error_field(err, fixed[i], "cannot be changed");
	}
	if (jf_finish(&f) < 0)
		return -1;
	if (!has_cpu)
		c.cpu_millicores = -1;
	if (!has_mem)
		c.memory_bytes = -1;
	c.req = req;
	if (db_tx(db_thread(), node_patch_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 200, node_json(&c.row));
	api_etag(req, res, c.row.generation);
	return 0;
}

static const char *
action_target(const char *action)
{
	if (strcmp(action, "cordon") == 0)
		return "cordoned";
	if (strcmp(action, "drain") == 0)
		return "draining";
	return "ready";
}

static int
node_action_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct node_change *c = arg;
	const char *target = action_target(c->action);
	int64_t guard;

	c->changed = false;
	if (node_load(db, c->req, true, &c->before, err) < 0)
		return -1;
	/* the node is locked (FOR UPDATE): no guard needed in the write */
	if (api_if_match_check(&c->if_match, c->before.generation, "node", &guard, err) < 0)
		return -1;
	if (strcmp(c->action, "cordon") == 0 && strcmp(c->before.status, "draining") == 0)
		return gp_error_set(err, 409, "conflict",
		    "node %s is draining (already out of placement); uncordon it first",
		    c->before.name);
	if (strcmp(c->before.status, target) == 0 && c->reason == NULL) {
		c->row = c->before;
		return 0;
	}
	if (db_node_set_status(db, c->req->arena, c->before.id, target, c->reason, &c->row, err) <
	    0)
		return -1;
	c->changed = true;
	return api_audit(db, c->req, arena_printf(c->req->arena, "node.%s", c->action), "node",
	    c->row.name, 0, json_own(c->req->arena, node_json(&c->before)),
	    json_own(c->req->arena, node_json(&c->row)), err);
}

static int
node_action(struct request *req, struct response *res, const char *action, struct gp_error *err)
{
	struct node_change c;

	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.if_match, err) < 0)
		return -1;
	if (req->body_len > 0) {
		struct json_object *body;
		struct jfields f;

		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		jf_string(&f, "reason", false, REASON_MAX, &c.reason);
		if (jf_finish(&f) < 0)
			return -1;
	}
	c.req = req;
	c.action = action;
	if (db_tx(db_thread(), node_action_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 200, node_json(&c.row));
	api_etag(req, res, c.row.generation);
	return 0;
}

int
api_nodes_cordon(struct request *req, struct response *res, struct gp_error *err)
{
	return node_action(req, res, "cordon", err);
}

int
api_nodes_uncordon(struct request *req, struct response *res, struct gp_error *err)
{
	return node_action(req, res, "uncordon", err);
}

int
api_nodes_drain(struct request *req, struct response *res, struct gp_error *err)
{
	return node_action(req, res, "drain", err);
}
