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
#include <unistd.h>

#include "core/timeutil.h"

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
	/* a browser may read Accept-Patch of a PATCH's 415 (RFC 5789 3.1) */
	assert_non_null(
	    strstr(raw_header(fx->arena, &r, "Access-Control-Expose-Headers"), "Accept-Patch"));
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
		assert_int_equal(p->status, 3);
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
		/* plain where YAML reads it back the same, quoted where it would not */
		assert_non_null(strstr(p->out, "items:\n  - name: fmt-a\n"));
		assert_non_null(strstr(p->out, "region: \"eu \\\"1\\\"\"\n"));
		/* a date stays quoted: YAML would read it as a timestamp */
		assert_non_null(strstr(p->out, "created_at: \"20"));
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
	/* another limit is the same listing */
	r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/projects?limit=2&cursor=%s", next), NULL);
	assert_status(r, 200);
	/*
	 * bound to the concrete path: project cur-0's members cursor is
	 * refused for cur-1's members (the same route pattern)
	 */
	for (int i = 0; i < 2; i++)
		for (int u = 0; u < 2; u++) {
			const char *name = fx_str(fx, "cm%d%d", i, u);

			(void)fixture_create_user(fx, name, "none");
			assert_status(fx_request(fx, fx->admin_token, "PUT",
					  fx_str(fx, "/v1/projects/cur-%d/members/%s", i, name),
					  "{\"role\":\"viewer\"}"),
			    201);
		}
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/cur-0/members?limit=1", NULL);
	assert_status(r, 200);
	next = fx_str(fx, "%s", fx_json_str(r->json, "next_cursor"));
	r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/projects/cur-0/members?limit=1&cursor=%s", next), NULL);
	assert_status(r, 200);
	r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/projects/cur-1/members?limit=1&cursor=%s", next), NULL);
	assert_problem(r, 422, "validation_failed");
	/* bound to the filters: the audit log of one action is not another's, nor the whole */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?action=project.create&limit=1", NULL);
	assert_status(r, 200);
	next = fx_str(fx, "%s", fx_json_str(r->json, "next_cursor"));
	r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/audit?limit=1&action=project.create&cursor=%s", next), NULL);
	assert_status(r, 200);
	r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/audit?action=project.member.put&limit=1&cursor=%s", next), NULL);
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "/v1/audit?limit=1&cursor=%s", next),
	    NULL);
	assert_problem(r, 422, "validation_failed");
	/* the cursor names its key: another key id is refused */
	{
		char *other = strdup(next);
		char *dot = strchr(other, '.');

		assert_non_null(dot);
		dot[1] = dot[1] == '0' ? '1' : '0';
		r = fx_request(fx, fx->admin_token, "GET",
		    fx_str(fx, "/v1/audit?action=project.create&limit=1&cursor=%s", other), NULL);
		free(other);
		assert_problem(r, 422, "validation_failed");
	}
	/* a replica reads the same key from the database: the cursor works there too */
	{
		struct fx_server *prev = fx->server, *b = fixture_server_start(fx, NULL);

		assert_non_null(b);
		fx->server = b;
		r = fx_request(fx, fx->admin_token, "GET",
		    fx_str(fx, "/v1/audit?action=project.create&limit=1&cursor=%s", next), NULL);
		assert_status(r, 200);
		fx->server = prev;
		assert_int_equal(fixture_server_stop(fx, b), 0);
	}
}

/* A mistyped model or profile gets a suggestion (did you mean). */
/*
 * gpupoold admin rotate-cursor-key: a server started after it signs with
 * the new key and accepts the old key's cursors for
 * GPUPOOL_CURSOR_KEY_OVERLAP seconds after the rotation, then refuses
 * them; a second rotation retires the first key at once.
 */
