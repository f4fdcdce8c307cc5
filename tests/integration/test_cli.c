/*
 * test_cli.c - the gpupool CLI end to end: the real binary against a
 * real gpupoold and PostgreSQL. Checks exit codes, what the CLI prints
 * (tables and -o json), the config file it writes, and that what it did
 * is visible through the API and in the database.
 */
#include "fixture.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/json.h"
#include "core/timeutil.h"

/* Log the CLI in as the admin; the config file then holds server and token. */
static void
cli_login_admin(struct fixture *fx)
{
	struct fx_proc *p;

	p = fx_cli(fx, NULL, FIXTURE_ADMIN_PASSWORD "\n", "--server", fx->server->base_url, "login",
	    "--username", FIXTURE_ADMIN_USER, NULL);
	if (p->status != 0)
		print_error("stdout: %s\nstderr: %s\n", p->out, p->err);
	assert_int_equal(p->status, 0);
}

/* stdout of a -o json run, parsed; fails unless it is one JSON value. */
static struct json_object *
cli_json(struct fixture *fx, const struct fx_proc *p)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;
	size_t len = strlen(p->out);

	assert_non_null(tok);
	o = json_tokener_parse_ex(tok, p->out, (int)len);
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success)
		print_error("not JSON: %s\n", p->out);
	assert_non_null(o);
	json_tokener_free(tok);
	return json_own(fx->arena, o);
}

static void
assert_cli_ok(const struct fx_proc *p)
{
	if (p->status != 0)
		print_error("stdout: %s\nstderr: %s\n", p->out, p->err);
	assert_int_equal(p->status, 0);
}

/* True when the list at items holds an object whose key equals value. */
static bool
list_has(struct json_object *items, const char *key, const char *value)
{
	size_t n = json_object_array_length(items);

	for (size_t i = 0; i < n; i++) {
		struct json_object *v = fx_json(json_object_array_get_idx(items, i), key);

		if (v != NULL && json_object_is_type(v, json_type_string) &&
		    strcmp(json_object_get_string(v), value) == 0)
			return true;
	}
	return false;
}

static void
test_cli_usage(void **state)
{
	struct fixture *fx = *state;
	struct fx_proc *p;

	p = fx_cli(fx, NULL, NULL, "--help", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "projects"));
	assert_non_null(strstr(p->out, "tokens"));

	p = fx_cli(fx, NULL, NULL, "projects", "create", "--help", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "--display-name"));

	/* usage errors exit 2 before any server is involved */
	p = fx_cli(fx, NULL, NULL, "frobnicate", NULL);
	assert_int_equal(p->status, 2);
	assert_non_null(strstr(p->err, "unknown command"));
	p = fx_cli(fx, NULL, NULL, "projects", "create", "x", NULL);
	assert_int_equal(p->status, 2);
	assert_non_null(strstr(p->err, "--display-name"));
	p = fx_cli(fx, NULL, NULL, "members", "add", "x", "y", "--role", "boss", NULL);
	assert_int_equal(p->status, 2);
	p = fx_cli(fx, NULL, NULL, "-o", "xml", "me", NULL);
	assert_int_equal(p->status, 2);
	p = fx_cli(fx, NULL, NULL, "tokens", "create", "t", "--expires-at", "tomorrow", NULL);
	assert_int_equal(p->status, 2);

	/* no server configured anywhere */
	p = fx_cli(fx, (const char *const[]){ "HOME=/nonexistent", NULL }, NULL, "me", NULL);
	assert_int_equal(p->status, 1);
	assert_non_null(strstr(p->err, "no server configured"));
}

