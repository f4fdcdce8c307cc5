/*
 * api.h - helpers shared by the resource handlers: the server context,
 * routes, pagination, If-Match, audit, project access.
 */
#ifndef GP_API_API_H
#define GP_API_API_H

#include <stdbool.h>
#include <stdint.h>

#include "auth/roles.h"
#include "auth/token.h"
#include "core/json.h"
#include "core/request.h"
#include "db/db.h"
#include "workers/deferred.h"

struct pool_queues;
struct catalog;
struct xid_catalog;

/* Server-wide, read-only after start-up; request->ctx points here. */
struct app {
	int schema_version;          /* what this binary expects */
	int session_ttl_s;           /* login token lifetime */
	int login_max_user_failures; /* per user name, per window */
	int login_max_ip_failures;   /* per client address, per window */
	int login_window_s;
	const char *openapi; /* the contract, embedded */
	size_t openapi_len;
	const struct catalog *catalog;
	const struct xid_catalog *xids;   /* GPU health from agents' Xid events */
	int agent_grace_s;                /* an agent silent this long: node unknown */
	const char *agent_callback_allow; /* GPUPOOL_AGENT_CALLBACK_ALLOW, or NULL */
	int metrics_retention_days;       /* raw GPU samples kept (partitions) */
	const char *cors_origins;         /* browser origins allowed (comma-separated), or NULL */
	char cursor_key[65];              /* HMAC key of list cursors (hex), shared by replicas */
	char cursor_key_prev[65];         /* the key before the last rotation ("" when none) */
	int64_t cursor_prev_until_s;      /* its cursors are accepted until then (epoch s) */
	int request_ttl_s;                /* a pending pool request expires after this */
	int approval_workers;             /* threads per group-commit queue */
	bool metrics_protected;           /* /metrics wants the bearer whose digest follows */
	unsigned char metrics_digest[TOKEN_DIGEST_LEN];
	struct pool_queues *pool_queues; /* group commit of approvals and submissions */
	struct deferred_registry *waits; /* requests waiting for a key (api_defer_until) */
	int billing_settle_s;            /* GPUPOOL_BILLING_SETTLE */
	int billing_close_grace_s;       /* GPUPOOL_BILLING_CLOSE_GRACE */
	int billing_test_hold_ms;        /* GPUPOOL_TEST_ACCRUAL_HOLD_MS (tests) */
	int idle_after_s;                /* GPUPOOL_IDLE_AFTER: the defrag planner's idle window */
	double idle_threshold;           /* GPUPOOL_IDLE_THRESHOLD */
	int defrag_plan_ttl_s;           /* GPUPOOL_DEFRAG_PLAN_TTL */
};

typedef int (*route_handler_fn)(struct request *req, struct response *res, struct gp_error *err);

/* Who may call a route (bits); per-object checks happen in the handler. */
enum {
	ALLOW_PUBLIC = 1 << 0, /* no token needed */
	ALLOW_USER = 1 << 1,   /* any authenticated user */
	ALLOW_ADMIN = 1 << 2,
	ALLOW_OPERATOR = 1 << 3,
	ALLOW_BILLING = 1 << 4,
	ALLOW_NODE = 1 << 5,    /* a node token (gpn_): the agent's own routes */
	AUTH_PROJECTS = 1 << 8, /* read the caller's memberships with the token */
};

struct route {
	const char *method;
	const char *pattern; /* "/v1/projects/{}/members/{}" */
	route_handler_fn handler;
	unsigned allow;
	/*
	 * The query parameters it takes, separated by spaces (NULL: none);
	 * the operation's in api/openapi.yaml (tests/contract). Any other,
	 * or one given twice, is 422 before the handler runs.
	 */
	const char *query;
};

#define Q_NONE NULL
/* limit and cursor, the query parameters of every paged list (api_page) */
#define Q_PAGE "limit cursor"

extern const struct route api_routes[];
extern const int api_nroutes;

/*
 * Entry point given to http/: match, authenticate, authorize, run,
 * record. Returns 0 when res holds the answer, 1 (API_DEFERRED) when a
 * handler deferred it; http/ then calls api_dispatch_resume once the
 * request was woken (api_wake).
 */
int api_dispatch(struct request *req, struct response *res);

/* The dashboard (ui.c): a path under /ui, and its answer. */
bool ui_path(const char *path);
void ui_serve(struct request *req, struct response *res);
void api_dispatch_resume(struct request *req, struct response *res);

