/*
 * dispatch.h - the dispatcher (dispatch.c): http/'s entry point, deferred
 * answers and long-polls, Idempotency-Key hooks for group commit.
 */
#ifndef GP_API_DISPATCH_H
#define GP_API_DISPATCH_H

#include "api.h"
#include "workers/deferred.h"

/*
 * Entry point given to http/: match, authenticate, authorize, run,
 * record. Returns 0 when res holds the answer, 1 (API_DEFERRED) when a
 * handler deferred it; http/ then calls api_dispatch_resume once the
 * request was woken (api_wake).
 */
int api_dispatch(struct request *req, struct response *res);

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
 * api_defer's would, told which of the three happened. mark is
 * api_wait_mark(req, key), taken before the handler read what it waits
 * for: a wake since then (a commit the read did not see) runs cont at
 * once with DEFERRED_WOKEN instead of waiting (deferred_add_since).
 * Returns API_DEFERRED, or cont's own result when it ran at once (woken
 * since the mark, or the registry refused: stopping, DEFERRED_SHUTDOWN).
 * res is emptied first: cont writes the whole answer.
 */
typedef int (*api_wait_fn)(struct request *req, struct response *res, void *arg,
    enum deferred_outcome outcome, struct gp_error *err);
uint64_t api_wait_mark(struct request *req, const char *key);
int api_defer_until(struct request *req, struct response *res, const char *key, uint64_t mark,
    int64_t deadline_us, api_wait_fn cont, void *arg, struct gp_error *err);
/* api_defer_until, the only waiter under key: a request already waiting under it answers now. */
int api_defer_until_exclusive(struct request *req, struct response *res, const char *key,
    uint64_t mark, int64_t deadline_us, api_wait_fn cont, void *arg, struct gp_error *err);

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

#endif
