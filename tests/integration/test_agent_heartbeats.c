/*
 * test_agent_heartbeats.c - node-agent heartbeats by group commit
 * (workers/heartbeat_queue.c, migration 0029), over HTTP against a real
 * gpupoold, 200 nodes with node tokens:
 *
 *  - 200 heartbeats at once, while the nodes table is held (LOCK TABLE
 *    ... SHARE on a separate session) so that they all queue: none is
 *    answered before the batch commits, then every one 200 with its
 *    node's generation, every node's agent_heartbeat_at advanced, in a
 *    handful of statements (/metrics);
 *  - a node whose row another transaction holds: the heartbeats queued
 *    with it are answered while the row is held; its own is answered
 *    (alone, agent_heartbeat) once the row is free;
 *  - the heartbeats the batch leaves to agent_heartbeat (an unknown node
 *    turns ready, an advancing observed generation marks the outbox row
 *    delivered, two heartbeats of one node at once) in a burst with
 *    common ones;
 *  - hostile bodies: 400/422 problems, nothing queued or written;
 *  - a batch that times out (the nodes table held past a 1 s
 *    statement_timeout): every heartbeat in it answered 503 at once,
 *    not sent alone to wait a timeout each, four at a time;
 *  - the batch's backend terminated mid-statement: each heartbeat
 *    answered once, 200 only when committed;
 *  - a server stopped (SIGTERM) with heartbeats queued: each answered
 *    before it exits 0.
 */
#include "fixture.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NODES 200

struct hb {
	const char *base_url;
	const char *token;
	char body[64]; /* "": no body */
	long status;   /* 0: transport error */
	int64_t generation;
	atomic_bool done;
	pthread_t t;
};

static atomic_int finished;

static int64_t node_ids[NODES];

static const char *
token_of(struct fixture *fx, int i)
{
	return fx_str(fx, "gpn_hbtest_%lld", (long long)node_ids[i]);
}

static void *
hb_thread(void *arg)
{
	struct hb *h = arg;
	struct gp_client *c = gp_client_create(h->base_url, NULL);
	struct gp_client_response r;

	gp_client_set_retries(c, 0);
	memset(&r, 0, sizeof(r));
	if (gp_client_set_token(c, h->token) == 0 &&
	    gp_client_request(c, "POST", "/v1/agent/heartbeat", h->body[0] ? h->body : NULL,
		strlen(h->body), NULL, &r) == 0) {
		h->status = r.status;
		if (r.json != NULL && fx_json_has(r.json, "generation"))
			h->generation = json_object_get_int64(fx_json(r.json, "generation"));
	}
	gp_client_response_free(&r);
	gp_client_destroy(c);
	atomic_store(&h->done, true);
	atomic_fetch_add(&finished, 1);
	return NULL;
}

/* Node i's heartbeat, with body ("": none); hb_launch sends it. */
static void
hb_prepare(struct fixture *fx, struct hb *h, int i, const char *body)
{
	h->base_url = fx->server->base_url;
	h->token = token_of(fx, i);
	snprintf(h->body, sizeof(h->body), "%s", body);
	h->status = 0;
	h->generation = -1;
	atomic_store(&h->done, false);
}

/* POST it on a thread of its own. */
static void
hb_launch(struct hb *h)
{
	assert_int_equal(pthread_create(&h->t, NULL, hb_thread, h), 0);
}

/* Node i's heartbeat, with the observed generation it has already (or none). */
static void
hb_prepare_seen(struct fixture *fx, struct hb *h, int i, bool observed)
{
	hb_prepare(fx, h, i,
	    observed ? fx_str(fx, "{\"observed_generation\":%lld}",
			   (long long)fx_sql_int64(fx,
			       "SELECT observed_generation FROM nodes WHERE id = $1",
			       fx_str(fx, "%lld", (long long)node_ids[i])))
		     : "");
}

