/*
 * db_pools.h - quotas, pools, pool requests and their history, locking a
 * request for its decision, and the expiry worker's claims. What an
 * approval writes (candidate GPUs, allocations, pool, usage ledger, node
 * generations, outbox, history and audit in one statement) is in
 * db_approvals.h.
 *
 * Item lists cross this interface as canonical JSON text (see
 * domain/pool.h) or as parallel arrays; rows become structs whose
 * strings live in the caller's arena. Statements that write several
 * tables are single statements with data-modifying CTEs, so a caller's
 * transaction costs few round trips.
 */
#ifndef GP_DB_POOLS_H
#define GP_DB_POOLS_H

#include <stdbool.h>
#include <stdint.h>

#include "core/states.h"
#include "db.h"

struct pool_row {
	int64_t id;
	int64_t project_id;
	const char *project; /* project name */
	const char *name;
	enum pool_status status;
	const char *items_json; /* canonical JSON array */
	int64_t ends_us;        /* 0: no end time */
	int64_t generation;
	int64_t created_us;
	int64_t updated_us;
	int64_t released_us; /* 0 until released */
	const char *cluster; /* the cluster it is bound to; NULL: the whole fleet */
};

/* An allocation of a pool as its views show it. */
struct pool_alloc_row {
	int64_t id;
	int64_t pool_id;
	int64_t gpu_id;
	int64_t node_id;
	const char *node;
	const char *gpu_uuid;
	int gpu_index;
	const char *model;
	const char *profile;
	int start;
	int size;
	enum allocation_state state;
	const char *device_uuid; /* NULL until the agent reports it */
	int64_t request_id;      /* 0 when not made by a request */
};

struct pool_request_row {
	int64_t id;
	int64_t project_id;
	const char *project;
	int64_t pool_id;
	const char *pool;
	enum pool_action action;
	const char *items_json;
	const char *justification;
	int64_t ends_us; /* 0: none */
	enum pool_request_state state;
	int64_t requested_by_id;  /* 0: the system */
	const char *requested_by; /* user name, NULL for the system */
	int64_t requested_us;
	int64_t expires_us;
	const char *decided_by; /* NULL until decided (or by the system) */
	int64_t decided_us;     /* 0 until decided */
	const char *note;       /* approval note or rejection reason */
	int64_t generation;
	int64_t cluster_id;  /* the pool's cluster; 0: unbound (the whole fleet) */
	const char *cluster; /* its name, NULL when unbound */
};

struct pool_request_event {
	int64_t at_us;
	const char *from_state; /* NULL for the submission */
	const char *to_state;
	const char *actor; /* NULL: the system */
	const char *note;
};

struct request_filter {
	int64_t project_id;     /* 0: any */
	int64_t member_user_id; /* > 0: only projects this user belongs to */
	bool has_state;         /* false: any state */
	enum pool_request_state state;
	int64_t pool_id; /* 0: any */
	/*
	 * NULL: any; else the requests of project_id's pools of that name
	 * (a released pool's name can be taken again: all of them)
	 */
	const char *pool_name;
};

/* ---- quotas ---- */