static void
test_cursor_key_rotation(void **state)
{
	static const char *const env[] = { "GPUPOOL_CURSOR_KEY_OVERLAP=4", NULL };
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct fx_server *prev = fx->server, *b;
	const char *old_cursor, *new_cursor, *path = "/v1/audit?action=project.create&limit=1";
	struct fx_proc *p;
	int64_t rotated, refused_after_ms = -1;

	r = fx_request(fx, fx->admin_token, "GET", path, NULL);
	assert_status(r, 200);
	old_cursor = fx_str(fx, "%s", fx_json_str(r->json, "next_cursor"));
	p = fx_gpupoold(fx, NULL, "admin", "rotate-cursor-key", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "cursor key rotated"));
	rotated = time_mono_us();
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM server_keys WHERE name IN "
			     "('cursor', 'cursor_previous')"),
	    2);
	b = fixture_server_start(fx, env);
	assert_non_null(b);
	fx->server = b;
	/* the new key: another key id */
	r = fx_request(fx, fx->admin_token, "GET", path, NULL);
	assert_status(r, 200);
	new_cursor = fx_str(fx, "%s", fx_json_str(r->json, "next_cursor"));
	assert_string_not_equal(strchr(new_cursor, '.'), strchr(old_cursor, '.'));
	/* within the overlap the old cursor still works */
	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "%s&cursor=%s", path, old_cursor),
	    NULL);
	if ((time_mono_us() - rotated) / 1000 < 3500)
		assert_status(r, 200);
	/* after it, it is refused; the new one is not */
	for (int i = 0; i < 300; i++) {
		r = fx_request(fx, fx->admin_token, "GET",
		    fx_str(fx, "%s&cursor=%s", path, old_cursor), NULL);
		if (r->status == 422) {
			refused_after_ms = (time_mono_us() - rotated) / 1000;
			break;
		}
		assert_status(r, 200);
		usleep(50000);
	}
	print_message("the old key's cursor refused %lld ms after the rotation (overlap 4 s)\n",
	    (long long)refused_after_ms);
	assert_problem(r, 422, "validation_failed");
	assert_true(refused_after_ms >= 3000);
	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "%s&cursor=%s", path, new_cursor),
	    NULL);
	assert_status(r, 200);
	fx->server = prev;
	assert_int_equal(fixture_server_stop(fx, b), 0);

	/* rotated twice: the first key is gone at once, the second in its overlap */
	p = fx_gpupoold(fx, NULL, "admin", "rotate-cursor-key", NULL);
	assert_int_equal(p->status, 0);
	b = fixture_server_start(fx, env);
	assert_non_null(b);
	fx->server = b;
	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "%s&cursor=%s", path, old_cursor),
	    NULL);
	assert_problem(r, 422, "validation_failed");
	fx->server = prev;
	assert_int_equal(fixture_server_stop(fx, b), 0);
}

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

/* One versioned mutation: where its ETag and its state are read. */
struct versioned {
	const char *method, *path, *body;
	const char *etag_path;  /* GET: the ETag If-Match names */
	const char *state_path; /* GET: unchanged after a 412 */
	long ok;                /* the status when the condition holds */
};

/*
 * RFC 9110 13.1.1: If-Match "*" or a list of entity tags; the change
 * applies when a listed strong tag equals the current one. Every
 * versioned mutation goes through the one reader (api_if_match): a list
 * of stale, weak and foreign tags is 412 with nothing changed; the same
 * list with the current tag added applies.
 */
