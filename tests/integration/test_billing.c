/*
 * test_billing.c - billing golden tests (docs/billing.md): the worked
 * example and the edge cases, accrued by the real server from a ledger
 * written with SQL at fixed past times, compared row by row with amounts
 * computed by hand; then the API around them: rates (derived MIG rates,
 * validation, versions), usage with totals and grouping, who sees what,
 * adjustments, closing a period and its immutability by direct SQL.
 */
#include "billing_seed.h"

#include <stdlib.h>
#include <string.h>

static void
test_golden_rows(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;

	seed_golden(fx);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_int(r->json, "upserted"), 22);
	assert_text_equal(billing_rows_text(fx), billing_golden);
	/* every row's period is the UTC month of its hour */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_usage WHERE period <> "
			     "to_char(hour AT TIME ZONE 'UTC', 'YYYY-MM')"),
	    0);

	/* again: nothing changes */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_int(r->json, "upserted"), 0);
	assert_int_equal(fx_json_int(r->json, "deleted"), 0);
	assert_text_equal(billing_rows_text(fx), billing_golden);

	/* from scratch (the watermark forgotten): the same rows, same ids */
	{
		const char *ids = fx_sql_text(fx,
		    "SELECT string_agg(id::text, ',' ORDER BY id) "
		    "FROM billing_usage");

		fx_sql_exec(fx, "UPDATE billing_accrual_state SET watermark = NULL");
		r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
		assert_status(r, 200);
		assert_int_equal(fx_json_int(r->json, "upserted"), 0);
		assert_text_equal(billing_rows_text(fx), billing_golden);
		assert_string_equal(fx_sql_text(fx,
					"SELECT string_agg(id::text, ',' ORDER BY id) FROM billing_usage"),
		    ids);
	}
	/* the accrual run is audited */
	assert_true(fx_sql_int64(fx,
			"SELECT count(*) FROM audit_log WHERE action = 'billing.accrue'") >= 3);
}

static struct json_object *
find_rate(struct json_object *items, const char *model, const char *profile, const char *from)
{
	for (size_t i = 0; i < json_object_array_length(items); i++) {
		struct json_object *it = json_object_array_get_idx(items, i);

		if (strcmp(fx_json_str(it, "model"), model) == 0 &&
		    strcmp(fx_json_str(it, "profile"), profile) == 0 &&
		    strcmp(fx_json_str(it, "effective_from"), from) == 0)
			return it;
	}
	return NULL;
}

