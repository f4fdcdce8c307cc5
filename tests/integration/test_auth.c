/*
 * test_auth.c - authentication end to end: login (success, bad password,
 * unknown and disabled users answer alike), how tokens are stored (only
 * a SHA-256 digest, never the secret), GET /v1/me, API tokens (shown
 * once, listed with pagination, expiry, revocation on the next request,
 * other users' tokens are 404), failed-login rate limiting per user and
 * per client address, and the password rehash on login.
 */
#include "fixture.h"

#include <argon2.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/timeutil.h"

#define TOKEN_SECRET_LEN 43 /* base64url of 32 random bytes */

/* ---- helpers ---- */

/* The status GET /v1/me answers with this token. */
static long
me_status(struct fixture *fx, const char *token)
{
	return fx_request(fx, token, "GET", "/v1/me", NULL)->status;
}

static struct gp_client_response *
login(struct fixture *fx, const char *user, const char *password)
{
	return fx_request(fx, NULL, "POST", "/v1/auth/login",
	    "{\"username\":\"%s\",\"password\":\"%s\"}", user, password);
}

/* Number of rows, in any table of the schema, whose text holds s or its hex form. */
static int64_t
rows_containing(struct fixture *fx, const char *s)
{
	return fx_sql_int64(fx,
	    "SELECT count(*) FROM pg_tables t, LATERAL (SELECT query_to_xml("
	    "  format('SELECT x::text AS r FROM %I.%I x', t.schemaname, t.tablename),"
	    "  false, false, '')::text AS dump) q "
	    "WHERE t.schemaname = 'public' AND (strpos(q.dump, $1) > 0 "
	    "  OR strpos(q.dump, encode(convert_to($1, 'UTF8'), 'hex')) > 0)",
	    s);
}

/* Tokens are "gpp_" and 43 base64url characters; the secret is stored nowhere. */
static void
assert_token_stored_as_digest(struct fixture *fx, const char *token)
{
	size_t len = strlen(token);

	assert_true(len == 4 + TOKEN_SECRET_LEN);
	assert_memory_equal(token, "gpp_", 4);
	assert_true(strspn(token + 4,
			"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
			"0123456789-_") == TOKEN_SECRET_LEN);
	/* exactly one row holds sha256(token), and it is 32 bytes */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE digest = sha256(convert_to($1, 'UTF8')) "
			     "AND length(digest) = 32",
			     token),
	    1);
	/* the secret part appears in no row of any table, as text or as bytes
	 * (the scan does see rows: the stored prefix is found) */
	assert_int_equal(rows_containing(fx, token + 4), 0);
	assert_true(rows_containing(fx, fx_str(fx, "%.8s", token)) >= 1);
	/* the stored prefix is only the first 8 characters */
	assert_string_equal(fx_sql_text(fx,
				"SELECT prefix FROM tokens WHERE digest = sha256(convert_to($1, 'UTF8'))",
				token),
	    fx_str(fx, "%.8s", token));
}

static int64_t
parse_time(const char *s)
{
	int64_t us = 0;

	if (time_parse_rfc3339(s, &us) < 0)
		fail_msg("not an RFC 3339 time: %s", s);
	return us;
}

static const char *
rfc3339_in(struct fixture *fx, int seconds)
{
	time_t t = time(NULL) + seconds;
	struct tm tm;
	char buf[32];

	gmtime_r(&t, &tm);
	strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
	return fx_str(fx, "%s", buf);
}

static const char *
user_id(struct fixture *fx, const char *name)
{
	return fx_sql_text(fx, "SELECT id::text FROM users WHERE username = $1", name);
}

/* POST /v1/tokens as token; returns the response after checking 201. */
static struct gp_client_response *
token_create(struct fixture *fx, const char *token, const char *name)
{
	struct gp_client_response *r;

	r = fx_request(fx, token, "POST", "/v1/tokens", "{\"name\":\"%s\"}", name);
	assert_status(r, 201);
	return r;
}

/* Forget failed logins so one test's failures do not limit the next. */
static void
login_failures_reset(struct fixture *fx)
{
	fx_sql_exec(fx, "DELETE FROM login_failures");
}

/* ---- login ---- */

