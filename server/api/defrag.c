/*
 * defrag.c - POST /v1/capacity/defrag-plans (compute a defragmentation
 * plan from the fleet as it is; the fleet is not changed, the plan is
 * stored and audited) and GET /v1/capacity/defrag-plans/{id}.
 * Operators and admins. docs/capacity.md.
 */
#include "defrag.h"
#include "capacity.h"
#include "core/log.h"
#include "core/problem.h"

#include "db/db_capacity.h"
#include "db/db_defrag.h"
#include "service/defrag_service.h"

#include <stdio.h>
#include <string.h>

#define DEFRAG_MAX_NODES 256
#define DEFRAG_MAX_MOVES 100000
#define DEFRAG_MAX_IDLE_MIN 10080 /* a week */

struct defrag_create {
	struct request *req;
	const char *goal;
	int64_t cluster_id;
	int moves;
	struct json_object *body;
	int64_t id;
	int64_t created_us;
};

static struct json_object *
gpu_place_json(const struct defrag_gpu_row *g, int start)
{
	struct json_object *o = json_object_new_object();

	json_add_str(o, "node", g->node);
	json_add_str(o, "gpu_uuid", g->uuid);
	json_add_int(o, "gpu_index", g->index);
	json_add_int(o, "start", start);
	return o;
}

static struct json_object *
capacity_json(const struct gpu_model *m, const struct placement_capacity *pc)
{
	struct json_object *o = json_object_new_object();
	struct json_object *profs = json_object_new_array();

	json_add_str(o, "model", m->id);
	json_add_int(o, "gpus", pc->gpus);
	json_add_int(o, "empty_gpus", pc->empty_gpus);
	json_add_int(o, "compute_free", pc->compute_free);
	json_add_int(o, "compute_stranded", pc->compute_stranded);
	for (int i = 0; i < m->nprofiles; i++) {
		struct json_object *p = json_object_new_object();

		json_add_str(p, "profile", m->profiles[i].name);
		json_add_int(p, "placeable", pc->headroom[i]);
		json_object_array_add(profs, p);
	}
	json_object_object_add(o, "profiles", profs);
	return o;
}

static const char *
item_text(struct arena *a, const struct spec_count *sc)
{
	return arena_printf(a, "%s/%s=%d", sc->model, sc->profile, sc->count);
}

/* The plan as stored (everything but id, state and who/when). */
static struct json_object *
plan_json(struct request *req, const char *goal, const char *cluster, const char *const *nodes,
    int nnodes, int idle_min, const struct spec_count *items, int nitems,
    const struct defrag_outcome *o)
{
	struct json_object *j = json_object_new_object();
	struct json_object *arr, *cap, *before, *after;

	json_add_str(j, "goal", goal);
	arr = json_object_new_array();
	for (int i = 0; i < nitems; i++)
		json_object_array_add(arr,
		    json_object_new_string(item_text(req->arena, &items[i])));
	json_object_object_add(j, "items", arr);
	json_add_str(j, "cluster", cluster);
	arr = json_object_new_array();
	for (int i = 0; i < nnodes; i++)
		json_object_array_add(arr, json_object_new_string(nodes[i]));
	json_object_object_add(j, "nodes", arr);
	json_add_int(j, "max_moves", o->max_moves);
	json_add_int(j, "idle_minutes", idle_min);
	json_add_int(j, "gpus", o->ngpus);
	json_add_int(j, "instances", o->nallocs);
	json_add_int(j, "idle_instances", o->movable);
	arr = json_object_new_array();
	for (int i = 0; i < o->nmoves; i++) {
		const struct defrag_move *mv = &o->moves[i];
		const struct defrag_alloc_row *al = &o->allocs[mv->inst];
		struct json_object *m = json_object_new_object();

		json_add_int(m, "allocation", al->id);
		json_add_str(m, "project", al->project);
		json_add_str(m, "pool", al->pool);
		json_add_str(m, "profile", al->profile);
		json_object_object_add(m, "from",
		    gpu_place_json(&o->gpus[mv->from_gpu], mv->from_start));
		json_object_object_add(m, "to", gpu_place_json(&o->gpus[mv->to_gpu], mv->to_start));
		json_add_bool(m, "make_before_break", mv->make_before_break);
		json_object_array_add(arr, m);
	}
	json_object_object_add(j, "moves", arr);
	json_add_bool(j, "moves_exhausted", o->moves_exhausted);
	if (nitems > 0) {
		json_add_bool(j, "placeable_before", o->placeable_before);
		json_add_bool(j, "placeable_after", o->placeable_after);
	} else {
		json_object_object_add(j, "placeable_before", NULL);
		json_object_object_add(j, "placeable_after", NULL);
	}
	arr = json_object_new_array();
	for (int i = 0; i < nitems; i++)
		if (o->item_after[i] && !o->item_before[i])
			json_object_array_add(arr,
			    json_object_new_string(item_text(req->arena, &items[i])));
	json_object_object_add(j, "items_made_placeable", arr);
	json_add_int(j, "free_gpus_before", o->free_gpus_before);
	json_add_int(j, "free_gpus_after", o->free_gpus_after);
	arr = json_object_new_array();
	for (int i = 0; i < o->ntenants; i++)
		json_object_array_add(arr, json_object_new_string(o->tenants[i]));
	json_object_object_add(j, "tenants", arr);
	cap = json_object_new_object();
	before = json_object_new_array();
	after = json_object_new_array();
	for (int i = 0; i < o->nmodels; i++) {
		json_object_array_add(before,
		    capacity_json(o->models[i].model, &o->models[i].before));
		json_object_array_add(after,
		    capacity_json(o->models[i].model, &o->models[i].after));
	}
	json_object_object_add(cap, "before", before);
	json_object_object_add(cap, "after", after);
	json_object_object_add(j, "capacity", cap);
	return j;
}

