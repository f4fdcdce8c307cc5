/*
 * test_pool_status.c - the one settle path of pool statuses
 * (service/pool_status.h, pools_settle in migration 0019): an agent's
 * status report and the expiry worker move pools through the same rule,
 * with the same pool_degraded alert handling and the same audit document
 * ({"status": before} -> {"status": after}, no actor). Driven over HTTP as
 * an agent would, against a real gpupoold and PostgreSQL. And a request
 * the expiry worker expires is closed as a reject is: one statement, one
 * audit document.
 */
#define _GNU_SOURCE
#include "fixture.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define GPU0 "GPU-cccccccc-0000-0000-0000-000000000000"
#define GPU1 "GPU-cccccccc-0000-0000-0000-000000000001"

static const char *op;         /* operator */
static const char *alice;      /* owner of pa */
static const char *node_token; /* of node s1 */

static int
group_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_EXPIRY_INTERVAL=1", "GPUPOOL_AGENT_GRACE=3600",
		NULL };
	struct fixture_options opts = { .server_env = env };
	struct fixture *fx;
	struct gp_client_response *r;

	if (fixture_create(&opts, &fx) < 0)
		return -1;
	*state = fx;
	op = fixture_create_user(fx, "op", "operator");
	alice = fixture_create_user(fx, "alice", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"pa\",\"display_name\":\"pa\",\"namespaces\":[\"team-a\"]}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/pa/members/alice",
	    "{\"role\":\"owner\"}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, op, "POST", "/v1/clusters", "{\"name\":\"c1\",\"region\":\"eu-1\"}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, op, "POST", "/v1/clusters/c1/enrollment-tokens",
	    "{\"expires_in_seconds\":600}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"%s\",\"node_name\":\"s1\",\"hostname\":\"s1.example\","
	    "\"callback_url\":\"http://127.0.0.1:9/\",\"agent_version\":\"test\","
	    "\"gpus\":[{\"uuid\":\"" GPU0
	    "\",\"index\":0,\"product_name\":\"NVIDIA H100 80GB HBM3\","
	    "\"memory_mib\":81559,\"mig_enabled\":true,\"instances\":[]},"
	    "{\"uuid\":\"" GPU1 "\",\"index\":1,\"product_name\":\"NVIDIA H100 80GB HBM3\","
	    "\"memory_mib\":81559,\"mig_enabled\":true,\"instances\":[]}]}",
	    fx_json_str(r->json, "token"));
	if (r->status != 201)
		return -1;
	node_token = fx_json_str(r->json, "node_token");
	return 0;
}

/* Create pool `name` (one 3g.40gb) and approve it: its allocation reserved. */
static void
create_pool(struct fixture *fx, const char *name)
{
	struct gp_client_response *r =
	    fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
		"{\"action\":\"create\",\"pool\":\"%s\",\"items\":[{\"model\":\"H100-80GB\","
		"\"profile\":\"3g.40gb\",\"count\":1}],\"justification\":\"t\"}",
		name);

	assert_status(r, 201);
	r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)fx_json_int(r->json, "id")),
	    "{}");
	assert_status(r, 200);
}

/*
 * A status report of node s1 at its current generation: every live
 * allocation of the pools named in `present` is there, those of `failing`
 * could not be created (an error each).
 */
static void
report(struct fixture *fx, const char *present, const char *failing)
{
	const char *inst =
	    "SELECT coalesce(json_agg(json_build_object('profile', a.profile, "
	    "'start', a.start, 'size', a.size, 'uuid', 'MIG-' || a.id) ORDER BY a.id), "
	    "'[]')::text FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "JOIN gpus g ON g.id = a.gpu_id WHERE g.uuid = $1 AND p.name = ANY "
	    "(string_to_array($2, ',')) AND a.state NOT IN ('releasing', 'released')";
	const char *errors = fx_sql_text(fx,
	    "SELECT coalesce(json_agg(json_build_object('gpu', g.uuid, 'profile', a.profile, "
	    "'start', a.start, 'message', 'busy') ORDER BY a.id), '[]')::text FROM allocations a "
	    "JOIN pools p ON p.id = a.pool_id JOIN gpus g ON g.id = a.gpu_id WHERE p.name = ANY "
	    "(string_to_array($1, ',')) AND a.state NOT IN ('releasing', 'released')",
	    failing);
	int64_t gen = fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 's1'");
	struct gp_client_response *r = fx_request(fx, node_token, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":%lld,\"agent_version\":\"test\",\"gpus\":["
	    "{\"uuid\":\"" GPU0 "\",\"index\":0,\"mig_enabled\":true,\"instances\":%s},"
	    "{\"uuid\":\"" GPU1 "\",\"index\":1,\"mig_enabled\":true,\"instances\":%s}],"
	    "\"errors\":%s}",
	    (long long)gen, fx_sql_text(fx, inst, GPU0, present),
	    fx_sql_text(fx, inst, GPU1, present), errors);

	assert_status(r, 200);
}

