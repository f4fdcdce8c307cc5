/*
 * cmd_projects.c - projects (list, get, create) and project membership
 * (add, remove, list) over /v1/projects.
 */
#include "cmd_projects.h"

#include <stdio.h>
#include <string.h>

#include "output.h"

#define PROJECTS_MAX_NAMESPACES 64
#define PROJECTS_PATH_MAX 1024

static const struct output_column project_columns[] = {
	{ "NAME", "name" },
	{ "DISPLAY NAME", "display_name" },
	{ "NAMESPACES", "namespaces" },
	{ "GENERATION", "generation" },
	{ "CREATED", "created_at" },
	{ NULL, NULL },
};

static const struct output_column member_columns[] = {
	{ "USERNAME", "username" },
	{ "ROLE", "role" },
	{ "ADDED", "added_at" },
	{ NULL, NULL },
};

/* Print a single object answer in the chosen format and free it. */
static int
projects_print_one(struct cli *cli, struct gp_client_response *r, const struct output_column *cols)
{
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r->json);
	else
		output_row(stdout, r->json, cols);
	gp_client_response_free(r);
	return CLI_EXIT_OK;
}

static int
projects_print_list(struct cli *cli, const char *path, const struct cli_args *args,
    const struct output_column *cols)
{
	struct json_object *doc;
	int rc;

	rc = cli_list(cli, path, args, &doc);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, doc);
	else
		output_table(stdout, gp_client_json_get(doc, "items"), cols);
	json_object_put(doc);
	return CLI_EXIT_OK;
}

/* "/v1/projects/<name>" plus suffix, with the name escaped. */
static int
projects_path(struct cli *cli, char *buf, size_t len, const char *name, const char *suffix)
{
	char esc[512];
	int n;

	if (cli_escape(cli, name, esc, sizeof(esc)) != 0)
		return -1;
	n = snprintf(buf, len, "/v1/projects/%s%s", esc, suffix);
	if (n < 0 || (size_t)n >= len) {
		cli_fail(cli, "the request path is too long");
		return -1;
	}
	return 0;
}

static int
projects_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	(void)cmd;
	return projects_print_list(cli, "/v1/projects", args, project_columns);
}

static int
projects_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[PROJECTS_PATH_MAX];
	int rc;

	(void)cmd;
	if (projects_path(cli, path, sizeof(path), args->pos[0], "") != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	return projects_print_one(cli, &r, project_columns);
}

static int
projects_create(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *display = cli_opt(args, "display-name");
	const char *ns[PROJECTS_MAX_NAMESPACES];
	struct json_object *body = NULL, *arr;
	struct gp_client_response r;
	int nns, rc;

	if (display == NULL)
		return cli_usage_error(cli, cmd, "--display-name is required");
	if (args->pos[0][0] == '\0')
		return cli_usage_error(cli, cmd, "the project name is empty");
	nns = cli_opt_all(args, "namespace", ns, PROJECTS_MAX_NAMESPACES);
	body = json_object_new_object();
	arr = json_object_new_array();
	if (body == NULL || arr == NULL) {
		json_object_put(arr);
		rc = cli_fail(cli, "out of memory");
		goto fail;
	}
	json_object_object_add(body, "name", json_object_new_string(args->pos[0]));
	json_object_object_add(body, "display_name", json_object_new_string(display));
	for (int i = 0; i < nns; i++)
		json_object_array_add(arr, json_object_new_string(ns[i]));
	json_object_object_add(body, "namespaces", arr);
	rc = cli_call(cli, "POST", "/v1/projects", body, &r);
	if (rc != CLI_EXIT_OK)
		goto fail;
	rc = projects_print_one(cli, &r, project_columns);
fail:
	json_object_put(body);
	return rc;
}

static int
members_path(struct cli *cli, char *buf, size_t len, const char *project, const char *user)
{
	char esc[512], suffix[600];
	int n;

	if (cli_escape(cli, user, esc, sizeof(esc)) != 0)
		return -1;
	n = snprintf(suffix, sizeof(suffix), "/members/%s", esc);
	if (n < 0 || (size_t)n >= sizeof(suffix)) {
		cli_fail(cli, "the request path is too long");
		return -1;
	}
	return projects_path(cli, buf, len, project, suffix);
}

