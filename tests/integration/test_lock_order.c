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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_heartbeat_after_liveness),
	};

	return fixture_run_tests(tests);
}
