/*
 * test_outage.c - PostgreSQL goes away under load and comes back.
 *
 * Worker threads (each with its own gp_client) send authenticated
 * GET /v1/me and POST /v1/projects in a loop while the test stops the
 * private cluster. During the outage every answer must be a 503
 * database_unavailable problem with Retry-After: no 500s, no dropped
 * connections, no request hanging; /healthz stays 200 and /readyz says
 * 503. After PostgreSQL restarts the same gpupoold process (same pid)
 * must serve again within seconds, /metrics must count the reconnects,
 * and what was committed must be whole (every project has its audit
 * row). A second test restarts PostgreSQL while the server is idle:
 * the first requests afterwards, on every thread, must all succeed (no
 * 503 for a connection that died with the old PostgreSQL). The fixture
 * then checks that the server exits 0 on SIGTERM.
 */
#include "fixture.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/timeutil.h"

#define NWORKERS 4
#define CLIENT_TIMEOUT_MS 10000
#define MAX_LATENCY_MS 4000    /* no request may take longer, outage or not */
#define RECOVERY_LIMIT_MS 5000 /* from pg_ctl start returning to the first 2xx */

enum phase {
	PHASE_UP,       /* PostgreSQL running */
	PHASE_STOPPING, /* pg_ctl stop in progress */
	PHASE_DOWN,     /* stopped: every answer must be 503 */
	PHASE_STARTING, /* pg_ctl start in progress */
	PHASE_BACK,     /* running again */
};

static atomic_int phase;
static atomic_bool stop_workers;

struct worker {
	pthread_t thread;
	int id;
	const char *base_url;
	const char *token;
	/* written by the worker, read by main after a relaxed poll or the join */
	atomic_int ok_up;              /* 2xx with PostgreSQL up, before the outage */
	atomic_int unavailable_down;   /* well-formed 503s sent entirely within the outage */
	atomic_int ok_back;            /* 2xx after the restart */
	atomic_llong first_ok_back_us; /* when the first of those arrived (mono), 0: none */
	int created;                   /* 201s from POST /v1/projects */
	int unavailable;               /* well-formed 503s, any phase */
	int bad; /* anything else: 500s, transport errors, malformed 503s ... */
	char bad_first[512];
	long max_latency_ms;
	int seq;
};

static void
worker_bad(struct worker *w, const char *what, const char *method, const char *path,
    const struct gp_client_response *r)
{
	w->bad++;
	if (w->bad == 1)
		snprintf(w->bad_first, sizeof(w->bad_first),
		    "worker %d: %s %s (phase %d): %s: HTTP %ld %s %.200s", w->id, method, path,
		    atomic_load(&phase), what, r->status,
		    r->status == 0 ? r->error : r->content_type, r->body ? r->body : "");
}

/* True when r is the 503 the design promises while the database is away. */
static bool
is_db_unavailable(const struct gp_client_response *r)
{
	struct json_object *code = gp_client_json_get(r->json, "code");
	struct json_object *st = gp_client_json_get(r->json, "status");

	return r->status == 503 && strncmp(r->content_type, "application/problem+json", 24) == 0 &&
	    code != NULL && json_object_is_type(code, json_type_string) &&
	    strcmp(json_object_get_string(code), "database_unavailable") == 0 && st != NULL &&
	    json_object_get_int64(st) == 503 && gp_client_json_get(r->json, "detail") != NULL &&
	    r->retry_after >= 1 && r->request_id[0] != '\0';
}

