/*
 * test_idempotency.c - Idempotency-Key on POST: a replay returns the
 * first response byte for byte (status, headers, body) with
 * "Idempotent-Replayed: true" and runs nothing; the same key with
 * another request is 422; keys belong to their caller; a duplicate of
 * a request still running is answered at once, 409 with Retry-After,
 * without waiting for it (forced deterministically with a table lock,
 * then raced from many threads);
 * 4xx answers are kept, 5xx answers are not; keys are 1 to 200
 * characters. test_exactly_once.c races group-committed requests,
 * replicas and a crash after commit.
 *
 * Requests go over raw sockets (rawhttp.c) so that every response
 * header can be compared; each thread has its own connection and arena.
 */
#include "fixture.h"
#include "rawhttp.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "core/timeutil.h"

#define RAW_TIMEOUT_MS 30000
#define RACE_THREADS 8
#define RACE_ROUNDS 6

/* ---- helpers ---- */

static int
raw_post_a(struct arena *a, int port, const char *token, const char *path, const char *key,
    const char *body, struct raw_response *out)
{
	const char *headers[4];
	int n = 0;
	size_t len;
	char *req;

	headers[n++] = arena_printf(a, "Authorization: Bearer %s", token);
	headers[n++] = "Content-Type: application/json";
	if (key != NULL)
		headers[n++] = arena_printf(a, "Idempotency-Key: %s", key);
	headers[n] = NULL;
	req = raw_build(a, "POST", path, headers, body, strlen(body), &len);
	return raw_exchange(a, port, req, len, RAW_TIMEOUT_MS, out);
}

/* POST body to path with an Idempotency-Key (NULL: none) as token. */
static struct raw_response *
post(struct fixture *fx, const char *token, const char *path, const char *key, const char *body)
{
	struct raw_response *r = arena_alloc(fx->arena, sizeof(*r));

	if (raw_post_a(fx->arena, fx->server->port, token, path, key, body, r) != 0) {
		fixture_server_dump_log(fx->server, 40);
		fail_msg("POST %s got no response (errno %d)", path, r->error);
	}
	return r;
}

static const char *
hdr(struct fixture *fx, const struct raw_response *r, const char *name)
{
	return raw_header(fx->arena, r, name);
}

static const char *
code_of(const struct raw_response *r)
{
	struct json_object *c = fx_json(r->json, "code");

	return c ? json_object_get_string(c) : "";
}

static void
assert_raw_status(const struct raw_response *r, int status)
{
	if (r->status != status)
		print_error("expected %d, got %d\n%s%.2000s\n", status, r->status,
		    r->head ? r->head : "", r->body ? r->body : "");
	assert_int_equal(r->status, status);
}

static void
assert_raw_problem(struct fixture *fx, const struct raw_response *r, int status, const char *code)
{
	assert_raw_status(r, status);
	assert_string_equal(hdr(fx, r, "Content-Type"), "application/problem+json");
	assert_string_equal(code_of(r), code);
}

/*
 * The header block without the lines that differ per exchange by
 * design (Date, X-Request-Id) and the replay marker.
 */
static const char *
stable_head(struct fixture *fx, const struct raw_response *r)
{
	static const char *const skip[] = { "Date:", "X-Request-Id:", "Idempotent-Replayed:" };
	const char *p = r->head;
	char *out = arena_strdup(fx->arena, "");

	while (p != NULL && *p != '\0') {
		const char *eol = strstr(p, "\r\n");
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		bool keep = true;

		for (size_t i = 0; i < sizeof(skip) / sizeof(skip[0]); i++)
			if (strncasecmp(p, skip[i], strlen(skip[i])) == 0)
				keep = false;
		if (keep)
			out = arena_printf(fx->arena, "%s%.*s\n", out, (int)len, p);
		p = eol ? eol + 2 : NULL;
	}
	return out;
}

