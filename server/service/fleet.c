/*
 * fleet.c - the one reading of the fleet placements use (see fleet.h):
 * the placeable classes, what a simulation reads of them, and what an
 * approval locks.
 */
#include "fleet.h"
#include "layout_cache.h"

#include "core/log.h"
#include "core/timeutil.h"
#include "domain/pool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLASS_CACHE_MAX_AGE_US 1000000 /* layout classes of a model, per process */
#define CLASS_SLOW_MAX_AGE_US 50000    /* the slow path's: just re-read */
#define CLASS_CACHE_MODELS 32

/* ---- the classes ---- */

int
fleet_classes_read(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const char *const *models, int nmodels, struct fleet_classes *out, struct gp_error *err)
{
	struct layout_class *rows;
	int n;

	memset(out, 0, sizeof(*out));
	if (nmodels == 0)
		return 0;
	if (db_capacity_placeable_classes(db, a, cluster_id, models, nmodels, &rows, &n, err) < 0)
		return -1;
	out->rows = rows;
	out->cls = arena_alloc(a, sizeof(*out->cls) * (size_t)(n + 1));
	out->valid = arena_alloc(a, sizeof(*out->valid) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		const struct gpu_model *m = catalog_model(c, rows[i].model);
		struct layout_figures f;

		if (m == NULL)
			continue;
		layout_cache_get(m, rows[i].mig_enabled, rows[i].layout, &f);
		rows[out->n] = rows[i];
		out->cls[out->n] = f.cls;
		out->cls[out->n].gpus = rows[i].count;
		out->valid[out->n] = f.valid;
		out->n++;
	}
	return 0;
}

/* ---- the class cache ---- */

/*
 * Process-wide cache of the layout classes per model. Shared by the
 * request threads under a mutex; entries are replaced whole (malloc'd
 * copies), readers get arena copies.
 */
static struct {
	pthread_mutex_t lock;
	struct {
		char model[CATALOG_NAME_MAX];
		int64_t fetched_us;
		struct approval_class *v; /* malloc: entries, then the layout strings */
		int n;
	} m[CLASS_CACHE_MODELS];
	int n;
} class_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct approval_class *
class_copy(struct arena *a, const struct approval_class *v, int n)
{
	struct approval_class *out = arena_alloc(a, sizeof(*out) * (size_t)(n + 1));

	for (int i = 0; i < n; i++) {
		out[i] = v[i];
		out[i].layout = arena_strdup(a, v[i].layout);
	}
	return out;
}

static void
class_cache_store(const char *model, const struct approval_class *v, int n, int64_t now)
{
	size_t bytes = sizeof(*v) * (size_t)(n + 1);
	struct approval_class *copy;
	char *s;
	int slot;

	for (int i = 0; i < n; i++)
		bytes += strlen(v[i].layout) + 1;
	copy = malloc(bytes);
	if (copy == NULL)
		return;
	s = (char *)(copy + n + 1);
	for (int i = 0; i < n; i++) {
		size_t len = strlen(v[i].layout) + 1;

		copy[i] = v[i];
		memcpy(s, v[i].layout, len);
		copy[i].layout = s;
		s += len;
	}
	pthread_mutex_lock(&class_cache.lock);
	for (slot = 0; slot < class_cache.n; slot++)
		if (strcmp(class_cache.m[slot].model, model) == 0)
			break;
	if (slot == class_cache.n) {
		if (class_cache.n == CLASS_CACHE_MODELS) {
			pthread_mutex_unlock(&class_cache.lock);
			free(copy);
			return;
		}
		class_cache.n++;
		snprintf(class_cache.m[slot].model, sizeof(class_cache.m[slot].model), "%s", model);
		class_cache.m[slot].v = NULL;
	}
	free(class_cache.m[slot].v);
	class_cache.m[slot].v = copy;
	class_cache.m[slot].n = n;
	class_cache.m[slot].fetched_us = now;
	pthread_mutex_unlock(&class_cache.lock);
}

/*
 * The layout classes of model m for an approval, at most max_age_us old
 * (0: read them now): fleet_classes_read over every cluster, the reading
 * simulation places on.
 */
