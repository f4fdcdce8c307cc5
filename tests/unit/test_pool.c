/*
 * test_pool.c - pool domain logic: the request state machine, what a
 * pool's status accepts, item list arithmetic, quota checks and the
 * shrink selection (GPUs become whole where possible).
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
#include "domain/pool.h"
#include "domain/spec.h"

#include "unit_catalog.h"

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

#define S unit_spec

static void
test_names(void **state)
{
	enum pool_action a;
	enum pool_request_state s;
	enum pool_status p;

	(void)state;
	for (int i = 0; i <= POOL_ACTION_RELEASE; i++) {
		assert_int_equal(pool_action_parse(pool_action_name((enum pool_action)i), &a), 0);
		assert_int_equal((int)a, i);
	}
	for (int i = 0; i <= POOL_REQUEST_EXPIRED; i++) {
		assert_int_equal(pool_request_state_parse(pool_request_state_name(
							      (enum pool_request_state)i),
				     &s),
		    0);
		assert_int_equal((int)s, i);
	}
	for (int i = 0; i <= POOL_STATUS_RELEASED; i++) {
		assert_int_equal(pool_status_parse(pool_status_name((enum pool_status)i), &p), 0);
		assert_int_equal((int)p, i);
	}
	assert_int_equal(pool_action_parse("grow", &a), -1);
	assert_int_equal(pool_action_parse(NULL, &a), -1);
	assert_int_equal(pool_request_state_parse("Pending", &s), -1);
	assert_int_equal(pool_status_parse("", &p), -1);
	assert_string_equal(pool_request_state_name((enum pool_request_state)99), "unknown");
}

static void
test_transitions(void **state)
{
	/* allowed[from][to] */
	static const bool allowed[7][7] = {
		/* pending */ { 0, 1, 0, 0, 1, 1, 1 },
		/* approved */ { 0, 0, 1, 1, 0, 0, 0 },
		/* fulfilled */ { 0, 0, 0, 0, 0, 0, 0 },
		/* failed */ { 0, 0, 0, 0, 0, 0, 0 },
		/* rejected */ { 0, 0, 0, 0, 0, 0, 0 },
		/* cancelled */ { 0, 0, 0, 0, 0, 0, 0 },
		/* expired */ { 0, 0, 0, 0, 0, 0, 0 },
	};

	(void)state;
	for (int f = 0; f < 7; f++) {
		for (int t = 0; t < 7; t++) {
			struct gp_error err;
			int rc;

			gp_error_clear(&err);
			rc = pool_request_transition((enum pool_request_state)f,
			    (enum pool_request_state)t, &err);
			if (allowed[f][t]) {
				assert_int_equal(rc, 0);
				assert_false(gp_error_isset(&err));
			} else {
				assert_int_equal(rc, -1);
				assert_int_equal(err.status, 409);
				assert_string_equal(err.code, "conflict");
				assert_non_null(strstr(err.message,
				    pool_request_state_name((enum pool_request_state)f)));
			}
		}
	}
}

static void
test_status_accepts(void **state)
{
	/* accepts[status][action]: create, expand, shrink, release */
	static const bool accepts[6][4] = {
		/* pending */ { 1, 0, 0, 0 },
		/* provisioning */ { 0, 1, 1, 1 },
		/* active */ { 0, 1, 1, 1 },
		/* degraded */ { 0, 1, 1, 1 },
		/* releasing */ { 0, 0, 0, 0 },
		/* released */ { 0, 0, 0, 0 },
	};

	(void)state;
	for (int s = 0; s < 6; s++) {
		assert_int_equal(pool_status_holds((enum pool_status)s), accepts[s][1]);
		for (int a = 0; a < 4; a++) {
			struct gp_error err;
			int rc;

			gp_error_clear(&err);
			rc = pool_status_accepts((enum pool_status)s, (enum pool_action)a, "p1",
			    &err);
			assert_int_equal(rc, accepts[s][a] ? 0 : -1);
			if (rc < 0) {
				assert_int_equal(err.status, 409);
				assert_non_null(strstr(err.message, "p1"));
			}
		}
	}
}

