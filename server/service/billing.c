/*
 * billing.c - the billing workflows (see billing.h).
 */
#include "billing.h"
#include "core/problem.h"

#include "core/timeutil.h"

#include <string.h>

/* ---- accrual ---- */

struct accrue_audit {
	service_billing_audit_fn audit;
	void *ctx;
	const struct billing_accrual_result *res;
};

static int
accrue_audit_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct accrue_audit *t = arg;

	return t->audit(db, t->ctx, NULL, t->res, err);
}

int
service_billing_accrue(struct db *db, struct arena *a, int settle_s, int hold_ms, int max_spans,
    service_billing_audit_fn audit, void *ctx, struct billing_accrual_result *out,
    struct gp_error *err)
{
	struct accrue_audit t = { audit, ctx, out };

	/* a transaction per span of the backlog, then the audit row */
	if (db_billing_accrue(db, a, settle_s, hold_ms, max_spans, out, err) < 0)
		return -1;
	return audit != NULL ? db_tx(db, accrue_audit_tx, &t, err) : 0;
}

/* ---- rates ---- */

struct rate_create {
	struct arena *a;
	const struct billing_rate_new *in;
	service_billing_audit_fn audit;
	void *ctx;
	struct billing_rate_row *out;
};

/* Into final hours only to fill a gap: hours where the key had no price at all. */
static int
rate_into_final_hours(struct db *db, struct arena *a, const struct billing_rate_new *in,
    int64_t watermark, struct gp_error *err)
{
	bool priced, closed;
	char buf[40];

	if (db_billing_rate_gap(db, a, in->model, in->profile, in->from_us, watermark, &priced,
		&closed, err) < 0)
		return -1;
	time_format_rfc3339(watermark, buf, sizeof(buf));
	if (priced)
		return gp_problem_set(err, GP_PROBLEM_RATE_IN_EFFECT,
		    "hours before %s are billed and final: a new version must start at "
		    "or after it",
		    buf);
	if (closed)
		return gp_problem_set(err, GP_PROBLEM_PERIOD_CLOSED,
		    "a closed billing period lies after the version's start: its usage "
		    "cannot be priced again");
	/* its usage went unbilled: those hours are accrued again */
	return db_billing_rewind(db, a, in->from_us, err);
}

static int
rate_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct rate_create *c = arg;
	const struct billing_rate_new *in = c->in;
	bool model_ok, profile_ok;
	int64_t watermark;

	if (db_billing_spec_known(db, c->a, in->model, in->profile, &model_ok, &profile_ok, err) <
	    0)
		return -1;
	if (!model_ok)
		return gp_error_field(err, "model", "no such GPU model in the catalog: %s",
		    in->model);
	if (!profile_ok)
		return gp_error_field(err, "profile", "must be \"full\" or a MIG profile of %s",
		    in->model);
	/* no accrual moves the watermark while the version goes in */
	if (db_billing_accrual_lock(db, c->a, err) < 0 ||
	    db_billing_watermark(db, c->a, &watermark, err) < 0)
		return -1;
	if (watermark != 0 && in->from_us < watermark &&
	    rate_into_final_hours(db, c->a, in, watermark, err) < 0)
		return -1;
	if (db_billing_rate_insert(db, c->a, in->model, in->profile, in->currency, in->price,
		in->from_us, in->user_id, c->out, err) < 0) {
		if (err->status == 409)
			return gp_error_set(err, 409, "conflict",
			    "a version of %s %s already starts at that time", in->model,
			    in->profile);
		return -1;
	}
	return c->audit != NULL ? c->audit(db, c->ctx, NULL, c->out, err) : 0;
}

int
service_billing_rate_create(struct db *db, struct arena *a, const struct billing_rate_new *in,
    service_billing_audit_fn audit, void *ctx, struct billing_rate_row *out, struct gp_error *err)
{
	struct rate_create c = { a, in, audit, ctx, out };

	return db_tx(db, rate_create_tx, &c, err);
}

/* ---- periods ---- */

struct period_close {
	struct arena *a;
	const char *period;
	int settle_s, grace_s;
	int64_t user_id;
	service_billing_audit_fn audit;
	void *ctx;
	struct billing_period_row *out;
};