static void
test_cli_login_and_me(void **state)
{
	struct fixture *fx = *state;
	const char *cfg_path = fx_str(fx, "%s/.config/gpupool/config", fx_cli_home(fx));
	struct json_object *me;
	struct fx_proc *p;
	struct stat st;
	char line[1024];
	/* as long as a line: a shorter buffer is a truncation gcc -O2 refuses to compile */
	char token[sizeof(line)] = "", server[sizeof(line)] = "";
	FILE *f;

	/* a wrong password: exit 3 (refused) and the server's words on stderr */
	unlink(cfg_path);
	p = fx_cli(fx, NULL, "not-the-password\n", "--server", fx->server->base_url, "login",
	    "--username", FIXTURE_ADMIN_USER, NULL);
	assert_int_equal(p->status, 3);
	assert_non_null(strstr(p->err, "HTTP 401"));
	assert_int_not_equal(stat(cfg_path, &st), 0);

	cli_login_admin(fx);
	assert_int_equal(stat(cfg_path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	f = fopen(cfg_path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		line[strcspn(line, "\n")] = '\0';
		if (strncmp(line, "token = ", 8) == 0)
			snprintf(token, sizeof(token), "%s", line + 8);
		if (strncmp(line, "server = ", 9) == 0)
			snprintf(server, sizeof(server), "%s", line + 9);
	}
	fclose(f);
	assert_string_equal(server, fx->server->base_url);
	assert_true(strlen(token) > 0);
	/* the stored token is a working session of the admin */
	assert_json_str(fx_request(fx, token, "GET", "/v1/me", NULL)->json, "username",
	    FIXTURE_ADMIN_USER);

	p = fx_cli(fx, NULL, NULL, "me", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "USERNAME"));
	assert_non_null(strstr(p->out, FIXTURE_ADMIN_USER));

	p = fx_cli(fx, NULL, NULL, "-o", "json", "me", NULL);
	assert_cli_ok(p);
	me = cli_json(fx, p);
	assert_json_str(me, "username", FIXTURE_ADMIN_USER);
	assert_json_str(me, "role", "admin");

	/* a rewrite keeps comments and keys the CLI does not know */
	f = fopen(cfg_path, "w");
	assert_non_null(f);
	fprintf(f, "# written by hand\nserver = http://127.0.0.1:1\ncolor = never\n");
	fclose(f);
	cli_login_admin(fx);
	f = fopen(cfg_path, "r");
	assert_non_null(f);
	assert_non_null(fgets(line, sizeof(line), f));
	assert_string_equal(line, "# written by hand\n");
	assert_non_null(fgets(line, sizeof(line), f));
	assert_string_equal(line, fx_str(fx, "server = %s\n", fx->server->base_url));
	assert_non_null(fgets(line, sizeof(line), f));
	assert_string_equal(line, "color = never\n");
	fclose(f);

	/* $XDG_CONFIG_HOME wins over $HOME */
	p = fx_cli(fx,
	    (const char *const[]){ fx_str(fx, "XDG_CONFIG_HOME=%s/xdg", fx->tmpdir), NULL },
	    FIXTURE_ADMIN_PASSWORD "\n", "--server", fx->server->base_url, "login", "--username",
	    FIXTURE_ADMIN_USER, NULL);
	assert_cli_ok(p);
	assert_int_equal(stat(fx_str(fx, "%s/xdg/gpupool/config", fx->tmpdir), &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);

	/* the environment overrides the config file, --server overrides both */
	p = fx_cli(fx, (const char *const[]){ "GPUPOOL_SERVER=http://127.0.0.1:1", NULL }, NULL,
	    "me", NULL);
	assert_int_equal(p->status, 6);
	assert_non_null(strstr(p->err, "127.0.0.1:1"));
	p = fx_cli(fx, (const char *const[]){ "GPUPOOL_SERVER=http://127.0.0.1:1", NULL }, NULL,
	    "--server", fx->server->base_url, "me", NULL);
	assert_cli_ok(p);
	p = fx_cli(fx, (const char *const[]){ "GPUPOOL_TOKEN=gpp_not_a_real_token", NULL }, NULL,
	    "me", NULL);
	assert_int_equal(p->status, 3);
	assert_non_null(strstr(p->err, "HTTP 401"));
}

static void
test_cli_projects(void **state)
{
	struct fixture *fx = *state;
	const char *name = fx_unique(fx, "cli-proj");
	const char *other = fx_unique(fx, "cli-proj");
	struct gp_client_response *r;
	struct json_object *doc;
	struct fx_proc *p;
	const char *detail;

	cli_login_admin(fx);
	p = fx_cli(fx, NULL, NULL, "projects", "create", name, "--display-name", "Team CLI",
	    "--namespace", "ns-cli-a", "--namespace", "ns-cli-b", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "DISPLAY NAME"));
	assert_non_null(strstr(p->out, name));
	assert_non_null(strstr(p->out, "ns-cli-a,ns-cli-b"));

	/* what the CLI created is what the API shows, and it is in the database once */
	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "/v1/projects/%s", name), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "display_name", "Team CLI");
	assert_int_equal(fx_json_len(r->json, "namespaces"), 2);
	assert_json_str(r->json, "namespaces[0]", "ns-cli-a");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name = $1", name),
	    1);

	p = fx_cli(fx, NULL, NULL, "-o", "json", "projects", "get", name, NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_json_str(doc, "name", name);
	assert_json_str(doc, "display_name", "Team CLI");
	assert_int_equal(fx_json_int(doc, "generation"), fx_json_int(r->json, "generation"));

	p = fx_cli(fx, NULL, NULL, "projects", "create", other, "--display-name", "Other", NULL);
	assert_cli_ok(p);

	/* table listing and JSON listing (all pages merged) */
	p = fx_cli(fx, NULL, NULL, "projects", "list", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "NAME"));
	assert_non_null(strstr(p->out, name));
	assert_non_null(strstr(p->out, other));
	p = fx_cli(fx, NULL, NULL, "projects", "list", "-o", "json", NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_true(list_has(fx_json(doc, "items"), "name", name));
	assert_true(list_has(fx_json(doc, "items"), "name", other));
	assert_json_null(doc, "next_cursor");

	/* one page on request, with the server's cursor to go on from */
	p = fx_cli(fx, NULL, NULL, "projects", "list", "--limit", "1", "-o", "json", NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_int_equal(fx_json_len(doc, "items"), 1);
	assert_non_null(fx_json(doc, "next_cursor"));
	p = fx_cli(fx, NULL, NULL, "projects", "list", "--limit", "1", "--cursor",
	    fx_json_str(doc, "next_cursor"), "-o", "json", NULL);
	assert_cli_ok(p);
	assert_int_equal(fx_json_len(cli_json(fx, p), "items"), 1);

	/* a conflict: exit 5, the server's detail on stderr, nothing on stdout */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"%s\",\"display_name\":\"Again\",\"namespaces\":[]}", name);
	assert_int_equal(r->status, 409);
	detail = fx_json_str(r->json, "detail");
	p = fx_cli(fx, NULL, NULL, "projects", "create", name, "--display-name", "Again", NULL);
	assert_int_equal(p->status, 5);
	assert_string_equal(p->out, "");
	assert_non_null(strstr(p->err, detail));
	assert_non_null(strstr(p->err, "HTTP 409"));
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name = $1", name),
	    1);

	/* validation errors name the failing field */
	p = fx_cli(fx, NULL, NULL, "projects", "create", "Not A Valid Name!", "--display-name", "x",
	    NULL);
	assert_int_equal(p->status, 3);
	assert_non_null(strstr(p->err, "HTTP 422"));
	assert_non_null(strstr(p->err, "name"));

	p = fx_cli(fx, NULL, NULL, "projects", "get", "no-such-project", NULL);
	assert_int_equal(p->status, 4);
	assert_non_null(strstr(p->err, "HTTP 404"));
}

