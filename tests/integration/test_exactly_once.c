/*
 * test_exactly_once.c - an Idempotency-Key runs its request once, on
 * group-committed requests (pool-request submissions and approvals,
 * whose handler defers its answer and leaves the HTTP thread free for
 * the duplicate) as well as on ordinary ones:
 *
 *  - duplicates sent at once, many rounds, on one replica with the
 *    default threads, on one with GPUPOOL_THREADS=1 (the duplicate then
 *    arrives on the thread the first one left), and spread over two
 *    replicas of one database: exactly one execution, every other
 *    answer its replay (or 409 idempotency_conflict), and the answer
 *    stored is the execution's, never a duplicate's;
 *  - duplicate approvals of one request, same checks;
 *  - a replica killed (SIGKILL) right after the submission's
 *    transaction committed and before it answered: the retry, on
 *    another replica, is the replay of the committed submission. The
 *    window is made deterministic with GPUPOOL_TEST_CRASH_AFTER_COMMIT=1,
 *    which debug builds (the test suite's) honour: the server kills
 *    itself after the first commit that claimed a key;
 *  - the connection lost with COMMIT's answer on its way
 *    (GPUPOOL_TEST_LOSE_COMMIT_REPLY=1): the outcome is looked up, the
 *    client gets 201, not 503.
 */
#include "fixture.h"
#include "rawhttp.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define RAW_TIMEOUT_MS 30000
#define RACE_THREADS 8
#define RACE_ROUNDS 12

static const char *alice; /* owner of project "eo" */
static const char *op;    /* operator: approves */
static struct fx_server *replica_b;
static struct fx_server *single_thread;

struct poster {
	int port;
	const char *token;
	const char *path;
	const char *key;
	const char *body;
	pthread_barrier_t *start;
	struct arena *arena;
	struct raw_response res;
	int rc;
};

static int
raw_post(struct arena *a, int port, const char *token, const char *path, const char *key,
    const char *body, struct raw_response *out)
{
	const char *headers[4];
	size_t len;
	char *req;

	headers[0] = arena_printf(a, "Authorization: Bearer %s", token);
	headers[1] = "Content-Type: application/json";
	headers[2] = arena_printf(a, "Idempotency-Key: %s", key);
	headers[3] = NULL;
	req = raw_build(a, "POST", path, headers, body, strlen(body), &len);
	return raw_exchange(a, port, req, len, RAW_TIMEOUT_MS, out);
}

static void *
poster_main(void *arg)
{
	struct poster *p = arg;

	pthread_barrier_wait(p->start);
	p->rc = raw_post(p->arena, p->port, p->token, p->path, p->key, p->body, &p->res);
	return NULL;
}

static const char *
code_of(const struct raw_response *r)
{
	struct json_object *c = r->json ? fx_json(r->json, "code") : NULL;

	return c ? json_object_get_string(c) : "";
}

static void
print_response(const char *what, const struct raw_response *r)
{
	print_error("%s: %d\n%s%.1000s\n", what, r->status, r->head ? r->head : "",
	    r->body ? r->body : "");
}

/*
 * RACE_THREADS posts of one keyed request at once, thread i on
 * ports[i % nports]. Exactly one is executed (201/200, not replayed);
 * every other is its replay, byte for byte, or 409
 * idempotency_conflict. Then a retry replays the execution. Returns
 * the execution's body (fx arena).
 */
