/*
 * test_agent_faults.c - issue 19 end to end: real gpupool-agent processes
 * (fake backend, nvml against the stand-in libnvidia-ml.so.1, nvidia-smi
 * against the stand-in tool) against a real gpupoold and PostgreSQL,
 * under the GPU faults of docs/agent.md "GPU health, per fault class":
 *
 * - a GPU that falls off the bus ("lost": true in the fake backend's fault
 *   file, NVML_ERROR_GPU_IS_LOST from the stand-in library) is failed
 *   within one status interval, the node's other GPUs stay ok and keep
 *   reporting, an alert names the GPU, and the failed time is credited;
 * - nvidia-smi failing `mig -lgi`, `-L` or `-q` once changes no allocation;
 * - Xids: 38 leaves a GPU ok, 110 fails it, an unknown one is in the alert
 *   details, a contained ECC error (Xid 94) degrades it, a storm of 500
 *   Xid 13 followed by one Xid 79 fails it;
 * - a lost GPU readable again stays failed until an operator sets it ok;
 *   a release completes with a lost GPU on the node, and waits (releasing,
 *   instance kept) while a GPU's instances cannot be listed;
 * - an allocation the agent could not create is credited in
 *   GET /v1/billing/usage;
 * - SIGTERM stops an agent held in a long-poll within a second.
 *
 * The backlog after an outage (no 413 loop) is test_agent_e2e's
 * test_metrics_backlog_after_outage.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "util.h"

/* every agent reports its status at least this often (seconds); a change
 * is reported at the next heartbeat (1 s) */
#define STATUS_INTERVAL 10

static const char *op;    /* operator */
static const char *alice; /* owner of project pa */

enum backend {
	B_FAKE,
	B_NVML,
	B_SMI
};

struct agent {
	char name[64];
	char dir[512];
	char gpus[600];
	char log[600];
	enum backend backend;
	pid_t pid;
	const char *extra[8]; /* more arguments, NULL-terminated */
};

static double
mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
sleep_ms(int ms)
{
	struct timespec t = { ms / 1000, (long)(ms % 1000) * 1000000L };
	nanosleep(&t, NULL);
}

static const char *
enroll_token(struct fixture *fx)
{
	struct gp_client_response *r = fx_request(fx, op, "POST",
	    "/v1/clusters/flt/enrollment-tokens", "{\"expires_in_seconds\":600}");
	assert_status(r, 201);
	return fx_json_str(r->json, "token");
}

static void
agent_spawn(struct fixture *fx, struct agent *a, const char *token)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* a failed test ends the process: its agents with it */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		int fd = open(a->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		const char *argv[40];
		int n = 0;
		argv[n++] = AGENT_PATH;
		argv[n++] = "--server";
		argv[n++] = fx->server->base_url;
		argv[n++] = "--node-name";
		argv[n++] = a->name;
		argv[n++] = "--state-dir";
		argv[n++] = a->dir;
		argv[n++] = "--backend";
		switch (a->backend) {
		case B_NVML:
			argv[n++] = "nvml";
			argv[n++] = "--nvml-lib";
			argv[n++] = NVML_STUB_PATH;
			break;
		case B_SMI:
			argv[n++] = "nvidia-smi";
			argv[n++] = "--nvidia-smi";
			argv[n++] = SMI_STUB;
			break;
		default:
			argv[n++] = "fake";
			argv[n++] = "--fake-gpus";
			argv[n++] = a->gpus;
		}
		if (token != NULL) {
			argv[n++] = "--enroll-token";
			argv[n++] = token;
		}
		argv[n++] = "--poll-interval";
		argv[n++] = "5";
		argv[n++] = "--heartbeat-interval";
		argv[n++] = "1";
		argv[n++] = "--status-interval";
		argv[n++] = fx_str(fx, "%d", STATUS_INTERVAL);
		argv[n++] = "--metrics-interval";
		argv[n++] = "1";
		for (int k = 0; k < 7 && a->extra[k] != NULL; k++)
			argv[n++] = a->extra[k];
		argv[n] = NULL;
		execv(AGENT_PATH, (char *const *)argv);
		_exit(127);
	}
	a->pid = pid;
}

static struct agent *
agent_new(struct fixture *fx, const char *name, enum backend backend, int ngpus)
{
	struct agent *a = arena_alloc(fx->arena, sizeof(*a));
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	snprintf(a->dir, sizeof(a->dir), "%s/agent-%s", fx->tmpdir, name);
	snprintf(a->gpus, sizeof(a->gpus), "%s/gpus-%s.json", fx->tmpdir, name);
	snprintf(a->log, sizeof(a->log), "%s/%s.log", fx->tmpdir, name);
	a->backend = backend;
	const char *g = fx_str(fx, "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":%d}]}", ngpus);
	assert_int_equal(ag_write_file(a->gpus, g, strlen(g), 0644), 0);
	assert_int_equal(mkdir(a->dir, 0700), 0);
	return a;
}

static void
dump_agent_log(const struct agent *a)
{
	char *s = ag_read_file(a->log, NULL);
	if (s != NULL) {
		size_t n = strlen(s);
		fprintf(stderr, "---- agent %s log (tail) ----\n%s\n", a->name,
		    n > 4000 ? s + n - 4000 : s);
		free(s);
	}
}

/* Stop the agent and cordon its node: later placements go elsewhere. */
static void
agent_retire(struct fixture *fx, struct agent *a)
{
	if (a->pid > 0) {
		kill(a->pid, SIGTERM);
		int st;
		waitpid(a->pid, &st, 0);
		if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
			dump_agent_log(a);
			fail_msg("agent %s did not stop cleanly on SIGTERM (status %d)", a->name,
			    st);
		}
		a->pid = 0;
	}
	assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/cordon", a->name), "{}"),
	    200);
}

