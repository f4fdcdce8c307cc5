/*
 * cmd_tokens.c - creating, listing, showing and revoking the caller's API
 * tokens over /v1/tokens. A new token's secret is shown once, at creation.
 */
#include "cmd_tokens.h"

#include <stdio.h>

#include "core/timeutil.h"
#include "output.h"

static const struct output_column token_columns[] = {
	{ "ID", "id" },
	{ "NAME", "name" },
	{ "PREFIX", "prefix" },
	{ "CREATED", "created_at" },
	{ "EXPIRES", "expires_at" },
	{ "LAST USED", "last_used_at" },
	{ NULL, NULL },
};

static const struct output_column new_token_columns[] = {
	{ "ID", "id" },
	{ "NAME", "name" },
	{ "EXPIRES", "expires_at" },
	{ "TOKEN", "token" },
	{ NULL, NULL },
};

static int
tokens_create(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *expires = cli_opt(args, "expires-at");
	struct json_object *body;
	struct gp_client_response r;
	int64_t us;
	int rc;

	if (args->pos[0][0] == '\0')
		return cli_usage_error(cli, cmd, "the token name is empty");
	if (expires != NULL && time_parse_rfc3339(expires, &us) != 0)
		return cli_usage_error(cli, cmd,
		    "--expires-at must be an RFC 3339 time "
		    "such as 2030-01-31T00:00:00Z");
	body = json_object_new_object();
	if (body == NULL)
		return cli_fail(cli, "out of memory");
	json_object_object_add(body, "name", json_object_new_string(args->pos[0]));
	if (expires != NULL)
		json_object_object_add(body, "expires_at", json_object_new_string(expires));
	rc = cli_call(cli, "POST", "/v1/tokens", body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		output_row(stdout, r.json, new_token_columns);
		fprintf(stderr, "note: store the token now, it is not shown again\n");
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
tokens_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct json_object *doc;
	int rc;

	(void)cmd;
	rc = cli_list(cli, "/v1/tokens", args, &doc);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, doc);
	else
		output_table(stdout, gp_client_json_get(doc, "items"), token_columns);
	json_object_put(doc);
	return CLI_EXIT_OK;
}

static int
tokens_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char esc[256], path[320];
	int rc;

	(void)cmd;
	if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	snprintf(path, sizeof(path), "/v1/tokens/%s", esc);
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		output_row(stdout, r.json, token_columns);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
tokens_revoke(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char esc[256], path[320];
	int n, rc;

	(void)cmd;
	if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	n = snprintf(path, sizeof(path), "/v1/tokens/%s", esc);
	if (n < 0 || (size_t)n >= sizeof(path))
		return cli_fail(cli, "the request path is too long");
	rc = cli_call(cli, "DELETE", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	gp_client_response_free(&r);
	if (cli->output == CLI_OUTPUT_TABLE)
		printf("revoked token %s\n", args->pos[0]);
	return CLI_EXIT_OK;
}

static const struct cli_option create_options[] = {
	{ "expires-at", "RFC3339", "when the token stops working (default: never)", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option list_options[] = {
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_command tokens_subcommands[] = {
	{
	    .name = "create",
	    .usage = "NAME [--expires-at RFC3339]",
	    .summary = "create an API token (the secret is shown once)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = create_options,
	    .run = tokens_create,
	},
	{
	    .name = "list",
	    .usage = "[--limit N] [--cursor C]",
	    .summary = "list your API tokens",
	    .max_args = 0,
	    .options = list_options,
	    .run = tokens_list,
	},
	{
	    .name = "get",
	    .usage = "ID",
	    .summary = "get one of your API tokens (never its secret)",
	    .min_args = 1,
	    .max_args = 1,
	    .run = tokens_get,
	},
	{
	    .name = "revoke",
	    .usage = "ID",
	    .summary = "revoke an API token",
	    .min_args = 1,
	    .max_args = 1,
	    .run = tokens_revoke,
	},
	{ .name = NULL },
};

const struct cli_command cmd_tokens_commands[] = {
	{
	    .name = "tokens",
	    .summary = "create, list, get and revoke your API tokens",
	    .subcommands = tokens_subcommands,
	},
	{ .name = NULL },
};
