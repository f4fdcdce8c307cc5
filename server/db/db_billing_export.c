/*
 * db_billing_export.c - billing export jobs (see db_billing_export.h;
 * the SQL helpers gp_csv, gp_micro, gp_dec, gp_iso are in migration 0013).
 */
#include "db_billing_export.h"
#include "db_internal.h"
#include "db_sql.h"

#include "core/problem.h"

#include <stdlib.h>
#include <string.h>

/* $n: integer microseconds since the epoch (0: NULL) -> timestamptz */
#define TS_US(n) "('epoch'::timestamptz + nullif(" n "::int8, 0) * interval '1 microsecond')"

#define PERIOD_FROM "coalesce(e.range_from, (e.period || '-01 00:00:00+00')::timestamptz)"
#define PERIOD_TO \
	"coalesce(e.range_to, (e.period || '-01 00:00:00+00')::timestamptz + interval '1 month')"

#define EXPORT_COLS                                                                                         \
	"e.id, e.format, e.period, " EPOCH_US(PERIOD_FROM) ", " EPOCH_US(                                   \
	    PERIOD_TO) ", e.state, "                                                                        \
		       "coalesce(e.rows, -1), coalesce(e.bytes, -1), e.sha256, e.error, e.attempts, "       \
		       "coalesce(e.chunks, 0), us.username, " EPOCH_US(                                     \
			   "e.created_at") ", "                                                             \
					   "coalesce(" EPOCH_US("e.started_at") ", 0), coalesce(" EPOCH_US( \
					       "e.finished_at") ", 0)"

DB_STMT(stmt_exp_insert,
    "WITH e AS (INSERT INTO billing_exports (format, period, range_from, range_to, created_by) "
    "VALUES ($1, $2, CASE WHEN $2::text IS NULL THEN " TS_US(
	"$3") " END, "
	      "CASE WHEN $2::text IS NULL THEN " TS_US(
		  "$4") " END, nullif($5::int8, 0)) RETURNING *) "
			"SELECT " EXPORT_COLS " FROM e LEFT JOIN users us ON us.id = e.created_by");

DB_STMT(stmt_exp_get,
    "SELECT " EXPORT_COLS " FROM billing_exports e "
    "LEFT JOIN users us ON us.id = e.created_by WHERE e.id = $1::int8");

DB_STMT(stmt_exp_list,
    "SELECT " EXPORT_COLS " FROM billing_exports e LEFT JOIN users us ON us.id = e.created_by "
    "WHERE ($1::int8 = 0 OR e.id < $1::int8) ORDER BY e.id DESC LIMIT $2::int4");

DB_STMT(stmt_exp_claim,
    "WITH c AS (SELECT id FROM billing_exports WHERE state = 'queued' "
    "OR (state = 'running' AND lease_until < now()) ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED), "
    "e AS (UPDATE billing_exports x SET state = 'running', attempts = x.attempts + 1, "
    "lease_until = now() + $1::int4 * interval '1 second', started_at = now(), worker = $2, "
    "error = NULL FROM c WHERE x.id = c.id RETURNING x.*) "
    "SELECT " EXPORT_COLS " FROM e LEFT JOIN users us ON us.id = e.created_by");

/*
 * Waits for the row (no SKIP LOCKED): another replica's claim, whose
 * snapshot still saw the job queued, locks the row for an instant before
 * its recheck drops it; skipping it then made the job "taken over", failed
 * and retried (attempts 2 in test_billing_export's test_replicas under CI
 * load). A real takeover (the lease expired, another worker claimed it)
 * fails the recheck of attempts once the lock is free.
 */
DB_STMT(stmt_exp_lock,
    "SELECT id FROM billing_exports WHERE id = $1::int8 AND state = 'running' "
    "AND attempts = $2::int4 FOR UPDATE");
DB_STMT(stmt_exp_clear, "DELETE FROM billing_export_chunks WHERE export_id = $1::int8");

