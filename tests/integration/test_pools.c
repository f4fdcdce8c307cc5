/*
 * test_pools.c - GPU pools and the pool-request workflow end to end:
 * MIG and whole-GPU requests through submit, approve, expand, shrink and
 * release; insufficient capacity (nothing changes); quotas at submission
 * and at approval; rejection and cancellation; expiry of pending
 * requests; time-bounded pools released by the worker with the ledger
 * closed at the end time; a shrink that frees whole GPUs; idempotent
 * retries of submit and approve; validation; and the access matrix.
 *
 * Each test places on a GPU model of its own, so the tests share the
 * database without sharing capacity. After each test the database
 * invariants are checked with SQL (check_invariants).
 */
#include "fixture.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* tokens, set up once */
static const char *op;    /* operator */
static const char *alice; /* owner of pa */
static const char *bob;   /* member of pa */
static const char *dave;  /* member of pa */
static const char *vic;   /* viewer of pa */
static const char *carol; /* owner of pb */

/* ---- helpers ---- */

static struct gp_client_response *
submit(struct fixture *fx, const char *token, const char *project, const char *action,
    const char *pool, const char *items_json, long status)
{
	struct gp_client_response *r;

	if (items_json != NULL)
		r = fx_request(fx, token, "POST",
		    fx_str(fx, "/v1/projects/%s/pool-requests", project),
		    "{\"action\":\"%s\",\"pool\":\"%s\",\"items\":%s,"
		    "\"justification\":\"test\"}",
		    action, pool, items_json);
	else
		r = fx_request(fx, token, "POST",
		    fx_str(fx, "/v1/projects/%s/pool-requests", project),
		    "{\"action\":\"%s\",\"pool\":\"%s\"}", action, pool);
	assert_status(r, status);
	return r;
}

static int64_t
submit_id(struct fixture *fx, const char *token, const char *project, const char *action,
    const char *pool, const char *items_json)
{
	struct gp_client_response *r = submit(fx, token, project, action, pool, items_json, 201);

	assert_json_str(r->json, "state", "pending");
	assert_json_str(r->json, "action", action);
	return fx_json_int(r->json, "id");
}

static struct gp_client_response *
decide(struct fixture *fx, const char *token, int64_t id, const char *what, const char *body,
    long status)
{
	struct gp_client_response *r;

	r = fx_request(fx, token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/%s", (long long)id, what), "%s", body ? body : "{}");
	assert_status(r, status);
	return r;
}

static struct gp_client_response *
approve(struct fixture *fx, int64_t id, long status)
{
	return decide(fx, op, id, "approve", "{\"note\":\"ok\"}", status);
}

static const char *
state_of_request(struct fixture *fx, int64_t id)
{
	return fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1",
	    fx_str(fx, "%lld", (long long)id));
}

/* Every row an approval could change, as one comparable text. */
static const char *
world(struct fixture *fx)
{
	return fx_sql_text(fx,
	    "SELECT concat_ws(' | ', "
	    "(SELECT string_agg(concat_ws(',', id, gpu_id, profile, start, state, pool_id), ';' "
	    " ORDER BY id) FROM allocations), "
	    "(SELECT string_agg(concat_ws(',', id, status, items, generation), ';' ORDER BY id) "
	    " FROM pools), "
	    "(SELECT string_agg(concat_ws(',', id, state, generation), ';' ORDER BY id) "
	    " FROM pool_requests), "
	    "(SELECT string_agg(concat_ws(',', id, count, ended_at), ';' ORDER BY id) "
	    " FROM usage_ledger), "
	    "(SELECT string_agg(concat_ws(',', id, generation), ';' ORDER BY id) FROM nodes), "
	    "(SELECT string_agg(concat_ws(',', id, layout, mig_enabled), ';' ORDER BY id) FROM gpus), "
	    "(SELECT count(*) FROM outbox), (SELECT count(*) FROM pool_request_events), "
	    "(SELECT count(*) FROM audit_log))");
}

/* The invariants of docs/design.md section 3 as they concern pools. */
static void
check_invariants(struct fixture *fx)
{
	/* 1. no overlapping live allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN allocations b ON a.gpu_id = b.gpu_id "
			     "AND a.id < b.id AND a.state <> 'released' AND b.state <> 'released' "
			     "AND int4range(a.start, a.start + a.size) && int4range(b.start, b.start + b.size)"),
	    0);
	/* 3. a pool's live allocations equal its SpecAndCount, item by item */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pools p WHERE p.items <> (SELECT coalesce(jsonb_agg("
			     "jsonb_build_object('model', m, 'profile', pf, 'count', c) ORDER BY m, pf), '[]') "
			     "FROM (SELECT g.model AS m, a.profile AS pf, count(*) AS c FROM allocations a "
			     "JOIN gpus g ON g.id = a.gpu_id WHERE a.pool_id = p.id "
			     "AND a.state NOT IN ('releasing', 'released') GROUP BY 1, 2) s)"),
	    0);
	/* 4. open ledger intervals sum, per pool and kind, to the live allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT pool_id, model, profile, sum(count) AS n FROM usage_ledger "
			     "WHERE ended_at IS NULL GROUP BY 1, 2, 3) l FULL JOIN (SELECT a.pool_id, g.model, "
			     "a.profile, count(*) AS n FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
			     "WHERE a.pool_id IS NOT NULL AND a.state NOT IN ('releasing', 'released') "
			     "GROUP BY 1, 2, 3) a USING (pool_id, model, profile) "
			     "WHERE l.n IS DISTINCT FROM a.n"),
	    0);
	/* every approved create/expand made exactly its items */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r WHERE r.state = 'approved' "
			     "AND r.action IN ('create', 'expand') AND (SELECT sum((i->>'count')::int) "
			     "FROM jsonb_array_elements(r.items) i) <> (SELECT count(*) FROM allocations a "
			     "WHERE a.request_id = r.id)"),
	    0);
	/* gpus.layout mirrors the live allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus g WHERE g.layout <> coalesce((SELECT string_agg(a.profile "
			     "|| '@' || a.start, ',' ORDER BY a.start) FROM allocations a WHERE a.gpu_id = g.id "
			     "AND a.state <> 'released'), '')"),
	    0);
	/* every request's history starts with its submission and ends in its state */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r WHERE r.state <> (SELECT e.to_state "
			     "FROM pool_request_events e WHERE e.request_id = r.id ORDER BY e.id DESC LIMIT 1) "
			     "OR (SELECT e.from_state IS NULL AND e.to_state = 'pending' FROM pool_request_events e "
			     "WHERE e.request_id = r.id ORDER BY e.id LIMIT 1) IS NOT TRUE"),
	    0);
}

/* The agent's part, until the agent issue: releasing allocations are gone. */
static void
agent_confirms_releases(struct fixture *fx)
{
	fx_sql_exec(fx,
	    "UPDATE allocations SET state = 'released', released_at = now() "
	    "WHERE state = 'releasing'");
}

/* Wait (10 s at most) until sql returns true. */
static void
wait_until(struct fixture *fx, const char *sql)
{
	for (int i = 0; i < 100; i++) {
		if (fx_sql_int64(fx, sql) != 0)
			return;
		usleep(100000);
	}
	fail_msg("timed out waiting for: %s", sql);
}

/* ---- setup ---- */

static int
group_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_EXPIRY_INTERVAL=1", NULL };
	struct fixture_options opts = { .server_env = env };
	struct fixture *fx;
	struct gp_client_response *r;

	if (fixture_create(&opts, &fx) < 0)
		return -1;
	*state = fx;
	op = fixture_create_user(fx, "op", "operator");
	alice = fixture_create_user(fx, "alice", "none");
	bob = fixture_create_user(fx, "bob", "none");
	dave = fixture_create_user(fx, "dave", "none");
	vic = fixture_create_user(fx, "vic", "none");
	carol = fixture_create_user(fx, "carol", "none");
	for (int i = 0; i < 2; i++) {
		const char *p = i == 0 ? "pa" : "pb";

		r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
		    "{\"name\":\"%s\",\"display_name\":\"%s\"}", p, p);
		if (r->status != 201)
			return -1;
	}
	{
		static const struct {
			const char *p, *u, *role;
		} m[] = {
			{ "pa", "alice", "owner" },
			{ "pa", "bob", "member" },
			{ "pa", "dave", "member" },
			{ "pa", "vic", "viewer" },
			{ "pb", "carol", "owner" },
		};

		for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
			r = fx_request(fx, fx->admin_token, "PUT",
			    fx_str(fx, "/v1/projects/%s/members/%s", m[i].p, m[i].u),
			    "{\"role\":\"%s\"}", m[i].role);
			if (r->status != 201)
				return -1;
		}
	}
	return 0;
}

/* ---- tests ---- */

