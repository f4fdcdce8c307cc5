/*
 * test_contract.c - api/openapi.yaml and the route table in
 * server/api/routes.c describe the same endpoints (docs/design.md section 6:
 * every endpoint in the server is in the contract and vice versa).
 *
 * The contract is read with a line scanner of its "paths:" section, not a
 * YAML library: path keys are lines indented by two spaces that start
 * with "/", operations are lines indented by four spaces naming an HTTP
 * method, and an operation whose block holds "security: []" at six spaces
 * is public. Path parameters are compared by position only: "{project}"
 * in the contract is "{}" in the route table.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/api.h"

#ifndef OPENAPI_PATH
#error "OPENAPI_PATH must name api/openapi.yaml"
#endif

#define MAX_OPS 512
#define PATH_MAX_LEN 256

/* The contract as compiled into gpupoold (scripts/embed.cmake). */
extern const char gp_openapi_yaml[];
extern const size_t gp_openapi_yaml_len;

struct op {
	char method[8];          /* upper case */
	char path[PATH_MAX_LEN]; /* "{name}" reduced to "{}" */
	int line;                /* in the contract, 0 for the table */
	bool public;             /* "security: []" / ALLOW_PUBLIC */
};

struct ops {
	struct op op[MAX_OPS];
	int n;
	char error[256]; /* set when the input could not be read */
};

static const char *const http_methods[] = {
	"get",
	"put",
	"post",
	"delete",
	"options",
	"head",
	"patch",
	"trace",
};

/* Copy path with every "{...}" replaced by "{}"; false when it does not fit. */
static bool
normalize_path(const char *in, size_t len, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; i < len; i++) {
		if (o + 3 > outlen)
			return false;
		if (in[i] == '{') {
			while (i < len && in[i] != '}')
				i++;
			out[o++] = '{';
			out[o++] = '}';
			continue;
		}
		out[o++] = in[i];
	}
	out[o] = '\0';
	return true;
}

/* Number of leading spaces. */
static size_t
indent_of(const char *line, size_t len)
{
	size_t n = 0;

	while (n < len && line[n] == ' ')
		n++;
	return n;
}

/* line[from, len) minus trailing blanks and a trailing "# comment". */
static size_t
content_end(const char *line, size_t len)
{
	bool squote = false, dquote = false;

	for (size_t i = 0; i < len; i++) {
		if (line[i] == '\'' && !dquote)
			squote = !squote;
		else if (line[i] == '"' && !squote)
			dquote = !dquote;
		else if (line[i] == '#' && !squote && !dquote && (i == 0 || line[i - 1] == ' ')) {
			len = i;
			break;
		}
	}
	while (len > 0 && (line[len - 1] == ' ' || line[len - 1] == '\r' || line[len - 1] == '\t'))
		len--;
	return len;
}

static void
ops_add(struct ops *ops, const char *method, const char *path, int line, bool public)
{
	struct op *o;

	if (ops->n >= MAX_OPS) {
		snprintf(ops->error, sizeof(ops->error), "more than %d operations", MAX_OPS);
		return;
	}
	o = &ops->op[ops->n++];
	memset(o, 0, sizeof(*o));
	for (size_t i = 0; i < sizeof(o->method) - 1 && method[i] != '\0'; i++)
		o->method[i] =
		    (char)(method[i] >= 'a' && method[i] <= 'z' ? method[i] - 32 : method[i]);
	snprintf(o->path, sizeof(o->path), "%s", path);
	o->line = line;
	o->public = public;
}

/*
 * Scan the "paths:" section of an OpenAPI document in text[0, len) into
 * ops. Unreadable input (a path key without a colon, one too long) sets
 * ops->error.
 */
static void
scan_contract(const char *text, size_t len, struct ops *ops)
{
	const char *p = text, *end = text + len;
	char path[PATH_MAX_LEN] = "";
	bool in_paths = false;
	int lineno = 0, cur = -1; /* cur: index of the operation being read */

	memset(ops, 0, sizeof(*ops));
	while (p < end && ops->error[0] == '\0') {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
		size_t ind = indent_of(p, ll), ce = content_end(p, ll);
		const char *s = p + ind;
		size_t sl = ce > ind ? ce - ind : 0;

		lineno++;
		p = nl ? nl + 1 : end;
		if (sl == 0)
			continue; /* blank or comment-only line */
		if (ind == 0) {
			in_paths = sl == 6 && memcmp(s, "paths:", 6) == 0;
			cur = -1;
			continue;
		}
		if (!in_paths)
			continue;
		if (ind == 2) {
			cur = -1;
			path[0] = '\0';
			if (s[0] != '/')
				continue;
			if (s[sl - 1] != ':' || !normalize_path(s, sl - 1, path, sizeof(path))) {
				snprintf(ops->error, sizeof(ops->error),
				    "line %d: cannot read the path key", lineno);
				return;
			}
			continue;
		}
		if (ind == 4) {
			cur = -1;
			if (path[0] == '\0')
				continue;
			for (size_t m = 0; m < sizeof(http_methods) / sizeof(http_methods[0]);
			     m++) {
				size_t ml = strlen(http_methods[m]);

				if (sl == ml + 1 && memcmp(s, http_methods[m], ml) == 0 &&
				    s[ml] == ':') {
					ops_add(ops, http_methods[m], path, lineno, false);
					cur = ops->n - 1;
					break;
				}
			}
			continue;
		}
		if (ind == 6 && cur >= 0 && sl == 12 && memcmp(s, "security: []", 12) == 0)
			ops->op[cur].public = true;
	}
}

