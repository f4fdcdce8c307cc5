/*
 * expiry.c - the expiry worker (see expiry.h), on a thread of its own
 * with its own database connection.
 */
#include "expiry.h"

#include "core/log.h"
#include "db/db.h"
#include "db/db_pools.h"
#include "service/pool_service.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define RELEASES_PER_RUN 100 /* pools released per run at most */

struct expiry {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	int interval_s;
};

/*
 * One pass: expire pending requests past their lifetime, release pools
 * past their end time (the approval path of service/pool_service.c, as
 * the API's release), settle pool statuses.
 */
static void
expiry_run_once(void)
{
	struct gp_error err;
	int64_t n = 0;
	char buf[24];

	gp_error_clear(&err);
	if (service_requests_expire(db_thread(), &n, &err) < 0)
		log_warn(NULL, "could not expire pool requests", "error", err.message);
	if (n > 0) {
		snprintf(buf, sizeof(buf), "%lld", (long long)n);
		log_info(NULL, "expired pending pool requests", "count", buf);
	}
	for (int i = 0; i < RELEASES_PER_RUN; i++) {
		struct arena *a = arena_create();
		struct pool_row pool;
		bool found = false;

		gp_error_clear(&err);
		if (service_release_due(db_thread(), a, &found, &pool, &err) < 0) {
			log_warn(NULL, "could not release a pool at its end time", "error",
			    err.message);
			arena_destroy(a);
			break;
		}
		if (found)
			log_info(NULL, "released a pool at its end time", "pool", pool.name,
			    "project", pool.project);
		arena_destroy(a);
		if (!found)
			break;
	}
	gp_error_clear(&err);
	if (db_pools_settle(db_thread(), &n, &err) < 0)
		log_warn(NULL, "could not settle pool statuses", "error", err.message);
}

static void *
expiry_main(void *arg)
{
	struct expiry *e = arg;

	pthread_mutex_lock(&e->lock);
	while (!e->stop) {
		struct timespec ts;

		pthread_mutex_unlock(&e->lock);
		expiry_run_once();
		pthread_mutex_lock(&e->lock);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += e->interval_s;
		while (!e->stop && pthread_cond_timedwait(&e->cond, &e->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&e->lock);
	db_thread_close();
	return NULL;
}

int
expiry_start(struct expiry **out, int interval_s)
{
	struct expiry *e = calloc(1, sizeof(*e));

	if (e == NULL)
		return -1;
	e->interval_s = interval_s > 0 ? interval_s : 10;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	if (pthread_create(&e->thread, NULL, expiry_main, e) != 0) {
		pthread_mutex_destroy(&e->lock);
		pthread_cond_destroy(&e->cond);
		free(e);
		return -1;
	}
	*out = e;
	return 0;
}

void
expiry_stop(struct expiry *e)
{
	if (e == NULL)
		return;
	pthread_mutex_lock(&e->lock);
	e->stop = true;
	pthread_cond_signal(&e->cond);
	pthread_mutex_unlock(&e->lock);
	pthread_join(e->thread, NULL);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e);
}
