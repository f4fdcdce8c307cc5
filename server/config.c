/*
 * config.c - gpupoold's settings: one table (settings[] below) gives each
 * GPUPOOL_* variable its field, kind, default, bounds and documentation.
 * config_load reads the environment through it; config_markdown prints
 * the settings tables of README.md and docs/operations.md from it
 * (`gpupoold config --markdown readme|operations`; test_settings_docs
 * fails when the documents differ from what it prints).
 */
#include "config.h"

#include "domain/callback.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum setting_kind {
	SET_INT,      /* int, from min to max */
	SET_FRACTION, /* double, from 0 to 1 */
	SET_STRING,   /* const char *, any non-empty value */
	SET_CHECKED,  /* const char *, a non-empty value valid() accepts */
	SET_HOSTPORT, /* char host[64] at offset, int port right after it */
	SET_CIDRS,    /* struct http_cidr trusted[], int ntrusted */
	SET_SWITCH,   /* bool, on unless the value is 0, false or off */
};

struct setting {
	const char *env;
	enum setting_kind kind;
	size_t offset;                /* of the field in struct config */
	int def, min, max;            /* SET_INT; SET_SWITCH: def */
	int (*def_fn)(void);          /* SET_INT: a default computed at start-up */
	double fdef;                  /* SET_FRACTION */
	const char *sdef;             /* SET_STRING */
	bool (*valid)(const char *v); /* SET_CHECKED */
	const char *error;            /* what the value must be, after the name */
	bool debug_only;              /* read only without NDEBUG, not documented */
	/* documentation: the tables of README.md and docs/operations.md */
	const char *doc_default; /* NULL: def */
	const char *unit;        /* SET_INT: after the range, e.g. " s" */
	const char *note;        /* SET_INT: after the range, in parentheses */
	const char *accepted;    /* other kinds: what the value may be */
	const char *summary;     /* README.md */
	const char *detail;      /* docs/operations.md */
};

#define STR_(x) #x
#define STR(x) STR_(x)

#define INT_SETTING(name, field, d, lo, hi)                                                 \
	.env = name, .kind = SET_INT, .offset = offsetof(struct config, field), .def = (d), \
	.min = (lo), .max = (hi)

static bool cors_origins_valid(const char *v);
static bool metrics_token_valid(const char *v);
static int default_threads(void);