static void
test_cli_members(void **state)
{
	struct fixture *fx = *state;
	const char *name = fx_unique(fx, "cli-team");
	const char *user = fx_unique(fx, "cli-bob");
	const char *bob;
	struct gp_client_response *r;
	struct json_object *doc;
	struct fx_proc *p;

	cli_login_admin(fx);
	bob = fixture_create_user(fx, user, "none");
	p = fx_cli(fx, NULL, NULL, "projects", "create", name, "--display-name", "Team", NULL);
	assert_cli_ok(p);

	p = fx_cli(fx, NULL, NULL, "members", "add", name, user, "--role", "member", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, user));
	assert_non_null(strstr(p->out, "member"));

	/* bob now sees the project, with his role */
	r = fx_request(fx, bob, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "projects[0].name", name);
	assert_json_str(r->json, "projects[0].role", "member");

	/* changing the role is the same command */
	p = fx_cli(fx, NULL, NULL, "-o", "json", "members", "add", name, user, "--role", "viewer",
	    NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_json_str(doc, "username", user);
	assert_json_str(doc, "role", "viewer");

	p = fx_cli(fx, NULL, NULL, "-o", "json", "members", "list", name, NULL);
	assert_cli_ok(p);
	assert_true(list_has(fx_json(cli_json(fx, p), "items"), "username", user));

	p = fx_cli(fx, NULL, NULL, "members", "remove", name, user, NULL);
	assert_cli_ok(p);
	r = fx_request(fx, bob, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "projects"), 0);
	p = fx_cli(fx, NULL, NULL, "-o", "json", "members", "list", name, NULL);
	assert_cli_ok(p);
	assert_false(list_has(fx_json(cli_json(fx, p), "items"), "username", user));

	/* a project bob cannot manage: the server refuses, the CLI says why */
	p = fx_cli(fx, (const char *const[]){ fx_str(fx, "GPUPOOL_TOKEN=%s", bob), NULL }, NULL,
	    "members", "add", name, user, "--role", "owner", NULL);
	assert_int_equal(p->status, 4);
	assert_true(strstr(p->err, "HTTP 404") != NULL || strstr(p->err, "HTTP 403") != NULL);
}

static void
test_cli_tokens(void **state)
{
	struct fixture *fx = *state;
	const char *tname = fx_unique(fx, "ci-token");
	const char *token, *id;
	struct json_object *doc;
	struct fx_proc *p;
	char expires[40];
	int64_t exp_us, sent_us;

	cli_login_admin(fx);
	time_format_rfc3339(time_now_us() + (int64_t)30 * 86400 * 1000000, expires,
	    sizeof(expires));
	p = fx_cli(fx, NULL, NULL, "-o", "json", "tokens", "create", tname, "--expires-at", expires,
	    NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_json_str(doc, "name", tname);
	assert_int_equal(time_parse_rfc3339(fx_json_str(doc, "expires_at"), &exp_us), 0);
	assert_int_equal(time_parse_rfc3339(expires, &sent_us), 0);
	assert_int_equal(exp_us / 1000000, sent_us / 1000000);
	token = fx_json_str(doc, "token");
	assert_true(strncmp(token, "gpp_", 4) == 0);
	if (json_object_is_type(fx_json(doc, "id"), json_type_int))
		id = fx_str(fx, "%lld", (long long)fx_json_int(doc, "id"));
	else
		id = fx_json_str(doc, "id");

	/* the new token works on its own, through the API and the CLI */
	assert_json_str(fx_request(fx, token, "GET", "/v1/me", NULL)->json, "username",
	    FIXTURE_ADMIN_USER);
	p = fx_cli(fx, (const char *const[]){ fx_str(fx, "GPUPOOL_TOKEN=%s", token), NULL }, NULL,
	    "me", NULL);
	assert_cli_ok(p);

	p = fx_cli(fx, NULL, NULL, "tokens", "list", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "PREFIX"));
	assert_non_null(strstr(p->out, tname));
	assert_null(strstr(p->out, token)); /* the secret is never listed */
	p = fx_cli(fx, NULL, NULL, "-o", "json", "tokens", "list", NULL);
	assert_cli_ok(p);
	assert_true(list_has(fx_json(cli_json(fx, p), "items"), "name", tname));

	p = fx_cli(fx, NULL, NULL, "tokens", "revoke", id, NULL);
	assert_cli_ok(p);
	assert_int_equal(fx_request(fx, token, "GET", "/v1/me", NULL)->status, 401);
	p = fx_cli(fx, (const char *const[]){ fx_str(fx, "GPUPOOL_TOKEN=%s", token), NULL }, NULL,
	    "me", NULL);
	assert_int_equal(p->status, 3);
	assert_non_null(strstr(p->err, "HTTP 401"));

	/* a field error from the server is shown with its field path */
	p = fx_cli(fx, NULL, NULL, "tokens", "create", fx_unique(fx, "old"), "--expires-at",
	    "2001-01-01T00:00:00Z", NULL);
	assert_int_equal(p->status, 3);
	assert_non_null(strstr(p->err, "HTTP 422"));
	assert_non_null(strstr(p->err, "  expires_at: "));

	/* revoking it again: not found */
	p = fx_cli(fx, NULL, NULL, "tokens", "revoke", id, NULL);
	assert_int_equal(p->status, 4);
	assert_non_null(strstr(p->err, "HTTP 404"));
}

