/*
 * test_pools_concurrency.c - 32 clients for 30 s against two gpupoold
 * processes sharing one database, on a small fleet (12 MIG H100s and 4
 * whole-GPU A100s), submitting, approving (often the same request twice
 * at once, from both servers), expanding, shrinking, releasing,
 * rejecting and cancelling overlapping pool requests, while a stand-in
 * for the node agents confirms releases. Then SQL shows the invariants
 * held throughout:
 *
 *  - no two live allocations overlap on a GPU;
 *  - every approved create/expand made exactly its items, every approved
 *    shrink freed exactly its items;
 *  - every pool's live allocations equal its SpecAndCount;
 *  - every open usage-ledger interval has its allocations (per pool and
 *    kind the open intervals sum to the live allocations), and every
 *    interval opened by a create/expand has allocations of that request;
 *  - each request's history ends in its state; gpus.layout mirrors the
 *    allocations;
 *
 * and that the exclusion constraint rejects a forced overlapping insert.
 * No answer may be a 5xx or a transport error.
 */
#include "fixture.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CLIENTS 32
#define PROJECTS 4
#define SECONDS 30
#define MAX_POOLS 64
#define SHARED_MAX 4096

struct shared {
	pthread_mutex_t lock;
	int64_t pending[SHARED_MAX]; /* submitted requests anyone may approve */
	int npending;
	atomic_long status[600]; /* answers by HTTP status */
	atomic_long transport_errors;
	atomic_long approved;
	atomic_long insufficient;
	atomic_long double_approve_conflicts;
	atomic_bool stop;
	char first_5xx[512];
	char db_url[1024];
	const char *base[2];
	const char *op_token;
	const char *user_token[PROJECTS];
};

struct worker {
	struct shared *sh;
	int index;
	pthread_t thread;
	struct gp_client *c;
	unsigned seed;
	struct {
		char name[32];
		bool live; /* created by this client and not yet released */
		int64_t create_id;
	} pools[MAX_POOLS];
	int npools;
	long seq;
};

static const char *const mig_items[] = {
	"\"H100-80GB/1g.10gb=1\"",
	"\"H100-80GB/1g.10gb=2\"",
	"\"H100-80GB/2g.20gb=1\"",
	"\"H100-80GB/3g.40gb=1\"",
	"\"H100-80GB/1g.20gb=1\"",
	"\"H100-80GB/3g.40gb=1\",\"H100-80GB/1g.10gb=1\"",
	"\"A100-40GB/full=1\"",
};

/* One call; records the status; returns it (0: transport error). */
static long
call(struct worker *w, const char *token, const char *method, const char *path, const char *body,
    struct gp_client_response *out)
{
	struct shared *sh = w->sh;
	long st;

	if (gp_client_set_token(w->c, token) < 0)
		return 0;
	if (gp_client_request(w->c, method, path, body, body ? strlen(body) : 0, NULL, out) < 0) {
		atomic_fetch_add(&sh->transport_errors, 1);
		return 0;
	}
	st = out->status;
	if (st > 0 && st < 600)
		atomic_fetch_add(&sh->status[st], 1);
	if (st >= 500) {
		pthread_mutex_lock(&sh->lock);
		if (sh->first_5xx[0] == '\0')
			snprintf(sh->first_5xx, sizeof(sh->first_5xx), "%s %s -> %ld %s", method,
			    path, st, out->body ? out->body : "");
		pthread_mutex_unlock(&sh->lock);
	}
	return st;
}

static void
push_pending(struct shared *sh, int64_t id)
{
	pthread_mutex_lock(&sh->lock);
	if (sh->npending < SHARED_MAX)
		sh->pending[sh->npending++] = id;
	pthread_mutex_unlock(&sh->lock);
}

