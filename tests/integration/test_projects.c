/*
 * test_projects.c - projects end to end: cursor pagination over many
 * projects, create/get/list, PATCH with If-Match (412 on a stale ETag),
 * Kubernetes namespaces (validation, one owner per namespace), members
 * (add, change, remove, last-owner protection), /v1/me, and the audit
 * log: one row per mutation, written in the mutation's transaction,
 * readable through GET /v1/audit with filters and pagination.
 *
 * Every refused request is followed by SQL showing that nothing changed.
 */
#include "fixture.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/json.h"

/* ---- helpers ---- */

/* Everything a project mutation could touch, as one comparable text. */
static const char *
state_of(struct fixture *fx)
{
	return fx_sql_text(fx,
	    "SELECT concat_ws(' | ', "
	    "(SELECT string_agg(concat_ws(',', id, name, display_name, generation, updated_at), ';' "
	    "  ORDER BY id) FROM projects), "
	    "(SELECT string_agg(concat_ws(',', project_id, namespace), ';' ORDER BY namespace) "
	    "  FROM project_namespaces), "
	    "(SELECT string_agg(concat_ws(',', project_id, user_id, role), ';' "
	    "  ORDER BY project_id, user_id) FROM project_members), "
	    "(SELECT count(*) FROM audit_log))");
}

static struct gp_client_response *
project_create(struct fixture *fx, const char *name, const char *namespaces_json)
{
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"%s\",\"display_name\":\"Project %s\",\"namespaces\":%s}", name, name,
	    namespaces_json ? namespaces_json : "[]");
	assert_status(r, 201);
	return r;
}

static void
member_put(struct fixture *fx, const char *token, const char *project, const char *user,
    const char *role, long status)
{
	struct gp_client_response *r;

	r = fx_request(fx, token, "PUT", fx_str(fx, "/v1/projects/%s/members/%s", project, user),
	    "{\"role\":\"%s\"}", role);
	assert_status(r, status);
	if (status < 300) {
		assert_json_str(r->json, "username", user);
		assert_json_str(r->json, "role", role);
	}
}

static const char *
member_role(struct fixture *fx, const char *project, const char *user)
{
	return fx_sql_text(fx,
	    "SELECT coalesce((SELECT m.role FROM project_members m "
	    "JOIN projects p ON p.id = m.project_id JOIN users u ON u.id = m.user_id "
	    "WHERE p.name = $1 AND u.username = $2), '-')",
	    project, user);
}

/* The errors[] of a problem names field. */
static void
assert_error_field(const struct gp_client_response *r, const char *field)
{
	struct json_object *errs = fx_json(r->json, "errors");
	size_t n = errs ? json_object_array_length(errs) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *f = fx_json(json_object_array_get_idx(errs, i), "field");

		if (f != NULL && strcmp(json_object_get_string(f), field) == 0)
			return;
	}
	fail_msg("no error for field %s in %s", field, r->body);
}

static int64_t
audit_count(struct fixture *fx)
{
	return fx_sql_int64(fx, "SELECT count(*) FROM audit_log");
}

/* ---- pagination ---- */

/*
 * 120 projects, limit=50: three pages of 50, 50 and 20, in id order,
 * each project exactly once; a project created while paging shows up
 * on a later page without disturbing the rest.
 */
