/*
 * main.c - gpupoold: "serve" (the REST server), "migrate" and
 * "admin create-user". Start-up failures are fatal; nothing after the
 * daemon starts exits the process except SIGTERM/SIGINT.
 */
#include "config.h"

#include "api/api.h"
#include "auth/password.h"
#include "auth/roles.h"
#include "auth/token.h"
#include "core/json.h"
#include "core/log.h"
#include "db/db.h"
#include "db/db_agent.h"
#include "db/db_audit.h"
#include "db/db_keys.h"
#include "db/db_users.h"
#include "db/migrate.h"
#include "domain/catalog.h"
#include "domain/catalog_data.h"
#include "domain/health.h"
#include "http/server.h"
#include "workers/deferred.h"
#include "workers/billing_accrual.h"
#include "workers/billing_export.h"
#include "workers/expiry.h"
#include "workers/liveness.h"
#include "workers/pusher.h"
#include "workers/telemetry.h"
#include "workers/maintenance.h"
#include "workers/notifier.h"
#include "workers/periodic.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define GPUPOOLD_VERSION "0.1.0"

/*
 * The NOTIFY channel whose payloads are keys of the deferred-request
 * registry: NOTIFY gpupool_wake, 'node:42' (from any replica, or inside
 * the transaction that made the change) wakes what waits for node:42 on
 * every replica.
 */
#define GPUPOOLD_WAKE_CHANNEL "gpupool_wake"

extern const char gp_openapi_yaml[];
extern const size_t gp_openapi_yaml_len;

static void
usage(FILE *out)
{
	fputs("usage: gpupoold [serve]\n"
	      "       gpupoold migrate\n"
	      "       gpupoold admin create-user --username NAME --role admin|operator|billing|none\n"
	      "                (password on stdin; exits 3 when the user already exists)\n"
	      "       gpupoold admin rotate-cursor-key\n"
	      "                (a new key for list cursors; the old one's cursors are accepted\n"
	      "                for GPUPOOL_CURSOR_KEY_OVERLAP seconds by servers started after it)\n"
	      "       gpupoold version\n"
	      "\n"
	      "environment: GPUPOOL_DATABASE_URL (required), GPUPOOL_LISTEN (host:port, default\n"
	      "127.0.0.1:8080, port 0 picks a free one), GPUPOOL_THREADS, GPUPOOL_LOG_LEVEL,\n"
	      "GPUPOOL_ACCESS_LOG, GPUPOOL_MAX_CONNECTIONS, GPUPOOL_MAX_CONNECTIONS_PER_IP,\n"
	      "GPUPOOL_CONNECTION_TIMEOUT, GPUPOOL_STATEMENT_TIMEOUT_MS, GPUPOOL_SESSION_TTL,\n"
	      "GPUPOOL_SHUTDOWN_GRACE, GPUPOOL_IDEMPOTENCY_TTL (see docs/operations.md)\n",
	    out);
}

static void
setup(struct config *cfg)
{
	char errbuf[256];
	enum log_level level;
	struct db_config dc;

	if (config_load(cfg, errbuf, sizeof(errbuf)) < 0)
		fatal("invalid configuration: %s", errbuf);
	if (log_parse_level(cfg->log_level, &level) < 0)
		fatal("GPUPOOL_LOG_LEVEL must be debug, info, warn or error");
	log_set_level(level);
	if (cfg->database_url == NULL || cfg->database_url[0] == '\0')
		fatal("GPUPOOL_DATABASE_URL is not set");
	memset(&dc, 0, sizeof(dc));
	dc.url = cfg->database_url;
	dc.statement_timeout_ms = cfg->statement_timeout_ms;
	dc.application_name = "gpupoold";
	db_init(&dc);
}

static int
cmd_migrate(struct config *cfg)
{
	struct gp_error err;
	int version = 0;

	setup(cfg);
	gp_error_clear(&err);
	if (migrate_apply(db_thread(), &err) < 0 ||
	    migrate_current_version(db_thread(), &version, &err) < 0) {
		log_error(NULL, "migration failed", "error", err.message);
		return 1;
	}
	{
		char v[16];

		snprintf(v, sizeof(v), "%d", version);
		log_info(NULL, "schema is current", "version", v);
	}
	db_thread_close();
	return 0;
}

struct create_user {
	const char *username;
	const char *role;
	const char *phc;
	bool exists;
};