/* The heartbeat of node i was answered 200 with the node's generation. */
static void
hb_assert(struct fixture *fx, struct hb *h, int i)
{
	pthread_join(h->t, NULL);
	assert_int_equal(h->status, 200);
	assert_int_equal(h->generation,
	    fx_sql_int64(fx, "SELECT generation FROM nodes WHERE id = $1",
		fx_str(fx, "%lld", (long long)node_ids[i])));
}

static int64_t
metric(struct fixture *fx, const char *name)
{
	struct gp_client_response *r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	size_t len = strlen(name);

	assert_status(r, 200);
	for (const char *p = r->body; p != NULL && *p != '\0';
	     p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, name, len) == 0 && p[len] == ' ')
			return strtoll(p + len + 1, NULL, 10);
	fail_msg("no metric %s", name);
	return -1;
}

static PGconn *
session(struct fixture *fx)
{
	PGconn *c = PQconnectdb(fx->db_url);

	if (PQstatus(c) != CONNECTION_OK)
		fail_msg("connect: %s", PQerrorMessage(c));
	return c;
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

/* Poll (30 s) until cond_sql, with one text parameter, counts want. */
static void
wait_count(struct fixture *fx, const char *what, const char *sql, const char *arg, int64_t want)
{
	struct timespec d = { 0, 20 * 1000 * 1000 };

	for (int i = 0; i < 1500; i++) {
		if (fx_sql_int64(fx, sql, arg) == want)
			return;
		nanosleep(&d, NULL);
	}
	fail_msg("%s: not reached in 30 s", what);
}

/* Poll (30 s) until the server's heartbeats_waiting gauge is want. */
static void
wait_waiting(struct fixture *fx, int64_t want)
{
	struct timespec d = { 0, 20 * 1000 * 1000 };

	for (int i = 0; i < 1500; i++) {
		if (metric(fx, "gpupool_heartbeats_waiting") == want)
			return;
		nanosleep(&d, NULL);
	}
	fail_msg("%lld heartbeats never waited together", (long long)want);
}

/* Poll (30 s) until finished reaches want. */
static void
wait_finished(int want)
{
	struct timespec d = { 0, 20 * 1000 * 1000 };

	for (int i = 0; i < 1500; i++) {
		if (atomic_load(&finished) >= want)
			return;
		nanosleep(&d, NULL);
	}
	fail_msg("only %d of %d heartbeats answered in 30 s", atomic_load(&finished), want);
}

static int group_setup_nodes(struct fixture *fx);

static int
group_setup(void **state)
{
	/* a held row is held for seconds on a loaded machine: no 503 from the wait */
	static const char *const env[] = { "GPUPOOL_STATEMENT_TIMEOUT_MS=60000", NULL };
	struct fixture_options opts = { .server_env = env };
	struct fixture *fx;

	if (fixture_create(&opts, &fx) < 0)
		return -1;
	*state = fx;
	return group_setup_nodes(fx);
}

/* NODES nodes with node tokens, generations distinct, each seen the one before. */
static int
group_setup_nodes(struct fixture *fx)
{
	fx_fleet_register(fx, "hb", "H100-80GB", NODES, 0);
	for (int i = 0; i < NODES; i++)
		node_ids[i] = fx_sql_int64(fx, "SELECT id FROM nodes WHERE name = $1",
		    fx_str(fx, "hb-n%d", i));
	fx_sql_exec(fx,
	    "INSERT INTO node_tokens (node_id, digest) SELECT id, "
	    "sha256(convert_to('gpn_hbtest_' || id, 'UTF8')) FROM nodes WHERE name LIKE 'hb-n%'");
	/* distinct generations; the agents have seen the one before */
	fx_sql_exec(fx,
	    "UPDATE nodes SET generation = 3 + id % 5, observed_generation = 2 + id % 5 "
	    "WHERE name LIKE 'hb-n%'");
	return 0;
}

static void
age_heartbeats(struct fixture *fx)
{
	fx_sql_exec(fx,
	    "UPDATE nodes SET agent_heartbeat_at = now() - interval '1 day' "
	    "WHERE name LIKE 'hb-n%'");
}

static void
test_batched(void **state)
{
	struct fixture *fx = *state;
	struct hb *h = calloc(NODES, sizeof(*h));
	int64_t batches0 = metric(fx, "gpupool_heartbeat_batches_total");
	int64_t items0 = metric(fx, "gpupool_heartbeats_total");
	int64_t done0 = metric(fx, "gpupool_heartbeat_batch_items_total");
	int64_t alone0 = metric(fx, "gpupool_heartbeats_alone_total");
	PGconn *s = session(fx);

	age_heartbeats(fx);
	atomic_store(&finished, 0);
	/* the batch statement waits for the table: everything queues behind it */
	for (int i = 0; i < NODES; i++)
		hb_prepare_seen(fx, &h[i], i, i % 2 == 1);
	run(s, "BEGIN");
	run(s, "LOCK TABLE nodes IN SHARE MODE");
	for (int i = 0; i < NODES; i++)
		hb_launch(&h[i]);
	wait_waiting(fx, NODES);
	assert_int_equal(atomic_load(&finished), 0);
	run(s, "COMMIT");
	for (int i = 0; i < NODES; i++)
		hb_assert(fx, &h[i], i);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE name LIKE 'hb-n%' "
			     "AND agent_heartbeat_at > now() - interval '1 hour'"),
	    NODES);
	/* nothing else moved: observed generations as they were */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE name LIKE 'hb-n%' "
			     "AND observed_generation = generation - 1 AND status = 'ready'"),
	    NODES);
	assert_int_equal(metric(fx, "gpupool_heartbeats_total") - items0, NODES);
	assert_int_equal(metric(fx, "gpupool_heartbeat_batch_items_total") - done0, NODES);
	assert_int_equal(metric(fx, "gpupool_heartbeats_alone_total") - alone0, 0);
	/* the first batch (waiting), the second worker's (half a batch), the rest */
	assert_true(metric(fx, "gpupool_heartbeat_batches_total") - batches0 <= 4);
	assert_int_equal(metric(fx, "gpupool_heartbeats_waiting"), 0);
	PQfinish(s);
	free(h);
}

