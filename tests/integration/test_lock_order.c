/*
 * test_lock_order.c - single interleavings of the global lock order
 * (docs/architecture.md "The lock order"), driven step by step on
 * separate PostgreSQL sessions, each asserted not to deadlock.
 *
 * A heartbeat that read its node as ready, then found it unknown once
 * its UPDATE had the node (the liveness sweep committed in between),
 * used to make the node ready there: the status trigger then took the
 * node's GPUs after the node, and a transaction holding one of those
 * GPUs and waiting for the node (a release, a cordon, an approval's
 * last statement) deadlocked with it. A heartbeat now makes a node ready
 * only when it locked the GPUs first; otherwise the next one does.
 *
 * Two agents' reports for nodes that share a pool settle only the
 * approved requests each locked first (migration 0024): the one that
 * holds the pool does not wait for a request approved since, which the
 * other report holds while it waits for the pool. test_deadlock's agents
 * test finds that under load; this one in a second, deterministically
 * (it failed with 0016's agent_apply_status).
 *
 * A step of the defrag apply worker waits for its pool holding no GPU.
 * The outbox rows of a node are locked in id order by every statement
 * that updates several of them (migration 0027), whatever its plan.
 *
 * A status report locks only the pools whose allocations it changes
 * (migration 0030), chosen by a read without locks, and leaves the
 * allocations of a pool that became relevant since to the next report.
 */
#include "fixture.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static PGconn *
session(struct fixture *fx)
{
	PGconn *c = PQconnectdb(fx->db_url);

	if (PQstatus(c) != CONNECTION_OK)
		fail_msg("connect: %s", PQerrorMessage(c));
	return c;
}

/* Run sql on c; fail the test unless it succeeds. */
static void
run(PGconn *c, const char *sql)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);

	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		fail_msg("%s: %s", sql, PQerrorMessage(c));
	PQclear(r);
}

/*
 * Poll (20 s deadline) until pid waits for a lock held by blocker (0:
 * by anyone); true when it does, false when its query finished first.
 */
static bool
wait_blocked(struct fixture *fx, PGconn *c, int pid, int blocker)
{
	struct timespec d = { 0, 20 * 1000 * 1000 };

	for (int i = 0; i < 1000; i++) {
		if (fx_sql_int64(fx,
			"SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int "
			"AND wait_event_type = 'Lock' AND ($2::int = 0 OR $2::int = ANY "
			"(pg_blocking_pids($1::int)))",
			fx_str(fx, "%d", pid), fx_str(fx, "%d", blocker)) == 1)
			return true;
		if (!PQconsumeInput(c))
			fail_msg("session lost: %s", PQerrorMessage(c));
		if (!PQisBusy(c))
			return false;
		nanosleep(&d, NULL);
	}
	fail_msg("session %d neither blocked nor done after 20 s", pid);
	return false;
}

/* The result of the async query on c: its SQLSTATE, "" when it succeeded. */
static const char *
finish(struct fixture *fx, PGconn *c)
{
	const char *state = "";
	PGresult *r;

	while ((r = PQgetResult(c)) != NULL) {
		if (PQresultStatus(r) == PGRES_FATAL_ERROR) {
			state = fx_str(fx, "%s", PQresultErrorField(r, PG_DIAG_SQLSTATE));
			fprintf(stderr, "  %s", PQresultErrorMessage(r));
		}
		PQclear(r);
	}
	return state;
}

