/*
 * test_status_late_request.c - a request approved while an agent's status
 * report waits for its pool is settled, over HTTP against a real gpupoold
 * and PostgreSQL, the node enrolled as an agent.
 *
 * A report locks its pools' approved requests first, then the pools (the
 * global lock order); a request approved in between (its approval held
 * the pool) is not among those locked. When the report then releases the
 * request's last allocation (the instance is gone), the pool has no live
 * allocation on the node any more, so no later report reads it again:
 * the release request stayed approved for ever, its pool released (0024
 * to 0027; 0030 settles it). Here: pool lr's instance vanishes from the node while its
 * release is being approved (the approval waits for the node row that a
 * second session holds, holding the request and the pool); the report
 * arrives then and waits for the pool; the session lets go.
 *
 * Also (held): the GPU fails while an approval places another pool on it
 * between the report's read and its locks; the report leaves that
 * allocation, the agent's next report fails it and its request.
 */
#define _GNU_SOURCE
#include "fixture.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GPU0 "GPU-eeeeeeee-0000-0000-0000-000000000000"

static const char *node_token;

static int
group_setup(void **state)
{
	/* the report and the approval wait seconds on a loaded machine: no 503 */
	static const char *const env[] = { "GPUPOOL_STATEMENT_TIMEOUT_MS=60000",
		"GPUPOOL_AGENT_GRACE=3600", "GPUPOOL_AGENT_LISTEN=127.0.0.1:0", NULL };
	struct fixture_options opts = { .server_env = env };
	struct fixture *fx;
	struct gp_client_response *r;

	if (fixture_create(&opts, &fx) < 0)
		return -1;
	*state = fx;
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"lr\",\"display_name\":\"lr\"}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/lr/members/admin",
	    "{\"role\":\"owner\"}");
	if (r->status != 201)
		return -1;
	node_token = fx_enroll_mig_node(fx, "c1", "s1", GPU0);
	return node_token != NULL ? 0 : -1;
}

/* A status report of s1 at generation gen listing instances (a JSON array). */
static const char *
report_body(struct fixture *fx, int64_t gen, const char *instances)
{
	return fx_str(fx,
	    "{\"observed_generation\":%lld,\"agent_version\":\"test\",\"gpus\":["
	    "{\"uuid\":\"" GPU0 "\",\"index\":0,\"mig_enabled\":true,\"instances\":%s}]}",
	    (long long)gen, instances);
}

struct call {
	const char *base_url;
	const char *token;
	const char *method;
	const char *path;
	const char *body;
	long status;
	pthread_t t;
};

static void *
call_thread(void *arg)
{
	struct call *c = arg;
	struct gp_client *cl = gp_client_create(c->base_url, NULL);
	struct gp_client_response r;

	gp_client_set_retries(cl, 0);
	/* it waits for locks held on purpose while the test goes on: no client timeout */
	gp_client_set_timeouts(cl, 120000, 5000);
	memset(&r, 0, sizeof(r));
	if (gp_client_set_token(cl, c->token) == 0 &&
	    gp_client_request(cl, c->method, c->path, c->body, strlen(c->body), NULL, &r) == 0)
		c->status = r.status;
	gp_client_response_free(&r);
	gp_client_destroy(cl);
	return NULL;
}

static void
call_start(struct fixture *fx, struct call *c, const char *token, const char *method,
    const char *path, const char *body)
{
	/*
	 * A report that waits for a lock holds its HTTP thread; an approval
	 * the test sends meanwhile could be read by that same thread and
	 * wait for it (the test holds the lock until the approval answers).
	 * Reports go to the agent listener, whose threads are its own.
	 */
	c->base_url =
	    strncmp(path, "/v1/agent/", 10) == 0 ? fx->server->agent_url : fx->server->base_url;
	c->token = token;
	c->method = method;
	c->path = path;
	c->body = body;
	c->status = 0;
	assert_int_equal(pthread_create(&c->t, NULL, call_thread, c), 0);
}