static void
table_ops(struct ops *ops)
{
	memset(ops, 0, sizeof(*ops));
	for (int i = 0; i < api_nroutes; i++)
		ops_add(ops, api_routes[i].method, api_routes[i].pattern, 0,
		    (api_routes[i].allow & ALLOW_PUBLIC) != 0);
}

static const struct op *
ops_find(const struct ops *ops, const struct op *want)
{
	for (int i = 0; i < ops->n; i++)
		if (strcmp(ops->op[i].method, want->method) == 0 &&
		    strcmp(ops->op[i].path, want->path) == 0)
			return &ops->op[i];
	return NULL;
}

/* Print and count the members of a that b lacks. */
static int
report_missing(const struct ops *a, const struct ops *b, const char *what)
{
	int missing = 0;

	for (int i = 0; i < a->n; i++) {
		if (ops_find(b, &a->op[i]) != NULL)
			continue;
		if (missing++ == 0)
			print_error("%s:\n", what);
		if (a->op[i].line > 0)
			print_error("  %-7s %s   (openapi.yaml line %d)\n", a->op[i].method,
			    a->op[i].path, a->op[i].line);
		else
			print_error("  %-7s %s\n", a->op[i].method, a->op[i].path);
	}
	return missing;
}

/* Print and count operations listed twice. */
static int
report_duplicates(const struct ops *a, const char *what)
{
	int dups = 0;

	for (int i = 0; i < a->n; i++) {
		for (int j = 0; j < i; j++) {
			if (strcmp(a->op[i].method, a->op[j].method) == 0 &&
			    strcmp(a->op[i].path, a->op[j].path) == 0) {
				print_error("%s lists %s %s twice\n", what, a->op[i].method,
				    a->op[i].path);
				dups++;
				break;
			}
		}
	}
	return dups;
}

