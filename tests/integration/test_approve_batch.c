/*
 * test_approve_batch.c - group commit of approvals (pool_requests.c):
 * one burst of concurrent approvals, released together from a barrier,
 * so that the approvals worker decides many of them in one transaction.
 * Whatever batches they fall into, each approval must get its own
 * answer and nothing else:
 *
 *  - approvals that fit are approved, each with its own allocations;
 *  - the same request approved twice at once: one 200, one 409;
 *  - a request that cannot be placed: 409 insufficient_capacity with
 *    "short", and it stays pending (its batch's other approvals commit);
 *  - unknown ids 404, a cancelled request 409;
 *  - two requests of a project under a quota that only one of them fits:
 *    one 200, one 422 quota_exceeded (never both approved);
 *  - two expands of one pool: both approved, the pool holds both;
 *
 * then the database invariants, and /metrics shows that approvals did
 * share transactions. Submissions are group-committed too (a burst with
 * eight creates of one pool name and creates over a quota). A last test stops the server (SIGTERM) while a
 * burst of approvals is queued: every one is answered, none is lost or
 * half-applied.
 */
#include "fixture.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CALLS 64

static const char *op;    /* operator */
static const char *alice; /* owner of both projects */

struct call {
	int64_t id;
	const char *path; /* NULL: approve request id */
	const char *body;
	const char *token;
	long status; /* 0: transport error */
	char code[256];
	int64_t missing; /* short[0].missing of a 409 insufficient_capacity */
	int nallocs;     /* allocations in a 200 */
};

struct burst {
	pthread_barrier_t start;
	const char *base_url;
	struct call calls[MAX_CALLS];
	int n;
	atomic_int next;
};

static void *
burst_thread(void *arg)
{
	struct burst *b = arg;
	struct gp_client *c = gp_client_create(b->base_url, NULL);
	int i;

	gp_client_set_retries(c, 0);
	pthread_barrier_wait(&b->start);
	while ((i = atomic_fetch_add(&b->next, 1)) < b->n) {
		struct call *k = &b->calls[i];
		struct gp_client_response r;
		char path[96];

		memset(&r, 0, sizeof(r));
		snprintf(path, sizeof(path), "/v1/pool-requests/%lld/approve", (long long)k->id);
		if (gp_client_set_token(c, k->token) < 0 ||
		    gp_client_request(c, "POST", k->path ? k->path : path,
			k->body ? k->body : "{\"note\":\"burst\"}",
			strlen(k->body ? k->body : "{\"note\":\"burst\"}"), NULL, &r) < 0) {
			k->status = 0;
			gp_client_response_free(&r);
			continue;
		}
		k->status = r.status;
		if (r.json != NULL && fx_json_has(r.json, "code"))
			snprintf(k->code, sizeof(k->code), "%s: %s",
			    json_object_get_string(fx_json(r.json, "code")),
			    fx_json_has(r.json, "detail")
				? json_object_get_string(fx_json(r.json, "detail"))
				: "");
		if (r.json != NULL && fx_json_has(r.json, "short"))
			k->missing = json_object_get_int64(
			    fx_json(json_object_array_get_idx(fx_json(r.json, "short"), 0),
				"missing"));
		if (r.status == 201 && r.json != NULL && fx_json_has(r.json, "id"))
			k->id = json_object_get_int64(fx_json(r.json, "id"));
		if (r.status == 200 && r.json != NULL && fx_json_has(r.json, "allocations"))
			k->nallocs = (int)json_object_array_length(fx_json(r.json, "allocations"));
		gp_client_response_free(&r);
	}
	gp_client_destroy(c);
	return NULL;
}

/* Approve calls[0..n) from nthreads threads released together. */
static void
run_burst(struct fixture *fx, struct burst *b, int nthreads)
{
	pthread_t t[MAX_CALLS];

	b->base_url = fx->server->base_url;
	pthread_barrier_init(&b->start, NULL, (unsigned)nthreads);
	for (int i = 0; i < nthreads; i++)
		assert_int_equal(pthread_create(&t[i], NULL, burst_thread, b), 0);
	for (int i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&b->start);
}

static void
add_call(struct burst *b, int64_t id)
{
	assert_true(b->n < MAX_CALLS);
	b->calls[b->n].id = id;
	b->calls[b->n].token = op;
	b->n++;
}

static const struct call *
find_call(const struct burst *b, int64_t id, int nth)
{
	for (int i = 0; i < b->n; i++)
		if (b->calls[i].id == id && nth-- == 0)
			return &b->calls[i];
	fail_msg("no call for request %lld", (long long)id);
	return NULL;
}

