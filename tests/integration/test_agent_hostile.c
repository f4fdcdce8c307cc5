/*
 * test_agent_hostile.c - the server side of the agent plane under real GPU
 * faults and hostile nodes (issue 19), driven over HTTP as an agent would:
 * lost and unknown GPUs, telemetry bound to the node's own devices,
 * enrollment that cannot steal a node, the callback allow list, health
 * from NVIDIA's Xid catalog (contained faults, storms, unknown Xids),
 * generations after a restore, bounded agent texts, retention, credits.
 */
#define _GNU_SOURCE
#include "fixture.h"

#include <fcntl.h>
#include <json-c/json.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/timeutil.h"

static const char *op;    /* operator */
static const char *alice; /* owner of pa */

static int
group_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_AGENT_GRACE=30", "GPUPOOL_EXPIRY_INTERVAL=1",
		"GPUPOOL_TELEMETRY_INTERVAL=1", "GPUPOOL_BILLING_ACCRUAL_INTERVAL=1",
		"GPUPOOL_BILLING_SETTLE=0", NULL };
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
	r = fx_request(fx, fx->admin_token, "POST", "/v1/billing/rates",
	    "{\"model\":\"H100-80GB\",\"profile\":\"full\",\"currency\":\"EUR\","
	    "\"price_per_hour_micro\":7000000,\"effective_from\":\"2026-01-01T00:00:00Z\"}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, op, "POST", "/v1/clusters", "{\"name\":\"c1\",\"region\":\"eu-1\"}");
	return r->status == 201 ? 0 : -1;
}

/* GPU n (0 or 1) of node tag (8 hex digits). */
static const char *
gpu(struct fixture *fx, const char *tag, int n)
{
	return fx_str(fx, "GPU-%s-0000-0000-0000-00000000000%d", tag, n);
}

static const char *
enroll_token_with(struct fixture *fx, const char *body)
{
	struct gp_client_response *r =
	    fx_request(fx, op, "POST", "/v1/clusters/c1/enrollment-tokens", "%s", body);

	assert_status(r, 201);
	return fx_json_str(r->json, "token");
}

static const char *
enroll_token(struct fixture *fx)
{
	return enroll_token_with(fx, "{\"expires_in_seconds\":600}");
}

/* Enroll node `name` (GPUs of `tag`: two H100s, both with MIG on). */
static struct gp_client_response *
enroll_cb(struct fixture *fx, const char *etoken, const char *name, const char *tag,
    const char *callback)
{
	return fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"%s\",\"node_name\":\"%s\",\"hostname\":\"%s.example\","
	    "%s%s%s\"agent_version\":\"test\",\"gpus\":["
	    "{\"uuid\":\"%s\",\"index\":0,\"product_name\":\"NVIDIA H100 80GB HBM3\","
	    "\"memory_mib\":81559,\"mig_enabled\":true,\"instances\":[]},"
	    "{\"uuid\":\"%s\",\"index\":1,\"product_name\":\"NVIDIA H100 80GB HBM3\","
	    "\"memory_mib\":81559,\"mig_enabled\":true,\"instances\":[]}]}",
	    etoken, name, name, callback ? "\"callback_url\":\"" : "", callback ? callback : "",
	    callback ? "\"," : "", gpu(fx, tag, 0), gpu(fx, tag, 1));
}

/* Enroll a fresh node; its node token. Other nodes are cordoned: placement lands here. */
static const char *
enroll_node(struct fixture *fx, const char *name, const char *tag)
{
	struct gp_client_response *r;

	const char *ready = fx_sql_text(fx,
	    "SELECT coalesce(string_agg(name, ' '), '') FROM nodes WHERE status = 'ready'");
	char list[2048];

	snprintf(list, sizeof(list), "%s", ready);
	for (char *sv = NULL, *n = strtok_r(list, " ", &sv); n; n = strtok_r(NULL, " ", &sv))
		assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/cordon", n),
				  NULL),
		    200);
	r = enroll_cb(fx, enroll_token(fx), name, tag, "http://127.0.0.1:9/");
	assert_status(r, 201);
	return fx_json_str(r->json, "node_token");
}

struct alloc {
	int64_t id;
	const char *gpu;
	int start, size;
	const char *profile;
};

/* Create and approve pool `pool` of one `profile`; its allocation. */
static struct alloc
make_pool(struct fixture *fx, const char *pool, const char *profile)
{
	struct gp_client_response *r =
	    fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
		"{\"action\":\"create\",\"pool\":\"%s\",\"items\":[{\"model\":\"H100-80GB\","
		"\"profile\":\"%s\",\"count\":1}],\"justification\":\"t\"}",
		pool, profile);
	struct alloc a;

	assert_status(r, 201);
	r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)fx_json_int(r->json, "id")),
	    "{}");
	assert_status(r, 200);
	a.id = fx_sql_int64(fx,
	    "SELECT a.id FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = $1",
	    pool);
	a.gpu = fx_sql_text(fx,
	    "SELECT g.uuid FROM allocations a JOIN gpus g ON g.id = a.gpu_id WHERE a.id = $1",
	    fx_str(fx, "%lld", (long long)a.id));
	a.start = (int)fx_sql_int64(fx, "SELECT start FROM allocations WHERE id = $1",
	    fx_str(fx, "%lld", (long long)a.id));
	a.size = (int)fx_sql_int64(fx, "SELECT size FROM allocations WHERE id = $1",
	    fx_str(fx, "%lld", (long long)a.id));
	a.profile = profile;
	return a;
}

static const char *
instance_json(struct fixture *fx, const struct alloc *a, const char *device)
{
	return fx_str(fx, "{\"profile\":\"%s\",\"start\":%d,\"size\":%d,\"uuid\":\"%s\"}",
	    a->profile, a->start, a->size, device);
}

static int64_t
node_gen(struct fixture *fx, const char *node)
{
	return fx_sql_int64(fx, "SELECT generation FROM nodes WHERE name = $1", node);
}

static struct gp_client_response *
report(struct fixture *fx, const char *token, int64_t observed, const char *gpus)
{
	return fx_request(fx, token, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":%lld,\"agent_version\":\"test\",\"gpus\":%s,\"errors\":[]}",
	    (long long)observed, gpus);
}

static const char *
alloc_state(struct fixture *fx, int64_t id)
{
	return fx_sql_text(fx, "SELECT state FROM allocations WHERE id = $1",
	    fx_str(fx, "%lld", (long long)id));
}

static const char *
gpu_health(struct fixture *fx, const char *uuid)
{
	return fx_sql_text(fx, "SELECT health FROM gpus WHERE uuid = $1", uuid);
}

/* The other GPU of the node than a->gpu. */
static const char *
other_gpu(struct fixture *fx, const char *tag, const struct alloc *a)
{
	return strcmp(a->gpu, gpu(fx, tag, 0)) == 0 ? gpu(fx, tag, 1) : gpu(fx, tag, 0);
}

