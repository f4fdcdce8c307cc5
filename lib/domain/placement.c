/*
 * placement.c - the placement engine: choosing GPUs and MIG starts for a
 * request, all or nothing, plus per-GPU capacity figures (headroom,
 * stranded compute). See placement.h for the rules and their limits.
 */
#include "domain/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One instance to place: which item, which profile (NULL: whole GPU). */
struct unit {
	int item;
	const struct mig_profile *p;
	int kind; /* index of p among the search's kinds */
};

/* A candidate (GPU, start) with the keys it is ranked by. */
struct cand {
	int gpu;
	int start;
	bool sw;
	int instances;
	uint32_t future;
};

/* Sort record for the search's canonical GPU order. */
struct gpu_ref {
	int idx;
	const struct placement_gpu *g;
};

static uint8_t
run_mask(int start, int size)
{
	return (uint8_t)(((1u << size) - 1u) << start);
}

static bool
gpu_empty(const struct placement_gpu *g)
{
	return g->used_mask == 0 && g->instances == 0 && !g->full_used;
}

static bool
profile_of(const struct gpu_model *m, const struct mig_profile *p)
{
	return p->index >= 0 && p->index < m->nprofiles && &m->profiles[p->index] == p;
}

/*
 * GPU-level rules for p on g, starts aside: true when some start could
 * take p, with *sw telling whether the MIG mode must change.
 */
static bool
gpu_admits(const struct placement_gpu *g, const struct mig_profile *p, bool *sw)
{
	const struct gpu_model *m = g->model;

	if (p == NULL) {
		if (!gpu_empty(g))
			return false;
		*sw = g->mig_enabled;
		return true;
	}
	if (g->full_used || !m->mig_capable)
		return false;
	if (!g->mig_enabled && !gpu_empty(g))
		return false;
	if (g->profile_count[p->index] >= p->max_instances ||
	    g->compute_used + p->compute_slices > m->compute_slices)
		return false;
	*sw = !g->mig_enabled;
	return true;
}

static void
gpu_apply(struct placement_gpu *g, const struct mig_profile *p, int start, bool sw)
{
	if (p == NULL) {
		g->full_used = true;
		g->used_mask = run_mask(0, g->model->full_slices);
		if (sw)
			g->mig_enabled = false;
		return;
	}
	g->used_mask |= run_mask(start, p->memory_slices);
	g->instances++;
	g->compute_used += p->compute_slices;
	g->profile_count[p->index]++;
	if (sw)
		g->mig_enabled = true;
}

static void
gpu_unapply(struct placement_gpu *g, const struct mig_profile *p, int start, bool sw)
{
	if (p == NULL) {
		g->full_used = false;
		g->used_mask = 0;
		if (sw)
			g->mig_enabled = true;
		return;
	}
	g->used_mask &= (uint8_t)~run_mask(start, p->memory_slices);
	g->instances--;
	g->compute_used -= p->compute_slices;
	g->profile_count[p->index]--;
	if (sw)
		g->mig_enabled = false;
}

/*
 * Future-usable space of a layout: for each run size (1..8 slices) the
 * number of the model's distinct catalog runs still free, one nibble per
 * size with the largest size most significant, so that comparing keys
 * compares the largest free run first, then how many of them remain.
 */
static uint32_t
future_key(const struct gpu_model *m, uint8_t mask)
{
	uint32_t k = 0;

	for (int i = 0; i < m->nruns; i++) {
		if ((mask & m->run_mask[i]) == 0)
			k += 1u << (4 * (m->run_size[i] - 1));
	}
	return k;
}

static bool
cand_better(const struct placement_gpu *gpus, const struct cand *a, const struct cand *b)
{
	const struct placement_gpu *ga = &gpus[a->gpu], *gb = &gpus[b->gpu];

	if (a->instances != b->instances)
		return a->instances > b->instances;
	if (a->sw != b->sw)
		return !a->sw;
	if (a->future != b->future)
		return a->future > b->future;
	if (ga->node_id != gb->node_id)
		return ga->node_id < gb->node_id;
	if (ga->index != gb->index)
		return ga->index < gb->index;
	if (ga->id != gb->id)
		return ga->id < gb->id;
	if (a->gpu != b->gpu)
		return a->gpu < b->gpu;
	return a->start < b->start;
}

/* The preferred candidate for one instance of p on model m, if any. */
static bool
place_best(const struct placement_gpu *gpus, int ngpus, const struct gpu_model *m,
    const struct mig_profile *p, struct cand *best)
{
	bool have = false;

	for (int i = 0; i < ngpus; i++) {
		const struct placement_gpu *g = &gpus[i];
		struct cand c;
		bool sw;

		if (g->model != m || !gpu_admits(g, p, &sw))
			continue;
		c.gpu = i;
		c.sw = sw;
		c.instances = g->instances;
		/* the GPU-level keys alone may already lose */
		if (have &&
		    (c.instances < best->instances ||
			(c.instances == best->instances && sw && !best->sw)))
			continue;
		if (p == NULL) {
			c.start = 0;
			c.future = 0;
			if (!have || cand_better(gpus, &c, best)) {
				*best = c;
				have = true;
			}
			continue;
		}
		for (int j = 0; j < p->nplacements; j++) {
			uint8_t r = run_mask(p->placements[j], p->memory_slices);

			if ((g->used_mask & r) != 0)
				continue;
			c.start = p->placements[j];
			c.future = future_key(m, (uint8_t)(g->used_mask | r));
			if (!have || cand_better(gpus, &c, best)) {
				*best = c;
				have = true;
			}
		}
	}
	return have;
}