static const char *const progress_keys[5] = { "pending", "running", "done", "skipped", "failed" };

static struct json_object *
progress_json(const int *progress)
{
	struct json_object *o = json_object_new_object();

	for (int i = 0; i < 5; i++)
		json_add_int(o, progress_keys[i], progress[i]);
	return o;
}

/*
 * The answer: the stored body with id, state, created_by, created_at,
 * progress and error; each move with its state (pending with none
 * stored: the plan was not applied).
 */
static struct json_object *
plan_doc(struct json_object *body, int64_t id, const char *state, const char *created_by,
    int64_t created_us, const char *error, const int *progress, const struct defrag_move_row *mr,
    int nmr)
{
	struct json_object *o = json_object_new_object();
	struct json_object *moves;
	bool never = strcmp(state, "cancelled") == 0 || strcmp(state, "expired") == 0;

	json_add_int(o, "id", id);
	json_add_str(o, "state", state);
	json_add_str(o, "created_by", created_by);
	json_add_time(o, "created_at", created_us);
	json_object_object_add(o, "progress", progress_json(progress));
	json_add_str(o, "error", error);
	json_object_object_foreach(body, k, v) json_object_object_add(o, k, json_object_get(v));
	moves = json_object_object_get(o, "moves");
	for (size_t i = 0; moves != NULL && i < json_object_array_length(moves); i++) {
		struct json_object *m = json_object_array_get_idx(moves, i);
		const struct defrag_move_row *r = (int)i < nmr ? &mr[i] : NULL;

		/* (no moves stored: never applied; cancelled or expired, they were skipped) */
		json_add_str(m, "state", r != NULL ? r->state : never ? "skipped" : "pending");
		json_add_str(m, "reason", r != NULL ? r->reason : never ? state : NULL);
		if (r != NULL && r->new_allocation != 0)
			json_add_int(m, "new_allocation", r->new_allocation);
		else
			json_add_null(m, "new_allocation");
		json_add_str(m, "old_uuid", r != NULL ? r->old_uuid : NULL);
		json_add_str(m, "new_uuid", r != NULL ? r->new_uuid : NULL);
		json_add_time(m, "updated_at", r != NULL ? r->updated_us : created_us);
	}
	return o;
}