/* A node with a ready allocation of pool `pool`. */
static struct alloc
ready_pool(struct fixture *fx, const char *node, const char *tag, const char *tok, const char *pool,
    const char *device)
{
	struct alloc a = make_pool(fx, pool, "3g.40gb");
	struct gp_client_response *r = report(fx, tok, node_gen(fx, node),
	    fx_str(fx, "[{\"uuid\":\"%s\",\"instances\":[%s]},{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, instance_json(fx, &a, device), other_gpu(fx, tag, &a)));

	assert_status(r, 200);
	assert_string_equal(alloc_state(fx, a.id), "ready");
	return a;
}

/* Finding 1: a lost GPU fails at once, an unknown one keeps its allocations. */
static void
test_lost_and_unknown(void **state)
{
	struct fixture *fx = *state;
	const char *tok = enroll_node(fx, "lost1", "11111111");
	struct alloc a = ready_pool(fx, "lost1", "11111111", tok, "lp", "MIG-lp");
	const char *other = other_gpu(fx, "11111111", &a);
	struct gp_client_response *r;
	int64_t gen = node_gen(fx, "lost1");

	/* unknown: instances not listed this scan; the allocation stays, no drift */
	r = report(fx, tok, gen,
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"state\":\"unknown\"},{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, other));
	assert_status(r, 200);
	assert_json_int(r->json, "unknown_gpus", 1);
	assert_json_int(r->json, "failed", 0);
	assert_string_equal(alloc_state(fx, a.id), "ready");
	assert_string_equal(gpu_health(fx, a.gpu), "ok");
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'lp'"),
	    "active");
	/* instances sent anyway with unknown are ignored: no drift from them */
	r = report(fx, tok, gen,
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"state\":\"unknown\",\"instances\":[{\"profile\":\"1g.10gb\","
		"\"start\":%d,\"size\":1,\"uuid\":\"MIG-rogue\"}]},{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, a.start == 0 ? 4 : 0, other));
	assert_status(r, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'drift' AND "
			     "resolved_at IS NULL"),
	    0);
	assert_string_equal(alloc_state(fx, a.id), "ready");
	/* a state that is none of ok, unknown, lost */
	r = report(fx, tok, gen,
	    fx_str(fx, "[{\"uuid\":\"%s\",\"state\":\"bogus\"},{\"uuid\":\"%s\"}]", a.gpu, other));
	assert_problem(r, 422, "validation_failed");

	/* lost: failed at once, its allocation too, an alert naming the error; the other stays */
	r = report(fx, tok, gen,
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"state\":\"lost\",\"error\":\"GPU is lost\\u0007\",\"xid\":79},"
		"{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, other));
	assert_status(r, 200);
	assert_json_int(r->json, "gpus_failed", 1);
	assert_string_equal(gpu_health(fx, a.gpu), "failed");
	assert_string_equal(gpu_health(fx, other), "ok");
	assert_string_equal(alloc_state(fx, a.id), "failed");
	assert_non_null(
	    strstr(fx_sql_text(fx, "SELECT health_reason FROM gpus WHERE uuid = $1", a.gpu),
		"lost (Xid 79): GPU is lost"));
	assert_string_equal(fx_sql_text(fx,
				"SELECT details->>'error' || '/' || (details->>'xid') FROM alerts "
				"WHERE type = 'gpu_failed' AND resolved_at IS NULL AND gpu_id = "
				"(SELECT id FROM gpus WHERE uuid = $1)",
				a.gpu),
	    "GPU is lost /79");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpu_health_intervals h JOIN gpus g ON "
			     "g.id = h.gpu_id WHERE g.uuid = $1 AND h.health = 'failed' "
			     "AND h.ended_at IS NULL",
			     a.gpu),
	    1);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'lp'"),
	    "degraded");
	/* the credit follows from the failed interval (accrual every second) */
	{
		int64_t t0 = time_mono_us();

		while (fx_sql_int64(fx,
			   "SELECT count(*) FROM billing_usage b JOIN pools p ON p.id = b.pool_id "
			   "WHERE p.name = 'lp' AND b.kind = 'credit'") == 0) {
			assert_true(time_mono_us() - t0 < 20 * 1000000);
			usleep(200 * 1000);
		}
	}
}

