/*
 * pool_service.c - the pool-request workflow (see pool_service.h):
 * quotas, submit, expiry of pending requests, reject and cancel here;
 * approvals in pool_approve.c, the fleet reading in fleet.c.
 *
 * Candidate GPUs. An approval never scans the fleet: GPUs alike in
 * model, MIG mode and layout (a layout class) are interchangeable for the
 * engine, which breaks ties by (node, index), so it is enough to lock,
 * per useful class, the first few GPUs in that order (approval_wants
 * chooses the classes). The classes of a model come from the fleet
 * reading simulation uses too (fleet.c), cached per process for a second
 * (a hint only: every candidate is locked and its layout re-read before
 * the engine sees it). The fast path takes the classes that pack best plus
 * the empty GPUs, skipping GPUs and nodes other approvals hold (SKIP
 * LOCKED and a per-node advisory lock), so concurrent approvals spread
 * out instead of queueing. When that finds no placement, the slow path
 * refreshes the classes, takes enough GPUs of every useful class and
 * waits for locks: only then is the answer 409 insufficient_capacity.
 *
 * Approvals are group-committed: the approvals queue (batch.c) hands
 * what it took to service_approvals_run, which decides all of it in one
 * transaction: lock every request and its pool (id order), validate
 * each, check quotas, apply each shrink or release with a statement of
 * its own, place every create / expand on one set of locked candidate
 * GPUs (one approval after the other, each seeing the placements before
 * it), then apply every create / expand in one statement sent with
 * COMMIT. The expiry worker's release of a pool past its end time is a
 * batch of one whose request the same transaction inserts first.
 */
#include "pool_service.h"
#include "pool_internal.h"
#include "core/problem.h"
#include "pool_json.h"

#include "core/log.h"
#include "core/strbuf.h"
#include "db/db_capacity.h"
#include "db/db_projects.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
service_quota_check(struct db *db, struct arena *a, int64_t project_id, bool lock,
    const struct spec_count *add, int nadd, struct json_object **item, struct gp_error *err)
{
	struct spec_count quota[POOL_MAX_ITEMS], usage[POOL_MAX_ITEMS];
	const char *qtext = NULL, *utext = NULL;
	int nq = 0, nu = 0, bad;
	bool has;

	if (lock) {
		if (db_quota_lock(db, a, project_id, &has, &qtext, err) < 0)
			return -1;
	} else if (db_quota_get(db, a, project_id, &has, &qtext, NULL, NULL, err) < 0) {
		return -1;
	}
	if (!has)
		return 0;
	if (db_project_usage(db, a, project_id, &utext, err) < 0 ||
	    pools_items_parse(qtext, quota, &nq, err) < 0 ||
	    pools_items_parse(utext, usage, &nu, err) < 0)
		return -1;
	if (pool_quota_check(true, quota, nq, usage, nu, add, nadd, &bad, err) == 0)
		return 0;
	if (item != NULL && bad >= 0) {
		struct json_object *o = json_object_new_object();

		json_add_str(o, "model", add[bad].model);
		json_add_str(o, "profile", add[bad].profile);
		json_add_int(o, "count", add[bad].count);
		json_add_int(o, "limit",
		    pool_items_count(quota, nq, add[bad].model, add[bad].profile));
		json_add_int(o, "used",
		    pool_items_count(usage, nu, add[bad].model, add[bad].profile));
		*item = json_own(a, o);
	}
	return -1;
}

/* ---- submit ---- */

/* for /metrics */
static atomic_uint_fast64_t stat_submit_batches;
static atomic_uint_fast64_t stat_submit_items;