/* second is first again: same status, headers and body bytes, marked as a replay. */
static void
assert_replay_of(struct fixture *fx, const struct raw_response *first,
    const struct raw_response *second)
{
	assert_int_equal(second->status, first->status);
	assert_null(hdr(fx, first, "Idempotent-Replayed"));
	assert_non_null(hdr(fx, second, "Idempotent-Replayed"));
	assert_string_equal(hdr(fx, second, "Idempotent-Replayed"), "true");
	assert_string_equal(stable_head(fx, second), stable_head(fx, first));
	assert_int_equal(second->body_len, first->body_len);
	assert_memory_equal(second->body, first->body, first->body_len);
	/* a replay is still a request of its own */
	assert_non_null(hdr(fx, second, "X-Request-Id"));
	assert_string_not_equal(hdr(fx, second, "X-Request-Id"), hdr(fx, first, "X-Request-Id"));
}

static int64_t
count_projects(struct fixture *fx, const char *name)
{
	return fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name = $1", name);
}

static int64_t
count_audit(struct fixture *fx, const char *action, const char *object_id)
{
	return fx_sql_int64(fx,
	    "SELECT count(*) FROM audit_log WHERE action = $1 AND object_id = $2", action,
	    object_id);
}

static const char *
admin_id(struct fixture *fx)
{
	return fx_sql_text(fx, "SELECT id::text FROM users WHERE username = $1",
	    FIXTURE_ADMIN_USER);
}

/* ---- replay ---- */

static void
test_replay(void **state)
{
	struct fixture *fx = *state;
	const char *body =
	    "{\"name\":\"idem-one\",\"display_name\":\"One\",\"namespaces\":[\"idem-ns\"]}";
	struct raw_response *first, *again, *third;

	first = post(fx, fx->admin_token, "/v1/projects", "key-one", body);
	assert_raw_status(first, 201);
	assert_string_equal(hdr(fx, first, "ETag"), "\"1\"");
	assert_string_equal(hdr(fx, first, "Location"), "/v1/projects/idem-one");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM idempotency_keys WHERE user_id = $1::bigint "
			     "AND key = 'key-one' AND state = 'done' AND status = 201",
			     admin_id(fx)),
	    1);

	again = post(fx, fx->admin_token, "/v1/projects", "key-one", body);
	assert_replay_of(fx, first, again);
	assert_string_equal(hdr(fx, again, "ETag"), "\"1\"");
	assert_string_equal(hdr(fx, again, "Location"), "/v1/projects/idem-one");
	/* one project, one namespace, one audit row */
	assert_int_equal(count_projects(fx, "idem-one"), 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM project_namespaces WHERE namespace = 'idem-ns'"),
	    1);
	assert_int_equal(count_audit(fx, "project.create", "idem-one"), 1);

	/* the project changes; the replay is still the first response, stored, not recomputed */
	assert_status(fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/idem-one",
			  "{\"display_name\":\"Changed\"}"),
	    200);
	third = post(fx, fx->admin_token, "/v1/projects", "key-one", body);
	assert_replay_of(fx, first, third);
	assert_json_int(third->json, "generation", 1);
	assert_json_str(third->json, "display_name", "One");
	assert_int_equal(count_audit(fx, "project.create", "idem-one"), 1);

	/* without a key the same request runs, and conflicts */
	assert_raw_problem(fx, post(fx, fx->admin_token, "/v1/projects", NULL, body), 409,
	    "conflict");
	/* PATCH takes no Idempotency-Key: nothing is recorded for it */
	assert_status(fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/idem-one",
			  ((const char *[]){ "Idempotency-Key: patch-key", NULL }),
			  "{\"display_name\":\"Again\"}"),
	    200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM idempotency_keys WHERE key = 'patch-key'"),
	    0);
}

