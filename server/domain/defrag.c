/*
 * defrag.c - the MIG defragmentation planner (see defrag.h for the rules).
 *
 * Working state: a copy of the fleet's layout rebuilt from its instances
 * (so every step is checked by placement_gpu_add), each GPU's instances as
 * a short linked list, and, per (model, group), the GPUs that may take an
 * evicted instance bucketed by their memory-slice mask. A new home is
 * found by walking, per profile, the (mask, start) pairs in best-fit order
 * (computed once per model) and taking the first GPU of a non-empty
 * bucket that admits the instance: the cost of a move follows the number
 * of distinct masks (at most 255), not of GPUs.
 */
#include "domain/defrag.h"

#include <stdlib.h>
#include <string.h>

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

static uint8_t
mask_of(int start, int size)
{
	return (uint8_t)(((1u << size) - 1u) << start);
}

static int
popcount8(unsigned v)
{
	int n = 0;

	for (; v != 0; v &= v - 1)
		n++;
	return n;
}

static bool
gpu_is_empty(const struct placement_gpu *g)
{
	return g->used_mask == 0 && g->instances == 0 && !g->full_used;
}

/* The engine's future-usable space of a mask (placement.c's rule 3). */
static uint32_t
future_of(const struct gpu_model *m, uint8_t mask)
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

static struct model_fits *
model_fits_get(struct state *s, const struct gpu_model *m)
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
				uint8_t r = mask_of(p->placements[j], p->memory_slices);
				uint8_t after = (uint8_t)(mask | r);

				if ((mask & r) != 0)
					continue;
				v[n].mask = (uint8_t)mask;
				v[n].start = (int8_t)p->placements[j];
				v[n].left = (uint8_t)(m->memory_slices - popcount8(after));
				v[n].future = future_of(m, after);
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

static void
bucket_out(struct state *s, int gi)
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

static void
bucket_in(struct state *s, int gi, int mask)
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
static void
bucket_sync(struct state *s, int gi)
{
	const struct placement_gpu *g = &s->g[gi];
	int want = -1;

	if (!s->locked[gi] && g->mig_enabled && !g->full_used && g->used_mask != 0 &&
	    g->model->mig_capable)
		want = g->used_mask;
	if (want == s->bucket_mask[gi])
		return;
	bucket_out(s, gi);
	if (want >= 0)
		bucket_in(s, gi, want);
}

/* ---- instances on a GPU ---- */

static void
link_inst(struct state *s, int ii, int gi, int start)
{
	s->cur_gpu[ii] = gi;
	s->cur_start[ii] = start;
	s->next[ii] = s->head[gi];
	s->head[gi] = ii;
}

static void
unlink_inst(struct state *s, int ii)
{
	int *pp = &s->head[s->cur_gpu[ii]];

	while (*pp != ii)
		pp = &s->next[*pp];
	*pp = s->next[ii];
	s->next[ii] = -1;
}

static int
inst_size(const struct state *s, int ii)
{
	const struct mig_profile *p = s->f->insts[ii].profile;

	return p != NULL ? p->memory_slices : s->g[s->cur_gpu[ii]].model->full_slices;
}