static int
create_user_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct create_user *c = arg;
	struct arena *a = arena_create();
	struct user_row u;
	struct audit_entry e;
	int rc = -1;

	if (db_user_get(db, a, c->username, &u, &c->exists, err) < 0 || c->exists)
		goto fail;
	if (db_user_insert(db, a, c->username, c->phc, c->role, &u, err) < 0)
		goto fail;
	memset(&e, 0, sizeof(e));
	e.actor = "gpupoold admin";
	e.action = "user.create";
	e.object_type = "user";
	e.object_id = c->username;
	{
		struct json_object *after = json_own(a, json_object_new_object());

		json_add_str(after, "username", u.username);
		json_add_str(after, "role", u.role);
		e.after_json = json_to_arena(a, after, NULL);
	}
	rc = db_audit_insert(db, a, &e, err);
fail:
	arena_destroy(a);
	return c->exists ? 0 : rc;
}

/* A new cursor key (docs/operations.md, "Rotating the cursor key"). */
static int
cmd_rotate_cursor_key(struct config *cfg)
{
	unsigned char candidate[32];
	char key[65];
	struct gp_error err;

	setup(cfg);
	gp_error_clear(&err);
	if (token_random_bytes(candidate, sizeof(candidate)) < 0) {
		fputs("gpupoold: no random bytes for the key\n", stderr);
		return 1;
	}
	if (db_cursor_key_rotate(db_thread(), candidate, sizeof(candidate), key, sizeof(key),
		&err) < 0) {
		token_wipe(candidate, sizeof(candidate));
		fprintf(stderr, "gpupoold: could not rotate the cursor key: %s\n", err.message);
		return 1;
	}
	token_wipe(candidate, sizeof(candidate));
	token_wipe(key, sizeof(key));
	printf("cursor key rotated: restart every replica within GPUPOOL_CURSOR_KEY_OVERLAP "
	       "(%d s); cursors of the old key are refused after it\n",
	    cfg->cursor_key_overlap_s);
	db_thread_close();
	return 0;
}

static int
cmd_create_user(struct config *cfg, int argc, char **argv)
{
	struct create_user c = { 0 };
	struct gp_error err;
	enum role role;
	char password[PASSWORD_MAX_LEN + 2];
	char phc[PASSWORD_HASH_MAX];
	size_t n;

	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--username") == 0 && i + 1 < argc)
			c.username = argv[++i];
		else if (strcmp(argv[i], "--role") == 0 && i + 1 < argc)
			c.role = argv[++i];
		else {
			usage(stderr);
			return 2;
		}
	}
	if (c.username == NULL || c.role == NULL || role_parse(c.role, &role) < 0) {
		usage(stderr);
		return 2;
	}
	if (fgets(password, sizeof(password), stdin) == NULL) {
		fputs("gpupoold: could not read the password from stdin\n", stderr);
		return 2;
	}
	n = strcspn(password, "\r\n");
	password[n] = '\0';
	if (n < PASSWORD_MIN_LEN || n > PASSWORD_MAX_LEN) {
		fprintf(stderr, "gpupoold: the password must be %d to %d characters\n",
		    PASSWORD_MIN_LEN, PASSWORD_MAX_LEN);
		explicit_bzero(password, sizeof(password));
		return 2;
	}
	setup(cfg);
	if (password_hash(password, phc, sizeof(phc)) < 0) {
		explicit_bzero(password, sizeof(password));
		fputs("gpupoold: could not hash the password\n", stderr);
		return 1;
	}
	explicit_bzero(password, sizeof(password));
	c.phc = phc;
	gp_error_clear(&err);
	if (db_tx(db_thread(), create_user_tx, &c, &err) < 0) {
		fprintf(stderr, "gpupoold: could not create the user: %s\n", err.message);
		return 1;
	}
	db_thread_close();
	if (c.exists) {
		fprintf(stderr, "gpupoold: user %s already exists\n", c.username);
		return 3;
	}
	fprintf(stderr, "gpupoold: created user %s with role %s\n", c.username, c.role);
	return 0;
}