static char *
read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (f == NULL)
		return NULL;
	for (;;) {
		size_t got;

		if (n + 4096 + 1 > cap) {
			char *nb;

			cap = cap ? cap * 2 : 65536;
			nb = realloc(buf, cap);
			if (nb == NULL) {
				free(buf);
				fclose(f);
				return NULL;
			}
			buf = nb;
		}
		got = fread(buf + n, 1, cap - n - 1, f);
		n += got;
		if (got == 0)
			break;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

static int
setup(void **state)
{
	size_t len = 0;
	char *text = read_file(OPENAPI_PATH, &len);
	struct ops *contract;

	if (text == NULL) {
		print_error("could not read %s\n", OPENAPI_PATH);
		return -1;
	}
	contract = calloc(1, sizeof(*contract));
	if (contract == NULL) {
		free(text);
		return -1;
	}
	scan_contract(text, len, contract);
	free(text);
	*state = contract;
	return 0;
}

static int
teardown(void **state)
{
	free(*state);
	return 0;
}

/* Every route is in the contract and every contract operation is a route. */
static void
test_routes_equal_contract(void **state)
{
	const struct ops *contract = *state;
	struct ops *table = calloc(1, sizeof(*table));
	int bad = 0;

	assert_non_null(table);
	if (contract->error[0] != '\0')
		fail_msg("%s: %s", OPENAPI_PATH, contract->error);
	table_ops(table);
	assert_true(table->n > 0);
	assert_int_equal(table->n, api_nroutes);
	bad += report_missing(table, contract,
	    "routes in server/api/routes.c missing from api/openapi.yaml");
	bad += report_missing(contract, table,
	    "operations in api/openapi.yaml that server/api/routes.c does not serve");
	bad += report_duplicates(table, "server/api/routes.c");
	bad += report_duplicates(contract, "api/openapi.yaml");
	free(table);
	if (bad > 0)
		fail_msg("%d difference(s) between the route table and the contract", bad);
	assert_int_equal(contract->n, api_nroutes);
}

/* Public routes say "security: []"; every other one needs the bearer token. */
static void
test_public_routes_match(void **state)
{
	const struct ops *contract = *state;
	int bad = 0;

	for (int i = 0; i < api_nroutes; i++) {
		struct op want;
		const struct op *got;
		bool public = (api_routes[i].allow & ALLOW_PUBLIC) != 0;

		memset(&want, 0, sizeof(want));
		snprintf(want.method, sizeof(want.method), "%s", api_routes[i].method);
		snprintf(want.path, sizeof(want.path), "%s", api_routes[i].pattern);
		got = ops_find(contract, &want);
		if (got == NULL)
			continue; /* reported by test_routes_equal_contract */
		if (got->public != public) {
			print_error("%s %s is %s in routes.c but %s in api/openapi.yaml (line %d)\n",
			    want.method, want.path, public ? "public" : "authenticated",
			    got->public ? "public (security: [])" : "authenticated", got->line);
			bad++;
		}
	}
	if (bad > 0)
		fail_msg("%d route(s) disagree on authentication", bad);
}

/* gpupoold serves the contract it was built from. */
static void
test_embedded_contract_is_current(void **state)
{
	size_t len = 0;
	char *text = read_file(OPENAPI_PATH, &len);

	(void)state;
	assert_non_null(text);
	assert_int_equal(gp_openapi_yaml_len, len);
	assert_memory_equal(gp_openapi_yaml, text, len);
	assert_int_equal(gp_openapi_yaml[len], '\0');
	free(text);
}

/* The scanner itself, on a document with the shapes it must handle. */
static void
test_scanner(void **state)
{
	static const char doc[] = "openapi: 3.1.0\n"
				  "info:\n"
				  "  title: t\n"
				  "  /notapath:\n" /* outside paths: */
				  "    get:\n"
				  "paths:\n"
				  "  # a comment\n"
				  "  /healthz:   # trailing comment\n"
				  "    parameters:\n"
				  "      - $ref: '#/components/parameters/RequestId'\n"
				  "    get:\n"
				  "      security: []\n"
				  "      responses: {}\n"
				  "\n"
				  "  /v1/projects/{project}/members/{username}:\n"
				  "    summary: members\n"
				  "    put:\n"
				  "      description: |\n"
				  "        security: []\n" /* text in a block, not the key */
				  "    delete:\n"
				  "      responses:\n"
				  "        '204':\n"
				  "          security: []\n"
				  "  x-extension:\n"
				  "    get:\n"
				  "components:\n"
				  "  schemas:\n"
				  "    get:\n";
	struct ops *ops = calloc(1, sizeof(*ops));

	(void)state;
	assert_non_null(ops);
	scan_contract(doc, sizeof(doc) - 1, ops);
	assert_string_equal(ops->error, "");
	assert_int_equal(ops->n, 3);
	assert_string_equal(ops->op[0].method, "GET");
	assert_string_equal(ops->op[0].path, "/healthz");
	assert_int_equal(ops->op[0].line, 11);
	assert_true(ops->op[0].public);
	assert_string_equal(ops->op[1].method, "PUT");
	assert_string_equal(ops->op[1].path, "/v1/projects/{}/members/{}");
	assert_false(ops->op[1].public);
	assert_string_equal(ops->op[2].method, "DELETE");
	assert_string_equal(ops->op[2].path, "/v1/projects/{}/members/{}");
	assert_false(ops->op[2].public);

	{
		static const char broken[] = "paths:\n  /v1/broken\n    get:\n";

		scan_contract(broken, sizeof(broken) - 1, ops);
	}
	assert_string_not_equal(ops->error, "");
	free(ops);
}

/* The comparison finds a route missing on either side. */
static void
test_difference_is_reported(void **state)
{
	struct ops *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	ops_add(a, "get", "/v1/x/{}", 1, false);
	ops_add(a, "post", "/v1/x", 2, false);
	ops_add(b, "GET", "/v1/x/{}", 0, false);
	ops_add(b, "PUT", "/v1/x", 0, false);
	assert_int_equal(report_missing(a, b, "(expected) only in a"), 1);
	assert_int_equal(report_missing(b, a, "(expected) only in b"), 1);
	assert_int_equal(report_missing(a, a, "none"), 0);
	ops_add(a, "GET", "/v1/x/{}", 3, false);
	assert_int_equal(report_duplicates(a, "(expected) a"), 1);
	free(a);
	free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scanner),
		cmocka_unit_test(test_difference_is_reported),
		cmocka_unit_test_setup_teardown(test_routes_equal_contract, setup, teardown),
		cmocka_unit_test_setup_teardown(test_public_routes_match, setup, teardown),
		cmocka_unit_test(test_embedded_contract_is_current),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