void
placement_gpu_init(struct placement_gpu *g, const struct gpu_model *m, int64_t id, int64_t node_id,
    int index, bool mig_enabled)
{
	memset(g, 0, sizeof(*g));
	g->id = id;
	g->node_id = node_id;
	g->index = index;
	g->model = m;
	g->mig_enabled = mig_enabled && m->mig_capable;
}

bool
placement_gpu_fits(const struct placement_gpu *g, const struct mig_profile *p, int start)
{
	bool sw;

	if (p != NULL && !profile_of(g->model, p))
		return false;
	if (!gpu_admits(g, p, &sw))
		return false;
	if (p == NULL)
		return start == 0;
	return catalog_profile_allows(p, start) &&
	    (g->used_mask & run_mask(start, p->memory_slices)) == 0;
}

int
placement_gpu_add(struct placement_gpu *g, const struct mig_profile *p, int start,
    struct gp_error *err)
{
	const struct gpu_model *m = g->model;

	if (p == NULL) {
		if (start != 0)
			return gp_error_set(err, 409, "conflict",
			    "a whole-gpu allocation starts at slice 0, not %d", start);
		if (!gpu_empty(g))
			return gp_error_set(err, 409, "conflict",
			    "gpu %lld is not empty: a whole-gpu allocation needs all of it",
			    (long long)g->id);
		gpu_apply(g, NULL, 0, g->mig_enabled);
		return 0;
	}
	if (!profile_of(m, p))
		return gp_error_set(err, 409, "conflict", "%s is not a profile of model %s",
		    p->name, m->id);
	if (g->full_used)
		return gp_error_set(err, 409, "conflict",
		    "gpu %lld is held by a whole-gpu allocation", (long long)g->id);
	if (!catalog_profile_allows(p, start))
		return gp_error_set(err, 409, "conflict",
		    "start %d is not a catalog placement of %s on %s", start, p->name, m->id);
	if ((g->used_mask & run_mask(start, p->memory_slices)) != 0)
		return gp_error_set(err, 409, "conflict",
		    "slices [%d, %d) of gpu %lld overlap a live allocation", start,
		    start + p->memory_slices, (long long)g->id);
	if (g->profile_count[p->index] >= p->max_instances)
		return gp_error_set(err, 409, "conflict",
		    "gpu %lld already holds %d instances of %s, the most it takes",
		    (long long)g->id, p->max_instances, p->name);
	if (g->compute_used + p->compute_slices > m->compute_slices)
		return gp_error_set(err, 409, "conflict",
		    "%s needs %d compute slices but gpu %lld has %d free", p->name,
		    p->compute_slices, (long long)g->id, m->compute_slices - g->compute_used);
	gpu_apply(g, p, start, !g->mig_enabled);
	return 0;
}

int
placement_gpu_remove(struct placement_gpu *g, const struct mig_profile *p, int start,
    struct gp_error *err)
{
	if (p == NULL) {
		if (!g->full_used || start != 0)
			return gp_error_set(err, 409, "conflict",
			    "gpu %lld holds no whole-gpu allocation", (long long)g->id);
		g->full_used = false;
		g->used_mask = 0;
		return 0;
	}
	if (!profile_of(g->model, p) || g->profile_count[p->index] == 0 ||
	    !catalog_profile_allows(p, start) ||
	    (g->used_mask & run_mask(start, p->memory_slices)) != run_mask(start, p->memory_slices))
		return gp_error_set(err, 409, "conflict",
		    "gpu %lld holds no %s instance at slice %d", (long long)g->id, p->name, start);
	g->used_mask &= (uint8_t)~run_mask(start, p->memory_slices);
	g->instances--;
	g->compute_used -= p->compute_slices;
	g->profile_count[p->index]--;
	return 0;
}

/*
 * Most instances of p that fit in the free slices of mask (no other limit).
 * The runs of one profile are intervals of equal length with ascending
 * starts, so taking each free run that begins after the last one taken
 * (earliest end first) is the optimal interval schedule.
 */
static int
headroom_slices(const struct mig_profile *p, uint8_t mask)
{
	int n = 0, end = 0;

	for (int i = 0; i < p->nplacements; i++) {
		int start = p->placements[i];

		if (start < end || (mask & run_mask(start, p->memory_slices)) != 0)
			continue;
		n++;
		end = start + p->memory_slices;
	}
	return n;
}

int
placement_gpu_headroom(const struct placement_gpu *g, const struct mig_profile *p)
{
	bool sw;
	int n, lim;

	if (p != NULL && !profile_of(g->model, p))
		return 0;
	if (!gpu_admits(g, p, &sw))
		return 0;
	if (p == NULL)
		return 1;
	n = headroom_slices(p, g->used_mask);
	lim = p->max_instances - g->profile_count[p->index];
	if (lim < n)
		n = lim;
	lim = (g->model->compute_slices - g->compute_used) / p->compute_slices;
	return lim < n ? lim : n;
}

/*
 * Most compute slices any set of further instances could add to g:
 * depth-first over (profile, start) pairs in a fixed order, each set once.
 */