static void
test_mismatch(void **state)
{
	struct fixture *fx = *state;
	const char *body = "{\"name\":\"idem-two\"}";
	struct raw_response *first, *r;
	int64_t projects, audit;

	first = post(fx, fx->admin_token, "/v1/projects", "key-two", body);
	assert_raw_status(first, 201);
	projects = fx_sql_int64(fx, "SELECT count(*) FROM projects");
	audit = fx_sql_int64(fx, "SELECT count(*) FROM audit_log");

	/* another body */
	r = post(fx, fx->admin_token, "/v1/projects", "key-two", "{\"name\":\"idem-other\"}");
	assert_raw_problem(fx, r, 422, "idempotency_mismatch");
	assert_null(hdr(fx, r, "Idempotent-Replayed"));
	/* the same JSON written differently is another request: bytes are compared */
	r = post(fx, fx->admin_token, "/v1/projects", "key-two", "{ \"name\": \"idem-two\" }");
	assert_raw_problem(fx, r, 422, "idempotency_mismatch");
	/* another endpoint */
	r = post(fx, fx->admin_token, "/v1/users", "key-two",
	    "{\"username\":\"idem-user\",\"password\":\"long-enough-Passw0rd\"}");
	assert_raw_problem(fx, r, 422, "idempotency_mismatch");
	r = post(fx, fx->admin_token, "/v1/tokens", "key-two", body);
	assert_raw_problem(fx, r, 422, "idempotency_mismatch");
	assert_int_equal(count_projects(fx, "idem-other"), 0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM users WHERE username = 'idem-user'"),
	    0);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects"), projects);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM audit_log"), audit);

	/* the mismatches did not disturb the stored response */
	assert_replay_of(fx, first, post(fx, fx->admin_token, "/v1/projects", "key-two", body));
}