static void
test_if_match_list_rfc9110_13_1_1(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *uuid;

	fixture_create_user(fx, "im-user", "none");
	fx_fleet(fx, "imc", "H100-80GB", 1, 1, false);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/clusters",
			  "{\"name\":\"imc-empty\"}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"imp\",\"display_name\":\"a\"}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/imp/members/im-user",
			  "{\"role\":\"owner\"}"),
	    201);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes/imc-n0/gpus", NULL);
	assert_status(r, 200);
	uuid = fx_str(fx, "%s", fx_json_str(r->json, "items[0].uuid"));
	{
		const struct versioned ops[] = {
			{ "PATCH", "/v1/users/im-user", "{\"role\":\"billing\"}",
			    "/v1/users/im-user", "/v1/users/im-user", 200 },
			{ "PATCH", "/v1/projects/imp", "{\"display_name\":\"b\"}",
			    "/v1/projects/imp", "/v1/projects/imp", 200 },
			/* a membership belongs to its project: If-Match names the project's tag */
			{ "PUT", "/v1/projects/imp/members/admin", "{\"role\":\"viewer\"}",
			    "/v1/projects/imp", "/v1/projects/imp/members", 201 },
			{ "DELETE", "/v1/projects/imp/members/admin", NULL, "/v1/projects/imp",
			    "/v1/projects/imp/members", 204 },
			/* no quota yet: shown as items [] with ETag "0", which If-Match may name */
			{ "PUT", "/v1/projects/imp/quota", "{\"items\":[]}",
			    "/v1/projects/imp/quota", "/v1/projects/imp/quota", 201 },
			{ "PUT", "/v1/projects/imp/quota",
			    "{\"items\":[{\"model\":\"H100-80GB\",\"profile\":\"full\",\"count\":1}]}",
			    "/v1/projects/imp/quota", "/v1/projects/imp/quota", 200 },
			{ "DELETE", "/v1/projects/imp/quota", NULL, "/v1/projects/imp/quota",
			    "/v1/projects/imp/quota", 204 },
			{ "PATCH", "/v1/clusters/imc", "{\"description\":\"d\"}",
			    "/v1/clusters/imc", "/v1/clusters/imc", 200 },
			{ "PATCH", "/v1/nodes/imc-n0", "{\"hostname\":\"h2.example\"}",
			    "/v1/nodes/imc-n0", "/v1/nodes/imc-n0", 200 },
			{ "POST", "/v1/nodes/imc-n0/cordon", NULL, "/v1/nodes/imc-n0",
			    "/v1/nodes/imc-n0", 200 },
			{ "POST", "/v1/nodes/imc-n0/drain", NULL, "/v1/nodes/imc-n0",
			    "/v1/nodes/imc-n0", 200 },
			{ "POST", "/v1/nodes/imc-n0/uncordon", NULL, "/v1/nodes/imc-n0",
			    "/v1/nodes/imc-n0", 200 },
			{ "PATCH", fx_str(fx, "/v1/gpus/%s", uuid), "{\"health\":\"degraded\"}",
			    fx_str(fx, "/v1/gpus/%s", uuid), fx_str(fx, "/v1/gpus/%s", uuid), 200 },
			{ "DELETE", "/v1/clusters/imc-empty", NULL, "/v1/clusters/imc-empty",
			    "/v1/clusters/imc-empty", 204 },
		};

		for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
			const struct versioned *o = &ops[i];
			const char *etag, *before;

			r = fx_request(fx, fx->admin_token, "GET", o->etag_path, NULL);
			assert_status(r, 200);
			assert_true(r->etag[0] == '"');
			etag = fx_str(fx, "%s", r->etag);
			r = fx_request(fx, fx->admin_token, "GET", o->state_path, NULL);
			before = fx_str(fx, "%s", r->body);
			/* stale, weak and foreign tags (a comma inside one): 412, nothing changes */
			r = fx_request_h(fx, fx->admin_token, o->method, o->path,
			    ((const char *[]){
				fx_str(fx, "If-Match: \"999\", W/%s, \"x,%s\"", etag, etag + 1),
				NULL }),
			    o->body ? "%s" : NULL, o->body);
			if (r->status != 412)
				fail_msg("%s %s: %ld, not 412", o->method, o->path, r->status);
			assert_problem(r, 412, "precondition_failed");
			r = fx_request(fx, fx->admin_token, "GET", o->state_path, NULL);
			if (strcmp(r->body, before) != 0)
				fail_msg("%s %s changed state after a 412", o->method, o->path);
			/* the same list with the current tag: it applies */
			r = fx_request_h(fx, fx->admin_token, o->method, o->path,
			    ((const char *[]){
				fx_str(fx, "If-Match: \"999\", W/%s, , %s", etag, etag), NULL }),
			    o->body ? "%s" : NULL, o->body);
			if (r->status != o->ok)
				fail_msg("%s %s with If-Match naming %s: %ld, not %ld (%s)",
				    o->method, o->path, etag, r->status, o->ok, r->body);
		}
	}
	assert_string_equal(fx_sql_text(fx, "SELECT role FROM users WHERE username = 'im-user'"),
	    "billing");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM clusters WHERE name = 'imc-empty'"),
	    0);
	/* "*" matches any current representation; it stands alone */
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/imp",
	    ((const char *[]){ "If-Match: *", NULL }), "{\"display_name\":\"c\"}");
	assert_status(r, 200);
	{
		static const char *const junk[] = { "If-Match: *, \"1\"", "If-Match: \"1\" \"2\"",
			"If-Match: 2", "If-Match: \"2", "If-Match: W/2", "If-Match: \"a b\"" };

		for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
			r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/imp",
			    ((const char *[]){ junk[i], NULL }), "{\"display_name\":\"junk\"}");
			assert_problem(r, 412, "precondition_failed");
		}
	}
	/* tags compare octet by octet: "03" is not "3" */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/imp", NULL);
	assert_string_equal(r->etag, "\"3\"");
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/imp",
	    ((const char *[]){ "If-Match: \"03\"", NULL }), "{\"display_name\":\"junk\"}");
	assert_problem(r, 412, "precondition_failed");
	/* RFC 9110 5.3: field lines of one name form one list */
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/imp",
	    ((const char *[]){ "If-Match: \"1\"", "If-Match: \"2\", \"3\"", NULL }),
	    "{\"display_name\":\"d\"}");
	assert_status(r, 200);
	assert_string_equal(r->etag, "\"4\"");
	assert_string_equal(fx_sql_text(fx, "SELECT display_name FROM projects WHERE name = 'imp'"),
	    "d");
}