static void
run(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		fail_msg("%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/* Poll (30 s) until n backends running a statement like pattern wait for a lock. */
static void
wait_lock_waiters(struct fixture *fx, const char *what, const char *pattern, int64_t n)
{
	struct timespec d = { 0, 20 * 1000 * 1000 };

	for (int i = 0; i < 1500; i++) {
		if (fx_sql_int64(fx,
			"SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 "
			"AND wait_event_type = 'Lock'",
			pattern) >= n)
			return;
		nanosleep(&d, NULL);
	}
	fail_msg("%s: not waiting after 30 s", what);
}

static void
test_request_approved_while_report_waits(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct call approve, rep;
	const char *pool, *req;
	int64_t gen;
	PGconn *z;

	/* pool lr: one 1g.10gb, ready on s1, active */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects/lr/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"lr\",\"items\":[{\"model\":\"H100-80GB\","
	    "\"profile\":\"1g.10gb\",\"count\":1}],\"justification\":\"t\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)fx_json_int(r->json, "id")),
	    "{}");
	assert_status(r, 200);
	pool = fx_sql_text(fx, "SELECT id::text FROM pools WHERE name = 'lr'");
	gen = fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 's1'");
	r = fx_request(fx, node_token, "PUT", "/v1/agent/status", "%s",
	    report_body(fx, gen,
		fx_sql_text(fx,
		    "SELECT json_agg(json_build_object('profile', profile, 'start', start, "
		    "'size', size, 'uuid', 'MIG-' || id))::text FROM allocations "
		    "WHERE pool_id = $1::int8",
		    pool)));
	assert_status(r, 200);
	assert_json_int(r->json, "ready", 1);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE id = $1::int8", pool),
	    "active");

	/* its release, submitted */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects/lr/pool-requests",
	    "{\"action\":\"release\",\"pool\":\"lr\"}");
	assert_status(r, 201);
	req = fx_str(fx, "%lld", (long long)fx_json_int(r->json, "id"));

	/* z holds the node: the approval takes the request and the pool, then waits */
	z = PQconnectdb(fx->db_url);
	if (PQstatus(z) != CONNECTION_OK)
		fail_msg("connect: %s", PQerrorMessage(z));
	run(z, "BEGIN");
	run(z, "SELECT 1 FROM nodes WHERE name = 's1' FOR NO KEY UPDATE");
	call_start(fx, &approve, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%s/approve", req), "{}");
	wait_lock_waiters(fx, "the approval", "%", 1);
	/* the instance is gone from the node: the report waits for the pool */
	call_start(fx, &rep, node_token, "PUT", "/v1/agent/status", report_body(fx, gen, "[]"));
	wait_lock_waiters(fx, "the report", "%agent_apply_status%", 1);
	run(z, "COMMIT");
	PQfinish(z);
	pthread_join(approve.t, NULL);
	pthread_join(rep.t, NULL);
	assert_int_equal(approve.status, 200);
	assert_int_equal(rep.status, 200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM allocations WHERE pool_id = $1::int8", pool),
	    "released");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE id = $1::int8", pool),
	    "released");

	/* the agent applies the release's generation and reports again (nothing there) */
	gen = fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 's1'");
	r = fx_request(fx, node_token, "PUT", "/v1/agent/status", "%s", report_body(fx, gen, "[]"));
	assert_status(r, 200);
	/* the release request is fulfilled, with its event */
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1::int8",
				req),
	    "fulfilled");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_request_events WHERE request_id = $1::int8 "
			     "AND from_state = 'approved' AND to_state = 'fulfilled'",
			     req),
	    1);
}

/* Pool name (one 1g.10gb), approved: its allocation reserved on s1; the request's id. */
static const char *
create_pool(struct fixture *fx, const char *name)
{
	struct gp_client_response *r =
	    fx_request(fx, fx->admin_token, "POST", "/v1/projects/lr/pool-requests",
		"{\"action\":\"create\",\"pool\":\"%s\",\"items\":[{\"model\":\"H100-80GB\","
		"\"profile\":\"1g.10gb\",\"count\":1}],\"justification\":\"t\"}",
		name);
	const char *id;

	assert_status(r, 201);
	id = fx_str(fx, "%lld", (long long)fx_json_int(r->json, "id"));
	r = fx_request(fx, fx->admin_token, "POST", fx_str(fx, "/v1/pool-requests/%s/approve", id),
	    "{}");
	assert_status(r, 200);
	return id;
}