static const char *
race(struct fixture *fx, const int *ports, int nports, const char *token, const char *path,
    const char *key, const char *body, int ok_status, int *replays)
{
	struct poster p[RACE_THREADS];
	pthread_t th[RACE_THREADS];
	pthread_barrier_t start;
	const struct raw_response *exec = NULL;
	struct raw_response again;
	int executed = 0;
	const char *out;

	assert_int_equal(pthread_barrier_init(&start, NULL, RACE_THREADS), 0);
	for (int i = 0; i < RACE_THREADS; i++) {
		p[i] = (struct poster){ .port = ports[i % nports],
			.token = token,
			.path = path,
			.key = key,
			.body = body,
			.start = &start,
			.arena = arena_create() };
		assert_non_null(p[i].arena);
		assert_int_equal(pthread_create(&th[i], NULL, poster_main, &p[i]), 0);
	}
	for (int i = 0; i < RACE_THREADS; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&start);

	for (int i = 0; i < RACE_THREADS; i++) {
		const struct raw_response *r = &p[i].res;
		const char *replayed = raw_header(p[i].arena, r, "Idempotent-Replayed");

		assert_int_equal(p[i].rc, 0);
		if (r->status == ok_status && replayed == NULL) {
			executed++;
			exec = r;
		} else if (r->status == ok_status) {
			assert_string_equal(replayed, "true");
			(*replays)++;
		} else if (r->status != 409 || strcmp(code_of(r), "idempotency_conflict") != 0) {
			print_response("a duplicate ran (or failed)", r);
			fail();
		}
	}
	if (executed != 1) {
		for (int i = 0; i < RACE_THREADS; i++)
			print_response("answer", &p[i].res);
		fail_msg("%d executions of key %s", executed, key);
	}
	for (int i = 0; i < RACE_THREADS; i++) {
		if (p[i].res.status != ok_status)
			continue;
		assert_int_equal(p[i].res.body_len, exec->body_len);
		assert_memory_equal(p[i].res.body, exec->body, exec->body_len);
	}
	/* the stored answer is the execution's: a retry replays it */
	memset(&again, 0, sizeof(again));
	assert_int_equal(raw_post(fx->arena, ports[0], token, path, key, body, &again), 0);
	if (again.status != ok_status)
		print_response("the retry", &again);
	assert_int_equal(again.status, ok_status);
	assert_string_equal(raw_header(fx->arena, &again, "Idempotent-Replayed"), "true");
	assert_int_equal(again.body_len, exec->body_len);
	assert_memory_equal(again.body, exec->body, exec->body_len);
	out = arena_strndup(fx->arena, exec->body, exec->body_len);
	for (int i = 0; i < RACE_THREADS; i++)
		arena_destroy(p[i].arena);
	return out;
}

static const char *
submit_body(struct fixture *fx, const char *pool)
{
	return fx_str(fx,
	    "{\"action\":\"create\",\"pool\":\"%s\",\"items\":[\"H100-80GB/1g.10gb=1\"],"
	    "\"justification\":\"exactly once\"}",
	    pool);
}

static int64_t
count_requests(struct fixture *fx, const char *pool)
{
	return fx_sql_int64(fx,
	    "SELECT count(*) FROM pool_requests r JOIN pools p ON p.id = r.pool_id "
	    "WHERE p.name = $1",
	    pool);
}

/* Racing submissions with one key per round on the given replicas. */
static void
race_submissions(struct fixture *fx, const int *ports, int nports, const char *label)
{
	int replays = 0;

	for (int round = 0; round < RACE_ROUNDS; round++) {
		const char *pool = fx_unique(fx, label);
		const char *key = fx_str(fx, "key-%s", pool);
		const char *body = submit_body(fx, pool);
		const char *out;
		struct json_object *o;

		out = race(fx, ports, nports, alice, "/v1/projects/eo/pool-requests", key, body,
		    201, &replays);
		assert_int_equal(count_requests(fx, pool), 1);
		o = json_tokener_parse(out);
		assert_non_null(o);
		assert_int_equal(fx_json_int(o, "id"),
		    fx_sql_int64(fx,
			"SELECT r.id FROM pool_requests r JOIN pools p ON p.id = r.pool_id "
			"WHERE p.name = $1",
			pool));
		json_object_put(o);
		/* one row for the key, with the execution's answer */
		assert_int_equal(fx_sql_int64(fx,
				     "SELECT count(*) FROM idempotency_keys WHERE key = $1 "
				     "AND state = 'done' AND status = 201",
				     key),
		    1);
	}
	print_message("%s: %d rounds, %d replays\n", label, RACE_ROUNDS, replays);
}