static int64_t
submit(struct fixture *fx, const char *project, const char *action, const char *pool,
    const char *items)
{
	struct gp_client_response *r;

	r = fx_request(fx, alice, "POST", fx_str(fx, "/v1/projects/%s/pool-requests", project),
	    "{\"action\":\"%s\",\"pool\":\"%s\",\"items\":[%s],\"justification\":\"t\"}", action,
	    pool, items);
	assert_status(r, 201);
	return fx_json_int(r->json, "id");
}

static const char *
state_of(struct fixture *fx, int64_t id)
{
	return fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1",
	    fx_str(fx, "%lld", (long long)id));
}

/* approved, or since fulfilled by the expiry worker's pass (no agent here) */
static bool
approved_or_fulfilled(const char *s)
{
	return strcmp(s, "approved") == 0 || strcmp(s, "fulfilled") == 0;
}

static void
check_invariants(struct fixture *fx)
{
	fx_assert_pool_invariants(fx);
	/* every approved request made allocations, history and one audit row */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r WHERE r.state = 'approved' "
			     "AND r.action IN ('create', 'expand') AND (NOT EXISTS (SELECT 1 FROM allocations a "
			     "WHERE a.request_id = r.id) OR (SELECT count(*) FROM audit_log l "
			     "WHERE l.action = 'pool_request.approve' AND l.object_id = r.id::text) <> 1 "
			     "OR (SELECT to_state FROM pool_request_events e WHERE e.request_id = r.id "
			     "ORDER BY e.id DESC LIMIT 1) <> 'approved')"),
	    0);
	/* no request that was not approved holds anything (an approved one may
	 * since be fulfilled by the expiry worker's pass: no agent here) */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pool_requests r ON r.id = a.request_id "
			     "WHERE r.state NOT IN ('approved', 'fulfilled', 'failed')"),
	    0);
}

static int64_t
metric(struct fixture *fx, const char *name)
{
	struct gp_client_response *r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	const char *p;
	size_t len = strlen(name);

	assert_status(r, 200);
	for (p = r->body; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, name, len) == 0 && p[len] == ' ')
			return strtoll(p + len + 1, NULL, 10);
	fail_msg("no metric %s", name);
	return -1;
}