static void
reach_dfs(struct placement_gpu *g, int from, int gained, int goal, int *best)
{
	const struct gpu_model *m = g->model;

	if (gained > *best)
		*best = gained;
	for (int idx = from; idx < m->nprofiles * CATALOG_MAX_SLICES && *best < goal; idx++) {
		const struct mig_profile *p = &m->profiles[idx / CATALOG_MAX_SLICES];
		int j = idx % CATALOG_MAX_SLICES;
		int start;
		bool sw;

		if (j >= p->nplacements || !gpu_admits(g, p, &sw))
			continue;
		start = p->placements[j];
		if ((g->used_mask & run_mask(start, p->memory_slices)) != 0)
			continue;
		gpu_apply(g, p, start, false);
		reach_dfs(g, idx + 1, gained + p->compute_slices, goal, best);
		gpu_unapply(g, p, start, false);
	}
}

int
placement_gpu_stranded(const struct placement_gpu *g)
{
	struct placement_gpu copy;
	int free_compute, best = 0;

	if (g->full_used || !g->model->mig_capable || g->instances == 0)
		return 0;
	free_compute = g->model->compute_slices - g->compute_used;
	if (free_compute <= 0)
		return 0;
	copy = *g;
	copy.mig_enabled = true;
	reach_dfs(&copy, 0, 0, free_compute, &best);
	return free_compute - best;
}

bool
placement_gpu_preference(const struct placement_gpu *g, const struct mig_profile *p, uint64_t *key)
{
	const struct gpu_model *m = g->model;
	uint32_t future = 0;
	bool sw, have = false;

	if (p != NULL && !profile_of(m, p))
		return false;
	if (!gpu_admits(g, p, &sw))
		return false;
	if (p != NULL) {
		/* the GPU's best start, as place_best ranks its candidates */
		for (int j = 0; j < p->nplacements; j++) {
			uint8_t r = run_mask(p->placements[j], p->memory_slices);
			uint32_t f;

			if ((g->used_mask & r) != 0)
				continue;
			f = future_key(m, (uint8_t)(g->used_mask | r));
			if (!have || f > future)
				future = f;
			have = true;
		}
		if (!have)
			return false;
	}
	*key = (uint64_t)(unsigned)g->instances << 33 | (uint64_t)(sw ? 0 : 1) << 32 | future;
	return true;
}

void
placement_class_rank(struct placement_class *cl)
{
	const struct gpu_model *m = cl->g.model;

	cl->admits = 0;
	memset(cl->pref, 0, sizeof(cl->pref));
	for (int i = 0; i <= m->nprofiles; i++) {
		if (placement_gpu_preference(&cl->g, i == 0 ? NULL : &m->profiles[i - 1],
			&cl->pref[i]))
			cl->admits |= 1u << i;
	}
}

void
placement_capacity(const struct gpu_model *m, const struct placement_gpu *gpus, int ngpus,
    struct placement_capacity *out)
{
	memset(out, 0, sizeof(*out));
	for (int i = 0; i < ngpus; i++) {
		const struct placement_gpu *g = &gpus[i];

		if (g->model != m)
			continue;
		out->gpus++;
		if (gpu_empty(g))
			out->empty_gpus++;
		if (g->full_used) {
			out->full_gpus++;
			continue;
		}
		out->instances += g->instances;
		out->compute_free += m->compute_slices - g->compute_used;
		out->compute_stranded += placement_gpu_stranded(g);
		for (int j = 0; j < m->nprofiles; j++)
			out->headroom[j] += placement_gpu_headroom(g, &m->profiles[j]);
	}
}

/* ---- the exact search, run only when the greedy pass falls short ---- */

static int
gpu_ref_cmp(const void *a, const void *b)
{
	const struct gpu_ref *ra = a, *rb = b;
	const struct placement_gpu *x = ra->g, *y = rb->g;
	int r;

	if (x->instances != y->instances)
		return x->instances > y->instances ? -1 : 1;
	if (x->mig_enabled != y->mig_enabled)
		return x->mig_enabled ? -1 : 1;
	if (x->full_used != y->full_used)
		return x->full_used ? 1 : -1;
	if (x->used_mask != y->used_mask)
		return x->used_mask < y->used_mask ? -1 : 1;
	if (x->compute_used != y->compute_used)
		return x->compute_used < y->compute_used ? -1 : 1;
	r = memcmp(x->profile_count, y->profile_count, sizeof(x->profile_count));
	if (r != 0)
		return r;
	if (x->node_id != y->node_id)
		return x->node_id < y->node_id ? -1 : 1;
	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	return (ra->idx > rb->idx) - (ra->idx < rb->idx);
}

static bool
gpu_same_state(const struct placement_gpu *x, const struct placement_gpu *y)
{
	return x->instances == y->instances && x->mig_enabled == y->mig_enabled &&
	    x->full_used == y->full_used && x->used_mask == y->used_mask &&
	    x->compute_used == y->compute_used &&
	    memcmp(x->profile_count, y->profile_count, sizeof(x->profile_count)) == 0;
}

#define SEARCH_MAX_KINDS (CATALOG_MAX_PROFILES + 1)

struct search {
	struct placement_gpu *gpus;
	const struct gpu_model *m;
	const struct unit *units;
	int nunits;
	int npos;
	int *pos;                   /* canonical order -> gpus index */
	int *klass;                 /* equal initial state -> equal class, contiguous */
	int *touched;               /* instances this search put there */
	int *cur_pos, *cur_si, *lb; /* per level: next candidate, lower bound */
	/* distinct profiles asked for (NULL: whole GPU) and running bounds */
	const struct mig_profile *kinds[SEARCH_MAX_KINDS];
	int nkinds;
	int rem[SEARCH_MAX_KINDS];     /* instances not yet placed, per kind */
	int hsum[SEARCH_MAX_KINDS];    /* summed headroom over the GPUs, per kind */
	int rem_compute, rem_slices;   /* what the unplaced instances need */
	int free_compute, free_slices; /* what the GPUs have */
	long budget;
	bool exhausted;
};

