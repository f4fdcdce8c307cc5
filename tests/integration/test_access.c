/*
 * test_access.c - the access matrix: every endpoint of the route table
 * (server/api/routes.c) called by every kind of caller -- the global
 * roles admin, operator, billing, a user with no global role who is
 * owner, member or viewer of one project or of none, and no token at
 * all -- on the caller's own project and on another one. Each cell holds
 * the status the design gives: staff (operator, billing) read every
 * project but change none (403), only admin creates projects and users
 * and reads the audit log, projects a user does not belong to answer 404
 * exactly like projects that do not exist.
 *
 * Every refused request (and every read) must leave the database as it
 * was; every allowed mutation writes exactly one audit row. After the
 * matrix, SQL checks the end state cell by cell.
 */
#include "fixture.h"

#include <stdio.h>
#include <string.h>

enum actor {
	A_ADMIN,
	A_OPERATOR,
	A_BILLING,
	A_OWNER, /* owner of the own project, global role none */
	A_MEMBER,
	A_VIEWER,
	A_OUTSIDER, /* global role none, in no project */
	A_ANON,     /* no token */
	A_COUNT
};

static const char *const actor_names[A_COUNT] = {
	"admin",
	"operator",
	"billing",
	"owner",
	"member",
	"viewer",
	"outsider",
	"anon",
};

#define OWN "acc-own"
#define OTHER "acc-other"

/*
 * Path and body templates: {own} and {other} are the two projects,
 * {actor} the caller's name, {tok} the id of an API token of the
 * caller, {xtok} the id of another user's token, {uniq} a fresh number.
 * t-{actor} is a user who is viewer of both projects before the matrix,
 * n-{actor} one who is in neither; each caller has its own, so the
 * cells do not depend on each other's order.
 */
struct access_case {
	const char *method;
	const char *path;
	const char *body;
	/* admin, operator, billing, owner, member, viewer, outsider, anon */
	int status[A_COUNT];
};

#define ALL7(s) s, s, s, s, s, s, s
#define ONLY_ADMIN(s) s, 403, 403, 403, 403, 403, 403, 401
/* read a project: staff and its members; others do not see it */
#define READ_OWN 200, 200, 200, 200, 200, 200, 404, 401
#define READ_OTHER 200, 200, 200, 404, 404, 404, 404, 401
/* manage a project: admin and its owners; staff 403, members 403, others 404 */
#define MANAGE_OWN(s) s, 403, 403, s, 403, 403, 404, 401
#define MANAGE_OTHER(s) s, 403, 403, 404, 404, 404, 404, 401

