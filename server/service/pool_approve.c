/*
 * pool_approve.c - approvals, group-committed (see pool_service.h): a
 * batch of approvals decided in one transaction, its phases in the
 * global lock order (approve_batch_tx), the placement of its creates and
 * expands on one set of locked candidate GPUs (fleet.c), and the expiry
 * worker's release of a pool past its end time (a batch of one).
 */
#include "pool_service.h"
#include "pool_internal.h"
#include "fleet.h"
#include "core/problem.h"
#include "pool_json.h"
#include "layout_cache.h"

#include "core/log.h"
#include "core/strbuf.h"
#include "core/timeutil.h"
#include "domain/placement.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- approve: group commit ---- */

/* for /metrics */
static atomic_uint_fast64_t stat_batches;     /* transactions that committed a batch */
static atomic_uint_fast64_t stat_batch_items; /* approvals they decided */
static atomic_uint_fast64_t stat_slow_paths;  /* placements that needed the slow path */
static atomic_uint_fast64_t stat_split;       /* failed batches decided one by one */

struct approve_batch {
	struct service_approval **v;
	int n;
	struct arena *a; /* the batch's own scratch */
	const struct catalog *catalog;
	bool claim_due; /* first claim a pool past its end time: v[0] releases it */
	bool found;     /* claim_due: a pool was due */
	struct pool_row due;
};

static bool
approve_is_grow(const struct service_approval *c)
{
	return c->action == POOL_ACTION_CREATE || c->action == POOL_ACTION_EXPAND;
}

static void
approve_refuse(struct service_approval *c, const struct gp_error *e)
{
	c->outcome = SERVICE_APPROVAL_REFUSED;
	c->err = *e;
}

/*
 * A placement on a node an agent manages waits for the agent (reserved);
 * on a node registered by hand, without an agent, it is ready at once: the
 * operator realises the instance (docs/pools.md).
 */
static const char *
approve_alloc_state(const struct service_placed *p)
{
	return p->gpu->managed ? "reserved" : "ready";
}

static struct json_object *
approve_allocs_json(const struct service_approval *c)
{
	struct json_object *arr = json_object_new_array();

	for (int i = 0; i < c->nplaced; i++) {
		const struct service_placed *p = &c->placed[i];

		struct json_object *o = pools_alloc_json(p->gpu->node, p->gpu->uuid, p->gpu->index,
		    p->gpu->model, p->profile, p->start, p->size, approve_alloc_state(p), NULL);

		/* who makes the instance real: the node's agent, or the operator on
		 * a node registered by hand (docs/pools.md, "Nodes without an agent") */
		json_object_object_add(o, "realised_by",
		    json_object_new_string(p->gpu->managed ? "agent" : "operator"));
		json_object_array_add(arr, o);
	}
	for (int i = 0; i < c->nfreed; i++) {
		const struct live_alloc *f = &c->freed[i];

		json_object_array_add(arr,
		    pools_alloc_json(f->node, f->gpu_uuid, f->gpu_index, f->model, f->profile,
			f->start, f->size, "releasing", NULL));
	}
	return arr;
}

/* The request as the reply and the audit row show it once approved. */
static struct json_object *
approve_after_json(const struct service_approval *c)
{
	struct pool_request_row r = c->ax.req;
	struct json_object *o;

	r.state = POOL_REQUEST_APPROVED;
	r.decided_by = c->actor.username;
	r.decided_us = c->ax.now_us;
	r.note = c->note;
	r.generation++;
	o = pools_request_json(&r, NULL, 0);
	json_object_object_add(o, "allocations", approve_allocs_json(c));
	return o;
}

