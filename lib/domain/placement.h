/*
 * placement.h - the placement engine: where each instance of a request
 * goes on real GPUs (docs/design.md section 4). Pure computation: no I/O, no
 * locks, no global state; the greedy path allocates nothing.
 *
 * Rules enforced for every placement:
 *  - a MIG instance of profile P starts at one of P's catalog placements
 *    and holds memory slices [start, start + P.memory_slices), which must
 *    be free;
 *  - at most P.max_instances live instances of P per GPU, and the compute
 *    slices of all instances on a GPU at most the model's compute_slices;
 *  - "full" takes only an empty GPU (start 0, size model->full_slices:
 *    8, 4 on an A30, 1 on a model without MIG) and then the GPU carries
 *    nothing else; MIG instances never go on a GPU held by "full";
 *  - an empty GPU may change MIG mode (placement.mode_switch says so),
 *    a GPU with instances may not.
 *
 * Preference for each instance (deterministic, in this order):
 *  1. the GPU already carrying the most instances (pack; keep whole GPUs
 *     free);
 *  2. a GPU that needs no MIG mode switch;
 *  3. the start that leaves the best future-usable free space: the free
 *     slice runs that catalog placements of the model could still take,
 *     compared largest run size first, then how many runs of that size
 *     remain (so a 1g does not take a slot that strands a 3g spot);
 *  4. the lowest (node_id, index, id), then array position, then start.
 *
 * A request is placed all-or-nothing. Larger profiles go first ("full",
 * then by memory slices, then by compute slices). Each model's items are
 * placed independently of other models'. When the greedy pass leaves any
 * instance of a model unplaced, a bounded exact search looks for any
 * placement of that model's items: depth-first over the instances, trying
 * only one of several identical untouched GPUs and only ordered choices for
 * instances of one profile, and cutting a branch as soon as the unplaced
 * instances exceed, per profile, the summed headroom of the GPUs, or in
 * total their free compute or memory slices. It is complete within
 * PLACEMENT_SEARCH_BUDGET work units (about 15 ms of CPU). Its placement
 * is the first found in a fixed GPU order (most instances first), not the
 * greedy preference. Limits, honestly:
 *  - the greedy result is a good packing, not an optimal one (the
 *    preference is local to each instance);
 *  - when the search stops at its budget (placement_result.search_exhausted)
 *    a placement that exists may not have been found and the request is
 *    refused; this takes requests mixing several profiles, each asking for
 *    about as much as the partly used GPUs could give (1 in 2000 random
 *    such requests on 8 H100s in our stress runs);
 *  - on failure "missing" counts come from the greedy pass: how many
 *    instances of each item the greedy order could not place (they sum to
 *    at least the true shortfall but may name a different item when
 *    another order would have placed it);
 *  - the future-space measure is memory geometry only; compute and
 *    max_instances limits are applied to the candidate itself, not to
 *    the space it leaves.
 * The catalog must have been validated (catalog_load does): placements
 * within the GPU, at most CATALOG_MAX_SLICES slices.
 */
#ifndef GP_DOMAIN_PLACEMENT_H
#define GP_DOMAIN_PLACEMENT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/error.h"
#include "domain/catalog.h"
#include "domain/spec.h"

#define PLACEMENT_MAX_ITEMS 64
#define PLACEMENT_SEARCH_BUDGET 2000000L /* search work units per model */

/* placement_find() flags */
#define PLACEMENT_APPLY 0x1u /* on success leave gpus[] holding the new layout */
#define PLACEMENT_NO_SEARCH \
	0x2u /* stop after the greedy pass: a shortfall is
				  * answered without the exact search */

/*
 * One candidate GPU as the engine sees it. The caller lists only GPUs that
 * may take work (ready node, ok health). Fill it with placement_gpu_init()
 * and one placement_gpu_add() per live allocation; the layout fields are
 * kept consistent by those calls and by the engine.
 */