static const struct access_case cases[] = {
	/* identity */
	{ "GET", "/v1/me", NULL, { ALL7(200), 401 } },
	{ "POST", "/v1/me", "{}", { ALL7(405), 405 } },
	{ "GET", "/v1/tokens", NULL, { ALL7(200), 401 } },
	{ "POST", "/v1/tokens", "{\"name\":\"matrix-{actor}\"}", { ALL7(201), 401 } },
	{ "DELETE", "/v1/tokens/{tok}", NULL, { ALL7(204), 401 } },
	{ "DELETE", "/v1/tokens/{xtok}", NULL, { ALL7(404), 401 } },
	{ "PATCH", "/v1/tokens/{tok}", "{}", { ALL7(405), 405 } },

	/* users: admin only, whether or not the user exists */
	{ "POST", "/v1/users",
	    "{\"username\":\"new-{uniq}\",\"password\":\"matrix-Passw0rd-{uniq}\",\"role\":\"none\"}",
	    { ONLY_ADMIN(201) } },
	{ "POST", "/v1/users",
	    "{\"username\":\"boss-{uniq}\",\"password\":\"matrix-Passw0rd-{uniq}\",\"role\":\"admin\"}",
	    { ONLY_ADMIN(201) } },
	{ "GET", "/v1/users", NULL, { ONLY_ADMIN(200) } },
	{ "GET", "/v1/users/t-{actor}", NULL, { ONLY_ADMIN(200) } },
	{ "GET", "/v1/users/no-such-user", NULL, { ONLY_ADMIN(404) } },
	{ "PATCH", "/v1/users/t-{actor}", "{\"disabled\":false}", { ONLY_ADMIN(200) } },
	{ "PATCH", "/v1/users/{actor}-self", "{\"role\":\"admin\"}", { ONLY_ADMIN(404) } },
	{ "DELETE", "/v1/users/t-{actor}", NULL, { ALL7(405), 405 } },

	/* projects */
	{ "POST", "/v1/projects", "{\"name\":\"new-{uniq}\"}", { ONLY_ADMIN(201) } },
	{ "GET", "/v1/projects", NULL, { ALL7(200), 401 } },
	{ "GET", "/v1/projects/" OWN, NULL, { READ_OWN } },
	{ "GET", "/v1/projects/" OTHER, NULL, { READ_OTHER } },
	{ "GET", "/v1/projects/no-such-project", NULL, { ALL7(404), 401 } },
	{ "PATCH", "/v1/projects/" OWN, "{\"display_name\":\"by {actor}\"}", { MANAGE_OWN(200) } },
	{ "PATCH", "/v1/projects/" OTHER, "{\"display_name\":\"by {actor}\"}",
	    { MANAGE_OTHER(200) } },
	{ "PATCH", "/v1/projects/no-such-project", "{\"display_name\":\"x\"}", { ALL7(404), 401 } },
	{ "DELETE", "/v1/projects/" OWN, NULL, { ALL7(405), 405 } },

	/* members */
	{ "GET", "/v1/projects/" OWN "/members", NULL, { READ_OWN } },
	{ "GET", "/v1/projects/" OTHER "/members", NULL, { READ_OTHER } },
	{ "GET", "/v1/projects/no-such-project/members", NULL, { ALL7(404), 401 } },
	/* n-{actor} shares no project with the owner: hidden from them, so 404 as for no user */
	{ "PUT", "/v1/projects/" OWN "/members/n-{actor}", "{\"role\":\"viewer\"}",
	    { 201, 403, 403, 404, 403, 403, 404, 401 } },
	{ "PUT", "/v1/projects/" OTHER "/members/n-{actor}", "{\"role\":\"viewer\"}",
	    { MANAGE_OTHER(201) } },
	{ "PUT", "/v1/projects/" OWN "/members/t-{actor}", "{\"role\":\"member\"}",
	    { MANAGE_OWN(200) } },
	{ "PUT", "/v1/projects/" OTHER "/members/t-{actor}", "{\"role\":\"member\"}",
	    { MANAGE_OTHER(200) } },
	/* promoting oneself: only an owner (already one) or admin may */
	{ "PUT", "/v1/projects/" OWN "/members/{self}", "{\"role\":\"owner\"}",
	    { 201, 403, 403, 200, 403, 403, 404, 401 } },
	{ "PUT", "/v1/projects/no-such-project/members/t-{actor}", "{\"role\":\"viewer\"}",
	    { ALL7(404), 401 } },
	{ "DELETE", "/v1/projects/" OWN "/members/t-{actor}", NULL, { MANAGE_OWN(204) } },
	{ "DELETE", "/v1/projects/" OTHER "/members/t-{actor}", NULL, { MANAGE_OTHER(204) } },
	{ "DELETE", "/v1/projects/" OWN "/members/p2-owner", NULL,
	    { 404, 403, 403, 404, 403, 403, 404, 401 } },
	{ "GET", "/v1/projects/" OWN "/members/t-{actor}", NULL, { ALL7(405), 405 } },

	/* audit */
	{ "GET", "/v1/audit", NULL, { ONLY_ADMIN(200) } },
	{ "GET", "/v1/audit?project=" OWN, NULL, { ONLY_ADMIN(200) } },
	{ "POST", "/v1/audit", "{}", { ALL7(405), 405 } },
};

struct world {
	const char *token[A_COUNT];  /* session tokens; NULL for anon */
	const char *user[A_COUNT];   /* user names; admin is FIXTURE_ADMIN_USER */
	const char *tok_id[A_COUNT]; /* an API token of each caller, for DELETE /v1/tokens */
	const char *victim_token;
	const char *victim_tok_id;
	int uniq;
};