static void
test_login_ok(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *token, *uid;
	int64_t exp, now = time_now_us();

	fixture_create_user(fx, "alice", "none");
	uid = user_id(fx, "alice");
	r = login(fx, "alice", FIXTURE_PASSWORD);
	assert_status(r, 200);
	assert_true(strncmp(r->content_type, "application/json", 16) == 0);
	token = fx_json_str(r->json, "token");
	assert_token_stored_as_digest(fx, token);
	assert_json_str(r->json, "username", "alice");
	assert_json_str(r->json, "role", "none");
	/* a session lasts the default 12 hours */
	exp = parse_time(fx_json_str(r->json, "expires_at"));
	assert_true(exp > now + 12LL * 3600 * 1000000 - 120LL * 1000000);
	assert_true(exp < now + 12LL * 3600 * 1000000 + 120LL * 1000000);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE digest = sha256(convert_to($1, 'UTF8')) "
			     "AND user_id = $2::bigint AND kind = 'session' AND revoked_at IS NULL "
			     "AND abs(extract(epoch FROM expires_at) - $3::bigint / 1000000.0) < 1",
			     token, uid, fx_str(fx, "%lld", (long long)exp)),
	    1);
	/* two logins (fixture_create_user logged in once), two distinct sessions */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(DISTINCT digest) FROM tokens WHERE user_id = $1::bigint "
			     "AND kind = 'session'",
			     uid),
	    2);

	r = fx_request(fx, token, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "username", "alice");

	/* the token works only as a bearer token, and only exactly */
	r = fx_request_h(fx, NULL, "GET", "/v1/me",
	    ((const char *[]){ fx_str(fx, "Authorization: Basic %s", token), NULL }), NULL);
	assert_problem(r, 401, "unauthorized");
	assert_int_equal(me_status(fx, fx_str(fx, "%.*s", (int)strlen(token) - 1, token)), 401);
	assert_int_equal(me_status(fx, fx_str(fx, "%sA", token)), 401);
	assert_int_equal(me_status(fx, token + 4), 401);
}

static void
test_login_failures_look_alike(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *bad, *unknown, *r;
	const char *bob_token;
	int64_t sessions;

	login_failures_reset(fx);
	bob_token = fixture_create_user(fx, "bob", "operator");
	sessions = fx_sql_int64(fx, "SELECT count(*) FROM tokens");

	bad = login(fx, "bob", "not-the-Passw0rd");
	assert_problem(bad, 401, "invalid_credentials");
	unknown = login(fx, "nobody-here", FIXTURE_PASSWORD);
	assert_problem(unknown, 401, "invalid_credentials");
	/* nothing tells an unknown user from a wrong password */
	assert_string_equal(fx_json_str(bad->json, "detail"), fx_json_str(unknown->json, "detail"));
	assert_string_equal(fx_json_str(bad->json, "title"), fx_json_str(unknown->json, "title"));
	assert_json_absent(bad->json, "token");
	/* case matters in user names and passwords */
	assert_problem(login(fx, "BOB", FIXTURE_PASSWORD), 401, "invalid_credentials");
	assert_problem(login(fx, "bob", "USER-Passw0rd-for-tests"), 401, "invalid_credentials");
	/* an empty password is a failed login too */
	assert_problem(login(fx, "bob", ""), 401, "invalid_credentials");

	/* bad requests are validation errors, not failed logins */
	r = fx_request(fx, NULL, "POST", "/v1/auth/login", "{\"username\":\"bob\"}");
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, NULL, "POST", "/v1/auth/login",
	    "{\"username\":\"bob\",\"password\":\"x\",\"otp\":\"1\"}");
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, NULL, "POST", "/v1/auth/login", "{\"username\":\"bob\",\"password\":1}");
	assert_problem(r, 422, "validation_failed");

	/* no session was created by any of them */
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM tokens"), sessions);

	/* a disabled user cannot log in, even with the right password, and
	 * the sessions it had end at once */
	assert_int_equal(me_status(fx, bob_token), 200);
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/users/bob", "{\"disabled\":true}");
	assert_status(r, 200);
	assert_int_equal(me_status(fx, bob_token), 401);
	r = login(fx, "bob", FIXTURE_PASSWORD);
	assert_problem(r, 401, "invalid_credentials");
	assert_string_equal(fx_json_str(r->json, "detail"), fx_json_str(unknown->json, "detail"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens t JOIN users u ON u.id = t.user_id "
			     "WHERE u.username = 'bob' AND t.revoked_at IS NULL"),
	    0);
	/* enabled again, the old session stays dead but a new login works */
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/users/bob", "{\"disabled\":false}");
	assert_status(r, 200);
	assert_int_equal(me_status(fx, bob_token), 401);
	r = login(fx, "bob", FIXTURE_PASSWORD);
	assert_status(r, 200);
	assert_int_equal(me_status(fx, fx_json_str(r->json, "token")), 200);
}

