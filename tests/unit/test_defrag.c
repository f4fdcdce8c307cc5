/*
 * test_defrag.c - the defragmentation planner: fragmented fleets it must
 * repair, instances it must never move, and a randomized property check
 * replaying every plan move by move on the placement engine's rules.
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
#include "domain/defrag.h"
#include "domain/placement.h"
#include "unit_catalog.h"

#define MAXG 256
#define MAXI (MAXG * 8)

struct fleet {
	struct placement_gpu g[MAXG];
	int64_t group[MAXG];
	int ng;
	struct defrag_instance in[MAXI];
	int ni;
};

static const struct catalog *cat;

static const struct gpu_model *
h100(void)
{
	return catalog_model(cat, "H100-80GB");
}

static void
fleet_init(struct fleet *f, int ngpus)
{
	memset(f, 0, sizeof(*f));
	f->ng = ngpus;
	for (int i = 0; i < ngpus; i++)
		placement_gpu_init(&f->g[i], h100(), 100 + i, 1 + i / 8, i % 8, true);
}

static void
put(struct fleet *f, int gpu, const char *profile, int start, bool movable, int64_t tenant)
{
	const struct mig_profile *p = catalog_profile(h100(), profile);
	struct gp_error err;

	assert_non_null(p);
	assert_int_equal(placement_gpu_add(&f->g[gpu], p, start, &err), 0);
	f->in[f->ni] = (struct defrag_instance){ .id = 1000 + f->ni,
		.gpu = gpu,
		.profile = p,
		.start = start,
		.tenant = tenant,
		.movable = movable };
	f->ni++;
}

static struct defrag_fleet
view(struct fleet *f)
{
	return (struct defrag_fleet){ .gpus = f->g,
		.group = f->group,
		.ngpus = f->ng,
		.insts = f->in,
		.ninsts = f->ni };
}

/*
 * Replay plan's moves on f in order, each by its own rule (make before
 * break: add then remove; else remove then add), every step checked by
 * the engine's placement_gpu_add; then compare with plan->after.
 */
static void
replay(struct fleet *f, const struct defrag_plan *plan)
{
	static struct placement_gpu g[MAXG];
	static int at_gpu[MAXI], at_start[MAXI];
	static bool moved[MAXI];
	struct gp_error err;

	memcpy(g, f->g, sizeof(g));
	for (int i = 0; i < f->ni; i++) {
		at_gpu[i] = f->in[i].gpu;
		at_start[i] = f->in[i].start;
		moved[i] = false;
	}
	for (int k = 0; k < plan->nmoves; k++) {
		const struct defrag_move *mv = &plan->moves[k];
		const struct defrag_instance *in = &f->in[mv->inst];

		assert_true(in->movable);
		assert_non_null(in->profile);
		assert_false(moved[mv->inst]);
		moved[mv->inst] = true;
		assert_int_equal(mv->from_gpu, at_gpu[mv->inst]);
		assert_int_equal(mv->from_start, at_start[mv->inst]);
		assert_ptr_equal(g[mv->to_gpu].model, g[mv->from_gpu].model);
		assert_true(f->group[mv->to_gpu] == f->group[mv->from_gpu]);
		if (mv->make_before_break) {
			assert_int_equal(placement_gpu_add(&g[mv->to_gpu], in->profile,
					     mv->to_start, &err),
			    0);
			assert_int_equal(placement_gpu_remove(&g[mv->from_gpu], in->profile,
					     mv->from_start, &err),
			    0);
		} else {
			assert_int_equal(placement_gpu_remove(&g[mv->from_gpu], in->profile,
					     mv->from_start, &err),
			    0);
			assert_int_equal(placement_gpu_add(&g[mv->to_gpu], in->profile,
					     mv->to_start, &err),
			    0);
		}
		at_gpu[mv->inst] = mv->to_gpu;
		at_start[mv->inst] = mv->to_start;
	}
	assert_int_equal(plan->ngpus, f->ng);
	for (int i = 0; i < f->ng; i++) {
		assert_int_equal(g[i].used_mask, plan->after[i].used_mask);
		assert_int_equal(g[i].instances, plan->after[i].instances);
		assert_int_equal(g[i].compute_used, plan->after[i].compute_used);
	}
}

