/*
 * main.c - gpupoold: "serve" (the REST server), "migrate" and
 * "admin create-user". Start-up failures are fatal; nothing after the
 * daemon starts exits the process except SIGTERM/SIGINT.
 */
#include "config.h"

#include "api/api.h"
#include "api/dispatch.h"
#include "api/lifecycle.h"
#include "auth/node_cache.h"
#include "auth/password.h"
#include "auth/roles.h"
#include "auth/token.h"
#include "core/json.h"
#include "core/metrics_registry.h"
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
#include "workers/defrag_apply.h"
#include "workers/expiry.h"
#include "workers/liveness.h"
#include "workers/pusher.h"
#include "workers/telemetry.h"
#include "workers/maintenance.h"
#include "workers/notifier.h"
#include "workers/periodic.h"
#include "workers/heartbeat_queue.h"
#include "workers/pool_queues.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <string.h>
#include <unistd.h>

#define GPUPOOLD_VERSION "0.1.0"

/* The NOTIFY channel whose payloads are keys of the deferred-request registry. */
#define GPUPOOLD_WAKE_CHANNEL "gpupool_wake"
#define GPUPOOLD_TOKENS_CHANNEL "gpupool_tokens" /* migration 0028 */
#define NODE_CACHE_ENTRIES 65536
#define NODE_CACHE_TTL_S 60

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
	      "       gpupoold config --markdown readme|operations\n"
	      "                (the settings table of README.md or docs/operations.md)\n"
	      "\n"
	      "environment (GPUPOOL_DATABASE_URL is required; see docs/operations.md):\n",
	    out);
	config_names(out);
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

/* What cmd_serve starts and stops; the workers[] table fills it in. */
struct serve {
	const struct config *cfg;
	struct app app;
	struct http_config hc; /* the API listener's */
	struct http_server *server, *probe, *agents;
	struct notifier *notifier;
	struct maintenance *maint;
	struct periodic *expiry, *liveness, *pusher, *telemetry, *accrual, *exporter, *defrag;
	struct catalog *catalog;
	struct xid_catalog *xids;
	int port;       /* the API listener's, once started */
	int agent_port; /* the agent listener's, once started (0: none) */
};

/* The deferred-request registry: requests waiting for a key (long-polls). */
static int
start_registry(struct serve *s)
{
	return deferred_start(&s->app.waits);
}

/* Every waiting request answers now; later ones answer at once. */
static void
drain_registry(struct serve *s)
{
	deferred_stop(s->app.waits);
}

static void
stop_registry(struct serve *s)
{
	deferred_free(s->app.waits);
}

/*
 * NOTIFY gpupool_tokens, '<node id>' (a row of node_tokens changed,
 * migration 0031): forget that node's tokens; '' (a TRUNCATE), a payload
 * that is not a node id, or NULL (notifications lost): forget them all.
 */
static void
tokens_changed(const char *payload, void *arg)
{
	char *end = NULL;
	long long id = 0;

	if (payload != NULL && payload[0] >= '1' && payload[0] <= '9') {
		errno = 0;
		id = strtoll(payload, &end, 10);
	}
	if (id > 0 && errno == 0 && end != NULL && *end == '\0')
		node_cache_forget_node(arg, (int64_t)id);
	else
		node_cache_flush(arg);
}

/*
 * The notifier: NOTIFY gpupool_wake, 'node:42' (from any replica, or
 * inside the transaction that made the change) wakes what waits for
 * node:42 in the registry of every replica; NOTIFY gpupool_tokens
 * flushes the node-token cache, which answers only while the notifier is
 * connected (auth/node_cache.h).
 */
static int
start_notifier(struct serve *s)
{
	if (node_cache_create(&s->app.node_cache, NODE_CACHE_ENTRIES, NODE_CACHE_TTL_S) < 0)
		return -1;
	const struct notifier_channel ch[] = {
		{ GPUPOOLD_WAKE_CHANNEL, notifier_wake_registry, s->app.waits },
		{ GPUPOOLD_TOKENS_CHANNEL, tokens_changed, s->app.node_cache },
	};
	struct notifier_config nc = {
		.url = s->cfg->database_url,
		.application_name = "gpupoold notifier",
		.channels = ch,
		.nchannels = 2,
	};

	if (notifier_start(&s->notifier, &nc) < 0)
		return -1;
	s->app.notifier = s->notifier;
	return 0;
}

