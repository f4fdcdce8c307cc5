/*
 * test_defrag_attack.c - a defragmentation move meets the approvals of its
 * own pool and another plan (docs/capacity.md "Applying a plan"): while a
 * make-before-break move waits for its agent, the pool holds the old
 * instance and the new one, and counts one of them. A shrink of the pool
 * then removes exactly what it asks for (it never chooses both the old and
 * the new instance of a move, which left the pool one instance over its
 * items); a second plan moving the same instance skips it (source_moving)
 * instead of failing its step over and over. Bad ids, bodies, content types
 * and an Idempotency-Key of another plan's cancel change nothing. A
 * break-before-make move beside another plan's move of the same pool
 * recreates its instance (the pool's count is not fooled by the other
 * move's two allocations).
 */
#include "fixture.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *op, *alice;
static struct fx_server *srv;

static int64_t
submit(struct fixture *fx, const char *action, const char *pool, const char *items)
{
	struct gp_client_response *r;

	r = fx_request(fx, alice, "POST", "/v1/projects/ka/pool-requests",
	    "{\"action\":\"%s\",\"pool\":\"%s\"%s%s%s,\"justification\":\"t\"}", action, pool,
	    items ? ",\"items\":[" : "", items ? items : "", items ? "]" : "");
	assert_status(r, 201);
	return fx_json_int(r->json, "id");
}