/* Poll (deadline: seconds) until the one-value query with parameters p1..p3
 * (NULL: fewer) gives want. */
static void
wait_value(struct fixture *fx, const struct agent *a, double seconds, int64_t want, const char *sql,
    const char *p1, const char *p2, const char *p3)
{
	double end = mono_s() + seconds;
	int64_t got;
	for (;;) {
		got = fx_sql_int64(fx, sql, p1, p2, p3); /* NULLs end the parameters */
		if (got == want)
			return;
		if (mono_s() > end)
			break;
		sleep_ms(100);
	}
	if (a != NULL)
		dump_agent_log(a);
	fixture_server_dump_log(fx->server, 40);
	fail_msg("timed out after %.0f s: %s gave %lld, want %lld", seconds, sql, (long long)got,
	    (long long)want);
}

static void
wait_enrolled(struct fixture *fx, const struct agent *a, int ngpus)
{
	wait_value(fx, a, 30, ngpus,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 "
	    "AND n.status = 'ready'",
	    a->name, NULL, NULL);
}

/* A pool request approved with placement limited to a's node (the other
 * ready nodes cordoned for the approval). Returns the pool's id. */
static int64_t
pool_on(struct fixture *fx, const struct agent *a, const char *action, const char *pool,
    const char *items)
{
	const char *others = fx_sql_text(fx,
	    "SELECT coalesce(string_agg(name, ' ' ORDER BY name), '') FROM nodes "
	    "WHERE name <> $1 AND status = 'ready'",
	    a->name);
	char list[2048];
	snprintf(list, sizeof(list), "%s", others);
	for (char *sv = NULL, *n = strtok_r(list, " ", &sv); n; n = strtok_r(NULL, " ", &sv))
		assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/cordon", n),
				  NULL),
		    200);
	struct gp_client_response *r;
	if (items != NULL)
		r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
		    "{\"action\":\"%s\",\"pool\":\"%s\",\"items\":%s,\"justification\":\"faults\"}",
		    action, pool, items);
	else
		r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
		    "{\"action\":\"%s\",\"pool\":\"%s\"}", action, pool);
	assert_status(r, 201);
	int64_t id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{\"note\":\"faults\"}");
	assert_status(r, 200);
	snprintf(list, sizeof(list), "%s", others);
	for (char *sv = NULL, *n = strtok_r(list, " ", &sv); n; n = strtok_r(NULL, " ", &sv))
		assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/uncordon", n),
				  NULL),
		    200);
	return fx_json_int(r->json, "pool_id");
}

static void
wait_pool_active(struct fixture *fx, const struct agent *a, const char *pool)
{
	wait_value(fx, a, 30, 1, "SELECT count(*) FROM pools WHERE name = $1 AND status = 'active'",
	    pool, NULL, NULL);
}

/* Release pool: every allocation released (the node's readable GPUs by
 * the agent destroying the instances, a lost one's by the server), the
 * pool released: nothing stuck on a node with a lost GPU. */
static void
release_all(struct fixture *fx, const struct agent *a, const char *pool)
{
	pool_on(fx, a, "release", pool, NULL);
	wait_value(fx, a, 30, 0,
	    "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = $1 AND a.state <> 'released'",
	    pool, NULL, NULL);
	wait_value(fx, a, 30, 1,
	    "SELECT count(*) FROM pools WHERE name = $1 AND status = 'released'", pool, NULL, NULL);
}

static const char *
gpu_uuid(struct fixture *fx, const struct agent *a, int index)
{
	return fx_sql_text(fx,
	    "SELECT g.uuid FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 "
	    "AND g.gpu_index = $2::int",
	    a->name, fx_str(fx, "%d", index));
}

static const char *
gpu_health(struct fixture *fx, const char *uuid)
{
	return fx_sql_text(fx, "SELECT health FROM gpus WHERE uuid = $1", uuid);
}

/* The states of a pool's allocations, "state@gpu_uuid ..." in start order. */
static const char *
alloc_states(struct fixture *fx, const char *pool)
{
	return fx_sql_text(fx,
	    "SELECT string_agg(a.state || '@' || g.uuid, ' ' ORDER BY g.gpu_index, a.start) "
	    "FROM allocations a JOIN pools p ON p.id = a.pool_id JOIN gpus g ON g.id = a.gpu_id "
	    "WHERE p.name = $1",
	    pool);
}

static void
write_faults(struct fixture *fx, const struct agent *a, const char *json)
{
	assert_int_equal(ag_write_file(fx_str(fx, "%s/fake-faults.json", a->dir), json,
			     strlen(json), 0644),
	    0);
}

/*
 * GPU uuid of a's node lost: failed within one status interval of t0, an
 * open gpu_failed alert naming it with the backend's error in its details,
 * its allocations failed; the node's other GPUs stay ok, their allocations
 * ready, and they keep reporting (status and samples after the loss).
 */
