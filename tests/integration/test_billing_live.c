/*
 * test_billing_live.c - billing along the real workflow: a rate set
 * through the API, a pool approved (the usage ledger opens), the
 * accrual worker materializing the current partial hour and updating
 * it, a GPU marked failed and back (a credit row), the release (the
 * ledger closes, the rows stop growing), and the gpupool billing CLI.
 */
#include "billing_seed.h"

#include <time.h>

/* 1,000,000 micro-units a second: an amount is seconds × count × 10^6 */
#define PRICE "3600000000"

static const char *cli_env[3];

static void
sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&t, NULL);
}

static int
live_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_BILLING_ACCRUAL_INTERVAL=1",
		"GPUPOOL_BILLING_SETTLE=300", NULL };
	const struct fixture_options opts = { .server_env = env };
	struct fixture *fx;

	if (fixture_create(&opts, &fx) != 0)
		return -1;
	*state = fx;
	return 0;
}

/* the ledger's held instance-seconds up to the accrual's last "until", as billed */
static int64_t
ledger_seconds(struct fixture *fx)
{
	return fx_sql_int64(fx,
	    "SELECT coalesce(sum(l.count * extract(epoch FROM "
	    "least(date_trunc('second', coalesce(l.ended_at, s.last_until)), s.last_until) "
	    "- date_trunc('second', l.started_at)))::int8, 0) "
	    "FROM usage_ledger l, billing_accrual_state s "
	    "WHERE date_trunc('second', l.started_at) < s.last_until");
}

static int64_t
billed_seconds(struct fixture *fx, const char *kind)
{
	return fx_sql_int64(fx,
	    "SELECT coalesce(sum(seconds * count), 0)::int8 FROM billing_usage WHERE kind = $1",
	    kind);
}

