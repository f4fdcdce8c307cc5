/*
 * test_deadlock.c - the global lock order under mixed load on two
 * replicas: creates, expands, shrinks and releases approved from both
 * replicas at once, pools whose end time passes (so the expiry workers of
 * both replicas release them), a project under a quota, and an operator
 * cordoning and uncordoning nodes, and released slices confirmed (as
 * the agents will) while it runs. PostgreSQL must detect no deadlock:
 * its log (a private cluster's, so only this test's) has no "deadlock
 * detected" and pg_stat_database.deadlocks stays where it was; nothing
 * may answer 5xx, and the database invariants hold afterwards. It runs
 * for GPUPOOL_TEST_DEADLOCK_SECONDS (20 by default, what CI runs; 60
 * for the acceptance run).
 *
 * The second test runs the same load on nodes of real gpupool-agent
 * processes (fake backend) spread over both replicas: the agents' status
 * reports (instances created and destroyed, pools settling ready or
 * degraded, releases confirmed) run against the approvals, a GPU fails
 * with Xid 79 and one agent stops long enough for its node to go unknown
 * and comes back. The same assertions hold.
 *
 * The approval latency seen by the clients (p50, p99, max) is printed,
 * for the record; it is not asserted (the machines are shared).
 */
#include "fixture.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define NTHREADS 6
#define RUN_SECONDS 20 /* GPUPOOL_TEST_DEADLOCK_SECONDS overrides */
#define MAX_SAMPLES 20000

static const char *op;    /* operator */
static const char *alice; /* owner of every project */

struct load {
	struct fixture *fx;
	const char *tag; /* pool name prefix: each test its own pools */
	const char *urls[2];
	atomic_int stop;
	atomic_long ok;       /* approvals answered 200 */
	atomic_long refused;  /* approvals answered 409 / 422 (capacity, quota, state) */
	atomic_long busy;     /* of them: 409 conflict (retries ran out) */
	atomic_long short_;   /* of them: 409 insufficient_capacity */
	atomic_long failed5;  /* answers of 500 and above, or no answer */
	atomic_long cordons;  /* operator node updates */
	pthread_mutex_t lock; /* guards the samples */
	double samples[MAX_SAMPLES];
	int nsamples;
	char first_error[512];
};

struct worker {
	struct load *l;
	int id;
	unsigned seed;
	struct gp_client *c[2];
};

static double
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void
note_5xx(struct load *l, const char *what, const struct gp_client_response *r)
{
	atomic_fetch_add(&l->failed5, 1);
	pthread_mutex_lock(&l->lock);
	if (l->first_error[0] == '\0')
		snprintf(l->first_error, sizeof(l->first_error), "%s: %ld %.300s", what,
		    r ? r->status : 0L, r && r->body ? r->body : "");
	pthread_mutex_unlock(&l->lock);
}

/* One call on replica rep; returns the status (0: no answer) and the id of a created object. */
static long
call(struct worker *w, int rep, const char *token, const char *method, const char *path,
    const char *body, int64_t *id)
{
	struct gp_client_response r;
	long status;

	memset(&r, 0, sizeof(r));
	if (gp_client_set_token(w->c[rep], token) < 0 ||
	    gp_client_request(w->c[rep], method, path, body, body ? strlen(body) : 0, NULL, &r) <
		0) {
		note_5xx(w->l, path, NULL);
		gp_client_response_free(&r);
		return 0;
	}
	status = r.status;
	if (status >= 500)
		note_5xx(w->l, path, &r);
	if (status == 409 && r.json != NULL && fx_json_has(r.json, "code") &&
	    strcmp(json_object_get_string(fx_json(r.json, "code")), "conflict") == 0 &&
	    strstr(path, "/approve") != NULL)
		atomic_fetch_add(&w->l->busy, 1);
	if (status == 409 && r.json != NULL && fx_json_has(r.json, "code") &&
	    strcmp(json_object_get_string(fx_json(r.json, "code")), "insufficient_capacity") == 0)
		atomic_fetch_add(&w->l->short_, 1);
	if (id != NULL && r.json != NULL && fx_json_has(r.json, "id"))
		*id = json_object_get_int64(fx_json(r.json, "id"));
	gp_client_response_free(&r);
	return status;
}

