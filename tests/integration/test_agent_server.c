/*
 * test_agent_server.c - the server side of node agents, driven over HTTP
 * as an agent would (the agent binary has its own end-to-end tests):
 * enrollment tokens and enrollment, node-token scope, the desired-state
 * long-poll (woken across replicas), status reports moving allocations,
 * pools and requests, GPU health from Xid events, drift, heartbeats and
 * liveness, token rotation and revocation, hostile input.
 */
#include "fixture.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/timeutil.h"

#define GPU0 "GPU-aaaaaaaa-0000-0000-0000-000000000000"
#define GPU1 "GPU-aaaaaaaa-0000-0000-0000-000000000001"

static const char *op;    /* operator */
static const char *alice; /* owner of pa */

static int
group_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_AGENT_GRACE=3", "GPUPOOL_EXPIRY_INTERVAL=1",
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
	return r->status == 201 ? 0 : -1;
}

static const char *
enroll_token(struct fixture *fx)
{
	struct gp_client_response *r = fx_request(fx, op, "POST",
	    "/v1/clusters/c1/enrollment-tokens", "{\"expires_in_seconds\":600}");

	assert_status(r, 201);
	assert_non_null(strstr(fx_json_str(r->json, "token"), "gpe_"));
	assert_json_str(r->json, "cluster", "c1");
	return fx_json_str(r->json, "token");
}

/* Enroll node `name` with two H100s (GPU1 with MIG and a 1g.10gb at 6). */
static struct gp_client_response *
enroll(struct fixture *fx, const char *etoken, const char *name, long status)
{
	struct gp_client_response *r = fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"%s\",\"node_name\":\"%s\",\"hostname\":\"%s.example\","
	    "\"callback_url\":\"http://127.0.0.1:9/\",\"agent_version\":\"test\","
	    "\"gpus\":[{\"uuid\":\"" GPU0
	    "\",\"index\":0,\"product_name\":\"NVIDIA H100 80GB HBM3\","
	    "\"pci_device_id\":\"0x233010DE\",\"memory_mib\":81559,\"mig_enabled\":false,"
	    "\"instances\":[]},"
	    "{\"uuid\":\"" GPU1 "\",\"index\":1,\"product_name\":\"NVIDIA H100 80GB HBM3\","
	    "\"memory_mib\":81559,\"mig_enabled\":true,\"instances\":[{\"profile\":\"1g.10gb\","
	    "\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"}]},"
	    "{\"uuid\":\"GPU-bbbbbbbb-0000-0000-0000-000000000009\",\"index\":2,"
	    "\"product_name\":\"NVIDIA Future X1\",\"mig_enabled\":false}]}",
	    etoken, name, name);

	assert_status(r, status);
	return r;
}

static const char *node_token; /* of node n1 */

static void
status_report(struct fixture *fx, const char *token, int64_t observed, const char *gpus,
    const char *errors, long expect)
{
	struct gp_client_response *r = fx_request(fx, token, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":%lld,\"agent_version\":\"test\",\"gpus\":%s,\"errors\":%s}",
	    (long long)observed, gpus, errors ? errors : "[]");

	assert_status(r, expect);
}

