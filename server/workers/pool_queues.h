/*
 * pool_queues.h - the approvals and submissions workers: group commit
 * (batch.h) of the pool service's approvals and submissions. A handler
 * queues a job and waits; a worker takes everything queued, decides it in
 * one transaction (service_approvals_run, service_submits_run) and wakes
 * each job's waiter. An approval that must wait for another of its batch
 * (SERVICE_APPROVAL_LATER) goes back to the front of the queue.
 *
 * Started before the HTTP server. At shutdown pool_queues_drain comes
 * first: it answers everything queued, and from then on pool_queues_approve
 * and pool_queues_submit run the job on the caller's thread (the HTTP
 * server still drains). pool_queues_free after the HTTP server stopped.
 */
#ifndef GP_WORKERS_POOL_QUEUES_H
#define GP_WORKERS_POOL_QUEUES_H

#include <stdbool.h>

#include "db/db.h"
#include "service/pool_service.h"

struct catalog;
struct pool_queues;

struct pool_queues_config {
	int workers;                   /* threads per queue (GPUPOOL_APPROVAL_WORKERS) */
	const struct catalog *catalog; /* what approvals place on; outlives the queues */
};

/* A queued approval or submission (one of the two pointers set). */
struct pool_job {
	struct service_approval *approval;
	struct service_submit *submit;
	void (*wake)(void *waiter); /* after its batch, on a worker thread */
	void *waiter;
	bool inline_run; /* set when it ran on the caller's thread: nobody to wake */
};

/* Both queues and their threads; registers the "approvals" /metrics collector. */
int pool_queues_start(struct pool_queues **out, const struct pool_queues_config *cfg)
    __attribute__((warn_unused_result));

/*
 * Queue j: true when queued (j->wake(j->waiter) follows from a worker);
 * false when the queues are stopping: then j was decided on this thread,
 * on db, before the return (j->inline_run set).
 */
bool pool_queues_approve(struct pool_queues *q, struct db *db, struct pool_job *j);
bool pool_queues_submit(struct pool_queues *q, struct db *db, struct pool_job *j);

/* Answer everything queued, stop the threads; later jobs run inline. */
void pool_queues_drain(struct pool_queues *q);

/* After the HTTP server stopped. NULL is a no-op. */
void pool_queues_free(struct pool_queues *q);

#endif