/* MIG: create, expand, shrink, release; the views, the ledger, the outbox. */
static void
test_mig_workflow(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t id, pool_id, gen0;
	const char *decided;

	fx_fleet(fx, "mig", "H100-80GB", 2, 1, true);
	fx_agents_manage(fx, "mig");
	gen0 = fx_sql_int64(fx, "SELECT sum(generation) FROM nodes WHERE name LIKE 'mig-%'");
	r = submit(fx, bob, "pa", "create", "train",
	    "[\"H100-80GB/3g.40gb=2\",{\"model\":\"H100-80GB\",\"profile\":\"1g.10gb\",\"count\":1}]",
	    201);
	id = fx_json_int(r->json, "id");
	pool_id = fx_json_int(r->json, "pool_id");
	assert_string_equal(r->location, fx_str(fx, "/v1/pool-requests/%lld", (long long)id));
	assert_json_str(r->json, "pool", "train");
	assert_json_str(r->json, "project", "pa");
	assert_json_str(r->json, "requested_by", "bob");
	assert_json_str(r->json, "items[0].profile", "1g.10gb");
	assert_json_int(r->json, "items[1].count", 2);
	assert_json_null(r->json, "decided_at");

	/* the pool exists, pending, holding nothing */
	r = fx_request(fx, bob, "GET", fx_str(fx, "/v1/pools/%lld", (long long)pool_id), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "status", "pending");
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	assert_int_equal(fx_json_len(r->json, "allocations"), 0);

	/* members may not approve */
	decide(fx, bob, id, "approve", NULL, 403);
	decide(fx, alice, id, "approve", NULL, 403);
	assert_string_equal(state_of_request(fx, id), "pending");

	r = approve(fx, id, 200);
	assert_json_str(r->json, "state", "approved");
	assert_json_str(r->json, "decided_by", "op");
	assert_json_str(r->json, "note", "ok");
	assert_int_equal(fx_json_len(r->json, "allocations"), 3);
	for (int i = 0; i < 3; i++) {
		const char *p = fx_str(fx, "allocations[%d]", i);
		const char *prof = fx_json_str(r->json, fx_str(fx, "%s.profile", p));

		assert_json_str(r->json, fx_str(fx, "%s.state", p), "reserved");
		assert_json_str(r->json, fx_str(fx, "%s.resource_name", p),
		    fx_str(fx, "nvidia.com/mig-%s", prof));
		assert_true(
		    strncmp(fx_json_str(r->json, fx_str(fx, "%s.node", p)), "mig-n", 5) == 0);
	}
	decided = fx_json_str(r->json, "decided_at");

	/* the database: allocations, ledger from the approval time, outbox, nodes, history, audit */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE pool_id = $1 "
			     "AND state = 'reserved' AND request_id = $2",
			     fx_str(fx, "%lld", (long long)pool_id),
			     fx_str(fx, "%lld", (long long)id)),
	    3);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM usage_ledger l JOIN pool_requests r "
			     "ON r.id = l.opened_by WHERE l.pool_id = $1 AND l.ended_at IS NULL "
			     "AND l.started_at = r.decided_at",
			     fx_str(fx, "%lld", (long long)pool_id)),
	    2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(DISTINCT g.node_id) FROM allocations a "
			     "JOIN gpus g ON g.id = a.gpu_id WHERE a.request_id = $1",
			     fx_str(fx, "%lld", (long long)id)),
	    fx_sql_int64(fx, "SELECT count(*) FROM outbox WHERE request_id = $1",
		fx_str(fx, "%lld", (long long)id)));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM outbox o JOIN nodes n "
			     "ON n.id = o.node_id WHERE o.request_id = $1 "
			     "AND o.generation = n.generation",
			     fx_str(fx, "%lld", (long long)id)),
	    fx_sql_int64(fx, "SELECT count(*) FROM outbox WHERE request_id = $1",
		fx_str(fx, "%lld", (long long)id)));
	assert_true(
	    fx_sql_int64(fx, "SELECT sum(generation) FROM nodes WHERE name LIKE 'mig-%'") > gen0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = "
			     "'pool_request.approve' AND object_id = $1 AND actor = 'op'",
			     fx_str(fx, "%lld", (long long)id)),
	    1);

	/* the request with its history */
	r = fx_request(fx, bob, "GET", fx_str(fx, "/v1/pool-requests/%lld", (long long)id), NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "history"), 2);
	assert_json_null(r->json, "history[0].from");
	assert_json_str(r->json, "history[0].to", "pending");
	assert_json_str(r->json, "history[0].actor", "bob");
	assert_json_str(r->json, "history[1].from", "pending");
	assert_json_str(r->json, "history[1].to", "approved");
	assert_json_str(r->json, "history[1].actor", "op");
	assert_json_str(r->json, "decided_at", decided);

	/* the pool */
	r = fx_request(fx, bob, "GET", fx_str(fx, "/v1/pools/%lld", (long long)pool_id), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "status", "provisioning");
	assert_json_str(r->json, "name", "train");
	assert_json_str(r->json, "items[1].profile", "3g.40gb");
	assert_json_int(r->json, "items[1].count", 2);
	assert_int_equal(fx_json_len(r->json, "allocations"), 3);
	assert_true(strncmp(fx_json_str(r->json, "allocations[0].gpu_uuid"), "GPU-", 4) == 0);
	r = fx_request(fx, alice, "GET", "/v1/projects/pa/pools", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_int(r->json, "items[0].id", pool_id);
	check_invariants(fx);

	/* expand: the items are what to add */
	id = submit_id(fx, bob, "pa", "expand", "train", "[\"H100-80GB/1g.10gb=2\"]");
	r = approve(fx, id, 200);
	assert_int_equal(fx_json_len(r->json, "allocations"), 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT (items->0->>'count')::int FROM pools WHERE id = $1",
			     fx_str(fx, "%lld", (long long)pool_id)),
	    3);
	check_invariants(fx);

	/* shrink: one 3g.40gb goes to releasing, its ledger interval closes and one reopens */
	id = submit_id(fx, bob, "pa", "shrink", "train", "[\"H100-80GB/3g.40gb=1\"]");
	r = approve(fx, id, 200);
	assert_int_equal(fx_json_len(r->json, "allocations"), 1);
	assert_json_str(r->json, "allocations[0].state", "releasing");
	assert_json_str(r->json, "allocations[0].profile", "3g.40gb");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM usage_ledger l JOIN pool_requests r "
			     "ON r.id = $1 WHERE l.closed_by = r.id AND l.ended_at = r.decided_at "
			     "AND l.profile = '3g.40gb'",
			     fx_str(fx, "%lld", (long long)id)),
	    1);
	assert_int_equal(fx_sql_int64(fx, "SELECT count FROM usage_ledger WHERE opened_by = $1",
			     fx_str(fx, "%lld", (long long)id)),
	    1);
	check_invariants(fx);

	/* release: everything releasing, the pool empty, every interval closed */
	id = submit_id(fx, alice, "pa", "release", "train", NULL);
	r = approve(fx, id, 200);
	assert_int_equal(fx_json_len(r->json, "allocations"), 4);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM usage_ledger WHERE pool_id = $1 "
			     "AND ended_at IS NULL",
			     fx_str(fx, "%lld", (long long)pool_id)),
	    0);
	r = fx_request(fx, bob, "GET", fx_str(fx, "/v1/pools/%lld", (long long)pool_id), NULL);
	assert_json_str(r->json, "status", "releasing");
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	check_invariants(fx);
	/* nothing more may happen to it */
	submit(fx, bob, "pa", "expand", "train", "[\"H100-80GB/1g.10gb=1\"]", 409);

	/* the agent confirms; the worker settles the pool; the name is free again */
	agent_confirms_releases(fx);
	wait_until(fx,
	    fx_str(fx,
		"SELECT count(*) FROM pools WHERE id = %lld "
		"AND status = 'released'",
		(long long)pool_id));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id "
			     "WHERE n.name LIKE 'mig-%' AND g.layout <> ''"),
	    0);
	id = submit_id(fx, bob, "pa", "create", "train", "[\"H100-80GB/7g.80gb=1\"]");
	approve(fx, id, 200);
	check_invariants(fx);
}

/* Whole GPUs: each on its own empty GPU, start 0 and every slice; nvidia.com/gpu. */
static void
test_full_gpus(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t id;

	fx_fleet(fx, "full", "A100-40GB", 3, 1, false);
	id = submit_id(fx, alice, "pa", "create", "whole", "[\"A100-40GB/full=2\"]");
	r = approve(fx, id, 200);
	assert_int_equal(fx_json_len(r->json, "allocations"), 2);
	for (int i = 0; i < 2; i++) {
		assert_json_str(r->json, fx_str(fx, "allocations[%d].profile", i), "full");
		assert_json_int(r->json, fx_str(fx, "allocations[%d].start", i), 0);
		assert_json_int(r->json, fx_str(fx, "allocations[%d].size", i), 8);
		assert_json_str(r->json, fx_str(fx, "allocations[%d].resource_name", i),
		    "nvidia.com/gpu");
	}
	assert_string_not_equal(fx_json_str(r->json, "allocations[0].gpu_uuid"),
	    fx_json_str(r->json, "allocations[1].gpu_uuid"));
	/* a MIG request on the same model takes the third GPU, switching its mode */
	id = submit_id(fx, alice, "pa", "create", "mixed", "[\"A100-40GB/3g.20gb=1\"]");
	r = approve(fx, id, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus WHERE model = 'A100-40GB' "
			     "AND mig_enabled"),
	    1);
	/* and now a whole GPU no longer fits */
	id = submit_id(fx, alice, "pa", "expand", "whole", "[\"A100-40GB/full=1\"]");
	r = approve(fx, id, 409);
	assert_json_str(r->json, "code", "insufficient_capacity");
	check_invariants(fx);
}

