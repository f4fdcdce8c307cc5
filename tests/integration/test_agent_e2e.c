/*
 * test_agent_e2e.c - end to end: PostgreSQL, a real gpupoold and real
 * gpupool-agent processes (fake backend, and nvml against the stand-in
 * libnvidia-ml.so.1). Enrollment with a one-time token; an approval
 * reaches the agent (by push, and by long-poll alone), which creates the
 * MIG instances at the placements chosen, and the allocations become ready
 * and the pool active; a release destroys the instances and only then are
 * the allocations released; kill -9 and restart converge; a failed apply
 * degrades the pool; a bad push signature is refused; a node token reaches
 * nothing but the agent endpoints.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "fixture.h"
#include "push.h"
#include "util.h"

static const char *op;    /* operator */
static const char *alice; /* owner of project pa */

struct agent {
	char name[64];
	char dir[512];
	char gpus[600];
	int port; /* push listener, 0: long-poll only */
	bool nvml;
	pid_t pid;
	int starts;
	const char *extra[8]; /* more arguments, NULL-terminated */
	int server_port;      /* talk to 127.0.0.1:server_port (a proxy), 0: the server */
};

static int
free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(s, (struct sockaddr *)&a, &l) != 0)
		fail_msg("no free port");
	close(s);
	return ntohs(a.sin_port);
}

/* A one-time enrollment token for cluster "e2e". */
static const char *
enroll_token(struct fixture *fx)
{
	struct gp_client_response *r = fx_request(fx, op, "POST",
	    "/v1/clusters/e2e/enrollment-tokens", "{\"expires_in_seconds\":600}");
	assert_status(r, 201);
	const char *t = fx_json_str(r->json, "token");
	assert_memory_equal(t, "gpe_", 4);
	return t;
}

static void
agent_spawn(struct fixture *fx, struct agent *a, const char *token)
{
	char log[600], listen[64], server[128];
	snprintf(log, sizeof(log), "%s/%s.log", fx->tmpdir, a->name);
	snprintf(listen, sizeof(listen), "127.0.0.1:%d", a->port);
	/* the agents use the server's agent listener, as a deployment's do */
	snprintf(server, sizeof(server), "%s",
	    fx->server->agent_url[0] != '\0' ? fx->server->agent_url : fx->server->base_url);
	if (a->server_port > 0)
		snprintf(server, sizeof(server), "http://127.0.0.1:%d", a->server_port);
	a->starts++;
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		const char *argv[40];
		int n = 0;
		argv[n++] = AGENT_PATH;
		argv[n++] = "--server";
		argv[n++] = server;
		argv[n++] = "--node-name";
		argv[n++] = a->name;
		argv[n++] = "--state-dir";
		argv[n++] = a->dir;
		if (a->nvml) {
			argv[n++] = "--backend";
			argv[n++] = "nvml";
			argv[n++] = "--nvml-lib";
			argv[n++] = NVML_STUB_PATH;
		} else {
			argv[n++] = "--backend";
			argv[n++] = "fake";
			argv[n++] = "--fake-gpus";
			argv[n++] = a->gpus;
		}
		if (token != NULL) {
			argv[n++] = "--enroll-token";
			argv[n++] = token;
		}
		if (a->port > 0) {
			argv[n++] = "--listen";
			argv[n++] = listen;
		}
		argv[n++] = "--poll-interval";
		argv[n++] = "5";
		argv[n++] = "--heartbeat-interval";
		argv[n++] = "1";
		argv[n++] = "--metrics-interval";
		argv[n++] = "2";
		argv[n++] = "--profiles-interval";
		argv[n++] = "2";
		for (int k = 0; k < 7 && a->extra[k] != NULL; k++)
			argv[n++] = a->extra[k];
		argv[n] = NULL;
		execv(AGENT_PATH, (char *const *)argv);
		_exit(127);
	}
	a->pid = pid;
}

static struct agent *
agent_new(struct fixture *fx, const char *name, bool push, const char *gpus_json)
{
	struct agent *a = arena_alloc(fx->arena, sizeof(*a));
	memset(a, 0, sizeof(*a));
	snprintf(a->name, sizeof(a->name), "%s", name);
	snprintf(a->dir, sizeof(a->dir), "%s/agent-%s", fx->tmpdir, name);
	snprintf(a->gpus, sizeof(a->gpus), "%s/gpus-%s.json", fx->tmpdir, name);
	const char *g =
	    gpus_json ? gpus_json : "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":2}]}";
	assert_int_equal(ag_write_file(a->gpus, g, strlen(g), 0644), 0);
	a->port = push ? free_port() : 0;
	return a;
}

