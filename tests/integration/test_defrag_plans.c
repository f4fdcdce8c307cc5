/*
 * test_defrag.c - defragmentation plans end to end (docs/capacity.md):
 * a deliberately fragmented fleet where a 7g.80gb request is refused;
 * the plan makes it placeable, moves only idle instances (never one with
 * a workload profile) and changes nothing in the fleet; the stored plan
 * reads back; limits, bad input and the access matrix.
 */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *op, *alice, *billing;

static int64_t
submit_approve(struct fixture *fx, const char *action, const char *pool, const char *items)
{
	struct gp_client_response *r;
	int64_t id;

	r = fx_request(fx, alice, "POST", "/v1/projects/dp/pool-requests",
	    "{\"action\":\"%s\",\"pool\":\"%s\"%s%s%s,\"justification\":\"t\"}", action, pool,
	    items ? ",\"items\":[" : "", items ? items : "", items ? "]" : "");
	assert_status(r, 201);
	id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	assert_status(r, 200);
	return id;
}

/* The fleet's layout and allocations as text: must not change while planning. */
static const char *
fleet_text(struct fixture *fx)
{
	return fx_sql_text(fx,
	    "SELECT coalesce(string_agg(g.uuid || ':' || g.layout, ' ' ORDER BY g.id), '') || '|' "
	    "|| (SELECT coalesce(string_agg(a.id || a.state || a.gpu_id || '@' || a.start, ' ' "
	    "ORDER BY a.id), '') FROM allocations a) FROM gpus g");
}

static struct gp_client_response *
plan(struct fixture *fx, const char *token, const char *body)
{
	return fx_request(fx, token, "POST", "/v1/capacity/defrag-plans", "%s", body);
}

/* Mark allocation id busy: a current workload profile on its device. */
static void
busy(struct fixture *fx, int64_t id)
{
	fx_sql_exec(fx,
	    "INSERT INTO workload_profiles (node_id, device_uuid, gpu_id, allocation_id, namespace, "
	    "pod) SELECT g.node_id, 'MIG-' || a.id, g.id, a.id, 'ns', 'pod-' || a.id "
	    "FROM allocations a JOIN gpus g ON g.id = a.gpu_id WHERE a.id = $1",
	    fx_str(fx, "%lld", (long long)id));
}

