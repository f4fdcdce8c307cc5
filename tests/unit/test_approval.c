/*
 * test_approval.c - the approval workflow's pure decisions
 * (domain/approval.c): which approvals share a batch, which layout
 * classes candidates are locked from (ranking, limits), the arrays a
 * create / expand writes and what a shrink / release frees.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/approval.h"
#include "domain/catalog.h"
#include "domain/placement.h"

#include "unit_catalog.h"

#define S unit_spec

/* ---- the batch rule ---- */

static void
test_batch_same_pool(void **state)
{
	struct approval_key v[3] = {
		{ .pool_id = 1, .project_id = 10, .open = true },
		{ .pool_id = 2, .project_id = 10, .open = true },
		{ .pool_id = 1, .project_id = 11, .open = true },
	};

	(void)state;
	assert_false(approval_batch_later(v, 0));
	/* another pool of the same project without a quota: same batch */
	assert_false(approval_batch_later(v, 1));
	/* the same pool as an open approval before it: next batch */
	assert_true(approval_batch_later(v, 2));
	/* ... unless that one is no longer open (refused, or waiting itself) */
	v[0].open = false;
	assert_false(approval_batch_later(v, 2));
}

static void
test_batch_quota_project(void **state)
{
	struct approval_key v[3] = {
		{ .pool_id = 1, .project_id = 10, .has_quota = true, .open = true },
		{ .pool_id = 2, .project_id = 10, .has_quota = true, .open = true },
		{ .pool_id = 3, .project_id = 12, .has_quota = true, .open = true },
	};

	(void)state;
	/* a quota-limited project: its second approval waits for the next batch */
	assert_true(approval_batch_later(v, 1));
	/* another project under a quota is independent */
	assert_false(approval_batch_later(v, 2));
	/* the later one's quota decides, not the earlier one's */
	v[1].has_quota = false;
	assert_false(approval_batch_later(v, 1));
}

/* ---- candidate classes ---- */

static struct approval_class
C(const struct gpu_model *m, bool mig, const char *layout) {
	struct approval_class c;

	memset(&c, 0, sizeof(c));
	c.mig_enabled = mig;
	c.layout = layout;
	placement_gpu_init(&c.g, m, 0, 0, 0, mig);
	c.valid = placement_layout_apply(&c.g, layout) == 0;
	return c;
}

static void
test_wants_rank(void **state)
{
	const struct catalog *cat = *state;
	const struct gpu_model *m = catalog_model(cat, "H100-80GB");
	struct spec_count items[1] = { S("H100-80GB", "1g.10gb", 2) };
	int idx[1] = { 0 };
	struct approval_class cls[6];
	struct approval_want w[16];
	struct arena *a = arena_create();
	int nw = 0;

	assert_non_null(m);
	cls[0] = C(m, true, "1g.10gb@0");                     /* 1 instance */
	cls[1] = C(m, true, "1g.10gb@0,1g.10gb@1,1g.10gb@2"); /* 3 instances */
	cls[2] = C(m, true, "1g.10gb@0,1g.10gb@1");           /* 2 instances */
	cls[3] = C(m, false, "full@0");                       /* no room: not useful */
	cls[4] = C(m, true, "");                              /* empty: its own want */
	cls[5] = C(m, true, "bogus@9");                       /* invalid */
	assert_false(cls[5].valid);
	approval_wants(a, m, items, idx, 1, cls, 6, true, 0, w, &nw, 16);
	/* empty GPUs in both modes first, then the useful classes busiest first */
	assert_int_equal(nw, 5);
	assert_string_equal(w[0].layout, "");
	assert_true(w[0].mig_enabled);
	assert_string_equal(w[1].layout, "");
	assert_false(w[1].mig_enabled);
	assert_string_equal(w[2].layout, "1g.10gb@0,1g.10gb@1,1g.10gb@2");
	assert_string_equal(w[3].layout, "1g.10gb@0,1g.10gb@1");
	assert_string_equal(w[4].layout, "1g.10gb@0");
	/* fast path: as many GPUs per class as instances needed (at most 8) */
	assert_int_equal(w[2].limit, 2);
	/* empty GPUs: enough for the items (7 1g.10gb fit on one) */
	assert_int_equal(w[0].limit, 1);
	for (int i = 0; i < nw; i++)
		assert_string_equal(w[i].model, "H100-80GB");
	arena_destroy(a);
}

static void
test_wants_fast_limits(void **state)
{
	const struct catalog *cat = *state;
	const struct gpu_model *m = catalog_model(cat, "H100-80GB");
	struct spec_count items[1] = { S("H100-80GB", "1g.10gb", 40) };
	int idx[1] = { 0 };
	struct approval_class cls[6];
	struct approval_want w[16];
	struct arena *a = arena_create();
	int nw = 0;

	cls[0] = C(m, true, "1g.10gb@0");
	cls[1] = C(m, true, "1g.10gb@1");
	cls[2] = C(m, true, "1g.10gb@2");
	cls[3] = C(m, true, "1g.10gb@3");
	cls[4] = C(m, true, "1g.10gb@4");
	cls[5] = C(m, true, "3g.40gb@0");
	/* fast: the APPROVAL_FAST_PARTIAL_CLASSES first, FAST_PER_CLASS each, plus held */
	approval_wants(a, m, items, idx, 1, cls, 6, true, 3, w, &nw, 16);
	assert_int_equal(nw, 2 + APPROVAL_FAST_PARTIAL_CLASSES);
	assert_int_equal(w[2].limit, APPROVAL_FAST_PER_CLASS + 3);
	/* ties in instances break by layout text */
	assert_string_equal(w[2].layout, "1g.10gb@0");
	/* slow: every useful class */
	nw = 0;
	approval_wants(a, m, items, idx, 1, cls, 6, false, 0, w, &nw, 16);
	assert_int_equal(nw, 2 + 6);
	assert_int_equal(w[2].limit, 40);
	/* the cap holds */
	nw = 0;
	approval_wants(a, m, items, idx, 1, cls, 6, false, 0, w, &nw, 3);
	assert_int_equal(nw, 3);
	arena_destroy(a);
}

