/*
 * main.c - gpupool-agent: flags, then the agent loop (agent.c) or a
 * one-shot read-only discovery (--discover). docs/agent.md lists the flags.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent.h"
#include "backend.h"
#include "core/log.h"
#include "hook.h"
#include "report.h"

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: gpupool-agent --server URL --enroll-token T --node-name NAME --state-dir DIR\n"
	    "         --backend fake|nvidia-smi|nvml [--fake-gpus FILE] [--listen HOST:PORT]\n"
	    "         [--poll-interval S] [--metrics-interval S]\n"
	    "       more: [--callback-url URL] [--heartbeat-interval S] [--status-interval S]\n"
	    "         [--profiles-interval S] [--metrics-interval-ms MS] [--dcgm-exporter URL]\n"
	    "         [--fake-faults FILE] [--max-buffered-samples N]\n"
	    "         [--nvml-lib PATH] [--nvidia-smi PATH] [--dry-run] [--log-level L]\n"
	    "         [--after-change-hook /ABS/PATH] [--after-change-hook-timeout S]\n"
	    "       gpupool-agent --discover --backend B [...]   read-only: print the GPUs\n"
	    "The node token is kept in DIR/token (mode 0600). The enrollment token may\n"
	    "also come from GPUPOOL_ENROLL_TOKEN or DIR/enroll-token.\n");
}

static int
int_arg(const char *name, const char *v, int lo, int hi)
{
	char *end;
	long n = strtol(v, &end, 10);
	if (*v == '\0' || *end != '\0' || n < lo || n > hi) {
		fprintf(stderr, "gpupool-agent: --%s wants an integer in [%d, %d]\n", name, lo, hi);
		exit(AGENT_EXIT_CONFIG);
	}
	return (int)n;
}

enum {
	O_SERVER = 1000,
	O_TOKEN,
	O_NODE,
	O_DIR,
	O_BACKEND,
	O_FAKE,
	O_LISTEN,
	O_POLL,
	O_METRICS,
	O_METRICS_MS,
	O_CALLBACK,
	O_HB,
	O_STATUS,
	O_PROF,
	O_DCGM,
	O_FAULTS,
	O_NVML,
	O_SMI,
	O_DRY,
	O_DISCOVER,
	O_LOG,
	O_BUF,
	O_HOOK,
	O_HOOK_TIMEOUT,
	O_HELP,
};
static const struct option opts[] = {
	{ "server", required_argument, NULL, O_SERVER },
	{ "enroll-token", required_argument, NULL, O_TOKEN },
	{ "node-name", required_argument, NULL, O_NODE },
	{ "state-dir", required_argument, NULL, O_DIR },
	{ "backend", required_argument, NULL, O_BACKEND },
	{ "fake-gpus", required_argument, NULL, O_FAKE },
	{ "listen", required_argument, NULL, O_LISTEN },
	{ "poll-interval", required_argument, NULL, O_POLL },
	{ "metrics-interval", required_argument, NULL, O_METRICS },
	{ "metrics-interval-ms", required_argument, NULL, O_METRICS_MS },
	{ "callback-url", required_argument, NULL, O_CALLBACK },
	{ "heartbeat-interval", required_argument, NULL, O_HB },
	{ "status-interval", required_argument, NULL, O_STATUS },
	{ "profiles-interval", required_argument, NULL, O_PROF },
	{ "dcgm-exporter", required_argument, NULL, O_DCGM },
	{ "fake-faults", required_argument, NULL, O_FAULTS },
	{ "nvml-lib", required_argument, NULL, O_NVML },
	{ "nvidia-smi", required_argument, NULL, O_SMI },
	{ "dry-run", no_argument, NULL, O_DRY },
	{ "discover", no_argument, NULL, O_DISCOVER },
	{ "log-level", required_argument, NULL, O_LOG },
	{ "max-buffered-samples", required_argument, NULL, O_BUF },
	{ "after-change-hook", required_argument, NULL, O_HOOK },
	{ "after-change-hook-timeout", required_argument, NULL, O_HOOK_TIMEOUT },
	{ "help", no_argument, NULL, O_HELP },
	{ NULL, 0, NULL, 0 },
};

/* Flags into cfg; -1 to go on, or the exit status (help, a bad flag). */
static int
parse_flags(int argc, char **argv, struct agent_config *cfg, bool *discover)
{
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_SERVER:
			cfg->server = optarg;
			break;
		case O_TOKEN:
			cfg->enroll_token = optarg;
			break;
		case O_NODE:
			cfg->node_name = optarg;
			break;
		case O_DIR:
			cfg->state_dir = optarg;
			break;
		case O_BACKEND:
			cfg->backend = optarg;
			break;
		case O_FAKE:
			cfg->fake_gpus = optarg;
			break;
		case O_LISTEN:
			cfg->listen = optarg;
			break;
		case O_POLL:
			cfg->poll_interval = int_arg("poll-interval", optarg, 1, 60);
			break;
		case O_METRICS:
			cfg->metrics_interval = int_arg("metrics-interval", optarg, 1, 3600);
			break;
		case O_METRICS_MS:
			cfg->metrics_interval_ms =
			    int_arg("metrics-interval-ms", optarg, 1, 3600000);
			break;
		case O_CALLBACK:
			cfg->callback_url = optarg;
			break;
		case O_HB:
			cfg->heartbeat_interval = int_arg("heartbeat-interval", optarg, 1, 3600);
			break;
		case O_STATUS:
			cfg->status_interval = int_arg("status-interval", optarg, 1, 86400);
			break;
		case O_PROF:
			cfg->profiles_interval = int_arg("profiles-interval", optarg, 1, 86400);
			break;
		case O_DCGM:
			cfg->dcgm_url = optarg;
			break;
		case O_FAULTS:
			cfg->fake_faults = optarg;
			break;
		case O_NVML:
			cfg->nvml_path = optarg;
			break;
		case O_SMI:
			cfg->smi_path = optarg;
			break;
		case O_DRY:
			cfg->dry_run = true;
			break;
		case O_DISCOVER:
			*discover = true;
			break;
		case O_LOG: {
			enum log_level lv;
			if (log_parse_level(optarg, &lv) != 0) {
				fprintf(stderr,
				    "gpupool-agent: --log-level debug|info|warn|error\n");
				return AGENT_EXIT_CONFIG;
			}
			log_set_level(lv);
			break;
		}
		case O_BUF:
			cfg->max_buffered_samples =
			    int_arg("max-buffered-samples", optarg, 100, 10000000);
			break;
		case O_HOOK:
			cfg->after_change_hook = optarg;
			break;
		case O_HOOK_TIMEOUT:
			cfg->after_change_hook_timeout =
			    int_arg("after-change-hook-timeout", optarg, 1, 3600);
			break;
		case O_HELP:
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return AGENT_EXIT_CONFIG;
		}
	}
	if (optind < argc || cfg->backend == NULL) {
		usage(stderr);
		return AGENT_EXIT_CONFIG;
	}
	return -1;
}