static struct world world;

/* ---- helpers ---- */

/* The database as requests could change it; tokens' last use is left out. */
static const char *
fingerprint(struct fixture *fx)
{
	return fx_sql_text(fx,
	    "SELECT md5(concat_ws(' | ', "
	    "(SELECT string_agg(u::text, ';' ORDER BY id) FROM users u), "
	    "(SELECT string_agg(p::text, ';' ORDER BY id) FROM projects p), "
	    "(SELECT string_agg(n::text, ';' ORDER BY namespace) FROM project_namespaces n), "
	    "(SELECT string_agg(m::text, ';' ORDER BY project_id, user_id) FROM project_members m), "
	    "(SELECT string_agg(concat_ws(',', id, user_id, kind, name, digest, expires_at, revoked_at), "
	    "  ';' ORDER BY id) FROM tokens), "
	    "(SELECT string_agg(a::text, ';' ORDER BY id) FROM audit_log a), "
	    "(SELECT string_agg(i::text, ';' ORDER BY user_id, key) FROM idempotency_keys i)))");
}

static int64_t
audit_rows(struct fixture *fx)
{
	return fx_sql_int64(fx, "SELECT count(*) FROM audit_log");
}

/* Replace the {placeholders} of a template for actor a. */
static const char *
expand(struct fixture *fx, const char *tmpl, enum actor a)
{
	char *out = arena_strdup(fx->arena, "");
	const char *p = tmpl;
	int uniq = 0;

	if (tmpl == NULL)
		return NULL;
	while (*p != '\0') {
		const char *open = strchr(p, '{');
		const char *close = open ? strchr(open, '}') : NULL;
		const char *val;
		size_t nlen;

		if (open == NULL || close == NULL) {
			out = arena_printf(fx->arena, "%s%s", out, p);
			break;
		}
		nlen = (size_t)(close - open - 1);
		if (nlen == 5 && strncmp(open + 1, "actor", 5) == 0)
			val = actor_names[a];
		else if (nlen == 4 && strncmp(open + 1, "self", 4) == 0)
			val = world.user[a] ? world.user[a] : "nobody";
		else if (nlen == 3 && strncmp(open + 1, "tok", 3) == 0)
			val = world.tok_id[a] ? world.tok_id[a] : "1";
		else if (nlen == 4 && strncmp(open + 1, "xtok", 4) == 0)
			val = world.victim_tok_id;
		else if (nlen == 4 && strncmp(open + 1, "uniq", 4) == 0) {
			/* one fresh number per expansion, the same for all its uses */
			if (uniq == 0)
				uniq = ++world.uniq;
			val = fx_str(fx, "%d", uniq);
		} else {
			/* JSON braces and the like pass through */
			out = arena_printf(fx->arena, "%s%.*s", out, (int)(open - p + 1), p);
			p = open + 1;
			continue;
		}
		out = arena_printf(fx->arena, "%s%.*s%s", out, (int)(open - p), p, val);
		p = close + 1;
	}
	return out;
}

static const char *
code_for(int status)
{
	switch (status) {
	case 401:
		return "unauthorized";
	case 403:
		return "forbidden";
	case 404:
		return "not_found";
	case 405:
		return "method_not_allowed";
	default:
		return NULL;
	}
}

static void
create_named_user(struct fixture *fx, const char *name)
{
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/users",
	    "{\"username\":\"%s\",\"password\":\"%s\",\"role\":\"none\"}", name, FIXTURE_PASSWORD);
	assert_status(r, 201);
}

static void
put_member(struct fixture *fx, const char *project, const char *user, const char *role)
{
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "PUT",
	    fx_str(fx, "/v1/projects/%s/members/%s", project, user), "{\"role\":\"%s\"}", role);
	assert_true(r->status == 200 || r->status == 201);
}

static const char *
role_in(struct fixture *fx, const char *project, const char *user)
{
	return fx_sql_text(fx,
	    "SELECT coalesce((SELECT m.role FROM project_members m "
	    "JOIN projects p ON p.id = m.project_id JOIN users u ON u.id = m.user_id "
	    "WHERE p.name = $1 AND u.username = $2), '-')",
	    project, user);
}