static void
test_pagination(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *names[130], *expected;
	const char *path = "/v1/projects?limit=50";
	size_t sizes[8];
	int n = 0, pages = 0;

	for (int i = 0; i < 120; i++)
		project_create(fx, fx_str(fx, "page-%03d", i), NULL);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects"), 120);

	for (;;) {
		struct json_object *next;

		r = fx_request(fx, fx->admin_token, "GET", path, NULL);
		assert_status(r, 200);
		assert_true(pages < 8);
		sizes[pages] = fx_json_len(r->json, "items");
		for (size_t i = 0; i < sizes[pages]; i++) {
			assert_true(n < 130);
			names[n++] = fx_json_str(r->json, fx_str(fx, "items[%zu].name", i));
		}
		pages++;
		next = fx_json(r->json, "next_cursor");
		if (next == NULL)
			break;
		/* the cursor is opaque, not the last id in plain text */
		assert_string_not_equal(json_object_get_string(next),
		    fx_str(fx, "%lld",
			(long long)fx_json_int(r->json,
			    fx_str(fx, "items[%zu].id", sizes[pages - 1] - 1))));
		path = fx_str(fx, "/v1/projects?limit=50&cursor=%s", json_object_get_string(next));
		if (pages == 1)
			project_create(fx, "page-late", NULL);
	}
	assert_int_equal(pages, 3);
	assert_int_equal(sizes[0], 50);
	assert_int_equal(sizes[1], 50);
	assert_int_equal(sizes[2], 21);
	/* no duplicates, no gaps, the database's id order */
	expected = fx_sql_text(fx, "SELECT string_agg(name, ',' ORDER BY id) FROM projects");
	{
		char *got = arena_strdup(fx->arena, "");

		for (int i = 0; i < n; i++)
			got = arena_printf(fx->arena, "%s%s%s", got, i ? "," : "", names[i]);
		assert_string_equal(got, expected);
	}
	assert_string_equal(names[0], "page-000");
	assert_string_equal(names[119], "page-119");
	assert_string_equal(names[120], "page-late");

	/* default 50, limit 500 takes everything, limit 1 walks one by one */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 50);
	assert_non_null(fx_json(r->json, "next_cursor"));
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?limit=500", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 121);
	assert_json_null(r->json, "next_cursor");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?limit=1", NULL);
	assert_json_str(r->json, "items[0].name", "page-000");
	r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/projects?limit=1&cursor=%s", fx_json_str(r->json, "next_cursor")),
	    NULL);
	assert_json_str(r->json, "items[0].name", "page-001");
	/* the last page exactly full: no next cursor promising an empty page */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects?limit=121", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 121);
	assert_json_null(r->json, "next_cursor");

	/* bad limits and cursors */
	{
		static const char *const bad_limit[] = { "0", "501", "abc", "-1", "1.5", "", "+5",
			" 5", "99999999999999999999" };
		static const char *const bad_cursor[] = { "abc", "c", "czz", "c-1", "",
			"c8000000000000000", "1" };

		for (size_t i = 0; i < sizeof(bad_limit) / sizeof(bad_limit[0]); i++) {
			char esc[64];

			assert_int_equal(gp_client_escape(bad_limit[i], esc, sizeof(esc)), 0);
			r = fx_request(fx, fx->admin_token, "GET",
			    fx_str(fx, "/v1/projects?limit=%s", esc), NULL);
			assert_problem(r, 422, "validation_failed");
			assert_error_field(r, "limit");
		}
		for (size_t i = 0; i < sizeof(bad_cursor) / sizeof(bad_cursor[0]); i++) {
			r = fx_request(fx, fx->admin_token, "GET",
			    fx_str(fx, "/v1/projects?cursor=%s", bad_cursor[i]), NULL);
			assert_problem(r, 422, "validation_failed");
			assert_error_field(r, "cursor");
		}
	}

	/* a member pages through only its own projects */
	{
		const char *tok = fixture_create_user(fx, "pager", "none");

		member_put(fx, fx->admin_token, "page-010", "pager", "viewer", 201);
		member_put(fx, fx->admin_token, "page-090", "pager", "member", 201);
		member_put(fx, fx->admin_token, "page-050", "pager", "owner", 201);
		r = fx_request(fx, tok, "GET", "/v1/projects?limit=2", NULL);
		assert_status(r, 200);
		assert_int_equal(fx_json_len(r->json, "items"), 2);
		assert_json_str(r->json, "items[0].name", "page-010");
		assert_json_str(r->json, "items[1].name", "page-050");
		r = fx_request(fx, tok, "GET",
		    fx_str(fx, "/v1/projects?limit=2&cursor=%s",
			fx_json_str(r->json, "next_cursor")),
		    NULL);
		assert_int_equal(fx_json_len(r->json, "items"), 1);
		assert_json_str(r->json, "items[0].name", "page-090");
		assert_json_null(r->json, "next_cursor");
	}
}

/* ---- create and get ---- */

static void
test_create_get(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r, *g;
	int64_t audit_before = audit_count(fx);
	const char *id;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"alpha\",\"display_name\":\"Alpha team\","
	    "\"namespaces\":[\"alpha-prod\",\"alpha-dev\"]}");
	assert_status(r, 201);
	assert_json_str(r->json, "name", "alpha");
	assert_json_str(r->json, "display_name", "Alpha team");
	assert_int_equal(fx_json_len(r->json, "namespaces"), 2);
	assert_json_str(r->json, "namespaces[0]", "alpha-dev");
	assert_json_str(r->json, "namespaces[1]", "alpha-prod");
	assert_json_int(r->json, "generation", 1);
	assert_string_equal(r->etag, "\"1\"");
	assert_string_equal(r->location, "/v1/projects/alpha");
	id = fx_str(fx, "%lld", (long long)fx_json_int(r->json, "id"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM projects WHERE id = $1::bigint "
			     "AND name = 'alpha' AND display_name = 'Alpha team' AND generation = 1",
			     id),
	    1);
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(namespace, ',' ORDER BY namespace) "
				"FROM project_namespaces WHERE project_id = $1::bigint",
				id),
	    "alpha-dev,alpha-prod");
	/* one audit row, in the same request, with the created object */
	assert_int_equal(audit_count(fx), audit_before + 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'project.create' AND object_type = 'project' "
			     "AND object_id = 'alpha' AND project_id = $1::bigint AND actor = $2 AND before IS NULL "
			     "AND after->>'display_name' = 'Alpha team' AND after->'namespaces' = "
			     "'[\"alpha-dev\",\"alpha-prod\"]'::jsonb AND request_id = $3",
			     id, FIXTURE_ADMIN_USER, r->request_id),
	    1);

	g = fx_request(fx, fx->admin_token, "GET", "/v1/projects/alpha", NULL);
	assert_status(g, 200);
	assert_string_equal(g->body, r->body);
	assert_string_equal(g->etag, "\"1\"");

	/* defaults: display_name is the name, no namespaces */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects", "{\"name\":\"beta\"}");
	assert_status(r, 201);
	assert_json_str(r->json, "display_name", "beta");
	assert_int_equal(fx_json_len(r->json, "namespaces"), 0);

	assert_problem(fx_request(fx, fx->admin_token, "GET", "/v1/projects/gamma", NULL), 404,
	    "not_found");
}

