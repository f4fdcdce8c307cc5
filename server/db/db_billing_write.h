/*
 * db_billing_write.h - billing's writes (db_billing.c; docs/billing.md):
 * the accrual of the usage ledger into hourly rows (one set-based SQL
 * function, billing_accrue, migrations 0012 and 0016), rate versions,
 * closing a period, adjustments. Write side: service/billing.c is their
 * one caller; api/ may not include it (scripts/check-boundaries).
 */
#ifndef GP_DB_BILLING_WRITE_H
#define GP_DB_BILLING_WRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "db_billing.h"

/*
 * Accrue the usage ledger up to now (one accrual at a time across
 * replicas: a transaction-level advisory lock), a transaction per span of
 * BILLING_ACCRUE_MAX_HOURS until caught up, or max_spans of them (> 0;
 * out->more then says whether more is left); out sums them. Hours ending
 * settle_s or more ago become final. hold_ms > 0 (tests) keeps each
 * transaction open that long after the work, before COMMIT.
 */
int db_billing_accrue(struct db *db, struct arena *a, int settle_s, int hold_ms, int max_spans,
    struct billing_accrual_result *out, struct gp_error *err) __attribute__((warn_unused_result));

/* Inside a transaction: take the accrual's lock (waits for one under way). */
int db_billing_accrual_lock(struct db *db, struct arena *a, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Inside a transaction: sleep ms (the tests' hold before COMMIT). */
int db_billing_hold(struct db *db, struct arena *a, int ms, struct gp_error *err)
    __attribute__((warn_unused_result));

/* One span inside a running transaction; out->more when there is more to do. */
int db_billing_accrue_in_tx(struct db *db, struct arena *a, int settle_s,
    struct billing_accrual_result *out, struct gp_error *err) __attribute__((warn_unused_result));

/* Insert a version; *id gets its id. */
int db_billing_rate_insert(struct db *db, struct arena *a, const char *model, const char *profile,
    const char *currency, int64_t price, int64_t from_us, int64_t created_by,
    struct billing_rate_row *out, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * For a version of (model, profile) starting at from_us, before the
 * accrual's watermark: *priced when the key already had a price (its own
 * version, or for a MIG profile a 'full' one to derive from) starting
 * before the watermark; *closed when a closed period lies at or after
 * from_us.
 */
int db_billing_rate_gap(struct db *db, struct arena *a, const char *model, const char *profile,
    int64_t from_us, int64_t watermark_us, bool *priced, bool *closed, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Move the watermark back to the hour of at_us (those hours are accrued again). */
int db_billing_rewind(struct db *db, struct arena *a, int64_t at_us, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Inside a transaction: make sure period has a row and lock it (exclusive
 * for a close, shared for writing into it). *closed is its state;
 * *ended when now >= the period's end + grace_s.
 */
int db_billing_period_lock(struct db *db, struct arena *a, const char *period, bool exclusive,
    int grace_s, bool *closed, bool *ended, int64_t *end_us, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Mark a period closed (inside the transaction that locked it). */
int db_billing_period_close(struct db *db, struct arena *a, const char *period, int64_t user_id,
    struct billing_period_row *out, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Insert an adjustment of amount_micro in the current hour referencing
 * row adjusts (copying its project, pool, spec, rate and currency).
 */
int db_billing_adjustment_insert(struct db *db, struct arena *a, int64_t adjusts,
    int64_t amount_micro, const char *note, struct billing_usage_row *out, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