#define OTHERS 40

static void
test_locked_node(void **state)
{
	struct fixture *fx = *state;
	struct hb *h = calloc(OTHERS + 1, sizeof(*h));
	int64_t alone0 = metric(fx, "gpupool_heartbeats_alone_total");
	const char *locked = fx_str(fx, "%lld", (long long)node_ids[0]);
	PGconn *s = session(fx);
	PGresult *r;
	const char *p[1] = { locked };

	age_heartbeats(fx);
	atomic_store(&finished, 0);
	for (int i = 0; i <= OTHERS; i++)
		hb_prepare_seen(fx, &h[i], i, i % 2 == 0);
	run(s, "BEGIN");
	r = PQexecParams(s, "SELECT 1 FROM nodes WHERE id = $1 FOR NO KEY UPDATE", 1, NULL, p, NULL,
	    NULL, 0);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	PQclear(r);
	for (int i = 0; i <= OTHERS; i++)
		hb_launch(&h[i]);
	/* the others are answered while node 0's row is held */
	wait_finished(OTHERS);
	for (int i = 1; i <= OTHERS; i++)
		hb_assert(fx, &h[i], i);
	if (atomic_load(&h[0].done))
		fail_msg("node 0 answered %ld (generation %lld) while its row was held",
		    h[0].status, (long long)h[0].generation);
	/* node 0's went alone and waits for the row, on the holder */
	wait_count(fx, "node 0's heartbeat waits for its row",
	    "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT agent_heartbeat(%' "
	    "AND wait_event_type = 'Lock' AND $1::int = ANY (pg_blocking_pids(pid))",
	    fx_str(fx, "%d", PQbackendPID(s)), 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE id = $1 "
			     "AND agent_heartbeat_at < now() - interval '1 hour'",
			     locked),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE name LIKE 'hb-n%' "
			     "AND agent_heartbeat_at > now() - interval '1 hour'"),
	    OTHERS);
	run(s, "COMMIT");
	hb_assert(fx, &h[0], 0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE id = $1 "
			     "AND agent_heartbeat_at > now() - interval '1 hour'",
			     locked),
	    1);
	assert_true(metric(fx, "gpupool_heartbeats_alone_total") - alone0 >= 1);
	PQfinish(s);
	free(h);
}