static void
check_schema(struct app *app)
{
	struct gp_error err;
	int version = -1;

	for (int attempt = 0; attempt < 20; attempt++) {
		gp_error_clear(&err);
		if (migrate_current_version(db_thread(), &version, &err) == 0)
			break;
		usleep(250000);
	}
	if (version < 0) {
		log_warn(NULL, "database unreachable at start-up; serving 503 until it is back");
		return;
	}
	if (version > app->schema_version)
		fatal("the database schema (version %d) is newer than this gpupoold knows (%d); "
		      "upgrade gpupoold",
		    version, app->schema_version);
	if (version < app->schema_version)
		log_warn(NULL, "the database schema is behind; run gpupoold migrate");
	gp_error_clear(&err);
	if (migrate_verify(db_thread(), &err) < 0) {
		if (strcmp(err.code, "migration_changed") == 0)
			fatal("%s", err.message);
		log_warn(NULL, "could not verify migration checksums", "error", err.message);
	}
}

/*
 * The probe listener (GPUPOOL_PROBE_LISTEN): /healthz, /readyz and
 * /metrics on their own small daemon, reachable however many clients
 * hold the API port.
 */
static void
probe_start(const struct config *cfg, const struct http_config *api, struct http_server **out)
{
	struct http_config pc = *api;
	char p[16];
	int port = 0;

	pc.host = cfg->probe_host;
	pc.port = cfg->probe_port;
	pc.threads = 2;
	pc.connection_limit = 64;
	pc.per_ip_limit = 64;
	pc.timeout_s = 10;
	pc.header_timeout_s = 5;
	pc.body_timeout_s = 5;
	pc.max_body = 4096;
	pc.access_log = false;
	pc.probe_only = true;
	if (http_start(out, &pc, api_dispatch, api_dispatch_resume, &port) < 0)
		fatal("could not listen on %s:%d: %s (GPUPOOL_PROBE_LISTEN=%s:%d; set it to a free "
		      "host:port)",
		    cfg->probe_host, cfg->probe_port, strerror(errno), cfg->probe_host,
		    cfg->probe_port);
	snprintf(p, sizeof(p), "%d", port);
	log_info(NULL, "probe listener", "host", cfg->probe_host, "port", p);
}

/*
 * The agent listener (GPUPOOL_AGENT_LISTEN): the node agents' routes on
 * their own daemon, so that thousands of held long-polls take neither
 * the API's connections nor its 64 KiB per connection. A held poll
 * needs no time limit of its own here: a suspended connection is out of
 * libmicrohttpd's idle timeout, which covers the gaps between requests.
 */
static void
agent_listener_start(const struct config *cfg, const struct http_config *api,
    struct http_server **out, int *port)
{
	struct http_config ac = *api;

	ac.host = cfg->agent_host;
	ac.port = cfg->agent_port;
	ac.connection_limit = cfg->agent_max_connections;
	ac.per_ip_limit = cfg->agent_max_connections_per_ip;
	ac.conn_memory = (size_t)cfg->agent_connection_memory;
	ac.agent_only = true;
	if (http_start(out, &ac, api_dispatch, api_dispatch_resume, port) < 0)
		fatal("could not listen on %s:%d: %s (GPUPOOL_AGENT_LISTEN=%s:%d; set it to a free "
		      "host:port)",
		    cfg->agent_host, cfg->agent_port, strerror(errno), cfg->agent_host,
		    cfg->agent_port);
}

