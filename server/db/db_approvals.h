/*
 * db_approvals.h - the pool workflow's writes, each several tables in
 * one statement: submit requests (history, pool), lock requests for a
 * decision, close one (reject, cancel), and what an approval writes (lock
 * the candidate GPUs, apply a shrink or release, apply a batch of creates
 * and expands, db_approvals.c); the expiry worker's claims and the pool
 * statuses' settle (db_pools.c). Write side: service/ includes it, api/
 * may not (scripts/check-boundaries); db_pools.h holds the reads.
 */
#ifndef GP_DB_APPROVALS_H
#define GP_DB_APPROVALS_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"
#include "core/states.h"
#include "db_pools.h"

/* ---- placement candidates ---- */

struct candidate_want {
	const char *model;
	bool mig_enabled;
	const char *layout;
	int limit;
};

/* A locked candidate GPU. */
struct locked_gpu {
	int64_t id;
	int64_t node_id;
	int index;
	const char *model;
	bool mig_enabled;
	const char *layout; /* as locked: current */
	const char *uuid;
	const char *node;
	bool managed; /* the node has an agent; else the operator realises its instances */
	int64_t cluster_id;
};

/* How db_candidates_lock reads the candidates. */
enum candidate_lock {
	CANDIDATES_SKIP, /* lock; skip what others hold (an approval's fast path) */
	CANDIDATES_WAIT, /* lock; fail 55P03 on what others hold (its slow path) */
	CANDIDATES_READ, /* lock nothing (a simulation): the rows a quiet fleet would lock */
};

/*
 * Lock placement candidates: for each want, at most limit placeable GPUs
 * of that class in (node, index, id) order, each locked FOR NO KEY
 * UPDATE, and returned with its current layout (a GPU whose layout
 * changed before the lock is left out). With CANDIDATES_SKIP, GPUs
 * locked by others are skipped and so is every GPU of a node another
 * approval is placing on (a transaction-scoped advisory lock per node,
 * taken here): concurrent approvals spread over nodes instead of
 * queueing. CANDIDATES_WAIT takes them NOWAIT. CANDIDATES_READ locks
 * nothing and reads the same rows in the same order, as both would when
 * nobody else holds any. Duplicates are possible across wants.
 * cluster_id: only that cluster's GPUs (0: every cluster).
 */
int db_candidates_lock(struct db *db, struct arena *a, const struct candidate_want *w, int nw,
    int64_t cluster_id, enum candidate_lock how, struct locked_gpu **out, int *n,
    struct gp_error *err) __attribute__((warn_unused_result));

/* ---- applying an approval ---- */

/* One new allocation. */
struct new_alloc {
	int64_t gpu_id;
	int64_t node_id;
	const char *profile;
	int start;
	int size;
	const char *state; /* reserved (for the agent) or ready (unmanaged node) */
};

/* A change of what a pool holds, at the approval's timestamp. */
struct approval_apply {
	int64_t request_id;
	int64_t pool_id;
	int64_t project_id;
	enum pool_action action;
	const char *new_items_json;  /* the pool's SpecAndCount afterwards */
	enum pool_status new_status; /* the pool's status afterwards */
	int64_t ends_us;             /* create: the pool's end time (0 none) */
	int64_t at_us;               /* ledger timestamp; 0: the transaction's */
	/* create / expand: allocations to insert (each with its state) and the
	 * ledger intervals they open, one per item; GPUs whose MIG mode
	 * the placement switches (empty GPUs only) */
	const struct new_alloc *allocs;
	int nallocs;
	const int64_t *switch_gpu_ids;
	int nswitch;
	const char *const *item_models;
	const char *const *item_profiles;
	const int *item_counts;
	int nitems;
	/* shrink / release: allocations to move to releasing; for shrink,
	 * every kind the request names with what the pool keeps of it
	 * (its open ledger intervals close, one reopens for a count > 0);
	 * release closes every open interval and lists nothing */
	const int64_t *free_ids;
	int nfree;
	const char *const *keep_models;
	const char *const *keep_profiles;
	const int *keep_counts;
	int nkeep;
	const int64_t *free_node_ids; /* nodes of the freed allocations */
	int nfree_nodes;
	/* who and why */
	int64_t actor_id; /* 0: the system */
	const char *actor;
	const char *note;
	const char *http_request_id;
	const char *audit_before_json;
	const char *audit_after_json;
};

/*
 * Apply a shrink or release approval in one statement: the request
 * becomes approved (history row), the chosen allocations move to
 * releasing, the pool gets its items and status, ledger intervals close
 * (and, for a shrink, reopen with what the pool keeps) at at_us or the
 * transaction timestamp, affected nodes' generation is bumped with one
 * outbox row each, and the audit row is written. The request and pool
 * must be locked. The statement checks that it changed exactly what was
 * decided (pools_check, else a retryable serialization failure); with
 * commit it is sent together with COMMIT (db_exec_commit) and the
 * caller's db_tx function must return right after it.
 */
int db_approval_free_apply(struct db *db, struct arena *a, const struct approval_apply *ap,
    bool commit, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Group commit: apply the create / expand approvals v[0..n), each of
 * another pool, in one statement sent with COMMIT, with the same effects
 * and checks as n calls of db_approval_apply (at_us must be 0).
 */
/* One outbox row (and generation bump) for a node an approval changed. */
struct outbox_row {
	int64_t node_id;
	int64_t request_id;
	int64_t pool_id;
};

/*
 * more[0..nmore): outbox rows of the batch's shrinks and releases, whose
 * own statements leave the nodes alone: every node of the batch is bumped
 * here, last and in id order (the lock order, docs/architecture.md). n
 * may be 0.
 */
int db_approvals_apply_many(struct db *db, struct arena *a, const struct approval_apply *const *v,
    int n, const struct outbox_row *more, int nmore, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Lock, in id order, the GPUs under the live allocations of pool_ids: a
 * batch's shrinks and releases take them all in one statement before they
 * change anything (the lock order, docs/architecture.md).
 */
int db_pools_lock_gpus(struct db *db, struct arena *a, const int64_t *pool_ids, int n,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Live (not releasing, not released) allocations for a shrink or release. */
struct live_alloc {
	int64_t id;
	int64_t gpu_id;
	int64_t node_id;
	const char *node;
	const char *gpu_uuid;
	int gpu_index;
	int64_t pool_id;
	const char *model;
	const char *profile;
	int start;
	int size;
};

/*
 * The live allocations of pool_id and, with neighbours, every other live
 * allocation on the GPUs they occupy; by GPU then start.
 */
int db_pool_live_allocations(struct db *db, struct arena *a, int64_t pool_id, bool neighbours,
    struct live_alloc **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

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

/* ---- the expiry worker ---- */

/*
 * Inside a transaction: lock one pending request past its lifetime
 * (SKIP LOCKED), the oldest first; *found false when there is none. The
 * caller closes it with db_request_close.
 */
int db_request_expire_due(struct db *db, struct arena *a, int64_t *id, bool *found,
    struct gp_error *err) __attribute__((warn_unused_result));

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
