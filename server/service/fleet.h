/*
 * fleet.h - the one reading of the fleet that placements use: simulation
 * (POST /v1/capacity/simulate, api/capacity.c) and approvals
 * (pool_approve.c) both see the fleet as its placeable layout classes
 * (GPUs alike in model, MIG mode and layout, on a ready node with health
 * ok: one gpu_classes row each, db_capacity_placeable_classes), choose
 * the classes to read GPUs from with approval_wants (fast: the busiest
 * classes and empty GPUs; slow: every useful class), read those GPUs in
 * the (node, index, id) order the engine breaks ties by, and place on
 * them with the same passes (fleet_set_place). The one difference:
 * an approval locks the GPUs it reads (its fast path skipping what
 * others hold), a simulation locks nothing. So on a quiet fleet (no
 * approval running, nothing held) a simulation's placements are the ones
 * an approval of the same items makes right after: the same GPU, start
 * and profile per instance (tests/integration/test_fleet_agree.c).
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
 * order (approval_wants sorts them).
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
 * Add to sum[0..*nsum) (at most POOL_MAX_ITEMS) the counts of
 * items[0..nitems), one entry per model and profile: what a batch's fast
 * path reads candidates for.
 */
void fleet_items_sum(struct spec_count *sum, int *nsum, const struct spec_count *items, int nitems);

/*
 * The candidates of one pass for items[0..nitems) into rows[0..*n) (fast:
 * the busiest classes and the empty GPUs; slow: every useful class, each
 * class held GPUs further). lock: an approval's, locked FOR NO KEY
 * UPDATE (fast: skipping GPUs and nodes others hold; slow: NOWAIT);
 * otherwise a simulation's, the same rows, locking nothing. The classes
 * come from fleet_classes_read over every cluster: an approval's fast path
 * takes them from a per-process cache up to a second old (a hint only:
 * every candidate is locked and its layout re-read), a simulation's reads
 * them now and leaves them in that cache; an approval's slow path re-reads
 * them, a simulation's takes them from the cache when 50 ms old at most.
 * cluster_id: only that cluster's GPUs (0: every cluster).
 */
int fleet_candidates_lock(struct db *db, struct arena *a, const struct catalog *c,
    int64_t cluster_id, const struct spec_count *items, int nitems, bool fast, int held, bool lock,
    struct locked_gpu **rows, int *n, struct gp_error *err) __attribute__((warn_unused_result));

#define FLEET_SLOW_PASSES 4 /* slow-path reads while they find more GPUs */

/* One instance placed: on gpu (a row of the set), item's, at start. */
struct service_placed {
	const struct locked_gpu *gpu;
	int item;
	const char *profile; /* "full" or a MIG profile name */
	int start;
	int size;
	bool mode_switch;
};

/*
 * The GPUs one batch (or simulation) places on: the engine's view of
 * every candidate read so far, with the placements applied as they are
 * made. Zeroed to start.
 */
struct fleet_set {
	struct placement_gpu *gpus;
	const struct locked_gpu **rows; /* rows[i]: what gpus[i] was read as */
	int n;
	int cap;
};

/* Add the rows[0..n) that set does not hold yet; returns how many. */
int fleet_set_add(struct arena *a, const struct catalog *c, struct fleet_set *set,
    const struct locked_gpu *rows, int n);

/* One request of a batch: its items, and the cluster it is bound to (0: none). */
struct fleet_request {
	int64_t cluster_id;
	const struct spec_count *items;
	int nitems;
};

/*
 * The fast read of a batch of requests[0..nrequests) into set: one
 * fleet_candidates_lock (fast) per distinct cluster the requests are
 * bound to, in cluster id order (0, the requests bound to none, first),
 * for the summed items of that cluster's requests, only that cluster's
 * GPUs. So a request bound to a cluster finds that cluster's first GPUs
 * of the busiest classes, not the fleet's (mostly in other clusters).
 * lock: as fleet_candidates_lock's (each read skips what others hold,
 * so the extra reads wait for no lock). 0, or -1: err.
 */
int fleet_batch_read(struct db *db, struct arena *a, const struct catalog *c,
    const struct fleet_request *requests, int nrequests, bool lock, struct fleet_set *set,
    struct gp_error *err) __attribute__((warn_unused_result));

enum fleet_outcome {
	FLEET_PLACED, /* placed[0..nplaced) */
	FLEET_SHORT,  /* insufficient capacity: missing[] per item */
	FLEET_FAILED, /* the engine's err (not 409) */
};

struct fleet_answer {
	enum fleet_outcome outcome;
	struct service_placed *placed; /* in arena memory */
	int nplaced;
	int *missing;          /* the caller's, one per item */
	bool slow;             /* the slow path ran */
	bool search_exhausted; /* the engine's search hit its budget */
	struct gp_error err;   /* FLEET_FAILED */
};

/*
 * Place items[0..nitems) on set (its GPUs of cluster_id, 0: all) and
 * apply them there; when that falls short, the slow path: read every
 * useful class's candidates past the set's (fleet_candidates_lock, lock
 * as given) and place again, while that finds GPUs the set lacks (at
 * most FLEET_SLOW_PASSES reads). 0 with *ans filled (ans->missing set by
 * the caller); -1: reading failed (err).
 */
int fleet_set_place(struct db *db, struct arena *a, const struct catalog *c, struct fleet_set *set,
    int64_t cluster_id, const struct spec_count *items, int nitems, bool lock,
    struct fleet_answer *ans, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Simulate an approval of items[0..nitems) (validated) in cluster_id (0:
 * any): the approval's fast read (fleet_batch_read) of a batch holding
 * only this request,
 * then fleet_set_place, locking nothing. 0 with *ans filled (the
 * placements by item, then GPU in (node, index, id) order, then start);
 * -1: err.
 */
int fleet_simulate(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const struct spec_count *items, int nitems, struct fleet_answer *ans, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