static void
worker_one(struct worker *w, struct gp_client *c, bool post)
{
	struct gp_client_response r;
	const char *method = post ? "POST" : "GET";
	const char *path = post ? "/v1/projects" : "/v1/me";
	char body[128];
	int p_start, p_end, rc;
	int64_t t0, ms;

	if (post) {
		w->seq++;
		snprintf(body, sizeof(body),
		    "{\"name\":\"out-%d-%d\",\"namespaces\":[\"out-%d-%d\"]}", w->id, w->seq, w->id,
		    w->seq);
	}
	p_start = atomic_load(&phase);
	t0 = time_mono_us();
	rc = gp_client_request(c, method, path, post ? body : NULL, post ? strlen(body) : 0, NULL,
	    &r);
	ms = (time_mono_us() - t0) / 1000;
	p_end = atomic_load(&phase);
	if (ms > w->max_latency_ms)
		w->max_latency_ms = (long)ms;
	if (rc != 0 || r.status == 0) {
		worker_bad(w, "no response", method, path, &r);
	} else if (r.status == 503) {
		if (!is_db_unavailable(&r)) {
			worker_bad(w, "a 503 that is not database_unavailable with Retry-After",
			    method, path, &r);
		} else {
			w->unavailable++;
			if (p_start == PHASE_DOWN && p_end == PHASE_DOWN)
				atomic_fetch_add(&w->unavailable_down, 1);
			if (p_start == PHASE_UP && p_end == PHASE_UP)
				worker_bad(w, "503 while PostgreSQL was up", method, path, &r);
		}
	} else if (r.status == (post ? 201 : 200)) {
		if (p_start == PHASE_DOWN && p_end == PHASE_DOWN)
			worker_bad(w, "success while PostgreSQL was stopped", method, path, &r);
		if (post)
			w->created++;
		if (p_start == PHASE_UP && p_end == PHASE_UP)
			atomic_fetch_add(&w->ok_up, 1);
		if (p_start == PHASE_BACK) {
			atomic_fetch_add(&w->ok_back, 1);
			if (atomic_load(&w->first_ok_back_us) == 0)
				atomic_store(&w->first_ok_back_us, time_mono_us());
		}
	} else {
		worker_bad(w, "unexpected status", method, path, &r);
	}
	gp_client_response_free(&r);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct gp_client *c = gp_client_create(w->base_url, w->token);
	struct timespec nap = { 0, 2 * 1000 * 1000 };
	bool post = false;

	if (c == NULL) {
		w->bad++;
		snprintf(w->bad_first, sizeof(w->bad_first), "worker %d: no client", w->id);
		return NULL;
	}
	gp_client_set_timeouts(c, CLIENT_TIMEOUT_MS, 2000);
	while (!atomic_load(&stop_workers)) {
		worker_one(w, c, post);
		post = !post;
		nanosleep(&nap, NULL);
	}
	gp_client_destroy(c);
	return NULL;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait up to limit_ms until every worker's counter reaches min; false on timeout. */
static bool
wait_workers(struct worker *ws, size_t off, int min, long limit_ms)
{
	int64_t deadline = time_mono_us() + limit_ms * 1000;

	for (;;) {
		bool all = true;

		for (int i = 0; i < NWORKERS; i++) {
			atomic_int *ctr = (atomic_int *)(void *)((char *)&ws[i] + off);

			if (atomic_load(ctr) < min)
				all = false;
		}
		if (all)
			return true;
		if (time_mono_us() > deadline)
			return false;
		sleep_ms(10);
	}
}

/* The value of an unlabelled metric line "name N"; -1 when absent. */
static long long
metric_value(const char *text, const char *name)
{
	size_t n = strlen(name);
	const char *p = text;

	while ((p = strstr(p, name)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtoll(p + n + 1, NULL, 10);
		p += n;
	}
	return -1;
}

static void
test_outage_and_recovery(void **state)
{
	/* static: a failed assertion longjmps out while the workers still run */
	static struct worker ws[NWORKERS];
	struct fixture *fx = *state;
	struct gp_client_response *r;
	pid_t pid = fx->server->pid;
	int64_t back_us;
	int created = 0, total_bad = 0;
	long long reconnects;

	memset(ws, 0, sizeof(ws));
	atomic_store(&phase, PHASE_UP);
	atomic_store(&stop_workers, false);
	r = fx_request(fx, NULL, "GET", "/readyz", NULL);
	assert_status(r, 200);
	for (int i = 0; i < NWORKERS; i++) {
		ws[i].id = i;
		ws[i].base_url = fx->server->base_url;
		ws[i].token = fx->admin_token;
		assert_int_equal(pthread_create(&ws[i].thread, NULL, worker_main, &ws[i]), 0);
	}

	/* load with PostgreSQL up */
	if (!wait_workers(ws, offsetof(struct worker, ok_up), 5, 10000))
		print_error("the workers did not get 5 successes each before the outage\n");

	/* PostgreSQL goes away under load */
	atomic_store(&phase, PHASE_STOPPING);
	assert_int_equal(fixture_pg_stop(fx), 0);
	atomic_store(&phase, PHASE_DOWN);
	if (!wait_workers(ws, offsetof(struct worker, unavailable_down), 5, 5000))
		print_error("the workers did not see 5 503s each during the outage\n");
	for (int i = 0; i < 3; i++) {
		r = fx_request(fx, NULL, "GET", "/healthz", NULL);
		assert_status(r, 200);
		assert_json_str(r->json, "status", "ok");
		r = fx_request(fx, NULL, "GET", "/readyz", NULL);
		assert_problem(r, 503, "database_unavailable");
		assert_true(r->retry_after >= 1);
		r = fx_request(fx, fx->admin_token, "GET", "/v1/tokens", NULL);
		assert_problem(r, 503, "database_unavailable");
		assert_true(r->retry_after >= 1);
		/* a login is refused the same way, not as bad credentials */
		r = fx_request(fx, NULL, "POST", "/v1/auth/login",
		    "{\"username\":\"%s\",\"password\":\"%s\"}", FIXTURE_ADMIN_USER,
		    FIXTURE_ADMIN_PASSWORD);
		assert_problem(r, 503, "database_unavailable");
		sleep_ms(150);
	}
	/* bad input that needs no database (a public route) still gets its 4xx */
	r = fx_request(fx, NULL, "POST", "/v1/auth/login", "{\"username\":");
	assert_problem(r, 400, "malformed_json");

	/* PostgreSQL comes back; gpupoold recovers by itself */
	atomic_store(&phase, PHASE_STARTING);
	assert_int_equal(fixture_pg_start(fx), 0);
	back_us = time_mono_us();
	atomic_store(&phase, PHASE_BACK);
	if (!wait_workers(ws, offsetof(struct worker, ok_back), 5, RECOVERY_LIMIT_MS + 5000))
		print_error("the workers did not recover\n");
	atomic_store(&stop_workers, true);
	for (int i = 0; i < NWORKERS; i++)
		assert_int_equal(pthread_join(ws[i].thread, NULL), 0);

	for (int i = 0; i < NWORKERS; i++) {
		struct worker *w = &ws[i];
		long long first = atomic_load(&w->first_ok_back_us);

		fprintf(stderr,
		    "worker %d: %d ok before, %d 503 during, %d ok after (first after %lld ms), "
		    "%d bad, max latency %ld ms\n",
		    w->id, atomic_load(&w->ok_up), atomic_load(&w->unavailable_down),
		    atomic_load(&w->ok_back), first ? (first - back_us) / 1000 : -1, w->bad,
		    w->max_latency_ms);
		if (w->bad > 0)
			print_error("%s (%d bad in all)\n", w->bad_first, w->bad);
		total_bad += w->bad;
		created += w->created;
	}
	assert_int_equal(total_bad, 0);
	for (int i = 0; i < NWORKERS; i++) {
		struct worker *w = &ws[i];
		long long first = atomic_load(&w->first_ok_back_us);

		assert_true(atomic_load(&w->ok_up) >= 5);
		assert_true(atomic_load(&w->unavailable_down) >= 5);
		assert_true(atomic_load(&w->ok_back) >= 5);
		assert_true(first > 0);
		assert_true((first - back_us) / 1000 < RECOVERY_LIMIT_MS);
		assert_true(w->max_latency_ms < MAX_LATENCY_MS);
	}

	/* the same process, still healthy, now ready */
	assert_int_equal(fx->server->pid, pid);
	assert_int_equal(kill(pid, 0), 0);
	r = fx_request(fx, NULL, "GET", "/readyz", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "status", "ready");
	assert_int_equal(fx_json_int(r->json, "schema_version"),
	    fx_sql_int64(fx, "SELECT max(version) FROM schema_migrations"));
	r = fx_request(fx, fx->admin_token, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "username", FIXTURE_ADMIN_USER);

	/* the outage is visible in /metrics */
	r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	assert_status(r, 200);
	reconnects = metric_value(r->body, "gpupool_db_reconnects_total");
	fprintf(stderr, "gpupool_db_reconnects_total %lld\n", reconnects);
	assert_true(reconnects > 0);
	assert_true(metric_value(r->body, "gpupool_db_errors_total") > 0);
	assert_non_null(strstr(r->body,
	    "gpupool_http_requests_total{method=\"GET\",route=\"/v1/me\",status=\"503\"} "));
	assert_non_null(strstr(r->body,
	    "gpupool_http_requests_total{method=\"POST\",route=\"/v1/projects\",status=\"503\"} "));
	assert_null(strstr(r->body, "status=\"500\""));

	/* what committed is whole: every 201 is there, each project with its audit row */
	{
		int64_t projects =
		    fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name LIKE 'out-%'");
		int64_t audited = fx_sql_int64(fx,
		    "SELECT count(*) FROM audit_log WHERE action = 'project.create' "
		    "AND object_id LIKE 'out-%'");
		int64_t namespaces = fx_sql_int64(fx,
		    "SELECT count(*) FROM project_namespaces n "
		    "JOIN projects p ON p.id = n.project_id WHERE p.name LIKE 'out-%'");

		assert_true(created > 0);
		assert_true(projects >= created);
		assert_int_equal(audited, projects);
		assert_int_equal(namespaces, projects);
	}
}

/* ---- no 503 once PostgreSQL is back ---- */

#define SWEEP_THREADS 24

static const char *sweep_owner; /* owner of project "sweep" */

struct sweeper {
	pthread_t thread;
	pthread_barrier_t *start;
	const char *base_url;
	const char *token;
	const char *name; /* project to create */
	int ok;
	int bad;
	char bad_first[512];
};

static void
sweep_one(struct sweeper *w, struct gp_client *c, const char *method, const char *path,
    const char *body, long expect)
{
	struct gp_client_response r;

	memset(&r, 0, sizeof(r));
	if (gp_client_request(c, method, path, body, body ? strlen(body) : 0, NULL, &r) == 0 &&
	    r.status == expect) {
		w->ok++;
	} else if (w->bad++ == 0) {
		snprintf(w->bad_first, sizeof(w->bad_first), "%s %s: HTTP %ld %.300s", method, path,
		    r.status, r.body ? r.body : r.error);
	}
	gp_client_response_free(&r);
}

static void *
sweeper_main(void *arg)
{
	struct sweeper *w = arg;
	struct gp_client *c = gp_client_create(w->base_url, w->token);
	char body[192];

	pthread_barrier_wait(w->start);
	if (c == NULL) {
		w->bad++;
		return NULL;
	}
	/* a 503 must reach the test, not be retried by the client */
	gp_client_set_retries(c, 0);
	gp_client_set_timeouts(c, CLIENT_TIMEOUT_MS, 2000);
	snprintf(body, sizeof(body), "{\"name\":\"%s\"}", w->name);
	sweep_one(w, c, "GET", "/v1/me", NULL, 200);
	sweep_one(w, c, "POST", "/v1/projects", body, 201);
	sweep_one(w, c, "GET", "/readyz", NULL, 200);
	/* a submission: group-committed on the submissions workers' connections */
	snprintf(body, sizeof(body),
	    "{\"action\":\"create\",\"pool\":\"%s\",\"items\":[\"H100-80GB/1g.10gb=1\"],"
	    "\"justification\":\"t\"}",
	    w->name);
	if (gp_client_set_token(c, sweep_owner) == 0)
		sweep_one(w, c, "POST", "/v1/projects/sweep/pool-requests", body, 201);
	sweep_one(w, c, "GET", "/v1/tokens", NULL, 200);
	gp_client_destroy(c);
	return NULL;
}

/* SWEEP_THREADS new connections at once (so every HTTP thread gets some); the number of failures. */
static int
sweep(struct fixture *fx, const char *label)
{
	static struct sweeper ws[SWEEP_THREADS];
	pthread_barrier_t start;
	int ok = 0, bad = 0;

	memset(ws, 0, sizeof(ws));
	assert_int_equal(pthread_barrier_init(&start, NULL, SWEEP_THREADS), 0);
	for (int i = 0; i < SWEEP_THREADS; i++) {
		ws[i].start = &start;
		ws[i].base_url = fx->server->base_url;
		ws[i].token = fx->admin_token;
		ws[i].name = fx_unique(fx, label);
		assert_int_equal(pthread_create(&ws[i].thread, NULL, sweeper_main, &ws[i]), 0);
	}
	for (int i = 0; i < SWEEP_THREADS; i++) {
		assert_int_equal(pthread_join(ws[i].thread, NULL), 0);
		ok += ws[i].ok;
		bad += ws[i].bad;
		if (ws[i].bad > 0)
			print_error("%s: %s\n", label, ws[i].bad_first);
	}
	pthread_barrier_destroy(&start);
	fprintf(stderr, "%s: %d ok, %d failed\n", label, ok, bad);
	return bad;
}

/*
 * PostgreSQL restarts while the server is idle: every HTTP thread and
 * the submissions workers hold a connection that is now dead. Once
 * PostgreSQL is back, the very first requests must all succeed: a dead
 * connection is found before anything runs on it, or its transaction
 * is run again on a new one, never answered 503.
 */
static void
test_no_503_after_restart(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;

	sweep_owner = fixture_create_user(fx, "sweeper", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects", "{\"name\":\"sweep\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/sweep/members/sweeper",
	    "{\"role\":\"owner\"}");
	assert_status(r, 201);
	for (int round = 0; round < 2; round++) {
		/* every thread has a live connection */
		assert_int_equal(sweep(fx, "warm"), 0);
		assert_int_equal(fixture_pg_stop(fx), 0);
		assert_int_equal(fixture_pg_start(fx), 0);
		assert_int_equal(sweep(fx, "back"), 0);
	}
}

/* ---- no 503 once one request got 200 after a restart ---- */

#define BACK_CLIENTS 8

static atomic_bool back_stop;
static atomic_llong back_down_us; /* when PostgreSQL was stopped (mono), 0: up */

struct back_client {
	pthread_t thread;
	int id;
	const char *base_url;
	const char *token;
	atomic_int unavailable;     /* 503s, any phase */
	int ok_after;               /* 200s to requests sent after the stop */
	long long first_ok_us;      /* when the first of those arrived, 0: none */
	long long last_503_sent_us; /* when the last 503 was asked for, 0: none */
	char last_503[192];
	int bad;
	char bad_first[256];
};

static void
back_one(struct back_client *w, struct gp_client *c, const char *method, const char *path,
    const char *body)
{
	struct gp_client_response r;
	long long sent = time_mono_us(), down = atomic_load(&back_down_us), got;
	int rc;

	memset(&r, 0, sizeof(r));
	rc = gp_client_request(c, method, path, body, body ? strlen(body) : 0, NULL, &r);
	got = time_mono_us();
	if (rc == 0 && r.status == 200) {
		if (down != 0 && sent > down) {
			w->ok_after++;
			if (w->first_ok_us == 0)
				w->first_ok_us = got;
		}
	} else if (rc == 0 && r.status == 503) {
		atomic_fetch_add(&w->unavailable, 1);
		w->last_503_sent_us = sent;
		snprintf(w->last_503, sizeof(w->last_503), "%s %s: %.150s", method, path,
		    r.body ? r.body : "");
	} else if (w->bad++ == 0) {
		snprintf(w->bad_first, sizeof(w->bad_first), "%s %s: HTTP %ld %.150s", method, path,
		    r.status, r.body ? r.body : r.error);
	}
	gp_client_response_free(&r);
}

static void *
back_main(void *arg)
{
	struct back_client *w = arg;
	struct gp_client *c = gp_client_create(w->base_url, w->token);
	char login[192];

	if (c == NULL) {
		w->bad++;
		return NULL;
	}
	/* every 503 must reach the test, not be retried by the client */
	gp_client_set_retries(c, 0);
	gp_client_set_timeouts(c, CLIENT_TIMEOUT_MS, 2000);
	snprintf(login, sizeof(login), "{\"username\":\"%s\",\"password\":\"%s\"}",
	    FIXTURE_ADMIN_USER, FIXTURE_ADMIN_PASSWORD);
	for (int cycle = 0; !atomic_load(&back_stop); cycle++) {
		back_one(w, c, "GET", "/v1/me", NULL);
		back_one(w, c, "GET", "/readyz", NULL);
		/* argon2id is costly: a login from each client every fourth cycle */
		if (cycle % 4 == w->id % 4)
			back_one(w, c, "POST", "/v1/auth/login", login);
	}
	gp_client_destroy(c);
	return NULL;
}

/*
 * PostgreSQL stops while BACK_CLIENTS clients send /v1/me, /readyz and
 * logins without pause, so every HTTP thread keeps failing to connect
 * and stays in its reconnect back-off. PostgreSQL restarts: once any
 * request has got 200, no request sent after that gets 503 (a thread
 * in its back-off waits it out and tries; a connection made by another
 * thread ends every back-off). GPUPOOL_TEST_OUTAGE_ROUNDS rounds (3
 * here, about 4 s each; the old refusal failed about one round in six).
 */
static void
test_no_503_once_one_succeeded(void **state)
{
	static struct back_client ws[BACK_CLIENTS];
	struct fixture *fx = *state;
	const char *env = getenv("GPUPOOL_TEST_OUTAGE_ROUNDS");
	int rounds = env != NULL && atoi(env) > 0 ? atoi(env) : 3;

	for (int round = 0; round < rounds; round++) {
		long long first_ok = 0, last_503 = 0;
		int late = 0, ok_after = 0;
		int64_t deadline;

		memset(ws, 0, sizeof(ws));
		atomic_store(&back_stop, false);
		atomic_store(&back_down_us, 0);
		for (int i = 0; i < BACK_CLIENTS; i++) {
			ws[i].id = i;
			ws[i].base_url = fx->server->base_url;
			ws[i].token = fx->admin_token;
			assert_int_equal(pthread_create(&ws[i].thread, NULL, back_main, &ws[i]), 0);
		}
		assert_int_equal(fixture_pg_stop(fx), 0);
		atomic_store(&back_down_us, time_mono_us());
		/* every client has been refused a few times: the threads are in their back-off */
		deadline = time_mono_us() + 10 * 1000000;
		for (int i = 0; i < BACK_CLIENTS; i++)
			while (atomic_load(&ws[i].unavailable) < 3 && time_mono_us() < deadline)
				sleep_ms(10);
		assert_int_equal(fixture_pg_start(fx), 0);
		/* a while of traffic after PostgreSQL is back (the back-off is 200 ms) */
		sleep_ms(1000);
		atomic_store(&back_stop, true);
		for (int i = 0; i < BACK_CLIENTS; i++)
			assert_int_equal(pthread_join(ws[i].thread, NULL), 0);
		for (int i = 0; i < BACK_CLIENTS; i++) {
			assert_int_equal(ws[i].bad, 0);
			assert_true(atomic_load(&ws[i].unavailable) >= 3);
			ok_after += ws[i].ok_after;
			if (ws[i].first_ok_us != 0 &&
			    (first_ok == 0 || ws[i].first_ok_us < first_ok))
				first_ok = ws[i].first_ok_us;
		}
		assert_true(first_ok != 0);
		for (int i = 0; i < BACK_CLIENTS; i++) {
			if (ws[i].last_503_sent_us > first_ok) {
				late++;
				print_error("client %d: 503 sent %lld ms after the first 200: %s\n",
				    i, (ws[i].last_503_sent_us - first_ok) / 1000, ws[i].last_503);
			}
			if (ws[i].last_503_sent_us > last_503)
				last_503 = ws[i].last_503_sent_us;
		}
		fprintf(stderr,
		    "round %d: %d answered 200 after the restart; the last 503 was asked for %lld "
		    "ms before the first 200\n",
		    round, ok_after, (first_ok - last_503) / 1000);
		assert_int_equal(late, 0);
	}
}

static int
group_setup(void **state)
{
	/* a known number of HTTP threads, each with its own connection */
	static const char *const env[] = { "GPUPOOL_THREADS=4", NULL };
	const struct fixture_options opts = { .private_pg = true, .server_env = env };
	struct fixture *fx;

	if (fixture_create(&opts, &fx) != 0)
		return -1;
	*state = fx;
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_outage_and_recovery),
		cmocka_unit_test(test_no_503_after_restart),
		cmocka_unit_test(test_no_503_once_one_succeeded),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
