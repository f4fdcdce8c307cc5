/*
 * test_agent_server.c - the server side of node agents, driven over HTTP
 * as an agent would (the agent binary has its own end-to-end tests):
 * enrollment tokens and enrollment, node-token scope, the desired-state
 * long-poll (woken across replicas), status reports moving allocations,
 * pools and requests, GPU health from Xid events, drift, heartbeats and
 * liveness, token rotation and revocation, hostile input.
 */
#define _GNU_SOURCE
#include "fixture.h"

#include <arpa/inet.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "crypto/digest.h"
#include "core/timeutil.h"

#define GPU0 "GPU-aaaaaaaa-0000-0000-0000-000000000000"
#define GPU1 "GPU-aaaaaaaa-0000-0000-0000-000000000001"

static const char *op;    /* operator */
static const char *alice; /* owner of pa */

static int
group_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_AGENT_GRACE=3", "GPUPOOL_EXPIRY_INTERVAL=1",
		"GPUPOOL_PUSH_MAX_ATTEMPTS=3", "GPUPOOL_TELEMETRY_INTERVAL=1",
		"GPUPOOL_IDLE_AFTER=2", "GPUPOOL_PUSH_BACKOFF_MS=200",
		"GPUPOOL_PUSH_TIMEOUT_MS=2000", NULL };
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
	/* GPUPOOL_AGENT_GRACE is 3 s here: starting replica B on a loaded machine can take
	 * longer, and an unknown node takes no placement */
	r = fx_request(fx, node_token, "POST", "/v1/agent/heartbeat", NULL);
	assert_status(r, 200);
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
			     "AND resolved_at IS NULL AND node_id = (SELECT id FROM nodes WHERE name = 'n1')"),
	    1);
	r = fx_request(fx, node_token, "POST", "/v1/agent/heartbeat", NULL);
	assert_status(r, 200);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM nodes WHERE name = 'n1'"), "ready");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'node_unknown' "
			     "AND resolved_at IS NULL AND node_id = (SELECT id FROM nodes WHERE name = 'n1')"),
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
		/* each workflow's audit row: who, what, which object, the request */
		assert_int_equal(fx_sql_int64(fx,
				     fx_str(fx,
					 "SELECT count(*) FROM audit_log WHERE "
					 "action = 'enrollment_token.revoke' AND "
					 "object_type = 'enrollment_token' AND object_id = '%lld' AND "
					 "actor = 'op' AND actor_id IS NOT NULL AND request_id IS NOT "
					 "NULL AND before IS NULL AND after IS NULL",
					 (long long)id)),
		    1);
	}
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log a WHERE "
			     "action = 'enrollment_token.create' AND object_type = 'cluster' AND "
			     "object_id = 'c1' AND actor = 'op' AND request_id IS NOT NULL AND "
			     "before IS NULL AND after->>'cluster' = 'c1' AND NOT after ? 'token' "
			     "AND (after->>'id')::bigint IN (SELECT id FROM enrollment_tokens)"),
	    fx_sql_int64(fx, "SELECT count(*) FROM enrollment_tokens"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.token_rotate' "
			     "AND object_type = 'node' AND object_id = (SELECT id::text FROM nodes "
			     "WHERE name = 'n1') AND actor = 'node:' || object_id AND request_id "
			     "IS NOT NULL AND "
			     "before IS NULL AND after IS NULL"),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.token_revoke' "
			     "AND object_type = 'node' AND object_id = 'n1' AND actor = 'op' AND "
			     "request_id IS NOT NULL AND before IS NULL AND after IS NULL"),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.adopt' AND "
			     "object_id = 'n1' AND before ? 'last_heartbeat' AND "
			     "(before->>'managed_by_agent')::boolean AND after->>'name' = 'n1' AND "
			     "(after->>'gpus')::int = 2 AND actor IS NULL AND request_id IS NOT NULL"),
	    1);
	/* the first enrollment and the adopting one */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.enroll' AND "
			     "object_id = 'n1' AND before IS NULL AND after->>'cluster' = 'c1' AND "
			     "(after->>'managed_by_agent')::boolean"),
	    2);
}

