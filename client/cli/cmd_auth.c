/*
 * cmd_auth.c - "gpupool login" (password to token, saved in the config
 * file) and "gpupool me" (who the token belongs to).
 */
#include "cmd_auth.h"

#ifndef GP_CLI_VERSION
#define GP_CLI_VERSION "0.0.0"
#endif

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "output.h"
#include "prompt.h"

#define AUTH_FIELD_MAX 512

static const struct output_column me_columns[] = {
	{ "USERNAME", "username" },
	{ "ROLE", "role" },
	{ NULL, NULL },
};

static const struct output_column me_project_columns[] = {
	{ "PROJECT", "name" },
	{ "ROLE", "role" },
	{ NULL, NULL },
};

static int
auth_save(struct cli *cli, const char *server, const char *token)
{
	char errbuf[512];

	if (config_set(&cli->config, "server", server) != 0 ||
	    config_set(&cli->config, "token", token) != 0)
		return cli_fail(cli, "out of memory");
	if (config_save(&cli->config, errbuf, sizeof(errbuf)) != 0)
		return cli_fail(cli, "%s", errbuf);
	return CLI_EXIT_OK;
}

static int
auth_login(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *server = cli_server(cli), *user = cli_opt(args, "username");
	char username[AUTH_FIELD_MAX], password[AUTH_FIELD_MAX], errbuf[256];
	struct json_object *body = NULL, *tok;
	struct gp_client_response r;
	int rc;

	memset(&r, 0, sizeof(r));
	password[0] = '\0';
	if (server == NULL)
		return cli_usage_error(cli, cmd,
		    "no server configured: use --server URL or GPUPOOL_SERVER");
	if (user == NULL) {
		if (isatty(STDIN_FILENO) != 1)
			return cli_usage_error(cli, cmd,
			    "--username is required when stdin is not a terminal");
		if (prompt_read("username: ", false, username, sizeof(username), errbuf,
			sizeof(errbuf)) != 0)
			return cli_fail(cli, "%s", errbuf);
		user = username;
	}
	if (cli->client == NULL) {
		/* log in afresh: a stale token from the config must not go along */
		cli->client = gp_client_create(server, NULL);
		if (cli->client == NULL)
			return cli_fail(cli, "invalid server URL \"%s\"", server);
	}
	if (prompt_read("password: ", true, password, sizeof(password), errbuf, sizeof(errbuf)) !=
	    0) {
		rc = cli_fail(cli, "could not read the password: %s", errbuf);
		goto fail;
	}
	body = json_object_new_object();
	if (body == NULL) {
		rc = cli_fail(cli, "out of memory");
		goto fail;
	}
	json_object_object_add(body, "username", json_object_new_string(user));
	json_object_object_add(body, "password", json_object_new_string(password));
	/* no Idempotency-Key: a replayed answer would hand the token out again */
	rc = gp_client_send_json(cli->client, "POST", "/v1/auth/login", body, NULL, &r);
	rc = cli_check_response(cli, rc, &r);
	if (rc != CLI_EXIT_OK)
		goto fail;
	tok = gp_client_json_get(r.json, "token");
	if (tok == NULL || !json_object_is_type(tok, json_type_string) ||
	    json_object_get_string_len(tok) == 0) {
		rc = cli_fail(cli, "the server's answer has no token");
		goto fail;
	}
	rc = auth_save(cli, gp_client_base_url(cli->client), json_object_get_string(tok));
	if (rc != CLI_EXIT_OK)
		goto fail;
	if (cli->output == CLI_OUTPUT_JSON) {
		json_object_object_del(r.json, "token");
		json_object_object_add(r.json, "username", json_object_new_string(user));
		json_object_object_add(r.json, "server",
		    json_object_new_string(gp_client_base_url(cli->client)));
		output_json(stdout, r.json);
	} else {
		struct json_object *exp = gp_client_json_get(r.json, "expires_at");

		printf("logged in to %s as %s", gp_client_base_url(cli->client), user);
		if (exp != NULL && json_object_is_type(exp, json_type_string))
			printf(" (the token expires at %s)", json_object_get_string(exp));
		printf("\n");
	}
fail:
	explicit_bzero(password, sizeof(password));
	if (body != NULL)
		json_object_put(body);
	gp_client_response_free(&r);
	return rc;
}

static int
auth_me(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	struct json_object *projects;
	int rc;

	(void)cmd;
	(void)args;
	rc = cli_call(cli, "GET", "/v1/me", NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		output_row(stdout, r.json, me_columns);
		projects = gp_client_json_get(r.json, "projects");
		if (projects != NULL && json_object_is_type(projects, json_type_array) &&
		    json_object_array_length(projects) > 0) {
			printf("\n");
			output_table(stdout, projects, me_project_columns);
		}
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
auth_logout(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char errbuf[256];
	int rc;

	(void)cmd;
	(void)args;
	rc = cli_call(cli, "POST", "/v1/auth/logout", NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	gp_client_response_free(&r);
	/* forget it locally too (the server has revoked it) */
	if (config_get(&cli->config, "token") != NULL) {
		if (config_set(&cli->config, "token", "") != 0 ||
		    config_save(&cli->config, errbuf, sizeof(errbuf)) != 0)
			return cli_fail(cli, "the token is revoked, but the config file kept it");
	}
	fprintf(stderr, "logged out: the token is revoked\n");
	return CLI_EXIT_OK;
}

/* gpupool version: the client's, and the server's when one is configured. */
static int
auth_version(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	struct json_object *v;

	(void)cmd;
	(void)args;
	printf("client: gpupool %s\n", GP_CLI_VERSION);
	if (cli_server(cli) == NULL)
		return CLI_EXIT_OK;
	if (cli_call(cli, "GET", "/healthz", NULL, &r) != CLI_EXIT_OK)
		return CLI_EXIT_FAIL;
	v = gp_client_json_get(r.json, "version");
	printf("server: gpupoold %s (%s)\n", v ? json_object_get_string(v) : "unknown",
	    cli_server(cli));
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static const struct cli_option login_options[] = {
	{ "username", "U", "the user to log in as (prompted for on a terminal)", false },
	{ NULL, NULL, NULL, false },
};

const struct cli_command cmd_auth_commands[] = {
	{
	    .name = "login",
	    .usage = "[--username U]",
	    .summary = "log in and store the server and token in the config file",
	    .help = "Log in with a password and store the server URL and the session token in\n"
		    "$XDG_CONFIG_HOME/gpupool/config (~/.config/gpupool/config), mode 0600.\n"
		    "The password is prompted for without echo on a terminal, otherwise\n"
		    "read as one line from stdin.",
	    .min_args = 0,
	    .max_args = 0,
	    .options = login_options,
	    .run = auth_login,
	},
	{
	    .name = "logout",
	    .usage = "",
	    .summary = "revoke the stored token and forget it",
	    .min_args = 0,
	    .max_args = 0,
	    .run = auth_logout,
	},
	{
	    .name = "version",
	    .usage = "",
	    .summary = "show the client's version and the server's",
	    .min_args = 0,
	    .max_args = 0,
	    .run = auth_version,
	},
	{
	    .name = "me",
	    .usage = "",
	    .summary = "show the current user, role and projects",
	    .min_args = 0,
	    .max_args = 0,
	    .run = auth_me,
	},
	{ .name = NULL },
};
