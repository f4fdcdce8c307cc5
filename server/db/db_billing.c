/*
 * db_billing.c - billing rates, accrual, periods, adjustments, usage
 * reads (see db_billing.h; the SQL functions are in migration 0012).
 */
#include "db_billing.h"
#include "db_billing_write.h"
#include "db_internal.h"
#include "db_sql.h"

#include "core/problem.h"

#include <string.h>

/* $n: integer microseconds since the epoch (0: NULL) -> timestamptz */
#define TS_US(n) "('epoch'::timestamptz + nullif(" n "::int8, 0) * interval '1 microsecond')"

DB_STMT(stmt_bill_accrue,
    "SELECT " EPOCH_US("acc_from") ", " EPOCH_US("acc_until") ", acc_upserted, acc_deleted, " EPOCH_US(
	"acc_watermark") ", acc_more FROM billing_accrue(now(), $1::int8 * interval '1 second', "
			 "$2::int4)");
/* an accrual may take longer than an API statement */
DB_STMT(stmt_bill_timeout, "SELECT set_config('statement_timeout', $1, true)");
DB_STMT(stmt_bill_hold, "SELECT pg_sleep($1::int8 / 1000.0)");
/* the same lock as billing_accrue's (migration 0012) */
DB_STMT(stmt_bill_lock, "SELECT pg_advisory_xact_lock(7234001, 12)");

int
db_billing_accrual_lock(struct db *db, struct arena *a, struct gp_error *err)
{
	return db_exec(db, a, &stmt_bill_lock, 0, NULL, err) == NULL ? -1 : 0;
}

int
db_billing_hold(struct db *db, struct arena *a, int ms, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, ms) };

	return db_exec(db, a, &stmt_bill_hold, 1, p, err) == NULL ? -1 : 0;
}

static int
accrue(struct db *db, struct arena *a, int settle_s, struct billing_accrual_result *out,
    struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, settle_s), db_param_int(a, BILLING_ACCRUE_MAX_HOURS) };
	const char *t[1] = { db_param_int(a, BILLING_ACCRUE_TIMEOUT_MS) };
	PGresult *r;

	if (db_exec(db, a, &stmt_bill_timeout, 1, t, err) == NULL)
		return -1;
	r = db_exec(db, a, &stmt_bill_accrue, 2, p, err);
	if (r == NULL)
		return -1;
	memset(out, 0, sizeof(*out));
	if (PQntuples(r) == 1) {
		out->from_us = db_null(r, 0, 0) ? 0 : db_int64(r, 0, 0);
		out->until_us = db_null(r, 0, 1) ? 0 : db_int64(r, 0, 1);
		out->upserted = db_int64(r, 0, 2);
		out->deleted = db_int64(r, 0, 3);
		out->watermark_us = db_null(r, 0, 4) ? 0 : db_int64(r, 0, 4);
		out->more = db_bool(r, 0, 5);
	}
	return 0;
}

struct accrue_tx {
	struct arena *a;
	int settle_s;
	int hold_ms;
	struct billing_accrual_result out;
};

static int
accrue_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct accrue_tx *t = arg;

	if (accrue(db, t->a, t->settle_s, &t->out, err) < 0)
		return -1;
	if (t->hold_ms > 0)
		return db_billing_hold(db, t->a, t->hold_ms, err);
	return 0;
}

int
db_billing_accrue(struct db *db, struct arena *a, int settle_s, int hold_ms, int max_spans,
    struct billing_accrual_result *out, struct gp_error *err)
{
	struct accrue_tx t = { a, settle_s, hold_ms, { 0 } };
	bool first = true;
	int spans = 0;

	memset(out, 0, sizeof(*out));
	do {
		if (db_tx(db, accrue_tx, &t, err) < 0)
			return -1;
		if (first)
			out->from_us = t.out.from_us;
		first = false;
		out->until_us = t.out.until_us;
		out->upserted += t.out.upserted;
		out->deleted += t.out.deleted;
		out->watermark_us = t.out.watermark_us;
		out->more = t.out.more;
	} while (t.out.more && (max_spans <= 0 || ++spans < max_spans));
	return 0;
}

int
db_billing_accrue_in_tx(struct db *db, struct arena *a, int settle_s,
    struct billing_accrual_result *out, struct gp_error *err)
{
	return accrue(db, a, settle_s, out, err);
}

/* ---- rates ---- */

#define RATE_COLS                                                                                  \
	"t.rate_id, t.model, t.profile, t.currency, t.price_per_hour_micro, t.derived, " EPOCH_US( \
	    "t.valid_from") ", " EPOCH_US("t.valid_to") ", " EPOCH_US("r.created_at") ", "         \
										      "CASE WHEN t.derived THEN NULL ELSE u.username END"