#define PLAIN 20

static void
test_alone_paths(void **state)
{
	struct fixture *fx = *state;
	struct hb *h = calloc(PLAIN + 4, sizeof(*h));
	const char *unknown = fx_str(fx, "%lld", (long long)node_ids[50]);
	const char *advancing = fx_str(fx, "%lld", (long long)node_ids[51]);
	int64_t alone0 = metric(fx, "gpupool_heartbeats_alone_total");
	int64_t gen;

	age_heartbeats(fx);
	atomic_store(&finished, 0);
	fx_sql_exec(fx, "UPDATE nodes SET status = 'unknown', status_reason = 'test' WHERE id = $1",
	    unknown);
	/* a desired state the agent has not confirmed (the pusher leaves it a day) */
	gen = fx_sql_int64(fx, "SELECT generation FROM nodes WHERE id = $1", advancing);
	fx_sql_exec(fx,
	    "INSERT INTO outbox (node_id, generation, next_attempt_at) "
	    "VALUES ($1, $2, now() + interval '1 day')",
	    advancing, fx_str(fx, "%lld", (long long)gen));
	for (int i = 0; i < PLAIN; i++)
		hb_prepare_seen(fx, &h[i], 60 + i, i % 2 == 0);
	hb_prepare(fx, &h[PLAIN], 50, "");
	/* the agent confirms the new generation */
	hb_prepare(fx, &h[PLAIN + 1], 51,
	    fx_str(fx, "{\"observed_generation\":%lld}", (long long)gen));
	/* two heartbeats of one node at once */
	hb_prepare(fx, &h[PLAIN + 2], 52, "");
	hb_prepare_seen(fx, &h[PLAIN + 3], 52, true);
	for (int i = 0; i < PLAIN + 4; i++)
		hb_launch(&h[i]);
	for (int i = 0; i < PLAIN; i++)
		hb_assert(fx, &h[i], 60 + i);
	hb_assert(fx, &h[PLAIN], 50);
	hb_assert(fx, &h[PLAIN + 1], 51);
	hb_assert(fx, &h[PLAIN + 2], 52);
	hb_assert(fx, &h[PLAIN + 3], 52);
	assert_string_equal(fx_sql_text(fx,
				"SELECT concat(status, '/', coalesce(status_reason, '-')) FROM nodes "
				"WHERE id = $1",
				unknown),
	    "ready/-");
	assert_int_equal(fx_sql_int64(fx, "SELECT observed_generation FROM nodes WHERE id = $1",
			     advancing),
	    gen);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM outbox WHERE node_id = $1 "
			     "AND delivered_at IS NOT NULL AND last_error IS NULL",
			     advancing),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE id = ANY ($1::int8[]) "
			     "AND agent_heartbeat_at > now() - interval '1 hour'",
			     fx_str(fx, "{%lld,%lld,%lld}", (long long)node_ids[50],
				 (long long)node_ids[51], (long long)node_ids[52])),
	    3);
	/* the unknown node and the confirmation at least */
	assert_true(metric(fx, "gpupool_heartbeats_alone_total") - alone0 >= 2);
	free(h);
}

/* A server whose statements time out after 1 s, the same 200 nodes. */
static int
timeout_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_STATEMENT_TIMEOUT_MS=1000", NULL };
	struct fixture_options opts = { .server_env = env };

	if (fixture_create(&opts, (struct fixture **)state) < 0)
		return -1;
	return group_setup_nodes(*state);
}