/* Submit a request and approve it on a random replica: true when approved. */
static bool
submit_approve(struct worker *w, const char *project, const char *action, const char *pool,
    const char *items, const char *extra)
{
	char path[128], body[512];
	int64_t id = 0;
	long st;
	double t0;

	snprintf(path, sizeof(path), "/v1/projects/%s/pool-requests", project);
	snprintf(body, sizeof(body),
	    "{\"action\":\"%s\",\"pool\":\"%s\"%s%s%s,\"justification\":\"load\"%s}", action, pool,
	    items ? ",\"items\":[" : "", items ? items : "", items ? "]" : "", extra ? extra : "");
	st = call(w, (int)(rand_r(&w->seed) % 2), alice, "POST", path, body, &id);
	if (st != 201)
		return false;
	snprintf(path, sizeof(path), "/v1/pool-requests/%lld/approve", (long long)id);
	t0 = now_ms();
	st = call(w, (int)(rand_r(&w->seed) % 2), op, "POST", path, "{\"note\":\"load\"}", NULL);
	if (st == 200) {
		double dt = now_ms() - t0;

		atomic_fetch_add(&w->l->ok, 1);
		pthread_mutex_lock(&w->l->lock);
		if (w->l->nsamples < MAX_SAMPLES)
			w->l->samples[w->l->nsamples++] = dt;
		pthread_mutex_unlock(&w->l->lock);
		return true;
	}
	if (st == 409 || st == 422)
		atomic_fetch_add(&w->l->refused, 1);
	return false;
}

static const char *const shapes[] = {
	"\"H100-80GB/1g.10gb=1\"",
	"\"H100-80GB/1g.10gb=2\",\"H100-80GB/2g.20gb=1\"",
	"\"H100-80GB/3g.40gb=1\"",
	"\"H100-80GB/2g.20gb=2\"",
	"\"H100-80GB/1g.10gb=3\",\"H100-80GB/3g.40gb=1\"",
};

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct load *l = w->l;
	int n = 0;

	for (int i = 0; i < 2; i++) {
		w->c[i] = gp_client_create(l->urls[i], NULL);
		gp_client_set_retries(w->c[i], 0);
	}
	while (!atomic_load(&l->stop)) {
		char pool[64];
		const char *project = w->id == 0 ? "dq" : (w->id % 2 ? "da" : "db");
		int shape = (int)(rand_r(&w->seed) % (sizeof(shapes) / sizeof(shapes[0])));
		int kind = (int)(rand_r(&w->seed) % 4);

		snprintf(pool, sizeof(pool), "%s%d-%d", w->l->tag, w->id, n++);
		if (kind == 0) {
			/* ends in about a second: the expiry workers release it */
			char extra[96];
			time_t end = time(NULL) + 2;
			struct tm tm;

			gmtime_r(&end, &tm);
			strftime(extra, sizeof(extra), ",\"ends_at\":\"%Y-%m-%dT%H:%M:%SZ\"", &tm);
			(void)submit_approve(w, project, "create", pool, shapes[shape], extra);
			continue;
		}
		if (!submit_approve(w, project, "create", pool, shapes[shape], NULL))
			continue;
		if (kind >= 2)
			(void)submit_approve(w, project, "expand", pool, "\"H100-80GB/1g.10gb=1\"",
			    NULL);
		if (kind == 3)
			(void)submit_approve(w, project, "shrink", pool, "\"H100-80GB/1g.10gb=1\"",
			    NULL);
		(void)submit_approve(w, project, "release", pool, NULL, NULL);
	}
	for (int i = 0; i < 2; i++)
		gp_client_destroy(w->c[i]);
	return NULL;
}