/*
 * Deferred answers. A handler that hands its work to another thread
 * (group commit, see pool_requests.c) returns api_defer(req, cont, arg); the
 * other thread, once done, calls api_wake(req), after which cont runs on
 * an HTTP thread exactly like a handler (its error or response is the
 * answer; idempotency, logging and metrics follow as for any handler).
 * Between the two, only the working thread touches req (and its arena).
 */
#define API_DEFERRED 1
typedef int (
    *api_cont_fn)(struct request *req, struct response *res, void *arg, struct gp_error *err);
int api_defer(struct request *req, api_cont_fn cont, void *arg);
void api_wake(struct request *req);

/*
 * A long-poll: wait until key is woken (deferred_wake on app->waits, the
 * notifier for a NOTIFY from any replica), deadline_us (time_mono_us
 * clock) passes or the server stops; then cont runs on an HTTP thread as
 * api_defer's would, told which of the three happened. Returns
 * API_DEFERRED, or, when the registry refuses (stopping), cont's own
 * result at once with DEFERRED_SHUTDOWN.
 */
typedef int (*api_wait_fn)(struct request *req, struct response *res, void *arg,
    enum deferred_outcome outcome, struct gp_error *err);
int api_defer_until(struct request *req, struct response *res, const char *key, int64_t deadline_us,
    api_wait_fn cont, void *arg, struct gp_error *err);
/* api_defer_until, the only waiter under key: a request already waiting under it answers now. */
int api_defer_until_exclusive(struct request *req, struct response *res, const char *key,
    int64_t deadline_us, api_wait_fn cont, void *arg, struct gp_error *err);

/*
 * The handlers' /metrics collectors (lifecycle.c): api_start registers
 * them before http_start; api_stop after http_stop (and before the
 * catalog is freed) forgets every collector and the layout cache.
 */
int api_start(struct app *app) __attribute__((warn_unused_result));
void api_stop(struct app *app);

/*
 * Idempotency-Key hooks for work that a deferred request hands to a
 * group-commit transaction (each a no-op for a request without a key).
 * In that transaction, api_idem_claim claims req's key before the item
 * changes anything: *dup true means another request (or an earlier item
 * of the same batch) holds it, and the item must change nothing (the
 * dispatcher answers it from the key's row). api_idem_keep stores the
 * item's answer res in the same transaction, once it is known there.
 */
int api_idem_claim(struct db *db, struct request *req, bool *dup, struct gp_error *err)
    __attribute__((warn_unused_result));
int api_idem_keep(struct db *db, struct request *req, const struct response *res,
    struct gp_error *err) __attribute__((warn_unused_result));

/* The server context of a request. */
struct app *api_app(const struct request *req);

/* True when the request's Content-Type is type (case-insensitive, parameters allowed). */
bool api_content_type_is(const struct request *req, const char *type);

/* The media types a PATCH body may have (Accept-Patch, RFC 5789 3.1). */
#define API_ACCEPT_PATCH "application/json, application/merge-patch+json"

/* True for a PATCH body sent as application/merge-patch+json (RFC 7396). */
bool api_merge_patch(const struct request *req);

/*
 * RFC 7396: in a merge patch a member set to null removes that member.
 * keys (NULL-terminated) are the members the object cannot lack: under
 * application/merge-patch+json null for one of them is 422 naming it
 * (a nullable member, which null clears, is not listed). Under
 * application/json null counts as absent, as in every body. Returns -1
 * when it added an error.
 */
int api_patch_not_null(struct request *req, struct json_object *body, const char *const *keys,
    struct gp_error *err);

/* Parse the body as a JSON object (400/422 on failure). */
int api_body(struct request *req, struct json_object **out, struct gp_error *err)
    __attribute__((warn_unused_result));