static void
test_live(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *bob = fixture_create_user(fx, "bob", "none");
	const char *gpu;
	int64_t req, row_id, secs, failed;
	struct fx_proc *p;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
	    "{\"model\":\"H100-80GB\",\"profile\":\"full\",\"currency\":\"USD\","
	    "\"price_per_hour_micro\":" PRICE ",\"effective_from\":\"2026-01-01T00:00:00Z\"}");
	assert_status(r, 201);
	fx_fleet(fx, "live", "H100-80GB", 1, 2, false);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"lp\",\"display_name\":\"Live\"}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/lp/members/bob",
			  "{\"role\":\"member\"}"),
	    201);
	r = fx_request(fx, bob, "POST", "/v1/projects/lp/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"train\",\"items\":[\"H100-80GB/full=2\"],"
	    "\"justification\":\"test\"}");
	assert_status(r, 201);
	req = fx_json_int(r->json, "id");
	assert_status(fx_request(fx, fx->admin_token, "POST",
			  fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)req), "{}"),
	    200);

	/* the worker (every second) materializes the current, partial hour */
	for (int i = 0; i < 100 && billed_seconds(fx, "usage") < 4; i++)
		sleep_ms(100);
	assert_true(billed_seconds(fx, "usage") >= 4);
	row_id = fx_sql_int64(fx, "SELECT min(id) FROM billing_usage");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	assert_int_equal(billed_seconds(fx, "usage"), ledger_seconds(fx));
	assert_int_equal(fx_sql_int64(fx, "SELECT sum(amount_micro) FROM billing_usage"),
	    billed_seconds(fx, "usage") * 1000000);
	secs = billed_seconds(fx, "usage");
	sleep_ms(2100);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	/* the partial hour's row grew in place (unless an hour began meanwhile) */
	assert_true(billed_seconds(fx, "usage") >= secs + 2 * 2);
	assert_int_equal(billed_seconds(fx, "usage"), ledger_seconds(fx));
	assert_int_equal(fx_sql_int64(fx, "SELECT min(id) FROM billing_usage"), row_id);

	/* a GPU of the pool fails for a while: a credit row */
	gpu = fx_sql_text(fx,
	    "SELECT g.uuid FROM gpus g JOIN allocations a ON a.gpu_id = g.id "
	    "JOIN pools p ON p.id = a.pool_id WHERE p.name = 'train' "
	    "ORDER BY g.id LIMIT 1");
	assert_status(fx_request(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", gpu),
			  "{\"health\":\"failed\",\"health_reason\":\"XID 79\"}"),
	    200);
	sleep_ms(2100);
	assert_status(fx_request(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", gpu),
			  "{\"health\":\"ok\"}"),
	    200);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	failed = fx_sql_int64(fx,
	    "SELECT sum(extract(epoch FROM date_trunc('second', ended_at) - "
	    "date_trunc('second', started_at)))::int8 FROM gpu_health_intervals "
	    "WHERE health = 'failed'");
	assert_true(failed >= 2);
	assert_int_equal(billed_seconds(fx, "credit"), failed);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT sum(amount_micro) FROM billing_usage "
			     "WHERE kind = 'credit'"),
	    -failed * 1000000);

	/*
	 * shrink by one: the freed instance leaves the bill at the approval,
	 * so its GPU failing afterwards (the agent has not confirmed the
	 * release yet) credits nothing
	 */
	r = fx_request(fx, bob, "POST", "/v1/projects/lp/pool-requests",
	    "{\"action\":\"shrink\",\"pool\":\"train\",\"items\":[\"H100-80GB/full=1\"],"
	    "\"justification\":\"test\"}");
	assert_status(r, 201);
	req = fx_json_int(r->json, "id");
	assert_status(fx_request(fx, fx->admin_token, "POST",
			  fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)req), "{}"),
	    200);
	gpu = fx_sql_text(fx,
	    "SELECT g.uuid FROM gpus g JOIN allocations a ON a.gpu_id = g.id "
	    "WHERE a.state = 'releasing'");
	assert_non_null(gpu);
	sleep_ms(1100);
	assert_status(fx_request(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", gpu),
			  "{\"health\":\"failed\",\"health_reason\":\"XID 79\"}"),
	    200);
	sleep_ms(2100);
	assert_status(fx_request(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", gpu),
			  "{\"health\":\"ok\"}"),
	    200);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL),
	    200);
	assert_int_equal(billed_seconds(fx, "credit"), failed);
	assert_int_equal(billed_seconds(fx, "usage"), ledger_seconds(fx));

	/* release: the ledger closes, the rows stop growing */
	r = fx_request(fx, bob, "POST", "/v1/projects/lp/pool-requests",
	    "{\"action\":\"release\",\"pool\":\"train\"}");
	assert_status(r, 201);
	req = fx_json_int(r->json, "id");
	assert_status(fx_request(fx, fx->admin_token, "POST",
			  fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)req), "{}"),
	    200);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL),
	    200);
	secs = billed_seconds(fx, "usage");
	assert_int_equal(secs, ledger_seconds(fx));
	sleep_ms(1500);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_int(r->json, "upserted"), 0);
	assert_int_equal(billed_seconds(fx, "usage"), secs);

	/* bob sees his project's rows and the rate that applies to him */
	r = fx_request(fx, bob, "GET", "/v1/billing/usage?project=lp", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "totals.currency", "USD");
	assert_json_int(r->json, "totals.amount_micro", (secs - failed) * 1000000);
	r = fx_request(fx, bob, "GET", "/v1/billing/rates", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].profile", "full");

	/* the worker's figures */
	r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	assert_status(r, 200);
	assert_non_null(strstr(r->body, "gpupool_billing_accrual_leader 1\n"));
	assert_non_null(strstr(r->body, "gpupool_billing_accrual_passes_total{result=\"ok\"} "));
	assert_null(strstr(r->body, "gpupool_billing_accrual_last_success_timestamp_seconds 0\n"));

	/* the CLI */
	cli_env[0] = fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url);
	cli_env[1] = fx_str(fx, "GPUPOOL_TOKEN=%s", fx->admin_token);
	cli_env[2] = NULL;
	p = fx_cli(fx, cli_env, NULL, "billing", "usage", "--project", "lp", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "train"));
	assert_non_null(
	    strstr(p->out, fx_str(fx, "total %lld.000000", (long long)(secs - failed))));
	p = fx_cli(fx, cli_env, NULL, "billing", "usage", "--group-by", "spec", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "H100-80GB"));
	p = fx_cli(fx, cli_env, NULL, "billing", "rates", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "3600.000000"));
	assert_non_null(strstr(p->out, "yes")); /* the derived MIG rates */
	p = fx_cli(fx, cli_env, NULL, "billing", "rates", "set", "H100-80GB", "1g.10gb",
	    "--price-micro", "500000", "--currency", "USD", "--from", "2031-01-01T00:00:00Z", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "0.500000"));
	p = fx_cli(fx, cli_env, NULL, "rates", "list", "--model", "H100-80GB", "--profile", "full",
	    NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "3600.000000"));
	p = fx_cli(fx, cli_env, NULL, "usage", "--group-by", "project", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "lp"));
	p = fx_cli(fx, cli_env, NULL, "billing", "periods", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "open"));
	p = fx_cli(fx, cli_env, NULL, "billing", "accrue", NULL);
	assert_int_equal(p->status, 0);
	p = fx_cli(fx, cli_env, NULL, "billing", "adjust", fx_str(fx, "%lld", (long long)row_id),
	    "--amount-micro", "-1500000", "--note", "goodwill", NULL);
	/* the current hour is not final: nothing to adjust yet */
	assert_int_equal(p->status, 5);
	assert_non_null(strstr(p->err, "not final yet"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_usage WHERE kind = "
			     "'adjustment'"),
	    0);
	p = fx_cli(fx, cli_env, NULL, "billing", "adjust", "1", "--amount-micro", "x", "--note",
	    "n", NULL);
	assert_int_equal(p->status, 2);
	p = fx_cli(fx, cli_env, NULL, "billing", "periods", "close", "2999-01", NULL);
	assert_int_equal(p->status, 5);
	assert_non_null(strstr(p->err, "2999-01"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_live),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, live_setup, fixture_group_teardown));
}