/* Enrollment, scope of the node token, hostile enrollments. */
static void
test_enroll(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *et = enroll_token(fx), *before;

	/* hostile and malformed enrollments change nothing and keep the token usable */
	before = fx_sql_text(fx,
	    "SELECT concat((SELECT count(*) FROM nodes), '/', "
	    "(SELECT count(*) FROM gpus), '/', (SELECT count(*) FROM node_tokens))");
	r = fx_request(fx, NULL, "POST", "/v1/agent/enroll", "{\"enrollment_token\":\"%s\"}", et);
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"%s\",\"node_name\":\"n1\",\"hostname\":\"h\",\"gpus\":[],"
	    "\"callback_url\":\"file:///etc/passwd\",\"bogus\":1}",
	    et);
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"%s\",\"node_name\":\"<img src=x>\",\"hostname\":\"h\","
	    "\"gpus\":[]}",
	    et);
	assert_int_equal(r->status / 100, 4);
	r = fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"%s\",\"node_name\":\"n1\",\"hostname\":\"h\","
	    "\"gpus\":[{\"uuid\":\"GPU-XYZ\",\"index\":0,\"product_name\":\"x\"}]}",
	    et);
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"gpe_wrong-wrong-wrong\",\"node_name\":\"n1\",\"hostname\":\"h\","
	    "\"gpus\":[]}");
	assert_problem(r, 401, "invalid_enrollment_token");
	assert_string_equal(before,
	    fx_sql_text(fx,
		"SELECT concat((SELECT count(*) FROM nodes), '/', "
		"(SELECT count(*) FROM gpus), '/', (SELECT count(*) FROM node_tokens))"));

	r = enroll(fx, et, "n1", 201);
	node_token = fx_json_str(r->json, "node_token");
	assert_memory_equal(node_token, "gpn_", 4);
	assert_int_equal(strlen(fx_json_str(r->json, "push_secret")), 64);
	assert_json_str(r->json, "node.name", "n1");
	assert_json_str(r->json, "node.cluster", "c1");
	assert_json_int(r->json, "node.gpus", 2);
	/* the unknown model is a warning, not a GPU */
	assert_int_equal(fx_json_len(r->json, "warnings"), 1);
	assert_non_null(strstr(json_object_get_string(
				   json_object_array_get_idx(fx_json(r->json, "warnings"), 0)),
	    "unknown GPU model"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN gpus g ON "
			     "g.id = a.gpu_id WHERE g.uuid = '" GPU1 "' AND a.pool_id IS NULL "
			     "AND a.profile = '1g.10gb' AND a.start = 6 AND a.state = 'ready'"),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM nodes WHERE name = 'n1' AND "
			     "managed_by_agent AND push_secret IS NOT NULL"),
	    1);
	/* the secret is not stored: only its digest */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM node_tokens WHERE "
			     "encode(digest, 'escape') LIKE '%gpn_%'"),
	    0);

	/* one-time: the same enrollment token again is refused */
	r = enroll(fx, et, "n1", 401);
	assert_problem(r, 401, "invalid_enrollment_token");

	/* a node token reaches only the agent's routes; a user token not those */
	r = fx_request(fx, node_token, "GET", "/v1/nodes", NULL);
	assert_problem(r, 403, "node_token_forbidden");
	r = fx_request(fx, node_token, "GET", "/v1/projects", NULL);
	assert_problem(r, 403, "node_token_forbidden");
	r = fx_request(fx, op, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":0,\"gpus\":[]}");
	assert_problem(r, 403, "forbidden");
	r = fx_request(fx, alice, "POST", "/v1/clusters/c1/enrollment-tokens", "{}");
	assert_problem(r, 403, "forbidden");
	r = fx_request(fx, op, "GET", "/v1/clusters/c1/enrollment-tokens", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "items[0].state", "used");
	assert_json_str(r->json, "items[0].node", "n1");
	assert_json_absent(r->json, "items[0].token");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.enroll' "
			     "AND object_id = 'n1'"),
	    1);
}

/* The document, 304 when nothing is newer, the long-poll woken by an approval. */
struct poll {
	const char *base_url, *token;
	int64_t after;
	long status;
	int64_t generation;
	int64_t took_ms;
	int ninstances;
};

static void *
poll_thread(void *arg)
{
	struct poll *p = arg;
	struct gp_client *c = gp_client_create(p->base_url, NULL);
	struct gp_client_response r;
	char path[96];
	int64_t t0 = time_mono_us();

	memset(&r, 0, sizeof(r));
	gp_client_set_retries(c, 0);
	snprintf(path, sizeof(path), "/v1/agent/desired-state?after=%lld&wait=20",
	    (long long)p->after);
	if (gp_client_set_token(c, p->token) == 0 &&
	    gp_client_request(c, "GET", path, NULL, 0, NULL, &r) == 0) {
		p->status = r.status;
		if (r.json != NULL && fx_json_has(r.json, "generation")) {
			p->generation = json_object_get_int64(fx_json(r.json, "generation"));
			p->ninstances = (int)json_object_array_length(
			    fx_json(json_object_array_get_idx(fx_json(r.json, "gpus"), 1),
				"instances"));
		}
	}
	p->took_ms = (time_mono_us() - t0) / 1000;
	gp_client_response_free(&r);
	gp_client_destroy(c);
	return NULL;
}

