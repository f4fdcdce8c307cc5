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
	fx_sql_exec(fx,
	    "DELETE FROM billing_usage WHERE period NOT IN "
	    "(SELECT period FROM billing_periods WHERE state = 'closed')");
	fx_sql_exec(fx, "UPDATE billing_accrual_state SET watermark = NULL");
}

/*
 * The golden ledger. Hand-computed rows are in test_golden_rows; the
 * comment of each case gives the arithmetic.
 */
static inline void
seed_golden(struct fixture *fx)
{
	struct gp_client_response *r;
	const char *gpu1, *gpu2;
	const char *wx, *mid, *mig, *own, *flex, *same, *month, *half, *cap, *nvl;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"acme\",\"display_name\":\"Acme\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"other\",\"display_name\":\"Other\"}");
	assert_status(r, 201);
	fx_fleet(fx, "gold", "H100-80GB", 1, 2, false);
	gpu1 = fx_sql_text(fx, "SELECT min(id)::text FROM gpus");
	gpu2 = fx_sql_text(fx, "SELECT max(id)::text FROM gpus");

	/* rates (EUR micro-units per hour) */
	billing_rate_sql(fx, "H100-80GB", "full", 2500000, "2026-01-01 00:00:00+00");
	billing_rate_sql(fx, "H100-80GB", "full", 3000000, "2026-03-02 12:00:00+00");
	billing_rate_sql(fx, "A100-40GB", "full", 1000000, "2026-01-01 00:00:00+00");
	billing_rate_sql(fx, "A100-40GB", "full", 1800000, "2026-03-03 09:20:00+00");
	billing_rate_sql(fx, "A100-40GB", "3g.20gb", 600000, "2026-01-01 00:00:00+00");
	billing_rate_sql(fx, "L40S-48GB", "full", 1000001, "2026-01-01 00:00:00+00");
	billing_rate_sql(fx, "T4-16GB", "full", 100000, "2026-01-01 00:00:00+00");
	billing_rate_sql(fx, "L4-24GB", "full", 720000, "2026-01-01 00:00:00+00");
	billing_rate_sql(fx, "A10G-24GB", "full", 1, "2026-01-01 00:00:00+00");
	billing_rate_sql(fx, "A30-24GB", "full", 1000002, "2026-01-01 00:00:00+00");
	billing_rate_sql(fx, "A30-24GB", "full", 1000006, "2026-02-01 00:00:00+00");

	/*
	 * The worked example: 2 × H100 approved 10:59:30.25, released
	 * 13:00:10.9 (floored to 10:59:30 and 13:00:10), the rate goes from
	 * 2.50 to 3.00 at 12:00, GPU 1 failed 11:15-11:45.
	 */
	wx = billing_pool(fx, "acme", "wx");
	billing_ledger(fx, wx, "H100-80GB", "full", 2, "2026-03-02 10:59:30.25+00",
	    "2026-03-02 13:00:10.9+00");
	fx_sql_exec(fx,
	    "INSERT INTO allocations (gpu_id, profile, start, size, state, pool_id, created_at, "
	    "released_at) VALUES ($1::int8, 'full', 0, 8, 'released', $3::int8, "
	    "'2026-03-02 10:59:30.25+00', '2026-03-02 13:00:20+00'), ($2::int8, 'full', 0, 8, "
	    "'released', $3::int8, '2026-03-02 10:59:30.25+00', '2026-03-02 13:00:20+00')",
	    gpu1, gpu2, wx);
	fx_sql_exec(fx,
	    "INSERT INTO gpu_health_intervals (gpu_id, health, reason, started_at, ended_at) "
	    "VALUES ($1::int8, 'failed', 'test', '2026-03-02 11:15:00+00', "
	    "'2026-03-02 11:45:00+00')",
	    gpu1);

	/* a rate change mid-hour (09:20) under a whole A100 held 09:00-10:00 */
	mid = billing_pool(fx, "acme", "mid");
	billing_ledger(fx, mid, "A100-40GB", "full", 1, "2026-03-03 09:00:00+00",
	    "2026-03-03 10:00:00+00");
	/* a derived MIG rate: 3 × 1g.5gb 09:30-09:45, after the change */
	mig = billing_pool(fx, "acme", "mig");
	billing_ledger(fx, mig, "A100-40GB", "1g.5gb", 3, "2026-03-03 09:30:00+00",
	    "2026-03-03 09:45:00+00");
	/* a MIG profile with a rate of its own */
	own = billing_pool(fx, "acme", "own");
	billing_ledger(fx, own, "A100-40GB", "3g.20gb", 1, "2026-03-03 09:00:00+00",
	    "2026-03-03 09:10:00+00");
	/*
	 * expand and shrink within an hour: 1 from 14:00, +2 at 14:20, shrink
	 * to 2 at 14:40 (both intervals close, one of 2 opens), release 15:10
	 */
	flex = billing_pool(fx, "other", "flex");
	billing_ledger(fx, flex, "L40S-48GB", "full", 1, "2026-03-03 14:00:00+00",
	    "2026-03-03 14:40:00+00");
	billing_ledger(fx, flex, "L40S-48GB", "full", 2, "2026-03-03 14:20:00+00",
	    "2026-03-03 14:40:00+00");
	billing_ledger(fx, flex, "L40S-48GB", "full", 2, "2026-03-03 14:40:00+00",
	    "2026-03-03 15:10:00+00");
	/* approval and release in the same second: nothing to bill */
	same = billing_pool(fx, "other", "same");
	billing_ledger(fx, same, "T4-16GB", "full", 1, "2026-03-03 16:00:05.1+00",
	    "2026-03-03 16:00:05.9+00");
	/* across a month end */
	month = billing_pool(fx, "other", "month");
	billing_ledger(fx, month, "L4-24GB", "full", 1, "2026-01-31 23:30:00+00",
	    "2026-02-01 00:30:00+00");
	/* half-even: 1 micro-unit an hour, half an hour at counts 1, 3, 5, 7 */
	half = billing_pool(fx, "other", "half");
	billing_ledger(fx, half, "A10G-24GB", "full", 1, "2026-03-04 10:00:00+00",
	    "2026-03-04 10:30:00+00");
	billing_ledger(fx, half, "A10G-24GB", "full", 3, "2026-03-04 11:00:00+00",
	    "2026-03-04 11:30:00+00");
	billing_ledger(fx, half, "A10G-24GB", "full", 5, "2026-03-04 12:00:00+00",
	    "2026-03-04 12:30:00+00");
	billing_ledger(fx, half, "A10G-24GB", "full", 7, "2026-03-04 13:00:00+00",
	    "2026-03-04 13:30:00+00");
	/* a model with no rate at all: its usage is not billed (until test_rates fills the gap) */
	nvl = billing_pool(fx, "other", "nvl");
	billing_ledger(fx, nvl, "H100-NVL-94GB", "full", 1, "2026-03-07 10:00:00+00",
	    "2026-03-07 11:00:00+00");
	/*
	 * credits capped at the charge: at 1 micro-unit an hour, 1 held
	 * 20:00-20:30 (0.5 -> 0) and 2 held 20:30-20:45 (0.5 -> 0), one of
	 * them failed throughout (2700 s: 0.75 -> 1): the credit becomes 0
	 */
	cap = billing_pool(fx, "other", "cap");
	billing_ledger(fx, cap, "A10G-24GB", "full", 1, "2026-03-05 20:00:00+00",
	    "2026-03-05 20:45:00+00");
	billing_ledger(fx, cap, "A10G-24GB", "full", 1, "2026-03-05 20:30:00+00",
	    "2026-03-05 20:45:00+00");
	fx_fleet(fx, "golda", "A10G-24GB", 1, 2, false);
	gpu1 = fx_sql_text(fx, "SELECT min(id)::text FROM gpus WHERE model = 'A10G-24GB'");
	gpu2 = fx_sql_text(fx, "SELECT max(id)::text FROM gpus WHERE model = 'A10G-24GB'");
	fx_sql_exec(fx,
	    "INSERT INTO allocations (gpu_id, profile, start, size, state, pool_id, created_at, "
	    "released_at) VALUES ($1::int8, 'full', 0, 1, 'released', $3::int8, "
	    "'2026-03-05 20:00:00+00', '2026-03-05 20:45:00+00'), ($2::int8, 'full', 0, 1, "
	    "'released', $3::int8, '2026-03-05 20:30:00+00', '2026-03-05 20:45:00+00')",
	    gpu1, gpu2, cap);
	fx_sql_exec(fx,
	    "INSERT INTO gpu_health_intervals (gpu_id, health, reason, started_at, ended_at) "
	    "VALUES ($1::int8, 'failed', 'test', '2026-03-05 19:00:00+00', "
	    "'2026-03-05 21:00:00+00')",
	    gpu1);
}

