/*
 * test_config.c - config_load: every setting's default, bounds, error
 * message and parsing, written down independently of server/config.c's
 * settings table (this test was written against the hand-written loader
 * the table replaced, and passes unchanged on both).
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"

extern char **environ;

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Unset every GPUPOOL_* variable (the test's own environment may carry some). */
static int
clear_env(void **state)
{
	(void)state;
	for (;;) {
		char name[128];
		bool found = false;

		for (char **e = environ; *e != NULL; e++) {
			const char *eq = strchr(*e, '=');

			if (strncmp(*e, "GPUPOOL_", 8) == 0 && eq != NULL &&
			    (size_t)(eq - *e) < sizeof(name)) {
				memcpy(name, *e, (size_t)(eq - *e));
				name[eq - *e] = '\0';
				found = true;
				break;
			}
		}
		if (!found)
			return 0;
		unsetenv(name);
	}
}

static void
test_defaults(void **state)
{
	struct config c;
	char err[256] = "";
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

	(void)state;
	assert_int_equal(config_load(&c, err, sizeof(err)), 0);
	assert_null(c.database_url);
	assert_string_equal(c.listen_host, "127.0.0.1");
	assert_int_equal(c.listen_port, 8080);
	assert_int_equal(c.threads, ncpu > 0 ? (int)(ncpu * 2) : 4);
	assert_int_equal(c.max_connections, 1024);
	assert_int_equal(c.max_connections_per_ip, 256);
	assert_int_equal(c.connection_timeout_s, 30);
	assert_int_equal(c.header_timeout_s, 10);
	assert_int_equal(c.body_timeout_s, 30);
	assert_string_equal(c.probe_host, "");
	assert_int_equal(c.probe_port, 0);
	assert_int_equal(c.statement_timeout_ms, 5000);
	assert_int_equal(c.session_ttl_s, 43200);
	assert_int_equal(c.shutdown_grace_s, 10);
	assert_int_equal(c.idempotency_ttl_s, 259200);
	assert_int_equal(c.maintenance_interval_s, 3600);
	assert_int_equal(c.request_ttl_s, 604800);
	assert_int_equal(c.expiry_interval_s, 10);
	assert_int_equal(c.approval_workers, 2);
	assert_int_equal(c.agent_grace_s, 50);
	assert_int_equal(c.push_timeout_ms, 5000);
	assert_int_equal(c.push_max_attempts, 10);
	assert_int_equal(c.push_backoff_ms, 1000);
	assert_int_equal(c.metrics_retention_days, 7);
	assert_int_equal(c.cursor_key_overlap_s, 86400);
	assert_int_equal(c.telemetry_interval_s, 60);
	assert_int_equal(c.outbox_retention_days, 7);
	assert_int_equal(c.alerts_retention_days, 90);
	assert_int_equal(c.profiles_retention_days, 90);
	assert_null(c.agent_callback_allow);
	assert_int_equal(c.idle_after_s, 3600);
	assert_true(c.idle_threshold == 0.05);
	assert_int_equal(c.billing_accrual_interval_s, 300);
	assert_int_equal(c.billing_settle_s, 300);
	assert_int_equal(c.billing_close_grace_s, 259200);
	assert_int_equal(c.billing_test_hold_ms, 0);
	assert_int_equal(c.billing_export_interval_ms, 2000);
	assert_int_equal(c.billing_export_lease_s, 60);
	assert_int_equal(c.billing_export_test_delay_ms, 0);
	assert_null(c.cors_origins);
	assert_null(c.metrics_token);
	assert_int_equal(c.ntrusted, 0);
	assert_true(c.access_log);
	assert_string_equal(c.log_level, "info");
}

struct int_setting {
	const char *name;
	int min, max;
	size_t offset;
};

#define S(name, min, max, field)                               \
	{                                                      \
		name, min, max, offsetof(struct config, field) \
	}

