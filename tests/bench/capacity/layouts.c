/*
 * layouts.c - every valid MIG layout of every MIG-capable catalog
 * model, for the synthetic fleet of scripts/bench-capacity.
 *
 * A layout is a set of instances (profile, start) that the placement
 * engine accepts on one GPU: catalog starts, no overlap, max_instances
 * and compute slices respected (placement_gpu_add is the judge, so the
 * fleet holds only layouts gpupoold itself would build). Instances are
 * enumerated in start order, so each set is printed once. Output, one
 * instance a line, tab-separated, for COPY ... FROM STDIN:
 *
 *   model  layout  profile  start  size
 *
 * layout numbers run from 1 per model; the empty GPU is not listed.
 *
 *   bench_capacity_layouts [MODEL ...]     (default: every MIG model)
 */
#include <stdio.h>
#include <string.h>

#include "domain/catalog.h"
#include "domain/placement.h"

struct chosen {
	const struct mig_profile *p;
	int start;
};

static long layouts_printed;

static void
layouts_emit(const struct gpu_model *m, long id, const struct chosen *c, int n)
{
	for (int i = 0; i < n; i++)
		printf("%s\t%ld\t%s\t%d\t%d\n", m->id, id, c[i].p->name, c[i].start,
		    c[i].p->memory_slices);
}

/* Extend the layout in c[0..n) with instances starting at from or later. */
static void
layouts_walk(const struct gpu_model *m, struct placement_gpu *g, struct chosen *c, int n, int from,
    long *id)
{
	for (int start = from; start < m->memory_slices; start++) {
		for (int i = 0; i < m->nprofiles; i++) {
			const struct mig_profile *p = &m->profiles[i];
			struct gp_error err;

			if (!catalog_profile_allows(p, start) || !placement_gpu_fits(g, p, start))
				continue;
			if (placement_gpu_add(g, p, start, &err) < 0)
				continue;
			c[n].p = p;
			c[n].start = start;
			layouts_emit(m, ++*id, c, n + 1);
			layouts_walk(m, g, c, n + 1, start + p->memory_slices, id);
			if (placement_gpu_remove(g, p, start, &err) < 0) {
				fprintf(stderr, "bench_capacity_layouts: %s\n", err.message);
				return;
			}
		}
	}
}

static void
layouts_model(const struct gpu_model *m)
{
	struct chosen c[CATALOG_MAX_SLICES];
	struct placement_gpu g;
	long id = 0;

	placement_gpu_init(&g, m, 1, 1, 0, true);
	layouts_walk(m, &g, c, 0, 0, &id);
	fprintf(stderr, "%s: %ld layouts\n", m->id, id);
	layouts_printed += id;
}

int
main(int argc, char **argv)
{
	struct catalog *cat = NULL;
	struct gp_error err;

	gp_error_clear(&err);
	if (catalog_load_builtin(&cat, &err) < 0) {
		fprintf(stderr, "bench_capacity_layouts: could not load the catalog: %s\n",
		    err.message);
		return 1;
	}
	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			const struct gpu_model *m = catalog_model(cat, argv[i]);

			if (m == NULL || !m->mig_capable) {
				fprintf(stderr, "bench_capacity_layouts: no MIG model %s\n",
				    argv[i]);
				catalog_free(cat);
				return 2;
			}
			layouts_model(m);
		}
	} else {
		for (int i = 0; i < catalog_nmodels(cat); i++) {
			const struct gpu_model *m = catalog_model_at(cat, i);

			if (m->mig_capable)
				layouts_model(m);
		}
	}
	catalog_free(cat);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "bench_capacity_layouts: could not write the output\n");
		return 1;
	}
	return layouts_printed > 0 ? 0 : 1;
}
