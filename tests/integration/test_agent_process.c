/*
 * test_agent_process.c - real gpupool-agent processes (fake backend) and
 * their push listener, without a gpupoold: the state dir is seeded with a
 * node token and push secret as after an enrollment, and --server points
 * at a closed port (the agent backs off there). Signed pushes apply
 * layouts; unsigned, wrongly signed or stale ones get 401 and change
 * nothing; older generations are no-ops; kill -9 and restart keeps the
 * instances; an unenrolled agent without an enrollment token exits 3;
 * the after-change hook (--after-change-hook) runs after layout changes.
 * The end-to-end tests against gpupoold are in test_agent_e2e.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "core/timeutil.h"
#include "gp_client.h"
#include "push.h"
#include "util.h"

#define SECRET "5b1f0e4c2a7d9e8f6b3c1a0d4e2f7a9c8b6d5e3f1a2c4b7d9e0f8a6c3b5d7e91"

struct ctx {
	bool nvml; /* --backend nvml against the stand-in libnvidia-ml.so.1 */
	char dir[256];
	char gpus[300];
	int port;
	pid_t pid;
	char gpu0[AG_UUID_MAX];
	char server[128];    /* --server; "": a closed port */
	const char *more[6]; /* more arguments for spawn, NULL-ended */
};

static int
free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	assert_int_equal(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(s, (struct sockaddr *)&a, &l), 0);
	close(s);
	return ntohs(a.sin_port);
}

static pid_t
spawn(struct ctx *c, const char *extra, const char *logname)
{
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char log[400], listen[64], *argv[32];
		snprintf(log, sizeof(log), "%s/%s", c->dir, logname);
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		dup2(fd, 1);
		dup2(fd, 2);
		snprintf(listen, sizeof(listen), "127.0.0.1:%d", c->port);
		int n = 0;
		argv[n++] = (char *)AGENT_PATH;
		argv[n++] = "--server";
		argv[n++] = c->server[0] ? c->server : "http://127.0.0.1:1";
		argv[n++] = "--node-name";
		argv[n++] = "proc-node";
		argv[n++] = "--state-dir";
		argv[n++] = c->dir;
		argv[n++] = "--backend";
		if (c->nvml) {
			argv[n++] = "nvml";
			argv[n++] = "--nvml-lib";
			argv[n++] = (char *)NVML_STUB_PATH;
		} else {
			argv[n++] = "fake";
			argv[n++] = "--fake-gpus";
			argv[n++] = c->gpus;
		}
		argv[n++] = "--listen";
		argv[n++] = listen;
		argv[n++] = "--heartbeat-interval";
		argv[n++] = "1";
		if (extra != NULL)
			argv[n++] = (char *)extra;
		for (int i = 0; i < 6 && c->more[i] != NULL; i++)
			argv[n++] = (char *)c->more[i];
		argv[n] = NULL;
		execv(AGENT_PATH, argv);
		_exit(127);
	}
	return pid;
}

static void
wait_listening(struct ctx *c)
{
	for (int i = 0; i < 100; i++) {
		int s = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET,
			.sin_port = htons((uint16_t)c->port),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int ok = connect(s, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(s);
		if (ok)
			return;
		usleep(50000);
	}
	fail_msg("the agent's push listener never came up");
}

static int
setup(void **state)
{
	struct ctx *c = calloc(1, sizeof(*c));
	snprintf(c->dir, sizeof(c->dir), "/tmp/gp-agent-proc-XXXXXX");
	assert_non_null(mkdtemp(c->dir));
	char p[400];
	snprintf(p, sizeof(p), "%s/token", c->dir);
	assert_int_equal(ag_write_file(p, "gpn_seeded", 10, 0600), 0);
	snprintf(p, sizeof(p), "%s/push-secret", c->dir);
	assert_int_equal(ag_write_file(p, SECRET, strlen(SECRET), 0600), 0);
	snprintf(c->gpus, sizeof(c->gpus), "%s/gpus.json", c->dir);
	const char *g = "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":2}]}";
	assert_int_equal(ag_write_file(c->gpus, g, strlen(g), 0644), 0);
	ag_derive_uuid("GPU", "proc-node/0", c->gpu0, sizeof(c->gpu0));
	c->port = free_port();
	c->pid = spawn(c, NULL, "agent.log");
	wait_listening(c);
	*state = c;
	return 0;
}

