/*
 * deferred.c - the deferred-request registry (see deferred.h): entries
 * in a hash table by key (doubly linked chains) and in a binary min-heap
 * by deadline (each entry knows its heap slot). The timer sleeps until the
 * heap's first deadline and pops what is due: O(log n) per expiry, and a
 * wake by key takes its entries out of the heap in O(log n) each, n the
 * waiting requests (with 10,000 agents' long-polls the old full scan per
 * expiry was O(n) under the lock). deferred_add wakes the timer when it
 * brings an earlier deadline. Fired entries leave the table under the
 * lock and fire after it.
 */
#include "deferred.h"

#include "core/log.h"
#include "core/metrics_registry.h"
#include "core/timeutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFERRED_BUCKETS 1024
#define DEFERRED_MARKS 16384      /* wake counters, by key hash (deferred_mark) */
#define DEFERRED_IDLE_US 60000000 /* the timer's wait with nothing to expire */

struct deferred_entry {
	struct deferred_entry *prev, *next; /* bucket chain, or a fire list */
	size_t slot;                        /* index in the deadline heap */
	int64_t deadline_us;
	deferred_fire_fn fire;
	void *arg;
	unsigned hash;
	char key[]; /* NUL-terminated */
};

struct deferred_registry {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC; the timer waits on it */
	pthread_t timer;
	bool stop;
	bool started;
	int count;
	struct deferred_entry **heap; /* min-heap by deadline_us, count entries */
	size_t cap;
	struct deferred_entry *buckets[DEFERRED_BUCKETS];
	/*
	 * Wakes so far, per key hash slot and of everything: a key's mark is
	 * their sum, which only grows. Keys sharing a slot share its count
	 * (a wake of one looks like a wake of the others: an early answer,
	 * never a lost one).
	 */
	uint64_t wakes[DEFERRED_MARKS];
	uint64_t wakes_all;
};

/* ---- the deadline heap (the lock is held) ---- */

static void
heap_set(struct deferred_registry *r, size_t i, struct deferred_entry *e)
{
	r->heap[i] = e;
	e->slot = i;
}

static void
heap_up(struct deferred_registry *r, size_t i)
{
	struct deferred_entry *e = r->heap[i];

	while (i > 0) {
		size_t parent = (i - 1) / 2;

		if (r->heap[parent]->deadline_us <= e->deadline_us)
			break;
		heap_set(r, i, r->heap[parent]);
		i = parent;
	}
	heap_set(r, i, e);
}

/* Sift heap[i] down among the first n slots. */
static void
heap_down(struct deferred_registry *r, size_t i, size_t n)
{
	struct deferred_entry *e = r->heap[i];

	for (;;) {
		size_t c = 2 * i + 1;

		if (c >= n)
			break;
		if (c + 1 < n && r->heap[c + 1]->deadline_us < r->heap[c]->deadline_us)
			c++;
		if (e->deadline_us <= r->heap[c]->deadline_us)
			break;
		heap_set(r, i, r->heap[c]);
		i = c;
	}
	heap_set(r, i, e);
}

/* Room for one more entry; -1 when out of memory. */
static int
heap_reserve(struct deferred_registry *r)
{
	struct deferred_entry **h;
	size_t cap;

	if ((size_t)r->count < r->cap)
		return 0;
	cap = r->cap == 0 ? 64 : r->cap * 2;
	h = realloc(r->heap, cap * sizeof(*h));
	if (h == NULL)
		return -1;
	r->heap = h;
	r->cap = cap;
	return 0;
}

/* Take e out of the heap of count entries (the caller then decrements count). */
static void
heap_remove(struct deferred_registry *r, struct deferred_entry *e)
{
	size_t i = e->slot, last = (size_t)r->count - 1;

	if (i != last) {
		struct deferred_entry *moved = r->heap[last];

		heap_set(r, i, moved);
		if (i > 0 && r->heap[(i - 1) / 2]->deadline_us > moved->deadline_us)
			heap_up(r, i);
		else
			heap_down(r, i, last);
	}
}

