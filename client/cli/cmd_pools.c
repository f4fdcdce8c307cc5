/*
 * cmd_pools.c - GPU pools (list, get: status, SpecAndCount, end time and
 * allocations) and project quotas (get, set, delete).
 */
#include "cmd_pools.h"

#include <stdio.h>
#include <string.h>

#include "domain/spec.h"
#include "output.h"

#define POOLS_PATH_MAX 1024
#define POOLS_MAX_ITEMS 64

static const struct output_column pool_columns[] = {
	{ "ID", "id" },
	{ "PROJECT", "project" },
	{ "NAME", "name" },
	{ "STATUS", "status" },
	{ "CLUSTER", "cluster" },
	{ "ITEMS", "items_text" },
	{ "ENDS", "ends_at" },
	{ "CREATED", "created_at" },
	OUTPUT_WIDE,
	{ "GENERATION", "generation" },
	{ "UPDATED", "updated_at" },
	{ "RELEASED", "released_at" },
	{ NULL, NULL },
};

static const struct output_column allocation_columns[] = {
	{ "NODE", "node" },
	{ "GPU", "gpu_index" },
	{ "PROFILE", "profile" },
	{ "START", "start" },
	{ "SIZE", "size" },
	{ "STATE", "state" },
	{ "RESOURCE", "resource_name" },
	{ "GPU UUID", "gpu_uuid" },
	{ NULL, NULL },
};

static const struct output_column quota_columns[] = {
	{ "MODEL", "model" },
	{ "PROFILE", "profile" },
	{ "LIMIT", "count" },
	{ "USED", "used" },
	{ NULL, NULL },
};

int
pools_cli_items(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    int first, struct json_object **out)
{
	struct json_object *items = json_object_new_array();

	*out = NULL;
	if (items == NULL)
		return cli_fail(cli, "out of memory");
	if (args->npos - first > POOLS_MAX_ITEMS) {
		json_object_put(items);
		return cli_usage_error(cli, cmd, "at most %d items", POOLS_MAX_ITEMS);
	}
	for (int i = first; i < args->npos; i++) {
		struct spec_count s;
		struct gp_error err;
		struct json_object *o;

		gp_error_clear(&err);
		if (spec_parse(args->pos[i], &s, "item", &err) != 0) {
			json_object_put(items);
			return cli_usage_error(cli, cmd, "item \"%s\": %s", args->pos[i],
			    err.nfields > 0 ? err.fields[0].message : err.message);
		}
		o = json_object_new_object();
		if (o == NULL || json_object_array_add(items, o) != 0) {
			json_object_put(o);
			json_object_put(items);
			return cli_fail(cli, "out of memory");
		}
		json_object_object_add(o, "model", json_object_new_string(s.model));
		json_object_object_add(o, "profile", json_object_new_string(s.profile));
		json_object_object_add(o, "count", json_object_new_int(s.count));
	}
	*out = items;
	return CLI_EXIT_OK;
}

static void
items_text_one(struct json_object *o, const char *key)
{
	struct json_object *arr = gp_client_json_get(o, key);
	char buf[1024], name[128];
	size_t off = 0;

	if (o == NULL || !json_object_is_type(o, json_type_object))
		return;
	buf[0] = '\0';
	if (arr == NULL || !json_object_is_type(arr, json_type_array)) {
		snprintf(buf, sizeof(buf), "-");
	} else {
		size_t n = json_object_array_length(arr);

		for (size_t i = 0; i < n && off < sizeof(buf); i++) {
			struct json_object *it = json_object_array_get_idx(arr, i);
			struct json_object *m = gp_client_json_get(it, "model");
			struct json_object *p = gp_client_json_get(it, "profile");
			struct json_object *c = gp_client_json_get(it, "count");
			int k = snprintf(buf + off, sizeof(buf) - off, "%s%s/%s=%d", i ? ", " : "",
			    m ? json_object_get_string(m) : "?",
			    p ? json_object_get_string(p) : "?", c ? json_object_get_int(c) : 0);

			if (k > 0)
				off += (size_t)k;
		}
		if (n == 0)
			snprintf(buf, sizeof(buf), "-");
	}
	snprintf(name, sizeof(name), "%s_text", key);
	json_object_object_add(o, name, json_object_new_string(buf));
}

void
pools_cli_items_text(struct json_object *rows, const char *key)
{
	if (rows == NULL)
		return;
	if (json_object_is_type(rows, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(rows); i++)
			items_text_one(json_object_array_get_idx(rows, i), key);
	} else {
		items_text_one(rows, key);
	}
}

int
pools_cli_list(struct cli *cli, const char *path, const struct cli_args *args,
    const struct output_column *cols)
{
	struct json_object *doc;
	int rc = cli_list(cli, path, args, &doc);

	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, doc);
	} else {
		struct json_object *items = gp_client_json_get(doc, "items");

		pools_cli_items_text(items, "items");
		output_table(stdout, items, cols);
	}
	json_object_put(doc);
	return CLI_EXIT_OK;
}