static int
classes_get(struct db *db, struct arena *a, const struct catalog *c, const struct gpu_model *m,
    int64_t max_age_us, struct approval_class **out, int *n, struct gp_error *err)
{
	int64_t now = time_mono_us();
	const char *model = m->id;
	struct fleet_classes fc;
	struct approval_class *v;

	if (max_age_us > 0) {
		pthread_mutex_lock(&class_cache.lock);
		for (int i = 0; i < class_cache.n; i++) {
			if (strcmp(class_cache.m[i].model, m->id) != 0 ||
			    now - class_cache.m[i].fetched_us > max_age_us)
				continue;
			*out = class_copy(a, class_cache.m[i].v, class_cache.m[i].n);
			*n = class_cache.m[i].n;
			pthread_mutex_unlock(&class_cache.lock);
			return 0;
		}
		pthread_mutex_unlock(&class_cache.lock);
	}
	if (fleet_classes_read(db, a, c, 0, &model, 1, &fc, err) < 0)
		return -1;
	v = arena_alloc(a, sizeof(*v) * (size_t)(fc.n + 1));
	for (int i = 0; i < fc.n; i++) {
		v[i].mig_enabled = fc.rows[i].mig_enabled;
		v[i].layout = fc.rows[i].layout;
		v[i].g = fc.cls[i].g;
		v[i].valid = fc.valid[i];
	}
	class_cache_store(m->id, v, fc.n, now);
	*out = v;
	*n = fc.n;
	return 0;
}

/*
 * Append to w the classes to lock for the items of model m (indexes
 * idx[0..nidx) into items): approval_wants over the model's classes,
 * read from the cache (fast) or again (slow).
 */
static int
wants_for_model(struct db *db, struct arena *a, const struct catalog *c, const struct gpu_model *m,
    const struct spec_count *items, const int *idx, int nidx, bool fast, int held,
    int64_t max_age_us, struct approval_want *w, int *nw, int cap, struct gp_error *err)
{
	struct approval_class *cls;
	int ncls;

	if (classes_get(db, a, c, m, max_age_us, &cls, &ncls, err) < 0)
		return -1;
	approval_wants(a, m, items, idx, nidx, cls, ncls, fast, held, w, nw, cap);
	return 0;
}

/* ---- candidates ---- */

/* See fleet.h. */
void
fleet_items_sum(struct spec_count *sum, int *nsum, const struct spec_count *items, int nitems)
{
	for (int j = 0; j < nitems; j++) {
		int k;

		for (k = 0; k < *nsum; k++)
			if (strcmp(sum[k].model, items[j].model) == 0 &&
			    strcmp(sum[k].profile, items[j].profile) == 0)
				break;
		if (k < *nsum)
			sum[k].count += items[j].count;
		else if (*nsum < POOL_MAX_ITEMS)
			sum[(*nsum)++] = items[j];
	}
}

/* See fleet.h. */
int
fleet_candidates_lock(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const struct spec_count *items, int nitems, bool fast, int held, bool lock,
    struct locked_gpu **rows, int *n, struct gp_error *err)
{
	struct approval_want *w;
	struct candidate_want *cw;
	int nw = 0, wcap = nitems * (APPROVAL_FAST_PARTIAL_CLASSES + 2) + 8;
	/*
	 * A simulation's fast path reads the classes now and leaves them
	 * cached; its slow path takes them from there (an approval re-reads
	 * them because a GPU whose lock it waited for may have changed
	 * class; a simulation locks nothing, so a read 50 ms old is as good
	 * as a new one on a quiet fleet, where both read the same).
	 */
	int64_t fast_age = lock ? CLASS_CACHE_MAX_AGE_US : 0;
	int64_t slow_first_age = lock ? 0 : CLASS_SLOW_MAX_AGE_US;
	enum candidate_lock how = !lock ? CANDIDATES_READ
	    : fast                      ? CANDIDATES_SKIP
					: CANDIDATES_WAIT;
	bool done[POOL_MAX_ITEMS];

	memset(done, 0, sizeof(done));
	if (!fast)
		wcap = 0;
	/* the slow path re-reads the classes first (they size its wants) */
	for (int i = 0; i < nitems && !fast; i++) {
		struct approval_class *cls;
		int ncls;
		bool seen = false;

		for (int j = 0; j < i; j++)
			seen = seen || strcmp(items[j].model, items[i].model) == 0;
		if (classes_get(db, a, c, catalog_model(c, items[i].model),
			seen ? CLASS_SLOW_MAX_AGE_US : slow_first_age, &cls, &ncls, err) < 0)
			return -1;
		wcap += ncls + 2;
	}
	w = arena_alloc(a, sizeof(*w) * (size_t)(wcap + 1));
	for (int i = 0; i < nitems; i++) {
		const struct gpu_model *m = catalog_model(c, items[i].model);
		int idx[POOL_MAX_ITEMS], nidx = 0;

		if (done[i])
			continue;
		for (int j = i; j < nitems; j++) {
			if (strcmp(items[j].model, items[i].model) == 0) {
				idx[nidx++] = j;
				done[j] = true;
			}
		}
		if (wants_for_model(db, a, c, m, items, idx, nidx, fast, held,
			fast ? fast_age : CLASS_SLOW_MAX_AGE_US, w, &nw, wcap, err) < 0)
			return -1;
	}
	cw = arena_alloc(a, sizeof(*cw) * (size_t)(nw + 1));
	for (int i = 0; i < nw; i++) {
		cw[i].model = w[i].model;
		cw[i].mig_enabled = w[i].mig_enabled;
		cw[i].layout = w[i].layout;
		cw[i].limit = w[i].limit;
	}
	return db_candidates_lock(db, a, cw, nw, cluster_id, how, rows, n, err);
}

