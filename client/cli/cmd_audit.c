/*
 * cmd_audit.c - the audit log over GET /v1/audit (administrators):
 * every mutation with its actor, action and object, newest first,
 * filtered as the API allows. The log is long: one page by default,
 * with the cursor of the next one; --all reads every page.
 */
#include "cmd_audit.h"

#include <stdio.h>
#include <string.h>

#include "output.h"

#define AUDIT_PATH_MAX 2048
#define AUDIT_PAGE "50"

/* "object" is added by audit_decorate(). */
static const struct output_column audit_columns[] = {
	{ "ID", "id" },
	{ "AT", "at" },
	{ "ACTOR", "actor" },
	{ "ACTION", "action" },
	{ "OBJECT", "object" },
	{ "PROJECT", "project" },
	OUTPUT_WIDE,
	{ "REQUEST ID", "request_id" },
	{ NULL, NULL },
};

static void
audit_decorate(struct json_object *row)
{
	struct json_object *t = gp_client_json_get(row, "object_type");
	struct json_object *id = gp_client_json_get(row, "object_id");
	char text[512];

	if (row == NULL || !json_object_is_type(row, json_type_object))
		return;
	snprintf(text, sizeof(text), "%s/%s", t != NULL ? json_object_get_string(t) : "?",
	    id != NULL ? json_object_get_string(id) : "?");
	json_object_object_add(row, "object", json_object_new_string(text));
}

static int
audit_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	static const struct {
		const char *option, *param;
	} filters[] = {
		{ "actor", "actor" },
		{ "action", "action" },
		{ "object-type", "object_type" },
		{ "object-id", "object_id" },
		{ "project", "project" },
		{ "since", "since" },
		{ "until", "until" },
	};
	char path[AUDIT_PATH_MAX] = "/v1/audit";
	struct json_object *doc;
	int rc;

	if (cli_opt(args, "all") != NULL &&
	    (cli_opt(args, "limit") != NULL || cli_opt(args, "cursor") != NULL))
		return cli_usage_error(cli, cmd,
		    "--all reads every page: leave out --limit and "
		    "--cursor");
	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
		if (cli_query_add(cli, path, sizeof(path), filters[i].param,
			cli_opt(args, filters[i].option)) != 0)
			return CLI_EXIT_FAIL;
	}
	rc = cli_list_page(cli, path, args, AUDIT_PAGE, &doc);
	if (rc != CLI_EXIT_OK)
		return rc;
	return cli_print_list(cli, doc, audit_decorate, audit_columns);
}

static const struct cli_option list_options[] = {
	{ "actor", "USER", "only what this user did", false },
	{ "action", "A", "only this action, e.g. project.update or user.create", false },
	{ "object-type", "T", "only objects of this type, e.g. project, user, node", false },
	{ "object-id", "ID",
	    "only this object, as the log names it (a user name, a project name, "
	    "project/user for a membership, a token id)",
	    false },
	{ "project", "P", "only rows of this project", false },
	{ "since", "TIME", "rows at or after this RFC 3339 time", false },
	{ "until", "TIME", "rows before this RFC 3339 time", false },
	{ "all", NULL, "every page, not only the first " AUDIT_PAGE " rows", false },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

#define AUDIT_USAGE                                                                     \
	"[--actor USER] [--action A] [--object-type T] [--object-id ID] [--project P] " \
	"[--since TIME] [--until TIME] [--all|--limit N] [--cursor C]"
#define AUDIT_HELP                                                                         \
	"The audit log, newest first (administrators): every change with who made it,\n"   \
	"the object and the request id. The filters match exactly; --since is\n"           \
	"inclusive, --until exclusive. One page of " AUDIT_PAGE " rows unless --limit N; " \
	"a page\n"                                                                         \
	"that is not the last ends with the --cursor of the next on stderr, and --all\n"   \
	"reads every page. -o json shows each row's before and after documents."

static const struct cli_command audit_subcommands[] = {
	{
	    .name = "list",
	    .usage = AUDIT_USAGE,
	    .summary = "list audit rows, newest first (admins)",
	    .help = AUDIT_HELP,
	    .max_args = 0,
	    .options = list_options,
	    .run = audit_list,
	},
	{ .name = NULL },
};

const struct cli_command cmd_audit_commands[] = {
	{
	    .name = "audit",
	    .usage = AUDIT_USAGE,
	    .summary = "the audit log: who changed what, newest first (admins)",
	    .help = AUDIT_HELP,
	    .max_args = 0,
	    .options = list_options,
	    .run = audit_list,
	    .subcommands = audit_subcommands,
	},
	{ .name = NULL },
};