static bool
fits(struct fleet *f, struct placement_gpu *g, const char *item)
{
	struct spec_count sc;
	struct placement pl[64];
	struct placement_result res = { .placements = pl, .cap = 64 };
	struct gp_error err;
	char buf[64];
	char *slash, *eq;

	snprintf(buf, sizeof(buf), "%s", item);
	slash = strchr(buf, '/');
	eq = strchr(buf, '=');
	*slash = '\0';
	*eq = '\0';
	sc = unit_spec(buf, slash + 1, atoi(eq + 1));
	return placement_find(cat, g, f->ng, &sc, 1, 0, &res, &err) == 0;
}

static void
plan_items(struct fleet *f, const char *profile, int count, int max_moves, struct defrag_plan *plan)
{
	struct spec_count sc = unit_spec("H100-80GB", profile, count);
	struct defrag_goal goal = { .kind = DEFRAG_GOAL_ITEMS,
		.items = &sc,
		.nitems = 1,
		.max_moves = max_moves };
	struct defrag_fleet v = view(f);
	struct gp_error err;

	assert_int_equal(defrag_plan(cat, &v, &goal, plan, &err), 0);
	replay(f, plan);
}

/* Four GPUs each holding one idle 1g: a 7g fits after moves, none before. */
static void
test_scattered_small_instances(void **state)
{
	static struct fleet f;
	struct defrag_plan plan;

	(void)state;
	fleet_init(&f, 4);
	for (int i = 0; i < 4; i++)
		put(&f, i, "1g.10gb", 3, true, 7 + i % 2);
	assert_false(fits(&f, f.g, "H100-80GB/7g.80gb=1"));
	plan_items(&f, "7g.80gb", 2, 100, &plan);
	assert_false(plan.placeable_before);
	assert_true(plan.placeable_after);
	assert_false(plan.item_before[0]);
	assert_true(plan.item_after[0]);
	assert_int_equal(plan.nmoves, 2); /* two GPUs emptied, one move each */
	assert_true(fits(&f, plan.after, "H100-80GB/7g.80gb=2"));
	assert_int_equal(plan.free_gpus_before, 0);
	assert_int_equal(plan.free_gpus_after, 2);
	assert_int_equal(plan.ntenants, 2);
	assert_int_equal(plan.tenants[0], 7);
	assert_int_equal(plan.tenants[1], 8);
	defrag_plan_free(&plan);
}

/* Busy instances stay; the idle one moves onto the busy one's GPU. */
static void
test_busy_never_moves(void **state)
{
	static struct fleet f;
	struct defrag_plan plan;

	(void)state;
	fleet_init(&f, 2);
	put(&f, 0, "3g.40gb", 4, false, 1);
	put(&f, 1, "2g.20gb", 0, true, 2);
	plan_items(&f, "7g.80gb", 1, 10, &plan);
	assert_true(plan.placeable_after);
	assert_int_equal(plan.nmoves, 1);
	assert_int_equal(plan.moves[0].inst, 1);
	assert_int_equal(plan.moves[0].from_gpu, 1);
	assert_int_equal(plan.moves[0].to_gpu, 0);
	assert_true(plan.moves[0].to_start == 0 || plan.moves[0].to_start == 2);
	assert_true(plan.moves[0].make_before_break);
	defrag_plan_free(&plan);

	/* both busy: nothing moves, still not placeable */
	f.in[1].movable = false;
	plan_items(&f, "7g.80gb", 1, 10, &plan);
	assert_int_equal(plan.nmoves, 0);
	assert_false(plan.placeable_after);
	defrag_plan_free(&plan);
}

/* A 3g held up by a 1g in the middle of its run moves within its own GPU. */
static void
test_move_within_gpu(void **state)
{
	static struct fleet f;
	struct defrag_plan plan;

	(void)state;
	fleet_init(&f, 1);
	put(&f, 0, "3g.40gb", 0, false, 1);
	put(&f, 0, "1g.10gb", 5, true, 2);
	assert_false(fits(&f, f.g, "H100-80GB/3g.40gb=1"));
	plan_items(&f, "3g.40gb", 1, 1, &plan);
	/* 1g.10gb starts at 0..6 only, all inside 3g's runs: no room anywhere */
	assert_false(plan.placeable_after);
	assert_int_equal(plan.nmoves, 0);
	defrag_plan_free(&plan);

	fleet_init(&f, 1);
	put(&f, 0, "4g.40gb", 0, false, 1);
	put(&f, 0, "1g.10gb", 5, true, 2);
	assert_false(fits(&f, f.g, "H100-80GB/2g.20gb=1"));
	plan_items(&f, "2g.20gb", 1, 1, &plan);
	assert_true(plan.placeable_after);
	assert_int_equal(plan.nmoves, 1);
	assert_int_equal(plan.moves[0].to_gpu, 0);
	assert_true(plan.moves[0].to_start == 6);
	assert_false(plan.moves[0].make_before_break);
	defrag_plan_free(&plan);
}

