/*
 * expiry.c - the expiry worker (see expiry.h), on a thread of its own
 * with its own database connection.
 */
#include "expiry.h"

#include "core/json.h"
#include "core/log.h"
#include "db/db.h"
#include "db/db_pools.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define EXPIRE_BATCH 100     /* requests per statement */
#define RELEASES_PER_RUN 100 /* pools released per run at most */

struct expiry {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	int interval_s;
};

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
expiry_run_once(void)
{
	struct gp_error err;
	int64_t n = 0, total = 0;
	char buf[24];

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

static void *
expiry_main(void *arg)
{
	struct expiry *e = arg;

	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		struct timespec ts;

		pthread_mutex_unlock(&e->lock);
		expiry_run_once();
		pthread_mutex_lock(&e->lock);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += e->interval_s;
		while (!e->stop && pthread_cond_timedwait(&e->cond, &e->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&e->lock);
	db_thread_close();
	return NULL;
}

int
expiry_start(struct expiry **out, int interval_s)
{
	struct expiry *e = calloc(1, sizeof(*e));

	if (e == NULL)
		return -1;
	e->interval_s = interval_s > 0 ? interval_s : 10;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	if (pthread_create(&e->thread, NULL, expiry_main, e) != 0) {
		pthread_mutex_destroy(&e->lock);
		pthread_cond_destroy(&e->cond);
		free(e);
		return -1;
	}
	*out = e;
	return 0;
}

void
expiry_stop(struct expiry *e)
{
	if (e == NULL)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop = true;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
	pthread_join(e->thread, NULL);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e);
}
