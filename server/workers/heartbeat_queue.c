/*
 * heartbeat_queue.c - the heartbeats worker (heartbeat_queue.h).
 */
#include "heartbeat_queue.h"

#include "batch.h"
#include "core/log.h"
#include "core/metrics_registry.h"
#include "service/agent_service.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct heartbeat_queue {
	struct batch_queue *batch;
	struct batch_queue *alone; /* one heartbeat at a time, each its own transaction */
};

static atomic_uint_fast64_t stat_batches; /* statements that committed heartbeats */
static atomic_uint_fast64_t stat_items;   /* heartbeats queued and answered */
static atomic_uint_fast64_t stat_done;    /* those the batch statements committed */
static atomic_uint_fast64_t stat_alone;   /* those run alone (agent_heartbeat) */
static atomic_int_fast64_t waiting;       /* queued or in a batch, not yet woken */

/* One batch: commit what it can in one statement, wake those, hand on the rest. */
static void
heartbeats_run(struct db *db, void **items, int n, void *arg)
{
	int64_t nodes[HEARTBEAT_BATCH_MAX], observed[HEARTBEAT_BATCH_MAX];
	int64_t generation[HEARTBEAT_BATCH_MAX];
	bool done[HEARTBEAT_BATCH_MAX];
	struct gp_error err;
	struct heartbeat_queue *q = arg;
	int ndone = 0;

	gp_error_clear(&err);
	for (int i = 0; i < n; i++) {
		struct heartbeat_job *j = items[i];

		nodes[i] = j->node_id;
		observed[i] = j->observed;
	}
	if (service_agent_heartbeats(db, nodes, observed, n, generation, done, &err) < 0) {
		log_warn(NULL, "a heartbeat batch failed", "error", err.message);
		/*
		 * A statement timeout: the statement never waits for a row
		 * (SKIP LOCKED), so the nodes table itself was held, or the
		 * database too slow: alone, each would wait its own timeout,
		 * four at a time (a batch of 256: minutes). Each fails with
		 * it, as its own transaction did before group commit.
		 */
		if (err.status == 503 && strcmp(err.code, "timeout") == 0) {
			for (int i = 0; i < n; i++) {
				struct heartbeat_job *j = items[i];

				j->err = err;
				j->failed = true;
				j->done = true;
				atomic_fetch_sub(&waiting, 1);
				j->wake(j->waiter);
			}
			atomic_fetch_add(&stat_items, (uint_fast64_t)n);
			return;
		}
		/* otherwise (a connection lost) each goes alone, and meets the failure if it lasts */
		for (int i = 0; i < n; i++)
			done[i] = false;
	} else {
		atomic_fetch_add(&stat_batches, 1);
	}
	for (int i = 0; i < n; i++) {
		struct heartbeat_job *j = items[i];

		j->done = done[i];
		if (done[i]) {
			j->generation = generation[i];
			ndone++;
		}
	}
	atomic_fetch_add(&stat_items, (uint_fast64_t)n);
	atomic_fetch_add(&stat_done, (uint_fast64_t)ndone);
	/*
	 * committed: answer (a job is its waiter's, not touched after its
	 * wake); the rest go alone, off the HTTP threads: one that waits for
	 * its node's row holds an alone worker, not an HTTP thread and the
	 * connections it serves
	 */
	for (int i = 0; i < n; i++) {
		struct heartbeat_job *j = items[i];

		if (!j->done && q->alone != NULL && batch_push(q->alone, j))
			continue;
		atomic_fetch_sub(&waiting, 1);
		j->wake(j->waiter);
	}
	/*
	 * A small batch: let the next one gather. Heartbeats come every 10 s
	 * from each agent; HEARTBEAT_LINGER_MS more on one is nothing, and a
	 * fleet's thousand a second then share a statement (and a worker
	 * wake-up) twenty at a time instead of two (bench-day: 1.9 a
	 * statement without it).
	 */
	if (n < HEARTBEAT_LINGER_BELOW)
		nanosleep(&(struct timespec){ 0, HEARTBEAT_LINGER_MS * 1000000L }, NULL);
}