static const char *
pool_status(struct fixture *fx, const char *name)
{
	return fx_sql_text(fx, "SELECT status FROM pools WHERE name = $1", name);
}

/* Open pool_degraded alerts of pool `name`. */
static int64_t
open_alerts(struct fixture *fx, const char *name)
{
	return fx_sql_int64(fx,
	    "SELECT count(*) FROM alerts al JOIN pools p ON p.id = al.pool_id WHERE "
	    "p.name = $1 AND al.type = 'pool_degraded' AND al.resolved_at IS NULL "
	    "AND al.dedup_key = 'pool_degraded:' || p.id",
	    name);
}

/*
 * The audit documents of pool `name`'s settled changes, oldest first:
 * "action before->after actor|actor_id|request_id" each, space separated.
 */
static const char *
settle_audit(struct fixture *fx, const char *name)
{
	return fx_sql_text(fx,
	    "SELECT string_agg(l.action || ' ' || coalesce(l.before::text, 'null') || '->' || "
	    "coalesce(l.after::text, 'null') || ' ' || coalesce(l.actor, '-') || '|' || "
	    "coalesce(l.actor_id::text, '-') || '|' || coalesce(l.request_id, '-'), '; ' "
	    "ORDER BY l.id) FROM audit_log l JOIN pools p ON p.id::text = l.object_id "
	    "WHERE l.object_type = 'pool' AND p.name = $1 AND l.action IN "
	    "('pool.degraded', 'pool.active', 'pool.released')",
	    name);
}

/* Wait up to 30 s for pool `name` to reach `status` (the expiry runs every second). */
static void
wait_status(struct fixture *fx, const char *name, const char *status)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		if (strcmp(pool_status(fx, name), status) == 0)
			return;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 30)
			fail_msg("pool %s is %s, not %s, after 30 s", name, pool_status(fx, name),
			    status);
		usleep(100 * 1000);
	}
}

/* An agent's reports: a failed allocation degrades the pool, its return settles it. */
static void
test_agent_report(void **state)
{
	struct fixture *fx = *state;

	create_pool(fx, "pg1");
	assert_string_equal(pool_status(fx, "pg1"), "provisioning");
	report(fx, "", "pg1");
	assert_string_equal(pool_status(fx, "pg1"), "degraded");
	assert_int_equal(open_alerts(fx, "pg1"), 1);
	/* the alert names the node of the failed allocation */
	assert_string_equal(fx_sql_text(fx,
				"SELECT n.name FROM alerts al JOIN nodes n ON n.id = al.node_id "
				"JOIN pools p ON p.id = al.pool_id WHERE p.name = 'pg1' "
				"AND al.type = 'pool_degraded'"),
	    "s1");
	report(fx, "pg1", "");
	assert_string_equal(pool_status(fx, "pg1"), "active");
	assert_int_equal(open_alerts(fx, "pg1"), 0);
	assert_string_equal(settle_audit(fx, "pg1"),
	    "pool.degraded {\"status\": \"provisioning\"}->{\"status\": \"degraded\"} -|-|-; "
	    "pool.active {\"status\": \"degraded\"}->{\"status\": \"active\"} -|-|-");
	fx_assert_pool_invariants(fx);
}

/*
 * The expiry worker: a degraded pool on a node whose agent was removed
 * (the node now unmanaged: its operator removes the instances) is
 * released; its pool_degraded alert is resolved as an agent's report
 * would, with the same audit document. Before one settle path, the
 * expiry's copy left the alert open for ever.
 */
