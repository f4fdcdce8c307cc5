/*
 * agent_service.c - the node agents' workflows (agent_service.h): each
 * runs its transaction and writes its audit row; the multi-table steps are
 * the PL/pgSQL functions db/db_agent.c calls (the reason is in the header).
 */
#include "agent_service.h"

#include <string.h>

#include "core/json.h"
#include "db/db_agent.h"
#include "db/db_audit.h"
#include "db/db_capacity.h"

/*
 * The audit row of a workflow; before and after are JSON texts (NULL:
 * none), written as json-c prints them again.
 */
static int
agent_audit(struct db *db, struct arena *a, const struct service_actor *who, const char *action,
    const char *object_type, const char *object_id, const char *before, const char *after,
    struct gp_error *err)
{
	struct audit_entry e;

	memset(&e, 0, sizeof(e));
	e.actor_id = who->user_id;
	e.actor = who->username;
	e.action = action;
	e.object_type = object_type;
	e.object_id = object_id;
	e.request_id = who->http_request_id;
	e.before_json =
	    before ? json_to_arena(a, json_own(a, json_tokener_parse(before)), NULL) : NULL;
	e.after_json =
	    after ? json_to_arena(a, json_own(a, json_tokener_parse(after)), NULL) : NULL;
	return db_audit_insert(db, a, &e, err);
}

/* ---- enrollment tokens ---- */

struct enroll_token_tx {
	struct arena *a;
	const struct service_actor *who;
	const struct enroll_token_new *in;
	const char *cluster;
	int64_t cluster_id, id;
	const char *json;
};

static int
cluster_lookup(struct db *db, struct enroll_token_tx *t, struct gp_error *err)
{
	if (strlen(t->cluster) > 63 || db_cluster_id(db, t->a, t->cluster, &t->cluster_id, err) < 0)
		return strlen(t->cluster) > 63
		    ? gp_error_set(err, 404, "not_found", "no such cluster")
		    : -1;
	if (t->cluster_id == 0)
		return gp_error_set(err, 404, "not_found", "no such cluster: %s", t->cluster);
	return 0;
}

static int
enroll_token_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct enroll_token_tx *t = arg;
	const struct enroll_token_new *in = t->in;

	if (cluster_lookup(db, t, err) < 0 ||
	    db_enroll_token_create(db, t->a, t->cluster_id, in->digest, in->prefix, in->ttl_s,
		t->who->user_id, in->node_name, in->adopt_manual, &t->json, err) < 0)
		return -1;
	return agent_audit(db, t->a, t->who, "enrollment_token.create", "cluster", t->cluster, NULL,
	    t->json, err);
}

int
service_enroll_token_create(struct db *db, struct arena *a, const struct service_actor *who,
    const struct enroll_token_new *in, const char **json, struct gp_error *err)
{
	struct enroll_token_tx t = { .a = a, .who = who, .in = in, .cluster = in->cluster };

	if (db_tx(db, enroll_token_create_tx, &t, err) < 0)
		return -1;
	*json = t.json;
	return 0;
}

static int
enroll_tokens_list_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct enroll_token_tx *t = arg;

	if (cluster_lookup(db, t, err) < 0)
		return -1;
	return db_enroll_tokens_list(db, t->a, t->cluster_id, &t->json, err);
}

int
service_enroll_tokens_list(struct db *db, struct arena *a, const char *cluster, const char **json,
    struct gp_error *err)
{
	struct enroll_token_tx t = { .a = a, .cluster = cluster };

	if (db_tx(db, enroll_tokens_list_tx, &t, err) < 0)
		return -1;
	*json = t.json;
	return 0;
}

static int
enroll_token_revoke_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct enroll_token_tx *t = arg;
	bool found = false;

	if (cluster_lookup(db, t, err) < 0 ||
	    db_enroll_token_revoke(db, t->a, t->cluster_id, t->id, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found",
		    "no usable enrollment token %lld in cluster %s", (long long)t->id, t->cluster);
	return agent_audit(db, t->a, t->who, "enrollment_token.revoke", "enrollment_token",
	    arena_printf(t->a, "%lld", (long long)t->id), NULL, NULL, err);
}

int
service_enroll_token_revoke(struct db *db, struct arena *a, const struct service_actor *who,
    const char *cluster, int64_t id, struct gp_error *err)
{
	struct enroll_token_tx t = { .a = a, .who = who, .cluster = cluster, .id = id };

	return db_tx(db, enroll_token_revoke_tx, &t, err);
}

/* ---- enrollment ---- */

struct enroll_tx {
	struct arena *a;
	const struct service_actor *who;
	const unsigned char *enroll_digest;
	struct agent_enrollment *e;
	int64_t node_id;
	const char *node_json;
	const char *adopted; /* what the adopted node was; NULL: a new node */
};