static int
teardown(void **state)
{
	struct ctx *c = *state;
	int st = 0;
	if (c->pid > 0) {
		kill(c->pid, SIGTERM);
		waitpid(c->pid, &st, 0);
	}
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", c->dir);
	int rc = system(cmd);
	free(c);
	/* SIGTERM is a clean stop */
	return rc == 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* POST body to the agent, signed with secret at ts (NULL: unsigned). */
static long
push(struct ctx *c, const char *body, const char *secret, long long ts, char *answer, size_t alen)
{
	char base[64], tsh[64], sigh[128], sig[80], tss[32];
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", c->port);
	snprintf(tss, sizeof(tss), "%lld", ts);
	snprintf(tsh, sizeof(tsh), "X-Gpupool-Timestamp: %s", tss);
	const char *hdrs[3] = { tsh, NULL, NULL };
	if (secret != NULL) {
		assert_int_equal(push_sign(secret, tss, body, strlen(body), sig, sizeof(sig)), 0);
		snprintf(sigh, sizeof(sigh), "X-Gpupool-Signature: %s", sig);
		hdrs[1] = sigh;
	}
	struct gp_client *cl = gp_client_create(base, NULL);
	struct gp_client_response r;
	assert_int_equal(gp_client_request(cl, "POST", "/v1/desired-state", body, strlen(body),
			     hdrs, &r),
	    0);
	long st = r.status;
	if (answer != NULL)
		ag_strlcpy(answer, r.body ? r.body : "", alen);
	gp_client_response_free(&r);
	gp_client_destroy(cl);
	return st;
}

static char *
doc(struct ctx *c, long long gen, const char *instances)
{
	static char buf[2048];
	snprintf(buf, sizeof(buf),
	    "{\"generation\":%lld,\"node\":\"proc-node\",\"gpus\":[{\"uuid\":\"%s\",\"index\":0,"
	    "\"mig_enabled\":true,\"instances\":[%s]}]}",
	    gen, c->gpu0, instances);
	return buf;
}

/* The fake backend's realized instances of GPU 0, as "profile@start ..." */
static void
realized(struct ctx *c, char *out, size_t len)
{
	char p[400];
	snprintf(p, sizeof(p), "%s/fake-state.json", c->dir);
	out[0] = '\0';
	char *s = ag_read_file(p, NULL);
	if (s == NULL)
		return;
	struct json_object *o = json_tokener_parse(s);
	free(s);
	struct json_object *arr = gp_client_json_get(o, "gpus[0].instances");
	for (size_t i = 0; arr != NULL && i < json_object_array_length(arr); i++) {
		struct json_object *in = json_object_array_get_idx(arr, i);
		char one[64];
		snprintf(one, sizeof(one), "%s%s@%d", out[0] ? " " : "",
		    json_object_get_string(gp_client_json_get(in, "profile")),
		    json_object_get_int(gp_client_json_get(in, "start")));
		strncat(out, one, len - strlen(out) - 1);
	}
	json_object_put(o);
}

static void
test_signed_push_applies(void **state)
{
	struct ctx *c = *state;
	char ans[256], got[256], body[2048];
	long long now = ag_now();
	snprintf(body, sizeof(body), "%s",
	    doc(c, 5,
		"{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4},"
		"{\"profile\":\"2g.20gb\",\"start\":0,\"size\":2}"));
	/* unsigned, wrong secret, stale, from the future, tampered: 401, nothing changes */
	assert_int_equal(push(c, body, NULL, now, ans, sizeof(ans)), 401);
	assert_int_equal(push(c, body, "not-the-secret", now, ans, sizeof(ans)), 401);
	assert_int_equal(push(c, body, SECRET, now - 301, ans, sizeof(ans)), 401);
	assert_non_null(strstr(ans, "300"));
	assert_int_equal(push(c, body, SECRET, now + 400, ans, sizeof(ans)), 401);
	realized(c, got, sizeof(got));
	assert_string_equal(got, "");
	/* signed: applied, answered with the generation */
	assert_int_equal(push(c, body, SECRET, now, ans, sizeof(ans)), 200);
	assert_string_equal(ans, "{\"observed_generation\":5}");
	realized(c, got, sizeof(got));
	assert_string_equal(got, "3g.40gb@4 2g.20gb@0");
	/* an older generation is a no-op, answered with the applied one */
	assert_int_equal(push(c, doc(c, 4, ""), SECRET, now, ans, sizeof(ans)), 200);
	assert_string_equal(ans, "{\"observed_generation\":5}");
	realized(c, got, sizeof(got));
	assert_string_equal(got, "3g.40gb@4 2g.20gb@0");
	/* a replay of the same push: no-op */
	assert_int_equal(push(c, body, SECRET, now, ans, sizeof(ans)), 200);
	realized(c, got, sizeof(got));
	assert_string_equal(got, "3g.40gb@4 2g.20gb@0");
	/* signed but not a desired state: 400, nothing changes */
	assert_int_equal(push(c, "{\"gpus\":[]}", SECRET, now, ans, sizeof(ans)), 400);
	assert_int_equal(push(c, "not json", SECRET, now, ans, sizeof(ans)), 400);
}

static void
test_kill9_restart_converges(void **state)
{
	struct ctx *c = *state;
	char ans[256], got[256];
	long long now = ag_now();
	char body[2048];
	snprintf(body, sizeof(body), "%s",
	    doc(c, 7, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}"));
	assert_int_equal(push(c, body, SECRET, now, ans, sizeof(ans)), 200);
	realized(c, got, sizeof(got));
	assert_string_equal(got, "7g.80gb@0");
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
	c->pid = spawn(c, NULL, "agent2.log");
	wait_listening(c);
	/* the instance survived (hardware state); a restarted agent applies a
	 * re-layout that only fits by destroying first */
	realized(c, got, sizeof(got));
	assert_string_equal(got, "7g.80gb@0");
	snprintf(body, sizeof(body), "%s",
	    doc(c, 8,
		"{\"profile\":\"3g.40gb\",\"start\":0,\"size\":4},"
		"{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4}"));
	assert_int_equal(push(c, body, SECRET, now, ans, sizeof(ans)), 200);
	assert_string_equal(ans, "{\"observed_generation\":8}");
	realized(c, got, sizeof(got));
	assert_string_equal(got, "3g.40gb@0 3g.40gb@4");
}

static void
test_listener_edges(void **state)
{
	struct ctx *c = *state;
	char base[64];
	snprintf(base, sizeof(base), "http://127.0.0.1:%d", c->port);
	struct gp_client *cl = gp_client_create(base, NULL);
	struct gp_client_response r;
	assert_int_equal(gp_client_get(cl, "/v1/desired-state", &r), 0);
	assert_int_equal(r.status, 405);
	gp_client_response_free(&r);
	assert_int_equal(gp_client_get(cl, "/metrics", &r), 0);
	assert_int_equal(r.status, 404);
	gp_client_response_free(&r);
	size_t big = 2 * 1024 * 1024;
	char *huge = malloc(big + 1);
	memset(huge, ' ', big);
	huge[big] = '\0';
	assert_int_equal(gp_client_request(cl, "POST", "/v1/desired-state", huge, big, NULL, &r),
	    0);
	assert_int_equal(r.status, 413);
	gp_client_response_free(&r);
	free(huge);
	gp_client_destroy(cl);
	/* the state dir holds the secrets 0600 in a 0700 directory */
	struct stat st;
	assert_int_equal(stat(c->dir, &st), 0);
	assert_int_equal(st.st_mode & 077, 0);
}

static void
test_unenrolled_without_token_exits_3(void **state)
{
	struct ctx *c = *state;
	/* a second agent, its own empty state dir, no enrollment token anywhere */
	struct ctx d = *c;
	char other[300];
	snprintf(other, sizeof(other), "%s/other", c->dir);
	ag_strlcpy(d.dir, other, sizeof(d.dir));
	assert_int_equal(mkdir(d.dir, 0700), 0);
	d.port = free_port();
	unsetenv("GPUPOOL_ENROLL_TOKEN");
	pid_t pid = spawn(&d, NULL, "other.log");
	int st;
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3);
	/* bad flags: 2 */
	pid = spawn(&d, "--poll-interval=61", "other.log");
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 2);
}

/* The same flow with --backend nvml: the nvml backend's real code in a
 * real agent process, against the stand-in libnvidia-ml.so.1 whose MIG
 * state file plays the hardware (it outlives the agent). */
