/*
 * test_cli_walk.c - every gpupool command, found by walking the help
 * ("gpupool --help", then each group's), so that a new command is
 * checked without being listed here:
 *
 *   - its help names only flags its parser accepts: each flag the help
 *     mentions (usage line, text, options) is an option of the command,
 *     and each option is tried against the parser with and without a
 *     value (no server is involved: --help ends the parse);
 *   - its usage line shows every option it has;
 *   - the completion script offers the same options and subcommands;
 *   - a group that has a "get" says so ("get", not "show");
 *   - it has at least one case that succeeds and one that fails against
 *     a real gpupoold (the cases are below; a command without both fails
 *     the test, naming it);
 *   - -o yaml parses as YAML (PyYAML when python3 has it, and always a
 *     strict reader of the subset the CLI writes) and equals -o json;
 *   - every operation of api/openapi.yaml has a command (or a stated
 *     reason not to: probes, the node agent's own endpoints).
 */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>

#define WALK_MAX_COMMANDS 160
#define WALK_MAX_WORDS 8
#define WALK_MAX_FLAGS 48
#define WALK_MAX_ARGS 48

struct walk_command {
	char path[128];          /* "nodes update" */
	bool runnable;           /* has its own --help page with options */
	const char *help;        /* that page */
	char group_summary[256]; /* the line its parent lists it with */
	bool is_group;           /* has subcommands */
	bool has_get;            /* ... one of them "get" */
	int ok, failed;          /* cases run */
};

struct walk {
	struct fixture *fx;
	struct walk_command cmds[WALK_MAX_COMMANDS];
	int n;
	const char *completion; /* gpupool completion bash */
	const char *const *env; /* the environment cases run in (admin logged in) */
	bool pyyaml;
};

static struct walk_command *
walk_find(struct walk *w, const char *path)
{
	for (int i = 0; i < w->n; i++) {
		if (strcmp(w->cmds[i].path, path) == 0)
			return &w->cmds[i];
	}
	return NULL;
}