/* In the order config_load checks them and the documents list them. */
static const struct setting settings[] = {
	{
	    .env = "GPUPOOL_DATABASE_URL",
	    .kind = SET_STRING,
	    .offset = offsetof(struct config, database_url),
	    .doc_default = "none, required",
	    .accepted = "libpq conninfo (`host=… dbname=…`) or URI (`postgresql://…`)",
	    .summary = "libpq connection string or URI",
	    .detail = "the PostgreSQL database",
	},
	{
	    .env = "GPUPOOL_LISTEN",
	    .kind = SET_HOSTPORT,
	    .offset = offsetof(struct config, listen_host),
	    .sdef = "127.0.0.1:8080",
	    .error = "host:port (host an IPv4 address or localhost, port 0 to 65535)",
	    .doc_default = "`127.0.0.1:8080`",
	    .accepted = "`host:port`; host an IPv4 address or `localhost`; port 0–65535",
	    .summary = "`host:port`; port `0` picks a free port and logs it",
	    .detail =
		"listening address; port `0` picks a free port, logged in the `listening` line. "
		"Use `0.0.0.0:8080` to listen on every interface. IPv6 and host names are not "
		"supported. An address in use stops the server with one line: `could not listen "
		"on 127.0.0.1:8080: Address already in use (GPUPOOL_LISTEN=127.0.0.1:8080; "
		"...)`, exit status 1",
	},
	{
	    INT_SETTING("GPUPOOL_THREADS", threads, 4, 1, 256),
	    .def_fn = default_threads,
	    .doc_default = "2 × online CPUs",
	    .summary = "HTTP worker threads, each with its own database connection",
	    .detail = "HTTP worker threads; each runs its requests synchronously and holds one "
		      "database connection",
	},
	{
	    INT_SETTING("GPUPOOL_MAX_CONNECTIONS", max_connections, 1024, 1, 100000),
	    .summary = "open HTTP connections served; up to an eighth more are answered 503 with "
		       "`Retry-After`",
	    .detail =
		"open HTTP connections served; the next `N/8 + 8` are accepted only to answer "
		"their request 503 `overloaded` with `Retry-After: 1`; beyond that new "
		"connections are closed at once (see \"Slow clients and crowded addresses\")",
	},
	{
	    INT_SETTING("GPUPOOL_MAX_CONNECTIONS_PER_IP", max_connections_per_ip, 256, 1, 100000),
	    .summary = "open HTTP connections per client address (429 with `Retry-After` beyond); "
		       "behind a trusted proxy, requests in flight per client",
	    .detail =
		"open HTTP connections per peer address, over it 429 `too_many_connections` with "
		"`Retry-After: 1`; a trusted proxy's own connections are not counted, each of "
		"its clients may have this many requests in flight instead",
	},
	{
	    INT_SETTING("GPUPOOL_CONNECTION_TIMEOUT", connection_timeout_s, 30, 1, 3600),
	    .unit = " s",
	    .summary = "idle connection timeout, seconds",
	    .detail = "idle HTTP connection timeout (any byte resets it)",
	},
	{
	    INT_SETTING("GPUPOOL_HEADER_TIMEOUT", header_timeout_s, 10, 1, 3600),
	    .unit = " s",
	    .summary =
		"seconds a request's line and headers may take to arrive, however they trickle",
	    .detail =
		"deadline for a request's line and headers: from the connection's start, or on a "
		"kept-alive connection from the request line (and at most idle timeout + this "
		"after the previous answer); not reset by arriving bytes. Past it: 408 and the "
		"connection is closed",
	},
	{
	    INT_SETTING("GPUPOOL_BODY_TIMEOUT", body_timeout_s, 30, 1, 3600),
	    .unit = " s",
	    .summary = "seconds a request's body may take after its headers",
	    .detail =
		"deadline for a request's body, from its headers; past it the connection is closed",
	},
	{
	    .env = "GPUPOOL_PROBE_LISTEN",
	    .kind = SET_HOSTPORT,
	    .offset = offsetof(struct config, probe_host),
	    .error = "host:port (host an IPv4 address or localhost, port 0 to 65535)",
	    .doc_default = "unset (off)",
	    .accepted = "`host:port`, like `GPUPOOL_LISTEN`",
	    .summary = "`host:port` of a small listener serving only `/healthz`, `/readyz` and "
		       "`/metrics` (e.g. `0.0.0.0:8081`)",
	    .detail =
		"a second listener (2 threads, 64 connections) that serves only `/healthz`, "
		"`/readyz` and `/metrics` (404 otherwise); point liveness/readiness probes and "
		"the scraper at it",
	},
	{
	    .env = "GPUPOOL_AGENT_LISTEN",
	    .kind = SET_HOSTPORT,
	    .offset = offsetof(struct config, agent_host),
	    .error = "host:port",
	    .doc_default = "unset (off)",
	    .accepted = "`host:port`, like `GPUPOOL_LISTEN`",
	    .summary = "`host:port` of the node agents' own listener (their `--server`; e.g. "
		       "`0.0.0.0:8082`): their long-polls take none of the API's connections",
	    .detail = "the agent listener (`0.0.0.0:8082`, say): the agents' routes and the probes "
		      "only, with its own limits below; the `listening` log line gives its port as "
		      "`agent_port` (see \"Sizing a replica for a fleet of agents\")",
	},
	{
	    INT_SETTING("GPUPOOL_AGENT_MAX_CONNECTIONS", agent_max_connections, 65536, 1, 1000000),
	    .summary = "agent connections served on the agent listener (held polls included)",
	    .detail = "agent connections served (held polls included); past it an eighth more are "
		      "answered 503 `overloaded` with `Retry-After: 1`, the rest closed",
	},
	{
	    INT_SETTING("GPUPOOL_AGENT_THREADS", agent_threads, 4, 1, 256),
	    .def_fn = default_threads,
	    .doc_default = "2 × online CPUs",
	    .summary = "HTTP worker threads of the agent listener, each with its own database "
		       "connection",
	    .detail = "HTTP worker threads of the agent listener, apart from `GPUPOOL_THREADS`: "
		      "a status report waiting on a lock holds one of them, never one of the "
		      "API's; each holds one database connection",
	},
	{
	    INT_SETTING("GPUPOOL_AGENT_MAX_CONNECTIONS_PER_IP", agent_max_connections_per_ip, 256,
		1, 1000000),
	    .summary = "agent connections per peer address on the agent listener (429 beyond)",
	    .detail = "agent connections per peer address (429 beyond): raise it to the number of "
		      "agents behind one NAT address",
	},
	{
	    INT_SETTING("GPUPOOL_AGENT_CONNECTION_MEMORY", agent_connection_memory, 4096, 4096,
		1048576),
	    .unit = " bytes",
	    .summary = "libmicrohttpd's memory per agent connection",
	    .detail =
		"libmicrohttpd's memory per agent connection: an agent's request line and "
		"headers (under 1 KiB) must fit in about half of it; raise it when a proxy in "
		"front of the agents adds long headers (431 otherwise)",
	},
	{
	    INT_SETTING("GPUPOOL_STATEMENT_TIMEOUT_MS", statement_timeout_ms, 5000, 100, 600000),
	    .unit = " ms",
	    .summary = "PostgreSQL `statement_timeout`",
	    .detail =
		"PostgreSQL `statement_timeout` of every connection; a statement over it answers "
		"503 `timeout`",
	},
	{
	    INT_SETTING("GPUPOOL_SESSION_TTL", session_ttl_s, 12 * 3600, 60, 30 * 86400),
	    .unit = " s",
	    .doc_default = "43200 (12 h)",
	    .summary = "lifetime of a login token, seconds",
	    .detail = "lifetime of a token from `POST /v1/auth/login`",
	},
	{
	    INT_SETTING("GPUPOOL_IDEMPOTENCY_TTL", idempotency_ttl_s, 72 * 3600, 72 * 3600,
		365 * 86400),
	    .unit = " s",
	    .doc_default = "259200 (72 h)",
	    .summary = "how long `Idempotency-Key` answers are kept (≥ 72 h)",
	    .detail = "how long `Idempotency-Key` records are kept",
	},
	{
	    INT_SETTING("GPUPOOL_REQUEST_TTL", request_ttl_s, 7 * 86400, 1, 365 * 86400),
	    .unit = " s",
	    .doc_default = "604800 (7 days)",
	    .summary = "seconds a pool request may stay pending before it expires",
	    .detail = "a pool request still pending this long after submission becomes `expired`",
	},
	{
	    INT_SETTING("GPUPOOL_AGENT_GRACE", agent_grace_s, 50, 2, 3600),
	    .unit = " s",
	    .summary =
		"seconds without a heartbeat after which an agent's node is `unknown` and leaves "
		"placement",
	    .detail = "an agent-managed node silent this long becomes `unknown` (out of placement, "
		      "alert `node_unknown`) until its next heartbeat",
	},
	{
	    INT_SETTING("GPUPOOL_PUSH_TIMEOUT_MS", push_timeout_ms, 5000, 100, 60000),
	    .unit = " ms",
	    .summary = "one push of a desired state to an agent",
	    .detail = "one push of a desired state to an agent's callback URL",
	},
	{
	    INT_SETTING("GPUPOOL_PUSH_MAX_ATTEMPTS", push_max_attempts, 10, 1, 100),
	    .summary =
		"failed pushes before the pusher gives up (alert `push_failed`; the agent still "
		"long-polls)",
	    .detail = "failed pushes before the pusher gives up (alert `push_failed`)",
	},
	{
	    INT_SETTING("GPUPOOL_PUSH_BACKOFF_MS", push_backoff_ms, 1000, 10, 600000),
	    .unit = " ms",
	    .summary = "first retry delay of a failed push (doubling, jittered, at most 5 min)",
	    .detail = "first retry delay of a failed push, doubling with jitter up to 5 min",
	},
	{
	    INT_SETTING("GPUPOOL_METRICS_RETENTION_DAYS", metrics_retention_days, 7, 1, 3650),
	    .unit = " days",
	    .summary = "days of raw GPU samples kept (daily partitions; hourly roll-ups are kept)",
	    .detail = "raw GPU samples kept, in daily partitions dropped whole",
	},
	{
	    INT_SETTING("GPUPOOL_CURSOR_KEY_OVERLAP", cursor_key_overlap_s, 86400, 0, 30 * 86400),
	    .unit = " s",
	    .summary = "seconds list cursors of the previous key stay valid after `gpupoold admin "
		       "rotate-cursor-key`",
	    .detail =
		"seconds after `gpupoold admin rotate-cursor-key` during which list cursors of "
		"the previous key are still accepted (see \"Rotating the cursor key\")",
	},
	{
	    .env = "GPUPOOL_AGENT_CALLBACK_ALLOW",
	    .kind = SET_CHECKED,
	    .offset = offsetof(struct config, agent_callback_allow),
	    .valid = callback_allow_valid,
	    .error =
		"IPv4/IPv6 addresses, networks (address/bits) or host names, separated by commas",
	    .doc_default = "unset",
	    .accepted =
		"comma-separated IPv4/IPv6 addresses, networks (`address/bits`) and host names",
	    .summary =
		"addresses, networks and host names agents may give as callback besides their "
		"own address; link-local and metadata addresses only when listed explicitly",
	    .detail =
		"where the server may push to node agents besides the enrolling peer's own "
		"address (the default). Link-local (169.254.0.0/16, fe80::/10), cloud metadata "
		"and unspecified addresses only when an entry no broader than their block lists "
		"them (`169.254.169.254/32` yes, `0.0.0.0/0` no). A refused `callback_url` is "
		"422 at enrollment, nothing created. See `docs/agent.md` \"Enrollment and node "
		"tokens\"",
	},
	{
	    INT_SETTING("GPUPOOL_OUTBOX_RETENTION_DAYS", outbox_retention_days, 7, 0, 3650),
	    .unit = " days",
	    .note = "0: kept",
	    .summary = "days delivered outbox rows are kept (0: for ever)",
	    .detail =
		"delivered (or given-up) outbox rows are deleted this long after delivery by the "
		"telemetry worker",
	},
	{
	    INT_SETTING("GPUPOOL_ALERTS_RETENTION_DAYS", alerts_retention_days, 90, 0, 3650),
	    .unit = " days",
	    .note = "0: kept",
	    .summary = "days resolved alerts are kept (0: for ever)",
	    .detail = "resolved alerts are deleted this long after they were resolved",
	},
	{
	    INT_SETTING("GPUPOOL_PROFILES_RETENTION_DAYS", profiles_retention_days, 90, 0, 3650),
	    .unit = " days",
	    .note = "0: kept",
	    .summary = "days ended workload profiles are kept (0: for ever)",
	    .detail =
		"ended workload profiles are deleted this long after they ended (billing's idle "
		"split of older hours then counts those hours as without workload: keep it past "
		"your export window)",
	},
	{
	    INT_SETTING("GPUPOOL_TELEMETRY_INTERVAL", telemetry_interval_s, 60, 1, 3600),
	    .unit = " s",
	    .summary = "seconds between passes of the telemetry worker (partitions, roll-ups, idle "
		       "alerts)",
	    .detail = "partitions, hourly roll-ups and idle alerts (one replica at a time)",
	},
	{
	    INT_SETTING("GPUPOOL_IDLE_AFTER", idle_after_s, 3600, 1, 30 * 86400),
	    .unit = " s",
	    .summary =
		"seconds without workload and activity after which an allocation is idle (alert)",
	    .detail = "an allocation without workload and activity this long raises `idle`",
	},
	{
	    .env = "GPUPOOL_IDLE_THRESHOLD",
	    .kind = SET_FRACTION,
	    .offset = offsetof(struct config, idle_threshold),
	    .fdef = 0.05,
	    .error = "a number from 0 to 1",
	    .doc_default = "0.05",
	    .accepted = "0–1",
	    .summary = "SM activity below which a sample counts as idle",
	    .detail = "SM activity below which a sample counts as idle",
	},
	{
	    .env = "GPUPOOL_CORS_ORIGINS",
	    .kind = SET_CHECKED,
	    .offset = offsetof(struct config, cors_origins),
	    .valid = cors_origins_valid,
	    .error = "up to 16 origins (http[s]://host[:port], no path), separated by commas",
	    .doc_default = "(off)",
	    .accepted = "up to 16 origins",
	    .summary =
		"comma-separated browser origins (`https://host[:port]`) allowed to call the API "
		"(CORS); none by default",
	    .detail =
		"browser origins allowed to call the API: they get `Access-Control-Allow-Origin` "
		"and preflights are answered; bearer tokens only, no credentials mode",
	},
	{
	    INT_SETTING("GPUPOOL_EXPIRY_INTERVAL", expiry_interval_s, 10, 1, 3600),
	    .unit = " s",
	    .summary =
		"seconds between passes of the expiry worker (pending requests, pool end times, "
		"releases on nodes without an agent)",
	    .detail =
		"how often the expiry worker expires pending requests and releases pools whose "
		"`ends_at` has passed (safe with several replicas)",
	},
	{
	    INT_SETTING("GPUPOOL_DEFRAG_APPLY_INTERVAL", defrag_apply_interval_s, 2, 1, 3600),
	    .unit = " s",
	    .summary = "seconds between passes of the defragmentation apply worker",
	    .detail =
		"how often the apply worker (one replica at a time: leadership lock) advances the "
		"moves of applying defragmentation plans (`docs/capacity.md`)",
	},
	{
	    INT_SETTING("GPUPOOL_DEFRAG_MOVE_TIMEOUT", defrag_move_timeout_s, 900, 5, 86400),
	    .unit = " s",
	    .summary = "seconds a defragmentation move waits for its node agent to create the new "
		       "instance or release the old one",
	    .detail = "a move whose new instance is not ready this long after it began fails "
		      "(`agent_timeout`; make before break releases the new allocation and the "
		      "old instance serves on); one whose old instance is not released this long "
		      "after it was marked releasing is `done` (`release_pending`, the new one "
		      "ready) or, break before make, `failed` (`agent_timeout`)",
	},
	{
	    INT_SETTING("GPUPOOL_DEFRAG_PLAN_TTL", defrag_plan_ttl_s, 3600, 60, 7 * 86400),
	    .unit = " s",
	    .summary = "seconds a defragmentation plan can be applied after it was computed",
	    .detail = "an older plan turns `expired` when applied (409 `plan_expired`): the fleet "
		      "has moved on since",
	},
	{
	    INT_SETTING("GPUPOOL_BILLING_ACCRUAL_INTERVAL", billing_accrual_interval_s, 300, 1,
		86400),
	    .unit = " s",
	    .summary = "seconds between passes of the billing accrual worker",
	    .detail =
		"how often the billing accrual worker turns the usage ledger into hourly rows "
		"(one replica at a time: leadership lock; `docs/billing.md`)",
	},
	{
	    INT_SETTING("GPUPOOL_BILLING_SETTLE", billing_settle_s, 300, 0, 86400),
	    .unit = " s",
	    .summary = "seconds after its end that an hour's billing rows become final",
	    .detail =
		"an hour's billing rows become final (never change again) this long after the "
		"hour ends; covers ledger writes dated before their commit",
	},
	{
	    INT_SETTING("GPUPOOL_BILLING_CLOSE_GRACE", billing_close_grace_s, 3 * 86400, 0,
		90 * 86400),
	    .unit = " s",
	    .summary = "seconds after a month ends before it may be closed",
	    .detail =
		"a billing period (UTC month) may be closed this long after it ends; keep it ≥ "
		"`GPUPOOL_BILLING_SETTLE`",
	},
	{
	    INT_SETTING("GPUPOOL_BILLING_EXPORT_INTERVAL_MS", billing_export_interval_ms, 2000, 10,
		600000),
	    .unit = " ms",
	    .summary = "milliseconds between polls of the billing export worker for queued jobs",
	    .detail = "how often each replica's export worker looks for queued export jobs (and at "
		      "once after a POST it served; `docs/billing.md` \"Exports\")",
	},
	{
	    INT_SETTING("GPUPOOL_BILLING_EXPORT_LEASE", billing_export_lease_s, 60, 1, 86400),
	    .unit = " s",
	    .summary = "seconds after which a dead replica's running export job is taken over",
	    .detail = "a running export job whose replica died is taken over by another after this",
	},
	{
	    .env = "GPUPOOL_TRUSTED_PROXIES",
	    .kind = SET_CIDRS,
	    .offset = offsetof(struct config, trusted),
	    .error = "up to " STR(
		HTTP_MAX_TRUSTED) " IPv4 addresses or networks (a.b.c.d or a.b.c.d/n), separated by commas",
	    .doc_default = "unset",
	    .accepted = "up to 32 IPv4 addresses or networks, commas",
	    .summary =
		"load balancers (IPv4 addresses or networks) whose `X-Forwarded-For` names the "
		"client",
	    .detail = "proxies whose `X-Forwarded-For` names the client (see \"Running replicas\")",
	},
	{
	    .env = "GPUPOOL_METRICS_TOKEN",
	    .kind = SET_CHECKED,
	    .offset = offsetof(struct config, metrics_token),
	    .valid = metrics_token_valid,
	    .error = "16 to 256 characters",
	    .doc_default = "unset",
	    .accepted = "16–256 characters",
	    .summary = "bearer token that `/metrics` requires (16–256 characters); unset: open",
	    .detail =
		"when set, `/metrics` answers only requests with `Authorization: Bearer <this "
		"token>` (401 otherwise); unset, it is open",
	},
	{
	    INT_SETTING("GPUPOOL_APPROVAL_WORKERS", approval_workers, 2, 1, 8),
	    .summary = "threads per group-commit queue (approvals, submissions), many requests per "
		       "transaction",
	    .detail =
		"threads per group-commit queue (approvals, submissions): each takes what is "
		"queued and decides it in one transaction (docs/pools.md); each holds a database "
		"connection. Two overlap one batch's commit with the next; without fsync 1 was "
		"as fast",
	},
	{
	    INT_SETTING("GPUPOOL_MAINTENANCE_INTERVAL", maintenance_interval_s, 3600, 1, 86400),
	    .unit = " s",
	    .summary = "seconds between housekeeping passes (expired keys, counters, dead tokens)",
	    .detail =
		"how often housekeeping runs: it deletes `Idempotency-Key` records past their "
		"TTL, failed-login counters whose window has passed, and tokens expired or "
		"revoked more than 7 days ago",
	},
	{
	    INT_SETTING("GPUPOOL_SHUTDOWN_GRACE", shutdown_grace_s, 10, 0, 600),
	    .unit = " s",
	    .summary = "seconds in-flight requests get after SIGTERM",
	    .detail = "how long requests in progress may finish after SIGTERM",
	},
	{
	    .env = "GPUPOOL_LOG_LEVEL",
	    .kind = SET_STRING,
	    .offset = offsetof(struct config, log_level),
	    .sdef = "info",
	    .doc_default = "`info`",
	    .accepted = "`debug`, `info`, `warn`, `error`",
	    .summary = "`debug`, `info`, `warn`, `error` (JSON lines on stderr)",
	    .detail = "lines below the level are dropped",
	},
	{
	    .env = "GPUPOOL_ACCESS_LOG",
	    .kind = SET_SWITCH,
	    .offset = offsetof(struct config, access_log),
	    .def = 1,
	    .doc_default = "on",
	    .accepted = "`0`, `false` or `off` turn it off; any other value leaves it on",
	    .summary = "one log line per request (`0` turns it off)",
	    .detail = "one `request` log line per request",
	},
	{
	    INT_SETTING("GPUPOOL_TEST_ACCRUAL_HOLD_MS", billing_test_hold_ms, 0, 0, 600000),
	    .debug_only = true, /* the accrual holds its transaction (tests) */
	},
	{
	    INT_SETTING("GPUPOOL_TEST_POLL_GAP_MS", agent_test_poll_gap_ms, 0, 0, 600000),
	    .debug_only = true, /* a long-poll waits between its read and its registration */
	},
	{
	    INT_SETTING("GPUPOOL_TEST_EXPORT_PAGE_DELAY_MS", billing_export_test_delay_ms, 0, 0,
		600000),
	    .debug_only = true, /* the export worker waits between pages (tests) */
	},
};