static void
assert_lost(struct fixture *fx, const struct agent *a, const char *uuid, const char *pool,
    double t0, const char *error_part)
{
	wait_value(fx, a, STATUS_INTERVAL, 1,
	    "SELECT count(*) FROM gpus WHERE uuid = $1 AND health = 'failed'", uuid, NULL, NULL);
	double took = mono_s() - t0;
	fprintf(stderr, "GPU %s failed %.1f s after it was lost\n", uuid, took);
	assert_true(took <= STATUS_INTERVAL);
	const char *failed_at = fx_sql_text(fx, "SELECT now()::text");
	/* the alert names it; the error the agent read is in its details */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts al JOIN gpus g ON g.id = al.gpu_id "
			     "WHERE g.uuid = $1 AND al.type = 'gpu_failed' AND al.resolved_at IS NULL "
			     "AND al.severity = 'critical' AND strpos(al.message, g.uuid) > 0 "
			     "AND strpos(al.details->>'error', $2) > 0",
			     uuid, error_part),
	    1);
	assert_non_null(
	    strstr(fx_sql_text(fx, "SELECT health_reason FROM gpus WHERE uuid = $1", uuid),
		"lost"));
	/* its allocations failed, every other one still ready */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "JOIN gpus g ON g.id = a.gpu_id WHERE p.name = $1 AND g.uuid = $2 "
			     "AND a.state <> 'failed'",
			     pool, uuid),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "JOIN gpus g ON g.id = a.gpu_id WHERE p.name = $1 AND g.uuid <> $2 "
			     "AND a.state <> 'ready'",
			     pool, uuid),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id "
			     "WHERE n.name = $1 AND g.uuid <> $2 AND g.health <> 'ok'",
			     a->name, uuid),
	    0);
	/* the others keep reporting: samples of each of them after the loss */
	wait_value(fx, a, 15,
	    fx_sql_int64(fx,
		"SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 "
		"AND g.uuid <> $2",
		a->name, uuid),
	    "SELECT count(DISTINCT s.gpu_id) FROM gpu_metric_samples s JOIN gpus g ON "
	    "g.id = s.gpu_id JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 AND "
	    "g.uuid <> $3 AND s.ts > $2::timestamptz",
	    a->name, failed_at, uuid);
	/* and the node stays ready, its status reports applied */
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM nodes WHERE name = $1", a->name),
	    "ready");
	wait_value(fx, a, 15, 1,
	    "SELECT count(*) FROM nodes WHERE name = $1 AND agent_heartbeat_at > $2::timestamptz",
	    a->name, failed_at, NULL);
}

/*
 * A credit row for pool in GET /v1/billing/usage (the accrual worker runs
 * every second), never more than the same hour's charge. Returns the
 * credited instance-seconds.
 */
static int64_t
wait_credit(struct fixture *fx, const char *pool)
{
	double end = mono_s() + 30;
	int64_t credited = 0, charged = 0;
	for (;;) {
		struct gp_client_response *r =
		    fx_request(fx, alice, "GET", "/v1/billing/usage?project=pa&limit=500", NULL);
		assert_status(r, 200);
		struct json_object *rows = fx_json(r->json, "rows");
		assert_non_null(rows);
		credited = charged = 0;
		for (size_t i = 0; i < json_object_array_length(rows); i++) {
			struct json_object *row = json_object_array_get_idx(rows, i);
			struct json_object *p = fx_json(row, "pool");
			if (p == NULL || strcmp(json_object_get_string(p), pool) != 0)
				continue;
			const char *kind = fx_json_str(row, "kind");
			int64_t amount = fx_json_int(row, "amount_micro");
			if (strcmp(kind, "credit") == 0) {
				assert_true(amount <= 0);
				credited += fx_json_int(row, "seconds") * fx_json_int(row, "count");
			} else if (strcmp(kind, "usage") == 0) {
				charged += amount;
			}
		}
		if (credited >= 1)
			break;
		if (mono_s() > end)
			fail_msg("no credit row for pool %s in GET /v1/billing/usage", pool);
		sleep_ms(250);
	}
	/* never more than the charge, per hour */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT b.hour, sum(b.amount_micro) AS net "
			     "FROM billing_usage b JOIN pools p ON p.id = b.pool_id WHERE p.name = $1 "
			     "GROUP BY b.hour) x WHERE x.net < 0",
			     pool),
	    0);
	assert_true(charged > 0);
	return credited;
}

/* The instances the fake backend holds on GPU index gpu. */
static int
fake_instances(struct fixture *fx, const struct agent *a, int gpu)
{
	struct json_object *o = json_object_from_file(fx_str(fx, "%s/fake-state.json", a->dir));
	assert_non_null(o);
	struct json_object *arr = gp_client_json_get(o, fx_str(fx, "gpus[%d].instances", gpu));
	int n = arr != NULL ? (int)json_object_array_length(arr) : -1;
	json_object_put(o);
	return n;
}

/* ---- setup ---- */

static int
group_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_EXPIRY_INTERVAL=1", "GPUPOOL_AGENT_GRACE=30",
		"GPUPOOL_BILLING_ACCRUAL_INTERVAL=1", "GPUPOOL_BILLING_SETTLE=0", NULL };
	struct fixture_options opts = { .server_env = env };
	struct fixture *fx;
	if (fixture_create(&opts, &fx) < 0)
		return -1;
	*state = fx;
	op = fixture_create_user(fx, "op", "operator");
	alice = fixture_create_user(fx, "alice", "none");
	struct gp_client_response *r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"pa\",\"display_name\":\"pa\"}");
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
	r = fx_request(fx, op, "POST", "/v1/clusters", "{\"name\":\"flt\",\"region\":\"t\"}");
	return r->status == 201 ? 0 : -1;
}

/* ---- tests ---- */

/*
 * Issue 19, finding 1 (fake backend): GPU 1 of a running agent falls off
 * the bus ("lost": true, with its Xid 79). Before, the agent failed the
 * whole discovery and resent its last snapshot: the GPU stayed ok, the
 * tenant billed.
 */