/* --discover: print what the backend sees, read-only; 1 when a GPU could not be read. */
static int
discover_run(const struct agent_config *cfg)
{
	struct ag_backend_config bc = {
		.node_name = cfg->node_name ? cfg->node_name : "node",
		.state_dir = cfg->state_dir ? cfg->state_dir : ".",
		.fake_gpus = cfg->fake_gpus,
		.fake_faults = cfg->fake_faults,
		.nvml_path = cfg->nvml_path,
		.smi_path = cfg->smi_path,
		.dry_run = true,
	};
	char err[256];
	struct ag_backend *b = ag_backend_open(cfg->backend, &bc, err, sizeof(err));
	if (b == NULL) {
		fprintf(stderr, "gpupool-agent: %s\n", err);
		return 1;
	}
	struct ag_node node;
	if (b->ops->discover(b, &node, err, sizeof(err)) != 0) {
		fprintf(stderr, "gpupool-agent: %s\n", err);
		ag_backend_close(b);
		return 1;
	}
	struct json_object *o = report_discovery(&node);
	printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY));
	json_object_put(o);
	ag_backend_close(b);
	/* a partial read is said so, and is not success */
	int partial = 0;
	for (int i = 0; i < node.ngpus; i++) {
		if (node.gpus[i].state == AG_GPU_OK)
			continue;
		fprintf(stderr, "gpupool-agent: warning: GPU %d (%s) is %s: %s\n",
		    node.gpus[i].index, node.gpus[i].uuid, report_gpu_state(node.gpus[i].state),
		    node.gpus[i].error);
		partial = 1;
	}
	return partial;
}

int
main(int argc, char **argv)
{
	struct agent_config cfg = {
		.poll_interval = 30,
		.metrics_interval = 15,
		.heartbeat_interval = 10,
		.status_interval = 300,
		.profiles_interval = 30,
		.max_buffered_samples = 20000,
		.after_change_hook_timeout = 60,
	};
	bool discover = false;
	int rc = parse_flags(argc, argv, &cfg, &discover);

	if (rc >= 0)
		return rc;
	if (cfg.after_change_hook != NULL) {
		char herr[4200];
		if (hook_check_path(cfg.after_change_hook, herr, sizeof(herr)) != 0) {
			fprintf(stderr, "gpupool-agent: --after-change-hook refused: %s\n", herr);
			return AGENT_EXIT_CONFIG;
		}
	}
	if (discover)
		return discover_run(&cfg);
	if (cfg.server == NULL || cfg.node_name == NULL || cfg.state_dir == NULL) {
		fprintf(stderr,
		    "gpupool-agent: --server, --node-name and --state-dir are required\n");
		usage(stderr);
		return AGENT_EXIT_CONFIG;
	}
	return agent_run(&cfg);
}
