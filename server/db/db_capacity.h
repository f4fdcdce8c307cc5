/*
 * db_capacity.h - the physical inventory: clusters, nodes (NodeCapacity),
 * GPUs (GpuCapacity) and their allocations (the memory-slice layout).
 *
 * Every row becomes a struct whose strings live in the caller's arena.
 * gpus.layout is the canonical text of a GPU's live allocations,
 * "profile@start" joined by ',' in start order ("3g.40gb@0,1g.10gb@6"),
 * '' when the GPU is empty; triggers keep it (and used_mask) equal to the
 * allocations table, so capacity reads one table.
 */
#ifndef GP_DB_CAPACITY_H
#define GP_DB_CAPACITY_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"

struct cluster_row {
	int64_t id;
	const char *name;
	const char *region;
	const char *description;
	int64_t nodes; /* nodes in the cluster */
	int64_t gpus;  /* GPUs on them */
	int64_t generation;
	int64_t created_us;
	int64_t updated_us;
};

struct node_row {
	int64_t id;
	int64_t cluster_id;
	const char *cluster; /* cluster name */
	const char *name;
	const char *hostname;
	const char *status;        /* ready|cordoned|draining|down|unknown */
	const char *status_reason; /* NULL when none */
	int64_t cpu_millicores;
	int64_t memory_bytes;
	const char *labels_json;     /* JSON object */
	const char *gpu_model;       /* the model of all its GPUs; NULL when none or mixed */
	const char *gpu_models_json; /* JSON array of the distinct models, sorted */
	int64_t gpu_count;
	const char *agent_version;  /* NULL until an agent reported */
	int64_t agent_heartbeat_us; /* 0 when never */
	int64_t generation;
	int64_t observed_generation;
	int64_t created_us;
	int64_t updated_us;
};

/* List filters; zero / NULL members do not filter. */
struct node_filter {
	int64_t cluster_id;
	const char *status;
	const char *model;       /* nodes holding at least one GPU of this model */
	const char *labels_json; /* JSON object the labels must contain */
};

struct gpu_row {
	int64_t id;
	int64_t node_id;
	int64_t cluster_id;
	const char *node;    /* node name */
	const char *cluster; /* cluster name */
	const char *node_status;
	int index;
	const char *uuid;
	const char *model;
	int memory_mib;
	bool mig_enabled;
	const char *health;        /* ok|degraded|failed */
	const char *health_reason; /* NULL when none */
	const char *layout;
	int used_mask;
	int64_t generation;
	int64_t created_us;
	int64_t updated_us;
};

struct gpu_filter {
	int64_t node_id;
	int64_t cluster_id;
	const char *model;
	const char *health;
	int mig_enabled; /* -1 any, 0 off, 1 on */
	/* > 0: only GPUs holding a live allocation of this project's pools */
	int64_t project_id;
	const char *pool_name; /* with project_id: of its pool of that name */
};

/* A live (not released) allocation. pool_id 0: not managed by gpupool. */
struct alloc_row {
	int64_t id;
	int64_t gpu_id;
	const char *profile; /* "full" or a MIG profile name */
	int start;
	int size;
	const char *state;
	int64_t pool_id;
	const char *device_uuid; /* NULL until the agent reports it */
	int64_t created_us;
};

/* GPUs sharing model, MIG mode, health, node readiness and layout. */
struct layout_class {
	const char *model;
	bool mig_enabled;
	bool healthy;    /* health ok */
	bool node_ready; /* node status ready */
	const char *layout;
	int64_t count;
};

/* ---- clusters ---- */

/* 409 when the name is taken. */
int db_cluster_insert(struct db *db, struct arena *a, const char *name, const char *region,
    const char *description, struct cluster_row *out, struct gp_error *err)
    __attribute__((warn_unused_result));