static void
test_fake_lost_gpu(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "flt-lost", B_FAKE, 2);
	agent_spawn(fx, a, enroll_token(fx));
	wait_enrolled(fx, a, 2);
	pool_on(fx, a, "create", "pl", "[\"H100-80GB/7g.80gb=2\"]");
	wait_pool_active(fx, a, "pl");
	const char *g0 = gpu_uuid(fx, a, 0), *g1 = gpu_uuid(fx, a, 1);
	assert_string_equal(alloc_states(fx, "pl"), fx_str(fx, "ready@%s ready@%s", g0, g1));

	double t0 = mono_s();
	write_faults(fx, a, "{\"gpus\":[{\"index\":1,\"xids\":[79],\"lost\":true}]}");
	assert_lost(fx, a, g1, "pl", t0, "GPU is lost");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts al JOIN gpus g ON g.id = al.gpu_id "
			     "WHERE g.uuid = $1 AND al.type = 'gpu_failed' AND al.resolved_at IS NULL "
			     "AND (al.details->>'xid')::int = 79",
			     g1),
	    1);
	assert_string_equal(gpu_health(fx, g0), "ok");
	assert_string_equal(alloc_states(fx, "pl"), fx_str(fx, "ready@%s failed@%s", g0, g1));
	/* the failed time is kept and credited */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpu_health_intervals h JOIN gpus g ON g.id = "
			     "h.gpu_id WHERE g.uuid = $1 AND h.health = 'failed' AND h.ended_at IS NULL",
			     g1),
	    1);
	int64_t credited = wait_credit(fx, "pl");
	/* one instance of two was failed, for at most the time since the loss */
	assert_true(credited >= 1 && credited <= (int64_t)(mono_s() - t0) + 2);
	release_all(fx, a, "pl");
	/* GPU 0's instance destroyed; the lost GPU 1 was not touched */
	assert_int_equal(fake_instances(fx, a, 0), 0);
	assert_int_equal(fake_instances(fx, a, 1), 1);
	agent_retire(fx, a);
}

/* two H100s for the stand-in library (the H100 entries of
 * tests/fixtures/nvml-stub/h100x2.json); %s: GPU 0, GPU 1, GPU 1's faults */
#define NVML_TWO_H100                                                                      \
	"{\"gpus\":[{\"uuid\":\"%s\",\"name\":\"NVIDIA H100 80GB HBM3\","                  \
	"\"pci_device_id\":\"0x233010DE\",\"memory_mib\":81559,\"mig\":1,\"profiles\":["   \
	"{\"id\":19,\"slices\":1,\"compute\":1,\"max\":7,\"placements\":[0,1,2,3,4,5,6]}," \
	"{\"id\":9,\"slices\":4,\"compute\":3,\"max\":2,\"placements\":[0,4]},"            \
	"{\"id\":0,\"slices\":8,\"compute\":7,\"max\":1,\"placements\":[0]}]},"            \
	"{\"uuid\":\"%s\",\"name\":\"NVIDIA H100 80GB HBM3\","                             \
	"\"pci_device_id\":\"0x233010DE\",\"memory_mib\":81559,\"mig\":1,%s\"profiles\":[" \
	"{\"id\":19,\"slices\":1,\"compute\":1,\"max\":7,\"placements\":[0,1,2,3,4,5,6]}," \
	"{\"id\":9,\"slices\":4,\"compute\":3,\"max\":2,\"placements\":[0,4]},"            \
	"{\"id\":0,\"slices\":8,\"compute\":7,\"max\":1,\"placements\":[0]}]}]}"

/*
 * After the faults: a lost GPU that is readable again stays failed until
 * an operator sets it ok, and then its allocations are ready again (the
 * failed interval closed). A release while a GPU's instances cannot be
 * listed ("unknown") releases the readable GPU's allocation and leaves
 * the unknown one's releasing (neither released as if gone nor failed),
 * its instance in place; once the GPU is readable the agent destroys it
 * and only then is it released.
 */
