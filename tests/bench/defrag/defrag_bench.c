/*
 * defrag_bench.c - how long the defragmentation planner takes on a large
 * fragmented fleet (issue 25: 1 % moves on 80,000 GPUs in < 2 s p99).
 *
 * The fleet: GPUS H100-80GB in 10 clusters, filled by random MIG
 * instances to about 80 % of their slices, then a third of the instances
 * released (churn: the holes are scattered); 40 % of the live instances
 * are idle (movable). Each round, interleaved so that a noisy machine
 * skews both alike, times:
 *  - baseline A: the placement engine's full-fleet capacity scan
 *    (placement_capacity: headroom and stranded slices of every GPU);
 *  - baseline B: placement_find of the goal request on the whole fleet
 *    (refused: the greedy pass and the exact search);
 *  - subject 1: defrag_plan for "H100-80GB/7g.80gb=N" with moves <= 1 %
 *    of the instances;
 *  - subject 2: defrag_plan maximising free GPUs, same limit.
 * and prints p50 / p99 of each with the ratio to baseline A.
 *
 *   bench_defrag [gpus] [rounds] [items]
 *
 * items 0 (the default): the fleet's empty GPUs + a quarter of the move
 * limit (at most SPEC_COUNT_MAX), so that the request is refused as it stands and the planner must free GPUs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "domain/catalog.h"
#include "domain/defrag.h"
#include "domain/placement.h"
#include "domain/spec.h"

static uint64_t rng = 0x64656672616721ULL;

static unsigned
rnd(unsigned n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)(rng >> 33) % n;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int
dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
pct(double *v, int n, double *p50, double *p99)
{
	int i99 = (int)(0.99 * (n - 1) + 0.999);

	qsort(v, (size_t)n, sizeof(*v), dcmp);
	*p50 = v[(n - 1) / 2];
	*p99 = v[i99 < n ? i99 : n - 1];
}

int
main(int argc, char **argv)
{
	int ngpus = argc > 1 ? atoi(argv[1]) : 80000;
	int rounds = argc > 2 ? atoi(argv[2]) : 11;
	int nwant = argc > 3 ? atoi(argv[3]) : 0; /* 0: empty GPUs + a quarter of the moves */
	static const char *mix[] = { "1g.10gb", "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb",
		"4g.40gb" };
	struct catalog *cat;
	struct gp_error err;
	const struct gpu_model *m;
	struct placement_gpu *g;
	int64_t *group;
	struct defrag_instance *in;
	int ni = 0;
	double *t[4];
	const char *names[4] = { "baseline A: full-fleet capacity scan",
		"baseline B: placement_find (refused)", "plan: 7g.80gb items, <=1% moves",
		"plan: free GPUs, <=1% moves" };
	struct placement *buf;
	int moves_items = 0, moves_free = 0, freed = 0;
	bool after = false;

	if (ngpus < 1 || rounds < 1 || nwant < 0) {
		fprintf(stderr, "usage: bench_defrag [gpus] [rounds] [items]\n");
		return 2;
	}
	if (catalog_load_builtin(&cat, &err) < 0) {
		fprintf(stderr, "catalog: %s\n", err.message);
		return 1;
	}
	m = catalog_model(cat, "H100-80GB");
	g = calloc((size_t)ngpus, sizeof(*g));
	group = calloc((size_t)ngpus, sizeof(*group));
	in = calloc((size_t)ngpus * 8, sizeof(*in));
	for (int i = 0; i < 4; i++)
		t[i] = calloc((size_t)rounds, sizeof(double));
	for (int i = 0; i < ngpus; i++) {
		placement_gpu_init(&g[i], m, i + 1, 1 + i / 8, i % 8, true);
		group[i] = i / (ngpus / 10 + 1);
	}
	/* fill to about 80 % of the slices, then release a third */
	for (long k = 0; k < (long)ngpus * 12; k++) {
		const struct mig_profile *p = catalog_profile(m, mix[rnd(6)]);
		int gi = (int)rnd((unsigned)ngpus);
		int start = p->placements[rnd((unsigned)p->nplacements)];

		if (placement_gpu_fits(&g[gi], p, start) &&
		    __builtin_popcount(g[gi].used_mask) + p->memory_slices <= 7 &&
		    placement_gpu_add(&g[gi], p, start, &err) == 0)
			in[ni++] = (struct defrag_instance){ .id = ni + 1,
				.gpu = gi,
				.profile = p,
				.start = start,
				.tenant = 1 + rnd(500),
				.movable = false };
	}
	for (int k = 0; k < ni; k++) {
		if (rnd(3) != 0)
			continue;
		if (placement_gpu_remove(&g[in[k].gpu], in[k].profile, in[k].start, &err) < 0)
			return 1;
		in[k] = in[--ni];
		k--;
	}
	for (int k = 0; k < ni; k++)
		in[k].movable = rnd(10) < 4;
	{
		struct placement_capacity cap;
		int empty = 0;

		placement_capacity(m, g, ngpus, &cap);
		for (int i = 0; i < ngpus; i++)
			empty += g[i].used_mask == 0;
		if (nwant == 0)
			nwant = empty + ni / 400;
		if (nwant > SPEC_COUNT_MAX)
			nwant = SPEC_COUNT_MAX;
		buf = calloc((size_t)nwant, sizeof(*buf));
		printf("fleet: %d x %s, %d instances (%d%% idle), %d empty GPUs, 7g.80gb headroom "
		       "%d, stranded compute %d\n",
		    ngpus, m->id, ni, 40, empty, cap.headroom[m->nprofiles - 1],
		    cap.compute_stranded);
	}
	for (int r = 0; r < rounds; r++) {
		struct defrag_fleet f = { .gpus = g,
			.group = group,
			.ngpus = ngpus,
			.insts = in,
			.ninsts = ni };
		struct spec_count sc = { .count = nwant };
		struct defrag_goal gi, gf;
		struct placement_capacity cap;
		struct placement_result res = { .placements = buf, .cap = nwant };
		struct defrag_plan plan;
		double t0;

		snprintf(sc.model, sizeof(sc.model), "H100-80GB");
		snprintf(sc.profile, sizeof(sc.profile), "7g.80gb");
		gi = (struct defrag_goal){ .kind = DEFRAG_GOAL_ITEMS,
			.items = &sc,
			.nitems = 1,
			.max_moves = ni / 100 };
		gf = (struct defrag_goal){ .kind = DEFRAG_GOAL_FREE_GPUS, .max_moves = ni / 100 };

		t0 = now_s();
		placement_capacity(m, g, ngpus, &cap);
		t[0][r] = now_s() - t0;
		t0 = now_s();
		(void)!placement_find(cat, g, ngpus, &sc, 1, 0, &res, &err);
		t[1][r] = now_s() - t0;
		t0 = now_s();
		if (defrag_plan(cat, &f, &gi, &plan, &err) < 0) {
			fprintf(stderr, "plan: %s\n", err.message);
			return 1;
		}
		t[2][r] = now_s() - t0;
		moves_items = plan.nmoves;
		after = plan.placeable_after;
		defrag_plan_free(&plan);
		t0 = now_s();
		if (defrag_plan(cat, &f, &gf, &plan, &err) < 0) {
			fprintf(stderr, "plan: %s\n", err.message);
			return 1;
		}
		t[3][r] = now_s() - t0;
		moves_free = plan.nmoves;
		freed = plan.free_gpus_after - plan.free_gpus_before;
		defrag_plan_free(&plan);
	}
	printf("goal 7g.80gb=%d: %d moves (limit %d), placeable after: %s; free-GPU goal: %d "
	       "moves, +%d empty GPUs\n",
	    nwant, moves_items, ni / 100, after ? "yes" : "no", moves_free, freed);
	{
		double b50, b99;

		for (int i = 0; i < 4; i++) {
			double p50, p99;

			pct(t[i], rounds, &p50, &p99);
			if (i == 0) {
				b50 = p50;
				b99 = p99;
			}
			printf("%-40s p50 %8.1f ms  p99 %8.1f ms  (x%.2f / x%.2f of baseline A)\n",
			    names[i], p50 * 1e3, p99 * 1e3, p50 / b50, p99 / b99);
		}
	}
	printf("target: planning p99 < 2000 ms\n");
	catalog_free(cat);
	return 0;
}