static int
period_close_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct period_close *c = arg;
	struct billing_accrual_result acc;
	bool closed, ended;
	int64_t end_us;
	char buf[40];

	if (db_billing_period_lock(db, c->a, c->period, true, c->grace_s, &closed, &ended, &end_us,
		err) < 0)
		return -1;
	if (closed)
		return gp_problem_set(err, GP_PROBLEM_PERIOD_CLOSED, "billing period %s is closed",
		    c->period);
	time_format_rfc3339(end_us + (int64_t)c->grace_s * 1000000, buf, sizeof(buf));
	if (!ended)
		return gp_problem_set(err, GP_PROBLEM_PERIOD_NOT_ENDED,
		    "billing period %s can be closed from %s (its end plus the grace time)",
		    c->period, buf);
	/* the period's hours are accrued and final before it closes */
	do {
		if (db_billing_accrue_in_tx(db, c->a, c->settle_s, &acc, err) < 0)
			return -1;
	} while (acc.more);
	if (acc.watermark_us != 0 && acc.watermark_us < end_us)
		return gp_problem_set(err, GP_PROBLEM_PERIOD_NOT_ENDED,
		    "billing period %s is not final yet: its last hours settle %d s after they "
		    "end",
		    c->period, c->settle_s);
	if (db_billing_period_close(db, c->a, c->period, c->user_id, c->out, err) < 0)
		return -1;
	return c->audit != NULL ? c->audit(db, c->ctx, NULL, c->out, err) : 0;
}

int
service_billing_period_close(struct db *db, struct arena *a, const char *period, int settle_s,
    int close_grace_s, int64_t user_id, service_billing_audit_fn audit, void *ctx,
    struct billing_period_row *out, struct gp_error *err)
{
	struct period_close c = { a, period, settle_s, close_grace_s, user_id, audit, ctx, out };

	return db_tx(db, period_close_tx, &c, err);
}

/* ---- adjustments ---- */

struct adjust {
	struct arena *a;
	int64_t adjusts, amount;
	const char *note;
	service_billing_audit_fn audit;
	void *ctx;
	struct billing_usage_row *out;
};

static int
adjust_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct adjust *c = arg;
	struct billing_usage_row *orig = arena_alloc(c->a, sizeof(*orig));
	const char *period;
	bool closed, ended, found;
	int64_t end_us;

	if (db_billing_current_period(db, c->a, &period, err) < 0 ||
	    db_billing_period_lock(db, c->a, period, false, 0, &closed, &ended, &end_us, err) < 0)
		return -1;
	if (closed)
		return gp_problem_set(err, GP_PROBLEM_PERIOD_CLOSED,
		    "billing period %s is closed: no adjustment can go in", period);
	if (db_billing_usage_get(db, c->a, c->adjusts, orig, &found, err) < 0)
		return -1;
	if (!found)
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such billing row: %lld",
		    (long long)c->adjusts);
	/* a row still accrued may change or vanish: correct it once final */
	if (strcmp(orig->kind, "adjustment") != 0) {
		int64_t watermark;

		if (db_billing_watermark(db, c->a, &watermark, err) < 0)
			return -1;
		if (watermark == 0 || orig->hour_us >= watermark)
			return gp_problem_set(err, GP_PROBLEM_CONFLICT,
			    "billing row %lld is not final yet: its hour is still being accrued",
			    (long long)c->adjusts);
	}
	if (db_billing_adjustment_insert(db, c->a, c->adjusts, c->amount, c->note, c->out, err) < 0)
		return -1;
	return c->audit != NULL ? c->audit(db, c->ctx, orig, c->out, err) : 0;
}

int
service_billing_adjust(struct db *db, struct arena *a, int64_t adjusts, int64_t amount,
    const char *note, service_billing_audit_fn audit, void *ctx, struct billing_usage_row *out,
    struct gp_error *err)
{
	struct adjust c = { a, adjusts, amount, note, audit, ctx, out };

	return db_tx(db, adjust_tx, &c, err);
}

/* ---- exports ---- */

struct export_create {
	struct arena *a;
	const char *format, *period;
	int64_t from_us, to_us, user_id;
	service_billing_audit_fn audit;
	void *ctx;
	struct billing_export_row *out;
};

static int
export_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct export_create *c = arg;

	if (db_billing_export_insert(db, c->a, c->format, c->period, c->from_us, c->to_us,
		c->user_id, c->out, err) < 0)
		return -1;
	return c->audit != NULL ? c->audit(db, c->ctx, NULL, c->out, err) : 0;
}

int
service_billing_export_create(struct db *db, struct arena *a, const char *format,
    const char *period, int64_t from_us, int64_t to_us, int64_t user_id,
    service_billing_audit_fn audit, void *ctx, struct billing_export_row *out, struct gp_error *err)
{
	struct export_create c = { a, format, period, from_us, to_us, user_id, audit, ctx, out };

	return db_tx(db, export_create_tx, &c, err);
}
