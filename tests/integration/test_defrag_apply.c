/*
 * test_defrag_apply.c - applying defragmentation plans with real node
 * agents (fake backend) on a deliberately fragmented fleet
 * (docs/capacity.md "Applying a plan"): a 7g.80gb request is refused, a
 * plan makes it placeable, applying it moves only idle instances (a
 * source made busy after planning is skipped, source_busy), every move
 * is make-before-break with the old and new MIG UUIDs in the pool's
 * events, the invariants hold (no overlap, pool items equal allocations,
 * the usage ledger's intervals of the moved pool neither close nor
 * reopen), the agent's instances are exactly the live allocations; a
 * kill -9 of the replica running the plan mid-move leaves it to the
 * other replica, which finishes it with nothing doubled or lost; then
 * the 7g.80gb request is approved and placed. Apply is idempotent
 * (Idempotency-Key replay, a second apply answers 200), cancel, the
 * 409s, 403 for a project user, and the list.
 */
#include "fixture.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *op, *alice;
static pid_t test_agent; /* the agent of node fa-n0 */

static int64_t
submit(struct fixture *fx, const char *action, const char *pool, const char *items)
{
	struct gp_client_response *r;

	r = fx_request(fx, alice, "POST", "/v1/projects/da/pool-requests",
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

static const char *
id_s(struct fixture *fx, int64_t id)
{
	return fx_str(fx, "%lld", (long long)id);
}

/* Every live allocation of the node realized: none reserved, releasing or failed. */
static void
wait_settled(struct fixture *fx)
{
	assert_string_equal(wait_text(fx, 40, "0",
				"SELECT count(*)::text FROM allocations WHERE state IN ('reserved', "
				"'provisioning', 'releasing', 'failed')",
				NULL),
	    "0");
}

/* The MIG UUIDs the fake backend holds, sorted, space-separated. */
static const char *
agent_uuids(struct fixture *fx, const char *node)
{
	const char *path = fx_str(fx, "%s/fake-state.json", fx_agent_dir(fx, node));
	struct json_object *root = json_object_from_file(path), *gpus;
	const char *sql = "SELECT coalesce(string_agg(i->>'uuid', ' ' ORDER BY i->>'uuid'), '') "
			  "FROM jsonb_array_elements($1::jsonb) g, "
			  "jsonb_array_elements(g->'instances') i";
	const char *txt;

	assert_non_null(root);
	assert_true(json_object_object_get_ex(root, "gpus", &gpus));
	txt = fx_str(fx, "%s", json_object_to_json_string_ext(gpus, JSON_C_TO_STRING_PLAIN));
	json_object_put(root);
	return fx_sql_text(fx, sql, txt);
}

static const char *
db_uuids(struct fixture *fx)
{
	return fx_sql_text(fx,
	    "SELECT coalesce(string_agg(device_uuid, ' ' ORDER BY device_uuid), "
	    "'') FROM allocations WHERE state = 'ready'");
}

/* The usage ledger of pool small: its rows, which a move must not touch. */
static const char *
ledger_text(struct fixture *fx)
{
	return fx_sql_text(fx,
	    "SELECT string_agg(l.id || ':' || l.profile || ':' || l.count || ':' "
	    "|| coalesce(l.ended_at::text, 'open'), ' ' ORDER BY l.id) FROM usage_ledger l "
	    "JOIN pools p ON p.id = l.pool_id WHERE p.name = 'small'");
}

static struct gp_client_response *
plan(struct fixture *fx, int ngpus)
{
	struct gp_client_response *r = fx_request(fx, op, "POST", "/v1/capacity/defrag-plans",
	    "{\"items\":[\"H100-80GB/7g.80gb=%d\"],\"cluster\":\"fa\",\"idle_minutes\":0,"
	    "\"max_moves\":10}",
	    ngpus);

	assert_status(r, 201);
	return r;
}

static const char *
plan_path(struct fixture *fx, int64_t id, const char *tail)
{
	return fx_str(fx, "/v1/capacity/defrag-plans/%lld%s", (long long)id, tail);
}

static const char *
plan_state(struct fixture *fx, int64_t id)
{
	return fx_sql_text(fx, "SELECT state FROM defrag_plans WHERE id = $1", id_s(fx, id));
}

/* Wait until plan id is finished (applied, failed or cancelled with nothing in flight). */
static void
wait_finished(struct fixture *fx, int64_t id)
{
	assert_string_equal(wait_text(fx, 60, "t",
				"SELECT (finished_at IS NOT NULL)::text::char FROM defrag_plans "
				"WHERE id = $1",
				id_s(fx, id)),
	    "t");
}

/* What every finished move left: exactly one successor when done, the old one released. */
static void
assert_moves_clean(struct fixture *fx, int64_t id)
{
	/* a done move: one live allocation replacing the old (a failed earlier try is
	 * released), ready where the move said, the old released */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM defrag_moves m WHERE m.plan_id = $1 "
			     "AND m.state = 'done' AND NOT ((SELECT count(*) FROM allocations a "
			     "WHERE a.replaces = m.allocation_id AND a.state <> 'released') = 1 "
			     "AND EXISTS (SELECT 1 FROM "
			     "allocations a WHERE a.id = m.new_allocation_id AND a.state = 'ready' "
			     "AND a.gpu_id = m.to_gpu_id AND a.start = m.to_start AND a.device_uuid = "
			     "m.new_uuid) AND EXISTS (SELECT 1 FROM allocations o WHERE o.id = "
			     "m.allocation_id AND o.state = 'released'))",
			     id_s(fx, id)),
	    0);
	/* a skipped move left its source alone and made nothing */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM defrag_moves m WHERE m.plan_id = $1 "
			     "AND m.state = 'skipped' AND (m.new_allocation_id IS NOT NULL OR EXISTS "
			     "(SELECT 1 FROM allocations a WHERE a.replaces = m.allocation_id))",
			     id_s(fx, id)),
	    0);
	/* the pool's events: each done move with its old and new device */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM defrag_moves m WHERE m.plan_id = $1 "
			     "AND m.state = 'done' AND (SELECT count(*) FROM audit_log l WHERE "
			     "l.action = 'pool.move' AND l.object_type = 'pool' AND l.object_id = "
			     "m.pool_id::text AND l.before->>'device_uuid' = m.old_uuid AND "
			     "l.after->>'device_uuid' = m.new_uuid AND m.old_uuid <> m.new_uuid) <> 1",
			     id_s(fx, id)),
	    0);
}