static unsigned
key_hash(const char *key)
{
	unsigned h = 2166136261u; /* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++)
		h = (h ^ *p) * 16777619u;
	return h;
}

/* Unlink e from its bucket and push it on *list; the lock is held. */
static void
entry_take(struct deferred_registry *r, struct deferred_entry *e, struct deferred_entry **list)
{
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		r->buckets[e->hash % DEFERRED_BUCKETS] = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	heap_remove(r, e);
	r->count--;
	e->prev = NULL;
	e->next = *list;
	*list = e;
}

/* Fire and free a list taken from the table; the lock is not held. */
static int
fire_list(struct deferred_entry *list, enum deferred_outcome outcome)
{
	int n = 0;

	while (list != NULL) {
		struct deferred_entry *e = list;

		list = e->next;
		e->fire(e->arg, outcome);
		free(e);
		n++;
	}
	return n;
}

static void
abs_time(int64_t mono_us, struct timespec *ts)
{
	ts->tv_sec = (time_t)(mono_us / 1000000);
	ts->tv_nsec = (long)(mono_us % 1000000) * 1000;
}

static void *
deferred_timer(void *arg)
{
	struct deferred_registry *r = arg;

	pthread_mutex_lock(&r->lock);
	while (!r->stop) {
		struct deferred_entry *due = NULL;
		int64_t now = time_mono_us();
		struct timespec ts;

		while (r->count > 0 && r->heap[0]->deadline_us <= now)
			entry_take(r, r->heap[0], &due);
		if (due != NULL) {
			struct deferred_entry *ordered = NULL;

			/* taken latest-first: fire them in deadline order */
			while (due != NULL) {
				struct deferred_entry *e = due;

				due = e->next;
				e->next = ordered;
				ordered = e;
			}
			due = ordered;
			pthread_mutex_unlock(&r->lock);
			fire_list(due, DEFERRED_TIMEOUT);
			pthread_mutex_lock(&r->lock);
			continue;
		}
		abs_time(r->count > 0 ? r->heap[0]->deadline_us : now + DEFERRED_IDLE_US, &ts);
		(void)pthread_cond_timedwait(&r->cond, &r->lock, &ts);
	}
	pthread_mutex_unlock(&r->lock);
	return NULL;
}

int
deferred_start(struct deferred_registry **out)
{
	struct deferred_registry *r = calloc(1, sizeof(*r));
	pthread_condattr_t ca;

	if (r == NULL)
		return -1;
	pthread_mutex_init(&r->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&r->timer, NULL, deferred_timer, r) != 0) {
		log_error(NULL, "could not start the deferred-request timer");
		pthread_mutex_destroy(&r->lock);
		pthread_cond_destroy(&r->cond);
		free(r);
		return -1;
	}
	r->started = true;
	*out = r;
	return 0;
}

/* Take every entry under key onto *list; the lock is held. */
static void
take_key(struct deferred_registry *r, const char *key, unsigned h, struct deferred_entry **list)
{
	struct deferred_entry *e = r->buckets[h % DEFERRED_BUCKETS];

	while (e != NULL) {
		struct deferred_entry *following = e->next;

		if (e->hash == h && strcmp(e->key, key) == 0)
			entry_take(r, e, list);
		e = following;
	}
}