/* Re-validate a locked request; err (4xx) when it cannot be approved now. */
static int
approve_check(struct service_approval *c, struct gp_error *err)
{
	struct spec_count next[POOL_MAX_ITEMS];
	int nnext = 0;

	if (pool_request_transition(c->ax.req.state, POOL_REQUEST_APPROVED, err) < 0)
		return -1;
	/* the system's release of a pool past its end time expires as it is made */
	if (!c->due && c->ax.req.expires_us <= c->ax.now_us)
		return gp_problem_set(err, GP_PROBLEM_CONFLICT, "the request expired");
	c->action = c->ax.req.action;
	if (pool_status_accepts(c->ax.pool_status, c->action, c->ax.req.pool, err) < 0)
		return -1;
	if (pools_items_parse(c->ax.req.items_json, c->items, &c->nitems, err) < 0 ||
	    pools_items_parse(c->ax.pool_items_json, c->pool_items, &c->npool, err) < 0)
		return -1;
	if (!approve_is_grow(c))
		return 0;
	if (pool_items_add(c->pool_items, c->npool, c->items, c->nitems, next, &nnext, err) < 0)
		return -1;
	if (c->ax.req.ends_us != 0 && c->ax.req.ends_us <= c->ax.now_us &&
	    c->action == POOL_ACTION_CREATE)
		return gp_problem_set(err, GP_PROBLEM_CONFLICT,
		    "the pool's requested end time has passed; reject the request");
	c->ap.new_items_json = pools_items_text(c->arena, next, nnext);
	return 0;
}

/* create / expand, once placed: what the apply statement needs. */
static void
approve_grow_fill(struct service_approval *c)
{
	struct arena *a = c->arena;
	struct approval_apply *ap = &c->ap;
	struct new_alloc *na = arena_alloc(a, sizeof(*na) * (size_t)(c->nplaced + 1));
	struct approval_placed *pl = arena_alloc(a, sizeof(*pl) * (size_t)(c->nplaced + 1));
	struct approval_grow g;
	bool wait = false; /* some allocation waits for an agent */

	for (int i = 0; i < c->nplaced; i++) {
		const struct service_placed *p = &c->placed[i];

		na[i].gpu_id = pl[i].gpu_id = p->gpu->id;
		na[i].node_id = pl[i].node_id = p->gpu->node_id;
		na[i].profile = pl[i].profile = p->profile;
		na[i].start = pl[i].start = p->start;
		na[i].size = pl[i].size = p->size;
		na[i].state = approve_alloc_state(p);
		wait = wait || p->gpu->managed;
		pl[i].mode_switch = p->mode_switch;
	}
	approval_grow_arrays(a, pl, c->nplaced, c->items, c->nitems, &g);
	/* only unmanaged nodes: nothing to wait for (a new pool, or an active
	 * one that grows); else provisioning until the agents report ready */
	ap->new_status =
	    !wait && (c->action == POOL_ACTION_CREATE || c->ax.pool_status == POOL_STATUS_ACTIVE)
	    ? POOL_STATUS_ACTIVE
	    : POOL_STATUS_PROVISIONING;
	ap->ends_us = c->ax.req.ends_us;
	ap->allocs = na;
	ap->nallocs = c->nplaced;
	ap->switch_gpu_ids = g.switch_gpu_ids;
	ap->nswitch = g.nswitch;
	ap->item_models = g.models;
	ap->item_profiles = g.profiles;
	ap->item_counts = g.counts;
	ap->nitems = g.nitems;
}