/* 409 insufficient_capacity names each short item; nothing changes. */
static void
test_insufficient(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *before;
	int64_t id;

	fx_fleet(fx, "small", "H200-141GB", 1, 1, true);
	id = submit_id(fx, bob, "pa", "create", "big",
	    "[\"H200-141GB/7g.141gb=2\",\"H200-141GB/1g.18gb=1\"]");
	before = world(fx);
	r = approve(fx, id, 409);
	assert_json_str(r->json, "code", "insufficient_capacity");
	assert_string_equal(r->content_type, "application/problem+json");
	/* one GPU holds one 7g.141gb: the second and the 1g.18gb are missing */
	assert_int_equal(fx_json_len(r->json, "short"), 2);
	assert_json_str(r->json, "short[0].model", "H200-141GB");
	assert_json_str(r->json, "short[0].profile", "1g.18gb");
	assert_json_int(r->json, "short[0].missing", 1);
	assert_json_str(r->json, "short[1].profile", "7g.141gb");
	assert_json_int(r->json, "short[1].missing", 1);
	assert_string_equal(world(fx), before);
	assert_string_equal(state_of_request(fx, id), "pending");
	/* it stays pending: once capacity exists it can be approved */
	fx_fleet(fx, "small2", "H200-141GB", 1, 2, true);
	r = approve(fx, id, 200);
	assert_int_equal(fx_json_len(r->json, "allocations"), 3);
	check_invariants(fx);
}

/* Quotas: refused at submission, re-checked at approval, admin only. */
static void
test_quota(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *before;
	int64_t id;

	fx_fleet(fx, "quota", "H100-NVL-94GB", 1, 2, true);
	r = fx_request(fx, alice, "PUT", "/v1/projects/pa/quota", "{\"items\":[]}");
	assert_status(r, 403);
	r = fx_request(fx, alice, "GET", "/v1/projects/pa/quota", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 0); /* was null, against the schema */
	assert_string_equal(r->etag, "\"0\"");
	assert_true(json_object_get_boolean(fx_json(r->json, "limited")) == false);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/pa/quota",
	    "{\"items\":[\"H100-NVL-94GB/1g.12gb=2\",\"H100-80GB/7g.80gb=1\","
	    "\"A100-40GB/full=2\",\"A100-40GB/3g.20gb=1\",\"H200-141GB/7g.141gb=1\","
	    "\"H200-141GB/1g.18gb=1\"]}");
	assert_status(r, 201);
	assert_int_equal(fx_json_len(r->json, "items"), 6);
	assert_json_str(r->json, "items[3].model", "H100-NVL-94GB");
	assert_json_int(r->json, "items[3].count", 2);
	/* its audit row holds objects, as GET /v1/audit's schema says (arrays before) */
	assert_string_equal(fx_sql_text(fx,
				"SELECT jsonb_typeof(after) || '/' || jsonb_typeof(after->'items') FROM "
				"audit_log WHERE action = 'project.quota.put' ORDER BY id DESC LIMIT 1"),
	    "object/array");
	assert_true(r->etag[0] != '\0');

	/* above the quota: 422 naming the item; a kind not listed is limited to 0 */
	r = submit(fx, bob, "pa", "create", "q1", "[\"H100-NVL-94GB/1g.12gb=3\"]", 422);
	assert_json_str(r->json, "code", "quota_exceeded");
	assert_json_str(r->json, "item.profile", "1g.12gb");
	assert_json_int(r->json, "item.limit", 2);
	assert_json_str(r->json, "errors[0].field", "items[0]");
	r = submit(fx, bob, "pa", "create", "q1",
	    "[\"H100-NVL-94GB/1g.12gb=1\",\"H100-NVL-94GB/2g.24gb=1\"]", 422);
	assert_json_str(r->json, "item.profile", "2g.24gb");
	assert_json_int(r->json, "item.limit", 0);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM pools WHERE name = 'q1'"), 0);

	/* within it */
	id = submit_id(fx, bob, "pa", "create", "q1", "[\"H100-NVL-94GB/1g.12gb=2\"]");
	/* lowered before the approval: re-checked, refused, nothing changes */
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/pa/quota",
	    "{\"items\":[\"H100-NVL-94GB/1g.12gb=1\"]}");
	assert_status(r, 200);
	before = world(fx);
	r = approve(fx, id, 422);
	assert_json_str(r->json, "code", "quota_exceeded");
	assert_string_equal(world(fx), before);
	/* no quota: no limit */
	r = fx_request(fx, fx->admin_token, "DELETE", "/v1/projects/pa/quota", NULL);
	assert_status(r, 204);
	r = fx_request(fx, fx->admin_token, "DELETE", "/v1/projects/pa/quota", NULL);
	assert_status(r, 404);
	approve(fx, id, 200);
	r = fx_request(fx, bob, "GET", "/v1/projects/pa/quota", NULL);
	assert_json_str(r->json, "usage[0].model",
	    fx_sql_text(fx,
		"SELECT min(i->>'model') FROM pools p, jsonb_array_elements(p.items) i "
		"WHERE p.project_id = (SELECT id FROM projects WHERE name = 'pa') "
		"AND p.status <> 'released'"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action LIKE "
			     "'project.quota.%'"),
	    3);
	check_invariants(fx);
}

/* Rejection (operators, with a reason) and cancellation (requester, owner, admin). */
static void
test_reject_cancel(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t id;

	id = submit_id(fx, bob, "pa", "create", "nope", "[\"L40S-48GB/full=1\"]");
	decide(fx, bob, id, "reject", "{\"reason\":\"no\"}", 403);
	r = decide(fx, op, id, "reject", "{}", 422);
	assert_json_str(r->json, "errors[0].field", "reason");
	r = decide(fx, op, id, "reject", "{\"reason\":\"not this quarter\"}", 200);
	assert_json_str(r->json, "state", "rejected");
	assert_json_str(r->json, "reason", "not this quarter");
	assert_json_str(r->json, "decided_by", "op");
	/* a rejected create releases its pool: the name is free again */
	assert_string_equal(fx_sql_text(fx,
				"SELECT status FROM pools WHERE id = (SELECT pool_id "
				"FROM pool_requests WHERE id = $1)",
				fx_str(fx, "%lld", (long long)id)),
	    "released");
	approve(fx, id, 409);
	decide(fx, bob, id, "cancel", NULL, 409);

	/* cancel: the requester, an owner, admin; not another member, not an operator */
	id = submit_id(fx, bob, "pa", "create", "nope", "[\"L40S-48GB/full=1\"]");
	decide(fx, dave, id, "cancel", NULL, 403);
	decide(fx, op, id, "cancel", NULL, 403);
	decide(fx, carol, id, "cancel", NULL, 404);
	r = decide(fx, bob, id, "cancel", NULL, 200);
	assert_json_str(r->json, "state", "cancelled");
	id = submit_id(fx, bob, "pa", "create", "nope", "[\"L40S-48GB/full=1\"]");
	decide(fx, alice, id, "cancel", "{}", 200);
	id = submit_id(fx, bob, "pa", "create", "nope", "[\"L40S-48GB/full=1\"]");
	decide(fx, fx->admin_token, id, "cancel", NULL, 200);
	r = decide(fx, fx->admin_token, id, "cancel", "{\"why\":1}", 422);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action IN "
			     "('pool_request.cancel', 'pool_request.reject')"),
	    4);
	r = fx_request(fx, alice, "GET", fx_str(fx, "/v1/pool-requests/%lld", (long long)id), NULL);
	assert_json_str(r->json, "history[1].to", "cancelled");
	assert_json_str(r->json, "history[1].actor", "admin");
	check_invariants(fx);
}

/* A pending request expires after GPUPOOL_REQUEST_TTL; the worker does it. */
static void
test_expiry(void **state)
{
	static const char *const env[] = { "GPUPOOL_REQUEST_TTL=1", "GPUPOOL_EXPIRY_INTERVAL=1",
		NULL };
	struct fixture *fx = *state;
	struct fx_server *main_server = fx->server, *short_ttl;
	struct gp_client_response *r;
	int64_t id, pool_id;

	short_ttl = fixture_server_start(fx, env);
	assert_non_null(short_ttl);
	fx->server = short_ttl;
	r = submit(fx, bob, "pa", "create", "brief", "[\"T4-16GB/full=1\"]", 201);
	fx->server = main_server;
	id = fx_json_int(r->json, "id");
	pool_id = fx_json_int(r->json, "pool_id");
	wait_until(fx,
	    fx_str(fx,
		"SELECT count(*) FROM pool_requests WHERE id = %lld "
		"AND state = 'expired'",
		(long long)id));
	r = fx_request(fx, bob, "GET", fx_str(fx, "/v1/pool-requests/%lld", (long long)id), NULL);
	assert_json_str(r->json, "state", "expired");
	assert_json_str(r->json, "history[1].to", "expired");
	assert_json_null(r->json, "history[1].actor");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE id = $1",
				fx_str(fx, "%lld", (long long)pool_id)),
	    "released");
	approve(fx, id, 409);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = "
			     "'pool_request.expire' AND object_id = $1",
			     fx_str(fx, "%lld", (long long)id)),
	    1);
	assert_int_equal(fixture_server_stop(fx, short_ttl), 0);
	check_invariants(fx);
}