/* Free compute and memory slices of g that instances could still use. */
static void
gpu_free(const struct gpu_model *m, const struct placement_gpu *g, int *compute, int *slices)
{
	*compute = 0;
	*slices = 0;
	if (g->full_used)
		return;
	*slices =
	    (m->mig_capable ? m->memory_slices : m->full_slices) - __builtin_popcount(g->used_mask);
	if (m->mig_capable && (g->mig_enabled || gpu_empty(g)))
		*compute = m->compute_slices - g->compute_used;
}

/* Add (sign 1) or take away (sign -1) g's share of the running bounds. */
static void
search_account(struct search *s, const struct placement_gpu *g, int sign)
{
	int fc, fs;

	gpu_free(s->m, g, &fc, &fs);
	s->free_compute += sign * fc;
	s->free_slices += sign * fs;
	for (int i = 0; i < s->nkinds; i++)
		s->hsum[i] += sign * placement_gpu_headroom(g, s->kinds[i]);
}

static void
search_unit_need(struct search *s, const struct unit *u, int sign)
{
	s->rem[u->kind] += sign;
	if (u->p == NULL) {
		s->rem_slices += sign * s->m->full_slices;
	} else {
		s->rem_compute += sign * u->p->compute_slices;
		s->rem_slices += sign * u->p->memory_slices;
	}
}

/*
 * Necessary conditions for the unplaced instances (a cheap proof of "no"):
 * per profile the demand within the summed headroom of each GPU alone, and
 * compute and memory within what is free.
 */
static bool
search_bound_ok(const struct search *s)
{
	for (int i = 0; i < s->nkinds; i++) {
		if (s->rem[i] > s->hsum[i])
			return false;
	}
	return s->rem_compute <= s->free_compute && s->rem_slices <= s->free_slices;
}

/* Place or take back unit k at position pi, keeping the bounds current. */
static void
search_do(struct search *s, int k, int pi, int start, bool sw, bool undo)
{
	struct placement_gpu *g = &s->gpus[s->pos[pi]];
	const struct unit *u = &s->units[k];

	search_account(s, g, -1);
	if (undo)
		gpu_unapply(g, u->p, start, sw);
	else
		gpu_apply(g, u->p, start, sw);
	search_account(s, g, 1);
	search_unit_need(s, u, undo ? 1 : -1);
	s->touched[pi] += undo ? -1 : 1;
	s->budget -= 2 * s->nkinds;
}

/* True when an untouched GPU of p's class was allowed earlier at this level. */
static bool
search_symmetric(const struct search *s, int p, int lb_pos)
{
	for (int q = p - 1; q >= lb_pos && s->klass[q] == s->klass[p]; q--) {
		if (s->touched[q] == 0)
			return true;
	}
	return false;
}

/* Advance level k's cursor to its next fitting candidate. */
static bool
search_next(struct search *s, int k, int *out_pos, int *out_si, bool *out_sw)
{
	const struct mig_profile *p = s->units[k].p;
	int nstarts = p != NULL ? p->nplacements : 1;

	for (int i = s->cur_pos[k]; i < s->npos; i++) {
		struct placement_gpu *g = &s->gpus[s->pos[i]];
		int si = i == s->cur_pos[k] ? s->cur_si[k] : 0;
		bool sw;

		if (--s->budget < 0) {
			s->exhausted = true;
			return false;
		}
		if (si >= nstarts || !gpu_admits(g, p, &sw))
			continue;
		if (s->touched[i] == 0 && search_symmetric(s, i, s->lb[k]))
			continue;
		for (; si < nstarts; si++) {
			int start = p != NULL ? p->placements[si] : 0;

			if (p != NULL && (g->used_mask & run_mask(start, p->memory_slices)) != 0)
				continue;
			s->cur_pos[k] = i;
			s->cur_si[k] = si + 1;
			*out_pos = i;
			*out_si = si;
			*out_sw = sw;
			return true;
		}
	}
	s->cur_pos[k] = s->npos;
	return false;
}

/*
 * Level k starts after the previous instance of the same profile: instances
 * of one profile are interchangeable, so only ordered choices are tried.
 */
static void
search_enter(struct search *s, int k)
{
	if (k > 0 && s->units[k].kind == s->units[k - 1].kind) {
		s->cur_pos[k] = s->cur_pos[k - 1];
		s->cur_si[k] = s->cur_si[k - 1] - 1;
	} else {
		s->cur_pos[k] = 0;
		s->cur_si[k] = 0;
	}
	s->lb[k] = s->cur_pos[k];
}

/*
 * Depth-first search over the instances in s->units, placements written to
 * out[0..nunits). Returns 1 when found (applied to gpus), 0 when none
 * exists or the budget ran out (s->exhausted), gpus left as they were.
 */
