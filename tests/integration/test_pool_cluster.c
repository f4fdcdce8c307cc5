/*
 * test_pool_cluster.c - a pool bound to a cluster (docs/pools.md): a
 * create request naming `cluster` places only on that cluster's GPUs, and
 * so does every expand of the pool, though another cluster has room; the
 * simulation with the same cluster answers the same; a pool without one
 * places across the fleet. Bad names, an unknown cluster and a cluster on
 * another action are 422 with nothing stored; a cluster a live pool is
 * bound to cannot be deleted.
 */
#include "fixture.h"

#include <libpq-fe.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *alice;

/* The errors[] of a problem names field. */
static void
assert_error_field(const struct gp_client_response *r, const char *field)
{
	struct json_object *errs = fx_json(r->json, "errors");
	size_t n = errs ? json_object_array_length(errs) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *f = fx_json(json_object_array_get_idx(errs, i), "field");

		if (f != NULL && strcmp(json_object_get_string(f), field) == 0)
			return;
	}
	fail_msg("no error for field %s in %s", field, r->body);
}

static int64_t
submit(struct fixture *fx, const char *body)
{
	struct gp_client_response *r =
	    fx_request(fx, alice, "POST", "/v1/projects/pc/pool-requests", "%s", body);

	assert_status(r, 201);
	return fx_json_int(r->json, "id");
}

static struct gp_client_response *
approve(struct fixture *fx, int64_t id)
{
	return fx_request(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id), "{}");
}

/* Allocations of pool name not on cluster's GPUs (live ones). */
static int64_t
outside(struct fixture *fx, const char *pool, const char *cluster)
{
	return fx_sql_int64(fx,
	    "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "JOIN gpus g ON g.id = a.gpu_id JOIN clusters c ON c.id = g.cluster_id "
	    "WHERE p.name = $1 AND p.status <> 'released' AND a.state <> 'released' "
	    "AND c.name <> $2",
	    pool, cluster);
}

/* The value of counter name in GET /metrics. */
static int64_t
metric(struct fixture *fx, const char *name)
{
	struct gp_client_response *r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	const char *p;
	size_t len = strlen(name);

	assert_status(r, 200);
	for (p = r->body; p != NULL && *p != '\0'; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, name, len) == 0 && p[len] == ' ')
			return strtoll(p + len + 1, NULL, 10);
	fail_msg("no metric %s", name);
	return -1;
}

static void
test_bound_pools_place_in_their_cluster(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t id, slow0;

	alice = fixture_create_user(fx, "alice", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"pc\",\"display_name\":\"pc\"}");
	assert_status(r, 201);
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/pc/members/alice",
	    "{\"role\":\"owner\"}");
	assert_status(r, 201);
	/* ca: 2 nodes x 2 H100 (MIG), cb: 1 node x 2 H100 (MIG) */
	fx_fleet(fx, "ca", "H100-80GB", 2, 2, true);
	fx_fleet(fx, "cb", "H100-80GB", 1, 2, true);

	/*
	 * bound to cb: both GPUs there, none in ca; and found by the fast
	 * read, though the fleet's first empty GPUs are ca's (the fast read
	 * reads cb's own)
	 */
	slow0 = metric(fx, "gpupool_approval_slow_paths_total");
	id = submit(fx,
	    "{\"action\":\"create\",\"pool\":\"inb\",\"cluster\":\"cb\","
	    "\"items\":[\"H100-80GB/3g.40gb=3\"]}");
	r = approve(fx, id);
	assert_status(r, 200);
	assert_int_equal(outside(fx, "inb", "cb"), 0);
	assert_int_equal(metric(fx, "gpupool_approval_slow_paths_total"), slow0);
	r = fx_request(fx, alice, "GET",
	    fx_str(fx, "/v1/pools/%lld",
		(long long)fx_sql_int64(fx, "SELECT id FROM pools WHERE name = 'inb'")),
	    NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "cluster", "cb");

	/* what is left in cb (one 3g.40gb) cannot take a 7g.80gb: refused, though ca is empty */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/capacity/simulate",
	    "{\"cluster\":\"cb\",\"items\":[\"H100-80GB/7g.80gb=1\"]}");
	assert_status(r, 200);
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));
	id = submit(fx,
	    "{\"action\":\"create\",\"pool\":\"big\",\"cluster\":\"cb\","
	    "\"items\":[\"H100-80GB/7g.80gb=1\"]}");
	r = approve(fx, id);
	assert_problem(r, 409, "insufficient_capacity");
	assert_string_equal(fx_sql_text(fx, "SELECT state FROM pool_requests WHERE id = $1",
				fx_str(fx, "%lld", (long long)id)),
	    "pending");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "
			     "WHERE p.name = 'big'"),
	    0);

	/* an expand follows the pool's cluster: one more 3g.40gb fits cb, a second does not */
	id = submit(fx,
	    "{\"action\":\"expand\",\"pool\":\"inb\",\"items\":[\"H100-80GB/3g.40gb=1\"]}");
	assert_status(approve(fx, id), 200);
	assert_int_equal(outside(fx, "inb", "cb"), 0);
	id = submit(fx,
	    "{\"action\":\"expand\",\"pool\":\"inb\",\"items\":[\"H100-80GB/3g.40gb=1\"]}");
	assert_problem(approve(fx, id), 409, "insufficient_capacity");

	/* unbound: the fleet (cb is full, so ca) */
	id = submit(fx,
	    "{\"action\":\"create\",\"pool\":\"any\",\"items\":[\"H100-80GB/7g.80gb=2\"]}");
	assert_status(approve(fx, id), 200);
	assert_int_equal(outside(fx, "any", "ca"), 0);
	r = fx_request(fx, alice, "GET",
	    fx_str(fx, "/v1/pools/%lld",
		(long long)fx_sql_int64(fx, "SELECT id FROM pools WHERE name = 'any'")),
	    NULL);
	assert_status(r, 200);
	assert_true(json_object_get_type(fx_json(r->json, "cluster")) == json_type_null);
	fx_assert_pool_invariants(fx);
}

