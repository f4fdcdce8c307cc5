/*
 * pool.h - GPU pools and pool requests as pure logic: the request state
 * machine, what a pool's status accepts, SpecAndCount list arithmetic,
 * quota checks and the choice of allocations a shrink frees. No I/O.
 *
 * Item lists are canonical when each (model, profile) appears once with
 * a count >= 1 and the list is sorted by model, then profile (spec.h's
 * spec_compare order). Functions that produce lists produce canonical
 * ones; inputs say whether they must be canonical.
 */
#ifndef GP_DOMAIN_POOL_H
#define GP_DOMAIN_POOL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "core/states.h"
#include "domain/spec.h"

#define POOL_MAX_ITEMS 64 /* items of one request, pool or quota */

/*
 * May a request go from `from` to `to`? pending -> approved | rejected |
 * cancelled | expired; approved -> fulfilled | failed; nothing else.
 * Returns 0, or -1 with 409 "conflict" naming both states.
 */
int pool_request_transition(enum pool_request_state from, enum pool_request_state to,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * May a request of action a be submitted or approved on a pool in status
 * s? create: only the pending pool its submission made; expand, shrink
 * and release: a pool holding resources (provisioning, active,
 * degraded). Returns 0, or -1 with 409 "conflict".
 */
int pool_status_accepts(enum pool_status s, enum pool_action a, const char *pool_name,
    struct gp_error *err) __attribute__((warn_unused_result));

/* True when a pool in status s holds (or is about to hold) resources. */
bool pool_status_holds(enum pool_status s);

/*
 * Check that items[0..n) is a valid request list: 1..POOL_MAX_ITEMS
 * entries, each valid against the catalog (spec_validate), no (model,
 * profile) listed twice. Errors name "<field>[i]..." (field "items").
 * Then write the canonical (sorted) list to out[0..n).
 */
int pool_items_check(const struct catalog *c, const struct spec_count *items, int n,
    const char *field, struct spec_count *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Sort items[0..n) into canonical order, merging equal kinds. Returns the new n. */
int pool_items_canonical(struct spec_count *items, int n);

/*
 * out = a + b (both canonical; out may not alias them). out holds
 * POOL_MAX_ITEMS; -1 with 422 "validation_failed" when the sum has more
 * kinds or a count above SPEC_COUNT_MAX.
 */
int pool_items_add(const struct spec_count *a, int na, const struct spec_count *b, int nb,
    struct spec_count *out, int *nout, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * out = a - b (both canonical), dropping kinds that reach 0. Fails with
 * 409 "conflict" naming "items[i]" (the index in b) when b asks for a
 * kind a does not hold or for more than a holds.
 */
int pool_items_subtract(const struct spec_count *a, int na, const struct spec_count *b, int nb,
    struct spec_count *out, int *nout, struct gp_error *err) __attribute__((warn_unused_result));

/* The count of kind (model, profile) in items; 0 when absent. */
int pool_items_count(const struct spec_count *items, int n, const char *model, const char *profile);

/*
 * Quota check: would usage + add exceed quota? quota NULL (has_quota
 * false) means no limit; with a quota every kind it does not list is
 * limited to 0. Fails with 422 "quota_exceeded" and one field error
 * "items[i]" per offending entry of add (index in add), the message
 * naming the kind, the limit, what is used and what is asked; *first_bad
 * (may be NULL) gets the first offending index.
 */
int pool_quota_check(bool has_quota, const struct spec_count *quota, int nquota,
    const struct spec_count *usage, int nusage, const struct spec_count *add, int nadd,
    int *first_bad, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * One live allocation on a GPU that a shrink may touch. kind is the index
 * of the shrink item it could satisfy (an allocation of the shrinking
 * pool of that item's model and profile), or -1 for any other allocation
 * on the same GPU (another pool's, another kind, unmanaged). Allocations
 * already releasing are not listed: they are going away.
 */
struct shrink_alloc {
	int64_t id;
	int64_t gpu_id;
	int kind;
	int start;
};

/*
 * Choose which allocations free want[i] instances of each shrink item i
 * (nitems items), so that GPUs become whole (empty) where possible:
 * repeatedly, while something is wanted,
 *  1. if some GPU can be emptied completely (no other allocation, and
 *     each of its candidates' kinds still wanted at least that many),
 *     free all its allocations, taking the GPU with the fewest first
 *     (most whole GPUs per instance freed), then the lowest GPU id;
 *  2. otherwise free one wanted allocation on the GPU that is then
 *     closest to empty (fewest allocations left), lowest GPU id first,
 *     the highest start on it.
 * chosen[j] is set for the allocations to free. Deterministic for a
 * given input whatever its order. Fails with 409 "conflict" naming
 * "items[i]" when fewer than want[i] candidates exist.
 */
int pool_shrink_choose(const struct shrink_alloc *allocs, int n, const int *want, int nitems,
    bool *chosen, struct gp_error *err) __attribute__((warn_unused_result));

#endif