/* Where instance ii could live now (the first admitting GPU in best-fit order). */
static bool
find_home(struct state *s, int ii, int set, int *gpu, int *start)
{
	const struct mig_profile *p = s->f->insts[ii].profile;
	struct model_fits *mf = model_fits_get(s, s->g[s->cur_gpu[ii]].model);

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

static bool
moves_reserve(struct state *s, int more)
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
static bool
evict_all(struct state *s, int d, const int *ev, int nev, const struct phantom *hold)
{
	struct gp_error err;
	int to_gpu[CATALOG_MAX_SLICES + 1], to_start[CATALOG_MAX_SLICES + 1];
	int order[CATALOG_MAX_SLICES + 1];
	uint8_t block = 0;
	int placed = 0;
	bool ok = true, held = false;

	if (nev > CATALOG_MAX_SLICES + 1 || !moves_reserve(s, nev))
		return false;
	/* largest first */
	for (int i = 0; i < nev; i++)
		order[i] = ev[i];
	for (int i = 1; i < nev; i++)
		for (int j = i; j > 0 && inst_size(s, order[j]) > inst_size(s, order[j - 1]); j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int i = 0; i < nev; i++) {
		int ii = order[i];
		const struct defrag_instance *in = &s->f->insts[ii];

		block |= mask_of(s->cur_start[ii], inst_size(s, ii));
		if (placement_gpu_remove(&s->g[d], in->profile, s->cur_start[ii], &err) < 0)
			return false; /* cannot happen: the layout was built from them */
		unlink_inst(s, ii);
	}
	if (hold != NULL) {
		if (placement_gpu_add(&s->g[d], hold->p, hold->start, &err) < 0) {
			ok = false;
		} else {
			held = true;
			block &= (uint8_t)~s->g[d].used_mask;
		}
	}
	if (ok) {
		s->g[d].used_mask |= block;
		bucket_sync(s, d);
		for (placed = 0; placed < nev; placed++) {
			int ii = order[placed];

			if (!find_home(s, ii, s->set_of[d], &to_gpu[placed], &to_start[placed]) ||
			    placement_gpu_add(&s->g[to_gpu[placed]], s->f->insts[ii].profile,
				to_start[placed], &err) < 0) {
				ok = false;
				break;
			}
			bucket_sync(s, to_gpu[placed]);
		}
		s->g[d].used_mask &= (uint8_t)~block;
	}
	if (!ok) {
		/* undo: the homes found, the reservation, then put them back */
		for (int i = placed - 1; i >= 0; i--) {
			int ii = order[i];

			if (placement_gpu_remove(&s->g[to_gpu[i]], s->f->insts[ii].profile,
				to_start[i], &err) < 0)
				s->oom = true; /* broken invariant: report as internal */
			bucket_sync(s, to_gpu[i]);
		}
		if (held) {
			if (placement_gpu_remove(&s->g[d], hold->p, hold->start, &err) < 0)
				s->oom = true;
			s->g[d].mig_enabled = hold->mig_was;
		}
		for (int i = 0; i < nev; i++) {
			int ii = order[i];

			if (placement_gpu_add(&s->g[d], s->f->insts[ii].profile, s->cur_start[ii],
				&err) < 0)
				s->oom = true;
			link_inst(s, ii, d, s->cur_start[ii]);
		}
		bucket_sync(s, d);
		return false;
	}
	for (int i = 0; i < nev; i++) {
		int ii = order[i];
		struct defrag_move *mv = &s->moves[s->nmoves++];

		mv->inst = ii;
		mv->from_gpu = d;
		mv->from_start = s->cur_start[ii];
		mv->to_gpu = to_gpu[i];
		mv->to_start = to_start[i];
		mv->make_before_break = to_gpu[i] != d;
		link_inst(s, ii, to_gpu[i], to_start[i]);
		s->moved[ii] = true;
	}
	bucket_sync(s, d);
	return true;
}

/*
 * The instances of GPU gi overlapping [start, start + size); false when
 * one of them may not move.
 */
static bool
overlapping(const struct state *s, int gi, int start, int size, int *ev, int *nev, int *slices)
{
	uint8_t r = mask_of(start, size);

	*nev = 0;
	*slices = 0;
	for (int ii = s->head[gi]; ii >= 0; ii = s->next[ii]) {
		const struct defrag_instance *in = &s->f->insts[ii];
		int sz = inst_size(s, ii);

		if ((mask_of(s->cur_start[ii], sz) & r) == 0)
			continue;
		if (!in->movable || in->profile == NULL || s->moved[ii] ||
		    *nev > CATALOG_MAX_SLICES)
			return false;
		ev[(*nev)++] = ii;
		*slices += sz;
	}
	return true;
}

/* Would p fit at start on gi once ev[0..nev) are gone? */
static bool
fits_without(const struct state *s, int gi, const struct mig_profile *p, int start, const int *ev,
    int nev)
{
	struct placement_gpu g = s->g[gi];
	struct gp_error err;

	for (int i = 0; i < nev; i++)
		if (placement_gpu_remove(&g, s->f->insts[ev[i]].profile, s->cur_start[ev[i]],
			&err) < 0)
			return false;
	return placement_gpu_fits(&g, p, start);
}

/* The cheapest place for p on gi (start and evictions), if any. */
static bool
best_place(const struct state *s, int gi, const struct gpu_model *m, const struct mig_profile *p,
    struct cand *out)
{
	const struct placement_gpu *g = &s->g[gi];
	int ev[CATALOG_MAX_SLICES + 1], nev, slices;
	bool have = false;
	int nstarts = p != NULL ? p->nplacements : 1;

	if (g->model != m || g->full_used || s->locked[gi])
		return false;
	if (p != NULL && !g->mig_enabled && !gpu_is_empty(g))
		return false;
	for (int j = 0; j < nstarts; j++) {
		int start = p != NULL ? p->placements[j] : 0;
		int size = p != NULL ? p->memory_slices : m->full_slices;

		if (!overlapping(s, gi, start, size, ev, &nev, &slices) || nev == 0)
			continue;
		if (!fits_without(s, gi, p, start, ev, nev))
			continue;
		if (!have || nev < out->cost || (nev == out->cost && slices < out->slices)) {
			out->cost = nev;
			out->slices = slices;
			out->gpu = gi;
			out->start = start;
			have = true;
		}
	}
	return have;
}

static int
cand_cmp(const void *a, const void *b)
{
	const struct cand *x = a, *y = b;

	if (x->cost != y->cost)
		return x->cost - y->cost;
	if (x->slices != y->slices)
		return x->slices - y->slices;
	return x->gpu - y->gpu;
}

static bool
phantom_push(struct state *s, int gi, const struct mig_profile *p, int start, bool mig_was)
{
	if (s->nph == s->ph_cap) {
		int cap = s->ph_cap == 0 ? 16 : s->ph_cap * 2;
		struct phantom *n = realloc(s->ph, sizeof(*n) * (size_t)cap);

		if (n == NULL) {
			s->oom = true;
			return false;
		}
		s->ph = n;
		s->ph_cap = cap;
	}
	s->ph[s->nph++] = (struct phantom){ .gpu = gi, .p = p, .start = start, .mig_was = mig_was };
	return true;
}

/* The candidates of one item, built once and consumed in order. */
struct cands {
	struct cand *v;
	int n, next;
	bool built;
};

/*
 * Make room for one instance of p (model m) by moving idle instances:
 * the cheapest candidate still valid (each is checked again when its
 * turn comes: earlier moves change the layout).
 */
static int
make_room(struct state *s, const struct gpu_model *m, const struct mig_profile *p, struct cands *cs,
    bool *placed)
{
	*placed = false;
	if (!cs->built) {
		cs->n = 0;
		for (int gi = 0; gi < s->f->ngpus; gi++)
			if (best_place(s, gi, m, p, &cs->v[cs->n]))
				cs->n++;
		qsort(cs->v, (size_t)cs->n, sizeof(*cs->v), cand_cmp);
		cs->next = 0;
		cs->built = true;
	}
	while (cs->next < cs->n && !s->oom) {
		struct cand c;
		int ev[CATALOG_MAX_SLICES + 1], nev, slices;
		struct phantom hold;
		int gi = cs->v[cs->next].gpu;

		if (!best_place(s, gi, m, p, &c) ||
		    !overlapping(s, c.gpu, c.start, p != NULL ? p->memory_slices : m->full_slices,
			ev, &nev, &slices)) {
			cs->next++;
			continue;
		}
		if (s->nmoves + nev > s->max_moves) {
			s->exhausted = true;
			cs->next++;
			continue;
		}
		hold = (struct phantom){ .gpu = c.gpu,
			.p = p,
			.start = c.start,
			.mig_was = s->g[c.gpu].mig_enabled };
		cs->next++;
		if (evict_all(s, c.gpu, ev, nev, &hold)) {
			if (!phantom_push(s, c.gpu, p, c.start, hold.mig_was))
				return -1;
			bucket_sync(s, c.gpu);
			*placed = true;
			return 0;
		}
	}
	return s->oom ? -1 : 0;
}

/* Memory slices of an item's profile ("full": the whole GPU, first). */
static int
item_size(const struct catalog *c, const struct spec_count *sc)
{
	const struct gpu_model *m = catalog_model(c, sc->model);
	const struct mig_profile *p;

	if (strcmp(sc->profile, "full") == 0)
		return 100;
	p = catalog_profile(m, sc->profile);
	return p->memory_slices * 10 + p->compute_slices;
}

/* A start for p on g, the best future-usable space left; false when none. */
static bool
best_start(const struct placement_gpu *g, const struct mig_profile *p, int *start)
{
	uint32_t best = 0;
	bool have = false;

	if (p == NULL) {
		*start = 0;
		return placement_gpu_fits(g, NULL, 0);
	}
	for (int j = 0; j < p->nplacements; j++) {
		uint32_t f;

		if (!placement_gpu_fits(g, p, p->placements[j]))
			continue;
		f = future_of(g->model,
		    (uint8_t)(g->used_mask | mask_of(p->placements[j], p->memory_slices)));
		if (!have || f > best) {
			best = f;
			*start = p->placements[j];
			have = true;
		}
	}
	return have;
}

/*
 * Hold one instance of p (model m) where it fits now: best fit on a GPU
 * already in use, else an empty GPU (from *cursor on, in fleet order).
 * Like the engine, which packs before it takes an empty GPU.
 */
static bool
hold_where_fits(struct state *s, const struct gpu_model *m, const struct mig_profile *p,
    int *cursor)
{
	struct gp_error err;
	int gi = -1, start = 0;
	bool mig_was;

	if (p != NULL) {
		struct model_fits *mf = model_fits_get(s, m);

		for (int k = 0; mf != NULL && k < mf->nfits[p->index] && gi < 0; k++) {
			const struct fit *ft = &mf->fits[p->index][k];

			for (int set = 0; set < s->nsets && gi < 0; set++) {
				const struct vec *v = &s->sets[set].b[ft->mask];
				int tries = v->n < DEFRAG_BUCKET_TRIES ? v->n : DEFRAG_BUCKET_TRIES;

				if (v->n == 0 || s->g[v->v[0]].model != m)
					continue;
				for (int j = 0; j < tries; j++) {
					if (placement_gpu_fits(&s->g[v->v[j]], p, ft->start)) {
						gi = v->v[j];
						start = ft->start;
						break;
					}
				}
			}
		}
	}
	for (; gi < 0 && *cursor < s->f->ngpus; (*cursor)++) {
		const struct placement_gpu *g = &s->g[*cursor];

		if (g->model == m && gpu_is_empty(g) && best_start(g, p, &start))
			gi = *cursor;
	}
	if (gi < 0)
		return false;
	mig_was = s->g[gi].mig_enabled;
	if (placement_gpu_add(&s->g[gi], p, start, &err) < 0 ||
	    !phantom_push(s, gi, p, start, mig_was)) {
		s->oom = true; /* placement_gpu_fits said yes: an internal error */
		return false;
	}
	bucket_sync(s, gi);
	return true;
}

static int
goal_items(struct state *s, const struct catalog *c, const struct defrag_goal *goal,
    struct cand *cbuf, struct gp_error *err)
{
	int order[PLACEMENT_MAX_ITEMS];

	/* largest profile first, as the engine places */
	for (int i = 0; i < goal->nitems; i++)
		order[i] = i;
	for (int i = 1; i < goal->nitems; i++)
		for (int j = i; j > 0 &&
		     item_size(c, &goal->items[order[j]]) >
			 item_size(c, &goal->items[order[j - 1]]);
		     j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int k = 0; k < goal->nitems; k++) {
		const struct spec_count *sc = &goal->items[order[k]];
		const struct gpu_model *m = catalog_model(c, sc->model);
		const struct mig_profile *p =
		    strcmp(sc->profile, "full") == 0 ? NULL : catalog_profile(m, sc->profile);
		struct cands cs = { .v = cbuf };
		int cursor = 0;

		for (int n = 0; n < sc->count; n++) {
			bool placed;

			if (hold_where_fits(s, m, p, &cursor))
				continue;
			if (s->oom)
				break;
			if (make_room(s, m, p, &cs, &placed) < 0 || !placed)
				break; /* the rest of this item cannot be helped either */
		}
		if (s->oom)
			return gp_error_set(err, 500, "internal", "out of memory");
	}
	return 0;
}

static int
goal_free_gpus(struct state *s, struct cand *cs)
{
	int nc = 0;

	for (int gi = 0; gi < s->f->ngpus; gi++) {
		const struct placement_gpu *g = &s->g[gi];
		int ev[CATALOG_MAX_SLICES + 1], nev, slices;

		if (gpu_is_empty(g) || g->full_used || !g->mig_enabled)
			continue;
		if (!overlapping(s, gi, 0, g->model->memory_slices, ev, &nev, &slices))
			continue;
		cs[nc++] = (struct cand){ .cost = nev, .slices = slices, .gpu = gi, .start = 0 };
	}
	qsort(cs, (size_t)nc, sizeof(*cs), cand_cmp);
	for (int k = 0; k < nc && !s->oom; k++) {
		int gi = cs[k].gpu;
		int ev[CATALOG_MAX_SLICES + 1], nev, slices;

		if (!overlapping(s, gi, 0, s->g[gi].model->memory_slices, ev, &nev, &slices) ||
		    nev == 0 || nev > cs[k].cost)
			continue; /* it took instances meanwhile: keep it as a home */
		if (s->nmoves + nev > s->max_moves) {
			s->exhausted = true;
			if (s->nmoves >= s->max_moves)
				break;
			continue;
		}
		s->locked[gi] = true;
		bucket_sync(s, gi);
		(void)evict_all(s, gi, ev, nev, NULL);
		s->locked[gi] = false;
		bucket_sync(s, gi);
	}
	return s->oom ? -1 : 0;
}

static int
i64_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

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

static int
count_empty(const struct placement_gpu *g, int n)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		k += gpu_is_empty(&g[i]);
	return k;
}