static void
test_fragmented_fleet(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct json_object *moves;
	const char *before;
	int64_t empty, busy_gpu, nbusy, plans0;
	char body[512];

	op = fixture_create_user(fx, "dop", "operator");
	alice = fixture_create_user(fx, "dalice", "none");
	billing = fixture_create_user(fx, "dbill", "billing");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"dp\",\"display_name\":\"dp\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/dp/members/dalice",
	    "{\"role\":\"owner\"}");
	assert_status(r, 201);
	fx_fleet(fx, "frag", "H100-80GB", 1, 4, true);

	/* one 4g on each GPU, small instances packed beside them, then the 4g go */
	submit_approve(fx, "create", "big", "\"H100-80GB/4g.40gb=4\"");
	submit_approve(fx, "create", "small", "\"H100-80GB/1g.10gb=4\"");
	submit_approve(fx, "release", "big", NULL);
	fx_sql_exec(fx, "SELECT pools_confirm_unmanaged_releases()");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE state <> 'released' "
			     "AND profile = '4g.40gb'"),
	    0);
	empty = fx_sql_int64(fx, "SELECT count(*) FROM gpus WHERE layout = ''");
	assert_true(empty >= 1 && empty <= 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE state = 'ready' AND "
			     "profile = '1g.10gb'"),
	    4);

	/* a 7g.80gb for every GPU but one holding small instances is refused */
	snprintf(body, sizeof(body),
	    "{\"items\":[\"H100-80GB/7g.80gb=%lld\"],\"cluster\":\"frag\"}", (long long)empty + 1);
	r = fx_request(fx, op, "POST", "/v1/capacity/simulate", "%s", body);
	assert_status(r, 200);
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));

	/* the GPU holding fewest small instances is busy: its instances must stay */
	busy_gpu = fx_sql_int64(fx,
	    "SELECT gpu_id FROM allocations WHERE state = 'ready' GROUP BY gpu_id "
	    "ORDER BY count(*), gpu_id LIMIT 1");
	nbusy = fx_sql_int64(fx,
	    "SELECT count(*) FROM allocations WHERE state = 'ready' AND gpu_id = $1",
	    fx_str(fx, "%lld", (long long)busy_gpu));
	{
		int64_t ids[8];

		for (int i = 0; i < nbusy; i++)
			ids[i] = fx_sql_int64(fx,
			    "SELECT id FROM allocations WHERE state = 'ready' AND gpu_id = $1 "
			    "ORDER BY id OFFSET $2 LIMIT 1",
			    fx_str(fx, "%lld", (long long)busy_gpu), fx_str(fx, "%d", i));
		for (int i = 0; i < nbusy; i++)
			busy(fx, ids[i]);
	}

	before = fleet_text(fx);
	plans0 = fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans");
	snprintf(body, sizeof(body),
	    "{\"items\":[\"H100-80GB/7g.80gb=%lld\"],\"cluster\":\"frag\",\"idle_minutes\":0,"
	    "\"max_moves\":10}",
	    (long long)empty + 1);
	r = plan(fx, op, body);
	assert_status(r, 201);
	assert_json_str(r->json, "state", "planned");
	assert_json_str(r->json, "goal", "items");
	assert_json_str(r->json, "created_by", "dop");
	assert_false(json_object_get_boolean(fx_json(r->json, "placeable_before")));
	assert_true(json_object_get_boolean(fx_json(r->json, "placeable_after")));
	assert_int_equal(fx_json_len(r->json, "items_made_placeable"), 1);
	assert_int_equal(fx_json_int(r->json, "instances"), 4);
	assert_int_equal(fx_json_int(r->json, "idle_instances"), 4 - nbusy);
	assert_int_equal(fx_json_int(r->json, "free_gpus_after"), empty + 1);
	assert_int_equal(fx_json_int(r->json, "free_gpus_before"), empty);
	moves = fx_json(r->json, "moves");
	assert_true(json_object_array_length(moves) >= 1);
	for (size_t i = 0; i < json_object_array_length(moves); i++) {
		struct json_object *mv = json_object_array_get_idx(moves, i);
		int64_t aid = fx_json_int(mv, "allocation");

		/* never one with a workload profile, never off the busy GPU */
		assert_int_equal(fx_sql_int64(fx,
				     "SELECT count(*) FROM workload_profiles WHERE allocation_id = $1",
				     fx_str(fx, "%lld", (long long)aid)),
		    0);
		assert_int_equal(fx_sql_int64(fx, "SELECT gpu_id FROM allocations WHERE id = $1",
				     fx_str(fx, "%lld", (long long)aid)) == busy_gpu,
		    0);
		assert_json_str(mv, "pool", "small");
		assert_json_str(mv, "project", "dp");
		assert_json_str(mv, "profile", "1g.10gb");
		/* the move's source is where the allocation is now */
		assert_int_equal(fx_json_int(mv, "from.start"),
		    fx_sql_int64(fx, "SELECT start FROM allocations WHERE id = $1",
			fx_str(fx, "%lld", (long long)aid)));
	}
	assert_int_equal(fx_json_len(r->json, "tenants"), 1);
	assert_int_equal(fx_json_len(r->json, "capacity.before"), 1);
	/* nothing in the fleet changed; the plan was stored and audited */
	assert_string_equal(fleet_text(fx), before);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans"), plans0 + 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'defrag_plan.create' "
			     "AND object_id = $1 AND (after->>'moves')::int = $2",
			     fx_str(fx, "%lld", (long long)fx_json_int(r->json, "id")),
			     fx_str(fx, "%zu", json_object_array_length(moves))),
	    1);
	fx_assert_pool_invariants(fx);

	/* it reads back as computed */
	{
		int64_t id = fx_json_int(r->json, "id");
		size_t n = json_object_array_length(moves);
		struct gp_client_response *g;

		g = fx_request(fx, op, "GET",
		    fx_str(fx, "/v1/capacity/defrag-plans/%lld", (long long)id), NULL);
		assert_status(g, 200);
		assert_int_equal(fx_json_int(g->json, "id"), id);
		assert_int_equal(fx_json_len(g->json, "moves"), n);
		assert_true(json_object_get_boolean(fx_json(g->json, "placeable_after")));
		g = fx_request(fx, op, "GET", "/v1/capacity/defrag-plans/999999", NULL);
		assert_problem(g, 404, "not_found");
	}

	/* no moves allowed: the request stays refused */
	snprintf(body, sizeof(body),
	    "{\"items\":[\"H100-80GB/7g.80gb=%lld\"],\"cluster\":\"frag\",\"idle_minutes\":0,"
	    "\"max_moves\":0}",
	    (long long)empty + 1);
	r = plan(fx, op, body);
	assert_status(r, 201);
	assert_int_equal(fx_json_len(r->json, "moves"), 0);
	assert_false(json_object_get_boolean(fx_json(r->json, "placeable_after")));
	assert_true(json_object_get_boolean(fx_json(r->json, "moves_exhausted")));

	/* every small instance busy: nothing can move */
	fx_sql_exec(fx,
	    "INSERT INTO workload_profiles (node_id, device_uuid, gpu_id, allocation_id, namespace, "
	    "pod) SELECT g.node_id, 'MIG-' || a.id, g.id, a.id, 'ns', 'pod-' || a.id "
	    "FROM allocations a JOIN gpus g ON g.id = a.gpu_id WHERE a.state = 'ready' "
	    "AND NOT EXISTS (SELECT 1 FROM workload_profiles w WHERE w.allocation_id = a.id)");
	snprintf(body, sizeof(body), "{\"items\":[\"H100-80GB/7g.80gb=%lld\"],\"idle_minutes\":0}",
	    (long long)empty + 1);
	r = plan(fx, op, body);
	assert_status(r, 201);
	assert_int_equal(fx_json_int(r->json, "idle_instances"), 0);
	assert_int_equal(fx_json_len(r->json, "moves"), 0);
	assert_false(json_object_get_boolean(fx_json(r->json, "placeable_after")));

	/* the default idle window (1 h): instances this young are not idle */
	fx_sql_exec(fx, "DELETE FROM workload_profiles");
	r = plan(fx, op, "{\"goal\":\"free_gpus\",\"cluster\":\"frag\"}");
	assert_status(r, 201);
	assert_int_equal(fx_json_int(r->json, "idle_minutes"), 60);
	assert_int_equal(fx_json_int(r->json, "idle_instances"), 0);
	assert_int_equal(fx_json_len(r->json, "moves"), 0);
	fx_assert_json_null(r->json, "placeable_after", __FILE__, __LINE__);

	/* activity above the threshold in the window: not idle either */
	fx_sql_exec(fx,
	    "UPDATE allocations SET updated_at = now() - interval '10 minutes' "
	    "WHERE state = 'ready'");
	fx_sql_exec(fx,
	    "INSERT INTO gpu_metric_samples (ts, gpu_id, device_uuid, sm_active) "
	    "SELECT now() - interval '1 minute', g.id, g.uuid, 0.9 FROM gpus g WHERE g.id = $1",
	    fx_str(fx, "%lld", (long long)busy_gpu));
	r = plan(fx, op, "{\"goal\":\"free_gpus\",\"cluster\":\"frag\",\"idle_minutes\":5}");
	assert_status(r, 201);
	assert_int_equal(fx_json_int(r->json, "idle_instances"), 4 - nbusy);
	moves = fx_json(r->json, "moves");
	for (size_t i = 0; i < json_object_array_length(moves); i++)
		assert_int_equal(fx_sql_int64(fx, "SELECT gpu_id FROM allocations WHERE id = $1",
				     fx_str(fx, "%lld",
					 (long long)fx_json_int(json_object_array_get_idx(moves, i),
					     "allocation"))) == busy_gpu,
		    0);
	fx_sql_exec(fx, "DELETE FROM gpu_metric_samples");

	/* free GPUs: the idle small instances pack onto one GPU */
	r = plan(fx, op, "{\"goal\":\"free_gpus\",\"cluster\":\"frag\",\"idle_minutes\":0}");
	assert_status(r, 201);
	assert_int_equal(fx_json_int(r->json, "free_gpus_after"), 3);
	assert_string_equal(fleet_text(fx), before);
}

