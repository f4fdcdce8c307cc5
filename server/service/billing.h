/*
 * billing.h - the billing workflows (docs/billing.md), one entry each for
 * every caller: accrue (the accrual worker and POST
 * /v1/billing/accrual/run), create a rate version, close a period,
 * adjust a final row. Handlers (api/billing.c) parse, authorize, call and
 * reply; create an export job (the export worker writes its file); what a workflow writes, it writes in one transaction with the
 * handler's audit row (audit: called inside that transaction with what
 * the workflow changed, NULL to write none).
 *
 * The accrual itself stays one set-based SQL function (billing_accrue,
 * migrations 0012 and 0016: the ledger, the rates and the credits joined
 * hour by hour in the database, never a C loop over rows; money in integer
 * micro-units); db/db_billing.c runs it, and service_billing_accrue is its
 * only entry.
 */
#ifndef GP_SERVICE_BILLING_H
#define GP_SERVICE_BILLING_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "db/db.h"
#include "db/db_billing.h"
#include "db/db_billing_export.h"
#include "db/db_billing_write.h"

/*
 * The caller's audit row, written in the workflow's transaction: before
 * and after point to the workflow's rows (see each entry); NULL when
 * there is none.
 */
typedef int (*service_billing_audit_fn)(struct db *db, void *ctx, const void *before,
    const void *after, struct gp_error *err);

/*
 * Accrue the usage ledger up to now (db_billing_accrue: a transaction per
 * span, at most max_spans, 0: until caught up), then audit (after: the
 * struct billing_accrual_result) in a transaction of its own.
 */
int service_billing_accrue(struct db *db, struct arena *a, int settle_s, int hold_ms, int max_spans,
    service_billing_audit_fn audit, void *ctx, struct billing_accrual_result *out,
    struct gp_error *err) __attribute__((warn_unused_result));

/* A new rate version. */
struct billing_rate_new {
	const char *model, *profile, *currency;
	int64_t price;   /* micro-units per hour */
	int64_t from_us; /* effective from, a whole second */
	int64_t user_id; /* who creates it */
};

/*
 * Create a rate version: 422 on an unknown model or profile; into final
 * hours only to fill a gap (hours without any price, accrued again),
 * 409 rate_in_effect or period_closed otherwise; 409 when a version of
 * the key starts at that time. audit's after: the struct
 * billing_rate_row.
 */
int service_billing_rate_create(struct db *db, struct arena *a, const struct billing_rate_new *in,
    service_billing_audit_fn audit, void *ctx, struct billing_rate_row *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Close billing period `period` (YYYY-MM) once it ended and its grace
 * passed: its hours accrued and final first. audit's after: the struct
 * billing_period_row.
 */
int service_billing_period_close(struct db *db, struct arena *a, const char *period, int settle_s,
    int close_grace_s, int64_t user_id, service_billing_audit_fn audit, void *ctx,
    struct billing_period_row *out, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Adjust final billing row `adjusts` by amount (micro-units) in the
 * current period (409 when it is closed or the row is not final, 404 when
 * there is no such row). audit's before: the adjusted struct
 * billing_usage_row; after: the adjustment's.
 */
int service_billing_adjust(struct db *db, struct arena *a, int64_t adjusts, int64_t amount,
    const char *note, service_billing_audit_fn audit, void *ctx, struct billing_usage_row *out,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Queue an export job (format csv, jsonl or focus; a period YYYY-MM, or
 * NULL and whole hours [from_us, to_us)) for the export worker, created by
 * user_id. audit's after: the struct billing_export_row. The caller wakes
 * the worker after the commit.
 */
int service_billing_export_create(struct db *db, struct arena *a, const char *format,
    const char *period, int64_t from_us, int64_t to_us, int64_t user_id,
    service_billing_audit_fn audit, void *ctx, struct billing_export_row *out, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