static bool
log_has(const char *path, const char *a, const char *b)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	bool found = false;

	if (f == NULL)
		return false;
	while (!found && fgets(line, sizeof(line), f) != NULL)
		found = strstr(line, a) != NULL && strstr(line, b) != NULL;
	fclose(f);
	return found;
}

static void
test_apply_fragmented_fleet(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { "GPUPOOL_DEFRAG_APPLY_INTERVAL=1",
		"GPUPOOL_EXPIRY_INTERVAL=1", NULL };
	static const char *const key1[] = { "Idempotency-Key: defrag-apply-1", NULL };
	struct fx_server *ra, *rb;
	struct gp_client_response *r, *r2;
	pid_t agent;
	int64_t empty, p1, p2, busy_alloc, req7;
	int nmoves1, nmoves2;
	const char *ledger0;

	/* two replicas: A (first) leads the apply worker, the agent talks to B */
	assert_int_equal(fixture_server_stop(fx, fx->server), 0);
	ra = fixture_server_start(fx, env);
	assert_non_null(ra);
	for (int i = 0; i < 100 && !log_has(ra->log_path, "took leadership", "defrag-apply"); i++)
		usleep(100000);
	assert_true(log_has(ra->log_path, "took leadership", "defrag-apply"));
	rb = fixture_server_start(fx, env);
	assert_non_null(rb);
	fx->server = rb;
	assert_false(log_has(rb->log_path, "took leadership", "defrag-apply"));

	op = fixture_create_user(fx, "aop", "operator");
	alice = fixture_create_user(fx, "aalice", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"da\",\"display_name\":\"da\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/da/members/aalice",
	    "{\"role\":\"owner\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"fa\"}");
	assert_status(r, 201);
	agent = fx_agent_spawn(fx, rb, "fa", "fa-n0",
	    "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":4}]}", NULL);
	test_agent = agent;
	assert_string_equal(wait_text(fx, 40, "1:4",
				"SELECT count(DISTINCT n.id) FILTER (WHERE n.status = 'ready') || ':' "
				"|| count(g.id) FROM nodes n LEFT JOIN gpus g ON g.node_id = n.id "
				"WHERE n.name = 'fa-n0'",
				NULL),
	    "1:4");

	/* fragment it: a 4g on each GPU, 1g instances packed beside them, the 4g go */
	approve(fx, submit(fx, "create", "big", "\"H100-80GB/4g.40gb=4\""));
	approve(fx, submit(fx, "create", "small", "\"H100-80GB/1g.10gb=4\""));
	wait_settled(fx);
	approve(fx, submit(fx, "release", "big", NULL));
	wait_settled(fx);
	empty = fx_sql_int64(fx, "SELECT count(*) FROM gpus WHERE layout = ''");
	assert_true(empty >= 1 && empty <= 2);
	assert_string_equal(agent_uuids(fx, "fa-n0"), db_uuids(fx));
	fx_assert_pool_invariants(fx);
	ledger0 = ledger_text(fx);
	assert_non_null(strstr(ledger0, ":open"));

	/* the request for one more whole 7g.80gb than there are empty GPUs is refused */
	r = fx_request(fx, op, "POST", "/v1/capacity/simulate",
	    "{\"items\":[\"H100-80GB/7g.80gb=%lld\"],\"cluster\":\"fa\"}", (long long)empty + 1);
	assert_status(r, 200);
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));

	/* plan 1; its first move's source turns busy before it is applied */
	r = plan(fx, (int)empty + 1);
	assert_true(json_object_get_boolean(fx_json(r->json, "placeable_after")));
	p1 = fx_json_int(r->json, "id");
	nmoves1 = (int)fx_json_len(r->json, "moves");
	assert_true(nmoves1 >= 1);
	assert_json_str(r->json, "state", "planned");
	assert_json_str(r->json, "moves[0].state", "pending");
	assert_int_equal(fx_json_int(r->json, "progress.pending"), nmoves1);
	busy_alloc = fx_json_int(r->json, "moves[0].allocation");
	fx_sql_exec(fx,
	    "INSERT INTO workload_profiles (node_id, device_uuid, gpu_id, allocation_id, namespace, "
	    "pod) SELECT g.node_id, a.device_uuid, g.id, a.id, 'ns', 'busy' "
	    "FROM allocations a JOIN gpus g ON g.id = a.gpu_id WHERE a.id = $1",
	    id_s(fx, busy_alloc));

	/* a project user may not apply */
	r = fx_request(fx, alice, "POST", plan_path(fx, p1, "/apply"), "{}");
	assert_status(r, 403);
	assert_string_equal(plan_state(fx, p1), "planned");
	/* apply: 202; the same key replays it; another apply answers the plan as it stands */
	r = fx_request_h(fx, op, "POST", plan_path(fx, p1, "/apply"), key1, "{}");
	assert_status(r, 202);
	assert_json_str(r->json, "state", "applying");
	r2 = fx_request_h(fx, op, "POST", plan_path(fx, p1, "/apply"), key1, "{}");
	assert_status(r2, 202);
	assert_string_equal(r2->body, r->body);
	r2 = fx_request(fx, op, "POST", plan_path(fx, p1, "/apply"), NULL);
	assert_status(r2, 200);
	assert_int_equal(fx_json_int(r2->json, "id"), p1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'defrag_plan.apply' "
			     "AND object_id = $1",
			     id_s(fx, p1)),
	    1);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM defrag_moves WHERE plan_id = $1",
			     id_s(fx, p1)),
	    nmoves1);
	wait_finished(fx, p1);
	wait_settled(fx);
	r = fx_request(fx, op, "GET", plan_path(fx, p1, ""), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "state", "applied");
	assert_json_null(r->json, "error");
	assert_json_str(r->json, "moves[0].state", "skipped");
	assert_json_str(r->json, "moves[0].reason", "source_busy");
	assert_json_null(r->json, "moves[0].new_allocation");
	assert_int_equal(fx_json_int(r->json, "progress.skipped") +
		fx_json_int(r->json, "progress.done"),
	    nmoves1);
	assert_int_equal(fx_json_int(r->json, "progress.pending"), 0);
	for (int i = 1; i < nmoves1; i++) {
		const char *st = fx_json_str(r->json, fx_str(fx, "moves[%d].state", i));

		/* (a later move may find its target taken by an earlier skip's neighbour) */
		assert_true(strcmp(st, "done") == 0 || strcmp(st, "skipped") == 0);
		if (strcmp(st, "done") == 0) {
			assert_true(json_object_get_boolean(
			    fx_json(r->json, fx_str(fx, "moves[%d].make_before_break", i))));
			assert_true(fx_json_has(r->json, fx_str(fx, "moves[%d].new_uuid", i)));
		}
	}
	/* the busy instance did not move */
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM allocations WHERE id = $1",
				id_s(fx, busy_alloc)),
	    "ready");
	assert_moves_clean(fx, p1);
	fx_assert_pool_invariants(fx);
	assert_string_equal(ledger_text(fx), ledger0);
	assert_string_equal(agent_uuids(fx, "fa-n0"), db_uuids(fx));

	/* its workload ends; plan 2 moves what is left */
	fx_sql_exec(fx,
	    "UPDATE workload_profiles SET ended_at = now() - interval '1 minute' "
	    "WHERE pod = 'busy'");
	r = plan(fx, (int)empty + 1);
	p2 = fx_json_int(r->json, "id");
	nmoves2 = (int)fx_json_len(r->json, "moves");
	assert_true(nmoves2 >= 1);
	assert_true(json_object_get_boolean(fx_json(r->json, "placeable_after")));

	/* kill -9 of the replica running it while a move waits for the agent */
	assert_int_equal(kill(agent, SIGSTOP), 0);
	r = fx_request(fx, op, "POST", plan_path(fx, p2, "/apply"), NULL);
	assert_status(r, 202);
	assert_string_equal(wait_text(fx, 20, "creating",
				"SELECT state FROM defrag_moves WHERE plan_id = $1 AND ordinal = 0",
				id_s(fx, p2)),
	    "creating");
	/* mid-move: the pool counts the new allocation in place of the old, never both */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name = 'small' AND a.state NOT IN ('releasing', 'released')"),
	    5);
	fx_assert_pool_invariants(fx);
	fixture_server_kill(fx, ra);
	assert_int_equal(kill(agent, SIGCONT), 0);
	wait_finished(fx, p2);
	wait_settled(fx);
	assert_true(log_has(rb->log_path, "took leadership", "defrag-apply"));
	assert_string_equal(plan_state(fx, p2), "applied");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM defrag_moves WHERE plan_id = $1 AND state = 'done'",
			     id_s(fx, p2)),
	    nmoves2);
	assert_moves_clean(fx, p2);
	/* nothing doubled or lost: the pool holds its four instances, one per slice */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name = 'small' AND a.state = 'ready'"),
	    4);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE replaces IS NOT NULL"),
	    fx_sql_int64(fx,
		"SELECT count(*) FROM defrag_moves WHERE new_allocation_id IS NOT NULL"));
	fx_assert_pool_invariants(fx);
	assert_string_equal(ledger_text(fx), ledger0);
	assert_string_equal(agent_uuids(fx, "fa-n0"), db_uuids(fx));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'drift' "
			     "AND resolved_at IS NULL"),
	    0);

	/*
	 * the tenant follows the new device: the pool's Kubernetes device
	 * class lists each new MIG UUID and none of the old, and a workload
	 * on the new device is profiled against the new allocation
	 */
	{
		const char *k8s, *newu, *oldu, *ff;
		int64_t newa;
		FILE *f;

		r = fx_request(fx, op, "GET", "/v1/clusters/fa/kubernetes", NULL);
		assert_status(r, 200);
		k8s = r->body;
		newu = fx_sql_text(fx,
		    "SELECT new_uuid FROM defrag_moves WHERE plan_id = $1 AND ordinal = 0",
		    id_s(fx, p2));
		oldu = fx_sql_text(fx,
		    "SELECT old_uuid FROM defrag_moves WHERE plan_id = $1 AND ordinal = 0",
		    id_s(fx, p2));
		newa = fx_sql_int64(fx,
		    "SELECT new_allocation_id FROM defrag_moves WHERE plan_id = $1 AND ordinal = 0",
		    id_s(fx, p2));
		assert_non_null(newu);
		assert_non_null(oldu);
		assert_non_null(strstr(k8s, newu));
		assert_null(strstr(k8s, oldu));
		/* the tenant's own view of the pool names the new device, not the old */
		r = fx_request(fx, alice, "GET",
		    fx_str(fx, "/v1/pools/%lld",
			(long long)fx_sql_int64(fx, "SELECT id FROM pools WHERE name = 'small'")),
		    NULL);
		assert_status(r, 200);
		assert_non_null(strstr(r->body, newu));
		assert_null(strstr(r->body, oldu));
		ff = fx_str(fx, "%s/fake-faults.json", fx_agent_dir(fx, "fa-n0"));
		f = fopen(ff, "w");
		assert_non_null(f);
		fprintf(f,
		    "{\"pods\":[{\"device_uuid\":\"%s\",\"namespace\":\"da\",\"pod\":\"train-0\","
		    "\"container\":\"c\"}]}",
		    newu);
		assert_int_equal(fclose(f), 0);
		assert_string_equal(wait_text(fx, 20, id_s(fx, newa),
					"SELECT coalesce(max(allocation_id)::text, '') FROM "
					"workload_profiles WHERE pod = 'train-0' AND ended_at IS NULL "
					"AND device_uuid = $1",
					newu),
		    id_s(fx, newa));
	}

	/* the refused request is placed now */
	r = fx_request(fx, op, "POST", "/v1/capacity/simulate",
	    "{\"items\":[\"H100-80GB/7g.80gb=%lld\"],\"cluster\":\"fa\"}", (long long)empty + 1);
	assert_status(r, 200);
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	req7 = submit(fx, "create", "whole",
	    fx_str(fx, "\"H100-80GB/7g.80gb=%lld\"", (long long)empty + 1));
	approve(fx, req7);
	assert_string_equal(wait_text(fx, 40, "fulfilled",
				"SELECT state FROM pool_requests WHERE id = $1", id_s(fx, req7)),
	    "fulfilled");
	assert_string_equal(agent_uuids(fx, "fa-n0"), db_uuids(fx));
	fx_assert_pool_invariants(fx);

	/* applied: a new apply answers it; cancel is 409 */
	r = fx_request(fx, op, "POST", plan_path(fx, p2, "/apply"), "{}");
	assert_status(r, 200);
	assert_json_str(r->json, "state", "applied");
	r = fx_request(fx, op, "POST", plan_path(fx, p2, "/cancel"), NULL);
	assert_problem(r, 409, "plan_not_applicable");
}

