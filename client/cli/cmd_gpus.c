/*
 * cmd_gpus.c - the physical side, part two: GPUs over /v1/gpus and
 * /v1/nodes/{node}/gpus (list, get, create, update: health and MIG mode). Tables show each GPU's layout as a slice bar
 * (slicebar.h); -o json prints the server's answer unchanged.
 */
#include "cmd_gpus.h"

#include <stdio.h>
#include <string.h>

#include "cmd_agents.h"
#include "output.h"
#include "slicebar.h"

#define GPUS_PATH_MAX 2048
#define GPUS_MAX_INSTANCES 16

/* "bar" and "mig" are added by gpus_decorate(). */
static const struct output_column gpu_columns[] = {
	{ "NODE", "node" },
	{ "INDEX", "index" },
	{ "MODEL", "model" },
	{ "MIG", "mig" },
	{ "HEALTH", "health" },
	{ "LAYOUT", "bar" },
	{ "FREE", "free_slices" },
	{ "UUID", "uuid" },
	OUTPUT_WIDE,
	{ "CLUSTER", "cluster" },
	{ "MEMORY MIB", "memory_mib" },
	{ "REASON", "health_reason" },
	{ "PLACEABLE", "placeable" },
	{ "GENERATION", "generation" },
	{ NULL, NULL },
};

static const struct output_column instance_columns[] = {
	{ "PROFILE", "profile" },
	{ "START", "start" },
	{ "SIZE", "size" },
	{ "STATE", "state" },
	{ "POOL", "pool_id" },
	{ "DEVICE", "device_uuid" },
	{ NULL, NULL },
};

static int
gpus_int(struct json_object *o, const char *key, int fallback)
{
	struct json_object *v = gp_client_json_get(o, key);

	if (v == NULL || !json_object_is_type(v, json_type_int))
		return fallback;
	return json_object_get_int(v);
}

/*
 * The slice bar of a GPU object (its "memory_slices" and "layout"
 * array) into buf; when it cannot be drawn, the layout as
 * "profile@start,..." (or "?") instead.
 */
static void
gpus_bar(struct json_object *gpu, char *buf, size_t len)
{
	struct json_object *layout = gp_client_json_get(gpu, "layout");
	struct slicebar_instance inst[GPUS_MAX_INSTANCES];
	size_t n = 0, used = 0;

	if (layout != NULL && json_object_is_type(layout, json_type_array))
		n = json_object_array_length(layout);
	if (n <= GPUS_MAX_INSTANCES) {
		for (size_t i = 0; i < n; i++) {
			struct json_object *x = json_object_array_get_idx(layout, i);
			struct json_object *p = gp_client_json_get(x, "profile");

			inst[i].profile = p != NULL ? json_object_get_string(p) : NULL;
			inst[i].start = gpus_int(x, "start", -1);
			inst[i].size = gpus_int(x, "size", 0);
		}
		if (slicebar_render(gpus_int(gpu, "memory_slices", 0), inst, (int)n, buf, len) == 0)
			return;
	}
	snprintf(buf, len, "?");
	for (size_t i = 0; i < n && n <= GPUS_MAX_INSTANCES; i++) {
		int w = snprintf(buf + used, len - used, "%s%s@%d", i ? "," : "",
		    inst[i].profile ? inst[i].profile : "?", inst[i].start);

		if (w < 0 || (size_t)w >= len - used)
			break;
		used += (size_t)w;
	}
}

/* Add the table's display fields to a GPU object. */
static void
gpus_decorate(struct json_object *gpu)
{
	struct json_object *mig = gp_client_json_get(gpu, "mig_enabled");
	char bar[256];

	if (gpu == NULL || !json_object_is_type(gpu, json_type_object))
		return;
	gpus_bar(gpu, bar, sizeof(bar));
	json_object_object_add(gpu, "bar", json_object_new_string(bar));
	json_object_object_add(gpu, "mig",
	    json_object_new_string(mig == NULL     ? "-"
		    : json_object_get_boolean(mig) ? "on"
						   : "off"));
}

