/*
 * pool_service.h - the pool-request workflow, in one place for every
 * caller: submit, approve (group commit), reject / cancel, and the expiry
 * worker's passes (pending requests past their lifetime, pools past their
 * end time). Handlers (api/pool_requests.c) parse, call and reply; the
 * expiry worker (workers/expiry.c) calls the same functions, so a pool
 * released at its end time gets the rows and the audit document of a
 * release approved through the API.
 *
 * Nothing here knows HTTP: who acts is a struct service_actor, memory is
 * the caller's arena, and the group-commit queues (batch.c) call the
 * *_run functions with what they took.
 */
#ifndef GP_SERVICE_POOL_SERVICE_H
#define GP_SERVICE_POOL_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/json.h"
#include "db/db.h"
#include "db/db_approvals.h"
#include "db/db_pools.h"
#include "domain/approval.h"
#include "domain/catalog.h"
#include "domain/pool.h"
#include "domain/spec.h"

#define SERVICE_SUBMIT_BATCH_MAX 64  /* submissions per group-commit transaction */
#define SERVICE_APPROVE_BATCH_MAX 32 /* approvals per group-commit transaction */

/* Who acts: a user through a request, or the system (user_id 0, username NULL). */
struct service_actor {
	int64_t user_id;
	const char *username;
	const char *http_request_id; /* audit rows; NULL outside a request */
};

/*
 * Check that adding add[0..nadd) keeps the project within its quota (lock:
 * lock the quota row first). 409 quota_exceeded otherwise, with *item
 * (when item is not NULL) the first item over its limit as
 * {"model","profile","count","limit","used"} in arena a.
 */
int service_quota_check(struct db *db, struct arena *a, int64_t project_id, bool lock,
    const struct spec_count *add, int nadd, struct json_object **item, struct gp_error *err)
    __attribute__((warn_unused_result));

/* ---- submit ---- */

/*
 * What a caller runs for one item inside a group-commit transaction (the
 * API stores the item's Idempotency-Key there, so that the effect and its
 * stored answer commit together or not at all). claim runs before the
 * item changes anything; *dup true means another request holds the key
 * and the item must change nothing (its outcome is then "dup"). keep runs
 * once the item took effect, before the commit. Either may be NULL.
 */
struct service_tx_hooks {
	int (*claim)(struct db *db, void *ctx, bool *dup, struct gp_error *err);
	int (*keep)(struct db *db, void *ctx, struct gp_error *err);
	void *ctx;
};

struct service_submit {
	struct arena *arena; /* the caller's: every text of the submission */
	struct service_actor actor;
	int64_t project_id;
	const char *project;
	enum pool_action action;
	const char *pool;
	const char *justification;
	const char *cluster; /* create: the cluster the pool is bound to; NULL: the whole fleet */
	int64_t ends_us;     /* 0: none */
	int ttl_s;           /* pending lifetime */
	struct spec_count items[POOL_MAX_ITEMS];
	int nitems;
	struct service_tx_hooks hooks;
	/* service_submit_prepare */
	struct request_submit rs;
	/* service_submits_run */
	bool dup; /* hooks.claim: a duplicate, nothing inserted */
	int rc;
	struct gp_error err;
	struct submit_result res;
};

/*
 * Validate s against the pool it names (expand / shrink / release: it
 * exists and accepts the action; a shrink leaves something) and build
 * the insert. 422 / 409 as the API answers them.
 */