static void
test_create_refused(void **state)
{
	struct fixture *fx = *state;
	static const struct {
		const char *body;
		long status;
		const char *code;
		const char *field;
	} cases[] = {
		{ "{}", 422, "validation_failed", "name" },
		{ "{\"name\":\"\"}", 422, "validation_failed", "name" },
		{ "{\"name\":\"Upper\"}", 422, "validation_failed", "name" },
		{ "{\"name\":\"-lead\"}", 422, "validation_failed", "name" },
		{ "{\"name\":\"trail-\"}", 422, "validation_failed", "name" },
		{ "{\"name\":\"under_score\"}", 422, "validation_failed", "name" },
		{ "{\"name\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
		    422, "validation_failed", "name" },
		{ "{\"name\":7}", 422, "validation_failed", "name" },
		{ "{\"name\":\"ok-name\",\"display_name\":\"\"}", 422, "validation_failed",
		    "display_name" },
		{ "{\"name\":\"ok-name\",\"namespaces\":\"ns\"}", 422, "validation_failed",
		    "namespaces" },
		{ "{\"name\":\"ok-name\",\"namespaces\":[\"Bad_NS\"]}", 422, "validation_failed",
		    "namespaces[0]" },
		{ "{\"name\":\"ok-name\",\"namespaces\":[\"ok-ns\",\"-bad\"]}", 422,
		    "validation_failed", "namespaces[1]" },
		{ "{\"name\":\"ok-name\",\"namespaces\":[\"dup\",\"dup\"]}", 422,
		    "validation_failed", "namespaces[1]" },
		{ "{\"name\":\"ok-name\",\"namespaces\":[3]}", 422, "validation_failed",
		    "namespaces[0]" },
		/* a non-string before a string: the duplicate check must not read it as one */
		{ "{\"name\":\"ok-name\",\"namespaces\":[null,\"ns-a\"]}", 422, "validation_failed",
		    "namespaces[0]" },
		{ "{\"name\":\"ok-name\",\"namespaces\":[7,{},\"ns-a\",\"ns-a\"]}", 422,
		    "validation_failed", "namespaces[0]" },
		{ "{\"name\":\"ok-name\",\"owner\":\"x\"}", 422, "validation_failed", "owner" },
		/* alpha exists (test_create_get) */
		{ "{\"name\":\"alpha\"}", 409, "conflict", NULL },
		/* alpha-dev belongs to alpha: the project row is rolled back too */
		{ "{\"name\":\"ok-name\",\"namespaces\":[\"fresh-ns\",\"alpha-dev\"]}", 409,
		    "conflict", "namespaces" },
	};
	const char *before = state_of(fx);
	struct gp_client_response *r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = fx_request(fx, fx->admin_token, "POST", "/v1/projects", "%s", cases[i].body);
		if (r->status != cases[i].status)
			print_error("case %zu: %s\n", i, cases[i].body);
		assert_problem(r, cases[i].status, cases[i].code);
		if (cases[i].field != NULL)
			assert_error_field(r, cases[i].field);
		assert_string_equal(state_of(fx), before);
	}
	/* 65 namespaces is over the limit */
	{
		char *list = arena_strdup(fx->arena, "");

		for (int i = 0; i < 65; i++)
			list = arena_printf(fx->arena, "%s%s\"many-%d\"", list, i ? "," : "", i);
		r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
		    "{\"name\":\"many\",\"namespaces\":[%s]}", list);
		assert_problem(r, 422, "validation_failed");
		assert_error_field(r, "namespaces");
		assert_string_equal(state_of(fx), before);
	}
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name = 'ok-name'"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM project_namespaces WHERE namespace = 'fresh-ns'"),
	    0);
}

/* ---- PATCH and If-Match ---- */