static void
test_cli_users(void **state)
{
	struct fixture *fx = *state;
	const char *user = fx_unique(fx, "cli-carol");
	struct json_object *doc;
	struct fx_proc *p;

	cli_login_admin(fx);
	p = fx_cli(fx, NULL, "carol-Passw0rd-long-enough\n", "users", "create", user, "--role",
	    "operator", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, user));
	assert_non_null(strstr(p->out, "operator"));
	assert_json_str(fx_request(fx, fixture_login(fx, user, "carol-Passw0rd-long-enough"), "GET",
			    "/v1/me", NULL)
			    ->json,
	    "role", "operator");

	p = fx_cli(fx, NULL, NULL, "-o", "json", "users", "list", NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_true(list_has(fx_json(doc, "items"), "username", user));
	assert_true(list_has(fx_json(doc, "items"), "username", FIXTURE_ADMIN_USER));

	/* the same name twice is refused by the server */
	p = fx_cli(fx, NULL, "carol-Passw0rd-long-enough\n", "users", "create", user, "--role",
	    "operator", NULL);
	assert_int_equal(p->status, 5);
	assert_non_null(strstr(p->err, "HTTP 409"));

	/* a non-admin may not create users */
	p = fx_cli(fx,
	    (const char *const[]){ fx_str(fx, "GPUPOOL_TOKEN=%s",
				       fixture_login(fx, user, "carol-Passw0rd-long-enough")),
		NULL },
	    "x-Passw0rd-long-enough\n", "users", "create", fx_unique(fx, "cli-dave"), "--role",
	    "none", NULL);
	assert_int_equal(p->status, 3);
	assert_non_null(strstr(p->err, "HTTP 403"));
}

/* env for running the CLI with token as GPUPOOL_TOKEN against the fixture's server */
static const char *const *
cli_env_token(struct fixture *fx, const char *token)
{
	const char **env = arena_alloc(fx->arena, 3 * sizeof(*env));

	env[0] = fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url);
	env[1] = fx_str(fx, "GPUPOOL_TOKEN=%s", token);
	env[2] = NULL;
	return env;
}

static void
assert_cli_status(const struct fx_proc *p, int status)
{
	if (p->status != status)
		print_error("status %d, want %d\nstdout: %s\nstderr: %s\n", p->status, status,
		    p->out, p->err);
	assert_int_equal(p->status, status);
	/* no message ever names the program twice */
	assert_null(strstr(p->err, "gpupool: gpupool"));
}

/*
 * Issue 12 item 4: the help and the errors tell the truth. Each case was
 * wrong before: ownership promised on create, "show" for get commands,
 * create-only flags on shrink, "gpupool: gpupool", a login hint after a
 * failed login, a 403 that did not say who may.
 */
static void
test_cli_help_truth(void **state)
{
	struct fixture *fx = *state;
	const char *proj = fx_unique(fx, "cli-truth");
	const char *viewer = fx_unique(fx, "cli-viewer");
	const char *vtok;
	struct fx_proc *p;

	p = fx_cli(fx, NULL, NULL, "projects", "create", "--help", NULL);
	assert_cli_status(p, 0);
	assert_null(strstr(p->out, "you become"));
	assert_non_null(strstr(p->out, "does not make you a member"));

	p = fx_cli(fx, NULL, NULL, "--help", NULL);
	assert_cli_status(p, 0);
	assert_null(strstr(p->out, "list, show"));
	assert_non_null(strstr(p->out, "list, get, create and update projects"));
	assert_non_null(strstr(p->out, "  completion "));

	p = fx_cli(fx, NULL, NULL, "request", "shrink", "--help", NULL);
	assert_cli_status(p, 0);
	assert_null(strstr(p->out, "--ends-at"));
	p = fx_cli(fx, NULL, NULL, "request", "shrink", "--project", "p", "--pool", "x",
	    "H100-80GB/full=1", "--ends-at", "2030-01-01T00:00:00Z", NULL);
	assert_cli_status(p, 2);
	assert_non_null(strstr(p->err, "unknown option --ends-at"));
	p = fx_cli(fx, NULL, NULL, "request", "create", "--help", NULL);
	assert_cli_status(p, 0);
	assert_non_null(strstr(p->out, "--ends-at"));

	p = fx_cli(fx, NULL, NULL, "projects", "get", "a", "b", NULL);
	assert_cli_status(p, 2);
	assert_non_null(strstr(p->err, "gpupool projects get: too many arguments\n"));
	p = fx_cli(fx, NULL, NULL, "members", "add", "a", NULL);
	assert_cli_status(p, 2);
	assert_non_null(strstr(p->err, "gpupool members add: missing arguments\n"));

	/* a failed login does not advise logging in; other 401s do */
	p = fx_cli(fx, NULL, "wrong-password\n", "--server", fx->server->base_url, "login",
	    "--username", FIXTURE_ADMIN_USER, NULL);
	assert_cli_status(p, 3);
	assert_non_null(strstr(p->err, "HTTP 401"));
	assert_null(strstr(p->err, "gpupool login"));
	p = fx_cli(fx, cli_env_token(fx, "gpp_not_a_real_token"), NULL, "me", NULL);
	assert_cli_status(p, 3);
	assert_non_null(strstr(p->err, "hint: run 'gpupool login'"));

	/* 403 says who may, with the path asked for, not a route template */
	cli_login_admin(fx);
	vtok = fixture_create_user(fx, viewer, "none");
	assert_cli_ok(
	    fx_cli(fx, NULL, NULL, "projects", "create", proj, "--display-name", "T", NULL));
	assert_cli_ok(
	    fx_cli(fx, NULL, NULL, "members", "add", proj, viewer, "--role", "viewer", NULL));
	p = fx_cli(fx, cli_env_token(fx, vtok), NULL, "request", "create", "--project", proj,
	    "--pool", "p1", "H100-80GB/full=1", NULL);
	assert_cli_status(p, 3);
	assert_non_null(strstr(p->err,
	    fx_str(fx, "only members and owners of project %s may do this (your role: viewer)",
		proj)));
	p = fx_cli(fx, cli_env_token(fx, vtok), NULL, "projects", "update", proj, "--display-name",
	    "X", NULL);
	assert_cli_status(p, 3);
	assert_non_null(strstr(p->err,
	    fx_str(fx, "only owners of project %s and the global role admin may do this", proj)));
	p = fx_cli(fx, cli_env_token(fx, vtok), NULL, "users", "get", viewer, NULL);
	assert_cli_status(p, 3);
	assert_non_null(
	    strstr(p->err, fx_str(fx, "GET /v1/users/%s needs the global role admin", viewer)));
	assert_null(strstr(p->err, "{"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pool_requests pr JOIN projects p "
			     "ON p.id = pr.project_id WHERE p.name = $1",
			     proj),
	    0);
}