/*
 * A batch that fails on a statement timeout (here: the nodes table held
 * in SHARE mode by another session, as a migration's or an operator's
 * lock would) fails its heartbeats with it, 503 with Retry-After, as
 * each heartbeat's own transaction did before group commit: sent alone
 * one after another on the four alone workers, each would wait its own
 * timeout (200 heartbeats: 50 s, past every agent's patience, while
 * more queue behind them).
 */
static void
test_batch_timeout(void **state)
{
	struct fixture *fx = *state;
	struct hb *h = calloc(NODES, sizeof(*h));
	PGconn *s = session(fx);
	struct timespec d = { 0, 20 * 1000 * 1000 };
	int answered = 0;

	age_heartbeats(fx);
	atomic_store(&finished, 0);
	for (int i = 0; i < NODES; i++)
		hb_prepare(fx, &h[i], i, "");
	run(s, "BEGIN");
	run(s, "LOCK TABLE nodes IN SHARE MODE");
	for (int i = 0; i < NODES; i++)
		hb_launch(&h[i]);
	/* all answered while the table is still held (20 s for one second's timeout) */
	for (int i = 0; i < 1000 && (answered = atomic_load(&finished)) < NODES; i++)
		nanosleep(&d, NULL);
	run(s, "COMMIT");
	for (int i = 0; i < NODES; i++)
		pthread_join(h[i].t, NULL);
	if (answered < NODES)
		fail_msg("only %d of %d heartbeats answered 20 s into a 1 s statement timeout",
		    answered, NODES);
	for (int i = 0; i < NODES; i++)
		assert_int_equal(h[i].status, 503);
	/* nothing committed; the next heartbeats go through */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE name LIKE 'hb-n%' "
			     "AND agent_heartbeat_at > now() - interval '1 hour'"),
	    0);
	atomic_store(&finished, 0);
	for (int i = 0; i < 10; i++) {
		hb_prepare(fx, &h[i], i, "");
		hb_launch(&h[i]);
	}
	for (int i = 0; i < 10; i++)
		hb_assert(fx, &h[i], i);
	PQfinish(s);
	free(h);
}

#define FEW 40

/* Poll (30 s) until n backends run agent_heartbeats() waiting for a lock. */
static void
wait_batch_waits(struct fixture *fx)
{
	struct timespec d = { 0, 20 * 1000 * 1000 };

	for (int i = 0; i < 1500; i++) {
		if (fx_sql_int64(fx,
			"SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%agent_heartbeats(%' "
			"AND wait_event_type = 'Lock'") >= 1)
			return;
		nanosleep(&d, NULL);
	}
	fail_msg("no heartbeat batch waits for the nodes table");
}

/*
 * The batch's backend dies mid-statement (pg_terminate_backend, as a
 * PostgreSQL restart or an OOM kill would): every heartbeat is answered
 * once, by its alone run on a fresh connection; each one answered 200 was
 * committed (its node's agent_heartbeat_at moved), each other one 503.
 */
static void
test_batch_backend_killed(void **state)
{
	struct fixture *fx = *state;
	struct hb *h = calloc(FEW, sizeof(*h));
	PGconn *s = session(fx);
	int ok = 0;

	age_heartbeats(fx);
	atomic_store(&finished, 0);
	for (int i = 0; i < FEW; i++)
		hb_prepare(fx, &h[i], i, "");
	run(s, "BEGIN");
	run(s, "LOCK TABLE nodes IN SHARE MODE");
	for (int i = 0; i < FEW; i++)
		hb_launch(&h[i]);
	wait_batch_waits(fx);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
			     "WHERE query LIKE '%agent_heartbeats(%' AND wait_event_type = 'Lock'"),
	    1);
	run(s, "COMMIT");
	wait_finished(FEW);
	for (int i = 0; i < FEW; i++) {
		pthread_join(h[i].t, NULL);
		if (h[i].status == 200) {
			ok++;
			assert_int_equal(fx_sql_int64(fx,
					     "SELECT count(*) FROM nodes WHERE id = $1 "
					     "AND agent_heartbeat_at > now() - interval '1 hour'",
					     fx_str(fx, "%lld", (long long)node_ids[i])),
			    1);
		} else {
			assert_int_equal(h[i].status, 503);
		}
	}
	/* the alone runs start at once, the table free a moment later: most go through */
	assert_true(ok > 0);
	PQfinish(s);
	free(h);
}