/*
 * Whole request, and each item alone, placeable on g (the engine's
 * verdict)? Only GPUs with room for one of the items are shown to the
 * engine: a GPU that could take none of them takes no part in any
 * placement of the request, so the verdict is the same, and a request of
 * thousands of instances is not placed against every GPU of the fleet.
 * scratch holds n GPUs.
 */
static void
placeable(const struct catalog *c, const struct placement_gpu *g, int n,
    const struct defrag_goal *goal, struct placement_gpu *scratch, struct placement *buf, int cap,
    bool *all, bool *each)
{
	struct placement_result res = { .placements = buf, .cap = cap };
	const struct mig_profile *ps[PLACEMENT_MAX_ITEMS];
	const struct gpu_model *ms[PLACEMENT_MAX_ITEMS];
	struct gp_error e;
	int k = 0;

	for (int i = 0; i < goal->nitems; i++) {
		ms[i] = catalog_model(c, goal->items[i].model);
		ps[i] = strcmp(goal->items[i].profile, "full") == 0
		    ? NULL
		    : catalog_profile(ms[i], goal->items[i].profile);
	}
	for (int gi = 0; gi < n; gi++)
		for (int i = 0; i < goal->nitems; i++)
			if (g[gi].model == ms[i] && placement_gpu_headroom(&g[gi], ps[i]) > 0) {
				scratch[k++] = g[gi];
				break;
			}
	*all = placement_find(c, scratch, k, goal->items, goal->nitems, 0, &res, &e) == 0;
	if (goal->nitems == 1) {
		each[0] = *all;
		return;
	}
	for (int i = 0; i < goal->nitems; i++) {
		res = (struct placement_result){ .placements = buf, .cap = cap };
		each[i] =
		    *all || placement_find(c, scratch, k, &goal->items[i], 1, 0, &res, &e) == 0;
	}
}