static int64_t pool_request; /* the create of pool "train" */

static void
test_desired_state(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct fx_server *a = fx->server, *b;
	struct poll p;
	pthread_t t;
	int64_t gen;

	r = fx_request(fx, node_token, "GET", "/v1/agent/desired-state?after=0", NULL);
	assert_status(r, 200);
	gen = fx_json_int(r->json, "generation");
	assert_json_str(r->json, "node", "n1");
	assert_json_str(r->json, "gpus[1].uuid", GPU1);
	assert_json_str(r->json, "gpus[1].instances[0].profile", "1g.10gb");
	assert_json_null(r->json, "gpus[1].instances[0].pool");
	assert_json_str(r->json, "gpus[1].instances[0].resource_name", "nvidia.com/mig-1g.10gb");
	r = fx_request(fx, node_token, "GET",
	    fx_str(fx, "/v1/agent/desired-state?after=%lld&wait=0", (long long)gen), NULL);
	assert_status(r, 304);
	r = fx_request(fx, node_token, "GET", "/v1/agent/desired-state?after=-1", NULL);
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, node_token, "GET", "/v1/agent/desired-state?wait=61", NULL);
	assert_problem(r, 422, "validation_failed");

	/* a long-poll on replica B, the approval on replica A: NOTIFY wakes B */
	b = fixture_server_start(fx, NULL);
	assert_non_null(b);
	memset(&p, 0, sizeof(p));
	p.base_url = b->base_url;
	p.token = node_token;
	p.after = gen;
	assert_int_equal(pthread_create(&t, NULL, poll_thread, &p), 0);
	usleep(700 * 1000);
	fx->server = a;
	r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"train\",\"items\":[{\"model\":\"H100-80GB\","
	    "\"profile\":\"3g.40gb\",\"count\":1}],\"justification\":\"test\"}");
	assert_status(r, 201);
	pool_request = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)pool_request),
	    "{\"note\":\"ok\"}");
	assert_status(r, 200);
	pthread_join(t, NULL);
	assert_int_equal(p.status, 200);
	assert_true(p.generation > gen);
	assert_int_equal(p.ninstances, 2);
	assert_true(p.took_ms < 5000);
	fprintf(stderr, "long-poll on another replica answered %lld ms after it began\n",
	    (long long)p.took_ms);

	/* a poll with nothing new times out with 304 after its wait */
	{
		int64_t t0 = time_mono_us();

		r = fx_request(fx, node_token, "GET",
		    fx_str(fx, "/v1/agent/desired-state?after=%lld&wait=1",
			(long long)p.generation),
		    NULL);
		assert_status(r, 304);
		assert_true(time_mono_us() - t0 >= 900 * 1000);
	}
	assert_int_equal(fixture_server_stop(fx, b), 0);
	fx->server = a;
}

static const char *
alloc_state(struct fixture *fx, const char *profile)
{
	return fx_sql_text(fx,
	    "SELECT string_agg(a.state, ',' ORDER BY a.id) FROM allocations a JOIN pools p ON "
	    "p.id = a.pool_id WHERE p.name = 'train' AND a.profile = $1",
	    profile);
}