/* ---- synthetic plans: the paths a planner's plan rarely takes ---- */

static void
write_faults(struct fixture *fx, const char *json)
{
	const char *ff = fx_str(fx, "%s/fake-faults.json", fx_agent_dir(fx, "fa-n0"));
	FILE *f = fopen(ff, "w");

	assert_non_null(f);
	fputs(json, f);
	assert_int_equal(fclose(f), 0);
}

/* The k-th idle ready allocation of pool small (by id). */
static int64_t
idle_small(struct fixture *fx, int k)
{
	return fx_sql_int64(fx,
	    "SELECT a.id FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = 'small' "
	    "AND a.state = 'ready' AND NOT EXISTS (SELECT 1 FROM workload_profiles w WHERE "
	    "w.allocation_id = a.id AND w.ended_at IS NULL) ORDER BY a.id OFFSET $1 LIMIT 1",
	    fx_str(fx, "%d", k));
}

/* The k-th free 1g.10gb start on the GPU of allocation id. */
static int
free_start(struct fixture *fx, int64_t id, int k)
{
	return (int)fx_sql_int64(fx,
	    "SELECT s FROM generate_series(0, 6) s WHERE NOT EXISTS (SELECT 1 FROM allocations a "
	    "WHERE a.gpu_id = (SELECT gpu_id FROM allocations WHERE id = $1) AND a.state <> "
	    "'released' AND int4range(a.start, a.start + a.size) && int4range(s, s + 1)) "
	    "ORDER BY s OFFSET $2 LIMIT 1",
	    id_s(fx, id), fx_str(fx, "%d", k));
}

