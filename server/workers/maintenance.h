/*
 * maintenance.h - background housekeeping: expired Idempotency-Key
 * records, failed-login counters whose window has passed, and tokens
 * expired or revoked more than a week ago. Safe with several replicas
 * (each statement is an idempotent DELETE).
 */
#ifndef GP_WORKERS_MAINTENANCE_H
#define GP_WORKERS_MAINTENANCE_H

struct maintenance;

struct maintenance_config {
	int idempotency_ttl_s; /* keep Idempotency-Key answers this long */
	int login_window_s;    /* failed-login counting window */
	int token_keep_s;      /* keep dead tokens this long */
	int interval_s;        /* run every interval_s seconds */
};

/*
 * Start the worker (periodic.h: the first pass at once, then every
 * interval_s seconds plus up to a tenth of it).
 */
int maintenance_start(struct maintenance **out, const struct maintenance_config *cfg)
    __attribute__((warn_unused_result));

/* Stop and join the thread. NULL is a no-op. */
void maintenance_stop(struct maintenance *m);

#endif