/* ---- setup ---- */

static void
build_world(struct fixture *fx)
{
	static const char *const global[A_COUNT] = {
		NULL,
		"operator",
		"billing",
		"none",
		"none",
		"none",
		"none",
		NULL,
	};
	struct gp_client_response *r;

	memset(&world, 0, sizeof(world));
	world.token[A_ADMIN] = fx->admin_token;
	world.user[A_ADMIN] = FIXTURE_ADMIN_USER;
	for (int a = A_OPERATOR; a < A_ANON; a++) {
		world.user[a] = fx_str(fx, "acc-%s", actor_names[a]);
		world.token[a] = fixture_create_user(fx, world.user[a], global[a]);
	}
	world.victim_token = fixture_create_user(fx, "victim", "none");
	r = fx_request(fx, world.victim_token, "POST", "/v1/tokens", "{\"name\":\"victim\"}");
	assert_status(r, 201);
	world.victim_tok_id = fx_json_str(r->json, "id");

	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"" OWN "\",\"namespaces\":[\"acc-own-ns\"]}"),
	    201);
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/projects",
			  "{\"name\":\"" OTHER "\",\"namespaces\":[\"acc-other-ns\"]}"),
	    201);
	put_member(fx, OWN, world.user[A_OWNER], "owner");
	put_member(fx, OWN, world.user[A_MEMBER], "member");
	put_member(fx, OWN, world.user[A_VIEWER], "viewer");
	create_named_user(fx, "p2-owner");
	put_member(fx, OTHER, "p2-owner", "owner");

	for (int a = 0; a < A_COUNT; a++) {
		const char *t = fx_str(fx, "t-%s", actor_names[a]);

		create_named_user(fx, t);
		create_named_user(fx, fx_str(fx, "n-%s", actor_names[a]));
		put_member(fx, OWN, t, "viewer");
		put_member(fx, OTHER, t, "viewer");
		if (a != A_ANON) {
			r = fx_request(fx, world.token[a], "POST", "/v1/tokens",
			    "{\"name\":\"doomed\"}");
			assert_status(r, 201);
			world.tok_id[a] = fx_json_str(r->json, "id");
		}
	}
}

/* ---- the matrix ---- */