static int
defrag_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct defrag_create *c = arg;
	size_t len;
	const char *text = json_to_arena(c->req->arena, c->body, &len);
	struct json_object *summary;

	if (db_defrag_plan_insert(db, c->req->arena, c->req->principal.user_id, c->cluster_id,
		c->goal, c->moves, text, &c->id, &c->created_us, err) < 0)
		return -1;
	/* the audit row names the plan and its size; the plan itself is its row */
	summary = json_own(c->req->arena, json_object_new_object());
	json_add_int(summary, "id", c->id);
	json_add_str(summary, "goal", c->goal);
	json_add_int(summary, "moves", c->moves);
	json_object_object_add(summary, "items",
	    json_object_get(json_object_object_get(c->body, "items")));
	json_object_object_add(summary, "cluster",
	    json_object_get(json_object_object_get(c->body, "cluster")));
	return api_audit(db, c->req, "defrag_plan.create", "defrag_plan",
	    arena_printf(c->req->arena, "%lld", (long long)c->id), 0, NULL, summary, err);
}

static int
read_nodes(struct request *req, struct json_object *arr, const char ***out, int *n,
    struct gp_error *err)
{
	size_t len = json_object_array_length(arr);
	const char **v;

	if (len > DEFRAG_MAX_NODES)
		return gp_error_field(err, "nodes", "must hold at most %d node names",
		    DEFRAG_MAX_NODES);
	v = arena_alloc(req->arena, sizeof(*v) * (len + 1));
	for (size_t i = 0; i < len; i++) {
		struct json_object *s = json_object_array_get_idx(arr, i);

		if (!json_object_is_type(s, json_type_string) ||
		    json_object_get_string_len(s) == 0 || json_object_get_string_len(s) > 63)
			return gp_error_field(err, arena_printf(req->arena, "nodes[%zu]", i),
			    "must be a node name");
		v[i] = json_object_get_string(s);
	}
	*out = v;
	*n = (int)len;
	return 0;
}