/* Finding 1: a release is not confirmed by a GPU whose instances could not be listed. */
static void
test_unknown_keeps_release(void **state)
{
	struct fixture *fx = *state;
	const char *tok = enroll_node(fx, "unk2", "12121212");
	struct alloc a = ready_pool(fx, "unk2", "12121212", tok, "up", "MIG-up");
	const char *other = other_gpu(fx, "12121212", &a);
	struct gp_client_response *r = fx_request(fx, alice, "POST",
	    "/v1/projects/pa/pool-requests", "{\"action\":\"release\",\"pool\":\"up\"}");

	assert_status(r, 201);
	r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)fx_json_int(r->json, "id")),
	    "{}");
	assert_status(r, 200);
	assert_string_equal(alloc_state(fx, a.id), "releasing");
	r = report(fx, tok, node_gen(fx, "unk2"),
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"state\":\"unknown\"},{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, other));
	assert_status(r, 200);
	assert_string_equal(alloc_state(fx, a.id), "releasing");
	/* listed again, the instance is gone: now released */
	r = report(fx, tok, node_gen(fx, "unk2"),
	    fx_str(fx, "[{\"uuid\":\"%s\",\"instances\":[]},{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, other));
	assert_status(r, 200);
	assert_string_equal(alloc_state(fx, a.id), "released");
}

/*
 * Issue 23: the rows a batch stores are exactly the accepted samples
 * (values, device, GPU, timestamps to the microsecond, NULLs, the integer
 * columns' whole parts), the rejections listed as before (the checks' own
 * in order, then the devices unknown on their GPU), and a sample inside the
 * retention but before the oldest partition kept (midnight UTC, retention
 * days back) not stored and not rejected.
 */
static void
test_telemetry_exact(void **state)
{
	struct fixture *fx = *state;
	const char *tok = enroll_node(fx, "exact", "7e57da7a");
	struct alloc a = ready_pool(fx, "exact", "7e57da7a", tok, "exq", "MIG-exact");
	const char *other = other_gpu(fx, "7e57da7a", &a);
	struct gp_client_response *r;
	int64_t now = time(NULL), hour = now - now % 3600;
	/* 60 s inside the 7-day retention: before midnight UTC 6 days back unless it is past it */
	int64_t edge = now - 7 * 86400 + 60;
	bool edge_stored = edge >= (now - now % 86400) - 6 * 86400;
	const char *rfc = fx_sql_text(fx,
	    "SELECT to_char(to_timestamp($1::int8) AT TIME ZONE 'UTC', "
	    "'YYYY-MM-DD\"T\"HH24:MI:SS\".250001Z\"')",
	    fx_str(fx, "%lld", (long long)(hour - 899)));

	r = fx_request(fx, tok, "POST", "/v1/agent/metrics",
	    "{\"samples\":["
	    /* 0: every column */
	    "{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"device_uuid\":\"MIG-exact\",\"power_w\":301.25,"
	    "\"sm_active\":0.123456789,\"memory_used_mib\":4096,\"memory_total_mib\":40960,"
	    "\"temperature_c\":61.5,\"ecc_corrected\":9000000000000,\"ecc_uncorrected\":0,"
	    "\"last_xid\":79,\"remapped_rows\":3},"
	    /* 1: the other GPU, no device (the GPU's), RFC 3339 with microseconds */
	    "{\"ts\":\"%s\",\"gpu_uuid\":\"%s\",\"power_w\":0,\"memory_used_mib\":1.9,"
	    "\"last_xid\":-1},"
	    /* 2: a device unknown on the GPU: dropped alone */
	    "{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"device_uuid\":\"MIG-nobody\",\"power_w\":5},"
	    /* 3, 4: out of range, older than the retention */
	    "{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"sm_active\":1.5},"
	    "{\"ts\":%lld,\"gpu_uuid\":\"%s\"},"
	    /* 5: the pair of 0 again */
	    "{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"device_uuid\":\"MIG-exact\",\"power_w\":302},"
	    /* 6: the retention's edge */
	    "{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"power_w\":7}]}",
	    (long long)(hour - 900), a.gpu, rfc, other, (long long)(hour - 900), a.gpu,
	    (long long)(hour - 900), a.gpu, (long long)(now - 8 * 86400), a.gpu,
	    (long long)(hour - 898), a.gpu, (long long)edge, other);
	assert_status(r, 200);
	assert_json_int(r->json, "stored", edge_stored ? 4 : 3);
	assert_json_int(r->json, "rejected_count", 3);
	assert_int_equal(fx_json_len(r->json, "rejected"), 3);
	assert_json_int(r->json, "rejected[0].index", 3);
	assert_non_null(strstr(fx_json_str(r->json, "rejected[0].reason"), "sm_active"));
	assert_json_int(r->json, "rejected[1].index", 4);
	assert_non_null(strstr(fx_json_str(r->json, "rejected[1].reason"), "retention"));
	assert_json_int(r->json, "rejected[2].index", 2);
	assert_json_str(r->json, "rejected[2].reason", "device_uuid is not a device of this GPU");
	assert_json_int(r->json, "dropped", edge_stored ? 3 : 4);

	/* the rows stored, both ways against those expected: nothing more, nothing less */
	const char *stored_rows =
	    "SELECT (extract(epoch FROM s.ts) * 1000000)::int8 AS ts_us, g.uuid AS gpu, "
	    "s.device_uuid, s.power_w, s.sm_active, s.memory_used_mib, s.memory_total_mib, "
	    "s.temperature_c, s.ecc_corrected, s.ecc_uncorrected, s.last_xid, s.remapped_rows "
	    "FROM gpu_metric_samples s JOIN gpus g ON g.id = s.gpu_id "
	    "JOIN nodes n ON n.id = g.node_id WHERE n.name = 'exact'";
	const char *expected_rows =
	    "SELECT * FROM (VALUES "
	    "($1::int8 * 1000000, $3, 'MIG-exact', 301.25::float8, 0.123456789::float8, 4096::int8, "
	    "40960::int8, 61.5::float8, 9000000000000::int8, 0::int8, 79, 3::int8), "
	    "(($1::int8 + 1) * 1000000 + 250001, $4, $4, 0, NULL, 1, NULL, NULL, NULL, NULL, NULL, "
	    "NULL), "
	    "(($1::int8 + 2) * 1000000, $3, 'MIG-exact', 302, NULL, NULL, NULL, NULL, NULL, NULL, "
	    "NULL, NULL), "
	    "($2::int8 * 1000000, $4, $4, 7, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)) "
	    "v(ts_us, gpu, device_uuid, power_w, sm_active, memory_used_mib, memory_total_mib, "
	    "temperature_c, ecc_corrected, ecc_uncorrected, last_xid, remapped_rows) "
	    "WHERE v.ts_us <> $2::int8 * 1000000 OR $5::bool";
	const char *hs = fx_str(fx, "%lld", (long long)(hour - 900));
	const char *es = fx_str(fx, "%lld", (long long)edge);
	const char *eb = edge_stored ? "true" : "false";

	assert_int_equal(fx_sql_int64(fx, fx_str(fx, "SELECT count(*) FROM (%s) x", stored_rows)),
	    edge_stored ? 4 : 3);
	assert_int_equal(fx_sql_int64(fx,
			     fx_str(fx, "SELECT count(*) FROM (%s EXCEPT ALL %s) x", stored_rows,
				 expected_rows),
			     hs, es, a.gpu, other, eb),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     fx_str(fx, "SELECT count(*) FROM (%s EXCEPT ALL %s) x", expected_rows,
				 stored_rows),
			     hs, es, a.gpu, other, eb),
	    0);

	/* a batch with nothing to store stores nothing and says why */
	r = fx_request(fx, tok, "POST", "/v1/agent/metrics",
	    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"device_uuid\":\"MIG-nobody\"}]}",
	    (long long)now, a.gpu);
	assert_status(r, 200);
	assert_json_int(r->json, "stored", 0);
	assert_json_int(r->json, "rejected_count", 1);
	assert_int_equal(fx_sql_int64(fx, fx_str(fx, "SELECT count(*) FROM (%s) x", stored_rows)),
	    edge_stored ? 4 : 3);

	/*
	 * A COPY that fails (the sample's day has no partition: detached
	 * here) stores nothing of the batch and leaves the connection usable:
	 * the next batch is stored.
	 */
	const char *part = fx_sql_text(fx,
	    "SELECT 'gpu_metric_samples_' || to_char(to_timestamp($1::int8) AT TIME ZONE 'UTC', "
	    "'YYYYMMDD')",
	    fx_str(fx, "%lld", (long long)now));
	const char *attach = fx_sql_text(fx,
	    "SELECT format('ALTER TABLE gpu_metric_samples ATTACH PARTITION %I FOR VALUES FROM "
	    "(%L) TO (%L)', $1::text, to_timestamp($2::int8), to_timestamp($2::int8 + 86400))",
	    part, fx_str(fx, "%lld", (long long)(now - now % 86400)));
	fx_sql_exec(fx, fx_str(fx, "ALTER TABLE gpu_metric_samples DETACH PARTITION %s", part));
	int64_t c0 = fx_sql_int64(fx, fx_str(fx, "SELECT count(*) FROM (%s) x", stored_rows));
	for (int i = 0; i < 3; i++) {
		r = fx_request(fx, tok, "POST", "/v1/agent/metrics",
		    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"power_w\":1},"
		    "{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"power_w\":2}]}",
		    (long long)(now - 86400), a.gpu, (long long)now, a.gpu);
		assert_problem(r, 422, "validation_failed");
	}
	assert_int_equal(fx_sql_int64(fx, fx_str(fx, "SELECT count(*) FROM (%s) x", stored_rows)),
	    c0);
	r = fx_request(fx, tok, "POST", "/v1/agent/metrics",
	    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"power_w\":1}]}",
	    (long long)(now - 86400), a.gpu);
	fx_sql_exec(fx, attach);
	assert_status(r, 200);
	assert_json_int(r->json, "stored", 1);
	assert_int_equal(fx_sql_int64(fx, fx_str(fx, "SELECT count(*) FROM (%s) x", stored_rows)),
	    edge_stored ? 5 : 4);
	assert_int_equal(fx_sql_int64(fx,
			     fx_str(fx,
				 "SELECT count(*) FROM (%s) x WHERE ts_us = $1::int8 * 1000000",
				 stored_rows),
			     fx_str(fx, "%lld", (long long)(now - 86400))),
	    1);
}

/* Finding 3: telemetry only for the node's own GPUs and instances. */
static void
test_telemetry_bound(void **state)
{
	struct fixture *fx = *state;
	const char *ta = enroll_node(fx, "tela", "22222222");
	struct alloc a = ready_pool(fx, "tela", "22222222", ta, "tp", "MIG-tela");
	const char *tb = enroll_node(fx, "telb", "33333333");
	struct gp_client_response *r;
	int64_t now = time(NULL), hour = now - now % 3600;
	int64_t n0 = fx_sql_int64(fx, "SELECT count(*) FROM gpu_metric_samples");

	/* node B writes under node A's GPU: 422 for the whole batch, nothing stored */
	r = fx_request(fx, tb, "POST", "/v1/agent/metrics",
	    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"sm_active\":0.5},"
	    "{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"sm_active\":0.9}]}",
	    (long long)now, gpu(fx, "33333333", 0), (long long)now, a.gpu);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "samples[1].gpu_uuid");
	/* ... or under node A's MIG device, on one of its own GPUs */
	r = fx_request(fx, tb, "POST", "/v1/agent/metrics",
	    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"device_uuid\":\"MIG-tela\","
	    "\"sm_active\":0.9}]}",
	    (long long)now, gpu(fx, "33333333", 1));
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "samples[0].device_uuid");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM gpu_metric_samples"), n0);

	/* node A's own device: stored; a device unknown on that GPU: dropped alone */
	r = fx_request(fx, ta, "POST", "/v1/agent/metrics",
	    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"device_uuid\":\"MIG-tela\","
	    "\"sm_active\":0.5},{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"device_uuid\":\"MIG-nobody\"},"
	    "{\"ts\":%lld,\"gpu_uuid\":\"%s\"}]}",
	    (long long)(hour - 600), a.gpu, (long long)(hour - 600), a.gpu, (long long)(hour - 600),
	    a.gpu);
	assert_status(r, 200);
	assert_json_int(r->json, "stored", 2);
	assert_json_int(r->json, "rejected_count", 1);
	assert_json_int(r->json, "rejected[0].index", 1);

	/*
	 * Two of a node's own GPUs with the same device UUID in one hour (rows
	 * stored before this check existed): the roll-up keys them apart and goes on.
	 */
	fx_sql_exec(fx,
	    "INSERT INTO gpu_metric_samples (ts, gpu_id, device_uuid, sm_active) "
	    "SELECT to_timestamp($1::int8), g.id, 'DEV-shared', 0.25 FROM gpus g "
	    "WHERE g.uuid IN ($2, $3)",
	    fx_str(fx, "%lld", (long long)(hour - 1200)), gpu(fx, "22222222", 0),
	    gpu(fx, "22222222", 1));
	{
		int64_t t0 = time_mono_us();

		while (fx_sql_int64(fx,
			   "SELECT count(*) FROM gpu_metric_hourly WHERE device_uuid = "
			   "'DEV-shared' AND hour = to_timestamp($1::int8)",
			   fx_str(fx, "%lld", (long long)(hour - 3600))) != 2) {
			assert_true(time_mono_us() - t0 < 15 * 1000000);
			usleep(200 * 1000);
		}
		/* and the other devices of that hour are rolled up too */
		while (fx_sql_int64(fx,
			   "SELECT count(*) FROM gpu_metric_hourly WHERE device_uuid = "
			   "'MIG-tela' AND hour = to_timestamp($1::int8)",
			   fx_str(fx, "%lld", (long long)(hour - 3600))) != 1) {
			assert_true(time_mono_us() - t0 < 15 * 1000000);
			usleep(200 * 1000);
		}
	}
	assert_true(fx_sql_int64(fx,
			"SELECT count(*) FROM metric_rollup_state "
			"WHERE watermark IS NOT NULL") == 1);
}

