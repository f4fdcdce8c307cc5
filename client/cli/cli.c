/*
 * cli.c - dispatching through the command tables, option parsing,
 * help text, and the server call / error reporting every command uses.
 */
#include "cli.h"
#include "output.h"

#include "core/strbuf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_PATH_MAX 2048
#define CLI_MAX_PAGES 10000

static const struct cli_command *
cli_find(const struct cli_command *table, const char *name)
{
	for (; table->name != NULL; table++) {
		if (strcmp(table->name, name) == 0)
			return table;
	}
	return NULL;
}

static bool
cli_is_help(const char *arg)
{
	return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

void
cli_print_table_help(const struct cli_command *table, const char *prefix, bool to_stderr)
{
	FILE *out = to_stderr ? stderr : stdout;
	int width = 0;

	for (const struct cli_command *c = table; c->name != NULL; c++) {
		int w = (int)strlen(c->name);

		if (w > width)
			width = w;
	}
	fprintf(out, "usage: %s COMMAND [ARGS]\n\ncommands:\n", prefix);
	for (const struct cli_command *c = table; c->name != NULL; c++)
		fprintf(out, "  %-*s   %s\n", width, c->name, c->summary);
	fprintf(out, "\nRun '%s COMMAND --help' for the details of a command.\n", prefix);
}

static void
cli_print_usage_line(FILE *out, const char *prefix, const struct cli_command *cmd)
{
	fprintf(out, "usage: %s %s%s%s\n", prefix, cmd->name,
	    cmd->usage && cmd->usage[0] ? " " : "", cmd->usage ? cmd->usage : "");
}

static void
cli_print_command_help(const char *prefix, const struct cli_command *cmd)
{
	cli_print_usage_line(stdout, prefix, cmd);
	printf("\n%s\n", cmd->help != NULL ? cmd->help : cmd->summary);
	if (cmd->options != NULL && cmd->options[0].name != NULL) {
		printf("\noptions:\n");
		for (const struct cli_option *o = cmd->options; o->name != NULL; o++) {
			char left[96];

			snprintf(left, sizeof(left), "--%s%s%s", o->name, o->arg ? " " : "",
			    o->arg ? o->arg : "");
			printf("  %-26s %s%s\n", left, o->help, o->repeat ? " (repeatable)" : "");
		}
	}
	printf("\nglobal options: -o table|wide|json|yaml|name, --no-headers, --server URL\n");
}

static const struct cli_option *
cli_find_option(const struct cli_command *cmd, const char *name, size_t len)
{
	if (cmd->options == NULL)
		return NULL;
	for (const struct cli_option *o = cmd->options; o->name != NULL; o++) {
		if (strlen(o->name) == len && strncmp(o->name, name, len) == 0)
			return o;
	}
	return NULL;
}

static int
cli_parse_args(struct cli *cli, const char *prefix, const struct cli_command *cmd, int argc,
    char **argv, struct cli_args *out, bool *help)
{
	bool dashdash = false;

	memset(out, 0, sizeof(*out));
	*help = false;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		const struct cli_option *o;
		const char *eq, *value;
		size_t nlen;

		if (!dashdash && strcmp(a, "--") == 0) {
			dashdash = true;
			continue;
		}
		if (!dashdash && cli_is_help(a)) {
			*help = true;
			return 0;
		}
		if (dashdash || a[0] != '-' || a[1] == '\0') {
			if (out->npos >= CLI_MAX_POSITIONAL || out->npos >= cmd->max_args) {
				fprintf(stderr, "%s %s: too many arguments\n", prefix, cmd->name);
				goto fail;
			}
			out->pos[out->npos++] = a;
			continue;
		}
		if (a[1] != '-') {
			fprintf(stderr, "%s: unknown option %s\n", cli->prog, a);
			goto fail;
		}
		eq = strchr(a + 2, '=');
		nlen = eq ? (size_t)(eq - (a + 2)) : strlen(a + 2);
		o = cli_find_option(cmd, a + 2, nlen);
		if (o == NULL) {
			fprintf(stderr, "%s: unknown option %.*s\n", cli->prog, (int)(nlen + 2), a);
			goto fail;
		}
		if (o->arg == NULL) {
			if (eq != NULL) {
				fprintf(stderr, "%s: option --%s takes no value\n", cli->prog,
				    o->name);
				goto fail;
			}
			value = "";
		} else if (eq != NULL) {
			value = eq + 1;
		} else if (i + 1 < argc) {
			value = argv[++i];
		} else {
			fprintf(stderr, "%s: option --%s needs a value (%s)\n", cli->prog, o->name,
			    o->arg);
			goto fail;
		}
		if (!o->repeat && cli_opt(out, o->name) != NULL) {
			fprintf(stderr, "%s: option --%s given more than once\n", cli->prog,
			    o->name);
			goto fail;
		}
		if (out->nopt >= CLI_MAX_OPTIONS) {
			fprintf(stderr, "%s: too many options\n", cli->prog);
			goto fail;
		}
		out->opt[out->nopt].name = o->name;
		out->opt[out->nopt].value = value;
		out->nopt++;
	}
	if (out->npos < cmd->min_args) {
		fprintf(stderr, "%s %s: missing arguments\n", prefix, cmd->name);
		goto fail;
	}
	return 0;
fail:
	cli_print_usage_line(stderr, prefix, cmd);
	return -1;
}