static int
search_run(struct search *s, struct placement *out)
{
	int k = 0;

	if (!search_bound_ok(s))
		return 0;
	search_enter(s, 0);
	for (;;) {
		int pi, si;
		bool sw;

		if (k == s->nunits)
			return 1;
		if (search_next(s, k, &pi, &si, &sw)) {
			const struct unit *u = &s->units[k];
			int start = u->p != NULL ? u->p->placements[si] : 0;

			search_do(s, k, pi, start, sw, false);
			if (!search_bound_ok(s)) {
				search_do(s, k, pi, start, sw, true);
				continue;
			}
			out[k].item = u->item;
			out[k].gpu = s->pos[pi];
			out[k].profile = u->p;
			out[k].start = start;
			out[k].size = u->p != NULL ? u->p->memory_slices : s->m->full_slices;
			out[k].mode_switch = sw;
			k++;
			if (k < s->nunits)
				search_enter(s, k);
			continue;
		}
		if (s->exhausted || k == 0)
			break;
		k--;
		search_do(s, k, s->cur_pos[k], out[k].start, out[k].mode_switch, true);
	}
	while (k > 0) {
		k--;
		search_do(s, k, s->cur_pos[k], out[k].start, out[k].mode_switch, true);
	}
	return 0;
}

/*
 * Search a placement for the instances of model m's items (in the greedy
 * order `order`), appending to out. Returns 1 found, 0 not found, -1 when
 * scratch memory could not be had.
 */
static int
search_model(struct placement_gpu *gpus, int ngpus, const struct gpu_model *m,
    const struct spec_count *items, const struct gpu_model **models,
    const struct mig_profile **profs, const int *order, int nitems, struct placement *out,
    struct placement_result *res)
{
	struct search s;
	struct gpu_ref *refs = NULL;
	struct unit *units = NULL;
	int *ints = NULL;
	int nunits = 0, rc = -1;

	memset(&s, 0, sizeof(s));
	for (int i = 0; i < nitems; i++) {
		if (models[order[i]] == m)
			nunits += items[order[i]].count;
	}
	units = malloc((size_t)nunits * sizeof(*units));
	refs = malloc((size_t)(ngpus > 0 ? ngpus : 1) * sizeof(*refs));
	/* pos, klass, touched: ngpus each; cur_pos, cur_si, lb: nunits each */
	ints = malloc((size_t)(3 * ngpus + 3 * nunits + 1) * sizeof(*ints));
	if (units == NULL || refs == NULL || ints == NULL)
		goto fail;
	s.m = m;
	nunits = 0;
	for (int i = 0; i < nitems; i++) {
		int it = order[i], kind = 0;

		if (models[it] != m)
			continue;
		while (kind < s.nkinds && s.kinds[kind] != profs[it])
			kind++;
		if (kind == s.nkinds)
			s.kinds[s.nkinds++] = profs[it];
		for (int k = 0; k < items[it].count; k++) {
			units[nunits].item = it;
			units[nunits].p = profs[it];
			units[nunits].kind = kind;
			search_unit_need(&s, &units[nunits], 1);
			nunits++;
		}
	}
	for (int i = 0; i < ngpus; i++) {
		if (gpus[i].model != m)
			continue;
		refs[s.npos].idx = i;
		refs[s.npos].g = &gpus[i];
		s.npos++;
		search_account(&s, &gpus[i], 1);
	}
	qsort(refs, (size_t)s.npos, sizeof(*refs), gpu_ref_cmp);
	s.gpus = gpus;
	s.units = units;
	s.nunits = nunits;
	s.pos = ints;
	s.klass = ints + ngpus;
	s.touched = ints + 2 * ngpus;
	s.cur_pos = ints + 3 * ngpus;
	s.cur_si = s.cur_pos + nunits;
	s.lb = s.cur_si + nunits;
	s.budget = PLACEMENT_SEARCH_BUDGET;
	for (int i = 0; i < s.npos; i++) {
		s.pos[i] = refs[i].idx;
		s.touched[i] = 0;
		s.klass[i] = i == 0
		    ? 0
		    : s.klass[i - 1] + (gpu_same_state(refs[i - 1].g, refs[i].g) ? 0 : 1);
	}
	res->searched = true;
	rc = search_run(&s, out);
	if (s.exhausted)
		res->search_exhausted = true;
fail:
	free(units);
	free(refs);
	free(ints);
	return rc;
}

/*
 * Order of items: larger profiles first (whole GPUs, then memory slices,
 * then compute slices), items of one profile next to each other, then by
 * item index.
 */
static int
unit_rank(const struct gpu_model *m, const struct mig_profile *p)
{
	if (p == NULL)
		return 1 << 16 | (m->full_slices << 8);
	return p->memory_slices << 8 | p->compute_slices;
}

static bool
item_before(const struct gpu_model **models, const struct mig_profile **profs, int a, int b)
{
	int ra = unit_rank(models[a], profs[a]), rb = unit_rank(models[b], profs[b]);
	int pa = profs[a] != NULL ? profs[a]->index : -1;
	int pb = profs[b] != NULL ? profs[b]->index : -1;

	if (ra != rb)
		return ra > rb;
	if (pa != pb)
		return pa < pb;
	return a < b;
}

static int
placement_cmp(const void *a, const void *b)
{
	const struct placement *x = a, *y = b;

	if (x->item != y->item)
		return x->item < y->item ? -1 : 1;
	if (x->gpu != y->gpu)
		return x->gpu < y->gpu ? -1 : 1;
	return (x->start > y->start) - (x->start < y->start);
}

static void
undo_all(struct placement_gpu *gpus, const struct placement *out, int n)
{
	for (int i = n - 1; i >= 0; i--)
		gpu_unapply(&gpus[out[i].gpu], out[i].profile, out[i].start, out[i].mode_switch);
}

/*
 * Validate items (errors name "items[i]") into models and profs, and sort
 * their indexes into order: placement_find's order (item_before).
 */
static int
items_prepare(const struct catalog *c, const struct spec_count *items, int nitems,
    const struct gpu_model **models, const struct mig_profile **profs, int *order,
    struct gp_error *err)
{
	bool bad = false;

