/*
 * cmd_nodes.c - the physical side, part one: clusters (list, get,
 * create) over /v1/clusters and GPU nodes (list with filters, get,
 * create, cordon, uncordon, drain) over /v1/nodes.
 */
#include "cmd_nodes.h"

#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "cmd_agents.h"
#include "output.h"

#define NODES_PATH_MAX 2048
#define NODES_MAX_LABELS 64

static const struct output_column cluster_columns[] = {
	{ "NAME", "name" },
	{ "REGION", "region" },
	{ "NODES", "nodes" },
	{ "GPUS", "gpus" },
	{ "DESCRIPTION", "description" },
	{ "CREATED", "created_at" },
	{ NULL, NULL },
};

/* "labels_text" and "cpu_text" are added by nodes_decorate(). */
static const struct output_column node_columns[] = {
	{ "NAME", "name" },
	{ "CLUSTER", "cluster" },
	{ "STATUS", "status" },
	{ "GPUS", "gpu_count" },
	{ "MODEL", "gpu_model" },
	{ "CPU", "cpu_text" },
	{ "MEMORY", "memory_text" },
	{ "HOSTNAME", "hostname" },
	{ "LABELS", "labels_text" },
	{ NULL, NULL },
};

/*
 * Add display fields to a node object for the table: labels as k=v,...,
 * CPU in cores and memory in GiB.
 */
static void
nodes_decorate(struct json_object *node)
{
	struct json_object *labels = gp_client_json_get(node, "labels");
	struct json_object *cpu = gp_client_json_get(node, "cpu_millicores");
	struct json_object *mem = gp_client_json_get(node, "memory_bytes");
	char text[4096], num[64];
	size_t used = 0;

	text[0] = '\0';
	if (labels != NULL && json_object_is_type(labels, json_type_object)) {
		json_object_object_foreach(labels, k, v)
		{
			int n = snprintf(text + used, sizeof(text) - used, "%s%s=%s",
			    used ? "," : "", k, json_object_get_string(v));

			if (n < 0 || (size_t)n >= sizeof(text) - used) {
				text[used] = '\0';
				break;
			}
			used += (size_t)n;
		}
	}
	json_object_object_add(node, "labels_text", json_object_new_string(text));
	if (cpu != NULL && json_object_is_type(cpu, json_type_int)) {
		int64_t m = json_object_get_int64(cpu);

		if (m % 1000 == 0)
			snprintf(num, sizeof(num), "%lld", (long long)(m / 1000));
		else
			snprintf(num, sizeof(num), "%lldm", (long long)m);
		json_object_object_add(node, "cpu_text", json_object_new_string(num));
	}
	if (mem != NULL && json_object_is_type(mem, json_type_int)) {
		int64_t b = json_object_get_int64(mem);

		if (b % (1024LL * 1024 * 1024) == 0)
			snprintf(num, sizeof(num), "%lldGi",
			    (long long)(b / (1024LL * 1024 * 1024)));
		else
			snprintf(num, sizeof(num), "%.1fGi", (double)b / (1024.0 * 1024 * 1024));
		json_object_object_add(node, "memory_text", json_object_new_string(num));
	}
}

/* Print a single object answer in the chosen format and free it. */
static int
nodes_print_one(struct cli *cli, struct gp_client_response *r, const struct output_column *cols,
    bool node)
{
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r->json);
	} else {
		if (node && r->json != NULL && json_object_is_type(r->json, json_type_object))
			nodes_decorate(r->json);
		output_row(stdout, r->json, cols);
	}
	gp_client_response_free(r);
	return CLI_EXIT_OK;
}

static int
nodes_print_list(struct cli *cli, const char *path, const struct cli_args *args,
    const struct output_column *cols, bool node)
{
	struct json_object *doc, *items;
	int rc;

	rc = cli_list(cli, path, args, &doc);
	if (rc != CLI_EXIT_OK)
		return rc;
	items = gp_client_json_get(doc, "items");
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, doc);
	} else {
		for (size_t i = 0; node && items != NULL && i < json_object_array_length(items);
		     i++) {
			struct json_object *it = json_object_array_get_idx(items, i);

			if (it != NULL && json_object_is_type(it, json_type_object))
				nodes_decorate(it);
		}
		output_table(stdout, items, cols);
	}
	json_object_put(doc);
	return CLI_EXIT_OK;
}