/* The command of table closest to word (kubectl's suggestion: distance <= 2, or a prefix). */
static const char *
cli_nearest(const struct cli_command *table, const char *word)
{
	const char *best = NULL;
	size_t bestd = 3;

	for (const struct cli_command *c = table; c->name != NULL; c++) {
		size_t d = text_edit_distance(word, c->name);

		if (strlen(word) >= 2 && strncmp(c->name, word, strlen(word)) == 0)
			d = 1;
		if (d < bestd) {
			bestd = d;
			best = c->name;
		}
	}
	return best;
}

/*
 * The group next to the last word of prefix, singular or plural ("gpupool
 * request" -> "requests", "gpupool pools" -> "pool"), when it has a command
 * named word (or close to it): its name and that command's, else NULL.
 */
static const char *
cli_sibling(const struct cli *cli, const char *prefix, const char *word, const char **near)
{
	const char *last = strrchr(prefix, ' ');
	char want[64];
	size_t n;

	if (cli->root == NULL || last == NULL || strchr(prefix, ' ') != last)
		return NULL; /* only for first-level groups */
	last++;
	n = strlen(last);
	if (n < 2 || n + 2 > sizeof(want))
		return NULL;
	if (last[n - 1] == 's')
		snprintf(want, sizeof(want), "%.*s", (int)(n - 1), last);
	else
		snprintf(want, sizeof(want), "%ss", last);
	for (const struct cli_command *g = cli->root; g->name != NULL; g++) {
		const struct cli_command *c;

		if (strcmp(g->name, want) != 0 || g->subcommands == NULL)
			continue;
		c = cli_find(g->subcommands, word);
		*near = c != NULL ? c->name : cli_nearest(g->subcommands, word);
		return *near != NULL ? g->name : NULL;
	}
	return NULL;
}