/* ---- pushes: a receiver standing in for an agent's push listener ---- */

struct receiver {
	int fd, port;
	atomic_int status; /* what to answer */
	atomic_int count;  /* requests received */
	char ts[32], sig[128], body[8192], path[128];
	pthread_mutex_t mu;
	pthread_t thread;
	atomic_bool stop;
};

static const char *
header_value(const char *req, const char *name, char *out, size_t outlen)
{
	const char *h = strcasestr(req, name);
	size_t n = 0;

	out[0] = '\0';
	if (h == NULL)
		return out;
	h += strlen(name);
	while (*h == ' ')
		h++;
	while (h[n] != '\r' && h[n] != '\n' && h[n] != '\0' && n + 1 < outlen)
		n++;
	memcpy(out, h, n);
	out[n] = '\0';
	return out;
}

static void *
receiver_thread(void *arg)
{
	struct receiver *rc = arg;

	while (!atomic_load(&rc->stop)) {
		struct pollfd pfd = { .fd = rc->fd, .events = POLLIN };
		char buf[16384];
		size_t len = 0;
		int c;

		if (poll(&pfd, 1, 100) <= 0)
			continue;
		c = accept(rc->fd, NULL, NULL);
		if (c < 0)
			continue;
		for (;;) {
			ssize_t k = recv(c, buf + len, sizeof(buf) - 1 - len, 0);
			char *end;
			char cl[32];

			if (k <= 0)
				break;
			len += (size_t)k;
			buf[len] = '\0';
			end = strstr(buf, "\r\n\r\n");
			if (end != NULL &&
			    strlen(end + 4) >=
				(size_t)atoi(header_value(buf, "Content-Length:", cl, sizeof(cl))))
				break;
			if (len >= sizeof(buf) - 1)
				break;
		}
		pthread_mutex_lock(&rc->mu);
		header_value(buf, "X-Gpupool-Timestamp:", rc->ts, sizeof(rc->ts));
		header_value(buf, "X-Gpupool-Signature:", rc->sig, sizeof(rc->sig));
		sscanf(buf, "POST %127s", rc->path);
		snprintf(rc->body, sizeof(rc->body), "%s",
		    strstr(buf, "\r\n\r\n") ? strstr(buf, "\r\n\r\n") + 4 : "");
		pthread_mutex_unlock(&rc->mu);
		atomic_fetch_add(&rc->count, 1);
		{
			char out[128];
			int st = atomic_load(&rc->status);

			snprintf(out, sizeof(out),
			    "HTTP/1.1 %d X\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}",
			    st);
			(void)!send(c, out, strlen(out), MSG_NOSIGNAL);
		}
		close(c);
	}
	return NULL;
}

static void
receiver_start(struct receiver *rc)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int one = 1;

	memset(rc, 0, sizeof(*rc));
	atomic_store(&rc->status, 200);
	pthread_mutex_init(&rc->mu, NULL);
	rc->fd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(rc->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	assert_int_equal(bind(rc->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(rc->fd, (struct sockaddr *)&a, &l), 0);
	assert_int_equal(listen(rc->fd, 16), 0);
	rc->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&rc->thread, NULL, receiver_thread, rc), 0);
}

static void
receiver_stop(struct receiver *rc)
{
	atomic_store(&rc->stop, true);
	pthread_join(rc->thread, NULL);
	close(rc->fd);
}