static void
test_heartbeat_after_liveness(void **state)
{
	struct fixture *fx = *state;
	PGconn *x, *h, *r;
	const char *node, *gpu;
	bool blocked;

	fx_sql_exec(fx, "INSERT INTO clusters (name) VALUES ('lo')");
	node = fx_sql_text(fx,
	    "INSERT INTO nodes (cluster_id, name, hostname, cpu_millicores, memory_bytes, "
	    "managed_by_agent, agent_heartbeat_at) SELECT id, 'lo-1', 'lo-1', 0, 0, true, now() "
	    "FROM clusters WHERE name = 'lo' RETURNING id::text");
	gpu = fx_sql_text(fx,
	    "INSERT INTO gpus (node_id, gpu_index, uuid, model, memory_mib, mig_enabled) "
	    "VALUES ($1::int8, 0, 'GPU-10c0de00-0000-4000-8000-000000000001', 'A100-80GB', 81920, true) RETURNING id::text",
	    node);
	x = session(fx);
	h = session(fx);
	r = session(fx);

	/* r: a release (or cordon) holding a GPU of the node, about to want the node */
	run(r, "BEGIN");
	run(r, fx_str(fx, "SELECT 1 FROM gpus WHERE id = %s FOR NO KEY UPDATE", gpu));
	/*
	 * x: the liveness sweep's outcome, the node unknown, committed after
	 * the heartbeat read it ready (its GPU half is left out, so that r
	 * can hold the GPU meanwhile: the sweep itself would have taken and
	 * released it before r)
	 */
	run(x, "BEGIN");
	run(x, "SET LOCAL session_replication_role = replica");
	run(x,
	    fx_str(fx,
		"UPDATE nodes SET status = 'unknown', status_reason = 'silent' WHERE id = %s",
		node));
	/* h: the heartbeat reads the node ready, then waits for x's row */
	if (!PQsendQuery(h, fx_str(fx, "SELECT agent_heartbeat(%s, NULL)", node)))
		fail_msg("send: %s", PQerrorMessage(h));
	assert_true(wait_blocked(fx, h, PQbackendPID(h), PQbackendPID(x)));
	run(x, "COMMIT");
	/* the heartbeat either finishes or waits for r's GPU */
	blocked = wait_blocked(fx, h, PQbackendPID(h), PQbackendPID(r));
	fprintf(stderr, "  heartbeat %s\n", blocked ? "waits for the GPU held by r" : "finished");
	/* r now wants the node: a cycle if the heartbeat holds it and waits for the GPU */
	if (!PQsendQuery(r,
		fx_str(fx, "SELECT 1 FROM nodes WHERE id = %s FOR NO KEY UPDATE", node)))
		fail_msg("send: %s", PQerrorMessage(r));
	assert_string_equal(finish(fx, r), "");
	run(r, "COMMIT");
	assert_string_equal(finish(fx, h), "");
	assert_false(blocked);
	/* left unknown by that heartbeat (it had not locked the GPUs); the next one readies it */
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM nodes WHERE id = $1::int8", node),
	    "unknown");
	assert_int_equal(fx_sql_int64(fx, "SELECT agent_heartbeat($1::int8, NULL)", node), 1);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM nodes WHERE id = $1::int8", node),
	    "ready");
	assert_string_equal(fx_sql_text(fx, "SELECT node_status FROM gpus WHERE id = $1::int8",
				gpu),
	    "ready");
	PQfinish(x);
	PQfinish(h);
	PQfinish(r);
}

/* A request of pool (a number) in the state given, by the admin's API calls. */
static int64_t
request_id(struct fixture *fx, const char *action, const char *items)
{
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects/lr/pool-requests",
	    "{\"action\":\"%s\",\"pool\":\"p\",\"items\":%s,\"justification\":\"t\"}", action,
	    items);
	if (r->status != 201)
		fail_msg("%s: %ld %s", action, r->status, r->body);
	return fx_json_int(r->json, "id");
}

/*
 * Two agents' reports for nodes sharing a pool (migration 0024): a
 * report settles only the approved requests it locked first. Report a
 * (node 1, whose instance of the pool becomes ready) locks the pool's
 * approved requests (none), the pool, then waits for a GPU of its node;
 * an expand of the pool is approved meanwhile; report b (node 2, for
 * which that request could be settled now) locks that request and waits
 * for the pool. Had a's last statement settled the requests approved
 * since, it would have waited for b's request while holding the pool.
 */
/* node %s reports its GPUs, their instances not listed this scan (nothing fails) */
#define REPORT                                                                                       \
	"SELECT agent_apply_status(%s, 0, NULL, (SELECT jsonb_agg(jsonb_build_object('uuid', uuid, " \
	"'state', 'unknown')) FROM gpus WHERE node_id = %s), '[]')"