/* ---- placing ---- */

/* See fleet.h. */
int
fleet_set_add(struct arena *a, const struct catalog *c, struct fleet_set *set,
    const struct locked_gpu *rows, int n)
{
	int added = 0;

	for (int i = 0; i < n; i++) {
		const struct gpu_model *m = catalog_model(c, rows[i].model);
		struct placement_gpu *g;
		int j;

		if (m == NULL)
			continue;
		for (j = 0; j < set->n; j++)
			if (set->gpus[j].id == rows[i].id)
				break;
		if (j < set->n)
			continue; /* ours already, with this batch's placements */
		if (set->n == set->cap) {
			int ncap = set->cap * 2 + 64;
			struct placement_gpu *ng = arena_alloc(a, sizeof(*ng) * (size_t)ncap);
			const struct locked_gpu **nr = arena_alloc(a, sizeof(*nr) * (size_t)ncap);

			if (set->n > 0) {
				memcpy(ng, set->gpus, sizeof(*ng) * (size_t)set->n);
				memcpy(nr, set->rows, sizeof(*nr) * (size_t)set->n);
			}
			set->gpus = ng;
			set->rows = nr;
			set->cap = ncap;
		}
		g = &set->gpus[set->n];
		if (layout_cache_gpu(m, rows[i].mig_enabled, rows[i].layout, rows[i].id,
			rows[i].node_id, rows[i].index, rows[i].uuid, g) < 0)
			continue;
		set->rows[set->n++] = &rows[i];
		added++;
	}
	return added;
}

static int
cluster_cmp(const void *pa, const void *pb)
{
	int64_t x = *(const int64_t *)pa, y = *(const int64_t *)pb;

	return (x > y) - (x < y);
}

/* See fleet.h. */
int
fleet_batch_read(struct db *db, struct arena *a, const struct catalog *c,
    const struct fleet_request *requests, int nrequests, bool lock, struct fleet_set *set,
    struct gp_error *err)
{
	int64_t *clusters = arena_alloc(a, sizeof(*clusters) * (size_t)(nrequests + 1));
	struct spec_count *sum = arena_alloc(a, sizeof(*sum) * POOL_MAX_ITEMS);
	int ncl = 0;

	for (int i = 0; i < nrequests; i++) {
		int k;

		for (k = 0; k < ncl; k++)
			if (clusters[k] == requests[i].cluster_id)
				break;
		if (k == ncl)
			clusters[ncl++] = requests[i].cluster_id;
	}
	qsort(clusters, (size_t)ncl, sizeof(*clusters), cluster_cmp);
	for (int k = 0; k < ncl; k++) {
		struct locked_gpu *rows;
		int nsum = 0, nrows;

		for (int i = 0; i < nrequests; i++)
			if (requests[i].cluster_id == clusters[k])
				fleet_items_sum(sum, &nsum, requests[i].items, requests[i].nitems);
		if (nsum == 0)
			continue;
		if (fleet_candidates_lock(db, a, c, clusters[k], sum, nsum, true, 0, lock, &rows,
			&nrows, err) < 0)
			return -1;
		fleet_set_add(a, c, set, rows, nrows);
	}
	return 0;
}

/*
 * Place items on set (only its GPUs of cluster_id, unless 0) and apply
 * them there; ans->outcome says how it went.
 */