static void
test_rates(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct json_object *it;
	const char *billing = fixture_create_user(fx, "bill", "billing");
	const char *oper = fixture_create_user(fx, "oper", "operator");
	const char *user = fixture_create_user(fx, "usr", "none");

	r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/rates?model=A30-24GB", NULL);
	assert_status(r, 200);
	/* derived: 1000002 × 1 / 4 = 250000.5 -> 250000 (even) */
	it = find_rate(fx_json(r->json, "items"), "A30-24GB", "1g.6gb", "2026-01-01T00:00:00Z");
	assert_non_null(it);
	assert_json_int(it, "price_per_hour_micro", 250000);
	assert_true(json_object_get_boolean(fx_json(it, "derived")));
	assert_json_str(it, "effective_to", "2026-02-01T00:00:00Z");
	/* 1000006 / 4 = 250001.5 -> 250002 (even); 2g: 2000012 / 4 = 500003 */
	it = find_rate(fx_json(r->json, "items"), "A30-24GB", "1g.6gb", "2026-02-01T00:00:00Z");
	assert_non_null(it);
	assert_json_int(it, "price_per_hour_micro", 250002);
	assert_json_null(it, "effective_to");
	it = find_rate(fx_json(r->json, "items"), "A30-24GB", "2g.12gb", "2026-02-01T00:00:00Z");
	assert_non_null(it);
	assert_json_int(it, "price_per_hour_micro", 500003);
	it = find_rate(fx_json(r->json, "items"), "A30-24GB", "full", "2026-02-01T00:00:00Z");
	assert_non_null(it);
	assert_false(json_object_get_boolean(fx_json(it, "derived")));

	/* billing and operators read; a user without projects sees none */
	assert_status(fx_request(fx, billing, "GET", "/v1/billing/rates", NULL), 200);
	assert_status(fx_request(fx, oper, "GET", "/v1/billing/rates", NULL), 200);
	r = fx_request(fx, user, "GET", "/v1/billing/rates", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	/* a member of acme sees the rates of what acme held (H100 full, A100 full/1g.5gb/3g.20gb) */
	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/acme/members/usr",
			  "{\"role\":\"viewer\"}"),
	    201);
	r = fx_request(fx, user, "GET", "/v1/billing/rates", NULL);
	assert_status(r, 200);
	for (size_t i = 0; i < fx_json_len(r->json, "items"); i++) {
		it = json_object_array_get_idx(fx_json(r->json, "items"), i);
		assert_true(strcmp(fx_json_str(it, "model"), "H100-80GB") == 0 ||
		    strcmp(fx_json_str(it, "model"), "A100-40GB") == 0);
	}
	assert_non_null(
	    find_rate(fx_json(r->json, "items"), "A100-40GB", "1g.5gb", "2026-03-03T09:20:00Z"));
	assert_null(
	    find_rate(fx_json(r->json, "items"), "A100-40GB", "2g.10gb", "2026-03-03T09:20:00Z"));

	/* only admins write */
	assert_problem(fx_request(fx, billing, "POST", "/v1/billing/rates",
			   "{\"model\":\"T4-16GB\",\"profile\":\"full\",\"currency\":\"EUR\","
			   "\"price_per_hour_micro\":1,\"effective_from\":\"2030-01-01T00:00:00Z\"}"),
	    403, "forbidden");
	/* bad input: precise 422s, nothing stored */
	{
		int64_t before = fx_sql_int64(fx, "SELECT count(*) FROM billing_rates");

		assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
				   "{\"model\":\"B200\",\"profile\":\"full\",\"currency\":\"EUR\","
				   "\"price_per_hour_micro\":1,"
				   "\"effective_from\":\"2030-01-01T00:00:00Z\"}"),
		    422, "validation_failed");
		assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
				   "{\"model\":\"T4-16GB\",\"profile\":\"1g.5gb\",\"currency\":"
				   "\"EUR\",\"price_per_hour_micro\":1,"
				   "\"effective_from\":\"2030-01-01T00:00:00Z\"}"),
		    422, "validation_failed");
		assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
				   "{\"model\":\"T4-16GB\",\"profile\":\"full\",\"currency\":\"eur\","
				   "\"price_per_hour_micro\":-1,"
				   "\"effective_from\":\"2030-01-01T00:00:00.5Z\",\"x\":1}"),
		    422, "validation_failed");
		assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
				   "{\"model\":\"T4-16GB\",\"profile\":\"full\",\"currency\":\"EUR\","
				   "\"price_per_hour_micro\":1.5,"
				   "\"effective_from\":\"2030-01-01T00:00:00Z\"}"),
		    422, "validation_failed");
		/* a version before the billed hours would change them */
		assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
				   "{\"model\":\"T4-16GB\",\"profile\":\"full\",\"currency\":\"EUR\","
				   "\"price_per_hour_micro\":5,"
				   "\"effective_from\":\"2026-03-01T00:00:00Z\"}"),
		    409, "rate_in_effect");
		assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM billing_rates"), before);
	}
	/*
	 * A model that never had a price: its usage went unbilled, and a
	 * version may fill the gap back in the final hours; they are accrued
	 * again, the rest unchanged.
	 */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_usage b JOIN pools p ON "
			     "p.id = b.pool_id WHERE p.name = 'nvl'"),
	    0);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
	    "{\"model\":\"H100-NVL-94GB\",\"profile\":\"full\",\"currency\":\"EUR\","
	    "\"price_per_hour_micro\":1000000,\"effective_from\":\"2026-03-01T00:00:00Z\"}");
	assert_status(r, 201);
	assert_string_equal(fx_sql_text(fx,
				"SELECT to_char(watermark AT TIME ZONE 'UTC', "
				"'YYYY-MM-DD HH24:MI') FROM billing_accrual_state"),
	    "2026-03-01 00:00");
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL),
	    200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(b.seconds || '|' || b.amount_micro, "
				"',') FROM billing_usage b JOIN pools p ON p.id = "
				"b.pool_id WHERE p.name = 'nvl'"),
	    "3600|1000000");
	fx_sql_exec(fx,
	    "DELETE FROM billing_usage WHERE pool_id = "
	    "(SELECT id FROM pools WHERE name = 'nvl')");
	assert_text_equal(billing_rows_text(fx), billing_golden);
	fx_sql_exec(fx, "UPDATE billing_accrual_state SET watermark = '2026-03-07 00:00+00'");
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL),
	    200);
	/* its MIG profiles derive from it now: no gap to fill there any more */
	assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
			   "{\"model\":\"H100-NVL-94GB\",\"profile\":\"1g.12gb\","
			   "\"currency\":\"EUR\",\"price_per_hour_micro\":5,"
			   "\"effective_from\":\"2026-03-02T00:00:00Z\"}"),
	    409, "rate_in_effect");

	/* a new version in the future; the same start twice is a conflict */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
	    "{\"model\":\"T4-16GB\",\"profile\":\"full\",\"currency\":\"EUR\","
	    "\"price_per_hour_micro\":200000,\"effective_from\":\"2030-01-01T00:00:00Z\"}");
	assert_status(r, 201);
	assert_json_int(r->json, "price_per_hour_micro", 200000);
	assert_json_str(r->json, "created_by", "admin");
	assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
			   "{\"model\":\"T4-16GB\",\"profile\":\"full\",\"currency\":\"EUR\","
			   "\"price_per_hour_micro\":300000,"
			   "\"effective_from\":\"2030-01-01T00:00:00Z\"}"),
	    409, "conflict");
	r = fx_request(fx, fx->admin_token, "GET",
	    "/v1/billing/rates?model=T4-16GB&profile=full&at=2026-06-01T00:00:00Z", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_int(r->json, "items[0].price_per_hour_micro", 100000);
	assert_json_str(r->json, "items[0].effective_to", "2030-01-01T00:00:00Z");
	/* a rate in effect is never edited, nor deleted (direct SQL) */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'billing.rate.create'"),
	    2);
}