/* Split path into argv (words), append extra (NULL-terminated) and NULL. */
static int
walk_argv(const char *path, char *buf, size_t len, const char **argv, const char *const *extra)
{
	int n = 0;
	char *save = NULL, *tok;

	snprintf(buf, len, "%s", path);
	for (tok = strtok_r(buf, " ", &save); tok != NULL && n < WALK_MAX_ARGS - 8;
	     tok = strtok_r(NULL, " ", &save))
		argv[n++] = tok;
	for (; extra != NULL && *extra != NULL; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	return n;
}

/* "gpupool <path> <extra...>" with no server and no config. */
static struct fx_proc *
walk_run_offline(struct walk *w, const char *path, const char *const *extra)
{
	const char *argv[WALK_MAX_ARGS + 1];
	char buf[256];

	walk_argv(path, buf, sizeof(buf), argv, extra);
	return fx_cli_argv(w->fx,
	    (const char *const[]){ fx_str(w->fx, "HOME=%s/walk-nohome", w->fx->tmpdir), NULL },
	    NULL, argv);
}

/* The "  name   summary" lines of a table help after "commands:\n". */
static void walk_group(struct walk *w, const char *path, const char *out);

static void
walk_command(struct walk *w, const char *path, const char *summary)
{
	struct fx_proc *p = walk_run_offline(w, path, (const char *const[]){ "--help", NULL });
	struct walk_command *c;
	char prefix[160];

	if (p->status != 0)
		print_error("gpupool %s --help: status %d\n%s", path, p->status, p->err);
	assert_int_equal(p->status, 0);
	assert_true(w->n < WALK_MAX_COMMANDS);
	c = &w->cmds[w->n++];
	snprintf(c->path, sizeof(c->path), "%s", path);
	snprintf(c->group_summary, sizeof(c->group_summary), "%s", summary);
	snprintf(prefix, sizeof(prefix), "usage: gpupool %s COMMAND [ARGS]\n\ncommands:\n", path);
	if (strncmp(p->out, prefix, strlen(prefix)) == 0) {
		c->is_group = true;
		c->has_get = strstr(p->out, "\n  get ") != NULL;
		walk_group(w, path, p->out + strlen(prefix));
		return;
	}
	c->runnable = true;
	c->help = p->out;
	{
		const char *subs = strstr(p->out, "\nsubcommands:\n");
		char line[512];

		if (subs == NULL)
			return;
		c->is_group = true;
		subs += strlen("\nsubcommands:\n");
		snprintf(prefix, sizeof(prefix), "  gpupool %s ", path);
		while (strncmp(subs, prefix, strlen(prefix)) == 0) {
			const char *name = subs + strlen(prefix);
			size_t nl = strcspn(name, " \n");
			const char *sum = strchr(subs, '\n');
			char sub[160], ssum[256] = "";

			snprintf(sub, sizeof(sub), "%s %.*s", path, (int)nl, name);
			if (strncmp(name, "get ", 4) == 0)
				c->has_get = true;
			if (sum != NULL && strncmp(sum + 1, "      ", 6) == 0) {
				size_t sl = strcspn(sum + 7, "\n");

				snprintf(ssum, sizeof(ssum), "%.*s", (int)sl, sum + 7);
				sum = strchr(sum + 1, '\n');
			}
			snprintf(line, sizeof(line), "%s", sub);
			walk_command(w, line, ssum);
			if (sum == NULL)
				break;
			subs = sum + 1;
		}
	}
}

static void
walk_group(struct walk *w, const char *path, const char *out)
{
	while (strncmp(out, "  ", 2) == 0) {
		const char *name = out + 2;
		size_t nl = strcspn(name, " \n");
		const char *sum = name + nl;
		const char *eol = strchr(out, '\n');
		char sub[160], ssum[256];

		while (*sum == ' ')
			sum++;
		snprintf(ssum, sizeof(ssum), "%.*s", (int)(eol - sum), sum);
		snprintf(sub, sizeof(sub), "%s%s%.*s", path, path[0] ? " " : "", (int)nl, name);
		walk_command(w, sub, ssum);
		if (eol == NULL)
			break;
		out = eol + 1;
	}
}

/* ---- flags ---- */

struct walk_flags {
	int n;
	char name[WALK_MAX_FLAGS][40];
	bool arg[WALK_MAX_FLAGS];
};

static int
flags_find(const struct walk_flags *f, const char *name)
{
	for (int i = 0; i < f->n; i++) {
		if (strcmp(f->name[i], name) == 0)
			return i;
	}
	return -1;
}

static void
flags_add(struct walk_flags *f, const char *name, size_t len, bool arg)
{
	char n[40];

	snprintf(n, sizeof(n), "%.*s", (int)len, name);
	if (flags_find(f, n) >= 0 || f->n >= WALK_MAX_FLAGS)
		return;
	snprintf(f->name[f->n], sizeof(f->name[f->n]), "%s", n);
	f->arg[f->n++] = arg;
}

/* Every "--flag" in text[0, len) outside '...' (examples of other commands). */
static void
flags_scan(struct walk_flags *f, const char *text, size_t len)
{
	bool quoted = false;

	for (size_t i = 0; i < len; i++) {
		if (text[i] == '\'') {
			/* a quote opens after a space; an apostrophe in a word (the client's) does not */
			if (quoted || i == 0 || strchr(" (\n", text[i - 1]) != NULL)
				quoted = !quoted;
			continue;
		}
		if (!quoted && text[i] == '-' && i + 2 < len && text[i + 1] == '-' &&
		    text[i + 2] >= 'a' && text[i + 2] <= 'z' &&
		    (i == 0 || strchr(" [|(\n", text[i - 1]) != NULL)) {
			size_t n = strspn(text + i + 2, "abcdefghijklmnopqrstuvwxyz0123456789-");

			flags_add(f, text + i + 2, n, false);
			i += n + 1;
		}
	}
}

/* The options section: "  --name ARG    help" lines. */
static void
flags_options(struct walk_flags *f, const char *help)
{
	const char *o = strstr(help, "\noptions:\n");

	if (o == NULL)
		return;
	o += strlen("\noptions:\n");
	while (strncmp(o, "  --", 4) == 0) {
		const char *name = o + 4;
		size_t n = strcspn(name, " \n");
		bool arg = name[n] == ' ' && name[n + 1] != ' ';

		flags_add(f, name, n, arg);
		o = strchr(o, '\n');
		if (o == NULL)
			break;
		o++;
	}
}

static bool
flags_global(const char *name)
{
	return strcmp(name, "help") == 0 || strcmp(name, "server") == 0 ||
	    strcmp(name, "output") == 0 || strcmp(name, "no-headers") == 0;
}

/* The words the bash completion offers after path. */
static const char *
walk_completion_words(struct walk *w, const char *path)
{
	const char *pat = fx_str(w->fx, "\t\" %s\"|\" %s \"*) words=\"", path, path);
	const char *at = strstr(w->completion, pat);
	size_t n;

	if (at == NULL)
		return NULL;
	at += strlen(pat);
	n = strcspn(at, "\"");
	return fx_str(w->fx, " %.*s", (int)n, at);
}

static void
walk_check_flags(struct walk *w, struct walk_command *c)
{
	struct walk_flags opts = { 0 }, said = { 0 }, usage = { 0 };
	const char *help = c->help;
	const char *end = strstr(help, "\nglobal options:");
	const char *words;
	size_t ulen = strcspn(help, "\n");

	assert_non_null(end);
	flags_options(&opts, help);
	flags_scan(&said, help, (size_t)(end - help));
	flags_scan(&usage, help, ulen);
	for (int i = 0; i < said.n; i++) {
		if (flags_find(&opts, said.name[i]) < 0 && !flags_global(said.name[i])) {
			print_error("gpupool %s --help names --%s, which it does not take\n",
			    c->path, said.name[i]);
			fail();
		}
	}
	for (int i = 0; i < opts.n; i++) {
		struct fx_proc *p;

		/* the usage line shows every option */
		if (flags_find(&usage, opts.name[i]) < 0 &&
		    !(strcmp(opts.name[i], "output-file") == 0 && strstr(help, " -o FILE"))) {
			print_error("gpupool %s: the usage line lacks --%s\n", c->path,
			    opts.name[i]);
			fail();
		}
		/* the parser takes it, with a value exactly when the help shows one */
		if (opts.arg[i]) {
			p = walk_run_offline(w, c->path,
			    (const char *const[]){ fx_str(w->fx, "--%s=x", opts.name[i]), "--help",
				NULL });
			assert_int_equal(p->status, 0);
			p = walk_run_offline(w, c->path,
			    (const char *const[]){ fx_str(w->fx, "--%s", opts.name[i]), NULL });
			assert_int_equal(p->status, 2);
			assert_non_null(strstr(p->err, "needs a value"));
		} else {
			p = walk_run_offline(w, c->path,
			    (const char *const[]){ fx_str(w->fx, "--%s", opts.name[i]), "--help",
				NULL });
			assert_int_equal(p->status, 0);
			p = walk_run_offline(w, c->path,
			    (const char *const[]){ fx_str(w->fx, "--%s=x", opts.name[i]), "--help",
				NULL });
			assert_int_equal(p->status, 2);
			assert_non_null(strstr(p->err, "takes no value"));
		}
		assert_null(strstr(p->err, "gpupool: gpupool"));
	}
	/* and nothing else: an unknown option is refused */
	{
		struct fx_proc *p = walk_run_offline(w, c->path,
		    (const char *const[]){ "--no-such-option", "--help", NULL });

		assert_int_equal(p->status, 2);
		assert_non_null(strstr(p->err, "unknown option --no-such-option"));
	}
	/* the completion offers the same options */
	words = walk_completion_words(w, c->path);
	if (words == NULL) {
		print_error("gpupool completion bash: nothing for \"%s\"\n", c->path);
		fail();
	}
	for (int i = 0; i < opts.n; i++)
		assert_non_null(strstr(words, fx_str(w->fx, " --%s ", opts.name[i])));
	{
		struct walk_flags comp = { 0 };

		flags_scan(&comp, words, strlen(words));
		assert_int_equal(comp.n, opts.n);
	}
}

/* ---- YAML: a strict reader of what output.c writes ---- */

struct yaml_in {
	const char *s;
	size_t pos;
	bool bad;
};

static size_t
yaml_indent_at(const struct yaml_in *y, size_t pos)
{
	return strspn(y->s + pos, " ");
}

/*
 * The length of the plain scalar at p (output.c writes a string plain when
 * it starts with a letter or '_', holds only letters, digits and _ . / -,
 * and is no YAML 1.1 boolean or null), else 0.
 */
static size_t
yaml_plain_len(const char *p)
{
	static const char *const words[] = { "y", "n", "yes", "no", "on", "off", "true", "false",
		"null", NULL };
	size_t n;

	if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '_'))
		return 0;
	n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./-");
	for (int i = 0; words[i] != NULL; i++)
		if (strlen(words[i]) == n && strncasecmp(p, words[i], n) == 0)
			return 0;
	return n;
}