/* shrink / release: choose what to free (approval_free_choose). */
static int
approve_free(struct db *db, struct service_approval *c, bool release, struct gp_error *err)
{
	struct arena *a = c->arena;
	struct approval_apply *ap = &c->ap;
	struct spec_count *next = arena_alloc(a, sizeof(*next) * POOL_MAX_ITEMS);
	struct live_alloc *live;
	struct approval_live *al;
	bool *chosen;
	int64_t *ids, *nodes;
	const char **models, **profiles;
	int *counts, nnext = 0, nlive, k = 0;

	if (db_pool_live_allocations(db, a, c->ax.req.pool_id, !release, &live, &nlive, err) < 0)
		return -1;
	al = arena_alloc(a, sizeof(*al) * (size_t)(nlive + 1));
	chosen = arena_alloc(a, sizeof(*chosen) * (size_t)(nlive + 1));
	counts = arena_alloc(a, sizeof(*counts) * (size_t)(c->nitems + 1));
	for (int i = 0; i < nlive; i++) {
		al[i].id = live[i].id;
		al[i].gpu_id = live[i].gpu_id;
		al[i].pool_id = live[i].pool_id;
		al[i].model = live[i].model;
		al[i].profile = live[i].profile;
		al[i].start = live[i].start;
	}
	if (approval_free_choose(al, nlive, c->ax.req.pool_id, release, c->pool_items, c->npool,
		c->items, c->nitems, chosen, next, &nnext, counts, err) < 0)
		return -1;
	ids = arena_alloc(a, sizeof(*ids) * (size_t)(nlive + 1));
	nodes = arena_alloc(a, sizeof(*nodes) * (size_t)(nlive + 1));
	c->freed = arena_alloc(a, sizeof(*c->freed) * (size_t)(nlive + 1));
	for (int i = 0; i < nlive; i++) {
		if (!chosen[i])
			continue;
		ids[k] = live[i].id;
		nodes[k] = live[i].node_id;
		c->freed[k++] = live[i];
	}
	c->nfreed = k;
	models = arena_alloc(a, sizeof(*models) * (size_t)(c->nitems + 1));
	profiles = arena_alloc(a, sizeof(*profiles) * (size_t)(c->nitems + 1));
	for (int i = 0; i < c->nitems; i++) {
		models[i] = c->items[i].model;
		profiles[i] = c->items[i].profile;
	}
	ap->new_items_json = pools_items_text(a, next, nnext);
	ap->new_status = release ? POOL_STATUS_RELEASING : c->ax.pool_status;
	ap->at_us = c->at_us;
	ap->free_ids = ids;
	ap->nfree = k;
	ap->free_node_ids = nodes;
	ap->nfree_nodes = k;
	ap->keep_models = models;
	ap->keep_profiles = profiles;
	ap->keep_counts = counts;
	ap->nkeep = release ? 0 : c->nitems;
	return 0;
}

/* Who, why and the audit documents: the same for every action. */
static void
approve_fill_common(struct service_approval *c)
{
	struct arena *a = c->arena;
	struct approval_apply *ap = &c->ap;

	ap->request_id = c->id;
	ap->pool_id = c->ax.req.pool_id;
	ap->project_id = c->ax.req.project_id;
	ap->action = c->ax.req.action;
	ap->actor_id = c->actor.user_id;
	ap->actor = c->actor.username;
	ap->note = c->note;
	ap->http_request_id = c->actor.http_request_id;
	ap->audit_before_json =
	    json_to_arena(a, json_own(a, pools_request_json(&c->ax.req, NULL, 0)), NULL);
	c->after = json_to_arena(a, json_own(a, approve_after_json(c)), &c->after_len);
	ap->audit_after_json = c->after;
}

/*
 * A step of approval c failed with e: when a statement failed, the
 * transaction is lost and the whole batch fails (db_tx retries it);
 * otherwise c alone is refused.
 */
static int
approve_step_failed(struct db *db, struct service_approval *c, const struct gp_error *e,
    struct gp_error *err)
{
	if (db_tx_aborted(db) || e->status >= 500) {
		*err = *e;
		return -1;
	}
	approve_refuse(c, e);
	return 0;
}