/*
 * The file's lines come from one cursor per job over the format's SQL
 * function (migration 0017: billing_export_csv, _jsonl, _focus; the
 * benchmark's COPY baseline reads the same functions), a fetch at a
 * time (db_billing_export.h), planned for the whole result (cursor_tuple_fraction 1: scans and a
 * sort, as COPY would, rather than index order).
 */
#define CURSOR(fn)                                                               \
	"DECLARE gp_export_cur NO SCROLL CURSOR FOR SELECT line, nrows FROM " fn \
	"(" TS_US("$1") ", " TS_US("$2") ")"

/* docs/billing.md "Exports": the CSV columns */
#define CSV_HEADER                                                                           \
	"usage_id,kind,period,hour_start,hour_end,project,pool,model,profile,count,seconds," \
	"price_per_hour_micro,currency,amount_micro,amount,adjusts,note\n"

DB_STMT(stmt_exp_open_csv, CURSOR("billing_export_csv"));
DB_STMT(stmt_exp_open_jsonl, CURSOR("billing_export_jsonl"));
DB_STMT(stmt_exp_open_focus, CURSOR("billing_export_focus"));

/* docs/billing.md "FOCUS mapping": the columns of migration 0013's billing_focus_line */
#define FOCUS_HEADER                                                                                \
	"AvailabilityZone,BilledCost,BillingAccountId,BillingAccountName,BillingCurrency,"          \
	"BillingPeriodEnd,BillingPeriodStart,CapacityReservationId,CapacityReservationStatus,"      \
	"ChargeCategory,ChargeClass,ChargeDescription,ChargeFrequency,ChargePeriodEnd,"             \
	"ChargePeriodStart,ConsumedQuantity,ConsumedUnit,ContractedCost,ContractedUnitPrice,"       \
	"EffectiveCost,HostProviderName,InvoiceIssuerName,ListCost,ListUnitPrice,"                  \
	"PricingCategory,PricingQuantity,PricingUnit,RegionId,RegionName,ResourceId,"               \
	"ResourceName,ResourceType,ServiceCategory,ServiceName,ServiceProviderName,"                \
	"ServiceSubcategory,SkuId,SkuMeter,SkuPriceDetails,SkuPriceId,SubAccountId,SubAccountName," \
	"Tags,x_UsageId,x_Kind,x_Count,x_Seconds,x_PricePerHourMicro,x_AmountMicro,"                \
	"x_RowAmountMicro,x_IdleShare,x_Adjusts\n"

/* an export's statements may take longer than an API statement */
DB_STMT(stmt_exp_timeout, "SELECT set_config('statement_timeout', '600000', true)");

#define STR_(x) #x
#define STR(x) STR_(x)
#define FETCH_ROWS 50000
#define FETCH_ROWS_FOCUS 10000
DB_STMT(stmt_exp_fetch, "FETCH " STR(FETCH_ROWS) " FROM gp_export_cur");
DB_STMT(stmt_exp_fetch_focus, "FETCH " STR(FETCH_ROWS_FOCUS) " FROM gp_export_cur");

DB_STMT(stmt_exp_chunk_put,
    "INSERT INTO billing_export_chunks (export_id, seq, data) VALUES ($1::int8, $2::int4, $3)");

DB_STMT(stmt_exp_finish,
    "UPDATE billing_exports SET state = 'done', rows = $3::int8, bytes = $4::int8, sha256 = $5, "
    "chunks = $6::int4, finished_at = clock_timestamp(), lease_until = NULL, error = NULL "
    "WHERE id = $1::int8 AND attempts = $2::int4 AND state = 'running' RETURNING id");

DB_STMT(stmt_exp_fail,
    "UPDATE billing_exports SET state = CASE WHEN attempts >= $3::int4 THEN 'failed' "
    "ELSE 'queued' END, error = $4, lease_until = NULL, "
    "finished_at = CASE WHEN attempts >= $3::int4 THEN now() END "
    "WHERE id = $1::int8 AND attempts = $2::int4 AND state = 'running'");