/* One JSON value (a scalar, {} or []) or a plain string, up to the end of the line. */
static struct json_object *
yaml_scalar(struct yaml_in *y)
{
	size_t n = strcspn(y->s + y->pos, "\n");

	if (n > 0 && yaml_plain_len(y->s + y->pos) == n) {
		struct json_object *o = json_object_new_string_len(y->s + y->pos, (int)n);

		y->pos += n + 1;
		return o;
	}
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;
	size_t end;

	/* with its newline: a number at the end of the input is not known to have ended */
	o = json_tokener_parse_ex(tok, y->s + y->pos, (int)(n + 1));
	end = json_tokener_get_parse_end(tok);
	if (json_tokener_get_error(tok) != json_tokener_success || y->s[y->pos + n] != '\n' ||
	    (end != n && end != n + 1)) {
		y->bad = true;
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	y->pos += n + 1;
	return o;
}

static struct json_object *yaml_node(struct yaml_in *y, size_t col);

/* A JSON string key, then ':'; returns it (NULL when malformed). */
static char *
yaml_key(struct yaml_in *y)
{
	const char *p = y->s + y->pos;
	size_t i = 1;
	struct json_object *k;
	char *out;

	if (*p != '"') {
		/* a plain key */
		size_t plain = yaml_plain_len(p);

		if (plain == 0 || p[plain] != ':')
			return NULL;
		out = strndup(p, plain);
		y->pos += plain + 1;
		return out;
	}
	while (p[i] != '\0' && p[i] != '"') {
		if (p[i] == '\\' && p[i + 1] != '\0')
			i++;
		i++;
	}
	if (p[i] != '"' || p[i + 1] != ':')
		return NULL;
	{
		char *tmp = strndup(p, i + 1);

		k = tmp != NULL ? json_tokener_parse(tmp) : NULL;
		free(tmp);
	}
	if (k == NULL || !json_object_is_type(k, json_type_string)) {
		json_object_put(k);
		return NULL;
	}
	out = strdup(json_object_get_string(k));
	json_object_put(k);
	y->pos += i + 2;
	return out;
}

static struct json_object *
yaml_map(struct yaml_in *y, size_t col)
{
	struct json_object *obj = json_object_new_object();

	for (;;) {
		char *key = yaml_key(y);
		struct json_object *v;

		if (key == NULL) {
			y->bad = true;
			return obj;
		}
		if (y->s[y->pos] == '\n') {
			size_t n;

			y->pos++;
			n = yaml_indent_at(y, y->pos);
			if (n != col + 2) {
				y->bad = true;
				free(key);
				return obj;
			}
			y->pos += n;
			v = yaml_node(y, n);
		} else if (y->s[y->pos] == ' ') {
			y->pos++;
			v = yaml_scalar(y);
		} else {
			y->bad = true;
			free(key);
			return obj;
		}
		json_object_object_add(obj, key, v);
		free(key);
		if (y->bad || y->s[y->pos] == '\0')
			return obj;
		if (yaml_indent_at(y, y->pos) != col ||
		    (y->s[y->pos + col] != '"' && yaml_plain_len(y->s + y->pos + col) == 0))
			return obj;
		y->pos += col;
	}
}

static struct json_object *
yaml_seq(struct yaml_in *y, size_t col)
{
	struct json_object *arr = json_object_new_array();

	for (;;) {
		if (y->s[y->pos] != '-' || y->s[y->pos + 1] != ' ') {
			y->bad = true;
			return arr;
		}
		y->pos += 2;
		json_object_array_add(arr, yaml_node(y, col + 2));
		if (y->bad || y->s[y->pos] == '\0')
			return arr;
		if (yaml_indent_at(y, y->pos) != col || y->s[y->pos + col] != '-')
			return arr;
		y->pos += col;
	}
}

/* The node at y->pos, which is in column col. */
static struct json_object *
yaml_node(struct yaml_in *y, size_t col)
{
	const char *p = y->s + y->pos;

	if (p[0] == '-' && p[1] == ' ')
		return yaml_seq(y, col);
	if (p[0] == '"') {
		/* a key when the string is followed by ':' */
		size_t i = 1;

		while (p[i] != '\0' && p[i] != '"' && p[i] != '\n') {
			if (p[i] == '\\' && p[i + 1] != '\0')
				i++;
			i++;
		}
		if (p[i] == '"' && p[i + 1] == ':')
			return yaml_map(y, col);
	} else if (yaml_plain_len(p) > 0 && p[yaml_plain_len(p)] == ':') {
		return yaml_map(y, col); /* a plain key */
	}
	return yaml_scalar(y);
}

/* Parse text strictly as the YAML output.c writes; NULL when it is not. */
static struct json_object *
yaml_parse(const char *text)
{
	struct yaml_in y = { text, 0, false };
	struct json_object *o = yaml_node(&y, 0);

	if (y.bad || text[y.pos] != '\0') {
		json_object_put(o);
		return NULL;
	}
	return o;
}

static struct json_object *
walk_json(const char *text)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o = json_tokener_parse_ex(tok, text, (int)strlen(text));

	if (json_tokener_get_error(tok) != json_tokener_success) {
		json_object_put(o);
		o = NULL;
	}
	json_tokener_free(tok);
	return o;
}

/* -o yaml and -o json of the same command say the same thing. */
static void
walk_check_yaml(struct walk *w, const char *const *argv)
{
	const char *av[WALK_MAX_ARGS + 3];
	struct fx_proc *py, *pj;
	struct json_object *a, *b;
	int n = 0;

	av[n++] = "-o";
	av[n++] = "yaml";
	for (int i = 0; argv[i] != NULL; i++)
		av[n++] = argv[i];
	av[n] = NULL;
	py = fx_cli_argv(w->fx, w->env, NULL, av);
	av[1] = "json";
	pj = fx_cli_argv(w->fx, w->env, NULL, av);
	assert_int_equal(py->status, 0);
	assert_int_equal(pj->status, 0);
	a = yaml_parse(py->out);
	b = walk_json(pj->out);
	if (a == NULL || b == NULL || !json_object_equal(a, b))
		print_error("-o yaml is not -o json for gpupool %s ...\nyaml:\n%s\njson:\n%s\n",
		    argv[0], py->out, pj->out);
	assert_non_null(a);
	assert_non_null(b);
	assert_true(json_object_equal(a, b));
	json_object_put(a);
	json_object_put(b);
	if (w->pyyaml) {
		const char *yf = fx_str(w->fx, "%s/walk.yaml", w->fx->tmpdir);
		const char *jf = fx_str(w->fx, "%s/walk.json", w->fx->tmpdir);
		FILE *f;
		int st;

		f = fopen(yf, "w");
		assert_non_null(f);
		fputs(py->out, f);
		fclose(f);
		f = fopen(jf, "w");
		assert_non_null(f);
		fputs(pj->out, f);
		fclose(f);
		st = system(fx_str(w->fx,
		    "python3 -c 'import sys, json, yaml; "
		    "sys.exit(0 if yaml.safe_load(open(sys.argv[1])) == json.load(open(sys.argv[2])) "
		    "else 3)' %s %s",
		    yf, jf));
		if (st != 0)
			print_error("PyYAML reads -o yaml of gpupool %s differently:\n%s\n",
			    argv[0], py->out);
		assert_int_equal(st, 0);
	}
}

