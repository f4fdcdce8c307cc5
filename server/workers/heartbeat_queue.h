/*
 * heartbeat_queue.h - node-agent heartbeats by group commit (batch.h).
 * The heartbeat handler queues a job and waits; a worker takes
 * everything queued (up to HEARTBEAT_BATCH_MAX) and commits the common
 * ones in one statement (service_agent_heartbeats: a ready node whose
 * agent reports nothing new), then wakes every job's waiter. A job left
 * undone (its node unknown, its observed generation advancing, its node
 * row held by another transaction, a second heartbeat of its node in the
 * batch, its node gone, or the batch's connection lost) is answered
 * with service_agent_heartbeat, alone in its own transaction, as before
 * (migration 0029 says why never inside the batch's). A batch that timed
 * out (statement_timeout: the nodes table held, the statement never
 * waits for a row) fails every heartbeat in it with its 503: alone, each
 * would wait a timeout of its own, four at a time.
 *
 * Started before the HTTP server. At shutdown heartbeat_queue_drain
 * answers everything queued; from then on heartbeat_queue_push refuses
 * and the handler runs the heartbeat itself (as it does a job woken with
 * done false). heartbeat_queue_free after
 * the HTTP server stopped.
 */
#ifndef GP_WORKERS_HEARTBEAT_QUEUE_H
#define GP_WORKERS_HEARTBEAT_QUEUE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"

#define HEARTBEAT_BATCH_MAX 256   /* heartbeats per statement */
#define HEARTBEAT_WORKERS 2       /* the second runs only when half a batch waits */
#define HEARTBEAT_ALONE_WORKERS 4 /* heartbeats the batch left, one each */
#define HEARTBEAT_LINGER_MS 20    /* after a batch smaller than this, a pause: */
#define HEARTBEAT_LINGER_BELOW 16 /* the next one gathers (heartbeat_queue.c) */

struct heartbeat_queue;

/* A queued heartbeat. */
struct heartbeat_job {
	int64_t node_id;
	int64_t observed;    /* -1: not given */
	struct arena *arena; /* the waiter's, for the alone worker */
	int64_t generation;  /* out, when done */
	bool done;           /* out: answered (false: the caller runs it, stopping) */
	bool failed;         /* out, with err: the alone run failed */
	struct gp_error err;
	void (*wake)(void *waiter); /* after its batch, on a worker thread */
	void *waiter;
};

/* The queue and its threads; registers the "heartbeats" /metrics collector. */
int heartbeat_queue_start(struct heartbeat_queue **out) __attribute__((warn_unused_result));

/*
 * Queue j: true when queued (j->wake(j->waiter) follows from a worker,
 * j->done and j->generation set); false when the queue is stopping (the
 * caller runs the heartbeat itself).
 */
bool heartbeat_queue_push(struct heartbeat_queue *q, struct heartbeat_job *j)
    __attribute__((warn_unused_result));

/* Answer everything queued, stop the threads; later pushes refuse. */
void heartbeat_queue_drain(struct heartbeat_queue *q);

/* After the HTTP server stopped. NULL is a no-op. */
void heartbeat_queue_free(struct heartbeat_queue *q);

#endif
