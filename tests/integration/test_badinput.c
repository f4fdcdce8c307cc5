/*
 * test_badinput.c - a table of hostile and malformed requests against
 * the real server: broken JSON, trailing garbage, wrong types, unknown
 * and missing fields, oversized and over-deep bodies, invalid UTF-8,
 * non-object bodies, wrong or missing Content-Type, bad bearer tokens,
 * unknown routes and methods. Every case must answer its status as an
 * RFC 9457 problem with the expected stable code (and field paths for
 * validation failures); afterwards the database must be exactly as it
 * was and the server must still be healthy. Also X-Request-Id handling.
 *
 * Requests go over raw sockets (rawhttp.c) so that every byte sent and
 * every header received is under the test's control.
 */
#include "fixture.h"
#include "rawhttp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json.h"
#include "core/timeutil.h"

#define BI_PROJECT "bi-proj"
#define BI_USER "bi-user"
#define RAW_TIMEOUT_MS 15000
#define MIB (1024 * 1024)

/*
 * Everything in the public schema, table by table: row count and a
 * digest of the rows (tokens.last_used_at left out: authenticating
 * may touch it, by design), so any write at all shows up.
 */
static const char snapshot_sql[] =
    "SELECT string_agg(c.relname || ' ' || query_to_xml(format("
    "  'SELECT count(*) AS n, coalesce(md5(string_agg((to_jsonb(t) - ''last_used_at'')::text, "
    "   '','' ORDER BY (to_jsonb(t) - ''last_used_at'')::text)), '''') AS digest FROM %I.%I t',"
    "  n.nspname, c.relname), false, true, '')::text, E'\\n' ORDER BY c.relname) "
    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p')";

enum bi_token {
	TOK_ADMIN,   /* the fixture's admin */
	TOK_NONE,    /* no Authorization header */
	TOK_USER,    /* BI_USER, global role none */
	TOK_EXPIRED, /* an API token past its expires_at */
	TOK_REVOKED, /* an API token deleted through the API */
	TOK_RAW,     /* auth verbatim as the Authorization value */
};

enum bi_body {
	BODY_TEXT,           /* body as given (body_len or strlen) */
	BODY_NONE,           /* no body at all */
	BODY_BIG,            /* a 2 MiB JSON object, with Content-Length */
	BODY_BIG_CHUNKED,    /* the same, chunked, no Content-Length */
	BODY_LIMIT_PLUS_ONE, /* 1 MiB + 1 byte */
	BODY_LIMIT_EXACT,    /* exactly 1 MiB: accepted, then rejected by validation */
	BODY_DEEP_64,        /* JSON nested 64 levels */
	BODY_DEEP_17,        /* one level past the limit of 16 */
	BODY_DEEP_16,        /* exactly at the limit: parses, fails validation */
};

struct bi_case {
	const char *name;
	const char *method;
	const char *path;
	enum bi_token tok;
	const char *auth;         /* TOK_RAW */
	const char *content_type; /* NULL: application/json when there is a body; "" none */
	enum bi_body kind;
	const char *body;
	size_t body_len;    /* 0: strlen(body) */
	const char *header; /* one more "Name: value", or NULL */
	int status;
	const char *code;
	const char *field;       /* an errors[].field that must be listed */
	const char *field2;      /* and another one */
	const char *want_header; /* a response header that must be present ... */
	const char *want_value;  /* ... and contain this */
};

#define P_PROJECTS "/v1/projects"
#define P_PROJECT "/v1/projects/" BI_PROJECT
#define P_MEMBER "/v1/projects/" BI_PROJECT "/members/" BI_USER
#define P_TOKENS "/v1/tokens"
#define P_USERS "/v1/users"
#define P_LOGIN "/v1/auth/login"