/* node %s reports its GPUs with every live allocation's instance ("MIG-<id>") */
#define REPORT_ALL                                                                                     \
	"SELECT agent_apply_status(%s, 0, NULL, (SELECT jsonb_agg(jsonb_build_object('uuid', g.uuid, " \
	"'state', 'ok', 'instances', (SELECT coalesce(jsonb_agg(jsonb_build_object('profile', "        \
	"a.profile, 'start', a.start, 'size', a.size, 'uuid', 'MIG-' || a.id)), '[]') FROM "           \
	"allocations a WHERE a.gpu_id = g.id AND a.state <> 'released'))) FROM gpus g "                \
	"WHERE g.node_id = %s), '[]')"

static void
test_reports_settle_what_they_locked(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	PGconn *z, *a, *b;
	const char *n1, *n2, *g1;
	int64_t create, expand;

	fx_fleet(fx, "lr", "H100-80GB", 2, 1, false);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"lr\",\"display_name\":\"lr\"}");
	assert_int_equal(r->status, 201);
	assert_int_equal(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/lr/members/admin",
			     "{\"role\":\"owner\"}")
			     ->status,
	    201);
	create = request_id(fx, "create", "[\"H100-80GB/full=2\"]");
	assert_int_equal(fx_request(fx, fx->admin_token, "POST",
			     fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)create), "{}")
			     ->status,
	    200);
	n1 = fx_sql_text(fx, "SELECT id::text FROM nodes WHERE name = 'lr-n0'");
	n2 = fx_sql_text(fx, "SELECT id::text FROM nodes WHERE name = 'lr-n1'");
	g1 = fx_sql_text(fx, "SELECT min(id)::text FROM gpus WHERE node_id = $1::int8", n1);
	/* the pool spans both nodes; its create is settled (no approved request left) */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(DISTINCT g.node_id) FROM allocations a JOIN gpus g ON "
			     "g.id = a.gpu_id WHERE a.request_id = $1::int8 AND a.state = 'ready'",
			     fx_str(fx, "%lld", (long long)create)),
	    2);
	fx_sql_exec(fx, "UPDATE pool_requests SET state = 'fulfilled' WHERE id = $1::int8",
	    fx_str(fx, "%lld", (long long)create));
	expand = request_id(fx, "expand", "[\"H100-80GB/full=1\"]");
	/* node 1's allocation waits for its instance, which a's report lists */
	fx_sql_exec(fx,
	    "UPDATE allocations SET state = 'provisioning' WHERE request_id = $1::int8 "
	    "AND gpu_id = $2::int8",
	    fx_str(fx, "%lld", (long long)create), g1);
	z = session(fx);
	a = session(fx);
	b = session(fx);

	run(z, "BEGIN");
	run(z, fx_str(fx, "SELECT 1 FROM gpus WHERE id = %s FOR NO KEY UPDATE", g1));
	if (!PQsendQuery(a, fx_str(fx, REPORT_ALL, n1, n1)))
		fail_msg("send: %s", PQerrorMessage(a));
	assert_true(wait_blocked(fx, a, PQbackendPID(a), PQbackendPID(z)));
	/*
	 * the expand approved while a holds the pool (an approval would wait
	 * for the pool; its outcome, the request approved, is what matters)
	 */
	fx_sql_exec(fx, "UPDATE pool_requests SET state = 'approved' WHERE id = $1::int8",
	    fx_str(fx, "%lld", (long long)expand));
	if (!PQsendQuery(b, fx_str(fx, REPORT, n2, n2)))
		fail_msg("send: %s", PQerrorMessage(b));
	assert_true(wait_blocked(fx, b, PQbackendPID(b), PQbackendPID(a)));
	run(z, "COMMIT");
	assert_string_equal(finish(fx, a), "");
	assert_string_equal(finish(fx, b), "");
	/* b locked the expand first: b settled it (no allocation of it is waiting) */
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1::int8",
				fx_str(fx, "%lld", (long long)expand)),
	    "fulfilled");
	assert_string_equal(fx_sql_text(fx,
				"SELECT actor FROM pool_request_events WHERE request_id = $1::int8 "
				"AND to_state = 'fulfilled'",
				fx_str(fx, "%lld", (long long)expand)),
	    "agent:lr-n1");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM allocations WHERE request_id = $1::int8 "
				"AND gpu_id = $2::int8",
				fx_str(fx, "%lld", (long long)create), g1),
	    "ready");
	PQfinish(z);
	PQfinish(a);
	PQfinish(b);
}