/*
 * The listeners still answer while the workers drain: authenticate() may
 * be reading the notifier's state right now, so it only halts here (not
 * connected from now on: the cache answers nothing) and is freed, with the
 * cache, once the listeners have stopped.
 */
static void
drain_notifier(struct serve *s)
{
	notifier_halt(s->notifier);
}

/* After the listeners stopped: nothing authenticates any more. */
static void
stop_notifier(struct serve *s)
{
	s->app.notifier = NULL;
	notifier_stop(s->notifier);
	s->notifier = NULL;
	node_cache_free(s->app.node_cache);
	s->app.node_cache = NULL;
}

/* Group commit of approvals and submissions; drained first, while their connections live. */
static int
start_pool_queues(struct serve *s)
{
	struct pool_queues_config qc = {
		.workers = s->cfg->approval_workers,
		.catalog = s->app.catalog,
	};

	return pool_queues_start(&s->app.pool_queues, &qc);
}

static void
drain_pool_queues(struct serve *s)
{
	pool_queues_drain(s->app.pool_queues);
}

static void
stop_pool_queues(struct serve *s)
{
	pool_queues_free(s->app.pool_queues);
	s->app.pool_queues = NULL;
}

/* gpupool_node_token_cache_*_total: node-token lookups answered from memory, or read. */
static void
node_cache_collect(struct strbuf *b, struct arena *a, void *arg)
{
	uint64_t hits, misses;

	(void)a;
	node_cache_stats(arg, &hits, &misses);
	metrics_single(b, "gpupool_node_token_cache_hits_total", "counter",
	    "Node-token authentications answered from memory (auth/node_cache.h).", "%llu",
	    (unsigned long long)hits);
	metrics_single(b, "gpupool_node_token_cache_misses_total", "counter",
	    "Node-token authentications that read node_tokens.", "%llu",
	    (unsigned long long)misses);
}

/* Group commit of node-agent heartbeats; drained like the pool queues. */
static int
start_heartbeats(struct serve *s)
{
	return heartbeat_queue_start(&s->app.heartbeats);
}

static void
drain_heartbeats(struct serve *s)
{
	heartbeat_queue_drain(s->app.heartbeats);
}

static void
stop_heartbeats(struct serve *s)
{
	heartbeat_queue_free(s->app.heartbeats);
	s->app.heartbeats = NULL;
}

/* The /metrics collectors of the database, the process, the registry and the handlers. */
static int
start_collectors(struct serve *s)
{
	if (metrics_register("db", db_metrics_collect, NULL) < 0 ||
	    metrics_register("process", metrics_process_collect, NULL) < 0 ||
	    metrics_register("deferred", deferred_metrics_collect, s->app.waits) < 0 ||
	    metrics_register("node_cache", node_cache_collect, s->app.node_cache) < 0)
		return -1;
	return api_start(&s->app);
}

static void
stop_collectors(struct serve *s)
{
	api_stop(&s->app);
}

static int
start_maintenance(struct serve *s)
{
	struct maintenance_config mc = {
		.idempotency_ttl_s = s->cfg->idempotency_ttl_s,
		.login_window_s = s->app.login_window_s,
		.token_keep_s = 7 * 86400,
		.interval_s = s->cfg->maintenance_interval_s,
	};

	return maintenance_start(&s->maint, &mc);
}

static void
stop_maintenance(struct serve *s)
{
	maintenance_stop(s->maint);
}

static int
start_expiry(struct serve *s)
{
	return expiry_start(&s->expiry, s->cfg->expiry_interval_s);
}

/* Defragmentation plans being applied (leader only). */
static int
start_defrag(struct serve *s)
{
	return defrag_apply_start(&s->defrag, s->cfg->defrag_apply_interval_s,
	    s->cfg->idle_threshold, s->cfg->defrag_move_timeout_s);
}

static int
start_liveness(struct serve *s)
{
	return liveness_start(&s->liveness, s->cfg->agent_grace_s);
}

static int
start_pusher(struct serve *s)
{
	struct pusher_config pc = {
		.interval_ms = 1000,
		.timeout_ms = s->cfg->push_timeout_ms,
		.max_attempts = s->cfg->push_max_attempts,
		.backoff_ms = s->cfg->push_backoff_ms,
		.callback_allow = s->cfg->agent_callback_allow,
	};

	return pusher_start(&s->pusher, &pc);
}