/* Finding 4: enrollment cannot steal a node. */
static void
test_enroll_no_steal(void **state)
{
	struct fixture *fx = *state;
	const char *tok = enroll_node(fx, "live1", "44444444");
	const char *before, *thief = enroll_token(fx);
	struct gp_client_response *r;

	r = fx_request(fx, tok, "POST", "/v1/agent/heartbeat", "{}");
	assert_status(r, 200);
	before = fx_sql_text(fx,
	    "SELECT concat(callback_url, '/', push_secret, '/', (SELECT count(*) FROM node_tokens t "
	    "WHERE t.node_id = n.id AND t.revoked_at IS NULL)) FROM nodes n WHERE name = 'live1'");
	/* another token enrolling the live node's name: 409, nothing changed */
	r = enroll_cb(fx, thief, "live1", "44444444", "http://127.0.0.1:9/");
	assert_problem(r, 409, "node_adopt_refused");
	assert_non_null(strstr(fx_json_str(r->json, "detail"), "live agent"));
	assert_string_equal(before,
	    fx_sql_text(fx,
		"SELECT concat(callback_url, '/', push_secret, '/', (SELECT count(*) FROM "
		"node_tokens t WHERE t.node_id = n.id AND t.revoked_at IS NULL)) FROM nodes n "
		"WHERE name = 'live1'"));
	/* the live agent keeps working */
	r = fx_request(fx, tok, "POST", "/v1/agent/heartbeat", "{}");
	assert_status(r, 200);
	r = report(fx, tok, node_gen(fx, "live1"),
	    fx_str(fx, "[{\"uuid\":\"%s\",\"instances\":[]},{\"uuid\":\"%s\",\"instances\":[]}]",
		gpu(fx, "44444444", 0), gpu(fx, "44444444", 1)));
	assert_status(r, 200);
	/* the refused token was not spent */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM enrollment_tokens WHERE used_at IS NULL AND "
			     "prefix = $1",
			     fx_str(fx, "%.8s", thief)),
	    1);

	/* a token bound to a name enrolls only that name */
	r = enroll_cb(fx, enroll_token_with(fx, "{\"node_name\":\"other9\"}"), "nota9", "45454545",
	    NULL);
	assert_problem(r, 409, "node_adopt_refused");
	r = fx_request(fx, op, "POST", "/v1/clusters/c1/enrollment-tokens",
	    "{\"adopt_manual\":true}");
	assert_problem(r, 422, "validation_failed");

	/* the CLI makes bound tokens too */
	{
		const char *env[] = { fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url),
			fx_str(fx, "GPUPOOL_TOKEN=%s", op), NULL };
		struct fx_proc *p = fx_cli(fx, env, NULL, "-o", "json", "agents", "enroll-token",
		    "c1", "--node", "manual2", "--adopt-manual", NULL);
		struct json_object *j;

		assert_int_equal(p->status, 0);
		j = json_tokener_parse(p->out);
		assert_non_null(j);
		assert_json_str(j, "node_name", "manual2");
		assert_true(json_object_get_boolean(fx_json(j, "adopt_manual")));
		json_object_put(j);
		p = fx_cli(fx, env, NULL, "agents", "enroll-token", "c1", "--adopt-manual", NULL);
		assert_int_equal(p->status, 2);
	}

	/* a node registered by hand: only a token made to adopt it */
	r = fx_request(fx, op, "POST", "/v1/nodes",
	    "{\"name\":\"manual1\",\"cluster\":\"c1\",\"hostname\":\"manual1.example\"}");
	assert_status(r, 201);
	r = enroll_cb(fx, enroll_token(fx), "manual1", "46464646", NULL);
	assert_problem(r, 409, "node_adopt_refused");
	assert_non_null(strstr(fx_json_str(r->json, "detail"), "by hand"));
	r = enroll_cb(fx,
	    enroll_token_with(fx, "{\"node_name\":\"manual1\",\"adopt_manual\":true}"), "manual1",
	    "46464646", NULL);
	assert_status(r, 201);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.adopt' AND "
			     "object_id = 'manual1' AND before->>'managed_by_agent' = 'false'"),
	    1);

	/* once its token is revoked, the node may be re-enrolled; the adoption is audited */
	r = fx_request(fx, op, "POST", "/v1/nodes/live1/agent-token/revoke", "{}");
	assert_true(r->status == 200 || r->status == 204);
	r = enroll_cb(fx, thief, "live1", "44444444", "http://127.0.0.1:9/");
	assert_status(r, 201);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.adopt' "
			     "AND object_id = 'live1'"),
	    1);
}

/* Start a real gpupool-agent (fake backend, two H100s, long-poll only) for node name. */
static pid_t
agent_start(struct fixture *fx, const char *name, const char *token)
{
	const char *dir = fx_str(fx, "%s/agent-%s", fx->tmpdir, name);
	const char *gpus = fx_str(fx, "%s/gpus-%s.json", fx->tmpdir, name);
	const char *log = fx_str(fx, "%s/agent-%s.log", fx->tmpdir, name);
	FILE *f = fopen(gpus, "w");
	pid_t pid;

	assert_non_null(f);
	fputs("{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":2}]}", f);
	fclose(f);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		const char *argv[] = { AGENT_PATH, "--server", fx->server->base_url, "--node-name",
			name, "--state-dir", dir, "--backend", "fake", "--fake-gpus", gpus,
			"--enroll-token", token, "--poll-interval", "2", "--heartbeat-interval",
			"1", NULL };

		dup2(fd, 1);
		dup2(fd, 2);
		execv(AGENT_PATH, (char *const *)argv);
		_exit(127);
	}
	return pid;
}

static void
wait_sql(struct fixture *fx, int64_t want, const char *sql, const char *arg)
{
	int64_t t0 = time_mono_us();

	while (fx_sql_int64(fx, sql, arg) != want) {
		assert_true(time_mono_us() - t0 < 30 * 1000000);
		usleep(200 * 1000);
	}
}

/*
 * Finding 4 with a real agent: enrolling a live node's name with another
 * token is 409, and the live agent keeps working (heartbeats, a pool placed
 * on it becomes active).
 */
static void
test_live_agent_kept(void **state)
{
	struct fixture *fx = *state;
	const char *ready = fx_sql_text(fx,
	    "SELECT coalesce(string_agg(name, ' '), '') FROM nodes WHERE status = 'ready'");
	char list[2048];
	pid_t pid;
	int st = 0;
	struct gp_client_response *r;
	const char *refused_at;

	snprintf(list, sizeof(list), "%s", ready);
	for (char *sv = NULL, *n = strtok_r(list, " ", &sv); n; n = strtok_r(NULL, " ", &sv))
		assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/cordon", n),
				  NULL),
		    200);
	pid = agent_start(fx, "realag", enroll_token(fx));
	wait_sql(fx, 2,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 "
	    "AND n.status = 'ready'",
	    "realag");
	/* a thief with another token of the cluster, the node's own GPUs */
	r = fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"%s\",\"node_name\":\"realag\",\"hostname\":\"x\","
	    "\"callback_url\":\"http://127.0.0.1:9/\",\"gpus\":[]}",
	    enroll_token(fx));
	assert_problem(r, 409, "node_adopt_refused");
	refused_at = fx_sql_text(fx, "SELECT now()::text");
	/* the agent goes on: heartbeats after the refusal, and it realizes a new pool */
	wait_sql(fx, 1,
	    "SELECT count(*) FROM nodes WHERE name = 'realag' AND agent_heartbeat_at > $1",
	    refused_at);
	make_pool(fx, "realp", "3g.40gb");
	wait_sql(fx, 1, "SELECT count(*) FROM pools WHERE name = $1 AND status = 'active'",
	    "realp");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.adopt' AND "
			     "object_id = 'realag'"),
	    0);
	kill(pid, SIGTERM);
	assert_int_equal(waitpid(pid, &st, 0), pid);
}

