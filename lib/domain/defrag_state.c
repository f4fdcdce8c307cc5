/*
 * defrag_state.c - the planner's working state (defrag_internal.h): the
 * fleet's layout rebuilt from its instances, each GPU's instances, the
 * best-fit tables per model and the buckets of GPUs that may take an
 * evicted instance. The planning steps are in defrag.c.
 */
#include "domain/defrag_internal.h"

#include <stdlib.h>
#include <string.h>

uint8_t
dg_mask_of(int start, int size)
{
	return (uint8_t)(((1u << size) - 1u) << start);
}

int
dg_popcount8(unsigned v)
{
	int n = 0;

	for (; v != 0; v &= v - 1)
		n++;
	return n;
}

bool
dg_gpu_is_empty(const struct placement_gpu *g)
{
	return g->used_mask == 0 && g->instances == 0 && !g->full_used;
}

/* The engine's future-usable space of a mask (placement.c's rule 3). */
uint32_t
dg_future_of(const struct gpu_model *m, uint8_t mask)
{
	uint32_t k = 0;

	for (int i = 0; i < m->nruns; i++) {
		if ((mask & m->run_mask[i]) == 0)
			k += 1u << (4 * (m->run_size[i] - 1));
	}
	return k;
}

static int
fit_cmp(const void *a, const void *b)
{
	const struct fit *x = a, *y = b;

	if (x->left != y->left)
		return x->left < y->left ? -1 : 1;
	if (x->future != y->future)
		return x->future > y->future ? -1 : 1;
	if (x->mask != y->mask)
		return x->mask < y->mask ? -1 : 1;
	return x->start - y->start;
}

struct model_fits *
dg_model_fits_get(struct state *s, const struct gpu_model *m)
{
	struct model_fits *mf;
	uint8_t all = (uint8_t)((1u << m->memory_slices) - 1u);

	for (int i = 0; i < s->nmodels; i++)
		if (s->models[i].m == m)
			return &s->models[i];
	if (s->nmodels == DEFRAG_MAX_MODELS)
		return NULL;
	mf = &s->models[s->nmodels++];
	memset(mf, 0, sizeof(*mf));
	mf->m = m;
	for (int pi = 0; pi < m->nprofiles; pi++) {
		const struct mig_profile *p = &m->profiles[pi];
		struct fit *v = malloc(sizeof(*v) * DEFRAG_MASKS * CATALOG_MAX_SLICES);
		int n = 0;

		if (v == NULL) {
			s->oom = true;
			return NULL;
		}
		for (int mask = 1; mask < DEFRAG_MASKS; mask++) {
			if ((mask & ~all) != 0)
				continue;
			for (int j = 0; j < p->nplacements; j++) {
				uint8_t r = dg_mask_of(p->placements[j], p->memory_slices);
				uint8_t after = (uint8_t)(mask | r);

				if ((mask & r) != 0)
					continue;
				v[n].mask = (uint8_t)mask;
				v[n].start = (int8_t)p->placements[j];
				v[n].left = (uint8_t)(m->memory_slices - dg_popcount8(after));
				v[n].future = dg_future_of(m, after);
				n++;
			}
		}
		qsort(v, (size_t)n, sizeof(*v), fit_cmp);
		mf->fits[pi] = v;
		mf->nfits[pi] = n;
	}
	return mf;
}

/* ---- buckets ---- */

void
dg_bucket_out(struct state *s, int gi)
{
	struct vec *v;
	int pos, last;

	if (s->bucket_mask[gi] < 0)
		return;
	v = &s->sets[s->set_of[gi]].b[s->bucket_mask[gi]];
	pos = s->bucket_pos[gi];
	last = v->v[--v->n];
	v->v[pos] = last;
	s->bucket_pos[last] = pos;
	s->bucket_mask[gi] = -1;
}