static void
test_nvml_backend_process(void **state)
{
	struct ctx *c = *state;
	char stub_state[400], ans[256];
	snprintf(stub_state, sizeof(stub_state), "%s/nvml-stub-state.json", c->dir);
	setenv("GPUPOOL_NVML_STUB_CONFIG", FIXTURES_DIR "/nvml-stub/h100x2.json", 1);
	setenv("GPUPOOL_NVML_STUB_STATE", stub_state, 1);
	struct ctx d = *c;
	d.nvml = true;
	d.port = free_port();
	ag_strlcpy(d.gpu0, "GPU-11111111-2222-3333-4444-555555555555", sizeof(d.gpu0));
	d.pid = spawn(&d, NULL, "nvml.log");
	wait_listening(&d);
	long long now = ag_now();
	char body[2048];
	snprintf(body, sizeof(body), "%s",
	    doc(&d, 3,
		"{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4},"
		"{\"profile\":\"2g.20gb\",\"start\":0,\"size\":2},"
		"{\"profile\":\"2g.20gb\",\"start\":2,\"size\":2}"));
	assert_int_equal(push(&d, body, SECRET, now, ans, sizeof(ans)), 200);
	assert_string_equal(ans, "{\"observed_generation\":3}");
	char *st = ag_read_file(stub_state, NULL);
	assert_non_null(st);
	/* GPU instances with compute instances at exactly those placements */
	struct json_object *o = json_tokener_parse(st);
	free(st);
	struct json_object *gis = gp_client_json_get(o, "[0].gis");
	assert_non_null(gis);
	assert_int_equal(json_object_array_length(gis), 3);
	int mask = 0;
	for (size_t i = 0; i < 3; i++) {
		struct json_object *g = json_object_array_get_idx(gis, i);
		assert_int_equal(json_object_get_int(gp_client_json_get(g, "ci")), 1);
		mask |= 1 << json_object_get_int(gp_client_json_get(g, "start"));
	}
	assert_int_equal(mask, (1 << 0) | (1 << 2) | (1 << 4));
	json_object_put(o);
	/* kill -9, restart: a re-layout to one 7g.80gb destroys all three first */
	kill(d.pid, SIGKILL);
	waitpid(d.pid, NULL, 0);
	d.pid = spawn(&d, NULL, "nvml2.log");
	wait_listening(&d);
	snprintf(body, sizeof(body), "%s",
	    doc(&d, 4, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}"));
	assert_int_equal(push(&d, body, SECRET, now, ans, sizeof(ans)), 200);
	st = ag_read_file(stub_state, NULL);
	o = json_tokener_parse(st);
	free(st);
	gis = gp_client_json_get(o, "[0].gis");
	assert_int_equal(json_object_array_length(gis), 1);
	assert_int_equal(json_object_get_int(gp_client_json_get(gis, "[0].size")), 8);
	json_object_put(o);
	kill(d.pid, SIGTERM);
	int ws;
	waitpid(d.pid, &ws, 0);
	assert_true(WIFEXITED(ws));
	assert_int_equal(WEXITSTATUS(ws), 0);
}

/* --discover (read-only, what an operator runs on a new node) prints the
 * GPUs and one telemetry sample stamped now. It printed 1970-01-01: seen
 * on a real H200 (tests/fixtures/nvidia-smi/…h200…). */
static void
test_discover_stamps_now(void **state)
{
	struct ctx *c = *state;
	char cmd[1024], out[8192];
	snprintf(cmd, sizeof(cmd), "%s --discover --backend fake --fake-gpus %s --node-name d1",
	    AGENT_PATH, c->gpus);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	assert_int_equal(pclose(f), 0);
	struct json_object *o = json_tokener_parse(out);
	assert_non_null(o);
	assert_true(json_object_array_length(gp_client_json_get(o, "gpus")) >= 1);
	const char *ts = json_object_get_string(gp_client_json_get(o, "telemetry[0].ts"));
	assert_non_null(ts);
	int64_t us = 0;
	assert_int_equal(time_parse_rfc3339(ts, &us), 0);
	long long now = ag_now();
	assert_true(us / 1000000 > now - 60 && us / 1000000 <= now + 1);
	json_object_put(o);
}

/*
 * Issue 19, finding 1: `--discover` with nvidia-smi's `mig -lgi` answering
 * "Insufficient Permissions" prints the MIG GPU as unknown with the
 * error and no instances, warns on stderr and exits 1. Before: the GPU
 * with MIG on and no instances, exit 0, no warning.
 */
static void
test_discover_partial_read_says_so(void **state)
{
	struct ctx *c = *state;
	char flag[400], cmd[1024], out[16384];
	snprintf(flag, sizeof(flag), "%s/fail-once", c->dir);
	assert_int_equal(ag_write_file(flag, "mig -lgi", 8, 0600), 0);
	snprintf(cmd, sizeof(cmd),
	    "GPUPOOL_SMI_FIXTURES=%s/nvidia-smi GPUPOOL_SMI_FAIL_ONCE=%s %s --discover "
	    "--backend nvidia-smi --nvidia-smi %s 2>%s/discover.err",
	    FIXTURES_DIR, flag, AGENT_PATH, SMI_STUB, c->dir);
	FILE *f = popen(cmd, "r");
	assert_non_null(f);
	size_t n = fread(out, 1, sizeof(out) - 1, f);
	out[n] = '\0';
	int st = pclose(f);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 1);
	struct json_object *o = json_tokener_parse(out);
	assert_non_null(o);
	assert_string_equal(json_object_get_string(gp_client_json_get(o, "gpus[0].state")),
	    "unknown");
	assert_non_null(strstr(json_object_get_string(gp_client_json_get(o, "gpus[0].error")),
	    "Insufficient Permissions"));
	assert_null(gp_client_json_get(o, "gpus[0].instances"));
	json_object_put(o);
	snprintf(cmd, sizeof(cmd), "%s/discover.err", c->dir);
	char *err = ag_read_file(cmd, NULL);
	assert_non_null(err);
	assert_non_null(strstr(err, "warning: GPU 0"));
	free(err);
}

/*
 * Issue 19, finding 9: the applied generation survives a restart, so a
 * signed push captured earlier (still inside its 300 s window) and
 * replayed after an agent restart is a no-op. Before, applied_generation
 * was saved but never loaded: the replay rolled the layout back.
 */