static void
test_bad_input_and_access(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t plans0 = fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans");

	r = plan(fx, op, "{\"goal\":\"tidy\"}");
	assert_problem(r, 422, "validation_failed");
	r = plan(fx, op, "{\"goal\":\"items\"}");
	assert_problem(r, 422, "validation_failed");
	r = plan(fx, op, "{\"goal\":\"free_gpus\",\"items\":[\"H100-80GB/7g.80gb=1\"]}");
	assert_problem(r, 422, "validation_failed");
	r = plan(fx, op, "{\"items\":[\"H100-80GB/9g.90gb=1\"]}");
	assert_problem(r, 422, "validation_failed");
	r = plan(fx, op, "{\"items\":[\"H100-80GB/7g.80gb=1\"],\"cluster\":\"nowhere\"}");
	assert_problem(r, 422, "validation_failed");
	r = plan(fx, op, "{\"max_moves\":-1}");
	assert_problem(r, 422, "validation_failed");
	r = plan(fx, op, "{\"nodes\":[7]}");
	assert_problem(r, 422, "validation_failed");
	r = plan(fx, op, "{\"nodes\":[\"frag-n0\",\"nowhere\"]}");
	assert_problem(r, 422, "validation_failed");
	assert_true(strstr(r->body, "nodes[1]") != NULL);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"other\"}");
	assert_status(r, 201);
	r = plan(fx, op, "{\"cluster\":\"other\",\"nodes\":[\"frag-n0\"]}");
	assert_problem(r, 422, "validation_failed");
	assert_true(strstr(r->body, "not in cluster other") != NULL);
	r = plan(fx, op, "{\"surprise\":1}");
	assert_problem(r, 422, "validation_failed");
	r = plan(fx, op, "{");
	assert_problem(r, 400, "malformed_json");
	r = plan(fx, alice, "{\"goal\":\"free_gpus\"}");
	assert_problem(r, 403, "forbidden");
	r = plan(fx, billing, "{\"goal\":\"free_gpus\"}");
	assert_problem(r, 403, "forbidden");
	r = fx_request(fx, alice, "GET", "/v1/capacity/defrag-plans/1", NULL);
	assert_problem(r, 403, "forbidden");
	r = plan(fx, NULL, "{\"goal\":\"free_gpus\"}");
	assert_status(r, 401);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM defrag_plans"), plans0);
	/* the admin may plan */
	r = plan(fx, fx->admin_token,
	    "{\"goal\":\"free_gpus\",\"max_moves\":0,\"nodes\":[\"frag-n0\"]}");
	assert_status(r, 201);
	assert_int_equal(fx_json_len(r->json, "nodes"), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fragmented_fleet),
		cmocka_unit_test(test_bad_input_and_access),
	};

	return fixture_run_tests(tests);
}