static void
agent_kill(struct agent *a, int sig)
{
	if (a->pid <= 0)
		return;
	kill(a->pid, sig);
	int st;
	waitpid(a->pid, &st, 0);
	if (sig == SIGTERM && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fail_msg("agent %s did not stop cleanly on SIGTERM (status %d)", a->name, st);
	a->pid = 0;
}

/*
 * Stop the agent for good and cordon its node, as an operator retiring it
 * would: the next test's placements must not land on a node nobody runs.
 */
static void
agent_retire(struct fixture *fx, struct agent *a)
{
	agent_kill(a, SIGTERM);
	struct gp_client_response *r =
	    fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/cordon", a->name), "{}");
	assert_status(r, 200);
}

static void
dump_agent_log(struct fixture *fx, const struct agent *a)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/%s.log", fx->tmpdir, a->name);
	char *s = ag_read_file(p, NULL);
	if (s != NULL) {
		size_t n = strlen(s);
		fprintf(stderr, "---- agent %s log (tail) ----\n%s\n", a->name,
		    n > 4000 ? s + n - 4000 : s);
		free(s);
	}
}

/* Wait (30 s) until the SQL count is want. */
static void
wait_count(struct fixture *fx, const struct agent *a, int64_t want, const char *sql, const char *p1)
{
	int64_t got = -1;
	for (int i = 0; i < 300; i++) {
		got = p1 ? fx_sql_int64(fx, sql, p1) : fx_sql_int64(fx, sql);
		if (got == want)
			return;
		usleep(100000);
	}
	if (a != NULL)
		dump_agent_log(fx, a);
	fixture_server_dump_log(fx->server, 40);
	fail_msg("timed out: %s gave %lld, want %lld", sql, (long long)got, (long long)want);
}

/* The fake backend's instances on GPU index gpu, "profile@start ..." */
static const char *
realized(struct fixture *fx, const struct agent *a, int gpu)
{
	char p[600];
	snprintf(p, sizeof(p), "%s/fake-state.json", a->dir);
	char *s = ag_read_file(p, NULL);
	if (s == NULL)
		return "";
	struct json_object *o = json_tokener_parse(s);
	free(s);
	struct json_object *arr = gp_client_json_get(o, fx_str(fx, "gpus[%d].instances", gpu));
	char out[512] = "";
	for (size_t i = 0; arr != NULL && i < json_object_array_length(arr); i++) {
		struct json_object *in = json_object_array_get_idx(arr, i);
		char one[64];
		snprintf(one, sizeof(one), "%s%s@%d", out[0] ? " " : "",
		    json_object_get_string(gp_client_json_get(in, "profile")),
		    json_object_get_int(gp_client_json_get(in, "start")));
		strncat(out, one, sizeof(out) - strlen(out) - 1);
	}
	json_object_put(o);
	return fx_str(fx, "%s", out);
}

static int64_t
request_pool(struct fixture *fx, const char *action, const char *pool, const char *items)
{
	struct gp_client_response *r;
	if (items != NULL)
		r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
		    "{\"action\":\"%s\",\"pool\":\"%s\",\"items\":%s,\"justification\":\"e2e\"}",
		    action, pool, items);
	else
		r = fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
		    "{\"action\":\"%s\",\"pool\":\"%s\"}", action, pool);
	assert_status(r, 201);
	int64_t id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{\"note\":\"e2e\"}");
	assert_status(r, 200);
	return fx_json_int(r->json, "pool_id");
}

/* request_pool with placement limited to agent a's node (the others cordoned
 * for the approval): nodes of stopped agents stay ready until the liveness
 * grace has passed, and a layout placed there would never be realized. */
static int64_t
request_on(struct fixture *fx, const struct agent *a, const char *action, const char *pool,
    const char *items)
{
	const char *others = fx_sql_text(fx,
	    "SELECT coalesce(string_agg(name, ' ' ORDER BY name), '') FROM nodes "
	    "WHERE name <> $1 AND status = 'ready'",
	    a->name);
	char list[2048];
	snprintf(list, sizeof(list), "%s", others);
	for (char *save = NULL, *n = strtok_r(list, " ", &save); n != NULL;
	     n = strtok_r(NULL, " ", &save))
		assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/cordon", n),
				  NULL),
		    200);
	int64_t id = request_pool(fx, action, pool, items);
	snprintf(list, sizeof(list), "%s", others);
	for (char *save = NULL, *n = strtok_r(list, " ", &save); n != NULL;
	     n = strtok_r(NULL, " ", &save))
		assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/uncordon", n),
				  NULL),
		    200);
	return id;
}

static const char *
pool_status_sql(void)
{
	return "SELECT count(*) FROM pools WHERE name = $1 AND status = 'active'";
}

/* ---- setup ---- */

static int
group_setup(void **state)
{
	/* a short liveness grace: silent nodes turn unknown within seconds */
	static const char *const env[] = { "GPUPOOL_EXPIRY_INTERVAL=1", "GPUPOOL_AGENT_GRACE=5",
		"GPUPOOL_AGENT_LISTEN=127.0.0.1:0", NULL };
	struct fixture_options opts = { .server_env = env };
	struct fixture *fx;
	if (fixture_create(&opts, &fx) < 0)
		return -1;
	*state = fx;
	if (fx->server->agent_port <= 0) {
		fprintf(stderr, "test_agent_e2e: the server has no agent listener\n");
		return -1;
	}
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
	r = fx_request(fx, op, "POST", "/v1/clusters", "{\"name\":\"e2e\",\"region\":\"t\"}");
	return r->status == 201 ? 0 : -1;
}