static void
test_expiry(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;

	create_pool(fx, "pg2");
	report(fx, "pg1", "pg2");
	assert_string_equal(pool_status(fx, "pg2"), "degraded");
	assert_int_equal(open_alerts(fx, "pg2"), 1);
	/* the agent is removed: nothing reports on s1 any more */
	fx_sql_exec(fx, "UPDATE nodes SET managed_by_agent = false WHERE name = 's1'");
	r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"release\",\"pool\":\"pg2\"}");
	assert_status(r, 201);
	r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)fx_json_int(r->json, "id")),
	    "{}");
	assert_status(r, 200);
	wait_status(fx, "pg2", "released");
	assert_int_equal(open_alerts(fx, "pg2"), 0);
	assert_string_equal(settle_audit(fx, "pg2"),
	    "pool.degraded {\"status\": \"provisioning\"}->{\"status\": \"degraded\"} -|-|-; "
	    "pool.released {\"status\": \"releasing\"}->{\"status\": \"released\"} -|-|-");
	/* the other pool on the node is left as it was */
	assert_string_equal(pool_status(fx, "pg1"), "active");
	fx_assert_pool_invariants(fx);
}

/* The keys of a request's audit document (before or after), sorted. */
static const char *
audit_keys(struct fixture *fx, const char *action, const char *side)
{
	return fx_sql_text(fx,
	    fx_str(fx,
		"SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys((SELECT %s "
		"FROM audit_log WHERE action = $1 ORDER BY id DESC LIMIT 1)) k",
		side),
	    action);
}

/*
 * Close and expiry: a rejected request and an expired one get the same
 * audit document (the request before; after, with its state and note).
 * Before, the expiry's own statement wrote {"state": "pending"} ->
 * {"state": "expired"}.
 */
static void
test_close_and_expire(void **state)
{
	static const char *const env[] = { "GPUPOOL_REQUEST_TTL=1", "GPUPOOL_EXPIRY_INTERVAL=1",
		NULL };
	struct fixture *fx = *state;
	struct fx_server *main_server = fx->server, *short_ttl;
	struct gp_client_response *r;
	int64_t rejected, expired;

	r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"pr\",\"items\":[{\"model\":\"H100-80GB\","
	    "\"profile\":\"1g.10gb\",\"count\":1}],\"justification\":\"t\"}");
	assert_status(r, 201);
	rejected = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/reject", (long long)rejected),
	    "{\"reason\":\"not now\"}");
	assert_status(r, 200);
	short_ttl = fixture_server_start(fx, env);
	assert_non_null(short_ttl);
	fx->server = short_ttl;
	r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"pe\",\"items\":[{\"model\":\"H100-80GB\","
	    "\"profile\":\"1g.10gb\",\"count\":1}],\"justification\":\"t\"}");
	assert_status(r, 201);
	fx->server = main_server;
	expired = fx_json_int(r->json, "id");
	wait_status(fx, "pe", "released");
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1",
				fx_str(fx, "%lld", (long long)expired)),
	    "expired");
	assert_int_equal(fixture_server_stop(fx, short_ttl), 0);
	/* one shape: the same keys before and after, the request's own */
	assert_string_equal(audit_keys(fx, "pool_request.expire", "before"),
	    audit_keys(fx, "pool_request.reject", "before"));
	assert_string_equal(audit_keys(fx, "pool_request.expire", "after"),
	    audit_keys(fx, "pool_request.reject", "after"));
	assert_non_null(strstr(audit_keys(fx, "pool_request.expire", "before"), "justification"));
	assert_string_equal(fx_sql_text(fx,
				"SELECT concat(before->>'state', '->', after->>'state', ': ', "
				"after->>'note', ' ', coalesce(actor, '-'), '|', "
				"coalesce(actor_id::text, '-'), '|', coalesce(request_id, '-')) "
				"FROM audit_log WHERE action = 'pool_request.expire' AND "
				"object_id = $1",
				fx_str(fx, "%lld", (long long)expired)),
	    "pending->expired: pending longer than the request lifetime -|-|-");
	/* the history as before: the system expired it */
	r = fx_request(fx, alice, "GET", fx_str(fx, "/v1/pool-requests/%lld", (long long)expired),
	    NULL);
	assert_json_str(r->json, "history[1].to", "expired");
	assert_json_null(r->json, "history[1].actor");
	fx_assert_pool_invariants(fx);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agent_report),
		cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_close_and_expire),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