/* ---- the cases ---- */

enum {
	YAML = 1
};

/*
 * Run "gpupool ARGS" (NULL-terminated) as the walk's user with input on
 * stdin; expect status; count it for the command it names. yaml: also
 * compare -o yaml with -o json.
 */
static struct fx_proc *
walk_case_env(struct walk *w, const char *const *env, const char *input, int status, int flags,
    const char *const *argv)
{
	struct fx_proc *p = fx_cli_argv(w->fx, env, input, argv);
	struct walk_command *c = NULL;
	char path[160] = "";

	/* the command: the longest run of words (options aside) that names one */
	for (int i = 0; argv[i] != NULL; i++) {
		char longer[160];

		if (argv[i][0] == '-') {
			if (strcmp(argv[i], "--server") == 0 || strcmp(argv[i], "-o") == 0)
				i++;
			if (argv[i] == NULL)
				break;
			continue;
		}
		snprintf(longer, sizeof(longer), "%s%s%s", path, path[0] ? " " : "", argv[i]);
		if (walk_find(w, longer) == NULL)
			break;
		snprintf(path, sizeof(path), "%s", longer);
		if (walk_find(w, path)->runnable)
			c = walk_find(w, path);
	}
	if (p->status != status)
		print_error("gpupool %s ...: status %d, want %d\nstdout: %s\nstderr: %s\n",
		    c != NULL ? c->path : argv[0], p->status, status, p->out, p->err);
	assert_int_equal(p->status, status);
	assert_non_null(c);
	assert_null(strstr(p->err, "gpupool: gpupool"));
	/* one timestamp format: RFC 3339 with Z, never PostgreSQL's +00:00 */
	if (strstr(p->out, "+00:00") != NULL)
		fail_msg("gpupool %s: a timestamp with +00:00:\n%s", c->path, p->out);
	if (status == 0) {
		c->ok++;
		if (flags & YAML)
			walk_check_yaml(w, argv);
	} else {
		c->failed++;
		assert_true(p->err[0] != '\0'); /* a failure says why */
		assert_string_equal(p->out, "");
	}
	return p;
}

#define OK(...) walk_case_env(w, w->env, NULL, 0, 0, (const char *const[]){ __VA_ARGS__, NULL })
#define OKY(...) walk_case_env(w, w->env, NULL, 0, YAML, (const char *const[]){ __VA_ARGS__, NULL })
#define FAIL(st, ...) \
	walk_case_env(w, w->env, NULL, st, 0, (const char *const[]){ __VA_ARGS__, NULL })

/*
 * What the bash completion offers for the words (the last one being
 * completed), run in bash with gpupool as this build's binary and the
 * walk's logged-in HOME: one word a line.
 */
