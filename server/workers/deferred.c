/*
 * deferred.c - the deferred-request registry (see deferred.h): entries
 * in a hash table by key (doubly linked chains). No deadline order is
 * kept: the timer sleeps until the earliest deadline it knows of, then
 * scans every entry (O(n) per expiry, n the waiting requests) and learns
 * the next one; deferred_add wakes it when it brings an earlier one.
 * Fired entries leave the table under the lock and fire after it.
 */
#include "deferred.h"

#include "core/log.h"
#include "core/timeutil.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFERRED_BUCKETS 1024
#define DEFERRED_IDLE_US 60000000 /* the timer's wait with nothing to expire */

struct deferred_entry {
	struct deferred_entry *prev, *next; /* bucket chain, or a fire list */
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
	int64_t next_us; /* no deadline before this (0: none waiting) */
	struct deferred_entry *buckets[DEFERRED_BUCKETS];
};

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
		int64_t now = time_mono_us(), next = 0;
		struct timespec ts;

		if (r->next_us != 0 && r->next_us <= now) {
			for (int b = 0; b < DEFERRED_BUCKETS; b++) {
				struct deferred_entry *e = r->buckets[b];

				while (e != NULL) {
					struct deferred_entry *following = e->next;

					if (e->deadline_us <= now)
						entry_take(r, e, &due);
					else if (next == 0 || e->deadline_us < next)
						next = e->deadline_us;
					e = following;
				}
			}
			r->next_us = next;
			if (due != NULL) {
				pthread_mutex_unlock(&r->lock);
				fire_list(due, DEFERRED_TIMEOUT);
				pthread_mutex_lock(&r->lock);
				continue;
			}
		}
		abs_time(r->next_us != 0 ? r->next_us : now + DEFERRED_IDLE_US, &ts);
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

int
deferred_add(struct deferred_registry *r, const char *key, int64_t deadline_us,
    deferred_fire_fn fire, void *arg)
{
	size_t len = strlen(key);
	struct deferred_entry *e = malloc(sizeof(*e) + len + 1);
	struct deferred_entry **bucket;

	if (e == NULL)
		return -1;
	e->deadline_us = deadline_us;
	e->fire = fire;
	e->arg = arg;
	e->hash = key_hash(key);
	memcpy(e->key, key, len + 1);
	pthread_mutex_lock(&r->lock);
	if (r->stop) {
		pthread_mutex_unlock(&r->lock);
		free(e);
		return -1;
	}
	bucket = &r->buckets[e->hash % DEFERRED_BUCKETS];
	e->prev = NULL;
	e->next = *bucket;
	if (*bucket != NULL)
		(*bucket)->prev = e;
	*bucket = e;
	r->count++;
	if (r->next_us == 0 || deadline_us < r->next_us) {
		r->next_us = deadline_us;
		pthread_cond_signal(&r->cond);
	}
	pthread_mutex_unlock(&r->lock);
	return 0;
}

int
deferred_wake(struct deferred_registry *r, const char *key)
{
	struct deferred_entry *list = NULL, *e;
	unsigned h = key_hash(key);

	pthread_mutex_lock(&r->lock);
	e = r->buckets[h % DEFERRED_BUCKETS];
	while (e != NULL) {
		struct deferred_entry *following = e->next;

		if (e->hash == h && strcmp(e->key, key) == 0)
			entry_take(r, e, &list);
		e = following;
	}
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
	r->next_us = 0;
	return list;
}

int
deferred_wake_all(struct deferred_registry *r)
{
	struct deferred_entry *list;

	pthread_mutex_lock(&r->lock);
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
	free(r);
}