/*
 * A step of the defrag apply worker (defrag_step, migration 0026) takes
 * the move's pool before its GPUs, as approvals do: while an approval
 * holds the pool, the step waits there holding no GPU, so the approval
 * takes the GPUs and the node at once (a lock timeout here would mean
 * the step took a GPU first: a deadlock with that approval).
 */
static void
test_defrag_step_takes_the_pool_first(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	PGconn *z, *d;
	const char *pool, *plan, *node;
	int64_t create;

	fx_fleet(fx, "ld", "H100-80GB", 1, 2, true);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects/lr/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"mv\",\"items\":[\"H100-80GB/1g.10gb=1\"],"
	    "\"cluster\":\"ld\",\"justification\":\"t\"}");
	assert_int_equal(r->status, 201);
	create = fx_json_int(r->json, "id");
	assert_int_equal(fx_request(fx, fx->admin_token, "POST",
			     fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)create), "{}")
			     ->status,
	    200);
	pool = fx_sql_text(fx, "SELECT id::text FROM pools WHERE name = 'mv'");
	node = fx_sql_text(fx, "SELECT id::text FROM nodes WHERE name = 'ld-n0'");
	/* a plan moving the pool's instance to the other GPU, applied */
	plan = fx_sql_text(fx,
	    "INSERT INTO defrag_plans (goal, moves, body) SELECT 'items', 1, jsonb_build_object("
	    "'idle_minutes', 0, 'moves', jsonb_build_array(jsonb_build_object('allocation', a.id, "
	    "'profile', a.profile, 'from', jsonb_build_object('gpu_uuid', g.uuid, 'start', a.start), "
	    "'to', jsonb_build_object('gpu_uuid', h.uuid, 'start', 0), 'make_before_break', true))) "
	    "FROM allocations a JOIN gpus g ON g.id = a.gpu_id JOIN gpus h ON h.node_id = g.node_id "
	    "AND h.id <> g.id WHERE a.pool_id = $1::int8 RETURNING id::text",
	    pool);
	assert_string_equal(fx_sql_text(fx, "SELECT defrag_apply($1::int8, 0, 3600)", plan),
	    "applying");
	z = session(fx);
	d = session(fx);

	/* z: an approval of the pool, which holds it */
	run(z, "BEGIN");
	run(z, "SET LOCAL lock_timeout = '5s'");
	run(z, fx_str(fx, "SELECT 1 FROM pools WHERE id = %s FOR NO KEY UPDATE", pool));
	/* d: the step waits for the pool */
	if (!PQsendQuery(d, fx_str(fx, "SELECT defrag_step(%s, 0.05, 900)", plan)))
		fail_msg("send: %s", PQerrorMessage(d));
	assert_true(wait_blocked(fx, d, PQbackendPID(d), PQbackendPID(z)));
	/* z takes the GPUs and the node without waiting for d */
	run(z,
	    fx_str(fx, "SELECT 1 FROM gpus WHERE node_id = %s ORDER BY id FOR NO KEY UPDATE",
		node));
	run(z, fx_str(fx, "UPDATE nodes SET updated_at = now() WHERE id = %s", node));
	run(z, "COMMIT");
	assert_string_equal(finish(fx, d), "");
	/* the step ran after it: the new allocation reserved on the other GPU */
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM defrag_moves WHERE plan_id = $1::int8", plan),
	    "creating");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE pool_id = $1::int8 "
			     "AND replaces IS NOT NULL AND start = 0",
			     pool),
	    1);
	PQfinish(z);
	PQfinish(d);
}