struct placement_gpu {
	int64_t id;      /* database id */
	int64_t node_id; /* orders GPUs together with index */
	int index;       /* GPU index on its node */
	const struct gpu_model *model;
	bool mig_enabled; /* current MIG mode */
	/* layout */
	uint8_t used_mask;                           /* bit i set: memory slice i is held */
	bool full_used;                              /* a whole-GPU allocation holds it */
	int instances;                               /* live MIG instances */
	int compute_used;                            /* their compute slices */
	uint8_t profile_count[CATALOG_MAX_PROFILES]; /* live instances per model->profiles[i] */
};

/* One placed instance. */
struct placement {
	int item;                          /* index into the request's items */
	int gpu;                           /* index into the gpus array */
	const struct mig_profile *profile; /* NULL for a whole GPU */
	int start;                         /* first memory slice */
	int size;                          /* memory slices held */
	bool mode_switch;                  /* the GPU must change MIG mode first
					 * (enable for MIG, disable for full) */
};

struct placement_result {
	struct placement *placements;     /* caller's buffer of cap entries */
	int cap;                          /* must cover the sum of item counts */
	int nplacements;                  /* on success: ordered by item, gpu, start */
	int missing[PLACEMENT_MAX_ITEMS]; /* on insufficient capacity, per item */
	bool searched;                    /* the exact search ran */
	bool search_exhausted;            /* ...and stopped at its budget */
};

/*
 * A layout class: GPUs of one model alike for the engine (same MIG mode
 * and layout), which ranks them alike for every profile and breaks their
 * ties by (node_id, index, id). See placement_select.
 */
struct placement_class {
	struct placement_gpu g; /* one GPU of the class (id, node_id, index unused) */
	int64_t gpus;           /* GPUs in the class */
	int take;               /* set by placement_select: its first GPUs to use */
	/* set by placement_class_rank from g: bit 0 a whole GPU, bit 1 + i
	 * model->profiles[i]; pref[] the placement_gpu_preference of each */
	uint32_t admits;
	uint64_t pref[CATALOG_MAX_PROFILES + 1];
};

/*
 * A class in a group of placement_select's narrow choice: classes the
 * engine prefers alike for one profile, of whose GPUs together only the
 * first take in (node_id, index, id) order can be chosen for it.
 */
struct placement_pick {
	int cls;   /* index into the classes */
	int group; /* picks of one group are adjacent, numbered from 0 */
	int take;  /* the same for the whole group */
};

/* Capacity figures over the GPUs of one model (see placement_capacity). */
struct placement_capacity {
	int gpus;                           /* GPUs of the model */
	int empty_gpus;                     /* could take "full" now */
	int full_gpus;                      /* held by a whole-GPU allocation */
	int instances;                      /* live MIG instances */
	int compute_free;                   /* free compute slices on GPUs not held whole */
	int compute_stranded;               /* of those, unusable by any profile */
	int headroom[CATALOG_MAX_PROFILES]; /* per profile: sum over GPUs of
					 * placement_gpu_headroom, each profile alone */
};

/* Start g as an empty GPU of model m. */
void placement_gpu_init(struct placement_gpu *g, const struct gpu_model *m, int64_t id,
    int64_t node_id, int index, bool mig_enabled);

/*
 * True when an instance of p (NULL: a whole GPU) could be placed on g at
 * start now, by every rule above (MIG mode switches of empty GPUs allowed).
 */
bool placement_gpu_fits(const struct placement_gpu *g, const struct mig_profile *p, int start);

/*
 * Record a live allocation of p (NULL: whole GPU) at start on g. Fails with
 * 409 "conflict" when it breaks a rule (overlap, start not in the catalog,
 * max_instances, compute, full on a used GPU), leaving g unchanged. A MIG
 * allocation also sets mig_enabled, a whole one on a MIG model clears it.
 */
