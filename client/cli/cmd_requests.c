/*
 * cmd_requests.c - the pool-request workflow: "request create|expand|
 * shrink|release" submit, "request approve|reject|cancel ID" decide
 * (approve prints the placements made), "requests list|get" show.
 */
#include "cmd_requests.h"

#include <stdio.h>
#include <string.h>

#include "cmd_pools.h"
#include "output.h"

#define REQUESTS_PATH_MAX 1024

static const struct output_column request_columns[] = {
	{ "ID", "id" },
	{ "PROJECT", "project" },
	{ "POOL", "pool" },
	{ "ACTION", "action" },
	{ "STATE", "state" },
	{ "ITEMS", "items_text" },
	{ "REQUESTED BY", "requested_by" },
	{ "REQUESTED", "requested_at" },
	OUTPUT_WIDE,
	{ "JUSTIFICATION", "justification" },
	{ "EXPIRES", "expires_at" },
	{ "DECIDED BY", "decided_by" },
	{ "DECIDED", "decided_at" },
	{ "NOTE", "note" },
	{ "REASON", "reason" },
	{ NULL, NULL },
};

static const struct output_column history_columns[] = {
	{ "AT", "at" },
	{ "FROM", "from" },
	{ "TO", "to" },
	{ "BY", "actor" },
	{ "NOTE", "note" },
	{ NULL, NULL },
};

static void
request_print(struct cli *cli, struct json_object *r)
{
	struct json_object *h;

	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r);
		return;
	}
	pools_cli_items_text(r, "items");
	output_row(stdout, r, request_columns);
	h = gp_client_json_get(r, "history");
	if (h != NULL && json_object_array_length(h) > 0) {
		printf("\n");
		output_table(stdout, h, history_columns);
	}
	if (gp_client_json_get(r, "allocations") != NULL) {
		printf("\n");
		pools_cli_print_allocations(r, "allocations");
	}
}