/*
 * The GPU fails (the report no longer lists it) while an approval places another
 * pool on it, between the report's read and its locks: the report fails
 * GPU and the allocations of the pools it locked; the new allocation,
 * of a pool it did not lock, is the next report's (migration 0030's
 * argument (c)), which the agent sends after the approval's generation:
 * that one fails it, and its request.
 */
static void
test_gpu_fails_while_placed(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct call rep;
	const char *req2;
	int64_t gen;
	PGconn *z;
	/* the GPU is gone from the node (fallen off the bus): failed */
	const char *failed = "[]";

	fx_sql_exec(fx, "UPDATE gpus SET health = 'ok', health_reason = NULL WHERE uuid = $1",
	    GPU0);
	create_pool(fx, "g1");
	gen = fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 's1'");
	r = fx_request(fx, node_token, "PUT", "/v1/agent/status", "%s",
	    report_body(fx, gen,
		fx_sql_text(fx,
		    "SELECT json_agg(json_build_object('profile', a.profile, 'start', a.start, "
		    "'size', a.size, 'uuid', 'MIG-' || a.id))::text FROM allocations a "
		    "JOIN pools p ON p.id = a.pool_id WHERE p.name = 'g1'")));
	assert_status(r, 200);
	assert_json_int(r->json, "ready", 1);

	/* z holds g1: the report (GPU failed) reads, then waits for g1 */
	z = PQconnectdb(fx->db_url);
	if (PQstatus(z) != CONNECTION_OK)
		fail_msg("connect: %s", PQerrorMessage(z));
	run(z, "BEGIN");
	run(z, "SELECT 1 FROM pools WHERE name = 'g1' FOR NO KEY UPDATE");
	call_start(fx, &rep, node_token, "PUT", "/v1/agent/status",
	    fx_str(fx, "{\"observed_generation\":%lld,\"agent_version\":\"test\",\"gpus\":%s}",
		(long long)gen, failed));
	wait_lock_waiters(fx, "the report", "%agent_apply_status%", 1);
	/* meanwhile pool g2 is placed on the GPU, still healthy */
	req2 = create_pool(fx, "g2");
	run(z, "COMMIT");
	PQfinish(z);
	pthread_join(rep.t, NULL);
	assert_int_equal(rep.status, 200);
	assert_string_equal(fx_sql_text(fx, "SELECT health FROM gpus WHERE uuid = $1", GPU0),
	    "failed");
	assert_string_equal(fx_sql_text(fx,
				"SELECT a.state FROM allocations a JOIN pools p ON p.id = a.pool_id "
				"WHERE p.name = 'g1'"),
	    "failed");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'g1'"),
	    "degraded");
	/* g2's: left for the next report */
	assert_string_equal(fx_sql_text(fx,
				"SELECT a.state FROM allocations a JOIN pools p ON p.id = a.pool_id "
				"WHERE p.name = 'g2'"),
	    "reserved");

	/* the agent's report after the approval's generation: the GPU still failed */
	gen = fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 's1'");
	r = fx_request(fx, node_token, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":%lld,\"agent_version\":\"test\",\"gpus\":%s}", (long long)gen,
	    failed);
	assert_status(r, 200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT a.state FROM allocations a JOIN pools p ON p.id = a.pool_id "
				"WHERE p.name = 'g2'"),
	    "failed");
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1::int8",
				req2),
	    "failed");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocation_fault_intervals f "
			     "JOIN allocations a ON a.id = f.allocation_id JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name IN ('g1', 'g2') AND f.ended_at IS NULL"),
	    2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_approved_while_report_waits),
		cmocka_unit_test(test_gpu_fails_while_placed),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