static void
test_items_check(void **state)
{
	const struct catalog *c = *state;
	struct spec_count in[3], out[3];
	struct gp_error err;

	in[0] = S("H100-80GB", "3g.40gb", 2);
	in[1] = S("A100-40GB", "full", 1);
	in[2] = S("H100-80GB", "1g.10gb", 3);
	gp_error_clear(&err);
	assert_int_equal(pool_items_check(c, in, 3, "items", out, &err), 0);
	assert_string_equal(out[0].model, "A100-40GB");
	assert_string_equal(out[1].profile, "1g.10gb");
	assert_string_equal(out[2].profile, "3g.40gb");
	assert_int_equal(out[2].count, 2);

	/* a kind twice */
	in[2] = S("H100-80GB", "3g.40gb", 1);
	gp_error_clear(&err);
	assert_int_equal(pool_items_check(c, in, 3, "items", out, &err), -1);
	assert_int_equal(err.status, 422);
	assert_int_equal(err.nfields, 1);
	assert_string_equal(err.fields[0].field, "items[2]");

	/* unknown profile and a zero count: both reported */
	in[0] = S("H100-80GB", "3g.20gb", 1);
	in[1] = S("A100-40GB", "full", 0);
	gp_error_clear(&err);
	assert_int_equal(pool_items_check(c, in, 2, "items", out, &err), -1);
	assert_int_equal(err.nfields, 2);
	assert_string_equal(err.fields[0].field, "items[0].profile");
	assert_string_equal(err.fields[1].field, "items[1].count");

	gp_error_clear(&err);
	assert_int_equal(pool_items_check(c, in, 0, "items", out, &err), -1);
	assert_string_equal(err.fields[0].field, "items");
}