/* ---- /v1/me ---- */

static void
test_me(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *tok;

	tok = fixture_create_user(fx, "carol", "billing");
	r = fx_request(fx, tok, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "username", "carol");
	assert_json_str(r->json, "role", "billing");
	assert_int_equal(fx_json_len(r->json, "projects"), 0);

	/* projects appear with the caller's role, sorted by name */
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"me-b\",\"display_name\":\"B\"}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"me-a\",\"display_name\":\"A\"}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"me-c\",\"display_name\":\"C\"}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/me-b/members/carol",
			  "{\"role\":\"viewer\"}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/me-a/members/carol",
			  "{\"role\":\"owner\"}"),
	    201);
	r = fx_request(fx, tok, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_int_equal(json_object_object_length(r->json), 3);
	assert_json_str(r->json, "username", "carol");
	assert_json_str(r->json, "role", "billing");
	assert_int_equal(fx_json_len(r->json, "projects"), 2);
	assert_json_str(r->json, "projects[0].name", "me-a");
	assert_json_str(r->json, "projects[0].role", "owner");
	assert_json_str(r->json, "projects[1].name", "me-b");
	assert_json_str(r->json, "projects[1].role", "viewer");
	assert_int_equal(json_object_object_length(fx_json(r->json, "projects[0]")), 2);

	r = fx_request(fx, fx->admin_token, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "username", FIXTURE_ADMIN_USER);
	assert_json_str(r->json, "role", "admin");

	/* no token, a malformed header, an unknown token */
	r = fx_request(fx, NULL, "GET", "/v1/me", NULL);
	assert_problem(r, 401, "unauthorized");
	r = fx_request_h(fx, NULL, "GET", "/v1/me",
	    ((const char *[]){ "Authorization: Bearer", NULL }), NULL);
	assert_problem(r, 401, "unauthorized");
	r = fx_request(fx, "gpp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "GET", "/v1/me",
	    NULL);
	assert_problem(r, 401, "unauthorized");
}

/* ---- API tokens ---- */