DB_STMT(stmt_exp_chunk_get,
    "SELECT data FROM billing_export_chunks WHERE export_id = $1::int8 AND seq = $2::int4");

static void
export_from_result(struct arena *a, const PGresult *r, int i, struct billing_export_row *e)
{
	memset(e, 0, sizeof(*e));
	e->id = db_int64(r, i, 0);
	e->format = db_text(a, r, i, 1);
	e->period = db_text(a, r, i, 2);
	e->from_us = db_int64(r, i, 3);
	e->to_us = db_int64(r, i, 4);
	e->state = db_text(a, r, i, 5);
	e->rows = db_int64(r, i, 6);
	e->bytes = db_int64(r, i, 7);
	e->sha256 = db_text(a, r, i, 8);
	e->error = db_text(a, r, i, 9);
	e->attempts = (int)db_int64(r, i, 10);
	e->chunks = (int)db_int64(r, i, 11);
	e->created_by = db_text(a, r, i, 12);
	e->created_us = db_int64(r, i, 13);
	e->started_us = db_int64(r, i, 14);
	e->finished_us = db_int64(r, i, 15);
}

int
db_billing_export_insert(struct db *db, struct arena *a, const char *format, const char *period,
    int64_t from_us, int64_t to_us, int64_t created_by, struct billing_export_row *out,
    struct gp_error *err)
{
	const char *p[5] = { format, period, db_param_int(a, from_us), db_param_int(a, to_us),
		db_param_int(a, created_by) };
	PGresult *r = db_exec(db, a, &stmt_exp_insert, 5, p, err);

	if (r == NULL)
		return -1;
	export_from_result(a, r, 0, out);
	return 0;
}

int
db_billing_export_get(struct db *db, struct arena *a, int64_t id, struct billing_export_row *out,
    bool *found, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_exp_get, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		export_from_result(a, r, 0, out);
	return 0;
}

int
db_billing_export_list(struct db *db, struct arena *a, int64_t cursor, int limit,
    struct billing_export_row **out, int *n, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, cursor), db_param_int(a, limit) };
	PGresult *r = db_exec(db, a, &stmt_exp_list, 2, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n > 0 ? *n : 1));
	for (int i = 0; i < *n; i++)
		export_from_result(a, r, i, &(*out)[i]);
	return 0;
}

int
db_billing_export_claim(struct db *db, struct arena *a, int lease_s, const char *worker,
    struct billing_export_row *out, bool *found, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, lease_s), worker };
	PGresult *r = db_exec(db, a, &stmt_exp_claim, 2, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		export_from_result(a, r, 0, out);
	return 0;
}

int
db_billing_export_lock(struct db *db, struct arena *a, int64_t id, int attempt, bool *ok,
    struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, id), db_param_int(a, attempt) };
	PGresult *r;

	/* one snapshot for every page: a consistent file even of an open period */
	if (db_exec_simple(db, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ", err) < 0 ||
	    db_exec(db, a, &stmt_exp_timeout, 0, NULL, err) == NULL)
		return -1;
	r = db_exec(db, a, &stmt_exp_lock, 2, p, err);
	if (r == NULL)
		return -1;
	*ok = PQntuples(r) == 1;
	if (*ok && db_exec(db, a, &stmt_exp_clear, 1, p, err) == NULL)
		return -1;
	return 0;
}

const char *
db_billing_export_header(const char *format)
{
	if (strcmp(format, "csv") == 0)
		return CSV_HEADER;
	if (strcmp(format, "focus") == 0)
		return FOCUS_HEADER;
	return NULL;
}