static const char billing_golden[] =
    /* cap: usage 1 × 1800 s and 2 × 900 s, 0.5 each -> 0; credit 0.75 -> 1, capped to 0 */
    "usage|cap|A10G-24GB|full|2026-03-05 20:00|1|1800|1|0\n"
    "usage|cap|A10G-24GB|full|2026-03-05 20:00|1|900|2|0\n"
    "credit|cap|A10G-24GB|full|2026-03-05 20:00|1|2700|1|0\n"
    /* flex: 1200 s × 1 × 1000001 / 3600 = 333333.67 -> 333334 */
    "usage|flex|L40S-48GB|full|2026-03-03 14:00|1000001|1200|1|333334\n"
    /* 1200 s × 2 (14:40-15:00) = 666667.33 -> 666667 */
    "usage|flex|L40S-48GB|full|2026-03-03 14:00|1000001|1200|2|666667\n"
    /* 1200 s × 3 (14:20-14:40) = 1000001 exactly */
    "usage|flex|L40S-48GB|full|2026-03-03 14:00|1000001|1200|3|1000001\n"
    /* 600 s × 2 = 333333.67 -> 333334 */
    "usage|flex|L40S-48GB|full|2026-03-03 15:00|1000001|600|2|333334\n"
    /* 1800 × 1 × 1 / 3600 = 0.5 -> 0 (even) */
    "usage|half|A10G-24GB|full|2026-03-04 10:00|1|1800|1|0\n"
    /* 1.5 -> 2 */
    "usage|half|A10G-24GB|full|2026-03-04 11:00|1|1800|3|2\n"
    /* 2.5 -> 2 */
    "usage|half|A10G-24GB|full|2026-03-04 12:00|1|1800|5|2\n"
    /* 3.5 -> 4 */
    "usage|half|A10G-24GB|full|2026-03-04 13:00|1|1800|7|4\n"
    /* 1200 × 1000000 / 3600 = 333333.33 -> 333333 */
    "usage|mid|A100-40GB|full|2026-03-03 09:00|1000000|1200|1|333333\n"
    /* 2400 × 1800000 / 3600 = 1200000 */
    "usage|mid|A100-40GB|full|2026-03-03 09:00|1800000|2400|1|1200000\n"
    /* 1800000 / 7 = 257142.86 -> 257143; 900 × 3 × 257143 / 3600 = 192857.25 -> 192857 */
    "usage|mig|A100-40GB|1g.5gb|2026-03-03 09:00|257143|900|3|192857\n"
    /* 1800 × 720000 / 3600 = 360000, in January ... */
    "usage|month|L4-24GB|full|2026-01-31 23:00|720000|1800|1|360000\n"
    /* ... and in February */
    "usage|month|L4-24GB|full|2026-02-01 00:00|720000|1800|1|360000\n"
    /* own MIG rate: 600 × 600000 / 3600 = 100000 */
    "usage|own|A100-40GB|3g.20gb|2026-03-03 09:00|600000|600|1|100000\n"
    /* 30 s × 2 × 2500000 / 3600 = 41666.67 -> 41667 */
    "usage|wx|H100-80GB|full|2026-03-02 10:00|2500000|30|2|41667\n"
    "usage|wx|H100-80GB|full|2026-03-02 11:00|2500000|3600|2|5000000\n"
    /* GPU 1 failed 11:15-11:45: 1800 s × 1 × 2500000 / 3600 */
    "credit|wx|H100-80GB|full|2026-03-02 11:00|2500000|1800|1|-1250000\n"
    "usage|wx|H100-80GB|full|2026-03-02 12:00|3000000|3600|2|6000000\n"
    /* 10 s × 2 × 3000000 / 3600 = 16666.67 -> 16667 */
    "usage|wx|H100-80GB|full|2026-03-02 13:00|3000000|10|2|16667";

#endif