#define NSETTINGS ((int)(sizeof(settings) / sizeof(settings[0])))

static int
default_threads(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	return ncpu > 0 ? (int)(ncpu * 2) : 4;
}

/* A comma-separated list of at most 16 origins: scheme://host[:port], nothing more. */
static bool
cors_origins_valid(const char *v)
{
	int n = 0;

	if (strlen(v) > 2048)
		return false;
	while (*v != '\0') {
		const char *end = strchr(v, ',');
		size_t len = end != NULL ? (size_t)(end - v) : strlen(v);
		size_t skip;

		if (strncmp(v, "https://", 8) == 0)
			skip = 8;
		else if (strncmp(v, "http://", 7) == 0)
			skip = 7;
		else
			return false;
		if (len <= skip || ++n > 16)
			return false;
		for (size_t i = skip; i < len; i++)
			if (!(isalnum((unsigned char)v[i]) || v[i] == '.' || v[i] == '-' ||
				v[i] == ':' || v[i] == '[' || v[i] == ']'))
				return false;
		v += len;
		if (*v == ',')
			v++;
	}
	return n > 0;
}

static bool
metrics_token_valid(const char *v)
{
	size_t n = strlen(v);

	return n >= 16 && n <= 256;
}

/* "host:port" into host (an IPv4 address; localhost becomes 127.0.0.1) and *port; -1
 * on anything else. */