/*
 * The outbox rows of one node are locked in id order (migration 0027),
 * whatever plan each statement runs. Two rows, the first stored after the
 * second (it was updated); z holds the first; a heartbeat whose plan
 * visits the rows in id order waits for it; the pusher's outbox_done,
 * planned as a scan of the table (where the second row comes first),
 * comes next. With each UPDATE locking as it visited, outbox_done held the
 * second row and waited for the first, which the heartbeat got when z
 * committed, then waited for the second: a deadlock. Locking in id order
 * first, outbox_done waits for the first row holding nothing.
 */
static void
test_outbox_rows_in_id_order(void **state)
{
	struct fixture *fx = *state;
	PGconn *z, *h, *d;
	const char *node, *first, *second;

	fx_sql_exec(fx, "INSERT INTO clusters (name) VALUES ('lob')");
	node = fx_sql_text(fx,
	    "INSERT INTO nodes (cluster_id, name, hostname, cpu_millicores, memory_bytes, "
	    "managed_by_agent, agent_heartbeat_at, generation) SELECT id, 'lob-1', 'lob-1', 0, 0, "
	    "true, now(), 2 FROM clusters WHERE name = 'lob' RETURNING id::text");
	first = fx_sql_text(fx,
	    "INSERT INTO outbox (node_id, generation) VALUES ($1::int8, 1) RETURNING id::text",
	    node);
	second = fx_sql_text(fx,
	    "INSERT INTO outbox (node_id, generation, next_attempt_at) SELECT $1::int8, 2, "
	    "next_attempt_at FROM outbox WHERE id = $2::int8 RETURNING id::text",
	    node, first);
	/* the first row's new version lies after the second in the table */
	fx_sql_exec(fx, "UPDATE outbox SET last_error = 'moved' WHERE id = $1::int8", first);
	z = session(fx);
	h = session(fx);
	d = session(fx);
	run(h, "SET enable_seqscan = off");
	run(h, "SET enable_bitmapscan = off");
	run(d, "SET enable_indexscan = off");
	run(d, "SET enable_indexonlyscan = off");
	run(d, "SET enable_bitmapscan = off");

	run(z, "BEGIN");
	run(z, fx_str(fx, "SELECT 1 FROM outbox WHERE id = %s FOR NO KEY UPDATE", first));
	if (!PQsendQuery(h, fx_str(fx, "SELECT agent_heartbeat(%s, 2)", node)))
		fail_msg("send: %s", PQerrorMessage(h));
	assert_true(wait_blocked(fx, h, PQbackendPID(h), PQbackendPID(z)));
	if (!PQsendQuery(d, fx_str(fx, "SELECT outbox_done(%s, 2)", node)))
		fail_msg("send: %s", PQerrorMessage(d));
	assert_true(wait_blocked(fx, d, PQbackendPID(d), 0));
	run(z, "COMMIT");
	assert_string_equal(finish(fx, h), "");
	assert_string_equal(finish(fx, d), "");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM outbox WHERE id IN ($1::int8, $2::int8) "
			     "AND delivered_at IS NOT NULL AND last_error IS NULL",
			     first, second),
	    2);
	PQfinish(z);
	PQfinish(h);
	PQfinish(d);
}

/* Create pool name (one 1g.10gb in cluster ln) and approve it; its id. */
static const char *
small_pool(struct fixture *fx, const char *name)
{
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects/lr/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"%s\",\"items\":[\"H100-80GB/1g.10gb=1\"],"
	    "\"cluster\":\"ln\",\"justification\":\"t\"}",
	    name);
	assert_int_equal(r->status, 201);
	assert_int_equal(fx_request(fx, fx->admin_token, "POST",
			     fx_str(fx, "/v1/pool-requests/%lld/approve",
				 (long long)fx_json_int(r->json, "id")),
			     "{}")
			     ->status,
	    200);
	return fx_sql_text(fx, "SELECT id::text FROM pools WHERE name = $1", name);
}