void
pools_cli_print_allocations(struct json_object *obj, const char *key)
{
	struct json_object *a = gp_client_json_get(obj, key);

	if (a == NULL || !json_object_is_type(a, json_type_array) ||
	    json_object_array_length(a) == 0) {
		printf("allocations: none\n");
		return;
	}
	output_table(stdout, a, allocation_columns);
}

/*
 * Without --project: the pools of every project the caller sees (all of
 * them for operators and admins), one project after another, every page.
 */
static int
pools_list_all(struct cli *cli, const char *st)
{
	struct cli_args none = { 0 };
	struct json_object *projects, *all, *pitems;
	int rc = cli_list(cli, "/v1/projects", &none, &projects);

	if (rc != CLI_EXIT_OK)
		return rc;
	all = json_object_new_array();
	pitems = gp_client_json_get(projects, "items");
	for (size_t i = 0; pitems != NULL && i < json_object_array_length(pitems); i++) {
		struct json_object *name =
		    gp_client_json_get(json_object_array_get_idx(pitems, i), "name");
		struct json_object *doc, *items;
		char esc[512], path[POOLS_PATH_MAX];

		if (name == NULL ||
		    cli_escape(cli, json_object_get_string(name), esc, sizeof(esc)) != 0)
			continue;
		snprintf(path, sizeof(path), "/v1/projects/%s/pools%s", esc, st);
		rc = cli_list(cli, path, &none, &doc);
		if (rc == CLI_EXIT_NOT_FOUND)
			continue; /* deleted meanwhile */
		if (rc != CLI_EXIT_OK)
			goto done;
		items = gp_client_json_get(doc, "items");
		for (size_t k = 0; items != NULL && k < json_object_array_length(items); k++)
			json_object_array_add(all,
			    json_object_get(json_object_array_get_idx(items, k)));
		json_object_put(doc);
	}
	rc = CLI_EXIT_OK;
	if (cli->output == CLI_OUTPUT_JSON) {
		struct json_object *doc = json_object_new_object();

		json_object_object_add(doc, "items", json_object_get(all));
		json_object_object_add(doc, "next_cursor", NULL);
		output_json(stdout, doc);
		json_object_put(doc);
	} else {
		pools_cli_items_text(all, "items");
		output_table(stdout, all, pool_columns);
	}
done:
	json_object_put(all);
	json_object_put(projects);
	return rc;
}

static int
pools_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *project = cli_opt(args, "project");
	const char *status = cli_opt(args, "status");
	char esc[512], st[64], path[POOLS_PATH_MAX];

	st[0] = '\0';
	if (status != NULL) {
		char s[48];

		if (cli_escape(cli, status, s, sizeof(s)) != 0)
			return CLI_EXIT_FAIL;
		snprintf(st, sizeof(st), "?status=%s", s);
	}
	if (project == NULL) {
		if (cli_opt(args, "limit") != NULL || cli_opt(args, "cursor") != NULL)
			return cli_usage_error(cli, cmd,
			    "--limit and --cursor page through one project: add --project");
		return pools_list_all(cli, st);
	}
	if (cli_escape(cli, project, esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	snprintf(path, sizeof(path), "/v1/projects/%s/pools%s", esc, st);
	return pools_cli_list(cli, path, args, pool_columns);
}

static int
pools_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char esc[64], path[POOLS_PATH_MAX];
	int rc;

	(void)cmd;
	if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	snprintf(path, sizeof(path), "/v1/pools/%s", esc);
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		pools_cli_items_text(r.json, "items");
		output_row(stdout, r.json, pool_columns);
		printf("\n");
		pools_cli_print_allocations(r.json, "allocations");
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
quota_path(struct cli *cli, const char *project, char *buf, size_t len)
{
	char esc[512];

	if (cli_escape(cli, project, esc, sizeof(esc)) != 0)
		return -1;
	snprintf(buf, len, "/v1/projects/%s/quota", esc);
	return 0;
}

/* The quota answer: one row per limited kind with what is used of it. */
static void
quota_print(struct json_object *q)
{
	struct json_object *items = gp_client_json_get(q, "items");
	struct json_object *usage = gp_client_json_get(q, "usage");
	struct json_object *limited = gp_client_json_get(q, "limited");
	struct json_object *rows;

	if (items == NULL || !json_object_is_type(items, json_type_array) ||
	    (limited != NULL && !json_object_get_boolean(limited))) {
		pools_cli_items_text(q, "usage");
		printf("no quota (no limit); in use: %s\n",
		    json_object_get_string(gp_client_json_get(q, "usage_text")));
		return;
	}
	rows = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(items); i++) {
		struct json_object *it = json_object_array_get_idx(items, i);
		struct json_object *row = json_object_new_object();
		const char *m = json_object_get_string(gp_client_json_get(it, "model"));
		const char *p = json_object_get_string(gp_client_json_get(it, "profile"));
		int used = 0;

		for (size_t j = 0; usage != NULL && j < json_object_array_length(usage); j++) {
			struct json_object *u = json_object_array_get_idx(usage, j);

			if (strcmp(json_object_get_string(gp_client_json_get(u, "model")), m) ==
				0 &&
			    strcmp(json_object_get_string(gp_client_json_get(u, "profile")), p) ==
				0)
				used = json_object_get_int(gp_client_json_get(u, "count"));
		}
		json_object_object_add(row, "model", json_object_new_string(m));
		json_object_object_add(row, "profile", json_object_new_string(p));
		json_object_object_add(row, "count",
		    json_object_get(gp_client_json_get(it, "count")));
		json_object_object_add(row, "used", json_object_new_int(used));
		json_object_array_add(rows, row);
	}
	output_table(stdout, rows, quota_columns);
	json_object_put(rows);
}