/* An alone worker: agent_heartbeat() in a transaction of its own, then the answer. */
static void
alone_run(struct db *db, void **items, int n, void *arg)
{
	(void)arg;
	for (int i = 0; i < n; i++) {
		struct heartbeat_job *j = items[i];

		atomic_fetch_add(&stat_alone, 1);
		gp_error_clear(&j->err);
		j->failed = service_agent_heartbeat(db, j->arena, j->node_id, j->observed,
				&j->generation, &j->err) < 0;
		j->done = true;
		atomic_fetch_sub(&waiting, 1);
		j->wake(j->waiter);
	}
}

static void
collect(struct strbuf *b, struct arena *a, void *arg)
{
	(void)a;
	(void)arg;
	strbuf_printf(b,
	    "# HELP gpupool_heartbeat_batches_total Heartbeat statements committed "
	    "(group commit).\n# TYPE gpupool_heartbeat_batches_total counter\n"
	    "gpupool_heartbeat_batches_total %llu\n"
	    "# HELP gpupool_heartbeats_total Heartbeats queued for group commit.\n"
	    "# TYPE gpupool_heartbeats_total counter\n"
	    "gpupool_heartbeats_total %llu\n"
	    "# HELP gpupool_heartbeat_batch_items_total Heartbeats committed by the "
	    "batch statements (over batches: the mean batch size).\n"
	    "# TYPE gpupool_heartbeat_batch_items_total counter\n"
	    "gpupool_heartbeat_batch_items_total %llu\n"
	    "# HELP gpupool_heartbeats_alone_total Heartbeats run alone in their own "
	    "transaction (node unknown or its row held, observed generation advancing).\n"
	    "# TYPE gpupool_heartbeats_alone_total counter\n"
	    "gpupool_heartbeats_alone_total %llu\n"
	    "# HELP gpupool_heartbeats_waiting Heartbeats queued or in a batch, not "
	    "answered yet.\n# TYPE gpupool_heartbeats_waiting gauge\n"
	    "gpupool_heartbeats_waiting %lld\n",
	    (unsigned long long)atomic_load(&stat_batches),
	    (unsigned long long)atomic_load(&stat_items),
	    (unsigned long long)atomic_load(&stat_done),
	    (unsigned long long)atomic_load(&stat_alone), (long long)atomic_load(&waiting));
}

int
heartbeat_queue_start(struct heartbeat_queue **out)
{
	struct heartbeat_queue *q = calloc(1, sizeof(*q));

	if (q == NULL)
		return -1;
	if (batch_start(&q->alone, "heartbeats alone", HEARTBEAT_ALONE_WORKERS, 1, alone_run, q) <
	    0) {
		free(q);
		return -1;
	}
	if (batch_start(&q->batch, "heartbeats", HEARTBEAT_WORKERS, HEARTBEAT_BATCH_MAX,
		heartbeats_run, q) < 0) {
		batch_free(q->alone);
		free(q);
		return -1;
	}
	if (metrics_register("heartbeats", collect, NULL) < 0) {
		batch_free(q->batch);
		batch_free(q->alone);
		free(q);
		return -1;
	}
	*out = q;
	return 0;
}

bool
heartbeat_queue_push(struct heartbeat_queue *q, struct heartbeat_job *j)
{
	if (q == NULL)
		return false;
	atomic_fetch_add(&waiting, 1);
	if (batch_push(q->batch, j))
		return true;
	atomic_fetch_sub(&waiting, 1);
	return false;
}

void
heartbeat_queue_drain(struct heartbeat_queue *q)
{
	if (q == NULL)
		return;
	/* the batches first: what they leave goes to the alone workers */
	batch_stop(q->batch);
	batch_stop(q->alone);
}

void
heartbeat_queue_free(struct heartbeat_queue *q)
{
	if (q == NULL)
		return;
	batch_free(q->batch);
	batch_free(q->alone);
	free(q);
}