static int
enroll_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct enroll_tx *t = arg;
	bool found = false;

	if (db_enroll_token_consume(db, t->a, t->enroll_digest, &t->e->token_id, &t->e->cluster_id,
		&found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 401, "invalid_enrollment_token",
		    "the enrollment token is unknown, used, revoked or expired");
	if (db_agent_enroll(db, t->a, t->e, &t->node_id, &t->node_json, &t->adopted, err) < 0)
		return -1;
	if (t->adopted != NULL &&
	    agent_audit(db, t->a, t->who, "node.adopt", "node", t->e->node_name, t->adopted,
		t->node_json, err) < 0)
		return -1;
	return agent_audit(db, t->a, t->who, "node.enroll", "node", t->e->node_name, NULL,
	    t->node_json, err);
}

int
service_agent_enroll(struct db *db, struct arena *a, const struct service_actor *who,
    const unsigned char *enroll_digest, struct agent_enrollment *e, int64_t *node_id,
    const char **node_json, struct gp_error *err)
{
	struct enroll_tx t = { .a = a, .who = who, .enroll_digest = enroll_digest, .e = e };

	if (db_tx(db, enroll_tx, &t, err) < 0)
		return -1;
	*node_id = t.node_id;
	*node_json = t.node_json;
	return 0;
}

/* ---- node tokens ---- */

struct node_token_tx {
	struct arena *a;
	const struct service_actor *who;
	int64_t node_id;
	const char *node;
	const unsigned char *digest; /* NULL: revoke */
};

static int
node_token_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct node_token_tx *t = arg;

	if (t->node != NULL) {
		if (db_node_id_by_name(db, t->a, t->node, &t->node_id, err) < 0)
			return -1;
		if (t->node_id == 0)
			return gp_error_set(err, 404, "not_found", "no such node: %s", t->node);
	}
	if (db_node_token_replace(db, t->a, t->node_id, t->digest, err) < 0)
		return -1;
	return agent_audit(db, t->a, t->who, t->digest ? "node.token_rotate" : "node.token_revoke",
	    "node", t->node ? t->node : arena_printf(t->a, "%lld", (long long)t->node_id), NULL,
	    NULL, err);
}

int
service_node_token_replace(struct db *db, struct arena *a, const struct service_actor *who,
    int64_t node_id, const char *node, const unsigned char *digest, struct gp_error *err)
{
	struct node_token_tx t = { .a = a,
		.who = who,
		.node_id = node_id,
		.node = node,
		.digest = digest };

	return db_tx(db, node_token_tx, &t, err);
}

/* ---- desired state ---- */

int
service_agent_desired(struct db *db, struct arena *a, int64_t node_id, int64_t after,
    int64_t *generation, const char **doc, struct gp_error *err)
{
	*generation = 0;
	*doc = NULL;
	/* the cheap check first: a long-poll asks again on every wake */
	if (db_agent_generation(db, a, node_id, generation, err) < 0)
		return -1;
	if (*generation == after)
		return 0;
	return db_agent_desired_state(db, a, node_id, generation, doc, err);
}

/* ---- status, heartbeat, profiles ---- */

/*
 * The report's instances against the GPU catalog, as enrollment checks
 * them: a MIG instance that is not a placement of its GPU's model (profile,
 * start, size) is not recorded (a warning); "full" is a whole GPU.
 */
static void
status_catalog_check(struct arena *a, const struct catalog *cat, struct json_object *gpus,
    const char *models_json, struct json_object *warnings)
{
	struct json_object *models = json_own(a, json_tokener_parse(models_json));

	for (size_t i = 0; i < json_object_array_length(gpus); i++) {
		struct json_object *g = json_object_array_get_idx(gpus, i), *uuid, *insts, *info,
				   *model, *keep;
		const struct gpu_model *m;

		if (!json_object_object_get_ex(g, "uuid", &uuid) ||
		    !json_object_object_get_ex(g, "instances", &insts) || models == NULL ||
		    !json_object_object_get_ex(models, json_object_get_string(uuid), &info) ||
		    !json_object_object_get_ex(info, "model", &model))
			continue; /* not a GPU of the node: SQL ignores it */
		m = catalog_model(cat, json_object_get_string(model));
		keep = json_object_new_array();
		for (size_t k = 0; k < json_object_array_length(insts); k++) {
			struct json_object *in = json_object_array_get_idx(insts, k), *v;
			const char *profile;
			int start, size;
			const struct mig_profile *p;

			json_object_object_get_ex(in, "profile", &v);
			profile = json_object_get_string(v);
			json_object_object_get_ex(in, "start", &v);
			start = json_object_get_int(v);
			json_object_object_get_ex(in, "size", &v);
			size = json_object_get_int(v);
			p = (m != NULL && strcmp(profile, "full") != 0)
			    ? catalog_profile(m, profile)
			    : NULL;
			if (strcmp(profile, "full") == 0 ||
			    (p != NULL && catalog_profile_allows(p, start) &&
				p->memory_slices == size)) {
				json_object_array_add(keep, json_object_get(in));
				continue;
			}
			json_object_array_add(warnings,
			    json_object_new_string(arena_printf(a,
				"gpus[%zu].instances[%zu]: %s@%d is not a placement of %s: not recorded",
				i, k, profile, start, m ? m->id : json_object_get_string(model))));
		}
		json_object_object_add(g, "instances", keep);
	}
}