/* A pool with ends_at is released by the worker; billing ends at the end time. */
static void
test_time_bounded(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *ends;
	int64_t id, pool_id;

	fx_fleet(fx, "timed", "L4-24GB", 1, 2, false);
	fx_agents_manage(fx, "timed");
	ends = fx_sql_text(fx,
	    "SELECT to_char((now() + interval '3 seconds') AT TIME ZONE 'UTC', "
	    "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')");
	r = fx_request(fx, bob, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"timed\",\"items\":[\"L4-24GB/full=2\"],"
	    "\"ends_at\":\"%s\"}",
	    ends);
	assert_status(r, 201);
	assert_json_str(r->json, "ends_at", ends);
	id = fx_json_int(r->json, "id");
	pool_id = fx_json_int(r->json, "pool_id");
	/* ends_at is for create only, and in the future */
	r = fx_request(fx, bob, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"late\",\"items\":[\"L4-24GB/full=1\"],"
	    "\"ends_at\":\"2001-01-01T00:00:00Z\"}");
	assert_status(r, 422);
	approve(fx, id, 200);
	r = fx_request(fx, bob, "GET", fx_str(fx, "/v1/pools/%lld", (long long)pool_id), NULL);
	assert_json_str(r->json, "ends_at", ends);
	wait_until(fx,
	    fx_str(fx,
		"SELECT count(*) FROM pools WHERE id = %lld "
		"AND status = 'releasing'",
		(long long)pool_id));
	/* the ledger closed at the end time, not when the worker ran */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM usage_ledger l JOIN pools p "
			     "ON p.id = l.pool_id WHERE l.pool_id = $1 "
			     "AND l.ended_at = p.ends_at",
			     fx_str(fx, "%lld", (long long)pool_id)),
	    1);
	/* a system release request, approved, in the pool's history */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests WHERE pool_id = $1 "
			     "AND action = 'release' AND state = 'approved' "
			     "AND requested_by IS NULL AND decided_by IS NULL",
			     fx_str(fx, "%lld", (long long)pool_id)),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE pool_id = $1 "
			     "AND state = 'releasing'",
			     fx_str(fx, "%lld", (long long)pool_id)),
	    2);
	agent_confirms_releases(fx);
	wait_until(fx,
	    fx_str(fx,
		"SELECT count(*) FROM pools WHERE id = %lld "
		"AND status = 'released'",
		(long long)pool_id));
	check_invariants(fx);
}

/*
 * What a release leaves behind, for pool_id: its release request and
 * history, the pool, its allocations, the ledger, the outbox and the
 * approval's audit row, with what differs by nature (ids, names, times,
 * actors, nodes) left out.
 */
static const char *
release_shape(struct fixture *fx, int64_t pool_id)
{
	const char *rel =
	    fx_str(fx, "(SELECT id FROM pool_requests WHERE pool_id = %lld AND action = 'release')",
		(long long)pool_id);

	return fx_sql_text(fx,
	    fx_str(fx,
		"SELECT concat_ws(' | ', "
		"(SELECT concat_ws(',', action, state, items, generation) FROM pool_requests "
		" WHERE id = %1$s), "
		"(SELECT string_agg(concat_ws('>', coalesce(from_state, '-'), to_state), ';' "
		" ORDER BY id) FROM pool_request_events WHERE request_id = %1$s), "
		"(SELECT concat_ws(',', status, items) FROM pools WHERE id = %2$lld), "
		"(SELECT string_agg(concat_ws(',', profile, size, state, "
		" release_request_id = %1$s), ';' ORDER BY profile, start, gpu_id) "
		" FROM allocations WHERE pool_id = %2$lld), "
		"(SELECT string_agg(concat_ws(',', model, profile, count, ended_at IS NOT NULL, "
		" closed_by = %1$s), ';' ORDER BY id) FROM usage_ledger WHERE pool_id = %2$lld), "
		"(SELECT count(*) = (SELECT count(DISTINCT g.node_id) FROM allocations a "
		" JOIN gpus g ON g.id = a.gpu_id WHERE a.pool_id = %2$lld) FROM outbox "
		" WHERE request_id = %1$s), "
		"(SELECT string_agg(concat_ws(' ; ', action, object_type, "
		" before - 'id' - 'pool' - 'pool_id' - 'requested_by' - 'requested_at' "
		" - 'expires_at' - 'justification', "
		" after - 'id' - 'pool' - 'pool_id' - 'requested_by' - 'requested_at' "
		" - 'expires_at' - 'justification' - 'decided_by' - 'decided_at' - 'note' "
		" - 'allocations', "
		" (SELECT jsonb_agg(x - 'node' - 'gpu_uuid' - 'gpu_index' ORDER BY x::text) "
		"  FROM jsonb_array_elements(after->'allocations') x), "
		" (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(before) k), "
		" (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(after) k)), "
		" ';') FROM audit_log WHERE object_type = 'pool_request' AND object_id = %1$s::text "
		" AND action <> 'pool_request.submit'))",
		rel, (long long)pool_id));
}

/*
 * One release path: a pool released through the API and one released at
 * its end time leave the same rows and the same audit document.
 */
static void
test_release_paths_agree(void **state)
{
	struct fixture *fx = *state;
	const char *api_shape, *due_shape;
	int64_t pa_id, pd_id, id;
	struct gp_client_response *r;

	fx_fleet(fx, "relpath", "L4-24GB", 2, 2, false);
	fx_agents_manage(fx, "relpath");
	r = submit(fx, bob, "pa", "create", "rel-api", "[\"L4-24GB/full=2\"]", 201);
	pa_id = fx_json_int(r->json, "pool_id");
	approve(fx, fx_json_int(r->json, "id"), 200);
	r = submit(fx, bob, "pa", "create", "rel-due", "[\"L4-24GB/full=2\"]", 201);
	pd_id = fx_json_int(r->json, "pool_id");
	approve(fx, fx_json_int(r->json, "id"), 200);
	/* through the API */
	id = submit_id(fx, bob, "pa", "release", "rel-api", NULL);
	approve(fx, id, 200);
	/* at its end time, by the expiry worker */
	fx_sql_exec(fx, "UPDATE pools SET ends_at = now() WHERE id = $1",
	    fx_str(fx, "%lld", (long long)pd_id));
	wait_until(fx,
	    fx_str(fx, "SELECT count(*) FROM pools WHERE id = %lld AND status = 'releasing'",
		(long long)pd_id));
	api_shape = release_shape(fx, pa_id);
	due_shape = release_shape(fx, pd_id);
	assert_non_null(strstr(api_shape, "release,approved,[],2"));
	assert_non_null(strstr(api_shape, "pool_request.approve"));
	assert_string_equal(due_shape, api_shape);
	/* the worker's audit row is the system's: no actor, and the reason */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log a JOIN pool_requests r "
			     "ON a.object_id = r.id::text WHERE r.pool_id = $1 AND r.action = 'release' "
			     "AND a.action = 'pool_request.approve' AND a.actor_id IS NULL "
			     "AND a.after->>'note' = 'the pool reached its end time' "
			     "AND a.after->'decided_by' = 'null'::jsonb",
			     fx_str(fx, "%lld", (long long)pd_id)),
	    1);
	agent_confirms_releases(fx);
	check_invariants(fx);
}

/*
 * A shrink frees GPUs whole where it can: the pool's two 3g.40gb on one
 * GPU are freed rather than the one sharing a GPU with another project.
 */