static void
state_free(struct state *s)
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
static int
state_init(struct state *s, const struct defrag_fleet *f, struct gp_error *err)
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
		link_inst(s, i, in->gpu, in->start);
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
		bucket_sync(s, i);
	return s->oom ? gp_error_set(err, 500, "internal", "out of memory") : 0;
}

static int
validate_items(const struct catalog *c, const struct defrag_goal *goal, struct gp_error *err)
{
	if (goal->max_moves < 0)
		return gp_error_field(err, "max_moves", "must be 0 or more");
	if (goal->kind != DEFRAG_GOAL_ITEMS)
		return 0;
	if (goal->nitems < 1 || goal->nitems > PLACEMENT_MAX_ITEMS)
		return gp_error_field(err, "items", "must hold 1 to %d items", PLACEMENT_MAX_ITEMS);
	for (int i = 0; i < goal->nitems; i++) {
		const struct gpu_model *m = catalog_model(c, goal->items[i].model);

		if (m == NULL)
			return gp_error_field(err, "items", "item %d: unknown model %s", i,
			    goal->items[i].model);
		if (strcmp(goal->items[i].profile, "full") != 0 &&
		    catalog_profile(m, goal->items[i].profile) == NULL)
			return gp_error_field(err, "items", "item %d: %s has no profile %s", i,
			    m->id, goal->items[i].profile);
		if (goal->items[i].count < 1)
			return gp_error_field(err, "items", "item %d: count must be at least 1", i);
	}
	return 0;
}

