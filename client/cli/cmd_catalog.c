/*
 * cmd_catalog.c - the GPU catalog over /v1/catalog/models: which models
 * gpupool knows and, per model, its MIG profiles with the exact item
 * text a pool request takes ("H100-80GB/3g.40gb"), the placements the
 * hardware accepts and the Kubernetes resource a pod asks for.
 */
#include "cmd_catalog.h"

#include <stdio.h>
#include <string.h>

#include "output.h"

#define CATALOG_PATH_MAX 1024
#define CATALOG_TEXT_MAX 1024

/* "profiles_text" is added by catalog_decorate(). */
static const struct output_column model_columns[] = {
	{ "MODEL", "model" },
	{ "MEMORY MIB", "memory_mib" },
	{ "MIG", "mig_capable" },
	{ "PROFILES", "profiles_text" },
	OUTPUT_WIDE,
	{ "SLICES", "memory_slices" },
	{ "RESOURCE", "k8s_resource" },
	{ "PRODUCT NAMES", "product_names" },
	{ "PCI IDS", "pci_device_ids" },
	{ NULL, NULL },
};

/* "spec" is added by catalog_profile_rows(). */
static const struct output_column profile_columns[] = {
	{ "SPEC", "spec" },
	{ "COMPUTE", "compute_slices" },
	{ "MEMORY SLICES", "memory_slices" },
	{ "MEMORY MIB", "memory_mib" },
	{ "MAX", "max_instances" },
	{ "STARTS", "placements" },
	{ "RESOURCE", "k8s_resource" },
	OUTPUT_WIDE,
	{ "ID", "id" },
	{ "SMS", "sm_count" },
	{ "MEDIA", "media_extensions" },
	{ "CONFIRMED", "confirmed" },
	{ NULL, NULL },
};

/* The model's profile names, "full" first, as one comma-joined cell. */
static void
catalog_decorate(struct json_object *model)
{
	struct json_object *profiles = gp_client_json_get(model, "profiles");
	char text[CATALOG_TEXT_MAX] = "full";
	size_t used = strlen(text);

	if (model == NULL || !json_object_is_type(model, json_type_object))
		return;
	for (size_t i = 0; profiles != NULL && json_object_is_type(profiles, json_type_array) &&
	     i < json_object_array_length(profiles);
	     i++) {
		struct json_object *name =
		    gp_client_json_get(json_object_array_get_idx(profiles, i), "name");
		int n;

		if (name == NULL)
			continue;
		n = snprintf(text + used, sizeof(text) - used, ",%s", json_object_get_string(name));
		if (n < 0 || (size_t)n >= sizeof(text) - used) {
			text[used] = '\0';
			break;
		}
		used += (size_t)n;
	}
	json_object_object_add(model, "profiles_text", json_object_new_string(text));
}

/*
 * The rows of "catalog get": the whole GPU ("full"), then each MIG
 * profile, each with its item text MODEL/PROFILE.
 */
static struct json_object *
catalog_profile_rows(struct json_object *model)
{
	struct json_object *rows = json_object_new_array();
	struct json_object *profiles = gp_client_json_get(model, "profiles");
	struct json_object *full = json_object_new_object();
	const char *id = json_object_get_string(gp_client_json_get(model, "model"));
	struct json_object *mig = gp_client_json_get(model, "mig_capable");
	char spec[256];

	if (rows == NULL || full == NULL) {
		json_object_put(rows);
		json_object_put(full);
		return NULL;
	}
	snprintf(spec, sizeof(spec), "%s/full", id != NULL ? id : "?");
	json_object_object_add(full, "spec", json_object_new_string(spec));
	if (mig != NULL && json_object_get_boolean(mig)) {
		/* a model without MIG has no slices to show ("-") */
		json_object_object_add(full, "compute_slices",
		    json_object_get(gp_client_json_get(model, "compute_slices")));
		json_object_object_add(full, "memory_slices",
		    json_object_get(gp_client_json_get(model, "memory_slices")));
	}
	json_object_object_add(full, "memory_mib",
	    json_object_get(gp_client_json_get(model, "memory_mib")));
	json_object_object_add(full, "max_instances", json_object_new_int(1));
	json_object_object_add(full, "placements", json_object_new_int(0)); /* the whole GPU */
	json_object_object_add(full, "k8s_resource",
	    json_object_get(gp_client_json_get(model, "k8s_resource")));
	json_object_array_add(rows, full);
	for (size_t i = 0; profiles != NULL && json_object_is_type(profiles, json_type_array) &&
	     i < json_object_array_length(profiles);
	     i++) {
		struct json_object *p = json_object_array_get_idx(profiles, i);
		struct json_object *name = gp_client_json_get(p, "name");

		if (p == NULL || !json_object_is_type(p, json_type_object) || name == NULL)
			continue;
		snprintf(spec, sizeof(spec), "%s/%s", id != NULL ? id : "?",
		    json_object_get_string(name));
		json_object_object_add(p, "spec", json_object_new_string(spec));
		json_object_array_add(rows, json_object_get(p));
	}
	return rows;
}

