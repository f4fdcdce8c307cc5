/*
 * cmd_nodes.c - the physical side, part one: clusters (list, get,
 * create, update, delete) over /v1/clusters and GPU nodes (list with
 * filters, get, create, update, cordon, uncordon, drain) over /v1/nodes.
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
	OUTPUT_WIDE,
	{ "GENERATION", "generation" },
	{ "UPDATED", "updated_at" },
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
	OUTPUT_WIDE,
	{ "REASON", "status_reason" },
	{ "PLACEABLE", "placeable" },
	{ "MODELS", "gpu_models" },
	{ "GENERATION", "generation" },
	{ "OBSERVED", "observed_generation" },
	{ "CREATED", "created_at" },
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

/* What the cluster must hold (docs/kubernetes.md): a List, JSON or -o yaml. */
static int
clusters_kubernetes(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[NODES_PATH_MAX];
	int rc;

	(void)cmd;
	if (nodes_path(cli, path, sizeof(path), "/v1/clusters", args->pos[0], "/kubernetes") != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	output_json(stdout, r.json);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
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

/*
 * Read the object at path when there is no tag yet (or need_current),
 * keeping the answer in cur and its ETag in tag: the change that
 * follows goes out under that ETag (If-Match).
 */
static int
nodes_read_tag(struct cli *cli, const char *path, bool need_current, char *tag, size_t len,
    struct gp_client_response *cur)
{
	int rc;

	memset(cur, 0, sizeof(*cur));
	if (tag[0] != '\0' && !need_current)
		return CLI_EXIT_OK;
	rc = cli_call(cli, "GET", path, NULL, cur);
	if (rc == CLI_EXIT_OK && tag[0] == '\0')
		snprintf(tag, len, "%s", cur->etag);
	return rc;
}

static int
clusters_update(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *region = cli_opt(args, "region");
	const char *description = cli_opt(args, "description");
	struct json_object *body;
	struct gp_client_response cur, r;
	char path[NODES_PATH_MAX], tag[160];
	int rc;

	if (region == NULL && description == NULL)
		return cli_usage_error(cli, cmd,
		    "nothing to change: give --region or --description");
	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0)
		return CLI_EXIT_USAGE;
	if (nodes_path(cli, path, sizeof(path), "/v1/clusters", args->pos[0], "") != 0)
		return CLI_EXIT_FAIL;
	rc = nodes_read_tag(cli, path, false, tag, sizeof(tag), &cur);
	gp_client_response_free(&cur);
	if (rc != CLI_EXIT_OK)
		return rc;
	body = json_object_new_object();
	if (body == NULL)
		return cli_fail(cli, "out of memory");
	if (region != NULL)
		json_object_object_add(body, "region", json_object_new_string(region));
	if (description != NULL)
		json_object_object_add(body, "description", json_object_new_string(description));
	rc = cli_call_if_match(cli, "PATCH", path, body, tag[0] ? tag : NULL, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	return nodes_print_one(cli, &r, cluster_columns, false);
}

static int
clusters_delete(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[NODES_PATH_MAX], tag[160];
	int rc;

	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0)
		return CLI_EXIT_USAGE;
	if (nodes_path(cli, path, sizeof(path), "/v1/clusters", args->pos[0], "") != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call_if_match(cli, "DELETE", path, NULL, tag[0] ? tag : NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	gp_client_response_free(&r);
	if (cli->output == CLI_OUTPUT_TABLE)
		printf("cluster %s deleted\n", args->pos[0]);
	return CLI_EXIT_OK;
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

/*
 * PATCH /v1/nodes/NAME. The node is read first (its labels are what
 * --label and --remove-label change, kubectl label's way) and the change
 * goes out under its ETag, so a change made in between is refused (412)
 * instead of being lost. --if-match gives the ETag instead.
 */
static int
nodes_update(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	const char *set[NODES_MAX_LABELS], *del[NODES_MAX_LABELS];
	const char *hostname = cli_opt(args, "hostname");
	const char *cpu = cli_opt(args, "cpu-millicores"), *mem = cli_opt(args, "memory-bytes");
	int nset = cli_opt_all(args, "label", set, NODES_MAX_LABELS);
	int ndel = cli_opt_all(args, "remove-label", del, NODES_MAX_LABELS);
	struct json_object *body = NULL, *lab = NULL, *curlab;
	struct gp_client_response cur, r;
	char path[NODES_PATH_MAX], tag[160];
	long long cpu_v = 0, mem_v = 0;
	int rc;

	memset(&cur, 0, sizeof(cur));
	if (hostname == NULL && cpu == NULL && mem == NULL && nset == 0 && ndel == 0)
		return cli_usage_error(cli, cmd,
		    "nothing to change: give --hostname, --cpu-millicores, --memory-bytes, "
		    "--label or --remove-label");
	if (cpu != NULL &&
	    cli_parse_int64(cli, cmd, "cpu-millicores", cpu, 0, INT64_MAX, &cpu_v) != 0)
		return CLI_EXIT_USAGE;
	if (mem != NULL &&
	    cli_parse_int64(cli, cmd, "memory-bytes", mem, 0, INT64_MAX, &mem_v) != 0)
		return CLI_EXIT_USAGE;
	for (int i = 0; i < nset; i++) {
		if (nodes_check_label(cli, cmd, set[i]) != 0)
			return CLI_EXIT_USAGE;
	}
	for (int i = 0; i < ndel; i++) {
		if (del[i][0] == '\0' || strchr(del[i], '=') != NULL)
			return cli_usage_error(cli, cmd, "--remove-label takes a KEY, not \"%s\"",
			    del[i]);
	}
	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0)
		return CLI_EXIT_USAGE;
	if (nodes_path(cli, path, sizeof(path), "/v1/nodes", args->pos[0], "") != 0)
		return CLI_EXIT_FAIL;
	rc = nodes_read_tag(cli, path, nset > 0 || ndel > 0, tag, sizeof(tag), &cur);
	if (rc != CLI_EXIT_OK)
		return rc;
	body = json_object_new_object();
	if (body == NULL) {
		rc = cli_fail(cli, "out of memory");
		goto done;
	}
	if (nset > 0 || ndel > 0) {
		lab = json_object_new_object();
		curlab = gp_client_json_get(cur.json, "labels");
		if (lab == NULL) {
			rc = cli_fail(cli, "out of memory");
			goto done;
		}
		json_object_object_add(body, "labels", lab);
		if (curlab != NULL && json_object_is_type(curlab, json_type_object)) {
			json_object_object_foreach(curlab, k, v)
			{
				json_object_object_add(lab, k, json_object_get(v));
			}
		}
		for (int i = 0; i < ndel; i++) {
			if (json_object_object_get_ex(lab, del[i], NULL) == 0) {
				rc = cli_usage_error(cli, cmd,
				    "--remove-label %s: node %s has no such label", del[i],
				    args->pos[0]);
				goto done;
			}
			json_object_object_del(lab, del[i]);
		}
		for (int i = 0; i < nset; i++) {
			const char *eq = strchr(set[i], '=');
			char key[512];

			if ((size_t)(eq - set[i]) >= sizeof(key)) {
				rc = cli_usage_error(cli, cmd, "--label: the key is too long");
				goto done;
			}
			memcpy(key, set[i], (size_t)(eq - set[i]));
			key[eq - set[i]] = '\0';
			json_object_object_add(lab, key, json_object_new_string(eq + 1));
		}
	}
	if (hostname != NULL)
		json_object_object_add(body, "hostname", json_object_new_string(hostname));
	if (cpu != NULL)
		json_object_object_add(body, "cpu_millicores", json_object_new_int64(cpu_v));
	if (mem != NULL)
		json_object_object_add(body, "memory_bytes", json_object_new_int64(mem_v));
	rc = cli_call_if_match(cli, "PATCH", path, body, tag[0] ? tag : NULL, &r);
	if (rc == CLI_EXIT_OK)
		rc = nodes_print_one(cli, &r, node_columns, true);
done:
	gp_client_response_free(&cur);
	json_object_put(body);
	return rc;
}

/* POST /v1/nodes/NAME/<action> with an optional reason. */
static int
nodes_action(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args,
    const char *action)
{
	const char *reason = cli_opt(args, "reason");
	struct json_object *body = NULL;
	struct gp_client_response r;
	char path[NODES_PATH_MAX], suffix[32], tag[160];
	int rc;

	if (cli_if_match_opt(cli, cmd, args, tag, sizeof(tag)) != 0)
		return CLI_EXIT_USAGE;
	snprintf(suffix, sizeof(suffix), "/%s", action);
	if (nodes_path(cli, path, sizeof(path), "/v1/nodes", args->pos[0], suffix) != 0)
		return CLI_EXIT_FAIL;
	if (reason != NULL) {
		body = json_object_new_object();
		if (body == NULL)
			return cli_fail(cli, "out of memory");
		json_object_object_add(body, "reason", json_object_new_string(reason));
	}
	rc = cli_call_if_match(cli, "POST", path, body, tag[0] ? tag : NULL, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	return nodes_print_one(cli, &r, node_columns, true);
}

static int
nodes_cordon(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	return nodes_action(cli, cmd, args, "cordon");
}

static int
nodes_uncordon(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	return nodes_action(cli, cmd, args, "uncordon");
}

static int
nodes_drain(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	return nodes_action(cli, cmd, args, "drain");
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

static const struct cli_option cluster_update_options[] = {
	{ "region", "R", "the new region", false },
	{ "description", "D", "the new description", false },
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option if_match_options[] = {
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option node_update_options[] = {
	{ "hostname", "H", "the new host name", false },
	{ "cpu-millicores", "N", "allocatable CPU in millicores (64 cores: 64000)", false },
	{ "memory-bytes", "N", "allocatable memory in bytes", false },
	{ "label", "K=V", "set a label (other labels stay)", true },
	{ "remove-label", "K", "remove a label", true },
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option node_action_options[] = {
	{ "reason", "TEXT", "why, recorded as the node's status reason", false },
	CLI_IF_MATCH_OPTION,
	{ NULL, NULL, NULL, false },
};

static const struct cli_command clusters_subcommands[] = {
	{
	    .name = "kubernetes",
	    .usage = "NAME",
	    .summary = "the Kubernetes objects the cluster must hold (a List; -o yaml for kubectl)",
	    .min_args = 1,
	    .max_args = 1,
	    .run = clusters_kubernetes,
	},
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
	    .summary = "get one cluster",
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
	{
	    .name = "update",
	    .usage = "NAME [--region R] [--description D] [--if-match ETAG]",
	    .summary = "change a cluster's region or description (operators)",
	    .help = "Change a cluster; only what is given changes. The cluster is read first\n"
		    "and the change is sent under its ETag (If-Match), so a change made in\n"
		    "between is refused with 412; --if-match ETAG uses ETAG instead.",
	    .min_args = 1,
	    .max_args = 1,
	    .options = cluster_update_options,
	    .run = clusters_update,
	},
	{
	    .name = "delete",
	    .usage = "NAME [--if-match ETAG]",
	    .summary = "delete a cluster without nodes (operators)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = if_match_options,
	    .run = clusters_delete,
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
	    .summary = "get one node",
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
	    .name = "update",
	    .usage =
		"NAME [--hostname H] [--cpu-millicores N] [--memory-bytes N] [--label K=V ...] "
		"[--remove-label K ...] [--if-match ETAG]",
	    .summary =
		"change a node's host name, allocatable CPU and memory, or labels (operators)",
	    .help = "Change a node; only what is given changes. --label sets a label and\n"
		    "--remove-label removes one, keeping the others (kubectl label's way).\n"
		    "The node is read first and the change is sent under its ETag\n"
		    "(If-Match), so a change made in between is refused with 412 instead of\n"
		    "being lost; --if-match ETAG uses ETAG instead. The status changes with\n"
		    "cordon, uncordon and drain.",
	    .min_args = 1,
	    .max_args = 1,
	    .options = node_update_options,
	    .run = nodes_update,
	},
	{
	    .name = "cordon",
	    .usage = "NAME [--reason TEXT] [--if-match ETAG]",
	    .summary = "take a node out of placement; what runs there stays",
	    .min_args = 1,
	    .max_args = 1,
	    .options = node_action_options,
	    .run = nodes_cordon,
	},
	{
	    .name = "uncordon",
	    .usage = "NAME [--reason TEXT] [--if-match ETAG]",
	    .summary = "make a cordoned or draining node ready for placement again",
	    .min_args = 1,
	    .max_args = 1,
	    .options = node_action_options,
	    .run = nodes_uncordon,
	},
	{
	    .name = "drain",
	    .usage = "NAME [--reason TEXT] [--if-match ETAG]",
	    .summary = "take a node out of placement and mark its work for moving off",
	    .min_args = 1,
	    .max_args = 1,
	    .options = node_action_options,
	    .run = nodes_drain,
	},
	{
	    .name = "enroll-token",
	    .usage = "CLUSTER [--expires-in SECONDS] [--node NAME [--adopt-manual]]",
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
	    .summary = "list, get, create, update and delete Kubernetes clusters",
	    .subcommands = clusters_subcommands,
	},
	{
	    .name = "nodes",
	    .summary = "list, get, create, update, cordon and drain GPU nodes",
	    .subcommands = nodes_subcommands,
	},
	{ .name = NULL },
};