static int
add(struct deferred_registry *r, const char *key, const uint64_t *since, int64_t deadline_us,
    deferred_fire_fn fire, void *arg, bool exclusive)
{
	size_t len = strlen(key);
	struct deferred_entry *e = malloc(sizeof(*e) + len + 1), *replaced = NULL;
	struct deferred_entry **bucket;

	if (e == NULL)
		return -1;
	e->deadline_us = deadline_us;
	e->fire = fire;
	e->arg = arg;
	e->hash = key_hash(key);
	memcpy(e->key, key, len + 1);
	pthread_mutex_lock(&r->lock);
	if (r->stop || heap_reserve(r) < 0) {
		pthread_mutex_unlock(&r->lock);
		free(e);
		return -1;
	}
	if (exclusive)
		take_key(r, key, e->hash, &replaced);
	if (since != NULL && r->wakes[e->hash % DEFERRED_MARKS] + r->wakes_all != *since) {
		/* woken between the mark and now: not registered, the caller answers */
		pthread_mutex_unlock(&r->lock);
		free(e);
		fire_list(replaced, DEFERRED_WOKEN);
		return 1;
	}
	bucket = &r->buckets[e->hash % DEFERRED_BUCKETS];
	e->prev = NULL;
	e->next = *bucket;
	if (*bucket != NULL)
		(*bucket)->prev = e;
	*bucket = e;
	heap_set(r, (size_t)r->count, e);
	r->count++;
	heap_up(r, e->slot);
	if (e->slot == 0)
		pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	fire_list(replaced, DEFERRED_WOKEN);
	return 0;
}

int
deferred_add(struct deferred_registry *r, const char *key, int64_t deadline_us,
    deferred_fire_fn fire, void *arg)
{
	return add(r, key, NULL, deadline_us, fire, arg, false);
}

int
deferred_add_exclusive(struct deferred_registry *r, const char *key, int64_t deadline_us,
    deferred_fire_fn fire, void *arg)
{
	return add(r, key, NULL, deadline_us, fire, arg, true);
}

uint64_t
deferred_mark(struct deferred_registry *r, const char *key)
{
	uint64_t m;

	pthread_mutex_lock(&r->lock);
	m = r->wakes[key_hash(key) % DEFERRED_MARKS] + r->wakes_all;
	pthread_mutex_unlock(&r->lock);
	return m;
}

int
deferred_add_since(struct deferred_registry *r, const char *key, uint64_t since, bool exclusive,
    int64_t deadline_us, deferred_fire_fn fire, void *arg)
{
	return add(r, key, &since, deadline_us, fire, arg, exclusive);
}

int
deferred_wake(struct deferred_registry *r, const char *key)
{
	struct deferred_entry *list = NULL;
	unsigned h = key_hash(key);

	pthread_mutex_lock(&r->lock);
	r->wakes[h % DEFERRED_MARKS]++;
	take_key(r, key, h, &list);
	pthread_mutex_unlock(&r->lock);
	return fire_list(list, DEFERRED_WOKEN);
}

/* Take every entry; the lock is held. */
static struct deferred_entry *
take_all(struct deferred_registry *r)
{
	struct deferred_entry *list = NULL;

	for (int b = 0; b < DEFERRED_BUCKETS; b++)
		while (r->buckets[b] != NULL)
			entry_take(r, r->buckets[b], &list);
	return list;
}

int
deferred_wake_all(struct deferred_registry *r)
{
	struct deferred_entry *list;

	pthread_mutex_lock(&r->lock);
	r->wakes_all++;
	list = take_all(r);
	pthread_mutex_unlock(&r->lock);
	return fire_list(list, DEFERRED_WOKEN);
}

int
deferred_count(struct deferred_registry *r)
{
	int n;

	pthread_mutex_lock(&r->lock);
	n = r->count;
	pthread_mutex_unlock(&r->lock);
	return n;
}

void
deferred_metrics_collect(struct strbuf *b, struct arena *a, void *arg)
{
	(void)a;
	metrics_single(b, "gpupool_deferred_waiting", "gauge",
	    "Requests waiting in the registry (agent long-polls).", "%d", deferred_count(arg));
}

void
deferred_stop(struct deferred_registry *r)
{
	struct deferred_entry *list;

	if (r == NULL)
		return;
	pthread_mutex_lock(&r->lock);
	r->stop = true;
	list = take_all(r);
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->lock);
	fire_list(list, DEFERRED_SHUTDOWN);
	if (r->started) {
		pthread_join(r->timer, NULL);
		r->started = false;
	}
}

void
deferred_free(struct deferred_registry *r)
{
	if (r == NULL)
		return;
	deferred_stop(r);
	pthread_mutex_destroy(&r->lock);
	pthread_cond_destroy(&r->cond);
	free(r->heap);
	free(r);
}