static void
test_patch_if_match(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *before;
	int64_t audit_before;

	project_create(fx, "delta", "[\"delta-a\"]");
	project_create(fx, "omega", "[\"omega-a\"]");

	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/delta", NULL);
	assert_string_equal(r->etag, "\"1\"");

	audit_before = audit_count(fx);
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    ((const char *[]){ "If-Match: \"1\"", NULL }), "{\"display_name\":\"Delta v2\"}");
	assert_status(r, 200);
	assert_json_str(r->json, "display_name", "Delta v2");
	assert_json_int(r->json, "generation", 2);
	assert_string_equal(r->etag, "\"2\"");
	assert_json_str(r->json, "namespaces[0]", "delta-a"); /* untouched */
	assert_int_equal(audit_count(fx), audit_before + 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'project.update' AND object_id = 'delta' "
			     "AND (before->>'generation')::int = 1 AND (after->>'generation')::int = 2 "
			     "AND before->>'display_name' = 'Project delta' AND after->>'display_name' = 'Delta v2' "
			     "AND request_id = $1",
			     r->request_id),
	    1);

	/* the stale ETag: 412 and nothing changes, no audit row */
	before = state_of(fx);
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    ((const char *[]){ "If-Match: \"1\"", NULL }),
	    "{\"display_name\":\"lost update\",\"namespaces\":[\"lost\"]}");
	assert_problem(r, 412, "precondition_failed");
	assert_string_equal(state_of(fx), before);
	assert_int_equal(fx_sql_int64(fx, "SELECT generation FROM projects WHERE name = 'delta'"),
	    2);
	assert_string_equal(fx_sql_text(fx,
				"SELECT display_name FROM projects WHERE name = 'delta'"),
	    "Delta v2");
	/* ETags this server never issued */
	{
		static const char *const junk[] = { "If-Match: 2", "If-Match: \"\"",
			"If-Match: \"two\"", "If-Match: \"0\"", "If-Match: \"-2\"",
			"If-Match: \"3\"", "If-Match: \"2", "If-Match: W/\"1\"" };

		for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++) {
			r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
			    ((const char *[]){ junk[i], NULL }), "{\"display_name\":\"junk\"}");
			assert_problem(r, 412, "precondition_failed");
			assert_string_equal(state_of(fx), before);
		}
	}
	/* a weak form of the current ETag never matches If-Match (RFC 9110 13.1.1) */
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    ((const char *[]){ "If-Match: W/\"2\"", NULL }),
	    "{\"namespaces\":[\"delta-b\",\"delta-a\"]}");
	assert_problem(r, 412, "precondition_failed");
	assert_string_equal(state_of(fx), before);
	/* the strong form and "*" match */
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    ((const char *[]){ "If-Match: \"2\"", NULL }),
	    "{\"namespaces\":[\"delta-b\",\"delta-a\"]}");
	assert_status(r, 200);
	assert_string_equal(r->etag, "\"3\"");
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(namespace, ',' ORDER BY namespace) "
				"FROM project_namespaces n JOIN projects p ON p.id = n.project_id "
				"WHERE p.name = 'delta'"),
	    "delta-a,delta-b");
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    ((const char *[]){ "If-Match: *", NULL }), "{\"namespaces\":[]}");
	assert_status(r, 200);
	assert_string_equal(r->etag, "\"4\"");
	assert_int_equal(fx_json_len(r->json, "namespaces"), 0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM project_namespaces n JOIN projects p "
			     "ON p.id = n.project_id WHERE p.name = 'delta'"),
	    0);
	/* without If-Match the write is unconditional */
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    "{\"display_name\":\"Delta\",\"namespaces\":[\"delta-c\"]}");
	assert_status(r, 200);
	assert_string_equal(r->etag, "\"5\"");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/delta", NULL);
	assert_string_equal(r->etag, "\"5\"");
	assert_json_int(r->json, "generation", 5);

	/* refused patches change nothing, generation included */
	before = state_of(fx);
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    ((const char *[]){ "If-Match: \"5\"", NULL }), "{\"namespaces\":[\"omega-a\"]}");
	assert_problem(r, 409, "conflict");
	assert_error_field(r, "namespaces");
	assert_string_equal(state_of(fx), before);
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    "{\"name\":\"renamed\"}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "name");
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    "{\"display_name\":\"\"}");
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    "{\"namespaces\":[\"A\"]}");
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/delta", "{\"display_name\":5}");
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/no-such",
	    "{\"display_name\":\"x\"}");
	assert_problem(r, 404, "not_found");
	assert_string_equal(state_of(fx), before);
	assert_int_equal(fx_sql_int64(fx, "SELECT generation FROM projects WHERE name = 'delta'"),
	    5);

	/* a namespace released by one project can be claimed by another */
	assert_status(fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/omega",
			  "{\"namespaces\":[]}"),
	    200);
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    "{\"namespaces\":[\"omega-a\"]}");
	assert_status(r, 200);
	assert_string_equal(fx_sql_text(fx,
				"SELECT p.name FROM project_namespaces n JOIN projects p "
				"ON p.id = n.project_id WHERE n.namespace = 'omega-a'"),
	    "delta");
	/* and a project may list the namespaces it already has */
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/delta",
	    "{\"namespaces\":[\"omega-a\",\"delta-d\"]}");
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "namespaces"), 2);
}