/* Status reports: ready, fulfilled, active; drift; Xid health; release. */
static void
test_status(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t gen = fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 'n1'");
	int start = (int)fx_sql_int64(fx,
	    "SELECT a.start FROM allocations a JOIN pools p ON "
	    "p.id = a.pool_id WHERE p.name = 'train'");
	char gpus[1024];

	assert_string_equal(alloc_state(fx, "3g.40gb"), "reserved");
	/* the agent has applied an older generation: not there yet is fine */
	snprintf(gpus, sizeof(gpus),
	    "[{\"uuid\":\"" GPU0 "\",\"index\":0,\"mig_enabled\":false,\"instances\":[]},"
	    "{\"uuid\":\"" GPU1 "\",\"index\":1,\"mig_enabled\":true,\"instances\":["
	    "{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"}]}]");
	status_report(fx, node_token, gen - 1, gpus, NULL, 200);
	assert_string_equal(alloc_state(fx, "3g.40gb"), "reserved");

	/* realized: ready, the pool active, the request fulfilled */
	snprintf(gpus, sizeof(gpus),
	    "[{\"uuid\":\"" GPU0 "\",\"index\":0,\"mig_enabled\":false,\"instances\":[]},"
	    "{\"uuid\":\"" GPU1 "\",\"index\":1,\"mig_enabled\":true,\"xid_events\":[{\"xid\":13}],"
	    "\"instances\":[{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"},"
	    "{\"profile\":\"3g.40gb\",\"start\":%d,\"size\":4,\"uuid\":\"MIG-train\"}]}]",
	    start);
	status_report(fx, node_token, gen, gpus, NULL, 200);
	assert_string_equal(alloc_state(fx, "3g.40gb"), "ready");
	assert_string_equal(fx_sql_text(fx,
				"SELECT device_uuid FROM allocations a JOIN pools p ON "
				"p.id = a.pool_id WHERE p.name = 'train'"),
	    "MIG-train");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'train'"),
	    "active");
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1",
				fx_str(fx, "%lld", (long long)pool_request)),
	    "fulfilled");
	/* Xid 13 is the application's: the GPU stays healthy */
	assert_string_equal(fx_sql_text(fx, "SELECT health FROM gpus WHERE uuid = '" GPU1 "'"),
	    "ok");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT observed_generation FROM nodes WHERE name = 'n1'"),
	    gen);

	/* drift: an instance nobody placed, then gone again */
	snprintf(gpus, sizeof(gpus),
	    "[{\"uuid\":\"" GPU0 "\",\"index\":0,\"mig_enabled\":false,\"instances\":[]},"
	    "{\"uuid\":\"" GPU1 "\",\"index\":1,\"mig_enabled\":true,\"instances\":["
	    "{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"},"
	    "{\"profile\":\"3g.40gb\",\"start\":%d,\"size\":4,\"uuid\":\"MIG-train\"},"
	    "{\"profile\":\"1g.10gb\",\"start\":%d,\"size\":1,\"uuid\":\"MIG-rogue\"}]}]",
	    start, start == 0 ? 4 : 0);
	status_report(fx, node_token, gen, gpus, NULL, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'drift' AND "
			     "resolved_at IS NULL"),
	    1);
	snprintf(gpus, sizeof(gpus),
	    "[{\"uuid\":\"" GPU0 "\",\"index\":0,\"mig_enabled\":false,\"instances\":[]},"
	    "{\"uuid\":\"" GPU1 "\",\"index\":1,\"mig_enabled\":true,\"instances\":["
	    "{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"},"
	    "{\"profile\":\"3g.40gb\",\"start\":%d,\"size\":4,\"uuid\":\"MIG-train\"}]}]",
	    start);
	status_report(fx, node_token, gen, gpus, NULL, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'drift' AND "
			     "resolved_at IS NULL"),
	    0);

	/* hostile reports change nothing */
	r = fx_request(fx, node_token, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":1,\"gpus\":[{\"uuid\":\"" GPU1
	    "\",\"recovery_action\":\"x\"}]}");
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, node_token, "PUT", "/v1/agent/status", "{\"observed_generation\":1}");
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, node_token, "PUT", "/v1/agent/status", "[1,2]");
	assert_int_equal(r->status, 422);
	assert_string_equal(alloc_state(fx, "3g.40gb"), "ready");

	/* Xid 79 (fallen off the bus): failed GPU, failed allocation, degraded pool, alert */
	snprintf(gpus, sizeof(gpus),
	    "[{\"uuid\":\"" GPU0 "\",\"index\":0,\"mig_enabled\":false,\"instances\":[]},"
	    "{\"uuid\":\"" GPU1 "\",\"index\":1,\"mig_enabled\":true,\"xid_events\":[{\"xid\":79}],"
	    "\"instances\":[{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"},"
	    "{\"profile\":\"3g.40gb\",\"start\":%d,\"size\":4,\"uuid\":\"MIG-train\"}]}]",
	    start);
	status_report(fx, node_token, gen, gpus, NULL, 200);
	assert_string_equal(fx_sql_text(fx, "SELECT health FROM gpus WHERE uuid = '" GPU1 "'"),
	    "failed");
	assert_non_null(
	    strstr(fx_sql_text(fx, "SELECT health_reason FROM gpus WHERE uuid = '" GPU1 "'"),
		"Xid 79"));
	assert_string_equal(alloc_state(fx, "3g.40gb"), "failed");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'train'"),
	    "degraded");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'gpu_failed' "
			     "AND severity = 'critical' AND resolved_at IS NULL"),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpu_health_intervals h JOIN gpus g "
			     "ON g.id = h.gpu_id WHERE g.uuid = '" GPU1 "' AND "
			     "h.health = 'failed' AND h.ended_at IS NULL"),
	    1);
	/* a failed GPU is out of placement */
	r = fx_request(fx, op, "POST", "/v1/capacity/simulate",
	    "{\"items\":[{\"model\":\"H100-80GB\",\"profile\":\"3g.40gb\",\"count\":3}]}");
	assert_status(r, 200);

	/* the operator brings it back; the agent reports it healthy: ready again */
	r = fx_request(fx, op, "PATCH", fx_str(fx, "/v1/gpus/%s", GPU1), "{\"health\":\"ok\"}");
	if (r->status != 200) {
		int64_t id = fx_sql_int64(fx, "SELECT id FROM gpus WHERE uuid = '" GPU1 "'");

		r = fx_request(fx, op, "PATCH", fx_str(fx, "/v1/gpus/%lld", (long long)id),
		    "{\"health\":\"ok\"}");
	}
	assert_status(r, 200);
	snprintf(gpus, sizeof(gpus),
	    "[{\"uuid\":\"" GPU0 "\",\"index\":0,\"mig_enabled\":false,\"instances\":[]},"
	    "{\"uuid\":\"" GPU1 "\",\"index\":1,\"mig_enabled\":true,"
	    "\"instances\":[{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"},"
	    "{\"profile\":\"3g.40gb\",\"start\":%d,\"size\":4,\"uuid\":\"MIG-train\"}]}]",
	    start);
	status_report(fx, node_token, gen, gpus, NULL, 200);
	assert_string_equal(alloc_state(fx, "3g.40gb"), "ready");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'train'"),
	    "active");

	/* release: releasing until the instance is gone, then released */
	r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"release\",\"pool\":\"train\"}");
	assert_status(r, 201);
	{
		int64_t rel = fx_json_int(r->json, "id");

		r = fx_request(fx, op, "POST",
		    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)rel), "{}");
		assert_status(r, 200);
		assert_string_equal(alloc_state(fx, "3g.40gb"), "releasing");
		status_report(fx, node_token, gen, gpus, NULL, 200); /* still there */
		assert_string_equal(alloc_state(fx, "3g.40gb"), "releasing");
		status_report(fx, node_token, gen,
		    "[{\"uuid\":\"" GPU0 "\",\"instances\":[]},{\"uuid\":\"" GPU1
		    "\",\"instances\":["
		    "{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"}]}]",
		    NULL, 200);
		assert_string_equal(alloc_state(fx, "3g.40gb"), "released");
		assert_string_equal(fx_sql_text(fx,
					"SELECT status FROM pools WHERE name = 'train'"),
		    "released");
		assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1",
					fx_str(fx, "%lld", (long long)rel)),
		    "fulfilled");
	}
}

