/*
 * expiry.c - the expiry worker (see expiry.h): a periodic worker
 * (periodic.h) on every replica (no leadership lock: the passes are idempotent).
 */
#include "expiry.h"

#include "core/json.h"
#include "core/log.h"
#include "db/db.h"
#include "db/db_pools.h"
#include "periodic.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define EXPIRE_BATCH 100     /* requests per statement */
#define RELEASES_PER_RUN 100 /* pools released per run at most */

struct release_due {
	struct arena *a;
	bool found;
	struct pool_row pool;
	int64_t request_id;
};

/* Release one pool past its end time: a system release request, approved at once. */
static int
release_due_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct release_due *r = arg;
	struct approval_apply ap;
	struct live_alloc *live;
	struct json_object *before, *after;
	int64_t *ids, *nodes;
	int n;

	if (db_pool_claim_due(db, r->a, &r->pool, &r->request_id, &r->found, err) < 0)
		return -1;
	if (!r->found)
		return 0;
	if (db_pool_live_allocations(db, r->a, r->pool.id, false, &live, &n, err) < 0)
		return -1;
	ids = arena_alloc(r->a, sizeof(*ids) * (size_t)(n + 1));
	nodes = arena_alloc(r->a, sizeof(*nodes) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		ids[i] = live[i].id;
		nodes[i] = live[i].node_id;
	}
	before = json_own(r->a, json_object_new_object());
	json_add_int(before, "id", r->request_id);
	json_add_str(before, "project", r->pool.project);
	json_add_str(before, "pool", r->pool.name);
	json_add_str(before, "action", "release");
	json_add_str(before, "state", "pending");
	after = json_own(r->a, json_object_new_object());
	json_add_int(after, "id", r->request_id);
	json_add_str(after, "project", r->pool.project);
	json_add_str(after, "pool", r->pool.name);
	json_add_str(after, "action", "release");
	json_add_str(after, "state", "approved");
	json_add_int(after, "allocations_released", n);
	json_add_time(after, "ledger_closed_at", r->pool.ends_us);
	memset(&ap, 0, sizeof(ap));
	ap.request_id = r->request_id;
	ap.pool_id = r->pool.id;
	ap.project_id = r->pool.project_id;
	ap.action = "release";
	ap.new_items_json = "[]";
	ap.new_status = "releasing";
	ap.at_us = r->pool.ends_us;
	ap.free_ids = ids;
	ap.nfree = n;
	ap.free_node_ids = nodes;
	ap.nfree_nodes = n;
	ap.note = "the pool reached its end time";
	ap.audit_before_json = json_to_arena(r->a, before, NULL);
	ap.audit_after_json = json_to_arena(r->a, after, NULL);
	return db_approval_apply(db, r->a, &ap, err);
}

static void
expiry_run_once(void *arg)
{
	struct gp_error err;
	int64_t n = 0, total = 0;
	char buf[24];

	(void)arg;
	gp_error_clear(&err);
	do {
		if (db_requests_expire(db_thread(), EXPIRE_BATCH, &n, &err) < 0) {
			log_warn(NULL, "could not expire pool requests", "error", err.message);
			break;
		}
		total += n;
	} while (n == EXPIRE_BATCH);
	if (total > 0) {
		snprintf(buf, sizeof(buf), "%lld", (long long)total);
		log_info(NULL, "expired pending pool requests", "count", buf);
	}
	for (int i = 0; i < RELEASES_PER_RUN; i++) {
		struct release_due r;

		memset(&r, 0, sizeof(r));
		r.a = arena_create();
		gp_error_clear(&err);
		if (db_tx(db_thread(), release_due_tx, &r, &err) < 0) {
			log_warn(NULL, "could not release a pool at its end time", "error",
			    err.message);
			arena_destroy(r.a);
			break;
		}
		if (r.found)
			log_info(NULL, "released a pool at its end time", "pool", r.pool.name,
			    "project", r.pool.project);
		arena_destroy(r.a);
		if (!r.found)
			break;
	}
	gp_error_clear(&err);
	if (db_pools_settle(db_thread(), &n, &err) < 0)
		log_warn(NULL, "could not settle pool statuses", "error", err.message);
}

int
expiry_start(struct periodic **out, int interval_s)
{
	struct periodic_config pc = {
		.name = "expiry",
		.interval_ms = (interval_s > 0 ? interval_s : 10) * 1000,
		/*
		 * every replica runs its own passes (each step is idempotent),
		 * at its own interval: a leader's interval would rule the others
		 */
		.leader = false,
		.run = expiry_run_once,
	};

	pc.jitter_ms = pc.interval_ms / 10;
	return periodic_start(out, &pc);
}