static void
test_shrink_whole_gpu(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t id, pool_id, gpu_a, gpu_b;

	fx_fleet(fx, "shr", "A100-80GB", 1, 2, true);
	r = submit(fx, bob, "pa", "create", "shr", "[\"A100-80GB/3g.40gb=2\"]", 201);
	pool_id = fx_json_int(r->json, "pool_id");
	approve(fx, fx_json_int(r->json, "id"), 200);
	gpu_a = fx_sql_int64(fx, "SELECT min(gpu_id) FROM allocations WHERE pool_id = $1",
	    fx_str(fx, "%lld", (long long)pool_id));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(DISTINCT gpu_id) FROM allocations "
			     "WHERE pool_id = $1",
			     fx_str(fx, "%lld", (long long)pool_id)),
	    1);
	/* another project takes a slice of the other GPU, then the pool grows onto it */
	id = submit_id(fx, carol, "pb", "create", "other", "[\"A100-80GB/1g.10gb=1\"]");
	approve(fx, id, 200);
	gpu_b = fx_sql_int64(fx, "SELECT gpu_id FROM allocations WHERE request_id = $1",
	    fx_str(fx, "%lld", (long long)id));
	assert_true(gpu_b != gpu_a);
	id = submit_id(fx, bob, "pa", "expand", "shr", "[\"A100-80GB/3g.40gb=1\"]");
	approve(fx, id, 200);
	assert_int_equal(fx_sql_int64(fx, "SELECT gpu_id FROM allocations WHERE request_id = $1",
			     fx_str(fx, "%lld", (long long)id)),
	    gpu_b);
	/* shrink by two: both on gpu_a go, so it becomes whole */
	id = submit_id(fx, bob, "pa", "shrink", "shr", "[\"A100-80GB/3g.40gb=2\"]");
	r = approve(fx, id, 200);
	assert_int_equal(fx_json_len(r->json, "allocations"), 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE "
			     "release_request_id = $1 AND gpu_id = $2",
			     fx_str(fx, "%lld", (long long)id),
			     fx_str(fx, "%lld", (long long)gpu_a)),
	    2);
	agent_confirms_releases(fx);
	assert_string_equal(fx_sql_text(fx, "SELECT layout FROM gpus WHERE id = $1",
				fx_str(fx, "%lld", (long long)gpu_a)),
	    "");
	/* shrinking what the pool does not hold, or all of it, is refused */
	submit(fx, bob, "pa", "shrink", "shr", "[\"A100-80GB/3g.40gb=2\"]", 409);
	submit(fx, bob, "pa", "shrink", "shr", "[\"A100-80GB/3g.40gb=1\"]", 409);
	submit(fx, bob, "pa", "shrink", "shr", "[\"A100-80GB/1g.10gb=1\"]", 409);
	check_invariants(fx);
}

/* Idempotency-Key: one request, one approval, the same response. */
static void
test_idempotent_retries(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r1, *r2;
	const char *const k1[] = { "Idempotency-Key: submit-1", NULL };
	const char *const k2[] = { "Idempotency-Key: approve-1", NULL };
	const char *body =
	    "{\"action\":\"create\",\"pool\":\"idem\",\"items\":[\"A10G-24GB/full=1\"]}";
	int64_t id;

	fx_fleet(fx, "idem", "A10G-24GB", 1, 1, false);
	r1 = fx_request_h(fx, bob, "POST", "/v1/projects/pa/pool-requests", k1, "%s", body);
	assert_status(r1, 201);
	r2 = fx_request_h(fx, bob, "POST", "/v1/projects/pa/pool-requests", k1, "%s", body);
	assert_status(r2, 201);
	assert_string_equal(r1->body, r2->body);
	id = fx_json_int(r1->json, "id");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r JOIN pools p "
			     "ON p.id = r.pool_id WHERE p.name = 'idem'"),
	    1);
	r1 = fx_request_h(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id), k2, "{\"note\":\"once\"}");
	assert_status(r1, 200);
	r2 = fx_request_h(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id), k2, "{\"note\":\"once\"}");
	assert_status(r2, 200);
	assert_string_equal(r1->body, r2->body);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM allocations WHERE request_id = $1",
			     fx_str(fx, "%lld", (long long)id)),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_request_events WHERE "
			     "request_id = $1 AND to_state = 'approved'",
			     fx_str(fx, "%lld", (long long)id)),
	    1);
	/* without the key a second approval is a conflict */
	approve(fx, id, 409);
	check_invariants(fx);
}

/* Bad input answers 422/409 with field paths and changes nothing. */
static void
test_validation(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *before = world(fx);

	r = submit(fx, bob, "pa", "grow", "v", "[\"H100-80GB/1g.10gb=1\"]", 422);
	assert_json_str(r->json, "errors[0].field", "action");
	r = submit(fx, bob, "pa", "create", "Bad_Name", "[\"H100-80GB/1g.10gb=1\"]", 422);
	assert_json_str(r->json, "errors[0].field", "pool");
	r = submit(fx, bob, "pa", "create", "v", "[\"H100-80GB/9g.90gb=1\"]", 422);
	assert_json_str(r->json, "errors[0].field", "items[0].profile");
	r = submit(fx, bob, "pa", "create", "v", "[\"X100/full=1\"]", 422);
	assert_json_str(r->json, "errors[0].field", "items[0].model");
	r = submit(fx, bob, "pa", "create", "v",
	    "[{\"model\":\"H100-80GB\",\"profile\":\"full\","
	    "\"count\":0}]",
	    422);
	assert_json_str(r->json, "errors[0].field", "items[0].count");
	r = submit(fx, bob, "pa", "create", "v", "[\"H100-80GB/full=1\",\"H100-80GB/full=2\"]",
	    422);
	assert_json_str(r->json, "errors[0].field", "items[1]");
	r = submit(fx, bob, "pa", "create", "v", "[]", 422);
	r = submit(fx, bob, "pa", "create", "v", NULL, 422);
	assert_json_str(r->json, "errors[0].field", "items");
	r = submit(fx, bob, "pa", "create", "v", "[\"H100-80GB/1g.10gb=x\"]", 422);
	r = fx_request(fx, bob, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"release\",\"pool\":\"v\",\"items\":[\"H100-80GB/full=1\"]}");
	assert_status(r, 422);
	r = fx_request(fx, bob, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"v\",\"items\":[\"H100-80GB/full=1\"],"
	    "\"colour\":\"red\"}");
	assert_status(r, 422);
	assert_json_str(r->json, "errors[0].field", "colour");
	/* a pool that does not exist, or is not yet approved */
	r = submit(fx, bob, "pa", "expand", "ghost", "[\"H100-80GB/full=1\"]", 422);
	assert_json_str(r->json, "errors[0].field", "pool");
	submit(fx, bob, "pa", "create", "pend", "[\"H100-80GB/full=1\"]", 201);
	submit(fx, bob, "pa", "expand", "pend", "[\"H100-80GB/full=1\"]", 409);
	submit(fx, bob, "pa", "create", "pend", "[\"H100-80GB/full=1\"]", 409);
	r = fx_request(fx, bob, "GET", "/v1/pool-requests?state=bogus", NULL);
	assert_status(r, 422);
	r = fx_request(fx, bob, "GET", "/v1/projects/pa/pools?status=bogus", NULL);
	assert_status(r, 422);
	r = fx_request(fx, op, "POST", "/v1/pool-requests/abc/approve", "{}");
	assert_status(r, 404);
	r = fx_request(fx, op, "POST", "/v1/pool-requests/999999/approve", "{}");
	assert_status(r, 404);
	r = fx_request(fx, op, "POST", "/v1/pool-requests/1/approve", "{\"note\":5}");
	assert_status(r, 422);
	(void)before;
	check_invariants(fx);
}

/* Who may do what; another tenant's pools and requests are 404. */
static void
test_access(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t b_req, b_pool, a_req;

	fx_fleet(fx, "acc", "A30-24GB", 1, 1, true);
	r = submit(fx, carol, "pb", "create", "secret", "[\"A30-24GB/1g.6gb=1\"]", 201);
	b_req = fx_json_int(r->json, "id");
	b_pool = fx_json_int(r->json, "pool_id");
	approve(fx, b_req, 200);
	a_req = submit_id(fx, bob, "pa", "create", "mine", "[\"A30-24GB/1g.6gb=1\"]");

	/* project A's members (any role) get 404 on B's things */
	for (int i = 0; i < 3; i++) {
		const char *t = i == 0 ? alice : i == 1 ? bob : vic;

		r = fx_request(fx, t, "GET", fx_str(fx, "/v1/pools/%lld", (long long)b_pool), NULL);
		assert_problem(r, 404, "not_found");
		r = fx_request(fx, t, "GET", fx_str(fx, "/v1/pool-requests/%lld", (long long)b_req),
		    NULL);
		assert_problem(r, 404, "not_found");
		r = fx_request(fx, t, "GET", "/v1/projects/pb/pools", NULL);
		assert_status(r, 404);
		r = fx_request(fx, t, "GET", "/v1/pool-requests?project=pb", NULL);
		assert_status(r, 404);
		r = fx_request(fx, t, "GET", "/v1/projects/pb/quota", NULL);
		assert_status(r, 404);
		submit(fx, t, "pb", "create", "intruder", "[\"A30-24GB/1g.6gb=1\"]", 404);
		decide(fx, t, b_req, "cancel", NULL, 404);
	}
	/* a request list shows only one's own projects */
	r = fx_request(fx, carol, "GET", "/v1/pool-requests?limit=500", NULL);
	assert_status(r, 200);
	for (size_t i = 0; i < fx_json_len(r->json, "items"); i++)
		assert_json_str(r->json, fx_str(fx, "items[%zu].project", i), "pb");
	r = fx_request(fx, op, "GET", fx_str(fx, "/v1/pool-requests?project=pa&state=pending"),
	    NULL);
	assert_status(r, 200);
	assert_true(fx_json_len(r->json, "items") >= 1);
	for (size_t i = 0; i < fx_json_len(r->json, "items"); i++) {
		assert_json_str(r->json, fx_str(fx, "items[%zu].project", i), "pa");
		assert_json_str(r->json, fx_str(fx, "items[%zu].state", i), "pending");
	}
	/* viewers may read but not submit; members may not approve or reject */
	r = fx_request(fx, vic, "GET", fx_str(fx, "/v1/pool-requests/%lld", (long long)a_req),
	    NULL);
	assert_status(r, 200);
	submit(fx, vic, "pa", "create", "view", "[\"A30-24GB/1g.6gb=1\"]", 403);
	decide(fx, alice, a_req, "approve", NULL, 403);
	decide(fx, alice, a_req, "reject", "{\"reason\":\"x\"}", 403);
	/* staff do not submit for a project */
	submit(fx, op, "pa", "create", "staff", "[\"A30-24GB/1g.6gb=1\"]", 403);
	/* no token */
	r = fx_request(fx, NULL, "GET", "/v1/pool-requests", NULL);
	assert_status(r, 401);
	/* B's pool is B's: A cannot expand it by name (A has no such pool) */
	r = submit(fx, bob, "pa", "expand", "secret", "[\"A30-24GB/1g.6gb=1\"]", 422);
	check_invariants(fx);
}

