/*
 * api.h - what every handler shares: the server context (struct app) and
 * the helpers of common.c (body parsing, paging, If-Match, ETag, audit
 * rows, ids in paths, the caller's role). Each api/ file declares what it
 * offers in its own header (its handlers: routes.c includes them); the
 * dispatcher's, the route table's and the start-up's are dispatch.h,
 * routes.h and lifecycle.h.
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
struct node_cache;
struct notifier;
struct heartbeat_queue;
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
	struct node_cache *node_cache;   /* node tokens authenticated (auth/node_cache.h) */
	struct notifier *notifier;       /* its validity: the LISTEN connection's state */
	int billing_settle_s;            /* GPUPOOL_BILLING_SETTLE */
	int billing_close_grace_s;       /* GPUPOOL_BILLING_CLOSE_GRACE */
	int billing_test_hold_ms;        /* GPUPOOL_TEST_ACCRUAL_HOLD_MS (tests) */
	int poll_test_gap_ms;            /* GPUPOOL_TEST_POLL_GAP_MS (tests) */
	int idle_after_s;                /* GPUPOOL_IDLE_AFTER: the defrag planner's idle window */
	double idle_threshold;           /* GPUPOOL_IDLE_THRESHOLD */
	int defrag_plan_ttl_s;           /* GPUPOOL_DEFRAG_PLAN_TTL */
	struct heartbeat_queue *heartbeats; /* group commit of agents' heartbeats */
};

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

#endif
