/*
 * defrag_internal.h - the planner's working state (defrag_state.c),
 * shared by the planning steps (defrag.c). Not a public header: it stays
 * in domain/.
 */
#ifndef GP_DOMAIN_DEFRAG_INTERNAL_H
#define GP_DOMAIN_DEFRAG_INTERNAL_H

#include "domain/defrag.h"

#define DEFRAG_MASKS 256
#define DEFRAG_BUCKET_TRIES 64 /* GPUs tried per bucket before the next mask */
#define DEFRAG_MAX_MODELS 64

/* A (mask, start) pair: a GPU with layout mask could take the profile at start. */
struct fit {
	uint8_t mask;
	int8_t start;
	uint8_t left;    /* free slices left after */
	uint32_t future; /* future-usable space after */
};

struct model_fits {
	const struct gpu_model *m;
	struct fit *fits[CATALOG_MAX_PROFILES];
	int nfits[CATALOG_MAX_PROFILES];
};

struct vec {
	int *v;
	int n, cap;
};

/* The GPUs of one (model, group) that may take evicted instances. */
struct gset {
	struct vec b[DEFRAG_MASKS];
};

/* A reservation held while planning: an item's instance. */
struct phantom {
	int gpu;
	const struct mig_profile *p;
	int start;
	bool mig_was; /* the GPU's MIG mode before */
};

struct cand {
	int cost;
	int slices;
	int gpu;
	int start;
};

struct state {
	const struct defrag_fleet *f;
	struct placement_gpu *g;
	int *head, *next; /* per GPU: first instance; per instance: next on the GPU */
	int *cur_gpu, *cur_start;
	bool *moved;
	bool *locked; /* kept out of the buckets (being emptied) */
	int *set_of;  /* per GPU: its gset */
	struct gset *sets;
	int nsets;
	int *bucket_mask; /* per GPU: the bucket it is in, -1 none */
	int *bucket_pos;
	struct model_fits models[DEFRAG_MAX_MODELS];
	int nmodels;
	struct defrag_move *moves;
	int nmoves, moves_cap, max_moves;
	struct phantom *ph;
	int nph, ph_cap;
	bool exhausted;
	bool oom;
};

uint8_t dg_mask_of(int start, int size);
int dg_popcount8(unsigned v);
bool dg_gpu_is_empty(const struct placement_gpu *g);
uint32_t dg_future_of(const struct gpu_model *m, uint8_t mask);
struct model_fits *dg_model_fits_get(struct state *s, const struct gpu_model *m);
void dg_bucket_out(struct state *s, int gi);
void dg_bucket_in(struct state *s, int gi, int mask);
void dg_bucket_sync(struct state *s, int gi);
void dg_link_inst(struct state *s, int ii, int gi, int start);
void dg_unlink_inst(struct state *s, int ii);
int dg_inst_size(const struct state *s, int ii);
bool dg_find_home(struct state *s, int ii, int set, int *gpu, int *start);
bool dg_moves_reserve(struct state *s, int more);
void dg_state_free(struct state *s);
int dg_state_init(struct state *s, const struct defrag_fleet *f, struct gp_error *err);

#endif
