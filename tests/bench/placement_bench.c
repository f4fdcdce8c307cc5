/*
 * placement_bench.c - throughput of the placement engine.
 *
 * One node's 8 H100-80GB GPUs with random MIG layouts (a seeded PRNG,
 * so runs compare); each call places one item. Prints decisions per
 * second for single instances, for multi-item requests, for requests
 * that do not fit (those also run the exact search) and for requests cut
 * to the node's remaining capacity, the search's worst case, with the
 * slowest call. Not a test: run it by hand, optionally with an iteration
 * count. Times are the thread's CPU time, so a busy machine skews them less.
 *
 *   bench_placement [iterations]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "domain/catalog.h"
#include "domain/placement.h"
#include "domain/spec.h"

#define NODE_GPUS 8
#define LAYOUTS 4096

static uint64_t rng_state = 0x6270756c6163ULL;

static uint64_t
rng_next(void)
{
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

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A random but legal layout: a few random instances per GPU, some empty. */
static void
bench_layout(struct placement_gpu *g, const struct gpu_model *m, int i)
{
	int adds = rng_below(6);

	placement_gpu_init(g, m, 1000 + i, 1, i, true);
	for (int k = 0; k < adds; k++) {
		const struct mig_profile *p = &m->profiles[rng_below(m->nprofiles)];
		struct gp_error err;

		if (placement_gpu_add(g, p, p->placements[rng_below(p->nplacements)], &err) < 0)
			continue;
	}
}

struct figure {
	long calls;
	long placed;
	double seconds;
};

static void
bench_run(const struct catalog *c, struct placement_gpu (*layouts)[NODE_GPUS],
    const struct spec_count *items, int nkinds, int nitems, long iterations, struct figure *f)
{
	struct placement out[64];
	struct placement_result res;
	struct gp_error err;
	double t0;

	memset(f, 0, sizeof(*f));
	memset(&res, 0, sizeof(res));
	res.placements = out;
	res.cap = 64;
	t0 = now_s();
	for (long it = 0; it < iterations; it++) {
		struct placement_gpu *g = layouts[it % LAYOUTS];
		const struct spec_count *req = &items[(it / LAYOUTS + it) % nkinds * nitems];

		if (placement_find(c, g, NODE_GPUS, req, nitems, 0, &res, &err) == 0)
			f->placed++;
		f->calls++;
	}
	f->seconds = now_s() - t0;
}

/*
 * Requests sized to what each layout could still take: up to three
 * profiles, each asking about its share of the summed headroom. Reports
 * the slowest call in CPU time.
 */
static void
bench_near_capacity(const struct catalog *c, const struct gpu_model *m,
    struct placement_gpu (*layouts)[NODE_GPUS], int calls, struct figure *f, double *slowest,
    int *exhausted)
{
	struct placement out[256];
	struct placement_result res;
	struct gp_error err;

	memset(f, 0, sizeof(*f));
	memset(&res, 0, sizeof(res));
	res.placements = out;
	res.cap = 256;
	*slowest = 0;
	*exhausted = 0;
	for (int it = 0; it < calls; it++) {
		struct placement_gpu *g = layouts[it % LAYOUTS];
		struct placement_capacity cap;
		struct spec_count items[3];
		int nitems = 1 + rng_below(3);
		struct timespec a, b;
		double dt;

		placement_capacity(m, g, NODE_GPUS, &cap);
		for (int i = 0; i < nitems; i++) {
			int j = rng_below(m->nprofiles);
			int n = cap.headroom[j] / nitems + rng_below(3);

			if (spec_set(&items[i], m->id, m->profiles[j].name, n > 0 ? n : 1, "",
				&err) < 0)
				return;
		}
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
		if (placement_find(c, g, NODE_GPUS, items, nitems, 0, &res, &err) == 0)
			f->placed++;
		clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
		dt = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
		f->seconds += dt;
		if (dt > *slowest)
			*slowest = dt;
		*exhausted += res.search_exhausted;
		f->calls++;
	}
}

static void
bench_print(const char *what, const struct figure *f)
{
	printf("%-44s %10.0f calls/s  %6.1f%% placed  (%ld calls, %.3f s, %.0f ns/call)\n", what,
	    (double)f->calls / f->seconds, 100.0 * (double)f->placed / (double)f->calls, f->calls,
	    f->seconds, 1e9 * f->seconds / (double)f->calls);
}

int
main(int argc, char **argv)
{
	static struct placement_gpu layouts[LAYOUTS][NODE_GPUS];
	static struct placement_gpu empty[LAYOUTS][NODE_GPUS];
	struct spec_count singles[8], multi[3], big[2];
	struct catalog *c = NULL;
	const struct gpu_model *m;
	struct gp_error err;
	struct figure f;
	long iterations = 2000000;
	int nsingles = 0;

	if (argc > 1) {
		char *end;

		iterations = strtol(argv[1], &end, 10);
		if (*end != '\0' || iterations < 1) {
			fprintf(stderr, "usage: bench_placement [iterations]\n");
			return 2;
		}
	}
	gp_error_clear(&err);
	if (catalog_load_builtin(&c, &err) < 0) {
		fprintf(stderr, "could not load the gpu catalog: %s\n", err.message);
		return 1;
	}
	m = catalog_model(c, "H100-80GB");
	for (int i = 0; i < LAYOUTS; i++) {
		for (int j = 0; j < NODE_GPUS; j++) {
			bench_layout(&layouts[i][j], m, j);
			placement_gpu_init(&empty[i][j], m, 1000 + j, 1, j, true);
		}
	}
	for (int j = 0; j < m->nprofiles; j++) {
		if (spec_set(&singles[nsingles++], m->id, m->profiles[j].name, 1, "", &err) < 0)
			return 1;
	}
	if (spec_set(&singles[nsingles++], m->id, SPEC_FULL, 1, "", &err) < 0 ||
	    spec_set(&multi[0], m->id, "3g.40gb", 2, "", &err) < 0 ||
	    spec_set(&multi[1], m->id, "2g.20gb", 2, "", &err) < 0 ||
	    spec_set(&multi[2], m->id, "1g.10gb", 3, "", &err) < 0 ||
	    spec_set(&big[0], m->id, "3g.40gb", 9, "", &err) < 0 ||
	    spec_set(&big[1], m->id, "1g.10gb", 9, "", &err) < 0)
		return 1;

	printf("placement engine, one node of %d x %s, %d random layouts\n", NODE_GPUS, m->id,
	    LAYOUTS);
	bench_run(c, layouts, singles, nsingles, 1, iterations, &f);
	bench_print("single instance, random layouts:", &f);
	printf("  => %.0f placements/s\n", (double)f.placed / f.seconds);
	bench_run(c, empty, singles, nsingles, 1, iterations, &f);
	bench_print("single instance, empty node:", &f);
	bench_run(c, layouts, multi, 1, 3, iterations / 4, &f);
	bench_print("3 items (2x3g, 2x2g, 3x1g), random layouts:", &f);
	bench_run(c, layouts, big, 1, 2, iterations / 20, &f);
	bench_print("too big (9x3g, 9x1g): greedy + search:", &f);
	{
		double slowest;
		int exhausted;

		bench_near_capacity(c, m, layouts, 4000, &f, &slowest, &exhausted);
		bench_print("near capacity (1-3 profiles ~ headroom):", &f);
		printf("  slowest call %.2f ms CPU, %d of %ld stopped at the search budget\n",
		    slowest * 1e3, exhausted, f.calls);
	}
	catalog_free(c);
	return 0;
}