/* A pending request id of anyone's; sometimes left in place so that two clients approve it. */
static int64_t
take_pending(struct worker *w)
{
	struct shared *sh = w->sh;
	int64_t id = 0;

	pthread_mutex_lock(&sh->lock);
	if (sh->npending > 0) {
		int i = (int)(rand_r(&w->seed) % (unsigned)sh->npending);

		id = sh->pending[i];
		if (rand_r(&w->seed) % 4 != 0)
			sh->pending[i] = sh->pending[--sh->npending];
	}
	pthread_mutex_unlock(&sh->lock);
	return id;
}

static int64_t
submit(struct worker *w, const char *action, const char *pool, const char *items)
{
	struct gp_client_response r;
	char path[128], body[512];
	int64_t id = 0;
	int p = w->index % PROJECTS;

	snprintf(path, sizeof(path), "/v1/projects/c%d/pool-requests", p);
	if (items != NULL)
		snprintf(body, sizeof(body), "{\"action\":\"%s\",\"pool\":\"%s\",\"items\":[%s]}",
		    action, pool, items);
	else
		snprintf(body, sizeof(body), "{\"action\":\"%s\",\"pool\":\"%s\"}", action, pool);
	if (call(w, w->sh->user_token[p], "POST", path, body, &r) == 201) {
		struct json_object *v = gp_client_json_get(r.json, "id");

		id = v ? json_object_get_int64(v) : 0;
	}
	gp_client_response_free(&r);
	return id;
}

static long
decide(struct worker *w, int64_t id, const char *what, const char *token, const char *body)
{
	struct gp_client_response r;
	char path[128];
	long st;

	snprintf(path, sizeof(path), "/v1/pool-requests/%lld/%s", (long long)id, what);
	st = call(w, token, "POST", path, body, &r);
	if (st == 200 && strcmp(what, "approve") == 0)
		atomic_fetch_add(&w->sh->approved, 1);
	if (st == 409 && strcmp(what, "approve") == 0) {
		struct json_object *code = gp_client_json_get(r.json, "code");

		if (code != NULL &&
		    strcmp(json_object_get_string(code), "insufficient_capacity") == 0)
			atomic_fetch_add(&w->sh->insufficient, 1);
		else
			atomic_fetch_add(&w->sh->double_approve_conflicts, 1);
	}
	gp_client_response_free(&r);
	return st;
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct shared *sh = w->sh;
	const char *op = sh->op_token;

	while (!atomic_load(&sh->stop)) {
		unsigned dice = rand_r(&w->seed) % 100;
		int live = -1, nlive = 0;

		for (int i = 0; i < w->npools; i++) {
			if (!w->pools[i].live)
				continue;
			nlive++;
			if (live < 0 || rand_r(&w->seed) % 2)
				live = i;
		}
		/* at most two live pools each: create while below, churn at the limit */
		if (nlive < 2 && dice < 50) {
			int slot = -1;
			char name[32];
			int64_t id;

			for (int i = 0; i < MAX_POOLS && slot < 0; i++)
				if (i >= w->npools || !w->pools[i].live)
					slot = i;
			snprintf(name, sizeof(name), "w%d-%ld", w->index, w->seq++);
			id = submit(w, "create", name,
			    mig_items[rand_r(&w->seed) %
				(sizeof(mig_items) / sizeof(mig_items[0]))]);
			if (id == 0)
				continue;
			/* tracked from now on, whoever approves it */
			snprintf(w->pools[slot].name, sizeof(w->pools[slot].name), "%s", name);
			w->pools[slot].live = true;
			w->pools[slot].create_id = id;
			if (slot >= w->npools)
				w->npools = slot + 1;
			if (rand_r(&w->seed) % 3 == 0)
				push_pending(sh, id); /* someone else approves it */
			else if (decide(w, id, "approve", op, "{\"note\":\"c\"}") != 200)
				push_pending(sh, id); /* left pending: approved or rejected later */
		} else if (dice < 70 || live < 0) {
			/* approve anyone's pending request (sometimes one another client holds too) */
			int64_t id = take_pending(w);

			if (id != 0)
				decide(w, id, "approve", op, NULL);
		} else if (dice < 78) {
			int64_t id = submit(w, "expand", w->pools[live].name,
			    mig_items[rand_r(&w->seed) % 5]);

			if (id != 0 && decide(w, id, "approve", op, "{}") != 200)
				decide(w, id, "cancel", sh->user_token[w->index % PROJECTS], NULL);
		} else if (dice < 84) {
			int64_t id =
			    submit(w, "shrink", w->pools[live].name, "\"H100-80GB/1g.10gb=1\"");

			if (id != 0)
				decide(w, id, "approve", op, "{}");
		} else if (dice < 94) {
			struct gp_client_response r;
			char path[128], body[160];
			int p = w->index % PROJECTS;
			long st;
			int64_t id;

			snprintf(path, sizeof(path), "/v1/projects/c%d/pool-requests", p);
			snprintf(body, sizeof(body), "{\"action\":\"release\",\"pool\":\"%s\"}",
			    w->pools[live].name);
			st = call(w, sh->user_token[p], "POST", path, body, &r);
			id =
			    st == 201 ? json_object_get_int64(gp_client_json_get(r.json, "id")) : 0;
			gp_client_response_free(&r);
			if (st == 201 && decide(w, id, "approve", op, NULL) == 200) {
				w->pools[live].live = false;
			} else if (st == 422) {
				w->pools[live].live =
				    false; /* never approved: rejected or cancelled */
			} else if (st == 409) {
				/* still pending creation: withdraw it (unless approved meanwhile) */
				if (decide(w, w->pools[live].create_id, "cancel", sh->user_token[p],
					NULL) == 200)
					w->pools[live].live = false;
			}
		} else if (dice < 97) {
			int64_t id = take_pending(w);

			if (id != 0)
				decide(w, id, "reject", op, "{\"reason\":\"load\"}");
		} else {
			/* a pending request cancelled while others may be approving it */
			char name[32];
			int64_t id;

			snprintf(name, sizeof(name), "x%d-%ld", w->index, w->seq++);
			id = submit(w, "create", name, "\"H100-80GB/1g.10gb=1\"");
			if (id != 0) {
				push_pending(sh, id);
				decide(w, id, "cancel", sh->user_token[w->index % PROJECTS], NULL);
			}
		}
	}
	return NULL;
}