static const char *
walk_complete(struct walk *w, const char *words)
{
	const char *script = fx_str(w->fx, "%s/walk-complete.sh", w->fx->tmpdir);
	const char *outp = fx_str(w->fx, "%s/walk-complete.out", w->fx->tmpdir);
	FILE *f = fopen(script, "w");
	char buf[8192];
	size_t n;

	assert_non_null(f);
	fprintf(f,
	    "gpupool() { '%s' \"$@\"; }\n"
	    "source <(gpupool completion bash)\n"
	    "COMP_WORDS=(%s)\n"
	    "COMP_CWORD=$((${#COMP_WORDS[@]} - 1))\n"
	    "_gpupool\n"
	    "printf '%%s\\n' \"${COMPREPLY[@]}\"\n",
	    GPUPOOL_CLI_PATH, words);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(system(fx_str(w->fx,
			     "env -u GPUPOOL_SERVER -u GPUPOOL_TOKEN -u XDG_CONFIG_HOME HOME='%s' "
			     "bash '%s' >'%s' 2>&1",
			     fx_cli_home(w->fx), script, outp)),
	    0);
	f = fopen(outp, "r");
	assert_non_null(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return fx_str(w->fx, "\n%s", buf);
}

/* Option values and items complete from the server (and -o from its list). */
static void
walk_check_value_completion(struct walk *w, const char *proj)
{
	const char *got;

	got = walk_complete(w, "gpupool nodes list -o ''");
	assert_string_equal(got, "\ntable\nwide\njson\nyaml\nname\n");
	got = walk_complete(w, "gpupool -o j");
	assert_string_equal(got, "\njson\n");
	got = walk_complete(w, "gpupool requests list --project ''");
	if (strstr(got, fx_str(w->fx, "\n%s\n", proj)) == NULL)
		fail_msg("--project does not complete %s: %s", proj, got);
	got = walk_complete(w, "gpupool nodes list --model H100-");
	assert_string_equal(got, "\nH100-80GB\nH100-NVL-94GB\n");
	got = walk_complete(w, "gpupool billing usage --model A100-40GB --profile 3g");
	assert_string_equal(got, "\n3g.20gb\n");
	got = walk_complete(w, "gpupool capacity simulate H100-80GB/3g");
	assert_string_equal(got, "\nH100-80GB/3g.40gb\n");
	/* commands still complete where no value is due */
	got = walk_complete(w, "gpupool requ");
	assert_string_equal(got, "\nrequest\nrequests\n");
}

static const char *
walk_id(struct walk *w, const char *sql, const char *arg)
{
	return fx_str(w->fx, "%lld", (long long)fx_sql_int64(w->fx, sql, arg));
}

static void
walk_cases(struct walk *w)
{
	struct fixture *fx = w->fx;
	const char *proj = fx_unique(fx, "walk");
	const char *user = fx_unique(fx, "walk-u");
	const char *cl = fx_unique(fx, "walk-cl"), *cl2 = fx_unique(fx, "walk-cl");
	const char *node = fx_unique(fx, "walk-n"), *node2 = fx_unique(fx, "walk-n");
	const char *g0 = "GPU-3a1c0000-0000-4000-8000-000000000001";
	const char *g1 = "GPU-3a1c0000-0000-4000-8000-000000000002";
	const char *file = fx_str(fx, "%s/walk-export.csv", fx->tmpdir);
	const char *const nohome[] = { fx_str(fx, "HOME=%s/walk-nohome", fx->tmpdir), NULL };
	const char *const badtoken[] = { fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url),
		"GPUPOOL_TOKEN=gpp_not_a_real_token", NULL };
	const char *id, *req, *pool;
	struct fx_proc *p;

	/* who you are */
	walk_case_env(w, NULL, FIXTURE_ADMIN_PASSWORD "\n", 0, 0,
	    (const char *const[]){ "--server", fx->server->base_url, "login", "--username",
		FIXTURE_ADMIN_USER, NULL });
	walk_case_env(w, NULL, "wrong\n", 3, 0,
	    (const char *const[]){ "--server", fx->server->base_url, "login", "--username",
		FIXTURE_ADMIN_USER, NULL });
	/* the failed login kept the stored token: log in again for the rest */
	walk_case_env(w, NULL, FIXTURE_ADMIN_PASSWORD "\n", 0, 0,
	    (const char *const[]){ "--server", fx->server->base_url, "login", "--username",
		FIXTURE_ADMIN_USER, NULL });
	OKY("me");
	walk_case_env(w, badtoken, NULL, 3, 0, (const char *const[]){ "me", NULL });
	/* no server answers: unavailable, worth retrying */
	walk_case_env(w, (const char *const[]){ "GPUPOOL_SERVER=http://127.0.0.1:1", NULL }, NULL,
	    6, 0, (const char *const[]){ "me", NULL });
	OK("version");
	FAIL(2, "version", "extra");
	OK("logout");
	walk_case_env(w, nohome, NULL, 1, 0, (const char *const[]){ "logout", NULL });
	walk_case_env(w, NULL, FIXTURE_ADMIN_PASSWORD "\n", 0, 0,
	    (const char *const[]){ "--server", fx->server->base_url, "login", "--username",
		FIXTURE_ADMIN_USER, NULL });
	OK("completion", "bash");
	FAIL(2, "completion", "tcsh");

	/* users and tokens */
	walk_case_env(w, w->env, "walk-Passw0rd-long\n", 0, 0,
	    (const char *const[]){ "users", "create", user, "--role", "none", NULL });
	FAIL(2, "users", "create", "x");
	OK("users", "list");
	FAIL(3, "users", "list", "--cursor", "forged");
	OKY("users", "get", user);
	FAIL(4, "users", "get", "no-such-user");
	OK("users", "update", user, "--role", "operator");
	FAIL(2, "users", "update", user);
	OK("tokens", "create", "walk-token");
	FAIL(2, "tokens", "create", "t", "--expires-at", "soon");
	OK("tokens", "list");
	FAIL(2, "tokens", "list", "--limit", "0");
	id = walk_id(w, "SELECT max(id) FROM tokens WHERE name = $1", "walk-token");
	OK("tokens", "get", id);
	FAIL(4, "tokens", "get", "999999999");
	OK("tokens", "revoke", id);
	FAIL(4, "tokens", "revoke", id);

	/* projects and members */
	OK("projects", "create", proj, "--display-name", "Walk");
	FAIL(2, "projects", "create", "x");
	OK("projects", "list");
	FAIL(2, "projects", "list", "--limit", "x");
	OKY("projects", "get", proj);
	FAIL(4, "projects", "get", "no-such-project");
	OKY("projects", "kubernetes", proj);
	FAIL(4, "projects", "kubernetes", "no-such-project");
	OK("projects", "update", proj, "--display-name", "Walk 2");
	FAIL(2, "projects", "update", proj);
	OK("members", "add", proj, FIXTURE_ADMIN_USER, "--role", "owner");
	OK("members", "add", proj, user, "--role", "member");
	FAIL(2, "members", "add", proj, user, "--role", "boss");
	OKY("members", "list", proj);
	FAIL(4, "members", "list", "no-such-project");
	OK("members", "remove", proj, user);
	FAIL(4, "members", "remove", proj, user);

	/* the inventory */
	OK("clusters", "create", cl, "--region", "eu");
	OK("clusters", "create", cl2, "--region", "eu");
	FAIL(2, "clusters", "create", "x");
	OKY("clusters", "list");
	FAIL(2, "clusters", "list", "--limit", "501");
	OKY("clusters", "get", cl);
	FAIL(4, "clusters", "get", "no-such-cluster");
	OK("clusters", "update", cl, "--description", "walked");
	FAIL(5, "clusters", "update", cl, "--description", "x", "--if-match", "99");
	OK("clusters", "delete", cl2);
	OKY("clusters", "kubernetes", cl);
	FAIL(4, "clusters", "kubernetes", "no-such-cluster");
	FAIL(4, "clusters", "delete", cl2);
	OK("nodes", "create", node, "--cluster", cl, "--label", "zone=a");
	OK("nodes", "create", node2, "--cluster", cl);
	FAIL(3, "nodes", "create", "x", "--cluster", "no-such-cluster");
	OKY("nodes", "list", "--cluster", cl);
	FAIL(2, "nodes", "list", "--status", "sleeping");
	OKY("nodes", "get", node);
	FAIL(4, "nodes", "get", "no-such-node");
	OK("nodes", "update", node, "--label", "rack=r1");
	FAIL(2, "nodes", "update", node, "--label", "novalue");
	OK("nodes", "cordon", node2, "--reason", "walk");
	FAIL(4, "nodes", "cordon", "no-such-node");
	OK("nodes", "uncordon", node2);
	FAIL(4, "nodes", "uncordon", "no-such-node");
	OK("nodes", "drain", node2);
	FAIL(5, "nodes", "drain", node2, "--if-match", "1");
	OK("nodes", "enroll-token", cl);
	FAIL(2, "nodes", "enroll-token", cl, "--expires-in", "soon");
	OK("gpus", "create", node, "--index", "0", "--uuid", g0, "--model", "H100-80GB");
	OK("gpus", "create", node, "--index", "1", "--uuid", g1, "--model", "H100-80GB", "--mig");
	FAIL(2, "gpus", "create", node, "--index", "16", "--uuid", g0, "--model", "H100-80GB");
	OKY("gpus", "list", "--node", node);
	FAIL(3, "gpus", "list", "--health", "sick");
	OKY("gpus", "get", g1);
	FAIL(4, "gpus", "get", "GPU-00000000-0000-4000-8000-00000000dead");
	/* by node and index, as gpus create takes it */
	p = OKY("gpus", "get", node, "1");
	assert_non_null(strstr(p->out, g1));
	p = FAIL(4, "gpus", "get", node, "7");
	assert_non_null(strstr(p->err, fx_str(fx, "node %s has no GPU at index 7", node)));
	FAIL(2, "gpus", "get", node, "x");
	OK("gpus", "update", g0, "--health", "ok");
	FAIL(2, "gpus", "update", g0, "--mig", "maybe");
	OK("gpus", "metrics", g0);
	FAIL(4, "gpus", "metrics", "GPU-00000000-0000-4000-8000-00000000dead");
	OK("metrics", g0);
	FAIL(2, "metrics");
	OKY("catalog");
	FAIL(2, "catalog", "--mig", "x");
	OK("catalog", "list", "--mig", "on");
	FAIL(2, "catalog", "list", "--product-name", "x", "--pci-device-id", "y");
	OKY("catalog", "get", "A100-40GB");
	FAIL(4, "catalog", "get", "no-such-model");
	OKY("capacity");
	FAIL(2, "capacity", "extra");
	OK("capacity", "simulate", "H100-80GB/3g.40gb=1");
	FAIL(2, "capacity", "simulate", "H100-80GB");
	OK("capacity", "defrag", "plan", "--free-gpus", "--cluster", cl, "--max-moves", "0");
	FAIL(2, "capacity", "defrag", "plan");
	id = walk_id(w, "SELECT max(id) FROM defrag_plans WHERE goal = $1", "free_gpus");
	OKY("capacity", "defrag", "get", id);
	FAIL(4, "capacity", "defrag", "get", "999999999");
	OKY("capacity", "defrag", "list");
	FAIL(2, "capacity", "defrag", "list", "--limit", "0");
	OK("capacity", "defrag", "cancel", id);
	FAIL(5, "capacity", "defrag", "cancel", id);
	OK("capacity", "defrag", "plan", "--free-gpus", "--cluster", cl, "--max-moves", "0");
	id = walk_id(w, "SELECT max(id) FROM defrag_plans WHERE goal = $1", "free_gpus");
	OK("capacity", "defrag", "apply", id, "--wait", "--timeout", "60");
	FAIL(4, "capacity", "defrag", "apply", "999999999");

	/* quotas, requests, pools */
	OKY("quota", "get", proj);
	FAIL(4, "quota", "get", "no-such-project");
	OK("quota", "set", proj, "H100-80GB/full=2", "H100-80GB/3g.40gb=4");
	FAIL(2, "quota", "set", proj, "H100-80GB=2");
	OK("request", "create", "--project", proj, "--pool", "train", "H100-80GB/full=1",
	    "H100-80GB/3g.40gb=1", "--justification", "walk");
	FAIL(2, "request", "create", "--project", proj, "--pool", "train");
	req = walk_id(w,
	    "SELECT max(r.id) FROM pool_requests r JOIN projects p ON p.id = r.project_id "
	    "WHERE p.name = $1",
	    proj);
	OKY("requests", "get", req);
	FAIL(4, "requests", "get", "999999999");
	/* the list and get verbs live under "requests": the singular group says so */
	p = fx_cli(fx, w->env, NULL, "request", "get", req, NULL);
	assert_int_equal(p->status, 2);
	assert_non_null(strstr(p->err, "did you mean this?\n\tgpupool requests get\n"));
	walk_check_value_completion(w, proj);
	OKY("requests", "list", "--project", proj);
	FAIL(3, "requests", "list", "--state", "sleeping");
	/* a generation the request does not have: 412, still pending */
	FAIL(5, "request", "approve", req, "--if-match", "99");
	OK("request", "approve", req, "--note", "ok", "--if-match",
	    walk_id(w, "SELECT generation FROM pool_requests WHERE id = $1::bigint", req));
	FAIL(5, "request", "approve", req);
	pool = walk_id(w,
	    "SELECT max(po.id) FROM pools po JOIN projects p ON p.id = po.project_id "
	    "WHERE p.name = $1",
	    proj);
	OKY("pools", "get", pool);
	FAIL(4, "pools", "get", "999999999");
	OKY("pools", "list", "--project", proj);
	/* without --project: every project's pools (an operator sees all of them) */
	OKY("pools", "list");
	FAIL(2, "pools", "list", "--cursor", "x");
	OK("request", "expand", "--project", proj, "--pool", "train", "H100-80GB/3g.40gb=1");
	FAIL(2, "request", "expand", "--project", proj, "--pool", "train");
	req = walk_id(w,
	    "SELECT max(r.id) FROM pool_requests r JOIN projects p ON p.id = r.project_id "
	    "WHERE p.name = $1",
	    proj);
	OK("request", "reject", req, "--reason", "not now");
	FAIL(2, "request", "reject", req);
	OK("request", "shrink", "--project", proj, "--pool", "train", "H100-80GB/3g.40gb=1");
	FAIL(2, "request", "shrink", "--project", proj, "--pool", "train", "full=1");
	req = walk_id(w,
	    "SELECT max(r.id) FROM pool_requests r JOIN projects p ON p.id = r.project_id "
	    "WHERE p.name = $1",
	    proj);
	OK("request", "cancel", req);
	FAIL(5, "request", "cancel", req);
	OK("request", "release", "--project", proj, "--pool", "train");
	FAIL(2, "request", "release", "--project", proj, "--pool", "train", "H100-80GB/full=1");
	OK("quota", "delete", proj);
	FAIL(4, "quota", "delete", proj);

	/* billing */
	OK("billing", "rates", "set", "H100-80GB", "full", "--price-micro", "2000000", "--currency",
	    "USD", "--from", "2020-01-01T00:00:00Z");
	FAIL(2, "billing", "rates", "set", "H100-80GB", "full");
	OK("billing", "rates");
	FAIL(2, "billing", "rates", "extra");
	OK("billing", "rates", "list", "--model", "H100-80GB");
	FAIL(3, "billing", "rates", "list", "--at", "yesterday");
	OK("rates");
	FAIL(2, "rates", "extra");
	OK("rates", "list");
	FAIL(3, "rates", "list", "--at", "yesterday");
	OK("rates", "set", "H100-80GB", "1g.10gb", "--price-micro", "300000", "--currency", "USD",
	    "--from", "2020-01-01T00:00:00Z");
	FAIL(2, "rates", "set", "H100-80GB", "1g.10gb", "--price-micro", "x", "--currency", "USD",
	    "--from", "2020-01-01T00:00:00Z");
	OK("billing", "accrue");
	FAIL(2, "billing", "accrue", "extra");
	OK("billing", "usage", "--project", proj);
	FAIL(3, "billing", "usage", "--group-by", "planet");
	OK("usage");
	FAIL(3, "usage", "--from", "yesterday");
	id = walk_id(w,
	    "INSERT INTO billing_usage (kind, project_id, model, profile, hour, period, "
	    "price_per_hour_micro, currency, seconds, count, amount_micro) "
	    "SELECT 'usage', id, 'H100-80GB', 'full', '2020-01-01 00:00:00+00', '2020-01', "
	    "2000000, 'USD', 3600, 1, 2000000 FROM projects WHERE name = $1 RETURNING id",
	    proj);
	OK("billing", "adjust", id, "--amount-micro", "-500000", "--note", "walk");
	FAIL(2, "billing", "adjust", id, "--amount-micro", "-500000");
	OK("billing", "periods");
	FAIL(2, "billing", "periods", "extra");
	OK("billing", "periods", "list");
	FAIL(2, "billing", "periods", "list", "extra");
	OK("billing", "periods", "close", "2020-01");
	FAIL(5, "billing", "periods", "close", "2999-01");
	OK("billing", "export", "--from", "2020-01-01T00:00:00Z", "--to", "2020-01-01T01:00:00Z",
	    "--format", "csv", "--output-file", file);
	FAIL(2, "billing", "export", "--period", "2020-01", "--output-file", file);
	OKY("billing", "exports", "list");
	FAIL(2, "billing", "exports", "list", "--limit", "-1");
	id = walk_id(w, "SELECT max(id) FROM billing_exports WHERE format = $1", "csv");
	OKY("billing", "exports", "get", id);
	FAIL(4, "billing", "exports", "get", "999999999");
	OK("reports", "utilization", "--from", "2020-01-01T00:00:00Z", "--to",
	    "2020-01-02T00:00:00Z");
	FAIL(2, "reports", "utilization", "--from", "2020-01-01T00:00:00Z");

	/* agents, alerts, profiles */
	OK("agents", "enroll-token", cl, "--expires-in", "600");
	FAIL(4, "agents", "enroll-token", "no-such-cluster");
	OK("agents", "enroll-tokens", cl);
	FAIL(4, "agents", "enroll-tokens", "no-such-cluster");
	id = walk_id(w,
	    "SELECT max(t.id) FROM enrollment_tokens t JOIN clusters c ON c.id = t.cluster_id "
	    "WHERE c.name = $1",
	    cl);
	OK("agents", "revoke-enroll-token", cl, id);
	FAIL(4, "agents", "revoke-enroll-token", cl, id);
	OK("agents", "revoke-token", node);
	FAIL(4, "agents", "revoke-token", "no-such-node");
	OK("agents", "mig-config", node);
	FAIL(4, "agents", "mig-config", "no-such-node");
	id = walk_id(w,
	    "SELECT alert_raise('drift', 'warning', $1, NULL, NULL, NULL, NULL, 'walk', NULL)",
	    fx_unique(fx, "walk-alert"));
	OK("alerts", "list");
	FAIL(3, "alerts", "list", "--state", "sleeping");
	OK("alerts", "ack", id);
	FAIL(4, "alerts", "ack", "999999999");
	OK("profiles", "list");
	FAIL(2, "profiles", "list", "--limit", "0");

	/* the audit log */
	OKY("audit", "--object-type", "project", "--object-id", proj);
	FAIL(3, "audit", "--since", "yesterday");
	OK("audit", "list", "--limit", "3");
	FAIL(2, "audit", "list", "--all", "--limit", "3");
}