static const struct int_setting ints[] = {
	S("GPUPOOL_THREADS", 1, 256, threads),
	S("GPUPOOL_MAX_CONNECTIONS", 1, 100000, max_connections),
	S("GPUPOOL_MAX_CONNECTIONS_PER_IP", 1, 100000, max_connections_per_ip),
	S("GPUPOOL_CONNECTION_TIMEOUT", 1, 3600, connection_timeout_s),
	S("GPUPOOL_HEADER_TIMEOUT", 1, 3600, header_timeout_s),
	S("GPUPOOL_BODY_TIMEOUT", 1, 3600, body_timeout_s),
	S("GPUPOOL_STATEMENT_TIMEOUT_MS", 100, 600000, statement_timeout_ms),
	S("GPUPOOL_SESSION_TTL", 60, 30 * 86400, session_ttl_s),
	S("GPUPOOL_SHUTDOWN_GRACE", 0, 600, shutdown_grace_s),
	S("GPUPOOL_MAINTENANCE_INTERVAL", 1, 86400, maintenance_interval_s),
	S("GPUPOOL_IDEMPOTENCY_TTL", 72 * 3600, 365 * 86400, idempotency_ttl_s),
	S("GPUPOOL_REQUEST_TTL", 1, 365 * 86400, request_ttl_s),
	S("GPUPOOL_AGENT_GRACE", 2, 3600, agent_grace_s),
	S("GPUPOOL_PUSH_TIMEOUT_MS", 100, 60000, push_timeout_ms),
	S("GPUPOOL_PUSH_MAX_ATTEMPTS", 1, 100, push_max_attempts),
	S("GPUPOOL_PUSH_BACKOFF_MS", 10, 600000, push_backoff_ms),
	S("GPUPOOL_METRICS_RETENTION_DAYS", 1, 3650, metrics_retention_days),
	S("GPUPOOL_CURSOR_KEY_OVERLAP", 0, 30 * 86400, cursor_key_overlap_s),
	S("GPUPOOL_TELEMETRY_INTERVAL", 1, 3600, telemetry_interval_s),
	S("GPUPOOL_OUTBOX_RETENTION_DAYS", 0, 3650, outbox_retention_days),
	S("GPUPOOL_ALERTS_RETENTION_DAYS", 0, 3650, alerts_retention_days),
	S("GPUPOOL_PROFILES_RETENTION_DAYS", 0, 3650, profiles_retention_days),
	S("GPUPOOL_IDLE_AFTER", 1, 30 * 86400, idle_after_s),
	S("GPUPOOL_EXPIRY_INTERVAL", 1, 3600, expiry_interval_s),
	S("GPUPOOL_APPROVAL_WORKERS", 1, 8, approval_workers),
	S("GPUPOOL_BILLING_ACCRUAL_INTERVAL", 1, 86400, billing_accrual_interval_s),
	S("GPUPOOL_BILLING_SETTLE", 0, 86400, billing_settle_s),
	S("GPUPOOL_BILLING_CLOSE_GRACE", 0, 90 * 86400, billing_close_grace_s),
	S("GPUPOOL_BILLING_EXPORT_INTERVAL_MS", 10, 600000, billing_export_interval_ms),
	S("GPUPOOL_BILLING_EXPORT_LEASE", 1, 86400, billing_export_lease_s),
#ifndef NDEBUG
	S("GPUPOOL_TEST_ACCRUAL_HOLD_MS", 0, 600000, billing_test_hold_ms),
	S("GPUPOOL_TEST_EXPORT_PAGE_DELAY_MS", 0, 600000, billing_export_test_delay_ms),
#endif
};

static int
field(const struct config *c, size_t offset)
{
	int v;

	memcpy(&v, (const char *)c + offset, sizeof(v));
	return v;
}