/* The pusher signs and delivers; a failing agent is retried, then given up. */
static void
test_push(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	/* static: the receiver's thread must not outlive its memory if an assertion ends the test */
	static struct receiver rc;
	const char *secret, *tok;
	char expect[65], msg[9000];
	int64_t t0, id;

	receiver_start(&rc);
	r = fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"%s\",\"node_name\":\"pushy\",\"hostname\":\"pushy\","
	    "\"callback_url\":\"http://127.0.0.1:%d/\",\"gpus\":[{\"uuid\":"
	    "\"GPU-cccccccc-0000-0000-0000-000000000000\",\"index\":0,"
	    "\"product_name\":\"NVIDIA A100-SXM4-80GB\",\"mig_enabled\":false}]}",
	    enroll_token(fx), rc.port);
	assert_status(r, 201);
	secret = fx_json_str(r->json, "push_secret");
	tok = fx_json_str(r->json, "node_token");
	r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"pushed\",\"items\":[{\"model\":\"A100-80GB\","
	    "\"profile\":\"full\",\"count\":1}],\"justification\":\"t\"}");
	assert_status(r, 201);
	id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	assert_status(r, 200);
	t0 = time_mono_us();
	while (fx_sql_int64(fx,
		   "SELECT count(*) FROM outbox o JOIN nodes n ON n.id = o.node_id "
		   "WHERE n.name = 'pushy' AND o.delivered_at IS NULL") != 0) {
		assert_true(time_mono_us() - t0 < 10 * 1000000);
		usleep(100 * 1000);
	}
	assert_true(atomic_load(&rc.count) >= 1);
	pthread_mutex_lock(&rc.mu);
	assert_string_equal(rc.path, "/v1/desired-state");
	assert_non_null(strstr(rc.body, "\"pushy\""));
	assert_non_null(strstr(rc.body, "\"pushed\""));
	snprintf(msg, sizeof(msg), "%s.%s", rc.ts, rc.body);
	digest_hmac_sha256_hex(secret, strlen(secret), msg, strlen(msg), expect);
	assert_string_equal(rc.sig, fx_str(fx, "v1=%s", expect));
	assert_true(llabs(atoll(rc.ts) - (long long)time(NULL)) < 30);
	pthread_mutex_unlock(&rc.mu);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM outbox o JOIN nodes n ON n.id = o.node_id "
			     "WHERE n.name = 'pushy' AND o.gave_up_at IS NULL AND o.last_error IS NULL"),
	    fx_sql_int64(fx,
		"SELECT count(*) FROM outbox o JOIN nodes n ON n.id = o.node_id "
		"WHERE n.name = 'pushy'"));

	/* the agent fails: retried with backoff, given up after the last attempt, alert */
	atomic_store(&rc.status, 500);
	r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"release\",\"pool\":\"pushed\"}");
	assert_status(r, 201);
	id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	assert_status(r, 200);
	t0 = time_mono_us();
	while (
	    fx_sql_int64(fx,
		"SELECT count(*) FROM alerts WHERE type = 'push_failed' AND "
		"resolved_at IS NULL AND node_id = (SELECT id FROM nodes WHERE name = 'pushy')") !=
	    1) {
		assert_true(time_mono_us() - t0 < 20 * 1000000);
		usleep(100 * 1000);
	}
	fprintf(stderr, "outbox of pushy: %s\n",
	    fx_sql_text(fx,
		"SELECT string_agg(concat_ws(' ', o.id, o.generation, o.attempts, "
		"o.delivered_at IS NOT NULL, o.gave_up_at IS NOT NULL, o.last_error), '; ' "
		"ORDER BY o.id) FROM outbox o JOIN nodes n ON n.id = o.node_id "
		"WHERE n.name = 'pushy'"));
	assert_true(
	    fx_sql_int64(fx,
		"SELECT count(*) FROM outbox o JOIN nodes n ON n.id = o.node_id "
		"WHERE n.name = 'pushy' AND o.gave_up_at IS NOT NULL "
		"AND o.attempts >= 3 AND o.last_error LIKE 'gave up after % attempts: %'") >= 1);
	assert_true(fx_sql_int64(fx,
			"SELECT count(*) FROM outbox o JOIN nodes n ON n.id = o.node_id "
			"WHERE n.name = 'pushy' AND o.gave_up_at IS NOT NULL "
			"AND o.last_error LIKE '%: http_status'") >= 1);
	/* the class only: never the remote's status or text */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'push_failed' "
			     "AND message LIKE '%500%'"),
	    0);
	/* an agent that reports the generation needs no push: the rows are done */
	r = fx_request(fx, tok, "POST", "/v1/agent/heartbeat", "{\"observed_generation\":%lld}",
	    (long long)fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 'pushy'"));
	assert_status(r, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM outbox o JOIN nodes n ON n.id = o.node_id "
			     "WHERE n.name = 'pushy' AND o.delivered_at IS NULL"),
	    0);
	receiver_stop(&rc);
}