/* The operator cordons and uncordons nodes while approvals run. */
static void *
cordon_main(void *arg)
{
	struct worker *w = arg;
	struct load *l = w->l;
	int n = 0;

	for (int i = 0; i < 2; i++) {
		w->c[i] = gp_client_create(l->urls[i], NULL);
		gp_client_set_retries(w->c[i], 0);
	}
	while (!atomic_load(&l->stop)) {
		char path[64];

		snprintf(path, sizeof(path), "/v1/nodes/dl-n%d/%s", (n / 2) % 4,
		    n % 2 ? "uncordon" : "cordon");
		(void)call(w, n % 2, op, "POST", path, NULL, NULL);
		atomic_fetch_add(&l->cordons, 1);
		n++;
		usleep(50000);
	}
	/* leave every node ready */
	for (int i = 0; i < 4; i++) {
		char path[64];

		snprintf(path, sizeof(path), "/v1/nodes/dl-n%d/uncordon", i);
		(void)call(w, 0, op, "POST", path, NULL, NULL);
	}
	for (int i = 0; i < 2; i++)
		gp_client_destroy(w->c[i]);
	return NULL;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int64_t
deadlocks(struct fixture *fx)
{
	/* the statistics of other backends reach the view when they flush */
	usleep(1500000);
	fx_sql_exec(fx, "SELECT pg_stat_clear_snapshot()");
	return fx_sql_int64(fx,
	    "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()");
}

/* Lines of the PostgreSQL log past offset that say "deadlock detected"; each printed with its DETAIL. */
static int
log_deadlocks(const char *path, long offset)
{
	FILE *f = fopen(path, "r");
	char line[4096];
	int n = 0, detail = 0;

	assert_non_null(f);
	assert_int_equal(fseek(f, offset, SEEK_SET), 0);
	while (fgets(line, sizeof(line), f) != NULL) {
		if (strstr(line, "deadlock detected") != NULL) {
			n++;
			detail = 8;
		}
		if (detail > 0) {
			printf("# %s", line);
			detail--;
		}
	}
	fclose(f);
	return n;
}

static long
file_size(const char *path)
{
	FILE *f = fopen(path, "r");
	long n;

	assert_non_null(f);
	assert_int_equal(fseek(f, 0, SEEK_END), 0);
	n = ftell(f);
	fclose(f);
	return n;
}

static void
check_invariants(struct fixture *fx)
{
	fx_assert_pool_invariants(fx);
	/* the class counters agree with the GPUs they count */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT cluster_id, model, mig_enabled, health = 'ok' AS h, "
			     "node_status = 'ready' AS r, layout, count(*) AS n FROM gpus GROUP BY 1, 2, 3, 4, 5, 6) "
			     "g FULL JOIN (SELECT * FROM gpu_classes WHERE gpus <> 0) c ON (c.cluster_id, c.model, "
			     "c.mig_enabled, c.healthy, c.node_ready, c.layout) = (g.cluster_id, g.model, "
			     "g.mig_enabled, g.h, g.r, g.layout) WHERE c.gpus IS DISTINCT FROM g.n"),
	    0);
}

/*
 * What an agent's confirmation of its releases will do, in the global
 * lock order (GPUs in id order, then their allocations).
 */
static const char confirm_releases[] =
    "DO $$DECLARE ids bigint[]; BEGIN "
    "SELECT array_agg(id ORDER BY id) INTO ids FROM (SELECT id FROM gpus WHERE id IN "
    "(SELECT gpu_id FROM allocations WHERE state = 'releasing') ORDER BY id "
    "FOR NO KEY UPDATE) g; "
    "UPDATE allocations SET state = 'released', updated_at = now() "
    "WHERE state = 'releasing' AND gpu_id = ANY (ids); END$$";

