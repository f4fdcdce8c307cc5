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

struct periodic;

/*
 * Start the worker (periodic.h: a pass at once, then every interval_s
 * seconds plus up to a tenth of it, on every replica); periodic_stop
 * stops it.
 */
int expiry_start(struct periodic **out, int interval_s) __attribute__((warn_unused_result));

#endif