/* The project's quota; *has false when it has none. */
int db_quota_get(struct db *db, struct arena *a, int64_t project_id, bool *has,
    const char **items_json, int64_t *generation, int64_t *updated_us, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Lock the project's quota row (FOR UPDATE) and read it; *has false when none. */
int db_quota_lock(struct db *db, struct arena *a, int64_t project_id, bool *has,
    const char **items_json, struct gp_error *err) __attribute__((warn_unused_result));

/* Set (insert or replace) the quota; *generation gets the new one. */
int db_quota_put(struct db *db, struct arena *a, int64_t project_id, const char *items_json,
    int64_t *generation, int64_t *updated_us, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Remove the quota (no limit); *existed false when there was none. */
int db_quota_delete(struct db *db, struct arena *a, int64_t project_id, bool *existed,
    struct gp_error *err) __attribute__((warn_unused_result));

/* What the project's pools hold, summed per kind: a canonical JSON array. */
int db_project_usage(struct db *db, struct arena *a, int64_t project_id, const char **items_json,
    struct gp_error *err) __attribute__((warn_unused_result));

/* ---- pools ---- */

int db_pool_get(struct db *db, struct arena *a, int64_t id, struct pool_row *out, bool *found,
    struct gp_error *err) __attribute__((warn_unused_result));

/* The project's pool of that name that is not released. */
int db_pool_by_name(struct db *db, struct arena *a, int64_t project_id, const char *name,
    struct pool_row *out, bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* The project's pools with id > after_id (status NULL: any), by id. */
int db_pools_list(struct db *db, struct arena *a, int64_t project_id,
    const enum pool_status *status, int64_t after_id, int limit, struct pool_row **out, int *n,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Allocations that are not released of pools ids[0..nids), by pool,
 * node, GPU index, start; request_id > 0 restricts to those the request
 * made.
 */
int db_pool_allocations(struct db *db, struct arena *a, const int64_t *ids, int nids,
    int64_t request_id, struct pool_alloc_row **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/* ---- requests ---- */

struct request_submit {
	int64_t project_id;
	int64_t pool_id;       /* 0 for create: a new pending pool */
	const char *pool_name; /* create: the new pool's name */
	enum pool_action action;
	const char *items_json; /* canonical; "[]" for release */
	const char *justification;
	int64_t ends_us; /* 0: none */
	int ttl_s;       /* pending lifetime */
	int64_t actor_id;
	const char *actor;
	const char *http_request_id;  /* for the audit row */
	const char *audit_after_json; /* the request as submitted (id added here) */
	bool quota_checked;           /* the caller checked the project's quota */
	int64_t cluster_id;           /* create: the cluster the pool is bound to; 0: none */
};

/*
 * Insert the request (and for create its pending pool), its first
 * history row and the audit row, in one statement. 409 "conflict" when
 * create names a pool the project already has. Unless quota_checked,
 * nothing is inserted when the project has a quota: *needs_quota is set
 * and the caller checks the quota and calls again with quota_checked.
 */
int db_request_submit(struct db *db, struct arena *a, const struct request_submit *s,
    struct pool_request_row *out, bool *needs_quota, struct gp_error *err)
    __attribute__((warn_unused_result));

/* What became of one submission of db_requests_submit_many. */
struct submit_result {
	bool needs_quota;            /* nothing inserted: check the quota, submit alone */
	bool conflict;               /* nothing inserted: create of a pool name taken */
	struct pool_request_row out; /* otherwise the request inserted */
};

/*
 * Group commit: insert the submissions v[0..n) in one statement, each as
 * db_request_submit would, except that a create whose pool name is taken
 * does not fail the statement (res[i].conflict). commit: send COMMIT in
 * the same round trip (nothing else may follow in the transaction; the
 * statement's rows are read whatever the COMMIT's fate).
 */
int db_requests_submit_many(struct db *db, struct arena *a, const struct request_submit *const *v,
    int n, bool commit, struct submit_result *res, struct gp_error *err)
    __attribute__((warn_unused_result));

int db_request_get(struct db *db, struct arena *a, int64_t id, struct pool_request_row *out,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* Requests matching f with id > after_id, by id. */
int db_requests_list(struct db *db, struct arena *a, const struct request_filter *f,
    int64_t after_id, int limit, struct pool_request_row **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/* The request's history, oldest first. */
int db_request_events(struct db *db, struct arena *a, int64_t id, struct pool_request_event **out,
    int *n, struct gp_error *err) __attribute__((warn_unused_result));

/* What an approval starts from: the request and its pool, both locked. */
struct approval_ctx {
	struct pool_request_row req;
	enum pool_status pool_status;
	const char *pool_items_json;
	int64_t pool_ends_us;
	bool has_quota; /* the project has a quota (not locked) */
	int64_t now_us; /* the transaction's timestamp */
};

/* Lock request id and its pool (FOR NO KEY UPDATE) and read them. */
int db_request_lock(struct db *db, struct arena *a, int64_t id, struct approval_ctx *out,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Lock requests ids[0..n) and their pools (in id order) and read them:
 * out[i] and found[i] for ids[i], out[i]'s text in arenas[i].
 */
int db_requests_lock_many(struct db *db, struct arena *a, const int64_t *ids, int n,
    struct arena *const *arenas, struct approval_ctx *out, bool *found, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * A decision that allocates nothing: pending -> rejected | cancelled
 * (to_state), with history and audit; a create request's pending pool
 * becomes released. The request must be locked and pending.
 */
int db_request_close(struct db *db, struct arena *a, int64_t id, enum pool_request_state to_state,
    int64_t actor_id, const char *actor, const char *note, const char *http_request_id,
    const char *audit_action, const char *audit_before_json, struct pool_request_row *out,
    struct gp_error *err) __attribute__((warn_unused_result));

/* ---- metrics ---- */

/* Pending pool requests and undelivered outbox rows (partial indexes; cheap). */
int db_pools_gauges(struct db *db, int64_t *pending_requests, int64_t *outbox_backlog,
    struct gp_error *err) __attribute__((warn_unused_result));

/* ---- the expiry worker ---- */

/*
 * Expire at most limit pending requests whose expires_at has passed
 * (claimed FOR UPDATE SKIP LOCKED, so replicas share the work), with
 * history and audit; their pending pools are released. *n gets the count.
 */
int db_requests_expire(struct db *db, int limit, int64_t *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Claim one pool whose end time has passed and that still holds
 * resources (FOR NO KEY UPDATE SKIP LOCKED). *found false when none.
 * Inserts the system's release request for it (approved at once) and
 * returns its id in *request_id.
 */
int db_pool_claim_due(struct db *db, struct arena *a, struct pool_row *out, int64_t *request_id,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Confirm releases on nodes without an agent (migration 0018), then
 * settle the releasing and provisioning pools through pools_settle, the
 * one settle path (migration 0019; service/pool_status.h says what it
 * does). *n gets how many pools changed status.
 */
int db_pools_settle(struct db *db, int64_t *n, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
