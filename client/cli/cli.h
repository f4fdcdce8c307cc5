/*
 * cli.h - the command table, argument parsing, server calls and error
 * reporting shared by every gpupool command group.
 *
 * A command group (cmd_projects.c ...) exports a NULL-terminated table of
 * struct cli_command; main.c lists the groups. The dispatcher parses the
 * options a command declares, answers --help from the table, and calls
 * run() with the parsed arguments. run() returns the process exit
 * status (docs/cli.md, "Errors and exit status"): CLI_EXIT_OK,
 * CLI_EXIT_FAIL (a local failure), CLI_EXIT_USAGE, or what the server's
 * answer means (cli_exit_for_status).
 */
#ifndef GP_CLI_H
#define GP_CLI_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "config.h"
#include "gp_client.h"

#define CLI_EXIT_OK 0
#define CLI_EXIT_FAIL 1        /* a local failure: a file, the config, a bad answer */
#define CLI_EXIT_USAGE 2       /* found before anything was sent */
#define CLI_EXIT_REFUSED 3     /* the server refused: 400, 401, 403, 422 ... */
#define CLI_EXIT_NOT_FOUND 4   /* 404 */
#define CLI_EXIT_CONFLICT 5    /* 409, 412: the state does not allow it now */
#define CLI_EXIT_UNAVAILABLE 6 /* no answer, 429 or 5xx: try again later */

/* The exit status for an HTTP answer's status (0: none came). */
int cli_exit_for_status(long status);

#define CLI_MAX_POSITIONAL 72 /* capacity simulate: 64 items and its name */
#define CLI_MAX_OPTIONS 32

enum cli_output {
	CLI_OUTPUT_TABLE,
	CLI_OUTPUT_JSON,
};

/* Process-wide state, owned by main. */
struct cli {
	const char *prog; /* "gpupool" */
	enum cli_output output;
	const char *server_flag;        /* --server, NULL when not given */
	struct config config;           /* the config file as loaded */
	struct gp_client *client;       /* created on first use */
	const char *command_path;       /* "gpupool projects", set while a command runs */
	char command[256];              /* "gpupool projects get", set while a command runs */
	const struct cli_command *root; /* the top-level table: suggestions across groups */
};

struct cli_option {
	const char *name; /* "display-name" (given as --display-name) */
	const char *arg;  /* "X" when it takes a value, NULL for a flag */
	const char *help;
	bool repeat; /* may be given more than once */
};

struct cli_args {
	int npos;
	const char *pos[CLI_MAX_POSITIONAL];
	int nopt;
	struct {
		const char *name;
		const char *value; /* "" for a flag */
	} opt[CLI_MAX_OPTIONS];
};

struct cli_command;

typedef int (
    *cli_run_fn)(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args);

struct cli_command {
	const char *name;
	const char *usage;   /* what follows the name: "NAME --role R" */
	const char *summary; /* one line for the listing */
	const char *help;    /* longer text for --help, may be NULL */
	int min_args;        /* positional arguments */
	int max_args;
	const struct cli_option *options; /* ends with name == NULL; may be NULL */
	cli_run_fn run;                   /* NULL for a pure group */
	/*
	 * Ends with name == NULL; groups only. A group that also has run()
	 * ("gpupool capacity [--model M]" beside "gpupool capacity simulate")
	 * runs itself unless its first argument names a subcommand.
	 */
	const struct cli_command *subcommands;
};

/*
 * Find argv[0] in table and run it (recursing into groups). prefix is the
 * command path so far ("gpupool projects") for help and messages.
 * Returns the exit status.
 */
int cli_dispatch(struct cli *cli, const struct cli_command *table, const char *prefix, int argc,
    char **argv);

/* Print the listing of a table under a usage line to out. */
void cli_print_table_help(const struct cli_command *table, const char *prefix, bool to_stderr);

/* The last value of option name, NULL when absent. */
const char *cli_opt(const struct cli_args *args, const char *name);

/* Every value of a repeatable option into vals (at most max); returns the count. */
int cli_opt_all(const struct cli_args *args, const char *name, const char **vals, int max);

