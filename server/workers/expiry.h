/*
 * expiry.h - the expiry worker: pending pool requests past their
 * lifetime become expired, pools past their end time are released (the
 * ledger closes at the end time), and pool statuses settle (releasing
 * pools with nothing left become released, provisioning pools whose
 * allocations are all ready become active). Safe with several replicas:
 * every claim is FOR UPDATE SKIP LOCKED, every step idempotent.
 */
#ifndef GP_WORKERS_EXPIRY_H
#define GP_WORKERS_EXPIRY_H

struct expiry;

/* Start the worker thread; runs every interval_s seconds. */
int expiry_start(struct expiry **out, int interval_s) __attribute__((warn_unused_result));

/* Stop and join the thread. NULL is a no-op. */
void expiry_stop(struct expiry *e);

#endif