/* Place every open create / expand of the batch, in batch order. */
static int
approve_place_all(struct db *db, struct approve_batch *b, struct gp_error *err)
{
	const struct catalog *cat = b->catalog;
	struct fleet_request *req = arena_alloc(b->a, sizeof(*req) * (size_t)(b->n + 1));
	struct fleet_set set;
	int nreq = 0;

	memset(&set, 0, sizeof(set));
	/* one candidate read per cluster for what the batch asks for there */
	for (int i = 0; i < b->n; i++) {
		const struct service_approval *c = b->v[i];

		if (c->outcome == SERVICE_APPROVAL_OPEN && approve_is_grow(c))
			req[nreq++] = (struct fleet_request){ .cluster_id = c->ax.req.cluster_id,
				.items = c->items,
				.nitems = c->nitems };
	}
	if (nreq == 0)
		return 0;
	if (fleet_batch_read(db, b->a, cat, req, nreq, true, &set, err) < 0)
		return -1;
	for (int i = 0; i < b->n; i++) {
		struct service_approval *c = b->v[i];
		struct fleet_answer ans;

		if (c->outcome != SERVICE_APPROVAL_OPEN || !approve_is_grow(c))
			continue;
		ans.missing = c->missing;
		if (fleet_set_place(db, b->a, cat, &set, c->ax.req.cluster_id, c->items, c->nitems,
			true, &ans, err) < 0)
			return -1;
		if (ans.slow)
			atomic_fetch_add(&stat_slow_paths, 1);
		if (ans.outcome == FLEET_FAILED) {
			if (approve_step_failed(db, c, &ans.err, err) < 0)
				return -1;
			continue;
		}
		if (ans.outcome == FLEET_SHORT) {
			gp_problem_set(&ans.err, GP_PROBLEM_INSUFFICIENT_CAPACITY,
			    "the free capacity cannot hold every item of the request");
			approve_refuse(c, &ans.err);
			continue;
		}
		c->placed = ans.placed;
		c->nplaced = ans.nplaced;
	}
	return 0;
}

static int
approve_cmp_project(const void *pa, const void *pb)
{
	const struct service_approval *a = *(struct service_approval *const *)pa,
				      *b = *(struct service_approval *const *)pb;

	return (a->ax.req.project_id > b->ax.req.project_id) -
	    (a->ax.req.project_id < b->ax.req.project_id);
}

static int
cmp_int64(const void *pa, const void *pb)
{
	int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;

	return (a > b) - (a < b);
}

/*
 * Append to *rows (arena a, grown as needed) one outbox row per distinct
 * node that shrink or release c frees allocations on; returns how many.
 */
static int
outbox_rows_add(struct arena *a, struct outbox_row **rows, int nrows,
    const struct service_approval *c)
{
	int n = c->ap.nfree_nodes, k = 0;
	int64_t *ids = arena_alloc(a, sizeof(*ids) * (size_t)(n + 1));
	struct outbox_row *grown = arena_alloc(a, sizeof(*grown) * (size_t)(nrows + n + 1));

	if (nrows > 0)
		memcpy(grown, *rows, sizeof(*grown) * (size_t)nrows);
	if (n > 0)
		memcpy(ids, c->ap.free_node_ids, sizeof(*ids) * (size_t)n);
	qsort(ids, (size_t)n, sizeof(*ids), cmp_int64);
	for (int i = 0; i < n; i++) {
		if (i > 0 && ids[i] == ids[i - 1])
			continue;
		grown[nrows + k].node_id = ids[i];
		grown[nrows + k].request_id = c->ap.request_id;
		grown[nrows + k].pool_id = c->ap.pool_id;
		k++;
	}
	*rows = grown;
	return k;
}

/* The working state of one batch's transaction, from phase to phase. */
struct approve_tx {
	struct approve_batch *b;
	struct service_approval **quota; /* grows over a quota, read then locked */
	int nquota;
	const struct approval_apply **grow; /* creates and expands to apply */
	int ngrow;
	struct outbox_row *more; /* nodes of shrinks and releases, bumped last */
	int nmore;
};

/*
 * Phase 1: the system's release request for a pool past its end time
 * (claimed SKIP LOCKED: the pool first, as the expiry worker's claim
 * takes it), then each caller's claim (Idempotency-Key): a duplicate
 * changes nothing. *stop: nothing to do.
 */
static int
phase_claim(struct db *db, struct approve_tx *t, bool *stop, struct gp_error *err)
{
	struct approve_batch *b = t->b;

	*stop = false;
	if (b->claim_due) {
		if (db_pool_claim_due(db, b->v[0]->arena, &b->due, &b->v[0]->id, &b->found, err) <
		    0)
			return -1;
		if (!b->found) {
			*stop = true;
			return 0;
		}
		b->v[0]->at_us = b->due.ends_us;
	}
	for (int i = 0; i < b->n; i++) {
		struct service_approval *c = b->v[i];

		c->outcome = SERVICE_APPROVAL_OPEN;
		gp_error_clear(&c->err);
		memset(&c->ap, 0, sizeof(c->ap));
		c->placed = NULL;
		c->nplaced = 0;
		c->freed = NULL;
		c->nfreed = 0;
		c->quota_item = NULL;
		c->after = NULL;
		c->dup = false;
		if (c->hooks.claim != NULL && c->hooks.claim(db, c->hooks.ctx, &c->dup, err) < 0)
			return -1;
		if (c->dup)
			c->outcome = SERVICE_APPROVAL_REFUSED;
	}
	return 0;
}

