/*
 * deferred.h - the registry of deferred (suspended) requests: each waits
 * under a key (what it waits for: "node:42", "pool:17") until a deadline.
 * Whatever comes first fires it, exactly once: a wake by its key
 * (deferred_wake, the notifier), its deadline (a timer thread of the
 * registry enforces every deadline), or the registry's stop (shutdown
 * wakes everything that waits). Nothing waits forever. Deadlines are kept
 * in a min-heap: O(log n) per add, expiry and wake.
 */
#ifndef GP_WORKERS_DEFERRED_H
#define GP_WORKERS_DEFERRED_H

#include <stdbool.h>
#include <stdint.h>

struct deferred_registry;

enum deferred_outcome {
	DEFERRED_WOKEN,    /* deferred_wake or deferred_wake_all */
	DEFERRED_TIMEOUT,  /* the deadline passed */
	DEFERRED_SHUTDOWN, /* the registry is stopping (or had stopped at deferred_add) */
};

/*
 * Called once per entry, on the thread that woke it (the waker's, the
 * timer's or the stopper's), outside the registry's lock: it may call
 * back into the registry. It must not block for long (hand the answer
 * to the HTTP layer and return).
 */
typedef void (*deferred_fire_fn)(void *arg, enum deferred_outcome outcome);

/* Start a registry and its timer thread. */
int deferred_start(struct deferred_registry **out) __attribute__((warn_unused_result));

/*
 * Wait under key (copied) until deadline_us (time_mono_us() clock). Returns
 * 0 once registered; -1 when the registry is stopping or out of memory:
 * then fire is not called and the caller answers itself (as for
 * DEFERRED_SHUTDOWN).
 */
int deferred_add(struct deferred_registry *r, const char *key, int64_t deadline_us,
    deferred_fire_fn fire, void *arg) __attribute__((warn_unused_result));

/*
 * deferred_add, but the entry is the only one under key: the entries
 * already waiting under it fire first (DEFERRED_WOKEN, after the new one
 * is registered). A node's long-poll uses it, so a node holds at most one
 * poll per replica and a new poll answers a stale one at once.
 */
int deferred_add_exclusive(struct deferred_registry *r, const char *key, int64_t deadline_us,
    deferred_fire_fn fire, void *arg) __attribute__((warn_unused_result));

/*
 * Without a lost wake: a waiter reads what it waits for (the database),
 * finds nothing new and registers; a wake between its read and its
 * registration would find nobody and be lost (the waiter then sleeps to
 * its deadline). So: take deferred_mark(key) BEFORE the read, and
 * register with deferred_add_since(..., mark, ...): when key was woken
 * since the mark (or everything was), nothing is registered, fire is not
 * called, and it returns 1: the caller reads again and answers at once.
 * 0 once registered, -1 as deferred_add. exclusive as
 * deferred_add_exclusive (the entries under key fire either way).
 */
uint64_t deferred_mark(struct deferred_registry *r, const char *key);
int deferred_add_since(struct deferred_registry *r, const char *key, uint64_t since, bool exclusive,
    int64_t deadline_us, deferred_fire_fn fire, void *arg) __attribute__((warn_unused_result));

/* Fire every entry waiting under key (DEFERRED_WOKEN); returns how many. */
int deferred_wake(struct deferred_registry *r, const char *key);

/* Fire every entry (DEFERRED_WOKEN): after events may have been missed. */
int deferred_wake_all(struct deferred_registry *r);

/* Entries waiting now. */
int deferred_count(struct deferred_registry *r);

struct arena;
struct strbuf;

/* gpupool_deferred_waiting for /metrics: a collector whose arg is the registry. */
void deferred_metrics_collect(struct strbuf *b, struct arena *a, void *arg);

/*
 * Refuse new entries, fire every waiting one (DEFERRED_SHUTDOWN), stop
 * the timer. deferred_add keeps answering -1 until deferred_free.
 */
void deferred_stop(struct deferred_registry *r);
void deferred_free(struct deferred_registry *r);

#endif