int
cli_dispatch(struct cli *cli, const struct cli_command *table, const char *prefix, int argc,
    char **argv)
{
	const struct cli_command *cmd;
	struct cli_args args;
	bool help;

	if (argc < 1) {
		cli_print_table_help(table, prefix, true);
		return CLI_EXIT_USAGE;
	}
	if (cli_is_help(argv[0]) || strcmp(argv[0], "help") == 0) {
		cli_print_table_help(table, prefix, false);
		return CLI_EXIT_OK;
	}
	cmd = cli_find(table, argv[0]);
	if (cmd == NULL) {
		const char *near = cli_nearest(table, argv[0]), *other = NULL, *sib;

		fprintf(stderr, "%s: unknown command \"%s\" for \"%s\"\n", cli->prog, argv[0],
		    prefix);
		if (near != NULL)
			fprintf(stderr, "\ndid you mean this?\n\t%s %s\n", prefix, near);
		else if ((sib = cli_sibling(cli, prefix, argv[0], &other)) != NULL)
			/* "request get" -> "requests get": the verbs live in the other group */
			fprintf(stderr, "\ndid you mean this?\n\t%s %s %s\n", cli->prog, sib,
			    other);
		fprintf(stderr, "\n");
		cli_print_table_help(table, prefix, true);
		return CLI_EXIT_USAGE;
	}
	if (cmd->subcommands != NULL &&
	    (cmd->run == NULL || (argc > 1 && cli_find(cmd->subcommands, argv[1]) != NULL))) {
		char sub[256];
		int n = snprintf(sub, sizeof(sub), "%s %s", prefix, cmd->name);

		if (n < 0 || (size_t)n >= sizeof(sub))
			return cli_fail(cli, "the command path is too long");
		return cli_dispatch(cli, cmd->subcommands, sub, argc - 1, argv + 1);
	}
	if (cli_parse_args(cli, prefix, cmd, argc - 1, argv + 1, &args, &help) != 0)
		return CLI_EXIT_USAGE;
	if (help) {
		cli_print_command_help(prefix, cmd);
		if (cmd->subcommands != NULL) {
			printf("\nsubcommands:\n");
			for (const struct cli_command *c = cmd->subcommands; c->name != NULL; c++)
				printf("  %s %s %s %s\n      %s\n", prefix, cmd->name, c->name,
				    c->usage ? c->usage : "", c->summary);
		}
		return CLI_EXIT_OK;
	}
	cli->command_path = prefix;
	snprintf(cli->command, sizeof(cli->command), "%s %s", prefix, cmd->name);
	return cmd->run(cli, cmd, &args);
}

const char *
cli_opt(const struct cli_args *args, const char *name)
{
	const char *v = NULL;

	for (int i = 0; i < args->nopt; i++) {
		if (strcmp(args->opt[i].name, name) == 0)
			v = args->opt[i].value;
	}
	return v;
}

int
cli_opt_all(const struct cli_args *args, const char *name, const char **vals, int max)
{
	int n = 0;

	for (int i = 0; i < args->nopt && n < max; i++) {
		if (strcmp(args->opt[i].name, name) == 0)
			vals[n++] = args->opt[i].value;
	}
	return n;
}

int
cli_usage_error(struct cli *cli, const struct cli_command *cmd, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", cli->prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	if (cmd != NULL)
		cli_print_usage_line(stderr, cli->command_path ? cli->command_path : cli->prog,
		    cmd);
	return CLI_EXIT_USAGE;
}

int
cli_fail(struct cli *cli, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", cli->prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return CLI_EXIT_FAIL;
}

const char *
cli_server(const struct cli *cli)
{
	const char *s = cli->server_flag;

	if (s == NULL || s[0] == '\0')
		s = getenv("GPUPOOL_SERVER");
	if (s == NULL || s[0] == '\0')
		s = config_get(&cli->config, "server");
	if (s == NULL || s[0] == '\0')
		return NULL;
	return s;
}

struct gp_client *
cli_client(struct cli *cli)
{
	const char *server, *token;

	if (cli->client != NULL)
		return cli->client;
	server = cli_server(cli);
	if (server == NULL) {
		cli_fail(cli,
		    "no server configured: use --server URL, GPUPOOL_SERVER or "
		    "'gpupool login --server URL'");
		return NULL;
	}
	token = getenv("GPUPOOL_TOKEN");
	if (token == NULL || token[0] == '\0')
		token = config_get(&cli->config, "token");
	cli->client = gp_client_create(server, token);
	if (cli->client == NULL) {
		cli_fail(cli, "invalid server URL \"%s\": expected http://HOST:PORT or https://...",
		    server);
		return NULL;
	}
	gp_client_set_retries(cli->client, 2);
	return cli->client;
}