/*
 * Phase 2: every request, then every pool, in id order in one statement
 * (db_requests_lock_many); each approval checked, and the batch rule
 * (approval_batch_later) applied. The grows over a quota are noted.
 */
static int
phase_lock_requests(struct db *db, struct approve_tx *t, struct gp_error *err)
{
	struct approve_batch *b = t->b;
	int64_t *ids = arena_alloc(b->a, sizeof(*ids) * (size_t)b->n);
	struct arena **arenas = arena_alloc(b->a, sizeof(*arenas) * (size_t)b->n);
	struct approval_ctx *ctx = arena_alloc(b->a, sizeof(*ctx) * (size_t)b->n);
	bool *found = arena_alloc(b->a, sizeof(*found) * (size_t)b->n);
	struct approval_key *keys = arena_alloc(b->a, sizeof(*keys) * (size_t)b->n);

	for (int i = 0; i < b->n; i++) {
		ids[i] = b->v[i]->id;
		arenas[i] = b->v[i]->arena;
	}
	if (db_requests_lock_many(db, b->a, ids, b->n, arenas, ctx, found, err) < 0)
		return -1;
	for (int i = 0; i < b->n; i++) {
		struct service_approval *c = b->v[i];
		struct gp_error e;

		memset(&keys[i], 0, sizeof(keys[i]));
		if (c->outcome != SERVICE_APPROVAL_OPEN)
			continue;
		gp_error_clear(&e);
		if (!found[i]) {
			gp_problem_set(&e, GP_PROBLEM_NOT_FOUND, "no such pool request: %lld",
			    (long long)c->id);
			approve_refuse(c, &e);
			continue;
		}
		c->ax = ctx[i];
		if (c->precondition != NULL &&
		    c->precondition(c->precondition_arg, &c->ax.req, &e) < 0) {
			approve_refuse(c, &e);
			continue;
		}
		if (approve_check(c, &e) < 0) {
			approve_refuse(c, &e);
			continue;
		}
		keys[i].pool_id = c->ax.req.pool_id;
		keys[i].project_id = c->ax.req.project_id;
		keys[i].has_quota = c->ax.has_quota;
		if (approval_batch_later(keys, i))
			c->outcome = SERVICE_APPROVAL_LATER;
		keys[i].open = c->outcome == SERVICE_APPROVAL_OPEN;
		if (c->outcome == SERVICE_APPROVAL_OPEN && c->ax.has_quota && approve_is_grow(c))
			t->quota[t->nquota++] = c;
	}
	return 0;
}

/*
 * Phases 3 and 6: the quotas of the grows. Read without the lock first
 * (lock false), so that an approval over its quota is refused before it
 * takes capacity in the batch's set; then, once everything is placed,
 * checked again with each project's row locked, in project order.
 */
static int
phase_quotas(struct db *db, struct approve_tx *t, bool lock, struct gp_error *err)
{
	if (lock)
		qsort(t->quota, (size_t)t->nquota, sizeof(*t->quota), approve_cmp_project);
	for (int i = 0; i < t->nquota; i++) {
		struct service_approval *c = t->quota[i];
		struct gp_error e;

		if (c->outcome != SERVICE_APPROVAL_OPEN)
			continue;
		gp_error_clear(&e);
		if (service_quota_check(db, c->arena, c->ax.req.project_id, lock, c->items,
			c->nitems, &c->quota_item, &e) < 0 &&
		    approve_step_failed(db, c, &e, err) < 0)
			return -1;
	}
	return 0;
}