static void
test_lost_back_unknown_release(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "flt-back", B_FAKE, 2);
	/* an operator's change reaches the allocations with the next status:
	 * a periodic one here, 3 s */
	a->extra[0] = "--status-interval";
	a->extra[1] = "3";
	agent_spawn(fx, a, enroll_token(fx));
	wait_enrolled(fx, a, 2);
	pool_on(fx, a, "create", "pb", "[\"H100-80GB/7g.80gb=2\"]");
	wait_pool_active(fx, a, "pb");
	const char *g0 = gpu_uuid(fx, a, 0), *g1 = gpu_uuid(fx, a, 1);

	/* lost, then readable again: still failed (reports never heal) */
	write_faults(fx, a, "{\"gpus\":[{\"index\":1,\"lost\":true}]}");
	wait_value(fx, a, STATUS_INTERVAL, 1,
	    "SELECT count(*) FROM gpus WHERE uuid = $1 AND health = 'failed'", g1, NULL, NULL);
	write_faults(fx, a, "{}");
	const char *back = fx_sql_text(fx, "SELECT now()::text");
	wait_value(fx, a, 15, 1,
	    "SELECT count(*) FROM nodes WHERE name = $1 AND agent_status_at > $2::timestamptz",
	    a->name, back, NULL);
	assert_string_equal(gpu_health(fx, g1), "failed");
	assert_string_equal(alloc_states(fx, "pb"), fx_str(fx, "ready@%s failed@%s", g0, g1));
	/* the operator sets it ok: its allocation is ready again, the pool active */
	assert_status(fx_request(fx, op, "PATCH", fx_str(fx, "/v1/gpus/%s", g1),
			  "{\"health\":\"ok\"}"),
	    200);
	wait_value(fx, a, 15, 1, "SELECT count(*) FROM pools WHERE name = $1 AND status = 'active'",
	    "pb", NULL, NULL);
	assert_string_equal(alloc_states(fx, "pb"), fx_str(fx, "ready@%s ready@%s", g0, g1));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpu_health_intervals h JOIN gpus g ON g.id = "
			     "h.gpu_id WHERE g.uuid = $1 AND h.ended_at IS NULL AND h.health = 'ok'",
			     g1),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpu_health_intervals h JOIN gpus g ON g.id = "
			     "h.gpu_id WHERE g.uuid = $1 AND h.health = 'failed' AND h.ended_at IS "
			     "NOT NULL",
			     g1),
	    1);

	/* GPU 0's instances unreadable; the pool released meanwhile */
	write_faults(fx, a, "{\"gpus\":[{\"index\":0,\"unknown\":true}]}");
	const char *unknown = fx_sql_text(fx, "SELECT now()::text");
	wait_value(fx, a, 15, 1,
	    "SELECT count(*) FROM nodes WHERE name = $1 AND agent_status_at > $2::timestamptz",
	    a->name, unknown, NULL);
	pool_on(fx, a, "release", "pb", NULL);
	wait_value(fx, a, 15, 1,
	    "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id JOIN gpus g ON "
	    "g.id = a.gpu_id WHERE p.name = $1 AND g.uuid = $2 AND a.state = 'released'",
	    "pb", g1, NULL);
	assert_int_equal(fake_instances(fx, a, 1), 0);
	/* the report that released GPU 1's allocation, and a later tick: GPU 0's
	 * allocation still releasing, its instance there */
	const char *released = fx_sql_text(fx, "SELECT now()::text");
	wait_value(fx, a, 15, 1,
	    "SELECT count(*) FROM nodes WHERE name = $1 AND agent_heartbeat_at > "
	    "$2::timestamptz + interval '1 second'",
	    a->name, released, NULL);
	assert_string_equal(alloc_states(fx, "pb"), fx_str(fx, "releasing@%s released@%s", g0, g1));
	assert_int_equal(fake_instances(fx, a, 0), 1);
	assert_string_equal(gpu_health(fx, g0), "ok");
	/* readable again: destroyed, then released, the pool with it */
	write_faults(fx, a, "{}");
	wait_value(fx, a, 15, 1,
	    "SELECT count(*) FROM pools WHERE name = $1 AND status = 'released'", "pb", NULL, NULL);
	assert_string_equal(alloc_states(fx, "pb"), fx_str(fx, "released@%s released@%s", g0, g1));
	assert_int_equal(fake_instances(fx, a, 0), 0);
	agent_retire(fx, a);
}

/*
 * The same through the nvml backend: the stand-in libnvidia-ml.so.1
 * answers NVML_ERROR_GPU_IS_LOST for GPU 1's handle. Before, nv_discover
 * failed for the whole node.
 */
static void
test_nvml_lost_gpu(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "flt-nvml", B_NVML, 2);
	const char *g0 = "GPU-0000aaaa-1111-2222-3333-444444444444";
	const char *g1 = "GPU-0000bbbb-1111-2222-3333-444444444444";
	const char *cfg = fx_str(fx, "%s/nvml-faults.json", fx->tmpdir);
	const char *doc = fx_str(fx, NVML_TWO_H100, g0, g1, "");
	assert_int_equal(ag_write_file(cfg, doc, strlen(doc), 0644), 0);
	setenv("GPUPOOL_NVML_STUB_CONFIG", cfg, 1);
	setenv("GPUPOOL_NVML_STUB_STATE", fx_str(fx, "%s/nvml-faults-state.json", fx->tmpdir), 1);
	agent_spawn(fx, a, enroll_token(fx));
	wait_enrolled(fx, a, 2);
	pool_on(fx, a, "create", "pn", "[\"H100-80GB/3g.40gb=4\"]");
	wait_pool_active(fx, a, "pn");
	assert_string_equal(alloc_states(fx, "pn"),
	    fx_str(fx, "ready@%s ready@%s ready@%s ready@%s", g0, g0, g1, g1));

	double t0 = mono_s();
	doc = fx_str(fx, NVML_TWO_H100, g0, g1, "\"lost\":true,");
	assert_int_equal(ag_write_file(cfg, doc, strlen(doc), 0644), 0);
	assert_lost(fx, a, g1, "pn", t0, "GPU is lost");
	assert_string_equal(alloc_states(fx, "pn"),
	    fx_str(fx, "ready@%s ready@%s failed@%s failed@%s", g0, g0, g1, g1));
	/* GPU 0's instances are the ones the stub holds, unchanged */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "JOIN gpus g ON g.id = a.gpu_id WHERE p.name = 'pn' AND g.uuid = $1 "
			     "AND a.device_uuid LIKE 'MIG-0000aaaa-stub-%'",
			     g0),
	    2);
	wait_credit(fx, "pn");
	release_all(fx, a, "pn");
	agent_retire(fx, a);
	unsetenv("GPUPOOL_NVML_STUB_CONFIG");
	unsetenv("GPUPOOL_NVML_STUB_STATE");
}

/*
 * Issue 19, finding 1 (nvidia-smi): `mig -lgi`, `-L` and `-q` each fail
 * once ("Insufficient Permissions", as on a real H200): no allocation of
 * the GPU changes, no drift, no instance is destroyed or created. Before,
 * a failed read was an empty answer: every allocation of the GPU failed as
 * disappeared.
 */
static void
agent_stop(struct agent *a)
{
	kill(a->pid, SIGTERM);
	int st;
	waitpid(a->pid, &st, 0);
	a->pid = 0;
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
		dump_agent_log(a);
		fail_msg("agent %s did not stop cleanly on SIGTERM (status %d)", a->name, st);
	}
}

/* `nvidia-smi mig -lgi` as the real tool prints it, of the allocations of
 * pool (GPU 0), into path */