/* ---- tests ---- */

static void
test_enroll_approve_release(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "e2e-a", true, NULL);
	agent_spawn(fx, a, enroll_token(fx));
	/* enrolled: node and GPUs in the inventory, token 0600 in the state dir */
	wait_count(fx, a, 2,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1",
	    a->name);
	struct stat st;
	assert_int_equal(stat(fx_str(fx, "%s/token", a->dir), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* 3g.40gb + 2 x 2g.20gb fits one H100 only as 3g@4, 2g@0, 2g@2 */
	request_on(fx, a, "create", "p1", "[\"H100-80GB/3g.40gb=1\",\"H100-80GB/2g.20gb=2\"]");
	wait_count(fx, a, 1, pool_status_sql(), "p1");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name = 'p1' AND a.state = 'ready' AND a.device_uuid LIKE 'MIG-%'"),
	    3);
	/* the instances exist at the placements the server chose */
	const char *placed = fx_sql_text(fx,
	    "SELECT string_agg(a.profile || '@' || a.start, ' ' ORDER BY a.start) "
	    "FROM allocations a JOIN pools p ON p.id = a.pool_id WHERE p.name = 'p1'");
	int gpu = (int)fx_sql_int64(fx,
	    "SELECT DISTINCT g.gpu_index FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "JOIN gpus g ON g.id = a.gpu_id WHERE p.name = 'p1'");
	const char *got = realized(fx, a, gpu);
	assert_int_equal(strlen(got), strlen(placed));
	assert_non_null(strstr(got, "3g.40gb@4"));
	assert_non_null(strstr(got, "2g.20gb@0"));
	assert_non_null(strstr(got, "2g.20gb@2"));

	/* release: released only after the agent destroyed the instances */
	request_pool(fx, "release", "p1", NULL);
	wait_count(fx, a, 3,
	    "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = $1 AND a.state = 'released'",
	    "p1");
	assert_string_equal(realized(fx, a, gpu), "");
	agent_retire(fx, a);
}

static void
test_longpoll_only_and_kill9(void **state)
{
	struct fixture *fx = *state;
	/* no --listen: the approval reaches the agent by long-poll alone */
	struct agent *a = agent_new(fx, "e2e-b", false, NULL);
	agent_spawn(fx, a, enroll_token(fx));
	wait_count(fx, a, 2,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1",
	    a->name);
	request_on(fx, a, "create", "p2", "[\"H100-80GB/7g.80gb=1\"]");
	wait_count(fx, a, 1, pool_status_sql(), "p2");
	/* kill -9; approve while it is down; restart with no token: converges */
	agent_kill(a, SIGKILL);
	request_on(fx, a, "expand", "p2", "[\"H100-80GB/3g.40gb=2\"]");
	agent_spawn(fx, a, NULL);
	wait_count(fx, a, 3,
	    "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = $1 AND a.state = 'ready'",
	    "p2");
	wait_count(fx, a, 1, pool_status_sql(), "p2");
	request_pool(fx, "release", "p2", NULL);
	wait_count(fx, a, 3,
	    "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = $1 AND a.state = 'released'",
	    "p2");
	agent_retire(fx, a);
}

static void
test_failed_apply_degrades(void **state)
{
	struct fixture *fx = *state;
	struct agent *a =
	    agent_new(fx, "e2e-c", true, "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":1}]}");
	/* every create of 1g.10gb fails on this node */
	assert_int_equal(mkdir(a->dir, 0700), 0);
	const char *faults =
	    "{\"fail_apply\":[{\"profile\":\"1g.10gb\",\"message\":\"injected\"}]}";
	assert_int_equal(ag_write_file(fx_str(fx, "%s/fake-faults.json", a->dir), faults,
			     strlen(faults), 0644),
	    0);
	agent_spawn(fx, a, enroll_token(fx));
	wait_count(fx, a, 1,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1",
	    a->name);
	request_on(fx, a, "create", "p3", "[\"H100-80GB/1g.10gb=1\"]");
	assert_string_equal(fx_sql_text(fx,
				"SELECT n.name FROM allocations a JOIN pools p ON p.id = a.pool_id "
				"JOIN gpus g ON g.id = a.gpu_id JOIN nodes n ON n.id = g.node_id "
				"WHERE p.name = 'p3'"),
	    a->name);
	wait_count(fx, a, 1, "SELECT count(*) FROM pools WHERE name = $1 AND status = 'degraded'",
	    "p3");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name = 'p3' AND a.state = 'failed'"),
	    1);
	request_pool(fx, "release", "p3", NULL);
	agent_retire(fx, a);
}