static void
test_api_token_shown_once(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *session, *api, *id, *uid;
	int64_t audit_before;

	session = fixture_create_user(fx, "dave", "none");
	uid = user_id(fx, "dave");
	audit_before =
	    fx_sql_int64(fx, "SELECT count(*) FROM audit_log WHERE action = 'token.create'");
	r = fx_request(fx, session, "POST", "/v1/tokens", "{\"name\":\"ci deploy\"}");
	assert_status(r, 201);
	api = fx_json_str(r->json, "token");
	id = fx_json_str(r->json, "id");
	assert_token_stored_as_digest(fx, api);
	assert_json_str(r->json, "name", "ci deploy");
	assert_json_str(r->json, "prefix", fx_str(fx, "%.8s", api));
	assert_json_null(r->json, "expires_at");
	assert_json_null(r->json, "last_used_at");
	assert_string_equal(r->location, fx_str(fx, "/v1/tokens/%s", id));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE id = $1::bigint AND user_id = $2::bigint "
			     "AND kind = 'api' AND name = 'ci deploy' AND expires_at IS NULL "
			     "AND digest = sha256(convert_to($3, 'UTF8'))",
			     id, uid, api),
	    1);
	/* the creation is audited, without the secret */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'token.create'"),
	    audit_before + 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'token.create' AND actor = 'dave' "
			     "AND object_id = $1",
			     id),
	    1);

	/* the API token authenticates as its user */
	r = fx_request(fx, api, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "username", "dave");
	/* first use is recorded */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE id = $1::bigint AND last_used_at IS NOT NULL",
			     id),
	    1);

	/* listed without the secret, session tokens not listed */
	r = fx_request(fx, session, "GET", "/v1/tokens", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].id", id);
	assert_json_str(r->json, "items[0].name", "ci deploy");
	assert_json_str(r->json, "items[0].prefix", fx_str(fx, "%.8s", api));
	assert_json_absent(r->json, "items[0].token");
	assert_json_null(r->json, "next_cursor");
	assert_null(strstr(r->body, api + 4));
	/* the same list through the API token itself */
	r = fx_request(fx, api, "GET", "/v1/tokens", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_null(strstr(r->body, api + 4));
	/* another user sees none of them */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/tokens", NULL);
	assert_status(r, 200);
	assert_null(strstr(r->body, fx_str(fx, "\"%s\"", "ci deploy")));

	/* bad input changes nothing */
	audit_before = fx_sql_int64(fx, "SELECT count(*) FROM tokens");
	assert_problem(fx_request(fx, session, "POST", "/v1/tokens", "{}"), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, session, "POST", "/v1/tokens", "{\"name\":\"\"}"), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, session, "POST", "/v1/tokens",
			   "{\"name\":\"x\",\"scope\":\"all\"}"),
	    422, "validation_failed");
	assert_problem(fx_request(fx, session, "POST", "/v1/tokens",
			   "{\"name\":\"x\",\"expires_at\":\"%s\"}", rfc3339_in(fx, -60)),
	    422, "validation_failed");
	assert_problem(fx_request(fx, session, "POST", "/v1/tokens",
			   "{\"name\":\"x\",\"expires_at\":\"%s\"}", rfc3339_in(fx, 400 * 86400)),
	    422, "validation_failed");
	assert_problem(fx_request(fx, session, "POST", "/v1/tokens",
			   "{\"name\":\"x\",\"expires_at\":\"tomorrow\"}"),
	    422, "validation_failed");
	assert_problem(fx_request(fx, session, "POST", "/v1/tokens", "{\"name\":\"%0101d\"}", 0),
	    422, "validation_failed");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM tokens"), audit_before);
}

/*
 * POST /v1/tokens with an Idempotency-Key: the response holds a secret
 * shown once, so the server may not keep it to replay it. One token is
 * created; a retry learns where it is but never sees the secret again.
 */
static void
test_api_token_idempotent_create(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *session, *api, *id, *uid;
	const char *const key[] = { "Idempotency-Key: tok-create-1", NULL };

	session = fixture_create_user(fx, "dora", "none");
	uid = user_id(fx, "dora");
	r = fx_request_h(fx, session, "POST", "/v1/tokens", key, "{\"name\":\"deploy\"}");
	assert_status(r, 201);
	api = fx_json_str(r->json, "token");
	id = fx_json_str(r->json, "id");
	assert_int_equal(me_status(fx, api), 200);
	/* the idempotency record exists, and holds no secret */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM idempotency_keys WHERE "
			     "user_id = $1::bigint AND key = 'tok-create-1' AND state = 'done'",
			     uid),
	    1);
	assert_token_stored_as_digest(fx, api);

	/* the retry creates nothing and shows no secret */
	r = fx_request_h(fx, session, "POST", "/v1/tokens", key, "{\"name\":\"deploy\"}");
	assert_problem(r, 409, "conflict");
	assert_string_equal(r->location, fx_str(fx, "/v1/tokens/%s", id));
	assert_null(strstr(r->body, api + 4));
	assert_json_absent(r->json, "token");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE user_id = $1::bigint "
			     "AND kind = 'api'",
			     uid),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'token.create' "
			     "AND actor = 'dora'"),
	    1);
	/* and the token created first still works */
	assert_int_equal(me_status(fx, api), 200);
	/* a different body with the same key is still a mismatch */
	r = fx_request_h(fx, session, "POST", "/v1/tokens", key, "{\"name\":\"other\"}");
	assert_problem(r, 422, "idempotency_mismatch");
}