/* users get and update: role, disable/enable, a new password, If-Match (RFC 9110 13.1.1) */
static void
test_cli_users_update(void **state)
{
	struct fixture *fx = *state;
	const char *user = fx_unique(fx, "cli-erin");
	const char *tok, *gen;
	struct json_object *doc;
	struct fx_proc *p;

	cli_login_admin(fx);
	tok = fixture_create_user(fx, user, "none");
	p = fx_cli(fx, NULL, NULL, "-o", "json", "users", "get", user, NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_json_str(doc, "role", "none");
	gen = fx_str(fx, "%lld", (long long)fx_json_int(doc, "generation"));

	/* a stale ETag: 412, a hint, nothing changes */
	p = fx_cli(fx, NULL, NULL, "users", "update", user, "--role", "operator", "--if-match",
	    fx_str(fx, "%lld", (long long)fx_json_int(doc, "generation") + 5), NULL);
	assert_cli_status(p, 5);
	assert_non_null(strstr(p->err, "HTTP 412"));
	assert_non_null(strstr(p->err, "hint: the object changed"));
	assert_string_equal(fx_sql_text(fx, "SELECT role FROM users WHERE username = $1", user),
	    "none");
	/* the current one (a bare generation is quoted) */
	p = fx_cli(fx, NULL, NULL, "users", "update", user, "--role", "operator", "--if-match", gen,
	    NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "operator"));
	assert_string_equal(fx_sql_text(fx, "SELECT role FROM users WHERE username = $1", user),
	    "operator");
	/* without --if-match the CLI reads the user and sends its ETag */
	p = fx_cli(fx, NULL, NULL, "-o", "json", "users", "update", user, "--role", "billing",
	    NULL);
	assert_cli_ok(p);
	assert_json_str(cli_json(fx, p), "role", "billing");

	/* disable: the user's tokens stop working */
	assert_status(fx_request(fx, tok, "GET", "/v1/me", NULL), 200);
	p = fx_cli(fx, NULL, NULL, "users", "update", user, "--disable", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->err, "revoked"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM users WHERE username = $1 AND disabled", user),
	    1);
	assert_int_equal(fx_request(fx, tok, "GET", "/v1/me", NULL)->status, 401);
	p = fx_cli(fx, NULL, NULL, "users", "update", user, "--enable", NULL);
	assert_cli_ok(p);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM users WHERE username = $1 AND disabled", user),
	    0);

	/* a password reset from stdin: the new one logs in */
	p = fx_cli(fx, NULL, "erin-New-Passw0rd-2\n", "users", "update", user, "--password", NULL);
	assert_cli_ok(p);
	assert_json_str(fx_request(fx, fixture_login(fx, user, "erin-New-Passw0rd-2"), "GET",
			    "/v1/me", NULL)
			    ->json,
	    "username", user);

	/* usage errors before any request */
	p = fx_cli(fx, NULL, NULL, "users", "update", user, NULL);
	assert_cli_status(p, 2);
	assert_non_null(strstr(p->err, "nothing to change"));
	p = fx_cli(fx, NULL, NULL, "users", "update", user, "--disable", "--enable", NULL);
	assert_cli_status(p, 2);
	p = fx_cli(fx, NULL, NULL, "users", "update", user, "--role", "root", NULL);
	assert_cli_status(p, 2);
	p = fx_cli(fx, NULL, NULL, "users", "update", user, "--role", "none", "--if-match",
	    "1\r\nX-Evil: 1", NULL);
	assert_cli_status(p, 2);
	/* the server refuses a short password: 422 naming the field */
	p = fx_cli(fx, NULL, "short\n", "users", "update", user, "--password", NULL);
	assert_cli_status(p, 3);
	assert_non_null(strstr(p->err, "HTTP 422"));
	assert_non_null(strstr(p->err, "password"));
	p = fx_cli(fx, NULL, NULL, "users", "get", "no-such-user", NULL);
	assert_cli_status(p, 4);
	assert_non_null(strstr(p->err, "HTTP 404"));
}