static void
approve(struct fixture *fx, int64_t id)
{
	struct gp_client_response *r;

	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	assert_status(r, 200);
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
wait_move(struct fixture *fx, int64_t plan_id, const char *state)
{
	assert_string_equal(wait_text(fx, 30, state,
				"SELECT state FROM defrag_moves WHERE plan_id = $1 AND ordinal = 0",
				id_s(fx, plan_id)),
	    state);
}

static void
wait_finished(struct fixture *fx, int64_t id)
{
	assert_string_equal(wait_text(fx, 60, "t",
				"SELECT (finished_at IS NOT NULL)::text::char FROM defrag_plans "
				"WHERE id = $1",
				id_s(fx, id)),
	    "t");
}

/* A stored plan (the newest's body) moving allocation id to start on gpu_id, no idle window. */
static int64_t
move_plan(struct fixture *fx, int64_t id, int64_t gpu_id, int start, bool mbb)
{
	const char *mv = fx_sql_text(fx,
	    "SELECT jsonb_build_array(jsonb_build_object('allocation', a.id, 'project', 'ka', "
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

/* The live (not released) allocations of a pool. */
static int64_t
live_of(struct fixture *fx, const char *pool)
{
	return fx_sql_int64(fx,
	    "SELECT count(*) FROM allocations a JOIN pools p ON p.id = "
	    "a.pool_id WHERE p.name = $1 AND a.state <> 'released'",
	    pool);
}

static int64_t
live_mv(struct fixture *fx)
{
	return live_of(fx, "mv");
}

static void
test_move_meets_shrink_and_plan(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { "GPUPOOL_DEFRAG_APPLY_INTERVAL=1", NULL };
	struct gp_client_response *r;
	pid_t agent;
	int64_t x, empty_gpu, p, q;

	assert_int_equal(fixture_server_stop(fx, fx->server), 0);
	srv = fixture_server_start(fx, env);
	assert_non_null(srv);
	fx->server = srv;
	op = fixture_create_user(fx, "kop", "operator");
	alice = fixture_create_user(fx, "kalice", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"ka\",\"display_name\":\"ka\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/ka/members/kalice",
	    "{\"role\":\"owner\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"ka\"}");
	assert_status(r, 201);
	agent = fx_agent_spawn(fx, srv, "ka", "ka-n0",
	    "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":3}]}", NULL);
	assert_string_equal(wait_text(fx, 40, "3",
				"SELECT count(g.id)::text FROM nodes n JOIN gpus g ON g.node_id = n.id "
				"WHERE n.name = 'ka-n0' AND n.status = 'ready'",
				NULL),
	    "3");
	approve(fx, submit(fx, "create", "mv", "\"H100-80GB/1g.10gb=3\""));
	wait_settled(fx);
	/* (a stored plan whose body the synthetic ones copy) */
	r = fx_request(fx, op, "POST", "/v1/capacity/defrag-plans",
	    "{\"goal\":\"free_gpus\",\"cluster\":\"ka\",\"max_moves\":0}");
	assert_status(r, 201);

	/* the pool's three 1g instances share a GPU; the last by start moves to an empty GPU */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(DISTINCT gpu_id) FROM allocations "
			     "WHERE state = 'ready'"),
	    1);
	x = fx_sql_int64(fx,
	    "SELECT id FROM allocations WHERE state = 'ready' "
	    "ORDER BY start DESC LIMIT 1");
	empty_gpu = fx_sql_int64(fx, "SELECT id FROM gpus WHERE layout = '' ORDER BY id LIMIT 1");
	p = move_plan(fx, x, empty_gpu, 0, true);

	/* bad input on apply and cancel: a 4xx problem, the plan untouched */
	{
		static const char *const text[] = { "Content-Type: text/plain", NULL };
		static const char *const other_key[] = { "Idempotency-Key: attack-1", NULL };
		const char *bad_ids[] = { "abc", "-1", "0", "1e3", "99999999999999999999", "%20" };
		const char *bad_bodies[] = { "[]", "null", "{\"id\":1}", "{", "\"x\"" };
		const char *ap = fx_str(fx, "/v1/capacity/defrag-plans/%lld/apply", (long long)p);

		for (size_t i = 0; i < sizeof(bad_ids) / sizeof(bad_ids[0]); i++)
			for (int c = 0; c < 2; c++) {
				r = fx_request(fx, op, "POST",
				    fx_str(fx, "/v1/capacity/defrag-plans/%s/%s", bad_ids[i],
					c ? "cancel" : "apply"),
				    NULL);
				assert_true(
				    r->status == 404 || r->status == 422 || r->status == 400);
				assert_non_null(r->json);
			}
		for (size_t i = 0; i < sizeof(bad_bodies) / sizeof(bad_bodies[0]); i++) {
			r = fx_request(fx, op, "POST", ap, "%s", bad_bodies[i]);
			assert_true(r->status == 400 || r->status == 422);
			assert_non_null(r->json);
		}
		r = fx_request_h(fx, op, "POST", ap, text, "{}");
		assert_true(r->status == 415 || r->status == 400);
		assert_string_equal(fx_sql_text(fx, "SELECT state FROM defrag_plans WHERE id = $1",
					id_s(fx, p)),
		    "planned");
		assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM defrag_moves"), 0);
		/* an Idempotency-Key used for another plan's apply is not replayed for this one */
		r = fx_request_h(fx, op, "POST",
		    fx_str(fx, "/v1/capacity/defrag-plans/%lld/cancel", (long long)p - 1),
		    other_key, NULL);
		assert_status(r, 200);
		assert_json_str(r->json, "state", "cancelled");
		r = fx_request_h(fx, op, "POST", ap, other_key, NULL);
		assert_true(r->status == 422 || r->status == 409);
		assert_string_equal(fx_sql_text(fx, "SELECT state FROM defrag_plans WHERE id = $1",
					id_s(fx, p)),
		    "planned");
	}
	assert_int_equal(kill(agent, SIGSTOP), 0);
	apply_ok(fx, p);
	wait_move(fx, p, "creating");
	assert_int_equal(live_mv(fx), 4);

	/* a second plan moving the same instance while the first's move waits: skipped */
	q = move_plan(fx, x, empty_gpu, 3, true);
	apply_ok(fx, q);
	wait_finished(fx, q);
	assert_string_equal(fx_sql_text(fx,
				"SELECT state || ':' || reason FROM defrag_moves WHERE plan_id = $1",
				id_s(fx, q)),
	    "skipped:source_moving");
	assert_int_equal(live_mv(fx), 4);

	/* shrink by two while the move waits: the pool keeps one, as its items say */
	approve(fx, submit(fx, "shrink", "mv", "\"H100-80GB/1g.10gb=2\""));
	assert_int_equal(kill(agent, SIGCONT), 0);
	wait_finished(fx, p);
	wait_settled(fx);
	assert_string_equal(fx_sql_text(fx,
				"SELECT sum((i->>'count')::int)::text FROM pools p, "
				"jsonb_array_elements(p.items) i WHERE p.name = 'mv'"),
	    "1");
	assert_int_equal(live_mv(fx), 1);
	assert_string_equal(fx_sql_text(fx,
				"SELECT state || ':' || reason FROM defrag_moves WHERE plan_id = $1",
				id_s(fx, p)),
	    "skipped:source_released");
	fx_assert_pool_invariants(fx);
}

