/*
 * test_fleet_agree.c - simulation and approval read the fleet the same
 * way: on random fleets (seeded, several seeds), POST
 * /v1/capacity/simulate's answer for a set of items and the placement
 * an approval of the same items makes right after agree: it fits
 * exactly when the approval is granted, with as many instances. (The
 * GPUs may differ: an approval's fast path locks candidates from the
 * busiest layout classes it has cached, simulation reads every class.)
 */
#include "fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEEDS 4
#define PREFILL 4 /* random pools approved before the trials, per seed */
#define TRIALS 10 /* simulate-then-approve rounds, per seed */

static const char *op;
static const char *alice;

static const char *const profiles[] = { "1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb",
	"1g.20gb" };

static int
strcmp_ptr(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1-2 random items of A100-80GB as a JSON array, profiles distinct. */
static const char *
random_items(struct fixture *fx, unsigned *seed)
{
	int n = 1 + (int)(rand_r(seed) % 2);
	int a = (int)(rand_r(seed) % 6), b = (a + 1 + (int)(rand_r(seed) % 5)) % 6;
	int ca = 1 + (int)(rand_r(seed) % 3), cb = 1 + (int)(rand_r(seed) % 2);

	if (n == 1)
		return fx_str(fx, "[{\"model\":\"A100-80GB\",\"profile\":\"%s\",\"count\":%d}]",
		    profiles[a], ca);
	return fx_str(fx,
	    "[{\"model\":\"A100-80GB\",\"profile\":\"%s\",\"count\":%d},"
	    "{\"model\":\"A100-80GB\",\"profile\":\"%s\",\"count\":%d}]",
	    profiles[a], ca, profiles[b], cb);
}

/* The placements of arr (gpu_uuid, profile, start), sorted, as one text. */
static const char *
placements_text(struct fixture *fx, struct json_object *arr)
{
	size_t n = json_object_array_length(arr);
	const char **v = calloc(n + 1, sizeof(*v));
	const char *out = "";

	for (size_t i = 0; i < n; i++) {
		struct json_object *o = json_object_array_get_idx(arr, i);

		v[i] = fx_str(fx, "%s/%s@%lld", fx_json_str(o, "gpu_uuid"),
		    fx_json_str(o, "profile"), (long long)fx_json_int(o, "start"));
	}
	qsort(v, n, sizeof(*v), strcmp_ptr);
	for (size_t i = 0; i < n; i++)
		out = fx_str(fx, "%s%s;", out, v[i]);
	free(v);
	return out;
}

static int64_t
submit_create(struct fixture *fx, const char *pool, const char *items)
{
	struct gp_client_response *r;

	r = fx_request(fx, alice, "POST", "/v1/projects/fa/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"%s\",\"items\":%s}", pool, items);
	assert_status(r, 201);
	return fx_json_int(r->json, "id");
}

static struct gp_client_response *
approve(struct fixture *fx, int64_t id)
{
	return fx_request(fx, op, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id), "{}");
}

static void
test_simulate_agrees_with_approve(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int fits = 0, refused = 0, elsewhere = 0;

	op = fixture_create_user(fx, "op", "operator");
	alice = fixture_create_user(fx, "alice", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"fa\",\"display_name\":\"fa\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/fa/members/alice",
	    "{\"role\":\"owner\"}");
	assert_status(r, 201);
	for (unsigned s = 1; s <= SEEDS; s++) {
		unsigned seed = s * 7919u;
		const char *prefix = fx_str(fx, "agree%u", s);

		fx_fleet(fx, prefix, "A100-80GB", 2 + (int)(rand_r(&seed) % 3), 4, true);
		/* a random start: pools approved where the engine put them */
		for (int i = 0; i < PREFILL; i++) {
			int64_t id = submit_create(fx, fx_str(fx, "%s-pre%d", prefix, i),
			    random_items(fx, &seed));

			r = approve(fx, id);
			assert_true(r->status == 200 || r->status == 409);
		}
		for (int t = 0; t < TRIALS; t++) {
			const char *items = random_items(fx, &seed);
			struct gp_client_response *sim, *ap;
			int64_t id;

			sim = fx_request(fx, op, "POST", "/v1/capacity/simulate", "{\"items\":%s}",
			    items);
			assert_status(sim, 200);
			id = submit_create(fx, fx_str(fx, "%s-t%d", prefix, t), items);
			ap = approve(fx, id);
			if (json_object_get_boolean(fx_json(sim->json, "fits"))) {
				if (ap->status != 200)
					fail_msg("seed %u trial %d: simulate fits %s, the approval "
						 "answered %ld",
					    s, t, items, ap->status);
				/* the same number of instances, each where one fits */
				assert_int_equal(fx_json_len(ap->json, "allocations"),
				    fx_json_len(sim->json, "placements"));
				if (strcmp(placements_text(fx, fx_json(ap->json, "allocations")),
					placements_text(fx, fx_json(sim->json, "placements"))) != 0)
					elsewhere++;
				fits++;
			} else {
				assert_problem(ap, 409, "insufficient_capacity");
				refused++;
			}
		}
	}
	print_message("simulate and approve agreed on %d fits (%d placed on other GPUs) and %d refusals\n",
	    fits, elsewhere, refused);
	assert_true(fits > 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simulate_agrees_with_approve),
	};

	return fixture_run_tests(tests);
}