DB_STMT(stmt_bill_rate_insert,
    "WITH ins AS (INSERT INTO billing_rates (model, profile, currency, price_per_hour_micro, "
    "effective_from, created_by) VALUES ($1, $2, $3, $4::int8, " TS_US(
	"$5") ", nullif($6::int8, 0)) "
	      "RETURNING id, created_at) "
	      "SELECT ins.id, " EPOCH_US(
		  "ins.created_at") ", (SELECT username FROM users WHERE id = $6::int8) "
				    "FROM ins");

DB_STMT(stmt_bill_spec_known,
    "SELECT EXISTS (SELECT 1 FROM gpu_models WHERE id = $1), "
    "$2 = 'full' OR EXISTS (SELECT 1 FROM mig_profiles WHERE model = $1 AND name = $2)");

DB_STMT(stmt_bill_rate_gap,
    "SELECT EXISTS (SELECT 1 FROM billing_rates r WHERE r.model = $1 "
    "AND r.effective_from < " TS_US(
	"$4") " AND (r.profile = $2 OR (r.profile = 'full' "
	      "AND $2 <> 'full' AND EXISTS (SELECT 1 FROM mig_profiles mp WHERE mp.model = $1 "
	      "AND mp.name = $2)))), "
	      "EXISTS (SELECT 1 FROM billing_periods p WHERE p.state = 'closed' "
	      "AND p.period >= to_char(" TS_US("$3") " AT TIME ZONE 'UTC', 'YYYY-MM'))");
DB_STMT(stmt_bill_rewind,
    "UPDATE billing_accrual_state SET watermark = "
    "date_trunc('hour', " TS_US("$1") " AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' "
				      "WHERE id = 1 AND watermark > " TS_US("$1"));

DB_STMT(stmt_bill_watermark,
    "SELECT " EPOCH_US("watermark") " FROM billing_accrual_state WHERE id = 1");

/* $3 > 0: the pairs that user's projects hold or held, read once through the projects */
DB_STMT(stmt_bill_rates_list,
    "WITH mine AS (SELECT DISTINCT l.model, l.profile FROM project_members m "
    "JOIN usage_ledger l ON l.project_id = m.project_id WHERE m.user_id = $3::int8) "
    "SELECT " RATE_COLS " FROM billing_rate_timeline() t "
    "JOIN billing_rates r ON r.id = t.rate_id LEFT JOIN users u ON u.id = r.created_by "
    "WHERE ($1::text IS NULL OR t.model = $1) AND ($2::text IS NULL OR t.profile = $2) "
    "AND ($3::int8 = 0 OR (t.model, t.profile) IN (SELECT model, profile FROM mine)) "
    "AND ($4::int8 = 0 OR (t.valid_from <= " TS_US("$4") " AND (t.valid_to IS NULL OR t.valid_to > " TS_US(
	"$4") "))) "
	      "ORDER BY t.model, t.profile, t.valid_from");

int
db_billing_rate_insert(struct db *db, struct arena *a, const char *model, const char *profile,
    const char *currency, int64_t price, int64_t from_us, int64_t created_by,
    struct billing_rate_row *out, struct gp_error *err)
{
	const char *p[6] = { model, profile, currency, db_param_int(a, price),
		db_param_int(a, from_us), db_param_int(a, created_by) };
	PGresult *r = db_exec(db, a, &stmt_bill_rate_insert, 6, p, err);

	if (r == NULL)
		return -1;
	memset(out, 0, sizeof(*out));
	out->id = db_int64(r, 0, 0);
	out->model = model;
	out->profile = profile;
	out->currency = currency;
	out->price_per_hour_micro = price;
	out->effective_from_us = from_us;
	out->created_us = db_int64(r, 0, 1);
	out->created_by = db_text(a, r, 0, 2);
	return 0;
}

int
db_billing_spec_known(struct db *db, struct arena *a, const char *model, const char *profile,
    bool *model_ok, bool *profile_ok, struct gp_error *err)
{
	const char *p[2] = { model, profile };
	PGresult *r = db_exec(db, a, &stmt_bill_spec_known, 2, p, err);

	if (r == NULL)
		return -1;
	*model_ok = db_bool(r, 0, 0);
	*profile_ok = db_bool(r, 0, 1);
	return 0;
}

