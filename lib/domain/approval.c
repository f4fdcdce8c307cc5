/*
 * approval.c - the approval workflow's pure decisions (see approval.h).
 */
#include "approval.h"
#include "core/problem.h"

#include <stdlib.h>
#include <string.h>

bool
approval_batch_later(const struct approval_key *v, int i)
{
	for (int j = 0; j < i; j++) {
		if (!v[j].open)
			continue;
		if (v[j].pool_id == v[i].pool_id ||
		    (v[i].has_quota && v[j].project_id == v[i].project_id))
			return true;
	}
	return false;
}

struct class_rank {
	const struct approval_class *c;
	int instances;
};

static int
class_rank_cmp(const void *pa, const void *pb)
{
	const struct class_rank *a = pa, *b = pb;

	if (a->instances != b->instances)
		return b->instances - a->instances; /* pack: busiest first */
	if (a->c->mig_enabled != b->c->mig_enabled)
		return a->c->mig_enabled ? -1 : 1;
	return strcmp(a->c->layout, b->c->layout);
}

void
approval_wants(struct arena *a, const struct gpu_model *m, const struct spec_count *items,
    const int *idx, int nidx, const struct approval_class *cls, int ncls, bool fast, int held,
    struct approval_want *w, int *nw, int cap)
{
	const struct mig_profile *profs[POOL_MAX_ITEMS];
	struct class_rank *rank;
	struct placement_gpu empty;
	int nrank = 0, need = 0, empty_limit = 0, per;
	int per_class = fast ? APPROVAL_FAST_PER_CLASS : APPROVAL_SLOW_PER_CLASS;

	for (int i = 0; i < nidx; i++) {
		const struct spec_count *s = &items[idx[i]];
		int h;

		profs[i] = spec_is_full(s) ? NULL : catalog_profile(m, s->profile);
		placement_gpu_init(&empty, m, 0, 0, 0, profs[i] != NULL && m->mig_capable);
		h = placement_gpu_headroom(&empty, profs[i]);
		need += s->count;
		empty_limit += (s->count + (h > 0 ? h : 1) - 1) / (h > 0 ? h : 1);
	}
	rank = arena_alloc(a, sizeof(*rank) * (size_t)(ncls + 1));
	for (int i = 0; i < ncls; i++) {
		bool useful = false;

		if (!cls[i].valid || cls[i].layout[0] == '\0')
			continue;
		for (int k = 0; k < nidx && !useful; k++)
			useful = placement_gpu_headroom(&cls[i].g, profs[k]) > 0;
		if (!useful)
			continue;
		rank[nrank].c = &cls[i];
		rank[nrank].instances = cls[i].g.full_used ? 1 : cls[i].g.instances;
		nrank++;
	}
	qsort(rank, (size_t)nrank, sizeof(*rank), class_rank_cmp);
	if (fast && nrank > APPROVAL_FAST_PARTIAL_CLASSES)
		nrank = APPROVAL_FAST_PARTIAL_CLASSES;
	per = (need < per_class ? need : per_class) + held;
	empty_limit += held;
	/* empty GPUs in both modes first (whether or not the classes know them) */
	for (int mode = 1; mode >= 0; mode--) {
		if (*nw >= cap)
			break;
		if (mode == 1 && !m->mig_capable)
			continue;
		w[*nw].model = m->id;
		w[*nw].mig_enabled = mode == 1;
		w[*nw].layout = "";
		w[*nw].limit =
		    empty_limit < APPROVAL_EMPTY_PER_CLASS ? empty_limit : APPROVAL_EMPTY_PER_CLASS;
		(*nw)++;
	}
	for (int i = 0; i < nrank; i++) {
		if (*nw >= cap)
			break;
		w[*nw].model = m->id;
		w[*nw].mig_enabled = rank[i].c->mig_enabled;
		w[*nw].layout = rank[i].c->layout;
		w[*nw].limit = per;
		(*nw)++;
	}
}

void
approval_grow_arrays(struct arena *a, const struct approval_placed *p, int np,
    const struct spec_count *items, int nitems, struct approval_grow *out)
{
	memset(out, 0, sizeof(*out));
	out->switch_gpu_ids = arena_alloc(a, sizeof(*out->switch_gpu_ids) * (size_t)(np + 1));
	out->models = arena_alloc(a, sizeof(*out->models) * (size_t)(nitems + 1));
	out->profiles = arena_alloc(a, sizeof(*out->profiles) * (size_t)(nitems + 1));
	out->counts = arena_alloc(a, sizeof(*out->counts) * (size_t)(nitems + 1));
	for (int i = 0; i < np; i++) {
		int j;

		if (!p[i].mode_switch)
			continue;
		for (j = 0; j < out->nswitch; j++)
			if (out->switch_gpu_ids[j] == p[i].gpu_id)
				break;
		if (j == out->nswitch)
			out->switch_gpu_ids[out->nswitch++] = p[i].gpu_id;
	}
	for (int i = 0; i < nitems; i++) {
		out->models[i] = items[i].model;
		out->profiles[i] = items[i].profile;
		out->counts[i] = items[i].count;
	}
	out->nitems = nitems;
}

int
approval_free_choose(const struct approval_live *live, int nlive, int64_t pool_id, bool release,
    const struct spec_count *pool_items, int npool, const struct spec_count *items, int nitems,
    bool *chosen, struct spec_count *next, int *nnext, int *keep_counts, struct gp_error *err)
{
	struct shrink_alloc *sa;
	int *want;
	int rc = -1;

	*nnext = 0;
	if (!release) {
		if (pool_items_subtract(pool_items, npool, items, nitems, next, nnext, err) < 0)
			return -1;
		if (*nnext == 0)
			return gp_problem_set(err, GP_PROBLEM_CONFLICT,
			    "the shrink would leave the pool "
			    "empty; reject it and request a release");
	}
	sa = calloc((size_t)nlive + 1, sizeof(*sa));
	want = calloc((size_t)nitems + 1, sizeof(*want));
	if (sa == NULL || want == NULL) {
		gp_problem_set(err, GP_PROBLEM_INTERNAL, "out of memory");
		goto done;
	}
	for (int i = 0; i < nlive; i++) {
		chosen[i] = false;
		sa[i].id = live[i].id;
		sa[i].gpu_id = live[i].gpu_id;
		sa[i].start = live[i].start;
		sa[i].kind = -1;
		if (live[i].pool_id != pool_id)
			continue;
		if (release) {
			chosen[i] = true;
			continue;
		}
		for (int j = 0; j < nitems; j++)
			if (strcmp(items[j].model, live[i].model) == 0 &&
			    strcmp(items[j].profile, live[i].profile) == 0)
				sa[i].kind = j;
	}
	for (int j = 0; j < nitems; j++) {
		want[j] = items[j].count;
		keep_counts[j] = pool_items_count(next, *nnext, items[j].model, items[j].profile);
	}
	if (!release && pool_shrink_choose(sa, nlive, want, nitems, chosen, err) < 0)
		goto done;
	rc = 0;
done:
	free(sa);
	free(want);
	return rc;
}