/*
 * Query parameters: each operation takes the ones api/openapi.yaml lists
 * (tests/contract checks the route table against it); an unknown one, or
 * one given twice, is 422 naming it, before the handler runs.
 */
static void
test_query_unknown_or_repeated_422(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *before;

	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?foo=1", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "detail", "unknown query parameter \"foo\"");
	assert_json_str(r->json, "errors[0].field", "foo");
	assert_json_str(r->json, "errors[0].message",
	    "is not a query parameter of GET /v1/projects (it takes limit, cursor)");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?limit=1&limit=2", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "detail", "query parameter \"limit\" given twice");
	assert_json_str(r->json, "errors[0].field", "limit");
	assert_int_equal(fx_json_len(r->json, "errors"), 1);
	/* a parameter the route takes, present without a value: not the same as absent */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?limit", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "detail", "query parameter \"limit\" has no value");
	assert_json_str(r->json, "errors[0].field", "limit");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?cursor=", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "cursor");
	/* a route without query parameters, a name without a value */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/me?verbose", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].message",
	    "is not a query parameter of GET /v1/me (it takes none)");
	/* every problem at once, each once; names shown printable */
	r = fx_request(fx, fx->admin_token, "GET",
	    "/v1/nodes?colour=red&limit=1&status=ready&colour=blue&limit=2&limit=3&%01x=1", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "detail",
	    "unknown query parameter \"colour\", and 2 more problems with the query");
	assert_int_equal(fx_json_len(r->json, "errors"), 3);
	assert_json_str(r->json, "errors[0].field", "colour");
	assert_json_str(r->json, "errors[1].field", "limit");
	assert_json_str(r->json, "errors[2].field", "%01x");
	/* what the operation takes still works; HEAD is checked like GET */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?limit=1&status=ready", NULL);
	assert_status(r, 200);
	assert_int_equal(send_raw(fx, "HEAD", "/v1/projects?foo=1", fx->admin_token).status, 422);
	/* authentication first: no token is 401, not 422 */
	assert_problem(fx_request(fx, NULL, "GET", "/v1/projects?foo=1", NULL), 401,
	    "unauthorized");
	/* a mutation with a stray parameter changes nothing */
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"qp\",\"display_name\":\"a\"}"),
	    201);
	before =
	    fx_sql_text(fx, "SELECT display_name || generation FROM projects WHERE name = 'qp'");
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/qp?dry_run=true",
	    "{\"display_name\":\"b\"}");
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "dry_run");
	assert_string_equal(fx_sql_text(fx,
				"SELECT display_name || generation FROM projects WHERE name = 'qp'"),
	    before);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects?name=qp2",
	    "{\"name\":\"qp3\",\"display_name\":\"a\"}");
	assert_problem(r, 422, "validation_failed");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name LIKE 'qp_'"),
	    0);
}

/* A raw request with a body of the given Content-Type. */
static struct raw_response
send_typed(struct fixture *fx, const char *method, const char *path, const char *type,
    const char *body)
{
	const char *h[3] = { fx_str(fx, "Authorization: Bearer %s", fx->admin_token),
		fx_str(fx, "Content-Type: %s", type), NULL };
	struct raw_response r;
	size_t len;
	char *req = raw_build(fx->arena, method, path, h, body, strlen(body), &len);

	memset(&r, 0, sizeof(r));
	assert_int_equal(raw_exchange(fx->arena, fx->server->port, req, len, 5000, &r), 0);
	return r;
}

#define MERGE_PATCH "Content-Type: application/merge-patch+json"