static int
parse_host_port(const char *s, char *host, size_t hostlen, int *port)
{
	const char *colon = strrchr(s, ':');
	char *end, addr[INET_ADDRSTRLEN + 16];
	struct in_addr in;
	long n;
	size_t hlen;

	if (colon == NULL)
		return -1;
	hlen = (size_t)(colon - s);
	if (hlen == 0 || hlen >= hostlen || hlen >= sizeof(addr))
		return -1;
	/* digits only: strtol would take a sign or leading blanks */
	if (!isdigit((unsigned char)colon[1]))
		return -1;
	errno = 0;
	n = strtol(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || n < 0 || n > 65535)
		return -1;
	/*
	 * An IPv4 address or localhost, as the listener takes it: anything
	 * else is refused here, before the database and the workers start,
	 * not by the listener, which starts last
	 */
	memcpy(addr, s, hlen);
	addr[hlen] = '\0';
	if (strcmp(addr, "localhost") == 0)
		snprintf(addr, sizeof(addr), "127.0.0.1");
	if (inet_pton(AF_INET, addr, &in) != 1 || strlen(addr) >= hostlen)
		return -1;
	snprintf(host, hostlen, "%s", addr);
	*port = (int)n;
	return 0;
}

int
config_parse_listen(struct config *cfg, const char *s)
{
	return parse_host_port(s, cfg->listen_host, sizeof(cfg->listen_host), &cfg->listen_port);
}