static void
test_replayed_push_after_restart_is_noop(void **state)
{
	struct ctx *c = *state;
	char ans[256], got[256], old[2048];
	long long now = ag_now();
	snprintf(old, sizeof(old), "%s",
	    doc(c, 5, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}"));
	assert_int_equal(push(c, old, SECRET, now, ans, sizeof(ans)), 200);
	assert_int_equal(push(c,
			     doc(c, 6,
				 "{\"profile\":\"3g.40gb\",\"start\":0,\"size\":4},"
				 "{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4}"),
			     SECRET, now, ans, sizeof(ans)),
	    200);
	assert_string_equal(ans, "{\"observed_generation\":6}");
	kill(c->pid, SIGTERM);
	waitpid(c->pid, NULL, 0);
	c->pid = spawn(c, NULL, "agent2.log");
	wait_listening(c);
	/* the captured push of generation 5, replayed: nothing changes */
	assert_int_equal(push(c, old, SECRET, now, ans, sizeof(ans)), 200);
	assert_string_equal(ans, "{\"observed_generation\":6}");
	realized(c, got, sizeof(got));
	assert_string_equal(got, "3g.40gb@0 3g.40gb@4");
}

/* ---- a stub gpupoold: the agent protocol as the tests script it ---- */

struct stub {
	int port, lsock;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int enrolls;            /* POST /v1/agent/enroll answered */
	int held_old_polls;     /* desired-state GETs with the old token being held */
	int new_token_requests; /* requests carrying the token handed out at enrollment */
	int stale_401s;         /* 401s answered to a request sent before the enrollment */
	char last_status[65536];
	int statuses;
	long long metrics_samples;
	char metric_uuids[4096]; /* gpu_uuid of every sample, space separated (bounded) */
	char desired[2048];      /* answered 200 to a poll whose after= is not its generation */
	long long desired_gen;
	int polls; /* desired-state GETs with the new token */
	bool stop;
};

static const char *
header_value(const char *req, const char *name)
{
	static __thread char v[512];
	const char *p = strstr(req, name);
	v[0] = '\0';
	if (p == NULL)
		return v;
	p += strlen(name);
	while (*p == ' ')
		p++;
	size_t n = strcspn(p, "\r\n");
	if (n >= sizeof(v))
		n = sizeof(v) - 1;
	memcpy(v, p, n);
	v[n] = '\0';
	return v;
}

static void
stub_answer(int fd, int status, const char *body)
{
	char head[256];
	const char *text = status == 200 ? "OK"
	    : status == 201              ? "Created"
	    : status == 204              ? "No Content"
	    : status == 304              ? "Not Modified"
					 : "Unauthorized";
	size_t len = body ? strlen(body) : 0;
	snprintf(head, sizeof(head),
	    "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
	    "Connection: close\r\n\r\n",
	    status, text, len);
	if (write(fd, head, strlen(head)) < 0 || (len > 0 && write(fd, body, len) < 0))
		return;
}

struct stub_conn {
	struct stub *s;
	int fd;
};

static void *
stub_conn(void *arg)
{
	struct stub_conn *sc = arg;
	struct stub *s = sc->s;
	int fd = sc->fd;
	free(sc);
	size_t cap = 1 << 20, n = 0;
	char *buf = malloc(cap + 1);
	char *body = NULL;
	size_t want = 0;
	for (;;) {
		ssize_t r = read(fd, buf + n, cap - n);
		if (r <= 0)
			break;
		n += (size_t)r;
		buf[n] = '\0';
		char *end = strstr(buf, "\r\n\r\n");
		if (end == NULL)
			continue;
		body = end + 4;
		want = (size_t)atol(header_value(buf, "Content-Length:"));
		if ((size_t)(buf + n - body) >= want || n >= cap)
			break;
	}
	if (body == NULL) {
		close(fd);
		free(buf);
		return NULL;
	}
	char method[8] = "", path[256] = "";
	sscanf(buf, "%7s %255s", method, path);
	char auth[512];
	ag_strlcpy(auth, header_value(buf, "Authorization:"), sizeof(auth));
	bool old = strstr(auth, "gpn_seeded") != NULL, fresh = strstr(auth, "gpn_new") != NULL;
	pthread_mutex_lock(&s->mu);
	if (strcmp(path, "/v1/agent/enroll") == 0) {
		/* answered once a poll with the old token is held: its 401
		 * then arrives after the new token (the race of finding 12) */
		for (int i = 0; i < 50 && s->held_old_polls == 0; i++) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&s->cv, &s->mu, &ts);
		}
		s->enrolls++;
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		stub_answer(fd, 201,
		    "{\"node_token\":\"gpn_new\",\"push_secret\":\"" SECRET "\",\"node\":{}}");
	} else if (old && strncmp(path, "/v1/agent/desired-state", 23) == 0 && s->enrolls == 0) {
		s->held_old_polls++;
		pthread_cond_broadcast(&s->cv);
		while (s->enrolls == 0 && !s->stop)
			pthread_cond_wait(&s->cv, &s->mu);
		s->stale_401s++;
		pthread_mutex_unlock(&s->mu);
		usleep(300000); /* the agent has stored the new token by now */
		stub_answer(fd, 401, "{\"code\":\"unauthorized\"}");
	} else if (!fresh) {
		pthread_mutex_unlock(&s->mu);
		stub_answer(fd, 401, "{\"code\":\"unauthorized\"}");
	} else {
		s->new_token_requests++;
		if (strncmp(path, "/v1/agent/desired-state", 23) == 0)
			s->polls++;
		if (strcmp(path, "/v1/agent/status") == 0) {
			ag_strlcpy(s->last_status, body, sizeof(s->last_status));
			s->statuses++;
		}
		if (strcmp(path, "/v1/agent/metrics") == 0) {
			struct json_object *o = json_tokener_parse(body), *arr;
			if (o != NULL && json_object_object_get_ex(o, "samples", &arr)) {
				s->metrics_samples += (long long)json_object_array_length(arr);
				for (size_t i = 0; i < json_object_array_length(arr); i++) {
					const char *u = json_object_get_string(
					    gp_client_json_get(json_object_array_get_idx(arr, i),
						"gpu_uuid"));
					if (u != NULL && strstr(s->metric_uuids, u) == NULL &&
					    strlen(s->metric_uuids) + strlen(u) + 2 <
						sizeof(s->metric_uuids)) {
						strcat(s->metric_uuids, u);
						strcat(s->metric_uuids, " ");
					}
				}
			}
			json_object_put(o);
		}
		pthread_cond_broadcast(&s->cv);
		pthread_mutex_unlock(&s->mu);
		const char *after = strstr(path, "after=");
		if (strncmp(path, "/v1/agent/desired-state", 23) == 0 && s->desired[0] != '\0' &&
		    after != NULL && atoll(after + 6) != s->desired_gen) {
			char d[2048];
			pthread_mutex_lock(&s->mu);
			ag_strlcpy(d, s->desired, sizeof(d));
			pthread_mutex_unlock(&s->mu);
			stub_answer(fd, 200, d);
		} else if (strncmp(path, "/v1/agent/desired-state", 23) == 0) {
			usleep(200000);
			stub_answer(fd, 304, NULL);
		} else if (strcmp(path, "/v1/agent/profiles") == 0) {
			stub_answer(fd, 204, NULL);
		} else {
			stub_answer(fd, 200, "{\"generation\":0}");
		}
	}
	close(fd);
	free(buf);
	return NULL;
}

static void *
stub_main(void *arg)
{
	struct stub *s = arg;
	for (;;) {
		int fd = accept(s->lsock, NULL, NULL);
		if (fd < 0)
			return NULL; /* closed: stop */
		struct stub_conn *sc = malloc(sizeof(*sc));
		sc->s = s;
		sc->fd = fd;
		pthread_t t;
		if (pthread_create(&t, NULL, stub_conn, sc) == 0)
			pthread_detach(t);
	}
}

/* Every stub ever started: never freed (connection threads may outlive a
 * test), but reachable, so not a leak. */
static struct stub *stubs[16];
static int nstubs;

static struct stub *
stub_start(void)
{
	struct stub *s = calloc(1, sizeof(*s));
	assert_true(nstubs < 16);
	stubs[nstubs++] = s;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cv, NULL);
	s->lsock = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	assert_int_equal(bind(s->lsock, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(s->lsock, (struct sockaddr *)&a, &l), 0);
	assert_int_equal(listen(s->lsock, 64), 0);
	s->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&s->thread, NULL, stub_main, s), 0);
	return s;
}

static void
stub_stop(struct stub *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	shutdown(s->lsock, SHUT_RDWR);
	close(s->lsock);
	pthread_join(s->thread, NULL);
	usleep(400000); /* connection threads finish (they hold no test state after) */
}

/*
 * Wait (30 s: a loaded 2-core machine under ctest -j2 once took more than
 * 10) until cond(s) holds, under the stub's lock.
 */
static bool
stub_wait(struct stub *s, bool (*cond)(struct stub *))
{
	bool ok = false;
	for (int i = 0; i < 300 && !ok; i++) {
		pthread_mutex_lock(&s->mu);
		ok = cond(s);
		pthread_mutex_unlock(&s->mu);
		if (!ok)
			usleep(100000);
	}
	return ok;
}

/* An agent of c's state dir talking to the stub, --listen on a new port. */
static void
respawn_on_stub(struct ctx *c, struct stub *s, const char *extra)
{
	kill(c->pid, SIGTERM);
	waitpid(c->pid, NULL, 0);
	snprintf(c->server, sizeof(c->server), "http://127.0.0.1:%d", s->port);
	c->port = free_port();
	c->pid = spawn(c, extra, "agent-stub.log");
}

static bool
spoke_after_stale_401(struct stub *s)
{
	return s->stale_401s == 1 && s->new_token_requests >= 6;
}

/*
 * Issue 19, finding 12, made deterministic with a stub server: the agent
 * starts with a revoked token; its long-poll with that token is held by
 * the stub until the agent has re-enrolled, and only then answered 401.
 * That stale 401 is ignored: one enrollment, the agent keeps running and
 * speaks with the new token (poll, heartbeat, status). Before, the stale
 * 401 undid the new token: the agent tried to enroll again with the spent
 * token and exited 3.
 */
static void
test_stale_401_after_reenroll_ignored(void **state)
{
	struct ctx *c = *state;
	char p[400];
	snprintf(p, sizeof(p), "%s/enroll-token", c->dir);
	assert_int_equal(ag_write_file(p, "gpe_spare", 9, 0600), 0);
	struct stub *s = stub_start();
	respawn_on_stub(c, s, NULL);
	bool ok = stub_wait(s, spoke_after_stale_401);
	int st = 0;
	bool alive = waitpid(c->pid, &st, WNOHANG) == 0;
	pthread_mutex_lock(&s->mu);
	int enrolls = s->enrolls, stale = s->stale_401s, fresh = s->new_token_requests;
	pthread_mutex_unlock(&s->mu);
	if (!alive)
		c->pid = 0;
	stub_stop(s);
	if (!ok || !alive) {
		char lp[400];
		snprintf(lp, sizeof(lp), "%s/agent-stub.log", c->dir);
		char *log = ag_read_file(lp, NULL);
		fprintf(stderr, "%s\n", log ? log : "");
		free(log);
	}
	assert_true(alive);
	assert_true(ok);
	assert_int_equal(enrolls, 1);
	assert_int_equal(stale, 1);
	assert_true(fresh >= 6);
	assert_int_equal(access(p, F_OK), -1); /* the spent enrollment token is gone */
}