static void
test_matrix(void **state)
{
	struct fixture *fx = *state;
	int64_t mutations[A_COUNT] = { 0 };
	int64_t audit_start, users_start, projects_start;
	int failures = 0, cells = 0;

	build_world(fx);
	audit_start = audit_rows(fx);
	users_start = fx_sql_int64(fx, "SELECT count(*) FROM users");
	projects_start = fx_sql_int64(fx, "SELECT count(*) FROM projects");

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct access_case *c = &cases[i];

		for (int a = 0; a < A_COUNT; a++) {
			const char *path = expand(fx, c->path, (enum actor)a);
			const char *body = expand(fx, c->body, (enum actor)a);
			const char *before = fingerprint(fx);
			int64_t audit_before = audit_rows(fx);
			int want = c->status[a];
			bool mutation = strcmp(c->method, "GET") != 0 && want < 300;
			struct gp_client_response *r;
			const char *code;

			r = body ? fx_request(fx, world.token[a], c->method, path, "%s", body)
				 : fx_request(fx, world.token[a], c->method, path, NULL);
			cells++;
			if (r->status != want) {
				print_error("%-8s %-6s %-50s expected %d, got %ld: %.300s\n",
				    actor_names[a], c->method, path, want, r->status, r->body);
				failures++;
				continue;
			}
			code = code_for(want);
			if (code != NULL) {
				struct json_object *got = fx_json(r->json, "code");

				if (strncmp(r->content_type, "application/problem+json", 24) != 0 ||
				    got == NULL || strcmp(json_object_get_string(got), code) != 0) {
					print_error("%-8s %-6s %s: expected problem %s, got %s\n",
					    actor_names[a], c->method, path, code, r->body);
					failures++;
				}
			}
			if (mutation) {
				/* exactly one audit row, by this caller */
				if (audit_rows(fx) != audit_before + 1) {
					print_error("%-8s %-6s %s: %lld audit rows written\n",
					    actor_names[a], c->method, path,
					    (long long)(audit_rows(fx) - audit_before));
					failures++;
				}
				mutations[a]++;
			} else if (strcmp(fingerprint(fx), before) != 0) {
				print_error("%-8s %-6s %s answered %d and changed the database\n",
				    actor_names[a], c->method, path, want);
				failures++;
			}
		}
	}
	print_message("access matrix: %d cells, %d failures\n", cells, failures);
	assert_int_equal(failures, 0);

	/* ---- the end state, cell by cell ---- */

	/* one audit row per allowed mutation, each by its caller */
	{
		int64_t total = 0;

		for (int a = 0; a < A_ANON; a++) {
			total += mutations[a];
			assert_int_equal(fx_sql_int64(fx,
					     "SELECT count(*) FROM audit_log WHERE id > $1::bigint "
					     "AND actor = $2",
					     fx_str(fx, "%lld", (long long)audit_start),
					     world.user[a]),
			    mutations[a]);
		}
		assert_int_equal(audit_rows(fx), audit_start + total);
		/* the allowed mutations per caller, as the matrix says */
		assert_int_equal(mutations[A_OPERATOR], 2); /* token create + revoke */
		assert_int_equal(mutations[A_OUTSIDER], 2);
		assert_int_equal(mutations[A_MEMBER], 2);
		/* not n-owner's membership: that user is hidden from the owner */
		assert_int_equal(mutations[A_OWNER], 2 + 1 + 1 + 1 + 1);
	}
	/* only the admin created users and projects */
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM users"), users_start + 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM users WHERE username LIKE 'new-%' "
			     "OR username LIKE 'boss-%'"),
	    2);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM users WHERE role = 'admin'"), 2);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects"), projects_start + 1);
	/* the own project was changed by admin and owner, the other by admin */
	assert_int_equal(fx_sql_int64(fx, "SELECT generation FROM projects WHERE name = '" OWN "'"),
	    3);
	assert_string_equal(fx_sql_text(fx,
				"SELECT display_name FROM projects WHERE name = '" OWN "'"),
	    "by owner");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT generation FROM projects WHERE name = '" OTHER "'"),
	    2);
	assert_string_equal(fx_sql_text(fx,
				"SELECT display_name FROM projects WHERE name = '" OTHER "'"),
	    "by admin");
	/* memberships */
	for (int a = 0; a < A_COUNT; a++) {
		const char *t = fx_str(fx, "t-%s", actor_names[a]);
		const char *n = fx_str(fx, "n-%s", actor_names[a]);
		bool manages_own = a == A_ADMIN || a == A_OWNER;
		bool manages_other = a == A_ADMIN;

		assert_string_equal(role_in(fx, OWN, n), a == A_ADMIN ? "viewer" : "-");
		assert_string_equal(role_in(fx, OTHER, n), manages_other ? "viewer" : "-");
		assert_string_equal(role_in(fx, OWN, t), manages_own ? "-" : "viewer");
		assert_string_equal(role_in(fx, OTHER, t), manages_other ? "-" : "viewer");
	}
	assert_string_equal(role_in(fx, OWN, FIXTURE_ADMIN_USER), "owner");
	assert_string_equal(role_in(fx, OWN, world.user[A_OWNER]), "owner");
	assert_string_equal(role_in(fx, OWN, world.user[A_MEMBER]), "member");
	assert_string_equal(role_in(fx, OWN, world.user[A_VIEWER]), "viewer");
	assert_string_equal(role_in(fx, OWN, world.user[A_OPERATOR]), "-");
	assert_string_equal(role_in(fx, OWN, world.user[A_BILLING]), "-");
	assert_string_equal(role_in(fx, OTHER, "p2-owner"), "owner");
	/* namespaces untouched */
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(namespace, ',' ORDER BY namespace) "
				"FROM project_namespaces"),
	    "acc-other-ns,acc-own-ns");
	/* tokens: each caller revoked its own, nobody the victim's */
	for (int a = 0; a < A_ANON; a++)
		assert_int_equal(fx_sql_int64(fx,
				     "SELECT count(*) FROM tokens WHERE id = $1::bigint "
				     "AND revoked_at IS NOT NULL",
				     world.tok_id[a]),
		    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM tokens WHERE id = $1::bigint "
			     "AND revoked_at IS NULL",
			     world.victim_tok_id),
	    1);
	assert_status(fx_request(fx, world.victim_token, "GET", "/v1/me", NULL), 200);
	/* a user's global role was never raised by a refused PATCH */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM users WHERE username LIKE 'acc-%' "
			     "AND role NOT IN ('operator', 'billing', 'none')"),
	    0);
}