static void
write_lgi(struct fixture *fx, const char *path, const char *pool)
{
	const char *rows = fx_sql_text(fx,
	    "SELECT coalesce(string_agg(format('|   0  MIG %-13s %4s %8s %10s     |' || E'\\n' || "
	    "'+-------------------------------------------------------+', a.profile, "
	    "CASE a.profile WHEN '3g.40gb' THEN 9 WHEN '2g.20gb' THEN 14 ELSE 19 END, "
	    "a.start + 1, a.start || ':' || a.size), E'\\n' ORDER BY a.start), '') "
	    "FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = $1",
	    pool);
	const char *doc = fx_str(fx,
	    "+-------------------------------------------------------+\n"
	    "| GPU instances:                                        |\n"
	    "| GPU   Name             Profile  Instance   Placement  |\n"
	    "|                          ID       ID       Start:Size |\n"
	    "|=======================================================|\n"
	    "%s%s",
	    rows, rows[0] ? "\n" : "+-------------------------------------------------------+\n");
	assert_int_equal(ag_write_file(path, doc, strlen(doc), 0644), 0);
}

static void
test_smi_read_fails_once(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "flt-smi", B_SMI, 1);
	const char *flag = fx_str(fx, "%s/smi-fail-once", fx->tmpdir);
	const char *smi_log = fx_str(fx, "%s/smi-commands.log", fx->tmpdir);
	/* the stand-in prints the real H100 capture; its `mig -lgi` table is ours */
	const char *fixtures = fx_str(fx, "%s/smi-fixtures", fx->tmpdir);
	const char *capture = "linux-x86_64__nvidia-h100-mig__590.48.01.txt";
	const char *lgi = fx_str(fx, "%s/h100-mig-lgi.reconstructed.txt", fixtures);
	assert_int_equal(mkdir(fixtures, 0755), 0);
	assert_int_equal(symlink(FIXTURES_DIR
			     "/nvidia-smi/linux-x86_64__nvidia-h100-mig__590.48.01.txt",
			     fx_str(fx, "%s/%s", fixtures, capture)),
	    0);
	write_lgi(fx, lgi, "none");
	setenv("GPUPOOL_SMI_FIXTURES", fixtures, 1);
	setenv("GPUPOOL_SMI_FAIL_ONCE", flag, 1);
	setenv("GPUPOOL_SMI_LOG", smi_log, 1);
	/* a status every second here: the failed scan is reported at once;
	 * samples (which scan too) rarely, so that the failing read is the
	 * reporter's own scan, whose result the next status carries */
	a->extra[0] = "--status-interval";
	a->extra[1] = "1";
	a->extra[2] = "--metrics-interval";
	a->extra[3] = "600";
	agent_spawn(fx, a, enroll_token(fx));
	wait_enrolled(fx, a, 1);
	/* the stand-in does not realize MIG changes: the layout is approved
	 * while the agent is stopped and written into the table it lists, so
	 * the restarted agent finds it realized */
	agent_stop(a);
	pool_on(fx, a, "create", "ps",
	    "[\"H100-80GB/3g.40gb=1\",\"H100-80GB/2g.20gb=1\",\"H100-80GB/1g.10gb=2\"]");
	write_lgi(fx, lgi, "ps");
	agent_spawn(fx, a, NULL);
	wait_pool_active(fx, a, "ps");
	const char *snapshot_sql =
	    "SELECT string_agg(a.id || ':' || a.state || ':' || a.device_uuid || ':' || "
	    "a.updated_at::text, ' ' ORDER BY a.id) FROM allocations a JOIN pools p ON "
	    "p.id = a.pool_id WHERE p.name = 'ps'";
	const char *before = fx_sql_text(fx, snapshot_sql);
	char *log0 = ag_read_file(smi_log, NULL);
	size_t log_len = log0 != NULL ? strlen(log0) : 0;
	free(log0);

	static const char *const commands[] = { "mig -lgi", "-L", "-q" };
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
		assert_int_equal(ag_write_file(flag, commands[i], strlen(commands[i]), 0600), 0);
		/* the stand-in removes the file when it fails the command */
		double end = mono_s() + 20;
		while (access(flag, F_OK) == 0) {
			if (mono_s() > end) {
				dump_agent_log(a);
				fail_msg("nvidia-smi %s was not run within 20 s", commands[i]);
			}
			sleep_ms(50);
		}
		/* the failed scan's report (sent in the tick that failed) and the
		 * next good one (a status a second) are applied: a status received
		 * more than a second after the failure */
		const char *failed_at = fx_sql_text(fx, "SELECT now()::text");
		wait_value(fx, a, 15, 1,
		    "SELECT count(*) FROM nodes WHERE name = $1 AND agent_status_at > "
		    "$2::timestamptz + interval '1 second'",
		    a->name, failed_at, NULL);
		const char *after = fx_sql_text(fx, snapshot_sql);
		if (strcmp(after, before) != 0) {
			dump_agent_log(a);
			fail_msg("nvidia-smi %s failing once changed allocations:\n%s\n->\n%s",
			    commands[i], before, after);
		}
	}
	/* nothing failed, nothing drifted, the GPU and the pool as they were */
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM pools WHERE name = 'ps'"),
	    "active");
	assert_string_equal(gpu_health(fx, "GPU-00000000-0000-0000-0000-000000000000"), "ok");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts al JOIN nodes n ON n.id = al.node_id "
			     "WHERE n.name = $1 AND al.type IN ('drift', 'gpu_failed', "
			     "'pool_degraded')",
			     a->name),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocation_fault_intervals f JOIN allocations a "
			     "ON a.id = f.allocation_id JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name = 'ps'"),
	    0);
	/* and the agent changed no instance (MIG changes are logged by the stand-in) */
	char *log1 = ag_read_file(smi_log, NULL);
	const char *changes = log1 != NULL && strlen(log1) > log_len ? log1 + log_len : "";
	if (changes[0] != '\0') {
		fprintf(stderr, "MIG changes during the faults:\n%s\n", changes);
		free(log1);
		fail_msg("the agent changed MIG instances while a read failed");
	}
	free(log1);
	agent_retire(fx, a);
	unsetenv("GPUPOOL_SMI_FIXTURES");
	unsetenv("GPUPOOL_SMI_FAIL_ONCE");
	unsetenv("GPUPOOL_SMI_LOG");
}