int
defrag_plan(const struct catalog *c, const struct defrag_fleet *fleet,
    const struct defrag_goal *goal, struct defrag_plan *plan, struct gp_error *err)
{
	struct state s;
	struct cand *cs = NULL;
	struct placement *buf = NULL;
	struct placement_gpu *scratch = NULL;
	int cap = 0, rc = -1;

	memset(plan, 0, sizeof(*plan));
	memset(&s, 0, sizeof(s));
	if (validate_items(c, goal, err) < 0)
		return -1;
	if (goal->kind == DEFRAG_GOAL_ITEMS)
		for (int i = 0; i < goal->nitems; i++)
			cap += goal->items[i].count;
	if (state_init(&s, fleet, err) < 0)
		goto out;
	s.max_moves = goal->max_moves;
	cs = malloc(sizeof(*cs) * (size_t)(fleet->ngpus + 1));
	buf = malloc(sizeof(*buf) * (size_t)(cap + 1));
	scratch = malloc(sizeof(*scratch) * (size_t)(fleet->ngpus + 1));
	if (cs == NULL || buf == NULL || scratch == NULL) {
		gp_error_set(err, 500, "internal", "out of memory");
		goto out;
	}
	plan->free_gpus_before = count_empty(s.g, fleet->ngpus);
	if (goal->kind == DEFRAG_GOAL_ITEMS) {
		placeable(c, s.g, fleet->ngpus, goal, scratch, buf, cap, &plan->placeable_before,
		    plan->item_before);
		if (!plan->placeable_before && goal_items(&s, c, goal, cs, err) < 0)
			goto out;
		/* drop the reservations, newest first */
		for (int i = s.nph - 1; i >= 0; i--) {
			struct gp_error e;

			if (placement_gpu_remove(&s.g[s.ph[i].gpu], s.ph[i].p, s.ph[i].start, &e) <
			    0) {
				gp_error_set(err, 500, "internal", "reservation lost: %s",
				    e.message);
				goto out;
			}
			s.g[s.ph[i].gpu].mig_enabled = s.ph[i].mig_was;
		}
		if (plan->placeable_before) {
			plan->placeable_after = true;
			memcpy(plan->item_after, plan->item_before, sizeof(plan->item_after));
		} else {
			placeable(c, s.g, fleet->ngpus, goal, scratch, buf, cap,
			    &plan->placeable_after, plan->item_after);
		}
	} else if (goal_free_gpus(&s, cs) < 0) {
		gp_error_set(err, 500, "internal", "out of memory");
		goto out;
	}
	if (s.oom) {
		gp_error_set(err, 500, "internal", "out of memory");
		goto out;
	}
	plan->free_gpus_after = count_empty(s.g, fleet->ngpus);
	plan->moves = s.moves;
	plan->nmoves = s.nmoves;
	s.moves = NULL;
	plan->after = s.g;
	plan->ngpus = fleet->ngpus;
	s.g = NULL;
	plan->moves_exhausted = s.exhausted;
	plan->tenants = malloc(sizeof(int64_t) * (size_t)(plan->nmoves + 1));
	if (plan->tenants == NULL) {
		gp_error_set(err, 500, "internal", "out of memory");
		goto out;
	}
	for (int i = 0; i < plan->nmoves; i++) {
		int64_t t = fleet->insts[plan->moves[i].inst].tenant;

		if (t != 0)
			plan->tenants[plan->ntenants++] = t;
	}
	qsort(plan->tenants, (size_t)plan->ntenants, sizeof(int64_t), i64_cmp);
	{
		int k = 0;

		for (int i = 0; i < plan->ntenants; i++)
			if (k == 0 || plan->tenants[k - 1] != plan->tenants[i])
				plan->tenants[k++] = plan->tenants[i];
		plan->ntenants = k;
	}
	rc = 0;
out:
	free(s.moves);
	free(s.g);
	state_free(&s);
	free(cs);
	free(buf);
	free(scratch);
	if (rc < 0)
		defrag_plan_free(plan);
	return rc;
}

void
defrag_plan_free(struct defrag_plan *plan)
{
	free(plan->moves);
	free(plan->after);
	free(plan->tenants);
	plan->moves = NULL;
	plan->after = NULL;
	plan->tenants = NULL;
	plan->nmoves = 0;
	plan->ntenants = 0;
}
