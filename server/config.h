/*
 * config.h - gpupoold settings from GPUPOOL_* variables and flags. Each
 * setting is one row of the table in config.c (variable, field, kind,
 * default, bounds, documentation).
 */
#ifndef GP_CONFIG_H
#define GP_CONFIG_H

#include <stdbool.h>
#include <stdio.h>

#include "http/server.h"

struct config {
	const char *database_url;         /* GPUPOOL_DATABASE_URL */
	char listen_host[64];             /* GPUPOOL_LISTEN host part */
	int listen_port;                  /* GPUPOOL_LISTEN port; 0 picks one */
	int threads;                      /* GPUPOOL_THREADS */
	int max_connections;              /* GPUPOOL_MAX_CONNECTIONS */
	int max_connections_per_ip;       /* GPUPOOL_MAX_CONNECTIONS_PER_IP */
	int connection_timeout_s;         /* GPUPOOL_CONNECTION_TIMEOUT */
	int header_timeout_s;             /* GPUPOOL_HEADER_TIMEOUT */
	int body_timeout_s;               /* GPUPOOL_BODY_TIMEOUT */
	char probe_host[64];              /* GPUPOOL_PROBE_LISTEN host part; "" when off */
	int probe_port;                   /* GPUPOOL_PROBE_LISTEN port */
	char agent_host[64];              /* GPUPOOL_AGENT_LISTEN host part; "" when off */
	int agent_port;                   /* GPUPOOL_AGENT_LISTEN port; 0 picks one */
	int agent_max_connections;        /* GPUPOOL_AGENT_MAX_CONNECTIONS */
	int agent_max_connections_per_ip; /* GPUPOOL_AGENT_MAX_CONNECTIONS_PER_IP */
	int agent_threads;                /* GPUPOOL_AGENT_THREADS: the agent listener's */
	int agent_connection_memory; /* GPUPOOL_AGENT_CONNECTION_MEMORY: bytes per connection */
	int statement_timeout_ms;    /* GPUPOOL_STATEMENT_TIMEOUT_MS */
	int session_ttl_s;           /* GPUPOOL_SESSION_TTL */
	int shutdown_grace_s;        /* GPUPOOL_SHUTDOWN_GRACE */
	int idempotency_ttl_s;       /* GPUPOOL_IDEMPOTENCY_TTL */
	int maintenance_interval_s;  /* GPUPOOL_MAINTENANCE_INTERVAL */
	int request_ttl_s;           /* GPUPOOL_REQUEST_TTL: pending pool requests expire */
	int expiry_interval_s;       /* GPUPOOL_EXPIRY_INTERVAL: the expiry worker's period */
	int defrag_apply_interval_s; /* GPUPOOL_DEFRAG_APPLY_INTERVAL: the apply worker's period */
	int defrag_plan_ttl_s;       /* GPUPOOL_DEFRAG_PLAN_TTL: a plan applies this long */
	int defrag_move_timeout_s;   /* GPUPOOL_DEFRAG_MOVE_TIMEOUT: a move waits this long */
	int approval_workers;        /* GPUPOOL_APPROVAL_WORKERS: group-commit threads */
	int agent_grace_s;           /* GPUPOOL_AGENT_GRACE: silent agent -> node unknown */
	int push_timeout_ms;         /* GPUPOOL_PUSH_TIMEOUT_MS: one push to an agent */
	int push_max_attempts;       /* GPUPOOL_PUSH_MAX_ATTEMPTS: then give up (alert) */
	int push_backoff_ms;         /* GPUPOOL_PUSH_BACKOFF_MS: first retry delay */
	int metrics_retention_days;  /* GPUPOOL_METRICS_RETENTION_DAYS: raw GPU samples */
	int cursor_key_overlap_s;    /* GPUPOOL_CURSOR_KEY_OVERLAP: a rotated key's cursors */
	int telemetry_interval_s;    /* GPUPOOL_TELEMETRY_INTERVAL: partitions, roll-ups, idle */
	int outbox_retention_days;   /* GPUPOOL_OUTBOX_RETENTION_DAYS: delivered rows (0: kept) */
	int alerts_retention_days;   /* GPUPOOL_ALERTS_RETENTION_DAYS: resolved alerts (0: kept) */
	int profiles_retention_days; /* GPUPOOL_PROFILES_RETENTION_DAYS: ended profiles (0: kept) */
	const char *agent_callback_allow; /* GPUPOOL_AGENT_CALLBACK_ALLOW: CIDRs / hosts, or NULL */
	int idle_after_s;      /* GPUPOOL_IDLE_AFTER: no workload this long -> idle alert */
	double idle_threshold; /* GPUPOOL_IDLE_THRESHOLD: sm_active below it is idle */
	int billing_accrual_interval_s; /* GPUPOOL_BILLING_ACCRUAL_INTERVAL: the accrual worker's period */
	int billing_settle_s; /* GPUPOOL_BILLING_SETTLE: an hour is final this long after it ends */
	int billing_close_grace_s; /* GPUPOOL_BILLING_CLOSE_GRACE: a month closes this long after it ends */
	int billing_test_hold_ms; /* GPUPOOL_TEST_ACCRUAL_HOLD_MS (debug builds): accrual holds its tx */
	int billing_export_interval_ms; /* GPUPOOL_BILLING_EXPORT_INTERVAL_MS: export worker polls */
	int billing_export_lease_s; /* GPUPOOL_BILLING_EXPORT_LEASE: a dead worker's job is retaken */
	int billing_export_test_delay_ms; /* GPUPOOL_TEST_EXPORT_PAGE_DELAY_MS (debug builds) */
	int agent_test_poll_gap_ms; /* GPUPOOL_TEST_POLL_GAP_MS (debug builds): read-to-wait gap */
	const char *cors_origins;   /* GPUPOOL_CORS_ORIGINS: browser origins allowed, or NULL */
	const char *metrics_token;  /* GPUPOOL_METRICS_TOKEN: bearer for /metrics, or NULL */
	struct http_cidr trusted[HTTP_MAX_TRUSTED]; /* GPUPOOL_TRUSTED_PROXIES */
	int ntrusted;
	bool access_log;       /* GPUPOOL_ACCESS_LOG */
	const char *log_level; /* GPUPOOL_LOG_LEVEL */
};

/* Defaults overridden by the environment; -1 with a message on bad values. */
int config_load(struct config *cfg, char *errbuf, int errlen);

/* Parse "host:port" into cfg; -1 on malformed input. */
int config_parse_listen(struct config *cfg, const char *s);

/*
 * The settings table of README.md (which "readme") or docs/operations.md
 * ("operations") as Markdown; -1 for another name. The documents hold
 * exactly this text (test_settings_docs; scripts/settings-docs writes it).
 */
int config_markdown(FILE *out, const char *which);

/* The names of the documented variables, comma-separated, for usage texts. */
void config_names(FILE *out);

#endif