int
service_submit_prepare(struct db *db, struct service_submit *s, struct gp_error *err)
{
	struct request_submit *rs = &s->rs;
	struct json_object *after;
	struct pool_row pool;
	bool found;

	memset(rs, 0, sizeof(*rs));
	if (s->action != POOL_ACTION_CREATE) {
		struct spec_count have[POOL_MAX_ITEMS], left[POOL_MAX_ITEMS];
		int nhave, nleft;

		if (db_pool_by_name(db, s->arena, s->project_id, s->pool, &pool, &found, err) < 0)
			return -1;
		if (!found)
			return gp_error_field(err, "pool", "project %s has no pool named %s",
			    s->project, s->pool);
		if (pool_status_accepts(pool.status, s->action, pool.name, err) < 0)
			return -1;
		if (s->action == POOL_ACTION_SHRINK) {
			if (pools_items_parse(pool.items_json, have, &nhave, err) < 0 ||
			    pool_items_subtract(have, nhave, s->items, s->nitems, left, &nleft,
				err) < 0)
				return -1;
			if (nleft == 0)
				return gp_problem_set(err, GP_PROBLEM_CONFLICT,
				    "the shrink would leave pool %s empty; "
				    "request a release instead",
				    pool.name);
		}
		rs->pool_id = pool.id;
	}
	if (s->cluster != NULL) {
		if (db_cluster_id(db, s->arena, s->cluster, &rs->cluster_id, err) < 0)
			return -1;
		if (rs->cluster_id == 0)
			return gp_error_field(err, "cluster", "no cluster is named %s", s->cluster);
	}
	after = json_own(s->arena, json_object_new_object());
	json_add_str(after, "project", s->project);
	json_add_str(after, "pool", s->pool);
	json_add_str(after, "action", pool_action_name(s->action));
	json_add_str(after, "state", "pending");
	json_object_object_add(after, "items", pools_items_json(s->items, s->nitems));
	json_add_str(after, "justification", s->justification);
	if (s->cluster != NULL)
		json_add_str(after, "cluster", s->cluster);
	rs->project_id = s->project_id;
	rs->pool_name = s->pool;
	rs->action = s->action;
	rs->items_json = pools_items_text(s->arena, s->items, s->nitems);
	rs->justification = s->justification;
	rs->ends_us = s->ends_us;
	rs->ttl_s = s->ttl_s;
	rs->actor_id = s->actor.user_id;
	rs->actor = s->actor.username;
	rs->http_request_id = s->actor.http_request_id;
	rs->audit_after_json = json_to_arena(s->arena, after, NULL);
	/* only growth is limited by a quota; the statement says whether there is one */
	rs->quota_checked = s->action != POOL_ACTION_CREATE && s->action != POOL_ACTION_EXPAND;
	return 0;
}

struct submit_batch {
	struct service_submit **v;
	int n;
	struct arena *a;
};

static int
submit_batch_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct submit_batch *b = arg;
	const struct request_submit **rs = arena_alloc(b->a, sizeof(*rs) * (size_t)b->n);
	struct submit_result *res = arena_alloc(b->a, sizeof(*res) * (size_t)b->n);
	bool keep = false;
	int m = 0;

	/* the callers' claims first: a duplicate inserts nothing */
	for (int i = 0; i < b->n; i++) {
		struct service_submit *s = b->v[i];

		s->dup = false;
		memset(&s->res, 0, sizeof(s->res));
		if (s->hooks.claim != NULL && s->hooks.claim(db, s->hooks.ctx, &s->dup, err) < 0)
			return -1;
		if (!s->dup)
			rs[m++] = &s->rs;
		keep = keep || (!s->dup && s->hooks.keep != NULL);
	}
	/*
	 * COMMIT rides with the insert only when no answer is to be stored:
	 * an answer stored after the COMMIT would be lost with a crash between
	 * the two (and with a lost COMMIT reply the insert's rows would be too).
	 */
	if (m > 0 && db_requests_submit_many(db, b->a, rs, m, !keep, res, err) < 0)
		return -1;
	for (int i = 0, k = 0; i < b->n; i++) {
		struct service_submit *s = b->v[i];

		if (s->dup)
			continue;
		s->res = res[k++];
		s->res.out.project = s->project;
		/* what is complete here commits with its answer */
		if (!s->res.conflict && !s->res.needs_quota && s->hooks.keep != NULL &&
		    s->hooks.keep(db, s->hooks.ctx, err) < 0)
			return -1;
	}
	return 0;
}

void
service_submits_run(struct db *db, struct service_submit **v, int n)
{
	struct submit_batch b = { v, n, arena_create() };
	struct gp_error err;

	gp_error_clear(&err);
	for (int i = 0; i < n; i++)
		v[i]->rc = 0;
	if (db_tx(db, submit_batch_tx, &b, &err) < 0) {
		arena_destroy(b.a);
		if (n > 1 && err.status != 503) {
			log_warn(NULL,
			    "a submission batch failed; inserting its submissions one by one",
			    "error", err.message);
			for (int i = 0; i < n; i++)
				service_submits_run(db, &v[i], 1);
			return;
		}
		for (int i = 0; i < n; i++) {
			v[i]->rc = -1;
			v[i]->err = err;
		}
		return;
	}
	arena_destroy(b.a);
	atomic_fetch_add(&stat_submit_batches, 1);
	atomic_fetch_add(&stat_submit_items, (uint_fast64_t)n);
}

