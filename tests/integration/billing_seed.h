/*
 * billing_seed.h - shared by the billing tests: a fixture whose accrual
 * worker stays out of the way, the golden ledger of docs/billing.md
 * written with SQL (pools, ledger intervals, allocations and GPU health
 * at fixed past times), and a canonical text of the accrued rows.
 */
#ifndef GP_TEST_BILLING_SEED_H
#define GP_TEST_BILLING_SEED_H

#include "fixture.h"

#include <stdio.h>
#include <string.h>

/* Like assert_string_equal, printing both texts in full when they differ. */
#define assert_text_equal(got, want) billing_text_equal(got, want, __FILE__, __LINE__)

static inline void
billing_text_equal(const char *got, const char *want, const char *file, int line)
{
	if (strcmp(got, want) == 0)
		return;
	fprintf(stderr, "%s:%d: texts differ\n--- got:\n%s\n--- want:\n%s\n", file, line, got,
	    want);
	fail();
}

/* the accrual worker runs once at start (empty ledger), then daily */
#define BILLING_SERVER_ENV                                                         \
	"GPUPOOL_BILLING_ACCRUAL_INTERVAL=86400", "GPUPOOL_BILLING_CLOSE_GRACE=0", \
	    "GPUPOOL_BILLING_SETTLE=300"

static inline int
billing_group_setup(void **state)
{
	static const char *const env[] = { BILLING_SERVER_ENV, NULL };
	const struct fixture_options opts = { .server_env = env };
	struct fixture *fx;

	if (fixture_create(&opts, &fx) != 0)
		return -1;
	*state = fx;
	return 0;
}

/* Every billing row of kinds usage and credit, one line each, in a fixed order. */
static inline const char *
billing_rows_text(struct fixture *fx)
{
	const char *s = fx_sql_text(fx,
	    "SELECT coalesce(string_agg(format('%s|%s|%s|%s|%s|%s|%s|%s|%s', b.kind, "
	    "coalesce(po.name, '-'), b.model, b.profile, "
	    "to_char(b.hour AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI'), b.price_per_hour_micro, "
	    "b.seconds, b.count, b.amount_micro), E'\\n' ORDER BY po.name, b.hour, b.kind DESC, "
	    "b.price_per_hour_micro, b.count), '') "
	    "FROM billing_usage b LEFT JOIN pools po ON po.id = b.pool_id "
	    "WHERE b.kind IN ('usage', 'credit')");

	return s != NULL ? s : "";
}

/* A pool of project (by name) with SQL; returns its id as text. */
static inline const char *
billing_pool(struct fixture *fx, const char *project, const char *name)
{
	return fx_sql_text(fx,
	    "INSERT INTO pools (project_id, name, status) "
	    "SELECT id, $2, 'released' FROM projects WHERE name = $1 RETURNING id::text",
	    project, name);
}

/* One ledger interval (times as SQL timestamptz literals in UTC). */
static inline void
billing_ledger(struct fixture *fx, const char *pool, const char *model, const char *profile,
    int count, const char *from, const char *to)
{
	fx_sql_exec(fx,
	    "INSERT INTO usage_ledger (pool_id, project_id, model, profile, count, started_at, "
	    "ended_at, opened_by) SELECT p.id, p.project_id, $2, $3, $4::int, $5::timestamptz, "
	    "$6::timestamptz, 1 FROM pools p WHERE p.id = $1::int8",
	    pool, model, profile, fx_str(fx, "%d", count), from, to);
}

static inline void
billing_rate_sql(struct fixture *fx, const char *model, const char *profile, long long price,
    const char *from)
{
	fx_sql_exec(fx,
	    "INSERT INTO billing_rates (model, profile, currency, price_per_hour_micro, "
	    "effective_from) VALUES ($1, $2, 'EUR', $3::int8, $4::timestamptz)",
	    model, profile, fx_str(fx, "%lld", price), from);
}

/* Forget every accrued row and the watermark (open periods only). */
static inline void
billing_reset(struct fixture *fx)
{
	fx_sql_exec(fx, "DELETE FROM billing_usage WHERE period NOT IN "
			"(SELECT period FROM billing_periods WHERE state = 'closed')");
	fx_sql_exec(fx, "UPDATE billing_accrual_state SET watermark = NULL");
}

#endif
