/*
 * cmd_capacity.c - the capacity view over GET /v1/capacity (per model:
 * GPUs, compute and memory slices, stranded slices, and per profile the
 * instances allocated and how many more could be placed) and
 * POST /v1/capacity/simulate. The items of a simulation are given in
 * the SpecAndCount text form (H100-80GB/3g.40gb=2) and parsed here with
 * the domain's spec_parse, the parser the server uses, so malformed text
 * is a usage error before anything is sent; whether the model and
 * profile exist is the server's to say (it owns the catalog).
 */
#include "cmd_capacity.h"

#include <stdio.h>
#include <string.h>

#include "cmd_defrag.h"
#include "domain/spec.h"
#include "output.h"

#define CAPACITY_PATH_MAX 1024
#define CAPACITY_NAME_MAX 64
#define CAPACITY_MAX_ITEMS 64 /* the server's limit (PLACEMENT_MAX_ITEMS) */

static const struct output_column placement_columns[] = {
	{ "MODEL", "model" },
	{ "PROFILE", "profile" },
	{ "NODE", "node" },
	{ "GPU", "gpu_index" },
	{ "START", "start" },
	{ "SIZE", "size" },
	{ "MIG SWITCH", "mode_switch" },
	{ "GPU UUID", "gpu_uuid" },
	{ NULL, NULL },
};

static const struct output_column short_columns[] = {
	{ "MODEL", "model" },
	{ "PROFILE", "profile" },
	{ "MISSING", "missing" },
	{ NULL, NULL },
};

/* The string at key, made safe for a terminal, into buf ("-" when absent). */
static const char *
capacity_text(struct json_object *o, const char *key, char *buf, size_t len)
{
	struct json_object *v = gp_client_json_get(o, key);
	const char *s =
	    v != NULL && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : "-";
	size_t i = 0;

	for (; s[i] != '\0' && i + 1 < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		buf[i] = (ch < 0x20 || ch == 0x7f) ? '?' : (char)ch;
	}
	buf[i] = '\0';
	return buf;
}

/* The integer at a dotted path, as text ("-" when absent). */
static const char *
capacity_num(struct json_object *o, const char *path, char *buf, size_t len)
{
	struct json_object *v = gp_client_json_get(o, path);

	if (v == NULL || !json_object_is_type(v, json_type_int))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%lld", (long long)json_object_get_int64(v));
	return buf;
}

/*
 * One model's block:
 *
 *   H100-80GB: 2 GPUs (2 healthy, 1 MIG enabled, 2 placeable)
 *     slices         total      used      free  stranded
 *     compute           14        13         1         1
 *     memory            16        15         1         -
 *     profile     allocated  placeable
 *     full                1          0
 *     1g.10gb+me          1          0
 *
 * the first column as wide as the longest profile name (9 at least)
 */
static void
capacity_print_model(struct json_object *m)
{
	struct json_object *profiles = gp_client_json_get(m, "profiles");
	char name[CAPACITY_NAME_MAX], a[32], b[32], c[32], d[32];
	size_t np = 0;
	int width = 9;

	if (profiles != NULL && json_object_is_type(profiles, json_type_array))
		np = json_object_array_length(profiles);
	for (size_t i = 0; i < np; i++) {
		int w = (int)strlen(capacity_text(json_object_array_get_idx(profiles, i), "profile",
		    name, sizeof(name)));

		if (w > width)
			width = w;
	}
	printf("%s: %s GPUs", capacity_text(m, "model", name, sizeof(name)),
	    capacity_num(m, "gpus.total", a, sizeof(a)));
	printf(" (%s healthy, %s MIG enabled, %s placeable)\n",
	    capacity_num(m, "gpus.healthy", a, sizeof(a)),
	    capacity_num(m, "gpus.mig_enabled", b, sizeof(b)),
	    capacity_num(m, "gpus.placeable", c, sizeof(c)));
	printf("  %-*s %9s %9s %9s %9s\n", width, "slices", "total", "used", "free", "stranded");
	printf("  %-*s %9s %9s %9s %9s\n", width, "compute",
	    capacity_num(m, "compute_slices.total", a, sizeof(a)),
	    capacity_num(m, "compute_slices.used", b, sizeof(b)),
	    capacity_num(m, "compute_slices.free", c, sizeof(c)),
	    capacity_num(m, "compute_slices.stranded", d, sizeof(d)));
	printf("  %-*s %9s %9s %9s %9s\n", width, "memory",
	    capacity_num(m, "memory_slices.total", a, sizeof(a)),
	    capacity_num(m, "memory_slices.used", b, sizeof(b)),
	    capacity_num(m, "memory_slices.free", c, sizeof(c)),
	    capacity_num(m, "memory_slices.stranded", d, sizeof(d)));
	printf("  %-*s %10s %10s\n", width, "profile", "allocated", "placeable");
	for (size_t i = 0; i < np; i++) {
		struct json_object *p = json_object_array_get_idx(profiles, i);

		printf("  %-*s %10s %10s\n", width, capacity_text(p, "profile", name, sizeof(name)),
		    capacity_num(p, "allocated", a, sizeof(a)),
		    capacity_num(p, "placeable", b, sizeof(b)));
	}
}