static void
test_push_signature_and_token_scope(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "e2e-d", true, NULL);
	agent_spawn(fx, a, enroll_token(fx));
	wait_count(fx, a, 2,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1",
	    a->name);
	/* a push signed with another secret: 401, and nothing changes */
	const char *body = "{\"generation\":999,\"gpus\":[]}";
	char ts[32], sig[80];
	snprintf(ts, sizeof(ts), "%lld", ag_now());
	assert_int_equal(push_sign("0000000000000000000000000000000000000000000000000000000000000000",
			     ts, body, strlen(body), sig, sizeof(sig)),
	    0);
	struct gp_client *c = gp_client_create(fx_str(fx, "http://127.0.0.1:%d", a->port), NULL);
	const char *hdrs[] = { fx_str(fx, "X-Gpupool-Timestamp: %s", ts),
		fx_str(fx, "X-Gpupool-Signature: %s", sig), NULL };
	struct gp_client_response r;
	assert_int_equal(gp_client_request(c, "POST", "/v1/desired-state", body, strlen(body), hdrs,
			     &r),
	    0);
	assert_int_equal(r.status, 401);
	gp_client_response_free(&r);
	gp_client_destroy(c);
	/* the node token: the agent endpoints only */
	char *tok = ag_read_file(fx_str(fx, "%s/token", a->dir), NULL);
	assert_non_null(tok);
	assert_memory_equal(tok, "gpn_", 4);
	const char *t = fx_str(fx, "%s", tok);
	free(tok);
	struct gp_client_response *rr = fx_request(fx, t, "GET", "/v1/projects", NULL);
	assert_problem(rr, 403, "node_token_forbidden");
	rr = fx_request(fx, t, "GET", "/v1/agent/desired-state?after=0&wait=0", NULL);
	assert_status(rr, 200);
	assert_json_str(rr->json, "node", a->name);
	agent_retire(fx, a);
}

static void
test_revoked_token_reenroll(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "e2e-e", true, NULL);
	agent_spawn(fx, a, enroll_token(fx));
	wait_count(fx, a, 2,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1",
	    a->name);
	int64_t node_id = fx_sql_int64(fx, "SELECT id FROM nodes WHERE name = $1", a->name);
	/* revoked, and no unused enrollment token: the agent exits 3 */
	struct gp_client_response *r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/nodes/%s/agent-token/revoke", a->name), "{}");
	assert_true(r->status == 200 || r->status == 204);
	int st = 0;
	for (int i = 0; i < 200 && waitpid(a->pid, &st, WNOHANG) == 0; i++)
		usleep(100000);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3);
	a->pid = 0;
	/* a new enrollment token in the state dir: the node is adopted, same id */
	const char *t = enroll_token(fx);
	assert_int_equal(ag_write_file(fx_str(fx, "%s/enroll-token", a->dir), t, strlen(t), 0600),
	    0);
	agent_spawn(fx, a, NULL);
	for (int i = 0; i < 100 && access(fx_str(fx, "%s/enroll-token", a->dir), F_OK) == 0; i++)
		usleep(100000);
	wait_count(fx, a, 1, "SELECT count(*) FROM nodes WHERE name = $1 AND status = 'ready'",
	    a->name);
	request_on(fx, a, "create", "p5", "[\"H100-80GB/4g.40gb=1\"]");
	wait_count(fx, a, 1, pool_status_sql(), "p5");
	assert_int_equal(fx_sql_int64(fx, "SELECT id FROM nodes WHERE name = $1", a->name),
	    node_id);
	/* the spent enrollment token is gone from disk */
	assert_int_equal(access(fx_str(fx, "%s/enroll-token", a->dir), F_OK), -1);
	request_pool(fx, "release", "p5", NULL);
	agent_retire(fx, a);
}

/*
 * Issue 19, finding 12: re-enrollment is one transition. The node token
 * is revoked while every agent thread is busy (a long-poll held, metrics
 * every 50 ms, heartbeats every second), 50 times in a row, a new
 * enrollment token waiting in the state dir each time: each time the
 * agent re-enrolls once (the spare token is consumed), speaks with the
 * new token, and in the end converges (a pool becomes active). Before,
 * a 401 answering a request sent with the old token, arriving after the
 * re-enrollment, undid the new token: the agent tried the spent token
 * and exited 3, or stopped sending.
 */
