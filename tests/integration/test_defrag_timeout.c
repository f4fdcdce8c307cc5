/*
 * test_defrag_timeout.c - a node agent that stops while a defragmentation
 * move waits for it to release the old instance (docs/capacity.md
 * "Applying a plan"; GPUPOOL_DEFRAG_MOVE_TIMEOUT 10 s): the move no longer
 * waits for ever. Make before break, the new instance ready and the old
 * one's agent stopped: the move is done (release_pending) and the plan
 * applied; the old allocation stays releasing until the agent is back,
 * which destroys it. Break before make, the agent stopped before it
 * destroyed the old instance: the move fails (agent_timeout), the plan
 * fails with its error, the target (free of the old one's slices) is
 * reserved anyway, and the agent, back, destroys the old instance and
 * creates the new one: the pool stays whole, nothing doubled. Break before
 * make onto the old instance's own slices: nothing can be reserved, the
 * plan's error says the pool is one instance short, and so it is once the
 * agent has released the old one.
 */
#include "fixture.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *op, *alice;

static int64_t
submit(struct fixture *fx, const char *action, const char *pool, const char *items)
{
	struct gp_client_response *r;

	r = fx_request(fx, alice, "POST", "/v1/projects/kt/pool-requests",
	    "{\"action\":\"%s\",\"pool\":\"%s\",\"items\":[%s],\"justification\":\"t\"}", action,
	    pool, items);
	assert_status(r, 201);
	return fx_json_int(r->json, "id");
}

static const char *
id_s(struct fixture *fx, int64_t id)
{
	return fx_str(fx, "%lld", (long long)id);
}

/* Poll sql until it answers want (text), at most seconds; returns the last answer. */
static const char *
wait_text(struct fixture *fx, int seconds, const char *want, const char *sql, const char *p1)
{
	const char *got = NULL;

	for (int i = 0; i < seconds * 10; i++) {
		got = p1 != NULL ? fx_sql_text(fx, sql, p1) : fx_sql_text(fx, sql);
		if (got != NULL && strcmp(got, want) == 0)
			break;
		usleep(100000);
	}
	return got;
}

static void
wait_settled(struct fixture *fx)
{
	assert_string_equal(wait_text(fx, 40, "0",
				"SELECT count(*)::text FROM allocations WHERE state IN ('reserved', "
				"'provisioning', 'releasing', 'failed')",
				NULL),
	    "0");
}

static void
wait_node(struct fixture *fx, const char *name)
{
	assert_string_equal(wait_text(fx, 40, "1",
				"SELECT count(g.id)::text FROM nodes n JOIN gpus g ON g.node_id = n.id "
				"WHERE n.name = $1 AND n.status = 'ready'",
				name),
	    "1");
}

/* A stored plan (the newest's body) moving allocation id to start on gpu_id, no idle window. */
static int64_t
move_plan(struct fixture *fx, int64_t id, int64_t gpu_id, int start, bool mbb)
{
	const char *mv = fx_sql_text(fx,
	    "SELECT jsonb_build_array(jsonb_build_object('allocation', a.id, 'project', 'kt', "
	    "'pool', p.name, 'profile', a.profile, 'from', jsonb_build_object('node', n.name, "
	    "'gpu_uuid', g.uuid, 'gpu_index', g.gpu_index, 'start', a.start), 'to', "
	    "jsonb_build_object('node', n.name, 'gpu_uuid', t.uuid, 'gpu_index', t.gpu_index, "
	    "'start', $3::int), 'make_before_break', $4::bool))::text FROM allocations a "
	    "JOIN pools p ON p.id = a.pool_id "
	    "JOIN gpus g ON g.id = a.gpu_id JOIN nodes n ON n.id = g.node_id, gpus t "
	    "WHERE a.id = $1 AND t.id = $2",
	    id_s(fx, id), id_s(fx, gpu_id), fx_str(fx, "%d", start), mbb ? "true" : "false");

	return fx_sql_int64(fx,
	    "INSERT INTO defrag_plans (created_by, cluster_id, goal, moves, body) "
	    "SELECT created_by, cluster_id, goal, jsonb_array_length($1::jsonb), "
	    "jsonb_set(jsonb_set(body, '{moves}', $1::jsonb), '{idle_minutes}', '0') "
	    "FROM defrag_plans ORDER BY id DESC LIMIT 1 RETURNING id",
	    mv);
}