/*
 * Phase 4: shrinks and releases. The GPUs under their pools' live
 * allocations in one statement (id order), then one statement each; their
 * nodes are bumped with the batch's, last. The system's release is all or
 * nothing: no pending request is left behind.
 */
static int
phase_free(struct db *db, struct approve_tx *t, struct gp_error *err)
{
	struct approve_batch *b = t->b;
	int64_t *pools = arena_alloc(b->a, sizeof(*pools) * (size_t)b->n);
	int npools = 0;

	for (int i = 0; i < b->n; i++)
		if (b->v[i]->outcome == SERVICE_APPROVAL_OPEN && !approve_is_grow(b->v[i]))
			pools[npools++] = b->v[i]->ax.req.pool_id;
	if (npools > 0 && db_pools_lock_gpus(db, b->a, pools, npools, err) < 0)
		return -1;
	for (int i = 0; i < b->n; i++) {
		struct service_approval *c = b->v[i];
		struct gp_error e;

		if (c->outcome != SERVICE_APPROVAL_OPEN || approve_is_grow(c))
			continue;
		gp_error_clear(&e);
		if (approve_free(db, c, c->action == POOL_ACTION_RELEASE, &e) < 0) {
			if (approve_step_failed(db, c, &e, err) < 0)
				return -1;
			continue;
		}
		approve_fill_common(c);
		t->nmore += outbox_rows_add(b->a, &t->more, t->nmore, c);
		c->ap.nfree_nodes = 0;
		if (db_approval_free_apply(db, c->arena, &c->ap, false, err) < 0)
			return -1;
		c->outcome = SERVICE_APPROVAL_DONE;
	}
	if (b->claim_due && b->v[0]->outcome != SERVICE_APPROVAL_DONE) {
		*err = b->v[0]->err;
		if (!gp_error_isset(err))
			gp_problem_set(err, GP_PROBLEM_INTERNAL, "the release was not decided");
		return -1;
	}
	return 0;
}

/*
 * Phase 7: the grows that are still open join the statement that applies
 * them; each caller's answer commits with its approval; then one
 * statement applies every create and expand and bumps every node (the
 * last locks of the batch).
 */
static int
phase_apply(struct db *db, struct approve_tx *t, struct gp_error *err)
{
	struct approve_batch *b = t->b;

	for (int i = 0; i < b->n; i++) {
		struct service_approval *c = b->v[i];

		if (c->outcome != SERVICE_APPROVAL_OPEN || !approve_is_grow(c))
			continue;
		approve_grow_fill(c);
		approve_fill_common(c);
		t->grow[t->ngrow++] = &c->ap;
		c->outcome = SERVICE_APPROVAL_DONE;
	}
	for (int i = 0; i < b->n; i++) {
		struct service_approval *c = b->v[i];

		if (c->outcome == SERVICE_APPROVAL_DONE && c->hooks.keep != NULL &&
		    c->hooks.keep(db, c->hooks.ctx, err) < 0)
			return -1;
	}
	if (t->ngrow == 0 && t->nmore == 0)
		return 0;
	return db_approvals_apply_many(db, b->a, t->grow, t->ngrow, t->more, t->nmore, err);
}

/*
 * One batch in one transaction: its phases in the order of the global
 * lock order (docs/architecture.md "The lock order"), each taking its
 * rows sorted:
 *   1. claim      the pool past its end time (expiry), SKIP LOCKED;
 *   2. requests   every request, then every pool, in id order;
 *   3. quotas     read, not locked;
 *   4. free       the GPUs of shrinks and releases (id order), their
 *                 allocations and ledger;
 *   5. place      the candidate GPUs of creates and expands (sorted
 *                 locking statements, approve_place_all);
 *   6. quotas     the quota rows, locked in project order;
 *   7. apply      allocations, pools, ledger and last the nodes, in one
 *                 statement.
 */