/* Report a usage error for cmd ("gpupool: ...", then the usage line); returns CLI_EXIT_USAGE. */
int cli_usage_error(struct cli *cli, const struct cli_command *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Report a local failure to stderr; returns CLI_EXIT_FAIL. */
int cli_fail(struct cli *cli, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * The client for the configured server and token (flag, environment,
 * config file), created on first use. Prints the reason and returns
 * NULL when no server is configured.
 */
struct gp_client *cli_client(struct cli *cli);

/* The server URL in effect, NULL when none. */
const char *cli_server(const struct cli *cli);

/*
 * Send a request; body (may be NULL) stays the caller's. POSTs carry a
 * fresh Idempotency-Key so the automatic retries are safe. Returns
 * CLI_EXIT_OK for a 2xx answer (out then holds it and must be freed),
 * otherwise prints the problem detail and field errors to stderr,
 * frees out and returns CLI_EXIT_FAIL.
 */
int cli_call(struct cli *cli, const char *method, const char *path, struct json_object *body,
    struct gp_client_response *out);

/*
 * cli_call() with an If-Match header when if_match is not NULL (an
 * entity tag as the server sends it: "\"3\""). The server applies the
 * change only while the object's ETag is still that (RFC 9110 13.1.1),
 * otherwise 412, reported with a hint to read the object again.
 */
int cli_call_if_match(struct cli *cli, const char *method, const char *path,
    struct json_object *body, const char *if_match, struct gp_client_response *out);

/*
 * The --if-match option of args as an entity tag into buf: "3" (a
 * generation, as "get -o json" shows it) becomes "\"3\"", a quoted tag
 * or "*" stays. buf is "" when the option is absent. On a malformed
 * value prints a usage error for cmd and returns -1.
 */
int cli_if_match_opt(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    char *buf, size_t len) __attribute__((warn_unused_result));

/* The --if-match option, for commands that change one object. */
#define CLI_IF_MATCH_OPTION                                                               \
	{                                                                                 \
		"if-match", "ETAG",                                                       \
		    "change only while the object's ETag is still this (its generation, " \
		    "e.g. 3); 412 otherwise",                                             \
		    false                                                                 \
	}

/*
 * Judge the result rc of a gp_client call and its answer out: returns
 * CLI_EXIT_OK for a 2xx answer, otherwise prints the problem detail and
 * field errors (or the transport error) to stderr, frees out and returns
 * CLI_EXIT_FAIL.
 */
int cli_check_response(struct cli *cli, int rc, struct gp_client_response *out);

/*
 * Fetch a list endpoint. With --limit or --cursor in args one page is
 * fetched as asked; otherwise every page is fetched and the items are
 * merged. *out is {"items":[...],"next_cursor":...}, owned by the caller.
 */
int cli_list(struct cli *cli, const char *path, const struct cli_args *args,
    struct json_object **out);

/*
 * cli_list() for listings that may be long (the audit log): without
 * --limit, --cursor or --all in args, one page of default_limit items;
 * --all fetches every page. default_limit NULL is cli_list().
 */
int cli_list_page(struct cli *cli, const char *path, const struct cli_args *args,
    const char *default_limit, struct json_object **out);

struct output_column;

/*
 * Print a listing fetched with cli_list(): -o json prints doc as it came;
 * otherwise decorate (may be NULL) adds each item's derived columns and the
 * items are printed as columns says. Frees doc; returns CLI_EXIT_OK.
 */
int cli_print_list(struct cli *cli, struct json_object *doc,
    void (*decorate)(struct json_object *item), const struct output_column *columns);

/* The --limit/--cursor options every list command accepts. */
#define CLI_LIST_OPTIONS                                                                      \
	{ "limit", "N", "fetch one page of at most N items (1..500)", false },                \
	{                                                                                     \
		"cursor", "C", "continue a listing from the cursor of an earlier page", false \
	}

/*
 * Append "key=value" (value percent-encoded) to the request path in buf,
 * after '?' or '&' as needed; value NULL appends nothing. Prints an
 * error and returns -1 when it does not fit.
 */
int cli_query_add(struct cli *cli, char *buf, size_t len, const char *key, const char *value)
    __attribute__((warn_unused_result));

/*
 * Parse a decimal integer option value (no sign, spaces or trailing
 * text) from min to max. On failure prints "--<option> must be ..." and
 * the usage line of cmd and returns -1.
 */
int cli_parse_int64(struct cli *cli, const struct cli_command *cmd, const char *option,
    const char *s, long long min, long long max, long long *out)
    __attribute__((warn_unused_result));

/*
 * Percent-encode s as one path segment into buf; prints an error and
 * returns -1 when it does not fit.
 */
int cli_escape(struct cli *cli, const char *s, char *buf, size_t len)
    __attribute__((warn_unused_result));

#endif