static void
test_reenroll_while_busy_50_times(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "e2e-rb", true, NULL);
	a->extra[0] = "--metrics-interval-ms";
	a->extra[1] = "50";
	agent_spawn(fx, a, enroll_token(fx));
	wait_count(fx, a, 1, "SELECT count(*) FROM nodes WHERE name = $1 AND status = 'ready'",
	    a->name);
	const char *live_sql = "SELECT coalesce(max(t.id), 0) FROM node_tokens t JOIN nodes n "
			       "ON n.id = t.node_id WHERE n.name = $1 AND t.revoked_at IS NULL";
	const char *spoke_sql =
	    "SELECT count(*) FROM node_tokens t JOIN nodes n ON n.id = t.node_id "
	    "WHERE n.name = $1 AND t.revoked_at IS NULL AND t.id > $2::bigint "
	    "AND n.agent_heartbeat_at > t.created_at AND n.status = 'ready'";
	const char *tok_path = fx_str(fx, "%s/enroll-token", a->dir);
	for (int i = 0; i < 50; i++) {
		int64_t before = fx_sql_int64(fx, live_sql, a->name);
		const char *t = enroll_token(fx);
		assert_int_equal(ag_write_file(tok_path, t, strlen(t), 0600), 0);
		struct gp_client_response *r = fx_request(fx, op, "POST",
		    fx_str(fx, "/v1/nodes/%s/agent-token/revoke", a->name), "{}");
		assert_true(r->status == 200 || r->status == 204);
		/* re-enrolled (a newer live token) and speaking with it */
		int64_t got = 0;
		for (int k = 0; k < 200 && got != 1; k++) {
			int st;
			if (waitpid(a->pid, &st, WNOHANG) == a->pid) {
				a->pid = 0;
				dump_agent_log(fx, a);
				fail_msg("round %d: the agent exited (status %d)", i, st);
			}
			got = fx_sql_int64(fx, spoke_sql, a->name,
			    fx_str(fx, "%lld", (long long)before));
			if (got != 1)
				usleep(50000);
		}
		if (got != 1) {
			dump_agent_log(fx, a);
			fail_msg("round %d: the agent did not re-enroll and speak within 10 s", i);
		}
		assert_int_equal(access(tok_path, F_OK), -1); /* spent, removed */
	}
	/* and it converges: a layout is realized, the pool active */
	request_on(fx, a, "create", "p-rb", "[\"H100-80GB/3g.40gb=1\"]");
	wait_count(fx, a, 1, pool_status_sql(), "p-rb");
	request_pool(fx, "release", "p-rb", NULL);
	agent_retire(fx, a);
}

/* ---- a TCP proxy in a child process: the agent's way to the server,
 * cut (the proxy killed: connections refused and reset) and restored
 * (started again on the same port) by the test ---- */

static void
relay(int x, int y)
{
	struct pollfd p[2] = { { .fd = x, .events = POLLIN }, { .fd = y, .events = POLLIN } };
	char buf[65536];
	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		for (int i = 0; i < 2; i++) {
			if ((p[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0)
				continue;
			ssize_t n = read(p[i].fd, buf, sizeof(buf));
			if (n <= 0)
				return;
			int to = i == 0 ? y : x;
			for (ssize_t off = 0; off < n;) {
				ssize_t w = write(to, buf + off, (size_t)(n - off));
				if (w <= 0)
					return;
				off += w;
			}
		}
	}
}

static pid_t
proxy_start(int port, int to_port)
{
	int s = socket(AF_INET, SOCK_STREAM, 0), one = 1;
	assert_true(s >= 0);
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int rc = -1;
	for (int i = 0; i < 100 && (rc = bind(s, (struct sockaddr *)&a, sizeof(a))) != 0; i++)
		usleep(50000);
	assert_int_equal(rc, 0);
	assert_int_equal(listen(s, 64), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		signal(SIGCHLD, SIG_IGN);
		for (;;) {
			int c = accept(s, NULL, NULL);
			if (c < 0)
				continue;
			if (fork() == 0) {
				prctl(PR_SET_PDEATHSIG, SIGKILL); /* the proxy gone: cut */
				close(s);
				int u = socket(AF_INET, SOCK_STREAM, 0);
				struct sockaddr_in t = { .sin_family = AF_INET,
					.sin_port = htons((uint16_t)to_port),
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
				if (u >= 0 && connect(u, (struct sockaddr *)&t, sizeof(t)) == 0)
					relay(c, u);
				_exit(0);
			}
			close(c);
		}
	}
	close(s);
	return pid;
}

static void
proxy_stop(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

/* The largest "buffered" the agent logged with a failed metrics send. */
static long long
logged_backlog(struct fixture *fx, const struct agent *a)
{
	char *s = ag_read_file(fx_str(fx, "%s/%s.log", fx->tmpdir, a->name), NULL);
	long long best = 0;
	for (const char *p = s; p != NULL && (p = strstr(p, "\"buffered\":\"")) != NULL; p++) {
		long long v = strtoll(p + 12, NULL, 10);
		if (v > best)
			best = v;
	}
	free(s);
	return best;
}

/*
 * Issue 19, finding 2: an agent cut off from the server long enough to
 * buffer more than 1 MiB of samples (8 GPUs sampled every 5 ms: the
 * backlog of about 2 hours at the default 15 s, made in seconds) delivers
 * its backlog, oldest first and without gaps, once the server is back.
 * Before, a batch of 5000 samples (~1.6 MB) was answered 413 and resent
 * forever: nothing after the outage was ever stored.
 */
static void
test_metrics_backlog_after_outage(void **state)
{
	struct fixture *fx = *state;
	struct agent *a =
	    agent_new(fx, "e2e-mb", false, "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":8}]}");
	a->server_port = free_port();
	pid_t proxy = proxy_start(a->server_port, fx->server->agent_port);
	a->extra[0] = "--metrics-interval-ms";
	a->extra[1] = "5";
	a->extra[2] = "--max-buffered-samples";
	a->extra[3] = "100000";
	agent_spawn(fx, a, enroll_token(fx));
	wait_count(fx, a, 1,
	    "SELECT least(count(*), 1) FROM gpu_metric_samples s JOIN gpus g ON g.id = s.gpu_id "
	    "JOIN nodes n ON n.id = g.node_id WHERE n.name = $1",
	    a->name);
	/* cut: until the agent holds more than 1 MiB (> 3500 samples of ~330
	 * bytes of JSON each) */
	const char *down = fx_sql_text(fx, "SELECT now()::text");
	proxy_stop(proxy);
	long long held = 0;
	for (int i = 0; i < 600 && held < 3500; i++) {
		usleep(100000);
		held = logged_backlog(fx, a);
	}
	if (held < 3500) {
		dump_agent_log(fx, a);
		fail_msg("the agent never reported a backlog of 3500 samples (%lld)", held);
	}
	const char *up = fx_sql_text(fx, "SELECT now()::text");
	proxy = proxy_start(a->server_port, fx->server->agent_port);
	/* delivered: at least what it held, taken during the outage */
	const char *in_outage =
	    "SELECT count(*) FROM gpu_metric_samples s JOIN gpus g ON g.id = s.gpu_id "
	    "JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 AND s.ts > $2::timestamptz "
	    "AND s.ts < $3::timestamptz";
	int64_t got = 0;
	for (int i = 0; i < 600 && got < held - 16; i++) {
		got = fx_sql_int64(fx, in_outage, a->name, down, up);
		if (got < held - 16)
			usleep(100000);
	}
	if (got < held - 16) {
		dump_agent_log(fx, a);
		fail_msg("backlog not delivered: %lld of %lld samples", (long long)got, held);
	}
	/* no hole in the series: per GPU, no gap of 2 s between samples (one
	 * is taken every 5 ms; the count above shows none was lost) */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT s.ts - lag(s.ts) OVER (PARTITION BY "
			     "s.gpu_id ORDER BY s.ts) AS gap FROM gpu_metric_samples s JOIN gpus g "
			     "ON g.id = s.gpu_id JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 "
			     "AND s.ts > $2::timestamptz AND s.ts < $3::timestamptz) x "
			     "WHERE gap > interval '2 seconds'",
			     a->name, down, up),
	    0);
	/* every batch fit: never a 413 (halved, or failed as before the fix) */
	char *log = ag_read_file(fx_str(fx, "%s/%s.log", fx->tmpdir, a->name), NULL);
	assert_non_null(log);
	assert_null(strstr(log, "too large (413)"));
	assert_null(strstr(log, "\"status\":\"413\""));
	free(log);
	agent_kill(a, SIGTERM);
	proxy_stop(proxy);
	assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/cordon", a->name), "{}"),
	    200);
}