/* Print what went wrong with r to stderr. */
static void
cli_report(struct cli *cli, const struct gp_client_response *r)
{
	struct gp_error err;

	gp_client_error_from_response(r, &err);
	if (err.status == 0) {
		fprintf(stderr, "%s: %s\n", cli->prog, err.message);
		return;
	}
	fprintf(stderr, "%s: %s (%s, HTTP %d)\n", cli->prog, err.message, err.code, err.status);
	for (int i = 0; i < err.nfields; i++)
		fprintf(stderr, "  %s: %s\n", err.fields[i].field[0] ? err.fields[i].field : "-",
		    err.fields[i].message);
	{
		/* a refused approval says, per item, what is missing */
		struct json_object *sh = gp_client_json_get(r->json, "short");

		for (size_t i = 0; sh != NULL && json_object_is_type(sh, json_type_array) &&
		     i < json_object_array_length(sh);
		     i++) {
			struct json_object *it = json_object_array_get_idx(sh, i);
			struct json_object *m = gp_client_json_get(it, "model");
			struct json_object *p = gp_client_json_get(it, "profile");
			struct json_object *n = gp_client_json_get(it, "missing");

			fprintf(stderr, "  short: %s/%s, %lld missing\n",
			    m ? json_object_get_string(m) : "?",
			    p ? json_object_get_string(p) : "?",
			    n ? (long long)json_object_get_int64(n) : 0LL);
		}
	}
	if (r->status == 412)
		fprintf(stderr,
		    "hint: the object changed since its ETag was read; get it again and "
		    "retry\n");
	/* a failed login needs no advice to log in */
	if (r->status == 401 && strcmp(cli->command, "gpupool login") != 0)
		fprintf(stderr, "hint: run '%s login' to get a new token\n", cli->prog);
}

int
cli_call(struct cli *cli, const char *method, const char *path, struct json_object *body,
    struct gp_client_response *out)
{
	struct gp_client *c = cli_client(cli);
	char key[40];
	int rc;

	memset(out, 0, sizeof(*out));
	if (c == NULL)
		return CLI_EXIT_FAIL;
	if (strcmp(method, "POST") == 0) {
		if (gp_client_random_key(key, sizeof(key)) != 0)
			return cli_fail(cli, "could not generate an idempotency key");
		rc = gp_client_send_json(c, method, path, body, key, out);
	} else {
		rc = gp_client_send_json(c, method, path, body, NULL, out);
	}
	return cli_check_response(cli, rc, out);
}

int
cli_call_if_match(struct cli *cli, const char *method, const char *path, struct json_object *body,
    const char *if_match, struct gp_client_response *out)
{
	struct gp_client *c;
	const char *headers[3];
	const char *text = NULL;
	char key[40], keyhdr[64], tag[160];
	size_t n = 0, len = 0;
	int rc;

	if (if_match == NULL)
		return cli_call(cli, method, path, body, out);
	memset(out, 0, sizeof(*out));
	c = cli_client(cli);
	if (c == NULL)
		return CLI_EXIT_FAIL;
	if (snprintf(tag, sizeof(tag), "If-Match: %s", if_match) >= (int)sizeof(tag))
		return cli_fail(cli, "the ETag is too long");
	headers[n++] = tag;
	if (strcmp(method, "POST") == 0) {
		if (gp_client_random_key(key, sizeof(key)) != 0)
			return cli_fail(cli, "could not generate an idempotency key");
		snprintf(keyhdr, sizeof(keyhdr), "Idempotency-Key: %s", key);
		headers[n++] = keyhdr;
	}
	headers[n] = NULL;
	if (body != NULL) {
		text = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
		len = strlen(text);
	}
	rc = gp_client_request(c, method, path, text, len, headers, out);
	return cli_check_response(cli, rc, out);
}