/*
 * RFC 7396: every PATCH also takes application/merge-patch+json, with the
 * fields of the application/json body; null removes a member, which
 * clears a nullable one and is 422 for one that always has a value; an
 * object member (node labels) is merged, not replaced.
 */
static void
test_merge_patch_rfc7396(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *uuid;

	fixture_create_user(fx, "mp-user", "none");
	fx_fleet(fx, "mpc", "H100-80GB", 1, 1, false);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"mpp\",\"display_name\":\"a\",\"namespaces\":[\"mpp-a\"]}"),
	    201);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes/mpc-n0/gpus", NULL);
	uuid = fx_str(fx, "%s", fx_json_str(r->json, "items[0].uuid"));

	/* the same fields as application/json, on every PATCH; parameters allowed */
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/mpp",
	    ((const char *[]){ MERGE_PATCH, NULL }), "{\"display_name\":\"b\"}");
	assert_status(r, 200);
	assert_json_str(r->json, "display_name", "b");
	assert_json_str(r->json, "namespaces[0]", "mpp-a");
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/users/mp-user",
	    ((const char *[]){ "Content-Type: Application/Merge-Patch+JSON; charset=utf-8", NULL }),
	    "{\"role\":\"operator\"}");
	assert_status(r, 200);
	assert_json_str(r->json, "role", "operator");
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/clusters/mpc",
	    ((const char *[]){ MERGE_PATCH, NULL }), "{\"description\":\"merge\"}");
	assert_status(r, 200);
	assert_json_str(r->json, "description", "merge");
	assert_string_equal(fx_sql_text(fx, "SELECT description FROM clusters WHERE name = 'mpc'"),
	    "merge");
	/* validation is the same: unknown fields, bad values */
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/mpp",
	    ((const char *[]){ MERGE_PATCH, NULL }), "{\"colour\":\"red\"}");
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "colour");

	/* null for a member that always has a value: 422 naming each, nothing changes */
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/mpp",
	    ((const char *[]){ MERGE_PATCH, NULL }), "{\"display_name\":null,\"namespaces\":null}");
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "display_name");
	assert_json_str(r->json, "errors[1].field", "namespaces");
	assert_string_equal(fx_sql_text(fx,
				"SELECT display_name || ':' || generation FROM projects WHERE name = 'mpp'"),
	    "b:2");
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/clusters/mpc",
	    ((const char *[]){ MERGE_PATCH, NULL }), "{\"region\":null}");
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "region");
	/* application/json keeps its rule: null is no change */
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/mpp", "{\"display_name\":null}");
	assert_status(r, 200);
	assert_json_str(r->json, "display_name", "b");

	/* a nullable member: null clears it */
	r = fx_request_h(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", uuid),
	    ((const char *[]){ MERGE_PATCH, NULL }),
	    "{\"health\":\"degraded\",\"health_reason\":\"fan\"}");
	assert_status(r, 200);
	assert_json_str(r->json, "health_reason", "fan");
	r = fx_request_h(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", uuid),
	    ((const char *[]){ MERGE_PATCH, NULL }), "{\"health_reason\":null}");
	assert_status(r, 200);
	assert_json_null(r->json, "health_reason");
	assert_json_str(r->json, "health", "degraded");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus WHERE uuid = $1 AND "
			     "health_reason IS NULL AND health = 'degraded'",
			     uuid),
	    1);

	/* an object member is merged: null removes a label, others are kept */
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/nodes/mpc-n0",
	    "{\"labels\":{\"zone\":\"a\",\"tier\":\"gold\",\"rack\":\"r1\"}}");
	assert_status(r, 200);
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/nodes/mpc-n0",
	    ((const char *[]){ MERGE_PATCH, NULL }),
	    "{\"labels\":{\"tier\":null,\"zone\":\"b\",\"gpu\":\"h100\",\"nothere\":null}}");
	assert_status(r, 200);
	assert_int_equal(json_object_object_length(fx_json(r->json, "labels")), 3);
	assert_json_str(r->json, "labels.zone", "b");
	assert_json_str(r->json, "labels.rack", "r1");
	assert_json_str(r->json, "labels.gpu", "h100");
	assert_json_absent(r->json, "labels.tier");
	assert_string_equal(fx_sql_text(fx, "SELECT labels::text FROM nodes WHERE name = 'mpc-n0'"),
	    "{\"gpu\": \"h100\", \"rack\": \"r1\", \"zone\": \"b\"}");
	/* bad label entries, and null for the labels themselves */
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/nodes/mpc-n0",
	    ((const char *[]){ MERGE_PATCH, NULL }), "{\"labels\":{\"-bad\":\"1\",\"ok\":7}}");
	assert_problem(r, 422, "validation_failed");
	assert_int_equal(fx_json_len(r->json, "errors"), 2);
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/nodes/mpc-n0",
	    ((const char *[]){ MERGE_PATCH, NULL }), "{\"labels\":null}");
	assert_problem(r, 422, "validation_failed");
	assert_json_str(r->json, "errors[0].field", "labels");
	/* application/json still replaces them all */
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/nodes/mpc-n0",
	    "{\"labels\":{\"only\":\"this\"}}");
	assert_status(r, 200);
	assert_int_equal(json_object_object_length(fx_json(r->json, "labels")), 1);
	assert_json_str(r->json, "labels.only", "this");
}