static bool
lost_reported(struct stub *s)
{
	if (s->statuses == 0)
		return false;
	struct json_object *o = json_tokener_parse(s->last_status);
	const char *st1 = json_object_get_string(gp_client_json_get(o, "gpus[1].state"));
	bool ok = st1 != NULL && strcmp(st1, "lost") == 0 &&
	    gp_client_json_get(o, "gpus[0].state") == NULL;
	json_object_put(o);
	return ok;
}

/*
 * Issue 19, finding 1, the agent's side: GPU 1 of a running fake agent
 * set "lost": true is reported "lost" with the error and its identity in
 * the next status (GPU 0 stays ok, no "state"), and from then on only GPU
 * 0 has samples. Before, the fault did not exist and a failing GPU made
 * discovery fail for the whole node, the last snapshot resent as new.
 */
static void
test_lost_gpu_reported(void **state)
{
	struct ctx *c = *state;
	char p[400];
	snprintf(p, sizeof(p), "%s/token", c->dir);
	assert_int_equal(ag_write_file(p, "gpn_new", 7, 0600), 0);
	struct stub *s = stub_start();
	pthread_mutex_lock(&s->mu);
	s->enrolls = 1; /* no enrollment in this test */
	pthread_mutex_unlock(&s->mu);
	respawn_on_stub(c, s, "--metrics-interval-ms=100");
	const char *faults = "{\"gpus\":[{\"index\":1,\"lost\":true,\"xids\":[79]}]}";
	snprintf(p, sizeof(p), "%s/fake-faults.json", c->dir);
	assert_int_equal(ag_write_file(p, faults, strlen(faults), 0644), 0);
	bool ok = stub_wait(s, lost_reported);
	char gpu1[AG_UUID_MAX];
	ag_derive_uuid("GPU", "proc-node/1", gpu1, sizeof(gpu1));
	pthread_mutex_lock(&s->mu);
	struct json_object *o = json_tokener_parse(s->last_status);
	s->metric_uuids[0] = '\0'; /* samples from now on */
	pthread_mutex_unlock(&s->mu);
	assert_true(ok);
	assert_string_equal(json_object_get_string(gp_client_json_get(o, "gpus[1].uuid")), gpu1);
	assert_int_equal(json_object_get_int(gp_client_json_get(o, "gpus[1].index")), 1);
	assert_int_equal(json_object_get_int(gp_client_json_get(o, "gpus[1].xid")), 79);
	assert_non_null(
	    strstr(json_object_get_string(gp_client_json_get(o, "gpus[1].error")), "GPU is lost"));
	assert_null(gp_client_json_get(o, "gpus[1].instances"));
	assert_non_null(gp_client_json_get(o, "gpus[0].instances"));
	json_object_put(o);
	/* samples keep coming, for GPU 0 only */
	usleep(600000);
	pthread_mutex_lock(&s->mu);
	char uuids[4096];
	ag_strlcpy(uuids, s->metric_uuids, sizeof(uuids));
	pthread_mutex_unlock(&s->mu);
	stub_stop(s);
	assert_non_null(strstr(uuids, c->gpu0));
	assert_null(strstr(uuids, gpu1));
}

static bool
status_seen(struct stub *s)
{
	return s->statuses > 0;
}

static bool
stale_unknown_reported(struct stub *s)
{
	struct json_object *o = json_tokener_parse(s->last_status);
	const char *st = json_object_get_string(gp_client_json_get(o, "gpus[0].state"));
	const char *er = json_object_get_string(gp_client_json_get(o, "gpus[0].error"));
	bool ok = st != NULL && strcmp(st, "unknown") == 0 && er != NULL &&
	    strstr(er, "injected: nvidia-smi -q failed") != NULL &&
	    gp_client_json_get(o, "gpus[0].instances") == NULL &&
	    gp_client_json_get(o, "gpus[0].ecc_uncorrected") == NULL &&
	    gp_client_json_get(o, "gpus[1].state") != NULL;
	json_object_put(o);
	return ok;
}

/*
 * Issue 19, finding 1: a discovery that fails (fake "discovery_error")
 * while the server offers a new generation. The agent reports every GPU
 * unknown under its last identity (no instances, no health: never the
 * last snapshot as new), takes no samples, and the poller backs off
 * instead of asking again at once. Before, the old snapshot was resent
 * with fresh timestamps and the poller looped GET + discovery without
 * pause (hundreds of polls a second).
 */
static void
test_failed_discovery_backs_off_and_reports_unknown(void **state)
{
	struct ctx *c = *state;
	char p[400];
	snprintf(p, sizeof(p), "%s/token", c->dir);
	assert_int_equal(ag_write_file(p, "gpn_new", 7, 0600), 0);
	struct stub *s = stub_start();
	pthread_mutex_lock(&s->mu);
	s->enrolls = 1;
	pthread_mutex_unlock(&s->mu);
	respawn_on_stub(c, s, "--metrics-interval-ms=100");
	assert_true(stub_wait(s, status_seen));
	const char *faults = "{\"discovery_error\":\"injected: nvidia-smi -q failed\"}";
	snprintf(p, sizeof(p), "%s/fake-faults.json", c->dir);
	assert_int_equal(ag_write_file(p, faults, strlen(faults), 0644), 0);
	bool ok = stub_wait(s, stale_unknown_reported);
	pthread_mutex_lock(&s->mu);
	ag_strlcpy(s->desired, doc(c, 3, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}"),
	    sizeof(s->desired));
	s->desired_gen = 3;
	int polls0 = s->polls;
	long long samples0 = s->metrics_samples;
	pthread_mutex_unlock(&s->mu);
	usleep(3000000);
	pthread_mutex_lock(&s->mu);
	int polls = s->polls - polls0;
	long long samples = s->metrics_samples - samples0;
	pthread_mutex_unlock(&s->mu);
	stub_stop(s);
	assert_true(ok);
	/* backoff 1 s, 2 s, ...: a handful of polls in 3 s, not a hot loop */
	if (polls > 6)
		fail_msg("%d polls in 3 s while discovery fails", polls);
	assert_true(polls >= 1);
	assert_int_equal(samples, 0);
	char got[256];
	realized(c, got, sizeof(got));
	assert_string_equal(got, ""); /* nothing applied blind */
}

static bool
restored_observed(struct stub *s)
{
	struct json_object *o = json_tokener_parse(s->last_status);
	bool ok =
	    o != NULL && json_object_get_int64(gp_client_json_get(o, "observed_generation")) == 2;
	json_object_put(o);
	return ok;
}

/* The same through the nvml backend and the stand-in library: GPU 1 of
 * tests/fixtures/nvml-stub/h100x2.json turned "lost" while the agent runs
 * answers NVML_ERROR_GPU_IS_LOST; the agent reports it lost under its
 * UUID with NVML's error, the other GPUs ok. Before, nv_discover failed
 * for the whole node. */