/* Finding 5: callbacks only where operators allow. */
static void
test_callback_allow(void **state)
{
	struct fixture *fx = *state;
	static const char *const refused[] = { "http://169.254.169.254/", "http://[::1]:9/",
		"http://10.1.2.3:9/", "http://[fe80::1]:9/", "http://user@127.0.0.1:9/",
		"http://0.0.0.0:9/", "http://[::ffff:169.254.169.254]/" };
	const char *et = enroll_token(fx), *counts;
	struct gp_client_response *r;
	struct fx_server *a = fx->server, *b, *c;

	counts = fx_sql_text(fx,
	    "SELECT concat((SELECT count(*) FROM nodes), '/', (SELECT count(*) FROM gpus), '/', "
	    "(SELECT count(*) FROM node_tokens))");
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		r = enroll_cb(fx, et, "cb1", "55555555", refused[i]);
		assert_problem(r, 422, "validation_failed");
		assert_json_str(r->json, "errors[0].field", "callback_url");
	}
	assert_string_equal(counts,
	    fx_sql_text(fx,
		"SELECT concat((SELECT count(*) FROM nodes), '/', (SELECT count(*) FROM gpus), "
		"'/', (SELECT count(*) FROM node_tokens))"));
	/* the peer's own address: fine (the token was not spent by the refusals) */
	r = enroll_cb(fx, et, "cb1", "55555555", "http://127.0.0.1:8123/");
	assert_status(r, 201);

	/* listed: allowed; a broad entry does not open link-local addresses */
	b = fixture_server_start(fx,
	    (const char *const[]){
		"GPUPOOL_AGENT_CALLBACK_ALLOW=10.0.0.0/8, 169.254.169.254/32,agents.example",
		NULL });
	assert_non_null(b);
	fx->server = b;
	r = enroll_cb(fx, enroll_token(fx), "cb2", "56565656", "http://10.1.2.3:9/");
	assert_status(r, 201);
	r = enroll_cb(fx, enroll_token(fx), "cb3", "57575757", "http://169.254.169.254/");
	assert_status(r, 201);
	r = enroll_cb(fx, enroll_token(fx), "cb4", "58585858", "https://Agents.example:8443/");
	assert_status(r, 201);
	r = enroll_cb(fx, enroll_token(fx), "cb5", "59595959", "http://[::1]:9/");
	assert_problem(r, 422, "validation_failed");
	assert_int_equal(fixture_server_stop(fx, b), 0);
	c = fixture_server_start(fx,
	    (const char *const[]){ "GPUPOOL_AGENT_CALLBACK_ALLOW=0.0.0.0/0", NULL });
	assert_non_null(c);
	fx->server = c;
	r = enroll_cb(fx, enroll_token(fx), "cb6", "5a5a5a5a", "http://169.254.169.254/");
	assert_problem(r, 422, "validation_failed");
	r = enroll_cb(fx, enroll_token(fx), "cb6", "5a5a5a5a", "http://192.0.2.7:9/");
	assert_status(r, 201);
	assert_int_equal(fixture_server_stop(fx, c), 0);
	fx->server = a;

	/*
	 * A callback that points at a metadata address after enrollment (a
	 * rebinding host name, a row from before this check): the pusher does
	 * not connect, the failure is the class "refused" (a real attempt
	 * would time out after GPUPOOL_PUSH_TIMEOUT_MS, 5 s).
	 */
	fx_sql_exec(fx,
	    "UPDATE nodes SET callback_url = 'http://169.254.169.254:9/' "
	    "WHERE name = 'cb1'");
	fx_sql_exec(fx,
	    "INSERT INTO outbox (node_id, generation) SELECT id, generation FROM nodes "
	    "WHERE name = 'cb1'");
	{
		int64_t t0 = time_mono_us();

		while (fx_sql_int64(fx,
			   "SELECT count(*) FROM outbox o JOIN nodes n ON n.id = o.node_id WHERE "
			   "n.name = 'cb1' AND o.last_error = 'refused'") == 0) {
			assert_true(time_mono_us() - t0 < 4 * 1000000);
			usleep(100 * 1000);
		}
	}
}

/* A request with a node token on server srv's API: its status. */
static long
node_call(struct fixture *fx, struct fx_server *srv, const char *tok)
{
	struct fx_server *was = fx->server;
	long st;

	fx->server = srv;
	st = fx_request(fx, tok, "POST", "/v1/agent/heartbeat", "{}")->status;
	fx->server = was;
	return st;
}

/* gpupool_node_token_cache_hits_total of srv. */
static long long
cache_hits(struct fixture *fx, struct fx_server *srv)
{
	struct fx_server *was = fx->server;
	struct gp_client_response *r;
	const char *m;

	fx->server = srv;
	r = fx_request(fx, fx->admin_token, "GET", "/metrics", NULL);
	fx->server = was;
	m = r->body != NULL ? strstr(r->body, "\ngpupool_node_token_cache_hits_total ") : NULL;
	return m != NULL ? atoll(m + strlen("\ngpupool_node_token_cache_hits_total ")) : -1;
}

/* Poll until tok answers 401 on srv; the milliseconds it took (fails past 3 s). */
static long long
until_refused(struct fixture *fx, struct fx_server *srv, const char *tok)
{
	int64_t t0 = time_mono_us();

	while (node_call(fx, srv, tok) != 401) {
		assert_true(time_mono_us() - t0 < 3 * 1000000);
		usleep(20 * 1000);
	}
	return (time_mono_us() - t0) / 1000;
}

/*
 * Node tokens are cached in memory (auth/node_cache.h), so a revocation
 * must reach every replica's cache: on the replica that revoked at once,
 * on another through NOTIFY gpupool_tokens (migration 0028), also when
 * the token is revoked by SQL alone (or a node deleted). Without the
 * notification the second replica answered the revoked token from its
 * cache for a minute.
 */
static void
test_revoked_token_cached(void **state)
{
	struct fixture *fx = *state;
	struct fx_server *a = fx->server, *b;
	const char *t1 = enroll_node(fx, "tc1", "61616161"),
		   *t2 = enroll_node(fx, "tc2", "62626262");
	long long h0;

	b = fixture_server_start(fx, NULL);
	assert_non_null(b);
	/*
	 * both replicas answer from memory after the first read, once their
	 * notifier is connected (b's connects in the background after start)
	 */
	for (int64_t t0 = time_mono_us();;) {
		h0 = cache_hits(fx, b);
		assert_int_equal(node_call(fx, a, t1), 200);
		assert_int_equal(node_call(fx, b, t1), 200);
		assert_int_equal(node_call(fx, b, t2), 200);
		if (cache_hits(fx, b) >= h0 + 2)
			break;
		assert_true(time_mono_us() - t0 < 5 * 1000000);
		usleep(50 * 1000);
	}
	h0 = cache_hits(fx, a);
	assert_int_equal(node_call(fx, a, t1), 200);
	assert_int_equal(cache_hits(fx, a), h0 + 1);
	/* revoked on a: refused on a at once, on b as soon as the notification lands */
	assert_true(
	    fx_request(fx, op, "POST", "/v1/nodes/tc1/agent-token/revoke", "{}")->status == 204);
	assert_int_equal(node_call(fx, a, t1), 401);
	assert_true(until_refused(fx, b, t1) < 3000);
	/* the other node's token still answers */
	assert_int_equal(node_call(fx, b, t2), 200);
	/* revoked behind gpupoold's back (SQL): every replica refuses it */
	fx_sql_exec(fx,
	    "UPDATE node_tokens SET revoked_at = now() WHERE node_id = "
	    "(SELECT id FROM nodes WHERE name = 'tc2') AND revoked_at IS NULL");
	assert_true(until_refused(fx, a, t2) < 3000);
	assert_true(until_refused(fx, b, t2) < 3000);
	assert_int_equal(fixture_server_stop(fx, b), 0);
}