/* Each operation of api/openapi.yaml and the command that calls it. */
static const struct {
	const char *operation;
	const char *command; /* NULL: none, for why */
	const char *why;
} walk_operations[] = {
	{ "getHealthz", "version", NULL },
	{ "getReadyz", NULL, "a readiness probe for load balancers" },
	{ "getMetrics", NULL, "scraped by Prometheus" },
	{ "getOpenapi", NULL, "the API description itself" },
	{ "login", "login", NULL },
	{ "logout", "logout", NULL },
	{ "getMe", "me", NULL },
	{ "createToken", "tokens create", NULL },
	{ "listTokens", "tokens list", NULL },
	{ "getToken", "tokens get", NULL },
	{ "revokeToken", "tokens revoke", NULL },
	{ "createUser", "users create", NULL },
	{ "listUsers", "users list", NULL },
	{ "getUser", "users get", NULL },
	{ "updateUser", "users update", NULL },
	{ "createProject", "projects create", NULL },
	{ "listProjects", "projects list", NULL },
	{ "getProject", "projects get", NULL },
	{ "updateProject", "projects update", NULL },
	{ "listMembers", "members list", NULL },
	{ "putMember", "members add", NULL },
	{ "deleteMember", "members remove", NULL },
	{ "listAudit", "audit", NULL },
	{ "listGpuModels", "catalog list", NULL },
	{ "getGpuModel", "catalog get", NULL },
	{ "createCluster", "clusters create", NULL },
	{ "listClusters", "clusters list", NULL },
	{ "getCluster", "clusters get", NULL },
	{ "updateCluster", "clusters update", NULL },
	{ "deleteCluster", "clusters delete", NULL },
	{ "createNode", "nodes create", NULL },
	{ "listNodes", "nodes list", NULL },
	{ "getNode", "nodes get", NULL },
	{ "updateNode", "nodes update", NULL },
	{ "cordonNode", "nodes cordon", NULL },
	{ "uncordonNode", "nodes uncordon", NULL },
	{ "drainNode", "nodes drain", NULL },
	{ "createGpu", "gpus create", NULL },
	{ "listNodeGpus", "gpus list", NULL }, /* --node, through GET /v1/gpus?node= */
	{ "listGpus", "gpus list", NULL },
	{ "getGpu", "gpus get", NULL },
	{ "updateGpu", "gpus update", NULL },
	{ "getCapacity", "capacity", NULL },
	{ "simulateCapacity", "capacity simulate", NULL },
	{ "createDefragPlan", "capacity defrag plan", NULL },
	{ "listDefragPlans", "capacity defrag list", NULL },
	{ "getDefragPlan", "capacity defrag get", NULL },
	{ "applyDefragPlan", "capacity defrag apply", NULL },
	{ "cancelDefragPlan", "capacity defrag cancel", NULL },
	{ "getQuota", "quota get", NULL },
	{ "putQuota", "quota set", NULL },
	{ "deleteQuota", "quota delete", NULL },
	{ "listPools", "pools list", NULL },
	{ "getPool", "pools get", NULL },
	{ "submitPoolRequest", "request create", NULL }, /* and expand, shrink, release */
	{ "listPoolRequests", "requests list", NULL },
	{ "getPoolRequest", "requests get", NULL },
	{ "approvePoolRequest", "request approve", NULL },
	{ "rejectPoolRequest", "request reject", NULL },
	{ "cancelPoolRequest", "request cancel", NULL },
	{ "createBillingRate", "billing rates set", NULL },
	{ "listBillingRates", "billing rates list", NULL },
	{ "runBillingAccrual", "billing accrue", NULL },
	{ "getBillingUsage", "billing usage", NULL },
	{ "listBillingPeriods", "billing periods list", NULL },
	{ "closeBillingPeriod", "billing periods close", NULL },
	{ "createBillingAdjustment", "billing adjust", NULL },
	{ "createBillingExport", "billing export", NULL },
	{ "listBillingExports", "billing exports list", NULL },
	{ "getBillingExport", "billing exports get", NULL },
	{ "downloadBillingExport", "billing export", NULL }, /* --id N */
	{ "createEnrollmentToken", "agents enroll-token", NULL },
	{ "listEnrollmentTokens", "agents enroll-tokens", NULL },
	{ "revokeEnrollmentToken", "agents revoke-enroll-token", NULL },
	{ "revokeNodeToken", "agents revoke-token", NULL },
	{ "getNodeMigConfig", "agents mig-config", NULL },
	{ "agentEnroll", NULL, "gpupool-agent's, with an enrollment token" },
	{ "agentRotateToken", NULL, "gpupool-agent's, with its node token" },
	{ "agentDesiredState", NULL, "gpupool-agent's, with its node token" },
	{ "agentStatus", NULL, "gpupool-agent's, with its node token" },
	{ "agentHeartbeat", NULL, "gpupool-agent's, with its node token" },
	{ "agentMetrics", NULL, "gpupool-agent's, with its node token" },
	{ "agentProfiles", NULL, "gpupool-agent's, with its node token" },
	{ "getGpuMetrics", "gpus metrics", NULL },
	{ "listAlerts", "alerts list", NULL },
	{ "ackAlert", "alerts ack", NULL },
	{ "listProfiles", "profiles list", NULL },
	{ "getUtilizationReport", "reports utilization", NULL },
	{ "getClusterKubernetes", "clusters kubernetes", NULL },
	{ "putClusterKubernetesWorkloads", NULL, "gpupool-k8s's, the claims it read back" },
	{ "getProjectKubernetes", "projects kubernetes", NULL },
};