/* A move of allocation id to start on its own GPU, as the plan's JSON writes it. */
static const char *
move_json(struct fixture *fx, int64_t id, int start, bool mbb)
{
	return fx_sql_text(fx,
	    "SELECT jsonb_build_object('allocation', a.id, 'project', 'da', 'pool', 'small', "
	    "'profile', a.profile, 'from', jsonb_build_object('node', n.name, 'gpu_uuid', g.uuid, "
	    "'gpu_index', g.gpu_index, 'start', a.start), 'to', jsonb_build_object('node', n.name, "
	    "'gpu_uuid', g.uuid, 'gpu_index', g.gpu_index, 'start', $2::int), "
	    "'make_before_break', $3::bool)::text FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
	    "JOIN nodes n ON n.id = g.node_id WHERE a.id = $1",
	    id_s(fx, id), fx_str(fx, "%d", start), mbb ? "true" : "false");
}

/* A stored plan (the newest's body) with these moves and no idle window. */
static int64_t
synthetic_plan(struct fixture *fx, const char *moves)
{
	return fx_sql_int64(fx,
	    "INSERT INTO defrag_plans (created_by, cluster_id, goal, moves, body) "
	    "SELECT created_by, cluster_id, goal, jsonb_array_length($1::jsonb), "
	    "jsonb_set(jsonb_set(body, '{moves}', $1::jsonb), '{idle_minutes}', '0') "
	    "FROM defrag_plans ORDER BY id DESC LIMIT 1 RETURNING id",
	    moves);
}