static void
set_take(struct arena *a, const struct catalog *c, struct fleet_set *set, int64_t cluster_id,
    const struct spec_count *items, int nitems, struct fleet_answer *ans)
{
	struct placement_result res;
	struct placement_gpu *gpus = set->gpus;
	int *idx = NULL; /* gpus[k] is set->gpus[idx[k]] when bound to a cluster */
	int total = 0, ngpus = set->n;

	if (cluster_id != 0) {
		gpus = arena_alloc(a, sizeof(*gpus) * (size_t)(set->n + 1));
		idx = arena_alloc(a, sizeof(*idx) * (size_t)(set->n + 1));
		ngpus = 0;
		for (int i = 0; i < set->n; i++) {
			if (set->rows[i]->cluster_id != cluster_id)
				continue;
			idx[ngpus] = i;
			gpus[ngpus++] = set->gpus[i];
		}
	}
	for (int i = 0; i < nitems; i++)
		total += items[i].count;
	memset(&res, 0, sizeof(res));
	res.cap = total;
	res.placements = arena_alloc(a, sizeof(*res.placements) * (size_t)(total + 1));
	gp_error_clear(&ans->err);
	ans->outcome = FLEET_PLACED;
	if (placement_find(c, gpus, ngpus, items, nitems, PLACEMENT_APPLY, &res, &ans->err) < 0) {
		ans->outcome = ans->err.status == 409 ? FLEET_SHORT : FLEET_FAILED;
		for (int i = 0; ans->outcome == FLEET_SHORT && i < nitems; i++)
			ans->missing[i] = res.missing[i];
	}
	ans->search_exhausted = res.search_exhausted;
	/* the cluster's GPUs back into the set, as placed */
	for (int k = 0; idx != NULL && k < ngpus; k++)
		set->gpus[idx[k]] = gpus[k];
	if (ans->outcome != FLEET_PLACED)
		return;
	ans->placed = arena_alloc(a, sizeof(*ans->placed) * (size_t)(res.nplacements + 1));
	for (int i = 0; i < res.nplacements; i++) {
		const struct placement *p = &res.placements[i];
		struct service_placed *o = &ans->placed[i];

		o->gpu = set->rows[idx != NULL ? idx[p->gpu] : p->gpu];
		o->item = p->item;
		o->profile = p->profile != NULL ? arena_strdup(a, p->profile->name) : SPEC_FULL;
		o->start = p->start;
		o->size = p->size;
		o->mode_switch = p->mode_switch;
	}
	ans->nplaced = res.nplacements;
}

/* See fleet.h. */
int
fleet_set_place(struct db *db, struct arena *a, const struct catalog *c, struct fleet_set *set,
    int64_t cluster_id, const struct spec_count *items, int nitems, bool lock,
    struct fleet_answer *ans, struct gp_error *err)
{
	struct locked_gpu *rows;
	int nrows;

	ans->slow = false;
	ans->placed = NULL;
	ans->nplaced = 0;
	set_take(a, c, set, cluster_id, items, nitems, ans);
	/*
	 * The slow path: every useful class, waiting for locks, past the
	 * GPUs the set holds (earlier approvals of this batch may have
	 * filled them). A GPU whose lock it waited for may have changed
	 * class meanwhile (another transaction placed on it and committed)
	 * and drop out of the answer; the classes read again then show where
	 * it went. So it goes on while it finds GPUs the set lacks: only then
	 * is the answer insufficient capacity.
	 */
	for (int pass = 0; ans->outcome == FLEET_SHORT && pass < FLEET_SLOW_PASSES; pass++) {
		ans->slow = true;
		if (fleet_candidates_lock(db, a, c, cluster_id, items, nitems, false, set->n, lock,
			&rows, &nrows, err) < 0)
			return -1;
		if (fleet_set_add(a, c, set, rows, nrows) == 0 && pass > 0)
			break;
		set_take(a, c, set, cluster_id, items, nitems, ans);
	}
	return 0;
}

/* Order of a simulation's placements: item, then (node, index, id), then start. */
static int
placed_cmp(const void *pa, const void *pb)
{
	const struct service_placed *x = pa, *y = pb;

	if (x->item != y->item)
		return x->item < y->item ? -1 : 1;
	if (x->gpu->node_id != y->gpu->node_id)
		return x->gpu->node_id < y->gpu->node_id ? -1 : 1;
	if (x->gpu->index != y->gpu->index)
		return x->gpu->index < y->gpu->index ? -1 : 1;
	if (x->gpu->id != y->gpu->id)
		return x->gpu->id < y->gpu->id ? -1 : 1;
	return (x->start > y->start) - (x->start < y->start);
}

/* See fleet.h. */
int
fleet_simulate(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const struct spec_count *items, int nitems, struct fleet_answer *ans, struct gp_error *err)
{
	struct fleet_request req = { .cluster_id = cluster_id, .items = items, .nitems = nitems };
	struct fleet_set set;

	memset(&set, 0, sizeof(set));
	if (fleet_batch_read(db, a, c, &req, 1, false, &set, err) < 0)
		return -1;
	if (fleet_set_place(db, a, c, &set, cluster_id, items, nitems, false, ans, err) < 0)
		return -1;
	if (ans->outcome == FLEET_PLACED)
		qsort(ans->placed, (size_t)ans->nplaced, sizeof(*ans->placed), placed_cmp);
	return 0;
}