/* Every operationId of the API description is in walk_operations, and no more. */
static void
walk_check_operations(struct walk *w)
{
	size_t nops = sizeof(walk_operations) / sizeof(walk_operations[0]);
	bool seen[sizeof(walk_operations) / sizeof(walk_operations[0])] = { false };
	FILE *f = fopen(GP_OPENAPI_PATH, "r");
	char line[512];
	int bad = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f) != NULL) {
		const char *op = strstr(line, "operationId: ");
		size_t i;

		if (op == NULL)
			continue;
		op += strlen("operationId: ");
		line[strcspn(line, "\r\n")] = '\0';
		for (i = 0; i < nops && strcmp(walk_operations[i].operation, op) != 0; i++)
			;
		if (i == nops) {
			print_error("operation %s of api/openapi.yaml has no CLI command here\n",
			    op);
			bad++;
			continue;
		}
		seen[i] = true;
	}
	fclose(f);
	for (size_t i = 0; i < nops; i++) {
		const char *cmd = walk_operations[i].command;

		if (!seen[i]) {
			print_error("operation %s is not in api/openapi.yaml\n",
			    walk_operations[i].operation);
			bad++;
		}
		if (cmd != NULL && (walk_find(w, cmd) == NULL || !walk_find(w, cmd)->runnable)) {
			print_error("operation %s: no command \"gpupool %s\"\n",
			    walk_operations[i].operation, cmd);
			bad++;
		}
		assert_true(cmd != NULL || walk_operations[i].why != NULL);
	}
	assert_int_equal(bad, 0);
}