/*
 * RFC 5789 3.1: a PATCH with a body of another type is 415 with
 * Accept-Patch; OPTIONS on a resource that takes PATCH names the types
 * too. POST and PUT take application/json only (415, no Accept-Patch).
 */
static void
test_patch_415_accept_patch_rfc5789(void **state)
{
	struct fixture *fx = *state;
	struct raw_response r;

	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"ap\",\"display_name\":\"a\"}"),
	    201);
	r = send_typed(fx, "PATCH", "/v1/projects/ap", "application/json-patch+json",
	    "[{\"op\":\"replace\",\"path\":\"/display_name\",\"value\":\"b\"}]");
	assert_int_equal(r.status, 415);
	assert_string_equal(raw_header(fx->arena, &r, "Accept-Patch"),
	    "application/json, application/merge-patch+json");
	assert_string_equal(raw_header(fx->arena, &r, "Content-Type"), "application/problem+json");
	r = send_typed(fx, "PATCH", "/v1/projects/ap", "text/plain", "{\"display_name\":\"b\"}");
	assert_int_equal(r.status, 415);
	assert_non_null(raw_header(fx->arena, &r, "Accept-Patch"));
	/* "application/merge-patch+jsonx" is another type */
	r = send_typed(fx, "PATCH", "/v1/projects/ap", "application/merge-patch+jsonx",
	    "{\"display_name\":\"b\"}");
	assert_int_equal(r.status, 415);
	assert_string_equal(fx_sql_text(fx, "SELECT display_name FROM projects WHERE name = 'ap'"),
	    "a");
	/* a merge patch is for PATCH only */
	r = send_typed(fx, "POST", "/v1/projects", "application/merge-patch+json",
	    "{\"name\":\"ap2\",\"display_name\":\"a\"}");
	assert_int_equal(r.status, 415);
	assert_null(raw_header(fx->arena, &r, "Accept-Patch"));
	r = send_typed(fx, "PUT", "/v1/projects/ap/quota", "application/merge-patch+json",
	    "{\"items\":[]}");
	assert_int_equal(r.status, 415);
	assert_null(raw_header(fx->arena, &r, "Accept-Patch"));
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name = 'ap2'"), 0);
	/* OPTIONS: Accept-Patch where PATCH is allowed */
	r = send_raw(fx, "OPTIONS", "/v1/projects/ap", NULL);
	assert_int_equal(r.status, 204);
	assert_string_equal(raw_header(fx->arena, &r, "Accept-Patch"),
	    "application/json, application/merge-patch+json");
	r = send_raw(fx, "OPTIONS", "/v1/projects", NULL);
	assert_null(raw_header(fx->arena, &r, "Accept-Patch"));
}

/* A pool request's ETag for If-Match (its generation), and its state in SQL. */
static const char *
request_etag(struct fixture *fx, int64_t id)
{
	struct gp_client_response *r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/pool-requests/%lld", (long long)id), NULL);
	assert_status(r, 200);
	return fx_str(fx, "%s", r->etag);
}

static const char *
request_state(struct fixture *fx, int64_t id)
{
	return fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1",
	    fx_str(fx, "%lld", (long long)id));
}

/* Approve, reject and cancel change a versioned pool request: If-Match
 * (RFC 9110 13.1.1) names its ETag, lists may hold it among others, "*"
 * matches; a stale, weak or foreign tag is 412 and the request stays
 * pending, with no allocation made. */