static void
apply_ok(struct fixture *fx, int64_t id)
{
	struct gp_client_response *r =
	    fx_request(fx, op, "POST", plan_path(fx, id, "/apply"), NULL);

	assert_status(r, 202);
}

static void
wait_move(struct fixture *fx, int64_t plan_id, int ordinal, const char *state)
{
	assert_string_equal(wait_text(fx, 20, state,
				fx_str(fx,
				    "SELECT state FROM defrag_moves WHERE plan_id = $1 AND ordinal = %d",
				    ordinal),
				id_s(fx, plan_id)),
	    state);
}

static void
test_move_paths(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	pid_t agent = test_agent;
	int64_t a0, a1, a2, a3, p, released0;
	int f0, f1, f2, f3;

	write_faults(fx, "{}");
	assert_string_equal(wait_text(fx, 20, "0",
				"SELECT count(*)::text FROM workload_profiles WHERE ended_at IS NULL",
				NULL),
	    "0");

	/* break before make, on its own GPU: the old instance goes first */
	a0 = idle_small(fx, 0);
	f0 = free_start(fx, a0, 0);
	p = synthetic_plan(fx, fx_str(fx, "[%s]", move_json(fx, a0, f0, false)));
	apply_ok(fx, p);
	wait_finished(fx, p);
	wait_settled(fx);
	assert_string_equal(plan_state(fx, p), "applied");
	r = fx_request(fx, op, "GET", plan_path(fx, p, ""), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "moves[0].state", "done");
	assert_int_equal(fx_sql_int64(fx, "SELECT start FROM allocations WHERE id = $1",
			     id_s(fx, fx_json_int(r->json, "moves[0].new_allocation"))),
	    f0);
	assert_moves_clean(fx, p);
	fx_assert_pool_invariants(fx);
	assert_string_equal(agent_uuids(fx, "fa-n0"), db_uuids(fx));

	/* the agent cannot create the new instance: failed, the old one keeps serving */
	a1 = idle_small(fx, 0);
	f1 = free_start(fx, a1, 0);
	write_faults(fx,
	    fx_str(fx,
		"{\"fail_apply\":[{\"gpu\":%lld,\"profile\":\"1g.10gb\",\"start\":%d,"
		"\"message\":\"injected: no room\"}]}",
		(long long)fx_sql_int64(fx,
		    "SELECT g.gpu_index FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
		    "WHERE a.id = $1",
		    id_s(fx, a1)),
		f1));
	p = synthetic_plan(fx, fx_str(fx, "[%s]", move_json(fx, a1, f1, true)));
	apply_ok(fx, p);
	wait_finished(fx, p);
	write_faults(fx, "{}");
	wait_settled(fx);
	r = fx_request(fx, op, "GET", plan_path(fx, p, ""), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "state", "failed");
	assert_json_str(r->json, "moves[0].state", "failed");
	assert_non_null(strstr(fx_json_str(r->json, "moves[0].reason"), "agent_failed"));
	assert_non_null(strstr(fx_json_str(r->json, "error"), "move 0"));
	assert_int_equal(fx_json_int(r->json, "progress.failed"), 1);
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM allocations WHERE id = $1",
				id_s(fx, a1)),
	    "ready");
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM allocations WHERE replaces = $1",
				id_s(fx, a1)),
	    "released");
	/* the tenant lost nothing: no fault interval (billing credit), the pool never degraded */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocation_fault_intervals f JOIN allocations a "
			     "ON a.id = f.allocation_id WHERE a.replaces = $1",
			     id_s(fx, a1)),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'pool.degraded' AND "
			     "object_id = (SELECT id::text FROM pools WHERE name = 'small')"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = "
			     "'pool_degraded'"),
	    0);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'small'"),
	    "active");
	fx_assert_pool_invariants(fx);
	assert_string_equal(agent_uuids(fx, "fa-n0"), db_uuids(fx));

	/* cancel while a move waits for its agent: it finishes, the next is skipped */
	a2 = idle_small(fx, 0);
	a3 = idle_small(fx, 1);
	f2 = free_start(fx, a2, 0);
	f3 = free_start(fx, a3,
	    a3 == a2 ||
		    fx_sql_int64(fx,
			"SELECT ((SELECT gpu_id FROM allocations WHERE id = "
			"$1) = (SELECT gpu_id FROM allocations WHERE id = $2))::int",
			id_s(fx, a2), id_s(fx, a3)) == 1
		? 1
		: 0);
	p = synthetic_plan(fx,
	    fx_str(fx, "[%s,%s]", move_json(fx, a2, f2, true), move_json(fx, a3, f3, true)));
	assert_int_equal(kill(agent, SIGSTOP), 0);
	apply_ok(fx, p);
	wait_move(fx, p, 0, "creating");
	r = fx_request(fx, op, "POST", plan_path(fx, p, "/cancel"), "{}");
	assert_status(r, 200);
	assert_json_str(r->json, "state", "cancelled");
	assert_json_str(r->json, "moves[0].state", "creating");
	assert_json_str(r->json, "moves[1].state", "skipped");
	assert_json_str(r->json, "moves[1].reason", "cancelled");
	assert_int_equal(kill(agent, SIGCONT), 0);
	wait_finished(fx, p);
	wait_settled(fx);
	assert_string_equal(plan_state(fx, p), "cancelled");
	wait_move(fx, p, 0, "done");
	assert_moves_clean(fx, p);
	fx_assert_pool_invariants(fx);

	/* an agent that never creates the new instance: agent_timeout, the old one serves on */
	a0 = idle_small(fx, 0);
	f0 = free_start(fx, a0, 0);
	p = synthetic_plan(fx, fx_str(fx, "[%s]", move_json(fx, a0, f0, true)));
	assert_int_equal(kill(agent, SIGSTOP), 0);
	apply_ok(fx, p);
	wait_move(fx, p, 0, "creating");
	/* (GPUPOOL_DEFRAG_MOVE_TIMEOUT is 900 s: the move began an hour ago) */
	fx_sql_exec(fx,
	    "UPDATE defrag_moves SET updated_at = now() - interval '1 hour' WHERE plan_id = $1",
	    id_s(fx, p));
	wait_finished(fx, p);
	assert_int_equal(kill(agent, SIGCONT), 0);
	wait_settled(fx);
	assert_string_equal(plan_state(fx, p), "failed");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state || ':' || reason FROM defrag_moves WHERE plan_id = $1",
				id_s(fx, p)),
	    "failed:agent_timeout");
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM allocations WHERE id = $1",
				id_s(fx, a0)),
	    "ready");
	fx_assert_pool_invariants(fx);
	assert_string_equal(agent_uuids(fx, "fa-n0"), db_uuids(fx));

	/* the pool is released while a move waits: the new instance goes with it */
	a0 = idle_small(fx, 0);
	f0 = free_start(fx, a0, 0);
	p = synthetic_plan(fx, fx_str(fx, "[%s]", move_json(fx, a0, f0, true)));
	released0 = fx_sql_int64(fx, "SELECT count(*) FROM allocations WHERE state = 'released'");
	assert_int_equal(kill(agent, SIGSTOP), 0);
	apply_ok(fx, p);
	wait_move(fx, p, 0, "creating");
	approve(fx, submit(fx, "release", "small", NULL));
	assert_int_equal(kill(agent, SIGCONT), 0);
	wait_finished(fx, p);
	wait_settled(fx);
	wait_move(fx, p, 0, "skipped");
	assert_string_equal(fx_sql_text(fx,
				"SELECT reason FROM defrag_moves WHERE plan_id = $1 AND ordinal = 0",
				id_s(fx, p)),
	    "source_released");
	assert_string_equal(wait_text(fx, 20, "released",
				"SELECT status FROM pools WHERE name = 'small'", NULL),
	    "released");
	/* its four instances and the new one, all released; the ledger closed once */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE state = 'released'") -
		released0,
	    5);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM usage_ledger l JOIN pools p ON p.id = l.pool_id "
			     "WHERE p.name = 'small' AND l.ended_at IS NULL"),
	    0);
	fx_assert_pool_invariants(fx);
	assert_string_equal(agent_uuids(fx, "fa-n0"), db_uuids(fx));
}