static void
test_submissions_one_replica(void **state)
{
	struct fixture *fx = *state;
	int ports[1] = { fx->server->port };

	race_submissions(fx, ports, 1, "one");
}

static void
test_submissions_one_thread(void **state)
{
	struct fixture *fx = *state;
	int ports[1] = { single_thread->port };

	race_submissions(fx, ports, 1, "single");
}

static void
test_submissions_two_replicas(void **state)
{
	struct fixture *fx = *state;
	int ports[2] = { fx->server->port, replica_b->port };

	race_submissions(fx, ports, 2, "two");
}

/* Duplicate approvals of one request: approved once, the others are its replay. */
static void
test_approvals(void **state)
{
	struct fixture *fx = *state;
	int ports[3] = { fx->server->port, replica_b->port, single_thread->port };
	int replays = 0;

	for (int round = 0; round < RACE_ROUNDS / 2; round++) {
		const char *pool = fx_unique(fx, "appr");
		struct gp_client_response *r = fx_request(fx, alice, "POST",
		    "/v1/projects/eo/pool-requests", "%s", submit_body(fx, pool));
		int64_t id;

		assert_status(r, 201);
		id = fx_json_int(r->json, "id");
		(void)race(fx, ports, 3, op,
		    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
		    fx_str(fx, "approve-%lld", (long long)id), "{\"note\":\"once\"}", 200,
		    &replays);
		assert_int_equal(fx_sql_int64(fx,
				     "SELECT count(*) FROM audit_log WHERE action = "
				     "'pool_request.approve' AND object_id = $1",
				     fx_str(fx, "%lld", (long long)id)),
		    1);
		assert_int_equal(fx_sql_int64(fx,
				     "SELECT count(*) FROM allocations a JOIN pools p ON "
				     "p.id = a.pool_id WHERE p.name = $1",
				     pool),
		    1);
	}
	print_message("approvals: %d rounds, %d replays\n", RACE_ROUNDS / 2, replays);
}

/*
 * kill -9 between the commit and the reply: the replica that took the
 * submission dies right after its transaction commits; the retry on
 * another replica must not submit again but replay the committed answer.
 */
static void
test_crash_after_commit(void **state)
{
	static const char *const env[] = { "GPUPOOL_TEST_CRASH_AFTER_COMMIT=1", NULL };
	struct fixture *fx = *state;
	const char *pool = fx_unique(fx, "crash");
	const char *key = fx_str(fx, "key-%s", pool);
	const char *body = submit_body(fx, pool);
	struct fx_server *doomed;
	struct raw_response first, retry;
	struct json_object *o;
	int rc;

#ifdef NDEBUG
	/* not skip(): a skipped test counts as passed, and this one would never run */
	fail_msg("needs gpupoold's test hooks: build with CMAKE_BUILD_TYPE=Debug (NDEBUG is set)");
#endif
	doomed = fixture_server_start(fx, env);
	assert_non_null(doomed);
	memset(&first, 0, sizeof(first));
	rc = raw_post(fx->arena, doomed->port, alice, "/v1/projects/eo/pool-requests", key, body,
	    &first);
	if (rc == 0)
		print_response("the replica answered instead of dying", &first);
	assert_int_not_equal(rc, 0);
	fixture_server_kill(fx, doomed); /* reap it */
	/* it committed */
	assert_int_equal(count_requests(fx, pool), 1);

	memset(&retry, 0, sizeof(retry));
	assert_int_equal(raw_post(fx->arena, replica_b->port, alice,
			     "/v1/projects/eo/pool-requests", key, body, &retry),
	    0);
	if (retry.status != 201)
		print_response("the retry", &retry);
	assert_int_equal(retry.status, 201);
	assert_string_equal(raw_header(fx->arena, &retry, "Idempotent-Replayed"), "true");
	assert_int_equal(count_requests(fx, pool), 1);
	o = retry.json;
	assert_non_null(o);
	assert_int_equal(fx_json_int(o, "id"),
	    fx_sql_int64(fx,
		"SELECT r.id FROM pool_requests r JOIN pools p ON p.id = r.pool_id "
		"WHERE p.name = $1",
		pool));
	assert_string_equal(raw_header(fx->arena, &retry, "Location"),
	    fx_str(fx, "/v1/pool-requests/%lld", (long long)fx_json_int(o, "id")));
}

