/*
 * maintenance.h - background housekeeping: expired Idempotency-Key
 * records and old failed-login counters. Safe with several replicas
 * (each statement is an idempotent DELETE).
 */
#ifndef GP_WORKERS_MAINTENANCE_H
#define GP_WORKERS_MAINTENANCE_H

struct maintenance;

/* Start the worker thread; runs every interval_s seconds. */
int maintenance_start(struct maintenance **out, int idempotency_ttl_s, int interval_s)
	__attribute__((warn_unused_result));

/* Stop and join the thread. */
void maintenance_stop(struct maintenance *m);

#endif