/* The host buffer and port of a SET_HOSTPORT setting (listen, agent or probe). */
static void
host_port_fields(struct config *cfg, const struct setting *s, char **host, size_t *hostlen,
    int **port)
{
	if (s->offset == offsetof(struct config, listen_host)) {
		*host = cfg->listen_host;
		*hostlen = sizeof(cfg->listen_host);
		*port = &cfg->listen_port;
	} else if (s->offset == offsetof(struct config, agent_host)) {
		*host = cfg->agent_host;
		*hostlen = sizeof(cfg->agent_host);
		*port = &cfg->agent_port;
	} else {
		*host = cfg->probe_host;
		*hostlen = sizeof(cfg->probe_host);
		*port = &cfg->probe_port;
	}
}

static void
setting_default(struct config *cfg, const struct setting *s)
{
	void *p = (char *)cfg + s->offset;

	switch (s->kind) {
	case SET_INT: {
		int v = s->def_fn != NULL ? s->def_fn() : s->def;

		memcpy(p, &v, sizeof(v));
		break;
	}
	case SET_FRACTION:
		memcpy(p, &s->fdef, sizeof(s->fdef));
		break;
	case SET_STRING:
	case SET_CHECKED:
		memcpy(p, &s->sdef, sizeof(s->sdef));
		break;
	case SET_HOSTPORT:
		if (s->sdef != NULL) {
			char *host;
			size_t hostlen;
			int *port;

			host_port_fields(cfg, s, &host, &hostlen, &port);
			(void)parse_host_port(s->sdef, host, hostlen, port);
		}
		break;
	case SET_SWITCH: {
		bool on = s->def != 0;

		memcpy(p, &on, sizeof(on));
		break;
	}
	case SET_CIDRS:
		break;
	}
}