	if (nitems < 0 || nitems > PLACEMENT_MAX_ITEMS)
		return gp_error_field(err, "items", "must hold at most %d items",
		    PLACEMENT_MAX_ITEMS);
	for (int i = 0; i < nitems; i++) {
		char path[32];

		snprintf(path, sizeof(path), "items[%d]", i);
		if (spec_validate(&items[i], c, path, &models[i], &profs[i], err) < 0)
			bad = true;
	}
	if (bad)
		return -1;
	for (int i = 0; i < nitems; i++) {
		int j = i;

		while (j > 0 && item_before(models, profs, i, order[j - 1])) {
			order[j] = order[j - 1];
			j--;
		}
		order[j] = i;
	}
	return 0;
}

/* What placement_find works on, validated and ordered. */
struct find_items {
	const struct spec_count *items;
	int nitems;
	const struct gpu_model *models[PLACEMENT_MAX_ITEMS];
	const struct mig_profile *profs[PLACEMENT_MAX_ITEMS];
	int order[PLACEMENT_MAX_ITEMS];
};

/* The greedy pass: each instance on its best GPU, in order; how many placed. */
static int
find_greedy(struct placement_gpu *gpus, int ngpus, const struct find_items *fi,
    struct placement_result *res)
{
	struct placement *out = res->placements;
	int n = 0;

	for (int oi = 0; oi < fi->nitems; oi++) {
		int it = fi->order[oi];
		const struct mig_profile *prof = fi->profs[it];

		for (int k = 0; k < fi->items[it].count; k++) {
			struct cand best;

			if (!place_best(gpus, ngpus, fi->models[it], prof, &best)) {
				res->missing[it] = fi->items[it].count - k;
				break;
			}
			gpu_apply(&gpus[best.gpu], prof, best.start, best.sw);
			out[n].item = it;
			out[n].gpu = best.gpu;
			out[n].profile = prof;
			out[n].start = best.start;
			out[n].size =
			    prof != NULL ? prof->memory_slices : fi->models[it]->full_slices;
			out[n].mode_switch = best.sw;
			n++;
		}
	}
	return n;
}

/*
 * The exact search for each model the greedy pass left short: its greedy
 * placements are taken back and searched anew. 1: all placed (*n grows),
 * 0: a model does not fit, -1: out of memory.
 */
static int
find_search_short(struct placement_gpu *gpus, int ngpus, struct find_items *fi, int *n,
    struct placement_result *res)
{
	struct placement *out = res->placements;

	for (int oi = 0; oi < fi->nitems; oi++) {
		const struct gpu_model *m = fi->models[fi->order[oi]];
		bool short_m = false;
		int keep = 0, rc;

		for (int i = 0; i < fi->nitems; i++)
			short_m = short_m || (fi->models[i] == m && res->missing[i] > 0);
		if (!short_m)
			continue;
		/* take back this model's greedy placements, newest first */
		for (int i = *n - 1; i >= 0; i--) {
			if (fi->models[out[i].item] == m)
				gpu_unapply(&gpus[out[i].gpu], out[i].profile, out[i].start,
				    out[i].mode_switch);
		}
		for (int i = 0; i < *n; i++) {
			if (fi->models[out[i].item] != m)
				out[keep++] = out[i];
		}
		*n = keep;
		rc = search_model(gpus, ngpus, m, fi->items, fi->models, fi->profs, fi->order,
		    fi->nitems, out + *n, res);
		if (rc <= 0)
			return rc;
		for (int i = 0; i < fi->nitems; i++) {
			if (fi->models[i] == m) {
				*n += fi->items[i].count;
				res->missing[i] = 0;
			}
		}
	}
	return 1;
}

/* 409 insufficient_capacity naming what each item misses. */
static int
find_short_error(const struct find_items *fi, const struct placement_result *res, int total,
    struct gp_error *err)
{
	int short_total = 0;

	for (int i = 0; i < fi->nitems; i++)
		short_total += res->missing[i];
	gp_error_set(err, 409, "insufficient_capacity",
	    "%d of %d requested instances could not be placed", short_total, total);
	for (int i = 0; i < fi->nitems; i++) {
		char path[32];

		if (res->missing[i] == 0)
			continue;
		snprintf(path, sizeof(path), "items[%d]", i);
		gp_error_field(err, path, "%d of %d %s/%s could not be placed", res->missing[i],
		    fi->items[i].count, fi->items[i].model, fi->items[i].profile);
	}
	return -1;
}

int
placement_find(const struct catalog *c, struct placement_gpu *gpus, int ngpus,
    const struct spec_count *items, int nitems, unsigned flags, struct placement_result *res,
    struct gp_error *err)
{
	struct find_items fi;
	struct placement *out = res->placements;
	int total = 0, n = 0, rc;