/* Node call twice on srv: the second answered from srv's cache (its notifier connected). */
static void
until_cached(struct fixture *fx, struct fx_server *srv, const char *tok)
{
	for (int64_t t0 = time_mono_us();;) {
		long long h0 = cache_hits(fx, srv);

		assert_int_equal(node_call(fx, srv, tok), 200);
		assert_int_equal(node_call(fx, srv, tok), 200);
		if (cache_hits(fx, srv) >= h0 + 1)
			return;
		assert_true(time_mono_us() - t0 < 5 * 1000000);
		usleep(50 * 1000);
	}
}

/*
 * The node-token cache in a bad week (helper C's attacks): a rotation and
 * a takeover by re-enrollment on one replica end the old token on the
 * other too (the new one answers there) and leave other nodes' entries
 * answering (migration 0031), and a token revoked by SQL in the
 * same transaction that cuts every notifier's LISTEN connection (its
 * NOTIFY is lost) is refused everywhere once the notifiers reconnect.
 */
static void
test_token_cache_fleet(void **state)
{
	struct fixture *fx = *state;
	struct fx_server *a = fx->server, *b;
	const char *t1 = enroll_node(fx, "tf1", "71717171"), *t2, *t3,
		   *other = enroll_node(fx, "tf2", "72727272");
	struct gp_client_response *r;
	long long h0;

	b = fixture_server_start(fx, NULL);
	assert_non_null(b);
	until_cached(fx, b, t1);
	until_cached(fx, a, t1);
	until_cached(fx, b, other);
	until_cached(fx, a, other);
	/* rotated on a: the old token dies on b, the new one answers there */
	r = fx_request(fx, t1, "POST", "/v1/agent/token/rotate", NULL);
	assert_status(r, 200);
	t2 = fx_json_str(r->json, "node_token");
	assert_int_equal(node_call(fx, a, t1), 401);
	assert_true(until_refused(fx, b, t1) < 3000);
	until_cached(fx, b, t2);
	/*
	 * another node's token still answers from both caches: a node rotating
	 * its token (in a loop, if hostile) forgets its own entries only
	 * (0028 flushed every replica's whole cache on each rotation)
	 */
	for (int i = 0; i < 2; i++) {
		struct fx_server *srv = i == 0 ? a : b;

		h0 = cache_hits(fx, srv);
		assert_int_equal(node_call(fx, srv, other), 200);
		assert_int_equal(cache_hits(fx, srv), h0 + 1);
	}
	/* taken over on a by re-enrollment (the node silent past the grace) */
	fx_sql_exec(fx,
	    "UPDATE nodes SET agent_heartbeat_at = now() - interval '1 day' WHERE name = 'tf1'");
	r = enroll_cb(fx, enroll_token(fx), "tf1", "71717171", "http://127.0.0.1:9/");
	assert_status(r, 201);
	t3 = fx_json_str(r->json, "node_token");
	assert_int_equal(node_call(fx, a, t2), 401);
	assert_true(until_refused(fx, b, t2) < 3000);
	until_cached(fx, b, t3);
	until_cached(fx, a, t3);
	h0 = cache_hits(fx, b);
	assert_int_equal(node_call(fx, b, other), 200);
	assert_int_equal(cache_hits(fx, b), h0 + 1);
	/* revoked by SQL while every notifier is cut: the NOTIFY is lost, the caches still yield */
	fx_sql_exec(fx,
	    "WITH k AS (SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
	    "WHERE application_name = 'gpupoold notifier') "
	    "UPDATE node_tokens SET revoked_at = now() WHERE revoked_at IS NULL "
	    "AND node_id = (SELECT id FROM nodes WHERE name = 'tf1') "
	    "AND (SELECT count(*) FROM k) > 0");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM node_tokens t JOIN nodes n ON n.id = t.node_id "
			     "WHERE n.name = 'tf1' AND t.revoked_at IS NULL"),
	    0);
	assert_true(until_refused(fx, a, t3) < 3000);
	assert_true(until_refused(fx, b, t3) < 3000);
	/* a token deleted (not revoked) by SQL: refused by both */
	until_cached(fx, a, other);
	until_cached(fx, b, other);
	fx_sql_exec(fx,
	    "DELETE FROM node_tokens WHERE node_id = "
	    "(SELECT id FROM nodes WHERE name = 'tf2')");
	assert_true(until_refused(fx, a, other) < 3000);
	assert_true(until_refused(fx, b, other) < 3000);
	assert_int_equal(fixture_server_stop(fx, b), 0);
}

/* Findings 6, 7: Xid catalog, contained faults, storms, unknown Xids. */
static void
test_xid_health(void **state)
{
	struct fixture *fx = *state;
	const char *tok = enroll_node(fx, "xid1", "66666666");
	struct alloc a = ready_pool(fx, "xid1", "66666666", tok, "xp", "MIG-xp");
	const char *other = other_gpu(fx, "66666666", &a), *inst = instance_json(fx, &a, "MIG-xp");
	struct gp_client_response *r;
	int64_t gen = node_gen(fx, "xid1");
	char many[64 * 16 + 64];
	size_t len = 0;

	/* Xid 38 (NVIDIA: ignore) leaves the GPU ok; an unknown Xid is recorded */
	r = report(fx, tok, gen,
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"xid_events\":[{\"xid\":38},{\"xid\":999,\"count\":3}],"
		"\"instances\":[%s]},{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, inst, other));
	assert_status(r, 200);
	assert_string_equal(gpu_health(fx, a.gpu), "ok");
	assert_string_equal(fx_sql_text(fx,
				"SELECT (details->>'xid') || 'x' || (details->>'count') FROM "
				"alerts WHERE type = 'xid_unknown' AND resolved_at IS NULL"),
	    "999x3");

	/* contained (Xid 94 with its ECC count): degraded, the allocation runs on */
	r = report(fx, tok, gen,
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"ecc_uncorrected\":2,\"xid_events\":[{\"xid\":94}],"
		"\"instances\":[%s]},{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, inst, other));
	assert_status(r, 200);
	assert_string_equal(gpu_health(fx, a.gpu), "degraded");
	assert_string_equal(alloc_state(fx, a.id), "ready");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'gpu_degraded' AND "
			     "resolved_at IS NULL AND details->>'reason' LIKE 'Xid 94%'"),
	    1);
	/* the count stays in later reports: still degraded, not failed */
	r = report(fx, tok, gen,
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"ecc_uncorrected\":2,\"instances\":[%s]},"
		"{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, inst, other));
	assert_status(r, 200);
	assert_string_equal(gpu_health(fx, a.gpu), "degraded");
	assert_string_equal(alloc_state(fx, a.id), "ready");
	/* a degraded GPU takes no new work */
	{
		struct alloc b = make_pool(fx, "xp2", "3g.40gb");

		assert_string_equal(b.gpu, other);
	}

	/* a storm of 500 Xid 13 coalesced, then one Xid 79: failed */
	r = report(fx, tok, gen,
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"xid_events\":[{\"xid\":13,\"count\":500},{\"xid\":998},"
		"{\"xid\":79}],"
		"\"instances\":[%s]},{\"uuid\":\"%s\",\"instances\":[]}]",
		a.gpu, inst, other));
	assert_status(r, 200);
	assert_string_equal(gpu_health(fx, a.gpu), "failed");
	assert_string_equal(alloc_state(fx, a.id), "failed");
	/* the unknown Xid of that report is in the gpu_failed alert's details */
	assert_string_equal(fx_sql_text(fx,
				"SELECT details->'unknown_xids'->0->>'xid' FROM alerts WHERE type = "
				"'gpu_failed' AND resolved_at IS NULL AND gpu_id = (SELECT id FROM "
				"gpus WHERE uuid = $1)",
				a.gpu),
	    "998");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'gpu_degraded' AND "
			     "resolved_at IS NULL"),
	    0);
	/* 65 events uncoalesced: 422, the agent must coalesce */
	len += (size_t)snprintf(many + len, sizeof(many) - len, "[");
	for (int i = 0; i < 65; i++)
		len += (size_t)snprintf(many + len, sizeof(many) - len, "%s{\"xid\":13}",
		    i ? "," : "");
	snprintf(many + len, sizeof(many) - len, "]");
	r = report(fx, tok, gen, fx_str(fx, "[{\"uuid\":\"%s\",\"xid_events\":%s}]", other, many));
	assert_problem(r, 422, "validation_failed");

	/* Xid 110 fails the other GPU; 109 (R570+: reset) too */
	r = report(fx, tok, gen,
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"instances\":[]},{\"uuid\":\"%s\",\"xid_events\":[{\"xid\":110}],"
		"\"instances\":[]}]",
		a.gpu, other));
	assert_status(r, 200);
	assert_string_equal(gpu_health(fx, other), "failed");
	assert_non_null(
	    strstr(fx_sql_text(fx, "SELECT health_reason FROM gpus WHERE uuid = $1", other),
		"Xid 110"));
}