static int
start_telemetry(struct serve *s)
{
	struct telemetry_config tc = {
		.interval_s = s->cfg->telemetry_interval_s,
		.retention_days = s->cfg->metrics_retention_days,
		.idle_after_s = s->cfg->idle_after_s,
		.idle_threshold = s->cfg->idle_threshold,
		.outbox_retention_days = s->cfg->outbox_retention_days,
		.alerts_retention_days = s->cfg->alerts_retention_days,
		.profiles_retention_days = s->cfg->profiles_retention_days,
	};

	return telemetry_start(&s->telemetry, &tc);
}

static int
start_accrual(struct serve *s)
{
	struct billing_accrual_config bc = {
		.interval_s = s->cfg->billing_accrual_interval_s,
		.settle_s = s->cfg->billing_settle_s,
		.hold_ms = s->cfg->billing_test_hold_ms,
	};

	return billing_accrual_start(&s->accrual, &bc);
}

static int
start_exporter(struct serve *s)
{
	struct billing_export_config ec = {
		.interval_ms = s->cfg->billing_export_interval_ms,
		.lease_s = s->cfg->billing_export_lease_s,
		.test_row_delay_ms = s->cfg->billing_export_test_delay_ms,
	};

	return billing_export_start(&s->exporter, &ec);
}

/* Each periodic worker stops alike: a pass under way finishes. */
#define STOP_PERIODIC(field)                      \
	static void stop_##field(struct serve *s) \
	{                                         \
		periodic_stop(s->field);          \
	}
STOP_PERIODIC(expiry)
STOP_PERIODIC(liveness)
STOP_PERIODIC(pusher)
STOP_PERIODIC(telemetry)
STOP_PERIODIC(accrual)
STOP_PERIODIC(exporter)
STOP_PERIODIC(defrag)

/*
 * The probe listener (GPUPOOL_PROBE_LISTEN): /healthz, /readyz and
 * /metrics on their own small daemon, reachable however many clients
 * hold the API port. Off unless set.
 */
static int
start_probe(struct serve *s)
{
	const struct config *cfg = s->cfg;
	struct http_config pc = s->hc;
	char p[16];
	int port = 0;

	if (cfg->probe_host[0] == '\0')
		return 0;
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
	if (http_start(&s->probe, &pc, api_dispatch, api_dispatch_resume, &port) < 0)
		fatal("could not listen on %s:%d: %s (GPUPOOL_PROBE_LISTEN=%s:%d; set it to a free "
		      "host:port)",
		    cfg->probe_host, cfg->probe_port, strerror(errno), cfg->probe_host,
		    cfg->probe_port);
	snprintf(p, sizeof(p), "%d", port);
	log_info(NULL, "probe listener", "host", cfg->probe_host, "port", p);
	return 0;
}

static void
stop_probe(struct serve *s)
{
	http_stop(s->probe, 1000);
}

/*
 * The agent listener (GPUPOOL_AGENT_LISTEN): the node agents' routes on
 * their own daemon, so that thousands of held long-polls take neither
 * the API's connections nor its 64 KiB per connection. A held poll
 * needs no time limit of its own here: a suspended connection is out of
 * libmicrohttpd's idle timeout, which covers the gaps between requests.
 * Off unless set.
 */
static int
start_agents(struct serve *s)
{
	const struct config *cfg = s->cfg;
	struct http_config ac = s->hc;

	if (cfg->agent_host[0] == '\0')
		return 0;
	ac.host = cfg->agent_host;
	ac.port = cfg->agent_port;
	ac.threads = cfg->agent_threads;
	ac.connection_limit = cfg->agent_max_connections;
	ac.per_ip_limit = cfg->agent_max_connections_per_ip;
	ac.conn_memory = (size_t)cfg->agent_connection_memory;
	ac.agent_only = true;
	if (http_start(&s->agents, &ac, api_dispatch, api_dispatch_resume, &s->agent_port) < 0)
		fatal("could not listen on %s:%d: %s (GPUPOOL_AGENT_LISTEN=%s:%d; set it to a free "
		      "host:port)",
		    cfg->agent_host, cfg->agent_port, strerror(errno), cfg->agent_host,
		    cfg->agent_port);
	return 0;
}

static void
stop_agents(struct serve *s)
{
	http_stop(s->agents, s->cfg->shutdown_grace_s * 1000);
}