static void
test_api_token_list_pages(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *session, *ids[7], *path, *seen[16];
	int nseen = 0, pages = 0;

	session = fixture_create_user(fx, "erin", "none");
	for (int i = 0; i < 7; i++)
		ids[i] = fx_json_str(token_create(fx, session, fx_str(fx, "t%d", i))->json, "id");

	path = "/v1/tokens?limit=3";
	for (;;) {
		struct json_object *next;
		size_t n;

		r = fx_request(fx, session, "GET", path, NULL);
		assert_status(r, 200);
		n = fx_json_len(r->json, "items");
		assert_true(n <= 3);
		for (size_t i = 0; i < n; i++) {
			assert_true(nseen < 16);
			seen[nseen++] = fx_json_str(r->json, fx_str(fx, "items[%zu].id", i));
			assert_json_absent(r->json, fx_str(fx, "items[%zu].token", i));
		}
		pages++;
		next = fx_json(r->json, "next_cursor");
		if (next == NULL)
			break;
		assert_true(pages < 10);
		path = fx_str(fx, "/v1/tokens?limit=3&cursor=%s", json_object_get_string(next));
	}
	/* 3 + 3 + 1, in creation order, each once */
	assert_int_equal(pages, 3);
	assert_int_equal(nseen, 7);
	for (int i = 0; i < 7; i++)
		assert_string_equal(seen[i], ids[i]);

	/* a revoked token leaves the list */
	assert_status(fx_request(fx, session, "DELETE", fx_str(fx, "/v1/tokens/%s", ids[3]), NULL),
	    204);
	r = fx_request(fx, session, "GET", "/v1/tokens?limit=500", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 6);
	assert_json_str(r->json, "items[3].id", ids[4]);

	assert_problem(fx_request(fx, session, "GET", "/v1/tokens?limit=0", NULL), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, session, "GET", "/v1/tokens?limit=501", NULL), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, session, "GET", "/v1/tokens?limit=x", NULL), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, session, "GET", "/v1/tokens?cursor=zzz", NULL), 422,
	    "validation_failed");
}

static void
test_api_token_expiry(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *session, *soon, *later, *later_id, *exp;
	int64_t exp_us;

	session = fixture_create_user(fx, "frank", "none");

	/* a token that expires in 6 seconds works until then, not after */
	exp = rfc3339_in(fx, 6);
	r = fx_request(fx, session, "POST", "/v1/tokens",
	    "{\"name\":\"short\",\"expires_at\":\"%s\"}", exp);
	assert_status(r, 201);
	soon = fx_json_str(r->json, "token");
	exp_us = parse_time(fx_json_str(r->json, "expires_at"));
	assert_true(exp_us == parse_time(exp));
	assert_int_equal(me_status(fx, soon), 200);
	while (time_now_us() < exp_us + 200000)
		usleep(100000);
	r = fx_request(fx, soon, "GET", "/v1/me", NULL);
	assert_problem(r, 401, "unauthorized");
	/* an expired token leaves nothing behind that it could use */
	assert_problem(fx_request(fx, soon, "GET", "/v1/tokens", NULL), 401, "unauthorized");

	/* expiry set in the database takes effect on the next request */
	r = fx_request(fx, session, "POST", "/v1/tokens",
	    "{\"name\":\"long\",\"expires_at\":\"%s\"}", rfc3339_in(fx, 86400));
	assert_status(r, 201);
	later = fx_json_str(r->json, "token");
	later_id = fx_json_str(r->json, "id");
	assert_int_equal(me_status(fx, later), 200);
	assert_int_equal(fx_sql_exec(fx,
			     "UPDATE tokens SET expires_at = now() - interval '1 second' "
			     "WHERE id = $1::bigint",
			     later_id),
	    1);
	assert_int_equal(me_status(fx, later), 401);

	/* so does a session's */
	assert_int_equal(me_status(fx, session), 200);
	assert_int_equal(fx_sql_exec(fx,
			     "UPDATE tokens SET expires_at = now() - interval '1 second' "
			     "WHERE digest = sha256(convert_to($1, 'UTF8'))",
			     session),
	    1);
	assert_int_equal(me_status(fx, session), 401);
}