int
cli_if_match_opt(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    char *buf, size_t len)
{
	const char *v = cli_opt(args, "if-match");
	size_t n;
	int w;

	buf[0] = '\0';
	if (v == NULL)
		return 0;
	n = strlen(v);
	for (size_t i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)v[i];

		/* a header value: no control characters (no header injection) */
		if (ch < 0x21 || ch == 0x7f) {
			cli_usage_error(cli, cmd,
			    "--if-match: an ETag has no spaces or control "
			    "characters");
			return -1;
		}
	}
	if (n == 0) {
		cli_usage_error(cli, cmd, "--if-match is empty");
		return -1;
	}
	if (strcmp(v, "*") == 0 || v[0] == '"' || strncmp(v, "W/", 2) == 0)
		w = snprintf(buf, len, "%s", v);
	else
		w = snprintf(buf, len, "\"%s\"", v);
	if (w < 0 || (size_t)w >= len) {
		buf[0] = '\0';
		cli_usage_error(cli, cmd, "--if-match is too long");
		return -1;
	}
	return 0;
}

int
cli_exit_for_status(long status)
{
	if (status == 404)
		return CLI_EXIT_NOT_FOUND;
	if (status == 409 || status == 412)
		return CLI_EXIT_CONFLICT;
	if (status == 0 || status == 429 || status >= 500)
		return CLI_EXIT_UNAVAILABLE;
	return CLI_EXIT_REFUSED;
}

int
cli_check_response(struct cli *cli, int rc, struct gp_client_response *out)
{
	long status;

	if (rc == 0 && gp_client_ok(out))
		return CLI_EXIT_OK;
	cli_report(cli, out);
	status = rc == 0 ? out->status : 0;
	gp_client_response_free(out);
	return cli_exit_for_status(status);
}

static int
cli_page_path(char *buf, size_t len, const char *path, const char *limit, const char *cursor)
{
	char esc[1024];
	int n;

	n = snprintf(buf, len, "%s%climit=%s", path, strchr(path, '?') ? '&' : '?', limit);
	if (n < 0 || (size_t)n >= len)
		return -1;
	if (cursor != NULL) {
		size_t used = (size_t)n;

		if (gp_client_escape(cursor, esc, sizeof(esc)) != 0)
			return -1;
		n = snprintf(buf + used, len - used, "&cursor=%s", esc);
		if (n < 0 || (size_t)n >= len - used)
			return -1;
	}
	return 0;
}

static int
cli_check_limit(struct cli *cli, const char *s)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 1 || v > 500) {
		fprintf(stderr, "%s: --limit must be an integer from 1 to 500\n", cli->prog);
		return -1;
	}
	return 0;
}

int
cli_list(struct cli *cli, const char *path, const struct cli_args *args, struct json_object **out)
{
	return cli_list_page(cli, path, args, NULL, out);
}