/* One setting from its variable v (set and not empty); false when v is refused. */
static bool
setting_parse(struct config *cfg, const struct setting *s, const char *v)
{
	void *p = (char *)cfg + s->offset;
	char *end;

	errno = 0;
	switch (s->kind) {
	case SET_INT: {
		long n = strtol(v, &end, 10);
		int i = (int)n;

		if (errno != 0 || *end != '\0' || n < s->min || n > s->max)
			return false;
		memcpy(p, &i, sizeof(i));
		return true;
	}
	case SET_FRACTION: {
		double d = strtod(v, &end);

		if (errno != 0 || *end != '\0' || !(d >= 0.0 && d <= 1.0))
			return false;
		memcpy(p, &d, sizeof(d));
		return true;
	}
	case SET_CHECKED:
		if (!s->valid(v))
			return false;
		/* fall through */
	case SET_STRING:
		memcpy(p, &v, sizeof(v));
		return true;
	case SET_HOSTPORT: {
		char *host;
		size_t hostlen;
		int *port;

		host_port_fields(cfg, s, &host, &hostlen, &port);
		return parse_host_port(v, host, hostlen, port) == 0;
	}
	case SET_CIDRS:
		return http_parse_cidrs(v, cfg->trusted, HTTP_MAX_TRUSTED, &cfg->ntrusted) == 0;
	case SET_SWITCH: {
		bool on =
		    !(strcmp(v, "0") == 0 || strcmp(v, "false") == 0 || strcmp(v, "off") == 0);

		memcpy(p, &on, sizeof(on));
		return true;
	}
	}
	return false;
}

