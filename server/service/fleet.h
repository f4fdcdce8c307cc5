/*
 * fleet.h - the one reading of the fleet that placements use: simulation
 * (POST /v1/capacity/simulate, api/capacity.c) and approvals
 * (pool_service.c) both see the fleet as its placeable layout classes
 * (GPUs alike in model, MIG mode and layout, on a ready node with health
 * ok: one gpu_classes row each, db_capacity_placeable_classes) ranked
 * from the layout cache, and read only the first GPUs of the classes
 * they choose, in the (node, index, id) order the engine breaks ties by.
 *
 * Simulation reads those GPUs (fleet_place); an approval locks them
 * (fleet_candidates_lock: FOR NO KEY UPDATE, skipping what others hold
 * on its fast path) and re-reads their layouts before the engine sees
 * them. Which classes each takes differs: simulation the ones
 * placement_select names (so it answers as on the whole fleet), an
 * approval the ones approval_wants names (the busiest plus empty GPUs,
 * so that concurrent approvals spread out); the classes are the same.
 */
#ifndef GP_SERVICE_FLEET_H
#define GP_SERVICE_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "db/db.h"
#include "db/db_capacity.h"
#include "db/db_approvals.h"
#include "db/db_pools.h"
#include "domain/approval.h"
#include "domain/catalog.h"
#include "domain/placement.h"
#include "domain/spec.h"

/*
 * The placeable layout classes of models[0..nmodels) in cluster_id (0:
 * every cluster, summed), ranked: rows[i] describes cls[i] (the class as
 * the engine sees one of its GPUs, gpus its size), valid[i] whether its
 * layout obeys the hardware rules (it cannot break them through gpupool;
 * such a class is never placed on). Arrays in arena a, in no particular
 * order (placement_select ranks them, approval_wants sorts them).
 */
struct fleet_classes {
	struct layout_class *rows;
	struct placement_class *cls;
	bool *valid;
	int n;
};

int fleet_classes_read(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const char *const *models, int nmodels, struct fleet_classes *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * GPUs read for a simulation: gpus[i] is the engine's view of the GPU
 * rows[i] describes (id, node, uuid, index), in (node_id, index, id)
 * order. See placement_select for why such a subset places exactly as
 * the whole fleet would.
 */
struct fleet_gpus {
	struct placement_gpu *gpus;
	const struct candidate_row *rows;
	int ngpus;
};

/*
 * placement_find for items[0..nitems) (validated, res set up as
 * placement_find wants it, flags 0) over the ready nodes of cluster_id
 * (0: every cluster), reading as few GPUs as it can: first the best
 * classes only (placement_select, narrow), which settles every request
 * the greedy pass places; when that falls short, every class that could
 * help, for the exact search. The answer is placement_find's over the
 * whole fleet: 0 with res filled and *fleet the GPUs res->placements[i].gpu
 * indexes; -1 with err 409 insufficient_capacity and res->missing, or
 * another error (database, 500). Reads are separate statements: GPUs that
 * change between them are placed as the second read found them. A GPU
 * whose stored layout the engine rejects is left out and logged.
 */
int fleet_place(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const struct spec_count *items, int nitems, struct fleet_gpus *fleet,
    struct placement_result *res, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Lock the candidates of one approval pass for items[0..nitems) (fast:
 * the busiest classes and the empty GPUs, skipping GPUs and nodes others
 * hold; slow: every useful class, waiting for locks, each class held
 * GPUs further) into rows[0..*n). The classes come from
 * fleet_classes_read over every cluster, cached per process for a second
 * on the fast path (a hint only: every candidate is locked and its layout
 * re-read), re-read on the slow path. cluster_id: only that cluster's GPUs
 * (0: every cluster).
 */
int fleet_candidates_lock(struct db *db, struct arena *a, const struct catalog *c,
    int64_t cluster_id, const struct spec_count *items, int nitems, bool fast, int held,
    struct locked_gpu **rows, int *n, struct gp_error *err) __attribute__((warn_unused_result));

#endif