/* ---- what an approval writes ---- */

static void
test_grow_arrays(void **state)
{
	struct approval_placed p[4] = {
		{ 7, 1, "1g.10gb", 0, 1, true },
		{ 7, 1, "1g.10gb", 1, 1, true }, /* the same GPU: switched once */
		{ 8, 1, "1g.10gb", 0, 1, false },
		{ 9, 2, "3g.40gb", 0, 4, true },
	};
	struct spec_count items[2] = { S("H100-80GB", "3g.40gb", 1), S("H100-80GB", "1g.10gb", 3) };
	struct arena *a = arena_create();
	struct approval_grow g;

	(void)state;
	approval_grow_arrays(a, p, 4, items, 2, &g);
	assert_int_equal(g.nswitch, 2);
	assert_int_equal(g.switch_gpu_ids[0], 7);
	assert_int_equal(g.switch_gpu_ids[1], 9);
	assert_int_equal(g.nitems, 2);
	assert_string_equal(g.models[0], "H100-80GB");
	assert_string_equal(g.profiles[0], "3g.40gb");
	assert_int_equal(g.counts[0], 1);
	assert_string_equal(g.profiles[1], "1g.10gb");
	assert_int_equal(g.counts[1], 3);
	arena_destroy(a);
}

static void
test_free_release(void **state)
{
	struct approval_live live[3] = {
		{ 1, 100, 5, "A100-80GB", "3g.40gb", 0 },
		{ 2, 100, 5, "A100-80GB", "3g.40gb", 4 },
		{ 3, 101, 5, "A100-80GB", "full", 0 },
	};
	struct spec_count pool[2] = { S("A100-80GB", "3g.40gb", 2), S("A100-80GB", "full", 1) };
	struct spec_count next[POOL_MAX_ITEMS];
	bool chosen[3];
	int nnext = -1, keep[1];
	struct gp_error err;

	(void)state;
	gp_error_clear(&err);
	assert_int_equal(approval_free_choose(live, 3, 5, true, pool, 2, NULL, 0, chosen, next,
			     &nnext, keep, &err),
	    0);
	assert_true(chosen[0] && chosen[1] && chosen[2]);
	assert_int_equal(nnext, 0);
}

static void
test_free_shrink(void **state)
{
	/* pool 5 holds two 3g.40gb on GPU 100 and one on GPU 101 next to pool 6's */
	struct approval_live live[4] = {
		{ 1, 100, 5, "A100-80GB", "3g.40gb", 0 },
		{ 2, 100, 5, "A100-80GB", "3g.40gb", 4 },
		{ 3, 101, 5, "A100-80GB", "3g.40gb", 0 },
		{ 4, 101, 6, "A100-80GB", "3g.40gb", 4 },
	};
	struct spec_count pool[1] = { S("A100-80GB", "3g.40gb", 3) };
	struct spec_count items[1] = { S("A100-80GB", "3g.40gb", 2) };
	struct spec_count all[1] = { S("A100-80GB", "3g.40gb", 3) };
	struct spec_count next[POOL_MAX_ITEMS];
	bool chosen[4];
	int nnext = 0, keep[1];
	struct gp_error err;

	(void)state;
	gp_error_clear(&err);
	assert_int_equal(approval_free_choose(live, 4, 5, false, pool, 1, items, 1, chosen, next,
			     &nnext, keep, &err),
	    0);
	/* GPU 100 becomes whole; the neighbour of pool 6 is never chosen */
	assert_true(chosen[0]);
	assert_true(chosen[1]);
	assert_false(chosen[2]);
	assert_false(chosen[3]);
	assert_int_equal(nnext, 1);
	assert_int_equal(next[0].count, 1);
	assert_int_equal(keep[0], 1);
	/* a shrink that empties the pool is a release: 409 */
	gp_error_clear(&err);
	assert_int_equal(approval_free_choose(live, 4, 5, false, pool, 1, all, 1, chosen, next,
			     &nnext, keep, &err),
	    -1);
	assert_int_equal(err.status, 409);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_batch_same_pool),
		cmocka_unit_test(test_batch_quota_project),
		cmocka_unit_test(test_wants_rank),
		cmocka_unit_test(test_wants_fast_limits),
		cmocka_unit_test(test_grow_arrays),
		cmocka_unit_test(test_free_release),
		cmocka_unit_test(test_free_shrink),
	};

	return cmocka_run_group_tests(tests, unit_catalog_setup, unit_catalog_teardown);
}