static void
test_lost_gpu_reported_nvml(void **state)
{
	struct ctx *c = *state;
	char p[400], cfg[400], stub_state[400];
	snprintf(p, sizeof(p), "%s/token", c->dir);
	assert_int_equal(ag_write_file(p, "gpn_new", 7, 0600), 0);
	snprintf(cfg, sizeof(cfg), "%s/nvml.json", c->dir);
	snprintf(stub_state, sizeof(stub_state), "%s/nvml-stub-state.json", c->dir);
	struct json_object *conf = json_object_from_file(FIXTURES_DIR "/nvml-stub/h100x2.json"),
			   *gpus;
	assert_non_null(conf);
	assert_int_equal(json_object_to_file(cfg, conf), 0);
	setenv("GPUPOOL_NVML_STUB_CONFIG", cfg, 1);
	setenv("GPUPOOL_NVML_STUB_STATE", stub_state, 1);
	struct stub *s = stub_start();
	pthread_mutex_lock(&s->mu);
	s->enrolls = 1;
	pthread_mutex_unlock(&s->mu);
	c->nvml = true;
	respawn_on_stub(c, s, NULL);
	assert_true(stub_wait(s, status_seen));
	assert_true(json_object_object_get_ex(conf, "gpus", &gpus));
	json_object_object_add(json_object_array_get_idx(gpus, 1), "lost",
	    json_object_new_boolean(true));
	assert_int_equal(json_object_to_file(cfg, conf), 0);
	json_object_put(conf);
	bool ok = stub_wait(s, lost_reported);
	pthread_mutex_lock(&s->mu);
	struct json_object *o = json_tokener_parse(s->last_status);
	pthread_mutex_unlock(&s->mu);
	stub_stop(s);
	/* the next test's agent is a fake one again */
	kill(c->pid, SIGTERM);
	int ws;
	waitpid(c->pid, &ws, 0);
	c->pid = 0;
	c->nvml = false;
	assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
	assert_true(ok);
	assert_string_equal(json_object_get_string(gp_client_json_get(o, "gpus[1].uuid")),
	    "GPU-66666666-7777-8888-9999-000000000000");
	assert_non_null(strstr(json_object_get_string(gp_client_json_get(o, "gpus[1].error")),
	    "nvmlDeviceGetHandleByIndex_v2: GPU is lost"));
	assert_null(gp_client_json_get(o, "gpus[2].state"));
	assert_int_equal(json_object_array_length(gp_client_json_get(o, "gpus")), 3);
	json_object_put(o);
}

/*
 * CONTRACT.md, "Generations": a server restored from a backup answers a
 * poll with a generation BELOW the applied one; the agent applies it and
 * records it (status observed_generation 2, agent.json), where a push of
 * such a generation is a no-op. Before, it was ignored forever.
 */
static void
test_restored_server_lower_generation_applied(void **state)
{
	struct ctx *c = *state;
	char ans[256], got[256];
	assert_int_equal(push(c, doc(c, 6, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}"),
			     SECRET, ag_now(), ans, sizeof(ans)),
	    200);
	char p[400];
	snprintf(p, sizeof(p), "%s/token", c->dir);
	assert_int_equal(ag_write_file(p, "gpn_new", 7, 0600), 0);
	struct stub *s = stub_start();
	pthread_mutex_lock(&s->mu);
	s->enrolls = 1;
	ag_strlcpy(s->desired, doc(c, 2, "{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4}"),
	    sizeof(s->desired));
	s->desired_gen = 2;
	pthread_mutex_unlock(&s->mu);
	respawn_on_stub(c, s, NULL);
	bool ok = stub_wait(s, restored_observed);
	stub_stop(s);
	assert_true(ok);
	realized(c, got, sizeof(got));
	assert_string_equal(got, "3g.40gb@4");
	snprintf(p, sizeof(p), "%s/agent.json", c->dir);
	char *aj = ag_read_file(p, NULL);
	assert_non_null(aj);
	assert_non_null(strstr(aj, "\"applied_generation\":2"));
	free(aj);
}

/* Finding 13: the state dir (it holds the node token) must be the real
 * directory: a symbolic link to one is refused (exit 2). Before, it was
 * followed. */
static void
test_state_dir_symlink_refused(void **state)
{
	struct ctx *c = *state;
	struct ctx d = *c;
	char real[300], link[300];
	snprintf(real, sizeof(real), "%s/real", c->dir);
	snprintf(link, sizeof(link), "%s/link", c->dir);
	assert_int_equal(mkdir(real, 0700), 0);
	assert_int_equal(symlink(real, link), 0);
	ag_strlcpy(d.dir, link, sizeof(d.dir));
	d.port = free_port();
	pid_t pid = spawn(&d, NULL, "../symlink.log");
	int st = 0;
	pid_t w = 0;
	for (int i = 0; i < 100 && (w = waitpid(pid, &st, WNOHANG)) == 0; i++)
		usleep(50000);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("the agent ran with a symlinked state dir");
	}
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 2);
	snprintf(real, sizeof(real), "%s/real/token", c->dir);
	assert_int_equal(access(real, F_OK), -1);
}

/* Finding 13: a state dir owned by another uid is refused (exit 2).
 * Making one needs root (chown); skipped otherwise. */
static void
test_state_dir_of_another_user_refused(void **state)
{
	struct ctx *c = *state;
	if (geteuid() != 0)
		skip();
	struct ctx d = *c;
	char other[300];
	snprintf(other, sizeof(other), "%s/theirs", c->dir);
	assert_int_equal(mkdir(other, 0700), 0);
	assert_int_equal(chown(other, 65534, 65534), 0);
	ag_strlcpy(d.dir, other, sizeof(d.dir));
	d.port = free_port();
	pid_t pid = spawn(&d, NULL, "../theirs.log");
	int st = 0;
	pid_t w = 0;
	for (int i = 0; i < 100 && (w = waitpid(pid, &st, WNOHANG)) == 0; i++)
		usleep(50000);
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, NULL, 0);
		fail_msg("the agent ran with a state dir of another user");
	}
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 2);
	char log[400];
	snprintf(log, sizeof(log), "%s/theirs.log", c->dir);
	char *text = ag_read_file(log, NULL);
	assert_non_null(text);
	assert_non_null(strstr(text, "belongs to uid 65534"));
	free(text);
}

/* ------------------------------------------------ the after-change hook */

static void
write_script(const char *path, const char *text)
{
	assert_int_equal(ag_write_file(path, text, strlen(text), 0755), 0);
	assert_int_equal(chmod(path, 0755), 0);
}

/* Occurrences of needle in the file at path (0 when unreadable). */
static int
count_in(const char *path, const char *needle)
{
	char *s = ag_read_file(path, NULL);
	int n = 0;
	for (const char *p = s; p != NULL && (p = strstr(p, needle)) != NULL; p += strlen(needle))
		n++;
	free(s);
	return n;
}

/* Poll until needle occurs at least n times in path; 60 s at most. */
static void
wait_count(const char *path, const char *needle, int n)
{
	for (int i = 0; i < 1200; i++) {
		if (count_in(path, needle) >= n)
			return;
		usleep(50000);
	}
	fail_msg("%s never held %d x \"%s\"", path, n, needle);
}

/* Restart c's agent with the hook (and timeout, NULL: default). */
static void
respawn_with_hook(struct ctx *c, const char *hook, const char *timeout, const char *log)
{
	kill(c->pid, SIGTERM);
	waitpid(c->pid, NULL, 0);
	int n = 0;
	c->more[n++] = "--after-change-hook";
	c->more[n++] = hook;
	if (timeout != NULL) {
		c->more[n++] = "--after-change-hook-timeout";
		c->more[n++] = timeout;
	}
	c->more[n] = NULL;
	c->pid = spawn(c, NULL, log);
	c->more[0] = NULL;
	wait_listening(c);
}