/* The API listener, last: every worker a request may need is running. */
static int
start_http(struct serve *s)
{
	const struct config *cfg = s->cfg;

	if (http_start(&s->server, &s->hc, api_dispatch, api_dispatch_resume, &s->port) < 0)
		fatal("could not listen on %s:%d: %s (GPUPOOL_LISTEN=%s:%d; another process may be "
		      "using it: set GPUPOOL_LISTEN to a free host:port)",
		    cfg->listen_host, cfg->listen_port, strerror(errno), cfg->listen_host,
		    cfg->listen_port);
	return 0;
}

/* Stops accepting, waits up to GPUPOOL_SHUTDOWN_GRACE for requests in progress. */
static void
stop_http(struct serve *s)
{
	http_stop(s->server, s->cfg->shutdown_grace_s * 1000);
}

/*
 * Every part of a running server, in start order (a failed start is
 * fatal). Shutdown runs two passes over the table, each in reverse
 * order: drain (stop taking work and answer what waits: the group-commit
 * queues answer what is queued, the notifier stops, the registry answers
 * every waiting request), then stop (the API listener with its grace
 * period, the probe listener, the periodic workers, then what they all
 * used). docs/architecture.md ("Threads", "Shutdown") describes them.
 */
struct worker {
	const char *name;
	int (*start)(struct serve *s);
	void (*drain)(struct serve *s); /* may be NULL */
	void (*stop)(struct serve *s);  /* may be NULL */
};

static const struct worker workers[] = {
	{ "deferred-request registry", start_registry, drain_registry, stop_registry },
	{ "notifier", start_notifier, drain_notifier, stop_notifier },
	{ "group-commit workers", start_pool_queues, drain_pool_queues, stop_pool_queues },
	{ "heartbeat workers", start_heartbeats, drain_heartbeats, stop_heartbeats },
	{ "metrics collectors", start_collectors, NULL, stop_collectors },
	{ "maintenance worker", start_maintenance, NULL, stop_maintenance },
	{ "expiry worker", start_expiry, NULL, stop_expiry },
	{ "agent liveness worker", start_liveness, NULL, stop_liveness },
	{ "outbox pusher", start_pusher, NULL, stop_pusher },
	{ "telemetry worker", start_telemetry, NULL, stop_telemetry },
	{ "billing accrual worker", start_accrual, NULL, stop_accrual },
	{ "billing export worker", start_exporter, NULL, stop_exporter },
	{ "defrag apply worker", start_defrag, NULL, stop_defrag },
	{ "probe listener", start_probe, NULL, stop_probe },
	{ "agent listener", start_agents, NULL, stop_agents },
	{ "HTTP server", start_http, NULL, stop_http },
};

#define NWORKERS ((int)(sizeof(workers) / sizeof(workers[0])))

/* The cursor keys: this one (the first replica's random key becomes every replica's) and the one before. */
static void
load_cursor_keys(struct serve *s)
{
	unsigned char candidate[32];
	int64_t rotated_at = 0;
	bool found = false;
	struct gp_error err;

	gp_error_clear(&err);
	if (token_random_bytes(candidate, sizeof(candidate)) < 0 ||
	    db_server_key(db_thread(), "cursor", candidate, sizeof(candidate), s->app.cursor_key,
		sizeof(s->app.cursor_key), &err) < 0)
		fatal("could not read the cursor key: %s", err.message);
	token_wipe(candidate, sizeof(candidate));
	/* the key before the last rotation: its cursors for the overlap only */
	if (db_cursor_key_previous(db_thread(), s->app.cursor_key_prev,
		sizeof(s->app.cursor_key_prev), &rotated_at, &found, &err) < 0)
		fatal("could not read the cursor key: %s", err.message);
	if (found)
		s->app.cursor_prev_until_s = rotated_at + s->cfg->cursor_key_overlap_s;
	else
		s->app.cursor_key_prev[0] = '\0';
}