/* Samples (set-based, hostile), series, roll-ups, partitions, profiles, alerts. */
static void
test_telemetry(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t now = time(NULL), hour = now - now % 3600, t0;
	struct strbuf_like {
		char *p;
		size_t len, cap;
	} b = { 0 };
	const char *bob = fixture_create_user(fx, "bob", "none");
	int64_t id;
	char today_old[16];

	/* three good samples */
	r = fx_request(fx, node_token, "POST", "/v1/agent/metrics",
	    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"" GPU0
	    "\",\"power_w\":300.5,\"sm_active\":0.5,"
	    "\"memory_used_mib\":1000,\"temperature_c\":60},"
	    "{\"ts\":%lld,\"gpu_uuid\":\"" GPU0 "\",\"power_w\":100,\"sm_active\":0.25},"
	    "{\"ts\":%lld,\"gpu_uuid\":\"" GPU0 "\",\"power_w\":200,\"sm_active\":0.75,"
	    "\"last_xid\":null}]}",
	    (long long)(hour - 1800), (long long)(hour - 1790), (long long)(hour - 1780));
	assert_status(r, 200);
	assert_json_int(r->json, "stored", 3);
	assert_json_int(r->json, "rejected_count", 0);
	assert_json_int(r->json, "accepted", 3);
	/* a sample of a GPU that is not the node's: the whole batch 422, nothing stored */
	t0 = fx_sql_int64(fx, "SELECT count(*) FROM gpu_metric_samples");
	r = fx_request(fx, node_token, "POST", "/v1/agent/metrics",
	    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"" GPU0 "\",\"power_w\":1},"
	    "{\"ts\":%lld,\"gpu_uuid\":\"GPU-cccccccc-0000-0000-0000-000000000000\","
	    "\"power_w\":1}]}",
	    (long long)now, (long long)now);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "samples[1].gpu_uuid");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM gpu_metric_samples"), t0);
	/* malformed or out-of-range samples are dropped alone, the answer says which */
	r = fx_request(fx, node_token, "POST", "/v1/agent/metrics",
	    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"" GPU0 "\",\"sm_active\":2},"
	    "{\"ts\":\"yesterday\",\"gpu_uuid\":\"" GPU0 "\"},"
	    "{\"ts\":%lld,\"gpu_uuid\":\"" GPU0 "\"},"
	    "{\"ts\":%lld,\"gpu_uuid\":\"" GPU0 "\"},7]}",
	    (long long)now, (long long)(now + 3600), (long long)(now - 40 * 86400));
	assert_status(r, 200);
	assert_json_int(r->json, "stored", 0);
	assert_json_int(r->json, "rejected_count", 5);
	assert_json_int(r->json, "rejected[0].index", 0);
	assert_json_int(r->json, "rejected[2].index", 2);
	assert_non_null(strstr(fx_json_str(r->json, "rejected[2].reason"), "future"));
	assert_non_null(strstr(fx_json_str(r->json, "rejected[3].reason"), "retention"));
	r = fx_request(fx, node_token, "POST", "/v1/agent/metrics",
	    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"" GPU0 "\",\"power_w\":\"hot\"}],\"x\":1}",
	    (long long)now);
	assert_problem(r, 422, "validation_failed");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM gpu_metric_samples"), t0);
	/* a large batch is one statement */
	for (int i = 0; i < 2000; i++) {
		char one[160];
		int k = snprintf(one, sizeof(one),
		    "%s{\"ts\":%lld,\"gpu_uuid\":\"" GPU0 "\",\"power_w\":%d,\"sm_active\":0.1}",
		    i ? "," : "", (long long)(hour - 7200 + i), i % 700);

		if (b.len + (size_t)k + 1 > b.cap) {
			b.cap = (b.cap + (size_t)k + 1) * 2;
			b.p = realloc(b.p, b.cap);
		}
		memcpy(b.p + b.len, one, (size_t)k + 1);
		b.len += (size_t)k;
	}
	t0 = time_mono_us();
	r = fx_request(fx, node_token, "POST", "/v1/agent/metrics", "{\"samples\":[%s]}", b.p);
	assert_status(r, 200);
	assert_json_int(r->json, "stored", 2000);
	fprintf(stderr, "2,000 samples ingested in one request: %lld ms\n",
	    (long long)((time_mono_us() - t0) / 1000));
	free(b.p);

	/* the series: raw, by step, hourly roll-up */
	r = fx_request(fx, op, "GET",
	    fx_str(fx, "/v1/gpus/%s/metrics?from=%s&to=%s", GPU0,
		fx_sql_text(fx,
		    "SELECT to_char(to_timestamp($1::int8) AT TIME ZONE 'UTC', "
		    "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
		    fx_str(fx, "%lld", (long long)(hour - 1800))),
		fx_sql_text(fx,
		    "SELECT to_char(to_timestamp($1::int8) AT TIME ZONE 'UTC', "
		    "'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
		    fx_str(fx, "%lld", (long long)(hour - 1700)))),
	    NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "step", "raw");
	assert_int_equal(fx_json_len(r->json, "series[0].points"), 3);
	assert_int_equal(fx_json_len(r->json, "samples"), 3);
	assert_json_str(r->json, "samples[0].device_uuid", GPU0);
	assert_true(json_object_get_double(fx_json(r->json, "samples[0].power_w")) == 300.5);
	r = fx_request(fx, alice, "GET", fx_str(fx, "/v1/gpus/%s/metrics", GPU0), NULL);
	assert_problem(r, 403, "forbidden");
	r = fx_request(fx, op, "GET", fx_str(fx, "/v1/gpus/%s/metrics?step=0", GPU0), NULL);
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, op, "GET", "/v1/gpus/GPU-dddddddd-0000-0000-0000-000000000000/metrics",
	    NULL);
	assert_problem(r, 404, "not_found");
	/* the worker rolls the previous hour up: 3 samples, averages exact */
	t0 = time_mono_us();
	while (fx_sql_int64(fx,
		   "SELECT count(*) FROM gpu_metric_hourly WHERE hour = "
		   "to_timestamp($1::int8) AND device_uuid = '" GPU0 "'",
		   fx_str(fx, "%lld", (long long)(hour - 3600))) != 1) {
		assert_true(time_mono_us() - t0 < 10 * 1000000);
		usleep(200 * 1000);
	}
	assert_string_equal(fx_sql_text(fx,
				"SELECT samples || '/' || power_w_avg || '/' || "
				"power_w_max || '/' || sm_active_avg || '/' || sm_active_low "
				"FROM gpu_metric_hourly WHERE hour = to_timestamp($1::int8) "
				"AND device_uuid = '" GPU0 "'",
				fx_str(fx, "%lld", (long long)(hour - 3600))),
	    "3/200.16666666666666/300.5/0.5/0");

	/* an old partition is dropped whole by the worker */
	snprintf(today_old, sizeof(today_old), "%s",
	    fx_sql_text(fx, "SELECT to_char((now() AT TIME ZONE 'UTC')::date - 30, 'YYYYMMDD')"));
	fx_sql_exec(fx,
	    fx_str(fx,
		"CREATE TABLE gpu_metric_samples_%s PARTITION OF gpu_metric_samples FOR VALUES "
		"FROM ('%s 00:00+00') TO ('%s 00:00+00'::timestamptz + interval '1 day')",
		today_old, today_old, today_old));
	t0 = time_mono_us();
	while (fx_sql_int64(fx,
		   fx_str(fx,
		       "SELECT count(*) FROM pg_class WHERE relname = "
		       "'gpu_metric_samples_%s'",
		       today_old)) != 0) {
		assert_true(time_mono_us() - t0 < 10 * 1000000);
		usleep(200 * 1000);
	}
	assert_true(fx_sql_int64(fx,
			"SELECT count(*) FROM pg_inherits WHERE inhparent = "
			"'gpu_metric_samples'::regclass") >= 3);

	/* a pool on n1 to run workloads on */
	r = fx_request(fx, node_token, "POST", "/v1/agent/heartbeat", NULL);
	assert_status(r, 200);
	r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"infer\",\"items\":[{\"model\":\"H100-80GB\","
	    "\"profile\":\"1g.10gb\",\"count\":1}],\"justification\":\"t\"}");
	assert_status(r, 201);
	id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	assert_status(r, 200);
	{
		int start = (int)fx_sql_int64(fx,
		    "SELECT a.start FROM allocations a JOIN pools p ON "
		    "p.id = a.pool_id WHERE p.name = 'infer'");

		status_report(fx, node_token,
		    fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = 'n1'"),
		    fx_str(fx,
			"[{\"uuid\":\"" GPU0 "\",\"instances\":[]},{\"uuid\":\"" GPU1
			"\",\"instances\":["
			"{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1,\"uuid\":\"MIG-found\"},"
			"{\"profile\":\"1g.10gb\",\"start\":%d,\"size\":1,\"uuid\":\"MIG-infer\"}]}]",
			start),
		    NULL, 200);
	}
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'infer'"),
	    "active");

	/* workloads: one of the project, one in a foreign namespace, one on an unmanaged instance */
	r = fx_request(fx, node_token, "PUT", "/v1/agent/profiles",
	    "{\"source\":\"fake\",\"profiles\":[{\"device_uuid\":\"MIG-infer\",\"namespace\":\"team-a\","
	    "\"pod\":\"trainer-0\",\"container\":\"main\"},{\"device_uuid\":\"MIG-infer\","
	    "\"namespace\":\"intruder\",\"pod\":\"miner\"},{\"device_uuid\":\"MIG-found\","
	    "\"namespace\":\"team-a\",\"pod\":\"sneaky\"}]}");
	assert_status(r, 200);
	assert_json_int(r->json, "isolation_violations", 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = "
			     "'isolation_violation' AND resolved_at IS NULL"),
	    2);
	r = fx_request(fx, node_token, "PUT", "/v1/agent/profiles",
	    "{\"profiles\":[{\"device_uuid\":\"MIG-infer\",\"namespace\":\"<img src=x>\",\"pod\":\"p\"}]}");
	assert_problem(r, 422, "validation_failed");
	/* who sees what */
	r = fx_request(fx, alice, "GET", "/v1/profiles?project=pa", NULL);
	assert_status(r, 200);
	assert_true(fx_json_len(r->json, "items") >= 2);
	assert_json_str(r->json, "items[0].pool", "infer");
	r = fx_request(fx, bob, "GET", "/v1/profiles", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	r = fx_request(fx, op, "GET", "/v1/profiles?node=n1", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 3);

	/* the workloads stop: violations resolved, history kept */
	r = fx_request(fx, node_token, "PUT", "/v1/agent/profiles", "{\"profiles\":[]}");
	assert_status(r, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = "
			     "'isolation_violation' AND resolved_at IS NULL"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM workload_profiles WHERE "
			     "ended_at IS NOT NULL AND pod = 'trainer-0'"),
	    1);
	/* no workload and no activity past GPUPOOL_IDLE_AFTER: an idle alert */
	t0 = time_mono_us();
	while (fx_sql_int64(fx,
		   "SELECT count(*) FROM alerts a JOIN pools p ON p.id = a.pool_id "
		   "WHERE a.type = 'idle' AND p.name = 'infer' AND a.resolved_at IS NULL") != 1) {
		assert_true(time_mono_us() - t0 < 15 * 1000000);
		usleep(200 * 1000);
	}
	r = fx_request(fx, alice, "GET", "/v1/alerts?type=idle", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].pool", "infer");
	id = fx_json_int(r->json, "items[0].id");
	/* project users do not see alerts of no project of theirs */
	r = fx_request(fx, alice, "GET", "/v1/alerts?type=gpu_failed&state=all", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	r = fx_request(fx, bob, "POST", fx_str(fx, "/v1/alerts/%lld/ack", (long long)id), NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, alice, "POST", fx_str(fx, "/v1/alerts/%lld/ack", (long long)id), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "acknowledged_by", "alice");
	r = fx_request(fx, op, "GET", "/v1/alerts?state=bogus", NULL);
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	assert_status(r, 200);
	assert_non_null(strstr(r->body, "gpupool_alerts_active{type=\"idle\"} 1"));
	fixture_promtool_check(fx, r->body, r->body_len);
}