/* XIDs and ECC from the fake backend's fault file: an application XID (13)
 * leaves the GPU healthy, a fatal one (79, fallen off the bus) and an
 * uncorrectable ECC error mark it failed, raise an alert and take it out
 * of placement. */
static void
test_faults_mark_gpus_failed(void **state)
{
	struct fixture *fx = *state;
	struct agent *a =
	    agent_new(fx, "e2e-f", true, "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":3}]}");
	agent_spawn(fx, a, enroll_token(fx));
	wait_count(fx, a, 3,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 "
	    "AND g.health = 'ok'",
	    a->name);
	const char *faults = "{\"gpus\":[{\"index\":0,\"xids\":[13]}]}";
	const char *fpath = fx_str(fx, "%s/fake-faults.json", a->dir);
	assert_int_equal(ag_write_file(fpath, faults, strlen(faults), 0644), 0);
	/* the XID is reported (the agent logs it) but GPU 0 stays healthy */
	sleep(3);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id "
			     "WHERE n.name = $1 AND g.health = 'ok'",
			     a->name),
	    3);
	faults = "{\"gpus\":[{\"index\":0,\"xids\":[13]},{\"index\":1,\"xids\":[79]},"
		 "{\"index\":2,\"ecc_uncorrected\":4}]}";
	assert_int_equal(ag_write_file(fpath, faults, strlen(faults), 0644), 0);
	wait_count(fx, a, 2,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1 "
	    "AND g.health = 'failed'",
	    a->name);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT g.gpu_index FROM gpus g JOIN nodes n ON n.id = g.node_id "
			     "WHERE n.name = $1 AND g.health = 'ok'",
			     a->name),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts al JOIN nodes n ON n.id = al.node_id "
			     "WHERE n.name = $1 AND al.type = 'gpu_failed' AND al.resolved_at IS NULL",
			     a->name),
	    2);
	/* out of placement: two 7g.80gb do not fit on this node any more */
	const char *others = fx_sql_text(fx,
	    "SELECT coalesce(string_agg(name, ' '), '') FROM nodes WHERE name <> $1 "
	    "AND status = 'ready'",
	    a->name);
	char list[2048];
	snprintf(list, sizeof(list), "%s", others);
	for (char *sv = NULL, *n = strtok_r(list, " ", &sv); n; n = strtok_r(NULL, " ", &sv))
		assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/cordon", n),
				  NULL),
		    200);
	struct gp_client_response *r =
	    fx_request(fx, alice, "POST", "/v1/projects/pa/pool-requests",
		"{\"action\":\"create\",\"pool\":\"p6\",\"items\":[\"H100-80GB/7g.80gb=2\"],"
		"\"justification\":\"e2e\"}");
	assert_status(r, 201);
	int64_t id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	assert_true(r->status == 409 || r->status == 422);
	request_pool(fx, "create", "p6b", "[\"H100-80GB/7g.80gb=1\"]");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT g.gpu_index FROM allocations al JOIN pools p ON p.id = al.pool_id "
			     "JOIN gpus g ON g.id = al.gpu_id WHERE p.name = 'p6b'"),
	    0);
	snprintf(list, sizeof(list), "%s", others);
	for (char *sv = NULL, *n = strtok_r(list, " ", &sv); n; n = strtok_r(NULL, " ", &sv))
		assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/uncordon", n),
				  NULL),
		    200);
	wait_count(fx, a, 1, pool_status_sql(), "p6b");
	request_pool(fx, "release", "p6b", NULL);
	agent_kill(a, SIGTERM);
}

