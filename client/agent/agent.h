/*
 * agent.h - the gpupool-agent loop (docs/agent.md).
 *
 * Three threads: the poller long-polls GET /v1/agent/desired-state, the
 * push listener (push.c) takes signed documents from the server, and the
 * reporter sends heartbeats, status, metrics and profiles. Both the
 * poller and the listener hand documents to agent_submit(), which applies
 * a generation above the applied one under the agent's lock (every
 * backend call is made under it) and ignores the others.
 */
#ifndef GP_AGENT_AGENT_H
#define GP_AGENT_AGENT_H

#include <stdbool.h>

#define AGENT_VERSION "0.1.0"

/* Metrics batches (docs/agent.md, "Telemetry"): well under the server's
 * 1 MiB body limit for agent routes, and its 5,000 samples per batch. */
#define AGENT_METRICS_MAX_BATCH_BYTES 262144
#define AGENT_METRICS_MAX_BATCH_SAMPLES 5000

struct agent_config {
	const char *server;
	const char *enroll_token; /* NULL: DIR/enroll-token or GPUPOOL_ENROLL_TOKEN */
	const char *node_name;
	const char *state_dir;
	const char *backend;
	const char *listen;       /* push listener HOST:PORT, NULL: none */
	const char *callback_url; /* default: http://<listen> */
	const char *dcgm_url;     /* dcgm-exporter /metrics, NULL: none */
	int poll_interval;        /* long-poll wait, seconds (1..60) */
	int metrics_interval;     /* seconds */
	int metrics_interval_ms;  /* when > 0, instead of metrics_interval (simulations, tests) */
	int heartbeat_interval;   /* seconds */
	int status_interval;      /* full status at least this often, seconds */
	int profiles_interval;    /* seconds */
	int max_buffered_samples; /* metrics kept while the server is away */
	const char *fake_gpus;
	const char *fake_faults;
	const char *nvml_path;
	const char *smi_path;
	bool dry_run;
	const char *after_change_hook; /* absolute path of an executable, NULL: none */
	int after_change_hook_timeout; /* seconds; 0: 60 */
};

/* Exit codes of agent_run. */
#define AGENT_EXIT_OK 0
#define AGENT_EXIT_CONFIG 2
#define AGENT_EXIT_AUTH 3 /* enrollment refused / node token revoked, no new token */

/* Run until SIGTERM/SIGINT (or a fatal condition); returns the exit code. */
int agent_run(const struct agent_config *cfg);

#endif
