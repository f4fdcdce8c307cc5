/*
 * cmd_agents.c - node agents from the operator's side: one-time
 * enrollment tokens, revoking a node's agent token, a node's layout as a
 * mig-parted config; alerts and workload profiles; a GPU's metric series.
 */
#include "cmd_agents.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"

#define AGENTS_PATH_MAX 2048

static const struct output_column enroll_columns[] = {
	{ "ID", "id" },
	{ "CLUSTER", "cluster" },
	{ "PREFIX", "prefix" },
	{ "STATE", "state" },
	{ "NODE", "node" },
	{ "EXPIRES", "expires_at" },
	OUTPUT_WIDE,
	{ "FOR NODE", "node_name" },
	{ "ADOPT MANUAL", "adopt_manual" },
	{ "CREATED", "created_at" },
	{ "USED", "used_at" },
	{ "REVOKED", "revoked_at" },
	{ NULL, NULL },
};

static const struct output_column alert_columns[] = {
	{ "ID", "id" },
	{ "TYPE", "type" },
	{ "SEVERITY", "severity" },
	{ "STATE", "state" },
	{ "NODE", "node" },
	{ "POOL", "pool" },
	{ "PROJECT", "project" },
	{ "SEEN", "occurrences" },
	{ "RAISED", "raised_at" },
	{ "ACK", "acknowledged_by" },
	{ "MESSAGE", "message" },
	OUTPUT_WIDE,
	{ "GPU", "gpu" },
	{ "LAST SEEN", "last_seen_at" },
	{ "RESOLVED", "resolved_at" },
	{ "ACKED", "acknowledged_at" },
	{ NULL, NULL },
};

static const struct output_column profile_columns[] = {
	{ "NODE", "node" },
	{ "DEVICE", "device_uuid" },
	{ "PROFILE", "profile" },
	{ "POOL", "pool" },
	{ "PROJECT", "project" },
	{ "NAMESPACE", "namespace" },
	{ "POD", "pod" },
	{ "CONTAINER", "container" },
	{ "FIRST SEEN", "first_seen_at" },
	{ "ENDED", "ended_at" },
	{ NULL, NULL },
};

/* prefix + escaped a + suffix (+ escaped b when given) into buf. */
static int
agents_path(struct cli *cli, char *buf, size_t len, const char *prefix, const char *a,
    const char *suffix, const char *b)
{
	char ea[512], eb[512] = "";
	int n;

	if (cli_escape(cli, a, ea, sizeof(ea)) != 0 ||
	    (b != NULL && cli_escape(cli, b, eb, sizeof(eb)) != 0))
		return -1;
	n = snprintf(buf, len, "%s%s%s%s", prefix, ea, suffix, eb);
	if (n < 0 || (size_t)n >= len) {
		cli_fail(cli, "the request path is too long");
		return -1;
	}
	return 0;
}

static int
print_list(struct cli *cli, const char *path, const struct cli_args *args,
    const struct output_column *cols)
{
	struct json_object *doc;
	int rc = cli_list(cli, path, args, &doc);

	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, doc);
	else
		output_table(stdout, gp_client_json_get(doc, "items"), cols);
	json_object_put(doc);
	return CLI_EXIT_OK;
}

static int
print_one(struct cli *cli, struct gp_client_response *r, const struct output_column *cols)
{
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r->json);
	else
		output_row(stdout, r->json, cols);
	gp_client_response_free(r);
	return CLI_EXIT_OK;
}

/* ---- agents ---- */

