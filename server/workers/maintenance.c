/*
 * maintenance.c - periodic cleanup on a thread of its own, with its own
 * database connection.
 */
#include "maintenance.h"

#include "core/log.h"
#include "db/db.h"
#include "db/db_idempotency.h"
#include "db/db_users.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

struct maintenance {
	pthread_t thread;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool stop;
	struct maintenance_config cfg;
};

static void
maintenance_run_once(struct maintenance *m)
{
	struct gp_error err;
	int64_t deleted = 0, failures = 0, tokens = 0;
	char n[3][24];

	gp_error_clear(&err);
	if (db_idem_expire(db_thread(), m->cfg.idempotency_ttl_s, &deleted, &err) < 0) {
		log_warn(NULL, "could not expire idempotency keys", "error", err.message);
		return;
	}
	if (db_auth_expire(db_thread(), m->cfg.login_window_s, m->cfg.token_keep_s, &failures,
		&tokens, &err) < 0) {
		log_warn(NULL, "could not expire login counters and tokens", "error", err.message);
		return;
	}
	if (deleted + failures + tokens == 0)
		return;
	snprintf(n[0], sizeof(n[0]), "%lld", (long long)deleted);
	snprintf(n[1], sizeof(n[1]), "%lld", (long long)failures);
	snprintf(n[2], sizeof(n[2]), "%lld", (long long)tokens);
	log_info(NULL, "housekeeping", "idempotency_keys", n[0], "login_failures", n[1], "tokens",
	    n[2]);
}

static void *
maintenance_main(void *arg)
{
	struct maintenance *m = arg;

	pthread_mutex_lock(&m->lock);
	while (!m->stop) {
		struct timespec ts;

		pthread_mutex_unlock(&m->lock);
		maintenance_run_once(m);
		pthread_mutex_lock(&m->lock);
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += m->cfg.interval_s;
		while (!m->stop && pthread_cond_timedwait(&m->cond, &m->lock, &ts) != ETIMEDOUT)
			;
	}
	pthread_mutex_unlock(&m->lock);
	db_thread_close();
	return NULL;
}

int
maintenance_start(struct maintenance **out, const struct maintenance_config *cfg)
{
	struct maintenance *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return -1;
	m->cfg = *cfg;
	pthread_mutex_init(&m->lock, NULL);
	pthread_cond_init(&m->cond, NULL);
	if (pthread_create(&m->thread, NULL, maintenance_main, m) != 0) {
		free(m);
		return -1;
	}
	*out = m;
	return 0;
}

void
maintenance_stop(struct maintenance *m)
{
	if (m == NULL)
		return;
	pthread_mutex_lock(&m->lock);
	m->stop = true;
	pthread_cond_signal(&m->cond);
	pthread_mutex_unlock(&m->lock);
	pthread_join(m->thread, NULL);
	pthread_mutex_destroy(&m->lock);
	pthread_cond_destroy(&m->cond);
	free(m);
}