/* The CLI over the same endpoints. */
static void
test_cli(void **state)
{
	struct fixture *fx = *state;
	const char *op_env[] = { fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url),
		fx_str(fx, "GPUPOOL_TOKEN=%s", op), NULL };
	struct fx_proc *p;

	p = fx_cli(fx, op_env, NULL, "nodes", "enroll-token", "c1", "--expires-in", "120", NULL);
	assert_int_equal(p->status, 0);
	assert_memory_equal(p->out, "gpe_", 4);
	{
		char secret[80];

		snprintf(secret, sizeof(secret), "%.*s", (int)strcspn(p->out, "\n"), p->out);
		p = fx_cli(fx, op_env, NULL, "agents", "enroll-tokens", "c1", NULL);
		assert_int_equal(p->status, 0);
		assert_non_null(strstr(p->out, "usable"));
		assert_null(strstr(p->out, secret)); /* the prefix only, never the secret */
	}
	p = fx_cli(fx, op_env, NULL, "agents", "enroll-token", "c1", "--expires-in", "5", NULL);
	assert_int_equal(p->status, 2);
	p = fx_cli(fx, op_env, NULL, "agents", "mig-config", "n1", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "mig-configs:"));
	p = fx_cli(fx, op_env, NULL, "alerts", "list", "--state", "all", "--type", "idle", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "idle"));
	p = fx_cli(fx, op_env, NULL, "profiles", "list", "--node", "n1", "--all", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "trainer-0"));
	p = fx_cli(fx, op_env, NULL, "gpus", "metrics", GPU0, "--step", "3600", "--from",
	    fx_sql_text(fx,
		"SELECT to_char(now() AT TIME ZONE 'UTC' - interval '4 hours', "
		"'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')"),
	    NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "device " GPU0));
	p = fx_cli(fx, op_env, NULL, "agents", "revoke-token", "nope", NULL);
	assert_int_equal(p->status, 4);
	/* a page that is not the last says how to go on */
	p = fx_cli(fx, op_env, NULL, "nodes", "list", "--limit", "1", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->err, "more items: add --cursor "));
	/* a refused approval names what is missing, per item */
	{
		struct gp_client_response *r = fx_request(fx, alice, "POST",
		    "/v1/projects/pa/pool-requests",
		    "{\"action\":\"create\",\"pool\":\"huge\",\"items\":[{\"model\":\"H100-80GB\","
		    "\"profile\":\"full\",\"count\":40}],\"justification\":\"t\"}");
		char id[24];

		assert_status(r, 201);
		snprintf(id, sizeof(id), "%lld", (long long)fx_json_int(r->json, "id"));
		p = fx_cli(fx, op_env, NULL, "request", "approve", id, NULL);
		assert_int_equal(p->status, 5);
		assert_non_null(strstr(p->err, "short: H100-80GB/full, "));
		assert_null(strstr(p->err, "gpupool: gpupool"));
	}
	/* forbidden says who may */
	{
		const char *alice_env[] = { op_env[0], fx_str(fx, "GPUPOOL_TOKEN=%s", alice),
			NULL };

		p = fx_cli(fx, alice_env, NULL, "nodes", "list", NULL);
		assert_int_equal(p->status, 3);
		assert_non_null(
		    strstr(p->err, "needs the global role admin or operator or billing"));
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
		cmocka_unit_test(test_push),
		cmocka_unit_test(test_liveness_and_tokens),
		cmocka_unit_test(test_telemetry),
		cmocka_unit_test(test_cli),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