static bool
setting_used(const struct setting *s)
{
#ifdef NDEBUG
	return !s->debug_only;
#else
	(void)s;
	return true;
#endif
}

int
config_load(struct config *cfg, char *errbuf, int errlen)
{
	memset(cfg, 0, sizeof(*cfg));
	for (int i = 0; i < NSETTINGS; i++)
		if (setting_used(&settings[i]))
			setting_default(cfg, &settings[i]);
	for (int i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];
		const char *v = getenv(s->env);

		if (!setting_used(s) || v == NULL || *v == '\0' || setting_parse(cfg, s, v))
			continue;
		if (s->kind == SET_INT)
			snprintf(errbuf, (size_t)errlen, "%s must be an integer from %d to %d",
			    s->env, s->min, s->max);
		else
			snprintf(errbuf, (size_t)errlen, "%s must be %s", s->env, s->error);
		return -1;
	}
	return 0;
}

void
config_names(FILE *out)
{
	int col = 0;

	for (int i = 0; i < NSETTINGS; i++) {
		int n;

		if (settings[i].debug_only)
			continue;
		n = (int)strlen(settings[i].env) + 2;
		if (col > 0 && col + n > 78) {
			fputs(",\n", out);
			col = 0;
		} else if (col > 0) {
			fputs(", ", out);
		}
		fputs(settings[i].env, out);
		col += n;
	}
	fputs("\n", out);
}