/* An agent error fails the allocation and its request. */
static void
test_apply_error(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t id, gen;

	r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"whole\",\"items\":[{\"model\":\"H100-80GB\","
	    "\"profile\":\"full\",\"count\":1}],\"justification\":\"t\"}");
	assert_status(r, 201);
	id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	assert_status(r, 200);
	gen = fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 'n1'");
	status_report(fx, node_token, gen,
	    "[{\"uuid\":\"" GPU0 "\",\"instances\":[]},{\"uuid\":\"" GPU1 "\",\"instances\":["
	    "{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"}]}]",
	    "[{\"gpu\":\"" GPU0 "\",\"profile\":\"full\",\"start\":0,\"message\":\"busy: a process "
	    "holds the GPU\"}]",
	    200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT a.state || ':' || a.error FROM allocations a JOIN "
				"pools p ON p.id = a.pool_id WHERE p.name = 'whole'"),
	    "failed:busy: a process holds the GPU");
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1",
				fx_str(fx, "%lld", (long long)id)),
	    "failed");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'whole'"),
	    "degraded");
}

/* Heartbeats, liveness (grace 3 s), rotation and revocation. */
static void
test_liveness_and_tokens(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *old = node_token, *fresh;
	int64_t t0;

	r = fx_request(fx, node_token, "POST", "/v1/agent/heartbeat",
	    "{\"observed_generation\":1}");
	assert_status(r, 200);
	assert_true(fx_json_int(r->json, "generation") >= 1);
	/* silent: unknown within grace + sweep interval, out of placement */
	t0 = time_mono_us();
	while (
	    strcmp(fx_sql_text(fx, "SELECT status FROM nodes WHERE name = 'n1'"), "unknown") != 0) {
		assert_true(time_mono_us() - t0 < 10 * 1000000);
		usleep(200 * 1000);
	}
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id "
			     "WHERE n.name = 'n1' AND g.node_status <> 'unknown'"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'node_unknown' "
			     "AND resolved_at IS NULL"),
	    1);
	r = fx_request(fx, node_token, "POST", "/v1/agent/heartbeat", NULL);
	assert_status(r, 200);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM nodes WHERE name = 'n1'"), "ready");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'node_unknown' "
			     "AND resolved_at IS NULL"),
	    0);
	/* hand-registered nodes are never touched by liveness */
	r = fx_request(fx, op, "POST", "/v1/nodes",
	    "{\"name\":\"manual\",\"cluster\":\"c1\",\"hostname\":\"m\",\"cpu_millicores\":1000,"
	    "\"memory_bytes\":1000}");
	assert_status(r, 201);

	/* rotation: the old token stops working at once */
	r = fx_request(fx, node_token, "POST", "/v1/agent/token/rotate", NULL);
	assert_status(r, 200);
	fresh = fx_json_str(r->json, "node_token");
	assert_string_not_equal(fresh, old);
	r = fx_request(fx, old, "POST", "/v1/agent/heartbeat", NULL);
	assert_problem(r, 401, "unauthorized");
	r = fx_request(fx, fresh, "POST", "/v1/agent/heartbeat", NULL);
	assert_status(r, 200);
	/* an operator revokes it: 401 (the agent must enroll again) */
	r = fx_request(fx, op, "POST", "/v1/nodes/n1/agent-token/revoke", NULL);
	assert_status(r, 204);
	r = fx_request(fx, fresh, "POST", "/v1/agent/heartbeat", NULL);
	assert_problem(r, 401, "unauthorized");
	r = fx_request(fx, op, "POST", "/v1/nodes/nope/agent-token/revoke", NULL);
	assert_problem(r, 404, "not_found");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM nodes WHERE name = 'manual'"),
	    "ready");

	/* re-enrolling adopts the node with its GPUs and allocations */
	{
		int64_t gpus = fx_sql_int64(fx, "SELECT count(*) FROM gpus");

		r = enroll(fx, enroll_token(fx), "n1", 201);
		node_token = fx_json_str(r->json, "node_token");
		assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM gpus"), gpus);
		assert_int_equal(fx_sql_int64(fx,
				     "SELECT count(*) FROM allocations WHERE "
				     "pool_id IS NULL AND state <> 'released'"),
		    1);
	}
	/* the mig-parted view */
	r = fx_request(fx, op, "GET", "/v1/nodes/n1/mig-config", NULL);
	assert_status(r, 200);
	assert_non_null(strstr(r->body, "version: v1"));
	assert_non_null(strstr(r->body, "\"1g.10gb\": 1"));
	/* a revoked enrollment token is refused */
	{
		const char *et = enroll_token(fx);
		int64_t id = fx_sql_int64(fx, "SELECT max(id) FROM enrollment_tokens");

		r = fx_request(fx, op, "DELETE",
		    fx_str(fx, "/v1/clusters/c1/enrollment-tokens/%lld", (long long)id), NULL);
		assert_status(r, 204);
		r = enroll(fx, et, "n2", 401);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enroll),
		cmocka_unit_test(test_desired_state),
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_apply_error),
		cmocka_unit_test(test_liveness_and_tokens),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