/* POST /v1/projects/P/pool-requests for action with the positional items. */
static int
request_submit(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    const char *action)
{
	const char *project = cli_opt(args, "project");
	const char *pool = cli_opt(args, "pool");
	const char *just = cli_opt(args, "justification");
	const char *ends = cli_opt(args, "ends-at");
	const char *cluster = cli_opt(args, "cluster");
	struct json_object *body, *items = NULL;
	struct gp_client_response r;
	char esc[512], path[REQUESTS_PATH_MAX];
	int rc;

	if (project == NULL || pool == NULL)
		return cli_usage_error(cli, cmd, "--project and --pool are required");
	if (strcmp(action, "release") == 0) {
		if (args->npos > 0)
			return cli_usage_error(cli, cmd, "a release names no items");
	} else {
		if (args->npos == 0)
			return cli_usage_error(cli, cmd,
			    "give at least one MODEL/PROFILE=COUNT item");
		rc = pools_cli_items(cli, cmd, args, 0, &items);
		if (rc != CLI_EXIT_OK)
			return rc;
	}
	if (cli_escape(cli, project, esc, sizeof(esc)) != 0) {
		json_object_put(items);
		return CLI_EXIT_FAIL;
	}
	snprintf(path, sizeof(path), "/v1/projects/%s/pool-requests", esc);
	body = json_object_new_object();
	json_object_object_add(body, "action", json_object_new_string(action));
	json_object_object_add(body, "pool", json_object_new_string(pool));
	if (items != NULL)
		json_object_object_add(body, "items", items);
	if (just != NULL)
		json_object_object_add(body, "justification", json_object_new_string(just));
	if (ends != NULL)
		json_object_object_add(body, "ends_at", json_object_new_string(ends));
	if (cluster != NULL)
		json_object_object_add(body, "cluster", json_object_new_string(cluster));
	rc = cli_call(cli, "POST", path, body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	request_print(cli, r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
request_create(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	return request_submit(cli, cmd, args, "create");
}

/* expand, shrink and release take no --ends-at: their option table has none */
static int
request_expand(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	return request_submit(cli, cmd, args, "expand");
}

static int
request_shrink(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	return request_submit(cli, cmd, args, "shrink");
}

static int
request_release(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	return request_submit(cli, cmd, args, "release");
}

/* POST /v1/pool-requests/ID/<what> with body. */
static int
request_decide(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    const char *what, struct json_object *body)
{
	struct gp_client_response r;
	char esc[64], path[REQUESTS_PATH_MAX];
	int rc;

	char tag[64];

	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0)
		return CLI_EXIT_USAGE;
	if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	snprintf(path, sizeof(path), "/v1/pool-requests/%s/%s", esc, what);
	/* --if-match: decide the request only as it was read (its generation) */
	rc = cli_call_if_match(cli, "POST", path, body, tag[0] ? tag : NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	request_print(cli, r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
request_approve(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *note = cli_opt(args, "note");
	struct json_object *body = json_object_new_object();
	int rc;

	if (note != NULL)
		json_object_object_add(body, "note", json_object_new_string(note));
	rc = request_decide(cli, cmd, args, "approve", body);
	json_object_put(body);
	return rc;
}

static int
request_reject(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *reason = cli_opt(args, "reason");
	struct json_object *body;
	int rc;

	if (reason == NULL || reason[0] == '\0')
		return cli_usage_error(cli, cmd, "--reason is required");
	body = json_object_new_object();
	json_object_object_add(body, "reason", json_object_new_string(reason));
	rc = request_decide(cli, cmd, args, "reject", body);
	json_object_put(body);
	return rc;
}

static int
request_cancel(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct json_object *body = json_object_new_object();
	int rc = request_decide(cli, cmd, args, "cancel", body);

	json_object_put(body);
	return rc;
}

static int
requests_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[REQUESTS_PATH_MAX] = "/v1/pool-requests";

	(void)cmd;
	if (cli_query_add(cli, path, sizeof(path), "state", cli_opt(args, "state")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "project", cli_opt(args, "project")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "pool", cli_opt(args, "pool")) != 0)
		return CLI_EXIT_FAIL;
	return pools_cli_list(cli, path, args, request_columns);
}

static int
requests_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char esc[64], path[REQUESTS_PATH_MAX];
	int rc;

	(void)cmd;
	if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	snprintf(path, sizeof(path), "/v1/pool-requests/%s", esc);
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	request_print(cli, r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static const struct cli_option create_options[] = {
	{ "project", "P", "the project (required)", false },
	{ "pool", "NAME", "a new pool's name (required)", false },
	{ "justification", "TEXT", "why, for the approver", false },
	{ "ends-at", "TIME", "release the pool at this RFC 3339 time", false },
	{ "cluster", "C", "bind the pool to this cluster (all its GPUs there)", false },
	{ NULL, NULL, NULL, false },
};

/* expand, shrink, release: an existing pool, no end time */
static const struct cli_option change_options[] = {
	{ "project", "P", "the project (required)", false },
	{ "pool", "NAME", "the pool (required)", false },
	{ "justification", "TEXT", "why, for the approver", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option approve_options[] = {
	{ "note", "TEXT", "a note kept with the decision", false },
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option reject_options[] = {
	{ "reason", "TEXT", "why (required)", false },
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option cancel_options[] = {
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option list_options[] = {
	{ "state", "S", "only requests in this state (pending, approved, ...)", false },
	{ "project", "P", "only this project's requests", false },
	{ "pool", "NAME", "only the requests of the project's pool of this name (with --project)",
	    false },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_command request_subcommands[] = {
	{
	    .name = "create",
	    .usage = "--project P --pool NAME MODEL/PROFILE=COUNT ... [--justification TEXT] "
		     "[--ends-at TIME] [--cluster C]",
	    .summary = "ask for a new pool",
	    .help = "Ask for a new pool holding the items, such as H100-80GB/3g.40gb=2\n"
		    "H100-80GB/1g.10gb=1 (profile 'full' for whole GPUs). The request waits\n"
		    "for an operator's approval; with --ends-at the pool is released then.\n"
		    "With --cluster the pool is bound to that cluster: its approval and\n"
		    "every expand place only there (capacity simulate --cluster C shows\n"
		    "whether it fits); without it the pool may span clusters.",
	    .max_args = CLI_MAX_POSITIONAL,
	    .options = create_options,
	    .run = request_create,
	},
	{
	    .name = "expand",
	    .usage = "--project P --pool NAME MODEL/PROFILE=COUNT ... [--justification TEXT]",
	    .summary = "ask for more in a pool (the items are what to add)",
	    .max_args = CLI_MAX_POSITIONAL,
	    .options = change_options,
	    .run = request_expand,
	},
	{
	    .name = "shrink",
	    .usage = "--project P --pool NAME MODEL/PROFILE=COUNT ... [--justification TEXT]",
	    .summary = "give back part of a pool (the items are what to remove)",
	    .max_args = CLI_MAX_POSITIONAL,
	    .options = change_options,
	    .run = request_shrink,
	},
	{
	    .name = "release",
	    .usage = "--project P --pool NAME [--justification TEXT]",
	    .summary = "give back a whole pool",
	    .max_args = 0,
	    .options = change_options,
	    .run = request_release,
	},
	{
	    .name = "approve",
	    .usage = "ID [--note TEXT] [--if-match ETAG]",
	    .summary = "approve a pending request and print the placements (operator)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = approve_options,
	    .run = request_approve,
	},
	{
	    .name = "reject",
	    .usage = "ID --reason TEXT [--if-match ETAG]",
	    .summary = "reject a pending request (operator)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = reject_options,
	    .run = request_reject,
	},
	{
	    .name = "cancel",
	    .usage = "ID [--if-match ETAG]",
	    .summary = "withdraw a pending request (its requester or a project owner)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = cancel_options,
	    .run = request_cancel,
	},
	{ .name = NULL },
};

static const struct cli_command requests_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--state S] [--project P [--pool NAME]] [--limit N] [--cursor C]",
	    .summary = "list the pool requests you can see",
	    .max_args = 0,
	    .options = list_options,
	    .run = requests_list,
	},
	{
	    .name = "get",
	    .usage = "ID",
	    .summary = "get a request with its history",
	    .min_args = 1,
	    .max_args = 1,
	    .run = requests_get,
	},
	{ .name = NULL },
};

const struct cli_command cmd_requests_commands[] = {
	{
	    .name = "request",
	    .summary = "submit and decide pool requests",
	    .subcommands = request_subcommands,
	},
	{
	    .name = "requests",
	    .summary = "list and get pool requests",
	    .subcommands = requests_subcommands,
	},
	{ .name = NULL },
};