/* The default column: doc_default, else the number. */
static void
doc_default(FILE *out, const struct setting *s)
{
	if (s->doc_default != NULL)
		fputs(s->doc_default, out);
	else
		fprintf(out, "%d", s->def);
}

int
config_markdown(FILE *out, const char *which)
{
	bool readme = strcmp(which, "readme") == 0;

	if (!readme && strcmp(which, "operations") != 0)
		return -1;
	if (readme)
		fputs("| variable | default | meaning |\n|---|---|---|\n", out);
	else
		fputs("| variable | default | accepted | meaning |\n|---|---|---|---|\n", out);
	for (int i = 0; i < NSETTINGS; i++) {
		const struct setting *s = &settings[i];

		if (s->debug_only)
			continue;
		fprintf(out, "| `%s` | ", s->env);
		doc_default(out, s);
		if (readme) {
			fprintf(out, " | %s |\n", s->summary);
			continue;
		}
		if (s->kind == SET_INT)
			fprintf(out, " | %d–%d%s%s%s%s", s->min, s->max,
			    s->unit != NULL ? s->unit : "", s->note != NULL ? " (" : "",
			    s->note != NULL ? s->note : "", s->note != NULL ? ")" : "");
		else
			fprintf(out, " | %s", s->accepted);
		fprintf(out, " | %s |\n", s->detail);
	}
	return 0;
}
