/*
 * cmd_users.c - users over /v1/users: create, list, get, and update (the
 * global role, disabling, a new password). Passwords come from stdin, or
 * a no-echo prompt on a terminal.
 */
#include "cmd_users.h"

#include <stdio.h>
#include <string.h>

#include "output.h"
#include "prompt.h"

#define USERS_PASSWORD_MAX 512
#define USERS_PATH_MAX 1024

static const struct output_column user_columns[] = {
	{ "USERNAME", "username" },
	{ "ROLE", "role" },
	{ "DISABLED", "disabled" },
	{ "CREATED", "created_at" },
	OUTPUT_WIDE,
	{ "ID", "id" },
	{ "GENERATION", "generation" },
	{ "UPDATED", "updated_at" },
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

static int
users_path(struct cli *cli, const char *name, char *buf, size_t len)
{
	char esc[512];

	if (cli_escape(cli, name, esc, sizeof(esc)) != 0)
		return -1;
	snprintf(buf, len, "/v1/users/%s", esc);
	return 0;
}

static void
users_print(struct cli *cli, struct json_object *user)
{
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, user);
	else
		output_row(stdout, user, user_columns);
}

static int
users_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[USERS_PATH_MAX];
	int rc;

	(void)cmd;
	if (users_path(cli, args->pos[0], path, sizeof(path)) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	users_print(cli, r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

/*
 * PATCH /v1/users/NAME with the fields given. Without --if-match the user
 * is read first and the change sent under its ETag, so that a change made
 * in between is refused (412) rather than silently overwritten.
 */
static int
users_update(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *role = cli_opt(args, "role");
	bool disable = cli_opt(args, "disable") != NULL, enable = cli_opt(args, "enable") != NULL;
	bool password_opt = cli_opt(args, "password") != NULL;
	char password[USERS_PASSWORD_MAX], errbuf[256], path[USERS_PATH_MAX], tag[160];
	struct json_object *body = NULL;
	struct gp_client_response cur, r;
	int rc;

	password[0] = '\0';
	if (role == NULL && !disable && !enable && !password_opt)
		return cli_usage_error(cli, cmd,
		    "nothing to change: give --role, --disable, --enable or --password");
	if (role != NULL && !users_valid_role(role))
		return cli_usage_error(cli, cmd, "--role must be admin, operator, billing or none");
	if (disable && enable)
		return cli_usage_error(cli, cmd, "--disable and --enable exclude each other");
	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0)
		return CLI_EXIT_USAGE;
	if (users_path(cli, args->pos[0], path, sizeof(path)) != 0)
		return CLI_EXIT_FAIL;
	if (tag[0] == '\0') {
		rc = cli_call(cli, "GET", path, NULL, &cur);
		if (rc != CLI_EXIT_OK)
			return rc;
		snprintf(tag, sizeof(tag), "%s", cur.etag);
		gp_client_response_free(&cur);
	}
	if (password_opt &&
	    prompt_read("new password: ", true, password, sizeof(password), errbuf,
		sizeof(errbuf)) != 0)
		return cli_fail(cli, "could not read the password: %s", errbuf);
	body = json_object_new_object();
	if (body == NULL) {
		rc = cli_fail(cli, "out of memory");
		goto done;
	}
	if (role != NULL)
		json_object_object_add(body, "role", json_object_new_string(role));
	if (disable || enable)
		json_object_object_add(body, "disabled", json_object_new_boolean(disable));
	if (password_opt)
		json_object_object_add(body, "password", json_object_new_string(password));
	rc = cli_call_if_match(cli, "PATCH", path, body, tag[0] ? tag : NULL, &r);
	if (rc != CLI_EXIT_OK)
		goto done;
	users_print(cli, r.json);
	if (disable || password_opt)
		fprintf(stderr, "note: every token of %s is revoked\n", args->pos[0]);
	gp_client_response_free(&r);
done:
	explicit_bzero(password, sizeof(password));
	json_object_put(body);
	return rc;
}

static const struct cli_option update_options[] = {
	{ "role", "R", "the new global role: admin, operator, billing or none", false },
	{ "disable", NULL, "disable the user and revoke every token of theirs", false },
	{ "enable", NULL, "enable a disabled user again", false },
	{ "password", NULL, "set a new password, read from stdin (revokes every token of the user)",
	    false },
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

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
	{
	    .name = "get",
	    .usage = "USER",
	    .summary = "get one user",
	    .min_args = 1,
	    .max_args = 1,
	    .run = users_get,
	},
	{
	    .name = "update",
	    .usage = "USER [--role R] [--disable|--enable] [--password] [--if-match ETAG]",
	    .summary = "change a user's role, disable or enable them, or reset their password",
	    .help = "Change a user (admins). Only what is given changes. --disable and\n"
		    "--password revoke every token of the user (their sessions and API\n"
		    "tokens); --password reads the new password as one line from stdin, or\n"
		    "prompts without echo on a terminal. The user is read first and the\n"
		    "change is sent under its ETag (If-Match), so a change made in between\n"
		    "is refused with 412 instead of being overwritten; --if-match ETAG\n"
		    "skips the read and uses ETAG.",
	    .min_args = 1,
	    .max_args = 1,
	    .options = update_options,
	    .run = users_update,
	},
	{ .name = NULL },
};

const struct cli_command cmd_users_commands[] = {
	{
	    .name = "users",
	    .summary = "create, list, get and update users (administrators)",
	    .subcommands = users_subcommands,
	},
	{ .name = NULL },
};