static void
test_burst(void **state)
{
	struct fixture *fx = *state;
	struct burst *b = calloc(1, sizeof(*b)); /* next starts at 0 */
	int64_t good[8], insufficient[3], cancelled, q[2], e[2];
	int64_t batches0 = metric(fx, "gpupool_approval_batches_total");
	int64_t items0 = metric(fx, "gpupool_approval_batch_items_total");
	struct gp_client_response *r;
	int ok_q = 0, quota_refused = 0;

	op = fixture_create_user(fx, "op", "operator");
	alice = fixture_create_user(fx, "alice", "none");
	for (int i = 0; i < 2; i++) {
		const char *p = i == 0 ? "pa" : "pq";

		r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
		    "{\"name\":\"%s\",\"display_name\":\"%s\"}", p, p);
		assert_status(r, 201);
		r = fx_request(fx, fx->admin_token, "PUT",
		    fx_str(fx, "/v1/projects/%s/members/alice", p), "{\"role\":\"owner\"}");
		assert_status(r, 201);
	}
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/pq/quota",
	    "{\"items\":[{\"model\":\"H100-80GB\",\"profile\":\"1g.10gb\",\"count\":3}]}");
	assert_status(r, 201);
	fx_fleet(fx, "burst", "H100-80GB", 2, 4, true);

	/* a pool to expand twice at once */
	r = fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve",
		(long long)submit(fx, "pa", "create", "grow", "\"H100-80GB/1g.10gb=1\"")),
	    "{}");
	assert_status(r, 200);
	e[0] = submit(fx, "pa", "expand", "grow", "\"H100-80GB/1g.10gb=1\"");
	e[1] = submit(fx, "pa", "expand", "grow", "\"H100-80GB/1g.20gb=1\"");
	for (int i = 0; i < 8; i++)
		good[i] =
		    submit(fx, "pa", "create", fx_str(fx, "good%d", i), "\"H100-80GB/3g.40gb=1\"");
	for (int i = 0; i < 3; i++)
		insufficient[i] =
		    submit(fx, "pa", "create", fx_str(fx, "big%d", i), "\"H100-80GB/7g.80gb=20\"");
	cancelled = submit(fx, "pa", "create", "gone", "\"H100-80GB/1g.10gb=1\"");
	r = fx_request(fx, alice, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/cancel", (long long)cancelled), "{}");
	assert_status(r, 200);
	/* each fits the quota alone (usage 0 + 2 <= 3), not both */
	q[0] = submit(fx, "pq", "create", "q0", "\"H100-80GB/1g.10gb=2\"");
	q[1] = submit(fx, "pq", "create", "q1", "\"H100-80GB/1g.10gb=2\"");

	for (int i = 0; i < 8; i++)
		add_call(b, good[i]);
	for (int i = 0; i < 4; i++)
		add_call(b, good[i]); /* the same approval twice at once */
	for (int i = 0; i < 3; i++)
		add_call(b, insufficient[i]);
	add_call(b, cancelled);
	add_call(b, 9999990);
	add_call(b, 9999991);
	add_call(b, q[0]);
	add_call(b, q[1]);
	add_call(b, e[0]);
	add_call(b, e[1]);
	run_burst(fx, b, b->n);

	for (int i = 0; i < b->n; i++)
		if (b->calls[i].status == 0 || b->calls[i].status >= 500)
			fail_msg("approval of %lld answered %ld", (long long)b->calls[i].id,
			    b->calls[i].status);
	for (int i = 0; i < 8; i++) {
		const struct call *a = find_call(b, good[i], 0);

		if (i < 4) {
			const struct call *a2 = find_call(b, good[i], 1);

			/* one of the two approved it, the other found it decided */
			assert_true((a->status == 200 && a2->status == 409) ||
			    (a->status == 409 && a2->status == 200));
			if (a->status != 200)
				a = a2;
		}
		assert_int_equal(a->status, 200);
		assert_int_equal(a->nallocs, 1);
		assert_true(approved_or_fulfilled(state_of(fx, good[i])));
	}
	for (int i = 0; i < 3; i++) {
		const struct call *a = find_call(b, insufficient[i], 0);

		assert_int_equal(a->status, 409);
		assert_int_equal(strncmp(a->code, "insufficient_capacity:", 22), 0);
		assert_true(a->missing >= 12 && a->missing <= 20); /* 8 GPUs, some taken */
		assert_string_equal(state_of(fx, insufficient[i]), "pending");
	}
	assert_int_equal(find_call(b, cancelled, 0)->status, 409);
	assert_string_equal(state_of(fx, cancelled), "cancelled");
	assert_int_equal(find_call(b, 9999990, 0)->status, 404);
	assert_int_equal(find_call(b, 9999991, 0)->status, 404);
	for (int i = 0; i < 2; i++) {
		const struct call *a = find_call(b, q[i], 0);

		if (a->status == 200)
			ok_q++;
		else if (a->status == 422 && strncmp(a->code, "quota_exceeded:", 15) == 0)
			quota_refused++;
	}
	assert_int_equal(ok_q, 1);
	assert_int_equal(quota_refused, 1);
	assert_int_equal(find_call(b, e[0], 0)->status, 200);
	assert_int_equal(find_call(b, e[1], 0)->status, 200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT items::text FROM pools WHERE name = 'grow' "
				"AND status <> 'released'"),
	    "[{\"count\": 2, \"model\": \"H100-80GB\", \"profile\": \"1g.10gb\"}, "
	    "{\"count\": 1, \"model\": \"H100-80GB\", \"profile\": \"1g.20gb\"}]");
	check_invariants(fx);
	/* approvals shared transactions: fewer batches than approvals */
	assert_true(metric(fx, "gpupool_approval_batch_items_total") - items0 >
	    metric(fx, "gpupool_approval_batches_total") - batches0);
	free(b);
}

/*
 * Submissions are group-committed too: a burst of creates, eight of them
 * for one pool name, plus creates over a quota. One create per name wins
 * (201), the others of that name get 409 without stopping the rest; the
 * quota is checked for each.
 */