int
cmd_agents_enroll_create(struct cli *cli, const struct cli_command *cmd,
    const struct cli_args *args)
{
	const char *exp = cli_opt(args, "expires-in");
	struct json_object *body = json_object_new_object();
	struct gp_client_response r;
	char path[AGENTS_PATH_MAX];
	long long secs = 3600;
	int rc;

	if (exp != NULL && cli_parse_int64(cli, cmd, "expires-in", exp, 60, 604800, &secs) != 0) {
		json_object_put(body);
		return CLI_EXIT_USAGE;
	}
	if (agents_path(cli, path, sizeof(path), "/v1/clusters/", args->pos[0],
		"/enrollment-tokens", NULL) != 0) {
		json_object_put(body);
		return CLI_EXIT_FAIL;
	}
	json_object_object_add(body, "expires_in_seconds", json_object_new_int64(secs));
	if (cli_opt(args, "node") != NULL)
		json_object_object_add(body, "node_name",
		    json_object_new_string(cli_opt(args, "node")));
	if (cli_opt(args, "adopt-manual") != NULL) {
		if (cli_opt(args, "node") == NULL) {
			json_object_put(body);
			return cli_usage_error(cli, cmd, "--adopt-manual needs --node NAME");
		}
		json_object_object_add(body, "adopt_manual", json_object_new_boolean(1));
	}
	rc = cli_call(cli, "POST", path, body, &r);
	json_object_put(body);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		struct json_object *tok = gp_client_json_get(r.json, "token");

		printf("%s\n", tok ? json_object_get_string(tok) : "");
		fprintf(stderr,
		    "one-time enrollment token for cluster %s, expires %s; it is shown only now:\n"
		    "  gpupool-agent --server URL --node-name NAME --enroll-token <token> ...\n",
		    args->pos[0],
		    gp_client_json_get(r.json, "expires_at")
			? json_object_get_string(gp_client_json_get(r.json, "expires_at"))
			: "?");
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

/* The list is not paged (a cluster holds few tokens): one GET, no limit or cursor. */
static int
enroll_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[AGENTS_PATH_MAX];
	struct gp_client_response r;
	int rc;

	(void)cmd;
	if (agents_path(cli, path, sizeof(path), "/v1/clusters/", args->pos[0],
		"/enrollment-tokens", NULL) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON)
		output_json(stdout, r.json);
	else
		output_table(stdout, gp_client_json_get(r.json, "items"), enroll_columns);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

static int
enroll_revoke(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[AGENTS_PATH_MAX];
	long long id;
	int rc;

	if (cli_parse_int64(cli, cmd, "ID", args->pos[1], 1, INT64_MAX, &id) != 0)
		return CLI_EXIT_USAGE;
	if (agents_path(cli, path, sizeof(path), "/v1/clusters/", args->pos[0],
		"/enrollment-tokens/", args->pos[1]) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "DELETE", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	gp_client_response_free(&r);
	fprintf(stderr, "enrollment token %lld revoked\n", id);
	return CLI_EXIT_OK;
}

static int
token_revoke(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[AGENTS_PATH_MAX];
	int rc;

	(void)cmd;
	if (agents_path(cli, path, sizeof(path), "/v1/nodes/", args->pos[0], "/agent-token/revoke",
		NULL) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "POST", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	gp_client_response_free(&r);
	fprintf(stderr, "the agent token of node %s is revoked; the agent must enroll again\n",
	    args->pos[0]);
	return CLI_EXIT_OK;
}

static int
mig_config(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[AGENTS_PATH_MAX];
	int rc;

	(void)cmd;
	if (agents_path(cli, path, sizeof(path), "/v1/nodes/", args->pos[0], "/mig-config", NULL) !=
	    0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	fwrite(r.body, 1, r.body_len, stdout);
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

/* ---- alerts, profiles, metrics ---- */

static int
alerts_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[AGENTS_PATH_MAX] = "/v1/alerts";

	(void)cmd;
	if (cli_query_add(cli, path, sizeof(path), "type", cli_opt(args, "type")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "state", cli_opt(args, "state")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "project", cli_opt(args, "project")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "node", cli_opt(args, "node")) != 0)
		return CLI_EXIT_FAIL;
	return print_list(cli, path, args, alert_columns);
}

static int
alerts_ack(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	struct gp_client_response r;
	char path[AGENTS_PATH_MAX];
	long long id;
	int rc;

	if (cli_parse_int64(cli, cmd, "ID", args->pos[0], 1, INT64_MAX, &id) != 0)
		return CLI_EXIT_USAGE;
	snprintf(path, sizeof(path), "/v1/alerts/%lld/ack", id);
	rc = cli_call(cli, "POST", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	return print_one(cli, &r, alert_columns);
}

static int
profiles_list(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	char path[AGENTS_PATH_MAX] = "/v1/profiles";

	(void)cmd;
	if (cli_query_add(cli, path, sizeof(path), "project", cli_opt(args, "project")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "node", cli_opt(args, "node")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "pool", cli_opt(args, "pool")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "current",
		cli_opt(args, "all") != NULL ? "false" : NULL) != 0)
		return CLI_EXIT_FAIL;
	return print_list(cli, path, args, profile_columns);
}

int
cmd_agents_gpu_metrics(struct cli *cli, const struct cli_command *cmd, const struct cli_args *args)
{
	static const struct output_column cols[] = {
		{ "TIME", "ts" },
		{ "POWER_W", "power_w" },
		{ "SM_ACTIVE", "sm_active" },
		{ "MEM_USED_MIB", "memory_used_mib" },
		{ "TEMP_C", "temperature_c" },
		{ "ECC_UNCORR", "ecc_uncorrected" },
		{ NULL, NULL },
	};
	struct gp_client_response r;
	char path[AGENTS_PATH_MAX];
	struct json_object *series;
	int rc;

	(void)cmd;
	if (agents_path(cli, path, sizeof(path), "/v1/gpus/", args->pos[0], "/metrics", NULL) !=
		0 ||
	    cli_query_add(cli, path, sizeof(path), "from", cli_opt(args, "from")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "to", cli_opt(args, "to")) != 0 ||
	    cli_query_add(cli, path, sizeof(path), "step", cli_opt(args, "step")) != 0)
		return CLI_EXIT_FAIL;
	rc = cli_call(cli, "GET", path, NULL, &r);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli->output == CLI_OUTPUT_JSON) {
		output_json(stdout, r.json);
	} else {
		series = gp_client_json_get(r.json, "series");
		for (size_t i = 0; series != NULL && i < json_object_array_length(series); i++) {
			struct json_object *s = json_object_array_get_idx(series, i);

			printf("%sdevice %s\n", i ? "\n" : "",
			    json_object_get_string(gp_client_json_get(s, "device_uuid")));
			output_table(stdout, gp_client_json_get(s, "points"), cols);
		}
	}
	gp_client_response_free(&r);
	return CLI_EXIT_OK;
}

const struct cli_option cmd_agents_enroll_options[] = {
	{ "expires-in", "SECONDS", "lifetime of the token, 60 to 604800 (default 3600)", false },
	{ "node", "NAME", "the token enrolls only this node name", false },
	{ "adopt-manual", NULL, "it may adopt the node --node although it was registered by hand",
	    false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_option alert_list_options[] = {
	{ "type", "T",
	    "only this type: gpu_failed, gpu_degraded, xid_unknown, node_unknown, drift, "
	    "pool_degraded, push_failed, isolation_violation, idle",
	    false },
	{ "state", "S", "open (default), resolved or all", false },
	{ "project", "P", "only alerts of this project", false },
	{ "node", "N", "only alerts of this node", false },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

static const struct cli_option profile_list_options[] = {
	{ "project", "P", "only workloads on this project's pools", false },
	{ "node", "N", "only this node's", false },
	{ "pool", "POOL", "only this pool's", false },
	{ "all", NULL, "include workloads that ended", false },
	CLI_LIST_OPTIONS,
	{ NULL, NULL, NULL, false },
};

const struct cli_option cmd_agents_metrics_options[] = {
	{ "from", "TIME", "start, RFC 3339 (default an hour before --to)", false },
	{ "to", "TIME", "end, RFC 3339 (default now)", false },
	{ "step", "S", "raw (default) or seconds per point; multiples of 3600 read hourly roll-ups",
	    false },
	{ NULL, NULL, NULL, false },
};

static const struct cli_command agents_subcommands[] = {
	{
	    .name = "enroll-token",
	    .usage = "CLUSTER [--expires-in SECONDS] [--node NAME [--adopt-manual]]",
	    .summary = "create a one-time token a node agent enrolls with (operators)",
	    .min_args = 1,
	    .max_args = 1,
	    .options = cmd_agents_enroll_options,
	    .run = cmd_agents_enroll_create,
	},
	{
	    .name = "enroll-tokens",
	    .usage = "CLUSTER",
	    .summary = "list a cluster's enrollment tokens (no secrets)",
	    .min_args = 1,
	    .max_args = 1,
	    .run = enroll_list,
	},
	{
	    .name = "revoke-enroll-token",
	    .usage = "CLUSTER ID",
	    .summary = "revoke an unused enrollment token",
	    .min_args = 2,
	    .max_args = 2,
	    .run = enroll_revoke,
	},
	{
	    .name = "revoke-token",
	    .usage = "NODE",
	    .summary = "revoke a node agent's token; it must enroll again",
	    .min_args = 1,
	    .max_args = 1,
	    .run = token_revoke,
	},
	{
	    .name = "mig-config",
	    .usage = "NODE",
	    .summary = "print the node's placed instances as a mig-parted v1 config",
	    .min_args = 1,
	    .max_args = 1,
	    .run = mig_config,
	},
	{ .name = NULL },
};

static const struct cli_command alerts_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--type T] [--state S] [--project P] [--node N] [--limit N] [--cursor C]",
	    .summary = "list alerts, newest first",
	    .max_args = 0,
	    .options = alert_list_options,
	    .run = alerts_list,
	},
	{
	    .name = "ack",
	    .usage = "ID",
	    .summary = "acknowledge an alert",
	    .min_args = 1,
	    .max_args = 1,
	    .run = alerts_ack,
	},
	{ .name = NULL },
};

static const struct cli_command profiles_subcommands[] = {
	{
	    .name = "list",
	    .usage = "[--project P] [--node N] [--pool POOL] [--all] [--limit N] [--cursor C]",
	    .summary = "which pods use which allocation",
	    .max_args = 0,
	    .options = profile_list_options,
	    .run = profiles_list,
	},
	{ .name = NULL },
};

const struct cli_command cmd_agents_commands[] = {
	{
	    .name = "agents",
	    .summary = "enroll node agents and manage their tokens",
	    .subcommands = agents_subcommands,
	},
	{
	    .name = "alerts",
	    .summary = "list and acknowledge alerts",
	    .subcommands = alerts_subcommands,
	},
	{
	    .name = "profiles",
	    .summary = "list the workloads seen on GPU devices",
	    .subcommands = profiles_subcommands,
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