static const struct bi_case cases[] = {
	/* ---- POST /v1/projects ---- */
	{ .name = "projects: truncated JSON",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: trailing comma",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: single quotes",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{'name':'bi-a'}",
	    .status = 400,
	    .code = "malformed_json" },
	/* json-c's strict mode takes these; RFC 8259 does not (core/json.c refuses them) */
	{ .name = "projects: single-quoted member name",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{'name':1}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: raw control character in a string",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi\ra\"}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: NaN",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",\"x\":NaN}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: -Infinity",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",\"x\":-Infinity}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: comment",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\" /* c */}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: trailing garbage",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\"} x",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: two objects",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\"}{\"name\":\"bi-b\"}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: trailing NUL byte",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\"}\0",
	    .body_len = 16,
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: name twice",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",\"name\":\"bi-b\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: name twice, after other members",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",\"display_name\":\"x\",\"name\":\"bi-a\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: a key twice inside a nested object",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",\"x\":[1,{\"k\":1,\"j\":{},\"k\":2}]}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "x[1].k" },
	{ .name = "projects: NUL in a member name (json-c would keep \"name\")",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\\u0000\":\"bi-nul\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name\\u0000" },
	{ .name = "projects: NUL in a member name after a valid one",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-nul\",\"display_name\\u0000x\":\"y\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "display_name\\u0000x" },
	{ .name = "projects: NUL in a nested member name",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-nul\",\"x\":{\"a\\u0000\":1}}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "x.a\\u0000" },
	{ .name = "projects: name is a number",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":42}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: name is an object",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":{\"x\":1}}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: namespaces is an object",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",\"namespaces\":{\"a\":1}}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "namespaces" },
	{ .name = "projects: namespaces[1] is a number",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",\"namespaces\":[\"ok\",7]}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "namespaces[1]" },
	{ .name = "projects: namespaces[0] is an object",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",\"namespaces\":[{\"name\":\"x\"}]}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "namespaces[0]" },
	{ .name = "projects: unknown field",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-a\",\"color\":\"red\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "color" },
	{ .name = "projects: two unknown fields and a bad one",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":7,\"Name\":\"bi-a\",\"owner\":null}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name",
	    .field2 = "Name" },
	{ .name = "projects: name missing",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"display_name\":\"X\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: name null",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":null}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: name with NUL escape",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi\\u0000a\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: name not a DNS label",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"Bi A\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: empty object",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: 2 MiB body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .kind = BODY_BIG,
	    .status = 413,
	    .code = "payload_too_large" },
	{ .name = "projects: 2 MiB chunked body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .kind = BODY_BIG_CHUNKED,
	    .status = 413,
	    .code = "payload_too_large" },
	{ .name = "projects: 1 MiB + 1 byte body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .kind = BODY_LIMIT_PLUS_ONE,
	    .status = 413,
	    .code = "payload_too_large" },
	{ .name = "projects: exactly 1 MiB body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .kind = BODY_LIMIT_EXACT,
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: nested 64 deep",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .kind = BODY_DEEP_64,
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: nested 17 deep",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .kind = BODY_DEEP_17,
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: nested 16 deep",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .kind = BODY_DEEP_16,
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "projects: invalid UTF-8 in a string",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi-\xff\xfe\"}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: overlong UTF-8 in a string",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"name\":\"bi\",\"display_name\":\"\xc0\xaf\"}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: truncated UTF-8 sequence",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "{\"display_name\":\"\xe2\x82\",\"name\":\"bi-a\"}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: array body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "[{\"name\":\"bi-a\"}]",
	    .status = 422,
	    .code = "validation_failed" },
	{ .name = "projects: string body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "\"bi-a\"",
	    .status = 422,
	    .code = "validation_failed" },
	{ .name = "projects: number body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "42",
	    .status = 422,
	    .code = "validation_failed" },
	{ .name = "projects: true body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "true",
	    .status = 422,
	    .code = "validation_failed" },
	{ .name = "projects: null body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "null",
	    .status = 422,
	    .code = "validation_failed" },
	{ .name = "projects: empty body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = "",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: no body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .kind = BODY_NONE,
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: whitespace body",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .body = " \r\n\t ",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "projects: text/plain",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .content_type = "text/plain",
	    .body = "{\"name\":\"bi-a\"}",
	    .status = 415,
	    .code = "unsupported_media_type" },
	{ .name = "projects: no Content-Type",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .content_type = "",
	    .body = "{\"name\":\"bi-a\"}",
	    .status = 415,
	    .code = "unsupported_media_type" },
	{ .name = "projects: application/jsonx",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .content_type = "application/jsonx",
	    .body = "{\"name\":\"bi-a\"}",
	    .status = 415,
	    .code = "unsupported_media_type" },
	{ .name = "projects: form encoded",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .content_type = "application/x-www-form-urlencoded",
	    .body = "name=bi-a",
	    .status = 415,
	    .code = "unsupported_media_type" },
	{ .name = "projects: garbage token",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .tok = TOK_RAW,
	    .auth = "Bearer garbage-garbage-garbage",
	    .body = "{\"name\":\"bi-a\"}",
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },
	{ .name = "projects: role none",
	    .method = "POST",
	    .path = P_PROJECTS,
	    .tok = TOK_USER,
	    .body = "{\"name\":\"bi-a\"}",
	    .status = 403,
	    .code = "forbidden" },

	/* ---- POST /v1/users ---- */
	{ .name = "users: malformed",
	    .method = "POST",
	    .path = P_USERS,
	    .body = "{\"username\" \"x\"}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "users: password missing",
	    .method = "POST",
	    .path = P_USERS,
	    .body = "{\"username\":\"bi-u1\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "password" },
	{ .name = "users: role is an array",
	    .method = "POST",
	    .path = P_USERS,
	    .body = "{\"username\":\"bi-u1\",\"password\":\"" FIXTURE_PASSWORD
		    "\",\"role\":[\"admin\"]}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "role" },
	{ .name = "users: unknown role",
	    .method = "POST",
	    .path = P_USERS,
	    .body =
		"{\"username\":\"bi-u1\",\"password\":\"" FIXTURE_PASSWORD "\",\"role\":\"root\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "role" },
	{ .name = "users: unknown field",
	    .method = "POST",
	    .path = P_USERS,
	    .body =
		"{\"username\":\"bi-u1\",\"password\":\"" FIXTURE_PASSWORD "\",\"email\":\"a@b\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "email" },
	{ .name = "users: username is a boolean",
	    .method = "POST",
	    .path = P_USERS,
	    .body = "{\"username\":true,\"password\":\"" FIXTURE_PASSWORD "\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "username" },
	{ .name = "users: password too short",
	    .method = "POST",
	    .path = P_USERS,
	    .body = "{\"username\":\"bi-u1\",\"password\":\"x\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "password" },
	{ .name = "users: trailing garbage",
	    .method = "POST",
	    .path = P_USERS,
	    .body = "{\"username\":\"bi-u1\",\"password\":\"" FIXTURE_PASSWORD "\"}]",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "users: role none",
	    .method = "POST",
	    .path = P_USERS,
	    .tok = TOK_USER,
	    .body = "{\"username\":\"bi-u1\",\"password\":\"" FIXTURE_PASSWORD "\"}",
	    .status = 403,
	    .code = "forbidden" },

	/* ---- PATCH /v1/projects/{project} ---- */
	{ .name = "patch: display_name is a number",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .body = "{\"display_name\":5}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "display_name" },
	{ .name = "patch: name is not patchable",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .body = "{\"name\":\"other\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "patch: namespaces[2] is null",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .body = "{\"namespaces\":[\"a\",\"b\",null]}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "namespaces[2]" },
	{ .name = "patch: namespaces is a string",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .body = "{\"namespaces\":\"a,b\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "namespaces" },
	{ .name = "patch: malformed",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .body = "{\"display_name\":\"x\"",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "patch: invalid UTF-8",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .body = "{\"display_name\":\"\xed\xa0\x80\"}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "patch: array body",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .body = "[]",
	    .status = 422,
	    .code = "validation_failed" },
	{ .name = "patch: garbage If-Match",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .header = "If-Match: abc",
	    .body = "{\"display_name\":\"x\"}",
	    .status = 412,
	    .code = "precondition_failed" },
	{ .name = "patch: stale If-Match",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .header = "If-Match: \"999\"",
	    .body = "{\"display_name\":\"x\"}",
	    .status = 412,
	    .code = "precondition_failed" },
	{ .name = "patch: unknown project",
	    .method = "PATCH",
	    .path = "/v1/projects/bi-nope",
	    .body = "{\"display_name\":\"x\"}",
	    .status = 404,
	    .code = "not_found" },
	{ .name = "patch: text/plain",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .content_type = "text/plain",
	    .body = "{\"display_name\":\"x\"}",
	    .status = 415,
	    .code = "unsupported_media_type" },
	{ .name = "patch: 2 MiB body",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .kind = BODY_BIG,
	    .status = 413,
	    .code = "payload_too_large" },
	{ .name = "patch: not a member",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .tok = TOK_USER,
	    .body = "{\"display_name\":\"x\"}",
	    .status = 404,
	    .code = "not_found" },

	/* ---- PUT /v1/projects/{project}/members/{user} ---- */
	{ .name = "members: unknown role",
	    .method = "PUT",
	    .path = P_MEMBER,
	    .body = "{\"role\":\"boss\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "role" },
	{ .name = "members: role missing",
	    .method = "PUT",
	    .path = P_MEMBER,
	    .body = "{}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "role" },
	{ .name = "members: role is a number",
	    .method = "PUT",
	    .path = P_MEMBER,
	    .body = "{\"role\":1}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "role" },
	{ .name = "members: unknown field",
	    .method = "PUT",
	    .path = P_MEMBER,
	    .body = "{\"role\":\"member\",\"expires\":\"never\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "expires" },
	{ .name = "members: nested 64 deep",
	    .method = "PUT",
	    .path = P_MEMBER,
	    .kind = BODY_DEEP_64,
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "members: trailing garbage",
	    .method = "PUT",
	    .path = P_MEMBER,
	    .body = "{\"role\":\"member\"}garbage",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "members: unknown user",
	    .method = "PUT",
	    .path = "/v1/projects/" BI_PROJECT "/members/bi-nobody",
	    .body = "{\"role\":\"member\"}",
	    .status = 404,
	    .code = "not_found" },
	{ .name = "members: unknown project",
	    .method = "PUT",
	    .path = "/v1/projects/bi-nope/members/" BI_USER,
	    .body = "{\"role\":\"member\"}",
	    .status = 404,
	    .code = "not_found" },
	{ .name = "members: no token",
	    .method = "PUT",
	    .path = P_MEMBER,
	    .tok = TOK_NONE,
	    .body = "{\"role\":\"member\"}",
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },

	/* ---- POST /v1/tokens ---- */
	{ .name = "tokens: empty name",
	    .method = "POST",
	    .path = P_TOKENS,
	    .body = "{\"name\":\"\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "tokens: expires_at not a time",
	    .method = "POST",
	    .path = P_TOKENS,
	    .body = "{\"name\":\"t\",\"expires_at\":\"yesterday\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "expires_at" },
	{ .name = "tokens: expires_at in the past",
	    .method = "POST",
	    .path = P_TOKENS,
	    .body = "{\"name\":\"t\",\"expires_at\":\"2000-01-01T00:00:00Z\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "expires_at" },
	{ .name = "tokens: expires_at is a number",
	    .method = "POST",
	    .path = P_TOKENS,
	    .body = "{\"name\":\"t\",\"expires_at\":12345}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "expires_at" },
	{ .name = "tokens: misspelt name",
	    .method = "POST",
	    .path = P_TOKENS,
	    .body = "{\"nam\":\"t\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name",
	    .field2 = "nam" },
	{ .name = "tokens: name is an array",
	    .method = "POST",
	    .path = P_TOKENS,
	    .body = "{\"name\":[\"t\"]}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "name" },
	{ .name = "tokens: number body",
	    .method = "POST",
	    .path = P_TOKENS,
	    .body = "-1.5e3",
	    .status = 422,
	    .code = "validation_failed" },
	{ .name = "tokens: 2 MiB body",
	    .method = "POST",
	    .path = P_TOKENS,
	    .kind = BODY_BIG,
	    .status = 413,
	    .code = "payload_too_large" },
	{ .name = "tokens: expired token",
	    .method = "POST",
	    .path = P_TOKENS,
	    .tok = TOK_EXPIRED,
	    .body = "{\"name\":\"t\"}",
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },

	/* ---- POST /v1/auth/login ---- */
	{ .name = "login: password missing",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .body = "{\"username\":\"admin\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "password" },
	{ .name = "login: username is a number",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .body = "{\"username\":1,\"password\":\"x\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "username" },
	{ .name = "login: unknown field",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .body = "{\"username\":\"admin\",\"password\":\"x\",\"otp\":\"123456\"}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "otp" },
	{ .name = "login: malformed",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .body = "{\"username\":\"admin\",\"password\":}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "login: invalid UTF-8",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .body = "{\"username\":\"adm\x80in\",\"password\":\"x\"}",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "login: text/plain",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .content_type = "text/plain",
	    .body = "{\"username\":\"admin\",\"password\":\"x\"}",
	    .status = 415,
	    .code = "unsupported_media_type" },
	{ .name = "login: empty body",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .body = "",
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "login: 2 MiB body",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .kind = BODY_BIG,
	    .status = 413,
	    .code = "payload_too_large" },
	{ .name = "login: nested 64 deep",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .kind = BODY_DEEP_64,
	    .status = 400,
	    .code = "malformed_json" },
	{ .name = "login: array body",
	    .method = "POST",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .body = "[\"admin\",\"x\"]",
	    .status = 422,
	    .code = "validation_failed" },

	/* ---- nested objects: field paths below the top level ---- */
	{ .name = "simulate: unknown nested field",
	    .method = "POST",
	    .path = "/v1/capacity/simulate",
	    .body = "{\"items\":[{\"model\":\"H100-80GB\",\"profile\":\"1g.10gb\",\"count\":1,"
		    "\"colour\":\"red\"}]}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "items[0].colour" },
	{ .name = "simulate: nested wrong type",
	    .method = "POST",
	    .path = "/v1/capacity/simulate",
	    .body = "{\"items\":[\"H100-80GB/1g.10gb=1\",{\"model\":\"H100-80GB\","
		    "\"profile\":\"1g.10gb\",\"count\":\"2\"}]}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "items[1].count" },
	{ .name = "simulate: nested field missing",
	    .method = "POST",
	    .path = "/v1/capacity/simulate",
	    .body = "{\"items\":[{\"model\":\"H100-80GB\",\"count\":1}]}",
	    .status = 422,
	    .code = "validation_failed",
	    .field = "items[0].profile" },
	{ .name = "simulate: nested 64 deep",
	    .method = "POST",
	    .path = "/v1/capacity/simulate",
	    .kind = BODY_DEEP_64,
	    .status = 400,
	    .code = "malformed_json" },

	/* ---- authentication ---- */
	{ .name = "auth: no token",
	    .method = "GET",
	    .path = "/v1/me",
	    .tok = TOK_NONE,
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },
	{ .name = "auth: garbage token",
	    .method = "GET",
	    .path = "/v1/me",
	    .tok = TOK_RAW,
	    .auth = "Bearer !!not-a-token!!",
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },
	{ .name = "auth: well-formed unknown token",
	    .method = "GET",
	    .path = "/v1/me",
	    .tok = TOK_RAW,
	    .auth = "Bearer gpp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },
	{ .name = "auth: empty bearer",
	    .method = "GET",
	    .path = "/v1/me",
	    .tok = TOK_RAW,
	    .auth = "Bearer ",
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },
	{ .name = "auth: basic scheme",
	    .method = "GET",
	    .path = "/v1/me",
	    .tok = TOK_RAW,
	    .auth = "Basic YWRtaW46YWRtaW4=",
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },
	{ .name = "auth: token without scheme",
	    .method = "GET",
	    .path = "/v1/me",
	    .tok = TOK_RAW,
	    .auth = "gpp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },
	{ .name = "auth: expired token",
	    .method = "GET",
	    .path = "/v1/me",
	    .tok = TOK_EXPIRED,
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },
	{ .name = "auth: revoked token",
	    .method = "GET",
	    .path = "/v1/me",
	    .tok = TOK_REVOKED,
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },
	{ .name = "auth: revoked token on PATCH",
	    .method = "PATCH",
	    .path = P_PROJECT,
	    .tok = TOK_REVOKED,
	    .body = "{\"display_name\":\"x\"}",
	    .status = 401,
	    .code = "unauthorized",
	    .want_header = "WWW-Authenticate",
	    .want_value = "Bearer" },

	/* ---- routing ---- */
	{ .name = "route: unknown",
	    .method = "GET",
	    .path = "/v1/nope",
	    .tok = TOK_NONE,
	    .status = 404,
	    .code = "not_found" },
	{ .name = "route: unknown, authenticated",
	    .method = "POST",
	    .path = "/v1/projectz",
	    .body = "{\"name\":\"bi-a\"}",
	    .status = 404,
	    .code = "not_found" },
	{ .name = "route: trailing slash",
	    .method = "GET",
	    .path = "/v1/projects/",
	    .tok = TOK_NONE,
	    .status = 404,
	    .code = "not_found" },
	{ .name = "route: too many segments",
	    .method = "GET",
	    .path = P_MEMBER "/x",
	    .tok = TOK_NONE,
	    .status = 404,
	    .code = "not_found" },
	{ .name = "route: DELETE /v1/projects",
	    .method = "DELETE",
	    .path = P_PROJECTS,
	    .status = 405,
	    .code = "method_not_allowed",
	    .want_header = "Allow",
	    .want_value = "GET, HEAD, POST, OPTIONS" },
	{ .name = "route: PUT /healthz",
	    .method = "PUT",
	    .path = "/healthz",
	    .tok = TOK_NONE,
	    .body = "{}",
	    .status = 405,
	    .code = "method_not_allowed",
	    .want_header = "Allow",
	    .want_value = "GET, HEAD, OPTIONS" },
	{ .name = "route: POST /v1/me",
	    .method = "POST",
	    .path = "/v1/me",
	    .tok = TOK_NONE,
	    .body = "{}",
	    .status = 405,
	    .code = "method_not_allowed",
	    .want_header = "Allow",
	    .want_value = "GET, HEAD, OPTIONS" },
	{ .name = "route: GET /v1/auth/login",
	    .method = "GET",
	    .path = P_LOGIN,
	    .tok = TOK_NONE,
	    .status = 405,
	    .code = "method_not_allowed",
	    .want_header = "Allow",
	    .want_value = "POST, OPTIONS" },
	{ .name = "route: POST on a member",
	    .method = "POST",
	    .path = P_MEMBER,
	    .body = "{\"role\":\"member\"}",
	    .status = 405,
	    .code = "method_not_allowed",
	    .want_header = "Allow",
	    .want_value = "PUT, DELETE, OPTIONS" },
};

struct bi_state {
	bool ready;
	const char *user_token;
	const char *expired_token;
	const char *revoked_token;
};

static struct bi_state bi;

/* Create an API token for the admin that expires in an hour; returns the token, *id its id. */
static const char *
create_api_token(struct fixture *fx, const char *name, const char **id)
{
	struct gp_client_response *r;
	char exp[40];

	time_format_rfc3339(time_now_us() + 3600LL * 1000000, exp, sizeof(exp));
	r = fx_request(fx, fx->admin_token, "POST", "/v1/tokens",
	    "{\"name\":\"%s\",\"expires_at\":\"%s\"}", name, exp);
	assert_status(r, 201);
	*id = arena_strdup(fx->arena, fx_json_str(r->json, "id"));
	return arena_strdup(fx->arena, fx_json_str(r->json, "token"));
}

/* The objects the table refers to, and tokens that were good once and are not any more. */
static void
bi_setup(struct fixture *fx)
{
	struct gp_client_response *r;
	const char *id;

	if (bi.ready)
		return;
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"%s\",\"display_name\":\"Bad input\",\"namespaces\":[\"bi-ns\"]}",
	    BI_PROJECT);
	assert_status(r, 201);
	bi.user_token = fixture_create_user(fx, BI_USER, "none");

	bi.expired_token = create_api_token(fx, "bi-expiring", &id);
	r = fx_request(fx, bi.expired_token, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_sql_exec(fx,
			     "UPDATE tokens SET expires_at = now() - interval '1 minute' "
			     "WHERE id = $1::bigint",
			     id),
	    1);

	bi.revoked_token = create_api_token(fx, "bi-revoked", &id);
	r = fx_request(fx, bi.revoked_token, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	r = fx_request(fx, fx->admin_token, "DELETE", fx_str(fx, "/v1/tokens/%s", id), NULL);
	assert_status(r, 204);
	bi.ready = true;
}

/* "{"name":" + deep-1 nested arrays + "}": an object nested `deep` levels. */
static const char *
deep_body(struct fixture *fx, int deep, size_t *len)
{
	size_t n = (size_t)deep - 1;
	char *b = arena_alloc(fx->arena, 2 * n + 16);
	char *p = b;

	p += sprintf(p, "{\"name\":");
	memset(p, '[', n);
	p += n;
	memset(p, ']', n);
	p += n;
	*p++ = '}';
	*p = '\0';
	*len = (size_t)(p - b);
	return b;
}

/* A JSON object of exactly `size` bytes: {"name":"aaa...a"}. */
static const char *
sized_body(struct fixture *fx, size_t size)
{
	char *b = arena_alloc(fx->arena, size + 1);

	memcpy(b, "{\"name\":\"", 9);
	memset(b + 9, 'a', size - 11);
	memcpy(b + size - 2, "\"}", 2);
	return b;
}

static const char *
case_token(struct fixture *fx, const struct bi_case *c)
{
	switch (c->tok) {
	case TOK_ADMIN:
		return fx->admin_token;
	case TOK_USER:
		return bi.user_token;
	case TOK_EXPIRED:
		return bi.expired_token;
	case TOK_REVOKED:
		return bi.revoked_token;
	case TOK_NONE:
	case TOK_RAW:
		break;
	}
	return NULL;
}

/* The bytes of the request for case c. */
static const char *
case_request(struct fixture *fx, const struct bi_case *c, size_t *len)
{
	const char *headers[6];
	const char *body = NULL, *token;
	size_t body_len = 0;
	int nh = 0;

	token = case_token(fx, c);
	if (token != NULL)
		headers[nh++] = fx_str(fx, "Authorization: Bearer %s", token);
	else if (c->tok == TOK_RAW)
		headers[nh++] = fx_str(fx, "Authorization: %s", c->auth);
	if (c->header != NULL)
		headers[nh++] = c->header;
	switch (c->kind) {
	case BODY_TEXT:
		body = c->body;
		body_len = c->body_len ? c->body_len : strlen(c->body ? c->body : "");
		break;
	case BODY_NONE:
		break;
	case BODY_BIG:
		body = sized_body(fx, 2 * MIB);
		body_len = 2 * MIB;
		break;
	case BODY_LIMIT_PLUS_ONE:
		body = sized_body(fx, MIB + 1);
		body_len = MIB + 1;
		break;
	case BODY_LIMIT_EXACT:
		body = sized_body(fx, MIB);
		body_len = MIB;
		break;
	case BODY_DEEP_64:
		body = deep_body(fx, 64, &body_len);
		break;
	case BODY_DEEP_17:
		body = deep_body(fx, 17, &body_len);
		break;
	case BODY_DEEP_16:
		body = deep_body(fx, 16, &body_len);
		break;
	case BODY_BIG_CHUNKED: {
		/* headers by hand, then 32 chunks of 64 KiB */
		const size_t chunk = 64 * 1024, total = 2 * MIB;
		const char *data = sized_body(fx, total);
		char *req, *p;
		size_t hl;

		headers[nh++] = "Content-Type: application/json";
		headers[nh++] = "Transfer-Encoding: chunked";
		headers[nh] = NULL;
		req = raw_build(fx->arena, c->method, c->path, headers, NULL, 0, &hl);
		p = arena_alloc(fx->arena, hl + total + (total / chunk + 1) * 16 + 8);
		memcpy(p, req, hl);
		req = p;
		p += hl;
		for (size_t off = 0; off < total; off += chunk) {
			p += sprintf(p, "%zx\r\n", chunk);
			memcpy(p, data + off, chunk);
			p += chunk;
			p += sprintf(p, "\r\n");
		}
		p += sprintf(p, "0\r\n\r\n");
		*len = (size_t)(p - req);
		return req;
	}
	}
	if (body != NULL) {
		if (c->content_type == NULL)
			headers[nh++] = "Content-Type: application/json";
		else if (c->content_type[0] != '\0')
			headers[nh++] = fx_str(fx, "Content-Type: %s", c->content_type);
	}
	headers[nh] = NULL;
	return raw_build(fx->arena, c->method, c->path, headers, body, body_len, len);
}

/* Every comma-separated item of want appears in the header value v. */
static bool
header_lists(const char *v, const char *want)
{
	char item[64];

	while (*want != '\0') {
		size_t n = strcspn(want, ",");

		if (n >= sizeof(item))
			return false;
		memcpy(item, want, n);
		item[n] = '\0';
		if (strstr(v, item) == NULL)
			return false;
		want += n;
		while (*want == ',' || *want == ' ')
			want++;
	}
	return true;
}

/* The response to case c is a well-formed problem as expected; else print why and return false. */
static bool
check_problem(struct fixture *fx, const struct bi_case *c, const struct raw_response *r)
{
	const char *ct = raw_header(fx->arena, r, "Content-Type");
	struct json_object *j = r->json, *errs;
	const char *s;
	bool ok = true;

#define BI_FAIL(...)                             \
	do {                                     \
		print_error("  [%s] ", c->name); \
		print_error(__VA_ARGS__);        \
		ok = false;                      \
	} while (0)
	if (r->status != c->status)
		BI_FAIL("expected HTTP %d, got %d\n", c->status, r->status);
	if (ct == NULL || strncmp(ct, "application/problem+json", 24) != 0)
		BI_FAIL("Content-Type is %s, not application/problem+json\n", ct ? ct : "(none)");
	if (raw_header(fx->arena, r, "X-Request-Id") == NULL)
		BI_FAIL("no X-Request-Id\n");
	if (j == NULL || !json_object_is_type(j, json_type_object)) {
		BI_FAIL("the body is not a JSON object\n");
		goto out;
	}
	s = fx_json(j, "type") ? json_object_get_string(fx_json(j, "type")) : NULL;
	if (s == NULL || !json_object_is_type(fx_json(j, "type"), json_type_string) || s[0] == '\0')
		BI_FAIL("no \"type\"\n");
	if (fx_json(j, "title") == NULL ||
	    !json_object_is_type(fx_json(j, "title"), json_type_string) ||
	    json_object_get_string_len(fx_json(j, "title")) == 0)
		BI_FAIL("no \"title\"\n");
	if (fx_json(j, "detail") == NULL ||
	    !json_object_is_type(fx_json(j, "detail"), json_type_string) ||
	    json_object_get_string_len(fx_json(j, "detail")) == 0)
		BI_FAIL("no \"detail\"\n");
	if (fx_json(j, "status") == NULL ||
	    !json_object_is_type(fx_json(j, "status"), json_type_int) ||
	    json_object_get_int64(fx_json(j, "status")) != r->status)
		BI_FAIL("\"status\" does not equal the HTTP status %d\n", r->status);
	s = fx_json(j, "code") && json_object_is_type(fx_json(j, "code"), json_type_string)
	    ? json_object_get_string(fx_json(j, "code"))
	    : NULL;
	if (s == NULL || strcmp(s, c->code) != 0)
		BI_FAIL("expected code %s, got %s\n", c->code, s ? s : "(none)");
	errs = fx_json(j, "errors");
	if (strcmp(c->code, "validation_failed") == 0) {
		size_t n = errs && json_object_is_type(errs, json_type_array)
		    ? json_object_array_length(errs)
		    : 0;
		bool seen1 = c->field == NULL, seen2 = c->field2 == NULL;

		if (n == 0)
			BI_FAIL("a validation problem without errors[]\n");
		for (size_t i = 0; i < n; i++) {
			struct json_object *e = json_object_array_get_idx(errs, i);
			struct json_object *f = fx_json(e, "field"), *m = fx_json(e, "message");

			if (f == NULL || !json_object_is_type(f, json_type_string) || m == NULL ||
			    !json_object_is_type(m, json_type_string) ||
			    json_object_get_string_len(m) == 0) {
				BI_FAIL("errors[%zu] lacks field or message\n", i);
				continue;
			}
			if (c->field != NULL && strcmp(json_object_get_string(f), c->field) == 0)
				seen1 = true;
			if (c->field2 != NULL && strcmp(json_object_get_string(f), c->field2) == 0)
				seen2 = true;
		}
		if (!seen1)
			BI_FAIL("errors[] does not name field \"%s\"\n", c->field);
		if (!seen2)
			BI_FAIL("errors[] does not name field \"%s\"\n", c->field2);
	} else if (errs != NULL) {
		BI_FAIL("errors[] on a %s problem\n", c->code);
	}
	if (c->want_header != NULL) {
		const char *v = raw_header(fx->arena, r, c->want_header);

		if (v == NULL || !header_lists(v, c->want_value))
			BI_FAIL("header %s is \"%s\", expected it to contain \"%s\"\n",
			    c->want_header, v ? v : "(absent)", c->want_value);
	}
out:
	if (!ok)
		print_error("  response head:\n%s  body: %.600s\n", r->head ? r->head : "(none)\n",
		    r->body ? r->body : "");
	return ok;
#undef BI_FAIL
}

static void
test_bad_input_table(void **state)
{
	struct fixture *fx = *state;
	const char *before, *after;
	int64_t gen_before, audit_before, projects_before, users_before;
	struct gp_client_response *r;
	int failures = 0;
	size_t ncases = sizeof(cases) / sizeof(cases[0]);

	bi_setup(fx);
	/* one authenticated request first, so token bookkeeping is settled */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/me", NULL);
	assert_status(r, 200);
	before = fx_sql_text(fx, snapshot_sql);
	assert_non_null(before);
	gen_before = fx_sql_int64(fx,
	    "SELECT (SELECT coalesce(max(generation), 0) FROM projects) + "
	    "(SELECT coalesce(max(generation), 0) FROM users)");
	audit_before = fx_sql_int64(fx, "SELECT count(*) FROM audit_log");
	projects_before = fx_sql_int64(fx, "SELECT count(*) FROM projects");
	users_before = fx_sql_int64(fx, "SELECT count(*) FROM users");
	assert_true(audit_before > 0);

	for (size_t i = 0; i < ncases; i++) {
		const struct bi_case *c = &cases[i];
		struct raw_response resp;
		size_t len;
		const char *req = case_request(fx, c, &len);

		if (raw_exchange(fx->arena, fx->server->port, req, len, RAW_TIMEOUT_MS, &resp) !=
		    0) {
			print_error("  [%s] no response (errno %d%s)\n", c->name, resp.error,
			    resp.closed ? ", connection closed" : "");
			failures++;
			continue;
		}
		if (!check_problem(fx, c, &resp))
			failures++;
	}
	if (failures > 0) {
		print_error("%d of %zu bad-input cases failed\n", failures, ncases);
		fixture_server_dump_log(fx->server, 20);
	}
	assert_int_equal(failures, 0);

	/* nothing was written, anywhere */
	after = fx_sql_text(fx, snapshot_sql);
	if (strcmp(before, after) != 0)
		print_error("the database changed:\nbefore:\n%s\nafter:\n%s\n", before, after);
	assert_string_equal(before, after);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT (SELECT coalesce(max(generation), 0) FROM projects) + "
			     "(SELECT coalesce(max(generation), 0) FROM users)"),
	    gen_before);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM audit_log"), audit_before);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects"), projects_before);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM users"), users_before);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM projects WHERE name LIKE 'bi-%' "
			     "AND name <> $1",
			     BI_PROJECT),
	    0);

	/* and the server is fine */
	r = fx_request(fx, NULL, "GET", "/healthz", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "status", "ok");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/" BI_PROJECT, NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "display_name", "Bad input");
}

/* The table's well-formed twins succeed, so the table fails for the reason it claims. */
static void
test_good_twins(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *h_json_charset[] = { "Content-Type: application/json; charset=utf-8", NULL };
	const char *etag;

	bi_setup(fx);
	r = fx_request_h(fx, fx->admin_token, "POST", "/v1/projects", h_json_charset,
	    "{\"name\":\"bi-twin\",\"namespaces\":[\"ok\",\"b\"]}");
	assert_status(r, 201);
	assert_json_str(r->json, "name", "bi-twin");
	assert_int_equal(fx_json_len(r->json, "namespaces"), 2);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/projects/bi-twin", NULL);
	assert_status(r, 200);
	etag = arena_strdup(fx->arena, r->etag);
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/projects/bi-twin",
	    ((const char *[]){ fx_str(fx, "If-Match: %s", etag), NULL }),
	    "{\"display_name\":\"Tw\xc3\xafn\"}");
	assert_status(r, 200);
	assert_json_str(r->json, "display_name", "Tw\xc3\xafn");
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/bi-twin/members/" BI_USER,
	    "{\"role\":\"member\"}");
	assert_status(r, 201);
	r = fx_request(fx, bi.user_token, "POST", "/v1/tokens", "{\"name\":\"t\"}");
	assert_status(r, 201);
	r = fx_request(fx, NULL, "POST", "/v1/auth/login",
	    "{\"username\":\"%s\",\"password\":\"%s\"}", BI_USER, FIXTURE_PASSWORD);
	assert_status(r, 200);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM projects WHERE name = 'bi-twin'"),
	    1);
}

static bool
request_id_generated(const char *s)
{
	size_t n = strlen(s);

	if (n != 16)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'v')))
			return false;
	return true;
}

/* GET path with an optional X-Request-Id line; returns the response. */
static struct raw_response *
get_with_id(struct fixture *fx, const char *path, const char *token, const char *id_line)
{
	struct raw_response *r = arena_alloc(fx->arena, sizeof(*r));
	const char *h[3];
	size_t len;
	const char *req;
	int n = 0;

	if (token != NULL)
		h[n++] = fx_str(fx, "Authorization: Bearer %s", token);
	if (id_line != NULL)
		h[n++] = id_line;
	h[n] = NULL;
	req = raw_build(fx->arena, "GET", path, h, NULL, 0, &len);
	if (raw_exchange(fx->arena, fx->server->port, req, len, RAW_TIMEOUT_MS, r) != 0) {
		print_error("GET %s: no response (errno %d)\n", path, r->error);
		fail();
	}
	return r;
}

static void
test_request_id(void **state)
{
	struct fixture *fx = *state;
	struct raw_response *r;
	const char *id, *id2;
	char long64[65], long65[66];

	/* a valid one is echoed, on success and on problems (and in the problem body) */
	r = get_with_id(fx, "/healthz", NULL, "X-Request-Id: abc-123_DEF.4");
	assert_int_equal(r->status, 200);
	assert_string_equal(raw_header(fx->arena, r, "X-Request-Id"), "abc-123_DEF.4");
	r = get_with_id(fx, "/v1/me", NULL, "X-Request-Id: trace-0001");
	assert_int_equal(r->status, 401);
	assert_string_equal(raw_header(fx->arena, r, "X-Request-Id"), "trace-0001");
	assert_json_str(r->json, "request_id", "trace-0001");
	r = get_with_id(fx, "/v1/me", fx->admin_token, "X-Request-Id: me-42");
	assert_int_equal(r->status, 200);
	assert_string_equal(raw_header(fx->arena, r, "X-Request-Id"), "me-42");

	/* 64 characters is the longest accepted */
	memset(long64, 'r', 64);
	long64[64] = '\0';
	r = get_with_id(fx, "/healthz", NULL, fx_str(fx, "X-Request-Id: %s", long64));
	assert_string_equal(raw_header(fx->arena, r, "X-Request-Id"), long64);

	/* none: a fresh one each time */
	r = get_with_id(fx, "/healthz", NULL, NULL);
	id = raw_header(fx->arena, r, "X-Request-Id");
	assert_non_null(id);
	assert_true(request_id_generated(id));
	r = get_with_id(fx, "/nope", NULL, NULL);
	assert_int_equal(r->status, 404);
	id2 = raw_header(fx->arena, r, "X-Request-Id");
	assert_non_null(id2);
	assert_true(request_id_generated(id2));
	assert_string_not_equal(id, id2);
	assert_json_str(r->json, "request_id", id2);

	/* hostile ones are replaced, never echoed */
	memset(long65, 'r', 65);
	long65[65] = '\0';
	{
		const char *bad[] = {
			fx_str(fx, "X-Request-Id: %s", long65),
			"X-Request-Id: has spaces inside",
			"X-Request-Id: quote\"}{\"level\":\"error",
			"X-Request-Id: <script>alert(1)</script>",
			"X-Request-Id: semi;colon",
			"X-Request-Id: caf\xc3\xa9",
			"X-Request-Id: ",
		};

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			r = get_with_id(fx, "/healthz", NULL, bad[i]);
			assert_int_equal(r->status, 200);
			id = raw_header(fx->arena, r, "X-Request-Id");
			assert_non_null(id);
			if (!request_id_generated(id))
				print_error("sent \"%s\", got back X-Request-Id \"%s\"\n", bad[i],
				    id);
			assert_true(request_id_generated(id));
		}
	}
	/* a hostile id on an error response is replaced in the body too */
	r = get_with_id(fx, "/v1/me", NULL, "X-Request-Id: two words");
	assert_int_equal(r->status, 401);
	id = raw_header(fx->arena, r, "X-Request-Id");
	assert_true(request_id_generated(id));
	assert_json_str(r->json, "request_id", id);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_input_table),
		cmocka_unit_test(test_good_twins),
		cmocka_unit_test(test_request_id),
	};

	return fixture_run_tests(tests);
}
