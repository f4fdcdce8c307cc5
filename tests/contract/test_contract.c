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
 *
 * Query parameters: a "parameters:" key (of a path at four spaces, of an
 * operation at six) opens a list whose items ("- name: x" or
 * "- $ref: '#/components/parameters/X'") are read with their "in:"; the
 * references are resolved from "components: parameters:". A path's list
 * applies to each of its operations. The query parameters of every
 * operation must be the route's "query" list in routes.c, which the
 * dispatcher enforces (an unknown or repeated one is 422).
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

#include "api/routes.h"

#ifndef OPENAPI_PATH
#error "OPENAPI_PATH must name api/openapi.yaml"
#endif

#define MAX_OPS 512
#define PATH_MAX_LEN 256
#define MAX_PARAMS 1024
#define MAX_COMPONENTS 128
#define NAME_LEN 64
#define QUERY_LEN 512

/* The contract as compiled into gpupoold (scripts/embed.cmake). */
extern const char gp_openapi_yaml[];
extern const size_t gp_openapi_yaml_len;

struct op {
	char method[8];          /* upper case */
	char path[PATH_MAX_LEN]; /* "{name}" reduced to "{}" */
	int line;                /* in the contract, 0 for the table */
	bool public;             /* "security: []" / ALLOW_PUBLIC */
	char query[QUERY_LEN];   /* its query parameters, space-separated */
};

/* One item of a "parameters:" list, before its reference is resolved. */
struct param {
	int op;                  /* the operation's, or -1: the path's (all its operations) */
	char path[PATH_MAX_LEN]; /* the path's, normalized */
	char name[NAME_LEN];
	char in[16];
	char ref[NAME_LEN]; /* the X of "#/components/parameters/X" */
	int line;
};

/* components: parameters: X: {name, in} */
struct component {
	char key[NAME_LEN];
	char name[NAME_LEN];
	char in[16];
};