	res->nplacements = 0;
	res->searched = false;
	res->search_exhausted = false;
	memset(res->missing, 0, sizeof(res->missing));
	fi.items = items;
	fi.nitems = nitems;
	if (items_prepare(c, items, nitems, fi.models, fi.profs, fi.order, err) < 0)
		return -1;
	for (int i = 0; i < nitems; i++)
		total += items[i].count;
	if (total > res->cap || (total > 0 && out == NULL))
		return gp_error_set(err, 500, "internal",
		    "the placement buffer holds %d entries but %d are needed", res->cap, total);
	n = find_greedy(gpus, ngpus, &fi, res);
	if (flags & PLACEMENT_NO_SEARCH) {
		for (int i = 0; i < nitems; i++) {
			if (res->missing[i] > 0)
				goto fail;
		}
	}
	rc = find_search_short(gpus, ngpus, &fi, &n, res);
	if (rc < 0) {
		undo_all(gpus, out, n);
		return gp_error_set(err, 500, "internal",
		    "could not allocate memory for the placement search");
	}
	if (rc == 0)
		goto fail;
	if (!(flags & PLACEMENT_APPLY))
		undo_all(gpus, out, n);
	qsort(out, (size_t)n, sizeof(*out), placement_cmp);
	res->nplacements = n;
	return 0;
fail:
	undo_all(gpus, out, n);
	return find_short_error(&fi, res, total, err);
}

/* ---- choosing the GPUs to read (placement_select) ---- */

/* The instances term of a placement_gpu_preference key. */
static int
pref_instances(uint64_t key)
{
	return (int)(key >> 33);
}

/* Sort record of placement_select: a class and its preference for one profile. */
struct class_ref {
	uint64_t key;
	int idx;
};

