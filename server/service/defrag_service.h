/*
 * defrag_service.h - a defragmentation plan computed from the database:
 * the fleet in scope read in one snapshot, each instance judged idle by
 * the idle alert's rule, handed to the planner (domain/defrag.h).
 * Nothing in the fleet changes. docs/capacity.md.
 */
#ifndef GP_SERVICE_DEFRAG_SERVICE_H
#define GP_SERVICE_DEFRAG_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "db/db.h"
#include "db/db_defrag.h"
#include "domain/catalog.h"
#include "domain/defrag.h"
#include "domain/placement.h"
#include "domain/spec.h"

struct defrag_request {
	int64_t cluster_id; /* 0: every cluster */
	const char *const *nodes;
	int nnodes; /* 0: every node */
	int idle_s;
	double threshold;
	enum defrag_goal_kind kind;
	const struct spec_count *items;
	int nitems;
	int max_moves; /* < 0: 1 % of the instances in scope, at least 1 */
};

/* Capacity of one model in scope (placement_capacity). */
struct defrag_model_capacity {
	const struct gpu_model *model;
	struct placement_capacity before, after;
};

struct defrag_outcome {
	struct defrag_gpu_row *gpus; /* the fleet in scope */
	int ngpus;
	struct defrag_alloc_row *allocs; /* its live allocations */
	int nallocs;
	int movable; /* of those, idle */
	int max_moves;
	/* the plan, in arena memory; moves[i].inst indexes allocs */
	struct defrag_move *moves;
	int nmoves;
	bool placeable_before, placeable_after;
	bool item_before[PLACEMENT_MAX_ITEMS], item_after[PLACEMENT_MAX_ITEMS];
	int free_gpus_before, free_gpus_after;
	bool moves_exhausted;
	const char **tenants; /* project names, sorted by id */
	int ntenants;
	struct defrag_model_capacity *models;
	int nmodels;
	/* where the time went, ms: the database read, the planner, the capacity figures */
	double read_ms, plan_ms, capacity_ms;
};

int defrag_service_plan(struct db *db, struct arena *a, const struct catalog *c,
    const struct defrag_request *req, struct defrag_outcome *out, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