static void
test_keys_per_caller(void **state)
{
	struct fixture *fx = *state;
	const char *admin2, *u1, *u2;
	struct raw_response *a, *b, *c, *d, *t1, *t2;

	admin2 = fixture_create_user(fx, "idem-admin2", "admin");
	/* the same key with different bodies: no mismatch across callers */
	a = post(fx, fx->admin_token, "/v1/projects", "shared", "{\"name\":\"pc-a\"}");
	assert_raw_status(a, 201);
	b = post(fx, admin2, "/v1/projects", "shared", "{\"name\":\"pc-b\"}");
	assert_raw_status(b, 201);
	assert_null(hdr(fx, b, "Idempotent-Replayed"));
	assert_json_str(b->json, "name", "pc-b");

	/* the same key and body: the second caller runs its own request
	 * (and conflicts) instead of getting the first caller's answer */
	c = post(fx, fx->admin_token, "/v1/projects", "shared-2", "{\"name\":\"pc-c\"}");
	assert_raw_status(c, 201);
	d = post(fx, admin2, "/v1/projects", "shared-2", "{\"name\":\"pc-c\"}");
	assert_raw_problem(fx, d, 409, "conflict");
	assert_null(hdr(fx, d, "Idempotent-Replayed"));
	assert_int_equal(count_projects(fx, "pc-c"), 1);
	/* ... and its own answer is what it gets replayed */
	assert_replay_of(fx, d,
	    post(fx, admin2, "/v1/projects", "shared-2", "{\"name\":\"pc-c\"}"));
	assert_replay_of(fx, c,
	    post(fx, fx->admin_token, "/v1/projects", "shared-2", "{\"name\":\"pc-c\"}"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM idempotency_keys WHERE key = 'shared-2'"),
	    2);

	/* plain users, same key, same body: two tokens */
	u1 = fixture_create_user(fx, "idem-u1", "none");
	u2 = fixture_create_user(fx, "idem-u2", "none");
	t1 = post(fx, u1, "/v1/tokens", "tok", "{\"name\":\"ci\"}");
	t2 = post(fx, u2, "/v1/tokens", "tok", "{\"name\":\"ci\"}");
	assert_raw_status(t1, 201);
	assert_raw_status(t2, 201);
	assert_null(hdr(fx, t2, "Idempotent-Replayed"));
	assert_string_not_equal(fx_json_str(t1->json, "id"), fx_json_str(t2->json, "id"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens t JOIN users u ON u.id = t.user_id "
			     "WHERE u.username IN ('idem-u1', 'idem-u2') AND t.kind = 'api'"),
	    2);
}

/* ---- what is kept ---- */

static void
test_errors_replayed(void **state)
{
	struct fixture *fx = *state;
	struct raw_response *first, *r;
	const char *user_tok;

	/* a validation error is kept and replayed */
	first = post(fx, fx->admin_token, "/v1/projects", "key-bad", "{\"name\":\"Not A Name\"}");
	assert_raw_problem(fx, first, 422, "validation_failed");
	assert_replay_of(fx, first,
	    post(fx, fx->admin_token, "/v1/projects", "key-bad", "{\"name\":\"Not A Name\"}"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT status FROM idempotency_keys WHERE key = 'key-bad'"),
	    422);

	/* a conflict is kept even after its cause went away */
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"holder\",\"namespaces\":[\"held\"]}"),
	    201);
	first = post(fx, fx->admin_token, "/v1/projects", "key-409",
	    "{\"name\":\"wants\",\"namespaces\":[\"held\"]}");
	assert_raw_problem(fx, first, 409, "conflict");
	assert_status(fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/holder",
			  "{\"namespaces\":[]}"),
	    200);
	r = post(fx, fx->admin_token, "/v1/projects", "key-409",
	    "{\"name\":\"wants\",\"namespaces\":[\"held\"]}");
	assert_replay_of(fx, first, r);
	assert_int_equal(count_projects(fx, "wants"), 0);
	/* a new key runs the request again, and now it succeeds */
	r = post(fx, fx->admin_token, "/v1/projects", "key-409b",
	    "{\"name\":\"wants\",\"namespaces\":[\"held\"]}");
	assert_raw_status(r, 201);
	assert_int_equal(count_projects(fx, "wants"), 1);

	/* refused before the handler (role, authentication): nothing is kept */
	user_tok = fixture_create_user(fx, "idem-plain", "none");
	r = post(fx, user_tok, "/v1/projects", "key-403", "{\"name\":\"nope\"}");
	assert_raw_problem(fx, r, 403, "forbidden");
	r = post(fx, "gpp_invalid-token-invalid-token-invalid-token", "/v1/projects", "key-401",
	    "{\"name\":\"nope\"}");
	assert_raw_problem(fx, r, 401, "unauthorized");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM idempotency_keys WHERE key IN ('key-403', 'key-401')"),
	    0);

	/* a server error releases the key: the retry runs the request again */
	fx_sql_exec(fx,
	    "CREATE FUNCTION test_idem_fail() RETURNS trigger LANGUAGE plpgsql AS $$ "
	    "BEGIN RAISE EXCEPTION 'injected failure'; END $$");
	fx_sql_exec(fx,
	    "CREATE TRIGGER test_idem_fail BEFORE INSERT ON projects FOR EACH ROW "
	    "WHEN (NEW.name = 'flaky') EXECUTE FUNCTION test_idem_fail()");
	r = post(fx, fx->admin_token, "/v1/projects", "key-500", "{\"name\":\"flaky\"}");
	assert_true(r->status >= 500);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM idempotency_keys WHERE key = 'key-500'"),
	    0);
	fx_sql_exec(fx, "DROP TRIGGER test_idem_fail ON projects");
	fx_sql_exec(fx, "DROP FUNCTION test_idem_fail()");
	r = post(fx, fx->admin_token, "/v1/projects", "key-500", "{\"name\":\"flaky\"}");
	assert_raw_status(r, 201);
	assert_null(hdr(fx, r, "Idempotent-Replayed"));
	assert_int_equal(count_projects(fx, "flaky"), 1);
}

