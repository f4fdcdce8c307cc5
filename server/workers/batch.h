/*
 * batch.h - group commit. Work that can share one transaction (pool
 * request approvals) waits in a queue; a free worker thread (each with
 * its own database connection) takes everything queued, up to max items,
 * and runs it as one batch. Under load the batches grow by themselves
 * (what came in while the last batches ran); alone, an item runs at once.
 * With more than one worker, batches run side by side: whatever they
 * must not do at the same time, their database locks serialize.
 */
#ifndef GP_WORKERS_BATCH_H
#define GP_WORKERS_BATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "db/db.h"

struct batch_queue;

/* Run items[0..n) on db; called on a worker thread. */
typedef void (*batch_fn)(struct db *db, void **items, int n, void *arg);

/* Start a queue and its workers (1..8); name shows in logs. */
int batch_start(struct batch_queue **out, const char *name, int workers, int max, batch_fn run,
    void *arg) __attribute__((warn_unused_result));

/*
 * Queue an item (any thread). False once the queue is stopping: the
 * caller then runs the item itself.
 */
bool batch_push(struct batch_queue *q, void *item) __attribute__((warn_unused_result));

/* From a worker's run: items[0..n) go first into the next batch. */
void batch_push_front(struct batch_queue *q, void *const *items, int n);

/*
 * Refuse new items, run whatever is still queued, then stop the workers.
 * batch_push keeps working (answering false) until batch_free.
 */
void batch_stop(struct batch_queue *q);
void batch_free(struct batch_queue *q);

#endif