/* The Xid codes listed in an open alert's details.xids, "xid:count ...". */
static const char *
alert_xids(struct fixture *fx, const char *type, const char *uuid)
{
	return fx_sql_text(fx,
	    "SELECT coalesce(string_agg((x->>'xid') || ':' || (x->>'count'), ' ' ORDER BY "
	    "(x->>'xid')::int), '') FROM alerts al JOIN gpus g ON g.id = al.gpu_id "
	    "CROSS JOIN LATERAL jsonb_array_elements(coalesce(al.details->'xids', '[]')) x "
	    "WHERE g.uuid = $2 AND al.type = $1 AND al.resolved_at IS NULL",
	    type, uuid);
}

/*
 * Issue 19, findings 6-8: the Xid table per fault class, through a real
 * agent (fake backend's fault file). GPU 0: Xid 38 (NVIDIA: ignore) and an
 * unknown Xid 4242: ok, an xid_unknown alert. GPU 1: Xid 110 and an
 * unknown Xid 4243: failed, 4243 in the gpu_failed alert's details. GPU 2:
 * a contained ECC error (Xid 94 with its count): degraded, its allocation
 * still ready. GPU 3: a storm of 500 Xid 13 (ok), then one Xid 79: failed.
 * Before: 38 failed GPUs, 110 was not in the table, unknown Xids were
 * recorded nowhere, any ECC count failed the GPU, and 16 Xids per scan
 * (64 queued, newest dropped) lost the 79 after a storm.
 */
static void
test_xid_classes(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "flt-xid", B_FAKE, 4);
	agent_spawn(fx, a, enroll_token(fx));
	wait_enrolled(fx, a, 4);
	pool_on(fx, a, "create", "px", "[\"H100-80GB/7g.80gb=4\"]");
	wait_pool_active(fx, a, "px");
	const char *g[4];
	for (int i = 0; i < 4; i++)
		g[i] = gpu_uuid(fx, a, i);

	/* the storm first: 500 Xid 13 on GPU 3, reported coalesced; it stays ok */
	char storm[4096] = "";
	for (int i = 0; i < 500; i++)
		strcat(storm, i ? ",13" : "13");
	const char *written = fx_sql_text(fx, "SELECT now()::text");
	write_faults(fx, a, fx_str(fx, "{\"gpus\":[{\"index\":3,\"xids\":[%s]}]}", storm));
	const char *state_file = fx_str(fx, "%s/fake-state.json", a->dir);
	double end = mono_s() + 20;
	for (;;) {
		struct json_object *o = json_object_from_file(state_file);
		int n = o ? json_object_get_int(gp_client_json_get(o, "gpus[3].xids_reported")) : 0;
		json_object_put(o);
		if (n == 500)
			break;
		if (mono_s() > end) {
			dump_agent_log(a);
			fail_msg("the fake backend never handed over the storm (%d)", n);
		}
		sleep_ms(100);
	}
	/* the status of the scan that handed them over (the file is read at
	 * the start of each report tick) */
	wait_value(fx, a, 15, 1,
	    "SELECT count(*) FROM nodes WHERE name = $1 AND agent_status_at > $2::timestamptz",
	    a->name, written, NULL);
	assert_string_equal(gpu_health(fx, g[3]), "ok");

	/* then everything at once, one report */
	write_faults(fx, a,
	    fx_str(fx,
		"{\"gpus\":[{\"index\":0,\"xids\":[38,4242]},{\"index\":1,\"xids\":[110,4243]},"
		"{\"index\":2,\"xids\":[94],\"ecc_uncorrected\":1},"
		"{\"index\":3,\"xids\":[%s,79]}]}",
		storm));
	wait_value(fx, a, STATUS_INTERVAL, 2,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 "
	    "AND g.health = 'failed'",
	    a->name, NULL, NULL);
	/* 38: ok, no gpu alert; the unknown 4242 recorded as such */
	assert_string_equal(gpu_health(fx, g[0]), "ok");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts al JOIN gpus g ON g.id = al.gpu_id "
			     "WHERE g.uuid = $1 AND al.type IN ('gpu_failed', 'gpu_degraded')",
			     g[0]),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts al JOIN gpus g ON g.id = al.gpu_id "
			     "WHERE g.uuid = $1 AND al.type = 'xid_unknown' AND al.resolved_at IS NULL "
			     "AND (al.details->>'xid')::int = 4242 AND (al.details->>'count')::int = 1",
			     g[0]),
	    1);
	/* 110: failed, the unknown 4243 in its alert's details */
	assert_string_equal(gpu_health(fx, g[1]), "failed");
	assert_non_null(
	    strstr(fx_sql_text(fx, "SELECT health_reason FROM gpus WHERE uuid = $1", g[1]), "110"));
	assert_string_equal(alert_xids(fx, "gpu_failed", g[1]), "110:1 4243:1");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts al JOIN gpus g ON g.id = al.gpu_id "
			     "CROSS JOIN LATERAL jsonb_array_elements(al.details->'unknown_xids') x "
			     "WHERE g.uuid = $1 AND al.type = 'gpu_failed' AND al.resolved_at IS NULL "
			     "AND (x->>'xid')::int = 4243",
			     g[1]),
	    1);
	/* 94 with an ECC count: degraded, alert, its allocation still ready */
	assert_string_equal(gpu_health(fx, g[2]), "degraded");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts al JOIN gpus g ON g.id = al.gpu_id "
			     "WHERE g.uuid = $1 AND al.type = 'gpu_degraded' AND al.resolved_at IS NULL "
			     "AND (al.details->>'ecc_uncorrected')::int = 1",
			     g[2]),
	    1);
	/* the storm's 79: failed */
	assert_string_equal(gpu_health(fx, g[3]), "failed");
	assert_non_null(
	    strstr(fx_sql_text(fx, "SELECT health_reason FROM gpus WHERE uuid = $1", g[3]), "79"));
	assert_non_null(strstr(alert_xids(fx, "gpu_failed", g[3]), "79:1"));
	assert_string_equal(alloc_states(fx, "px"),
	    fx_str(fx, "ready@%s failed@%s ready@%s failed@%s", g[0], g[1], g[2], g[3]));
	/* the next reports change nothing more (health only gets worse by an
	 * operator's hand), and 2 stays degraded, not failed, with its count */
	const char *now = fx_sql_text(fx, "SELECT now()::text");
	wait_value(fx, a, 15, 1,
	    "SELECT count(*) FROM nodes WHERE name = $1 AND agent_heartbeat_at > "
	    "$2::timestamptz + interval '1 second'",
	    a->name, now, NULL);
	assert_string_equal(gpu_health(fx, g[0]), "ok");
	assert_string_equal(gpu_health(fx, g[2]), "degraded");
	agent_retire(fx, a);
}

