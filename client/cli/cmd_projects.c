/*
 * cmd_projects.c - projects (list, get, create, update) and project
 * membership (add, remove, list) over /v1/projects.
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
	OUTPUT_WIDE,
	{ "ID", "id" },
	{ "UPDATED", "updated_at" },
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

/* The project's Kubernetes objects (docs/kubernetes.md): a List, JSON or -o yaml. */
static int
projects_kubernetes(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[PROJECTS_PATH_MAX];
	int rc;

	(void)cmd;
	if (projects_path(cli, path, sizeof(path), args->pos[0], "/kubernetes") != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	output_json(stdout, r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
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

/* True when arr (an array of strings) holds s. */
static bool
projects_has(struct json_object *arr, const char *s)
{
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		if (strcmp(json_object_get_string(json_object_array_get_idx(arr, i)), s) == 0)
			return true;
	}
	return false;
}

/*
 * The namespaces a project update sends: --namespace replaces the list;
 * --add-namespace / --remove-namespace change the current list cur.
 * Returns a new array, or NULL after printing why.
 */
static struct json_object *
projects_namespaces(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    struct json_object *cur)
{
	const char *set[PROJECTS_MAX_NAMESPACES], *add[PROJECTS_MAX_NAMESPACES],
	    *del[PROJECTS_MAX_NAMESPACES];
	int nset = cli_opt_all(args, "namespace", set, PROJECTS_MAX_NAMESPACES);
	int nadd = cli_opt_all(args, "add-namespace", add, PROJECTS_MAX_NAMESPACES);
	int ndel = cli_opt_all(args, "remove-namespace", del, PROJECTS_MAX_NAMESPACES);
	struct json_object *arr = json_object_new_array();

	if (arr == NULL) {
		cli_fail(cli, "out of memory");
		return NULL;
	}
	for (int i = 0; i < nset; i++) {
		if (!projects_has(arr, set[i]))
			json_object_array_add(arr, json_object_new_string(set[i]));
	}
	if (nadd == 0 && ndel == 0)
		return arr;
	for (size_t i = 0; cur != NULL && i < json_object_array_length(cur); i++) {
		const char *ns = json_object_get_string(json_object_array_get_idx(cur, i));
		bool drop = false;

		for (int j = 0; j < ndel; j++)
			drop = drop || strcmp(ns, del[j]) == 0;
		if (!drop && !projects_has(arr, ns))
			json_object_array_add(arr, json_object_new_string(ns));
	}
	for (int j = 0; j < ndel; j++) {
		if (cur == NULL || !projects_has(cur, del[j])) {
			json_object_put(arr);
			cli_usage_error(cli, cmd,
			    "--remove-namespace %s: project %s has no such namespace", del[j],
			    args->pos[0]);
			return NULL;
		}
	}
	for (int i = 0; i < nadd; i++) {
		if (!projects_has(arr, add[i]))
			json_object_array_add(arr, json_object_new_string(add[i]));
	}
	return arr;
}

/*
 * PATCH /v1/projects/NAME. Without --if-match the project is read first
 * and the change goes out under its ETag: --add-namespace and
 * --remove-namespace change the list that was read, and a change made in
 * between is refused (412) instead of being lost.
 */
static int
projects_update(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *display = cli_opt(args, "display-name");
	bool set_ns = cli_opt(args, "namespace") != NULL;
	bool edit_ns =
	    cli_opt(args, "add-namespace") != NULL || cli_opt(args, "remove-namespace") != NULL;
	struct json_object *body = NULL, *ns = NULL;
	struct gp_client_response cur, r;
	char path[PROJECTS_PATH_MAX], tag[160];
	int rc;

	memset(&cur, 0, sizeof(cur));
	if (display == NULL && !set_ns && !edit_ns)
		return cli_usage_error(cli, cmd,
		    "nothing to change: give --display-name, --namespace, --add-namespace or "
		    "--remove-namespace");
	if (set_ns && edit_ns)
		return cli_usage_error(cli, cmd,
		    "--namespace replaces the list: give it, or --add-namespace / "
		    "--remove-namespace, not both");
	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0)
		return CLI_EXIT_USAGE;
	if (projects_path(cli, path, sizeof(path), args->pos[0], "") != 0)
		return CLI_EXIT_FAIL;
	if (tag[0] == '\0' || edit_ns) {
		rc = cli_call(cli, "GET", path, NULL, &cur);
		if (rc != CLI_EXIT_OK)
			return rc;
		if (tag[0] == '\0')
			snprintf(tag, sizeof(tag), "%s", cur.etag);
	}
	body = json_object_new_object();
	if (body == NULL) {
		rc = cli_fail(cli, "out of memory");
		goto done;
	}
	if (display != NULL)
		json_object_object_add(body, "display_name", json_object_new_string(display));
	if (set_ns || edit_ns) {
		ns =
		    projects_namespaces(cli, cmd, args, gp_client_json_get(cur.json, "namespaces"));
		if (ns == NULL) {
			rc = edit_ns ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
			goto done;
		}
		json_object_object_add(body, "namespaces", ns);
	}
	rc = cli_call_if_match(cli, "PATCH", path, body, tag[0] ? tag : NULL, &r);
	if (rc == CLI_EXIT_OK)
		rc = projects_print_one(cli, &r, project_columns);
done:
	gp_client_response_free(&cur);
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

static const struct cli_option update_options[] = {
	{ "display-name", "X", "the new human-readable name", false },
	{ "namespace", "NS", "the namespaces the project owns, replacing the list", true },
	{ "add-namespace", "NS", "add a namespace to the list", true },
	{ "remove-namespace", "NS", "remove a namespace from the list", true },
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option role_options[] = {
	{ "role", "R", "owner, member or viewer (required)", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_command projects_subcommands[] = {
	{
	    .name = "kubernetes",
	    .usage = "NAME",
	    .summary =
		"the Kubernetes objects of the project's pools (a List; -o yaml for kubectl)",
	    .min_args = 1,
	    .max_args = 1,
	    .run = projects_kubernetes,
	},
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
	    .summary = "get one project",
	    .min_args = 1,
	    .max_args = 1,
	    .run = projects_get,
	},
	{
	    .name = "create",
	    .usage = "NAME --display-name X [--namespace NS ...]",
	    .summary = "create a project (admins; add owners with 'gpupool members add')",
	    .help = "Create a project (admins). It starts without members: creating it\n"
		    "does not make you a member. Give it owners with\n"
		    "'gpupool members add PROJECT USER --role owner'. A namespace belongs to\n"
		    "at most one project.",
	    .min_args = 1,
	    .max_args = 1,
	    .options = create_options,
	    .run = projects_create,
	},
	{
	    .name = "update",
	    .usage = "NAME [--display-name X] [--namespace NS ...|--add-namespace NS ...] "
		     "[--remove-namespace NS ...] [--if-match ETAG]",
	    .summary = "change a project's display name or namespaces (owners, admins)",
	    .help = "Change a project; only what is given changes. --namespace (repeated)\n"
		    "replaces the whole list; --add-namespace and --remove-namespace edit\n"
		    "the current one. The project is read first and the change is sent\n"
		    "under its ETag (If-Match), so a change made in between is refused with\n"
		    "412 instead of being lost; --if-match ETAG uses ETAG instead.",
	    .min_args = 1,
	    .max_args = 1,
	    .options = update_options,
	    .run = projects_update,
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
	    .summary = "list, get, create and update projects",
	    .subcommands = projects_subcommands,
	},
	{
	    .name = "members",
	    .summary = "add, remove and list a project's members",
	    .subcommands = members_subcommands,
	},
	{ .name = NULL },
};