/* ---- members ---- */

static void
test_members(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *own1, *own2, *mem, *view, *before;

	own1 = fixture_create_user(fx, "m-own1", "none");
	own2 = fixture_create_user(fx, "m-own2", "none");
	mem = fixture_create_user(fx, "m-mem", "none");
	view = fixture_create_user(fx, "m-view", "none");
	fixture_create_user(fx, "m-new", "none");
	project_create(fx, "team", NULL);

	/* admin adds the first owner: 201, then the same PUT is 200 */
	member_put(fx, fx->admin_token, "team", "m-own1", "owner", 201);
	member_put(fx, fx->admin_token, "team", "m-own1", "owner", 200);
	/*
	 * an owner sees only the users it shares a project with: any other
	 * name answers as a name nobody has (no user-name enumeration)
	 */
	before = state_of(fx);
	r = fx_request(fx, own1, "PUT", "/v1/projects/team/members/m-mem", "{\"role\":\"member\"}");
	assert_problem(r, 404, "not_found");
	assert_string_equal(fx_json_str(r->json, "detail"), "no such user: m-mem");
	r = fx_request(fx, own1, "PUT", "/v1/projects/team/members/m-nobody",
	    "{\"role\":\"member\"}");
	assert_problem(r, 404, "not_found");
	assert_string_equal(fx_json_str(r->json, "detail"), "no such user: m-nobody");
	assert_string_equal(state_of(fx), before);
	/* admin brings users in; then the owner manages their membership */
	member_put(fx, fx->admin_token, "team", "m-mem", "viewer", 201);
	member_put(fx, fx->admin_token, "team", "m-view", "viewer", 201);
	member_put(fx, own1, "team", "m-mem", "member", 200);
	member_put(fx, own1, "team", "m-view", "viewer", 200);
	assert_string_equal(member_role(fx, "team", "m-mem"), "member");
	assert_string_equal(member_role(fx, "team", "m-view"), "viewer");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log l JOIN projects p ON p.id = l.project_id "
			     "WHERE p.name = 'team' AND l.action = 'project.member.put' "
			     "AND l.object_id = 'team/m-mem' AND l.actor = 'm-own1' "
			     "AND l.before = '{\"username\":\"m-mem\",\"role\":\"viewer\"}'::jsonb "
			     "AND l.after = '{\"username\":\"m-mem\",\"role\":\"member\"}'::jsonb"),
	    1);

	r = fx_request(fx, view, "GET", "/v1/projects/team/members", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 3);
	assert_json_str(r->json, "items[0].username", "m-own1");
	assert_json_str(r->json, "items[0].role", "owner");
	assert_json_str(r->json, "items[1].username", "m-mem");
	assert_json_str(r->json, "items[2].username", "m-view");
	assert_json_str(r->json, "items[2].role", "viewer");
	r = fx_request(fx, view, "GET", "/v1/projects/team/members?limit=2", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 2);
	r = fx_request(fx, view, "GET",
	    fx_str(fx, "/v1/projects/team/members?limit=2&cursor=%s",
		fx_json_str(r->json, "next_cursor")),
	    NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].username", "m-view");
	assert_json_null(r->json, "next_cursor");

	/* /v1/me shows the project with each user's role */
	r = fx_request(fx, mem, "GET", "/v1/me", NULL);
	assert_json_str(r->json, "projects[0].name", "team");
	assert_json_str(r->json, "projects[0].role", "member");
	r = fx_request(fx, own1, "GET", "/v1/me", NULL);
	assert_json_str(r->json, "projects[0].role", "owner");

	/* members and viewers may not manage members; nothing changes */
	before = state_of(fx);
	member_put(fx, mem, "team", "m-new", "viewer", 403);
	member_put(fx, mem, "team", "m-view", "owner", 403);
	member_put(fx, view, "team", "m-view", "owner", 403);
	assert_status(fx_request(fx, mem, "DELETE", "/v1/projects/team/members/m-view", NULL), 403);
	assert_status(fx_request(fx, view, "DELETE", "/v1/projects/team/members/m-own1", NULL),
	    403);
	/* bad input */
	r = fx_request(fx, own1, "PUT", "/v1/projects/team/members/m-new", "{\"role\":\"admin\"}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "role");
	r = fx_request(fx, own1, "PUT", "/v1/projects/team/members/m-new", "{}");
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, own1, "PUT", "/v1/projects/team/members/m-new",
	    "{\"role\":\"viewer\",\"x\":1}");
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, own1, "PUT", "/v1/projects/team/members/nobody",
	    "{\"role\":\"viewer\"}");
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, own1, "DELETE", "/v1/projects/team/members/m-new", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, own1, "PUT", "/v1/projects/nope/members/m-new", "{\"role\":\"viewer\"}");
	assert_problem(r, 404, "not_found");
	assert_string_equal(state_of(fx), before);

	/* change a role, then remove */
	member_put(fx, own1, "team", "m-mem", "viewer", 200);
	assert_string_equal(member_role(fx, "team", "m-mem"), "viewer");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'project.member.put' "
			     "AND object_id = 'team/m-mem' AND before->>'role' = 'member' AND after->>'role' = 'viewer'"),
	    1);
	r = fx_request(fx, own1, "DELETE", "/v1/projects/team/members/m-mem", NULL);
	assert_status(r, 204);
	assert_string_equal(member_role(fx, "team", "m-mem"), "-");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'project.member.remove' "
			     "AND object_id = 'team/m-mem' AND before->>'role' = 'viewer' AND after IS NULL"),
	    1);
	/* the removed member no longer sees the project */
	assert_problem(fx_request(fx, mem, "GET", "/v1/projects/team", NULL), 404, "not_found");
	r = fx_request(fx, mem, "GET", "/v1/me", NULL);
	assert_int_equal(fx_json_len(r->json, "projects"), 0);
	assert_problem(fx_request(fx, own1, "DELETE", "/v1/projects/team/members/m-mem", NULL), 404,
	    "not_found");

	/* the last owner can neither step down nor leave */
	before = state_of(fx);
	r = fx_request(fx, own1, "PUT", "/v1/projects/team/members/m-own1",
	    "{\"role\":\"member\"}");
	assert_problem(r, 409, "conflict");
	r = fx_request(fx, own1, "DELETE", "/v1/projects/team/members/m-own1", NULL);
	assert_problem(r, 409, "conflict");
	assert_string_equal(state_of(fx), before);
	assert_string_equal(member_role(fx, "team", "m-own1"), "owner");
	/* with a second owner, the first may leave; then the second is the last */
	member_put(fx, fx->admin_token, "team", "m-own2", "viewer", 201);
	member_put(fx, own1, "team", "m-own2", "owner", 200);
	r = fx_request(fx, own1, "DELETE", "/v1/projects/team/members/m-own1", NULL);
	assert_status(r, 204);
	assert_problem(fx_request(fx, own1, "GET", "/v1/projects/team", NULL), 404, "not_found");
	before = state_of(fx);
	r = fx_request(fx, own2, "PUT", "/v1/projects/team/members/m-own2",
	    "{\"role\":\"viewer\"}");
	assert_problem(r, 409, "conflict");
	assert_string_equal(state_of(fx), before);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM project_members m JOIN projects p "
			     "ON p.id = m.project_id WHERE p.name = 'team' AND m.role = 'owner'"),
	    1);
}