/* Bad values: refused with the name and bounds; good ones taken; "" is the default. */
static void
test_int_bounds(void **state)
{
	struct config c, d;
	char err[256], want[256], v[32];
	const char *bad[] = { "x", "12x", "", "99999999999999999999" };

	(void)state;
	assert_int_equal(config_load(&d, err, sizeof(err)), 0);
	for (int i = 0; i < NELEM(ints); i++) {
		const struct int_setting *s = &ints[i];

		snprintf(want, sizeof(want), "%s must be an integer from %d to %d", s->name, s->min,
		    s->max);
		snprintf(v, sizeof(v), "%lld", (long long)s->min - 1);
		setenv(s->name, v, 1);
		err[0] = '\0';
		assert_int_equal(config_load(&c, err, sizeof(err)), -1);
		assert_string_equal(err, want);
		snprintf(v, sizeof(v), "%lld", (long long)s->max + 1);
		setenv(s->name, v, 1);
		assert_int_equal(config_load(&c, err, sizeof(err)), -1);
		assert_string_equal(err, want);
		for (int b = 0; b < NELEM(bad); b++) {
			setenv(s->name, bad[b], 1);
			if (bad[b][0] == '\0') {
				assert_int_equal(config_load(&c, err, sizeof(err)), 0);
				assert_int_equal(field(&c, s->offset), field(&d, s->offset));
				continue;
			}
			assert_int_equal(config_load(&c, err, sizeof(err)), -1);
			assert_string_equal(err, want);
		}
		snprintf(v, sizeof(v), "%d", s->min);
		setenv(s->name, v, 1);
		assert_int_equal(config_load(&c, err, sizeof(err)), 0);
		assert_int_equal(field(&c, s->offset), s->min);
		snprintf(v, sizeof(v), "%d", s->max);
		setenv(s->name, v, 1);
		assert_int_equal(config_load(&c, err, sizeof(err)), 0);
		assert_int_equal(field(&c, s->offset), s->max);
		unsetenv(s->name);
	}
}

static void
expect_error(const char *name, const char *value, const char *want)
{
	struct config c;
	char err[512] = "";

	setenv(name, value, 1);
	assert_int_equal(config_load(&c, err, sizeof(err)), -1);
	assert_string_equal(err, want);
	unsetenv(name);
}