struct ops {
	struct op op[MAX_OPS];
	int n;
	struct param param[MAX_PARAMS];
	int nparams;
	struct component comp[MAX_COMPONENTS];
	int ncomp;
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

/* Copy the value of "key: value" (quotes removed) when s[0, sl) is that key; else false. */
static bool
key_value(const char *s, size_t sl, const char *key, char *out, size_t outlen)
{
	size_t kl = strlen(key), vl;
	const char *v;

	if (sl < kl + 1 || memcmp(s, key, kl) != 0 || s[kl] != ':')
		return false;
	v = s + kl + 1;
	vl = sl - kl - 1;
	while (vl > 0 && *v == ' ') {
		v++;
		vl--;
	}
	if (vl >= 2 && (v[0] == '\'' || v[0] == '"') && v[vl - 1] == v[0]) {
		v++;
		vl -= 2;
	}
	snprintf(out, outlen, "%.*s", (int)vl, v);
	return true;
}

/* Read "name:", "in:" or "$ref:" of the parameter being read. */
static void
param_key(struct param *pm, const char *s, size_t sl)
{
	char ref[256];

	if (key_value(s, sl, "$ref", ref, sizeof(ref))) {
		const char *slash = strrchr(ref, '/');

		snprintf(pm->ref, sizeof(pm->ref), "%.*s", (int)sizeof(pm->ref) - 1,
		    slash ? slash + 1 : ref);
		return;
	}
	if (!key_value(s, sl, "name", pm->name, sizeof(pm->name)))
		key_value(s, sl, "in", pm->in, sizeof(pm->in));
}

/* Append word to a space-separated list. */
static void
words_add(char *list, size_t len, const char *word)
{
	size_t used = strlen(list);

	snprintf(list + used, len - used, "%s%s", used > 0 ? " " : "", word);
}

/* Resolve every parameter and give each operation its query parameters. */
static void
resolve_params(struct ops *ops)
{
	for (int i = 0; i < ops->nparams && ops->error[0] == '\0'; i++) {
		struct param *pm = &ops->param[i];
		const char *name = pm->name, *in = pm->in;

		if (pm->ref[0] != '\0') {
			int c = 0;

			while (c < ops->ncomp && strcmp(ops->comp[c].key, pm->ref) != 0)
				c++;
			if (c == ops->ncomp) {
				snprintf(ops->error, sizeof(ops->error),
				    "line %d: no components/parameters/%s", pm->line, pm->ref);
				return;
			}
			name = ops->comp[c].name;
			in = ops->comp[c].in;
		}
		if (strcmp(in, "query") != 0)
			continue;
		for (int o = 0; o < ops->n; o++)
			if (o == pm->op || (pm->op < 0 && strcmp(ops->op[o].path, pm->path) == 0))
				words_add(ops->op[o].query, sizeof(ops->op[o].query), name);
	}
}

/*
 * Scan the "paths:" section of an OpenAPI document in text[0, len) into
 * ops, with the query parameters of each operation. Unreadable input (a
 * path key without a colon, one too long, a reference to no parameter)
 * sets ops->error.
 */
static void
scan_contract(const char *text, size_t len, struct ops *ops)
{
	const char *p = text, *end = text + len;
	char path[PATH_MAX_LEN] = "";
	bool in_paths = false, in_components = false, comp_params = false;
	int lineno = 0, cur = -1; /* cur: index of the operation being read */
	int list = -1, pcur = -1; /* list: indent of the open "parameters:", pcur: its item */

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
			in_components = sl == 11 && memcmp(s, "components:", 11) == 0;
			comp_params = false;
			cur = list = -1;
			continue;
		}
		if (in_components) {
			struct component *c = ops->ncomp > 0 ? &ops->comp[ops->ncomp - 1] : NULL;

			if (ind == 2)
				comp_params = sl == 11 && memcmp(s, "parameters:", 11) == 0;
			else if (comp_params && ind == 4 && s[sl - 1] == ':') {
				if (ops->ncomp == MAX_COMPONENTS) {
					snprintf(ops->error, sizeof(ops->error),
					    "more than %d parameter components", MAX_COMPONENTS);
					return;
				}
				c = &ops->comp[ops->ncomp++];
				snprintf(c->key, sizeof(c->key), "%.*s", (int)sl - 1, s);
			} else if (comp_params && ind == 6 && c != NULL &&
			    !key_value(s, sl, "name", c->name, sizeof(c->name))) {
				key_value(s, sl, "in", c->in, sizeof(c->in));
			}
			continue;
		}
		if (!in_paths)
			continue;
		if (list >= 0 && (int)ind <= list)
			list = pcur = -1; /* the list ended */
		if (list >= 0) {
			if ((int)ind == list + 2 && sl >= 2 && s[0] == '-' && s[1] == ' ') {
				struct param *pm;

				if (ops->nparams == MAX_PARAMS) {
					snprintf(ops->error, sizeof(ops->error),
					    "more than %d parameters", MAX_PARAMS);
					return;
				}
				pcur = ops->nparams++;
				pm = &ops->param[pcur];
				memset(pm, 0, sizeof(*pm));
				pm->op = list == 4 ? -1 : cur;
				snprintf(pm->path, sizeof(pm->path), "%s", path);
				pm->line = lineno;
				param_key(pm, s + 2, sl - 2);
			} else if ((int)ind == list + 4 && pcur >= 0) {
				param_key(&ops->param[pcur], s, sl);
			}
			continue;
		}
		if (sl == 11 && memcmp(s, "parameters:", 11) == 0 &&
		    ((ind == 4 && path[0] != '\0') || (ind == 6 && cur >= 0))) {
			list = (int)ind;
			continue;
		}
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
	if (ops->error[0] == '\0')
		resolve_params(ops);
}

