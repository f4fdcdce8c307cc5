/*
 * cmd_users.c - creating and listing users over /v1/users; the new
 * user's password comes from stdin (or a no-echo prompt on a terminal).
 */
#include "cmd_users.h"

#include <stdio.h>
#include <string.h>

#include "output.h"
#include "prompt.h"

#define USERS_PASSWORD_MAX 512

static const struct output_column user_columns[] = {
	{ "ID", "id" },
	{ "USERNAME", "username" },
	{ "ROLE", "role" },
	{ "CREATED", "created_at" },
	{ NULL, NULL },
};

static bool
users_valid_role(const char *role)
{
	return strcmp(role, "admin") == 0 || strcmp(role, "operator") == 0 ||
	    strcmp(role, "billing") == 0 || strcmp(role, "none") == 0;
}

static int
users_create(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *role = cli_opt(args, "role");
	char password[USERS_PASSWORD_MAX], errbuf[256];
	struct json_object *body = NULL;
	struct gp_client_response r;
	int rc;

	if (role == NULL)
		return cli_usage_error(cli, cmd, "--role is required");
	if (!users_valid_role(role))
		return cli_usage_error(cli, cmd, "--role must be admin, operator, billing or none");
	if (args->pos[0][0] == '\0')
		return cli_usage_error(cli, cmd, "the username is empty");
	if (prompt_read("new user's password: ", true, password, sizeof(password), errbuf,
		sizeof(errbuf)) != 0)
		return cli_fail(cli, "could not read the password: %s", errbuf);
	body = json_object_new_object();
	if (body == NULL) {
		rc = cli_fail(cli, "out of memory");
		goto fail;
	}
	json_object_object_add(body, "username", json_object_new_string(args->pos[0]));
	json_object_object_add(body, "password", json_object_new_string(password));
	json_object_object_add(body, "role", json_object_new_string(role));
	rc = cli_call(cli, "POST", "/v1/users", body, &r);
	if (rc != CLI_EXIT_OK)
		goto fail;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		output_row(stdout, r.json, user_columns);
	gp_client_response_free(&r);
fail:
	explicit_bzero(password, sizeof(password));
	json_object_put(body);
	return rc;
}

static int
users_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct json_object *doc;
	int rc;

	(void)cmd;
	rc = cli_list(cli, "/v1/users", args, &doc);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, doc);
	else
		output_table(stdout, gp_client_json_get(doc, "items"), user_columns);
	json_object_put(doc);
	return CLI_EXIT_OK;
}

static const struct cli_option create_options[] = {
	{ "role", "R", "admin, operator, billing or none (required)", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option list_options[] = {
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_command users_subcommands[] = {
	{
	    .name = "create",
	    .usage = "USER --role R",
	    .summary = "create a user (password read from stdin)",
	    .help = "Create a user with a global role. The password is read as one line\n"
		    "from stdin, or prompted for without echo on a terminal.",
	    .min_args = 1,
	    .max_args = 1,
	    .options = create_options,
	    .run = users_create,
	},
	{
	    .name = "list",
	    .usage = "[--limit N] [--cursor C]",
	    .summary = "list users",
	    .max_args = 0,
	    .options = list_options,
	    .run = users_list,
	},
	{ .name = NULL },
};

const struct cli_command cmd_users_commands[] = {
	{
	    .name = "users",
	    .summary = "manage users (administrators)",
	    .subcommands = users_subcommands,
	},
	{ .name = NULL },
};