/* "<base>/<name><suffix>" with the name escaped. */
static int
nodes_path(struct cli *cli, char *buf, size_t len, const char *base, const char *name,
    const char *suffix)
{
	char esc[1024];
	int n;

	if (cli_escape(cli, name, esc, sizeof(esc)) != 0)
		return -1;
	n = snprintf(buf, len, "%s/%s%s", base, esc, suffix);
	if (n < 0 || (size_t)n >= len) {
		cli_fail(cli, "the request path is too long");
		return -1;
	}
	return 0;
}

/* ---- clusters ---- */

static int
clusters_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	(void)cmd;
	return nodes_print_list(cli, "/v1/clusters", args, cluster_columns, false);
}

static int
clusters_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[NODES_PATH_MAX];
	int rc;

	(void)cmd;
	if (nodes_path(cli, path, sizeof(path), "/v1/clusters", args->pos[0], "") != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	return nodes_print_one(cli, &r, cluster_columns, false);
}

static int
clusters_create(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *region = cli_opt(args, "region");
	const char *description = cli_opt(args, "description");
	struct json_object *body;
	struct gp_client_response r;
	int rc;

	if (region == NULL)
		return cli_usage_error(cli, cmd, "--region is required");
	if (args->pos[0][0] == '\0')
		return cli_usage_error(cli, cmd, "the cluster name is empty");
	body = json_object_new_object();
	if (body == NULL)
		return cli_fail(cli, "out of memory");
	json_object_object_add(body, "name", json_object_new_string(args->pos[0]));
	json_object_object_add(body, "region", json_object_new_string(region));
	if (description != NULL)
		json_object_object_add(body, "description", json_object_new_string(description));
	rc = cli_call(cli, "POST", "/v1/clusters", body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	return nodes_print_one(cli, &r, cluster_columns, false);
}

/* ---- nodes ---- */

static bool
nodes_valid_status(const char *s)
{
	static const char *const all[] = { "ready", "cordoned", "draining", "down", "unknown" };

	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (strcmp(s, all[i]) == 0)
			return true;
	}
	return false;
}

/* A label option "key=value": key non-empty, no ',' (the list filter's separator). */
static int
nodes_check_label(struct cli *cli, const struct cli_command *cmd, const char *label)
{
	const char *eq = strchr(label, '=');

	if (eq == NULL || eq == label)
		return cli_usage_error(cli, cmd, "--label must be KEY=VALUE, not \"%s\"", label);
	if (strchr(label, ',') != NULL)
		return cli_usage_error(cli, cmd,
		    "--label \"%s\": a label has no ','; repeat --label "
		    "for several",
		    label);
	return 0;
}

static int
nodes_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *labels[NODES_MAX_LABELS];
	const char *status = cli_opt(args, "status");
	char path[NODES_PATH_MAX] = "/v1/nodes";
	char joined[NODES_PATH_MAX] = "";
	int nlabels = cli_opt_all(args, "label", labels, NODES_MAX_LABELS);
	size_t used = 0;

	if (status != NULL && !nodes_valid_status(status))
		return cli_usage_error(cli, cmd,
		    "--status must be ready, cordoned, draining, down "
		    "or unknown");
	for (int i = 0; i < nlabels; i++) {
		int n;

		if (nodes_check_label(cli, cmd, labels[i]) != 0)
			return CLI_EXIT_USAGE;
		n = snprintf(joined + used, sizeof(joined) - used, "%s%s", i ? "," : "", labels[i]);
		if (n < 0 || (size_t)n >= sizeof(joined) - used)
			return cli_usage_error(cli, cmd, "the --label filters are too long");
		used += (size_t)n;
	}
	if (cli_query_add(cli, path, sizeof(path), "cluster", cli_opt(args, "cluster")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "status", status) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "model", cli_opt(args, "model")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "label", nlabels > 0 ? joined : NULL) != 0)
		return CLI_EXIT_FAIL;
	return nodes_print_list(cli, path, args, node_columns, true);
}

