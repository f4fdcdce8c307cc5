/*
 * periodic.h - the one helper that runs every periodic job: a thread of
 * its own (with its own database connection, closed when it stops) that
 * runs a pass at start and then every interval, plus a random jitter so
 * that replicas started together drift apart; optionally only on the
 * replica that holds the job's leadership lock (db_lock.h), so that one
 * replica runs the pass and the others stand by. Leadership saves
 * duplicate work; it is not mutual exclusion (a replica that lost its
 * connection may finish a pass while another takes over): passes must
 * stay idempotent.
 */
#ifndef GP_WORKERS_PERIODIC_H
#define GP_WORKERS_PERIODIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct periodic;

/* One pass; on the worker's thread (db_thread() is its connection). */
typedef void (*periodic_fn)(void *arg);

struct periodic_config {
	const char *name; /* logs and the leadership lock; must outlive the worker */
	int interval_ms;  /* between the end of a pass and the next (> 0) */
	int jitter_ms;    /* plus a uniform random 0..jitter_ms each time */
	bool leader;      /* run only while holding the leadership lock `name` */
	periodic_fn run;
	void *arg;
	/*
	 * > 0: arg points to that many bytes (the worker's configuration)
	 * that periodic_start copies into memory of the worker's own, passed
	 * to run and freed at stop; the caller's copy may go at once.
	 */
	size_t arg_size;
};

/*
 * Start the worker; the first pass (or leadership attempt) runs at once.
 * On failure nothing is left behind (no thread, no memory) and *out is
 * untouched.
 */
int periodic_start(struct periodic **out, const struct periodic_config *cfg)
    __attribute__((warn_unused_result));

/*
 * Stop: a pass under way finishes, no other starts; joins the thread
 * (whose connection closes, dropping the leadership lock) and frees p.
 * NULL is a no-op.
 */
void periodic_stop(struct periodic *p);

/* Run a pass now instead of at the end of the current wait (any thread). */
void periodic_kick(struct periodic *p);

/* Passes run so far, and whether the last attempt held leadership. */
uint64_t periodic_runs(struct periodic *p);
bool periodic_is_leader(struct periodic *p);

/*
 * The wait before the next pass: interval_ms plus a uniform value in
 * [0, jitter_ms] drawn from *seed (rand_r). Exposed for tests.
 */
int periodic_next_delay_ms(int interval_ms, int jitter_ms, unsigned int *seed);

#endif