/* struct app from the configuration, the catalogs and the database (read-only afterwards). */
static void
app_init(struct serve *s)
{
	const struct config *cfg = s->cfg;
	struct app *app = &s->app;
	struct gp_error err;
	int64_t dropped = 0;

	gp_error_clear(&err);
	if (catalog_load(&s->catalog, gp_catalog_json, gp_catalog_json_len, &err) < 0)
		fatal("could not load the GPU catalog: %s", err.message);
	if (xid_catalog_load_builtin(&s->xids, &err) < 0)
		fatal("could not load the Xid catalog: %s", err.message);
	memset(app, 0, sizeof(*app));
	app->xids = s->xids;
	app->agent_grace_s = cfg->agent_grace_s;
	app->agent_callback_allow = cfg->agent_callback_allow;
	app->cors_origins = cfg->cors_origins;
	app->schema_version = migrate_latest_version();
	app->session_ttl_s = cfg->session_ttl_s;
	app->login_max_user_failures = 10;
	app->login_max_ip_failures = 100;
	app->login_window_s = 900;
	app->openapi = gp_openapi_yaml;
	app->openapi_len = gp_openapi_yaml_len;
	app->catalog = s->catalog;
	app->request_ttl_s = cfg->request_ttl_s;
	app->idle_after_s = cfg->idle_after_s;
	app->idle_threshold = cfg->idle_threshold;
	app->defrag_plan_ttl_s = cfg->defrag_plan_ttl_s;
	app->approval_workers = cfg->approval_workers;
	app->billing_settle_s = cfg->billing_settle_s;
	app->billing_close_grace_s = cfg->billing_close_grace_s;
	app->billing_test_hold_ms = cfg->billing_test_hold_ms;
	app->poll_test_gap_ms = cfg->agent_test_poll_gap_ms;
	if (cfg->metrics_token != NULL) {
		app->metrics_protected = true;
		token_digest(cfg->metrics_token, strlen(cfg->metrics_token), app->metrics_digest);
	}
	check_schema(app);
	app->metrics_retention_days = cfg->metrics_retention_days;
	load_cursor_keys(s);
	/* today's partition must exist before the first sample arrives */
	if (db_metric_partitions(db_thread(), cfg->metrics_retention_days, 2, &dropped, &err) < 0)
		fatal("could not create the metric partitions: %s", err.message);
	db_thread_close();
}

/* The API listener's settings. */
static void
http_config_init(struct serve *s)
{
	const struct config *cfg = s->cfg;
	struct http_config *hc = &s->hc;

	memset(hc, 0, sizeof(*hc));
	hc->host = cfg->listen_host;
	hc->port = cfg->listen_port;
	hc->threads = cfg->threads;
	hc->connection_limit = cfg->max_connections;
	hc->per_ip_limit = cfg->max_connections_per_ip;
	hc->timeout_s = cfg->connection_timeout_s;
	hc->header_timeout_s = cfg->header_timeout_s;
	hc->body_timeout_s = cfg->body_timeout_s;
	hc->max_body = 1024 * 1024;
	hc->access_log = cfg->access_log;
	memcpy(hc->trusted, cfg->trusted, sizeof(hc->trusted));
	hc->ntrusted = cfg->ntrusted;
	hc->ctx = &s->app;
}

static int
cmd_serve(struct config *cfg)
{
	static struct serve s; /* the threads use it until the end */
	sigset_t set;
	int sig = 0;

	setup(cfg);
	s.cfg = cfg;
	app_init(&s);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);
	http_config_init(&s);
	for (int i = 0; i < NWORKERS; i++)
		if (workers[i].start(&s) < 0)
			fatal("could not start the %s", workers[i].name);
	{
		char p[16], t[16], ap[16];

		snprintf(p, sizeof(p), "%d", s.port);
		snprintf(t, sizeof(t), "%d", cfg->threads);
		snprintf(ap, sizeof(ap), "%d", s.agent_port);
		if (s.agents != NULL)
			log_info(NULL, "listening", "host", cfg->listen_host, "port", p, "threads",
			    t, "version", GPUPOOLD_VERSION, "agent_host", cfg->agent_host,
			    "agent_port", ap);
		else
			log_info(NULL, "listening", "host", cfg->listen_host, "port", p, "threads",
			    t, "version", GPUPOOLD_VERSION);
	}
	sigwait(&set, &sig);
	log_info(NULL, "shutting down", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT");
	for (int i = NWORKERS - 1; i >= 0; i--)
		if (workers[i].drain != NULL)
			workers[i].drain(&s);
	for (int i = NWORKERS - 1; i >= 0; i--)
		if (workers[i].stop != NULL)
			workers[i].stop(&s);
	catalog_free(s.catalog);
	xid_catalog_free(s.xids);
	token_wipe(s.app.cursor_key, sizeof(s.app.cursor_key));
	token_wipe(s.app.cursor_key_prev, sizeof(s.app.cursor_key_prev));
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
	if (strcmp(cmd, "config") == 0) {
		if (argc == 4 && strcmp(argv[2], "--markdown") == 0 &&
		    config_markdown(stdout, argv[3]) == 0)
			return fflush(stdout) == 0 ? 0 : 1;
		usage(stderr);
		return 2;
	}
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