static void
test_items_arithmetic(void **state)
{
	struct spec_count a[3], b[3], out[POOL_MAX_ITEMS];
	struct gp_error err;
	int n;

	(void)state;
	a[0] = S("A100-40GB", "full", 1);
	a[1] = S("H100-80GB", "3g.40gb", 2);
	b[0] = S("H100-80GB", "1g.10gb", 4);
	b[1] = S("H100-80GB", "3g.40gb", 1);
	gp_error_clear(&err);
	assert_int_equal(pool_items_add(a, 2, b, 2, out, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(out[0].model, "A100-40GB");
	assert_string_equal(out[1].profile, "1g.10gb");
	assert_int_equal(out[1].count, 4);
	assert_string_equal(out[2].profile, "3g.40gb");
	assert_int_equal(out[2].count, 3);
	assert_int_equal(pool_items_count(out, n, "H100-80GB", "3g.40gb"), 3);
	assert_int_equal(pool_items_count(out, n, "H100-80GB", "7g.80gb"), 0);

	/* subtract to a smaller list; kinds reaching 0 disappear */
	gp_error_clear(&err);
	assert_int_equal(pool_items_subtract(out, 3, b, 2, a + 0, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(a[1].count, 2);

	/* more than held, and a kind not held: 409 naming both items */
	b[0] = S("A100-40GB", "full", 2);
	b[1] = S("H100-80GB", "7g.80gb", 1);
	gp_error_clear(&err);
	assert_int_equal(pool_items_subtract(out, 3, b, 2, a, &n, &err), -1);
	assert_int_equal(err.status, 409);
	assert_int_equal(err.nfields, 2);
	assert_string_equal(err.fields[0].field, "items[0]");
	assert_string_equal(err.fields[1].field, "items[1]");

	/* the count cap */
	a[0] = S("H100-80GB", "1g.10gb", SPEC_COUNT_MAX);
	b[0] = S("H100-80GB", "1g.10gb", 1);
	gp_error_clear(&err);
	assert_int_equal(pool_items_add(a, 1, b, 1, out, &n, &err), -1);
	assert_int_equal(err.status, 422);

	/* canonical: sort and merge */
	a[0] = S("H100-80GB", "3g.40gb", 1);
	a[1] = S("A100-40GB", "full", 2);
	a[2] = S("H100-80GB", "3g.40gb", 4);
	n = pool_items_canonical(a, 3);
	assert_int_equal(n, 2);
	assert_string_equal(a[0].model, "A100-40GB");
	assert_int_equal(a[1].count, 5);
}

static void
test_quota(void **state)
{
	struct spec_count quota[2], usage[1], add[2];
	struct gp_error err;
	int bad;

	(void)state;
	quota[0] = S("H100-80GB", "1g.10gb", 4);
	quota[1] = S("H100-80GB", "3g.40gb", 2);
	usage[0] = S("H100-80GB", "3g.40gb", 1);
	add[0] = S("H100-80GB", "1g.10gb", 4);
	add[1] = S("H100-80GB", "3g.40gb", 1);

	/* exactly at the limit */
	gp_error_clear(&err);
	assert_int_equal(pool_quota_check(true, quota, 2, usage, 1, add, 2, &bad, &err), 0);
	assert_int_equal(bad, -1);

	/* one above: names the item */
	add[1].count = 2;
	gp_error_clear(&err);
	assert_int_equal(pool_quota_check(true, quota, 2, usage, 1, add, 2, &bad, &err), -1);
	assert_int_equal(bad, 1);
	assert_int_equal(err.status, 422);
	assert_string_equal(err.code, "quota_exceeded");
	assert_int_equal(err.nfields, 1);
	assert_string_equal(err.fields[0].field, "items[1]");
	assert_non_null(strstr(err.message, "H100-80GB/3g.40gb"));

	/* a kind the quota does not list is limited to 0 */
	add[0] = S("A100-40GB", "full", 1);
	add[1].count = 1;
	gp_error_clear(&err);
	assert_int_equal(pool_quota_check(true, quota, 2, usage, 1, add, 2, &bad, &err), -1);
	assert_int_equal(bad, 0);

	/* no quota: no limit */
	gp_error_clear(&err);
	assert_int_equal(pool_quota_check(false, NULL, 0, usage, 1, add, 2, &bad, &err), 0);

	/* an empty quota allows nothing */
	gp_error_clear(&err);
	assert_int_equal(pool_quota_check(true, NULL, 0, NULL, 0, add, 1, NULL, &err), -1);
}

/* Run the selection and return the chosen ids as a bit set over allocs. */
static unsigned
choose(const struct shrink_alloc *a, int n, const int *want, int nitems, int *status)
{
	bool chosen[32];
	struct gp_error err;
	unsigned set = 0;

	gp_error_clear(&err);
	*status = pool_shrink_choose(a, n, want, nitems, chosen, &err) == 0 ? 0 : err.status;
	for (int i = 0; i < n && *status == 0; i++)
		if (chosen[i])
			set |= 1u << i;
	return set;
}

static void
test_shrink_whole_gpu(void **state)
{
	int st;

	(void)state;
	{
		/* GPU 1 shares with another tenant, GPU 2 holds only ours: free GPU 2 */
		const struct shrink_alloc a[] = {
			{ 10, 1, 0, 0 },
			{ 11, 1, -1, 4 },
			{ 12, 2, 0, 0 },
		};
		const int want[] = { 1 };

		assert_int_equal(choose(a, NELEM(a), want, 1, &st), 1u << 2);
		assert_int_equal(st, 0);
	}
	{
		/* GPU 1: 2 of ours; GPU 2: 1 of ours. Want 1: GPU 2 becomes whole. */
		const struct shrink_alloc a[] = {
			{ 10, 1, 0, 0 },
			{ 11, 1, 0, 4 },
			{ 12, 2, 0, 4 },
		};
		const int want[] = { 1 };

		assert_int_equal(choose(a, NELEM(a), want, 1, &st), 1u << 2);
		/* want 2: GPU 1 whole (2 instances) is as good as GPU 2 + one of GPU 1;
		 * the fewest-first rule takes GPU 2, then one of GPU 1 (highest start) */
		{
			const int want2[] = { 2 };

			assert_int_equal(choose(a, NELEM(a), want2, 1, &st), (1u << 2) | (1u << 1));
		}
		{
			const int want3[] = { 3 };

			assert_int_equal(choose(a, NELEM(a), want3, 1, &st), 7u);
		}
	}
	{
		/* two kinds on one GPU: freeing both kinds empties it */
		const struct shrink_alloc a[] = {
			{ 10, 5, 0, 0 },
			{ 11, 5, 1, 4 },
			{ 12, 6, 0, 0 },
			{ 13, 6, -1, 4 },
		};
		const int want[] = { 1, 1 };

		assert_int_equal(choose(a, NELEM(a), want, 2, &st), (1u << 0) | (1u << 1));
	}
	{
		/* no GPU can be emptied: take from the one closest to empty */
		const struct shrink_alloc a[] = {
			{ 10, 1, 0, 0 },
			{ 11, 1, -1, 2 },
			{ 12, 1, -1, 4 },
			{ 20, 2, 0, 0 },
			{ 21, 2, -1, 4 },
		};
		const int want[] = { 1 };

		assert_int_equal(choose(a, NELEM(a), want, 1, &st), 1u << 3);
	}
	{
		/* the order of the input does not matter */
		const struct shrink_alloc a[] = {
			{ 21, 2, -1, 4 },
			{ 12, 1, -1, 4 },
			{ 20, 2, 0, 0 },
			{ 10, 1, 0, 0 },
			{ 11, 1, -1, 2 },
		};
		const int want[] = { 1 };

		assert_int_equal(choose(a, NELEM(a), want, 1, &st), 1u << 2);
	}
	{
		/* too few candidates: 409 */
		const struct shrink_alloc a[] = { { 10, 1, 0, 0 }, { 11, 1, -1, 4 } };
		const int want[] = { 2 };

		(void)choose(a, NELEM(a), want, 1, &st);
		assert_int_equal(st, 409);
	}
	{
		/* want 0 frees nothing */
		const struct shrink_alloc a[] = { { 10, 1, 0, 0 } };
		const int want[] = { 0 };

		assert_int_equal(choose(a, NELEM(a), want, 1, &st), 0u);
		assert_int_equal(st, 0);
	}
}

/* Exhaustive check on small random layouts: the counts freed are exact,
 * only candidates of the wanted kind are chosen, and whenever a GPU
 * holding only wanted allocations fits within the want, at least one GPU
 * ends up whole. */
static void
test_shrink_random(void **state)
{
	unsigned seed = 12345;

	(void)state;
	for (int round = 0; round < 2000; round++) {
		struct shrink_alloc a[24];
		bool chosen[24];
		int n = 0, want[2] = { 0, 0 }, have[2] = { 0, 0 }, got[2] = { 0, 0 };
		struct gp_error err;
		bool can_whole = false, whole = false;

		for (int g = 1; g <= 4; g++) {
			int k = (int)(rand_r(&seed) % 5);

			for (int j = 0; j < k && n < 24; j++) {
				int kind = (int)(rand_r(&seed) % 3) - 1;

				a[n].id = n + 100;
				a[n].gpu_id = g;
				a[n].kind = kind;
				a[n].start = j;
				if (kind >= 0)
					have[kind]++;
				n++;
			}
		}
		for (int i = 0; i < 2; i++)
			want[i] = have[i] > 0 ? (int)(rand_r(&seed) % (unsigned)(have[i] + 1)) : 0;
		gp_error_clear(&err);
		assert_int_equal(pool_shrink_choose(a, n, want, 2, chosen, &err), 0);
		for (int i = 0; i < n; i++) {
			if (!chosen[i])
				continue;
			assert_true(a[i].kind >= 0);
			got[a[i].kind]++;
		}
		assert_int_equal(got[0], want[0]);
		assert_int_equal(got[1], want[1]);
		for (int g = 1; g <= 4; g++) {
			int per[2] = { 0, 0 }, others = 0, total = 0, freed = 0;

			for (int i = 0; i < n; i++) {
				if (a[i].gpu_id != g)
					continue;
				total++;
				freed += chosen[i];
				if (a[i].kind < 0)
					others++;
				else
					per[a[i].kind]++;
			}
			if (total > 0 && others == 0 && per[0] <= want[0] && per[1] <= want[1] &&
			    per[0] + per[1] > 0)
				can_whole = true;
			if (total > 0 && freed == total)
				whole = true;
		}
		if (can_whole)
			assert_true(whole);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_names),
		cmocka_unit_test(test_transitions),
		cmocka_unit_test(test_status_accepts),
		cmocka_unit_test(test_items_check),
		cmocka_unit_test(test_items_arithmetic),
		cmocka_unit_test(test_quota),
		cmocka_unit_test(test_shrink_whole_gpu),
		cmocka_unit_test(test_shrink_random),
	};

	return cmocka_run_group_tests(tests, unit_catalog_setup, unit_catalog_teardown);
}