static void
test_mixed_load_two_replicas(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { "GPUPOOL_EXPIRY_INTERVAL=1", NULL };
	struct load *l = calloc(1, sizeof(*l));
	struct worker w[NTHREADS + 1];
	pthread_t t[NTHREADS + 1];
	struct fx_server *second;
	struct gp_client_response *r;
	int64_t d0, d1, expired;
	const char *env_seconds = getenv("GPUPOOL_TEST_DEADLOCK_SECONDS");
	int seconds =
	    env_seconds != NULL && atoi(env_seconds) > 0 ? atoi(env_seconds) : RUN_SECONDS;
	const char *pglog = fx_str(fx, "%s/pg/postgres.log", fx->tmpdir);
	long log0;
	int logged;

	assert_non_null(l);
	op = fixture_create_user(fx, "op", "operator");
	alice = fixture_create_user(fx, "alice", "none");
	for (int i = 0; i < 3; i++) {
		const char *p = i == 0 ? "da" : i == 1 ? "db" : "dq";

		r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
		    "{\"name\":\"%s\",\"display_name\":\"%s\"}", p, p);
		assert_status(r, 201);
		r = fx_request(fx, fx->admin_token, "PUT",
		    fx_str(fx, "/v1/projects/%s/members/alice", p), "{\"role\":\"owner\"}");
		assert_status(r, 201);
	}
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/dq/quota",
	    "{\"items\":[{\"model\":\"H100-80GB\",\"profile\":\"1g.10gb\",\"count\":6},"
	    "{\"model\":\"H100-80GB\",\"profile\":\"2g.20gb\",\"count\":3},"
	    "{\"model\":\"H100-80GB\",\"profile\":\"3g.40gb\",\"count\":2}]}");
	assert_status(r, 201);
	fx_fleet(fx, "dl", "H100-80GB", 4, 4, true);

	/* both replicas run their expiry worker every second */
	assert_int_equal(fixture_server_stop(fx, fx->server), 0);
	fx->server = fixture_server_start(fx, env);
	assert_non_null(fx->server);
	second = fixture_server_start(fx, env);
	assert_non_null(second);
	l->fx = fx;
	l->tag = "w";
	l->urls[0] = fx->server->base_url;
	l->urls[1] = second->base_url;
	pthread_mutex_init(&l->lock, NULL);

	d0 = deadlocks(fx);
	log0 = file_size(pglog);
	for (int i = 0; i <= NTHREADS; i++) {
		w[i].l = l;
		w[i].id = i;
		w[i].seed = 0x5eed0000u + (unsigned)i;
		assert_int_equal(pthread_create(&t[i], NULL,
				     i == NTHREADS ? cordon_main : worker_main, &w[i]),
		    0);
	}
	/*
	 * Until the agents exist, nothing confirms a release: do what their
	 * confirmation will do, so that released slices come back.
	 */
	for (int i = 0; i < seconds * 5; i++) {
		usleep(200000);
		fx_sql_exec(fx, confirm_releases);
	}
	atomic_store(&l->stop, 1);
	for (int i = 0; i <= NTHREADS; i++)
		pthread_join(t[i], NULL);
	sleep(3); /* the last end times pass and expiry releases them */
	d1 = deadlocks(fx);

	qsort(l->samples, (size_t)l->nsamples, sizeof(double), cmp_double);
	expired = fx_sql_int64(fx,
	    "SELECT count(*) FROM pool_requests WHERE action = 'release' AND requested_by IS NULL");
	printf("# approvals: %ld approved, %ld refused (%ld of them 409 conflict, %ld insufficient capacity), %ld failed "
	       "(5xx or no answer); "
	       "%ld node updates; %lld pools released by expiry\n",
	    atomic_load(&l->ok), atomic_load(&l->refused), atomic_load(&l->busy),
	    atomic_load(&l->short_), atomic_load(&l->failed5), atomic_load(&l->cordons),
	    (long long)expired);
	if (l->nsamples > 0)
		printf("# approval latency ms: p50 %.1f  p99 %.1f  max %.1f (n=%d)\n",
		    l->samples[l->nsamples / 2], l->samples[(int)((double)l->nsamples * 0.99)],
		    l->samples[l->nsamples - 1], l->nsamples);
	logged = log_deadlocks(pglog, log0);
	printf("# %d s: deadlocks detected by PostgreSQL: %lld (statistics), %d (\"deadlock "
	       "detected\" in its log)\n",
	    seconds, (long long)(d1 - d0), logged);
	if (l->first_error[0] != '\0')
		printf("# first failure: %s\n", l->first_error);

	assert_true(atomic_load(&l->ok) > 50);
	assert_int_equal(logged, 0);
	assert_int_equal(d1 - d0, 0);
	assert_int_equal(atomic_load(&l->failed5), 0);
	check_invariants(fx);
	assert_int_equal(fixture_server_stop(fx, second), 0);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