/* A silent agent (SIGSTOP) makes its node unknown after the grace period
 * (5 s here) and ready again once it speaks (SIGCONT). */
static void
test_silent_agent_unknown(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "e2e-g", true, NULL);
	agent_spawn(fx, a, enroll_token(fx));
	wait_count(fx, a, 1, "SELECT count(*) FROM nodes WHERE name = $1 AND status = 'ready'",
	    a->name);
	kill(a->pid, SIGSTOP);
	wait_count(fx, a, 1, "SELECT count(*) FROM nodes WHERE name = $1 AND status = 'unknown'",
	    a->name);
	kill(a->pid, SIGCONT);
	wait_count(fx, a, 1, "SELECT count(*) FROM nodes WHERE name = $1 AND status = 'ready'",
	    a->name);
	agent_kill(a, SIGTERM);
}

/* The nvml backend, real code in a real agent process, against the
 * stand-in libnvidia-ml.so.1 (tests/fixtures/nvml-stub/h100x2.json): GPU 1
 * carries an uncorrectable ECC error, a remap failure and XID 48, so it is
 * failed; the layout lands on GPU 0 at exactly the placements chosen. */
static void
test_nvml_backend_e2e(void **state)
{
	struct fixture *fx = *state;
	struct agent *a = agent_new(fx, "e2e-nvml", true, NULL);
	a->nvml = true;
	const char *stub_state = fx_str(fx, "%s/nvml-stub-state.json", fx->tmpdir);
	setenv("GPUPOOL_NVML_STUB_CONFIG", FIXTURES_DIR "/nvml-stub/h100x2.json", 1);
	setenv("GPUPOOL_NVML_STUB_STATE", stub_state, 1);
	agent_spawn(fx, a, enroll_token(fx));
	wait_count(fx, a, 3,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1",
	    a->name);
	wait_count(fx, a, 1, "SELECT count(*) FROM gpus WHERE uuid = $1 AND health = 'failed'",
	    "GPU-66666666-7777-8888-9999-000000000000");
	request_on(fx, a, "create", "p7", "[\"H100-80GB/3g.40gb=1\",\"H100-80GB/2g.20gb=2\"]");
	wait_count(fx, a, 1, pool_status_sql(), "p7");
	assert_string_equal(fx_sql_text(fx,
				"SELECT DISTINCT g.uuid FROM allocations al JOIN pools p ON p.id = "
				"al.pool_id JOIN gpus g ON g.id = al.gpu_id WHERE p.name = 'p7'"),
	    "GPU-11111111-2222-3333-4444-555555555555");
	/* the stub's GPU 0 holds GPU + compute instances at those placements */
	struct json_object *o = json_object_from_file(stub_state);
	assert_non_null(o);
	struct json_object *gis = gp_client_json_get(o, "[0].gis");
	assert_int_equal(json_object_array_length(gis), 3);
	const char *want = fx_sql_text(fx,
	    "SELECT string_agg(al.start || ':' || al.size, ' ' ORDER BY al.start) FROM allocations al "
	    "JOIN pools p ON p.id = al.pool_id WHERE p.name = 'p7'");
	char got[128] = "";
	for (int s0 = 0; s0 < 8; s0++)
		for (size_t i = 0; i < 3; i++) {
			struct json_object *g = json_object_array_get_idx(gis, i);
			if (json_object_get_int(gp_client_json_get(g, "start")) != s0)
				continue;
			assert_int_equal(json_object_get_int(gp_client_json_get(g, "ci")), 1);
			char one[32];
			snprintf(one, sizeof(one), "%s%d:%d", got[0] ? " " : "", s0,
			    json_object_get_int(gp_client_json_get(g, "size")));
			strncat(got, one, sizeof(got) - strlen(got) - 1);
		}
	json_object_put(o);
	assert_string_equal(got, want);
	/* MIG device UUIDs from the stub became the allocations' device UUIDs */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations al JOIN pools p ON p.id = al.pool_id "
			     "WHERE p.name = 'p7' AND al.device_uuid LIKE 'MIG-11111111-stub-%'"),
	    3);
	request_pool(fx, "release", "p7", NULL);
	wait_count(fx, a, 3,
	    "SELECT count(*) FROM allocations al JOIN pools p ON p.id = al.pool_id "
	    "WHERE p.name = $1 AND al.state = 'released'",
	    "p7");
	o = json_object_from_file(stub_state);
	assert_int_equal(json_object_array_length(gp_client_json_get(o, "[0].gis")), 0);
	json_object_put(o);
	agent_kill(a, SIGTERM);
}