/* projects update: display name, namespaces (replace, add, remove), If-Match */
static void
test_cli_projects_update(void **state)
{
	struct fixture *fx = *state;
	const char *name = fx_unique(fx, "cli-upd");
	const char *ns1 = fx_unique(fx, "ns-upd"), *ns2 = fx_unique(fx, "ns-upd");
	const char *ns3 = fx_unique(fx, "ns-upd");
	struct json_object *doc;
	struct fx_proc *p;

	cli_login_admin(fx);
	assert_cli_ok(fx_cli(fx, NULL, NULL, "projects", "create", name, "--display-name", "Old",
	    "--namespace", ns1, NULL));
	p = fx_cli(fx, NULL, NULL, "-o", "json", "projects", "update", name, "--display-name",
	    "New name", "--add-namespace", ns2, NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_json_str(doc, "display_name", "New name");
	assert_int_equal(fx_json_len(doc, "namespaces"), 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM project_namespaces n JOIN projects p ON p.id = "
			     "n.project_id WHERE p.name = $1",
			     name),
	    2);
	p = fx_cli(fx, NULL, NULL, "-o", "json", "projects", "update", name, "--remove-namespace",
	    ns1, NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_int_equal(fx_json_len(doc, "namespaces"), 1);
	assert_json_str(doc, "namespaces[0]", ns2);
	p = fx_cli(fx, NULL, NULL, "-o", "json", "projects", "update", name, "--namespace", ns3,
	    NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_int_equal(fx_json_len(doc, "namespaces"), 1);
	assert_json_str(doc, "namespaces[0]", ns3);

	/* stale ETag: 412, nothing changes */
	p = fx_cli(fx, NULL, NULL, "projects", "update", name, "--display-name", "Lost",
	    "--if-match", "1", NULL);
	assert_cli_status(p, 5);
	assert_non_null(strstr(p->err, "HTTP 412"));
	assert_string_equal(fx_sql_text(fx, "SELECT display_name FROM projects WHERE name = $1",
				name),
	    "New name");
	p = fx_cli(fx, NULL, NULL, "projects", "update", name, "--display-name", "Kept",
	    "--if-match", fx_str(fx, "%lld", (long long)fx_json_int(doc, "generation")), NULL);
	assert_cli_ok(p);
	assert_string_equal(fx_sql_text(fx, "SELECT display_name FROM projects WHERE name = $1",
				name),
	    "Kept");

	p = fx_cli(fx, NULL, NULL, "projects", "update", name, "--remove-namespace", "nope", NULL);
	assert_cli_status(p, 2);
	assert_non_null(strstr(p->err, "has no such namespace"));
	p = fx_cli(fx, NULL, NULL, "projects", "update", name, "--namespace", ns1,
	    "--add-namespace", ns2, NULL);
	assert_cli_status(p, 2);
	p = fx_cli(fx, NULL, NULL, "projects", "update", name, NULL);
	assert_cli_status(p, 2);
	p = fx_cli(fx, NULL, NULL, "projects", "update", "no-such-project", "--display-name", "x",
	    NULL);
	assert_cli_status(p, 4);
	assert_non_null(strstr(p->err, "HTTP 404"));
}

/* clusters update and delete, nodes update (labels kubectl label's way), gpus update */
static void
test_cli_inventory_update(void **state)
{
	struct fixture *fx = *state;
	const char *cl = fx_unique(fx, "cli-cl"), *empty = fx_unique(fx, "cli-cl");
	const char *node = fx_unique(fx, "cli-node");
	const char *uuid = "GPU-0c1ba7e0-0000-4000-8000-000000000001";
	struct json_object *doc;
	struct fx_proc *p;

	cli_login_admin(fx);
	assert_cli_ok(fx_cli(fx, NULL, NULL, "clusters", "create", cl, "--region", "eu", NULL));
	assert_cli_ok(fx_cli(fx, NULL, NULL, "clusters", "create", empty, "--region", "eu", NULL));
	p = fx_cli(fx, NULL, NULL, "-o", "json", "clusters", "update", cl, "--region", "us-east",
	    "--description", "moved", NULL);
	assert_cli_ok(p);
	assert_json_str(cli_json(fx, p), "region", "us-east");
	assert_string_equal(fx_sql_text(fx, "SELECT region FROM clusters WHERE name = $1", cl),
	    "us-east");
	p = fx_cli(fx, NULL, NULL, "clusters", "update", cl, "--region", "x", "--if-match", "99",
	    NULL);
	assert_cli_status(p, 5);
	assert_non_null(strstr(p->err, "HTTP 412"));
	p = fx_cli(fx, NULL, NULL, "clusters", "update", cl, NULL);
	assert_cli_status(p, 2);

	assert_cli_ok(fx_cli(fx, NULL, NULL, "nodes", "create", node, "--cluster", cl, "--label",
	    "zone=a", "--label", "rack=r1", NULL));
	/* a cluster with nodes is not deleted */
	p = fx_cli(fx, NULL, NULL, "clusters", "delete", cl, NULL);
	assert_cli_status(p, 5);
	assert_non_null(strstr(p->err, "HTTP 409"));
	p = fx_cli(fx, NULL, NULL, "clusters", "delete", empty, "--if-match", "7", NULL);
	assert_cli_status(p, 5);
	assert_non_null(strstr(p->err, "HTTP 412"));
	p = fx_cli(fx, NULL, NULL, "clusters", "delete", empty, NULL);
	assert_cli_ok(p);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM clusters WHERE name = $1", empty),
	    0);

	/* --label sets one and keeps the others, --remove-label removes one */
	p = fx_cli(fx, NULL, NULL, "-o", "json", "nodes", "update", node, "--label", "zone=b",
	    "--label", "gpu=h100", "--remove-label", "rack", "--hostname", "h1.example", NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_json_str(doc, "labels.zone", "b");
	assert_json_str(doc, "labels.gpu", "h100");
	assert_json_absent(doc, "labels.rack");
	assert_json_str(doc, "hostname", "h1.example");
	assert_string_equal(fx_sql_text(fx, "SELECT labels::text FROM nodes WHERE name = $1", node),
	    "{\"gpu\": \"h100\", \"zone\": \"b\"}");
	p = fx_cli(fx, NULL, NULL, "nodes", "update", node, "--remove-label", "rack", NULL);
	assert_cli_status(p, 2);
	p = fx_cli(fx, NULL, NULL, "nodes", "update", node, "--cpu-millicores", "-1", NULL);
	assert_cli_status(p, 2);
	p = fx_cli(fx, NULL, NULL, "nodes", "update", node, "--cpu-millicores", "64000",
	    "--if-match", "1", NULL);
	assert_cli_status(p, 5);
	assert_non_null(strstr(p->err, "HTTP 412"));
	/* the node actions take If-Match too */
	p = fx_cli(fx, NULL, NULL, "nodes", "cordon", node, "--if-match", "1", NULL);
	assert_cli_status(p, 5);
	assert_non_null(strstr(p->err, "HTTP 412"));
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM nodes WHERE name = $1", node),
	    "ready");
	p = fx_cli(fx, NULL, NULL, "-o", "json", "nodes", "get", node, NULL);
	assert_cli_ok(p);
	p = fx_cli(fx, NULL, NULL, "nodes", "cordon", node, "--reason", "test", "--if-match",
	    fx_str(fx, "%lld", (long long)fx_json_int(cli_json(fx, p), "generation")), NULL);
	assert_cli_ok(p);
	assert_string_equal(fx_sql_text(fx, "SELECT status FROM nodes WHERE name = $1", node),
	    "cordoned");

	assert_cli_ok(fx_cli(fx, NULL, NULL, "gpus", "create", node, "--index", "0", "--uuid", uuid,
	    "--model", "H100-80GB", NULL));
	p = fx_cli(fx, NULL, NULL, "-o", "json", "gpus", "update", uuid, "--health", "degraded",
	    "--reason", "ECC errors", NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_json_str(doc, "health", "degraded");
	assert_json_str(doc, "health_reason", "ECC errors");
	p = fx_cli(fx, NULL, NULL, "-o", "json", "gpus", "update", uuid, "--health", "ok", NULL);
	assert_cli_ok(p);
	assert_json_null(cli_json(fx, p), "health_reason");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus WHERE uuid = $1 AND health = 'ok' AND "
			     "health_reason IS NULL",
			     uuid),
	    1);
	p = fx_cli(fx, NULL, NULL, "gpus", "update", uuid, "--mig", "on", NULL);
	assert_cli_ok(p);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus WHERE uuid = $1 AND mig_enabled", uuid),
	    1);
	p = fx_cli(fx, NULL, NULL, "-o", "json", "gpus", "list", "--mig", "on", "--node", node,
	    NULL);
	assert_cli_ok(p);
	assert_int_equal(fx_json_len(cli_json(fx, p), "items"), 1);
	p = fx_cli(fx, NULL, NULL, "-o", "json", "gpus", "list", "--mig", "off", "--node", node,
	    NULL);
	assert_cli_ok(p);
	assert_int_equal(fx_json_len(cli_json(fx, p), "items"), 0);
	p = fx_cli(fx, NULL, NULL, "gpus", "update", uuid, "--health", "broken", NULL);
	assert_cli_status(p, 2);
	p = fx_cli(fx, NULL, NULL, "gpus", "update", uuid, "--health", "failed", "--if-match", "1",
	    NULL);
	assert_cli_status(p, 5);
	assert_non_null(strstr(p->err, "HTTP 412"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus WHERE uuid = $1 AND health = 'ok'", uuid),
	    1);

	/* quota set/delete take If-Match: a stale one changes nothing */
	{
		const char *proj = fx_unique(fx, "cli-q");

		assert_cli_ok(fx_cli(fx, NULL, NULL, "projects", "create", proj, "--display-name",
		    "Q", NULL));
		p = fx_cli(fx, NULL, NULL, "quota", "set", proj, "H100-80GB/full=2", "--if-match",
		    "5", NULL);
		assert_cli_status(p, 5);
		assert_non_null(strstr(p->err, "HTTP 412"));
		p = fx_cli(fx, NULL, NULL, "quota", "set", proj, "H100-80GB/full=2", "--if-match",
		    "0", NULL);
		assert_cli_ok(p);
		p = fx_cli(fx, NULL, NULL, "quota", "delete", proj, "--if-match", "0", NULL);
		assert_cli_status(p, 5);
		assert_non_null(strstr(p->err, "HTTP 412"));
		p = fx_cli(fx, NULL, NULL, "-o", "json", "quota", "get", proj, NULL);
		assert_cli_ok(p);
		assert_int_equal(fx_json_len(cli_json(fx, p), "items"), 1);
	}
}