static int
gpus_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[GPUS_PATH_MAX] = "/v1/gpus";
	const char *mig = cli_opt(args, "mig");
	struct json_object *doc;
	int rc;

	if (mig != NULL && strcmp(mig, "on") != 0 && strcmp(mig, "off") != 0)
		return cli_usage_error(cli, cmd, "--mig must be on or off");
	if (cli_query_add(cli, path, sizeof(path), "mig_enabled",
		mig == NULL                  ? NULL
		    : strcmp(mig, "on") == 0 ? "true"
					     : "false") != 0 ||
	    cli_query_add(cli, path, sizeof(path), "node", cli_opt(args, "node")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "model", cli_opt(args, "model")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "cluster", cli_opt(args, "cluster")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "health", cli_opt(args, "health")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "project", cli_opt(args, "project")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "pool", cli_opt(args, "pool")) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_list(cli, path, args, &doc);
	if (rc != CLI_EXIT_OK)
		return rc;
	return cli_print_list(cli, doc, gpus_decorate, gpu_columns);
}

/* The GPU line, then its instances. */
static void
gpus_print_detail(struct json_object *gpu)
{
	struct json_object *layout = gp_client_json_get(gpu, "layout");

	gpus_decorate(gpu);
	output_row(stdout, gpu, gpu_columns);
	if (layout != NULL && json_object_is_type(layout, json_type_array) &&
	    json_object_array_length(layout) > 0) {
		fputc('\n', stdout);
		output_table(stdout, layout, instance_columns);
	}
}