int db_cluster_get(struct db *db, struct arena *a, const char *name, struct cluster_row *out,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* The id of the cluster named name; 0 when there is none. */
int db_cluster_id(struct db *db, struct arena *a, const char *name, int64_t *id,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Clusters with id > after_id, by id. */
int db_clusters_list(struct db *db, struct arena *a, int64_t after_id, int limit,
    struct cluster_row **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

/* Change region/description (NULL = keep) when generation matches (0 = any). */
int db_cluster_update(struct db *db, struct arena *a, int64_t id, const char *region,
    const char *description, int64_t expected_generation, struct cluster_row *out, bool *stale,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Delete an empty cluster if it is still at generation (what the caller
 * read and audits); *stale when it changed meanwhile. 409 while it has nodes.
 */
int db_cluster_delete(struct db *db, int64_t id, int64_t generation, bool *stale,
    struct gp_error *err) __attribute__((warn_unused_result));

/* ---- nodes ---- */

/* A new node, status ready. 409 when the name is taken. */
int db_node_insert(struct db *db, struct arena *a, int64_t cluster_id, const char *name,
    const char *hostname, int64_t cpu_millicores, int64_t memory_bytes, const char *labels_json,
    struct node_row *out, struct gp_error *err) __attribute__((warn_unused_result));

/* By name; for_update locks the row (FOR NO KEY UPDATE). */
int db_node_get(struct db *db, struct arena *a, const char *name, bool for_update,
    struct node_row *out, bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* Nodes matching f with id > after_id, by id. */
int db_nodes_list(struct db *db, struct arena *a, const struct node_filter *f, int64_t after_id,
    int limit, struct node_row **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Change fields (NULL / negative = keep) when generation matches (0 = any). */
int db_node_update(struct db *db, struct arena *a, int64_t id, const char *hostname,
    int64_t cpu_millicores, int64_t memory_bytes, const char *labels_json,
    int64_t expected_generation, struct node_row *out, bool *stale, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Set status and reason (NULL clears it); bumps generation. */
int db_node_set_status(struct db *db, struct arena *a, int64_t id, const char *status,
    const char *reason, struct node_row *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/* ---- GPUs ---- */

/* 409 when the UUID or the node's index is taken. */
int db_gpu_insert(struct db *db, struct arena *a, int64_t node_id, int index, const char *uuid,
    const char *model, int memory_mib, bool mig_enabled, struct gpu_row *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/* By UUID (lower case); for_update locks the row. */
int db_gpu_get(struct db *db, struct arena *a, const char *uuid, bool for_update,
    struct gpu_row *out, bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* GPUs matching f with id > after_id, by id. */
int db_gpus_list(struct db *db, struct arena *a, const struct gpu_filter *f, int64_t after_id,
    int limit, struct gpu_row **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Change health, its reason and MIG mode (health NULL, reason_set false,
 * mig_enabled < 0 = keep) when generation matches (0 = any).
 */
int db_gpu_update(struct db *db, struct arena *a, int64_t id, const char *health, bool reason_set,
    const char *health_reason, int mig_enabled, int64_t expected_generation, struct gpu_row *out,
    bool *stale, struct gp_error *err) __attribute__((warn_unused_result));

/* ---- allocations ---- */

/*
 * Record an instance found on the hardware (pool_id NULL) in state
 * state. The database checks the catalog placement (422) and overlap (409).
 */
int db_allocation_insert_unmanaged(struct db *db, struct arena *a, int64_t gpu_id,
    const char *profile, int start, int size, const char *state, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Live allocations of the GPUs ids[0..nids), by GPU id then start. */
int db_allocations_live(struct db *db, struct arena *a, const int64_t *ids, int nids,
    struct alloc_row **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

/* ---- capacity ---- */

/*
 * Every GPU grouped by layout class, optionally restricted to a cluster
 * (0 = all) and a model (NULL = all). Reads gpu_classes (kept by triggers
 * on gpus), so the cost follows the number of classes, not of GPUs.
 * In no particular order (sorting thousands of layout texts would cost
 * more than the rest of the read).
 */
int db_capacity_classes(struct db *db, struct arena *a, int64_t cluster_id, const char *model,
    struct layout_class **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * The placeable layout classes (ready node, health ok) of models[0..
 * nmodels): in cluster_id, or summed over every cluster when it is 0.
 * healthy and node_ready are true, count > 0; in no particular order
 * (approval_wants sorts them). The one fleet reading of simulation and
 * approvals (service/fleet.c).
 */
int db_capacity_placeable_classes(struct db *db, struct arena *a, int64_t cluster_id,
    const char *const *models, int nmodels, struct layout_class **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