/* The node agents' part: releasing allocations are gone, a few at a time. */
static void *
agent_main(void *arg)
{
	struct shared *sh = arg;
	PGconn *conn = PQconnectdb(sh->db_url);

	while (!atomic_load(&sh->stop)) {
		PGresult *r = PQexec(conn,
		    "UPDATE allocations SET state = 'released', "
		    "released_at = now() WHERE id IN (SELECT id FROM allocations "
		    "WHERE state = 'releasing' ORDER BY id LIMIT 20)");

		PQclear(r);
		usleep(200000);
	}
	PQfinish(conn);
	return NULL;
}

static void
test_concurrent_workflow(void **state)
{
	static const char *const env[] = { "GPUPOOL_EXPIRY_INTERVAL=1", NULL };
	struct fixture *fx = *state;
	struct shared *sh = calloc(1, sizeof(*sh));
	struct worker *w = calloc(CLIENTS, sizeof(*w));
	struct fx_server *second;
	pthread_t agent;
	long total = 0;

	assert_non_null(sh);
	assert_non_null(w);
	second = fixture_server_start(fx, env);
	assert_non_null(second);
	pthread_mutex_init(&sh->lock, NULL);
	snprintf(sh->db_url, sizeof(sh->db_url), "%s", fx->db_url);
	sh->base[0] = fx->servers[0].base_url;
	sh->base[1] = second->base_url;
	sh->op_token = fixture_create_user(fx, "op", "operator");

	/* the fleet: 6 nodes x 2 MIG H100s, 2 nodes x 2 whole A100s */
	fx_sql_exec(fx, "INSERT INTO clusters (name) VALUES ('cc')");
	/* managed by an agent, which the stand-in below plays (docs/pools.md) */
	fx_sql_exec(fx,
	    "INSERT INTO nodes (cluster_id, name, hostname, cpu_millicores, memory_bytes, "
	    "managed_by_agent, agent_heartbeat_at) "
	    "SELECT c.id, 'cn' || i, 'cn' || i, 1000, 1000, true, now() + interval '1 day' "
	    "FROM clusters c, generate_series(1, 8) i WHERE c.name = 'cc'");
	fx_sql_exec(fx,
	    "INSERT INTO gpus (node_id, gpu_index, uuid, model, memory_mib, mig_enabled) "
	    "SELECT n.id, k, 'GPU-' || lpad(to_hex(n.id), 8, '0') || '-0000-4000-8000-' "
	    "|| lpad(to_hex(k), 12, '0'), CASE WHEN n.name IN ('cn7', 'cn8') THEN 'A100-40GB' "
	    "ELSE 'H100-80GB' END, 40960, n.name NOT IN ('cn7', 'cn8') "
	    "FROM nodes n, generate_series(0, 1) k WHERE n.name LIKE 'cn%'");
	for (int p = 0; p < PROJECTS; p++) {
		struct gp_client_response *r;
		const char *user = fx_str(fx, "u%d", p);

		r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
		    "{\"name\":\"c%d\",\"display_name\":\"c%d\"}", p, p);
		assert_status(r, 201);
		sh->user_token[p] = fixture_create_user(fx, user, "none");
		r = fx_request(fx, fx->admin_token, "PUT",
		    fx_str(fx, "/v1/projects/c%d/members/%s", p, user), "{\"role\":\"owner\"}");
		assert_status(r, 201);
	}
	/* one project under a quota, so that approvals also re-check quotas concurrently */
	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/c0/quota",
			  "{\"items\":[\"H100-80GB/1g.10gb=6\",\"H100-80GB/2g.20gb=2\","
			  "\"H100-80GB/3g.40gb=3\",\"H100-80GB/1g.20gb=2\",\"A100-40GB/full=1\"]}"),
	    201);

	for (int i = 0; i < CLIENTS; i++) {
		w[i].sh = sh;
		w[i].index = i;
		w[i].seed = 0x2545f491u * (unsigned)(i + 1);
		w[i].c = gp_client_create(sh->base[i % 2], NULL);
		assert_non_null(w[i].c);
		gp_client_set_timeouts(w[i].c, 60000, 5000);
	}
	pthread_create(&agent, NULL, agent_main, sh);
	for (int i = 0; i < CLIENTS; i++)
		pthread_create(&w[i].thread, NULL, worker_main, &w[i]);
	sleep(SECONDS);
	atomic_store(&sh->stop, true);
	for (int i = 0; i < CLIENTS; i++)
		pthread_join(w[i].thread, NULL);
	pthread_join(agent, NULL);

	for (int s = 0; s < 600; s++)
		total += atomic_load(&sh->status[s]);
	fprintf(stderr, "concurrency: %lld live pool allocations, %lld GPUs in use at the end\n",
	    (long long)fx_sql_int64(fx,
		"SELECT count(*) FROM allocations WHERE state <> 'released'"),
	    (long long)fx_sql_int64(fx, "SELECT count(*) FROM gpus WHERE layout <> ''"));
	fprintf(stderr,
	    "concurrency: %ld answers in %d s: 200 %ld, 201 %ld, 403 %ld, 404 %ld, "
	    "409 %ld (insufficient %ld, other %ld), 422 %ld, 5xx %ld; %ld approvals\n",
	    total, SECONDS, atomic_load(&sh->status[200]), atomic_load(&sh->status[201]),
	    atomic_load(&sh->status[403]), atomic_load(&sh->status[404]),
	    atomic_load(&sh->status[409]), atomic_load(&sh->insufficient),
	    atomic_load(&sh->double_approve_conflicts), atomic_load(&sh->status[422]),
	    atomic_load(&sh->status[500]) + atomic_load(&sh->status[503]),
	    atomic_load(&sh->approved));
	if (sh->first_5xx[0] != '\0')
		fprintf(stderr, "first 5xx: %s\n", sh->first_5xx);
	assert_int_equal(atomic_load(&sh->transport_errors), 0);
	for (int s = 500; s < 600; s++)
		assert_int_equal(atomic_load(&sh->status[s]), 0);
	assert_int_equal(atomic_load(&sh->status[403]), 0);
	assert_int_equal(atomic_load(&sh->status[404]), 0);
	/*
	 * The load was real, and contended: both capacity refusals and lost
	 * races happened. The floor only says that it ran (an idle CI machine
	 * makes 550-850 approvals, a loaded 2-core one 370-470 and the
	 * sanitizer build fewer); throughput is measured by scripts/bench-approve.
	 */
	assert_true(atomic_load(&sh->approved) >= 200);
	assert_true(atomic_load(&sh->insufficient) > 0);
	assert_true(atomic_load(&sh->double_approve_conflicts) > 0);
	/* every 200 to an approval is one approved request (since fulfilled,
	 * or not yet, by the expiry worker's pass: the nodes have no agent),
	 * and one audit row */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests WHERE state IN "
			     "('approved', 'fulfilled', 'failed') AND requested_by IS NOT NULL"),
	    atomic_load(&sh->approved));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = "
			     "'pool_request.approve' AND actor = 'op'"),
	    atomic_load(&sh->approved));

	/* ---- invariants ---- */
	/* no overlapping live allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN allocations b ON a.gpu_id = b.gpu_id "
			     "AND a.id < b.id AND a.state <> 'released' AND b.state <> 'released' "
			     "AND int4range(a.start, a.start + a.size) && int4range(b.start, b.start + b.size)"),
	    0);
	/* every approved create/expand fully allocated, every approved shrink fully freed */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r WHERE r.state IN ('approved', 'fulfilled') "
			     "AND r.action IN ('create', 'expand') AND (SELECT sum((i->>'count')::int) "
			     "FROM jsonb_array_elements(r.items) i) <> (SELECT count(*) FROM allocations a "
			     "WHERE a.request_id = r.id)"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r WHERE r.state IN ('approved', 'fulfilled') "
			     "AND r.action = 'shrink' AND (SELECT sum((i->>'count')::int) "
			     "FROM jsonb_array_elements(r.items) i) <> (SELECT count(*) FROM allocations a "
			     "WHERE a.release_request_id = r.id)"),
	    0);
	/* requests that were not approved made nothing */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pool_requests r ON r.id = a.request_id "
			     "WHERE r.state NOT IN ('approved', 'fulfilled')"),
	    0);
	/* every pool's live allocations equal its SpecAndCount */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pools p WHERE p.items <> (SELECT coalesce(jsonb_agg("
			     "jsonb_build_object('model', m, 'profile', pf, 'count', c) ORDER BY m, pf), '[]') "
			     "FROM (SELECT g.model AS m, a.profile AS pf, count(*) AS c FROM allocations a "
			     "JOIN gpus g ON g.id = a.gpu_id WHERE a.pool_id = p.id "
			     "AND a.state NOT IN ('releasing', 'released') GROUP BY 1, 2) s)"),
	    0);
	/* no ledger interval without its allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT pool_id, model, profile, sum(count) AS n FROM usage_ledger "
			     "WHERE ended_at IS NULL GROUP BY 1, 2, 3) l FULL JOIN (SELECT a.pool_id, g.model, "
			     "a.profile, count(*) AS n FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
			     "WHERE a.pool_id IS NOT NULL AND a.state NOT IN ('releasing', 'released') "
			     "GROUP BY 1, 2, 3) a USING (pool_id, model, profile) WHERE l.n IS DISTINCT FROM a.n"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM usage_ledger l JOIN pool_requests r ON r.id = l.opened_by "
			     "WHERE r.action IN ('create', 'expand') AND l.count <> (SELECT count(*) "
			     "FROM allocations a JOIN gpus g ON g.id = a.gpu_id WHERE a.request_id = r.id "
			     "AND g.model = l.model AND a.profile = l.profile)"),
	    0);
	/* intervals start at the approval that opened them */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM usage_ledger l JOIN pool_requests r ON r.id = l.opened_by "
			     "WHERE l.started_at <> r.decided_at"),
	    0);
	/* histories end in the request's state; layouts mirror allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r WHERE r.state <> (SELECT e.to_state "
			     "FROM pool_request_events e WHERE e.request_id = r.id ORDER BY e.id DESC LIMIT 1)"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus g WHERE g.layout <> coalesce((SELECT string_agg(a.profile "
			     "|| '@' || a.start, ',' ORDER BY a.start) FROM allocations a WHERE a.gpu_id = g.id "
			     "AND a.state <> 'released'), '')"),
	    0);
	/* the quota held */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT i->>'model' AS m, i->>'profile' AS pf, "
			     "sum((i->>'count')::int) AS n FROM pools p, jsonb_array_elements(p.items) i "
			     "WHERE p.project_id = (SELECT id FROM projects WHERE name = 'c0') GROUP BY 1, 2) u "
			     "LEFT JOIN (SELECT i->>'model' AS m, i->>'profile' AS pf, (i->>'count')::int AS n "
			     "FROM project_quotas q, jsonb_array_elements(q.items) i WHERE q.project_id = "
			     "(SELECT id FROM projects WHERE name = 'c0')) q USING (m, pf) "
			     "WHERE u.n > coalesce(q.n, 0)"),
	    0);
	/* one outbox row per affected node per approval that changed allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r WHERE r.state IN ('approved', 'fulfilled') "
			     "AND r.action IN ('create', 'expand') AND (SELECT count(*) FROM outbox o "
			     "WHERE o.request_id = r.id) <> (SELECT count(DISTINCT g.node_id) FROM allocations a "
			     "JOIN gpus g ON g.id = a.gpu_id WHERE a.request_id = r.id)"),
	    0);

	/* the exclusion constraint refuses a forced overlapping insert */
	fx_sql_exec(fx,
	    "DO $$ DECLARE a allocations%ROWTYPE; BEGIN "
	    "SELECT * INTO a FROM allocations WHERE state <> 'released' ORDER BY id LIMIT 1; "
	    "IF NOT FOUND THEN RAISE EXCEPTION 'no live allocation to overlap'; END IF; "
	    "INSERT INTO allocations (gpu_id, profile, start, size) "
	    "VALUES (a.gpu_id, a.profile, a.start, a.size); "
	    "RAISE EXCEPTION 'an overlapping allocation was accepted'; "
	    "EXCEPTION WHEN exclusion_violation THEN NULL; END $$");

	assert_int_equal(fixture_server_stop(fx, second), 0);
	for (int i = 0; i < CLIENTS; i++)
		gp_client_destroy(w[i].c);
	pthread_mutex_destroy(&sh->lock);
	free(w);
	free(sh);
}

/*
 * Both servers run with a statement timeout well above the default 5 s:
 * on a loaded 2-core machine (ctest -j2, sanitizers) a queue of approvals
 * of the project under a quota waits on its quota row for longer than
 * 5 s, and the 503 that follows is a throughput limit, not what this test
 * is about (the invariants under concurrency are).
 */
static const char *const server_env[] = { "GPUPOOL_STATEMENT_TIMEOUT_MS=60000", NULL };

static int
group_setup(void **state)
{
	const struct fixture_options opts = { .server_env = server_env };
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
		cmocka_unit_test(test_concurrent_workflow),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