static void
test_usage_api(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *user = fixture_login(fx, "usr", FIXTURE_PASSWORD);

	/* raw rows of one project, totals over all of them */
	r = fx_request(fx, fx->admin_token, "GET",
	    "/v1/billing/usage?project=acme&from=2026-03-02T00:00:00Z&to=2026-03-03T00:00:00Z",
	    NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "rows"), 5);
	assert_json_str(r->json, "rows[0].project", "acme");
	assert_json_str(r->json, "rows[0].pool", "wx");
	assert_json_str(r->json, "rows[0].currency", "EUR");
	assert_json_int(r->json, "totals.usage_micro", 41667 + 5000000 + 6000000 + 16667);
	assert_json_int(r->json, "totals.credit_micro", -1250000);
	assert_json_int(r->json, "totals.amount_micro",
	    41667 + 5000000 + 6000000 + 16667 - 1250000);
	assert_json_str(r->json, "totals.currency", "EUR");
	assert_json_int(r->json, "totals.rows", 5);

	/* pages */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/usage?project=acme&limit=2", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "rows"), 2);
	assert_non_null(fx_json(r->json, "next_cursor"));
	assert_json_int(r->json, "totals.rows", 9);

	/* grouped */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/usage?group_by=project", NULL);
	assert_status(r, 200);
	assert_json_int(r->json, "totals.amount_micro",
	    41667 + 5000000 - 1250000 + 6000000 + 16667 + 192857 + 333333 + 1200000 + 100000 +
		333334 + 666667 + 1000001 + 333334 + 0 + 2 + 2 + 4 + 360000 + 360000 + 1000000);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/usage?group_by=month", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "rows"), 4); /* Jan, Feb, Mar usage + Mar credit */
	assert_json_str(r->json, "rows[0].period", "2026-01");
	assert_json_int(r->json, "rows[0].amount_micro", 360000);
	r = fx_request(fx, fx->admin_token, "GET",
	    "/v1/billing/usage?group_by=spec&project=acme&from=2026-03-03T00:00:00Z", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "rows"), 3);
	assert_json_str(r->json, "rows[0].model", "A100-40GB");
	assert_json_str(r->json, "rows[0].profile", "1g.5gb");
	assert_json_int(r->json, "rows[0].instance_seconds", 2700);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/usage?group_by=day&project=other",
	    NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "rows[0].day", "2026-01-31T00:00:00Z");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/usage?group_by=pool&project=other",
	    NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "rows[0].pool", "cap");
	assert_json_str(r->json, "rows[0].kind", "credit");
	assert_json_str(r->json, "rows[2].pool", "flex");
	assert_json_int(r->json, "rows[2].amount_micro", 333334 + 666667 + 1000001 + 333334);

	/* a project user sees only their projects: another one is 404 */
	r = fx_request(fx, user, "GET", "/v1/billing/usage", NULL);
	assert_status(r, 200);
	assert_json_int(r->json, "totals.rows", 9);
	assert_problem(fx_request(fx, user, "GET", "/v1/billing/usage?project=other", NULL), 404,
	    "not_found");
	assert_problem(fx_request(fx, user, "GET", "/v1/billing/usage?project=nope", NULL), 404,
	    "not_found");
	/* bad input */
	assert_problem(fx_request(fx, user, "GET", "/v1/billing/usage?group_by=gpu", NULL), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, user, "GET", "/v1/billing/usage?from=yesterday", NULL), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, user, "GET",
			   "/v1/billing/usage?from=2026-03-02T00:00:00Z&to=2026-03-01T00:00:00Z",
			   NULL),
	    422, "validation_failed");
	/* users do not run the accrual, nor adjust */
	assert_problem(fx_request(fx, user, "POST", "/v1/billing/accrual/run", NULL), 403,
	    "forbidden");
	assert_problem(fx_request(fx, user, "POST", "/v1/billing/adjustments",
			   "{\"adjusts\":1,\"amount_micro\":-1,\"note\":\"x\"}"),
	    403, "forbidden");
}

