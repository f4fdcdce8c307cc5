/*
 * test_maintenance.c - the housekeeping worker deletes what has outlived
 * its purpose (Idempotency-Key answers past their TTL, failed-login
 * counters whose window has passed, tokens dead for a week) and keeps
 * everything else.
 */
#include "fixture.h"

#include <string.h>
#include <unistd.h>

static int64_t
wait_count(struct fixture *fx, const char *sql, int64_t want, int seconds)
{
	int64_t n = -1;

	for (int i = 0; i < seconds * 10; i++) {
		n = fx_sql_int64(fx, sql);
		if (n == want)
			break;
		usleep(100000);
	}
	return n;
}

static void
test_housekeeping(void **state)
{
	struct fixture *fx = *state;
	const char *env[] = { "GPUPOOL_MAINTENANCE_INTERVAL=1", NULL };
	const char *uid, *token;
	struct fx_server *srv;
	struct gp_client_response *r;

	token = fixture_create_user(fx, "keeper", "none");
	uid = fx_sql_text(fx, "SELECT id::text FROM users WHERE username = 'keeper'");

	/* old and fresh rows of every kind the worker looks after */
	fx_sql_exec(fx,
	    "INSERT INTO login_failures (key, failures, window_start) VALUES "
	    "('user:old', 3, now() - interval '2 hours'), ('user:fresh', 2, now())");
	fx_sql_exec(fx,
	    "INSERT INTO tokens (user_id, kind, name, digest, prefix, expires_at, revoked_at) VALUES "
	    "($1::bigint, 'api', 'dead-long-ago', sha256('a'::bytea), 'gpp_aaaa', NULL, now() - interval '8 days'), "
	    "($1::bigint, 'api', 'expired-long-ago', sha256('b'::bytea), 'gpp_bbbb', now() - interval '9 days', NULL), "
	    "($1::bigint, 'api', 'revoked-yesterday', sha256('c'::bytea), 'gpp_cccc', NULL, now() - interval '1 day')",
	    uid);
	fx_sql_exec(fx,
	    "INSERT INTO idempotency_keys (user_id, key, request_hash, state, created_at) VALUES "
	    "($1::bigint, 'old', sha256('x'::bytea), 'done', now() - interval '73 hours'), "
	    "($1::bigint, 'fresh', sha256('y'::bytea), 'done', now() - interval '71 hours')",
	    uid);

	srv = fixture_server_start(fx, env);
	assert_non_null(srv);

	assert_int_equal(wait_count(fx,
			     "SELECT count(*) FROM login_failures WHERE key = 'user:old'", 0, 10),
	    0);
	assert_int_equal(wait_count(fx,
			     "SELECT count(*) FROM tokens WHERE name IN "
			     "('dead-long-ago', 'expired-long-ago')",
			     0, 10),
	    0);
	assert_int_equal(wait_count(fx, "SELECT count(*) FROM idempotency_keys WHERE key = 'old'",
			     0, 10),
	    0);

	/* what is still within its lifetime stays */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM login_failures WHERE key = 'user:fresh'"),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE name = 'revoked-yesterday'"),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM idempotency_keys WHERE key = 'fresh'"),
	    1);

	/* and live sessions keep working */
	r = fx_request(fx, token, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_int_equal(fixture_server_stop(fx, srv), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_housekeeping),
	};

	return fixture_run_tests(tests);
}
