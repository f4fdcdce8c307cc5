/*
 * test_status_locks.c - an agent's status report (PUT /v1/agent/status,
 * agent_apply_status) locks only what it changes (migration 0030), over
 * HTTP against a real gpupoold and PostgreSQL, the node enrolled as an
 * agent. Another session holds row locks the way an approval does while a
 * report arrives; the server's statement_timeout (2 s here) is the
 * deadline: a report that waited for those locks would answer 503.
 *
 *   - a report that changes one pool's allocation (its instance became
 *     ready) completes while another pool on the same GPU is locked;
 *   - a report that changes nothing completes while both pools and the
 *     node's GPU are locked: it updates the node row (the agent's
 *     liveness) and the outbox rows only.
 *
 * Both failed with 0027's function, which locked every pool with a live
 * allocation on the node, and the node's GPUs, for every report.
 */
#define _GNU_SOURCE
#include "fixture.h"

#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GPU0 "GPU-dddddddd-0000-0000-0000-000000000000"

static const char *node_token;

static int
group_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_STATEMENT_TIMEOUT_MS=2000",
		"GPUPOOL_AGENT_GRACE=3600", NULL };
	struct fixture_options opts = { .server_env = env };
	struct fixture *fx;
	struct gp_client_response *r;

	if (fixture_create(&opts, &fx) < 0)
		return -1;
	*state = fx;
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"sl\",\"display_name\":\"sl\"}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/sl/members/admin",
	    "{\"role\":\"owner\"}");
	if (r->status != 201)
		return -1;
	node_token = fx_enroll_mig_node(fx, "c1", "s1", GPU0);
	return node_token != NULL ? 0 : -1;
}

/* Create pool name (one 1g.10gb) and approve it (reserved on s1); its id. */
static const char *
create_pool(struct fixture *fx, const char *name)
{
	struct gp_client_response *r =
	    fx_request(fx, fx->admin_token, "POST", "/v1/projects/sl/pool-requests",
		"{\"action\":\"create\",\"pool\":\"%s\",\"items\":[{\"model\":\"H100-80GB\","
		"\"profile\":\"1g.10gb\",\"count\":1}],\"justification\":\"t\"}",
		name);

	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)fx_json_int(r->json, "id")),
	    "{}");
	assert_status(r, 200);
	return fx_sql_text(fx, "SELECT id::text FROM pools WHERE name = $1", name);
}

/* A status report of s1 at its generation: every live allocation's instance is there. */
static struct gp_client_response *
report(struct fixture *fx)
{
	const char *inst = fx_sql_text(fx,
	    "SELECT coalesce(json_agg(json_build_object('profile', a.profile, 'start', a.start, "
	    "'size', a.size, 'uuid', 'MIG-' || a.id) ORDER BY a.id), '[]')::text "
	    "FROM allocations a JOIN gpus g ON g.id = a.gpu_id WHERE g.uuid = $1 "
	    "AND a.state NOT IN ('releasing', 'released')",
	    GPU0);
	int64_t gen = fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 's1'");

	return fx_request(fx, node_token, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":%lld,\"agent_version\":\"test\",\"gpus\":["
	    "{\"uuid\":\"" GPU0 "\",\"index\":0,\"mig_enabled\":true,\"instances\":%s}]}",
	    (long long)gen, inst);
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

static void
test_report_locks_what_it_changes(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *p1, *p2, *gen1, *gen2, *seen;
	PGconn *z;

	/* p1 ready and active, its request fulfilled */
	p1 = create_pool(fx, "p1");
	r = report(fx);
	assert_status(r, 200);
	assert_json_int(r->json, "ready", 1);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE id = $1::int8", p1),
	    "active");
	/* p2 on the same GPU, reserved for the agent */
	p2 = create_pool(fx, "p2");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(DISTINCT gpu_id) FROM allocations "
			     "WHERE pool_id IN ($1::int8, $2::int8)",
			     p1, p2),
	    1);
	gen1 = fx_sql_text(fx, "SELECT generation::text FROM pools WHERE id = $1::int8", p1);

	/* z holds p1, as an approval of p1 would: p2's instance is reported ready */
	z = session(fx);
	run(z, "BEGIN");
	run(z, fx_str(fx, "SELECT 1 FROM pools WHERE id = %s FOR NO KEY UPDATE", p1));
	r = report(fx);
	assert_status(r, 200);
	assert_json_int(r->json, "ready", 1);
	assert_json_int(r->json, "failed", 0);
	run(z, "ROLLBACK");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM allocations WHERE pool_id = $1::int8", p2),
	    "ready");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE id = $1::int8", p2),
	    "active");
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM pool_requests WHERE pool_id = $1::int8", p2),
	    "fulfilled");
	/* p1 untouched */
	assert_string_equal(fx_sql_text(fx,
				"SELECT generation::text FROM pools WHERE id = $1::int8", p1),
	    gen1);
	assert_string_equal(fx_sql_text(fx,
				"SELECT state FROM allocations WHERE pool_id = $1::int8", p1),
	    "ready");

	/* z holds both pools and the GPU: a report that changes nothing */
	gen1 = fx_sql_text(fx, "SELECT generation::text FROM pools WHERE id = $1::int8", p1);
	gen2 = fx_sql_text(fx, "SELECT generation::text FROM pools WHERE id = $1::int8", p2);
	fx_sql_exec(fx,
	    "UPDATE nodes SET agent_status_at = now() - interval '1 hour', agent_version = 'old' "
	    "WHERE name = 's1'");
	seen = fx_sql_text(fx, "SELECT agent_status_at::text FROM nodes WHERE name = 's1'");
	run(z, "BEGIN");
	run(z,
	    fx_str(fx, "SELECT 1 FROM pools WHERE id IN (%s, %s) ORDER BY id FOR NO KEY UPDATE", p1,
		p2));
	run(z, "SELECT 1 FROM gpus WHERE uuid = '" GPU0 "' FOR NO KEY UPDATE");
	r = report(fx);
	assert_status(r, 200);
	assert_json_int(r->json, "ready", 0);
	assert_json_int(r->json, "failed", 0);
	assert_json_int(r->json, "released", 0);
	/* the agent's liveness is recorded while z still holds everything else */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE name = 's1' AND agent_version = 'test' "
			     "AND agent_status_at > $1::timestamptz AND observed_generation = generation",
			     seen),
	    1);
	run(z, "ROLLBACK");
	PQfinish(z);
	assert_string_equal(fx_sql_text(fx,
				"SELECT generation::text FROM pools WHERE id = $1::int8", p1),
	    gen1);
	assert_string_equal(fx_sql_text(fx,
				"SELECT generation::text FROM pools WHERE id = $1::int8", p2),
	    gen2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM outbox o JOIN nodes n ON n.id = o.node_id "
			     "WHERE n.name = 's1' AND o.delivered_at IS NULL"),
	    0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_report_locks_what_it_changes),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
