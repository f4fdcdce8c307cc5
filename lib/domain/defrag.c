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
 * of distinct masks (at most 255), not of GPUs. That state and its
 * bookkeeping are defrag_state.c's (defrag_internal.h); the planning
 * steps (evictions, goals, the plan) are here.
 */
#include "domain/defrag_internal.h"

#include <stdlib.h>
#include <string.h>

static bool
evict_all(struct state *s, int d, const int *ev, int nev, const struct phantom *hold)
{
	struct gp_error err;
	int to_gpu[CATALOG_MAX_SLICES + 1], to_start[CATALOG_MAX_SLICES + 1];
	int order[CATALOG_MAX_SLICES + 1];
	uint8_t block = 0;
	int placed = 0;
	bool ok = true, held = false;

	if (nev > CATALOG_MAX_SLICES + 1 || !dg_moves_reserve(s, nev))
		return false;
	/* largest first */
	for (int i = 0; i < nev; i++)
		order[i] = ev[i];
	for (int i = 1; i < nev; i++)
		for (int j = i; j > 0 && dg_inst_size(s, order[j]) > dg_inst_size(s, order[j - 1]);
		     j--) {
			int t = order[j];
			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int i = 0; i < nev; i++) {
		int ii = order[i];
		const struct defrag_instance *in = &s->f->insts[ii];

		block |= dg_mask_of(s->cur_start[ii], dg_inst_size(s, ii));
		if (placement_gpu_remove(&s->g[d], in->profile, s->cur_start[ii], &err) < 0)
			return false; /* cannot happen: the layout was built from them */
		dg_unlink_inst(s, ii);
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
		dg_bucket_sync(s, d);
		for (placed = 0; placed < nev; placed++) {
			int ii = order[placed];

			if (!dg_find_home(s, ii, s->set_of[d], &to_gpu[placed],
				&to_start[placed]) ||
			    placement_gpu_add(&s->g[to_gpu[placed]], s->f->insts[ii].profile,
				to_start[placed], &err) < 0) {
				ok = false;
				break;
			}
			dg_bucket_sync(s, to_gpu[placed]);
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
			dg_bucket_sync(s, to_gpu[i]);
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
			dg_link_inst(s, ii, d, s->cur_start[ii]);
		}
		dg_bucket_sync(s, d);
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
		dg_link_inst(s, ii, to_gpu[i], to_start[i]);
		s->moved[ii] = true;
	}
	dg_bucket_sync(s, d);
	return true;
}

/*
 * The instances of GPU gi overlapping [start, start + size); false when
 * one of them may not move.
 */
static bool
overlapping(const struct state *s, int gi, int start, int size, int *ev, int *nev, int *slices)
{
	uint8_t r = dg_mask_of(start, size);

	*nev = 0;
	*slices = 0;
	for (int ii = s->head[gi]; ii >= 0; ii = s->next[ii]) {
		const struct defrag_instance *in = &s->f->insts[ii];
		int sz = dg_inst_size(s, ii);

		if ((dg_mask_of(s->cur_start[ii], sz) & r) == 0)
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
	if (p != NULL && !g->mig_enabled && !dg_gpu_is_empty(g))
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
			dg_bucket_sync(s, c.gpu);
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
		f = dg_future_of(g->model,
		    (uint8_t)(g->used_mask | dg_mask_of(p->placements[j], p->memory_slices)));
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
		struct model_fits *mf = dg_model_fits_get(s, m);

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

		if (g->model == m && dg_gpu_is_empty(g) && best_start(g, p, &start))
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
	dg_bucket_sync(s, gi);
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

		if (dg_gpu_is_empty(g) || g->full_used || !g->mig_enabled)
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
		dg_bucket_sync(s, gi);
		(void)evict_all(s, gi, ev, nev, NULL);
		s->locked[gi] = false;
		dg_bucket_sync(s, gi);
	}
	return s->oom ? -1 : 0;
}

static int
i64_cmp(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

static int
count_empty(const struct placement_gpu *g, int n)
{
	int k = 0;

	for (int i = 0; i < n; i++)
		k += dg_gpu_is_empty(&g[i]);
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
	if (dg_state_init(&s, fleet, err) < 0)
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
	dg_state_free(&s);
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
