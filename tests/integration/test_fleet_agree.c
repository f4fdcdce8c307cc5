/*
 * test_fleet_agree.c - simulation and approval read the fleet the same
 * way (service/fleet.c): on random fleets (seeded, several seeds), POST
 * /v1/capacity/simulate's answer for a set of items and the placement an
 * approval of the same items makes right after agree: it fits exactly
 * when the approval is granted, and then on the same GPUs, at the same
 * starts, with the same profiles (the fleet is quiet: nothing else
 * approves meanwhile).
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

/* The operator, the project "fa" and its owner alice (once per file). */
static void
users_once(struct fixture *fx)
{
	struct gp_client_response *r;

	if (op != NULL)
		return;
	op = fixture_create_user(fx, "op", "operator");
	alice = fixture_create_user(fx, "alice", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"fa\",\"display_name\":\"fa\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/fa/members/alice",
	    "{\"role\":\"owner\"}");
	assert_status(r, 201);
}

static void
test_simulate_agrees_with_approve(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int fits = 0, refused = 0, elsewhere = 0;

	users_once(fx);
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

/* ---- the same placements, on mixed fleets ---- */

#define MIXED_SEEDS 5
#define MIXED_PREFILL 5 /* pools approved before the rounds, per seed */
#define MIXED_ROUNDS 8  /* simulate-then-approve rounds, per seed */

static const char *const mixed_models[] = { "A100-80GB", "H100-80GB", "L4-24GB" };
static const char *const mig_profiles[] = { "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb",
	"7g.80gb", "full" };

/*
 * A cluster named name of nodes nodes x gpus GPUs of model, each node's
 * GPUs in MIG mode or not at random (MIG models only).
 */
static void
mixed_cluster(struct fixture *fx, const char *name, const char *model, int nodes, int gpus,
    unsigned *seed)
{
	fx_fleet_register(fx, name, model, nodes, gpus);
	for (int n = 0; n < nodes; n++) {
		bool mig = strcmp(model, "L4-24GB") != 0 && rand_r(seed) % 3 != 0;

		fx_sql_exec(fx,
		    "UPDATE gpus SET mig_enabled = $1 WHERE node_id = "
		    "(SELECT id FROM nodes WHERE name = $2)",
		    mig ? "true" : "false", fx_str(fx, "%s-n%d", name, n));
	}
}

/* A random profile of model (whole GPUs only for the L4). */
static const char *
mixed_profile(const char *model, unsigned *seed)
{
	if (strcmp(model, "L4-24GB") == 0)
		return "full";
	return mig_profiles[rand_r(seed) % (sizeof(mig_profiles) / sizeof(*mig_profiles))];
}

/*
 * A random request: 1-2 items of one model (distinct profiles), bound to
 * one of the seed's clusters holding that model or to none; or, one time
 * in four, items of two models and no cluster. *items: a JSON array,
 * *cluster: ",\"cluster\":\"...\"" or "".
 */
static void
mixed_request(struct fixture *fx, const char *prefix, unsigned *seed, const char **items,
    const char **cluster)
{
	int m = (int)(rand_r(seed) % 3), n = 1 + (int)(rand_r(seed) % 2), k;
	const char *model = mixed_models[m];
	const char *p0 = mixed_profile(model, seed), *p1 = mixed_profile(model, seed);
	const char *first;

	first = fx_str(fx, "{\"model\":\"%s\",\"profile\":\"%s\",\"count\":%d}", model, p0,
	    1 + (int)(rand_r(seed) % 3));
	*items = fx_str(fx, "[%s]", first);
	if (n == 2 && strcmp(p0, p1) != 0)
		*items = fx_str(fx, "[%s,{\"model\":\"%s\",\"profile\":\"%s\",\"count\":%d}]",
		    first, model, p1, 1 + (int)(rand_r(seed) % 2));
	*cluster = "";
	if (rand_r(seed) % 4 == 0) {
		const char *other = mixed_models[(m + 1) % 3];

		*items = fx_str(fx, "[%s,{\"model\":\"%s\",\"profile\":\"%s\",\"count\":1}]", first,
		    other, mixed_profile(other, seed));
		return;
	}
	k = (int)(rand_r(seed) % 3);
	if (k == 0)
		return;
	/* c0 and c3: A100, c1: H100, c2: L4 */
	*cluster = fx_str(fx, ",\"cluster\":\"%s-c%d\"", prefix,
	    m == 0       ? (k == 1 ? 0 : 3)
		: m == 1 ? 1
			 : 2);
}

/*
 * On fleets of several models, MIG and whole GPUs, some partly
 * allocated, in several clusters: a simulation's placements are exactly
 * the approval's that follows (GPU uuid, start, profile per instance).
 */
static void
test_simulate_places_as_approve(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int fits = 0, refused = 0, differed = 0, mismatched = 0;

	users_once(fx);
	for (unsigned s = 1; s <= MIXED_SEEDS; s++) {
		unsigned seed = s * 104729u;
		const char *prefix = fx_str(fx, "mix%u", s);

		mixed_cluster(fx, fx_str(fx, "%s-c0", prefix), "A100-80GB",
		    2 + (int)(rand_r(&seed) % 3), 4, &seed);
		mixed_cluster(fx, fx_str(fx, "%s-c1", prefix), "H100-80GB",
		    1 + (int)(rand_r(&seed) % 2), 4, &seed);
		mixed_cluster(fx, fx_str(fx, "%s-c2", prefix), "L4-24GB",
		    1 + (int)(rand_r(&seed) % 2), 2, &seed);
		/* a spare A100 cluster, so unbound requests have a choice of clusters */
		mixed_cluster(fx, fx_str(fx, "%s-c3", prefix), "A100-80GB", 1, 4, &seed);
		for (int i = 0; i < MIXED_PREFILL; i++) {
			const char *items, *cluster;
			int64_t id;

			mixed_request(fx, prefix, &seed, &items, &cluster);
			id = submit_create(fx, fx_str(fx, "%s-pre%d", prefix, i), items);

			r = approve(fx, id);
			assert_true(r->status == 200 || r->status == 409);
		}
		for (int t = 0; t < MIXED_ROUNDS; t++) {
			struct gp_client_response *sim, *ap;
			const char *items, *cluster, *want, *got;

			mixed_request(fx, prefix, &seed, &items, &cluster);

			sim = fx_request(fx, op, "POST", "/v1/capacity/simulate",
			    "{\"items\":%s%s}", items, cluster);
			assert_status(sim, 200);
			r = fx_request(fx, alice, "POST", "/v1/projects/fa/pool-requests",
			    "{\"action\":\"create\",\"pool\":\"%s-t%d\",\"items\":%s%s}", prefix, t,
			    items, cluster);
			assert_status(r, 201);
			ap = approve(fx, fx_json_int(r->json, "id"));
			if (!json_object_get_boolean(fx_json(sim->json, "fits"))) {
				if (ap->status != 409) {
					print_message("seed %u round %d: %s%s does not fit, the "
						      "approval answered %ld\n",
					    s, t, items, cluster, ap->status);
					mismatched++;
				}
				refused++;
				continue;
			}
			fits++;
			if (ap->status != 200) {
				print_message("seed %u round %d: %s%s fits, the approval answered %ld\n",
				    s, t, items, cluster, ap->status);
				mismatched++;
				continue;
			}
			want = placements_text(fx, fx_json(sim->json, "placements"));
			got = placements_text(fx, fx_json(ap->json, "allocations"));
			if (strcmp(want, got) != 0) {
				print_message("seed %u round %d: %s%s\n  simulated %s\n  approved  %s\n",
				    s, t, items, cluster, want, got);
				differed++;
			}
		}
		fx_assert_pool_invariants(fx);
	}
	print_message("%d fits (%d placed differently), %d refusals, %d answers disagreed\n", fits,
	    differed, refused, mismatched);
	assert_int_equal(differed, 0);
	assert_int_equal(mismatched, 0);
	assert_true(fits >= 10);
	assert_true(refused >= 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_simulate_agrees_with_approve),
		cmocka_unit_test(test_simulate_places_as_approve),
	};

	return fixture_run_tests(tests);
}