int
cli_list_page(struct cli *cli, const char *path, const struct cli_args *args,
    const char *default_limit, struct json_object **out)
{
	const char *limit = cli_opt(args, "limit"), *cursor = cli_opt(args, "cursor");
	struct json_object *doc = NULL, *items = NULL;
	struct gp_client_response r;
	char page[CLI_PATH_MAX], next[1024];
	bool asked = limit != NULL || cursor != NULL;
	bool one_page = asked || (default_limit != NULL && cli_opt(args, "all") == NULL);
	int rc;

	*out = NULL;
	if (limit != NULL && cli_check_limit(cli, limit) != 0)
		return CLI_EXIT_USAGE;
	if (limit == NULL)
		limit = !one_page ? "500" : default_limit != NULL ? default_limit : "50";
	doc = json_object_new_object();
	items = json_object_new_array();
	if (doc == NULL || items == NULL) {
		rc = cli_fail(cli, "out of memory");
		goto fail;
	}
	for (int pages = 0;; pages++) {
		struct json_object *got, *nc;
		size_t n;

		if (pages >= CLI_MAX_PAGES) {
			rc = cli_fail(cli, "the listing did not end after %d pages", CLI_MAX_PAGES);
			goto fail;
		}
		if (cli_page_path(page, sizeof(page), path, limit, cursor) != 0) {
			rc = cli_fail(cli, "the request path is too long");
			goto fail;
		}
		rc = cli_call(cli, "GET", page, NULL, &r);
		if (rc != CLI_EXIT_OK)
			goto fail;
		got = gp_client_json_get(r.json, "items");
		if (got == NULL || !json_object_is_type(got, json_type_array)) {
			gp_client_response_free(&r);
			rc = cli_fail(cli, "the server's answer has no \"items\" list");
			goto fail;
		}
		n = json_object_array_length(got);
		for (size_t i = 0; i < n; i++) {
			if (json_object_array_add(items,
				json_object_get(json_object_array_get_idx(got, i))) != 0) {
				gp_client_response_free(&r);
				rc = cli_fail(cli, "out of memory");
				goto fail;
			}
		}
		nc = gp_client_json_get(r.json, "next_cursor");
		cursor = NULL;
		if (nc != NULL && json_object_is_type(nc, json_type_string) &&
		    json_object_get_string_len(nc) > 0) {
			if ((size_t)json_object_get_string_len(nc) >= sizeof(next)) {
				gp_client_response_free(&r);
				rc = cli_fail(cli, "the server's cursor is too long");
				goto fail;
			}
			snprintf(next, sizeof(next), "%s", json_object_get_string(nc));
			cursor = next;
		}
		gp_client_response_free(&r);
		if (one_page || cursor == NULL)
			break;
	}
	json_object_object_add(doc, "items", items);
	json_object_object_add(doc, "next_cursor", cursor ? json_object_new_string(cursor) : NULL);
	if (one_page && cursor != NULL && cli->output != CLI_OUTPUT_JSON)
		/* on stderr, so that a table on stdout stays parseable */
		fprintf(stderr, "more items: add --cursor %s for the next page (or %s for all)\n",
		    cursor, default_limit != NULL ? "--all" : "leave out --limit");
	*out = doc;
	return CLI_EXIT_OK;
fail:
	json_object_put(items);
	json_object_put(doc);
	return rc;
}

int
cli_escape(struct cli *cli, const char *s, char *buf, size_t len)
{
	if (s[0] == '\0') {
		cli_fail(cli, "an empty name is not allowed here");
		return -1;
	}
	if (gp_client_escape(s, buf, len) != 0) {
		cli_fail(cli, "\"%.40s...\" is too long", s);
		return -1;
	}
	return 0;
}

int
cli_query_add(struct cli *cli, char *buf, size_t len, const char *key, const char *value)
{
	char esc[1024];
	size_t used = strlen(buf);
	int n;

	if (value == NULL)
		return 0;
	if (gp_client_escape(value, esc, sizeof(esc)) != 0) {
		cli_fail(cli, "the value of %s is too long", key);
		return -1;
	}
	n = snprintf(buf + used, len - used, "%c%s=%s", strchr(buf, '?') ? '&' : '?', key, esc);
	if (n < 0 || (size_t)n >= len - used) {
		buf[used] = '\0';
		cli_fail(cli, "the request path is too long");
		return -1;
	}
	return 0;
}

int
cli_parse_int64(struct cli *cli, const struct cli_command *cmd, const char *option, const char *s,
    long long min, long long max, long long *out)
{
	char *end;
	long long v;

	errno = 0;
	v = (s[0] >= '0' && s[0] <= '9') ? strtoll(s, &end, 10) : 0;
	if (s[0] < '0' || s[0] > '9' || errno != 0 || *end != '\0' || v < min || v > max) {
		cli_usage_error(cli, cmd, "--%s must be an integer from %lld to %lld, not \"%s\"",
		    option, min, max, s);
		return -1;
	}
	*out = v;
	return 0;
}

int
cli_print_list(struct cli *cli, struct json_object *doc, void (*decorate)(struct json_object *item),
    const struct output_column *columns)
{
	struct json_object *items = gp_client_json_get(doc, "items");

	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, doc);
	} else {
		for (size_t i = 0;
		     decorate != NULL && items != NULL && i < json_object_array_length(items); i++)
			decorate(json_object_array_get_idx(items, i));
		output_table(stdout, items, columns);
	}
	json_object_put(doc);
	return CLI_EXIT_OK;
}