/* The listing's ids (or GPU uuids), comma-separated, walked page by page. */
static const char *
walk_ids(struct fixture *fx, const char *token, const char *path, const char *key)
{
	const char *out = "", *cursor = NULL;

	for (;;) {
		struct gp_client_response *r = fx_request(fx, token, "GET",
		    cursor == NULL ? fx_str(fx, "%s&limit=1", path)
				   : fx_str(fx, "%s&limit=1&cursor=%s", path, cursor),
		    NULL);
		struct json_object *next;

		assert_status(r, 200);
		for (size_t i = 0; i < fx_json_len(r->json, "items"); i++) {
			const char *k = fx_str(fx, "items[%zu].%s", i, key);
			const char *v = strcmp(key, "id") == 0
			    ? fx_str(fx, "%lld", (long long)fx_json_int(r->json, k))
			    : fx_json_str(r->json, k);

			out = *out == '\0' ? v : fx_str(fx, "%s,%s", out, v);
		}
		next = fx_json(r->json, "next_cursor");
		if (next == NULL)
			return out;
		cursor = fx_str(fx, "%s", json_object_get_string(next));
	}
}

/*
 * GET /v1/pool-requests?project=&pool= and GET /v1/gpus?project=&pool=:
 * the requests of the project's pools of that name and the GPUs holding a
 * live allocation of it, equal to the SQL truth, paged with cursors bound
 * to the filter; another project's pool of the same name is not in them.
 */
static void
test_pool_filter(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *want, *cursor;
	int64_t fa;

	fx_fleet(fx, "pfl", "L4-24GB", 1, 4, false);
	fa = submit_id(fx, bob, "pa", "create", "fpool", "[\"L4-24GB/full=1\"]");
	approve(fx, fa, 200);
	approve(fx, submit_id(fx, bob, "pa", "expand", "fpool", "[\"L4-24GB/full=1\"]"), 200);
	submit_id(fx, bob, "pa", "expand", "fpool", "[\"L4-24GB/full=1\"]");
	submit_id(fx, bob, "pa", "create", "fother", "[\"L4-24GB/full=1\"]");
	approve(fx, submit_id(fx, carol, "pb", "create", "fpool", "[\"L4-24GB/full=1\"]"), 200);
	submit_id(fx, carol, "pb", "create", "fonlyb", "[\"L4-24GB/full=1\"]");

	/* requests: the SQL truth, for a member and for staff */
	want = fx_sql_text(fx,
	    "SELECT string_agg(r.id::text, ',' ORDER BY r.id) FROM pool_requests r "
	    "JOIN pools p ON p.id = r.pool_id JOIN projects j ON j.id = r.project_id "
	    "WHERE j.name = 'pa' AND p.name = 'fpool'");
	assert_string_equal(walk_ids(fx, bob, "/v1/pool-requests?project=pa&pool=fpool", "id"),
	    want);
	assert_string_equal(walk_ids(fx, op, "/v1/pool-requests?project=pa&pool=fpool", "id"),
	    want);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r JOIN pools p ON p.id = r.pool_id "
			     "JOIN projects j ON j.id = r.project_id "
			     "WHERE j.name = 'pa' AND p.name = 'fpool'"),
	    3);
	/* with state */
	want = fx_sql_text(fx,
	    "SELECT string_agg(r.id::text, ',' ORDER BY r.id) FROM pool_requests r "
	    "JOIN pools p ON p.id = r.pool_id JOIN projects j ON j.id = r.project_id "
	    "WHERE j.name = 'pa' AND p.name = 'fpool' AND r.state = 'pending'");
	assert_string_equal(walk_ids(fx, bob,
				"/v1/pool-requests?project=pa&pool=fpool&state=pending", "id"),
	    want);
	/* another project's pool: the project is 404 to A, its pool name is nothing in A */
	r = fx_request(fx, bob, "GET", "/v1/pool-requests?project=pb&pool=fpool", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, bob, "GET", "/v1/pool-requests?project=pa&pool=fonlyb", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	r = fx_request(fx, carol, "GET", "/v1/pool-requests?project=pb&pool=fpool", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].project", "pb");
	/* a cursor of one pool is not one of another */
	r = fx_request(fx, bob, "GET", "/v1/pool-requests?project=pa&pool=fpool&limit=1", NULL);
	cursor = fx_json_str(r->json, "next_cursor");
	r = fx_request(fx, bob, "GET",
	    fx_str(fx, "/v1/pool-requests?project=pa&pool=fother&limit=1&cursor=%s", cursor), NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "cursor");
	/* bad values: 422 naming pool */
	r = fx_request(fx, bob, "GET", "/v1/pool-requests?pool=fpool", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "pool");
	r = fx_request(fx, bob, "GET", "/v1/pool-requests?project=pa&pool=Bad_Name", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "pool");

	/* GPUs: those holding a live allocation of the pool, the SQL truth */
	want = fx_sql_text(fx,
	    "SELECT string_agg(g.uuid, ',' ORDER BY g.id) FROM gpus g WHERE EXISTS "
	    "(SELECT 1 FROM allocations al JOIN pools p ON p.id = al.pool_id "
	    "JOIN projects j ON j.id = p.project_id WHERE al.gpu_id = g.id "
	    "AND al.state <> 'released' AND j.name = 'pa' AND p.name = 'fpool')");
	assert_non_null(strchr(want, ','));
	assert_string_equal(walk_ids(fx, op, "/v1/gpus?project=pa&pool=fpool", "uuid"), want);
	want = fx_sql_text(fx,
	    "SELECT string_agg(g.uuid, ',' ORDER BY g.id) FROM gpus g WHERE EXISTS "
	    "(SELECT 1 FROM allocations al JOIN pools p ON p.id = al.pool_id "
	    "JOIN projects j ON j.id = p.project_id WHERE al.gpu_id = g.id "
	    "AND al.state <> 'released' AND j.name = 'pb' AND p.name = 'fpool')");
	assert_string_equal(walk_ids(fx, op, "/v1/gpus?project=pb&pool=fpool", "uuid"), want);
	assert_null(strstr(walk_ids(fx, op, "/v1/gpus?project=pa&pool=fpool", "uuid"), want));
	/* a pool without allocations, and another project's pool name */
	assert_string_equal(walk_ids(fx, op, "/v1/gpus?project=pa&pool=fother", "uuid"), "");
	assert_string_equal(walk_ids(fx, op, "/v1/gpus?project=pa&pool=fonlyb", "uuid"), "");
	r = fx_request(fx, op, "GET", "/v1/gpus?pool=fpool", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "pool");
	r = fx_request(fx, op, "GET", "/v1/gpus?project=nope&pool=fpool", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, op, "GET", "/v1/gpus?project=pa&pool=fpool&limit=1", NULL);
	cursor = fx_json_str(r->json, "next_cursor");
	r = fx_request(fx, op, "GET",
	    fx_str(fx, "/v1/gpus?project=pb&pool=fpool&limit=1&cursor=%s", cursor), NULL);
	assert_json_str(r->json, "errors[0].field", "cursor");

	/* the CLI passes --pool on */
	{
		const char *env[] = { fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url),
			fx_str(fx, "GPUPOOL_TOKEN=%s", bob), NULL };
		const char *openv[] = { env[0], fx_str(fx, "GPUPOOL_TOKEN=%s", op), NULL };
		struct fx_proc *p = fx_cli(fx, env, NULL, "-o", "json", "requests", "list",
		    "--project", "pa", "--pool", "fother", NULL);

		assert_int_equal(p->status, 0);
		assert_non_null(strstr(p->out, "\"fother\""));
		assert_null(strstr(p->out, "\"fpool\""));
		p = fx_cli(fx, openv, NULL, "-o", "json", "gpus", "list", "--project", "pb",
		    "--pool", "fpool", NULL);
		assert_int_equal(p->status, 0);
		assert_non_null(strstr(p->out, want));
	}
	check_invariants(fx);
}

/*
 * A node registered by hand has no agent: an approval's allocations on it
 * are ready at once (the operator realises them), the pool is active, the
 * reply and the audit say so, and billing runs from the approval.
 */