/*
 * Issue 19, finding 11: an allocation the agent could not create (the
 * fake backend's fail_apply) is credited from the report that said so, and
 * GET /v1/billing/usage shows the credit row. Before, it was billed in full.
 */
static void
test_failed_apply_credited(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "flt-apply", B_FAKE, 1);
	write_faults(fx, a,
	    "{\"fail_apply\":[{\"profile\":\"1g.10gb\",\"message\":\"injected\"}]}");
	agent_spawn(fx, a, enroll_token(fx));
	wait_enrolled(fx, a, 1);
	pool_on(fx, a, "create", "pf", "[\"H100-80GB/3g.40gb=1\",\"H100-80GB/1g.10gb=1\"]");
	wait_value(fx, a, 30, 1,
	    "SELECT count(*) FROM pools WHERE name = $1 AND status = 'degraded'", "pf", NULL, NULL);
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(a.profile || ':' || a.state, ' ' ORDER BY "
				"a.profile) FROM allocations a JOIN pools p ON p.id = a.pool_id "
				"WHERE p.name = 'pf'"),
	    "1g.10gb:failed 3g.40gb:ready");
	assert_non_null(strstr(fx_sql_text(fx,
				   "SELECT a.error FROM allocations a JOIN pools p ON p.id = "
				   "a.pool_id WHERE p.name = 'pf' AND a.profile = '1g.10gb'"),
	    "injected"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocation_fault_intervals f JOIN allocations a "
			     "ON a.id = f.allocation_id JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name = 'pf' AND a.profile = '1g.10gb' AND f.ended_at IS NULL"),
	    1);
	wait_credit(fx, "pf");
	/* only the failed 1g.10gb is credited, never the ready 3g.40gb */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM billing_usage b JOIN pools p ON p.id = b.pool_id "
			     "WHERE p.name = 'pf' AND b.kind = 'credit' AND b.profile <> '1g.10gb'"),
	    0);
	agent_retire(fx, a);
}

/*
 * Found by this file's timings: SIGTERM waited for the long-poll in
 * flight to end, up to --poll-interval (30 s by default, as long as
 * Kubernetes' default termination grace: the agent was killed instead of
 * stopping). Now the long-poll is given up and the agent exits 0 at once.
 */
static void
test_sigterm_during_long_poll(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "flt-stop", B_FAKE, 1);
	a->extra[0] = "--poll-interval";
	a->extra[1] = "30";
	agent_spawn(fx, a, enroll_token(fx));
	wait_enrolled(fx, a, 1);
	/* the first poll (after=0) is answered at once and the next one held
	 * for 30 s; a heartbeat after the first status is a report tick (a
	 * second) later: the long-poll is in flight */
	wait_value(fx, a, 15, 1,
	    "SELECT count(*) FROM nodes WHERE name = $1 AND agent_heartbeat_at > agent_status_at",
	    a->name, NULL, NULL);
	double t0 = mono_s();
	kill(a->pid, SIGTERM);
	int st = 0;
	while (waitpid(a->pid, &st, WNOHANG) == 0 && mono_s() - t0 < 20)
		sleep_ms(20);
	double took = mono_s() - t0;
	fprintf(stderr, "the agent stopped %.1f s after SIGTERM\n", took);
	if (took >= 20) {
		kill(a->pid, SIGKILL);
		waitpid(a->pid, &st, 0);
	}
	a->pid = 0;
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	assert_true(took < 5);
	char *log = ag_read_file(a->log, NULL);
	assert_non_null(log);
	assert_non_null(strstr(log, "\"msg\":\"stopped\""));
	assert_null(strstr(log, "server unreachable"));
	free(log);
	agent_retire(fx, a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fake_lost_gpu),
		cmocka_unit_test(test_lost_back_unknown_release),
		cmocka_unit_test(test_nvml_lost_gpu),
		cmocka_unit_test(test_smi_read_fails_once),
		cmocka_unit_test(test_xid_classes),
		cmocka_unit_test(test_failed_apply_credited),
		cmocka_unit_test(test_sigterm_during_long_poll),
	};
	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