static int
cmd_serve(struct config *cfg)
{
	struct app app;
	struct http_config hc;
	struct http_server *server = NULL, *probe = NULL, *agents = NULL;
	struct maintenance *maint = NULL;
	struct periodic *expiry = NULL, *liveness = NULL, *pusher = NULL, *telemetry = NULL;
	struct xid_catalog *xids = NULL;
	struct periodic *accrual = NULL;
	struct periodic *exporter = NULL;
	struct notifier *notifier = NULL;
	struct catalog *catalog = NULL;
	struct gp_error err;
	sigset_t set;
	int port = 0, agent_port = 0, sig = 0;

	setup(cfg);
	gp_error_clear(&err);
	if (catalog_load(&catalog, gp_catalog_json, gp_catalog_json_len, &err) < 0)
		fatal("could not load the GPU catalog: %s", err.message);
	if (xid_catalog_load_builtin(&xids, &err) < 0)
		fatal("could not load the Xid catalog: %s", err.message);
	memset(&app, 0, sizeof(app));
	app.xids = xids;
	app.agent_grace_s = cfg->agent_grace_s;
	app.agent_callback_allow = cfg->agent_callback_allow;
	app.cors_origins = cfg->cors_origins;
	app.schema_version = migrate_latest_version();
	app.session_ttl_s = cfg->session_ttl_s;
	app.login_max_user_failures = 10;
	app.login_max_ip_failures = 100;
	app.login_window_s = 900;
	app.openapi = gp_openapi_yaml;
	app.openapi_len = gp_openapi_yaml_len;
	app.catalog = catalog;
	app.request_ttl_s = cfg->request_ttl_s;
	app.approval_workers = cfg->approval_workers;
	app.billing_settle_s = cfg->billing_settle_s;
	app.billing_close_grace_s = cfg->billing_close_grace_s;
	app.billing_test_hold_ms = cfg->billing_test_hold_ms;
	if (cfg->metrics_token != NULL) {
		app.metrics_protected = true;
		token_digest(cfg->metrics_token, strlen(cfg->metrics_token), app.metrics_digest);
	}
	check_schema(&app);
	app.metrics_retention_days = cfg->metrics_retention_days;
	{
		unsigned char candidate[32];

		/* the first replica's random key becomes every replica's */
		if (token_random_bytes(candidate, sizeof(candidate)) < 0 ||
		    db_server_key(db_thread(), "cursor", candidate, sizeof(candidate),
			app.cursor_key, sizeof(app.cursor_key), &err) < 0)
			fatal("could not read the cursor key: %s", err.message);
		token_wipe(candidate, sizeof(candidate));
	}
	{
		/* the key before the last rotation: its cursors for the overlap only */
		int64_t rotated_at = 0;
		bool found = false;

		if (db_cursor_key_previous(db_thread(), app.cursor_key_prev,
			sizeof(app.cursor_key_prev), &rotated_at, &found, &err) < 0)
			fatal("could not read the cursor key: %s", err.message);
		if (found)
			app.cursor_prev_until_s = rotated_at + cfg->cursor_key_overlap_s;
		else
			app.cursor_key_prev[0] = '\0';
	}
	{
		int64_t dropped = 0;

		/* today's partition must exist before the first sample arrives */
		if (db_metric_partitions(db_thread(), cfg->metrics_retention_days, 2, &dropped,
			&err) < 0)
			fatal("could not create the metric partitions: %s", err.message);
	}
	db_thread_close();

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	memset(&hc, 0, sizeof(hc));
	hc.host = cfg->listen_host;
	hc.port = cfg->listen_port;
	hc.threads = cfg->threads;
	hc.connection_limit = cfg->max_connections;
	hc.per_ip_limit = cfg->max_connections_per_ip;
	hc.timeout_s = cfg->connection_timeout_s;
	hc.header_timeout_s = cfg->header_timeout_s;
	hc.body_timeout_s = cfg->body_timeout_s;
	hc.max_body = 1024 * 1024;
	hc.access_log = cfg->access_log;
	memcpy(hc.trusted, cfg->trusted, sizeof(hc.trusted));
	hc.ntrusted = cfg->ntrusted;
	hc.ctx = &app;
	if (deferred_start(&app.waits) < 0)
		fatal("could not start the deferred-request registry");
	{
		const struct notifier_channel ch[] = {
			{ GPUPOOLD_WAKE_CHANNEL, notifier_wake_registry, app.waits },
		};
		struct notifier_config nc = {
			.url = cfg->database_url,
			.application_name = "gpupoold notifier",
			.channels = ch,
			.nchannels = 1,
		};

		if (notifier_start(&notifier, &nc) < 0)
			fatal("could not start the notifier");
	}
	if (api_start(&app) < 0)
		fatal("could not start the group-commit workers");
	if (http_start(&server, &hc, api_dispatch, api_dispatch_resume, &port) < 0)
		fatal("could not listen on %s:%d: %s (GPUPOOL_LISTEN=%s:%d; another process may be "
		      "using it: set GPUPOOL_LISTEN to a free host:port)",
		    cfg->listen_host, cfg->listen_port, strerror(errno), cfg->listen_host,
		    cfg->listen_port);
	if (cfg->probe_host[0] != '\0')
		probe_start(cfg, &hc, &probe);
	if (cfg->agent_host[0] != '\0')
		agent_listener_start(cfg, &hc, &agents, &agent_port);
	{
		struct maintenance_config mc = {
			.idempotency_ttl_s = cfg->idempotency_ttl_s,
			.login_window_s = app.login_window_s,
			.token_keep_s = 7 * 86400,
			.interval_s = cfg->maintenance_interval_s,
		};

		if (maintenance_start(&maint, &mc) < 0)
			fatal("could not start the maintenance worker");
	}
	if (expiry_start(&expiry, cfg->expiry_interval_s) < 0)
		fatal("could not start the expiry worker");
	if (liveness_start(&liveness, cfg->agent_grace_s) < 0)
		fatal("could not start the agent liveness worker");
	{
		struct pusher_config pc = {
			.interval_ms = 1000,
			.timeout_ms = cfg->push_timeout_ms,
			.max_attempts = cfg->push_max_attempts,
			.backoff_ms = cfg->push_backoff_ms,
			.callback_allow = cfg->agent_callback_allow,
		};

		if (pusher_start(&pusher, &pc) < 0)
			fatal("could not start the outbox pusher");
	}
	{
		struct telemetry_config tc = {
			.interval_s = cfg->telemetry_interval_s,
			.retention_days = cfg->metrics_retention_days,
			.idle_after_s = cfg->idle_after_s,
			.idle_threshold = cfg->idle_threshold,
			.outbox_retention_days = cfg->outbox_retention_days,
			.alerts_retention_days = cfg->alerts_retention_days,
			.profiles_retention_days = cfg->profiles_retention_days,
		};

		if (telemetry_start(&telemetry, &tc) < 0)
			fatal("could not start the telemetry worker");
	}
	{
		struct billing_accrual_config bc = {
			.interval_s = cfg->billing_accrual_interval_s,
			.settle_s = cfg->billing_settle_s,
			.hold_ms = cfg->billing_test_hold_ms,
		};

		if (billing_accrual_start(&accrual, &bc) < 0)
			fatal("could not start the billing accrual worker");
	}
	{
		struct billing_export_config ec = {
			.interval_ms = cfg->billing_export_interval_ms,
			.lease_s = cfg->billing_export_lease_s,
			.test_row_delay_ms = cfg->billing_export_test_delay_ms,
		};

		if (billing_export_start(&exporter, &ec) < 0)
			fatal("could not start the billing export worker");
	}
	{
		char p[16], t[16], ap[16];

		snprintf(p, sizeof(p), "%d", port);
		snprintf(t, sizeof(t), "%d", cfg->threads);
		snprintf(ap, sizeof(ap), "%d", agent_port);
		if (agents != NULL)
			log_info(NULL, "listening", "host", cfg->listen_host, "port", p, "threads",
			    t, "version", GPUPOOLD_VERSION, "agent_host", cfg->agent_host,
			    "agent_port", ap);
		else
			log_info(NULL, "listening", "host", cfg->listen_host, "port", p, "threads",
			    t, "version", GPUPOOLD_VERSION);
	}
	sigwait(&set, &sig);
	log_info(NULL, "shutting down", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	/* queued approvals and submissions first, while their connections live */
	api_drain(&app);
	/* every waiting request answers now; later ones answer at once */
	notifier_stop(notifier);
	deferred_stop(app.waits);
	http_stop(server, cfg->shutdown_grace_s * 1000);
	http_stop(agents, cfg->shutdown_grace_s * 1000);
	http_stop(probe, 1000);
	api_stop(&app);
	deferred_free(app.waits);
	periodic_stop(expiry);
	periodic_stop(liveness);
	periodic_stop(pusher);
	periodic_stop(telemetry);
	periodic_stop(accrual);
	periodic_stop(exporter);
	maintenance_stop(maint);
	catalog_free(catalog);
	xid_catalog_free(xids);
	token_wipe(app.cursor_key, sizeof(app.cursor_key));
	token_wipe(app.cursor_key_prev, sizeof(app.cursor_key_prev));
	log_info(NULL, "stopped");
	return 0;
}

int
main(int argc, char **argv)
{
	struct config cfg;
	const char *cmd = argc > 1 ? argv[1] : "serve";

	if (strcmp(cmd, "serve") == 0)
		return cmd_serve(&cfg);
	if (strcmp(cmd, "migrate") == 0)
		return cmd_migrate(&cfg);
	if (strcmp(cmd, "admin") == 0 && argc > 2 && strcmp(argv[2], "create-user") == 0)
		return cmd_create_user(&cfg, argc - 3, argv + 3);
	if (strcmp(cmd, "admin") == 0 && argc == 3 && strcmp(argv[2], "rotate-cursor-key") == 0)
		return cmd_rotate_cursor_key(&cfg);
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		printf("gpupoold %s (schema %d)\n", GPUPOOLD_VERSION, migrate_latest_version());
		return 0;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