static int
nodes_get(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[NODES_PATH_MAX];
	int rc;

	(void)cmd;
	if (nodes_path(cli, path, sizeof(path), "/v1/nodes", args->pos[0], "") != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	return nodes_print_one(cli, &r, node_columns, true);
}

static int
nodes_create(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *labels[NODES_MAX_LABELS];
	const char *cluster = cli_opt(args, "cluster"), *hostname = cli_opt(args, "hostname");
	const char *cpu = cli_opt(args, "cpu-millicores"), *mem = cli_opt(args, "memory-bytes");
	int nlabels = cli_opt_all(args, "label", labels, NODES_MAX_LABELS);
	struct json_object *body = NULL, *lab = NULL;
	struct gp_client_response r;
	long long cpu_v = 0, mem_v = 0;
	int rc;

	if (cluster == NULL)
		return cli_usage_error(cli, cmd, "--cluster is required");
	if (args->pos[0][0] == '\0')
		return cli_usage_error(cli, cmd, "the node name is empty");
	if (cpu != NULL &&
	    cli_parse_int64(cli, cmd, "cpu-millicores", cpu, 0, INT64_MAX, &cpu_v) != 0)
		return CLI_EXIT_USAGE;
	if (mem != NULL &&
	    cli_parse_int64(cli, cmd, "memory-bytes", mem, 0, INT64_MAX, &mem_v) != 0)
		return CLI_EXIT_USAGE;
	for (int i = 0; i < nlabels; i++) {
		if (nodes_check_label(cli, cmd, labels[i]) != 0)
			return CLI_EXIT_USAGE;
	}
	body = json_object_new_object();
	lab = json_object_new_object();
	if (body == NULL || lab == NULL) {
		json_object_put(lab);
		rc = cli_fail(cli, "out of memory");
		goto fail;
	}
	for (int i = 0; i < nlabels; i++) {
		const char *eq = strchr(labels[i], '=');
		char key[512];

		if ((size_t)(eq - labels[i]) >= sizeof(key)) {
			json_object_put(lab);
			rc = cli_usage_error(cli, cmd, "--label: the key is too long");
			goto fail;
		}
		memcpy(key, labels[i], (size_t)(eq - labels[i]));
		key[eq - labels[i]] = '\0';
		json_object_object_add(lab, key, json_object_new_string(eq + 1));
	}
	json_object_object_add(body, "name", json_object_new_string(args->pos[0]));
	json_object_object_add(body, "cluster", json_object_new_string(cluster));
	if (hostname != NULL)
		json_object_object_add(body, "hostname", json_object_new_string(hostname));
	if (cpu != NULL)
		json_object_object_add(body, "cpu_millicores", json_object_new_int64(cpu_v));
	if (mem != NULL)
		json_object_object_add(body, "memory_bytes", json_object_new_int64(mem_v));
	json_object_object_add(body, "labels", lab);
	rc = cli_call(cli, "POST", "/v1/nodes", body, &r);
	if (rc != CLI_EXIT_OK)
		goto fail;
	rc = nodes_print_one(cli, &r, node_columns, true);
fail:
	json_object_put(body);
	return rc;
}

/* POST /v1/nodes/NAME/<action> with an optional reason. */
static int
nodes_action(struct cli *cli, const struct cli_args *args, const char *action)
{
	const char *reason = cli_opt(args, "reason");
	struct json_object *body = NULL;
	struct gp_client_response r;
	char path[NODES_PATH_MAX], suffix[32];
	int rc;

	snprintf(suffix, sizeof(suffix), "/%s", action);
	if (nodes_path(cli, path, sizeof(path), "/v1/nodes", args->pos[0], suffix) != 0)
		return CLI_EXIT_FAIL;
	if (reason != NULL) {
		body = json_object_new_object();
		if (body == NULL)
			return cli_fail(cli, "out of memory");
		json_object_object_add(body, "reason", json_object_new_string(reason));
	}
	rc = cli_call(cli, "POST", path, body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	return nodes_print_one(cli, &r, node_columns, true);
}

static int
nodes_cordon(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	(void)cmd;
	return nodes_action(cli, args, "cordon");
}

static int
nodes_uncordon(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	(void)cmd;
	return nodes_action(cli, args, "uncordon");
}

static int
nodes_drain(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	(void)cmd;
	return nodes_action(cli, args, "drain");
}

static const struct cli_option list_options[] = {
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option cluster_create_options[] = {
	{ "region", "R", "where the cluster runs, e.g. eu-west-1 (required)", false },
	{ "description", "D", "free text", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option node_list_options[] = {
	{ "cluster", "C", "only nodes of this cluster", false },
	{ "status", "S", "only nodes in this status: ready, cordoned, draining, down, unknown",
	    false },
	{ "model", "M", "only nodes with GPUs of this catalog model (H100-80GB ...)", false },
	{ "label", "K=V", "only nodes carrying this label; all given must match", true },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option node_create_options[] = {
	{ "cluster", "C", "the cluster the node belongs to (required)", false },
	{ "hostname", "H", "its host name (default: the node name)", false },
	{ "cpu-millicores", "N", "allocatable CPU in millicores (64 cores: 64000)", false },
	{ "memory-bytes", "N", "allocatable memory in bytes", false },
	{ "label", "K=V", "a Kubernetes label", true },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option node_action_options[] = {
	{ "reason", "TEXT", "why, recorded as the node's status reason", false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_command clusters_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--limit N] [--cursor C]",
	    .summary = "list the clusters with their node and GPU counts",
	    .max_args = 0,
	    .options = list_options,
	    .run = clusters_list,
	},
	{
	    .name = "get",
	    .usage = "NAME",
	    .summary = "show one cluster",
	    .min_args = 1,
	    .max_args = 1,
	    .run = clusters_get,
	},
	{
	    .name = "create",
	    .usage = "NAME --region R [--description D]",
	    .summary = "register a Kubernetes cluster (operators)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = cluster_create_options,
	    .run = clusters_create,
	},
	{ .name = NULL },
};

static const struct cli_command nodes_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--cluster C] [--status S] [--model M] [--label K=V ...] [--limit N] "
		     "[--cursor C]",
	    .summary = "list GPU nodes, optionally filtered",
	    .max_args = 0,
	    .options = node_list_options,
	    .run = nodes_list,
	},
	{
	    .name = "get",
	    .usage = "NAME",
	    .summary = "show one node",
	    .min_args = 1,
	    .max_args = 1,
	    .run = nodes_get,
	},
	{
	    .name = "create",
	    .usage = "NAME --cluster C [--hostname H] [--cpu-millicores N] [--memory-bytes N] "
		     "[--label K=V ...]",
	    .summary = "register a GPU node; it starts ready (operators)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = node_create_options,
	    .run = nodes_create,
	},
	{
	    .name = "cordon",
	    .usage = "NAME [--reason TEXT]",
	    .summary = "take a node out of placement; what runs there stays",
	    .min_args = 1,
	    .max_args = 1,
	    .options = node_action_options,
	    .run = nodes_cordon,
	},
	{
	    .name = "uncordon",
	    .usage = "NAME [--reason TEXT]",
	    .summary = "make a cordoned or draining node ready for placement again",
	    .min_args = 1,
	    .max_args = 1,
	    .options = node_action_options,
	    .run = nodes_uncordon,
	},
	{
	    .name = "drain",
	    .usage = "NAME [--reason TEXT]",
	    .summary = "take a node out of placement and mark its work for moving off",
	    .min_args = 1,
	    .max_args = 1,
	    .options = node_action_options,
	    .run = nodes_drain,
	},
	{
	    .name = "enroll-token",
	    .usage = "CLUSTER [--expires-in SECONDS]",
	    .summary = "create a one-time token a node agent enrolls with (operators)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = cmd_agents_enroll_options,
	    .run = cmd_agents_enroll_create,
	},
	{ .name = NULL },
};

const struct cli_command cmd_nodes_commands[] = {
	{
	    .name = "clusters",
	    .summary = "list, show and register Kubernetes clusters",
	    .subcommands = clusters_subcommands,
	},
	{
	    .name = "nodes",
	    .summary = "list, show, register, cordon and drain GPU nodes",
	    .subcommands = nodes_subcommands,
	},
	{ .name = NULL },
};