/*
 * A second server stops (SIGTERM) while heartbeats wait in its queue
 * (the batch held by the nodes table): each is answered before the
 * server exits 0, none dropped with its connection.
 */
static void
test_stop_with_queued(void **state)
{
	struct fixture *fx = *state;
	struct hb *h = calloc(FEW, sizeof(*h));
	PGconn *s = session(fx);
	struct fx_server *b = fixture_server_start(fx, NULL);

	assert_non_null(b);
	age_heartbeats(fx);
	atomic_store(&finished, 0);
	for (int i = 0; i < FEW; i++) {
		hb_prepare(fx, &h[i], i, "");
		h[i].base_url = b->base_url;
	}
	run(s, "BEGIN");
	run(s, "LOCK TABLE nodes IN SHARE MODE");
	for (int i = 0; i < FEW; i++)
		hb_launch(&h[i]);
	wait_batch_waits(fx);
	assert_int_equal(atomic_load(&finished), 0);
	/* SIGTERM while they wait; the lock goes with the statement timeout (1 s) */
	assert_int_equal(fixture_server_stop(fx, b), 0);
	run(s, "COMMIT");
	wait_finished(FEW);
	for (int i = 0; i < FEW; i++) {
		pthread_join(h[i].t, NULL);
		assert_int_equal(h[i].status, 503);
	}
	PQfinish(s);
	free(h);
}

/*
 * Hostile bodies are refused by the handler, before anything is queued:
 * a precise 4xx problem, no heartbeat queued, the node row untouched.
 */
static void
test_hostile_bodies(void **state)
{
	static const struct {
		const char *body;
		long status;
		const char *code;
	} cases[] = {
		{ "[]", 422, "validation_failed" },
		{ "\"x\"", 422, "validation_failed" },
		{ "{", 400, "malformed_json" },
		{ "{\"observed_generation\":-1}", 422, "validation_failed" },
		{ "{\"observed_generation\":\"5\"}", 422, "validation_failed" },
		{ "{\"observed_generation\":1.5}", 422, "validation_failed" },
		{ "{\"observed_generation\":1e30}", 422, "validation_failed" },
		{ "{\"observed_generation\":true}", 422, "validation_failed" },
		{ "{\"observed_generation\":99999999999999999999}", 422, "validation_failed" },
		{ "{\"bogus\":1}", 422, "validation_failed" },
	};
	struct fixture *fx = *state;
	int64_t items0 = metric(fx, "gpupool_heartbeats_total");
	const char *node = fx_str(fx, "%lld", (long long)node_ids[7]);

	age_heartbeats(fx);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_problem(fx_request(fx, token_of(fx, 7), "POST", "/v1/agent/heartbeat", "%s",
				   cases[i].body),
		    cases[i].status, cases[i].code);
	/* nothing queued, nothing written */
	assert_int_equal(metric(fx, "gpupool_heartbeats_total"), items0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE id = $1 "
			     "AND agent_heartbeat_at < now() - interval '1 hour'",
			     node),
	    1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batched),
		cmocka_unit_test(test_locked_node),
		cmocka_unit_test(test_alone_paths),
		cmocka_unit_test(test_hostile_bodies),
	};
	const struct CMUnitTest timeouts[] = {
		cmocka_unit_test(test_batch_timeout),
		cmocka_unit_test(test_batch_backend_killed),
		cmocka_unit_test(test_stop_with_queued),
	};
	int rc = cmocka_run_group_tests(tests, group_setup, fixture_group_teardown);

	if (rc == 0)
		rc = cmocka_run_group_tests(timeouts, timeout_setup, fixture_group_teardown);
	return fixture_exit_status(rc);
}
