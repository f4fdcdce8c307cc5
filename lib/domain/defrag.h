/*
 * defrag.h - the MIG defragmentation planner: which idle MIG instances to
 * move, and where, so that a goal becomes placeable (docs/capacity.md).
 * Pure computation like the placement engine it builds on: no I/O, no
 * locks, no global state; the caller's arrays are never changed.
 *
 * Input: the fleet in scope (GPUs as the placement engine sees them, each
 * with a group: moves stay within a group, the caller's cluster), the
 * live instances on them and, per instance, whether it may move (the
 * caller decides: a ready MIG instance without a workload profile and with
 * activity below the idle threshold for the idle window). A whole-GPU
 * allocation never moves. Output: an ordered list of moves. Executed in
 * order, each move's target slices are free when it runs, and the final
 * layout keeps every hardware rule (catalog starts, no overlap,
 * max_instances, compute) because every step is checked with
 * placement_gpu_add.
 *
 * Goals:
 *  - items (a request "H100-80GB/7g.80gb=4", ...): for each instance of
 *    the items, largest profile first, a place where it fits now is held
 *    while planning (best fit on a GPU in use, else an empty GPU, as the
 *    engine packs before it takes an empty GPU); when it fits nowhere the
 *    planner frees a place: of every (GPU, start) of the profile whose
 *    overlapping instances may all move, the one needing fewest moves
 *    (then fewest slices, then the lowest GPU position), provided every
 *    evicted instance finds a new home (see below). The holds are
 *    dropped at the end; placeable_before and placeable_after are the
 *    placement engine's verdict on the whole request (placement_find,
 *    exact search included, as an approval would decide).
 *  - free GPUs: empty GPUs holding fewest instances first, each emptied
 *    only when all its instances are movable and find a new home, until
 *    the moves run out.
 * New home of an evicted instance: a GPU of the same model and group that
 *    already holds instances (never an empty one: that would use the
 *    capacity the plan tries to make), best fit: the fewest free memory
 *    slices left, then the best future-usable space (the engine's rule
 *    3); of GPUs with that layout, the first of its bucket that admits
 *    it (deterministic for one input, not the lowest position: the
 *    buckets reorder as GPUs change layout; at most 64 are tried per
 *    layout); its own GPU counts (outside the
 *    reserved slices). Each instance moves at most once per plan.
 * Limits: at most max_moves moves; a candidate whose evictions would
 * exceed what is left is skipped. The result is a good plan, not an
 * optimal one (greedy, one place at a time).
 */
#ifndef GP_DOMAIN_DEFRAG_H
#define GP_DOMAIN_DEFRAG_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "domain/catalog.h"
#include "domain/placement.h"
#include "domain/spec.h"

/* One live allocation on gpus[gpu] of the fleet. */
struct defrag_instance {
	int64_t id;                        /* allocation id */
	int gpu;                           /* index into the fleet's gpus */
	const struct mig_profile *profile; /* NULL: a whole GPU (never moved) */
	int start;
	int64_t tenant; /* project id; 0 when none (unmanaged) */
	bool movable;   /* idle, ready, managed: the caller's judgement */
};

struct defrag_fleet {
	const struct placement_gpu *gpus; /* layout holds exactly insts */
	const int64_t *group;             /* per GPU: moves stay in one group */
	int ngpus;
	const struct defrag_instance *insts;
	int ninsts;
};

enum defrag_goal_kind {
	DEFRAG_GOAL_ITEMS,     /* make the items placeable */
	DEFRAG_GOAL_FREE_GPUS, /* empty as many GPUs as the moves allow */
};

struct defrag_goal {
	enum defrag_goal_kind kind;
	const struct spec_count *items; /* DEFRAG_GOAL_ITEMS */
	int nitems;                     /* 1..PLACEMENT_MAX_ITEMS */
	int max_moves;                  /* >= 0 */
};

struct defrag_move {
	int inst;     /* index into the fleet's insts */
	int from_gpu; /* index into the fleet's gpus */
	int from_start;
	int to_gpu;
	int to_start;
	bool make_before_break; /* the new instance can exist before the
				 * old one is destroyed (they do not share the
				 * GPU's slices or compute) */
};

struct defrag_plan {
	struct defrag_move *moves; /* malloc'd, nmoves entries */
	int nmoves;
	struct placement_gpu *after; /* malloc'd: the fleet's layout after */
	int ngpus;
	/* DEFRAG_GOAL_ITEMS: the whole request, and each item alone */
	bool placeable_before;
	bool placeable_after;
	bool item_before[PLACEMENT_MAX_ITEMS];
	bool item_after[PLACEMENT_MAX_ITEMS];
	int free_gpus_before; /* empty GPUs in the fleet */
	int free_gpus_after;
	int64_t *tenants; /* malloc'd: distinct tenants of moved instances, ascending */
	int ntenants;
	bool moves_exhausted; /* a candidate was skipped for want of moves */
};

/*
 * Plan for goal over fleet. Items are validated as by placement_find
 * (422); 500 when memory could not be had; 409 conflict when the fleet's
 * layout does not match its instances. On success *plan is filled and
 * owned by the caller (defrag_plan_free).
 */
int defrag_plan(const struct catalog *c, const struct defrag_fleet *fleet,
    const struct defrag_goal *goal, struct defrag_plan *plan, struct gp_error *err)
    __attribute__((warn_unused_result));

void defrag_plan_free(struct defrag_plan *plan);

#endif