/* Wait up to seconds for sql to give want; returns what it gave last. */
static int64_t
wait_for(struct fixture *fx, int seconds, int64_t want, const char *sql)
{
	int64_t got = -1;

	for (int i = 0; i < seconds * 10; i++) {
		got = fx_sql_int64(fx, sql);
		if (got == want)
			break;
		usleep(100000);
	}
	return got;
}

#define AGENTS 4

static void
test_agents_and_approvals_two_replicas(void **state)
{
	struct fixture *fx = *state;
	static const char *const env[] = { "GPUPOOL_EXPIRY_INTERVAL=1", "GPUPOOL_AGENT_GRACE=4",
		NULL };
	struct load *l = calloc(1, sizeof(*l));
	struct worker w[NTHREADS];
	pthread_t t[NTHREADS];
	struct fx_server *rep[2];
	struct gp_client_response *r;
	pid_t agents[AGENTS];
	int64_t d0, d1, left;
	const char *pglog = fx_str(fx, "%s/pg/postgres.log", fx->tmpdir);
	const char *env_seconds = getenv("GPUPOOL_TEST_DEADLOCK_SECONDS");
	int seconds =
	    env_seconds != NULL && atoi(env_seconds) > 0 ? atoi(env_seconds) : RUN_SECONDS;
	long log0;
	int logged;

	assert_non_null(l);
	/* two replicas with a short agent grace; the first test's nodes cordoned */
	for (int i = 0; i < FIXTURE_MAX_SERVERS; i++)
		if (&fx->servers[i] != fx->server && fx->servers[i].pid != 0)
			assert_int_equal(fixture_server_stop(fx, &fx->servers[i]), 0);
	assert_int_equal(fixture_server_stop(fx, fx->server), 0);
	rep[0] = fx->server = fixture_server_start(fx, env);
	assert_non_null(rep[0]);
	rep[1] = fixture_server_start(fx, env);
	assert_non_null(rep[1]);
	for (int i = 0; i < 4; i++) {
		r = fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/dl-n%d/cordon", i), NULL);
		assert_status(r, 200);
	}
	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"dg\"}");
	assert_status(r, 201);
	for (int i = 0; i < AGENTS; i++)
		agents[i] = fx_agent_spawn(fx, rep[i % 2], "dg", fx_str(fx, "dg-a%d", i),
		    "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":2}]}", NULL);
	assert_int_equal(wait_for(fx, 60, AGENTS * 100 + AGENTS * 2,
			     "SELECT count(DISTINCT n.id) FILTER (WHERE n.status = 'ready') * 100 "
			     "+ count(g.id) FROM nodes n JOIN clusters c ON c.id = n.cluster_id "
			     "LEFT JOIN gpus g ON g.node_id = n.id WHERE c.name = 'dg'"),
	    AGENTS * 100 + AGENTS * 2);

	l->fx = fx;
	l->tag = "g";
	l->urls[0] = rep[0]->base_url;
	l->urls[1] = rep[1]->base_url;
	pthread_mutex_init(&l->lock, NULL);
	d0 = deadlocks(fx);
	log0 = file_size(pglog);
	for (int i = 0; i < NTHREADS; i++) {
		w[i].l = l;
		w[i].id = i;
		w[i].seed = 0xa9e70000u + (unsigned)i;
		assert_int_equal(pthread_create(&t[i], NULL, worker_main, &w[i]), 0);
	}
	for (int s = 0; s < seconds; s++) {
		/* a third in: a GPU fails (Xid 79); half-way: an agent goes quiet past the grace */
		if (s == seconds / 3) {
			const char *ff =
			    fx_str(fx, "%s/fake-faults.json", fx_agent_dir(fx, "dg-a0"));
			FILE *f = fopen(ff, "w");

			assert_non_null(f);
			fputs("{\"gpus\":[{\"index\":1,\"xids\":[79]}]}", f);
			assert_int_equal(fclose(f), 0);
		}
		if (s == seconds / 2)
			assert_int_equal(kill(agents[3], SIGSTOP), 0);
		if (s == seconds / 2 + 7 || (s == seconds - 1 && seconds / 2 + 7 >= seconds))
			assert_int_equal(kill(agents[3], SIGCONT), 0);
		sleep(1);
	}
	atomic_store(&l->stop, 1);
	for (int i = 0; i < NTHREADS; i++)
		pthread_join(t[i], NULL);
	kill(agents[3], SIGCONT);
	/* the agents finish what was approved: nothing left waiting on a live, healthy GPU */
	left = wait_for(fx, 60, 0,
	    "SELECT count(*) FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
	    "JOIN clusters c ON c.id = g.cluster_id WHERE c.name = 'dg' "
	    "AND a.state IN ('reserved', 'releasing') AND g.health = 'ok' "
	    "AND g.node_status = 'ready'");
	d1 = deadlocks(fx);
	qsort(l->samples, (size_t)l->nsamples, sizeof(double), cmp_double);
	printf("# with %d agents: %ld approved, %ld refused (%ld insufficient capacity), %ld failed "
	       "(5xx or no answer); instances the agents made: %lld; GPUs failed: %lld\n",
	    AGENTS, atomic_load(&l->ok), atomic_load(&l->refused), atomic_load(&l->short_),
	    atomic_load(&l->failed5),
	    (long long)fx_sql_int64(fx,
		"SELECT count(*) FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
		"JOIN clusters c ON c.id = g.cluster_id WHERE c.name = 'dg' "
		"AND a.device_uuid IS NOT NULL"),
	    (long long)fx_sql_int64(fx,
		"SELECT count(*) FROM gpus g JOIN clusters c ON c.id = g.cluster_id "
		"WHERE c.name = 'dg' AND g.health <> 'ok'"));
	if (l->nsamples > 0)
		printf("# approval latency ms: p50 %.1f  p99 %.1f  max %.1f (n=%d)\n",
		    l->samples[l->nsamples / 2], l->samples[(int)((double)l->nsamples * 0.99)],
		    l->samples[l->nsamples - 1], l->nsamples);
	logged = log_deadlocks(pglog, log0);
	printf("# %d s: deadlocks detected by PostgreSQL: %lld (statistics), %d (log)\n", seconds,
	    (long long)(d1 - d0), logged);
	if (l->first_error[0] != '\0')
		printf("# first failure: %s\n", l->first_error);

	assert_true(atomic_load(&l->ok) > 10);
	assert_int_equal(logged, 0);
	assert_int_equal(d1 - d0, 0);
	assert_int_equal(atomic_load(&l->failed5), 0);
	assert_int_equal(left, 0);
	/* the agents did the work: instances made, the failed GPU seen */
	assert_true(fx_sql_int64(fx,
			"SELECT count(*) FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
			"JOIN clusters c ON c.id = g.cluster_id WHERE c.name = 'dg' "
			"AND a.device_uuid IS NOT NULL") > 5);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus g JOIN nodes n ON n.id = g.node_id "
			     "WHERE n.name = 'dg-a0' AND g.gpu_index = 1 AND g.health = 'failed'"),
	    1);
	check_invariants(fx);
	for (int i = 0; i < AGENTS; i++)
		assert_int_equal(fx_agent_stop(fx, agents[i]), 0);
	assert_int_equal(fixture_server_stop(fx, rep[1]), 0);
	pthread_mutex_destroy(&l->lock);
	free(l);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_mixed_load_two_replicas),
		cmocka_unit_test(test_agents_and_approvals_two_replicas),
	};

	/* a private cluster: its log holds this test's deadlocks only */
	return fixture_exit_status(
	    cmocka_run_group_tests(tests, fixture_group_setup_private_pg, fixture_group_teardown));
}