static void
test_unmanaged_node(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t id, pool_id, create_id, expand_id;
	const char *pid;

	fx_fleet(fx, "hand", "T4-16GB", 1, 2, false);
	r = submit(fx, bob, "pa", "create", "byhand", "[\"T4-16GB/full=1\"]", 201);
	id = fx_json_int(r->json, "id");
	pool_id = fx_json_int(r->json, "pool_id");
	pid = fx_str(fx, "%lld", (long long)pool_id);
	create_id = id;
	r = approve(fx, id, 200);
	assert_int_equal(fx_json_len(r->json, "allocations"), 1);
	assert_json_str(r->json, "allocations[0].node", "hand-n0");
	assert_json_str(r->json, "allocations[0].state", "ready");
	assert_json_str(r->json, "allocations[0].realised_by", "operator");
	/* at once, not after a pass of the worker */
	r = fx_request(fx, bob, "GET", fx_str(fx, "/v1/pools/%s", pid), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "status", "active");
	assert_json_str(r->json, "allocations[0].state", "ready");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE pool_id = $1 AND state = 'ready' "
			     "AND device_uuid IS NULL",
			     pid),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM usage_ledger l JOIN pool_requests r "
			     "ON r.id = l.opened_by WHERE l.pool_id = $1 AND l.ended_at IS NULL "
			     "AND l.started_at = r.decided_at",
			     pid),
	    1);
	/* the audit: the approval names the operator as the one who realises it,
	 * the pool's activation says why */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'pool_request.approve' "
			     "AND object_id = $1 AND after->'allocations'->0->>'realised_by' = 'operator' "
			     "AND after->'allocations'->0->>'state' = 'ready'",
			     fx_str(fx, "%lld", (long long)id)),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'pool.active' "
			     "AND object_type = 'pool' AND object_id = $1 AND actor = 'op' "
			     "AND after->>'status' = 'active' "
			     "AND after->>'reason' LIKE '%operator realises them%'",
			     pid),
	    1);
	/* growing an active pool on the same node keeps it active */
	id = submit_id(fx, bob, "pa", "expand", "byhand", "[\"T4-16GB/full=1\"]");
	expand_id = id;
	r = approve(fx, id, 200);
	assert_json_str(r->json, "allocations[0].state", "ready");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE id = $1", pid),
	    "active");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE pool_id = $1 AND state = 'ready'",
			     pid),
	    2);
	/* an agent-managed node's allocations still wait for the agent */
	fx_fleet(fx, "agentn", "T4-16GB", 1, 1, false);
	fx_agents_manage(fx, "agentn");
	fx_sql_exec(fx, "UPDATE nodes SET status = 'cordoned' WHERE name = 'hand-n0'");
	id = submit_id(fx, bob, "pa", "create", "byagent", "[\"T4-16GB/full=1\"]");
	r = approve(fx, id, 200);
	assert_json_str(r->json, "allocations[0].node", "agentn-n0");
	assert_json_str(r->json, "allocations[0].state", "reserved");
	assert_json_str(r->json, "allocations[0].realised_by", "agent");
	assert_string_equal(fx_sql_text(fx,
				"SELECT status FROM pools WHERE name = 'byagent' "
				"AND status <> 'released'"),
	    "provisioning");
	fx_sql_exec(fx, "UPDATE nodes SET status = 'ready' WHERE name = 'hand-n0'");
	/* a release there is confirmed without an agent (the expiry worker's pass,
	 * migration 0018): the slices free, the pool released, the request fulfilled */
	id = submit_id(fx, bob, "pa", "release", "byhand", NULL);
	approve(fx, id, 200);
	wait_until(fx,
	    fx_str(fx,
		"SELECT (NOT EXISTS (SELECT 1 FROM allocations WHERE pool_id = %s "
		"AND state <> 'released'))::int",
		pid));
	wait_until(fx,
	    fx_str(fx, "SELECT (status = 'released')::int FROM pools WHERE id = %s", pid));
	wait_until(fx,
	    fx_str(fx, "SELECT (state = 'fulfilled')::int FROM pool_requests WHERE id = %lld",
		(long long)id));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_request_events WHERE request_id = $1 "
			     "AND to_state = 'fulfilled' AND note LIKE '%without an agent%'",
			     fx_str(fx, "%lld", (long long)id)),
	    1);
	/* the create and the expand, their allocations ready at once, were
	 * fulfilled by the expiry worker's pass (they stayed approved for ever
	 * before migration 0032: no agent reports on the node) */
	for (int k = 0; k < 2; k++) {
		const char *rid = fx_str(fx, "%lld", (long long)(k == 0 ? create_id : expand_id));

		wait_until(fx,
		    fx_str(fx, "SELECT (state = 'fulfilled')::int FROM pool_requests WHERE id = %s",
			rid));
		assert_int_equal(fx_sql_int64(fx,
				     "SELECT count(*) FROM pool_request_events WHERE request_id = $1 "
				     "AND from_state = 'approved' AND to_state = 'fulfilled' "
				     "AND actor = 'gpupool'",
				     rid),
		    1);
	}
	check_invariants(fx);
}

/*
 * One T4 node called <prefix>-n0, managed by an agent, the only one ready:
 * every other ready node is cordoned; their ids (to make them ready again).
 */
static const char *
agent_node_alone(struct fixture *fx, const char *prefix)
{
	const char *others;

	fx_fleet(fx, prefix, "T4-16GB", 1, 1, false);
	fx_agents_manage(fx, prefix);
	others = fx_sql_text(fx,
	    "SELECT coalesce(string_agg(id::text, ','), '0') FROM nodes WHERE status = 'ready' "
	    "AND name NOT LIKE $1 || '-%'",
	    prefix);
	fx_sql_exec(fx,
	    fx_str(fx, "UPDATE nodes SET status = 'cordoned' WHERE id IN (%s)", others));
	return others;
}

/*
 * An approved request whose layout is done but that no report settles
 * (the report skipped it, SKIP LOCKED, while another transaction held it,
 * and its pool has no live allocation on the node any more): the expiry
 * worker's pass settles it (migration 0032); before, it stayed approved
 * for ever. The report's part is played here by SQL: the allocation
 * turned ready, the request left approved.
 */
static void
test_request_settled_without_report(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *others, *rid, *pid;
	int64_t id;

	others = agent_node_alone(fx, "lostrep");
	id = submit_id(fx, bob, "pa", "create", "lostrep", "[\"T4-16GB/full=1\"]");
	rid = fx_str(fx, "%lld", (long long)id);
	r = approve(fx, id, 200);
	assert_json_str(r->json, "allocations[0].node", "lostrep-n0");
	assert_json_str(r->json, "allocations[0].state", "reserved");
	pid = fx_str(fx, "%lld", (long long)fx_json_int(r->json, "pool_id"));
	fx_sql_exec(fx, "UPDATE allocations SET state = 'ready' WHERE request_id = $1::int8", rid);
	wait_until(fx,
	    fx_str(fx, "SELECT (state = 'fulfilled')::int FROM pool_requests WHERE id = %s", rid));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_request_events WHERE request_id = $1 "
			     "AND from_state = 'approved' AND to_state = 'fulfilled' "
			     "AND actor = 'gpupool' AND note LIKE '%expiry pass%'",
			     rid),
	    1);
	wait_until(fx, fx_str(fx, "SELECT (status = 'active')::int FROM pools WHERE id = %s", pid));
	fx_sql_exec(fx, fx_str(fx, "UPDATE nodes SET status = 'ready' WHERE id IN (%s)", others));
	fx_sql_exec(fx, "UPDATE nodes SET status = 'cordoned' WHERE name LIKE 'lostrep-%'");
	check_invariants(fx);
}

/*
 * The expiry worker's pass (every GPUPOOL_EXPIRY_INTERVAL, on every
 * replica) reads the allocations of every approved request through an
 * index. A release whose node's agent is gone for good (a dead node in a
 * bad week) stays approved, and the pass asks each time whether all it
 * freed are released (pool_request_layout_done, migration 0032): with no
 * index on release_request_id that read every live allocation of the
 * fleet (or the whole table, released history and all), per such request
 * per pass (migration 0032 adds the index). Here: 224 more live
 * allocations elsewhere; one pass, sequential scans disabled so that the
 * plan does not depend on the table's size, must read fewer than those.
 */
/* What this transaction read of allocations: rows from the table, entries from its indexes. */
#define READ_ALLOCATIONS                                                                 \
	"SELECT pg_stat_get_xact_tuples_returned('allocations'::regclass) + "            \
	"(SELECT sum(pg_stat_get_xact_tuples_returned(indexrelid))::int8 FROM pg_index " \
	"WHERE indrelid = 'allocations'::regclass)"