int
api_defrag_plans_create(struct request *req, struct response *res, struct gp_error *err)
{
	const struct app *app = api_app(req);
	const struct catalog *cat = app->catalog;
	struct json_object *body, *items_arr = NULL, *nodes_arr = NULL, *doc;
	struct jfields f;
	const char *goal = NULL, *cluster = NULL;
	const char **nodes = NULL;
	struct spec_count *items = NULL;
	int nitems = 0, nnodes = 0;
	int64_t max_moves = -1, idle_min = app->idle_after_s / 60;
	bool has;
	struct defrag_request dr;
	struct defrag_outcome out;
	struct defrag_create c;

	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "goal", false, 16, &goal) == 0 && goal != NULL &&
	    strcmp(goal, "items") != 0 && strcmp(goal, "free_gpus") != 0)
		gp_error_field(err, "goal", "must be items or free_gpus");
	if (jf_array(&f, "items", false, &items_arr) == 0 && items_arr != NULL)
		(void)capacity_read_items(req, items_arr, cat, &items, &nitems, err);
	if (jf_array(&f, "nodes", false, &nodes_arr) == 0 && nodes_arr != NULL)
		(void)read_nodes(req, nodes_arr, &nodes, &nnodes, err);
	jf_string(&f, "cluster", false, 63, &cluster);
	jf_int(&f, "max_moves", false, 0, DEFRAG_MAX_MOVES, &max_moves, &has);
	jf_int(&f, "idle_minutes", false, 0, DEFRAG_MAX_IDLE_MIN, &idle_min, &has);
	if (jf_finish(&f) < 0)
		return -1;
	if (goal == NULL)
		goal = items_arr != NULL ? "items" : "free_gpus";
	if (strcmp(goal, "items") == 0 && items_arr == NULL)
		return gp_error_field(err, "items", "is required for the goal items");
	if (strcmp(goal, "free_gpus") == 0 && items_arr != NULL)
		return gp_error_field(err, "items", "is not taken with the goal free_gpus");
	memset(&dr, 0, sizeof(dr));
	if (capacity_cluster_id(db_thread(), req->arena, cluster, "cluster", &dr.cluster_id, err) <
	    0)
		return -1;
	for (int i = 0; i < nnodes; i++) {
		struct node_row nr;
		bool found;

		if (db_node_get(db_thread(), req->arena, nodes[i], false, &nr, &found, err) < 0)
			return -1;
		if (!found)
			gp_error_field(err, arena_printf(req->arena, "nodes[%d]", i),
			    "no such node: %s", nodes[i]);
		else if (dr.cluster_id != 0 && nr.cluster_id != dr.cluster_id)
			gp_error_field(err, arena_printf(req->arena, "nodes[%d]", i),
			    "node %s is not in cluster %s", nodes[i], cluster);
	}
	if (gp_error_isset(err))
		return -1;
	dr.nodes = nodes;
	dr.nnodes = nnodes;
	dr.idle_s = (int)idle_min * 60;
	dr.threshold = app->idle_threshold;
	dr.kind = strcmp(goal, "items") == 0 ? DEFRAG_GOAL_ITEMS : DEFRAG_GOAL_FREE_GPUS;
	dr.items = items;
	dr.nitems = nitems;
	dr.max_moves = (int)max_moves;
	if (defrag_service_plan(db_thread(), req->arena, cat, &dr, &out, err) < 0)
		return -1;

	memset(&c, 0, sizeof(c));
	c.req = req;
	c.goal = goal;
	c.cluster_id = dr.cluster_id;
	c.moves = out.nmoves;
	c.body = json_own(req->arena,
	    plan_json(req, goal, cluster, nodes, nnodes, (int)idle_min, items, nitems, &out));
	if (db_tx(db_thread(), defrag_create_tx, &c, err) < 0)
		return -1;
	log_info(req->request_id, "defrag plan", "plan",
	    arena_printf(req->arena, "%lld", (long long)c.id), "gpus",
	    arena_printf(req->arena, "%d", out.ngpus), "instances",
	    arena_printf(req->arena, "%d", out.nallocs), "moves",
	    arena_printf(req->arena, "%d", out.nmoves), "read_ms",
	    arena_printf(req->arena, "%.1f", out.read_ms), "plan_ms",
	    arena_printf(req->arena, "%.1f", out.plan_ms), "capacity_ms",
	    arena_printf(req->arena, "%.1f", out.capacity_ms));
	{
		int progress[5] = { out.nmoves, 0, 0, 0, 0 };

		doc = plan_doc(c.body, c.id, "planned", req->principal.username, c.created_us, NULL,
		    progress, NULL, 0);
	}
	response_header(res, "Location",
	    arena_printf(req->arena, "/v1/capacity/defrag-plans/%lld", (long long)c.id));
	response_json(req, res, 201, doc);
	return 0;
}

/* The plan as GET answers it; 404 when there is none. */
static int
plan_load(struct request *req, int64_t id, struct json_object **out, struct gp_error *err)
{
	struct defrag_plan_row row;
	struct defrag_move_row *mr;
	struct json_object *body;
	bool found;
	int nmr;

	if (db_defrag_plan_get(db_thread(), req->arena, id, &row, &found, err) < 0)
		return -1;
	if (!found)
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such defrag plan: %s",
		    req->params[0]);
	if (db_defrag_moves(db_thread(), req->arena, id, &mr, &nmr, err) < 0)
		return -1;
	if (json_parse_object(req->arena, row.body, strlen(row.body), &body, err) < 0)
		return -1;
	*out = plan_doc(body, row.id, row.state, row.created_by, row.created_us, row.error,
	    row.progress, mr, nmr);
	return 0;
}

int
api_defrag_plans_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *doc;
	int64_t id;

	if (api_param_id(req, 0, &id, err) < 0)
		return -1;
	if (plan_load(req, id, &doc, err) < 0)
		return -1;
	response_json(req, res, 200, doc);
	return 0;
}

static const char *const plan_states[] = { "planned", "applying", "applied", "failed", "expired",
	"cancelled" };

