/*
 * approval.h - the decisions of the approval workflow that need no
 * database: which approvals may share a group-commit batch, which layout
 * classes a placement locks candidates from and how many, what a
 * create / expand inserts and what a shrink / release frees. The
 * service layer (service/pool_service.c) reads and writes the rows;
 * everything here is pure and unit-tested (tests/unit/test_approval.c).
 */
#ifndef GP_DOMAIN_APPROVAL_H
#define GP_DOMAIN_APPROVAL_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "domain/catalog.h"
#include "domain/placement.h"
#include "domain/pool.h"
#include "domain/spec.h"

#define APPROVAL_FAST_PARTIAL_CLASSES 4 /* partly used classes the fast path tries */
#define APPROVAL_FAST_PER_CLASS 8       /* GPUs per partly used class, fast path */
#define APPROVAL_SLOW_PER_CLASS 256     /* GPUs per class at most, slow path */
#define APPROVAL_EMPTY_PER_CLASS 512    /* empty GPUs per MIG mode at most */

/* ---- the batch rule ---- */

/* What the batch rule knows of one approval of a batch. */
struct approval_key {
	int64_t pool_id;
	int64_t project_id;
	bool has_quota; /* its project has a quota */
	bool open;      /* still going ahead in this batch */
};

/*
 * Whether v[i] must wait for the next batch: an open approval before it
 * (v[0..i)) names the same pool, or the same project while v[i]'s
 * project has a quota (a quota check must see the other's usage).
 */
bool approval_batch_later(const struct approval_key *v, int i);

/* ---- candidate classes ---- */

/* A layout class of a model: GPUs alike in MIG mode and layout. */
struct approval_class {
	bool mig_enabled;
	const char *layout;
	bool valid;             /* the layout obeys the hardware rules */
	struct placement_gpu g; /* the class as the engine sees one GPU of it */
};

/* A class of GPUs to lock, and how many of them at most. */
struct approval_want {
	const char *model;
	bool mig_enabled;
	const char *layout; /* "": empty GPUs */
	int limit;
};

/*
 * The classes of model m to lock candidates from for items[idx[0..nidx))
 * (items of m), appended to w (*nw entries, at most cap): empty GPUs in
 * each MIG mode the model has, then the partly used classes that can take
 * one of the items, busiest first (pack), then MIG mode on before off,
 * then by layout text. fast: only the APPROVAL_FAST_PARTIAL_CLASSES
 * busiest, APPROVAL_FAST_PER_CLASS GPUs each; otherwise every useful
 * class, APPROVAL_SLOW_PER_CLASS each. held: GPUs the batch holds
 * already; every class reaches that many further.
 */
void approval_wants(struct arena *a, const struct gpu_model *m, const struct spec_count *items,
    const int *idx, int nidx, const struct approval_class *cls, int ncls, bool fast, int held,
    struct approval_want *w, int *nw, int cap);

/* ---- what an approval writes ---- */

/* One placed instance, as the engine placed it on a GPU of node_id. */
struct approval_placed {
	int64_t gpu_id;
	int64_t node_id;
	const char *profile; /* "full" or a MIG profile */
	int start;
	int size;
	bool mode_switch;
};

/*
 * The arrays a create / expand writes: the GPUs whose MIG mode switches
 * (each once) and one ledger interval per item (model, profile, count).
 */
struct approval_grow {
	int64_t *switch_gpu_ids;
	int nswitch;
	const char **models;
	const char **profiles;
	int *counts;
	int nitems;
};

void approval_grow_arrays(struct arena *a, const struct approval_placed *p, int np,
    const struct spec_count *items, int nitems, struct approval_grow *out);

/* A live allocation on a GPU of a pool being shrunk or released. */
struct approval_live {
	int64_t id;
	int64_t gpu_id;
	int64_t pool_id;
	const char *model;
	const char *profile;
	int start;
};

/*
 * What a shrink (items[0..nitems), the pool holding pool_items) or a
 * release frees of live[0..nlive) (pool_id's allocations and, for a
 * shrink, their neighbours on the same GPUs): chosen[i] for each freed
 * one; and the pool's items afterwards (next, *nnext) with, per item,
 * what the pool keeps of its kind (keep_counts[0..nitems)): the ledger
 * intervals to reopen. A release frees every allocation of the pool and
 * keeps nothing. 409 when a shrink would leave the pool empty.
 */
int approval_free_choose(const struct approval_live *live, int nlive, int64_t pool_id, bool release,
    const struct spec_count *pool_items, int npool, const struct spec_count *items, int nitems,
    bool *chosen, struct spec_count *next, int *nnext, int *keep_counts, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