/* A desired state naming GPU 1 only (GPU 0 is then left as it is). */
static char *
doc1(struct ctx *c, long long gen, const char *instances)
{
	static char buf[2048];
	char gpu1[AG_UUID_MAX];
	(void)c;
	ag_derive_uuid("GPU", "proc-node/1", gpu1, sizeof(gpu1));
	snprintf(buf, sizeof(buf),
	    "{\"generation\":%lld,\"node\":\"proc-node\",\"gpus\":[{\"uuid\":\"%s\",\"index\":1,"
	    "\"mig_enabled\":true,\"instances\":[%s]}]}",
	    gen, gpu1, instances);
	return buf;
}

/* The value of NAME in the n-th (0-based) "---"-separated env dump. */
static void
env_of_run(const char *path, int n, const char *name, char *out, size_t len)
{
	char *s = ag_read_file(path, NULL);
	assert_non_null(s);
	out[0] = '\0';
	char *p = s;
	for (int i = 0; i <= n; i++) {
		p = strstr(p, "---\n");
		assert_non_null(p);
		p += 4;
	}
	char *end = strstr(p, "---\n");
	if (end != NULL)
		*end = '\0';
	char key[128];
	snprintf(key, sizeof(key), "\n%s=", name);
	char *v = p[-1] == '\n' ? strstr(p - 1, key) : NULL;
	if (v != NULL) {
		v += strlen(key);
		size_t l = strcspn(v, "\n");
		snprintf(out, len, "%.*s", (int)l, v);
	}
	free(s);
}

/*
 * Issue 24 part 3: --after-change-hook runs once after an apply that
 * changed a layout, with the GPUs changed, the generation and the node in
 * its environment, the agent's own environment passed on minus the
 * enrollment token (no node token or push secret either); a no-op
 * re-apply runs nothing; a later change of GPU 1 alone names GPU 1 alone.
 */
static void
test_after_change_hook_env(void **state)
{
	struct ctx *c = *state;
	char hook[400], out[400], log[400], script[2048], ans[256], got[256], v[512];
	snprintf(hook, sizeof(hook), "%s/hook.sh", c->dir);
	snprintf(out, sizeof(out), "%s/hook.out", c->dir);
	snprintf(log, sizeof(log), "%s/agent-hook.log", c->dir);
	snprintf(script, sizeof(script), "#!/bin/sh\n{ echo ---; env; } >> %s\n", out);
	write_script(hook, script);
	setenv("GPUPOOL_ENROLL_TOKEN", "gpe_must_not_leak", 1);
	setenv("GPUPOOL_TEST_MARK", "kept", 1);
	respawn_with_hook(c, hook, NULL, "agent-hook.log");
	unsetenv("GPUPOOL_ENROLL_TOKEN");
	unsetenv("GPUPOOL_TEST_MARK");
	long long now = ag_now();
	char body[2048];
	snprintf(body, sizeof(body), "%s",
	    doc(c, 5,
		"{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4},"
		"{\"profile\":\"2g.20gb\",\"start\":0,\"size\":2}"));
	assert_int_equal(push(c, body, SECRET, now, ans, sizeof(ans)), 200);
	realized(c, got, sizeof(got));
	assert_string_equal(got, "3g.40gb@4 2g.20gb@0");
	wait_count(out, "---\n", 1);
	wait_count(log, "\"after-change hook ran\"", 1);
	env_of_run(out, 0, "GPUPOOL_CHANGED_GPUS", v, sizeof(v));
	assert_string_equal(v, c->gpu0);
	env_of_run(out, 0, "GPUPOOL_GENERATION", v, sizeof(v));
	assert_string_equal(v, "5");
	env_of_run(out, 0, "GPUPOOL_NODE", v, sizeof(v));
	assert_string_equal(v, "proc-node");
	env_of_run(out, 0, "GPUPOOL_TEST_MARK", v, sizeof(v));
	assert_string_equal(v, "kept");
	assert_int_equal(count_in(out, "GPUPOOL_ENROLL_TOKEN"), 0);
	assert_int_equal(count_in(out, "gpe_must_not_leak"), 0);
	assert_int_equal(count_in(out, "gpn_seeded"), 0);
	assert_int_equal(count_in(out, SECRET), 0);
	assert_int_equal(count_in(log, "\"result\":\"exit 0\""), 1);
	/* the same layout again (a new generation): applied, no change, no run */
	snprintf(body, sizeof(body), "%s",
	    doc(c, 6,
		"{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4},"
		"{\"profile\":\"2g.20gb\",\"start\":0,\"size\":2}"));
	assert_int_equal(push(c, body, SECRET, now, ans, sizeof(ans)), 200);
	assert_string_equal(ans, "{\"observed_generation\":6}");
	assert_int_equal(count_in(log, "\"changes\":\"0\""), 1);
	/* GPU 1 alone changes: one more run, naming GPU 1 alone, generation 7
	 * (a run for generation 6 would have been a run of its own, or
	 * named generation 6 before this one) */
	snprintf(body, sizeof(body), "%s",
	    doc1(c, 7, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}"));
	assert_int_equal(push(c, body, SECRET, now, ans, sizeof(ans)), 200);
	wait_count(out, "---\n", 2);
	wait_count(log, "\"after-change hook ran\"", 2);
	char gpu1[AG_UUID_MAX];
	ag_derive_uuid("GPU", "proc-node/1", gpu1, sizeof(gpu1));
	env_of_run(out, 1, "GPUPOOL_CHANGED_GPUS", v, sizeof(v));
	assert_string_equal(v, gpu1);
	env_of_run(out, 1, "GPUPOOL_GENERATION", v, sizeof(v));
	assert_string_equal(v, "7");
	assert_int_equal(count_in(out, "GPUPOOL_GENERATION=6"), 0);
	assert_int_equal(count_in(log, "\"after-change hook ran\""), 2);
	/* GPU 0 was left as it was */
	realized(c, got, sizeof(got));
	assert_string_equal(got, "3g.40gb@4 2g.20gb@0");
}

/* pid is gone (or a zombie no one waits for: dead all the same). */
static bool
process_dead(long pid)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
	char *s = ag_read_file(p, NULL);
	if (s == NULL)
		return true;
	const char *r = strrchr(s, ')');
	bool dead = r != NULL && (r[2] == 'Z' || r[2] == 'X');
	free(s);
	return dead;
}

static void
wait_dead(long pid)
{
	for (int i = 0; i < 200; i++) {
		if (process_dead(pid))
			return;
		usleep(50000);
	}
	fail_msg("process %ld still runs", pid);
}

/*
 * The hook never runs twice at once: two changes applied while it runs
 * (the agent keeps applying meanwhile) are coalesced into ONE more run,
 * with the union of the GPUs and the last generation. A hook that exits
 * 3 is logged, and one that outlives its timeout is killed with its
 * process group (its own child included); neither is an apply error.
 */