static void
test_key_length(void **state)
{
	struct fixture *fx = *state;
	char key[202];
	struct raw_response *r;
	int64_t keys;

	memset(key, 'k', 201);
	key[201] = '\0';
	keys = fx_sql_int64(fx, "SELECT count(*) FROM idempotency_keys");
	r = post(fx, fx->admin_token, "/v1/projects", key, "{\"name\":\"long-key\"}");
	assert_raw_problem(fx, r, 422, "validation_failed");
	assert_non_null(strstr(r->body, "\"field\":\"Idempotency-Key\""));
	assert_int_equal(count_projects(fx, "long-key"), 0);
	r = post(fx, fx->admin_token, "/v1/projects", "", "{\"name\":\"long-key\"}");
	assert_raw_problem(fx, r, 422, "validation_failed");
	assert_int_equal(count_projects(fx, "long-key"), 0);
	/* a key is text: bytes that are not UTF-8 are the client's error, not the server's */
	r = post(fx, fx->admin_token, "/v1/projects", "bad-\xff\xfe-key",
	    "{\"name\":\"long-key\"}");
	assert_raw_problem(fx, r, 422, "validation_failed");
	assert_int_equal(count_projects(fx, "long-key"), 0);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM idempotency_keys"), keys);

	/* 200 characters is the longest key */
	key[200] = '\0';
	r = post(fx, fx->admin_token, "/v1/projects", key, "{\"name\":\"long-key\"}");
	assert_raw_status(r, 201);
	assert_replay_of(fx, r,
	    post(fx, fx->admin_token, "/v1/projects", key, "{\"name\":\"long-key\"}"));
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM idempotency_keys WHERE key = $1",
			     key),
	    1);
}

/* ---- in flight ---- */

struct poster {
	int port;
	const char *token;
	const char *key;
	const char *body;
	pthread_barrier_t *start; /* NULL: go at once */
	struct arena *arena;
	struct raw_response res;
	int rc;
};

static void *
poster_main(void *arg)
{
	struct poster *p = arg;

	if (p->start != NULL)
		pthread_barrier_wait(p->start);
	p->rc = raw_post_a(p->arena, p->port, p->token, "/v1/projects", p->key, p->body, &p->res);
	return NULL;
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Wait until n sessions of the test database wait on a lock; the test's own lock is held. */
static void
wait_lock_waiters(struct fixture *fx, int n)
{
	for (int waited = 0; fx_sql_int64(fx,
				 "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
				 "'Lock' AND datname = current_database()") < n;
	     waited++) {
		if (waited > 3000) {
			fx_sql_exec(fx, "ROLLBACK");
			fail_msg("fewer than %d requests ever waited on a lock", n);
		}
		sleep_ms(10);
	}
}

/*
 * Deterministic: the first request claims the key in its transaction
 * and then waits on a table lock held by the test. A duplicate meanwhile
 * does not wait for it (that held an HTTP worker and a connection for
 * up to the statement timeout, 60 s here): it is answered at once with
 * 409 idempotency_conflict and Retry-After, and so is a different
 * request under the key; neither waits on a lock. Once the lock goes and
 * the first commits, a retry is its replay and the other request 422.
 */
static void
test_in_flight(void **state)
{
	struct fixture *fx = *state;
	const char *body = "{\"name\":\"slow-one\"}";
	struct poster p = { .port = fx->server->port,
		.token = fx->admin_token,
		.key = "key-slow",
		.body = body };
	pthread_t th;
	struct raw_response *r;

	p.arena = arena_create();
	assert_non_null(p.arena);
	fx_sql_exec(fx, "BEGIN");
	fx_sql_exec(fx, "LOCK TABLE projects IN SHARE ROW EXCLUSIVE MODE");
	assert_int_equal(pthread_create(&th, NULL, poster_main, &p), 0);
	wait_lock_waiters(fx, 1);
	for (int i = 0; i < 2; i++) {
		/* the duplicate, then another request under the key */
		int64_t t0 = time_mono_us(), ms;

		r = post(fx, fx->admin_token, "/v1/projects", "key-slow",
		    i == 0 ? body : "{\"name\":\"slow-two\"}");
		ms = (time_mono_us() - t0) / 1000;
		print_message("%s while the first is in flight: %d in %lld ms\n",
		    i == 0 ? "duplicate" : "other request", r->status, (long long)ms);
		assert_raw_problem(fx, r, 409, "idempotency_conflict");
		assert_string_equal(hdr(fx, r, "Retry-After"), "1");
		/* at once: not after the first request, not after a timeout */
		assert_true(ms < 2000);
		/* still only the first request waits */
		assert_int_equal(fx_sql_int64(fx,
				     "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = "
				     "'Lock' AND datname = current_database()"),
		    1);
	}
	/* nothing is claimed for others to see until the first commits */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM idempotency_keys WHERE key = 'key-slow'"),
	    0);
	fx_sql_exec(fx, "COMMIT");
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_equal(p.rc, 0);
	assert_raw_status(&p.res, 201);
	/* and later retries are the first response, another request 422 */
	r = post(fx, fx->admin_token, "/v1/projects", "key-slow", body);
	assert_replay_of(fx, &p.res, r);
	r = post(fx, fx->admin_token, "/v1/projects", "key-slow", "{\"name\":\"slow-two\"}");
	assert_raw_problem(fx, r, 422, "idempotency_mismatch");
	assert_int_equal(count_projects(fx, "slow-one"), 1);
	assert_int_equal(count_projects(fx, "slow-two"), 0);
	assert_int_equal(count_audit(fx, "project.create", "slow-one"), 1);
	arena_destroy(p.arena);
}

