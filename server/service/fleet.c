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

/* ---- simulation ---- */

/* The distinct models of items[0..nitems), in arena memory. */
static const char **
item_models(struct arena *a, const struct spec_count *items, int nitems, int *n)
{
	const char **models = arena_alloc(a, sizeof(*models) * (size_t)(nitems + 1));

	*n = 0;
	for (int i = 0; i < nitems; i++) {
		int j;

		for (j = 0; j < *n; j++)
			if (strcmp(models[j], items[i].model) == 0)
				break;
		if (j == *n)
			models[(*n)++] = items[i].model;
	}
	return models;
}

/* The placeable classes of the items' models that the engine may place on, ranked. */
static int
sim_classes(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const struct spec_count *items, int nitems, struct fleet_classes *out, struct gp_error *err)
{
	const char **models;
	int nmodels, k = 0;

	models = item_models(a, items, nitems, &nmodels);
	if (fleet_classes_read(db, a, c, cluster_id, models, nmodels, out, err) < 0)
		return -1;
	for (int i = 0; i < out->n; i++) {
		if (!out->valid[i]) {
			log_warn(NULL, "gpu layout breaks a hardware rule; not placing on it",
			    "model", out->rows[i].model, "layout", out->rows[i].layout);
			continue;
		}
		out->rows[k] = out->rows[i];
		out->cls[k] = out->cls[i];
		out->valid[k] = true;
		k++;
	}
	out->n = k;
	return 0;
}

/*
 * The fleet placement_select chose in fc (the classes' take; the groups'
 * picks[0..npicks) when npicks > 0), read into *fleet in (node_id,
 * index, id) order.
 */
static int
fleet_read(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const struct fleet_classes *fc, const struct placement_pick *picks, int npicks,
    struct fleet_gpus *fleet, struct gp_error *err)
{
	struct class_want *w = arena_alloc(a, sizeof(*w) * (size_t)(fc->n + 1));
	int *want_of = arena_alloc(a, sizeof(*want_of) * (size_t)(fc->n + 1));
	struct class_pick *pk = arena_alloc(a, sizeof(*pk) * (size_t)(npicks > 0 ? npicks : 1));
	struct candidate_row *rows;
	int nw = 0, n, k = 0;

	for (int i = 0; i < fc->n; i++) {
		want_of[i] = -1;
		if (fc->cls[i].take <= 0)
			continue;
		want_of[i] = nw;
		w[nw].model = fc->rows[i].model;
		w[nw].mig_enabled = fc->rows[i].mig_enabled;
		w[nw].layout = fc->rows[i].layout;
		w[nw].limit = fc->cls[i].take;
		nw++;
	}
	for (int i = 0; i < npicks; i++) {
		pk[i].want = want_of[picks[i].cls];
		pk[i].group = picks[i].group;
		pk[i].limit = picks[i].take;
	}
	if (db_capacity_class_gpus(db, a, cluster_id, w, nw, pk, npicks > 0 ? npicks : 0, &rows, &n,
		err) < 0)
		return -1;
	memset(fleet, 0, sizeof(*fleet));
	fleet->gpus = arena_alloc(a, sizeof(*fleet->gpus) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		const struct gpu_model *m = catalog_model(c, rows[i].model);
		struct placement_gpu *g = &fleet->gpus[k];

		if (m == NULL ||
		    layout_cache_gpu(m, rows[i].mig_enabled, rows[i].layout, rows[i].id,
			rows[i].node_id, rows[i].index, rows[i].uuid, g) < 0)
			continue;
		rows[k++] = rows[i];
	}
	fleet->rows = rows;
	fleet->ngpus = k;
	return 0;
}

int
fleet_place(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const struct spec_count *items, int nitems, struct fleet_gpus *fleet,
    struct placement_result *res, struct gp_error *err)
{
	struct fleet_classes fc;
	struct placement_pick *picks;
	struct gp_error perr;
	int maxpicks, npicks;

	memset(fleet, 0, sizeof(*fleet));
	if (sim_classes(db, a, c, cluster_id, items, nitems, &fc, err) < 0)
		return -1;
	/* narrow: the best classes; exact when the greedy pass places everything */
	maxpicks = 4 * fc.n + 64;
	picks = arena_alloc(a, sizeof(*picks) * (size_t)maxpicks);
	if (placement_select(c, items, nitems, fc.cls, fc.n, false, picks, maxpicks, &npicks, err) <
		0 ||
	    fleet_read(db, a, c, cluster_id, &fc, picks, npicks, fleet, err) < 0)
		return -1;
	gp_error_clear(&perr);
	if (placement_find(c, fleet->gpus, fleet->ngpus, items, nitems, PLACEMENT_NO_SEARCH, res,
		&perr) == 0)
		return 0;
	if (perr.status != 409) {
		*err = perr;
		return -1;
	}
	/* wide: every class that could take an item, then the exact search */
	if (placement_select(c, items, nitems, fc.cls, fc.n, true, NULL, 0, &npicks, err) < 0 ||
	    fleet_read(db, a, c, cluster_id, &fc, NULL, 0, fleet, err) < 0)
		return -1;
	return placement_find(c, fleet->gpus, fleet->ngpus, items, nitems, 0, res, err);
}

/* ---- approvals ---- */

/* ---- layout classes ---- */

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
    struct approval_want *w, int *nw, int cap, struct gp_error *err)
{
	struct approval_class *cls;
	int ncls;

	if (classes_get(db, a, c, m, fast ? CLASS_CACHE_MAX_AGE_US : CLASS_SLOW_MAX_AGE_US, &cls,
		&ncls, err) < 0)
		return -1;
	approval_wants(a, m, items, idx, nidx, cls, ncls, fast, held, w, nw, cap);
	return 0;
}

/* See fleet.h. */
int
fleet_candidates_lock(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const struct spec_count *items, int nitems, bool fast, int held, struct locked_gpu **rows,
    int *n, struct gp_error *err)
{
	struct approval_want *w;
	struct candidate_want *cw;
	int nw = 0, wcap = nitems * (APPROVAL_FAST_PARTIAL_CLASSES + 2) + 8;
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
			seen ? CLASS_SLOW_MAX_AGE_US : 0, &cls, &ncls, err) < 0)
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
		if (wants_for_model(db, a, c, m, items, idx, nidx, fast, held, w, &nw, wcap, err) <
		    0)
			return -1;
	}
	cw = arena_alloc(a, sizeof(*cw) * (size_t)(nw + 1));
	for (int i = 0; i < nw; i++) {
		cw[i].model = w[i].model;
		cw[i].mig_enabled = w[i].mig_enabled;
		cw[i].layout = w[i].layout;
		cw[i].limit = w[i].limit;
	}
	return db_candidates_lock(db, a, cw, nw, cluster_id, fast, rows, n, err);
}