/*
 * What each caller sees in lists, and that a project one may not see
 * answers exactly like one that does not exist.
 */
static void
test_visibility(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r, *hidden, *missing;
	int64_t all = fx_sql_int64(fx, "SELECT count(*) FROM projects");

	for (int a = 0; a < A_ANON; a++) {
		r = fx_request(fx, world.token[a], "GET", "/v1/projects?limit=500", NULL);
		assert_status(r, 200);
		switch (a) {
		case A_ADMIN:
		case A_OPERATOR:
		case A_BILLING:
			assert_int_equal((int64_t)fx_json_len(r->json, "items"), all);
			break;
		case A_OWNER:
		case A_MEMBER:
		case A_VIEWER:
			assert_int_equal(fx_json_len(r->json, "items"), 1);
			assert_json_str(r->json, "items[0].name", OWN);
			break;
		default:
			assert_int_equal(fx_json_len(r->json, "items"), 0);
			break;
		}
	}
	/* /v1/me: projects by membership, not by global role */
	r = fx_request(fx, world.token[A_VIEWER], "GET", "/v1/me", NULL);
	assert_int_equal(fx_json_len(r->json, "projects"), 1);
	assert_json_str(r->json, "projects[0].name", OWN);
	assert_json_str(r->json, "projects[0].role", "viewer");
	r = fx_request(fx, world.token[A_OPERATOR], "GET", "/v1/me", NULL);
	assert_json_str(r->json, "role", "operator");
	assert_int_equal(fx_json_len(r->json, "projects"), 0);
	/* staff and members read the same project the same way */
	r = fx_request(fx, world.token[A_BILLING], "GET", "/v1/projects/" OWN, NULL);
	assert_string_equal(r->body,
	    fx_request(fx, world.token[A_VIEWER], "GET", "/v1/projects/" OWN, NULL)->body);
	r = fx_request(fx, world.token[A_OPERATOR], "GET", "/v1/projects/" OWN "/members?limit=500",
	    NULL);
	assert_string_equal(r->body,
	    fx_request(fx, world.token[A_MEMBER], "GET", "/v1/projects/" OWN "/members?limit=500",
		NULL)
		->body);

	/* hidden and missing look alike, for reads and for writes */
	hidden = fx_request(fx, world.token[A_OUTSIDER], "GET", "/v1/projects/" OTHER, NULL);
	missing = fx_request(fx, world.token[A_OUTSIDER], "GET", "/v1/projects/zz-other", NULL);
	assert_problem(hidden, 404, "not_found");
	assert_problem(missing, 404, "not_found");
	assert_string_equal(fx_json_str(hidden->json, "detail"), "no such project: " OTHER);
	assert_string_equal(fx_json_str(missing->json, "detail"), "no such project: zz-other");
	assert_string_equal(fx_json_str(hidden->json, "title"),
	    fx_json_str(missing->json, "title"));
	hidden = fx_request(fx, world.token[A_OWNER], "PUT",
	    "/v1/projects/" OTHER "/members/victim", "{\"role\":\"owner\"}");
	missing = fx_request(fx, world.token[A_OWNER], "PUT",
	    "/v1/projects/zz-other/members/victim", "{\"role\":\"owner\"}");
	assert_problem(hidden, 404, "not_found");
	assert_problem(missing, 404, "not_found");
	assert_string_equal(role_in(fx, OTHER, "victim"), "-");
	/*
	 * user names do not leak through the members endpoint: to an owner,
	 * an account it shares no project with answers exactly as a name
	 * nobody has (it was 404 versus 201)
	 */
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM users WHERE username = 'n-owner'"),
	    1);
	hidden = fx_request(fx, world.token[A_OWNER], "PUT", "/v1/projects/" OWN "/members/n-owner",
	    "{\"role\":\"viewer\"}");
	missing = fx_request(fx, world.token[A_OWNER], "PUT",
	    "/v1/projects/" OWN "/members/n-nobody", "{\"role\":\"viewer\"}");
	assert_problem(hidden, 404, "not_found");
	assert_problem(missing, 404, "not_found");
	assert_string_equal(fx_json_str(hidden->json, "detail"), "no such user: n-owner");
	assert_string_equal(fx_json_str(missing->json, "detail"), "no such user: n-nobody");
	assert_string_equal(fx_json_str(hidden->json, "title"),
	    fx_json_str(missing->json, "title"));
	assert_string_equal(role_in(fx, OWN, "n-owner"), "-");
	/* a user the owner does share a project with is found, as before */
	assert_string_equal(role_in(fx, OTHER, "t-owner"), "viewer");
	/* an unknown member of a hidden project does not leak either */
	hidden = fx_request(fx, world.token[A_OWNER], "DELETE",
	    "/v1/projects/" OTHER "/members/nobody", NULL);
	assert_problem(hidden, 404, "not_found");
	assert_string_equal(fx_json_str(hidden->json, "detail"), "no such project: " OTHER);
}