/*
 * A server that dies before its transaction commits leaves no claim
 * behind (the claim is part of that transaction): once the dead
 * server's database session is gone, a retry (on another replica) runs
 * the request. The first request is held on a table lock, its server is
 * killed, a new server starts.
 */
static void
test_claim_of_dead_server(void **state)
{
	struct fixture *fx = *state;
	const char *body = "{\"name\":\"orphan\"}";
	struct poster p = { .port = fx->server->port,
		.token = fx->admin_token,
		.key = "key-orphan",
		.body = body };
	struct raw_response *r = NULL;
	pthread_t th;
	int waited = 0;

	p.arena = arena_create();
	assert_non_null(p.arena);
	fx_sql_exec(fx, "BEGIN");
	fx_sql_exec(fx, "LOCK TABLE projects IN SHARE ROW EXCLUSIVE MODE");
	assert_int_equal(pthread_create(&th, NULL, poster_main, &p), 0);
	while (fx_sql_int64(fx,
		   "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
		   "AND datname = current_database()") == 0) {
		if (++waited > 3000) {
			fx_sql_exec(fx, "ROLLBACK");
			fail_msg("the first request never waited on the lock");
		}
		sleep_ms(10);
	}
	/* the claim is part of the uncommitted transaction: nothing to see */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM idempotency_keys WHERE key = 'key-orphan'"),
	    0);
	fixture_server_kill(fx, fx->server);
	assert_int_equal(pthread_join(th, NULL), 0);
	assert_int_not_equal(p.res.status, 201); /* it never answered */
	assert_non_null(fixture_server_start(fx, NULL));
	fx_sql_exec(fx, "ROLLBACK");

	/* while the dead server's session lingers the key may still look busy;
	 * within seconds the retry must run the request */
	for (waited = 0; waited < 300; waited++) {
		r = post(fx, fx->admin_token, "/v1/projects", "key-orphan", body);
		if (r->status != 409)
			break;
		assert_string_equal(code_of(r), "idempotency_conflict");
		sleep_ms(100);
	}
	assert_raw_status(r, 201);
	assert_null(hdr(fx, r, "Idempotent-Replayed"));
	assert_int_equal(count_projects(fx, "orphan"), 1);
	assert_int_equal(count_audit(fx, "project.create", "orphan"), 1);
	assert_replay_of(fx, r, post(fx, fx->admin_token, "/v1/projects", "key-orphan", body));
	arena_destroy(p.arena);
}