static int
catalog_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *mig = cli_opt(args, "mig");
	char path[CATALOG_PATH_MAX] = "/v1/catalog/models";
	struct json_object *doc;
	int rc;

	if (mig != NULL && strcmp(mig, "on") != 0 && strcmp(mig, "off") != 0)
		return cli_usage_error(cli, cmd, "--mig must be on or off");
	if (cli_opt(args, "product-name") != NULL && cli_opt(args, "pci-device-id") != NULL)
		return cli_usage_error(cli, cmd,
		    "give --product-name or --pci-device-id, not both");
	if (cli_query_add(cli, path, sizeof(path), "product_name", cli_opt(args, "product-name")) !=
		0 ||
	    cli_query_add(cli, path, sizeof(path), "pci_device_id",
		cli_opt(args, "pci-device-id")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "mig_capable",
		mig == NULL                  ? NULL
		    : strcmp(mig, "on") == 0 ? "true"
					     : "false") != 0)
		return CLI_EXIT_FAIL;
	rc = cli_list(cli, path, args, &doc);
	if (rc != CLI_EXIT_OK)
		return rc;
	return cli_print_list(cli, doc, catalog_decorate, model_columns);
}

static int
catalog_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	struct json_object *rows;
	char path[CATALOG_PATH_MAX], esc[512];
	int rc;

	(void)cmd;
	if (cli_escape(cli, args->pos[0], esc, sizeof(esc)) != 0)
		return CLI_EXIT_FAIL;
	snprintf(path, sizeof(path), "/v1/catalog/models/%s", esc);
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
		gp_client_response_free(&r);
		return CLI_EXIT_OK;
	}
	rows = catalog_profile_rows(r.json);
	if (rows == NULL) {
		gp_client_response_free(&r);
		return cli_fail(cli, "out of memory");
	}
	output_table(stdout, rows, profile_columns);
	json_object_put(rows);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static const struct cli_option list_options[] = {
	{ "mig", "on|off", "only models with MIG (on) or without (off)", false },
	{ "product-name", "NAME",
	    "only the model nvidia-smi names so, e.g. \"NVIDIA H100 80GB HBM3\"", false },
	{ "pci-device-id", "ID", "only the model with this PCI device id, e.g. 0x233010DE", false },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_command catalog_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--mig on|off] [--product-name NAME|--pci-device-id ID] [--limit N] "
		     "[--cursor C]",
	    .summary = "list the GPU models and their profile names",
	    .max_args = 0,
	    .options = list_options,
	    .run = catalog_list,
	},
	{
	    .name = "get",
	    .usage = "MODEL",
	    .summary = "get a model's profiles: item text, slices, starts, Kubernetes resource",
	    .help = "Show what a pool request may ask for on MODEL: one row for the whole\n"
		    "GPU and one per MIG profile. SPEC is the item text 'gpupool request\n"
		    "create' takes (add =COUNT), STARTS the memory slices an instance may\n"
		    "start at, RESOURCE what a pod requests in Kubernetes.",
	    .min_args = 1,
	    .max_args = 1,
	    .run = catalog_get,
	},
	{ .name = NULL },
};

const struct cli_command cmd_catalog_commands[] = {
	{
	    .name = "catalog",
	    .usage = "[--mig on|off] [--product-name NAME|--pci-device-id ID] [--limit N] "
		     "[--cursor C]",
	    .summary = "the GPU models and their MIG profiles (the names requests take)",
	    .help = "Without a subcommand, 'gpupool catalog list'.",
	    .max_args = 0,
	    .options = list_options,
	    .run = catalog_list,
	    .subcommands = catalog_subcommands,
	},
	{ .name = NULL },
};
