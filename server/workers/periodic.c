/*
 * periodic.c - the periodic worker (see periodic.h): a thread, a mutex
 * and a condition variable; the wait between passes is a timed wait on
 * the condition, so that a stop or a kick ends it at once.
 */
#include "periodic.h"

#include "core/log.h"
#include "core/timeutil.h"
#include "db/db.h"
#include "db/db_lock.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct periodic {
	struct periodic_config cfg;
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond; /* CLOCK_MONOTONIC */
	bool stop;
	bool kicked;
	atomic_uint_fast64_t runs;
	atomic_bool leader;
	unsigned int seed;
};

int
periodic_next_delay_ms(int interval_ms, int jitter_ms, unsigned int *seed)
{
	int64_t d = interval_ms > 0 ? interval_ms : 1;

	if (jitter_ms > 0)
		d += (int64_t)((double)rand_r(seed) / ((double)RAND_MAX + 1.0) *
		    ((double)jitter_ms + 1.0));
	return d > INT32_MAX ? INT32_MAX : (int)d;
}

/* True when this replica should run the pass now. */
static bool
periodic_may_run(struct periodic *p)
{
	struct gp_error err;
	bool leader = false, was;

	if (!p->cfg.leader)
		return true;
	gp_error_clear(&err);
	if (db_leader_try(db_thread(), p->cfg.name, &leader, &err) < 0) {
		log_warn(NULL, "could not check a worker's leadership", "worker", p->cfg.name,
		    "error", err.message);
		leader = false;
	}
	was = atomic_exchange(&p->leader, leader);
	if (leader != was)
		log_info(NULL, leader ? "worker took leadership" : "worker lost leadership",
		    "worker", p->cfg.name);
	return leader;
}

static void *
periodic_main(void *arg)
{
	struct periodic *p = arg;

	pthread_mutex_lock(&p->lock);
	while (!p->stop) {
		struct timespec ts;
		int64_t ns;

		p->kicked = false;
		pthread_mutex_unlock(&p->lock);
		if (periodic_may_run(p)) {
			p->cfg.run(p->cfg.arg);
			atomic_fetch_add(&p->runs, 1);
		}
		pthread_mutex_lock(&p->lock);
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ns = (int64_t)ts.tv_nsec +
		    (int64_t)periodic_next_delay_ms(p->cfg.interval_ms, p->cfg.jitter_ms,
			&p->seed) *
			1000000;
		ts.tv_sec += (time_t)(ns / 1000000000);
		ts.tv_nsec = (long)(ns % 1000000000);
		while (!p->stop && !p->kicked &&
		    pthread_cond_timedwait(&p->cond, &p->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&p->lock);
	db_thread_close();
	return NULL;
}

static void
periodic_free(struct periodic *p)
{
	if (p->cfg.arg_size > 0)
		free(p->cfg.arg);
	pthread_mutex_destroy(&p->lock);
	pthread_cond_destroy(&p->cond);
	free(p);
}

int
periodic_start(struct periodic **out, const struct periodic_config *cfg)
{
	struct periodic *p = calloc(1, sizeof(*p));
	pthread_condattr_t ca;

	if (p == NULL)
		return -1;
	p->cfg = *cfg;
	if (cfg->arg_size > 0) {
		p->cfg.arg = malloc(cfg->arg_size);
		if (p->cfg.arg == NULL) {
			free(p);
			return -1;
		}
		memcpy(p->cfg.arg, cfg->arg, cfg->arg_size);
	}
	if (p->cfg.interval_ms <= 0)
		p->cfg.interval_ms = 1000;
	if (p->cfg.jitter_ms < 0)
		p->cfg.jitter_ms = 0;
	p->seed = (unsigned int)time_mono_us() ^ (unsigned int)(uintptr_t)p;
	atomic_init(&p->runs, 0);
	atomic_init(&p->leader, false);
	pthread_mutex_init(&p->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&p->thread, NULL, periodic_main, p) != 0) {
		log_error(NULL, "could not start a worker thread", "worker", cfg->name);
		periodic_free(p);
		return -1;
	}
	*out = p;
	return 0;
}

void
periodic_kick(struct periodic *p)
{
	pthread_mutex_lock(&p->lock);
	p->kicked = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
}

void
periodic_stop(struct periodic *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->lock);
	p->stop = true;
	pthread_cond_signal(&p->cond);
	pthread_mutex_unlock(&p->lock);
	pthread_join(p->thread, NULL);
	periodic_free(p);
}

uint64_t
periodic_runs(struct periodic *p)
{
	return atomic_load(&p->runs);
}

bool
periodic_is_leader(struct periodic *p)
{
	return atomic_load(&p->leader);
}