/*
 * A break-before-make move whose old instance is gone checks that its pool
 * still needs it (a shrink may have taken it meanwhile). Another plan's
 * make-before-break move of the same pool, waiting for the agent of
 * another node, holds two allocations for one instance: counted as two,
 * the pool seemed whole, the move was skipped (source_released) and the
 * pool lost the instance for good.
 */
static void
test_break_before_make_beside_other_move(void **state)
{
	struct fixture *fx = *state;
	pid_t agent1;
	int64_t x, w, gpu1, a, b;
	int fx0;

	approve(fx, submit(fx, "create", "bb", "\"H100-80GB/1g.10gb=3\""));
	wait_settled(fx);
	agent1 = fx_agent_spawn(fx, srv, "ka", "ka-n1",
	    "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":1}]}", NULL);
	assert_string_equal(wait_text(fx, 40, "1",
				"SELECT count(g.id)::text FROM nodes n JOIN gpus g ON g.node_id = n.id "
				"WHERE n.name = 'ka-n1' AND n.status = 'ready'",
				NULL),
	    "1");
	gpu1 = fx_sql_int64(fx,
	    "SELECT g.id FROM gpus g JOIN nodes n ON n.id = g.node_id "
	    "WHERE n.name = 'ka-n1'");
	x = fx_sql_int64(fx,
	    "SELECT a.id FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = 'bb' AND a.state = 'ready' ORDER BY a.id LIMIT 1");
	w = fx_sql_int64(fx,
	    "SELECT a.id FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = 'bb' AND a.state = 'ready' ORDER BY a.id OFFSET 1 LIMIT 1");
	fx0 = (int)fx_sql_int64(fx,
	    "SELECT s FROM generate_series(0, 6) s WHERE NOT EXISTS (SELECT 1 FROM allocations a "
	    "WHERE a.gpu_id = (SELECT gpu_id FROM allocations WHERE id = $1) AND a.state <> "
	    "'released' AND int4range(a.start, a.start + a.size) && int4range(s, s + 1)) "
	    "ORDER BY s LIMIT 1",
	    id_s(fx, x));
	/* plan a: x on its own GPU, break before make; plan b: w to ka-n1, whose agent stops */
	a = move_plan(fx, x,
	    fx_sql_int64(fx, "SELECT gpu_id FROM allocations WHERE id = $1", id_s(fx, x)), fx0,
	    false);
	b = move_plan(fx, w, gpu1, 0, true);
	assert_int_equal(kill(agent1, SIGSTOP), 0);
	apply_ok(fx, b);
	wait_move(fx, b, "creating");
	apply_ok(fx, a);
	/* x is destroyed by ka-n0's agent and recreated: the pool still needs it */
	assert_string_equal(wait_text(fx, 30, "done",
				"SELECT state FROM defrag_moves WHERE plan_id = $1 AND ordinal = 0",
				id_s(fx, a)),
	    "done");
	assert_int_equal(kill(agent1, SIGCONT), 0);
	wait_finished(fx, a);
	wait_finished(fx, b);
	wait_settled(fx);
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(state, ',' ORDER BY plan_id) FROM defrag_moves "
				"WHERE plan_id IN ($1, $2)",
				id_s(fx, a), id_s(fx, b)),
	    "done,done");
	assert_int_equal(live_of(fx, "bb"), 3);
	fx_assert_pool_invariants(fx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_move_meets_shrink_and_plan),
		cmocka_unit_test(test_break_before_make_beside_other_move),
	};

	return fixture_run_tests(tests);
}