/*
 * The connection breaks with COMMIT's answer on its way (forced with
 * GPUPOOL_TEST_LOSE_COMMIT_REPLY=1, debug builds): the server looks
 * the key up on a new connection, finds that the submission committed
 * and answers 201, not 503; the retry is the replay.
 */
static void
test_commit_outcome_resolved(void **state)
{
	static const char *const env[] = { "GPUPOOL_TEST_LOSE_COMMIT_REPLY=1", NULL };
	struct fixture *fx = *state;
	const char *pool = fx_unique(fx, "lost");
	const char *key = fx_str(fx, "key-%s", pool);
	const char *body = submit_body(fx, pool);
	struct fx_server *flaky;
	struct raw_response first, retry;

#ifdef NDEBUG
	/* not skip(): a skipped test counts as passed, and this one would never run */
	fail_msg("needs gpupoold's test hooks: build with CMAKE_BUILD_TYPE=Debug (NDEBUG is set)");
#endif
	flaky = fixture_server_start(fx, env);
	assert_non_null(flaky);
	memset(&first, 0, sizeof(first));
	assert_int_equal(raw_post(fx->arena, flaky->port, alice, "/v1/projects/eo/pool-requests",
			     key, body, &first),
	    0);
	if (first.status != 201)
		print_response("the submission", &first);
	assert_int_equal(first.status, 201);
	assert_null(raw_header(fx->arena, &first, "Idempotent-Replayed"));
	assert_int_equal(count_requests(fx, pool), 1);
	/* the answer names the request that committed (not an empty one) */
	assert_string_equal(raw_header(fx->arena, &first, "Location"),
	    fx_str(fx, "/v1/pool-requests/%s",
		fx_sql_text(fx,
		    "SELECT r.id::text FROM pool_requests r JOIN pools p ON p.id = r.pool_id "
		    "WHERE p.name = $1",
		    pool)));
	memset(&retry, 0, sizeof(retry));
	assert_int_equal(raw_post(fx->arena, fx->server->port, alice,
			     "/v1/projects/eo/pool-requests", key, body, &retry),
	    0);
	assert_int_equal(retry.status, 201);
	assert_string_equal(raw_header(fx->arena, &retry, "Idempotent-Replayed"), "true");
	assert_int_equal(retry.body_len, first.body_len);
	assert_memory_equal(retry.body, first.body, first.body_len);
	assert_int_equal(count_requests(fx, pool), 1);
	assert_int_equal(fixture_server_stop(fx, flaky), 0);
}

static int
group_setup(void **state)
{
	static const char *const one[] = { "GPUPOOL_THREADS=1", NULL };
	struct fixture *fx;
	struct gp_client_response *r;

	if (fixture_create(NULL, &fx) != 0)
		return -1;
	*state = fx;
	replica_b = fixture_server_start(fx, NULL);
	single_thread = fixture_server_start(fx, one);
	if (replica_b == NULL || single_thread == NULL)
		return -1;
	op = fixture_create_user(fx, "op", "operator");
	alice = fixture_create_user(fx, "alice", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"eo\",\"display_name\":\"eo\"}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/eo/members/alice",
	    "{\"role\":\"owner\"}");
	if (r->status != 201)
		return -1;
	fx_fleet(fx, "eo", "H100-80GB", 2, 4, true);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_submissions_one_replica),
		cmocka_unit_test(test_submissions_one_thread),
		cmocka_unit_test(test_submissions_two_replicas),
		cmocka_unit_test(test_approvals),
		cmocka_unit_test(test_crash_after_commit),
		cmocka_unit_test(test_commit_outcome_resolved),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