static int
class_ref_cmp(const void *a, const void *b)
{
	const struct class_ref *x = a, *y = b;

	if (x->key != y->key)
		return x->key > y->key ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/*
 * How many GPUs of each class the greedy pass may take (see placement.h).
 * For a profile p of model m let U be the instances of m that the pass
 * places up to the last one of p (items in placement_find's order). When
 * it puts an instance of p on an unused GPU, fewer than U GPUs are in
 * use by the request; that GPU is the first unused one (in (node_id,
 * index, id) order) of a class whose preference for p no unused GPU
 * beats, so every GPU of the classes p prefers more is in use: if those
 * hold B GPUs, the class has fewer than U - B in use, and its first
 * U - B GPUs hold the one chosen. The classes p prefers most, whole
 * groups of equal preference until they hold U GPUs, thus hold every GPU
 * the pass may choose for p. The exact search may place any instance
 * anywhere: N, all of m's instances, bounds what it uses of a class.
 */
/* What placement_select works on: the items, and the classes by model. */
struct select_state {
	const struct spec_count *items;
	int nitems;
	const struct gpu_model *models[PLACEMENT_MAX_ITEMS];
	const struct mig_profile *profs[PLACEMENT_MAX_ITEMS];
	int pos[PLACEMENT_MAX_ITEMS]; /* each item's place in placement_find's order */
	const struct gpu_model *distinct[PLACEMENT_MAX_ITEMS];
	int ndistinct;
	int first[PLACEMENT_MAX_ITEMS + 1]; /* model d's classes: by_model[first[d]..first[d+1]) */
	int *by_model;
	struct class_ref *refs;
	struct placement_class *cls;
	int ncls;
	bool wide;
	struct placement_pick *picks;
	int maxpicks;
	int *npicks;
	int group;
};

/* The models asked for, and the classes (with GPUs) of each, in class order. */
static void
select_index_classes(struct select_state *st)
{
	int fill[PLACEMENT_MAX_ITEMS];

	for (int i = 0; i < st->nitems; i++) {
		int d = 0;

		while (d < st->ndistinct && st->distinct[d] != st->models[i])
			d++;
		if (d == st->ndistinct)
			st->distinct[st->ndistinct++] = st->models[i];
	}
	memset(st->first, 0, sizeof(st->first));
	for (int k = 0; k < st->ncls; k++) {
		st->cls[k].take = 0;
		for (int d = 0; d < st->ndistinct; d++) {
			if (st->cls[k].g.model == st->distinct[d] && st->cls[k].gpus > 0) {
				st->first[d + 1]++;
				break;
			}
		}
	}
	for (int d = 0; d < st->ndistinct; d++)
		st->first[d + 1] += st->first[d];
	memcpy(fill, st->first, sizeof(fill));
	for (int k = 0; k < st->ncls; k++) {
		for (int d = 0; d < st->ndistinct; d++) {
			if (st->cls[k].g.model == st->distinct[d] && st->cls[k].gpus > 0) {
				st->by_model[fill[d]++] = k;
				break;
			}
		}
	}
}

/*
 * Narrow: the instances on a GPU lead its preference, so the classes below
 * the level (instances term) where need is reached are never taken and
 * need no sorting. The lowest level still needed.
 */
static int
select_narrow_floor(const struct select_state *st, int d, int bit, int64_t need)
{
	int64_t level_gpus[CATALOG_MAX_SLICES + 1], held = 0;
	int low;

	memset(level_gpus, 0, sizeof(level_gpus));
	for (int x = st->first[d]; x < st->first[d + 1]; x++) {
		const struct placement_class *cl = &st->cls[st->by_model[x]];

		if (cl->admits & (1u << bit))
			level_gpus[pref_instances(cl->pref[bit])] += cl->gpus;
	}
	for (low = CATALOG_MAX_SLICES; low > 0; low--) {
		held += level_gpus[low];
		if (held >= need)
			break;
	}
	return low;
}

/* Record a pick (narrow only); *npicks -1 once they do not fit. */
static void
select_pick(struct select_state *st, int cls, int64_t take)
{
	if (*st->npicks < 0)
		return;
	if (st->picks == NULL || *st->npicks == st->maxpicks) {
		*st->npicks = -1;
		return;
	}
	st->picks[*st->npicks].cls = cls;
	st->picks[*st->npicks].group = st->group;
	st->picks[*st->npicks].take = (int)take;
	(*st->npicks)++;
}

/* The classes item i's (model, profile) may take from, and how many GPUs of each. */
static void
select_profile(struct select_state *st, int i)
{
	const struct gpu_model *m = st->models[i];
	const struct mig_profile *prof = st->profs[i];
	int bit = prof != NULL ? 1 + prof->index : 0;
	int64_t need = 0, held = 0, better = 0;
	int nrefs = 0, last = st->pos[i], low = 0, d = 0;

	for (int j = 0; j < st->nitems; j++) {
		if (st->models[j] == m && st->profs[j] == prof && st->pos[j] > last)
			last = st->pos[j];
	}
	for (int j = 0; j < st->nitems; j++) {
		if (st->models[j] == m && (st->wide || st->pos[j] <= last))
			need += st->items[j].count;
	}
	while (st->distinct[d] != m)
		d++;
	if (!st->wide)
		low = select_narrow_floor(st, d, bit, need);
	for (int x = st->first[d]; x < st->first[d + 1]; x++) {
		int k = st->by_model[x];

		if (!(st->cls[k].admits & (1u << bit)) ||
		    (!st->wide && pref_instances(st->cls[k].pref[bit]) < low))
			continue;
		st->refs[nrefs].key = st->cls[k].pref[bit];
		st->refs[nrefs].idx = k;
		nrefs++;
	}
	if (!st->wide)
		qsort(st->refs, (size_t)nrefs, sizeof(*st->refs), class_ref_cmp);
	for (int r = 0; r < nrefs; r++) {
		struct placement_class *cl = &st->cls[st->refs[r].idx];
		int64_t t;

		if (!st->wide && (r == 0 || st->refs[r].key != st->refs[r - 1].key)) {
			/* a new group: stop when the better ones hold enough */
			if (held >= need)
				break;
			better = held;
			st->group++;
		}
		t = st->wide ? need : need - better;
		if (!st->wide)
			select_pick(st, st->refs[r].idx, t);
		if (t > cl->gpus)
			t = cl->gpus;
		if (cl->take < t)
			cl->take = (int)t;
		held += cl->gpus;
	}
}

int
placement_select(const struct catalog *c, const struct spec_count *items, int nitems,
    struct placement_class *cls, int ncls, bool wide, struct placement_pick *picks, int maxpicks,
    int *npicks, struct gp_error *err)
{
	struct select_state st;
	int order[PLACEMENT_MAX_ITEMS];

	*npicks = 0;
	memset(&st, 0, sizeof(st));
	st.items = items;
	st.nitems = nitems;
	st.cls = cls;
	st.ncls = ncls;
	st.wide = wide;
	st.picks = picks;
	st.maxpicks = maxpicks;
	st.npicks = npicks;
	st.group = -1;
	if (items_prepare(c, items, nitems, st.models, st.profs, order, err) < 0)
		return -1;
	for (int i = 0; i < nitems; i++)
		st.pos[order[i]] = i;
	st.refs = malloc((size_t)(ncls > 0 ? ncls : 1) * sizeof(*st.refs));
	st.by_model = malloc((size_t)(ncls > 0 ? ncls : 1) * sizeof(*st.by_model));
	if (st.refs == NULL || st.by_model == NULL) {
		free(st.refs);
		free(st.by_model);
		return gp_error_set(err, 500, "internal",
		    "could not allocate memory to rank layout classes");
	}
	select_index_classes(&st);
	for (int i = 0; i < nitems; i++) {
		bool seen = false;

		/* once per (model, profile) */
		for (int j = 0; j < i && !seen; j++)
			seen = st.models[j] == st.models[i] && st.profs[j] == st.profs[i];
		if (!seen)
			select_profile(&st, i);
	}
	free(st.refs);
	free(st.by_model);
	return 0;
}

/* ---- layout texts ---- */

int
placement_layout_apply(struct placement_gpu *g, const char *layout)
{
	const char *s = layout;
	int rc = 0;

	if (s == NULL)
		return 0;
	while (*s != '\0') {
		const char *end = strchr(s, ',');
		size_t len = end ? (size_t)(end - s) : strlen(s);
		const char *at = NULL;
		char name[CATALOG_NAME_MAX];
		const struct mig_profile *p = NULL;
		int start = -1, size;

		for (size_t i = 0; i < len; i++)
			if (s[i] == '@')
				at = s + i;
		if (at == NULL || (size_t)(at - s) >= sizeof(name) || at + 1 >= s + len) {
			rc = -1;
			goto next;
		}
		memcpy(name, s, (size_t)(at - s));
		name[at - s] = '\0';
		start = 0;
		for (const char *d = at + 1; d < s + len; d++) {
			if (*d < '0' || *d > '9' || start > 7) {
				start = -1;
				break;
			}
			start = start * 10 + (*d - '0');
		}
		if (start < 0 || start >= CATALOG_MAX_SLICES) {
			rc = -1;
			goto next;
		}
		if (strcmp(name, SPEC_FULL) != 0) {
			p = catalog_profile(g->model, name);
			if (p == NULL) {
				rc = -1;
				goto next;
			}
		}
		if (placement_gpu_add(g, p, start, NULL) < 0) {
			/* keep the slices held, whatever the rule it broke */
			size = p != NULL ? p->memory_slices : g->model->full_slices;
			if (start + size <= CATALOG_MAX_SLICES)
				g->used_mask |= (uint8_t)(((1u << size) - 1u) << start);
			rc = -1;
		}
	next:
		if (end == NULL)
			break;
		s = end + 1;
	}
	return rc;
}