/*
 * A status report locks only the pools whose allocations it changes
 * (migration 0030), decided by a read without locks, and changes no
 * allocation of another pool. Two pools on one GPU, both instances
 * listed; q2's allocation waits for its instance. z holds q2: the report
 * r read that it changes q2 only and waits for q2 (its first lock). Then
 * y, an approval of q1, takes q1, and q1's allocation turns provisioning
 * (a change r's read did not see). r then takes the GPU and the node and
 * finishes without q1: it readies q2's allocation and leaves q1's for the
 * next report (readying it would change a pool it does not hold; waiting
 * for q1 after the GPU would deadlock with y, which wants the GPU next).
 * With 0027's function r locked q1 before q2, and y timed out.
 */
static void
test_report_leaves_pools_it_did_not_lock(void **state)
{
	struct fixture *fx = *state;
	PGconn *z, *y, *r;
	const char *q1, *q2, *node;

	fx_fleet(fx, "ln", "H100-80GB", 1, 1, true);
	q1 = small_pool(fx, "q1");
	q2 = small_pool(fx, "q2");
	node = fx_sql_text(fx, "SELECT id::text FROM nodes WHERE name = 'ln-n0'");
	/* both ready with their instances' UUIDs, their requests settled; q2's waits */
	fx_sql_exec(fx,
	    "UPDATE allocations SET device_uuid = 'MIG-' || id WHERE pool_id IN ($1::int8, $2::int8)",
	    q1, q2);
	fx_sql_exec(fx,
	    "UPDATE pool_requests SET state = 'fulfilled' WHERE pool_id IN ($1::int8, $2::int8)",
	    q1, q2);
	fx_sql_exec(fx, "UPDATE allocations SET state = 'provisioning' WHERE pool_id = $1::int8",
	    q2);
	z = session(fx);
	y = session(fx);
	r = session(fx);
	run(y, "SET lock_timeout = '5s'");
	run(r, "SET lock_timeout = '5s'");

	run(z, "BEGIN");
	run(z, fx_str(fx, "SELECT 1 FROM pools WHERE id = %s FOR NO KEY UPDATE", q2));
	if (!PQsendQuery(r, fx_str(fx, REPORT_ALL, node, node)))
		fail_msg("send: %s", PQerrorMessage(r));
	assert_true(wait_blocked(fx, r, PQbackendPID(r), PQbackendPID(z)));
	run(y, "BEGIN");
	run(y, fx_str(fx, "SELECT 1 FROM pools WHERE id = %s FOR NO KEY UPDATE", q1));
	fx_sql_exec(fx, "UPDATE allocations SET state = 'provisioning' WHERE pool_id = $1::int8",
	    q1);
	run(z, "COMMIT");
	assert_string_equal(finish(fx, r), "");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM allocations WHERE pool_id = $1::int8", q2),
	    "ready");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM allocations WHERE pool_id = $1::int8", q1),
	    "provisioning");
	/* y goes on: the GPU and the node are free */
	run(y,
	    fx_str(fx, "SELECT 1 FROM gpus WHERE node_id = %s ORDER BY id FOR NO KEY UPDATE",
		node));
	run(y, fx_str(fx, "UPDATE nodes SET updated_at = now() WHERE id = %s", node));
	run(y, "COMMIT");
	/* the next report readies q1's */
	assert_string_equal(fx_sql_text(fx,
				fx_str(fx, "SELECT (" REPORT_ALL ")->>'ready'", node, node)),
	    "1");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM allocations WHERE pool_id = $1::int8", q1),
	    "ready");
	PQfinish(z);
	PQfinish(y);
	PQfinish(r);
}

/*
 * The tests set request states by SQL and expect a given session to
 * settle them; the expiry worker's pass (migration 0032) would settle an
 * approved request whose layout is done too, so it runs hourly here.
 */
static int
group_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_EXPIRY_INTERVAL=3600", NULL };
	const struct fixture_options opts = { .server_env = env };
	struct fixture *fx;

	if (fixture_create(&opts, &fx) != 0)
		return -1;
	*state = fx;
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heartbeat_after_liveness),
		cmocka_unit_test(test_reports_settle_what_they_locked),
		cmocka_unit_test(test_defrag_step_takes_the_pool_first),
		cmocka_unit_test(test_outbox_rows_in_id_order),
		cmocka_unit_test(test_report_leaves_pools_it_did_not_lock),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