int
db_billing_rate_gap(struct db *db, struct arena *a, const char *model, const char *profile,
    int64_t from_us, int64_t watermark_us, bool *priced, bool *closed, struct gp_error *err)
{
	const char *p[4] = { model, profile, db_param_int(a, from_us),
		db_param_int(a, watermark_us) };
	PGresult *r = db_exec(db, a, &stmt_bill_rate_gap, 4, p, err);

	if (r == NULL)
		return -1;
	*priced = db_bool(r, 0, 0);
	*closed = db_bool(r, 0, 1);
	return 0;
}

int
db_billing_rewind(struct db *db, struct arena *a, int64_t at_us, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, at_us) };

	return db_exec(db, a, &stmt_bill_rewind, 1, p, err) == NULL ? -1 : 0;
}

int
db_billing_watermark(struct db *db, struct arena *a, int64_t *watermark_us, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, &stmt_bill_watermark, 0, NULL, err);

	if (r == NULL)
		return -1;
	*watermark_us = PQntuples(r) == 1 && !db_null(r, 0, 0) ? db_int64(r, 0, 0) : 0;
	return 0;
}

int
db_billing_rates_list(struct db *db, struct arena *a, const char *model, const char *profile,
    int64_t member_user_id, int64_t at_us, struct billing_rate_row **out, int *n,
    struct gp_error *err)
{
	const char *p[4] = { model, profile, db_param_int(a, member_user_id),
		db_param_int(a, at_us) };
	PGresult *r = db_exec(db, a, &stmt_bill_rates_list, 4, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct billing_rate_row *o = &(*out)[i];

		o->id = db_int64(r, i, 0);
		o->model = db_text(a, r, i, 1);
		o->profile = db_text(a, r, i, 2);
		o->currency = db_text(a, r, i, 3);
		o->price_per_hour_micro = db_int64(r, i, 4);
		o->derived = db_bool(r, i, 5);
		o->effective_from_us = db_int64(r, i, 6);
		o->effective_to_us = db_null(r, i, 7) ? 0 : db_int64(r, i, 7);
		o->created_us = o->derived ? 0 : db_int64(r, i, 8);
		o->created_by = db_text(a, r, i, 9);
	}
	return 0;
}

/* ---- usage ---- */

#define USAGE_COLS                                                                                       \
	"b.id, b.kind, pr.name, po.name, b.model, b.profile, " EPOCH_US(                                 \
	    "b.hour") ", b.period, "                                                                     \
		      "coalesce(b.rate_id, 0), b.price_per_hour_micro, b.currency, b.seconds, b.count, " \
		      "b.amount_micro, coalesce(b.adjusts, 0), b.note, b.project_id"
#define USAGE_FROM \
	" FROM billing_usage b JOIN projects pr ON pr.id = b.project_id LEFT JOIN pools po ON po.id = b.pool_id "
#define USAGE_WHERE                                                                              \
	" WHERE ($1::int8 = 0 OR b.project_id = $1::int8) AND ($2::int8 = 0 OR b.project_id IN " \
	"(SELECT m.project_id FROM project_members m WHERE m.user_id = $2::int8)) "              \
	"AND ($3::int8 = 0 OR b.hour >= " TS_US("$3") ") AND ($4::int8 = 0 OR b.hour < " TS_US(  \
	    "$4") ") "

DB_STMT(stmt_bill_usage_list,
    "SELECT " USAGE_COLS USAGE_FROM USAGE_WHERE
    " AND b.id > $5::int8 ORDER BY b.id LIMIT $6::int8");
DB_STMT(stmt_bill_usage_get, "SELECT " USAGE_COLS USAGE_FROM " WHERE b.id = $1::int8");

/* $5: the grouping; key columns not in it are NULL */
DB_STMT(stmt_bill_usage_groups,
    "SELECT CASE WHEN $5 IN ('project', 'pool') THEN pr.name END, "
    "CASE WHEN $5 = 'pool' THEN po.name END, "
    "CASE WHEN $5 = 'pool' THEN b.pool_id END, "
    "CASE WHEN $5 = 'spec' THEN b.model END, CASE WHEN $5 = 'spec' THEN b.profile END, "
    "CASE WHEN $5 = 'day' THEN " EPOCH_US(
	"date_trunc('day', b.hour)") " END, "
				     "CASE WHEN $5 = 'month' THEN b.period END, "
				     "b.kind, b.currency, sum(b.seconds::numeric * b.count)::int8, sum(b.amount_micro)::int8, "
				     "count(*)" USAGE_FROM USAGE_WHERE
				     "GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9 ORDER BY 1, 2, 3, 4, 5, 6, 7, 9, 8");

