/*
 * test_http_semantics.c - HTTP semantics of RFC 9110 and RFC 6750 that
 * clients and monitors rely on: HEAD on every GET route (the headers of
 * the GET, no body), OPTIONS with Allow, Allow on 405 listing HEAD and
 * OPTIONS, and the error attribute of WWW-Authenticate.
 */
#include "fixture.h"
#include "rawhttp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct raw_response
send_raw(struct fixture *fx, const char *method, const char *path, const char *token)
{
	const char *h[2] = { token ? fx_str(fx, "Authorization: Bearer %s", token) : NULL, NULL };
	struct raw_response r;
	size_t len;
	char *req = raw_build(fx->arena, method, path, h, NULL, 0, &len);

	memset(&r, 0, sizeof(r));
	assert_int_equal(raw_exchange(fx->arena, fx->server->port, req, len, 5000, &r), 0);
	return r;
}

/* HEAD answers every GET route with the GET's status and headers and no body. */
static void
test_head(void **state)
{
	struct fixture *fx = *state;
	static const char *const paths[] = { "/healthz", "/v1/openapi.yaml", "/v1/me",
		"/v1/projects", "/v1/catalog/models", "/v1/users/admin" };

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct raw_response g = send_raw(fx, "GET", paths[i], fx->admin_token);
		struct raw_response h = send_raw(fx, "HEAD", paths[i], fx->admin_token);
		const char *gl = raw_header(fx->arena, &g, "Content-Length");
		const char *hl = raw_header(fx->arena, &h, "Content-Length");

		assert_int_equal(h.status, g.status);
		assert_int_equal(h.body_len, 0);
		assert_non_null(gl);
		assert_non_null(hl);
		assert_string_equal(hl, gl);
		assert_string_equal(raw_header(fx->arena, &h, "Content-Type"),
		    raw_header(fx->arena, &g, "Content-Type"));
	}
	/* HEAD needs the same authentication as the GET */
	assert_int_equal(send_raw(fx, "HEAD", "/v1/projects", NULL).status, 401);
}

/* OPTIONS: 204 with what the resource allows; 405 lists HEAD and OPTIONS too. */
static void
test_options_and_allow(void **state)
{
	struct fixture *fx = *state;
	struct raw_response r = send_raw(fx, "OPTIONS", "/v1/projects", NULL);

	assert_int_equal(r.status, 204);
	assert_string_equal(raw_header(fx->arena, &r, "Allow"), "POST, GET, HEAD, OPTIONS");
	assert_int_equal(r.body_len, 0);
	r = send_raw(fx, "OPTIONS", "/v1/projects/x/members/y", NULL);
	assert_int_equal(r.status, 204);
	assert_string_equal(raw_header(fx->arena, &r, "Allow"), "PUT, DELETE, OPTIONS");
	r = send_raw(fx, "OPTIONS", "/v1/nothing-here", NULL);
	assert_int_equal(r.status, 404);
	r = send_raw(fx, "DELETE", "/healthz", NULL);
	assert_int_equal(r.status, 405);
	assert_string_equal(raw_header(fx->arena, &r, "Allow"), "GET, HEAD, OPTIONS");
}

/* RFC 6750 3.1: error="invalid_token" for a bad token, no attribute without one. */
static void
test_bearer_errors(void **state)
{
	struct fixture *fx = *state;
	struct raw_response r = send_raw(fx, "GET", "/v1/me", NULL);

	assert_int_equal(r.status, 401);
	assert_string_equal(raw_header(fx->arena, &r, "WWW-Authenticate"),
	    "Bearer realm=\"gpupool\"");
	r = send_raw(fx, "GET", "/v1/me", "gpp_not-a-real-token-at-all");
	assert_int_equal(r.status, 401);
	assert_string_equal(raw_header(fx->arena, &r, "WWW-Authenticate"),
	    "Bearer realm=\"gpupool\", error=\"invalid_token\"");
}