static int
quota_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[POOLS_PATH_MAX];
	int rc;

	(void)cmd;
	if (quota_path(cli, args->pos[0], path, sizeof(path)) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		quota_print(r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
quota_set(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct json_object *body, *items;
	struct gp_client_response r;
	char path[POOLS_PATH_MAX], tag[160];
	int rc;

	if (quota_path(cli, args->pos[0], path, sizeof(path)) != 0)
		return CLI_EXIT_FAIL;
	rc = pools_cli_items(cli, cmd, args, 1, &items);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0) {
		json_object_put(items);
		return CLI_EXIT_USAGE;
	}
	body = json_object_new_object();
	json_object_object_add(body, "items", items);
	rc = cli_call_if_match(cli, "PUT", path, body, tag[0] ? tag : NULL, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		quota_print(r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
quota_delete(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[POOLS_PATH_MAX], tag[160];
	int rc;

	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0)
		return CLI_EXIT_USAGE;
	if (quota_path(cli, args->pos[0], path, sizeof(path)) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call_if_match(cli, "DELETE", path, NULL, tag[0] ? tag : NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	gp_client_response_free(&r);
	if (cli->output == CLI_OUTPUT_TABLE)
		printf("project %s has no quota now (no limit)\n", args->pos[0]);
	return CLI_EXIT_OK;
}

static const struct cli_option list_options[] = {
	{ "project", "P", "only this project's pools (else every project you can see)", false },
	{ "status", "S", "only pools in this status (pending, provisioning, active, ...)", false },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option quota_change_options[] = {
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_command pools_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--project P] [--status S] [--limit N] [--cursor C]",
	    .summary = "list pools: a project's, or every project's you can see",
	    .max_args = 0,
	    .options = list_options,
	    .run = pools_list,
	},
	{
	    .name = "get",
	    .usage = "ID",
	    .summary = "get a pool with its allocations",
	    .min_args = 1,
	    .max_args = 1,
	    .run = pools_get,
	},
	{ .name = NULL },
};

static const struct cli_command quota_subcommands[] = {
	{
	    .name = "get",
	    .usage = "PROJECT",
	    .summary = "get a project's quota and what it uses",
	    .min_args = 1,
	    .max_args = 1,
	    .run = quota_get,
	},
	{
	    .name = "set",
	    .usage = "PROJECT [MODEL/PROFILE=COUNT ...] [--if-match ETAG]",
	    .summary = "replace a project's quota (admin); no items allows nothing",
	    .help = "Replace the project's quota with the given maximums, such as\n"
		    "H100-80GB/3g.40gb=4 A100-40GB/full=2. Kinds not listed are limited to 0;\n"
		    "'gpupool quota delete' removes the limit. Requires the admin role.\n"
		    "--if-match ETAG (the quota's generation, as 'quota get -o json' shows\n"
		    "it; 0 while there is none) replaces it only if nobody changed it since.",
	    .min_args = 1,
	    .max_args = CLI_MAX_POSITIONAL,
	    .options = quota_change_options,
	    .run = quota_set,
	},
	{
	    .name = "delete",
	    .usage = "PROJECT [--if-match ETAG]",
	    .summary = "remove a project's quota (no limit; admin)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = quota_change_options,
	    .run = quota_delete,
	},
	{ .name = NULL },
};

const struct cli_command cmd_pools_commands[] = {
	{
	    .name = "pools",
	    .summary = "list and get GPU pools",
	    .subcommands = pools_subcommands,
	},
	{
	    .name = "quota",
	    .summary = "get, set and delete project quotas",
	    .subcommands = quota_subcommands,
	},
	{ .name = NULL },
};