static int
gpus_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[GPUS_PATH_MAX], esc[512];
	int rc;

	if (args->npos == 2) {
		/* NODE INDEX: the node's GPU at that index, found by listing the node */
		struct cli_args none = { 0 };
		struct json_object *doc, *items;
		const char *uuid = NULL;
		long long index;

		if (cli_parse_int64(cli, cmd, "INDEX", args->pos[1], 0, 255, &index) != 0)
			return CLI_EXIT_USAGE;
		path[0] = '\0';
		snprintf(path, sizeof(path), "/v1/gpus");
		if (cli_query_add(cli, path, sizeof(path), "node", args->pos[0]) != 0)
			return CLI_EXIT_FAIL;
		rc = cli_list(cli, path, &none, &doc);
		if (rc != CLI_EXIT_OK)
			return rc;
		items = gp_client_json_get(doc, "items");
		for (size_t i = 0; items != NULL && i < json_object_array_length(items); i++) {
			struct json_object *g = json_object_array_get_idx(items, i);
			struct json_object *ix = gp_client_json_get(g, "index");

			if (ix != NULL && json_object_get_int64(ix) == index)
				uuid = json_object_get_string(gp_client_json_get(g, "uuid"));
		}
		if (uuid == NULL || cli_escape(cli, uuid, esc, sizeof(esc)) != 0) {
			json_object_put(doc);
			fprintf(stderr, "%s: node %s has no GPU at index %lld\n", cli->prog,
			    args->pos[0], index);
			return CLI_EXIT_NOT_FOUND;
		}
		json_object_put(doc);
	} else if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0) {
		return CLI_EXIT_FAIL;
	}
	snprintf(path, sizeof(path), "/v1/gpus/%s", esc);
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		gpus_print_detail(r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

/* "PROFILE@START" into an {"profile","start"} object; NULL after a usage error. */
static struct json_object *
gpus_instance(struct cli *cli, const struct cli_command *cmd, const char *text)
{
	const char *at = strrchr(text, '@');
	struct json_object *o;
	long long start;
	char name[64];

	if (at == NULL || at == text || (size_t)(at - text) >= sizeof(name)) {
		cli_usage_error(cli, cmd,
		    "--instance must be PROFILE@START, as 3g.40gb@4, not \"%s\"", text);
		return NULL;
	}
	if (cli_parse_int64(cli, cmd, "instance START", at + 1, 0, 7, &start) != 0)
		return NULL;
	memcpy(name, text, (size_t)(at - text));
	name[at - text] = '\0';
	o = json_object_new_object();
	if (o == NULL) {
		cli_fail(cli, "out of memory");
		return NULL;
	}
	json_object_object_add(o, "profile", json_object_new_string(name));
	json_object_object_add(o, "start", json_object_new_int((int)start));
	return o;
}

static int
gpus_create(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *index = cli_opt(args, "index"), *uuid = cli_opt(args, "uuid");
	const char *model = cli_opt(args, "model");
	const char *inst[GPUS_MAX_INSTANCES];
	int ninst = cli_opt_all(args, "instance", inst, GPUS_MAX_INSTANCES);
	struct json_object *body = NULL, *arr = NULL;
	struct gp_client_response r;
	char path[GPUS_PATH_MAX], esc[512];
	long long idx;
	int rc;

	if (index == NULL || uuid == NULL || model == NULL)
		return cli_usage_error(cli, cmd, "--index, --uuid and --model are required");
	if (cli_parse_int64(cli, cmd, "index", index, 0, 15, &idx) != 0)
		return CLI_EXIT_USAGE;
	if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	snprintf(path, sizeof(path), "/v1/nodes/%s/gpus", esc);
	body = json_object_new_object();
	arr = json_object_new_array();
	if (body == NULL || arr == NULL) {
		json_object_put(arr);
		rc = cli_fail(cli, "out of memory");
		goto fail;
	}
	json_object_object_add(body, "index", json_object_new_int((int)idx));
	json_object_object_add(body, "uuid", json_object_new_string(uuid));
	json_object_object_add(body, "model", json_object_new_string(model));
	if (cli_opt(args, "mig") != NULL)
		json_object_object_add(body, "mig_enabled", json_object_new_boolean(1));
	for (int i = 0; i < ninst; i++) {
		struct json_object *o = gpus_instance(cli, cmd, inst[i]);

		if (o == NULL) {
			json_object_put(arr);
			rc = CLI_EXIT_USAGE;
			goto fail;
		}
		json_object_array_add(arr, o);
	}
	if (ninst > 0)
		json_object_object_add(body, "instances", arr);
	else
		json_object_put(arr);
	rc = cli_call(cli, "POST", path, body, &r);
	if (rc != CLI_EXIT_OK)
		goto fail;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		gpus_print_detail(r.json);
	gp_client_response_free(&r);
fail:
	json_object_put(body);
	return rc;
}

/*
 * PATCH /v1/gpus/UUID: health (with its reason) and the MIG mode. The
 * GPU is read first and the change goes out under its ETag (If-Match),
 * so a change made in between is refused (412); --if-match gives it.
 */
static int
gpus_update(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *health = cli_opt(args, "health"), *reason = cli_opt(args, "reason");
	const char *mig = cli_opt(args, "mig");
	struct json_object *body;
	struct gp_client_response cur, r;
	char path[GPUS_PATH_MAX], esc[512], tag[160];
	int rc;

	if (health == NULL && reason == NULL && mig == NULL)
		return cli_usage_error(cli, cmd,
		    "nothing to change: give --health, --reason or --mig");
	if (health != NULL && strcmp(health, "ok") != 0 && strcmp(health, "degraded") != 0 &&
	    strcmp(health, "failed") != 0)
		return cli_usage_error(cli, cmd, "--health must be ok, degraded or failed");
	if (mig != NULL && strcmp(mig, "on") != 0 && strcmp(mig, "off") != 0)
		return cli_usage_error(cli, cmd, "--mig must be on or off");
	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0)
		return CLI_EXIT_USAGE;
	if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	snprintf(path, sizeof(path), "/v1/gpus/%s", esc);
	if (tag[0] == '\0') {
		rc = cli_call(cli, "GET", path, NULL, &cur);
		if (rc != CLI_EXIT_OK)
			return rc;
		snprintf(tag, sizeof(tag), "%s", cur.etag);
		gp_client_response_free(&cur);
	}
	body = json_object_new_object();
	if (body == NULL)
		return cli_fail(cli, "out of memory");
	if (health != NULL)
		json_object_object_add(body, "health", json_object_new_string(health));
	if (reason != NULL)
		json_object_object_add(body, "health_reason",
		    reason[0] != '\0' ? json_object_new_string(reason) : NULL);
	if (mig != NULL)
		json_object_object_add(body, "mig_enabled",
		    json_object_new_boolean(strcmp(mig, "on") == 0));
	rc = cli_call_if_match(cli, "PATCH", path, body, tag[0] ? tag : NULL, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		gpus_print_detail(r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static const struct cli_option update_options[] = {
	{ "health", "H", "ok, degraded or failed; only ok GPUs take new placements", false },
	{ "reason", "TEXT", "why (the health reason; \"\" clears it)", false },
	{ "mig", "on|off", "the MIG mode (an empty GPU of a MIG-capable model only)", false },
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option list_options[] = {
	{ "node", "N", "only the GPUs of this node", false },
	{ "model", "M", "only GPUs of this catalog model (H100-80GB ...)", false },
	{ "cluster", "C", "only GPUs in this cluster", false },
	{ "health", "H", "only GPUs in this health: ok, degraded, failed", false },
	{ "mig", "on|off", "only GPUs with MIG mode on, or off", false },
	{ "project", "P", "only GPUs holding a live allocation of this project's pools", false },
	{ "pool", "NAME", "only GPUs holding a live allocation of this pool (with --project)",
	    false },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option create_options[] = {
	{ "index", "N", "the GPU's index on its node, 0 to 15 (required)", false },
	{ "uuid", "U", "its NVIDIA UUID, GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (required)",
	    false },
	{ "model", "M", "its catalog model, e.g. H100-80GB (required)", false },
	{ "mig", NULL, "MIG mode is on (implied by MIG instances)", false },
	{ "instance", "P@S", "an instance already on it: profile@start (full@0 for the whole GPU)",
	    true },
	{ NULL, NULL, NULL, false },
};

static const struct cli_command gpus_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--node N] [--model M] [--cluster C] [--health H] [--mig on|off] "
		     "[--project P [--pool NAME]] [--limit N] [--cursor C]",
	    .summary = "list GPUs with their layouts as slice bars",
	    .help =
		"List GPUs. LAYOUT draws each GPU's memory slices: an instance covers its\n"
		"slices and shows its profile name (cut to fit), '.' is a free slice and\n"
		"'|' an instance boundary; every bar has the same width, so an H100's 8\n"
		"slices take 2 columns each:\n"
		"\n"
		"  [3g.40gb    |2g.20|1g|..]   3g.40gb at 0, 2g.20gb at 4, 1g.10gb at 6\n"
		"  [full                   ]   the whole GPU\n"
		"  [.. .. .. .. .. .. .. ..]   empty\n"
		"\n"
		"FREE counts free memory slices (some may be unusable: see 'gpupool capacity').",
	    .max_args = 0,
	    .options = list_options,
	    .run = gpus_list,
	},
	{
	    .name = "get",
	    .usage = "UUID | NODE INDEX",
	    .summary =
		"get one GPU (by UUID, or by node and index), its slice bar and its instances",
	    .min_args = 1,
	    .max_args = 2,
	    .run = gpus_get,
	},
	{
	    .name = "create",
	    .usage = "NODE --index N --uuid U --model M [--mig] [--instance PROFILE@START ...]",
	    .summary = "register a GPU on a node by hand (operators)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = create_options,
	    .run = gpus_create,
	},
	{
	    .name = "update",
	    .usage = "UUID [--health ok|degraded|failed] [--reason TEXT] [--mig on|off] "
		     "[--if-match ETAG]",
	    .summary = "set a GPU's health or MIG mode (operators)",
	    .help = "Change a GPU; only what is given changes. A GPU whose health is not ok\n"
		    "takes no new placements; --health ok without --reason clears the\n"
		    "reason. The MIG mode changes only on an empty GPU of a MIG-capable\n"
		    "model. The GPU is read first and the change is sent under its ETag\n"
		    "(If-Match), so a change made in between is refused with 412;\n"
		    "--if-match ETAG uses ETAG instead.",
	    .min_args = 1,
	    .max_args = 1,
	    .options = update_options,
	    .run = gpus_update,
	},
	{
	    .name = "metrics",
	    .usage = "GPU-UUID [--from TIME] [--to TIME] [--step S]",
	    .summary = "show a GPU's power, activity, memory and temperature samples",
	    .min_args = 1,
	    .max_args = 1,
	    .options = cmd_agents_metrics_options,
	    .run = cmd_agents_gpu_metrics,
	},
	{ .name = NULL },
};

const struct cli_command cmd_gpus_commands[] = {
	{
	    .name = "gpus",
	    .summary = "list, get, create and update physical GPUs and their MIG layouts",
	    .subcommands = gpus_subcommands,
	},
	{ .name = NULL },
};