static void
table_ops(struct ops *ops)
{
	memset(ops, 0, sizeof(*ops));
	for (int i = 0; i < api_nroutes; i++) {
		ops_add(ops, api_routes[i].method, api_routes[i].pattern, 0,
		    (api_routes[i].allow & ALLOW_PUBLIC) != 0);
		if (api_routes[i].query != NULL)
			snprintf(ops->op[ops->n - 1].query, QUERY_LEN, "%s", api_routes[i].query);
	}
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The words of a space-separated list, sorted, joined by single spaces into out. */
static void
words_sorted(const char *list, char *out, size_t outlen)
{
	char buf[QUERY_LEN];
	char *words[64], *save = NULL, *w;
	int n = 0;

	snprintf(buf, sizeof(buf), "%s", list);
	for (w = strtok_r(buf, " ", &save); w != NULL && n < 64; w = strtok_r(NULL, " ", &save))
		words[n++] = w;
	qsort(words, (size_t)n, sizeof(words[0]), cmp_str);
	out[0] = '\0';
	for (int i = 0; i < n; i++)
		words_add(out, outlen, words[i]);
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

/* Print and count the operations of a whose query parameters differ in b (or repeat). */
static int
report_query_differences(const struct ops *table, const struct ops *contract)
{
	int bad = 0;

	for (int i = 0; i < table->n; i++) {
		const struct op *t = &table->op[i], *c = ops_find(contract, t);
		char tq[QUERY_LEN], cq[QUERY_LEN];

		if (c == NULL)
			continue; /* reported by test_routes_equal_contract */
		words_sorted(t->query, tq, sizeof(tq));
		words_sorted(c->query, cq, sizeof(cq));
		if (strcmp(tq, cq) != 0) {
			print_error("%s %s: routes.c takes query \"%s\", api/openapi.yaml (line %d) "
				    "lists \"%s\"\n",
			    t->method, t->path, tq, c->line, cq);
			bad++;
			continue;
		}
		for (const char *w = tq; *w != '\0';) {
			const char *sp = strchr(w, ' ');
			size_t wl = sp ? (size_t)(sp - w) : strlen(w);

			/* sorted: a repeated name is next to itself */
			if (sp != NULL && strncmp(sp + 1, w, wl) == 0 &&
			    (sp[1 + wl] == ' ' || sp[1 + wl] == '\0')) {
				print_error("%s %s lists query parameter %.*s twice\n", t->method,
				    t->path, (int)wl, w);
				bad++;
				break;
			}
			w = sp ? sp + 1 : w + wl;
		}
	}
	return bad;
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

/*
 * The query parameters the dispatcher allows on each route (routes.c)
 * are the operation's in the contract, no more, no fewer.
 */
static void
test_query_parameters_match(void **state)
{
	const struct ops *contract = *state;
	struct ops *table = calloc(1, sizeof(*table));
	int bad;

	assert_non_null(table);
	if (contract->error[0] != '\0')
		fail_msg("%s: %s", OPENAPI_PATH, contract->error);
	table_ops(table);
	bad = report_query_differences(table, contract);
	free(table);
	if (bad > 0)
		fail_msg("%d route(s) disagree on their query parameters", bad);
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
				  "        parameters:\n"
				  "          - name: not-a-parameter\n"
				  "    delete:\n"
				  "      parameters:\n"
				  "        - $ref: \"#/components/parameters/Limit\"\n"
				  "        - name: colour\n"
				  "          in: query\n"
				  "          schema: {type: string}\n"
				  "        - in: header\n"
				  "          name: X-Other\n"
				  "      responses:\n"
				  "        '204':\n"
				  "          security: []\n"
				  "    parameters:\n"
				  "      - name: shared\n"
				  "        in: query\n"
				  "  x-extension:\n"
				  "    get:\n"
				  "components:\n"
				  "  schemas:\n"
				  "    get:\n"
				  "  parameters:\n"
				  "    RequestId:\n"
				  "      name: X-Request-Id\n"
				  "      in: header\n"
				  "    Limit:\n"
				  "      name: limit\n"
				  "      in: query\n";
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
	/* query parameters: inline, referenced, and the path's own for each operation */
	assert_string_equal(ops->op[0].query, "");
	assert_string_equal(ops->op[1].query, "shared");
	assert_string_equal(ops->op[2].query, "limit colour shared");
	{
		static const char dangling[] = "paths:\n  /v1/x:\n    get:\n      parameters:\n"
					       "        - $ref: '#/components/parameters/Nope'\n";

		scan_contract(dangling, sizeof(dangling) - 1, ops);
		assert_string_not_equal(ops->error, "");
	}

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
	/* query parameters: order does not matter, a difference or a repeat does */
	memset(a, 0, sizeof(*a));
	memset(b, 0, sizeof(*b));
	ops_add(a, "GET", "/v1/x", 1, false);
	ops_add(b, "GET", "/v1/x", 0, false);
	snprintf(a->op[0].query, QUERY_LEN, "limit cursor status");
	snprintf(b->op[0].query, QUERY_LEN, "status limit cursor");
	assert_int_equal(report_query_differences(b, a), 0);
	snprintf(b->op[0].query, QUERY_LEN, "limit cursor");
	assert_int_equal(report_query_differences(b, a), 1);
	snprintf(a->op[0].query, QUERY_LEN, "limit cursor limit");
	snprintf(b->op[0].query, QUERY_LEN, "limit limit cursor");
	assert_int_equal(report_query_differences(b, a), 1);
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
		cmocka_unit_test_setup_teardown(test_query_parameters_match, setup, teardown),
		cmocka_unit_test(test_embedded_contract_is_current),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