static int
capacity_show(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[CAPACITY_PATH_MAX] = "/v1/capacity";
	struct json_object *models;
	struct gp_client_response r;
	size_t n = 0;
	int rc;

	(void)cmd;
	if (cli_query_add(cli, path, sizeof(path), "model", cli_opt(args, "model")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "cluster", cli_opt(args, "cluster")) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	models = gp_client_json_get(r.json, "models");
	if (models == NULL || !json_object_is_type(models, json_type_array)) {
		gp_client_response_free(&r);
		return cli_fail(cli, "the server's answer has no \"models\" list");
	}
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		n = json_object_array_length(models);
		for (size_t i = 0; i < n; i++) {
			if (i > 0)
				fputc('\n', stdout);
			capacity_print_model(json_object_array_get_idx(models, i));
		}
		if (n == 0)
			printf("no GPUs registered%s\n",
			    cli_opt(args, "cluster") ? " in this cluster" : "");
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

int
cmd_capacity_items(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    struct json_object **out)
{
	struct json_object *items = json_object_new_array();

	*out = NULL;
	if (items == NULL)
		return cli_fail(cli, "out of memory");
	for (int i = 0; i < args->npos; i++) {
		struct spec_count s;
		struct gp_error err;
		struct json_object *o;

		gp_error_clear(&err);
		if (spec_parse(args->pos[i], &s, "item", &err) != 0) {
			json_object_put(items);
			return cli_usage_error(cli, cmd, "item %d \"%s\": %s", i + 1, args->pos[i],
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

static int
capacity_simulate(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *cluster = cli_opt(args, "cluster");
	struct json_object *body = NULL, *items, *fits, *exhausted;
	struct gp_client_response r;
	bool ok;
	int rc;

	rc = cmd_capacity_items(cli, cmd, args, &items);
	if (rc != CLI_EXIT_OK)
		return rc;
	body = json_object_new_object();
	if (body == NULL) {
		json_object_put(items);
		return cli_fail(cli, "out of memory");
	}
	json_object_object_add(body, "items", items);
	if (cluster != NULL)
		json_object_object_add(body, "cluster", json_object_new_string(cluster));
	rc = cli_call(cli, "POST", "/v1/capacity/simulate", body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	fits = gp_client_json_get(r.json, "fits");
	if (fits == NULL || !json_object_is_type(fits, json_type_boolean)) {
		gp_client_response_free(&r);
		return cli_fail(cli, "the server's answer has no \"fits\"");
	}
	ok = json_object_get_boolean(fits);
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else if (ok) {
		printf("fits: yes\n\n");
		output_table(stdout, gp_client_json_get(r.json, "placements"), placement_columns);
	} else {
		printf("fits: no\n\n");
		output_table(stdout, gp_client_json_get(r.json, "short"), short_columns);
		exhausted = gp_client_json_get(r.json, "search_exhausted");
		if (exhausted != NULL && json_object_get_boolean(exhausted))
			printf("\nnote: the search for a placement stopped at its budget; one may "
			       "exist that was not found\n");
	}
	gp_client_response_free(&r);
	return ok ? CLI_EXIT_OK : CMD_CAPACITY_EXIT_NOFIT;
}

static const struct cli_option show_options[] = {
	{ "model", "M", "only this catalog model (shown even with no GPUs)", false },
	{ "cluster", "C", "only the GPUs of this cluster", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option simulate_options[] = {
	{ "cluster", "C", "place only on GPUs of this cluster", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_command capacity_subcommands[] = {
	{
	    .name = "simulate",
	    .usage = "MODEL/PROFILE=COUNT ... [--cluster C]",
	    .summary = "would these items fit now, and where (changes nothing)",
	    .help = "Ask the server whether the items would fit now, all of them together, and\n"
		    "on which GPUs; nothing is reserved. Each item is a SpecAndCount in text\n"
		    "form, MODEL/PROFILE=COUNT, PROFILE a MIG profile of the model or \"full\"\n"
		    "for whole GPUs; up to 64 items:\n"
		    "\n"
		    "  gpupool capacity simulate H100-80GB/3g.40gb=2 H100-80GB/1g.10gb=1\n"
		    "\n"
		    "Prints \"fits: yes\" and the placements, or \"fits: no\" and how many\n"
		    "instances of each item could not be placed.\n"
		    "\n"
		    "exit status: 0 the items fit, 3 they do not fit, 1 the server or the\n"
		    "network failed (an unknown model or profile is the server's 422),\n"
		    "2 usage error (malformed item text).",
	    .min_args = 1,
	    .max_args = CAPACITY_MAX_ITEMS,
	    .options = simulate_options,
	    .run = capacity_simulate,
	},
	{
	    .name = "defrag",
	    .usage = "COMMAND [ARGS]",
	    .summary = "defragmentation plans: plan, get, list, apply, cancel",
	    .subcommands = cmd_defrag_commands,
	},
	{ .name = NULL },
};

const struct cli_command cmd_capacity_commands[] = {
	{
	    .name = "capacity",
	    .usage = "[--model M] [--cluster C]",
	    .summary = "capacity per GPU model; 'capacity simulate' tries a request, "
		       "'capacity defrag' plans moves",
	    .help = "Show, per GPU model: physical GPUs (total, healthy, MIG enabled, placeable),\n"
		    "compute and memory slices (total, used, free) and the stranded compute\n"
		    "slices (free, but no profile can use them given the occupied memory\n"
		    "slices), then per profile (\"full\" is a whole GPU) the instances\n"
		    "allocated and how many more could be placed now, each profile alone.",
	    .max_args = 0,
	    .options = show_options,
	    .run = capacity_show,
	    .subcommands = capacity_subcommands,
	},
	{ .name = NULL },
};
