/*
 * batch.c - the group-commit queue (see batch.h): a growable ring of
 * item pointers under a mutex, a few worker threads.
 */
#include "batch.h"

#include "core/log.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define BATCH_MAX_WORKERS 8

struct batch_queue {
	pthread_t threads[BATCH_MAX_WORKERS];
	int nthreads;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	void **ring;
	int cap;
	int head; /* index of the oldest item */
	int len;
	int max;
	int running; /* batches being run */
	bool stop;
	batch_fn run;
	void *arg;
	const char *name;
};

/* Make room for n more items; the lock is held. Aborts without memory. */
static void
ring_reserve(struct batch_queue *q, int n)
{
	void **ring;
	int cap = q->cap;

	if (q->len + n <= q->cap)
		return;
	while (cap < q->len + n)
		cap = cap * 2 + 64;
	ring = malloc(sizeof(*ring) * (size_t)cap);
	if (ring == NULL) {
		log_error(NULL, "out of memory growing a batch queue", "queue", q->name);
		abort();
	}
	for (int i = 0; i < q->len; i++)
		ring[i] = q->ring[(q->head + i) % q->cap];
	free(q->ring);
	q->ring = ring;
	q->cap = cap;
	q->head = 0;
}

bool
batch_push(struct batch_queue *q, void *item)
{
	pthread_mutex_lock(&q->lock);
	if (q->stop) {
		pthread_mutex_unlock(&q->lock);
		return false;
	}
	ring_reserve(q, 1);
	q->ring[(q->head + q->len) % q->cap] = item;
	q->len++;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->lock);
	return true;
}

void
batch_push_front(struct batch_queue *q, void *const *items, int n)
{
	if (n <= 0)
		return;
	pthread_mutex_lock(&q->lock);
	ring_reserve(q, n);
	for (int i = n - 1; i >= 0; i--) {
		q->head = (q->head - 1 + q->cap) % q->cap;
		q->ring[q->head] = items[i];
		q->len++;
	}
	pthread_mutex_unlock(&q->lock);
}

static void *
worker(void *arg)
{
	struct batch_queue *q = arg;
	void **items = malloc(sizeof(*items) * (size_t)q->max);

	if (items == NULL) {
		log_error(NULL, "out of memory starting a batch worker", "queue", q->name);
		abort();
	}
	for (;;) {
		int n = 0;

		pthread_mutex_lock(&q->lock);
		/*
		 * A second batch starts beside a running one only when half a
		 * batch is waiting: small batches side by side would cost more
		 * per item than what they gain.
		 */
		while ((q->len == 0 || (q->running > 0 && q->len < (q->max + 1) / 2)) && !q->stop)
			pthread_cond_wait(&q->cond, &q->lock);
		if (q->len == 0) {
			pthread_mutex_unlock(&q->lock);
			break;
		}
		while (n < q->max && q->len > 0) {
			items[n++] = q->ring[q->head];
			q->head = (q->head + 1) % q->cap;
			q->len--;
		}
		q->running++;
		pthread_mutex_unlock(&q->lock);
		q->run(db_thread(), items, n, q->arg);
		pthread_mutex_lock(&q->lock);
		q->running--;
		/* what waited for this batch to end may start now */
		pthread_cond_broadcast(&q->cond);
		pthread_mutex_unlock(&q->lock);
	}
	free(items);
	db_thread_close();
	return NULL;
}

static void
stop_workers(struct batch_queue *q)
{
	pthread_mutex_lock(&q->lock);
	q->stop = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
	for (int i = 0; i < q->nthreads; i++)
		pthread_join(q->threads[i], NULL);
}

int
batch_start(struct batch_queue **out, const char *name, int workers, int max, batch_fn run,
    void *arg)
{
	struct batch_queue *q = calloc(1, sizeof(*q));

	if (q == NULL)
		return -1;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	q->max = max > 0 ? max : 1;
	q->run = run;
	q->arg = arg;
	q->name = name;
	if (workers < 1)
		workers = 1;
	if (workers > BATCH_MAX_WORKERS)
		workers = BATCH_MAX_WORKERS;
	for (int i = 0; i < workers; i++) {
		if (pthread_create(&q->threads[i], NULL, worker, q) != 0) {
			stop_workers(q);
			pthread_mutex_destroy(&q->lock);
			pthread_cond_destroy(&q->cond);
			free(q);
			return -1;
		}
		q->nthreads++;
	}
	*out = q;
	return 0;
}

void
batch_stop(struct batch_queue *q)
{
	if (q != NULL && q->nthreads > 0) {
		stop_workers(q);
		q->nthreads = 0;
	}
}

void
batch_free(struct batch_queue *q)
{
	if (q == NULL)
		return;
	batch_stop(q);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
	free(q->ring);
	free(q);
}