/* Finding 10 and 13: a restored server, observed_generation clamped and monotonic. */
static void
test_generations(void **state)
{
	struct fixture *fx = *state;
	const char *tok = enroll_node(fx, "gen1", "77777777");
	int64_t gen = node_gen(fx, "gen1");
	struct gp_client_response *r;
	const char *gpus =
	    fx_str(fx, "[{\"uuid\":\"%s\",\"instances\":[]},{\"uuid\":\"%s\",\"instances\":[]}]",
		gpu(fx, "77777777", 0), gpu(fx, "77777777", 1));

	/* an agent ahead of the server: the full document, not 304 */
	r = fx_request(fx, tok, "GET",
	    fx_str(fx, "/v1/agent/desired-state?after=%lld&wait=1", (long long)(gen + 50)), NULL);
	assert_status(r, 200);
	assert_json_int(r->json, "generation", gen);
	assert_json_str(r->json, "node", "gen1");
	r = fx_request(fx, tok, "GET",
	    fx_str(fx, "/v1/agent/desired-state?after=%lld&wait=0", (long long)gen), NULL);
	assert_status(r, 304);

	/* clamped to the node's generation */
	r = report(fx, tok, gen + 1000, gpus);
	assert_status(r, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT observed_generation FROM nodes WHERE name = 'gen1'"),
	    gen);
	r = fx_request(fx, tok, "POST", "/v1/agent/heartbeat", "{\"observed_generation\":%lld}",
	    (long long)(gen + 7));
	assert_status(r, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT observed_generation FROM nodes WHERE name = 'gen1'"),
	    gen);
	/* instances are checked against the catalog like enrollment's: bad ones not recorded */
	r = report(fx, tok, gen,
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"instances\":[{\"profile\":\"1g.10gb\",\"start\":7,"
		"\"size\":1,\"uuid\":\"MIG-a\"},{\"profile\":\"7g.80gb\",\"start\":0,\"size\":3,"
		"\"uuid\":\"MIG-b\"},{\"profile\":\"9g.99gb\",\"start\":0,\"size\":1}]},"
		"{\"uuid\":\"%s\",\"instances\":[{\"profile\":\"1g.10gb\",\"start\":2,\"size\":1,"
		"\"uuid\":\"MIG-c\"}]}]",
		gpu(fx, "77777777", 0), gpu(fx, "77777777", 1)));
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "warnings"), 3);
	assert_non_null(strstr(fx_json_str(r->json, "warnings[0]"), "gpus[0].instances[0]"));
	assert_json_int(r->json, "drift", 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts a JOIN nodes n ON n.id = a.node_id WHERE "
			     "n.name = 'gen1' AND a.type = 'drift' AND a.resolved_at IS NULL"),
	    1);
	r = report(fx, tok, gen, gpus);
	assert_status(r, 200);
	assert_json_int(r->json, "drift", 0);

	/* never backwards */
	r = report(fx, tok, 0, gpus);
	assert_status(r, 200);
	r = fx_request(fx, tok, "POST", "/v1/agent/heartbeat", "{\"observed_generation\":0}");
	assert_status(r, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT observed_generation FROM nodes WHERE name = 'gen1'"),
	    gen);
	/* a heartbeat that names no generation claims none */
	fx_sql_exec(fx, "UPDATE nodes SET generation = generation + 1 WHERE name = 'gen1'");
	r = fx_request(fx, tok, "POST", "/v1/agent/heartbeat", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT observed_generation FROM nodes WHERE name = 'gen1'"),
	    gen);
}

/* Finding 13: agent texts users see are bounded and free of control characters. */
static void
test_agent_texts(void **state)
{
	struct fixture *fx = *state;
	const char *tok = enroll_node(fx, "txt1", "88888888");
	struct alloc a = make_pool(fx, "txp", "3g.40gb");
	struct gp_client_response *r;
	char msg[1901];

	memset(msg, 'x', sizeof(msg) - 1);
	msg[sizeof(msg) - 1] = '\0';
	memcpy(msg, "boom\\u001b[31m\\n", 16);
	r = fx_request(fx, tok, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":%lld,\"gpus\":[{\"uuid\":\"%s\",\"instances\":[]},"
	    "{\"uuid\":\"%s\",\"instances\":[]}],\"errors\":[{\"gpu\":\"%s\",\"profile\":\"%s\","
	    "\"start\":%d,\"message\":\"%s\"}]}",
	    (long long)node_gen(fx, "txt1"), gpu(fx, "88888888", 0), gpu(fx, "88888888", 1), a.gpu,
	    a.profile, a.start, msg);
	assert_status(r, 200);
	assert_string_equal(alloc_state(fx, a.id), "failed");
	assert_int_equal(fx_sql_int64(fx, "SELECT length(error) FROM allocations WHERE id = $1",
			     fx_str(fx, "%lld", (long long)a.id)),
	    500);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations WHERE id = $1 AND error ~ "
			     "'[[:cntrl:]]'",
			     fx_str(fx, "%lld", (long long)a.id)),
	    0);
	assert_string_equal(fx_sql_text(fx, "SELECT left(error, 10) FROM allocations WHERE id = $1",
				fx_str(fx, "%lld", (long long)a.id)),
	    "boom [31m ");
	/* the agent version is printable, as at enrollment */
	r = fx_request(fx, tok, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":0,\"agent_version\":\"1.0\\u001b[2J\",\"gpus\":[]}");
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "agent_version");
}

/* Finding 11: a failed apply and an unknown node are credited, never beyond the charge. */
static void
test_credits(void **state)
{
	struct fixture *fx = *state;
	const char *tok = enroll_node(fx, "cred1", "99999999");
	struct alloc a = make_pool(fx, "crp", "3g.40gb");
	struct gp_client_response *r;
	int64_t t0;

	/* the agent could not create it: failed, credited from that report on */
	r = fx_request(fx, tok, "PUT", "/v1/agent/status",
	    "{\"observed_generation\":%lld,\"gpus\":[{\"uuid\":\"%s\",\"instances\":[]},"
	    "{\"uuid\":\"%s\",\"instances\":[]}],\"errors\":[{\"gpu\":\"%s\",\"profile\":\"%s\","
	    "\"start\":%d,\"message\":\"no space\"}]}",
	    (long long)node_gen(fx, "cred1"), gpu(fx, "99999999", 0), gpu(fx, "99999999", 1), a.gpu,
	    a.profile, a.start);
	assert_status(r, 200);
	assert_string_equal(alloc_state(fx, a.id), "failed");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocation_fault_intervals WHERE allocation_id = "
			     "$1 AND ended_at IS NULL",
			     fx_str(fx, "%lld", (long long)a.id)),
	    1);
	sleep(2); /* whole seconds are billed: let two of them pass failed */
	t0 = time_mono_us();
	for (;;) {
		r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/usage?project=pa", NULL);
		assert_status(r, 200);
		if (fx_sql_int64(fx,
			"SELECT count(*) FROM billing_usage b JOIN pools p ON p.id = b.pool_id "
			"WHERE p.name = 'crp' AND b.kind = 'credit' AND b.seconds >= 1") > 0)
			break;
		assert_true(time_mono_us() - t0 < 20 * 1000000);
		usleep(200 * 1000);
	}
	/* in the API's rows, and never more than the charge of the same hour */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/billing/usage?project=pa&limit=200", NULL);
	assert_status(r, 200);
	assert_true(fx_json_int(r->json, "totals.credit_micro") < 0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT b.hour, sum(b.amount_micro) AS net "
			     "FROM billing_usage b JOIN pools p ON p.id = b.pool_id WHERE p.name = "
			     "'crp' GROUP BY b.hour) x WHERE x.net < 0"),
	    0);
	assert_true(fx_sql_int64(fx,
			"SELECT sum(-b.amount_micro) FROM billing_usage b JOIN pools p ON "
			"p.id = b.pool_id WHERE p.name = 'crp' AND b.kind = 'credit'") > 0);

	/* a node that is unknown for a while: its ready allocations are credited for it */
	{
		struct alloc b = make_pool(fx, "crq", "3g.40gb");

		r = report(fx, tok, node_gen(fx, "cred1"),
		    fx_str(fx,
			"[{\"uuid\":\"%s\",\"instances\":[%s]},{\"uuid\":\"%s\",\"instances\":[]}]",
			b.gpu, instance_json(fx, &b, "MIG-crq"), other_gpu(fx, "99999999", &b)));
		assert_status(r, 200);
		assert_string_equal(alloc_state(fx, b.id), "ready");
	}
	fx_sql_exec(fx, "UPDATE nodes SET status = 'unknown' WHERE name = 'cred1'");
	sleep(2);
	r = fx_request(fx, tok, "POST", "/v1/agent/heartbeat", "{}");
	assert_status(r, 200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT count(*) || '/' || count(ended_at) FROM node_unknown_intervals "
				"u JOIN nodes n ON n.id = u.node_id WHERE n.name = 'cred1'"),
	    "1/1");
	t0 = time_mono_us();
	while (fx_sql_int64(fx,
		   "SELECT count(*) FROM billing_usage b JOIN pools p ON p.id = b.pool_id "
		   "WHERE p.name = 'crq' AND b.kind = 'credit' AND b.seconds >= 1") == 0) {
		assert_true(time_mono_us() - t0 < 20 * 1000000);
		usleep(200 * 1000);
	}
	/* the failed allocation of crp was on that node too: its seconds count once */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT b.hour, sum(b.seconds) FILTER (WHERE "
			     "b.kind = 'credit') AS c, sum(b.seconds) FILTER (WHERE b.kind = "
			     "'usage') AS u FROM billing_usage b JOIN pools p ON p.id = b.pool_id "
			     "WHERE p.name = 'crp' GROUP BY b.hour) x WHERE x.c > x.u"),
	    0);
}

