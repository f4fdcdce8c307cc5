/*
 * layout_cache.h - what one GPU layout means for capacity, worked out
 * once per process: for (model, MIG mode, layout text) the engine's view
 * of a GPU holding it, whether the layout obeys the hardware rules, its
 * stranded compute slices, the headroom of every profile and the
 * engine's preference for the GPU per profile.
 *
 * These figures depend on nothing but the key (a layout's meaning never
 * changes), so GET /v1/capacity and simulation, which meet the same few
 * thousand layouts on every call, compute each once.
 */
#ifndef GP_SERVICE_LAYOUT_CACHE_H
#define GP_SERVICE_LAYOUT_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "domain/catalog.h"
#include "domain/placement.h"

/* Most layouts remembered: about every layout of every catalog model, in both MIG modes. */
#define LAYOUT_CACHE_MAX 32768

struct layout_figures {
	/*
	 * cls.g: placement_gpu_init(m, ids 0, mig_enabled) then
	 * placement_layout_apply(layout); cls.admits and cls.pref from
	 * placement_class_rank; cls.gpus and cls.take 0.
	 */
	struct placement_class cls;
	bool valid;      /* placement_layout_apply accepted the text */
	int memory_used; /* memory slices held */
	int stranded;    /* placement_gpu_stranded; 0 when !valid */
	/* placement_gpu_headroom: [0] a whole GPU, [1 + i] m->profiles[i] */
	uint8_t headroom[CATALOG_MAX_PROFILES + 1];
};

/*
 * The figures of layout ("3g.40gb@0,1g.10gb@6", "" when empty) on a GPU
 * of model m in MIG mode mig_enabled, copied to *out. Remembered for the
 * life of the process, keyed by the model's address, the mode and the
 * text; past LAYOUT_CACHE_MAX keys, new ones are computed on every call.
 * Any thread may call it. The models must stay valid until
 * layout_cache_reset (gpupoold keeps its catalog for its lifetime).
 */
void layout_cache_get(const struct gpu_model *m, bool mig_enabled, const char *layout,
    struct layout_figures *out);

/*
 * One GPU row as the placement engine sees it: *g from the layout's
 * figures, with the GPU's id, node and index. The one reading of a GPU
 * row that simulation (api/capacity.c) and approval (service/) share.
 * -1 (logged with uuid) when the layout breaks a hardware rule: the GPU
 * is then not placed on.
 */
int layout_cache_gpu(const struct gpu_model *m, bool mig_enabled, const char *layout, int64_t id,
    int64_t node_id, int index, const char *uuid, struct placement_gpu *g);

/* How many keys are remembered. */
int layout_cache_size(void);

/*
 * Forget every key and free the memory: before the catalog the keys
 * point into is freed. No other thread may use the cache meanwhile.
 */
void layout_cache_reset(void);

#endif