static void
test_periods(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *billing = fixture_login(fx, "bill", FIXTURE_PASSWORD);
	const char *jan_row =
	    fx_sql_text(fx, "SELECT id::text FROM billing_usage WHERE period = '2026-01'");
	const char *current =
	    fx_sql_text(fx, "SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM')");
	const char *snapshot;

	/* not ended yet (the current month), bad names */
	assert_problem(fx_request(fx, billing, "POST",
			   fx_str(fx, "/v1/billing/periods/%s/close", current), NULL),
	    409, "period_not_ended");
	assert_problem(fx_request(fx, billing, "POST", "/v1/billing/periods/2026-13/close", NULL),
	    404, "not_found");
	assert_problem(fx_request(fx, billing, "POST", "/v1/billing/periods/26-01/close", NULL),
	    404, "not_found");
	/* the one period rule (time_period_valid): years before 1970 are no period */
	assert_problem(fx_request(fx, billing, "POST", "/v1/billing/periods/1969-12/close", NULL),
	    404, "not_found");
	assert_problem(fx_request(fx, billing, "POST", "/v1/billing/periods/0001-01/close", NULL),
	    404, "not_found");

	r = fx_request(fx, billing, "POST", "/v1/billing/periods/2026-01/close", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "state", "closed");
	assert_json_str(r->json, "closed_by", "bill");
	assert_json_int(r->json, "rows", 1);
	assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/billing/periods/2026-01/close",
			   NULL),
	    409, "period_closed");
	r = fx_request(fx, billing, "GET", "/v1/billing/periods", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "items[0].period", "2026-01");
	assert_json_str(r->json, "items[0].state", "closed");
	assert_json_str(r->json, "items[1].state", "open");

	/* immutable, also for direct SQL */
	snapshot = billing_rows_text(fx);
	fx_sql_exec(fx,
	    "DO $$ BEGIN "
	    "  BEGIN UPDATE billing_usage SET amount_micro = 0 WHERE period = '2026-01'; "
	    "    RAISE EXCEPTION 'update passed'; "
	    "  EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END; "
	    "  BEGIN DELETE FROM billing_usage WHERE period = '2026-01'; "
	    "    RAISE EXCEPTION 'delete passed'; "
	    "  EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END; "
	    "  BEGIN INSERT INTO billing_usage (kind, project_id, model, profile, hour, period, "
	    "    price_per_hour_micro, currency, seconds, count, amount_micro) "
	    "    SELECT 'usage', id, 'L4-24GB', 'full', '2026-01-15 00:00+00', '2026-01', 1, 'EUR', 1, 1, 1 "
	    "    FROM projects LIMIT 1; "
	    "    RAISE EXCEPTION 'insert passed'; "
	    "  EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END; "
	    "  BEGIN INSERT INTO billing_usage (kind, project_id, model, profile, hour, period, "
	    "    price_per_hour_micro, currency, seconds, count, amount_micro) "
	    "    SELECT 'usage', id, 'L4-24GB', 'full', '2026-02-15 00:00+00', '2026-03', 1, 'EUR', "
	    "    1, 1, 1 FROM projects LIMIT 1; "
	    "    RAISE EXCEPTION 'insert with a wrong period passed'; "
	    "  EXCEPTION WHEN check_violation THEN NULL; END; "
	    "  BEGIN TRUNCATE billing_usage CASCADE; RAISE EXCEPTION 'truncate passed'; "
	    "  EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END; "
	    "  BEGIN UPDATE billing_periods SET state = 'open', closed_at = NULL "
	    "    WHERE period = '2026-01'; RAISE EXCEPTION 'reopen passed'; "
	    "  EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END; "
	    "  BEGIN UPDATE billing_rates SET price_per_hour_micro = 0; "
	    "    RAISE EXCEPTION 'rate edit passed'; "
	    "  EXCEPTION WHEN object_not_in_prerequisite_state THEN NULL; END; "
	    "END $$");
	assert_text_equal(billing_rows_text(fx), snapshot);
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM billing_periods WHERE period = "
				"'2026-01'"),
	    "closed");

	/* re-accrual from scratch leaves the closed month alone */
	fx_sql_exec(fx, "UPDATE billing_accrual_state SET watermark = NULL");
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL),
	    200);
	assert_text_equal(billing_rows_text(fx), snapshot);

	/* an adjustment of the January row goes into the current, open period */
	r = fx_request(fx, billing, "POST", "/v1/billing/adjustments",
	    "{\"adjusts\":%s,\"amount_micro\":-60000,\"note\":\"goodwill: 10 minutes\"}", jan_row);
	assert_status(r, 201);
	assert_json_str(r->json, "kind", "adjustment");
	assert_json_str(r->json, "period", current);
	assert_json_int(r->json, "amount_micro", -60000);
	assert_json_str(r->json, "pool", "month");
	assert_json_int(r->json, "adjusts", atoll(jan_row));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = "
			     "'billing.adjust' AND object_id = $1",
			     fx_str(fx, "%lld", (long long)fx_json_int(r->json, "id"))),
	    1);
	/* an accrual keeps adjustments */
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL),
	    200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_usage WHERE kind = "
			     "'adjustment'"),
	    1);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/usage?project=other", NULL);
	assert_json_int(r->json, "totals.adjustment_micro", -60000);
	/* bad adjustments */
	assert_problem(fx_request(fx, billing, "POST", "/v1/billing/adjustments",
			   "{\"adjusts\":999999,\"amount_micro\":-1,\"note\":\"x\"}"),
	    404, "not_found");
	assert_problem(fx_request(fx, billing, "POST", "/v1/billing/adjustments",
			   "{\"adjusts\":%s,\"amount_micro\":0,\"note\":\"\"}", jan_row),
	    422, "validation_failed");
	assert_problem(fx_request(fx, billing, "POST", "/v1/billing/adjustments",
			   "{\"adjusts\":%s,\"amount_micro\":5}", jan_row),
	    422, "validation_failed");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_usage WHERE kind = "
			     "'adjustment'"),
	    1);
}