int
api_defrag_plans_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct defrag_plan_row *rows;
	struct json_object *items;
	const char *state = req->query(req, "state");
	int limit, n;
	int64_t cursor;
	bool ok = state == NULL;

	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	for (size_t i = 0; !ok && i < sizeof(plan_states) / sizeof(plan_states[0]); i++)
		ok = strcmp(state, plan_states[i]) == 0;
	if (!ok)
		return gp_error_field(err, "state",
		    "must be planned, applying, applied, failed, expired or cancelled");
	if (db_defrag_plans_list(db_thread(), req->arena, cursor, state, limit + 1, &rows, &n,
		err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++) {
		struct json_object *o = json_object_new_object();
		struct json_object *it;

		json_add_int(o, "id", rows[i].id);
		json_add_str(o, "state", rows[i].state);
		json_add_str(o, "created_by", rows[i].created_by);
		json_add_time(o, "created_at", rows[i].created_us);
		json_add_str(o, "goal", rows[i].goal);
		it = json_tokener_parse(rows[i].items != NULL ? rows[i].items : "[]");
		if (it == NULL)
			it = json_object_new_array();
		json_object_object_add(o, "items", it);
		json_add_str(o, "cluster", rows[i].cluster);
		json_add_int(o, "moves_total", rows[i].moves);
		json_object_object_add(o, "progress", progress_json(rows[i].progress));
		json_add_str(o, "error", rows[i].error);
		json_object_array_add(items, o);
	}
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

struct defrag_action {
	struct request *req;
	int64_t id;
	bool apply;
	const char *outcome;
};

static int
defrag_action_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct defrag_action *c = arg;
	struct request *req = c->req;
	const struct app *app = api_app(req);
	struct json_object *after;
	int rc;

	rc = c->apply ? db_defrag_apply(db, req->arena, c->id, req->principal.user_id,
			    app->defrag_plan_ttl_s, &c->outcome, err)
		      : db_defrag_cancel(db, req->arena, c->id, &c->outcome, err);
	if (rc < 0)
		return -1;
	if (strcmp(c->outcome, c->apply ? "applying" : "cancelled") != 0)
		return 0; /* (an expired plan's new state commits) */
	after = json_own(req->arena, json_object_new_object());
	json_add_int(after, "id", c->id);
	json_add_str(after, "state", c->apply ? "applying" : "cancelled");
	return api_audit(db, req, c->apply ? "defrag_plan.apply" : "defrag_plan.cancel",
	    "defrag_plan", arena_printf(req->arena, "%lld", (long long)c->id), 0, NULL, after, err);
}

static int
defrag_action(struct request *req, struct response *res, bool apply, struct gp_error *err)
{
	struct defrag_action c;
	struct json_object *body, *doc;
	int status = 200;

	memset(&c, 0, sizeof(c));
	c.req = req;
	c.apply = apply;
	if (api_param_id(req, 0, &c.id, err) < 0)
		return -1;
	if (req->body_len > 0) {
		struct jfields f;

		/* an empty object, or nothing */
		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		if (jf_finish(&f) < 0)
			return -1;
	}
	if (db_tx(db_thread(), defrag_action_tx, &c, err) < 0)
		return -1;
	if (strcmp(c.outcome, "not_found") == 0)
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such defrag plan: %s",
		    req->params[0]);
	if (strcmp(c.outcome, "expired") == 0)
		return gp_error_set(err, 409, "plan_expired",
		    "the plan is older than GPUPOOL_DEFRAG_PLAN_TTL: the fleet has moved on; "
		    "compute a new one");
	if (strcmp(c.outcome, "not_applicable") == 0) {
		if (plan_load(req, c.id, &doc, err) < 0)
			return -1;
		json_own(req->arena, doc);
		return gp_error_set(err, 409, "plan_not_applicable",
		    "the plan is %s: it cannot be %s",
		    json_object_get_string(json_object_object_get(doc, "state")),
		    apply ? "applied" : "cancelled");
	}
	if (apply && strcmp(c.outcome, "applying") == 0)
		status = 202;
	if (plan_load(req, c.id, &doc, err) < 0)
		return -1;
	if (apply && status == 202 &&
	    strcmp(json_object_get_string(json_object_object_get(doc, "state")), "applied") == 0)
		status = 200; /* a plan without moves is applied at once */
	response_json(req, res, status, doc);
	return 0;
}

int
api_defrag_plans_apply(struct request *req, struct response *res, struct gp_error *err)
{
	return defrag_action(req, res, true, err);
}

int
api_defrag_plans_cancel(struct request *req, struct response *res, struct gp_error *err)
{
	return defrag_action(req, res, false, err);
}