void
dg_bucket_in(struct state *s, int gi, int mask)
{
	struct vec *v = &s->sets[s->set_of[gi]].b[mask];

	if (v->n == v->cap) {
		int cap = v->cap == 0 ? 16 : v->cap * 2;
		int *nv = realloc(v->v, sizeof(*nv) * (size_t)cap);

		if (nv == NULL) {
			s->oom = true;
			return;
		}
		v->v = nv;
		v->cap = cap;
	}
	s->bucket_pos[gi] = v->n;
	v->v[v->n++] = gi;
	s->bucket_mask[gi] = mask;
}

/* Put GPU gi in the bucket its layout says (or none). */
void
dg_bucket_sync(struct state *s, int gi)
{
	const struct placement_gpu *g = &s->g[gi];
	int want = -1;

	if (!s->locked[gi] && g->mig_enabled && !g->full_used && g->used_mask != 0 &&
	    g->model->mig_capable)
		want = g->used_mask;
	if (want == s->bucket_mask[gi])
		return;
	dg_bucket_out(s, gi);
	if (want >= 0)
		dg_bucket_in(s, gi, want);
}

/* ---- instances on a GPU ---- */

void
dg_link_inst(struct state *s, int ii, int gi, int start)
{
	s->cur_gpu[ii] = gi;
	s->cur_start[ii] = start;
	s->next[ii] = s->head[gi];
	s->head[gi] = ii;
}

void
dg_unlink_inst(struct state *s, int ii)
{
	int *pp = &s->head[s->cur_gpu[ii]];

	while (*pp != ii)
		pp = &s->next[*pp];
	*pp = s->next[ii];
	s->next[ii] = -1;
}

int
dg_inst_size(const struct state *s, int ii)
{
	const struct mig_profile *p = s->f->insts[ii].profile;

	return p != NULL ? p->memory_slices : s->g[s->cur_gpu[ii]].model->full_slices;
}

/* Where instance ii could live now (the first admitting GPU in best-fit order). */
bool
dg_find_home(struct state *s, int ii, int set, int *gpu, int *start)
{
	const struct mig_profile *p = s->f->insts[ii].profile;
	struct model_fits *mf = dg_model_fits_get(s, s->g[s->cur_gpu[ii]].model);

	if (mf == NULL || p == NULL)
		return false;
	for (int k = 0; k < mf->nfits[p->index]; k++) {
		const struct fit *ft = &mf->fits[p->index][k];
		const struct vec *v = &s->sets[set].b[ft->mask];
		int tries = v->n < DEFRAG_BUCKET_TRIES ? v->n : DEFRAG_BUCKET_TRIES;

		for (int j = 0; j < tries; j++) {
			int gi = v->v[j];

			if (placement_gpu_fits(&s->g[gi], p, ft->start)) {
				*gpu = gi;
				*start = ft->start;
				return true;
			}
		}
	}
	return false;
}

bool
dg_moves_reserve(struct state *s, int more)
{
	if (s->nmoves + more <= s->moves_cap)
		return true;
	int cap = s->moves_cap == 0 ? 64 : s->moves_cap;
	while (cap < s->nmoves + more)
		cap *= 2;
	struct defrag_move *nm = realloc(s->moves, sizeof(*nm) * (size_t)cap);
	if (nm == NULL) {
		s->oom = true;
		return false;
	}
	s->moves = nm;
	s->moves_cap = cap;
	return true;
}

/*
 * Evict the instances ev[0..nev) (all on GPU d), then run hold (a
 * reservation on d, may be NULL), then find each a home; all or nothing.
 * block: slices of d none of them may land on (what they leave).
 */

struct grp_key {
	uintptr_t model;
	int64_t group;
	int gpu;
};

static int
grp_cmp(const void *a, const void *b)
{
	const struct grp_key *x = a, *y = b;

	if (x->model != y->model)
		return x->model < y->model ? -1 : 1;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	return x->gpu - y->gpu;
}