int service_submit_prepare(struct db *db, struct service_submit *s, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Insert the prepared submissions v[0..n) in one transaction (group
 * commit); a failed batch is inserted one by one. Each gets rc, err and
 * res.
 */
void service_submits_run(struct db *db, struct service_submit **v, int n);

/*
 * After service_submits_run: the request inserted, into *out; 409
 * conflict when the pool name was taken; a project with a quota is
 * checked and inserted here (409 quota_exceeded with *qitem).
 */
int service_submit_finish(struct db *db, struct service_submit *s, struct pool_request_row *out,
    struct json_object **qitem, struct gp_error *err) __attribute__((warn_unused_result));

/* ---- approve ---- */

enum service_approval_outcome {
	SERVICE_APPROVAL_OPEN,    /* still going ahead in this batch */
	SERVICE_APPROVAL_DONE,    /* applied (once the batch commits) */
	SERVICE_APPROVAL_REFUSED, /* err says why; nothing changed */
	SERVICE_APPROVAL_LATER,   /* shares a pool or quota: the next batch */
};

struct service_placed;
struct live_alloc;

struct service_approval {
	struct arena *arena; /* the caller's: texts that outlive the batch */
	struct service_actor actor;
	int64_t id;
	const char *note;
	int64_t at_us; /* ledger timestamp; 0: the transaction's */
	bool due;      /* the system's release of a pool past its end time */
	struct service_tx_hooks hooks;
	/* with the request locked, before anything else is checked: 0 to go on,
	 * else err refuses it (If-Match, RFC 9110 13.1.1); NULL: none */
	int (*precondition)(void *arg, const struct pool_request_row *r, struct gp_error *err);
	void *precondition_arg;
	bool dup; /* hooks.claim: a duplicate (outcome REFUSED), nothing changed */
	/* decided by the batch */
	enum service_approval_outcome outcome;
	struct gp_error err;
	enum pool_action action;
	struct approval_ctx ax;
	struct approval_apply ap;
	struct spec_count items[POOL_MAX_ITEMS];
	int nitems;
	struct spec_count pool_items[POOL_MAX_ITEMS];
	int npool;
	struct service_placed *placed;
	int nplaced;
	struct live_alloc *freed;
	int nfreed;
	int missing[POOL_MAX_ITEMS]; /* 409 insufficient_capacity: per item */
	struct json_object *quota_item;
	const char *after; /* the approved request: the audit row's "after" and the reply */
	size_t after_len;
};

/*
 * Decide the approvals v[0..n) in one transaction: lock every request
 * and its pool, validate each, check quotas, free for each shrink or
 * release, place every create / expand on one set of locked candidates,
 * apply. One that is refused changes nothing and does not stop the
 * others; two of one pool (or one project under a quota) never share a
 * batch: the later gets SERVICE_APPROVAL_LATER and goes in the next. A
 * failed transaction decides each alone. c (the catalog) places.
 */
void service_approvals_run(struct db *db, const struct catalog *c, struct service_approval **v,
    int n);

/* ---- reject and cancel ---- */

/*
 * Called with the request locked: 0 when actor may close it, else err
 * (404 / 403). NULL: anyone may.
 */
typedef int (*service_close_check_fn)(struct db *db, void *arg, const struct pool_request_row *r,
    struct gp_error *err);

/*
 * pending -> rejected (reason note) or cancelled, with history and
 * audit; a create's pending pool is released. *out: the request after.
 */
int service_request_close(struct db *db, struct arena *a, const struct service_actor *actor,
    int64_t id, bool cancel, const char *note, service_close_check_fn check, void *check_arg,
    struct pool_request_row *out, struct gp_error *err) __attribute__((warn_unused_result));

/* ---- expiry ---- */

/* Expire pending requests past their lifetime, in batches; *n: how many. */
int service_requests_expire(struct db *db, int64_t *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Release one pool past its end time: the system's release request,
 * approved at once through the approval path (the ledger closes at the
 * end time). *found false when no pool was due; *pool: the one released.
 */
int service_release_due(struct db *db, struct arena *a, bool *found, struct pool_row *pool,
    struct gp_error *err) __attribute__((warn_unused_result));

/* ---- /metrics ---- */

struct strbuf;

/* The group-commit counters, Prometheus text. */
void pool_approvals_metrics(struct strbuf *b);

#endif