static void
test_api_token_revocation(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *gina, *hank, *a, *a_id, *b, *b_id, *h, *h_id;
	int64_t audit_before;

	gina = fixture_create_user(fx, "gina", "none");
	hank = fixture_create_user(fx, "hank", "admin");
	r = token_create(fx, gina, "a");
	a = fx_json_str(r->json, "token");
	a_id = fx_json_str(r->json, "id");
	r = token_create(fx, gina, "b");
	b = fx_json_str(r->json, "token");
	b_id = fx_json_str(r->json, "id");
	r = token_create(fx, hank, "h");
	h = fx_json_str(r->json, "token");
	h_id = fx_json_str(r->json, "id");
	assert_int_equal(me_status(fx, a), 200);

	/* revoked through the session: the very next request is refused */
	audit_before =
	    fx_sql_int64(fx, "SELECT count(*) FROM audit_log WHERE action = 'token.revoke'");
	r = fx_request(fx, gina, "DELETE", fx_str(fx, "/v1/tokens/%s", a_id), NULL);
	assert_status(r, 204);
	assert_int_equal(r->body_len, 0);
	assert_problem(fx_request(fx, a, "GET", "/v1/me", NULL), 401, "unauthorized");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE id = $1::bigint "
			     "AND revoked_at IS NOT NULL",
			     a_id),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'token.revoke' "
			     "AND actor = 'gina' AND object_id = $1",
			     a_id),
	    1);
	/* twice is not found, and writes no second audit row */
	assert_problem(fx_request(fx, gina, "DELETE", fx_str(fx, "/v1/tokens/%s", a_id), NULL), 404,
	    "not_found");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'token.revoke'"),
	    audit_before + 1);
	/* the other tokens of the user are untouched */
	assert_int_equal(me_status(fx, b), 200);
	assert_int_equal(me_status(fx, gina), 200);

	/* another user's token id is not found, for a plain user and for an admin */
	r = fx_request(fx, gina, "DELETE", fx_str(fx, "/v1/tokens/%s", h_id), NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, hank, "DELETE", fx_str(fx, "/v1/tokens/%s", b_id), NULL);
	assert_problem(r, 404, "not_found");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE id IN ($1::bigint, $2::bigint) "
			     "AND revoked_at IS NULL",
			     h_id, b_id),
	    2);
	assert_int_equal(me_status(fx, h), 200);
	assert_int_equal(me_status(fx, b), 200);
	/* ids that are no ids */
	assert_problem(fx_request(fx, gina, "DELETE", "/v1/tokens/abc", NULL), 404, "not_found");
	assert_problem(fx_request(fx, gina, "DELETE", "/v1/tokens/0", NULL), 404, "not_found");
	assert_problem(fx_request(fx, gina, "DELETE", "/v1/tokens/99999999", NULL), 404,
	    "not_found");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'token.revoke'"),
	    audit_before + 1);

	/* a token may revoke itself; the next request with it is refused */
	r = fx_request(fx, b, "DELETE", fx_str(fx, "/v1/tokens/%s", b_id), NULL);
	assert_status(r, 204);
	assert_int_equal(me_status(fx, b), 401);
	assert_int_equal(me_status(fx, gina), 200);
}

/* A new password (set by an admin) ends every session and API token of the user. */
static void
test_password_change_ends_tokens(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *session, *api;

	login_failures_reset(fx);
	session = fixture_create_user(fx, "mona", "none");
	api = fx_json_str(token_create(fx, session, "m")->json, "token");
	assert_int_equal(me_status(fx, api), 200);
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/users/mona",
	    "{\"password\":\"another-Passw0rd-42\"}");
	assert_status(r, 200);
	assert_int_equal(me_status(fx, session), 401);
	assert_int_equal(me_status(fx, api), 401);
	assert_problem(login(fx, "mona", FIXTURE_PASSWORD), 401, "invalid_credentials");
	r = login(fx, "mona", "another-Passw0rd-42");
	assert_status(r, 200);
	assert_int_equal(me_status(fx, fx_json_str(r->json, "token")), 200);
	/* the audit row of the change holds no password or hash */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE object_id = 'mona' "
			     "AND (strpos(audit_log::text, 'another-Passw0rd-42') > 0 "
			     "OR strpos(audit_log::text, '$argon2') > 0)"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE object_id = 'mona' "
			     "AND action = 'user.update'"),
	    1);
}

/* ---- rate limiting ---- */