static void
test_cluster_bad_input_and_delete(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t pools = fx_sql_int64(fx, "SELECT count(*) FROM pools");
	int64_t reqs = fx_sql_int64(fx, "SELECT count(*) FROM pool_requests");
	int64_t id;

	r = fx_request(fx, alice, "POST", "/v1/projects/pc/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"x1\",\"cluster\":\"nope\","
	    "\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "cluster");
	r = fx_request(fx, alice, "POST", "/v1/projects/pc/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"x2\",\"cluster\":\"Bad_Name\","
	    "\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "cluster");
	r = fx_request(fx, alice, "POST", "/v1/projects/pc/pool-requests",
	    "{\"action\":\"create\",\"pool\":\"x3\",\"cluster\":7,"
	    "\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "cluster");
	r = fx_request(fx, alice, "POST", "/v1/projects/pc/pool-requests",
	    "{\"action\":\"expand\",\"pool\":\"inb\",\"cluster\":\"ca\","
	    "\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "cluster");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM pools"), pools);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM pool_requests"), reqs);

	/* a cluster with no nodes but a pending pool bound to it stays */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"cc\"}");
	assert_status(r, 201);
	id = submit(fx,
	    "{\"action\":\"create\",\"pool\":\"later\",\"cluster\":\"cc\","
	    "\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	r = fx_request(fx, fx->admin_token, "DELETE", "/v1/clusters/cc", NULL);
	assert_problem(r, 409, "conflict");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM clusters WHERE name = 'cc'"), 1);
	/* rejected, the pool is released and lets go of it */
	r = fx_request(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/pool-requests/%lld/reject", (long long)id), "{\"reason\":\"no\"}");
	assert_status(r, 200);
	r = fx_request(fx, fx->admin_token, "DELETE", "/v1/clusters/cc", NULL);
	assert_status(r, 204);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pools WHERE name = 'later' AND cluster_id IS NULL"),
	    1);
	fx_assert_pool_invariants(fx);
}

struct racer {
	struct fixture *fx;
	const char *token;
	long status;
	char body[1024];
};

static void *
race_submit(void *arg)
{
	struct racer *r = arg;
	struct gp_client *c = gp_client_create(r->fx->server->base_url, NULL);
	struct gp_client_response res;
	const char *body = "{\"action\":\"create\",\"pool\":\"gone\",\"cluster\":\"cd\","
			   "\"items\":[\"H100-80GB/1g.10gb=1\"]}";

	memset(&res, 0, sizeof(res));
	if (gp_client_set_token(c, r->token) == 0 &&
	    gp_client_request(c, "POST", "/v1/projects/pc/pool-requests", body, strlen(body), NULL,
		&res) == 0) {
		r->status = res.status;
		snprintf(r->body, sizeof(r->body), "%s", res.body ? res.body : "");
	}
	gp_client_response_free(&res);
	gp_client_destroy(c);
	return NULL;
}

/*
 * A cluster deleted between the submission's look-up and its insert: the
 * insert's foreign key fails, and the answer is 422 on cluster, not a
 * generic 409; nothing stored.
 */
static void
test_cluster_deleted_during_submit(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct racer rc = { .fx = fx, .token = alice };
	PGconn *tx = PQconnectdb(fx->db_url);
	PGresult *res;
	pthread_t t;
	int64_t pools = fx_sql_int64(fx, "SELECT count(*) FROM pools");

	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"cd\"}");
	assert_status(r, 201);
	assert_int_equal(PQstatus(tx), CONNECTION_OK);
	res = PQexec(tx, "BEGIN; DELETE FROM clusters WHERE name = 'cd'");
	assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
	PQclear(res);
	assert_int_equal(pthread_create(&t, NULL, race_submit, &rc), 0);
	/* the insert waits for the deleted row's lock */
	for (int i = 0; i < 200 &&
	     fx_sql_int64(fx,
		 "SELECT count(*) FROM pg_stat_activity "
		 "WHERE wait_event_type = 'Lock' AND datname = current_database()") == 0;
	     i++)
		usleep(50000);
	res = PQexec(tx, "COMMIT");
	assert_int_equal(PQresultStatus(res), PGRES_COMMAND_OK);
	PQclear(res);
	PQfinish(tx);
	assert_int_equal(pthread_join(t, NULL), 0);
	if (rc.status != 422 || strstr(rc.body, "\"cluster\"") == NULL)
		fail_msg("expected 422 on cluster, got %ld %s", rc.status, rc.body);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM pools"), pools);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bound_pools_place_in_their_cluster),
		cmocka_unit_test(test_cluster_bad_input_and_delete),
		cmocka_unit_test(test_cluster_deleted_during_submit),
	};

	return fixture_run_tests(tests);
}