int
db_billing_export_page(struct db *db, struct arena *a, const char *format, int64_t from_us,
    int64_t to_us, bool first, struct billing_export_page *out, struct gp_error *err)
{
	const struct db_stmt *st;
	PGresult *r;

	if (strcmp(format, "jsonl") == 0)
		st = &stmt_exp_open_jsonl;
	else if (strcmp(format, "focus") == 0)
		st = &stmt_exp_open_focus;
	else
		st = &stmt_exp_open_csv;
	if (first) {
		const char *p[2] = { db_param_int(a, from_us), db_param_int(a, to_us) };

		if (db_exec_simple(db, "SET LOCAL cursor_tuple_fraction = 1", err) < 0 ||
		    db_exec(db, a, st, 2, p, err) == NULL)
			return -1;
	}
	r = db_exec(db, a, st == &stmt_exp_open_focus ? &stmt_exp_fetch_focus : &stmt_exp_fetch, 0,
	    NULL, err);
	if (r == NULL)
		return -1;
	memset(out, 0, sizeof(*out));
	out->n = PQntuples(r);
	out->last = out->n < (st == &stmt_exp_open_focus ? FETCH_ROWS_FOCUS : FETCH_ROWS);
	out->lines = arena_alloc(a, sizeof(*out->lines) * (size_t)(out->n > 0 ? out->n : 1));
	out->lens = arena_alloc(a, sizeof(*out->lens) * (size_t)(out->n > 0 ? out->n : 1));
	for (int i = 0; i < out->n; i++) {
		/* the line stays in the PGresult, which the arena owns */
		out->lines[i] = PQgetvalue(r, i, 0);
		out->lens[i] = (size_t)PQgetlength(r, i, 0);
		out->rows += db_int64(r, i, 1);
	}
	return 0;
}

int
db_billing_export_chunk_put(struct db *db, struct arena *a, int64_t id, int seq, const char *data,
    size_t len, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, id), db_param_int(a, seq), data };
	const int lens[3] = { 0, 0, (int)len };
	const int fmts[3] = { 0, 0, 1 };

	return db_exec_ex(db, a, &stmt_exp_chunk_put, 3, p, lens, fmts, err) == NULL ? -1 : 0;
}

int
db_billing_export_finish(struct db *db, struct arena *a, int64_t id, int attempt, int64_t rows,
    int64_t bytes, const char *sha256, int chunks, struct gp_error *err)
{
	const char *p[6] = { db_param_int(a, id), db_param_int(a, attempt), db_param_int(a, rows),
		db_param_int(a, bytes), sha256, db_param_int(a, chunks) };
	PGresult *r = db_exec(db, a, &stmt_exp_finish, 6, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_problem_set(err, GP_PROBLEM_CONFLICT, "export %lld was taken over",
		    (long long)id);
	return 0;
}

int
db_billing_export_fail(struct db *db, struct arena *a, int64_t id, int attempt, int max_attempts,
    const char *message, struct gp_error *err)
{
	const char *p[4] = { db_param_int(a, id), db_param_int(a, attempt),
		db_param_int(a, max_attempts), message };

	return db_exec(db, a, &stmt_exp_fail, 4, p, err) == NULL ? -1 : 0;
}

int
db_billing_export_chunk_get(struct db *db, struct arena *a, int64_t id, int seq, const char **data,
    size_t *len, bool *found, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, id), db_param_int(a, seq) };
	/* binary: the chunk's bytes as stored, not hex at twice the size */
	PGresult *r = db_exec_binary(db, a, &stmt_exp_chunk_get, 2, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (!*found)
		return 0;
	/* the result, and so the bytes, live as long as arena a */
	*data = PQgetvalue(r, 0, 0);
	*len = (size_t)PQgetlength(r, 0, 0);
	return 0;
}

/* ---- utilization ---- */