/* The Location of a new token answers (it answered 405 before). */
static void
test_token_location(void **state)
{
	struct fixture *fx = *state;
	const char *other = fixture_create_user(fx, "other", "none");
	struct gp_client_response *r =
	    fx_request(fx, fx->admin_token, "POST", "/v1/tokens", "{\"name\":\"ci\"}");
	const char *loc;

	assert_status(r, 201);
	loc = fx_str(fx, "%s", r->location);
	r = fx_request(fx, fx->admin_token, "GET", loc, NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "name", "ci");
	assert_json_absent(r->json, "token");
	r = fx_request(fx, other, "GET", loc, NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, fx->admin_token, "DELETE", loc, NULL);
	assert_status(r, 204);
	r = fx_request(fx, fx->admin_token, "GET", loc, NULL);
	assert_problem(r, 404, "not_found");
}

/* If-None-Match: 304 without a body when the ETag is listed (weak comparison). */
static void
test_if_none_match(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r =
	    fx_request(fx, fx->admin_token, "GET", "/v1/openapi.yaml", NULL);
	const char *etag = r->etag[0] ? fx_str(fx, "%s", r->etag) : NULL;

	assert_status(r, 200);
	assert_non_null(etag);
	r = fx_request_h(fx, fx->admin_token, "GET", "/v1/openapi.yaml",
	    ((const char *[]){ fx_str(fx, "If-None-Match: \"x\", W/%s", etag), NULL }), NULL);
	assert_status(r, 304);
	assert_int_equal(r->body_len, 0);
	r = fx_request_h(fx, fx->admin_token, "GET", "/v1/openapi.yaml",
	    ((const char *[]){ "If-None-Match: \"other\"", NULL }), NULL);
	assert_status(r, 200);
	/* a single object: a project; after a change the old tag no longer matches */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"inm\",\"display_name\":\"a\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/inm", NULL);
	etag = fx_str(fx, "%s", r->etag);
	r = fx_request_h(fx, fx->admin_token, "GET", "/v1/projects/inm",
	    ((const char *[]){ fx_str(fx, "If-None-Match: %s", etag), NULL }), NULL);
	assert_status(r, 304);
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/inm",
	    "{\"display_name\":\"b\"}");
	assert_status(r, 200);
	r = fx_request_h(fx, fx->admin_token, "GET", "/v1/projects/inm",
	    ((const char *[]){ fx_str(fx, "If-None-Match: %s", etag), NULL }), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "display_name", "b");
}

/* CORS for a configured origin only: preflight and the answer's headers. */
static void
test_cors(void **state)
{
	struct fixture *fx = *state;
	const char *env[] = { "GPUPOOL_CORS_ORIGINS=https://dash.example.com,http://localhost:5173",
		NULL };
	struct fx_server *prev = fx->server, *srv = fixture_server_start(fx, env);
	struct raw_response r;
	size_t len;
	char *req;

	assert_non_null(srv);
	fx->server = srv;
	req = raw_build(fx->arena, "OPTIONS", "/v1/projects",
	    (const char *[]){ "Origin: https://dash.example.com",
		"Access-Control-Request-Method: POST",
		"Access-Control-Request-Headers: authorization, content-type", NULL },
	    NULL, 0, &len);
	assert_int_equal(raw_exchange(fx->arena, srv->port, req, len, 5000, &r), 0);
	assert_int_equal(r.status, 204);
	assert_string_equal(raw_header(fx->arena, &r, "Access-Control-Allow-Origin"),
	    "https://dash.example.com");
	assert_non_null(strstr(raw_header(fx->arena, &r, "Access-Control-Allow-Methods"), "POST"));
	assert_non_null(
	    strstr(raw_header(fx->arena, &r, "Access-Control-Allow-Headers"), "Authorization"));
	/* an answer (an error too) carries the origin; another origin gets nothing */
	req = raw_build(fx->arena, "GET", "/v1/me",
	    (const char *[]){ "Origin: http://localhost:5173", NULL }, NULL, 0, &len);
	assert_int_equal(raw_exchange(fx->arena, srv->port, req, len, 5000, &r), 0);
	assert_int_equal(r.status, 401);
	assert_string_equal(raw_header(fx->arena, &r, "Access-Control-Allow-Origin"),
	    "http://localhost:5173");
	req = raw_build(fx->arena, "GET", "/healthz",
	    (const char *[]){ "Origin: https://evil.example.com", NULL }, NULL, 0, &len);
	assert_int_equal(raw_exchange(fx->arena, srv->port, req, len, 5000, &r), 0);
	assert_int_equal(r.status, 200);
	assert_null(raw_header(fx->arena, &r, "Access-Control-Allow-Origin"));
	fx->server = prev;
	assert_int_equal(fixture_server_stop(fx, srv), 0);
	/* off by default */
	req = raw_build(fx->arena, "GET", "/healthz",
	    (const char *[]){ "Origin: https://dash.example.com", NULL }, NULL, 0, &len);
	assert_int_equal(raw_exchange(fx->arena, fx->server->port, req, len, 5000, &r), 0);
	assert_null(raw_header(fx->arena, &r, "Access-Control-Allow-Origin"));
	/* a bad setting stops the server at start */
	assert_null(fixture_server_start(fx,
	    (const char *[]){ "GPUPOOL_CORS_ORIGINS=https://x.example.com/path", NULL }));
}