static void
usage_from_row(struct arena *a, const PGresult *r, int i, struct billing_usage_row *o)
{
	o->id = db_int64(r, i, 0);
	o->kind = db_text(a, r, i, 1);
	o->project = db_text(a, r, i, 2);
	o->pool = db_text(a, r, i, 3);
	o->model = db_text(a, r, i, 4);
	o->profile = db_text(a, r, i, 5);
	o->hour_us = db_int64(r, i, 6);
	o->period = db_text(a, r, i, 7);
	o->rate_id = db_int64(r, i, 8);
	o->price_per_hour_micro = db_int64(r, i, 9);
	o->currency = db_text(a, r, i, 10);
	o->seconds = db_int64(r, i, 11);
	o->count = db_int64(r, i, 12);
	o->amount_micro = db_int64(r, i, 13);
	o->adjusts = db_int64(r, i, 14);
	o->note = db_text(a, r, i, 15);
	o->project_id = db_int64(r, i, 16);
}

static void
filter_params(struct arena *a, const struct billing_usage_filter *f, const char **p)
{
	p[0] = db_param_int(a, f->project_id);
	p[1] = db_param_int(a, f->member_user_id);
	p[2] = db_param_int(a, f->from_us);
	p[3] = db_param_int(a, f->to_us);
}

int
db_billing_usage_list(struct db *db, struct arena *a, const struct billing_usage_filter *f,
    int64_t after_id, int limit, struct billing_usage_row **out, int *n, struct gp_error *err)
{
	const char *p[6];
	PGresult *r;

	filter_params(a, f, p);
	p[4] = db_param_int(a, after_id);
	p[5] = db_param_int(a, limit);
	r = db_exec(db, a, &stmt_bill_usage_list, 6, p, err);
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		usage_from_row(a, r, i, &(*out)[i]);
	return 0;
}

int
db_billing_usage_get(struct db *db, struct arena *a, int64_t id, struct billing_usage_row *out,
    bool *found, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_bill_usage_get, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		usage_from_row(a, r, 0, out);
	return 0;
}

int
db_billing_usage_groups(struct db *db, struct arena *a, const struct billing_usage_filter *f,
    const char *group_by, struct billing_usage_group **out, int *n, struct gp_error *err)
{
	const char *p[5];
	PGresult *r;

	filter_params(a, f, p);
	p[4] = group_by;
	r = db_exec(db, a, &stmt_bill_usage_groups, 5, p, err);
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct billing_usage_group *o = &(*out)[i];

		o->project = db_text(a, r, i, 0);
		o->pool = db_text(a, r, i, 1);
		o->model = db_text(a, r, i, 3);
		o->profile = db_text(a, r, i, 4);
		o->day_us = db_null(r, i, 5) ? 0 : db_int64(r, i, 5);
		o->period = db_text(a, r, i, 6);
		o->kind = db_text(a, r, i, 7);
		o->currency = db_text(a, r, i, 8);
		o->instance_seconds = db_int64(r, i, 9);
		o->amount_micro = db_int64(r, i, 10);
		o->rows = db_int64(r, i, 11);
	}
	return 0;
}

/* ---- periods and adjustments ---- */

DB_STMT(stmt_bill_periods_list,
    /* the distinct periods of billing_usage by skipping through its index */
    "WITH RECURSIVE up AS ((SELECT period FROM billing_usage ORDER BY period LIMIT 1) "
    "UNION ALL SELECT (SELECT b.period FROM billing_usage b WHERE b.period > up.period "
    "ORDER BY b.period LIMIT 1) FROM up WHERE up.period IS NOT NULL), "
    "ps AS (SELECT period FROM billing_periods UNION "
    "SELECT period FROM up WHERE period IS NOT NULL) "
    "SELECT ps.period, coalesce(bp.state, 'open'), " EPOCH_US(
	"bp.closed_at") ", u.username, "
			"(SELECT count(*) FROM billing_usage b WHERE b.period = ps.period) "
			"FROM ps LEFT JOIN billing_periods bp ON bp.period = ps.period "
			"LEFT JOIN users u ON u.id = bp.closed_by ORDER BY ps.period");
DB_STMT(stmt_bill_period_ensure,
    "INSERT INTO billing_periods (period) VALUES ($1) ON CONFLICT (period) DO NOTHING");
DB_STMT(stmt_bill_period_lock_x,
    "SELECT state = 'closed', now() >= p.end_at + $2::int8 * interval '1 second', " EPOCH_US(
	"p.end_at") " FROM billing_periods, LATERAL (SELECT (to_date($1, 'YYYY-MM') + "
		    "interval '1 month')::timestamp AT TIME ZONE 'UTC' AS end_at) p "
		    "WHERE period = $1 FOR UPDATE OF billing_periods");