static void
test_login_rate_limit_per_user(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t tokens;

	login_failures_reset(fx);
	fixture_create_user(fx, "ivan", "none");
	fixture_create_user(fx, "judy", "none");
	tokens = fx_sql_int64(fx, "SELECT count(*) FROM tokens");

	for (int i = 0; i < 10; i++)
		assert_problem(login(fx, "ivan", fx_str(fx, "wrong-%d", i)), 401,
		    "invalid_credentials");
	/* the 11th attempt is refused before the password is looked at */
	r = login(fx, "ivan", FIXTURE_PASSWORD);
	assert_problem(r, 429, "rate_limited");
	assert_true(r->retry_after > 0);
	r = login(fx, "ivan", "wrong-again");
	assert_problem(r, 429, "rate_limited");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM tokens"), tokens);
	/* the limit is per user: judy is not affected */
	assert_status(login(fx, "judy", FIXTURE_PASSWORD), 200);
	tokens++;
	/* once the window has passed ivan may log in again */
	assert_int_equal(fx_sql_exec(fx,
			     "UPDATE login_failures SET window_start = now() - interval '1 day' "
			     "WHERE key LIKE '%ivan%'"),
	    1);
	assert_status(login(fx, "ivan", FIXTURE_PASSWORD), 200);
	tokens++;
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM tokens"), tokens);

	/* a successful login clears the user's counter: 9 + 9 failures
	 * around a success never reach the limit of 10 */
	for (int i = 0; i < 9; i++)
		assert_problem(login(fx, "judy", "wrong"), 401, "invalid_credentials");
	assert_status(login(fx, "judy", FIXTURE_PASSWORD), 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM login_failures WHERE key LIKE '%judy%'"),
	    0);
	for (int i = 0; i < 9; i++)
		assert_problem(login(fx, "judy", "wrong"), 401, "invalid_credentials");
	assert_status(login(fx, "judy", FIXTURE_PASSWORD), 200);
	/* and the 10th failure in a row still trips it */
	for (int i = 0; i < 10; i++)
		assert_problem(login(fx, "judy", "wrong"), 401, "invalid_credentials");
	assert_problem(login(fx, "judy", FIXTURE_PASSWORD), 429, "rate_limited");

	/* unknown users are limited like known ones */
	for (int i = 0; i < 10; i++)
		assert_problem(login(fx, "ghost", "x"), 401, "invalid_credentials");
	assert_problem(login(fx, "ghost", "x"), 429, "rate_limited");
	login_failures_reset(fx);
}

struct guesser {
	const char *base_url;
	const char *user;
	int attempts;
	int refused; /* 401: the password was checked */
	int limited; /* 429 */
	int other;
};

static void *
guesser_main(void *arg)
{
	struct guesser *g = arg;
	struct gp_client *cl = gp_client_create(g->base_url, NULL);

	if (cl == NULL) {
		g->other = g->attempts;
		return NULL;
	}
	gp_client_set_timeouts(cl, 60000, 5000);
	for (int i = 0; i < g->attempts; i++) {
		struct gp_client_response r;
		char body[128];

		snprintf(body, sizeof(body), "{\"username\":\"%s\",\"password\":\"guess-%d\"}",
		    g->user, i);
		if (gp_client_request(cl, "POST", "/v1/auth/login", body, strlen(body), NULL, &r) !=
		    0)
			g->other++;
		else if (r.status == 401)
			g->refused++;
		else if (r.status == 429)
			g->limited++;
		else
			g->other++;
		gp_client_response_free(&r);
	}
	gp_client_destroy(cl);
	return NULL;
}

/*
 * Guesses sent in parallel get no more than the limit: of 48 wrong
 * passwords from 8 connections at once, at most 10 are checked.
 */
