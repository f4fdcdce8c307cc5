/*
 * test_placement.c - the placement engine against the catalog's facts, the
 * hardware rules, the preference order and a brute-force oracle.
 *
 * The oracle below (oracle_*) re-states the rules from docs/design.md section 4
 * without using the engine's code: which (GPU, start) pairs are legal, how
 * candidates rank, and whether a multi-instance request fits at all.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/catalog.h"
#include "domain/placement.h"
#include "domain/spec.h"

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))
#define MAXG 16
#define MAXP 64

static struct catalog *cat;

/* ---- helpers ---- */

static uint64_t rng_state;

static uint64_t
rng_next(void)
{
	/* splitmix64: deterministic, seeded per test */
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int
rng_below(int n)
{
	return (int)(rng_next() % (uint64_t)n);
}

static const struct gpu_model *
model(const char *id)
{
	const struct gpu_model *m = catalog_model(cat, id);

	if (m == NULL)
		fail_msg("no model %s", id);
	return m;
}

static const struct mig_profile *
prof(const struct gpu_model *m, const char *name)
{
	const struct mig_profile *p;

	if (strcmp(name, "full") == 0)
		return NULL;
	p = catalog_profile(m, name);
	if (p == NULL)
		fail_msg("no profile %s on %s", name, m->id);
	return p;
}

static void
gpu(struct placement_gpu *g, const char *model_id, int64_t id)
{
	placement_gpu_init(g, model(model_id), id, 1, (int)id, true);
}

static void
add(struct placement_gpu *g, const char *profile, int start)
{
	struct gp_error err;

	gp_error_clear(&err);
	if (placement_gpu_add(g, prof(g->model, profile), start, &err) < 0)
		fail_msg("add %s at %d: %s", profile, start, err.message);
}

/* Parse "M/P=N" texts into items. */
static int
items_of(const char *const *texts, int n, struct spec_count *items)
{
	for (int i = 0; i < n; i++) {
		struct gp_error err;

		gp_error_clear(&err);
		if (spec_parse(texts[i], &items[i], "x", &err) < 0)
			fail_msg("bad spec %s", texts[i]);
	}
	return n;
}

struct run {
	struct placement out[MAXP];
	struct placement_result res;
	struct gp_error err;
	int rc;
};

static int
find(struct placement_gpu *gpus, int ngpus, const char *const *texts, int ntexts, unsigned flags,
    struct run *r)
{
	struct spec_count items[PLACEMENT_MAX_ITEMS];

	items_of(texts, ntexts, items);
	memset(r, 0, sizeof(*r));
	r->res.placements = r->out;
	r->res.cap = MAXP;
	gp_error_clear(&r->err);
	r->rc = placement_find(cat, gpus, ngpus, items, ntexts, flags, &r->res, &r->err);
	return r->rc;
}

/* The placement of item `item` on gpu `g` at `start`, or NULL. */
static const struct placement *
has(const struct run *r, int item, int g, int start)
{
	for (int i = 0; i < r->res.nplacements; i++) {
		const struct placement *p = &r->res.placements[i];

		if (p->item == item && p->gpu == g && p->start == start)
			return p;
	}
	return NULL;
}

/* ---- the oracle ---- */

static uint8_t
oracle_run(int start, int size)
{
	return (uint8_t)(((1u << size) - 1u) << start);
}

static bool
oracle_empty(const struct placement_gpu *g)
{
	return g->used_mask == 0 && g->instances == 0 && !g->full_used;
}

static bool
oracle_fits(const struct placement_gpu *g, const struct mig_profile *p, int start)
{
	const struct gpu_model *m = g->model;
	bool listed = false;

	if (p == NULL)
		return start == 0 && oracle_empty(g);
	if (g->full_used || !m->mig_capable)
		return false;
	if (!g->mig_enabled && !oracle_empty(g))
		return false;
	for (int i = 0; i < p->nplacements; i++)
		listed = listed || p->placements[i] == start;
	if (!listed || start < 0 || start + p->memory_slices > m->memory_slices)
		return false;
	if ((g->used_mask & oracle_run(start, p->memory_slices)) != 0)
		return false;
	if (g->profile_count[p->index] >= p->max_instances)
		return false;
	return g->compute_used + p->compute_slices <= m->compute_slices;
}

static void
oracle_apply(struct placement_gpu *g, const struct mig_profile *p, int start)
{
	if (p == NULL) {
		g->full_used = true;
		g->used_mask = oracle_run(0, g->model->full_slices);
		g->mig_enabled = false;
		return;
	}
	g->used_mask |= oracle_run(start, p->memory_slices);
	g->instances++;
	g->compute_used += p->compute_slices;
	g->profile_count[p->index]++;
	g->mig_enabled = true;
}

/* Free runs of each size (index = size) that catalog placements could take. */
static void
oracle_future(const struct gpu_model *m, uint8_t mask, int counts[9])
{
	uint8_t seen[64];
	int nseen = 0;

	memset(counts, 0, 9 * sizeof(int));
	for (int i = 0; i < m->nprofiles; i++) {
		const struct mig_profile *p = &m->profiles[i];

		for (int j = 0; j < p->nplacements; j++) {
			uint8_t r = oracle_run(p->placements[j], p->memory_slices);
			bool dup = false;

			for (int k = 0; k < nseen; k++)
				dup = dup || seen[k] == r;
			if (dup)
				continue;
			seen[nseen++] = r;
			if ((mask & r) == 0)
				counts[p->memory_slices]++;
		}
	}
}

/* <0 when candidate a ranks before b by the documented preference. */
static int
oracle_rank_cmp(const struct placement_gpu *gpus, const struct mig_profile *p, int ga, int sa,
    int gb, int sb)
{
	const struct placement_gpu *x = &gpus[ga], *y = &gpus[gb];
	bool swx, swy;

	if (x->instances != y->instances)
		return y->instances - x->instances;
	swx = p == NULL ? x->mig_enabled : !x->mig_enabled;
	swy = p == NULL ? y->mig_enabled : !y->mig_enabled;
	if (swx != swy)
		return swx ? 1 : -1;
	if (p != NULL) {
		int fx[9], fy[9];

		oracle_future(x->model, (uint8_t)(x->used_mask | oracle_run(sa, p->memory_slices)),
		    fx);
		oracle_future(y->model, (uint8_t)(y->used_mask | oracle_run(sb, p->memory_slices)),
		    fy);
		for (int z = 8; z >= 1; z--) {
			if (fx[z] != fy[z])
				return fy[z] - fx[z];
		}
	}
	if (x->node_id != y->node_id)
		return x->node_id < y->node_id ? -1 : 1;
	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	if (x->id != y->id)
		return x->id < y->id ? -1 : 1;
	if (ga != gb)
		return ga - gb;
	return sa - sb;
}

/* The oracle's preferred (gpu, start) for one instance; false when none fits. */
static bool
oracle_best(const struct placement_gpu *gpus, int ngpus, const struct gpu_model *m,
    const struct mig_profile *p, int *bg, int *bs)
{
	bool have = false;

	for (int g = 0; g < ngpus; g++) {
		if (gpus[g].model != m)
			continue;
		for (int s = 0; s < CATALOG_MAX_SLICES; s++) {
			if (!oracle_fits(&gpus[g], p, s))
				continue;
			if (!have || oracle_rank_cmp(gpus, p, g, s, *bg, *bs) < 0) {
				*bg = g;
				*bs = s;
				have = true;
			}
		}
	}
	return have;
}

struct ounit {
	const struct gpu_model *m;
	const struct mig_profile *p;
	int item;
};

/* Exhaustive: can units[k..n) all be placed? Identical consecutive units
 * take (gpu, start) in non-decreasing order, which loses no solution. */
static bool
oracle_exists(struct placement_gpu *gpus, int ngpus, const struct ounit *u, int n, int k, int lo)
{
	if (k == n)
		return true;
	for (int c = (k > 0 && u[k].item == u[k - 1].item) ? lo : 0; c < ngpus * CATALOG_MAX_SLICES;
	     c++) {
		int g = c / CATALOG_MAX_SLICES, s = c % CATALOG_MAX_SLICES;
		struct placement_gpu saved;
		bool ok;

		if (gpus[g].model != u[k].m || !oracle_fits(&gpus[g], u[k].p, s))
			continue;
		saved = gpus[g];
		oracle_apply(&gpus[g], u[k].p, s);
		ok = oracle_exists(gpus, ngpus, u, n, k + 1, c);
		gpus[g] = saved;
		if (ok)
			return true;
	}
	return false;
}

/* The engine's answer is legal: per item the right count and profile, and
 * all of it applies to a copy of the GPUs by the oracle's rules. */
static void
check_valid(const struct placement_gpu *gpus, int ngpus, const struct spec_count *items, int nitems,
    const struct run *r)
{
	struct placement_gpu copy[MAXG];
	int per_item[PLACEMENT_MAX_ITEMS] = { 0 };

	memcpy(copy, gpus, (size_t)ngpus * sizeof(*copy));
	for (int i = 0; i < r->res.nplacements; i++) {
		const struct placement *pl = &r->res.placements[i];
		const struct gpu_model *m = catalog_model(cat, items[pl->item].model);

		assert_true(pl->gpu >= 0 && pl->gpu < ngpus);
		assert_ptr_equal(copy[pl->gpu].model, m);
		if (spec_is_full(&items[pl->item])) {
			assert_null(pl->profile);
			assert_int_equal(pl->size, m->full_slices);
			assert_int_equal(pl->mode_switch, copy[pl->gpu].mig_enabled);
		} else {
			assert_ptr_equal(pl->profile, catalog_profile(m, items[pl->item].profile));
			assert_int_equal(pl->size, pl->profile->memory_slices);
		}
		if (!oracle_fits(&copy[pl->gpu], pl->profile, pl->start))
			fail_msg("placement %d (item %d gpu %d start %d) breaks a rule", i,
			    pl->item, pl->gpu, pl->start);
		oracle_apply(&copy[pl->gpu], pl->profile, pl->start);
		per_item[pl->item]++;
		if (i > 0) {
			const struct placement *q = &r->res.placements[i - 1];

			assert_true(q->item < pl->item ||
			    (q->item == pl->item &&
				(q->gpu < pl->gpu || (q->gpu == pl->gpu && q->start < pl->start))));
		}
	}
	for (int i = 0; i < nitems; i++)
		assert_int_equal(per_item[i], items[i].count);
}

/* ---- fixtures ---- */

static int
setup(void **state)
{
	struct gp_error err;

	(void)state;
	gp_error_clear(&err);
	return catalog_load_builtin(&cat, &err);
}

static int
teardown(void **state)
{
	(void)state;
	catalog_free(cat);
	return 0;
}

/* ---- every profile, every start ---- */

/* Alone on an empty GPU each profile is placed at a catalog start; forcing
 * each allowed start by blocking every other slice gets exactly that start;
 * a disallowed start is never chosen even when its slices are all free. */
static void
test_every_profile_every_start(void **state)
{
	(void)state;
	for (int i = 0; i < catalog_nmodels(cat); i++) {
		const struct gpu_model *m = catalog_model_at(cat, i);

		for (int j = 0; j < m->nprofiles; j++) {
			const struct mig_profile *p = &m->profiles[j];
			char text[SPEC_TEXT_MAX];
			const char *texts[1] = { text };
			struct placement_gpu g;
			struct run r;

			snprintf(text, sizeof(text), "%s/%s=1", m->id, p->name);
			gpu(&g, m->id, 1);
			assert_int_equal(find(&g, 1, texts, 1, 0, &r), 0);
			assert_int_equal(r.res.nplacements, 1);
			assert_true(catalog_profile_allows(p, r.out[0].start));
			assert_int_equal(r.out[0].size, p->memory_slices);
			assert_ptr_equal(r.out[0].profile, p);
			assert_false(r.out[0].mode_switch);

			for (int s = 0; s + p->memory_slices <= m->memory_slices; s++) {
				uint8_t run = (uint8_t)(((1u << p->memory_slices) - 1u) << s);
				int rc;

				gpu(&g, m->id, 1);
				/* slices held without instances: a layout only the engine sees */
				g.used_mask = (uint8_t)(~run & ((1u << m->memory_slices) - 1u));
				assert_int_equal(placement_gpu_fits(&g, p, s),
				    catalog_profile_allows(p, s));
				rc = find(&g, 1, texts, 1, 0, &r);
				if (catalog_profile_allows(p, s)) {
					assert_int_equal(rc, 0);
					assert_int_equal(r.out[0].start, s);
				} else {
					assert_int_equal(rc, -1);
					assert_int_equal(r.err.status, 409);
					assert_int_equal(r.res.missing[0], 1);
				}
				/* and on a truly empty GPU, add() refuses disallowed starts */
				gpu(&g, m->id, 1);
				{
					struct gp_error err;

					gp_error_clear(&err);
					assert_int_equal(placement_gpu_add(&g, p, s, &err) == 0,
					    catalog_profile_allows(p, s));
				}
			}
		}
	}
}

/* "full" takes the whole GPU: start 0, size memory_slices (8, 4 on A30),
 * 1 on a model without MIG. */
static void
test_full_every_model(void **state)
{
	(void)state;
	for (int i = 0; i < catalog_nmodels(cat); i++) {
		const struct gpu_model *m = catalog_model_at(cat, i);
		char text[SPEC_TEXT_MAX];
		const char *texts[1] = { text };
		struct placement_gpu g[2];
		struct run r;

		snprintf(text, sizeof(text), "%s/full=1", m->id);
		gpu(&g[0], m->id, 1);
		assert_int_equal(find(g, 1, texts, 1, PLACEMENT_APPLY, &r), 0);
		assert_int_equal(r.out[0].start, 0);
		assert_int_equal(r.out[0].size, m->mig_capable ? m->memory_slices : 1);
		assert_null(r.out[0].profile);
		assert_int_equal(r.out[0].mode_switch, m->mig_capable);
		assert_true(g[0].full_used);
		assert_false(g[0].mig_enabled);
		/* a held GPU takes nothing more */
		assert_int_equal(find(g, 1, texts, 1, 0, &r), -1);
		for (int j = 0; j < m->nprofiles; j++) {
			assert_int_equal(placement_gpu_headroom(&g[0], &m->profiles[j]), 0);
			for (int s = 0; s < CATALOG_MAX_SLICES; s++)
				assert_false(placement_gpu_fits(&g[0], &m->profiles[j], s));
		}
		assert_int_equal(placement_gpu_headroom(&g[0], NULL), 0);
	}
	assert_int_equal(catalog_model(cat, "A30-24GB")->full_slices, 4);
	assert_int_equal(catalog_model(cat, "H100-80GB")->full_slices, 8);
}

static void
test_full_rules(void **state)
{
	struct placement_gpu g[3];
	struct run r;
	static const char *const full1[] = { "H100-80GB/full=1" };
	static const char *const full3[] = { "H100-80GB/full=3" };
	static const char *const mig1[] = { "H100-80GB/1g.10gb=1" };

	(void)state;
	/* an instance anywhere on a GPU keeps "full" away */
	gpu(&g[0], "H100-80GB", 1);
	add(&g[0], "1g.10gb", 6);
	assert_int_equal(find(g, 1, full1, 1, 0, &r), -1);
	assert_int_equal(r.err.status, 409);
	assert_string_equal(r.err.code, "insufficient_capacity");
	assert_int_equal(r.err.nfields, 1);
	assert_string_equal(r.err.fields[0].field, "items[0]");
	/* add() agrees */
	{
		struct gp_error err;

		gp_error_clear(&err);
		assert_int_equal(placement_gpu_add(&g[0], NULL, 0, &err), -1);
		assert_int_equal(err.status, 409);
	}
	/* an empty MIG-disabled GPU is preferred for full; MIG prefers a MIG GPU */
	gpu(&g[0], "H100-80GB", 1); /* MIG enabled, lower id */
	gpu(&g[1], "H100-80GB", 2);
	g[1].mig_enabled = false;
	assert_int_equal(find(g, 2, full1, 1, 0, &r), 0);
	assert_int_equal(r.out[0].gpu, 1);
	assert_false(r.out[0].mode_switch);
	g[0].mig_enabled = false;
	g[1].mig_enabled = true;
	assert_int_equal(find(g, 2, mig1, 1, 0, &r), 0);
	assert_int_equal(r.out[0].gpu, 1);
	assert_false(r.out[0].mode_switch);
	/* with only MIG-disabled GPUs, MIG switches an empty one */
	g[1].mig_enabled = false;
	assert_int_equal(find(g, 2, mig1, 1, PLACEMENT_APPLY, &r), 0);
	assert_int_equal(r.out[0].gpu, 0);
	assert_true(r.out[0].mode_switch);
	assert_true(g[0].mig_enabled);
	/* a MIG-disabled GPU with a MIG-less full allocation: nothing */
	gpu(&g[2], "H100-80GB", 3);
	add(&g[2], "full", 0);
	assert_false(g[2].mig_enabled);
	assert_true(g[2].full_used);
	assert_int_equal(g[2].used_mask, 0xff);
	/* full=3 with two empty GPUs fails, naming the one missing */
	gpu(&g[0], "H100-80GB", 1);
	gpu(&g[1], "H100-80GB", 2);
	assert_int_equal(find(g, 3, full3, 1, 0, &r), -1);
	assert_int_equal(r.res.missing[0], 1);
	assert_int_equal(r.res.nplacements, 0);
	assert_non_null(strstr(r.err.fields[0].message, "1 of 3"));
	assert_false(g[0].full_used || g[1].full_used);
	/* removing the full allocation frees the GPU */
	{
		struct gp_error err;

		gp_error_clear(&err);
		assert_int_equal(placement_gpu_remove(&g[2], NULL, 0, &err), 0);
		assert_int_equal(placement_gpu_remove(&g[2], NULL, 0, &err), -1);
	}
	assert_int_equal(find(g, 3, full3, 1, 0, &r), 0);
}

static void
test_non_mig_model(void **state)
{
	struct placement_gpu g[2];
	struct run r;
	static const char *const full2[] = { "L40S-48GB/full=2" };
	static const char *const mig[] = { "L40S-48GB/1g.10gb=1" };

	(void)state;
	placement_gpu_init(&g[0], model("L40S-48GB"), 10, 1, 0, true);
	assert_false(g[0].mig_enabled); /* cannot be enabled */
	placement_gpu_init(&g[1], model("L40S-48GB"), 11, 1, 1, false);
	assert_int_equal(find(g, 2, full2, 1, 0, &r), 0);
	assert_int_equal(r.out[0].size, 1);
	assert_false(r.out[0].mode_switch);
	assert_int_equal(find(g, 2, mig, 1, 0, &r), -1);
	assert_int_equal(r.err.status, 422);
	assert_string_equal(r.err.fields[0].field, "items[0].profile");
	assert_int_equal(placement_gpu_stranded(&g[0]), 0);
}

/* ---- per-GPU limits ---- */

static void
test_max_instances(void **state)
{
	(void)state;
	for (int i = 0; i < catalog_nmodels(cat); i++) {
		const struct gpu_model *m = catalog_model_at(cat, i);

		for (int j = 0; j < m->nprofiles; j++) {
			const struct mig_profile *p = &m->profiles[j];
			char text[SPEC_TEXT_MAX];
			const char *texts[1] = { text };
			struct placement_gpu g[2];
			struct run r;

			/* max_instances fit on one GPU (the catalog is consistent) */
			snprintf(text, sizeof(text), "%s/%s=%d", m->id, p->name, p->max_instances);
			gpu(&g[0], m->id, 1);
			assert_int_equal(placement_gpu_headroom(&g[0], p), p->max_instances);
			assert_int_equal(find(g, 1, texts, 1, PLACEMENT_APPLY, &r), 0);
			assert_int_equal(g[0].profile_count[j], p->max_instances);
			assert_int_equal(placement_gpu_headroom(&g[0], p), 0);
			/* one more does not, though slices may be free */
			snprintf(text, sizeof(text), "%s/%s=1", m->id, p->name);
			assert_int_equal(find(g, 1, texts, 1, 0, &r), -1);
			for (int s = 0; s < CATALOG_MAX_SLICES; s++)
				assert_false(placement_gpu_fits(&g[0], p, s));
			/* a second GPU takes the overflow */
			snprintf(text, sizeof(text), "%s/%s=%d", m->id, p->name,
			    p->max_instances + 1);
			gpu(&g[0], m->id, 1);
			gpu(&g[1], m->id, 2);
			assert_int_equal(find(g, 2, texts, 1, 0, &r), 0);
			assert_int_equal(r.res.nplacements, p->max_instances + 1);
			for (int k = 0; k < p->max_instances; k++)
				assert_int_equal(r.out[k].gpu, 0); /* packed first */
			assert_int_equal(r.out[p->max_instances].gpu, 1);
		}
	}
	/* media extensions: one +me instance per GPU although slices are free */
	{
		struct placement_gpu g;
		struct gp_error err;

		gpu(&g, "H100-80GB", 1);
		add(&g, "1g.10gb+me", 0);
		gp_error_clear(&err);
		assert_int_equal(placement_gpu_add(&g, prof(g.model, "1g.10gb+me"), 1, &err), -1);
		assert_non_null(strstr(err.message, "the most it takes"));
		add(&g, "1g.10gb", 1);
	}
}

static void
test_compute_limit(void **state)
{
	struct placement_gpu g;
	struct gp_error err;
	static const char *const one[] = { "H100-80GB/1g.10gb=1" };
	struct run r;

	(void)state;
	/* 3 x 2g.20gb + 1g.20gb at 6 use all 7 compute slices and all memory */
	gpu(&g, "H100-80GB", 1);
	add(&g, "2g.20gb", 0);
	add(&g, "2g.20gb", 2);
	add(&g, "2g.20gb", 4);
	add(&g, "1g.20gb", 6);
	assert_int_equal(g.compute_used, 7);
	assert_int_equal(g.used_mask, 0xff);
	/* compute is checked on its own: free slices but no compute */
	gpu(&g, "H100-80GB", 1);
	add(&g, "4g.40gb", 0);
	add(&g, "2g.20gb", 4);
	add(&g, "1g.10gb", 6);
	assert_int_equal(g.compute_used, 7);
	assert_int_equal(g.used_mask, 0x7f);
	g.used_mask = 0x0f; /* pretend slices 4-7 were free */
	gp_error_clear(&err);
	assert_int_equal(placement_gpu_add(&g, prof(g.model, "1g.10gb"), 5, &err), -1);
	assert_non_null(strstr(err.message, "compute slices"));
	assert_false(placement_gpu_fits(&g, prof(g.model, "1g.10gb"), 5));
	assert_int_equal(find(&g, 1, one, 1, 0, &r), -1);
	assert_int_equal(placement_gpu_headroom(&g, prof(g.model, "1g.10gb")), 0);
}

static void
test_overlap(void **state)
{
	struct placement_gpu g;
	struct gp_error err;

	(void)state;
	gpu(&g, "H100-80GB", 7);
	add(&g, "2g.20gb", 2);
	gp_error_clear(&err);
	assert_int_equal(placement_gpu_add(&g, prof(g.model, "3g.40gb"), 0, &err), -1);
	assert_int_equal(err.status, 409);
	assert_string_equal(err.code, "conflict");
	assert_non_null(strstr(err.message, "slices [0, 4) of gpu 7 overlap"));
	assert_int_equal(placement_gpu_add(&g, prof(g.model, "1g.10gb"), 3, &err), -1);
	assert_int_equal(placement_gpu_add(&g, prof(g.model, "1g.10gb"), 2, &err), -1);
	assert_int_equal(placement_gpu_add(&g, prof(g.model, "4g.40gb"), 0, &err), -1);
	assert_int_equal(placement_gpu_add(&g, prof(g.model, "7g.80gb"), 0, &err), -1);
	assert_int_equal(placement_gpu_add(&g, NULL, 0, &err), -1);
	/* a profile of another model is refused */
	assert_int_equal(placement_gpu_add(&g, prof(model("A100-40GB"), "1g.5gb"), 0, &err), -1);
	assert_false(placement_gpu_fits(&g, prof(model("A100-40GB"), "1g.5gb"), 0));
	/* the state did not move */
	assert_int_equal(g.used_mask, 0x0c);
	assert_int_equal(g.instances, 1);
	assert_int_equal(g.compute_used, 2);
	/* remove gives the slices back; removing twice fails */
	assert_int_equal(placement_gpu_remove(&g, prof(g.model, "2g.20gb"), 2, &err), 0);
	assert_int_equal(g.used_mask, 0);
	assert_int_equal(g.instances, 0);
	assert_int_equal(placement_gpu_remove(&g, prof(g.model, "2g.20gb"), 2, &err), -1);
	assert_int_equal(placement_gpu_remove(&g, prof(g.model, "2g.20gb"), 0, &err), -1);
	add(&g, "3g.40gb", 0);
}

/* ---- the catalog's facts_for_tests, one test each ---- */

/* Fact 0: on any 8-slice model 2 x 3g + 1 x 1g does not fit on one GPU. */
static void
test_fact_two_3g_plus_1g(void **state)
{
	int checked = 0;

	(void)state;
	assert_non_null(strstr(catalog_fact(cat, 0), "2 x 3g + 1 x 1g does NOT fit"));
	for (int i = 0; i < catalog_nmodels(cat); i++) {
		const struct gpu_model *m = catalog_model_at(cat, i);
		const struct mig_profile *p3 = NULL;

		if (m->memory_slices != 8)
			continue;
		for (int j = 0; j < m->nprofiles; j++) {
			if (strncmp(m->profiles[j].name, "3g.", 3) == 0)
				p3 = &m->profiles[j];
		}
		assert_non_null(p3);
		for (int j = 0; j < m->nprofiles; j++) {
			const struct mig_profile *p1 = &m->profiles[j];
			char a[SPEC_TEXT_MAX], b[SPEC_TEXT_MAX];
			const char *texts[2] = { a, b };
			struct placement_gpu g[2];
			struct run r;

			if (p1->compute_slices != 1)
				continue;
			snprintf(a, sizeof(a), "%s/%s=2", m->id, p3->name);
			snprintf(b, sizeof(b), "%s/%s=1", m->id, p1->name);
			gpu(&g[0], m->id, 1);
			assert_int_equal(find(g, 1, texts, 2, 0, &r), -1);
			assert_int_equal(r.res.missing[0] + r.res.missing[1], 1);
			assert_true(r.res.searched);
			assert_false(r.res.search_exhausted);
			/* the oracle agrees that no layout exists */
			{
				struct ounit u[3] = { { m, p3, 0 }, { m, p3, 0 }, { m, p1, 1 } };

				assert_false(oracle_exists(g, 1, u, 3, 0, 0));
			}
			/* 3 + 3 + 1 = 7 compute slices: compute is not the reason */
			assert_int_equal(2 * p3->compute_slices + p1->compute_slices,
			    m->compute_slices);
			/* two GPUs: the 3g pair packs on one, the 1g goes to the other */
			gpu(&g[1], m->id, 2);
			assert_int_equal(find(g, 2, texts, 2, 0, &r), 0);
			assert_non_null(has(&r, 0, 0, 0));
			assert_non_null(has(&r, 0, 0, 4));
			assert_int_equal(r.out[2].gpu, 1);
			checked++;
		}
	}
	assert_true(checked >= 5 * 3);
}

/* Fact 1: on H100-80GB 3g.40gb + 2 x 2g.20gb fits only as 3g@4, 2g@0, 2g@2. */
static void
test_fact_3g_2g_2g(void **state)
{
	static const char *const texts[] = { "H100-80GB/2g.20gb=2", "H100-80GB/3g.40gb=1" };
	const struct gpu_model *m = model("H100-80GB");
	const struct mig_profile *p3 = prof(m, "3g.40gb"), *p2 = prof(m, "2g.20gb");
	struct placement_gpu g;
	struct run r;
	int solutions = 0;

	(void)state;
	assert_non_null(strstr(catalog_fact(cat, 1), "3g.40gb + 2g.20gb + 2g.20gb"));
	gpu(&g, "H100-80GB", 1);
	assert_int_equal(find(&g, 1, texts, 2, 0, &r), 0);
	assert_false(r.res.searched); /* larger first gets it greedily */
	assert_non_null(has(&r, 1, 0, 4));
	assert_non_null(has(&r, 0, 0, 0));
	assert_non_null(has(&r, 0, 0, 2));
	/* "only": every layout of the three on one GPU, by brute force */
	for (int s3 = 0; s3 < 8; s3++) {
		for (int a = 0; a < 8; a++) {
			for (int b = a + 1; b < 8; b++) {
				struct placement_gpu x;

				gpu(&x, "H100-80GB", 1);
				if (!oracle_fits(&x, p3, s3))
					continue;
				oracle_apply(&x, p3, s3);
				if (!oracle_fits(&x, p2, a))
					continue;
				oracle_apply(&x, p2, a);
				if (!oracle_fits(&x, p2, b))
					continue;
				assert_int_equal(s3, 4);
				assert_int_equal(a, 0);
				assert_int_equal(b, 2);
				solutions++;
			}
		}
	}
	assert_int_equal(solutions, 1);
	/* with a 3g already at 0 the two 2g cannot both fit */
	gpu(&g, "H100-80GB", 1);
	add(&g, "3g.40gb", 0);
	assert_int_equal(find(&g, 1, texts, 1, 0, &r), -1);
	assert_int_equal(r.res.missing[0], 1);
}

/* Fact 2: 4g.40gb + 3g.40gb fits (4g@0, 3g@4); 7 x 1g.10gb fits; 2 x 3g.40gb
 * fits and strands one compute slice. */
static void
test_fact_4g_3g_7x1g_2x3g(void **state)
{
	static const char *const a[] = { "H100-80GB/3g.40gb=1", "H100-80GB/4g.40gb=1" };
	static const char *const b[] = { "H100-80GB/1g.10gb=7" };
	static const char *const c[] = { "H100-80GB/3g.40gb=2" };
	static const char *const c1[] = { "H100-80GB/1g.10gb=1" };
	struct placement_gpu g;
	struct run r;

	(void)state;
	assert_non_null(strstr(catalog_fact(cat, 2), "4g.40gb + 3g.40gb fits"));
	gpu(&g, "H100-80GB", 1);
	assert_int_equal(find(&g, 1, a, 2, PLACEMENT_APPLY, &r), 0);
	assert_non_null(has(&r, 1, 0, 0));
	assert_non_null(has(&r, 0, 0, 4));
	assert_int_equal(g.compute_used, 7);
	assert_int_equal(placement_gpu_stranded(&g), 0);

	gpu(&g, "H100-80GB", 1);
	assert_int_equal(find(&g, 1, b, 1, PLACEMENT_APPLY, &r), 0);
	for (int s = 0; s < 7; s++)
		assert_non_null(has(&r, 0, 0, s));
	assert_int_equal(g.used_mask, 0x7f);
	assert_int_equal(placement_gpu_stranded(&g), 0);

	gpu(&g, "H100-80GB", 1);
	assert_int_equal(find(&g, 1, c, 1, PLACEMENT_APPLY, &r), 0);
	assert_non_null(has(&r, 0, 0, 0));
	assert_non_null(has(&r, 0, 0, 4));
	assert_int_equal(placement_gpu_stranded(&g), 1);
	assert_int_equal(find(&g, 1, c1, 1, 0, &r), -1);
	{
		struct placement_capacity cap;

		placement_capacity(g.model, &g, 1, &cap);
		assert_int_equal(cap.gpus, 1);
		assert_int_equal(cap.instances, 2);
		assert_int_equal(cap.compute_free, 1);
		assert_int_equal(cap.compute_stranded, 1);
		for (int j = 0; j < g.model->nprofiles; j++)
			assert_int_equal(cap.headroom[j], 0);
	}
}

/* Fact 3: 1g at 0, 1 and 5 block every 3g with 3 of 7 compute slices used;
 * and the engine itself never lays 1g out like that. */
static void
test_fact_1g_blocks_3g(void **state)
{
	static const char *const three[] = { "H100-80GB/1g.10gb=3" };
	static const char *const big[] = { "H100-80GB/3g.40gb=1" };
	const struct gpu_model *m = model("H100-80GB");
	struct placement_gpu g;
	struct run r;

	(void)state;
	assert_non_null(strstr(catalog_fact(cat, 3), "1g instances at starts 0, 1 and 5"));
	gpu(&g, "H100-80GB", 1);
	add(&g, "1g.10gb", 0);
	add(&g, "1g.10gb", 1);
	add(&g, "1g.10gb", 5);
	assert_int_equal(g.compute_used, 3);
	assert_int_equal(placement_gpu_headroom(&g, prof(m, "3g.40gb")), 0);
	assert_int_equal(placement_gpu_headroom(&g, prof(m, "4g.40gb")), 0);
	assert_int_equal(find(&g, 1, big, 1, 0, &r), -1);
	/* the other 4 compute slices are still reachable (1g at 2, 3, 4, 6) */
	assert_int_equal(placement_gpu_stranded(&g), 0);
	assert_int_equal(placement_gpu_headroom(&g, prof(m, "1g.10gb")), 4);

	gpu(&g, "H100-80GB", 1);
	assert_int_equal(find(&g, 1, three, 1, PLACEMENT_APPLY, &r), 0);
	assert_int_equal(g.used_mask, 0x07);
	assert_int_equal(placement_gpu_headroom(&g, prof(m, "3g.40gb")), 1);
	assert_int_equal(find(&g, 1, big, 1, 0, &r), 0);
	assert_int_equal(r.out[0].start, 4);
}

/* Fact 4: memory slice 7 is taken only by 3g at 4, a double-memory 1g at 6
 * or 7g. */
static void
test_fact_slice_7(void **state)
{
	const struct gpu_model *m = model("H100-80GB");
	int takers = 0;

	(void)state;
	assert_non_null(strstr(catalog_fact(cat, 4), "Memory slice 7"));
	for (int j = 0; j < m->nprofiles; j++) {
		const struct mig_profile *p = &m->profiles[j];

		for (int s = 0; s < 8; s++) {
			struct placement_gpu g;

			gpu(&g, "H100-80GB", 1);
			if (!placement_gpu_fits(&g, p, s) || s + p->memory_slices <= 7)
				continue;
			takers++;
			assert_true((strcmp(p->name, "3g.40gb") == 0 && s == 4) ||
			    (strcmp(p->name, "1g.20gb") == 0 && s == 6) ||
			    (strcmp(p->name, "7g.80gb") == 0 && s == 0));
		}
	}
	assert_int_equal(takers, 3);
	/* with slices 0-6 held nothing can use slice 7 */
	{
		struct placement_gpu g;

		gpu(&g, "H100-80GB", 1);
		for (int s = 0; s < 7; s++)
			add(&g, "1g.10gb", s);
		for (int j = 0; j < m->nprofiles; j++)
			assert_int_equal(placement_gpu_headroom(&g, &m->profiles[j]), 0);
	}
}

/* ---- stranded compute and headroom ---- */

static void
test_stranded(void **state)
{
	static const struct {
		const char *model;
		const char *layout[8];
		int starts[8];
		int stranded;
	} rows[] = {
		{ "H100-80GB", { NULL }, { 0 }, 0 },
		{ "H100-80GB", { "3g.40gb", "3g.40gb" }, { 0, 4 }, 1 },
		{ "H200-141GB", { "3g.71gb", "3g.71gb" }, { 0, 4 }, 1 },
		{ "A100-40GB", { "3g.20gb", "3g.20gb" }, { 0, 4 }, 1 },
		{ "H100-80GB", { "3g.40gb", "2g.20gb", "1g.20gb" }, { 0, 4, 6 }, 1 },
		{ "H100-80GB", { "4g.40gb", "3g.40gb" }, { 0, 4 }, 0 },
		/* 3g at 0: slices 4-7 take at most 3 more compute slices */
		{ "H100-80GB", { "3g.40gb" }, { 0 }, 1 },
		{ "H100-80GB", { "3g.40gb" }, { 4 }, 0 },
		{ "H100-80GB", { "7g.80gb" }, { 0 }, 0 },
		/* slices 0-5 held by 1g.20gb x3: free 4 compute, only 1g at 6 usable */
		{ "H100-80GB", { "1g.20gb", "1g.20gb", "1g.20gb" }, { 0, 2, 4 }, 3 },
		/* 2g at 0, 2, 4: slices 6-7 take a 1g.20gb, nothing else: 0 stranded */
		{ "H100-80GB", { "2g.20gb", "2g.20gb", "2g.20gb" }, { 0, 2, 4 }, 0 },
		/* slices 4 and 7 free, 2 compute slices: only a 1g at 4 is possible */
		{ "H100-80GB", { "3g.40gb", "1g.10gb", "1g.10gb" }, { 0, 5, 6 }, 1 },
		{ "A30-24GB", { "2g.12gb", "1g.6gb" }, { 0, 3 }, 0 },
		{ "A30-24GB", { "1g.6gb", "1g.6gb" }, { 0, 2 }, 0 },
	};

	(void)state;
	for (int i = 0; i < NELEM(rows); i++) {
		struct placement_gpu g;

		gpu(&g, rows[i].model, 1);
		for (int k = 0; k < 8 && rows[i].layout[k] != NULL; k++)
			add(&g, rows[i].layout[k], rows[i].starts[k]);
		if (placement_gpu_stranded(&g) != rows[i].stranded)
			fail_msg("row %d: stranded %d, expected %d", i, placement_gpu_stranded(&g),
			    rows[i].stranded);
	}
}

static void
test_headroom(void **state)
{
	static const struct {
		const char *layout[4];
		int starts[4];
		int expect[8]; /* per H100 profile in catalog order, then full */
	} rows[] = {
		/* 1g.10gb +me 1g.20gb 2g 3g 4g 7g full */
		{ { NULL }, { 0 }, { 7, 1, 4, 3, 2, 1, 1, 1 } },
		{ { "3g.40gb" }, { 4 }, { 4, 1, 2, 2, 1, 1, 0, 0 } },
		{ { "4g.40gb" }, { 0 }, { 3, 1, 2, 1, 1, 0, 0, 0 } },
		{ { "1g.10gb+me" }, { 3 }, { 6, 0, 3, 2, 1, 0, 0, 0 } },
		{ { "3g.40gb", "3g.40gb" }, { 0, 4 }, { 0, 0, 0, 0, 0, 0, 0, 0 } },
		{ { "2g.20gb", "2g.20gb" }, { 0, 2 }, { 3, 1, 2, 1, 1, 0, 0, 0 } },
	};
	const struct gpu_model *m = model("H100-80GB");

	(void)state;
	for (int i = 0; i < NELEM(rows); i++) {
		struct placement_gpu g;

		gpu(&g, "H100-80GB", 1);
		for (int k = 0; k < 4 && rows[i].layout[k] != NULL; k++)
			add(&g, rows[i].layout[k], rows[i].starts[k]);
		for (int j = 0; j < m->nprofiles; j++) {
			if (placement_gpu_headroom(&g, &m->profiles[j]) != rows[i].expect[j])
				fail_msg("row %d %s: headroom %d, expected %d", i,
				    m->profiles[j].name,
				    placement_gpu_headroom(&g, &m->profiles[j]), rows[i].expect[j]);
		}
		assert_int_equal(placement_gpu_headroom(&g, NULL), rows[i].expect[7]);
	}
}

static void
test_capacity_sum(void **state)
{
	struct placement_gpu g[4];
	struct placement_capacity cap;
	const struct gpu_model *m = model("H100-80GB");

	(void)state;
	gpu(&g[0], "H100-80GB", 1);
	gpu(&g[1], "H100-80GB", 2);
	add(&g[1], "3g.40gb", 0);
	add(&g[1], "3g.40gb", 4);
	gpu(&g[2], "H100-80GB", 3);
	add(&g[2], "full", 0);
	gpu(&g[3], "A100-40GB", 4);
	placement_capacity(m, g, 4, &cap);
	assert_int_equal(cap.gpus, 3);
	assert_int_equal(cap.empty_gpus, 1);
	assert_int_equal(cap.full_gpus, 1);
	assert_int_equal(cap.instances, 2);
	assert_int_equal(cap.compute_free, 7 + 1);
	assert_int_equal(cap.compute_stranded, 1);
	assert_int_equal(cap.headroom[prof(m, "1g.10gb")->index], 7);
	assert_int_equal(cap.headroom[prof(m, "7g.80gb")->index], 1);
}

/* ---- preference ---- */

static void
test_prefer_packing(void **state)
{
	static const char *const one[] = { "H100-80GB/1g.10gb=1" };
	static const char *const big[] = { "H100-80GB/4g.40gb=1" };
	struct placement_gpu g[3];
	struct run r;

	(void)state;
	/* the used GPU wins over an empty one with a lower id */
	gpu(&g[0], "H100-80GB", 1);
	gpu(&g[1], "H100-80GB", 2);
	add(&g[1], "1g.10gb", 0);
	assert_int_equal(find(g, 2, one, 1, 0, &r), 0);
	assert_int_equal(r.out[0].gpu, 1);
	assert_int_equal(r.out[0].start, 1); /* not 4: keeps the 3g spot at 4 */
	/* the GPU with more instances wins */
	gpu(&g[2], "H100-80GB", 3);
	add(&g[2], "1g.10gb", 0);
	add(&g[2], "1g.10gb", 1);
	assert_int_equal(find(g, 3, one, 1, 0, &r), 0);
	assert_int_equal(r.out[0].gpu, 2);
	assert_int_equal(r.out[0].start, 2);
	/* unless it cannot take the profile: a 4g needs slices 0-3 */
	assert_int_equal(find(g, 3, big, 1, 0, &r), 0);
	assert_int_equal(r.out[0].gpu, 0);
	assert_int_equal(r.out[0].start, 0);
}

static void
test_prefer_future_run(void **state)
{
	static const char *const big[] = { "H100-80GB/3g.40gb=1" };
	static const char *const one[] = { "H100-80GB/1g.10gb=1" };
	static const char *const two[] = { "H100-80GB/2g.20gb=1" };
	struct placement_gpu g[2];
	struct run r;

	(void)state;
	/* both hold one 1g; the 3g goes where more space stays usable */
	gpu(&g[0], "H100-80GB", 1);
	add(&g[0], "1g.10gb", 4); /* 3g fits at 0, leaves 5,6,7 */
	gpu(&g[1], "H100-80GB", 2);
	add(&g[1], "1g.10gb", 0); /* 3g fits at 4, leaves 1,2,3 */
	assert_int_equal(find(g, 2, big, 1, 0, &r), 0);
	assert_int_equal(r.out[0].gpu, 1);
	assert_int_equal(r.out[0].start, 4);
	/* a 3g on an empty GPU goes to 4, keeping 4g/3g at 0 possible */
	gpu(&g[0], "H100-80GB", 1);
	assert_int_equal(find(g, 1, big, 1, 0, &r), 0);
	assert_int_equal(r.out[0].start, 4);
	/* next to a 3g at 4, a 1g takes 0..3 and not a slot that blocks 2g runs */
	add(&g[0], "3g.40gb", 4);
	add(&g[0], "1g.10gb", 0);
	assert_int_equal(find(g, 1, one, 1, 0, &r), 0);
	assert_int_equal(r.out[0].start, 1);
	assert_int_equal(find(g, 1, two, 1, 0, &r), 0);
	assert_int_equal(r.out[0].start, 2);
}

static void
test_prefer_lowest_id(void **state)
{
	static const char *const one[] = { "H100-80GB/1g.10gb=1" };
	struct placement_gpu g[4];
	struct run r;

	(void)state;
	placement_gpu_init(&g[0], model("H100-80GB"), 40, 2, 0, true);
	placement_gpu_init(&g[1], model("H100-80GB"), 30, 1, 1, true);
	placement_gpu_init(&g[2], model("H100-80GB"), 20, 1, 0, true);
	placement_gpu_init(&g[3], model("H100-80GB"), 10, 2, 1, true);
	assert_int_equal(find(g, 4, one, 1, 0, &r), 0);
	assert_int_equal(r.out[0].gpu, 2); /* node 1, index 0 */
	g[2].mig_enabled = false;          /* now it would need a mode switch */
	assert_int_equal(find(g, 4, one, 1, 0, &r), 0);
	assert_int_equal(r.out[0].gpu, 1);
	/* equal node and index: the lower id */
	placement_gpu_init(&g[0], model("H100-80GB"), 9, 1, 0, true);
	placement_gpu_init(&g[1], model("H100-80GB"), 8, 1, 0, true);
	assert_int_equal(find(g, 2, one, 1, 0, &r), 0);
	assert_int_equal(r.out[0].gpu, 1);
}

/* Larger profiles go first whatever the item order: 1g.20gb listed first
 * would take slice 0 and block the 4g. */
static void
test_larger_first(void **state)
{
	static const char *const texts[] = {
		"H100-80GB/1g.20gb=1",
		"H100-80GB/2g.20gb=1",
		"H100-80GB/4g.40gb=1",
	};
	struct placement_gpu g;
	struct run r;

	(void)state;
	gpu(&g, "H100-80GB", 1);
	assert_int_equal(find(&g, 1, texts, 3, 0, &r), 0);
	assert_false(r.res.searched);
	assert_non_null(has(&r, 2, 0, 0));
	assert_non_null(has(&r, 1, 0, 4));
	assert_non_null(has(&r, 0, 0, 6));
	/* output is ordered by item */
	assert_int_equal(r.out[0].item, 0);
	assert_int_equal(r.out[1].item, 1);
	assert_int_equal(r.out[2].item, 2);
}

/* A layout where the greedy choice fails but another exists: the search
 * finds it. Both GPUs carry two instances and the 3g would leave one free
 * 1g slot on either, so the tie goes to the lower node index, GPU A; then
 * only one 2g fits on B. Putting the 3g on B at 4 leaves A room for both. */
static void
test_search_fallback(void **state)
{
	static const char *const texts[] = { "H100-80GB/3g.40gb=1", "H100-80GB/2g.20gb=2" };
	const struct gpu_model *m = model("H100-80GB");
	struct placement_gpu g[2];
	struct run r;

	(void)state;
	placement_gpu_init(&g[0], m, 1, 1, 0, true); /* A */
	add(&g[0], "1g.10gb", 4);
	add(&g[0], "1g.10gb", 6);
	placement_gpu_init(&g[1], m, 2, 1, 1, true); /* B */
	add(&g[1], "1g.10gb+me", 0);
	add(&g[1], "1g.20gb", 2);
	assert_int_equal(find(g, 2, texts, 2, 0, &r), 0);
	assert_true(r.res.searched);
	assert_false(r.res.search_exhausted);
	assert_int_equal(r.res.nplacements, 3);
	assert_non_null(has(&r, 0, 1, 4));
	assert_non_null(has(&r, 1, 0, 0));
	assert_non_null(has(&r, 1, 0, 2));
	/* swap the node order and the greedy pass gets it right by itself */
	g[0].index = 2;
	assert_int_equal(find(g, 2, texts, 2, 0, &r), 0);
	assert_false(r.res.searched);
	assert_non_null(has(&r, 0, 1, 4));
}

/* When nothing fits the search proves it (within its budget). */
static void
test_search_proves_none(void **state)
{
	static const char *const texts[] = { "H100-80GB/2g.20gb=1", "H100-80GB/1g.20gb=2" };
	struct placement_gpu g[2];
	struct run r;

	(void)state;
	gpu(&g[0], "H100-80GB", 1);
	add(&g[0], "3g.40gb", 0);
	add(&g[0], "1g.10gb+me", 5);
	gpu(&g[1], "H100-80GB", 2);
	add(&g[1], "4g.40gb", 0);
	add(&g[1], "1g.20gb", 4);
	add(&g[1], "1g.20gb", 6);
	{
		struct ounit u[3] = {
			{ g[0].model, prof(g[0].model, "2g.20gb"), 0 },
			{ g[0].model, prof(g[0].model, "1g.20gb"), 1 },
			{ g[0].model, prof(g[0].model, "1g.20gb"), 1 },
		};

		assert_false(oracle_exists(g, 2, u, 3, 0, 0));
	}
	assert_int_equal(find(g, 2, texts, 2, 0, &r), -1);
	assert_true(r.res.searched);
	assert_false(r.res.search_exhausted);
}

/* ---- errors and modes ---- */

static void
test_request_errors(void **state)
{
	struct placement_gpu g;
	struct spec_count items[PLACEMENT_MAX_ITEMS + 1];
	struct placement out[2];
	struct placement_result res;
	struct gp_error err;
	static const char *const bad[] = { "H100-80GB/3g.20gb=1", "X/full=1", "H100-80GB/full=1" };
	struct run r;

	(void)state;
	gpu(&g, "H100-80GB", 1);
	assert_int_equal(find(&g, 1, bad, 3, 0, &r), -1);
	assert_int_equal(r.err.status, 422);
	assert_int_equal(r.err.nfields, 2);
	assert_string_equal(r.err.fields[0].field, "items[0].profile");
	assert_string_equal(r.err.fields[1].field, "items[1].model");
	/* count 0 from JSON is refused */
	items_of(bad + 2, 1, items);
	items[0].count = 0;
	memset(&res, 0, sizeof(res));
	res.placements = out;
	res.cap = 2;
	gp_error_clear(&err);
	assert_int_equal(placement_find(cat, &g, 1, items, 1, 0, &res, &err), -1);
	assert_string_equal(err.fields[0].field, "items[0].count");
	/* buffer too small */
	items[0].count = 3;
	gp_error_clear(&err);
	assert_int_equal(placement_find(cat, &g, 1, items, 1, 0, &res, &err), -1);
	assert_int_equal(err.status, 500);
	/* too many items */
	for (int i = 0; i <= PLACEMENT_MAX_ITEMS; i++)
		items[i] = items[0];
	gp_error_clear(&err);
	assert_int_equal(placement_find(cat, &g, 1, items, PLACEMENT_MAX_ITEMS + 1, 0, &res, &err),
	    -1);
	assert_int_equal(err.status, 422);
	/* nothing asked, nothing placed */
	gp_error_clear(&err);
	assert_int_equal(placement_find(cat, &g, 1, items, 0, 0, &res, &err), 0);
	assert_int_equal(res.nplacements, 0);
	/* no GPUs at all */
	items[0].count = 1;
	gp_error_clear(&err);
	assert_int_equal(placement_find(cat, NULL, 0, items, 1, 0, &res, &err), -1);
	assert_int_equal(err.status, 409);
}

static void
test_all_or_nothing(void **state)
{
	static const char *const texts[] = {
		"H100-80GB/3g.40gb=2",
		"A100-40GB/7g.40gb=2",
		"H100-80GB/1g.10gb=1",
	};
	struct placement_gpu g[3], before[3];
	struct run r;

	(void)state;
	gpu(&g[0], "H100-80GB", 1);
	gpu(&g[1], "A100-40GB", 2);
	gpu(&g[2], "H100-80GB", 3);
	add(&g[2], "1g.10gb", 0);
	memcpy(before, g, sizeof(g));
	/* the A100 item is one short: nothing at all is placed */
	assert_int_equal(find(g, 3, texts, 3, PLACEMENT_APPLY, &r), -1);
	assert_int_equal(r.res.missing[0], 0);
	assert_int_equal(r.res.missing[1], 1);
	assert_int_equal(r.res.missing[2], 0);
	assert_int_equal(r.err.nfields, 1);
	assert_string_equal(r.err.fields[0].field, "items[1]");
	assert_non_null(strstr(r.err.message, "1 of 5"));
	assert_memory_equal(g, before, sizeof(g));
	/* with one A100 asked it all fits, and APPLY keeps it */
	{
		static const char *const ok[] = {
			"H100-80GB/3g.40gb=2",
			"A100-40GB/7g.40gb=1",
			"H100-80GB/1g.10gb=1",
		};

		assert_int_equal(find(g, 3, ok, 3, 0, &r), 0);
		assert_memory_equal(g, before, sizeof(g));
		assert_int_equal(find(g, 3, ok, 3, PLACEMENT_APPLY, &r), 0);
		assert_int_equal(r.res.nplacements, 4);
		/* both 3g packed onto the used H100 where they fit: 3g at 4 there,
		 * then the other at 0 on the empty one; the 1g joins the fuller */
		assert_int_equal(g[0].instances, 1);
		assert_int_equal(g[1].instances, 1);
		assert_int_equal(g[2].instances, 3);
		/* no empty H100 is left for a whole one */
		{
			static const char *const full[] = { "H100-80GB/full=1" };

			assert_int_equal(find(g, 3, full, 1, 0, &r), -1);
		}
	}
}

/* ---- random cross-checks against the oracle ---- */

static void
random_layout_n(struct placement_gpu *g, const struct gpu_model *m, int64_t id, int max_adds)
{
	int adds;

	placement_gpu_init(g, m, id, rng_below(3), rng_below(8), rng_below(4) != 0);
	g->id = id;
	if (rng_below(10) == 0 || !m->mig_capable) {
		if (rng_below(2) == 0) {
			struct gp_error err;

			if (placement_gpu_add(g, NULL, 0, &err) < 0)
				fail_msg("full on empty");
		}
		return;
	}
	adds = rng_below(max_adds + 1);
	for (int k = 0; k < adds; k++) {
		const struct mig_profile *p = &m->profiles[rng_below(m->nprofiles)];
		int s = p->placements[rng_below(p->nplacements)];
		struct gp_error err;

		if (placement_gpu_add(g, p, s, &err) < 0)
			continue;
	}
}

static void
random_layout(struct placement_gpu *g, const struct gpu_model *m, int64_t id)
{
	random_layout_n(g, m, id, 6);
}

static const struct gpu_model *
random_model(void)
{
	return catalog_model_at(cat, rng_below(catalog_nmodels(cat)));
}

/* For thousands of random 8-GPU layouts and every profile: the engine finds
 * a single instance exactly when one fits somewhere, legal, and the one the
 * documented preference ranks first. */
static void
test_random_single(void **state)
{
	int placed = 0, refused = 0;

	(void)state;
	rng_state = 0x5eed0001;
	for (int t = 0; t < 4000; t++) {
		const struct gpu_model *m = random_model(), *other = random_model();
		struct placement_gpu g[8], before[8];

		for (int i = 0; i < 8; i++)
			random_layout(&g[i], i % 4 == 3 ? other : m, 100 + i);
		memcpy(before, g, sizeof(g));
		for (int j = -1; j < m->nprofiles; j++) {
			const struct mig_profile *p = j < 0 ? NULL : &m->profiles[j];
			char text[SPEC_TEXT_MAX];
			const char *texts[1] = { text };
			struct spec_count item;
			struct run r;
			int bg = -1, bs = -1;
			bool exists;

			snprintf(text, sizeof(text), "%s/%s=1", m->id,
			    p == NULL ? "full" : p->name);
			exists = oracle_best(g, 8, m, p, &bg, &bs);
			find(g, 8, texts, 1, 0, &r);
			assert_memory_equal(g, before, sizeof(g));
			if (!exists) {
				assert_int_equal(r.rc, -1);
				assert_int_equal(r.err.status, 409);
				assert_int_equal(r.res.missing[0], 1);
				refused++;
				continue;
			}
			if (r.rc != 0)
				fail_msg("t=%d %s: engine found nothing, oracle found gpu %d start %d",
				    t, text, bg, bs);
			items_of(texts, 1, &item);
			check_valid(g, 8, &item, 1, &r);
			if (r.out[0].gpu != bg || r.out[0].start != bs)
				fail_msg("t=%d %s: engine chose gpu %d start %d, preference says %d/%d",
				    t, text, r.out[0].gpu, r.out[0].start, bg, bs);
			assert_false(r.res.searched);
			placed++;
		}
	}
	/* both outcomes were exercised plenty */
	assert_true(placed > 10000);
	assert_true(refused > 1000);
}

/* Random small multi-item requests on one or two GPUs: the engine succeeds
 * exactly when the exhaustive oracle finds any layout, and what it returns
 * is legal; the GPUs are untouched unless PLACEMENT_APPLY. */
static void
test_random_requests(void **state)
{
	int ok = 0, no = 0, rescued = 0;

	(void)state;
	rng_state = 0x5eed0002;
	for (int t = 0; t < 6000; t++) {
		const struct gpu_model *m = random_model();
		int ngpus = 1 + rng_below(2), nitems = 1 + rng_below(3), nunits = 0;
		struct placement_gpu g[2], before[2], scratch[2];
		char texts_buf[3][SPEC_TEXT_MAX];
		const char *texts[3];
		struct spec_count items[3];
		struct ounit units[9];
		unsigned flags = rng_below(2) ? PLACEMENT_APPLY : 0;
		struct run r;
		bool exists;

		for (int i = 0; i < ngpus; i++)
			random_layout_n(&g[i], m, 10 + i, 3);
		memcpy(before, g, sizeof(g));
		for (int i = 0; i < nitems; i++) {
			int j = m->nprofiles > 0 ? rng_below(m->nprofiles + 1) - 1 : -1;
			int count = 1 + rng_below(3);

			snprintf(texts_buf[i], sizeof(texts_buf[i]), "%s/%s=%d", m->id,
			    j < 0 ? "full" : m->profiles[j].name, count);
			texts[i] = texts_buf[i];
			for (int k = 0; k < count; k++) {
				units[nunits].m = m;
				units[nunits].p = j < 0 ? NULL : &m->profiles[j];
				units[nunits].item = i;
				nunits++;
			}
		}
		memcpy(scratch, g, sizeof(g));
		exists = oracle_exists(scratch, ngpus, units, nunits, 0, 0);
		assert_memory_equal(scratch, g, sizeof(g));
		find(g, ngpus, texts, nitems, flags, &r);
		assert_false(r.res.search_exhausted);
		if (exists != (r.rc == 0))
			fail_msg("t=%d: oracle %s, engine %s (%s; %s; %s)", t,
			    exists ? "fits" : "does not fit", r.rc == 0 ? "fits" : "does not",
			    texts[0], nitems > 1 ? texts[1] : "", nitems > 2 ? texts[2] : "");
		if (r.rc != 0) {
			int missing = 0;

			assert_int_equal(r.err.status, 409);
			for (int i = 0; i < nitems; i++)
				missing += r.res.missing[i];
			assert_true(missing >= 1);
			assert_memory_equal(g, before, sizeof(g));
			no++;
			continue;
		}
		items_of(texts, nitems, items);
		check_valid(before, ngpus, items, nitems, &r);
		if (flags & PLACEMENT_APPLY) {
			/* the GPUs hold exactly the old layout plus the placements */
			memcpy(scratch, before, sizeof(g));
			for (int i = 0; i < r.res.nplacements; i++)
				oracle_apply(&scratch[r.out[i].gpu], r.out[i].profile,
				    r.out[i].start);
			for (int i = 0; i < ngpus; i++) {
				assert_int_equal(g[i].used_mask, scratch[i].used_mask);
				assert_int_equal(g[i].instances, scratch[i].instances);
				assert_int_equal(g[i].compute_used, scratch[i].compute_used);
				assert_int_equal(g[i].full_used, scratch[i].full_used);
				if (g[i].instances > 0 || g[i].full_used)
					assert_int_equal(g[i].mig_enabled, scratch[i].mig_enabled);
				assert_memory_equal(g[i].profile_count, scratch[i].profile_count,
				    sizeof(g[i].profile_count));
			}
		} else {
			assert_memory_equal(g, before, sizeof(g));
		}
		if (r.res.searched)
			rescued++;
		ok++;
	}
	print_message("random requests: %d placed (%d needed the search), %d refused\n", ok,
	    rescued, no);
	assert_true(ok > 500);
	assert_true(no > 500);
	assert_true(rescued > 0);
}

/* The same GPUs in another array order give the same choices (by GPU id). */
static void
test_determinism(void **state)
{
	(void)state;
	rng_state = 0x5eed0003;
	for (int t = 0; t < 300; t++) {
		const struct gpu_model *m = catalog_model(cat, "H100-80GB");
		struct placement_gpu g[8], h[8];
		static const char *const texts[] = {
			"H100-80GB/3g.40gb=2",
			"H100-80GB/1g.10gb=3",
			"H100-80GB/2g.20gb=2",
		};
		struct run r1, r2, r3;
		int perm[8];

		for (int i = 0; i < 8; i++) {
			random_layout(&g[i], m, 1000 + i);
			perm[i] = i;
		}
		for (int i = 7; i > 0; i--) {
			int j = rng_below(i + 1), x = perm[i];

			perm[i] = perm[j];
			perm[j] = x;
		}
		for (int i = 0; i < 8; i++)
			h[i] = g[perm[i]];
		find(g, 8, texts, 3, 0, &r1);
		find(g, 8, texts, 3, 0, &r3);
		find(h, 8, texts, 3, 0, &r2);
		assert_int_equal(r1.rc, r2.rc);
		assert_int_equal(r1.rc, r3.rc);
		assert_int_equal(r1.res.nplacements, r2.res.nplacements);
		assert_memory_equal(r1.out, r3.out, sizeof(r1.out[0]) * (size_t)r1.res.nplacements);
		for (int i = 0; i < r1.res.nplacements; i++) {
			bool found = false;

			for (int k = 0; k < r2.res.nplacements; k++) {
				found = found ||
				    (r2.out[k].item == r1.out[i].item &&
					h[r2.out[k].gpu].id == g[r1.out[i].gpu].id &&
					r2.out[k].start == r1.out[i].start);
			}
			assert_true(found);
		}
	}
}

/* Many instances over many GPUs: the greedy pass alone fills a fleet. */
static void
test_large_request(void **state)
{
	struct placement_gpu g[MAXG];
	struct spec_count items[2];
	struct placement out[200];
	struct placement_result res;
	struct gp_error err;
	static const char *const texts[] = { "H100-80GB/1g.10gb=90", "H100-80GB/full=2" };

	(void)state;
	for (int i = 0; i < MAXG; i++)
		gpu(&g[i], "H100-80GB", i + 1);
	items_of(texts, 2, items);
	memset(&res, 0, sizeof(res));
	res.placements = out;
	res.cap = 200;
	gp_error_clear(&err);
	assert_int_equal(placement_find(cat, g, MAXG, items, 2, PLACEMENT_APPLY, &res, &err), 0);
	assert_int_equal(res.nplacements, 92);
	assert_false(res.searched);
	/* full took GPUs 0 and 1; the 1g packed 7 per GPU: 90 = 12 x 7 + 6 */
	assert_true(g[0].full_used && g[1].full_used);
	for (int i = 2; i < 14; i++)
		assert_int_equal(g[i].instances, 7);
	assert_int_equal(g[14].instances, 6);
	assert_int_equal(g[15].instances, 0);
	/* two more whole GPUs do not fit, one does */
	items_of(texts + 1, 1, items);
	gp_error_clear(&err);
	assert_int_equal(placement_find(cat, g, MAXG, items, 1, 0, &res, &err), -1);
	assert_int_equal(res.missing[0], 1);
	assert_true(res.searched);
	assert_false(res.search_exhausted);
	items[0].count = 1;
	gp_error_clear(&err);
	assert_int_equal(placement_find(cat, g, MAXG, items, 1, 0, &res, &err), 0);
	assert_int_equal(res.placements[0].gpu, 15);
}

/* ---- preference keys and class selection (placement_select) ---- */

/* g ranks before h by (node_id, index, id). */
static bool
order_before(const struct placement_gpu *g, const struct placement_gpu *h)
{
	if (g->node_id != h->node_id)
		return g->node_id < h->node_id;
	if (g->index != h->index)
		return g->index < h->index;
	return g->id < h->id;
}

/* For thousands of random 8-GPU sets and every profile: a GPU has a
 * preference key exactly when the oracle fits the profile somewhere on
 * it, and the largest key (lowest GPU of equal keys) is the GPU the
 * documented preference ranks first; placement_class_rank agrees. */
static void
test_preference_keys(void **state)
{
	int compared = 0;

	(void)state;
	rng_state = 0x5eed0007;
	for (int t = 0; t < 3000; t++) {
		const struct gpu_model *m = random_model();
		struct placement_gpu g[8];

		for (int i = 0; i < 8; i++)
			random_layout(&g[i], m, 100 + i);
		for (int j = -1; j < m->nprofiles; j++) {
			const struct mig_profile *p = j < 0 ? NULL : &m->profiles[j];
			uint64_t key = 0, best = 0;
			int bg = -1, bs = -1, kg = -1;
			bool exists = oracle_best(g, 8, m, p, &bg, &bs);

			for (int i = 0; i < 8; i++) {
				struct placement_class cl;
				bool fits = false, has;

				for (int s = 0; s < CATALOG_MAX_SLICES; s++)
					fits = fits || oracle_fits(&g[i], p, s);
				has = placement_gpu_preference(&g[i], p, &key);
				assert_int_equal(has, fits);
				memset(&cl, 0, sizeof(cl));
				cl.g = g[i];
				placement_class_rank(&cl);
				assert_int_equal((cl.admits >> (j + 1)) & 1u, has ? 1u : 0u);
				if (!has)
					continue;
				assert_true(cl.pref[j + 1] == key);
				if (kg < 0 || key > best ||
				    (key == best && order_before(&g[i], &g[kg]))) {
					best = key;
					kg = i;
				}
			}
			assert_int_equal(kg, exists ? bg : -1);
			compared += exists;
		}
	}
	assert_true(compared > 10000);
}

#define SEL_MAXG 96
#define SEL_LAYOUTS 5

struct sel_fleet {
	struct placement_gpu g[SEL_MAXG]; /* in (node_id, index, id) order */
	int klass[SEL_MAXG];              /* index into cls */
	int rank[SEL_MAXG];               /* position within its class */
	struct placement_class cls[2 * SEL_LAYOUTS];
	int ncls;
	int n;
};

static int
sel_gpu_cmp(const void *a, const void *b)
{
	const struct placement_gpu *x = a, *y = b;

	if (order_before(x, y))
		return -1;
	return order_before(y, x) ? 1 : 0;
}

/*
 * A fleet of two models whose GPUs share SEL_LAYOUTS random layouts per
 * model (the layout classes), in a random node order.
 */
static void
sel_fleet_build(struct sel_fleet *f, const struct gpu_model *m1, const struct gpu_model *m2)
{
	struct placement_gpu tmpl[2 * SEL_LAYOUTS];
	int counts[2 * SEL_LAYOUTS] = { 0 };

	memset(f, 0, sizeof(*f));
	for (int k = 0; k < 2 * SEL_LAYOUTS; k++)
		random_layout_n(&tmpl[k], k < SEL_LAYOUTS ? m1 : m2, 0, 1 + rng_below(5));
	f->n = 8 + rng_below(SEL_MAXG - 8);
	for (int i = 0; i < f->n; i++) {
		int k = rng_below(4) != 0 ? rng_below(SEL_LAYOUTS)
					  : SEL_LAYOUTS + rng_below(SEL_LAYOUTS);

		f->g[i] = tmpl[k];
		f->g[i].id = 1000 + rng_below(1000) * 100 + i; /* unique */
		f->g[i].node_id = rng_below(f->n / 4 + 1);
		f->g[i].index = rng_below(8);
		f->klass[i] = k; /* the template for now */
	}
	/* sort, carrying each GPU's template along in its (unused) id digits */
	for (int i = 0; i < f->n; i++)
		f->g[i].id = f->g[i].id * 16 + f->klass[i];
	qsort(f->g, (size_t)f->n, sizeof(f->g[0]), sel_gpu_cmp);
	for (int i = 0; i < f->n; i++) {
		int k = (int)(f->g[i].id % 16);

		f->rank[i] = counts[k]++;
		f->klass[i] = k;
	}
	f->ncls = 2 * SEL_LAYOUTS;
	for (int k = 0; k < f->ncls; k++) {
		memset(&f->cls[k], 0, sizeof(f->cls[k]));
		f->cls[k].g = tmpl[k];
		f->cls[k].gpus = counts[k];
		placement_class_rank(&f->cls[k]);
	}
}

/* The GPUs of f that the classes' take selects, in f's order; ids in map. */
static int
sel_subset(const struct sel_fleet *f, struct placement_gpu *out)
{
	int n = 0;

	for (int i = 0; i < f->n; i++) {
		if (f->rank[i] < f->cls[f->klass[i]].take)
			out[n++] = f->g[i];
	}
	return n;
}

/*
 * The GPUs of f that narrow picks select: of each group, the first take
 * GPUs of its classes together, in f's order.
 */
static int
sel_subset_picks(const struct sel_fleet *f, const struct placement_pick *picks, int npicks,
    struct placement_gpu *out)
{
	bool in[SEL_MAXG] = { false };
	int n = 0;

	for (int p = 0; p < npicks;) {
		int q = p, got = 0;

		while (q < npicks && picks[q].group == picks[p].group)
			q++;
		for (int i = 0; i < f->n && got < picks[p].take; i++) {
			for (int k = p; k < q; k++) {
				if (picks[k].cls == f->klass[i]) {
					in[i] = true;
					got++;
					break;
				}
			}
		}
		p = q;
	}
	for (int i = 0; i < f->n; i++) {
		if (in[i])
			out[n++] = f->g[i];
	}
	return n;
}

/* Same outcome: placements equal GPU by GPU (by id), or the same shortfall. */
static void
sel_same(const struct placement_gpu *ga, const struct run *a, const struct placement_gpu *gb,
    const struct run *b, int nitems, int t, const char *what)
{
	if (a->rc != b->rc)
		fail_msg("t=%d %s: %s vs %s", t, what, a->rc == 0 ? "fits" : "short",
		    b->rc == 0 ? "fits" : "short");
	if (a->rc != 0) {
		assert_memory_equal(a->res.missing, b->res.missing, sizeof(int) * (size_t)nitems);
		return;
	}
	assert_int_equal(a->res.nplacements, b->res.nplacements);
	for (int i = 0; i < a->res.nplacements; i++) {
		const struct placement *x = &a->res.placements[i], *y = &b->res.placements[i];

		if (x->item != y->item || ga[x->gpu].id != gb[y->gpu].id || x->start != y->start ||
		    x->profile != y->profile || x->mode_switch != y->mode_switch)
			fail_msg("t=%d %s: placement %d differs: item %d gpu %lld start %d vs "
				 "item %d gpu %lld start %d",
			    t, what, i, x->item, (long long)ga[x->gpu].id, x->start, y->item,
			    (long long)gb[y->gpu].id, y->start);
	}
}

/*
 * Random fleets of alike GPUs and random requests: placing on the GPUs
 * placement_select picks gives the whole fleet's answer. Narrow: when the
 * greedy pass places everything there, exactly the fleet's placements,
 * and it does so whenever the fleet's greedy pass does; wide: the
 * fleet's answer in every case (fits or not, searched or not).
 */
static void
test_select_classes(void **state)
{
	int narrow_ok = 0, narrow_short = 0, narrower = 0, wide_searched = 0, fewer_picked = 0;

	(void)state;
	rng_state = 0x5eed0008;
	for (int t = 0; t < 1500; t++) {
		static struct sel_fleet f;
		static struct placement_gpu sub[SEL_MAXG], before[SEL_MAXG];
		const struct gpu_model *m1 = random_model(), *m2 = random_model();
		char texts_buf[4][SPEC_TEXT_MAX];
		const char *texts[4];
		struct spec_count items[4];
		struct run full, narrow, wide;
		struct gp_error err;
		struct placement_pick picks[4 * 2 * SEL_LAYOUTS];
		int nitems = 1 + rng_below(4), nsub_narrow = 0, nsub, npicks;

		sel_fleet_build(&f, m1, m2);
		for (int i = 0; i < nitems; i++) {
			const struct gpu_model *m = rng_below(3) != 0 ? m1 : m2;
			int j = m->nprofiles > 0 ? rng_below(m->nprofiles + 1) - 1 : -1;

			snprintf(texts_buf[i], sizeof(texts_buf[i]), "%s/%s=%d", m->id,
			    j < 0 ? "full" : m->profiles[j].name, 1 + rng_below(6));
			texts[i] = texts_buf[i];
		}
		items_of(texts, nitems, items);
		memcpy(before, f.g, sizeof(f.g));
		find(f.g, f.n, texts, nitems, 0, &full);
		assert_memory_equal(f.g, before, sizeof(f.g));

		gp_error_clear(&err);
		assert_int_equal(placement_select(cat, items, nitems, f.cls, f.ncls, false, picks,
				     NELEM(picks), &npicks, &err),
		    0);
		assert_true(npicks >= 0);
		/* the classes' takes, then the groups' (never more GPUs) */
		for (int how = 0; how < 2; how++) {
			nsub = how == 0 ? sel_subset(&f, sub)
					: sel_subset_picks(&f, picks, npicks, sub);
			if (how == 0)
				nsub_narrow = nsub;
			else
				assert_true(nsub <= nsub_narrow);
			find(sub, nsub, texts, nitems, PLACEMENT_NO_SEARCH, &narrow);
			assert_false(narrow.res.searched);
			if (narrow.rc == 0) {
				assert_false(full.res.searched);
				sel_same(sub, &narrow, f.g, &full, nitems, t,
				    how ? "picks" : "narrow");
				narrow_ok += how;
			} else {
				assert_int_equal(narrow.err.status, 409);
				/* the fleet's greedy pass fell short too */
				assert_true(full.rc != 0 || full.res.searched);
				narrow_short += how;
			}
			fewer_picked += how && nsub < nsub_narrow;
		}

		gp_error_clear(&err);
		assert_int_equal(placement_select(cat, items, nitems, f.cls, f.ncls, true, picks,
				     NELEM(picks), &npicks, &err),
		    0);
		assert_int_equal(npicks, 0);
		nsub = sel_subset(&f, sub);
		assert_true(nsub >= nsub_narrow);
		narrower += nsub_narrow < nsub;
		find(sub, nsub, texts, nitems, 0, &wide);
		if (full.res.search_exhausted || wide.res.search_exhausted)
			continue;
		sel_same(sub, &wide, f.g, &full, nitems, t, "wide");
		wide_searched += wide.res.searched;
	}
	print_message("select: narrow placed %d, fell short %d, read fewer GPUs than wide %d "
		      "times, fewer by groups %d times; wide searched %d\n",
	    narrow_ok, narrow_short, narrower, fewer_picked, wide_searched);
	assert_true(narrow_ok > 300);
	assert_true(narrow_short > 100);
	assert_true(narrower > 300);
	assert_true(fewer_picked > 100);
	assert_true(wide_searched > 20);
}

/* Validation as placement_find's; take never exceeds the model's instances. */
static void
test_select_limits(void **state)
{
	struct placement_class cls[3];
	struct placement_pick picks[8];
	struct spec_count items[2];
	int npicks;
	const char *texts[2] = { "H100-80GB/1g.10gb=2", "H100-80GB/3g.40gb=1" };
	struct gp_error err;

	(void)state;
	memset(cls, 0, sizeof(cls));
	gpu(&cls[0].g, "H100-80GB", 0); /* empty */
	cls[0].gpus = 50;
	gpu(&cls[1].g, "H100-80GB", 0);
	add(&cls[1].g, "3g.40gb", 0); /* packs: preferred by both */
	cls[1].gpus = 2;
	gpu(&cls[2].g, "A100-40GB", 0); /* another model */
	cls[2].gpus = 9;
	for (int i = 0; i < 3; i++)
		placement_class_rank(&cls[i]);
	items_of(texts, 2, items);
	gp_error_clear(&err);
	assert_int_equal(placement_select(cat, items, 2, cls, 3, false, picks, NELEM(picks),
			     &npicks, &err),
	    0);
	/* the 3g goes first and needs one GPU; the 1g.10gb come after it, 3
	 * instances: the two busy GPUs are not enough, and of the empty ones
	 * the greedy pass can reach only the first */
	assert_int_equal(cls[0].take, 1);
	assert_int_equal(cls[1].take, 2);
	assert_int_equal(cls[2].take, 0);
	/* groups, by item: the 1g's (the busy class: 3; the empty one: 1), the 3g's (1) */
	assert_int_equal(npicks, 3);
	assert_int_equal(picks[0].cls, 1);
	assert_int_equal(picks[0].take, 3);
	assert_int_equal(picks[1].cls, 0);
	assert_int_equal(picks[1].take, 1);
	assert_int_equal(picks[2].cls, 1);
	assert_int_equal(picks[2].take, 1);
	assert_true(picks[0].group != picks[1].group && picks[1].group != picks[2].group);
	/* no room for the groups: the takes alone */
	assert_int_equal(placement_select(cat, items, 2, cls, 3, false, picks, 2, &npicks, &err),
	    0);
	assert_int_equal(npicks, -1);
	assert_int_equal(cls[0].take, 1);
	assert_int_equal(cls[1].take, 2);
	cls[1].gpus = 5;
	assert_int_equal(placement_select(cat, items, 2, cls, 3, false, picks, NELEM(picks),
			     &npicks, &err),
	    0);
	assert_int_equal(cls[0].take, 0);
	assert_int_equal(cls[1].take, 3);
	/* the 3g alone: one busy GPU */
	assert_int_equal(placement_select(cat, items + 1, 1, cls, 3, false, picks, NELEM(picks),
			     &npicks, &err),
	    0);
	assert_int_equal(cls[0].take, 0);
	assert_int_equal(cls[1].take, 1);
	gp_error_clear(&err);
	assert_int_equal(placement_select(cat, items, 2, cls, 3, true, picks, NELEM(picks), &npicks,
			     &err),
	    0);
	assert_int_equal(cls[0].take, 3);
	assert_int_equal(cls[1].take, 3);
	assert_int_equal(cls[2].take, 0);
	/* a bad item: 422 naming it */
	snprintf(items[1].profile, sizeof(items[1].profile), "9g.99gb");
	gp_error_clear(&err);
	assert_int_equal(placement_select(cat, items, 2, cls, 3, false, picks, NELEM(picks),
			     &npicks, &err),
	    -1);
	assert_int_equal(err.status, 422);
	assert_string_equal(err.fields[0].field, "items[1].profile");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_every_profile_every_start),
		cmocka_unit_test(test_full_every_model),
		cmocka_unit_test(test_full_rules),
		cmocka_unit_test(test_non_mig_model),
		cmocka_unit_test(test_max_instances),
		cmocka_unit_test(test_compute_limit),
		cmocka_unit_test(test_overlap),
		cmocka_unit_test(test_fact_two_3g_plus_1g),
		cmocka_unit_test(test_fact_3g_2g_2g),
		cmocka_unit_test(test_fact_4g_3g_7x1g_2x3g),
		cmocka_unit_test(test_fact_1g_blocks_3g),
		cmocka_unit_test(test_fact_slice_7),
		cmocka_unit_test(test_stranded),
		cmocka_unit_test(test_headroom),
		cmocka_unit_test(test_capacity_sum),
		cmocka_unit_test(test_prefer_packing),
		cmocka_unit_test(test_prefer_future_run),
		cmocka_unit_test(test_prefer_lowest_id),
		cmocka_unit_test(test_larger_first),
		cmocka_unit_test(test_search_fallback),
		cmocka_unit_test(test_search_proves_none),
		cmocka_unit_test(test_request_errors),
		cmocka_unit_test(test_all_or_nothing),
		cmocka_unit_test(test_random_single),
		cmocka_unit_test(test_random_requests),
		cmocka_unit_test(test_determinism),
		cmocka_unit_test(test_large_request),
		cmocka_unit_test(test_preference_keys),
		cmocka_unit_test(test_select_classes),
		cmocka_unit_test(test_select_limits),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