static void
apply_ok(struct fixture *fx, int64_t id)
{
	struct gp_client_response *r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/capacity/defrag-plans/%lld/apply", (long long)id), NULL);

	assert_status(r, 202);
}

/* The plan's state once finished (at most 40 s), else its state as it stands. */
static const char *
plan_end(struct fixture *fx, int64_t id)
{
	wait_text(fx, 40, "t",
	    "SELECT (finished_at IS NOT NULL)::text::char FROM defrag_plans WHERE id = $1",
	    id_s(fx, id));
	return fx_sql_text(fx, "SELECT state FROM defrag_plans WHERE id = $1", id_s(fx, id));
}

static int64_t
live_of(struct fixture *fx, const char *pool)
{
	return fx_sql_int64(fx,
	    "SELECT count(*) FROM allocations a JOIN pools p ON p.id = "
	    "a.pool_id WHERE p.name = $1 AND a.state <> 'released'",
	    pool);
}

static void
test_release_timeouts(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { "GPUPOOL_DEFRAG_APPLY_INTERVAL=1",
		"GPUPOOL_DEFRAG_MOVE_TIMEOUT=10", NULL };
	struct gp_client_response *r;
	struct fx_server *srv;
	pid_t agent0, agent1;
	int64_t x, y, gpu0, gpu1, p, q, nx, ny;
	int free0;

	assert_int_equal(fixture_server_stop(fx, fx->server), 0);
	srv = fixture_server_start(fx, env);
	assert_non_null(srv);
	fx->server = srv;
	op = fixture_create_user(fx, "top", "operator");
	alice = fixture_create_user(fx, "talice", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"kt\",\"display_name\":\"kt\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/kt/members/talice",
	    "{\"role\":\"owner\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"kt\"}");
	assert_status(r, 201);
	agent0 = fx_agent_spawn(fx, srv, "kt", "kt-n0",
	    "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":1}]}", NULL);
	wait_node(fx, "kt-n0");
	r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve",
		(long long)submit(fx, "create", "tp", "\"H100-80GB/1g.10gb=3\"")),
	    "{}");
	assert_status(r, 200);
	wait_settled(fx);
	/* (a stored plan whose body the synthetic ones copy) */
	r = fx_request(fx, op, "POST", "/v1/capacity/defrag-plans",
	    "{\"goal\":\"free_gpus\",\"cluster\":\"kt\",\"max_moves\":0}");
	assert_status(r, 201);
	agent1 = fx_agent_spawn(fx, srv, "kt", "kt-n1",
	    "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":1}]}", NULL);
	wait_node(fx, "kt-n1");
	gpu0 = fx_sql_int64(fx,
	    "SELECT g.id FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = 'kt-n0'");
	gpu1 = fx_sql_int64(fx,
	    "SELECT g.id FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = 'kt-n1'");

	/* make before break to kt-n1; kt-n0's agent stops before it destroys the old one */
	x = fx_sql_int64(fx,
	    "SELECT id FROM allocations WHERE state = 'ready' ORDER BY id LIMIT 1");
	p = move_plan(fx, x, gpu1, 0, true);
	assert_int_equal(kill(agent0, SIGSTOP), 0);
	apply_ok(fx, p);
	assert_string_equal(plan_end(fx, p), "applied");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state || ':' || reason FROM defrag_moves WHERE plan_id = $1",
				id_s(fx, p)),
	    "done:release_pending");
	nx = fx_sql_int64(fx, "SELECT new_allocation_id FROM defrag_moves WHERE plan_id = $1",
	    id_s(fx, p));
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(state, ',' ORDER BY id) FROM allocations "
				"WHERE id IN ($1, $2)",
				id_s(fx, x), id_s(fx, nx)),
	    "releasing,ready");
	fx_assert_pool_invariants(fx);
	/* the agent back: the old instance released by the ordinary path, the pool whole */
	assert_int_equal(kill(agent0, SIGCONT), 0);
	wait_settled(fx);
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM allocations WHERE id = $1",
				id_s(fx, x)),
	    "released");
	assert_int_equal(live_of(fx, "tp"), 3);
	fx_assert_pool_invariants(fx);

	/* break before make on kt-n0 to slices free of the old instance; the agent stops first */
	y = fx_sql_int64(fx,
	    "SELECT id FROM allocations WHERE state = 'ready' AND gpu_id = $1 ORDER BY id LIMIT 1",
	    id_s(fx, gpu0));
	free0 = (int)fx_sql_int64(fx,
	    "SELECT s FROM generate_series(0, 6) s WHERE NOT EXISTS (SELECT 1 FROM allocations a "
	    "WHERE a.gpu_id = $1 AND a.state <> 'released' "
	    "AND int4range(a.start, a.start + a.size) && int4range(s, s + 1)) ORDER BY s LIMIT 1",
	    id_s(fx, gpu0));
	q = move_plan(fx, y, gpu0, free0, false);
	assert_int_equal(kill(agent0, SIGSTOP), 0);
	apply_ok(fx, q);
	assert_string_equal(plan_end(fx, q), "failed");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state || ':' || reason FROM defrag_moves WHERE plan_id = $1",
				id_s(fx, q)),
	    "failed:agent_timeout");
	assert_string_equal(fx_sql_text(fx,
				"SELECT (error LIKE 'move 0: the node agent did not release the old "
				"instance within 10 s; the new one is reserved%')::text FROM "
				"defrag_plans WHERE id = $1",
				id_s(fx, q)),
	    "true");
	ny = fx_sql_int64(fx, "SELECT new_allocation_id FROM defrag_moves WHERE plan_id = $1",
	    id_s(fx, q));
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(state || '@' || start, ',' ORDER BY id) FROM "
				"allocations WHERE id IN ($1, $2)",
				id_s(fx, y), id_s(fx, ny)),
	    fx_str(fx, "releasing@%s,reserved@%d",
		fx_sql_text(fx, "SELECT start::text FROM allocations WHERE id = $1", id_s(fx, y)),
		free0));
	fx_assert_pool_invariants(fx);
	/* the agent back: the old one destroyed, the new one created, nothing doubled */
	assert_int_equal(kill(agent0, SIGCONT), 0);
	wait_settled(fx);
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(state, ',' ORDER BY id) FROM allocations "
				"WHERE id IN ($1, $2)",
				id_s(fx, y), id_s(fx, ny)),
	    "released,ready");
	assert_int_equal(live_of(fx, "tp"), 3);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'tp'"),
	    "active");
	fx_assert_pool_invariants(fx);

	/* break before make onto the old instance's own slices: nothing to reserve, one short */
	y = fx_sql_int64(fx,
	    "SELECT id FROM allocations WHERE state = 'ready' AND gpu_id = $1 ORDER BY id LIMIT 1",
	    id_s(fx, gpu0));
	q = move_plan(fx, y, gpu0,
	    (int)fx_sql_int64(fx, "SELECT start FROM allocations WHERE id = $1", id_s(fx, y)),
	    false);
	assert_int_equal(kill(agent0, SIGSTOP), 0);
	apply_ok(fx, q);
	assert_string_equal(plan_end(fx, q), "failed");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state || ':' || reason || ':' || "
				"coalesce(new_allocation_id::text, 'none') FROM defrag_moves "
				"WHERE plan_id = $1",
				id_s(fx, q)),
	    "failed:agent_timeout:none");
	assert_string_equal(fx_sql_text(fx,
				"SELECT (error LIKE '%the pool is one instance short once it is "
				"released')::text FROM defrag_plans WHERE id = $1",
				id_s(fx, q)),
	    "true");
	assert_int_equal(kill(agent0, SIGCONT), 0);
	wait_settled(fx);
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM allocations WHERE id = $1",
				id_s(fx, y)),
	    "released");
	/* (as docs/capacity.md says: two instances for three items, the pool active) */
	assert_int_equal(live_of(fx, "tp"), 2);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'tp'"),
	    "active");
	assert_int_equal(fx_agent_stop(fx, agent1), 0);
	assert_int_equal(fx_agent_stop(fx, agent0), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_release_timeouts),
	};

	return fixture_run_tests(tests);
}