/* a row an adjustment refers to is kept at zero when a re-accrual no longer yields it */
static void
test_adjusted_row_kept(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *row = fx_sql_text(fx,
	    "SELECT b.id::text FROM billing_usage b JOIN pools p ON p.id = b.pool_id "
	    "WHERE p.name = 'mid' AND b.price_per_hour_micro = 1000000");

	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/adjustments",
	    "{\"adjusts\":%s,\"amount_micro\":1,\"note\":\"rounding\"}", row);
	assert_status(r, 201);
	/* the ledger said 1 instance; say 2 now, and accrue March again */
	fx_sql_exec(fx,
	    "UPDATE usage_ledger SET count = 2 WHERE pool_id = "
	    "(SELECT id FROM pools WHERE name = 'mid')");
	fx_sql_exec(fx, "UPDATE billing_accrual_state SET watermark = '2026-03-01 00:00+00'");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT seconds || '|' || count || '|' || amount_micro "
				"FROM billing_usage WHERE id = $1::int8",
				row),
	    "0|1|0");
	/* 1200 s × 2 × 1000000 / 3600 = 666666.67 -> 666667 */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT amount_micro FROM billing_usage b JOIN pools p ON p.id = "
			     "b.pool_id WHERE p.name = 'mid' AND b.price_per_hour_micro = 1000000 "
			     "AND b.count = 2"),
	    666667);
	/* a row not final yet is not adjusted */
	fx_sql_exec(fx, "UPDATE billing_accrual_state SET watermark = '2026-03-03 09:00+00'");
	assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/billing/adjustments",
			   "{\"adjusts\":%s,\"amount_micro\":1,\"note\":\"x\"}", row),
	    409, "conflict");
}