static void
test_cli_walk(void **state)
{
	struct fixture *fx = *state;
	struct walk *w = arena_alloc(fx->arena, sizeof(*w));
	struct fx_proc *p;
	int missing = 0;

	memset(w, 0, sizeof(*w));
	w->fx = fx;
	w->pyyaml = system("python3 -c 'import yaml' 2>/dev/null") == 0;
	if (!w->pyyaml)
		print_message("test_cli_walk: no PyYAML; the strict reader alone checks -o yaml\n");
	w->env = NULL;
	p = walk_run_offline(w, "completion bash", NULL);
	assert_int_equal(p->status, 0);
	w->completion = p->out;

	/* the tree */
	p = walk_run_offline(w, "--help", NULL);
	assert_int_equal(p->status, 0);
	assert_non_null(strstr(p->out, "\ncommands:\n"));
	walk_group(w, "", strstr(p->out, "\ncommands:\n") + strlen("\ncommands:\n"));
	assert_true(w->n > 80);

	for (int i = 0; i < w->n; i++) {
		struct walk_command *c = &w->cmds[i];

		/* a group that has get says get, not show */
		if (c->has_get && strstr(c->group_summary, "show") != NULL) {
			print_error("gpupool %s: \"%s\" says show; its command is get\n", c->path,
			    c->group_summary);
			fail();
		}
		if (c->runnable)
			walk_check_flags(w, c);
		else
			assert_non_null(walk_completion_words(w, c->path));
	}

	walk_check_operations(w);
	walk_cases(w);
	for (int i = 0; i < w->n; i++) {
		const struct walk_command *c = &w->cmds[i];

		if (c->runnable && (c->ok == 0 || c->failed == 0)) {
			print_error("gpupool %s: %d cases succeed, %d fail; it needs both\n",
			    c->path, c->ok, c->failed);
			missing++;
		}
	}
	assert_int_equal(missing, 0);
}

/* The strict YAML reader itself: what output.c writes, and what it must refuse. */
static void
test_yaml_reader(void **state)
{
	struct json_object *o, *want;

	(void)state;
	o = yaml_parse("\"items\":\n  - \"a\": 1\n    \"b\":\n      - - 1\n        - 2\n"
		       "  - {}\n\"next_cursor\": null\n");
	assert_non_null(o);
	want = json_tokener_parse("{\"items\":[{\"a\":1,\"b\":[[1,2]]},{}],\"next_cursor\":null}");
	assert_true(json_object_equal(o, want));
	json_object_put(want);
	json_object_put(o);
	assert_null(yaml_parse("\"a\": 1\n \"b\": 2\n")); /* misaligned key */
	assert_null(yaml_parse("\"a\":\n- 1\n"));         /* a list not indented */
	/* plain where YAML reads back the string, and only there */
	o = yaml_parse("a: nope\nb_2: H100-80GB/3g.40gb\n");
	want = json_tokener_parse("{\"a\":\"nope\",\"b_2\":\"H100-80GB/3g.40gb\"}");
	assert_non_null(o);
	assert_true(json_object_equal(o, want));
	json_object_put(want);
	json_object_put(o);
	assert_null(yaml_parse("\"a\": yes\n"));                  /* a YAML 1.1 boolean */
	assert_null(yaml_parse("\"a\": On\n"));                   /* another, any case */
	assert_null(yaml_parse("\"a\": 2026-01-01T00:00:00Z\n")); /* a timestamp */
	assert_null(yaml_parse("\"a\": two words\n"));            /* a blank inside */
	assert_null(yaml_parse("- 1\n  - 2\n"));                  /* misaligned item */
	assert_null(yaml_parse("\"a\": \"x\" trailing\n"));       /* text after a value */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_yaml_reader),
		cmocka_unit_test(test_cli_walk),
	};

	return fixture_run_tests(tests);
}