/*
 * Racing: RACE_THREADS threads send the same keyed request at once, on
 * their own connections. Exactly one runs it; the others get 409
 * idempotency_conflict or the replay, never a second execution.
 */
static void
test_concurrent_duplicates(void **state)
{
	struct fixture *fx = *state;
	int conflicts = 0, replays = 0;

	for (int round = 0; round < RACE_ROUNDS; round++) {
		struct poster p[RACE_THREADS];
		pthread_t th[RACE_THREADS];
		pthread_barrier_t start;
		const char *name = fx_str(fx, "race-%d", round);
		const char *key = fx_str(fx, "race-key-%d", round);
		const char *body = fx_str(fx, "{\"name\":\"%s\"}", name);
		const struct raw_response *original = NULL;
		int executed = 0;

		assert_int_equal(pthread_barrier_init(&start, NULL, RACE_THREADS), 0);
		for (int i = 0; i < RACE_THREADS; i++) {
			p[i] = (struct poster){ .port = fx->server->port,
				.token = fx->admin_token,
				.key = key,
				.body = body,
				.start = &start,
				.arena = arena_create() };
			assert_non_null(p[i].arena);
			assert_int_equal(pthread_create(&th[i], NULL, poster_main, &p[i]), 0);
		}
		for (int i = 0; i < RACE_THREADS; i++)
			assert_int_equal(pthread_join(th[i], NULL), 0);
		pthread_barrier_destroy(&start);

		for (int i = 0; i < RACE_THREADS; i++) {
			const struct raw_response *r = &p[i].res;
			const char *replayed = raw_header(p[i].arena, r, "Idempotent-Replayed");

			assert_int_equal(p[i].rc, 0);
			if (r->status == 201 && replayed == NULL) {
				executed++;
				original = r;
			} else if (r->status == 201) {
				assert_string_equal(replayed, "true");
				replays++;
			} else {
				assert_raw_problem(fx, r, 409, "idempotency_conflict");
				conflicts++;
			}
		}
		assert_int_equal(executed, 1);
		for (int i = 0; i < RACE_THREADS; i++) {
			if (p[i].res.status == 201) {
				assert_int_equal(p[i].res.body_len, original->body_len);
				assert_memory_equal(p[i].res.body, original->body,
				    original->body_len);
			}
		}
		assert_int_equal(count_projects(fx, name), 1);
		assert_int_equal(count_audit(fx, "project.create", name), 1);
		/* afterwards every retry is the replay */
		assert_replay_of(fx, original,
		    post(fx, fx->admin_token, "/v1/projects", key, body));
		for (int i = 0; i < RACE_THREADS; i++)
			arena_destroy(p[i].arena);
	}
	print_message("concurrent duplicates: %d conflicts, %d replays over %d rounds\n", conflicts,
	    replays, RACE_ROUNDS);
}

/*
 * The lock-holding tests keep requests waiting on a table lock while
 * they look around; under load that can take seconds, so the server
 * gets a statement timeout well above the default 5 s.
 */
static int
group_setup(void **state)
{
	static const char *const env[] = { "GPUPOOL_STATEMENT_TIMEOUT_MS=60000", NULL };
	const struct fixture_options opts = { .server_env = env };
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
		cmocka_unit_test(test_replay),
		cmocka_unit_test(test_mismatch),
		cmocka_unit_test(test_keys_per_caller),
		cmocka_unit_test(test_errors_replayed),
		cmocka_unit_test(test_key_length),
		cmocka_unit_test(test_in_flight),
		cmocka_unit_test(test_concurrent_duplicates),
		cmocka_unit_test(test_claim_of_dead_server),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