/*
 * Finding 11: one instance with two faults at once (its instance gone, then
 * its GPU failed) is credited once: the pool's other instance is healthy,
 * so no credit row ever counts 2.
 */
static const char *
inst4g(struct fixture *fx, const char *device)
{
	return fx_str(fx, "{\"profile\":\"4g.40gb\",\"start\":0,\"size\":4,\"uuid\":\"MIG-%s\"}",
	    device);
}

static void
test_credit_once(void **state)
{
	struct fixture *fx = *state;
	const char *tok = enroll_node(fx, "cred2", "abababab");
	struct gp_client_response *r =
	    fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
		"{\"action\":\"create\",\"pool\":\"crr\",\"items\":[{\"model\":\"H100-80GB\","
		"\"profile\":\"4g.40gb\",\"count\":2}],\"justification\":\"t\"}");
	const char *g0 = gpu(fx, "abababab", 0), *g1 = gpu(fx, "abababab", 1);
	int64_t a0, t0;

	assert_status(r, 201);
	r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)fx_json_int(r->json, "id")),
	    "{}");
	assert_status(r, 200);
	/* one 4g.40gb per GPU, at start 0 */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(DISTINCT a.gpu_id) FROM allocations a JOIN pools p ON "
			     "p.id = a.pool_id WHERE p.name = 'crr' AND a.start = 0"),
	    2);
	a0 = fx_sql_int64(fx,
	    "SELECT a.id FROM allocations a JOIN gpus g ON g.id = a.gpu_id WHERE g.uuid = $1 "
	    "AND a.state <> 'released'",
	    g0);
	r = report(fx, tok, node_gen(fx, "cred2"),
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"instances\":[%s]},{\"uuid\":\"%s\",\"instances\":[%s]}]", g0,
		inst4g(fx, "r0"), g1, inst4g(fx, "r1")));
	assert_status(r, 200);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'crr'"),
	    "active");
	/* GPU 0's instance disappears: failed; a second later its GPU falls off the bus */
	r = report(fx, tok, node_gen(fx, "cred2"),
	    fx_str(fx, "[{\"uuid\":\"%s\",\"instances\":[]},{\"uuid\":\"%s\",\"instances\":[%s]}]",
		g0, g1, inst4g(fx, "r1")));
	assert_status(r, 200);
	assert_string_equal(alloc_state(fx, a0), "failed");
	sleep(1);
	r = report(fx, tok, node_gen(fx, "cred2"),
	    fx_str(fx,
		"[{\"uuid\":\"%s\",\"state\":\"lost\",\"error\":\"gone\",\"xid\":79},"
		"{\"uuid\":\"%s\",\"instances\":[%s]}]",
		g0, g1, inst4g(fx, "r1")));
	assert_status(r, 200);
	assert_string_equal(gpu_health(fx, g0), "failed");
	sleep(2);
	t0 = time_mono_us();
	while (fx_sql_int64(fx,
		   "SELECT coalesce(sum(b.seconds), 0) FROM billing_usage b JOIN pools p ON "
		   "p.id = b.pool_id WHERE p.name = 'crr' AND b.kind = 'credit'") < 3) {
		assert_true(time_mono_us() - t0 < 20 * 1000000);
		usleep(200 * 1000);
	}
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_usage b JOIN pools p ON p.id = b.pool_id "
			     "WHERE p.name = 'crr' AND b.kind = 'credit' AND b.count <> 1"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_usage b JOIN pools p ON p.id = b.pool_id "
			     "WHERE p.name = 'crr' AND b.kind = 'usage' AND b.count = 2"),
	    fx_sql_int64(fx,
		"SELECT count(DISTINCT b.hour) FROM billing_usage b JOIN pools p "
		"ON p.id = b.pool_id WHERE p.name = 'crr'"));
}

/* Finding 13: delivered outbox rows, resolved alerts, ended profiles are pruned. */
static void
test_retention(void **state)
{
	struct fixture *fx = *state;
	int64_t t0;

	fx_sql_exec(fx,
	    "INSERT INTO outbox (node_id, generation, delivered_at) SELECT id, 1, "
	    "now() - interval '30 days' FROM nodes WHERE name = 'gen1'");
	fx_sql_exec(fx,
	    "INSERT INTO alerts (type, dedup_key, message, raised_at, resolved_at) VALUES "
	    "('drift', 'old-one', 'old', now() - interval '200 days', now() - interval '100 days'), "
	    "('drift', 'recent-one', 'recent', now() - interval '2 days', now() - interval '1 day')");
	fx_sql_exec(fx,
	    "INSERT INTO workload_profiles (node_id, device_uuid, namespace, pod, first_seen_at, "
	    "last_seen_at, ended_at) SELECT id, 'DEV-old', 'team-a', 'old-pod', now() - interval "
	    "'200 days', now() - interval '100 days', now() - interval '100 days' FROM nodes "
	    "WHERE name = 'gen1'");
	t0 = time_mono_us();
	while (fx_sql_int64(fx,
		   "SELECT (SELECT count(*) FROM outbox WHERE delivered_at < now() - interval "
		   "'8 days') + (SELECT count(*) FROM alerts WHERE dedup_key = 'old-one') + "
		   "(SELECT count(*) FROM workload_profiles WHERE pod = 'old-pod')") != 0) {
		assert_true(time_mono_us() - t0 < 15 * 1000000);
		usleep(200 * 1000);
	}
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE dedup_key = "
			     "'recent-one'"),
	    1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lost_and_unknown),
		cmocka_unit_test(test_unknown_keeps_release),
		cmocka_unit_test(test_telemetry_bound),
		cmocka_unit_test(test_telemetry_exact),
		cmocka_unit_test(test_enroll_no_steal),
		cmocka_unit_test(test_live_agent_kept),
		cmocka_unit_test(test_callback_allow),
		cmocka_unit_test(test_revoked_token_cached),
		cmocka_unit_test(test_token_cache_fleet),
		cmocka_unit_test(test_xid_health),
		cmocka_unit_test(test_generations),
		cmocka_unit_test(test_agent_texts),
		cmocka_unit_test(test_credits),
		cmocka_unit_test(test_credit_once),
		cmocka_unit_test(test_retention),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
