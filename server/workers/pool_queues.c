/*
 * pool_queues.c - the approvals and submissions workers (pool_queues.h).
 */
#include "pool_queues.h"

#include "batch.h"
#include "core/metrics_registry.h"

#include <stdlib.h>

struct pool_queues {
	struct pool_queues_config cfg;
	struct batch_queue *approvals;
	struct batch_queue *submits;
};

/* The submissions worker's batch: insert, then wake every waiter. */
static void
submits_run(struct db *db, void **items, int n, void *arg)
{
	struct service_submit *v[SERVICE_SUBMIT_BATCH_MAX];

	(void)arg;
	for (int i = 0; i < n; i++)
		v[i] = ((struct pool_job *)items[i])->submit;
	service_submits_run(db, v, n);
	for (int i = 0; i < n; i++) {
		struct pool_job *j = items[i];

		if (!j->inline_run)
			j->wake(j->waiter);
	}
}

/* The approvals worker's batch: decide, then wake every waiter. */
static void
approvals_run(struct db *db, void **items, int n, void *arg)
{
	struct pool_queues *q = arg;
	struct service_approval *v[SERVICE_APPROVE_BATCH_MAX];
	void *later[SERVICE_APPROVE_BATCH_MAX];
	int nlater = 0;

	for (int i = 0; i < n; i++)
		v[i] = ((struct pool_job *)items[i])->approval;
	service_approvals_run(db, q->cfg.catalog, v, n);
	for (int i = 0; i < n; i++) {
		struct pool_job *j = items[i];

		if (j->approval->outcome == SERVICE_APPROVAL_LATER &&
		    nlater < SERVICE_APPROVE_BATCH_MAX && !j->inline_run)
			later[nlater++] = j;
		else if (!j->inline_run)
			j->wake(j->waiter);
	}
	if (q->approvals != NULL)
		batch_push_front(q->approvals, (void *const *)later, nlater);
}

/* The group-commit workers' counters (service/pool_service.c keeps them). */
static void
collect(struct strbuf *b, struct arena *a, void *arg)
{
	(void)a;
	(void)arg;
	pool_approvals_metrics(b);
}

int
pool_queues_start(struct pool_queues **out, const struct pool_queues_config *cfg)
{
	struct pool_queues *q = calloc(1, sizeof(*q));

	if (q == NULL)
		return -1;
	q->cfg = *cfg;
	if (batch_start(&q->approvals, "approvals", cfg->workers, SERVICE_APPROVE_BATCH_MAX,
		approvals_run, q) < 0) {
		free(q);
		return -1;
	}
	if (batch_start(&q->submits, "submissions", cfg->workers, SERVICE_SUBMIT_BATCH_MAX,
		submits_run, q) < 0 ||
	    metrics_register("approvals", collect, NULL) < 0) {
		batch_stop(q->submits);
		batch_stop(q->approvals);
		pool_queues_free(q);
		return -1;
	}
	*out = q;
	return 0;
}

bool
pool_queues_approve(struct pool_queues *q, struct db *db, struct pool_job *j)
{
	if (batch_push(q->approvals, j))
		return true;
	/* stopping: the workers are gone, decide it here, alone */
	j->inline_run = true;
	approvals_run(db, (void **)&j, 1, q);
	return false;
}

bool
pool_queues_submit(struct pool_queues *q, struct db *db, struct pool_job *j)
{
	if (batch_push(q->submits, j))
		return true;
	/* stopping: the workers are gone, insert it here */
	j->inline_run = true;
	submits_run(db, (void **)&j, 1, q);
	return false;
}

void
pool_queues_drain(struct pool_queues *q)
{
	if (q == NULL)
		return;
	batch_stop(q->submits);
	batch_stop(q->approvals);
}

void
pool_queues_free(struct pool_queues *q)
{
	if (q == NULL)
		return;
	batch_free(q->submits);
	batch_free(q->approvals);
	free(q);
}