static void
test_after_change_hook_timeout_coalesced(void **state)
{
	struct ctx *c = *state;
	char hook[400], out[400], log[400], rel[400], script[4096], ans[256], got[256];
	snprintf(hook, sizeof(hook), "%s/slow-hook.sh", c->dir);
	snprintf(out, sizeof(out), "%s/hook.out", c->dir);
	snprintf(log, sizeof(log), "%s/agent-hook.log", c->dir);
	snprintf(rel, sizeof(rel), "%s/release", c->dir);
	/* generation 5: wait for the test's release, exit 3; later: outlive the timeout */
	snprintf(script, sizeof(script),
	    "#!/bin/sh\n"
	    "echo \"start $GPUPOOL_GENERATION $GPUPOOL_CHANGED_GPUS pid $$\" >> %s\n"
	    "if [ \"$GPUPOOL_GENERATION\" = 5 ]; then\n"
	    "  while [ ! -e %s ]; do sleep 0.05; done\n"
	    "  echo released >> %s\n"
	    "  exit 3\n"
	    "fi\n"
	    "sleep 120 &\n"
	    "echo \"child $! end\" >> %s\n"
	    "wait\n"
	    "echo late >> %s\n",
	    out, rel, out, out, out);
	write_script(hook, script);
	respawn_with_hook(c, hook, "10", "agent-hook.log");
	long long now = ag_now();
	assert_int_equal(push(c, doc(c, 5, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}"),
			     SECRET, now, ans, sizeof(ans)),
	    200);
	wait_count(out, "start 5 ", 1);
	/* while the hook runs: two more changes, applied at once */
	char gpu1[AG_UUID_MAX];
	ag_derive_uuid("GPU", "proc-node/1", gpu1, sizeof(gpu1));
	assert_int_equal(push(c, doc1(c, 6, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}"),
			     SECRET, now, ans, sizeof(ans)),
	    200);
	assert_string_equal(ans, "{\"observed_generation\":6}");
	assert_int_equal(push(c, doc(c, 7, "{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4}"),
			     SECRET, now, ans, sizeof(ans)),
	    200);
	assert_string_equal(ans, "{\"observed_generation\":7}");
	realized(c, got, sizeof(got));
	assert_string_equal(got, "3g.40gb@4");
	/* the first run is still running (not timed out), and alone */
	assert_int_equal(count_in(log, "\"after-change hook ran\""), 0);
	assert_int_equal(count_in(out, "start "), 1);
	assert_int_equal(ag_write_file(rel, "", 0, 0644), 0);
	wait_count(log, "\"result\":\"exit 3\"", 1);
	/* one more run for both changes; it outlives its timeout and is killed */
	wait_count(log, "\"result\":\"timed out after 10 s: killed\"", 1);
	assert_int_equal(count_in(out, "start "), 2);
	assert_int_equal(count_in(out, "released"), 1);
	assert_int_equal(count_in(out, "late"), 0);
	char expect[256];
	snprintf(expect, sizeof(expect), "start 5 %s pid", c->gpu0);
	assert_int_equal(count_in(out, expect), 1);
	snprintf(expect, sizeof(expect), "start 7 %s,%s pid", gpu1, c->gpu0);
	assert_int_equal(count_in(out, expect), 1);
	snprintf(expect, sizeof(expect), "\"gpus\":\"%s,%s\",\"generation\":\"7\"", gpu1, c->gpu0);
	assert_int_equal(count_in(log, expect), 1);
	assert_int_equal(count_in(log, "\"after-change hook ran\""), 2);
	/* the hooks and the child are gone */
	char *s = ag_read_file(out, NULL);
	assert_non_null(s);
	int pids = 0;
	for (const char *p = s; (p = strstr(p, " pid ")) != NULL; p += 5, pids++)
		wait_dead(strtol(p + 5, NULL, 10));
	for (const char *p = s; (p = strstr(p, "child ")) != NULL; p += 6, pids++)
		wait_dead(strtol(p + 6, NULL, 10));
	free(s);
	assert_int_equal(pids, 3);
	/* a failing hook is no apply error */
	assert_int_equal(count_in(log, "\"apply failed\""), 0);
	assert_int_equal(count_in(log, "\"errors\":\"0\""), 3);
}

/* With --dry-run the hook is never run (the agent says so at start). */
static void
test_after_change_hook_not_in_dry_run(void **state)
{
	struct ctx *c = *state;
	char hook[400], out[400], log[400], script[1024], ans[256];
	snprintf(hook, sizeof(hook), "%s/hook.sh", c->dir);
	snprintf(out, sizeof(out), "%s/hook.out", c->dir);
	snprintf(log, sizeof(log), "%s/agent-dry.log", c->dir);
	snprintf(script, sizeof(script), "#!/bin/sh\necho ran >> %s\n", out);
	write_script(hook, script);
	kill(c->pid, SIGTERM);
	waitpid(c->pid, NULL, 0);
	c->more[0] = "--dry-run";
	c->more[1] = "--after-change-hook";
	c->more[2] = hook;
	c->more[3] = NULL;
	c->pid = spawn(c, NULL, "agent-dry.log");
	c->more[0] = NULL;
	wait_listening(c);
	assert_int_equal(count_in(log, "dry run: the after-change hook is never run"), 1);
	assert_int_equal(push(c, doc(c, 5, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}"),
			     SECRET, ag_now(), ans, sizeof(ans)),
	    200);
	assert_string_equal(ans, "{\"observed_generation\":5}");
	/* no hook thread exists to run it later: its absence now is final */
	assert_int_equal(count_in(out, "ran"), 0);
	assert_int_equal(count_in(log, "after-change hook ran"), 0);
}

/* A relative hook path, or a file that is not executable, is refused at
 * start: exit 2, with the reason. */
static void
test_after_change_hook_path_refused(void **state)
{
	struct ctx *c = *state;
	struct ctx d = *c;
	d.port = free_port();
	char log[400], plain[400];
	snprintf(log, sizeof(log), "%s/refused.log", c->dir);
	d.more[0] = "--after-change-hook";
	d.more[1] = "hook.sh";
	d.more[2] = NULL;
	int st;
	pid_t pid = spawn(&d, NULL, "refused.log");
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 2);
	assert_int_equal(count_in(log, "hook.sh is not an absolute path"), 1);
	snprintf(plain, sizeof(plain), "%s/plain.txt", c->dir);
	assert_int_equal(ag_write_file(plain, "x", 1, 0644), 0);
	d.more[1] = plain;
	pid = spawn(&d, NULL, "refused.log");
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 2);
	assert_int_equal(count_in(log, "plain.txt is not executable"), 1);
	d.more[1] = c->dir;
	pid = spawn(&d, NULL, "refused.log");
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_int_equal(WEXITSTATUS(st), 2);
	assert_int_equal(count_in(log, "is not a regular file"), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_signed_push_applies, setup, teardown),
		cmocka_unit_test_setup_teardown(test_kill9_restart_converges, setup, teardown),
		cmocka_unit_test_setup_teardown(test_listener_edges, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unenrolled_without_token_exits_3, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_nvml_backend_process, setup, teardown),
		cmocka_unit_test_setup_teardown(test_discover_stamps_now, setup, teardown),
		cmocka_unit_test_setup_teardown(test_discover_partial_read_says_so, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_replayed_push_after_restart_is_noop, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_stale_401_after_reenroll_ignored, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_lost_gpu_reported, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lost_gpu_reported_nvml, setup, teardown),
		cmocka_unit_test_setup_teardown(test_restored_server_lower_generation_applied,
		    setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_dir_symlink_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_after_change_hook_env, setup, teardown),
		cmocka_unit_test_setup_teardown(test_after_change_hook_timeout_coalesced, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_after_change_hook_not_in_dry_run, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_after_change_hook_path_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_state_dir_of_another_user_refused, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_failed_discovery_backs_off_and_reports_unknown,
		    setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