static bool
members_valid_role(const char *role)
{
	return strcmp(role, "owner") == 0 || strcmp(role, "member") == 0 ||
	    strcmp(role, "viewer") == 0;
}

static int
members_add(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *role = cli_opt(args, "role");
	struct json_object *body;
	struct gp_client_response r;
	char path[PROJECTS_PATH_MAX];
	int rc;

	if (role == NULL)
		return cli_usage_error(cli, cmd, "--role is required");
	if (!members_valid_role(role))
		return cli_usage_error(cli, cmd, "--role must be owner, member or viewer");
	if (members_path(cli, path, sizeof(path), args->pos[0], args->pos[1]) != 0)
		return CLI_EXIT_FAIL;
	body = json_object_new_object();
	if (body == NULL)
		return cli_fail(cli, "out of memory");
	json_object_object_add(body, "role", json_object_new_string(role));
	rc = cli_call(cli, "PUT", path, body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	return projects_print_one(cli, &r, member_columns);
}

static int
members_remove(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[PROJECTS_PATH_MAX];
	int rc;

	(void)cmd;
	if (members_path(cli, path, sizeof(path), args->pos[0], args->pos[1]) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "DELETE", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	gp_client_response_free(&r);
	if (cli->output == CLI_OUTPUT_TABLE)
		printf("removed %s from %s\n", args->pos[1], args->pos[0]);
	return CLI_EXIT_OK;
}

static int
members_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[PROJECTS_PATH_MAX];

	(void)cmd;
	if (projects_path(cli, path, sizeof(path), args->pos[0], "/members") != 0)
		return CLI_EXIT_FAIL;
	return projects_print_list(cli, path, args, member_columns);
}

static const struct cli_option list_options[] = {
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option create_options[] = {
	{ "display-name", "X", "the human-readable name (required)", false },
	{ "namespace", "NS", "a Kubernetes namespace the project owns", true },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option role_options[] = {
	{ "role", "R", "owner, member or viewer (required)", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_command projects_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--limit N] [--cursor C]",
	    .summary = "list the projects you can see",
	    .max_args = 0,
	    .options = list_options,
	    .run = projects_list,
	},
	{
	    .name = "get",
	    .usage = "NAME",
	    .summary = "show one project",
	    .min_args = 1,
	    .max_args = 1,
	    .run = projects_get,
	},
	{
	    .name = "create",
	    .usage = "NAME --display-name X [--namespace NS ...]",
	    .summary = "create a project (admins; add owners with 'gpupool members add')",
	    .min_args = 1,
	    .max_args = 1,
	    .options = create_options,
	    .run = projects_create,
	},
	{ .name = NULL },
};

static const struct cli_command members_subcommands[] = {
	{
	    .name = "add",
	    .usage = "PROJECT USER --role owner|member|viewer",
	    .summary = "add a user to a project or change their role",
	    .min_args = 2,
	    .max_args = 2,
	    .options = role_options,
	    .run = members_add,
	},
	{
	    .name = "remove",
	    .usage = "PROJECT USER",
	    .summary = "remove a user from a project",
	    .min_args = 2,
	    .max_args = 2,
	    .run = members_remove,
	},
	{
	    .name = "list",
	    .usage = "PROJECT [--limit N] [--cursor C]",
	    .summary = "list a project's members",
	    .min_args = 1,
	    .max_args = 1,
	    .options = list_options,
	    .run = members_list,
	},
	{ .name = NULL },
};

const struct cli_command cmd_projects_commands[] = {
	{
	    .name = "projects",
	    .summary = "list, show and create projects",
	    .subcommands = projects_subcommands,
	},
	{
	    .name = "members",
	    .summary = "manage who belongs to a project",
	    .subcommands = members_subcommands,
	},
	{ .name = NULL },
};
