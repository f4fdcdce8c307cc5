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
	const char *error;   /* why it failed; NULL */
	const char *cluster; /* the body's cluster (list rows) */
	const char *items;   /* the body's items as JSON text (list rows) */
	int progress[5];     /* moves pending, running, done, skipped, failed */
};

/* A move of an applied plan (defrag_moves, migration 0026). */
struct defrag_move_row {
	int ordinal;
	const char *state;
	const char *reason;     /* NULL */
	int64_t new_allocation; /* 0: none */
	const char *old_uuid;   /* NULL */
	const char *new_uuid;   /* NULL */
	int64_t updated_us;
};

/* Store a plan (state planned); *id and *created_us get the row's. */
int db_defrag_plan_insert(struct db *db, struct arena *a, int64_t user_id, int64_t cluster_id,
    const char *goal, int moves, const char *body_json, int64_t *id, int64_t *created_us,
    struct gp_error *err) __attribute__((warn_unused_result));

int db_defrag_plan_get(struct db *db, struct arena *a, int64_t id, struct defrag_plan_row *out,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* The moves of plan id, by ordinal (none before it is applied). */
int db_defrag_moves(struct db *db, struct arena *a, int64_t id, struct defrag_move_row **out,
    int *n, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Plans newest first with id < before (0: from the newest), state (NULL:
 * any), at most limit; body stays NULL, cluster, items and progress are
 * set.
 */
int db_defrag_plans_list(struct db *db, struct arena *a, int64_t before, const char *state,
    int limit, struct defrag_plan_row **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * defrag_apply() / defrag_cancel() (migration 0026) in the caller's
 * transaction: *outcome is their answer (applying, already, expired,
 * not_applicable, not_found; cancelled, ...).
 */
int db_defrag_apply(struct db *db, struct arena *a, int64_t id, int64_t user_id, int ttl_s,
    const char **outcome, struct gp_error *err) __attribute__((warn_unused_result));
int db_defrag_cancel(struct db *db, struct arena *a, int64_t id, const char **outcome,
    struct gp_error *err) __attribute__((warn_unused_result));

/* The plans the apply worker runs (applying, or cancelled with a move in flight). */
int db_defrag_runnable(struct db *db, struct arena *a, int64_t **ids, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * One step of plan id (defrag_step, its own transaction): step, wait or
 * idle; a new instance not ready timeout_s after its move began fails it.
 */
int db_defrag_step(struct db *db, struct arena *a, int64_t id, double threshold, int timeout_s,
    const char **outcome, struct gp_error *err) __attribute__((warn_unused_result));

#endif
