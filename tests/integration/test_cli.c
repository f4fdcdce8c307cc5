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

	/* a wrong password: exit 1 and the server's words on stderr */
	unlink(cfg_path);
	p = fx_cli(fx, NULL, "not-the-password\n", "--server", fx->server->base_url, "login",
	    "--username", FIXTURE_ADMIN_USER, NULL);
	assert_int_equal(p->status, 1);
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
	assert_int_equal(p->status, 1);
	assert_non_null(strstr(p->err, "127.0.0.1:1"));
	p = fx_cli(fx, (const char *const[]){ "GPUPOOL_SERVER=http://127.0.0.1:1", NULL }, NULL,
	    "--server", fx->server->base_url, "me", NULL);
	assert_cli_ok(p);
	p = fx_cli(fx, (const char *const[]){ "GPUPOOL_TOKEN=gpp_not_a_real_token", NULL }, NULL,
	    "me", NULL);
	assert_int_equal(p->status, 1);
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

	/* a conflict: exit 1, the server's detail on stderr, nothing on stdout */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"%s\",\"display_name\":\"Again\",\"namespaces\":[]}", name);
	assert_int_equal(r->status, 409);
	detail = fx_json_str(r->json, "detail");
	p = fx_cli(fx, NULL, NULL, "projects", "create", name, "--display-name", "Again", NULL);
	assert_int_equal(p->status, 1);
	assert_string_equal(p->out, "");
	assert_non_null(strstr(p->err, detail));
	assert_non_null(strstr(p->err, "HTTP 409"));
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name = $1", name),
	    1);

	/* validation errors name the failing field */
	p = fx_cli(fx, NULL, NULL, "projects", "create", "Not A Valid Name!", "--display-name", "x",
	    NULL);
	assert_int_equal(p->status, 1);
	assert_non_null(strstr(p->err, "HTTP 422"));
	assert_non_null(strstr(p->err, "name"));

	p = fx_cli(fx, NULL, NULL, "projects", "get", "no-such-project", NULL);
	assert_int_equal(p->status, 1);
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
	assert_int_equal(p->status, 1);
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
	assert_int_equal(p->status, 1);
	assert_non_null(strstr(p->err, "HTTP 401"));

	/* a field error from the server is shown with its field path */
	p = fx_cli(fx, NULL, NULL, "tokens", "create", fx_unique(fx, "old"), "--expires-at",
	    "2001-01-01T00:00:00Z", NULL);
	assert_int_equal(p->status, 1);
	assert_non_null(strstr(p->err, "HTTP 422"));
	assert_non_null(strstr(p->err, "  expires_at: "));

	/* revoking it again: not found */
	p = fx_cli(fx, NULL, NULL, "tokens", "revoke", id, NULL);
	assert_int_equal(p->status, 1);
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
	assert_int_equal(p->status, 1);
	assert_non_null(strstr(p->err, "HTTP 409"));

	/* a non-admin may not create users */
	p = fx_cli(fx,
	    (const char *const[]){ fx_str(fx, "GPUPOOL_TOKEN=%s",
				       fixture_login(fx, user, "carol-Passw0rd-long-enough")),
		NULL },
	    "x-Passw0rd-long-enough\n", "users", "create", fx_unique(fx, "cli-dave"), "--role",
	    "none", NULL);
	assert_int_equal(p->status, 1);
	assert_non_null(strstr(p->err, "HTTP 403"));
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
	};

	return fixture_run_tests(tests);
}