static void
test_if_match_pool_request_actions_rfc9110_13_1_1(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t id[3];
	const char *tag;

	fx_fleet(fx, "prq", "H100-80GB", 1, 2, false);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"prp\",\"display_name\":\"p\"}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "PUT", "/v1/projects/prp/members/admin",
			  "{\"role\":\"owner\"}"),
	    201);
	for (int i = 0; i < 3; i++) {
		r = fx_request(fx, fx->admin_token, "POST", "/v1/projects/prp/pool-requests",
		    "{\"action\":\"create\",\"pool\":\"prq%d\",\"items\":[\"H100-80GB/full=1\"]}",
		    i);
		assert_status(r, 201);
		id[i] = fx_json_int(r->json, "id");
	}

	/* approve: stale and weak tags refused, nothing placed; the list with the tag wins */
	tag = request_etag(fx, id[0]);
	r = fx_request_h(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id[0]),
	    ((const char *[]){ fx_str(fx, "If-Match: \"999\", W/%s", tag), NULL }), "{}");
	assert_problem(r, 412, "precondition_failed");
	assert_string_equal(request_state(fx, id[0]), "pending");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations al JOIN pools p ON p.id = al.pool_id "
			     "WHERE p.name = 'prq0'"),
	    0);
	r = fx_request_h(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id[0]),
	    ((const char *[]){ fx_str(fx, "If-Match: \"999\", %s", tag), NULL }), "{}");
	assert_status(r, 200);
	/* the old tag no longer names it */
	r = fx_request_h(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/reject", (long long)id[0]),
	    ((const char *[]){ fx_str(fx, "If-Match: %s", tag), NULL }), "{\"reason\":\"x\"}");
	assert_problem(r, 412, "precondition_failed");

	/* reject, under an Idempotency-Key: the key is bound to the If-Match it
	 * came with, so the 412 kept for it never answers the retry that names
	 * the current tag (422: another request; a new key runs it) */
	tag = request_etag(fx, id[1]);
	r = fx_request_h(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/reject", (long long)id[1]),
	    ((const char *[]){ "If-Match: \"1000\"", "Idempotency-Key: rej-1", NULL }),
	    "{\"reason\":\"no\"}");
	assert_problem(r, 412, "precondition_failed");
	assert_string_equal(request_state(fx, id[1]), "pending");
	r = fx_request_h(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/reject", (long long)id[1]),
	    ((const char *[]){ fx_str(fx, "If-Match: %s", tag), "Idempotency-Key: rej-1", NULL }),
	    "{\"reason\":\"no\"}");
	assert_problem(r, 422, "idempotency_mismatch");
	assert_string_equal(request_state(fx, id[1]), "pending");
	r = fx_request_h(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/reject", (long long)id[1]),
	    ((const char *[]){ fx_str(fx, "If-Match: %s", tag), "Idempotency-Key: rej-2", NULL }),
	    "{\"reason\":\"no\"}");
	assert_status(r, 200);
	assert_string_equal(request_state(fx, id[1]), "rejected");

	/* cancel: a weak tag never matches, "*" always does */
	tag = request_etag(fx, id[2]);
	r = fx_request_h(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/cancel", (long long)id[2]),
	    ((const char *[]){ fx_str(fx, "If-Match: W/%s", tag), NULL }), NULL);
	assert_problem(r, 412, "precondition_failed");
	assert_string_equal(request_state(fx, id[2]), "pending");
	r = fx_request_h(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/cancel", (long long)id[2]),
	    ((const char *[]){ "If-Match: *", NULL }), NULL);
	assert_status(r, 200);
	assert_string_equal(request_state(fx, id[2]), "cancelled");
	fx_assert_pool_invariants(fx);
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
		cmocka_unit_test(test_cursor_key_rotation),
		cmocka_unit_test(test_did_you_mean),
		cmocka_unit_test(test_if_match_list_rfc9110_13_1_1),
		cmocka_unit_test(test_query_unknown_or_repeated_422),
		cmocka_unit_test(test_merge_patch_rfc7396),
		cmocka_unit_test(test_patch_415_accept_patch_rfc5789),
		cmocka_unit_test(test_if_match_pool_request_actions_rfc9110_13_1_1),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, fixture_group_setup, fixture_group_teardown));
}
