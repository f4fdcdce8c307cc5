/*
 * db_pools.h - the reads of quotas, pools, pool requests and their
 * history, and the quota row (one table). The pool workflow's writes
 * (submit, decide, approve, close, expiry, settle: several tables each)
 * are declared in db_approvals.h, which only service/ includes.
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

int db_request_get(struct db *db, struct arena *a, int64_t id, struct pool_request_row *out,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* Requests matching f with id > after_id, by id. */
int db_requests_list(struct db *db, struct arena *a, const struct request_filter *f,
    int64_t after_id, int limit, struct pool_request_row **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/* The request's history, oldest first. */
int db_request_events(struct db *db, struct arena *a, int64_t id, struct pool_request_event **out,
    int *n, struct gp_error *err) __attribute__((warn_unused_result));

/* ---- metrics ---- */

/* Pending pool requests and undelivered outbox rows (partial indexes; cheap). */
int db_pools_gauges(struct db *db, int64_t *pending_requests, int64_t *outbox_backlog,
    struct gp_error *err) __attribute__((warn_unused_result));

#endif