void
dg_state_free(struct state *s)
{
	free(s->head);
	free(s->next);
	free(s->cur_gpu);
	free(s->cur_start);
	free(s->moved);
	free(s->locked);
	free(s->set_of);
	free(s->bucket_mask);
	free(s->bucket_pos);
	if (s->sets != NULL)
		for (int i = 0; i < s->nsets; i++)
			for (int k = 0; k < DEFRAG_MASKS; k++)
				free(s->sets[i].b[k].v);
	free(s->sets);
	for (int i = 0; i < s->nmodels; i++)
		for (int k = 0; k < CATALOG_MAX_PROFILES; k++)
			free(s->models[i].fits[k]);
	free(s->ph);
}

/* Rebuild the layout from the instances; group GPUs into sets. */
int
dg_state_init(struct state *s, const struct defrag_fleet *f, struct gp_error *err)
{
	int ng = f->ngpus, ni = f->ninsts;
	struct grp_key *keys;

	s->f = f;
	s->g = malloc(sizeof(*s->g) * (size_t)(ng + 1));
	s->head = malloc(sizeof(int) * (size_t)(ng + 1));
	s->next = malloc(sizeof(int) * (size_t)(ni + 1));
	s->cur_gpu = malloc(sizeof(int) * (size_t)(ni + 1));
	s->cur_start = malloc(sizeof(int) * (size_t)(ni + 1));
	s->moved = calloc((size_t)ni + 1, sizeof(bool));
	s->locked = calloc((size_t)ng + 1, sizeof(bool));
	s->set_of = malloc(sizeof(int) * (size_t)(ng + 1));
	s->bucket_mask = malloc(sizeof(int) * (size_t)(ng + 1));
	s->bucket_pos = malloc(sizeof(int) * (size_t)(ng + 1));
	keys = malloc(sizeof(*keys) * (size_t)(ng + 1));
	if (s->g == NULL || s->head == NULL || s->next == NULL || s->cur_gpu == NULL ||
	    s->cur_start == NULL || s->moved == NULL || s->locked == NULL || s->set_of == NULL ||
	    s->bucket_mask == NULL || s->bucket_pos == NULL || keys == NULL) {
		free(keys);
		return gp_error_set(err, 500, "internal", "out of memory");
	}
	for (int i = 0; i < ng; i++) {
		const struct placement_gpu *src = &f->gpus[i];

		placement_gpu_init(&s->g[i], src->model, src->id, src->node_id, src->index,
		    src->mig_enabled);
		s->head[i] = -1;
		s->bucket_mask[i] = -1;
		keys[i] = (struct grp_key){ .model = (uintptr_t)src->model,
			.group = f->group != NULL ? f->group[i] : 0,
			.gpu = i };
	}
	for (int i = 0; i < ni; i++) {
		const struct defrag_instance *in = &f->insts[i];

		if (in->gpu < 0 || in->gpu >= ng) {
			free(keys);
			return gp_error_set(err, 409, "conflict", "instance %lld names no gpu",
			    (long long)in->id);
		}
		if (placement_gpu_add(&s->g[in->gpu], in->profile, in->start, err) < 0) {
			free(keys);
			return -1;
		}
		dg_link_inst(s, i, in->gpu, in->start);
	}
	qsort(keys, (size_t)ng, sizeof(*keys), grp_cmp);
	s->nsets = 0;
	for (int i = 0; i < ng; i++) {
		if (i == 0 || keys[i].model != keys[i - 1].model ||
		    keys[i].group != keys[i - 1].group)
			s->nsets++;
		s->set_of[keys[i].gpu] = s->nsets - 1;
	}
	free(keys);
	s->sets = calloc((size_t)s->nsets + 1, sizeof(*s->sets));
	if (s->sets == NULL)
		return gp_error_set(err, 500, "internal", "out of memory");
	for (int i = 0; i < ng; i++)
		dg_bucket_sync(s, i);
	return s->oom ? gp_error_set(err, 500, "internal", "out of memory") : 0;
}