static void
test_settle_pass_indexed(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *others, *rid, *pid;
	int64_t id, before, after;

	others = agent_node_alone(fx, "deadnode");
	id = submit_id(fx, bob, "pa", "create", "deadnode", "[\"T4-16GB/full=1\"]");
	r = approve(fx, id, 200);
	assert_json_str(r->json, "allocations[0].node", "deadnode-n0");
	pid = fx_str(fx, "%lld", (long long)fx_json_int(r->json, "pool_id"));
	/* the agent made it, then its node went quiet for good */
	fx_sql_exec(fx, "UPDATE allocations SET state = 'ready' WHERE pool_id = $1::int8", pid);
	wait_until(fx, fx_str(fx, "SELECT (status = 'active')::int FROM pools WHERE id = %s", pid));
	id = submit_id(fx, bob, "pa", "release", "deadnode", NULL);
	rid = fx_str(fx, "%lld", (long long)id);
	approve(fx, id, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE release_request_id = $1::int8 "
			     "AND state = 'releasing'",
			     rid),
	    1);
	/* the rest of the fleet: two nodes of sixteen GPUs, seven instances each */
	fx_fleet_register(fx, "busy", "H100-80GB", 2, 16);
	fx_sql_exec(fx,
	    "UPDATE gpus SET mig_enabled = true WHERE node_id IN "
	    "(SELECT id FROM nodes WHERE name LIKE 'busy-%')");
	assert_int_equal(fx_sql_exec(fx,
			     "INSERT INTO allocations (gpu_id, profile, start, size, state) "
			     "SELECT g.id, '1g.10gb', s, 1, 'ready' FROM gpus g "
			     "JOIN nodes n ON n.id = g.node_id, generate_series(0, 6) s "
			     "WHERE n.name LIKE 'busy-%' ORDER BY g.id, s"),
	    224);
	/* one pass, on this session, what it read of allocations counted (then rolled back) */
	fx_sql_exec(fx, "BEGIN");
	fx_sql_exec(fx, "SET LOCAL enable_seqscan = off");
	before = fx_sql_int64(fx, READ_ALLOCATIONS);
	fx_sql_exec(fx, "SELECT pools_settle_due()");
	after = fx_sql_int64(fx, READ_ALLOCATIONS);
	fx_sql_exec(fx, "ROLLBACK");
	/* the allocations of the approved requests and settling pools, a few */
	assert_in_range(after - before, 0, 100);
	fx_sql_exec(fx,
	    "DELETE FROM allocations WHERE pool_id IS NULL AND gpu_id IN (SELECT g.id FROM gpus g "
	    "JOIN nodes n ON n.id = g.node_id WHERE n.name LIKE 'busy-%')");
	fx_sql_exec(fx, "UPDATE nodes SET status = 'cordoned' WHERE name LIKE 'busy-%'");
	/* the release still waits for its agent; once it is gone, it is fulfilled */
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1::int8",
				rid),
	    "approved");
	fx_sql_exec(fx,
	    "UPDATE allocations SET state = 'released', released_at = now() "
	    "WHERE release_request_id = $1::int8",
	    rid);
	wait_until(fx,
	    fx_str(fx, "SELECT (state = 'fulfilled')::int FROM pool_requests WHERE id = %s", rid));
	wait_until(fx,
	    fx_str(fx, "SELECT (status = 'released')::int FROM pools WHERE id = %s", pid));
	fx_sql_exec(fx, fx_str(fx, "UPDATE nodes SET status = 'ready' WHERE id IN (%s)", others));
	fx_sql_exec(fx, "UPDATE nodes SET status = 'cordoned' WHERE name LIKE 'deadnode-%'");
	check_invariants(fx);
}

/* Invariant 1 is the database's: an overlapping insert is refused. */
static void
test_exclusion_constraint(void **state)
{
	struct fixture *fx = *state;
	const char *gpu = fx_sql_text(fx,
	    "SELECT min(gpu_id)::text FROM allocations "
	    "WHERE state = 'reserved' AND profile = '7g.80gb'");

	assert_non_null(gpu);
	/* 1g.10gb at slice 3 is a valid placement, but 7g.80gb holds slices 0-7 */
	fx_sql_exec(fx,
	    "DO $$ BEGIN "
	    "INSERT INTO allocations (gpu_id, profile, start, size) SELECT min(gpu_id), "
	    "'1g.10gb', 3, 1 FROM allocations WHERE state = 'reserved' AND profile = '7g.80gb'; "
	    "RAISE EXCEPTION 'an overlapping allocation was accepted'; "
	    "EXCEPTION WHEN exclusion_violation THEN NULL; END $$");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE gpu_id = $1 "
			     "AND state <> 'released'",
			     gpu),
	    1);
}

/* The CLI: submit, approve (prints the placements), list, show, quotas. */
static void
test_cli(void **state)
{
	struct fixture *fx = *state;
	const char *bob_env[] = { fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url),
		fx_str(fx, "GPUPOOL_TOKEN=%s", bob), NULL };
	const char *op_env[] = { bob_env[0], fx_str(fx, "GPUPOOL_TOKEN=%s", op), NULL };
	const char *admin_env[] = { bob_env[0], fx_str(fx, "GPUPOOL_TOKEN=%s", fx->admin_token),
		NULL };
	struct fx_proc *p;
	const char *id;

	fx_fleet(fx, "cli", "L40S-48GB", 2, 1, false);
	fx_agents_manage(fx, "cli");
	p = fx_cli(fx, bob_env, NULL, "request", "create", "--project", "pa", "--pool", "clip",
	    "L40S-48GB/full=2", "--justification", "render farm", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "L40S-48GB/full=2"));
	assert_non_null(strstr(p->out, "pending"));
	id = fx_sql_text(fx,
	    "SELECT max(r.id)::text FROM pool_requests r JOIN pools p "
	    "ON p.id = r.pool_id WHERE p.name = 'clip'");
	/* a malformed item is a usage error before anything is sent */
	p = fx_cli(fx, bob_env, NULL, "request", "expand", "--project", "pa", "--pool", "clip",
	    "L40S-48GB/full", NULL);
	assert_int_equal(p->status, 2);
	/* members cannot approve; the operator can, and sees the placements */
	p = fx_cli(fx, bob_env, NULL, "request", "approve", id, NULL);
	assert_int_equal(p->status, 3);
	assert_non_null(strstr(p->err, "forbidden"));
	p = fx_cli(fx, op_env, NULL, "request", "approve", id, "--note", "go", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "approved"));
	assert_non_null(strstr(p->out, "cli-n0"));
	assert_non_null(strstr(p->out, "cli-n1"));
	assert_non_null(strstr(p->out, "nvidia.com/gpu"));
	p = fx_cli(fx, bob_env, NULL, "requests", "list", "--project", "pa", "--state", "approved",
	    NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "clip"));
	p = fx_cli(fx, bob_env, NULL, "-o", "json", "requests", "get", id, NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "\"history\""));
	p = fx_cli(fx, bob_env, NULL, "pools", "list", "--project", "pa", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "clip"));
	p = fx_cli(fx, bob_env, NULL, "pools", "get",
	    fx_sql_text(fx,
		"SELECT id::text FROM pools WHERE name = 'clip' "
		"AND status <> 'released'"),
	    NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "reserved"));
	/* no capacity left: the approval fails with the server's reason */
	p = fx_cli(fx, bob_env, NULL, "request", "expand", "--project", "pa", "--pool", "clip",
	    "L40S-48GB/full=1", NULL);
	assert_int_equal(p->status, 0);
	id = fx_sql_text(fx,
	    "SELECT max(r.id)::text FROM pool_requests r JOIN pools p "
	    "ON p.id = r.pool_id WHERE p.name = 'clip'");
	p = fx_cli(fx, op_env, NULL, "request", "approve", id, NULL);
	assert_int_equal(p->status, 5);
	assert_non_null(strstr(p->err, "insufficient_capacity"));
	p = fx_cli(fx, op_env, NULL, "request", "reject", id, NULL);
	assert_int_equal(p->status, 2);
	p = fx_cli(fx, op_env, NULL, "request", "reject", id, "--reason", "full", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "rejected"));
	/* quotas */
	p = fx_cli(fx, admin_env, NULL, "quota", "set", "pb", "L40S-48GB/full=1", NULL);
	assert_int_equal(p->status, 0);
	p = fx_cli(fx, admin_env, NULL, "quota", "get", "pb", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "L40S-48GB"));
	p = fx_cli(fx, admin_env, NULL, "quota", "delete", "pb", NULL);
	assert_int_equal(p->status, 0);
	/* release and cancel */
	p = fx_cli(fx, bob_env, NULL, "request", "release", "--project", "pa", "--pool", "clip",
	    NULL);
	assert_int_equal(p->status, 0);
	id = fx_sql_text(fx,
	    "SELECT max(r.id)::text FROM pool_requests r JOIN pools p "
	    "ON p.id = r.pool_id WHERE p.name = 'clip'");
	p = fx_cli(fx, bob_env, NULL, "request", "cancel", id, NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "cancelled"));
	check_invariants(fx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mig_workflow),
		cmocka_unit_test(test_full_gpus),
		cmocka_unit_test(test_insufficient),
		cmocka_unit_test(test_quota),
		cmocka_unit_test(test_reject_cancel),
		cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_release_paths_agree),
		cmocka_unit_test(test_time_bounded),
		cmocka_unit_test(test_shrink_whole_gpu),
		cmocka_unit_test(test_idempotent_retries),
		cmocka_unit_test(test_validation),
		cmocka_unit_test(test_access),
		cmocka_unit_test(test_unmanaged_node),
		cmocka_unit_test(test_request_settled_without_report),
		cmocka_unit_test(test_settle_pass_indexed),
		cmocka_unit_test(test_exclusion_constraint),
		cmocka_unit_test(test_cli),
		cmocka_unit_test(test_pool_filter),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