static int
approve_batch_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct approve_batch *b = arg;
	struct approve_tx t = { .b = b };
	bool stop;

	t.quota = arena_alloc(b->a, sizeof(*t.quota) * (size_t)b->n);
	t.grow = arena_alloc(b->a, sizeof(*t.grow) * (size_t)b->n);
	if (phase_claim(db, &t, &stop, err) < 0)
		return -1;
	if (stop)
		return 0;
	if (phase_lock_requests(db, &t, err) < 0 || phase_quotas(db, &t, false, err) < 0 ||
	    phase_free(db, &t, err) < 0 || approve_place_all(db, b, err) < 0 ||
	    phase_quotas(db, &t, true, err) < 0)
		return -1;
	return phase_apply(db, &t, err);
}

/* Decide batch b in one transaction (see service_approvals_run); -1: it failed (err). */
static int
approve_batch_run(struct db *db, struct approve_batch *b, struct gp_error *err)
{
	int rc;

	b->a = arena_create();
	rc = db_tx_ex(db, DB_TX_RETRY_EXCLUSION | DB_TX_GENERIC_PLANS, approve_batch_tx, b, err);
	arena_destroy(b->a);
	b->a = NULL;
	return rc;
}

void
service_approvals_run(struct db *db, const struct catalog *c, struct service_approval **v, int n)
{
	struct approve_batch b;
	struct gp_error err;

	memset(&b, 0, sizeof(b));
	b.v = v;
	b.n = n;
	b.catalog = c;
	gp_error_clear(&err);
	if (approve_batch_run(db, &b, &err) < 0) {
		if (n > 1 && err.status != 503) {
			atomic_fetch_add(&stat_split, 1);
			log_warn(NULL,
			    "an approval batch failed; deciding its approvals one by one", "error",
			    err.message);
			for (int i = 0; i < n; i++)
				service_approvals_run(db, c, &v[i], 1);
			return;
		}
		for (int i = 0; i < n; i++) {
			v[i]->outcome = SERVICE_APPROVAL_REFUSED;
			v[i]->err = err;
		}
		return;
	}
	atomic_fetch_add(&stat_batches, 1);
	atomic_fetch_add(&stat_batch_items, (uint_fast64_t)n);
}

/* ---- the expiry worker's release ---- */

int
service_release_due(struct db *db, struct arena *a, bool *found, struct pool_row *pool,
    struct gp_error *err)
{
	struct service_approval *c = arena_alloc(a, sizeof(*c));
	struct approve_batch b;

	memset(c, 0, sizeof(*c));
	memset(&b, 0, sizeof(b));
	c->arena = a;
	c->due = true;
	c->note = "the pool reached its end time";
	b.v = &c;
	b.n = 1;
	b.claim_due = true;
	*found = false;
	if (approve_batch_run(db, &b, err) < 0)
		return -1;
	if (!b.found)
		return 0;
	*found = true;
	*pool = b.due;
	return 0;
}

/* ---- /metrics ---- */

void
pool_approvals_metrics(struct strbuf *b)
{
	strbuf_printf(b,
	    "# HELP gpupool_approval_batches_total Approval transactions committed "
	    "(group commit).\n# TYPE gpupool_approval_batches_total counter\n"
	    "gpupool_approval_batches_total %llu\n"
	    "# HELP gpupool_approval_batch_items_total Approvals decided by those "
	    "transactions (over batches: the mean batch size).\n"
	    "# TYPE gpupool_approval_batch_items_total counter\n"
	    "gpupool_approval_batch_items_total %llu\n"
	    "# HELP gpupool_approval_slow_paths_total Placements that read every useful "
	    "layout class after the fast candidates fell short.\n"
	    "# TYPE gpupool_approval_slow_paths_total counter\n"
	    "gpupool_approval_slow_paths_total %llu\n"
	    "# HELP gpupool_approval_batch_splits_total Failed batches whose approvals "
	    "were then decided one by one.\n"
	    "# TYPE gpupool_approval_batch_splits_total counter\n"
	    "gpupool_approval_batch_splits_total %llu\n",
	    (unsigned long long)atomic_load(&stat_batches),
	    (unsigned long long)atomic_load(&stat_batch_items),
	    (unsigned long long)atomic_load(&stat_slow_paths),
	    (unsigned long long)atomic_load(&stat_split));
	pool_submit_metrics(b);
}
