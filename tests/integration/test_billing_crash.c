/*
 * test_billing_crash.c - the accrual under failure and concurrency: a
 * gpupoold killed (SIGKILL) while its accrual transaction is open, then
 * the accrual run again, converges to the golden rows; two replicas
 * accruing at the same time (their workers and on-demand runs) write
 * each row once and the same rows.
 */
#include "billing_seed.h"

#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* fork a child that POSTs the accrual run `times` times to srv; exits 0 when all were 200 */
static pid_t
accrue_in_child(struct fixture *fx, struct fx_server *srv, int times)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		/* no cmocka here: a failure must not unwind into the parent's tests */
		struct gp_client *c = gp_client_create(srv->base_url, fx->admin_token);
		int bad = 0;

		if (c == NULL)
			_exit(2);
		for (int i = 0; i < times; i++) {
			struct gp_client_response r;

			if (gp_client_request(c, "POST", "/v1/billing/accrual/run", NULL, 0, NULL,
				&r) < 0 ||
			    r.status != 200) {
				fprintf(stderr, "accrual run: HTTP %ld %s\n", r.status,
				    r.body != NULL ? r.body : r.error);
				bad++;
			}
			gp_client_response_free(&r);
		}
		_exit(bad == 0 ? 0 : 1);
	}
	return pid;
}

static int
child_status(pid_t pid)
{
	int st = 0;

	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void
sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void
test_kill_during_accrual(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { BILLING_SERVER_ENV, "GPUPOOL_TEST_ACCRUAL_HOLD_MS=2000",
		NULL };
	struct fx_server *main_srv = fx->server, *victim;
	struct gp_client_response *r;
	pid_t child;
	bool seen = false;

	seed_golden(fx);
	victim = fixture_server_start(fx, env);
	assert_non_null(victim);
	/*
	 * Its accrual works in spans of ledger activity, a transaction each,
	 * and holds each one open 2 s before COMMIT. Let the first span
	 * (31 January - 1 February) commit, kill it in the second.
	 */
	child = accrue_in_child(fx, victim, 1);
	for (int i = 0; i < 200 && fx_sql_int64(fx, "SELECT count(*) FROM billing_usage") == 0; i++)
		sleep_ms(50);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM billing_usage"), 2);
	for (int i = 0; i < 100 && !seen; i++) {
		seen = fx_sql_int64(fx,
			   "SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
			   "'SELECT pg_sleep%' AND state = 'active'") > 0;
		if (!seen)
			sleep_ms(50);
	}
	assert_true(seen);
	fixture_server_kill(fx, victim);
	assert_int_not_equal(child_status(child), 0); /* no answer came */
	/* the first span is there and final, nothing of the second */
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM billing_usage"), 2);
	assert_string_equal(fx_sql_text(fx,
				"SELECT to_char(watermark AT TIME ZONE 'UTC', "
				"'YYYY-MM-DD HH24:MI') FROM billing_accrual_state"),
	    "2026-02-01 23:00");

	/* the run again (waits for the dead one's lock to go) converges */
	fx->server = main_srv;
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	assert_text_equal(billing_rows_text(fx), billing_golden);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/accrual/run", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_int(r->json, "upserted"), 0);
	assert_text_equal(billing_rows_text(fx), billing_golden);
}

static void
test_two_replicas(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { "GPUPOOL_BILLING_ACCRUAL_INTERVAL=1",
		"GPUPOOL_BILLING_CLOSE_GRACE=0", "GPUPOOL_BILLING_SETTLE=300", NULL };
	struct fx_server *a = fx->server, *b, *c;
	pid_t ca, cb;

	billing_reset(fx);
	/*
	 * Two more replicas (their workers, every second, stand by while the
	 * first replica's holds the leadership) and on-demand runs on two.
	 */
	b = fixture_server_start(fx, env);
	c = fixture_server_start(fx, env);
	assert_non_null(b);
	assert_non_null(c);
	ca = accrue_in_child(fx, a, 10);
	cb = accrue_in_child(fx, b, 10);
	/* a month closes meanwhile (it accrues first, under the same lock) */
	fx->server = c;
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/billing/periods/2026-02/close",
			  NULL),
	    200);
	fx->server = a;
	assert_int_equal(child_status(ca), 0);
	assert_int_equal(child_status(cb), 0);
	assert_text_equal(billing_rows_text(fx), billing_golden);
	/* each row once */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT kind, pool_id, model, "
			     "profile, hour, rate_id, count FROM billing_usage GROUP "
			     "BY 1, 2, 3, 4, 5, 6, 7 HAVING count(*) > 1) d"),
	    0);
	/* more runs change nothing: the rows stay the same rows */
	{
		const char *ids = fx_sql_text(fx,
		    "SELECT string_agg(id::text, ',' ORDER BY id) FROM billing_usage");

		assert_int_equal(child_status(accrue_in_child(fx, c, 3)), 0);
		assert_string_equal(fx_sql_text(fx,
					"SELECT string_agg(id::text, ',' ORDER BY id) FROM billing_usage"),
		    ids);
	}
	assert_int_equal(fixture_server_stop(fx, b), 0);
	assert_int_equal(fixture_server_stop(fx, c), 0);
	assert_text_equal(billing_rows_text(fx), billing_golden);
}

/*
 * A backlog of many spans: the worker does 4 a pass and runs again at
 * once, so it catches up without waiting for its (hour-long) interval.
 */
static void
test_backlog_catch_up(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { "GPUPOOL_BILLING_ACCRUAL_INTERVAL=3600",
		"GPUPOOL_BILLING_SETTLE=300", NULL };
	const char *pool = billing_pool(fx, "acme", "long");
	struct fx_server *srv;
	bool done = false;

	/* 12 days held in April: 12 spans of 24 hours */
	billing_ledger(fx, pool, "H100-80GB", "full", 1, "2026-04-01 00:00:00+00",
	    "2026-04-13 00:00:00+00");
	billing_reset(fx);
	/* the only replica left (its worker must lead) */
	for (int i = 0; i < FIXTURE_MAX_SERVERS; i++)
		if (fx->servers[i].pid != 0)
			assert_int_equal(fixture_server_stop(fx, &fx->servers[i]), 0);
	srv = fixture_server_start(fx, env);
	assert_non_null(srv);
	fx->server = srv;
	for (int i = 0; i < 300 && !done; i++) {
		done = fx_sql_int64(fx,
			   "SELECT count(*) FROM billing_accrual_state WHERE watermark "
			   ">= date_trunc('hour', now() - interval '1 hour')") == 1;
		if (!done)
			sleep_ms(100);
	}
	assert_true(done);
	/* 12 × 24 hours at 3000000 an hour (the golden H100 rate from 2 March) */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT sum(amount_micro) FROM billing_usage WHERE "
			     "pool_id = $1::int8",
			     pool),
	    (int64_t)12 * 24 * 3000000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kill_during_accrual),
		cmocka_unit_test(test_two_replicas),
		cmocka_unit_test(test_backlog_catch_up),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, billing_group_setup, fixture_group_teardown));
}