/* gpupool audit: filters, one page by default with the cursor of the next, --all */
static void
test_cli_audit(void **state)
{
	struct fixture *fx = *state;
	const char *name = fx_unique(fx, "cli-aud");
	const char *user = fx_unique(fx, "cli-aud-u");
	struct json_object *doc;
	struct fx_proc *p;
	int64_t total;

	cli_login_admin(fx);
	assert_cli_ok(
	    fx_cli(fx, NULL, NULL, "projects", "create", name, "--display-name", "A", NULL));
	assert_cli_ok(
	    fx_cli(fx, NULL, NULL, "projects", "update", name, "--display-name", "B", NULL));
	p = fx_cli(fx, NULL, NULL, "-o", "json", "audit", "--action", "project.update",
	    "--object-id", name, NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_int_equal(fx_json_len(doc, "items"), 1);
	assert_json_str(doc, "items[0].actor", FIXTURE_ADMIN_USER);
	assert_json_str(doc, "items[0].after.display_name", "B");
	p = fx_cli(fx, NULL, NULL, "audit", "list", "--object-type", "project", "--object-id", name,
	    NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "ACTION"));
	assert_non_null(strstr(p->out, "project.create"));
	assert_non_null(strstr(p->out, fx_str(fx, "project/%s", name)));

	/* more than a page: the first 50, and the way on */
	for (int i = 0; i < 51; i++)
		assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/tokens",
				  "{\"name\":\"aud-%d\"}", i),
		    201);
	total = fx_sql_int64(fx, "SELECT count(*) FROM audit_log");
	assert_true(total > 50);
	p = fx_cli(fx, NULL, NULL, "-o", "json", "audit", NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_int_equal(fx_json_len(doc, "items"), 50);
	assert_non_null(fx_json(doc, "next_cursor"));
	p = fx_cli(fx, NULL, NULL, "audit", "--no-headers", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->err, "more items: add --cursor "));
	assert_non_null(strstr(p->err, "(or --all for all)"));
	p = fx_cli(fx, NULL, NULL, "audit", "--cursor", fx_json_str(doc, "next_cursor"), "--limit",
	    "2", "-o", "json", NULL);
	assert_cli_ok(p);
	assert_int_equal(fx_json_len(cli_json(fx, p), "items"), 2);
	p = fx_cli(fx, NULL, NULL, "-o", "json", "audit", "--all", NULL);
	assert_cli_ok(p);
	assert_true((int64_t)fx_json_len(cli_json(fx, p), "items") >= total);

	p = fx_cli(fx, NULL, NULL, "audit", "--all", "--limit", "5", NULL);
	assert_cli_status(p, 2);
	p = fx_cli(fx, NULL, NULL, "audit", "--since", "yesterday", NULL);
	assert_cli_status(p, 3);
	assert_non_null(strstr(p->err, "HTTP 422"));
	p = fx_cli(fx, cli_env_token(fx, fixture_create_user(fx, user, "operator")), NULL, "audit",
	    NULL);
	assert_cli_status(p, 3);
	assert_non_null(strstr(p->err, "needs the global role admin"));
}