int
service_submit_finish(struct db *db, struct service_submit *s, struct pool_request_row *out,
    struct json_object **qitem, struct gp_error *err)
{
	bool needs_quota;

	*out = s->res.out;
	if (s->rc < 0) {
		*err = s->err;
		return -1;
	}
	if (s->res.conflict)
		return gp_problem_set(err, GP_PROBLEM_CONFLICT,
		    "the project already has a pool named %s", s->rs.pool_name);
	if (s->res.needs_quota) {
		if (service_quota_check(db, s->arena, s->project_id, false, s->items, s->nitems,
			qitem, err) < 0)
			return -1;
		s->rs.quota_checked = true;
		if (db_request_submit(db, s->arena, &s->rs, out, &needs_quota, err) < 0)
			return -1;
	}
	out->project = s->project;
	return 0;
}

/* ---- /metrics ---- */

/* The submissions' counters (pool_internal.h). */
void
pool_submit_metrics(struct strbuf *b)
{
	strbuf_printf(b,
	    "# HELP gpupool_submit_batches_total Pool-request submission transactions "
	    "committed (group commit).\n# TYPE gpupool_submit_batches_total counter\n"
	    "gpupool_submit_batches_total %llu\n"
	    "# HELP gpupool_submit_batch_items_total Submissions those transactions held.\n"
	    "# TYPE gpupool_submit_batch_items_total counter\n"
	    "gpupool_submit_batch_items_total %llu\n",
	    (unsigned long long)atomic_load(&stat_submit_batches),
	    (unsigned long long)atomic_load(&stat_submit_items));
}

/* ---- reject and cancel ---- */

struct close {
	struct arena *a;
	const struct service_actor *actor;
	int64_t id;
	enum pool_request_state to;
	const char *note;
	service_close_check_fn check;
	void *check_arg;
	struct pool_request_row *out;
	bool expire; /* the expiry worker's: the next due request, if any */
	bool found;
};

/* The audit action of a close into state to. */
static const char *
close_action(enum pool_request_state to)
{
	return to == POOL_REQUEST_CANCELLED ? "pool_request.cancel"
	    : to == POOL_REQUEST_EXPIRED    ? "pool_request.expire"
					    : "pool_request.reject";
}

/*
 * One close: reject, cancel, or (expire) the expiry worker's of the next
 * pending request past its lifetime. One statement and one audit
 * document for all three: the request before, and after with its state
 * and note.
 */
static int
close_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct close *c = arg;
	struct approval_ctx ax;
	bool found;

	if (c->expire) {
		if (db_request_expire_due(db, c->a, &c->id, &c->found, err) < 0)
			return -1;
		if (!c->found)
			return 0;
	}
	if (db_request_lock(db, c->a, c->id, &ax, &found, err) < 0)
		return -1;
	if (!found)
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such pool request: %lld",
		    (long long)c->id);
	if (c->check != NULL && c->check(db, c->check_arg, &ax.req, err) < 0)
		return -1;
	if (pool_request_transition(ax.req.state, c->to, err) < 0)
		return -1;
	return db_request_close(db, c->a, c->id, c->to, c->actor->user_id, c->actor->username,
	    c->note, c->actor->http_request_id, close_action(c->to),
	    json_to_arena(c->a, json_own(c->a, pools_request_json(&ax.req, NULL, 0)), NULL), c->out,
	    err);
}

int
service_request_close(struct db *db, struct arena *a, const struct service_actor *actor, int64_t id,
    bool cancel, const char *note, service_close_check_fn check, void *check_arg,
    struct pool_request_row *out, struct gp_error *err)
{
	struct close c = { a, actor, id, cancel ? POOL_REQUEST_CANCELLED : POOL_REQUEST_REJECTED,
		note, check, check_arg, out, false, false };

	return db_tx(db, close_tx, &c, err);
}

/* ---- expiry ---- */

int
service_requests_expire(struct db *db, int64_t *n, struct gp_error *err)
{
	static const struct service_actor system = { 0, NULL, NULL };

	*n = 0;
	for (;;) {
		struct arena *a = arena_create();
		struct pool_request_row out;
		struct close c = { a, &system, 0, POOL_REQUEST_EXPIRED,
			"pending longer than the request lifetime", NULL, NULL, &out, true, false };
		int rc = db_tx(db, close_tx, &c, err);

		arena_destroy(a);
		if (rc < 0)
			return -1;
		if (!c.found)
			return 0;
		(*n)++;
	}
}