/* One request on its own gp_client, for a thread. */
struct caller {
	const char *base_url;
	const char *token;
	const char *method;
	const char *path;
	long status;
	char code[64];
};

static void *
caller_main(void *arg)
{
	struct caller *c = arg;
	struct gp_client *cl = gp_client_create(c->base_url, c->token);
	struct gp_client_response r;

	c->status = -1;
	if (cl == NULL)
		return NULL;
	gp_client_set_timeouts(cl, 30000, 5000);
	if (gp_client_request(cl, c->method, c->path, NULL, 0, NULL, &r) == 0) {
		struct json_object *code = gp_client_json_get(r.json, "code");

		c->status = r.status;
		snprintf(c->code, sizeof(c->code), "%s", code ? json_object_get_string(code) : "");
	}
	gp_client_response_free(&r);
	gp_client_destroy(cl);
	return NULL;
}

/*
 * Two owners remove each other at the same time. Each checks that an
 * owner remains after its own change; run side by side, each sees the
 * other's row still there. The test holds both transactions after that
 * check (a lock on audit_log) and lets them commit together: at most
 * one may succeed, the project keeps an owner.
 */
static void
test_last_owner_race(void **state)
{
	struct fixture *fx = *state;
	const char *t1, *t2;
	struct caller c[2];
	pthread_t th[2];
	int waited = 0, ok = 0, refused = 0;

	t1 = fixture_create_user(fx, "race-own1", "none");
	t2 = fixture_create_user(fx, "race-own2", "none");
	project_create(fx, "race-team", NULL);
	member_put(fx, fx->admin_token, "race-team", "race-own1", "owner", 201);
	member_put(fx, fx->admin_token, "race-team", "race-own2", "owner", 201);

	c[0] = (struct caller){ .base_url = fx->server->base_url,
		.token = t1,
		.method = "DELETE",
		.path = "/v1/projects/race-team/members/race-own2" };
	c[1] = (struct caller){ .base_url = fx->server->base_url,
		.token = t2,
		.method = "DELETE",
		.path = "/v1/projects/race-team/members/race-own1" };
	fx_sql_exec(fx, "BEGIN");
	fx_sql_exec(fx, "LOCK TABLE audit_log IN SHARE ROW EXCLUSIVE MODE");
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, caller_main, &c[i]), 0);
	/* both wait for the lock, or one already gave up (a server that
	 * serializes the two checks may refuse one before the lock) */
	while (fx_sql_int64(fx,
		   "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
		   "AND datname = current_database()") < 2) {
		if (++waited > 1000)
			break;
		nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000000L }, NULL);
	}
	if (waited > 1000)
		print_message("only one request reached the lock\n");
	fx_sql_exec(fx, "COMMIT");
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);

	for (int i = 0; i < 2; i++) {
		if (c[i].status == 204) {
			ok++;
		} else {
			/* 409 when it sees the other's removal as it checks the owners,
			 * 404 when it sees it already as it checks its own access */
			bool conflict = c[i].status == 409 && strcmp(c[i].code, "conflict") == 0;
			bool gone = c[i].status == 404 && strcmp(c[i].code, "not_found") == 0;

			if (!conflict && !gone)
				print_error("%s: %ld %s\n", c[i].path, c[i].status, c[i].code);
			assert_true(conflict || gone);
			refused++;
		}
	}
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM project_members m JOIN projects p "
			     "ON p.id = m.project_id WHERE p.name = 'race-team' AND m.role = 'owner'"),
	    1);
	assert_int_equal(ok, 1);
	assert_int_equal(refused, 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'project.member.remove' "
			     "AND object_id LIKE 'race-team/%'"),
	    1);
}