/* The move limit is honoured and reported. */
static void
test_move_limit(void **state)
{
	static struct fleet f;
	struct defrag_plan plan;

	(void)state;
	fleet_init(&f, 2);
	put(&f, 0, "1g.10gb", 0, true, 1);
	put(&f, 0, "1g.10gb", 1, true, 1);
	put(&f, 1, "1g.10gb", 0, true, 1);
	plan_items(&f, "7g.80gb", 1, 0, &plan);
	assert_int_equal(plan.nmoves, 0);
	assert_true(plan.moves_exhausted);
	assert_false(plan.placeable_after);
	defrag_plan_free(&plan);
	plan_items(&f, "7g.80gb", 1, 1, &plan);
	assert_int_equal(plan.nmoves, 1); /* GPU 1's one instance, not GPU 0's two */
	assert_int_equal(plan.moves[0].from_gpu, 1);
	assert_true(plan.placeable_after);
	defrag_plan_free(&plan);
}

/* A whole-GPU request: a GPU is emptied, the MIG modes are left as they were. */
static void
test_full_gpu(void **state)
{
	static struct fleet f;
	struct defrag_plan plan;

	(void)state;
	fleet_init(&f, 3);
	put(&f, 0, "3g.40gb", 0, false, 1);
	put(&f, 1, "1g.10gb", 2, true, 2);
	put(&f, 1, "1g.10gb", 6, true, 2);
	put(&f, 2, "2g.20gb", 4, false, 3);
	assert_false(fits(&f, f.g, "H100-80GB/full=1"));
	plan_items(&f, "full", 1, 5, &plan);
	assert_false(plan.placeable_before);
	assert_true(plan.placeable_after);
	assert_int_equal(plan.nmoves, 2);
	for (int i = 0; i < plan.nmoves; i++)
		assert_int_equal(plan.moves[i].from_gpu, 1);
	assert_true(fits(&f, plan.after, "H100-80GB/full=1"));
	for (int i = 0; i < f.ng; i++)
		assert_true(plan.after[i].mig_enabled); /* the reservation's switch undone */
	defrag_plan_free(&plan);
}

/* Moves stay in their group (cluster). */
static void
test_groups(void **state)
{
	static struct fleet f;
	struct defrag_plan plan;

	(void)state;
	fleet_init(&f, 2);
	f.group[1] = 1;
	put(&f, 0, "1g.10gb", 0, true, 1);
	put(&f, 1, "1g.10gb", 0, true, 1);
	plan_items(&f, "7g.80gb", 1, 5, &plan);
	assert_int_equal(plan.nmoves, 0);
	assert_false(plan.placeable_after);
	defrag_plan_free(&plan);
}

/* Maximise free GPUs: eight GPUs with one 1g each pack onto fewer. */
static void
test_free_gpus(void **state)
{
	static struct fleet f;
	struct defrag_plan plan;
	struct defrag_goal goal = { .kind = DEFRAG_GOAL_FREE_GPUS, .max_moves = 100 };
	struct defrag_fleet v;
	struct gp_error err;

	(void)state;
	fleet_init(&f, 8);
	for (int i = 0; i < 8; i++)
		put(&f, i, "1g.10gb", i % 7, true, 1);
	v = view(&f);
	assert_int_equal(defrag_plan(cat, &v, &goal, &plan, &err), 0);
	replay(&f, &plan);
	assert_int_equal(plan.free_gpus_before, 0);
	assert_int_equal(plan.free_gpus_after, 6); /* 7 per GPU at most */
	assert_int_equal(plan.nmoves, 6);
	defrag_plan_free(&plan);
}