/* gpupool catalog: any user learns the models and the item names requests take */
static void
test_cli_catalog(void **state)
{
	struct fixture *fx = *state;
	const char *tok = fixture_create_user(fx, fx_unique(fx, "cli-cat"), "none");
	const char *const *env = cli_env_token(fx, tok);
	struct json_object *doc, *items;
	struct fx_proc *p;

	p = fx_cli(fx, env, NULL, "catalog", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "PROFILES"));
	assert_non_null(strstr(p->out, "H100-80GB"));
	assert_non_null(strstr(p->out, "full,1g.10gb"));
	p = fx_cli(fx, env, NULL, "catalog", "get", "H100-80GB", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "SPEC"));
	assert_non_null(strstr(p->out, "H100-80GB/full "));
	assert_non_null(strstr(p->out, "H100-80GB/3g.40gb "));
	assert_non_null(strstr(p->out, "nvidia.com/mig-3g.40gb"));
	p = fx_cli(fx, env, NULL, "-o", "json", "catalog", "list", "--mig", "off", NULL);
	assert_cli_ok(p);
	items = fx_json(cli_json(fx, p), "items");
	assert_true(json_object_array_length(items) > 0);
	for (size_t i = 0; i < json_object_array_length(items); i++)
		assert_false(json_object_get_boolean(
		    fx_json(json_object_array_get_idx(items, i), "mig_capable")));
	p = fx_cli(fx, env, NULL, "-o", "json", "catalog", "get", "H100-80GB", NULL);
	assert_cli_ok(p);
	doc = cli_json(fx, p);
	assert_json_str(doc, "model", "H100-80GB");
	assert_true(fx_json_len(doc, "profiles") > 0);

	p = fx_cli(fx, env, NULL, "catalog", "get", "H100-80G", NULL);
	assert_cli_status(p, 4);
	assert_non_null(strstr(p->err, "HTTP 404"));
	p = fx_cli(fx, env, NULL, "catalog", "--mig", "maybe", NULL);
	assert_cli_status(p, 2);
}

/* -o wide adds columns; -o name the first one */
static void
test_cli_wide(void **state)
{
	struct fixture *fx = *state;
	struct fx_proc *p;

	cli_login_admin(fx);
	p = fx_cli(fx, NULL, NULL, "users", "list", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "DISABLED"));
	assert_null(strstr(p->out, "GENERATION"));
	p = fx_cli(fx, NULL, NULL, "users", "list", "-o", "wide", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "GENERATION"));
	assert_non_null(strstr(p->out, "UPDATED"));
	p = fx_cli(fx, NULL, NULL, "-o", "wide", "catalog", NULL);
	assert_cli_ok(p);
	assert_non_null(strstr(p->out, "PRODUCT NAMES"));
	p = fx_cli(fx, NULL, NULL, "-o", "name", "users", "get", FIXTURE_ADMIN_USER, NULL);
	assert_cli_ok(p);
	assert_string_equal(p->out, FIXTURE_ADMIN_USER "\n");
	p = fx_cli(fx, NULL, NULL, "-o", "wider", "users", "list", NULL);
	assert_cli_status(p, 2);
	assert_non_null(strstr(p->err, "table, wide, json, yaml or name"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_cli_usage),
		cmocka_unit_test(test_cli_login_and_me),
		cmocka_unit_test(test_cli_projects),
		cmocka_unit_test(test_cli_members),
		cmocka_unit_test(test_cli_tokens),
		cmocka_unit_test(test_cli_users),
		cmocka_unit_test(test_cli_help_truth),
		cmocka_unit_test(test_cli_users_update),
		cmocka_unit_test(test_cli_projects_update),
		cmocka_unit_test(test_cli_inventory_update),
		cmocka_unit_test(test_cli_audit),
		cmocka_unit_test(test_cli_catalog),
		cmocka_unit_test(test_cli_wide),
	};

	return fixture_run_tests(tests);
}