/* ---- audit ---- */

static void
test_audit_api(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r, *c1, *c2, *p1;
	const char *tok;
	int64_t total;

	tok = fixture_create_user(fx, "auditee", "none");
	c1 = project_create(fx, "aud-one", NULL);
	c2 = project_create(fx, "aud-two", NULL);
	member_put(fx, fx->admin_token, "aud-one", "auditee", "owner", 201);
	p1 = fx_request(fx, tok, "PATCH", "/v1/projects/aud-one",
	    "{\"display_name\":\"by auditee\"}");
	assert_status(p1, 200);

	/* filter by action: newest first */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?action=project.create&limit=2", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 2);
	assert_json_str(r->json, "items[0].object_id", "aud-two");
	assert_json_str(r->json, "items[0].project", "aud-two");
	assert_json_str(r->json, "items[0].actor", FIXTURE_ADMIN_USER);
	assert_json_str(r->json, "items[0].object_type", "project");
	assert_json_str(r->json, "items[0].request_id", c2->request_id);
	assert_json_null(r->json, "items[0].before");
	assert_json_str(r->json, "items[0].after.name", "aud-two");
	assert_json_str(r->json, "items[1].object_id", "aud-one");
	assert_json_str(r->json, "items[1].request_id", c1->request_id);
	assert_true(fx_json_int(r->json, "items[0].id") > fx_json_int(r->json, "items[1].id"));

	/* filter by actor: all of the user's rows (its login included), newest first */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?actor=auditee", NULL);
	assert_status(r, 200);
	assert_int_equal((int64_t)fx_json_len(r->json, "items"),
	    fx_sql_int64(fx, "SELECT count(*) FROM audit_log WHERE actor = 'auditee'"));
	assert_true(fx_json_len(r->json, "items") >= 1);
	for (size_t i = 0; i < fx_json_len(r->json, "items"); i++)
		assert_json_str(r->json, fx_str(fx, "items[%zu].actor", i), "auditee");
	assert_json_str(r->json, "items[0].action", "project.update");
	assert_json_str(r->json, "items[0].before.display_name", "Project aud-one");
	assert_json_str(r->json, "items[0].after.display_name", "by auditee");
	assert_json_str(r->json, "items[0].request_id", p1->request_id);

	/* filter by project: create, member put, update, newest first */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?project=aud-one", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 3);
	assert_json_str(r->json, "items[0].action", "project.update");
	assert_json_str(r->json, "items[1].action", "project.member.put");
	assert_json_str(r->json, "items[1].object_id", "aud-one/auditee");
	assert_json_str(r->json, "items[2].action", "project.create");
	r = fx_request(fx, fx->admin_token, "GET",
	    "/v1/audit?project=aud-one&action=project.create", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?project=aud-one&actor=auditee", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].action", "project.update");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?actor=auditee&action=project.update",
	    NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?project=no-such-project", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	r = fx_request(fx, fx->admin_token, "GET",
	    "/v1/audit?object_type=project_member&object_id=aud-one/auditee", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	/* a time window that holds nothing, and one that holds everything */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/audit?until=2000-01-01T00:00:00Z", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	r = fx_request(fx, fx->admin_token, "GET",
	    "/v1/audit?since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z&limit=500", NULL);
	total = fx_sql_int64(fx, "SELECT count(*) FROM audit_log");
	assert_true(total <= 500);
	assert_int_equal((int64_t)fx_json_len(r->json, "items"), total);

	/* page through everything, 7 at a time: exactly the table, newest first */
	{
		const char *path = "/v1/audit?limit=7";
		char *got = arena_strdup(fx->arena, "");
		int pages = 0;

		for (;;) {
			struct json_object *next;
			size_t n;

			r = fx_request(fx, fx->admin_token, "GET", path, NULL);
			assert_status(r, 200);
			n = fx_json_len(r->json, "items");
			assert_true(n <= 7);
			for (size_t i = 0; i < n; i++)
				got = arena_printf(fx->arena, "%s%s%lld", got, got[0] ? "," : "",
				    (long long)fx_json_int(r->json,
					fx_str(fx, "items[%zu].id", i)));
			pages++;
			assert_true(pages < 200);
			next = fx_json(r->json, "next_cursor");
			if (next == NULL)
				break;
			path =
			    fx_str(fx, "/v1/audit?limit=7&cursor=%s", json_object_get_string(next));
		}
		assert_string_equal(got,
		    fx_sql_text(fx,
			"SELECT string_agg(id::text, ',' ORDER BY id DESC) "
			"FROM audit_log"));
	}

	assert_problem(fx_request(fx, fx->admin_token, "GET", "/v1/audit?limit=0", NULL), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, fx->admin_token, "GET", "/v1/audit?limit=501", NULL), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, fx->admin_token, "GET", "/v1/audit?cursor=x1", NULL), 422,
	    "validation_failed");
	assert_problem(fx_request(fx, fx->admin_token, "GET", "/v1/audit?since=yesterday", NULL),
	    422, "validation_failed");
	assert_problem(fx_request(fx, tok, "GET", "/v1/audit", NULL), 403, "forbidden");
}