struct status_tx {
	struct arena *a;
	const struct catalog *cat;
	const struct agent_status_report *r;
	struct json_object *warnings;
	const char *result;
};

static int
status_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct status_tx *t = arg;
	const char *models = NULL, *gpus_json;

	if (db_agent_node_gpus(db, t->a, t->r->node_id, &models, err) < 0)
		return -1;
	/* (again on a retried transaction: the same checks, the same warnings) */
	t->warnings = json_own(t->a, json_object_new_array());
	status_catalog_check(t->a, t->cat, t->r->gpus, models ? models : "{}", t->warnings);
	gpus_json = json_to_arena(t->a, t->r->gpus, NULL);
	return db_agent_apply_status(db, t->a, t->r->node_id, t->r->observed, t->r->version,
	    gpus_json, t->r->errors_json, &t->result, err);
}

int
service_agent_status(struct db *db, struct arena *a, const struct catalog *cat,
    const struct agent_status_report *r, struct json_object **warnings, const char **result,
    struct gp_error *err)
{
	struct status_tx t = { .a = a, .cat = cat, .r = r };

	if (db_tx(db, status_tx, &t, err) < 0)
		return -1;
	*warnings = t.warnings;
	*result = t.result;
	return 0;
}

struct heartbeat_tx {
	struct arena *a;
	int64_t node_id, observed, generation;
};

static int
heartbeat_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct heartbeat_tx *t = arg;

	return db_agent_heartbeat(db, t->a, t->node_id, t->observed, &t->generation, err);
}

int
service_agent_heartbeat(struct db *db, struct arena *a, int64_t node_id, int64_t observed,
    int64_t *generation, struct gp_error *err)
{
	struct heartbeat_tx t = { .a = a, .node_id = node_id, .observed = observed };

	if (db_tx(db, heartbeat_tx, &t, err) < 0)
		return -1;
	*generation = t.generation;
	return 0;
}

int
service_agent_heartbeats(struct db *db, const int64_t *nodes, const int64_t *observed, int n,
    int64_t *generation, bool *done, struct gp_error *err)
{
	struct arena *a = arena_create();
	int64_t *un = arena_alloc(a, sizeof(*un) * (size_t)(n > 0 ? n : 1));
	int64_t *uo = arena_alloc(a, sizeof(*uo) * (size_t)(n > 0 ? n : 1));
	int64_t *ug = arena_alloc(a, sizeof(*ug) * (size_t)(n > 0 ? n : 1));
	bool *ud = arena_alloc(a, sizeof(*ud) * (size_t)(n > 0 ? n : 1));
	int *at = arena_alloc(a, sizeof(*at) * (size_t)(n > 0 ? n : 1));
	int m = 0, rc;

	/* each node once: a second heartbeat of a node in the batch runs alone */
	for (int i = 0; i < n; i++) {
		bool seen = false;

		done[i] = false;
		for (int k = 0; k < m && !seen; k++)
			seen = un[k] == nodes[i];
		at[i] = seen ? -1 : m;
		if (!seen) {
			un[m] = nodes[i];
			uo[m++] = observed[i];
		}
	}
	rc = m > 0 ? db_agent_heartbeats(db, a, un, uo, m, ug, ud, err) : 0;
	for (int i = 0; rc == 0 && i < n; i++)
		if (at[i] >= 0 && ud[at[i]]) {
			generation[i] = ug[at[i]];
			done[i] = true;
		}
	arena_destroy(a);
	return rc;
}

struct profiles_tx {
	struct arena *a;
	int64_t node_id;
	const char *json;
	int64_t violations;
};

static int
profiles_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct profiles_tx *t = arg;

	return db_agent_profiles(db, t->a, t->node_id, t->json, &t->violations, err);
}

int
service_agent_profiles(struct db *db, struct arena *a, int64_t node_id, const char *json,
    int64_t *violations, struct gp_error *err)
{
	struct profiles_tx t = { .a = a, .node_id = node_id, .json = json };

	if (db_tx(db, profiles_tx, &t, err) < 0)
		return -1;
	*violations = t.violations;
	return 0;
}