/* Logout revokes the token that sent it, and only that one; gpupool version. */
static void
test_logout_version(void **state)
{
	struct fixture *fx = *state;
	const char *a = fixture_login(fx, FIXTURE_ADMIN_USER, FIXTURE_ADMIN_PASSWORD);
	const char *b = fixture_login(fx, FIXTURE_ADMIN_USER, FIXTURE_ADMIN_PASSWORD);
	const char *env[] = { fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url), NULL };
	int64_t revokes = fx_sql_int64(fx,
	    "SELECT count(*) FROM audit_log WHERE action = "
	    "'token.revoke'");
	struct gp_client_response *r = fx_request(fx, a, "POST", "/v1/auth/logout", NULL);
	struct fx_proc *p;

	assert_status(r, 204);
	assert_problem(fx_request(fx, a, "GET", "/v1/me", NULL), 401, "unauthorized");
	assert_status(fx_request(fx, b, "GET", "/v1/me", NULL), 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = "
			     "'token.revoke'"),
	    revokes + 1);
	/* GPUPOOL_CONFIG names the config file: login writes it, logout empties its token */
	{
		const char *cfg = fx_str(fx, "%s/elsewhere/gpupool.conf", fx->tmpdir);
		const char *cenv[] = { fx_str(fx, "GPUPOOL_CONFIG=%s", cfg), NULL };
		char text[4096] = "";
		FILE *f;
		size_t got;

		p = fx_cli(fx, cenv, FIXTURE_ADMIN_PASSWORD "\n", "--server", fx->server->base_url,
		    "login", "--username", FIXTURE_ADMIN_USER, NULL);
		assert_int_equal(p->status, 0);
		f = fopen(cfg, "r");
		assert_non_null(f);
		got = fread(text, 1, sizeof(text) - 1, f);
		text[got] = '\0';
		fclose(f);
		assert_non_null(strstr(text, "token"));
		p = fx_cli(fx, cenv, NULL, "me", NULL);
		assert_int_equal(p->status, 0);
		p = fx_cli(fx, cenv, NULL, "logout", NULL);
		assert_int_equal(p->status, 0);
		p = fx_cli(fx, cenv, NULL, "me", NULL);
		assert_int_equal(p->status, 1);
	}
	/* completion scripts built from the command table */
	p = fx_cli(fx, env, NULL, "completion", "bash", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "complete -F _gpupool gpupool"));
	assert_non_null(strstr(p->out, "\" alerts ack\"|\" alerts ack \"*)"));
	assert_non_null(strstr(p->out, "--expires-in"));
	p = fx_cli(fx, env, NULL, "completion", "fish", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out,
	    "__fish_seen_subcommand_from nodes; and not "
	    "__fish_seen_subcommand_from "));
	assert_non_null(strstr(p->out, "' -a 'enroll-token' -d "));
	p = fx_cli(fx, env, NULL, "completion", "zsh", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "bashcompinit"));
	p = fx_cli(fx, env, NULL, "completion", "tcsh", NULL);
	assert_int_equal(p->status, 2);
	/* output formats: yaml, name, --no-headers */
	{
		const char *aenv[] = { env[0], fx_str(fx, "GPUPOOL_TOKEN=%s", fx->admin_token),
			NULL };

		assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/clusters",
				  "{\"name\":\"fmt-a\",\"region\":\"eu \\\"1\\\"\"}"),
		    201);
		p = fx_cli(fx, aenv, NULL, "clusters", "list", "-o", "yaml", NULL);
		assert_int_equal(p->status, 0);
		assert_non_null(strstr(p->out, "\"items\":\n  - \"name\": \"fmt-a\"\n"));
		assert_non_null(strstr(p->out, "\"region\": \"eu \\\"1\\\"\"\n"));
		p = fx_cli(fx, aenv, NULL, "clusters", "list", "-o", "name", NULL);
		assert_int_equal(p->status, 0);
		assert_string_equal(p->out, "fmt-a\n");
		p = fx_cli(fx, aenv, NULL, "clusters", "list", "--no-headers", NULL);
		assert_int_equal(p->status, 0);
		assert_null(strstr(p->out, "NAME"));
		assert_memory_equal(p->out, "fmt-a ", 6);
		p = fx_cli(fx, aenv, NULL, "clusters", "list", "-o", "xml", NULL);
		assert_int_equal(p->status, 2);
	}
	/* a typo gets a suggestion */
	p = fx_cli(fx, env, NULL, "nodse", "list", NULL);
	assert_int_equal(p->status, 2);
	assert_non_null(strstr(p->err, "did you mean this?\n\tgpupool nodes"));
	p = fx_cli(fx, env, NULL, "alerts", "lst", NULL);
	assert_int_equal(p->status, 2);
	assert_non_null(strstr(p->err, "gpupool alerts list"));
	p = fx_cli(fx, env, NULL, "version", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "client: gpupool 0.1.0"));
	assert_non_null(strstr(p->out, "server: gpupoold 0.1.0"));
}