static void
test_cancel_expire_list(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t a, b, c;
	const char *body = "{\"goal\":\"free_gpus\",\"cluster\":\"fa\",\"max_moves\":0}";

	r = fx_request(fx, op, "POST", "/v1/capacity/defrag-plans", "%s", body);
	assert_status(r, 201);
	a = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", "/v1/capacity/defrag-plans", "%s", body);
	assert_status(r, 201);
	b = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", "/v1/capacity/defrag-plans", "%s", body);
	assert_status(r, 201);
	c = fx_json_int(r->json, "id");

	/* cancel a planned plan; then neither apply nor cancel */
	r = fx_request(fx, alice, "POST", plan_path(fx, a, "/cancel"), NULL);
	assert_status(r, 403);
	r = fx_request(fx, op, "POST", plan_path(fx, a, "/cancel"), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "state", "cancelled");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'defrag_plan.cancel' "
			     "AND object_id = $1",
			     id_s(fx, a)),
	    1);
	r = fx_request(fx, op, "POST", plan_path(fx, a, "/apply"), NULL);
	assert_problem(r, 409, "plan_not_applicable");
	r = fx_request(fx, op, "POST", plan_path(fx, a, "/cancel"), NULL);
	assert_problem(r, 409, "plan_not_applicable");
	assert_string_equal(plan_state(fx, a), "cancelled");

	/* a plan past its lifetime turns expired */
	fx_sql_exec(fx,
	    "UPDATE defrag_plans SET created_at = now() - interval '2 hours' "
	    "WHERE id = $1",
	    id_s(fx, b));
	r = fx_request(fx, op, "POST", plan_path(fx, b, "/apply"), NULL);
	assert_problem(r, 409, "plan_expired");
	assert_string_equal(plan_state(fx, b), "expired");
	r = fx_request(fx, op, "POST", plan_path(fx, b, "/apply"), NULL);
	assert_problem(r, 409, "plan_not_applicable");

	/* bad input and unknown plans */
	r = fx_request(fx, op, "POST", plan_path(fx, c, "/apply"), "{\"now\":true}");
	assert_status(r, 422);
	assert_string_equal(plan_state(fx, c), "planned");
	r = fx_request(fx, op, "POST", "/v1/capacity/defrag-plans/999999/apply", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, op, "POST", "/v1/capacity/defrag-plans/999999/cancel", NULL);
	assert_problem(r, 404, "not_found");
	/* a plan without moves is applied at once */
	r = fx_request(fx, op, "POST", plan_path(fx, c, "/apply"), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "state", "applied");

	/* the list: newest first, paged, filtered by state */
	r = fx_request(fx, op, "GET", "/v1/capacity/defrag-plans?limit=2", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 2);
	assert_int_equal(fx_json_int(r->json, "items[0].id"), c);
	assert_int_equal(fx_json_int(r->json, "items[1].id"), b);
	assert_json_str(r->json, "items[1].state", "expired");
	assert_json_absent(r->json, "items[0].moves");
	assert_json_absent(r->json, "items[0].capacity");
	assert_int_equal(fx_json_int(r->json, "items[0].moves_total"), 0);
	assert_true(fx_json_has(r->json, "next_cursor"));
	r = fx_request(fx, op, "GET",
	    fx_str(fx, "/v1/capacity/defrag-plans?limit=2&cursor=%s",
		fx_json_str(r->json, "next_cursor")),
	    NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_int(r->json, "items[0].id"), a);
	r = fx_request(fx, op, "GET", "/v1/capacity/defrag-plans?state=applied", NULL);
	assert_status(r, 200);
	for (size_t i = 0; i < fx_json_len(r->json, "items"); i++)
		assert_json_str(r->json, fx_str(fx, "items[%zu].state", i), "applied");
	assert_true(fx_json_len(r->json, "items") >= 3);
	r = fx_request(fx, op, "GET", "/v1/capacity/defrag-plans?state=nope", NULL);
	assert_status(r, 422);
	r = fx_request(fx, alice, "GET", "/v1/capacity/defrag-plans", NULL);
	assert_status(r, 403);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_apply_fragmented_fleet),
		cmocka_unit_test(test_cancel_expire_list),
		cmocka_unit_test(test_move_paths),
	};

	return fixture_run_tests(tests);
}