static void
test_other_kinds(void **state)
{
	struct config c;
	char err[512] = "";

	(void)state;
	expect_error("GPUPOOL_IDLE_THRESHOLD", "1.5",
	    "GPUPOOL_IDLE_THRESHOLD must be a number from 0 to 1");
	expect_error("GPUPOOL_IDLE_THRESHOLD", "nan",
	    "GPUPOOL_IDLE_THRESHOLD must be a number from 0 to 1");
	{
		/*
		 * refused here, not by the listener after the database and the
		 * workers started: a host that is not an IPv4 address, a port
		 * with a sign, blanks or nothing
		 */
		const char *bad[] = { "8080", "127.0.0.1:70000", ":1", "nohost:80", "1.2.3.4.5:80",
			"[::1]:80", "example.com:80", "127.0.0.1:+80", "127.0.0.1: 80",
			"127.0.0.1:-0", "127.0.0.1:", "127.0.0.1:80x", "127.0.0.1 :80" };

		for (int i = 0; i < NELEM(bad); i++) {
			expect_error("GPUPOOL_LISTEN", bad[i],
			    "GPUPOOL_LISTEN must be host:port (host an IPv4 address or localhost, "
			    "port 0 to 65535)");
			expect_error("GPUPOOL_PROBE_LISTEN", bad[i],
			    "GPUPOOL_PROBE_LISTEN must be host:port (host an IPv4 address or "
			    "localhost, port 0 to 65535)");
		}
	}
	expect_error("GPUPOOL_TRUSTED_PROXIES", "10.0.0.0/33",
	    "GPUPOOL_TRUSTED_PROXIES must be up to 32 IPv4 addresses or networks (a.b.c.d or "
	    "a.b.c.d/n), separated by commas");
	expect_error("GPUPOOL_AGENT_CALLBACK_ALLOW", "a b",
	    "GPUPOOL_AGENT_CALLBACK_ALLOW must be IPv4/IPv6 addresses, networks (address/bits) "
	    "or host names, separated by commas");
	expect_error("GPUPOOL_METRICS_TOKEN", "short",
	    "GPUPOOL_METRICS_TOKEN must be 16 to 256 characters");
	expect_error("GPUPOOL_CORS_ORIGINS", "ftp://x",
	    "GPUPOOL_CORS_ORIGINS must be up to 16 origins (http[s]://host[:port], no path), "
	    "separated by commas");

	setenv("GPUPOOL_DATABASE_URL", "dbname=x", 1);
	setenv("GPUPOOL_IDLE_THRESHOLD", "0.5", 1);
	setenv("GPUPOOL_LISTEN", "localhost:0", 1);
	setenv("GPUPOOL_PROBE_LISTEN", "0.0.0.0:8081", 1);
	setenv("GPUPOOL_TRUSTED_PROXIES", "10.0.0.0/8,192.0.2.1", 1);
	setenv("GPUPOOL_AGENT_CALLBACK_ALLOW", "10.20.0.0/16,node.example", 1);
	setenv("GPUPOOL_METRICS_TOKEN", "0123456789abcdef", 1);
	setenv("GPUPOOL_CORS_ORIGINS", "https://a.example,http://b.example:8080", 1);
	setenv("GPUPOOL_ACCESS_LOG", "off", 1);
	setenv("GPUPOOL_LOG_LEVEL", "debug", 1);
	assert_int_equal(config_load(&c, err, sizeof(err)), 0);
	assert_string_equal(c.database_url, "dbname=x");
	assert_true(c.idle_threshold == 0.5);
	assert_string_equal(c.listen_host, "127.0.0.1");
	assert_int_equal(c.listen_port, 0);
	assert_string_equal(c.probe_host, "0.0.0.0");
	assert_int_equal(c.probe_port, 8081);
	assert_int_equal(c.ntrusted, 2);
	assert_string_equal(c.agent_callback_allow, "10.20.0.0/16,node.example");
	assert_string_equal(c.metrics_token, "0123456789abcdef");
	assert_string_equal(c.cors_origins, "https://a.example,http://b.example:8080");
	assert_false(c.access_log);
	assert_string_equal(c.log_level, "debug");

	/* only 0, false and off turn the access log off */
	setenv("GPUPOOL_ACCESS_LOG", "false", 1);
	assert_int_equal(config_load(&c, err, sizeof(err)), 0);
	assert_false(c.access_log);
	setenv("GPUPOOL_ACCESS_LOG", "0", 1);
	assert_int_equal(config_load(&c, err, sizeof(err)), 0);
	assert_false(c.access_log);
	setenv("GPUPOOL_ACCESS_LOG", "no", 1);
	assert_int_equal(config_load(&c, err, sizeof(err)), 0);
	assert_true(c.access_log);
	setenv("GPUPOOL_ACCESS_LOG", "", 1);
	assert_int_equal(config_load(&c, err, sizeof(err)), 0);
	assert_true(c.access_log);
	/* empty values are unset */
	setenv("GPUPOOL_LOG_LEVEL", "", 1);
	setenv("GPUPOOL_METRICS_TOKEN", "", 1);
	setenv("GPUPOOL_LISTEN", "", 1);
	assert_int_equal(config_load(&c, err, sizeof(err)), 0);
	assert_string_equal(c.log_level, "info");
	assert_null(c.metrics_token);
	assert_int_equal(c.listen_port, 8080);
	clear_env(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(test_defaults, clear_env),
		cmocka_unit_test_setup(test_int_bounds, clear_env),
		cmocka_unit_test_setup(test_other_kinds, clear_env),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