int placement_gpu_add(struct placement_gpu *g, const struct mig_profile *p, int start,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Remove a recorded allocation; 409 "conflict" when g holds no such one. */
int placement_gpu_remove(struct placement_gpu *g, const struct mig_profile *p, int start,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * How many more instances of p (NULL: whole GPU, so 0 or 1) g could take
 * right now, placing p alone: the exact maximum over the catalog starts,
 * within max_instances and the compute slices.
 */
int placement_gpu_headroom(const struct placement_gpu *g, const struct mig_profile *p);

/*
 * Stranded compute slices of g: free compute slices that no combination of
 * the model's profiles could use given the held memory slices and the
 * per-profile limits (H100-80GB holding 2 x 3g.40gb: 1). 0 for an empty
 * GPU, a whole-GPU allocation or a model without MIG.
 */
int placement_gpu_stranded(const struct placement_gpu *g);

/*
 * How much the engine wants g for one more instance of p (NULL: a whole
 * GPU), preference rules 1 to 3 packed in *key: of two GPUs the one with
 * the larger key is chosen, of equal keys the lower (node_id, index, id).
 * False when g cannot take p now (*key untouched).
 */
bool placement_gpu_preference(const struct placement_gpu *g, const struct mig_profile *p,
    uint64_t *key);

/* Set cl->admits and cl->pref from cl->g (after filling or changing g). */
void placement_class_rank(struct placement_class *cl);

/*
 * Which GPUs placement_find must see to place items[0..nitems) as it
 * would on every GPU of the classes cls[0..ncls) (all of one fleet, each
 * GPU in one class, ranked by placement_class_rank): sets cls[i].take, to
 * use the class's first take GPUs in (node_id, index, id) order, 0 for
 * none. The engine takes alike GPUs in that order, so no more of a class
 * can matter than the model's instances in the request, N.
 *
 * wide: every class that could take one of the items, N GPUs at most
 * each. placement_find then answers as on the whole fleet (the search's
 * work budget aside: GPUs it skips cost budget too).
 *
 * narrow: for each profile asked for, only the classes it prefers most,
 * whole groups of equal preference, until they hold as many GPUs as the
 * instances placed up to that profile's last (U); of each, what the
 * greedy pass could take (U less the GPUs of the groups before). The
 * greedy pass then makes exactly the choices it would make on the whole
 * fleet, and falls short exactly when it would there (the argument is at
 * the function). Use it with PLACEMENT_NO_SEARCH; on a shortfall select
 * wide and place again. Narrow also lists its groups in picks[0..*npicks)
 * (picks may be NULL): GPUs alike in preference are chosen in (node_id,
 * index, id) order across their classes, so of a group only its first
 * take GPUs together are needed, fewer than its classes' takes add up
 * to. When more than maxpicks are needed *npicks is -1 (take still holds);
 * wide sets *npicks to 0.
 *
 * Items are validated as by placement_find (422); 500 when scratch
 * memory could not be had.
 */
int placement_select(const struct catalog *c, const struct spec_count *items, int nitems,
    struct placement_class *cls, int ncls, bool wide, struct placement_pick *picks, int maxpicks,
    int *npicks, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Place every instance of items[0..nitems) on gpus[0..ngpus), all or
 * nothing. Items are validated against c (422 validation_failed naming
 * "items[i].model" ...). On success returns 0 with res->placements[0..
 * nplacements) filled; gpus[] is left as it was unless flags has
 * PLACEMENT_APPLY, then it holds the layout with the new instances (and
 * switched MIG modes). When an instance cannot be placed returns -1 with
 * 409 insufficient_capacity, one error field "items[i]" per short item,
 * res->missing[i] set, no placement listed and gpus[] unchanged. A buffer
 * smaller than the sum of counts is a 500 "internal" error; so is a failed
 * allocation of the search's scratch memory. With PLACEMENT_NO_SEARCH a
 * greedy shortfall is that 409 at once (res->searched stays false). This
 * is the one entry point for approvals and for capacity simulation.
 */
int placement_find(const struct catalog *c, struct placement_gpu *gpus, int ngpus,
    const struct spec_count *items, int nitems, unsigned flags, struct placement_result *res,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Sum capacity figures over the GPUs of model m in gpus[0..ngpus). */
void placement_capacity(const struct gpu_model *m, const struct placement_gpu *gpus, int ngpus,
    struct placement_capacity *out);

/*
 * Record on g (fresh from placement_gpu_init) every allocation of a
 * layout text ("3g.40gb@0,1g.10gb@6", "full@0", ""). Returns -1 when the
 * text names an unknown profile or breaks a hardware rule; g then holds
 * at least the slices the text names (conservative). layout_cache_get
 * remembers its outcome per (model, MIG mode, text).
 */
int placement_layout_apply(struct placement_gpu *g, const char *layout);

#endif