/* A change of global role applies to the very next request of an existing token. */
static void
test_role_change_next_request(void **state)
{
	struct fixture *fx = *state;
	const char *tok = fixture_create_user(fx, "promoted", "none");

	assert_problem(fx_request(fx, tok, "GET", "/v1/users", NULL), 403, "forbidden");
	assert_problem(fx_request(fx, tok, "GET", "/v1/projects/" OTHER, NULL), 404, "not_found");
	assert_status(fx_request(fx, fx->admin_token, "PATCH", "/v1/users/promoted",
			  "{\"role\":\"operator\"}"),
	    200);
	assert_status(fx_request(fx, tok, "GET", "/v1/projects/" OTHER, NULL), 200);
	assert_problem(fx_request(fx, tok, "PATCH", "/v1/projects/" OTHER,
			   "{\"display_name\":\"x\"}"),
	    403, "forbidden");
	assert_problem(fx_request(fx, tok, "GET", "/v1/users", NULL), 403, "forbidden");
	assert_status(fx_request(fx, fx->admin_token, "PATCH", "/v1/users/promoted",
			  "{\"role\":\"admin\"}"),
	    200);
	assert_status(fx_request(fx, tok, "GET", "/v1/users", NULL), 200);
	assert_status(fx_request(fx, tok, "GET", "/v1/audit", NULL), 200);
	assert_status(fx_request(fx, fx->admin_token, "PATCH", "/v1/users/promoted",
			  "{\"role\":\"none\"}"),
	    200);
	assert_problem(fx_request(fx, tok, "GET", "/v1/audit", NULL), 403, "forbidden");
	assert_problem(fx_request(fx, tok, "GET", "/v1/projects/" OTHER, NULL), 404, "not_found");
	assert_json_str(fx_request(fx, tok, "GET", "/v1/me", NULL)->json, "role", "none");
	/* an admin may not be demoted by a non-admin */
	assert_problem(fx_request(fx, tok, "PATCH", "/v1/users/" FIXTURE_ADMIN_USER,
			   "{\"role\":\"none\"}"),
	    403, "forbidden");
	assert_string_equal(fx_sql_text(fx, "SELECT role FROM users WHERE username = $1",
				FIXTURE_ADMIN_USER),
	    "admin");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_matrix),
		cmocka_unit_test(test_visibility),
		cmocka_unit_test(test_role_change_next_request),
	};

	return fixture_run_tests(tests);
}