static void
test_bad_input(void **state)
{
	static struct fleet f;
	struct defrag_plan plan;
	struct spec_count sc = unit_spec("H100-80GB", "9g.90gb", 1);
	struct defrag_goal goal = { .kind = DEFRAG_GOAL_ITEMS, .items = &sc, .nitems = 1 };
	struct defrag_fleet v;
	struct gp_error err;

	(void)state;
	fleet_init(&f, 1);
	v = view(&f);
	gp_error_clear(&err);
	assert_int_equal(defrag_plan(cat, &v, &goal, &plan, &err), -1);
	assert_int_equal(err.status, 422);
	gp_error_clear(&err);
	/* overlapping instances: the layout cannot be rebuilt */
	put(&f, 0, "1g.10gb", 0, true, 1);
	f.in[f.ni] = f.in[0];
	f.ni++;
	sc = unit_spec("H100-80GB", "1g.10gb", 1);
	v = view(&f);
	assert_int_equal(defrag_plan(cat, &v, &goal, &plan, &err), -1);
	assert_int_equal(err.status, 409);
}

static uint64_t rng = 42;

static unsigned
rnd(unsigned n)
{
	rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
	return (unsigned)(rng >> 33) % n;
}

/* Random fleets and goals: every plan replays, keeps the rules, moves only movable ones. */
static void
test_random_property(void **state)
{
	static struct fleet f;
	static const char *profiles[] = { "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb" };
	static const char *goals[] = { "7g.80gb", "4g.40gb", "3g.40gb", "2g.20gb", "full" };

	int total_moves = 0, repaired = 0;

	(void)state;
	for (int round = 0; round < 300; round++) {
		struct defrag_plan plan;
		int ng = 2 + (int)rnd(60);

		fleet_init(&f, ng);
		for (int i = 0; i < ng; i++)
			f.group[i] = rnd(3) == 0 ? 1 : 0;
		for (int k = 0; k < ng * 4; k++) {
			const char *pn = profiles[rnd(5)];
			const struct mig_profile *p = catalog_profile(h100(), pn);
			int gi = (int)rnd((unsigned)ng);
			int start = p->placements[rnd((unsigned)p->nplacements)];

			if (placement_gpu_fits(&f.g[gi], p, start))
				put(&f, gi, pn, start, rnd(4) != 0, 1 + rnd(5));
		}
		/* free some, as churn would: drop instances from the list and layout */
		for (int k = 0; k < f.ni; k++) {
			struct gp_error err;

			if (rnd(3) != 0)
				continue;
			assert_int_equal(placement_gpu_remove(&f.g[f.in[k].gpu], f.in[k].profile,
					     f.in[k].start, &err),
			    0);
			f.in[k] = f.in[--f.ni];
			k--;
		}
		if (round % 3 == 0) {
			struct defrag_goal goal = { .kind = DEFRAG_GOAL_FREE_GPUS,
				.max_moves = (int)rnd(20) };
			struct defrag_fleet v = view(&f);
			struct gp_error err;

			assert_int_equal(defrag_plan(cat, &v, &goal, &plan, &err), 0);
			replay(&f, &plan);
			assert_true(plan.nmoves <= goal.max_moves);
			assert_true(plan.free_gpus_after >= plan.free_gpus_before);
		} else {
			int mm = (int)rnd(12);

			plan_items(&f, goals[rnd(5)], 1 + (int)rnd(4), mm, &plan);
			assert_true(plan.nmoves <= mm);
			if (plan.placeable_before)
				assert_int_equal(plan.nmoves, 0);
			repaired += !plan.placeable_before && plan.placeable_after;
		}
		total_moves += plan.nmoves;
		defrag_plan_free(&plan);
	}
	/* the rounds exercise the planner, not only its no-op path (732 and
	 * 10 with this seed) */
	assert_true(total_moves > 100);
	assert_true(repaired > 5);
	printf("random: %d moves, %d requests made placeable\n", total_moves, repaired);
}

static int
setup(void **state)
{
	int rc = unit_catalog_setup(state);

	cat = *state;
	return rc;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scattered_small_instances),
		cmocka_unit_test(test_busy_never_moves),
		cmocka_unit_test(test_move_within_gpu),
		cmocka_unit_test(test_move_limit),
		cmocka_unit_test(test_full_gpu),
		cmocka_unit_test(test_groups),
		cmocka_unit_test(test_free_gpus),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_random_property),
	};

	return cmocka_run_group_tests(tests, setup, unit_catalog_teardown);
}
