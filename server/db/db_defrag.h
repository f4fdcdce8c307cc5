/*
 * db_defrag.h - what the defragmentation planner reads (the placeable
 * GPUs in scope and their live allocations, each judged idle or not) and
 * the stored plans (defrag_plans, migration 0022). docs/capacity.md.
 */
#ifndef GP_DB_DEFRAG_H
#define GP_DB_DEFRAG_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"

/* A placeable GPU (ready node, health ok) of the scope. */
struct defrag_gpu_row {
	int64_t id;
	int64_t node_id;
	int64_t cluster_id;
	int index;
	const char *model;
	const char *uuid;
	const char *node; /* node name */
	bool mig_enabled;
};

/* A live allocation on one of those GPUs. */
struct defrag_alloc_row {
	int64_t id;
	int64_t gpu_id;
	const char *profile; /* "full" or a MIG profile */
	int start;
	const char *state;
	int64_t pool_id;    /* 0: not managed by gpupool */
	int64_t project_id; /* 0 with pool_id */
	const char *pool;   /* NULL with pool_id 0 */
	const char *project;
	/*
	 * ready, of a pool, a MIG instance, unchanged for the idle window,
	 * no workload profile seen on it during the window (none current)
	 * and its average SM activity over the window below threshold (no
	 * samples count as idle): the rule of the idle alert (docs/agent.md)
	 */
	bool idle;
};

/*
 * Placeable GPUs in cluster_id (0: all) and, when nnodes > 0, on the
 * nodes named nodes[0..nnodes), ordered by (node_id, index, id); and
 * the live allocations on them, ordered by GPU and start, each judged
 * idle over the last idle_s seconds with threshold. One snapshot
 * (REPEATABLE READ), changing nothing.
 */
int db_defrag_fleet(struct db *db, struct arena *a, int64_t cluster_id, const char *const *nodes,
    int nnodes, int idle_s, double threshold, struct defrag_gpu_row **gpus, int *ngpus,
    struct defrag_alloc_row **allocs, int *nallocs, struct gp_error *err)
    __attribute__((warn_unused_result));

struct defrag_plan_row {
	int64_t id;
	const char *goal;
	const char *state;
	int moves;
	const char *body;       /* the plan's JSON */
	const char *created_by; /* username; NULL when the user is gone */
	int64_t created_us;
};

/* Store a plan (state planned); *id and *created_us get the row's. */
int db_defrag_plan_insert(struct db *db, struct arena *a, int64_t user_id, int64_t cluster_id,
    const char *goal, int moves, const char *body_json, int64_t *id, int64_t *created_us,
    struct gp_error *err) __attribute__((warn_unused_result));

int db_defrag_plan_get(struct db *db, struct arena *a, int64_t id, struct defrag_plan_row *out,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

#endif