DB_STMT(stmt_bill_period_lock_s,
    "SELECT state = 'closed', now() >= p.end_at + $2::int8 * interval '1 second', " EPOCH_US(
	"p.end_at") " FROM billing_periods, LATERAL (SELECT (to_date($1, 'YYYY-MM') + "
		    "interval '1 month')::timestamp AT TIME ZONE 'UTC' AS end_at) p "
		    "WHERE period = $1 FOR SHARE OF billing_periods");
DB_STMT(stmt_bill_period_close,
    "WITH up AS (UPDATE billing_periods SET state = 'closed', closed_at = now(), "
    "closed_by = nullif($2::int8, 0) WHERE period = $1 RETURNING period, closed_at) "
    "SELECT up.period, " EPOCH_US(
	"up.closed_at") ", (SELECT username FROM users WHERE id = $2::int8), "
			"(SELECT count(*) FROM billing_usage b WHERE b.period = $1) FROM up");
DB_STMT(stmt_bill_current_period, "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM')");
DB_STMT(stmt_bill_adjust,
    "WITH ins AS (INSERT INTO billing_usage (kind, project_id, pool_id, model, profile, hour, "
    "period, rate_id, price_per_hour_micro, currency, seconds, count, amount_micro, adjusts, note) "
    "SELECT 'adjustment', o.project_id, o.pool_id, o.model, o.profile, "
    "date_trunc('hour', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC', "
    "to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM'), o.rate_id, o.price_per_hour_micro, o.currency, "
    "0, 0, $2::int8, o.id, $3 FROM billing_usage o WHERE o.id = $1::int8 RETURNING id) "
    "SELECT id FROM ins");

int
db_billing_periods_list(struct db *db, struct arena *a, struct billing_period_row **out, int *n,
    struct gp_error *err)
{
	PGresult *r = db_exec(db, a, &stmt_bill_periods_list, 0, NULL, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct billing_period_row *o = &(*out)[i];

		o->period = db_text(a, r, i, 0);
		o->state = db_text(a, r, i, 1);
		o->closed_us = db_null(r, i, 2) ? 0 : db_int64(r, i, 2);
		o->closed_by = db_text(a, r, i, 3);
		o->rows = db_int64(r, i, 4);
	}
	return 0;
}

int
db_billing_period_lock(struct db *db, struct arena *a, const char *period, bool exclusive,
    int grace_s, bool *closed, bool *ended, int64_t *end_us, struct gp_error *err)
{
	const char *p[2] = { period, db_param_int(a, grace_s) };
	PGresult *r;

	if (db_exec(db, a, &stmt_bill_period_ensure, 1, p, err) == NULL)
		return -1;
	r = db_exec(db, a, exclusive ? &stmt_bill_period_lock_x : &stmt_bill_period_lock_s, 2, p,
	    err);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL, "billing period %s vanished",
		    period);
	*closed = db_bool(r, 0, 0);
	*ended = db_bool(r, 0, 1);
	*end_us = db_int64(r, 0, 2);
	return 0;
}

int
db_billing_period_close(struct db *db, struct arena *a, const char *period, int64_t user_id,
    struct billing_period_row *out, struct gp_error *err)
{
	const char *p[2] = { period, db_param_int(a, user_id) };
	PGresult *r = db_exec(db, a, &stmt_bill_period_close, 2, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL, "billing period %s vanished",
		    period);
	out->period = db_text(a, r, 0, 0);
	out->state = "closed";
	out->closed_us = db_int64(r, 0, 1);
	out->closed_by = db_text(a, r, 0, 2);
	out->rows = db_int64(r, 0, 3);
	return 0;
}

int
db_billing_current_period(struct db *db, struct arena *a, const char **period, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, &stmt_bill_current_period, 0, NULL, err);

	if (r == NULL)
		return -1;
	*period = db_text(a, r, 0, 0);
	return 0;
}

int
db_billing_adjustment_insert(struct db *db, struct arena *a, int64_t adjusts, int64_t amount_micro,
    const char *note, struct billing_usage_row *out, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, adjusts), db_param_int(a, amount_micro), note };
	PGresult *r = db_exec(db, a, &stmt_bill_adjust, 3, p, err);
	bool found;

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such billing row: %lld",
		    (long long)adjusts);
	if (db_billing_usage_get(db, a, db_int64(r, 0, 0), out, &found, err) < 0)
		return -1;
	if (!found)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL, "adjustment vanished");
	return 0;
}