/* Cursors are signed and bound to their listing: forged or foreign ones are 422. */
static void
test_cursors(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *next;

	for (int i = 0; i < 3; i++)
		assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
				  "{\"name\":\"cur-%d\",\"display_name\":\"c\"}", i),
		    201);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?limit=1", NULL);
	assert_status(r, 200);
	next = fx_str(fx, "%s", fx_json_str(r->json, "next_cursor"));
	r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/projects?limit=1&cursor=%s", next), NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	/* the old unsigned form, a changed position, another listing's cursor */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?limit=1&cursor=c1", NULL);
	assert_problem(r, 422, "validation_failed");
	{
		char *forged = strdup(next);

		forged[1] = forged[1] == '1' ? '2' : '1';
		r = fx_request(fx, fx->admin_token, "GET",
		    fx_str(fx, "/v1/projects?limit=1&cursor=%s", forged), NULL);
		free(forged);
		assert_problem(r, 422, "validation_failed");
	}
	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "/v1/users?limit=1&cursor=%s", next),
	    NULL);
	assert_problem(r, 422, "validation_failed");
	/* a replica reads the same key from the database: the cursor works there too */
	{
		struct fx_server *prev = fx->server, *b = fixture_server_start(fx, NULL);

		assert_non_null(b);
		fx->server = b;
		r = fx_request(fx, fx->admin_token, "GET",
		    fx_str(fx, "/v1/projects?limit=1&cursor=%s", next), NULL);
		assert_status(r, 200);
		fx->server = prev;
		assert_int_equal(fixture_server_stop(fx, b), 0);
	}
}

/* A mistyped model or profile gets a suggestion (did you mean). */
static void
test_did_you_mean(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r =
	    fx_request(fx, fx->admin_token, "POST", "/v1/capacity/simulate",
		"{\"items\":[{\"model\":\"h100-80g\",\"profile\":\"full\",\"count\":1},"
		"{\"model\":\"H100-80GB\",\"profile\":\"3g.40g\",\"count\":1},"
		"{\"model\":\"Z9\",\"profile\":\"full\",\"count\":1}]}");

	assert_problem(r, 422, "validation_failed");
	assert_non_null(
	    strstr(r->body, "unknown gpu model \\\"h100-80g\\\"; did you mean \\\"H100-80GB\\\"?"));
	assert_non_null(
	    strstr(r->body, "no profile \\\"3g.40g\\\"; did you mean \\\"3g.40gb\\\"?"));
	assert_non_null(strstr(r->body, "unknown gpu model \\\"Z9\\\"\""));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_head),
		cmocka_unit_test(test_options_and_allow),
		cmocka_unit_test(test_bearer_errors),
		cmocka_unit_test(test_token_location),
		cmocka_unit_test(test_if_none_match),
		cmocka_unit_test(test_cors),
		cmocka_unit_test(test_logout_version),
		cmocka_unit_test(test_cursors),
		cmocka_unit_test(test_did_you_mean),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, fixture_group_setup, fixture_group_teardown));
}