DB_STMT(stmt_util,
    "WITH i AS (SELECT * FROM billing_idle(" TS_US("$1") ", " TS_US(
	"$2") ")), "
	      "hrs AS (SELECT i.pool_id, sum(i.held_s * e.w) AS held, sum(i.measured_s * e.w) AS meas, "
	      "sum(i.idle_s * e.w) AS idle, sum(i.active_s * e.w) AS act FROM i "
	      "CROSS JOIN LATERAL (SELECT coalesce(billing_gpu_equiv(i.model, i.profile), 1) AS w) e "
	      "GROUP BY i.pool_id), "
	      "money AS (SELECT u.pool_id, u.project_id, u.currency, sum(u.amount_micro) AS billed, "
	      "sum(billing_idle_micro(u.amount_micro, i.held_s, i.idle_s)) AS idle_micro "
	      "FROM billing_usage u LEFT JOIN i ON i.pool_id = u.pool_id AND i.model = u.model "
	      "AND i.profile = u.profile AND i.hour = u.hour "
	      "WHERE u.kind = 'usage' AND u.pool_id IS NOT NULL AND u.hour >= " TS_US("$1") " AND u.hour < " TS_US(
		  "$2") " GROUP BY u.pool_id, u.project_id, u.currency), "
			"j AS (SELECT coalesce(h.pool_id, m.pool_id) AS pool_id, m.currency, "
			"coalesce(h.held, 0) AS held, coalesce(h.meas, 0) AS meas, coalesce(h.idle, 0) AS idle, "
			"coalesce(h.act, 0) AS act, coalesce(m.billed, 0) AS billed, "
			"coalesce(m.idle_micro, 0) AS idle_micro FROM hrs h FULL JOIN money m ON m.pool_id = "
			"h.pool_id), "
			"k AS (SELECT p.name AS project, CASE WHEN $5::text = 'pool' THEN po.name END AS pool, "
			"CASE WHEN $5::text = 'pool' THEN po.id ELSE 0 END AS gpool_id, j.currency, j.held, j.meas, "
			"j.idle, j.act, j.billed, j.idle_micro "
			"FROM j JOIN pools po ON po.id = j.pool_id JOIN projects p ON p.id = po.project_id "
			"WHERE ($3::int8 = 0 OR p.id = $3::int8) AND ($4::int8 = 0 OR p.id IN "
			"(SELECT project_id FROM project_members WHERE user_id = $4::int8))) "
			"SELECT project, pool, gpool_id, currency, round(sum(held) / 3600, 6)::text, "
			"round(sum(meas) / 3600, 6)::text, round(sum(idle) / 3600, 6)::text, "
			"CASE WHEN sum(meas) > 0 THEN round(sum(act) / sum(meas), 6)::text END, "
			"sum(billed)::int8, sum(idle_micro)::int8 FROM k "
			"GROUP BY project, pool, gpool_id, currency ORDER BY project, pool, gpool_id, currency");

int
db_billing_utilization(struct db *db, struct arena *a, int64_t from_us, int64_t to_us,
    const char *group_by, int64_t project_id, int64_t member_user_id, struct billing_util_row **out,
    int *n, struct gp_error *err)
{
	const char *p[5] = { db_param_int(a, from_us), db_param_int(a, to_us),
		db_param_int(a, project_id), db_param_int(a, member_user_id), group_by };
	PGresult *r = db_exec(db, a, &stmt_util, 5, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n > 0 ? *n : 1));
	for (int i = 0; i < *n; i++) {
		struct billing_util_row *u = &(*out)[i];

		u->project = db_text(a, r, i, 0);
		u->pool = db_text(a, r, i, 1);
		u->pool_id = db_int64(r, i, 2);
		u->currency = db_text(a, r, i, 3);
		u->allocated_gpu_hours = db_text(a, r, i, 4);
		u->measured_gpu_hours = db_text(a, r, i, 5);
		u->idle_gpu_hours = db_text(a, r, i, 6);
		u->average_activity = db_text(a, r, i, 7);
		u->billed_micro = db_int64(r, i, 8);
		u->idle_cost_micro = db_int64(r, i, 9);
	}
	return 0;
}