/*
 * The audit row is written in the mutation's transaction: when writing
 * it fails, the mutation is rolled back. A trigger makes the audit
 * insert fail for one object.
 */
static void
test_audit_same_transaction(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *before;

	project_create(fx, "doomed", "[\"doomed-a\"]");
	fixture_create_user(fx, "d-user", "none");
	member_put(fx, fx->admin_token, "doomed", "d-user", "viewer", 201);
	fx_sql_exec(fx,
	    "CREATE FUNCTION test_audit_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ "
	    "BEGIN RAISE EXCEPTION 'audit refused for %', NEW.object_id; END $$");
	fx_sql_exec(fx,
	    "CREATE TRIGGER test_audit_refuse BEFORE INSERT ON audit_log FOR EACH ROW "
	    "WHEN (NEW.object_id LIKE 'doomed%' OR NEW.object_id LIKE 'doomed2%') "
	    "EXECUTE FUNCTION test_audit_refuse()");

	before = state_of(fx);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"doomed2\",\"namespaces\":[\"d2\"]}");
	assert_true(r->status >= 500);
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/doomed",
	    "{\"display_name\":\"never\",\"namespaces\":[\"doomed-b\"]}");
	assert_true(r->status >= 500);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/doomed/members/d-user",
	    "{\"role\":\"owner\"}");
	assert_true(r->status >= 500);
	r = fx_request(fx, fx->admin_token, "DELETE", "/v1/projects/doomed/members/d-user", NULL);
	assert_true(r->status >= 500);
	assert_string_equal(state_of(fx), before);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name = 'doomed2'"),
	    0);
	assert_int_equal(fx_sql_int64(fx, "SELECT generation FROM projects WHERE name = 'doomed'"),
	    1);
	assert_string_equal(member_role(fx, "doomed", "d-user"), "viewer");

	fx_sql_exec(fx, "DROP TRIGGER test_audit_refuse ON audit_log");
	fx_sql_exec(fx, "DROP FUNCTION test_audit_refuse()");
	/* the same requests now go through, each with its audit row */
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/projects/doomed",
	    "{\"display_name\":\"saved\",\"namespaces\":[\"doomed-b\"]}");
	assert_status(r, 200);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE object_id = 'doomed' "
			     "AND action = 'project.update'"),
	    1);
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
		cmocka_unit_test(test_pagination),
		cmocka_unit_test(test_create_get),
		cmocka_unit_test(test_create_refused),
		cmocka_unit_test(test_patch_if_match),
		cmocka_unit_test(test_members),
		cmocka_unit_test(test_last_owner_race),
		cmocka_unit_test(test_audit_api),
		cmocka_unit_test(test_audit_same_transaction),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