/* limit (default 50, max 500) and cursor query parameters. */
int api_page(struct request *req, int *limit, int64_t *cursor, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Reply {"items": items, "next_cursor": ...}; next 0 gives null. */
void api_reply_list(struct request *req, struct response *res, struct json_object *items,
    int64_t next);

/* Opaque cursor text for a position of req's listing (signed, bound to its route). */
const char *api_cursor_encode(struct request *req, int64_t pos);

/*
 * If-Match (RFC 9110 13.1.1), the one reader of the header for every
 * versioned mutation: "*" or a list of entity tags. api_if_match reads
 * it before anything changes (412 when it is not that syntax);
 * api_if_match_check then evaluates it in the transaction against the
 * object's current generation (0 for an object shown with ETag "0"): a
 * listed strong tag equal to it, or "*", matches; a weak tag never
 * does. 412 when nothing matches. *guard is what the write must still
 * find (the generation, so that a concurrent change is 412), or 0 when
 * the change is unconditional (no If-Match, or "*").
 */
struct api_if_match {
	const char *value; /* the field value, lines joined; NULL when absent */
	bool any;          /* "*" */
};
int api_if_match(struct request *req, struct api_if_match *m, struct gp_error *err)
    __attribute__((warn_unused_result));
int api_if_match_check(const struct api_if_match *m, int64_t generation, const char *what,
    int64_t *guard, struct gp_error *err) __attribute__((warn_unused_result));

/* Set ETag from a generation. */
void api_etag(struct request *req, struct response *res, int64_t generation);

/* Write an audit row for the current request (inside its transaction). */
int api_audit(struct db *db, struct request *req, const char *action, const char *object_type,
    const char *object_id, int64_t project_id, struct json_object *before,
    struct json_object *after, struct gp_error *err) __attribute__((warn_unused_result));

/* True when s is a DNS label (RFC 1123: 1-63 of [a-z0-9-], no '-' at
 * either end): project, cluster, pool and namespace names. */
bool api_dns_label(const char *s);

/* Caller's global role. */
enum role api_role(const struct request *req);

/* The caller sees every project's objects (admin, operator, billing: role_sees_all_projects). */
bool api_sees_all_projects(const struct request *req);

/* Parse a decimal id from a path parameter (404 when not an id). */
int api_param_id(struct request *req, int idx, int64_t *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/* A query parameter as RFC 3339 time (0 when absent). */
int api_query_time(struct request *req, const char *name, int64_t *out, struct gp_error *err)
    __attribute__((warn_unused_result));

struct project_row;

enum project_access {
	PROJECT_READ,   /* members, admin, operator, billing */
	PROJECT_SUBMIT, /* owners and members (requests) */
	PROJECT_MANAGE, /* owners and admin */
};

/*
 * Load project `name` as the caller may see it: 404 when it does not
 * exist or the caller may not see it, 403 when visible but `need` is
 * not granted. *prole gets the caller's project role (NONE for staff).
 */
int api_project_access(struct db *db, struct request *req, const char *name,
    enum project_access need, struct project_row *out, enum project_role *prole,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Handlers (one file per resource). */
/* node agents (agent.c; the status report: agent_status.c) */
int api_enroll_tokens_create(struct request *req, struct response *res, struct gp_error *err);
int api_enroll_tokens_list(struct request *req, struct response *res, struct gp_error *err);
int api_enroll_tokens_delete(struct request *req, struct response *res, struct gp_error *err);
int api_agent_enroll(struct request *req, struct response *res, struct gp_error *err);
int api_agent_token_rotate(struct request *req, struct response *res, struct gp_error *err);
int api_node_agent_token_revoke(struct request *req, struct response *res, struct gp_error *err);
int api_agent_desired_state(struct request *req, struct response *res, struct gp_error *err);
int api_agent_status(struct request *req, struct response *res, struct gp_error *err);
int api_agent_heartbeat(struct request *req, struct response *res, struct gp_error *err);
int api_agent_metrics(struct request *req, struct response *res, struct gp_error *err);
int api_agent_profiles(struct request *req, struct response *res, struct gp_error *err);
int api_gpu_metrics(struct request *req, struct response *res, struct gp_error *err);
int api_alerts_list(struct request *req, struct response *res, struct gp_error *err);
int api_alerts_ack(struct request *req, struct response *res, struct gp_error *err);
int api_profiles_list(struct request *req, struct response *res, struct gp_error *err);
const char *alerts_metrics_text(struct arena *a);
int api_node_mig_config(struct request *req, struct response *res, struct gp_error *err);

int api_healthz(struct request *req, struct response *res, struct gp_error *err);
int api_readyz(struct request *req, struct response *res, struct gp_error *err);
int api_metrics(struct request *req, struct response *res, struct gp_error *err);
int api_openapi(struct request *req, struct response *res, struct gp_error *err);

int api_login(struct request *req, struct response *res, struct gp_error *err);
int api_me(struct request *req, struct response *res, struct gp_error *err);
int api_tokens_create(struct request *req, struct response *res, struct gp_error *err);
int api_tokens_list(struct request *req, struct response *res, struct gp_error *err);
int api_logout(struct request *req, struct response *res, struct gp_error *err);
int api_tokens_get(struct request *req, struct response *res, struct gp_error *err);
int api_tokens_delete(struct request *req, struct response *res, struct gp_error *err);

int api_users_create(struct request *req, struct response *res, struct gp_error *err);
int api_users_list(struct request *req, struct response *res, struct gp_error *err);
int api_users_get(struct request *req, struct response *res, struct gp_error *err);
int api_users_patch(struct request *req, struct response *res, struct gp_error *err);

int api_projects_create(struct request *req, struct response *res, struct gp_error *err);
int api_projects_list(struct request *req, struct response *res, struct gp_error *err);
int api_projects_get(struct request *req, struct response *res, struct gp_error *err);
int api_projects_patch(struct request *req, struct response *res, struct gp_error *err);
int api_members_list(struct request *req, struct response *res, struct gp_error *err);
int api_members_put(struct request *req, struct response *res, struct gp_error *err);
int api_members_delete(struct request *req, struct response *res, struct gp_error *err);

int api_audit_list(struct request *req, struct response *res, struct gp_error *err);

/* capacity inventory (catalog.c, clusters.c, nodes.c, gpus.c, capacity.c) */
int api_catalog_models_list(struct request *req, struct response *res, struct gp_error *err);
int api_catalog_models_get(struct request *req, struct response *res, struct gp_error *err);
int api_clusters_create(struct request *req, struct response *res, struct gp_error *err);
int api_clusters_list(struct request *req, struct response *res, struct gp_error *err);
int api_clusters_get(struct request *req, struct response *res, struct gp_error *err);
int api_clusters_patch(struct request *req, struct response *res, struct gp_error *err);
int api_clusters_delete(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_create(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_list(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_get(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_patch(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_cordon(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_uncordon(struct request *req, struct response *res, struct gp_error *err);
int api_nodes_drain(struct request *req, struct response *res, struct gp_error *err);
int api_gpus_create(struct request *req, struct response *res, struct gp_error *err);
int api_node_gpus_list(struct request *req, struct response *res, struct gp_error *err);
int api_gpus_list(struct request *req, struct response *res, struct gp_error *err);
int api_gpus_get(struct request *req, struct response *res, struct gp_error *err);
int api_gpus_patch(struct request *req, struct response *res, struct gp_error *err);
int api_capacity_get(struct request *req, struct response *res, struct gp_error *err);
int api_capacity_simulate(struct request *req, struct response *res, struct gp_error *err);
/* defragmentation plans (defrag.c) */
int api_defrag_plans_create(struct request *req, struct response *res, struct gp_error *err);
int api_defrag_plans_get(struct request *req, struct response *res, struct gp_error *err);
int api_defrag_plans_list(struct request *req, struct response *res, struct gp_error *err);
int api_defrag_plans_apply(struct request *req, struct response *res, struct gp_error *err);
int api_defrag_plans_cancel(struct request *req, struct response *res, struct gp_error *err);

/* pools.c, pool_requests.c: quotas, pools, the pool-request workflow */
int api_quota_get(struct request *req, struct response *res, struct gp_error *err);
int api_quota_put(struct request *req, struct response *res, struct gp_error *err);
int api_quota_delete(struct request *req, struct response *res, struct gp_error *err);
int api_pools_list(struct request *req, struct response *res, struct gp_error *err);
int api_pools_get(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_submit(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_list(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_get(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_approve(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_reject(struct request *req, struct response *res, struct gp_error *err);
int api_pool_requests_cancel(struct request *req, struct response *res, struct gp_error *err);

/* billing.c: rates, accrual, usage, periods, adjustments (docs/billing.md) */
int api_billing_rates_create(struct request *req, struct response *res, struct gp_error *err);
int api_billing_rates_list(struct request *req, struct response *res, struct gp_error *err);
int api_billing_accrual_run(struct request *req, struct response *res, struct gp_error *err);
int api_billing_usage(struct request *req, struct response *res, struct gp_error *err);
int api_billing_periods_list(struct request *req, struct response *res, struct gp_error *err);
int api_billing_periods_close(struct request *req, struct response *res, struct gp_error *err);
int api_billing_adjustments_create(struct request *req, struct response *res, struct gp_error *err);
/* billing_export.c: export jobs and downloads; reports.c: utilization (docs/billing.md) */
int api_billing_exports_create(struct request *req, struct response *res, struct gp_error *err);
int api_billing_exports_list(struct request *req, struct response *res, struct gp_error *err);
int api_billing_exports_get(struct request *req, struct response *res, struct gp_error *err);
int api_billing_exports_download(struct request *req, struct response *res, struct gp_error *err);
int api_reports_utilization(struct request *req, struct response *res, struct gp_error *err);

#endif