/* an open interval of a pool past its end time is billed up to that end time */
static void
test_open_past_end(void **state)
{
	struct fixture *fx = *state;
	const char *late = billing_pool(fx, "other", "late");

	fx_sql_exec(fx, "UPDATE pools SET ends_at = '2026-03-06 10:30:00+00' WHERE id = $1::int8",
	    late);
	fx_sql_exec(fx,
	    "INSERT INTO usage_ledger (pool_id, project_id, model, profile, count, started_at, "
	    "opened_by) SELECT id, project_id, 'L4-24GB', 'full', 1, '2026-03-06 10:00:00+00', 1 "
	    "FROM pools WHERE id = $1::int8",
	    late);
	fx_sql_exec(fx, "UPDATE billing_accrual_state SET watermark = '2026-03-06 00:00+00'");
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL),
	    200);
	/* 1800 s × 720000 / 3600 */
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(seconds || '|' || amount_micro, ',') "
				"FROM billing_usage WHERE pool_id = $1::int8",
				late),
	    "1800|360000");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_golden_rows),
		cmocka_unit_test(test_rates),
		cmocka_unit_test(test_usage_api),
		cmocka_unit_test(test_periods),
		cmocka_unit_test(test_adjusted_row_kept),
		cmocka_unit_test(test_open_past_end),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, billing_group_setup, fixture_group_teardown));
}