static void
test_login_rate_limit_parallel(void **state)
{
	struct fixture *fx = *state;
	struct guesser g[8];
	pthread_t th[8];
	int refused = 0, limited = 0, other = 0;

	login_failures_reset(fx);
	fixture_create_user(fx, "nina", "none");
	for (int i = 0; i < 8; i++) {
		g[i] = (struct guesser){ .base_url = fx->server->base_url,
			.user = "nina",
			.attempts = 6 };
		assert_int_equal(pthread_create(&th[i], NULL, guesser_main, &g[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		assert_int_equal(pthread_join(th[i], NULL), 0);
		refused += g[i].refused;
		limited += g[i].limited;
		other += g[i].other;
	}
	print_message("parallel guesses: %d checked, %d limited, %d other\n", refused, limited,
	    other);
	assert_int_equal(other, 0);
	assert_int_equal(refused + limited, 48);
	assert_true(refused <= 10);
	assert_problem(login(fx, "nina", FIXTURE_PASSWORD), 429, "rate_limited");
	login_failures_reset(fx);
}

static void
test_login_rate_limit_per_address(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;

	login_failures_reset(fx);
	fixture_create_user(fx, "kate", "none");
	/* 100 failures from one address, each for a different user name */
	for (int i = 0; i < 100; i++)
		assert_problem(login(fx, fx_str(fx, "spray-%d", i), "x"), 401,
		    "invalid_credentials");
	/* now every login from that address waits, right password or not */
	r = login(fx, "kate", FIXTURE_PASSWORD);
	assert_problem(r, 429, "rate_limited");
	assert_true(r->retry_after > 0);
	/* and further sprayed names leave no counter behind */
	assert_problem(login(fx, "spray-extra", "x"), 429, "rate_limited");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM login_failures "
			     "WHERE key IN ('user:spray-extra', 'user:kate')"),
	    0);
	login_failures_reset(fx);
	assert_status(login(fx, "kate", FIXTURE_PASSWORD), 200);
}

/* ---- password rehash ---- */

static void
test_password_rehash(void **state)
{
	struct fixture *fx = *state;
	static const unsigned char salt[16] = "weak-salt-16byte";
	char weak[256];
	const char *now_hash, *again;

	login_failures_reset(fx);
	fixture_create_user(fx, "liam", "none");
	/* a hash with current parameters is left alone on login */
	now_hash = fx_sql_text(fx, "SELECT password_hash FROM users WHERE username = 'liam'");
	assert_int_equal(strncmp(now_hash, "$argon2id$v=19$m=19456,t=2,p=1$", 31), 0);
	assert_status(login(fx, "liam", FIXTURE_PASSWORD), 200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT password_hash FROM users WHERE username = 'liam'"),
	    now_hash);

	/* a hash made with weaker parameters (m=4096 KiB, t=1) is replaced on
	 * the next successful login, not on a failed one */
	assert_int_equal(argon2id_hash_encoded(1, 4096, 1, FIXTURE_PASSWORD,
			     strlen(FIXTURE_PASSWORD), salt, sizeof(salt), 32, weak, sizeof(weak)),
	    ARGON2_OK);
	assert_int_equal(strncmp(weak, "$argon2id$v=19$m=4096,t=1,p=1$", 30), 0);
	assert_int_equal(fx_sql_exec(fx,
			     "UPDATE users SET password_hash = $1 WHERE username = 'liam'", weak),
	    1);
	assert_problem(login(fx, "liam", "wrong"), 401, "invalid_credentials");
	assert_string_equal(fx_sql_text(fx,
				"SELECT password_hash FROM users WHERE username = 'liam'"),
	    weak);
	assert_status(login(fx, "liam", FIXTURE_PASSWORD), 200);
	again = fx_sql_text(fx, "SELECT password_hash FROM users WHERE username = 'liam'");
	assert_int_equal(strncmp(again, "$argon2id$v=19$m=19456,t=2,p=1$", 31), 0);
	assert_string_not_equal(again, weak);
	assert_string_not_equal(again, now_hash); /* a fresh salt */
	/* the new hash verifies the same password */
	assert_int_equal(argon2id_verify(again, FIXTURE_PASSWORD, strlen(FIXTURE_PASSWORD)),
	    ARGON2_OK);
	assert_status(login(fx, "liam", FIXTURE_PASSWORD), 200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT password_hash FROM users WHERE username = 'liam'"),
	    again);
	/* no secret, weak or new, went to the audit log */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE strpos(audit_log::text, $1) > 0",
			     weak + 31),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE strpos(audit_log::text, $1) > 0",
			     FIXTURE_PASSWORD),
	    0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_login_ok),
		cmocka_unit_test(test_login_failures_look_alike),
		cmocka_unit_test(test_me),
		cmocka_unit_test(test_api_token_shown_once),
		cmocka_unit_test(test_api_token_idempotent_create),
		cmocka_unit_test(test_api_token_list_pages),
		cmocka_unit_test(test_api_token_expiry),
		cmocka_unit_test(test_api_token_revocation),
		cmocka_unit_test(test_password_change_ends_tokens),
		cmocka_unit_test(test_login_rate_limit_per_user),
		cmocka_unit_test(test_login_rate_limit_parallel),
		cmocka_unit_test(test_login_rate_limit_per_address),
		cmocka_unit_test(test_password_rehash),
	};

	return fixture_run_tests(tests);
}