static void
test_submit_burst(void **state)
{
	struct fixture *fx = *state;
	struct burst *b = calloc(1, sizeof(*b));
	int64_t batches0 = metric(fx, "gpupool_submit_batches_total");
	int64_t items0 = metric(fx, "gpupool_submit_batch_items_total");
	int created = 0, same = 0, quota_ok = 0, quota_refused = 0;

	for (int i = 0; i < 32; i++) {
		struct call *k = &b->calls[b->n++];
		const char *name = i < 8 ? "same" : fx_str(fx, "sub%d", i);

		k->token = alice;
		if (i >= 28) {
			/* pq's quota: 3 x 1g.10gb, of which the burst test's pool holds 2 */
			k->path = "/v1/projects/pq/pool-requests";
			k->body = fx_str(fx,
			    "{\"action\":\"create\",\"pool\":\"%s\","
			    "\"items\":[\"H100-80GB/1g.10gb=%d\"]}",
			    name, i == 28 ? 1 : 2);
			continue;
		}
		k->path = "/v1/projects/pa/pool-requests";
		k->body = fx_str(fx,
		    "{\"action\":\"create\",\"pool\":\"%s\","
		    "\"items\":[\"H100-80GB/1g.10gb=1\"]}",
		    name);
	}
	run_burst(fx, b, b->n);
	for (int i = 0; i < b->n; i++) {
		const struct call *k = &b->calls[i];

		if (i >= 28) {
			if (k->status == 201)
				quota_ok++;
			else if (k->status == 422 && strncmp(k->code, "quota_exceeded:", 15) == 0)
				quota_refused++;
			continue;
		}
		if (i < 8 && k->status == 201)
			same++;
		else if (i < 8)
			assert_true(k->status == 409 && strncmp(k->code, "conflict:", 9) == 0);
		else
			assert_int_equal(k->status, 201);
		if (k->status == 201) {
			created++;
			assert_string_equal(state_of(fx, k->id), "pending");
		}
	}
	assert_int_equal(same, 1);
	assert_int_equal(created, 21);
	/* the quota leaves room for the 1, not for the 2s */
	assert_int_equal(quota_ok, 1);
	assert_int_equal(quota_refused, 3);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM pools WHERE name = 'same'"), 1);
	/* every request has its pool, first history row and audit row */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests r WHERE r.state = 'pending' AND (NOT EXISTS "
			     "(SELECT 1 FROM pool_request_events e WHERE e.request_id = r.id AND e.to_state = "
			     "'pending') OR NOT EXISTS (SELECT 1 FROM audit_log l WHERE l.action = "
			     "'pool_request.submit' AND l.object_id = r.id::text))"),
	    0);
	assert_true(metric(fx, "gpupool_submit_batch_items_total") - items0 >
	    metric(fx, "gpupool_submit_batches_total") - batches0);
	free(b);
}

struct stopper {
	struct fixture *fx;
	struct fx_server *srv;
	struct burst *b;
	int rc;
};

/* SIGTERM as soon as the burst's first approvals are on their way. */
static void *
stop_thread(void *arg)
{
	struct stopper *s = arg;

	while (atomic_load(&s->b->next) < 4)
		usleep(100);
	usleep(500);
	s->rc = fixture_server_stop(s->fx, s->srv);
	return NULL;
}

/*
 * SIGTERM while a burst of approvals is on its way: the server answers
 * every approval it accepted (the worker stops only after the HTTP
 * server drained), exits 0, and each answer is what the database holds:
 * 200 for an approved request; a client that could no longer connect
 * finds its request still pending.
 */
static void
test_stop_with_queue(void **state)
{
	struct fixture *fx = *state;
	struct fx_server *first = fx->server;
	struct burst *b = calloc(1, sizeof(*b));
	const char *env[] = { "GPUPOOL_SHUTDOWN_GRACE=20", NULL };
	struct stopper st;
	pthread_t t;
	int approved = 0;

	fx_fleet(fx, "stop", "H200-141GB", 2, 4, true);
	for (int i = 0; i < 24; i++)
		add_call(b,
		    submit(fx, "pa", "create", fx_str(fx, "stop%d", i),
			"\"H200-141GB/1g.18gb=1\""));
	st.fx = fx;
	st.b = b;
	st.srv = fixture_server_start(fx, env);
	assert_non_null(st.srv);
	st.rc = -1;
	fx->server = st.srv;
	atomic_store(&b->next, 0);
	assert_int_equal(pthread_create(&t, NULL, stop_thread, &st), 0);
	run_burst(fx, b, b->n);
	pthread_join(t, NULL);
	fx->server = first;
	assert_int_equal(st.rc, 0);
	for (int i = 0; i < b->n; i++) {
		const struct call *k = &b->calls[i];
		const char *s = state_of(fx, k->id);

		if (k->status != 0 && k->status != 200)
			fail_msg("approval of %lld answered %ld %s while stopping",
			    (long long)k->id, k->status, k->code);
		if (k->status == 200)
			approved++;
		if (k->status == 200)
			assert_true(approved_or_fulfilled(s));
		else
			assert_string_equal(s, "pending");
	}
	print_message("stop with a burst in flight: %d of %d approved, the rest never reached "
		      "the server\n",
	    approved, b->n);
	check_invariants(fx);
	free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_burst),
		cmocka_unit_test(test_submit_burst),
		cmocka_unit_test(test_stop_with_queue),
	};

	return fixture_run_tests(tests);
}
