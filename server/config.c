/*
 * config.c - settings from the environment with checked parsing.
 */
#include "config.h"

#include "domain/callback.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int
env_int(const char *name, int min, int max, int *out, char *errbuf, int errlen)
{
	const char *v = getenv(name);
	char *end;
	long n;

	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	n = strtol(v, &end, 10);
	if (errno != 0 || *end != '\0' || n < min || n > max) {
		snprintf(errbuf, (size_t)errlen, "%s must be an integer from %d to %d", name, min,
		    max);
		return -1;
	}
	*out = (int)n;
	return 0;
}

static int
env_fraction(const char *name, double *out, char *errbuf, int errlen)
{
	const char *v = getenv(name);
	char *end;
	double d;

	if (v == NULL || *v == '\0')
		return 0;
	errno = 0;
	d = strtod(v, &end);
	if (errno != 0 || *end != '\0' || !(d >= 0.0 && d <= 1.0)) {
		snprintf(errbuf, (size_t)errlen, "%s must be a number from 0 to 1", name);
		return -1;
	}
	*out = d;
	return 0;
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

/* "host:port" into host (localhost becomes 127.0.0.1) and *port; -1 on malformed input. */
static int
parse_host_port(const char *s, char *host, size_t hostlen, int *port)
{
	const char *colon = strrchr(s, ':');
	char *end;
	long n;
	size_t hlen;

	if (colon == NULL)
		return -1;
	hlen = (size_t)(colon - s);
	if (hlen == 0 || hlen >= hostlen)
		return -1;
	errno = 0;
	n = strtol(colon + 1, &end, 10);
	if (errno != 0 || *end != '\0' || colon[1] == '\0' || n < 0 || n > 65535)
		return -1;
	memcpy(host, s, hlen);
	host[hlen] = '\0';
	if (strcmp(host, "localhost") == 0)
		snprintf(host, hostlen, "127.0.0.1");
	*port = (int)n;
	return 0;
}

int
config_parse_listen(struct config *cfg, const char *s)
{
	return parse_host_port(s, cfg->listen_host, sizeof(cfg->listen_host), &cfg->listen_port);
}

/*
 * The agent listener (GPUPOOL_AGENT_LISTEN and its limits): the node
 * agents' connections and long-polls on their own daemon, with their
 * own caps and a small buffer each (docs/operations.md, sizing).
 */
static int
config_load_agent_listener(struct config *cfg, char *errbuf, int errlen)
{
	const char *v = getenv("GPUPOOL_AGENT_LISTEN");

	cfg->agent_max_connections = 65536;
	cfg->agent_max_connections_per_ip = 256;
	cfg->agent_connection_memory = 4096;
	if (v != NULL && *v != '\0' &&
	    parse_host_port(v, cfg->agent_host, sizeof(cfg->agent_host), &cfg->agent_port) < 0) {
		snprintf(errbuf, (size_t)errlen, "GPUPOOL_AGENT_LISTEN must be host:port");
		return -1;
	}
	if (env_int("GPUPOOL_AGENT_MAX_CONNECTIONS", 1, 1000000, &cfg->agent_max_connections,
		errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_AGENT_MAX_CONNECTIONS_PER_IP", 1, 1000000,
		&cfg->agent_max_connections_per_ip, errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_AGENT_CONNECTION_MEMORY", 4096, 1024 * 1024,
		&cfg->agent_connection_memory, errbuf, errlen) < 0)
		return -1;
	return 0;
}

int
config_load(struct config *cfg, char *errbuf, int errlen)
{
	const char *v;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	memset(cfg, 0, sizeof(*cfg));
	cfg->database_url = getenv("GPUPOOL_DATABASE_URL");
	snprintf(cfg->listen_host, sizeof(cfg->listen_host), "127.0.0.1");
	cfg->listen_port = 8080;
	cfg->threads = ncpu > 0 ? (int)(ncpu * 2) : 4;
	cfg->max_connections = 1024;
	cfg->max_connections_per_ip = 256;
	cfg->connection_timeout_s = 30;
	cfg->header_timeout_s = 10;
	cfg->body_timeout_s = 30;
	cfg->statement_timeout_ms = 5000;
	cfg->session_ttl_s = 12 * 3600;
	cfg->shutdown_grace_s = 10;
	cfg->idempotency_ttl_s = 72 * 3600;
	cfg->maintenance_interval_s = 3600;
	cfg->request_ttl_s = 7 * 86400;
	cfg->expiry_interval_s = 10;
	cfg->agent_grace_s = 50;
	cfg->push_timeout_ms = 5000;
	cfg->push_max_attempts = 10;
	cfg->push_backoff_ms = 1000;
	cfg->metrics_retention_days = 7;
	cfg->cursor_key_overlap_s = 86400;
	cfg->telemetry_interval_s = 60;
	cfg->outbox_retention_days = 7;
	cfg->alerts_retention_days = 90;
	cfg->profiles_retention_days = 90;
	cfg->idle_after_s = 3600;
	cfg->idle_threshold = 0.05;
	cfg->approval_workers = 2;
	cfg->billing_accrual_interval_s = 300;
	cfg->billing_settle_s = 300;
	cfg->billing_close_grace_s = 3 * 86400;
	cfg->billing_export_interval_ms = 2000;
	cfg->billing_export_lease_s = 60;
	cfg->access_log = true;
	cfg->log_level = "info";
	v = getenv("GPUPOOL_LISTEN");
	if (v != NULL && *v != '\0' && config_parse_listen(cfg, v) < 0) {
		snprintf(errbuf, (size_t)errlen, "GPUPOOL_LISTEN must be host:port");
		return -1;
	}
	v = getenv("GPUPOOL_PROBE_LISTEN");
	if (v != NULL && *v != '\0' &&
	    parse_host_port(v, cfg->probe_host, sizeof(cfg->probe_host), &cfg->probe_port) < 0) {
		snprintf(errbuf, (size_t)errlen, "GPUPOOL_PROBE_LISTEN must be host:port");
		return -1;
	}
	if (config_load_agent_listener(cfg, errbuf, errlen) < 0)
		return -1;
	if (env_int("GPUPOOL_THREADS", 1, 256, &cfg->threads, errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_MAX_CONNECTIONS", 1, 100000, &cfg->max_connections, errbuf, errlen) <
		0 ||
	    env_int("GPUPOOL_MAX_CONNECTIONS_PER_IP", 1, 100000, &cfg->max_connections_per_ip,
		errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_CONNECTION_TIMEOUT", 1, 3600, &cfg->connection_timeout_s, errbuf,
		errlen) < 0 ||
	    env_int("GPUPOOL_HEADER_TIMEOUT", 1, 3600, &cfg->header_timeout_s, errbuf, errlen) <
		0 ||
	    env_int("GPUPOOL_BODY_TIMEOUT", 1, 3600, &cfg->body_timeout_s, errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_STATEMENT_TIMEOUT_MS", 100, 600000, &cfg->statement_timeout_ms, errbuf,
		errlen) < 0 ||
	    env_int("GPUPOOL_SESSION_TTL", 60, 30 * 86400, &cfg->session_ttl_s, errbuf, errlen) <
		0 ||
	    env_int("GPUPOOL_SHUTDOWN_GRACE", 0, 600, &cfg->shutdown_grace_s, errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_MAINTENANCE_INTERVAL", 1, 86400, &cfg->maintenance_interval_s, errbuf,
		errlen) < 0 ||
	    env_int("GPUPOOL_IDEMPOTENCY_TTL", 72 * 3600, 365 * 86400, &cfg->idempotency_ttl_s,
		errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_REQUEST_TTL", 1, 365 * 86400, &cfg->request_ttl_s, errbuf, errlen) <
		0 ||
	    env_int("GPUPOOL_AGENT_GRACE", 2, 3600, &cfg->agent_grace_s, errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_PUSH_TIMEOUT_MS", 100, 60000, &cfg->push_timeout_ms, errbuf, errlen) <
		0 ||
	    env_int("GPUPOOL_PUSH_MAX_ATTEMPTS", 1, 100, &cfg->push_max_attempts, errbuf, errlen) <
		0 ||
	    env_int("GPUPOOL_PUSH_BACKOFF_MS", 10, 600000, &cfg->push_backoff_ms, errbuf, errlen) <
		0 ||
	    env_int("GPUPOOL_METRICS_RETENTION_DAYS", 1, 3650, &cfg->metrics_retention_days, errbuf,
		errlen) < 0 ||
	    env_int("GPUPOOL_CURSOR_KEY_OVERLAP", 0, 30 * 86400, &cfg->cursor_key_overlap_s, errbuf,
		errlen) < 0 ||
	    env_int("GPUPOOL_TELEMETRY_INTERVAL", 1, 3600, &cfg->telemetry_interval_s, errbuf,
		errlen) < 0 ||
	    env_int("GPUPOOL_OUTBOX_RETENTION_DAYS", 0, 3650, &cfg->outbox_retention_days, errbuf,
		errlen) < 0 ||
	    env_int("GPUPOOL_ALERTS_RETENTION_DAYS", 0, 3650, &cfg->alerts_retention_days, errbuf,
		errlen) < 0 ||
	    env_int("GPUPOOL_PROFILES_RETENTION_DAYS", 0, 3650, &cfg->profiles_retention_days,
		errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_IDLE_AFTER", 1, 30 * 86400, &cfg->idle_after_s, errbuf, errlen) < 0 ||
	    env_fraction("GPUPOOL_IDLE_THRESHOLD", &cfg->idle_threshold, errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_EXPIRY_INTERVAL", 1, 3600, &cfg->expiry_interval_s, errbuf, errlen) <
		0 ||
	    env_int("GPUPOOL_APPROVAL_WORKERS", 1, 8, &cfg->approval_workers, errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_BILLING_ACCRUAL_INTERVAL", 1, 86400, &cfg->billing_accrual_interval_s,
		errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_BILLING_SETTLE", 0, 86400, &cfg->billing_settle_s, errbuf, errlen) <
		0 ||
	    env_int("GPUPOOL_BILLING_CLOSE_GRACE", 0, 90 * 86400, &cfg->billing_close_grace_s,
		errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_BILLING_EXPORT_INTERVAL_MS", 10, 600000,
		&cfg->billing_export_interval_ms, errbuf, errlen) < 0 ||
	    env_int("GPUPOOL_BILLING_EXPORT_LEASE", 1, 86400, &cfg->billing_export_lease_s, errbuf,
		errlen) < 0)
		return -1;
#ifndef NDEBUG
	if (env_int("GPUPOOL_TEST_ACCRUAL_HOLD_MS", 0, 600000, &cfg->billing_test_hold_ms, errbuf,
		errlen) < 0 ||
	    env_int("GPUPOOL_TEST_EXPORT_PAGE_DELAY_MS", 0, 600000,
		&cfg->billing_export_test_delay_ms, errbuf, errlen) < 0)
		return -1;
#endif
	v = getenv("GPUPOOL_TRUSTED_PROXIES");
	if (v != NULL && *v != '\0' &&
	    http_parse_cidrs(v, cfg->trusted, HTTP_MAX_TRUSTED, &cfg->ntrusted) < 0) {
		snprintf(errbuf, (size_t)errlen,
		    "GPUPOOL_TRUSTED_PROXIES must be up to %d IPv4 "
		    "addresses or networks (a.b.c.d or a.b.c.d/n), separated by commas",
		    HTTP_MAX_TRUSTED);
		return -1;
	}
	v = getenv("GPUPOOL_AGENT_CALLBACK_ALLOW");
	if (v != NULL && *v != '\0') {
		if (!callback_allow_valid(v)) {
			snprintf(errbuf, (size_t)errlen,
			    "GPUPOOL_AGENT_CALLBACK_ALLOW must be IPv4/IPv6 addresses, networks "
			    "(address/bits) or host names, separated by commas");
			return -1;
		}
		cfg->agent_callback_allow = v;
	}
	v = getenv("GPUPOOL_METRICS_TOKEN");
	if (v != NULL && *v != '\0') {
		if (strlen(v) < 16 || strlen(v) > 256) {
			snprintf(errbuf, (size_t)errlen,
			    "GPUPOOL_METRICS_TOKEN must be 16 to 256 characters");
			return -1;
		}
		cfg->metrics_token = v;
	}
	v = getenv("GPUPOOL_CORS_ORIGINS");
	if (v != NULL && *v != '\0') {
		if (!cors_origins_valid(v)) {
			snprintf(errbuf, (size_t)errlen,
			    "GPUPOOL_CORS_ORIGINS must be up to 16 origins (http[s]://host[:port], no "
			    "path), separated by commas");
			return -1;
		}
		cfg->cors_origins = v;
	}
	v = getenv("GPUPOOL_ACCESS_LOG");
	if (v != NULL && (strcmp(v, "0") == 0 || strcmp(v, "false") == 0 || strcmp(v, "off") == 0))
		cfg->access_log = false;
	v = getenv("GPUPOOL_LOG_LEVEL");
	if (v != NULL && *v != '\0')
		cfg->log_level = v;
	return 0;
}