/*
 * Two replicas and a server crash with a real agent: the agent long-polls
 * replica A while the approval is made on replica B (a NOTIFY wakes A). A
 * pod of a namespace that is not the project's on the pool's device raises
 * an isolation alert, resolved when the pod is gone. Then A is killed with
 * SIGKILL and started again on its port, B is stopped, and the agent, left
 * running, converges on a release made after the restart.
 */
static void
test_replicas_crash_isolation(void **state)
{
	struct fixture *fx = *state;
	struct fx_server *a = fx->server, *b;
	int port_a = a->port, agent_port_a = a->agent_port;

	struct agent *ag = agent_new(fx, "e2e-r", false, NULL);
	agent_spawn(fx, ag, enroll_token(fx)); /* --server: replica A */
	wait_count(fx, ag, 2,
	    "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id WHERE n.name = $1",
	    ag->name);
	b = fixture_server_start(fx, NULL);
	assert_non_null(b);
	fx->server = b; /* the approval on the other replica */
	request_on(fx, ag, "create", "p9", "[\"H100-80GB/1g.10gb=1\"]");
	fx->server = a;
	wait_count(fx, ag, 1, pool_status_sql(), "p9");
	const char *dev = fx_sql_text(fx,
	    "SELECT a.device_uuid FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = 'p9'");
	assert_memory_equal(dev, "MIG-", 4);

	/* a pod of a foreign namespace on the pool's device */
	const char *faults = fx_str(fx,
	    "{\"pods\":[{\"device_uuid\":\"%s\",\"namespace\":\"intruder\",\"pod\":\"miner-0\","
	    "\"container\":\"c\"}]}",
	    dev);
	const char *fpath = fx_str(fx, "%s/fake-faults.json", ag->dir);
	assert_int_equal(ag_write_file(fpath, faults, strlen(faults), 0644), 0);
	wait_count(fx, ag, 1,
	    "SELECT count(*) FROM alerts a JOIN pools p ON p.id = a.pool_id WHERE "
	    "a.type = 'isolation_violation' AND a.resolved_at IS NULL AND p.name = $1",
	    "p9");
	assert_int_equal(ag_write_file(fpath, "{}", 2, 0644), 0);
	wait_count(fx, ag, 0,
	    "SELECT count(*) FROM alerts a JOIN pools p ON p.id = a.pool_id WHERE "
	    "a.type = 'isolation_violation' AND a.resolved_at IS NULL AND p.name = $1",
	    "p9");

	/* A dies under the agent's long-poll and comes back on its port; B stops */
	fixture_server_kill(fx, a);
	assert_int_equal(fixture_server_stop(fx, b), 0);
	const char *env[] = { fx_str(fx, "GPUPOOL_LISTEN=127.0.0.1:%d", port_a),
		fx_str(fx, "GPUPOOL_AGENT_LISTEN=127.0.0.1:%d", agent_port_a), NULL };
	a = fixture_server_start(fx, env);
	assert_non_null(a);
	fx->server = a;
	request_on(fx, ag, "release", "p9", NULL);
	wait_count(fx, ag, 1,
	    "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = $1 AND a.state = 'released'",
	    "p9");
	wait_count(fx, ag, 1, "SELECT count(*) FROM pools WHERE name = $1 AND status = 'released'",
	    "p9");
	assert_true(ag->pid > 0 && kill(ag->pid, 0) == 0); /* the same agent process */
	agent_retire(fx, ag);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enroll_approve_release),
		cmocka_unit_test(test_longpoll_only_and_kill9),
		cmocka_unit_test(test_failed_apply_degrades),
		cmocka_unit_test(test_push_signature_and_token_scope),
		cmocka_unit_test(test_revoked_token_reenroll),
		cmocka_unit_test(test_reenroll_while_busy_50_times),
		cmocka_unit_test(test_metrics_backlog_after_outage),
		cmocka_unit_test(test_faults_mark_gpus_failed),
		cmocka_unit_test(test_silent_agent_unknown),
		cmocka_unit_test(test_nvml_backend_e2e),
		cmocka_unit_test(test_replicas_crash_isolation),
	};
	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
