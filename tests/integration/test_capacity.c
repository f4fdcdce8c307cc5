/*
 * test_capacity.c - the capacity inventory end to end: the catalog in the
 * database equals the embedded one; a mixed fleet (H100-80GB, H200-141GB,
 * A100-40GB, L40S) gives exact capacity figures (stranded slices,
 * per-profile allocated and placeable); simulate answers (the H100 facts
 * among them) and changes nothing; list filters and pagination; cordon,
 * drain and GPU health take capacity out of placement; bad input gets
 * precise 4xx answers and changes nothing; the access matrix; the
 * database's own guards (exclusion constraint, placement trigger, the
 * layout mirror); the /metrics gauges.
 *
 * Each test builds its own cluster and reads figures filtered by it, so
 * the tests do not depend on each other's data.
 */
#include "fixture.h"

#include <libpq-fe.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---- */

/* A valid GPU UUID unique to n. */
static const char *
uuid_of(struct fixture *fx, int n)
{
	return fx_str(fx, "GPU-%08x-0000-4000-8000-%012x", (unsigned)n, (unsigned)n);
}

static void
mk_cluster(struct fixture *fx, const char *name)
{
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters",
	    "{\"name\":\"%s\",\"region\":\"eu-west\"}", name);
	assert_status(r, 201);
	assert_json_str(r->json, "name", name);
}

static void
mk_node(struct fixture *fx, const char *cluster, const char *name, const char *labels)
{
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes",
	    "{\"name\":\"%s\",\"cluster\":\"%s\",\"hostname\":\"%s.example\","
	    "\"cpu_millicores\":96000,\"memory_bytes\":1099511627776,\"labels\":%s}",
	    name, cluster, name, labels ? labels : "{}");
	assert_status(r, 201);
	assert_json_str(r->json, "status", "ready");
	assert_json_str(r->json, "cluster", cluster);
}

/* Register a GPU; instances is a JSON array or NULL. */
static struct gp_client_response *
mk_gpu(struct fixture *fx, const char *node, int index, int uuid_n, const char *model,
    const char *instances)
{
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "POST", fx_str(fx, "/v1/nodes/%s/gpus", node),
	    "{\"index\":%d,\"uuid\":\"%s\",\"model\":\"%s\"%s%s}", index, uuid_of(fx, uuid_n),
	    model, instances ? ",\"instances\":" : "", instances ? instances : "");
	assert_status(r, 201);
	assert_json_str(r->json, "uuid", uuid_of(fx, uuid_n));
	return r;
}

/* The models[] entry of a capacity answer for model (fails when absent). */
static struct json_object *
cap_model(struct gp_client_response *r, const char *model)
{
	struct json_object *models = fx_json(r->json, "models");
	size_t n = models ? json_object_array_length(models) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *m = json_object_array_get_idx(models, i);

		if (strcmp(json_object_get_string(fx_json(m, "model")), model) == 0)
			return m;
	}
	fail_msg("no model %s in %s", model, r->body);
	return NULL;
}

/* allocated or placeable of one profile in a models[] entry. */
static int64_t
prof(struct json_object *m, const char *profile, const char *what)
{
	struct json_object *ps = fx_json(m, "profiles");
	size_t n = ps ? json_object_array_length(ps) : 0;

	for (size_t i = 0; i < n; i++) {
		struct json_object *p = json_object_array_get_idx(ps, i);

		if (strcmp(json_object_get_string(fx_json(p, "profile")), profile) == 0)
			return fx_json_int(p, what);
	}
	fail_msg("no profile %s", profile);
	return -1;
}

static struct gp_client_response *
capacity(struct fixture *fx, const char *cluster)
{
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "/v1/capacity?cluster=%s", cluster),
	    NULL);
	assert_status(r, 200);
	return r;
}

static struct gp_client_response *
simulate(struct fixture *fx, const char *token, const char *body)
{
	return fx_request(fx, token, "POST", "/v1/capacity/simulate", "%s", body);
}

/* Everything the inventory holds, as one comparable text. */
static const char *
state_of(struct fixture *fx)
{
	return fx_sql_text(fx,
	    "SELECT concat_ws(' | ', "
	    "(SELECT string_agg(concat_ws(',', id, name, region, generation), ';' ORDER BY id) "
	    "  FROM clusters), "
	    "(SELECT string_agg(concat_ws(',', id, name, status, status_reason, labels::text, "
	    "  generation, updated_at), ';' ORDER BY id) FROM nodes), "
	    "(SELECT string_agg(concat_ws(',', id, uuid, gpu_index, mig_enabled, health, layout, "
	    "  used_mask, node_status, generation), ';' ORDER BY id) FROM gpus), "
	    "(SELECT string_agg(concat_ws(',', id, gpu_id, profile, start, size, state), ';' "
	    "  ORDER BY id) FROM allocations), "
	    "(SELECT count(*) FROM audit_log))");
}

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

/* gpu_classes (kept by triggers) equals a grouping of gpus. */
static void
assert_classes_consistent(struct fixture *fx)
{
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM ("
			     "(SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, gpus::int8 "
			     " FROM gpu_classes WHERE gpus <> 0 "
			     " EXCEPT SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready', "
			     " layout, count(*) FROM gpus GROUP BY 1, 2, 3, 4, 5, 6) UNION ALL "
			     "(SELECT cluster_id, model, mig_enabled, health = 'ok', node_status = 'ready', layout, "
			     " count(*) FROM gpus GROUP BY 1, 2, 3, 4, 5, 6 "
			     " EXCEPT SELECT cluster_id, model, mig_enabled, healthy, node_ready, layout, gpus::int8 "
			     " FROM gpu_classes WHERE gpus <> 0)) d"),
	    0);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM gpu_classes WHERE gpus < 0"), 0);
}

/* One statement on c; its status, and the first row's first value in *out. */
static ExecStatusType
pq_run(PGconn *c, const char *sql, char *out, size_t outlen)
{
	PGresult *r = PQexec(c, sql);
	ExecStatusType st = PQresultStatus(r);

	if (out != NULL)
		snprintf(out, outlen, "%s",
		    st == PGRES_TUPLES_OK && PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "");
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
		print_message("pq_run: %s: %s", sql, PQerrorMessage(c));
	PQclear(r);
	return st;
}

/*
 * A GPU's class is counted at commit (migration 0020): a transaction that
 * has inserted GPUs holds no lock on their class's row until it commits,
 * so another node of the same class enrolls beside it (it waited for the
 * first transaction's end before: enrollments ran one at a time); an
 * update and a delete of GPUs inserted in the same transaction change
 * only its pending rows; after both commits gpu_classes equals the
 * grouping of gpus again.
 */
static void
test_classes_counted_at_commit(void **state)
{
	struct fixture *fx = *state;
	PGconn *a = PQconnectdb(fx->db_url), *b = PQconnectdb(fx->db_url);
	char before[32], during[32];
	static const char count_sql[] =
	    "SELECT coalesce(sum(k.gpus), 0) FROM gpu_classes k JOIN clusters c ON c.id = k.cluster_id "
	    "WHERE c.name = 'pend'";

	assert_int_equal(PQstatus(a), CONNECTION_OK);
	assert_int_equal(PQstatus(b), CONNECTION_OK);
	fx_sql_exec(fx, "INSERT INTO clusters (name) VALUES ('pend')");
	fx_sql_exec(fx,
	    "INSERT INTO nodes (cluster_id, name, hostname, cpu_millicores, memory_bytes) "
	    "SELECT c.id, 'pend' || i, 'pend' || i, 1000, 1000 "
	    "FROM clusters c, generate_series(0, 2) i WHERE c.name = 'pend'");
	/* one GPU of the class before, so that its row exists and is shared */
	fx_sql_exec(fx,
	    "INSERT INTO gpus (node_id, gpu_index, uuid, model, memory_mib, mig_enabled) "
	    "SELECT id, 0, 'GPU-9e9d0000-0000-4000-8000-000000000000', 'H100-80GB', 81559, "
	    "false FROM nodes WHERE name = 'pend0'");
	assert_int_equal(pq_run(a, count_sql, before, sizeof(before)), PGRES_TUPLES_OK);
	assert_string_equal(before, "1");
	assert_int_equal(pq_run(a, "BEGIN", NULL, 0), PGRES_COMMAND_OK);
	assert_int_equal(pq_run(a,
			     "INSERT INTO gpus (node_id, gpu_index, uuid, model, memory_mib, "
			     "mig_enabled) SELECT n.id, i, 'GPU-9e9d0000-0000-4000-8000-00000000010' || i, "
			     "'H100-80GB', 81559, false FROM nodes n, generate_series(0, 2) i "
			     "WHERE n.name = 'pend1'",
			     NULL, 0),
	    PGRES_COMMAND_OK);
	assert_int_equal(pq_run(a,
			     "UPDATE gpus SET mig_enabled = true "
			     "WHERE uuid = 'GPU-9e9d0000-0000-4000-8000-000000000101'",
			     NULL, 0),
	    PGRES_COMMAND_OK);
	assert_int_equal(pq_run(a,
			     "DELETE FROM gpu_health_intervals WHERE gpu_id = (SELECT id FROM gpus "
			     "WHERE uuid = 'GPU-9e9d0000-0000-4000-8000-000000000102')",
			     NULL, 0),
	    PGRES_COMMAND_OK);
	assert_int_equal(pq_run(a,
			     "DELETE FROM gpus WHERE uuid = 'GPU-9e9d0000-0000-4000-8000-000000000102'",
			     NULL, 0),
	    PGRES_COMMAND_OK);
	/* not counted yet, inside or outside */
	assert_int_equal(pq_run(a, count_sql, during, sizeof(during)), PGRES_TUPLES_OK);
	assert_string_equal(during, "1");
	assert_int_equal(fx_sql_int64(fx, count_sql), 1);
	/* another node of the same class goes on while the first is open */
	assert_int_equal(pq_run(b, "SET lock_timeout = '3s'", NULL, 0), PGRES_COMMAND_OK);
	assert_int_equal(pq_run(b,
			     "INSERT INTO gpus (node_id, gpu_index, uuid, model, memory_mib, "
			     "mig_enabled) SELECT id, 0, 'GPU-9e9d0000-0000-4000-8000-000000000200', "
			     "'H100-80GB', 81559, false FROM nodes WHERE name = 'pend2'",
			     NULL, 0),
	    PGRES_COMMAND_OK);
	assert_int_equal(fx_sql_int64(fx, count_sql), 2);
	assert_int_equal(pq_run(a, "COMMIT", NULL, 0), PGRES_COMMAND_OK);
	/* pend0, pend2, and of pend1 one GPU without MIG and one with */
	assert_int_equal(fx_sql_int64(fx, count_sql), 4);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT k.gpus FROM gpu_classes k JOIN clusters c ON c.id = k.cluster_id "
			     "WHERE c.name = 'pend' AND k.mig_enabled"),
	    1);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM gpu_class_pending"), 0);
	assert_classes_consistent(fx);
	PQfinish(a);
	PQfinish(b);
}

/*
 * A change of a GPU's class is counted at commit too (migration 0027): a
 * transaction that moved a GPU to another class (an instance readied or
 * released by a status report, a health or MIG change) holds no lock on
 * the shared class rows until it commits, so another transaction moves a
 * GPU of the same classes beside it (it waited for the first one's end
 * before: a status report held the row while it settled its pools, and
 * approvals queued behind it). After both commits gpu_classes equals the
 * grouping of gpus.
 */
static void
test_class_changes_counted_at_commit(void **state)
{
	struct fixture *fx = *state;
	PGconn *a = PQconnectdb(fx->db_url), *b = PQconnectdb(fx->db_url);
	static const char mig_sql[] =
	    "SELECT coalesce(sum(k.gpus), 0) FROM gpu_classes k JOIN clusters c ON c.id = k.cluster_id "
	    "WHERE c.name = 'cdel' AND k.mig_enabled";

	assert_int_equal(PQstatus(a), CONNECTION_OK);
	assert_int_equal(PQstatus(b), CONNECTION_OK);
	fx_sql_exec(fx, "INSERT INTO clusters (name) VALUES ('cdel')");
	fx_sql_exec(fx,
	    "INSERT INTO nodes (cluster_id, name, hostname, cpu_millicores, memory_bytes) "
	    "SELECT c.id, 'cdel' || i, 'cdel' || i, 1000, 1000 "
	    "FROM clusters c, generate_series(0, 1) i WHERE c.name = 'cdel'");
	fx_sql_exec(fx,
	    "INSERT INTO gpus (node_id, gpu_index, uuid, model, memory_mib, mig_enabled) "
	    "SELECT n.id, i, 'GPU-cde10000-0000-4000-8000-0000000000' || right(n.name, 1) || i, 'H100-80GB', "
	    "81559, false FROM nodes n, generate_series(0, 1) i WHERE n.name LIKE 'cdel_'");
	assert_int_equal(fx_sql_int64(fx, mig_sql), 0);
	/* a: one GPU of node cdel0 into MIG mode, and one deleted, not committed */
	assert_int_equal(pq_run(a, "BEGIN", NULL, 0), PGRES_COMMAND_OK);
	assert_int_equal(pq_run(a,
			     "UPDATE gpus SET mig_enabled = true "
			     "WHERE uuid = 'GPU-cde10000-0000-4000-8000-000000000000'",
			     NULL, 0),
	    PGRES_COMMAND_OK);
	assert_int_equal(pq_run(a,
			     "DELETE FROM gpu_health_intervals WHERE gpu_id = (SELECT id FROM gpus "
			     "WHERE uuid = 'GPU-cde10000-0000-4000-8000-000000000001')",
			     NULL, 0),
	    PGRES_COMMAND_OK);
	assert_int_equal(pq_run(a,
			     "DELETE FROM gpus WHERE uuid = 'GPU-cde10000-0000-4000-8000-000000000001'",
			     NULL, 0),
	    PGRES_COMMAND_OK);
	/* b: the same classes, at once (with the rows held by a it would time out) */
	assert_int_equal(pq_run(b, "SET lock_timeout = '2s'", NULL, 0), PGRES_COMMAND_OK);
	assert_int_equal(pq_run(b,
			     "UPDATE gpus SET mig_enabled = true "
			     "WHERE uuid = 'GPU-cde10000-0000-4000-8000-000000000010'",
			     NULL, 0),
	    PGRES_COMMAND_OK);
	assert_int_equal(fx_sql_int64(fx, mig_sql), 1);
	assert_int_equal(pq_run(a, "COMMIT", NULL, 0), PGRES_COMMAND_OK);
	assert_int_equal(fx_sql_int64(fx, mig_sql), 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT k.gpus FROM gpu_classes k JOIN clusters c ON c.id = k.cluster_id "
			     "WHERE c.name = 'cdel' AND NOT k.mig_enabled"),
	    1);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM gpu_class_delta"), 0);
	assert_classes_consistent(fx);
	PQfinish(a);
	PQfinish(b);
}

/* A request with an optional body. */
static struct gp_client_response *
req_any(struct fixture *fx, const char *token, const char *method, const char *path,
    const char *body)
{
	if (body != NULL)
		return fx_request(fx, token, method, path, "%s", body);
	return fx_request(fx, token, method, path, NULL);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Run SQL in the test database; its SQLSTATE, or "ok". */
static const char *
try_sql(struct fixture *fx, const char *sql)
{
	fx_sql_exec(fx,
	    "CREATE OR REPLACE FUNCTION test_try(q text) RETURNS text LANGUAGE plpgsql AS $$ "
	    "BEGIN EXECUTE q; RETURN 'ok'; EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE; END $$");
	return fx_sql_text(fx, "SELECT test_try($1)", sql);
}

/* ---- the catalog ---- */

/*
 * The migration's gpu_models and mig_profiles rows equal the catalog the
 * binary embeds and serves, field by field; product names map to models;
 * any authenticated user reads it.
 */
static void
test_catalog(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *user = fixture_create_user(fx, "catalog-reader", "none");
	const char *lines[256], *api = "", *db;
	size_t n, nl = 0;

	r = fx_request(fx, user, "GET", "/v1/catalog/models?limit=500", NULL);
	assert_status(r, 200);
	n = fx_json_len(r->json, "items");
	assert_int_equal(n, 10);
	assert_json_null(r->json, "next_cursor");
	/* one line per model and per profile, compared sorted with the tables */
	for (size_t i = 0; i < n; i++) {
		struct json_object *m = json_object_array_get_idx(fx_json(r->json, "items"), i);
		size_t np = fx_json_len(m, "profiles");

		assert_true(nl < 256);
		lines[nl++] = fx_str(fx, "%s:%lld:%lld:%lld:%lld:%s", fx_json_str(m, "model"),
		    (long long)fx_json_int(m, "memory_mib"),
		    (long long)fx_json_int(m, "memory_slices"),
		    (long long)fx_json_int(m, "compute_slices"),
		    (long long)fx_json_int(m, "full_slices"),
		    json_object_get_boolean(fx_json(m, "mig_capable")) ? "t" : "f");
		for (size_t j = 0; j < np; j++) {
			struct json_object *p =
			    json_object_array_get_idx(fx_json(m, "profiles"), j);
			struct json_object *pl = fx_json(p, "placements");
			const char *starts = "";

			for (size_t k = 0; k < json_object_array_length(pl); k++)
				starts = fx_str(fx, "%s%s%d", starts, k ? "," : "",
				    json_object_get_int(json_object_array_get_idx(pl, k)));
			assert_true(nl < 256);
			lines[nl++] = fx_str(fx, "%s/%s:%lld:%lld:%lld:%lld:%lld:{%s}",
			    fx_json_str(m, "model"), fx_json_str(p, "name"),
			    (long long)fx_json_int(p, "id"),
			    (long long)fx_json_int(p, "compute_slices"),
			    (long long)fx_json_int(p, "memory_slices"),
			    (long long)fx_json_int(p, "max_instances"),
			    (long long)fx_json_int(p, "memory_mib"), starts);
		}
	}
	qsort(lines, nl, sizeof(lines[0]), cmp_str);
	for (size_t i = 0; i < nl; i++)
		api = fx_str(fx, "%s%s%s", api, i ? ";" : "", lines[i]);
	db = fx_sql_text(fx,
	    "SELECT string_agg(l, ';' ORDER BY l COLLATE \"C\") FROM ("
	    "SELECT id || ':' || memory_mib || ':' || memory_slices || ':' || compute_slices || ':' || "
	    "full_slices || ':' || CASE WHEN mig_capable THEN 't' ELSE 'f' END AS l FROM gpu_models "
	    "UNION ALL SELECT model || '/' || name || ':' || profile_id || ':' || compute_slices || ':' || "
	    "memory_slices || ':' || max_instances || ':' || memory_mib || ':' || placements::text "
	    "FROM mig_profiles) x");
	assert_string_equal(api, db);
	assert_int_equal(nl, 10 + 40);

	/* the product name and PCI id maps */
	r = fx_request(fx, user, "GET",
	    "/v1/catalog/models?product_name=nvidia%20h100%2080gb%20hbm3", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].model", "H100-80GB");
	r = fx_request(fx, user, "GET", "/v1/catalog/models?pci_device_id=0x233510de", NULL);
	assert_json_str(r->json, "items[0].model", "H200-141GB");
	r = fx_request(fx, user, "GET", "/v1/catalog/models?product_name=NVIDIA%20Z9", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	r = fx_request(fx, user, "GET", "/v1/catalog/models?mig_capable=false", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 4);
	r = fx_request(fx, user, "GET", "/v1/catalog/models?mig_capable=maybe", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "mig_capable");
	/* paging through the catalog */
	r = fx_request(fx, user, "GET", "/v1/catalog/models?limit=3", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 3);
	assert_json_str(r->json, "items[0].model", "A30-24GB");
	r = fx_request(fx, user, "GET",
	    fx_str(fx, "/v1/catalog/models?limit=3&cursor=%s", fx_json_str(r->json, "next_cursor")),
	    NULL);
	assert_json_str(r->json, "items[0].model", "H100-80GB");

	r = fx_request(fx, user, "GET", "/v1/catalog/models/H100-80GB", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "profiles[4].name", "3g.40gb");
	assert_json_int(r->json, "profiles[4].placements[1]", 4);
	assert_json_str(r->json, "profiles[4].k8s_resource", "nvidia.com/mig-3g.40gb");
	assert_json_str(r->json, "k8s_resource", "nvidia.com/gpu");
	r = fx_request(fx, user, "GET", "/v1/catalog/models/H100", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, NULL, "GET", "/v1/catalog/models", NULL);
	assert_problem(r, 401, "unauthorized");
}

/* ---- capacity figures over a mixed fleet ---- */

static void
test_mixed_fleet(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct json_object *m;

	mk_cluster(fx, "mix");
	mk_node(fx, "mix", "mix-h100", NULL);
	mk_node(fx, "mix", "mix-h200", NULL);
	mk_node(fx, "mix", "mix-a100", NULL);
	mk_node(fx, "mix", "mix-l40s", NULL);
	/* H100 #0: 2 x 3g.40gb, which strands the 7th compute slice; #1 empty */
	r = mk_gpu(fx, "mix-h100", 0, 100, "H100-80GB",
	    "[{\"profile\":\"3g.40gb\",\"start\":0},{\"profile\":\"3g.40gb\",\"start\":4}]");
	assert_json_int(r->json, "used_mask", 255);
	assert_json_int(r->json, "free_slices", 0);
	assert_true(json_object_get_boolean(fx_json(r->json, "mig_enabled")));
	assert_json_str(r->json, "layout[1].profile", "3g.40gb");
	assert_json_int(r->json, "layout[1].start", 4);
	assert_json_int(r->json, "layout[1].size", 4);
	assert_false(json_object_get_boolean(fx_json(r->json, "layout[1].managed")));
	mk_gpu(fx, "mix-h100", 1, 101, "H100-80GB", NULL);
	mk_gpu(fx, "mix-h200", 0, 102, "H200-141GB", NULL);
	/* A100-40GB: 1g.5gb at 0, 1 and 5 block every 3g placement */
	mk_gpu(fx, "mix-a100", 0, 103, "A100-40GB",
	    "[{\"profile\":\"1g.5gb\",\"start\":0},{\"profile\":\"1g.5gb\",\"start\":1},"
	    "{\"profile\":\"1g.5gb\",\"start\":5}]");
	/* L40S: one whole GPU in use, one free */
	r = mk_gpu(fx, "mix-l40s", 0, 104, "L40S-48GB", "[{\"profile\":\"full\",\"start\":0}]");
	assert_json_int(r->json, "layout[0].size", 1);
	mk_gpu(fx, "mix-l40s", 1, 105, "L40S-48GB", NULL);

	r = capacity(fx, "mix");
	assert_json_str(r->json, "cluster", "mix");
	assert_int_equal(fx_json_len(r->json, "models"), 4);
	/* catalog order */
	assert_json_str(r->json, "models[0].model", "A100-40GB");
	assert_json_str(r->json, "models[1].model", "H100-80GB");
	assert_json_str(r->json, "models[2].model", "H200-141GB");
	assert_json_str(r->json, "models[3].model", "L40S-48GB");

	m = cap_model(r, "H100-80GB");
	assert_json_int(m, "gpus.total", 2);
	assert_json_int(m, "gpus.healthy", 2);
	assert_json_int(m, "gpus.mig_enabled", 1);
	assert_json_int(m, "gpus.placeable", 2);
	assert_json_int(m, "compute_slices.total", 14);
	assert_json_int(m, "compute_slices.used", 6);
	assert_json_int(m, "compute_slices.free", 8);
	assert_json_int(m, "compute_slices.stranded", 1);
	assert_json_int(m, "memory_slices.total", 16);
	assert_json_int(m, "memory_slices.used", 8);
	assert_json_int(m, "memory_slices.free", 8);
	assert_json_str(m, "profiles[0].profile", "full");
	assert_int_equal(prof(m, "full", "allocated"), 0);
	assert_int_equal(prof(m, "full", "placeable"), 1);
	assert_int_equal(prof(m, "3g.40gb", "allocated"), 2);
	assert_int_equal(prof(m, "3g.40gb", "placeable"), 2);
	assert_int_equal(prof(m, "1g.10gb", "placeable"), 7);
	assert_int_equal(prof(m, "1g.10gb+me", "placeable"), 1);
	assert_int_equal(prof(m, "1g.20gb", "placeable"), 4);
	assert_int_equal(prof(m, "2g.20gb", "placeable"), 3);
	assert_int_equal(prof(m, "4g.40gb", "placeable"), 1);
	assert_int_equal(prof(m, "7g.80gb", "placeable"), 1);

	m = cap_model(r, "A100-40GB");
	assert_json_int(m, "gpus.total", 1);
	assert_json_int(m, "compute_slices.used", 3);
	assert_json_int(m, "compute_slices.free", 4);
	/* the four free compute slices are all usable by 1g.5gb at 2, 3, 4, 6 */
	assert_json_int(m, "compute_slices.stranded", 0);
	assert_json_int(m, "memory_slices.used", 3);
	assert_int_equal(prof(m, "1g.5gb", "allocated"), 3);
	assert_int_equal(prof(m, "1g.5gb", "placeable"), 4);
	assert_int_equal(prof(m, "3g.20gb", "placeable"), 0);
	assert_int_equal(prof(m, "4g.20gb", "placeable"), 0);
	assert_int_equal(prof(m, "2g.10gb", "placeable"), 1);
	assert_int_equal(prof(m, "1g.10gb", "placeable"), 2);
	assert_int_equal(prof(m, "full", "placeable"), 0);

	m = cap_model(r, "H200-141GB");
	assert_json_int(m, "gpus.total", 1);
	assert_json_int(m, "gpus.mig_enabled", 0);
	assert_json_int(m, "compute_slices.total", 7);
	assert_json_int(m, "compute_slices.used", 0);
	assert_json_int(m, "compute_slices.stranded", 0);
	assert_int_equal(prof(m, "full", "placeable"), 1);
	assert_int_equal(prof(m, "1g.18gb", "placeable"), 7);
	assert_int_equal(prof(m, "3g.71gb", "placeable"), 2);

	m = cap_model(r, "L40S-48GB");
	assert_false(json_object_get_boolean(fx_json(m, "mig_capable")));
	assert_json_int(m, "gpus.total", 2);
	assert_json_int(m, "compute_slices.total", 2);
	assert_json_int(m, "compute_slices.used", 1);
	assert_json_int(m, "memory_slices.total", 2);
	assert_json_int(m, "memory_slices.used", 1);
	assert_int_equal(fx_json_len(m, "profiles"), 1);
	assert_int_equal(prof(m, "full", "allocated"), 1);
	assert_int_equal(prof(m, "full", "placeable"), 1);

	/* the model filter; a model without GPUs is still answered */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/capacity?cluster=mix&model=H100-80GB",
	    NULL);
	assert_int_equal(fx_json_len(r->json, "models"), 1);
	assert_json_int(r->json, "models[0].gpus.total", 2);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/capacity?cluster=mix&model=A30-24GB", NULL);
	assert_int_equal(fx_json_len(r->json, "models"), 1);
	assert_json_int(r->json, "models[0].gpus.total", 0);
	assert_int_equal(prof(cap_model(r, "A30-24GB"), "4g.24gb", "placeable"), 0);

	/* node figures derived from its GPUs */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes/mix-h100", NULL);
	assert_json_str(r->json, "gpu_model", "H100-80GB");
	assert_json_int(r->json, "gpu_count", 2);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/clusters/mix", NULL);
	assert_json_int(r->json, "nodes", 4);
	assert_json_int(r->json, "gpus", 6);
	/* the database mirror agrees with the allocations */
	assert_string_equal(fx_sql_text(fx, "SELECT layout FROM gpus WHERE uuid = $1",
				uuid_of(fx, 103)),
	    "1g.5gb@0,1g.5gb@1,1g.5gb@5");
	assert_int_equal(fx_sql_int64(fx, "SELECT used_mask FROM gpus WHERE uuid = $1",
			     uuid_of(fx, 103)),
	    0x23);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
			     "WHERE g.cluster_id = (SELECT id FROM clusters WHERE name = 'mix') "
			     "AND a.pool_id IS NULL AND a.state = 'ready'"),
	    6);
}

/* ---- simulate ---- */

static void
test_simulate(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *before, *gpu = uuid_of(fx, 200);

	mk_cluster(fx, "sim");
	mk_node(fx, "sim", "sim-1", NULL);
	mk_gpu(fx, "sim-1", 0, 200, "H100-80GB", NULL);
	before = state_of(fx);

	/* 2 x 3g.40gb + 1 x 1g.10gb does not fit one H100 (3 + 3 + 1 = 7 compute slices notwithstanding) */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"sim\",\"items\":[\"H100-80GB/3g.40gb=2\","
	    "{\"model\":\"H100-80GB\",\"profile\":\"1g.10gb\",\"count\":1}]}");
	assert_status(r, 200);
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_int_equal(fx_json_len(r->json, "placements"), 0);
	assert_int_equal(fx_json_len(r->json, "short"), 1);
	assert_json_str(r->json, "short[0].model", "H100-80GB");
	assert_json_str(r->json, "short[0].profile", "1g.10gb");
	assert_json_int(r->json, "short[0].missing", 1);

	/* 3g.40gb + 2 x 2g.20gb does: the 3g at start 4, the 2g at 0 and 2 */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"sim\",\"items\":[\"H100-80GB/2g.20gb=2\",\"H100-80GB/3g.40gb=1\"]}");
	assert_status(r, 200);
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_int_equal(fx_json_len(r->json, "short"), 0);
	assert_int_equal(fx_json_len(r->json, "placements"), 3);
	assert_json_str(r->json, "placements[0].profile", "2g.20gb");
	assert_json_int(r->json, "placements[0].start", 0);
	assert_json_int(r->json, "placements[0].size", 2);
	assert_json_str(r->json, "placements[1].profile", "2g.20gb");
	assert_json_int(r->json, "placements[1].start", 2);
	assert_json_str(r->json, "placements[2].profile", "3g.40gb");
	assert_json_int(r->json, "placements[2].start", 4);
	assert_json_int(r->json, "placements[2].size", 4);
	for (int i = 0; i < 3; i++) {
		assert_json_str(r->json, fx_str(fx, "placements[%d].gpu_uuid", i), gpu);
		assert_json_str(r->json, fx_str(fx, "placements[%d].node", i), "sim-1");
		assert_json_int(r->json, fx_str(fx, "placements[%d].gpu_index", i), 0);
		assert_json_str(r->json, fx_str(fx, "placements[%d].model", i), "H100-80GB");
	}
	/* 4g.40gb + 3g.40gb fits; 7 x 1g.10gb fits; 8 do not */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"sim\",\"items\":[\"H100-80GB/3g.40gb=1\",\"H100-80GB/4g.40gb=1\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_int(r->json, "placements[0].start", 4);
	assert_json_int(r->json, "placements[1].start", 0);
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"sim\",\"items\":[\"H100-80GB/1g.10gb=7\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"sim\",\"items\":[\"H100-80GB/1g.10gb=8\"]}");
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_int(r->json, "short[0].missing", 1);
	/* a whole GPU: start 0, size 8 */
	r = simulate(fx, fx->admin_token, "{\"cluster\":\"sim\",\"items\":[\"H100-80GB/full=1\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_str(r->json, "placements[0].profile", "full");
	assert_json_int(r->json, "placements[0].start", 0);
	assert_json_int(r->json, "placements[0].size", 8);
	/* a model the cluster has none of: everything short */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"sim\",\"items\":[\"A30-24GB/1g.6gb=3\"]}");
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_int(r->json, "short[0].missing", 3);

	/* a second H100: now 2 x 3g + 1g fits, the 1g packed next to a 3g */
	mk_gpu(fx, "sim-1", 1, 201, "H100-80GB", NULL);
	before = state_of(fx);
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"sim\",\"items\":[\"H100-80GB/3g.40gb=2\",\"H100-80GB/1g.10gb=1\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_int_equal(fx_json_len(r->json, "placements"), 3);

	/* existing instances are respected: with 3g at 4 on GPU 0, a 4g goes to GPU 0 at 0 */
	fx_sql_exec(fx,
	    "INSERT INTO allocations (gpu_id, profile, start, size, state) "
	    "SELECT id, '3g.40gb', 4, 4, 'ready' FROM gpus WHERE uuid = $1",
	    gpu);
	before = state_of(fx);
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"sim\",\"items\":[\"H100-80GB/4g.40gb=1\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_str(r->json, "placements[0].gpu_uuid", gpu);
	assert_json_int(r->json, "placements[0].start", 0);
	/* ... and two whole GPUs do not fit any more */
	r = simulate(fx, fx->admin_token, "{\"cluster\":\"sim\",\"items\":[\"H100-80GB/full=2\"]}");
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_int(r->json, "short[0].missing", 1);

	/* nothing changed: no allocation, layout, generation or audit row */
	assert_string_equal(state_of(fx), before);

	/* without a cluster the whole fleet counts: other clusters' GPUs too */
	r = simulate(fx, fx->admin_token, "{\"items\":[\"H100-80GB/full=2\"]}");
	assert_status(r, 200);
	assert_string_equal(state_of(fx), before);
}

/*
 * Among alike GPUs the lowest (node, index) is chosen, GPUs already
 * carrying instances are filled first, and the answer is the same with
 * many alike GPUs as with few (candidates are read per layout class).
 */
static void
test_simulate_choice(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;

	mk_cluster(fx, "pick");
	for (int n = 0; n < 4; n++) {
		mk_node(fx, "pick", fx_str(fx, "pick-%d", n), NULL);
		for (int i = 0; i < 8; i++)
			mk_gpu(fx, fx_str(fx, "pick-%d", n), i, 1000 + n * 8 + i, "H100-80GB",
			    n == 2 && i == 5 ? "[{\"profile\":\"3g.40gb\",\"start\":0}]" : NULL);
	}
	/* a 1g packs next to the 3g on pick-2 #5, in the slot that keeps a 3g spot free */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"pick\",\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_str(r->json, "placements[0].node", "pick-2");
	assert_json_int(r->json, "placements[0].gpu_index", 5);
	assert_int_equal(fx_json_int(r->json, "placements[0].start") >= 4, 1);
	/* whole GPUs: the first empty ones in node and index order */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"pick\",\"items\":[\"H100-80GB/full=10\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_int_equal(fx_json_len(r->json, "placements"), 10);
	assert_json_str(r->json, "placements[0].node", "pick-0");
	assert_json_int(r->json, "placements[0].gpu_index", 0);
	assert_json_str(r->json, "placements[9].node", "pick-1");
	assert_json_int(r->json, "placements[9].gpu_index", 1);
	/* 31 empty GPUs: 31 whole GPUs fit, 32 do not */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"pick\",\"items\":[\"H100-80GB/full=31\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_str(r->json, "placements[30].node", "pick-3");
	assert_json_int(r->json, "placements[30].gpu_index", 7);
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"pick\",\"items\":[\"H100-80GB/full=32\"]}");
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_int(r->json, "short[0].missing", 1);
	/* 3g: 2 next to ... the busy GPU takes one at 4 first, then empty GPUs in order */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"pick\",\"items\":[\"H100-80GB/3g.40gb=3\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_str(r->json, "placements[0].node", "pick-0");
	assert_json_int(r->json, "placements[0].gpu_index", 0);
	assert_json_str(r->json, "placements[2].node", "pick-2");
	assert_json_int(r->json, "placements[2].gpu_index", 5);
	assert_json_int(r->json, "placements[2].start", 4);
	/* cordoning pick-0 moves the answer to pick-1 */
	assert_status(fx_request(fx, fx->admin_token, "POST", "/v1/nodes/pick-0/cordon", NULL),
	    200);
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"pick\",\"items\":[\"H100-80GB/full=1\"]}");
	assert_json_str(r->json, "placements[0].node", "pick-1");
	assert_json_int(r->json, "placements[0].gpu_index", 0);
	assert_classes_consistent(fx);
}

/*
 * A request the greedy pass cannot place but the exact search can: the
 * simulation reads the best classes first, falls short, then reads every
 * class that could help and searches (placement.h test_search_fallback).
 */
static void
test_simulate_search(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;

	mk_cluster(fx, "srch");
	mk_node(fx, "srch", "srch-1", NULL);
	mk_gpu(fx, "srch-1", 0, 1200, "H100-80GB",
	    "[{\"profile\":\"1g.10gb\",\"start\":4},{\"profile\":\"1g.10gb\",\"start\":6}]");
	mk_gpu(fx, "srch-1", 1, 1201, "H100-80GB",
	    "[{\"profile\":\"1g.10gb+me\",\"start\":0},{\"profile\":\"1g.20gb\",\"start\":2}]");
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"srch\",\"items\":[\"H100-80GB/3g.40gb=1\",\"H100-80GB/2g.20gb=2\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_false(json_object_get_boolean(fx_json(r->json, "search_exhausted")));
	assert_int_equal(fx_json_len(r->json, "placements"), 3);
	assert_json_str(r->json, "placements[0].gpu_uuid", uuid_of(fx, 1201));
	assert_json_int(r->json, "placements[0].start", 4);
	assert_json_str(r->json, "placements[1].gpu_uuid", uuid_of(fx, 1200));
	assert_json_int(r->json, "placements[1].start", 0);
	assert_json_str(r->json, "placements[2].gpu_uuid", uuid_of(fx, 1200));
	assert_json_int(r->json, "placements[2].start", 2);
	/* one 2g.20gb more does not fit anywhere */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"srch\",\"items\":[\"H100-80GB/3g.40gb=1\",\"H100-80GB/2g.20gb=3\"]}");
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_int_equal(fx_json_len(r->json, "placements"), 0);
}

/* ---- filters and pagination ---- */

static void
test_filters(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *path;
	int seen = 0;

	mk_cluster(fx, "flt");
	mk_cluster(fx, "flt2");
	mk_node(fx, "flt", "flt-a", "{\"zone\":\"a\",\"gpupool.dev/tier\":\"gold\"}");
	mk_node(fx, "flt", "flt-b", "{\"zone\":\"b\"}");
	mk_node(fx, "flt2", "flt-c", "{\"zone\":\"a\"}");
	mk_gpu(fx, "flt-a", 0, 300, "H100-80GB", "[{\"profile\":\"1g.10gb\",\"start\":0}]");
	mk_gpu(fx, "flt-a", 1, 301, "H100-80GB", NULL);
	mk_gpu(fx, "flt-b", 0, 302, "A100-40GB", NULL);
	mk_gpu(fx, "flt-c", 0, 303, "H100-80GB", NULL);

	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?cluster=flt", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 2);
	assert_json_str(r->json, "items[0].name", "flt-a");
	assert_json_str(r->json, "items[1].name", "flt-b");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?cluster=flt&model=A100-40GB", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].name", "flt-b");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?label=zone=a", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 2);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?label=zone=a,gpupool.dev/tier=gold",
	    NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].name", "flt-a");
	assert_string_equal(json_object_get_string(
				json_object_object_get(fx_json(r->json, "items[0].labels"),
				    "gpupool.dev/tier")),
	    "gold");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?cluster=flt2&status=ready", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?cluster=flt&status=cordoned", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 0);

	r = fx_request(fx, fx->admin_token, "GET", "/v1/gpus?cluster=flt", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 3);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/gpus?cluster=flt&model=H100-80GB", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 2);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/gpus?node=flt-a&mig_enabled=true", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_str(r->json, "items[0].uuid", uuid_of(fx, 300));
	assert_json_str(r->json, "items[0].layout[0].profile", "1g.10gb");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/gpus?node=flt-a&mig_enabled=false", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 1);
	assert_json_int(r->json, "items[0].index", 1);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/gpus?cluster=flt&health=failed", NULL);
	assert_int_equal(fx_json_len(r->json, "items"), 0);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes/flt-a/gpus", NULL);
	assert_status(r, 200);
	assert_int_equal(fx_json_len(r->json, "items"), 2);
	assert_json_int(r->json, "items[0].index", 0);
	assert_json_int(r->json, "items[1].index", 1);

	/* limit=1 walks every GPU of the cluster once, in order, layouts and all */
	path = "/v1/gpus?cluster=flt&limit=1";
	for (;;) {
		struct json_object *next;

		r = fx_request(fx, fx->admin_token, "GET", path, NULL);
		assert_status(r, 200);
		assert_int_equal(fx_json_len(r->json, "items"), 1);
		assert_json_str(r->json, "items[0].uuid", uuid_of(fx, 300 + seen));
		assert_int_equal(fx_json_len(r->json, "items[0].layout"), seen == 0 ? 1 : 0);
		seen++;
		next = fx_json(r->json, "next_cursor");
		if (next == NULL)
			break;
		path = fx_str(fx, "/v1/gpus?cluster=flt&limit=1&cursor=%s",
		    json_object_get_string(next));
	}
	assert_int_equal(seen, 3);
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?cluster=flt&limit=1", NULL);
	r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/nodes?cluster=flt&limit=1&cursor=%s",
		fx_json_str(r->json, "next_cursor")),
	    NULL);
	assert_json_str(r->json, "items[0].name", "flt-b");
	assert_json_null(r->json, "next_cursor");

	/* filters naming nothing are refused, not silently empty */
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?cluster=nope", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "cluster");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/gpus?model=H100", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "model");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/gpus?node=nope", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "node");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?status=busy", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "status");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes?label=zone", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "label");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/gpus?mig_enabled=yes", NULL);
	assert_error_field(r, "mig_enabled");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/capacity?cluster=nope", NULL);
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "cluster");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/capacity?model=NVIDIA%20H100%2080GB%20HBM3",
	    NULL);
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "model");
}

/* ---- cordon, drain, health ---- */

static void
test_cordon(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *gpu = uuid_of(fx, 400);
	int64_t audits;

	mk_cluster(fx, "cord");
	mk_node(fx, "cord", "cord-1", NULL);
	mk_gpu(fx, "cord-1", 0, 400, "H100-80GB", NULL);
	r = capacity(fx, "cord");
	assert_int_equal(prof(cap_model(r, "H100-80GB"), "full", "placeable"), 1);

	audits = fx_sql_int64(fx, "SELECT count(*) FROM audit_log WHERE action = 'node.cordon'");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/cord-1/cordon",
	    "{\"reason\":\"bios update\"}");
	assert_status(r, 200);
	assert_json_str(r->json, "status", "cordoned");
	assert_json_str(r->json, "status_reason", "bios update");
	assert_false(json_object_get_boolean(fx_json(r->json, "placeable")));
	assert_json_int(r->json, "generation", 2);
	assert_string_equal(r->etag, "\"2\"");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.cordon' "
			     "AND object_id = 'cord-1' AND after->>'status' = 'cordoned' "
			     "AND before->>'status' = 'ready'"),
	    1);
	/* the GPU mirror follows the node */
	assert_string_equal(fx_sql_text(fx, "SELECT node_status FROM gpus WHERE uuid = $1", gpu),
	    "cordoned");

	r = capacity(fx, "cord");
	assert_json_int(cap_model(r, "H100-80GB"), "gpus.total", 1);
	assert_json_int(cap_model(r, "H100-80GB"), "gpus.placeable", 0);
	assert_int_equal(prof(cap_model(r, "H100-80GB"), "full", "placeable"), 0);
	assert_int_equal(prof(cap_model(r, "H100-80GB"), "1g.10gb", "placeable"), 0);
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"cord\",\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));
	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "/v1/gpus/%s", gpu), NULL);
	assert_false(json_object_get_boolean(fx_json(r->json, "placeable")));

	/* cordon again without a reason: no change, no audit row */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/cord-1/cordon", NULL);
	assert_status(r, 200);
	assert_json_int(r->json, "generation", 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.cordon'"),
	    audits + 1);

	/* drain; cordoning a draining node is a conflict */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/cord-1/drain", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "status", "draining");
	assert_json_null(r->json, "status_reason");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/cord-1/cordon", NULL);
	assert_problem(r, 409, "conflict");
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"cord\",\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));

	/* uncordon: placeable again; a stale If-Match is refused */
	r = fx_request_h(fx, fx->admin_token, "POST", "/v1/nodes/cord-1/uncordon",
	    ((const char *[]){ "If-Match: \"2\"", NULL }), NULL);
	assert_problem(r, 412, "precondition_failed");
	r = fx_request_h(fx, fx->admin_token, "POST", "/v1/nodes/cord-1/uncordon",
	    ((const char *[]){ "If-Match: \"3\"", NULL }), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "status", "ready");
	r = capacity(fx, "cord");
	assert_int_equal(prof(cap_model(r, "H100-80GB"), "full", "placeable"), 1);
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"cord\",\"items\":[\"H100-80GB/1g.10gb=1\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));

	/* a failed GPU leaves placement; back to ok clears the reason */
	r = fx_request(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", gpu),
	    "{\"health\":\"failed\",\"health_reason\":\"XID 79\"}");
	assert_status(r, 200);
	assert_json_str(r->json, "health", "failed");
	assert_json_str(r->json, "health_reason", "XID 79");
	r = capacity(fx, "cord");
	assert_json_int(cap_model(r, "H100-80GB"), "gpus.healthy", 0);
	assert_int_equal(prof(cap_model(r, "H100-80GB"), "full", "placeable"), 0);
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"cord\",\"items\":[\"H100-80GB/full=1\"]}");
	assert_false(json_object_get_boolean(fx_json(r->json, "fits")));
	r = fx_request(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", gpu),
	    "{\"health\":\"ok\"}");
	assert_status(r, 200);
	assert_json_null(r->json, "health_reason");
	r = capacity(fx, "cord");
	assert_int_equal(prof(cap_model(r, "H100-80GB"), "full", "placeable"), 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'gpu.update' "
			     "AND object_id = $1",
			     gpu),
	    2);
	assert_classes_consistent(fx);
}

/* ---- bad input ---- */

static void
test_bad_input(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *before;

	mk_cluster(fx, "bad");
	mk_node(fx, "bad", "bad-1", NULL);
	mk_gpu(fx, "bad-1", 0, 500, "H100-80GB", NULL);
	before = state_of(fx);

	/* GPUs: unknown model, a product name for a model, index out of range */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H100\"}", uuid_of(fx, 501));
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "model");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"NVIDIA H100 80GB HBM3\"}", uuid_of(fx, 501));
	assert_problem(r, 422, "validation_failed");
	assert_non_null(strstr(r->body, "H100-80GB"));
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":16,\"uuid\":\"%s\",\"model\":\"H100-80GB\"}", uuid_of(fx, 501));
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "index");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":-1,\"uuid\":\"%s\",\"model\":\"H100-80GB\"}", uuid_of(fx, 501));
	assert_error_field(r, "index");
	/* duplicate UUID (in any case), duplicate index on the node */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"GPU-000001F4-0000-4000-8000-0000000001F4\",\"model\":\"H100-80GB\"}");
	assert_problem(r, 409, "conflict");
	assert_non_null(strstr(r->body, "uuid"));
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":0,\"uuid\":\"%s\",\"model\":\"H100-80GB\"}", uuid_of(fx, 501));
	assert_problem(r, 409, "conflict");
	assert_non_null(strstr(r->body, "index"));
	/* malformed UUID, unknown field, unknown node */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"GPU-xyz\",\"model\":\"H100-80GB\",\"colour\":1}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "uuid");
	assert_error_field(r, "colour");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/nope/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H100-80GB\"}", uuid_of(fx, 501));
	assert_problem(r, 404, "not_found");
	/* instances the hardware would refuse */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H100-80GB\","
	    "\"instances\":[{\"profile\":\"3g.40gb\",\"start\":2}]}",
	    uuid_of(fx, 501));
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "instances[0]");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H100-80GB\",\"instances\":["
	    "{\"profile\":\"3g.40gb\",\"start\":0},{\"profile\":\"3g.40gb\",\"start\":4},"
	    "{\"profile\":\"1g.10gb\",\"start\":3}]}",
	    uuid_of(fx, 501));
	assert_error_field(r, "instances[2]");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H100-80GB\",\"instances\":["
	    "{\"profile\":\"1g.10gb+me\",\"start\":0},{\"profile\":\"1g.10gb+me\",\"start\":1}]}",
	    uuid_of(fx, 501));
	assert_error_field(r, "instances[1]");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H100-80GB\",\"instances\":["
	    "{\"profile\":\"full\",\"start\":0},{\"profile\":\"1g.10gb\",\"start\":0}]}",
	    uuid_of(fx, 501));
	assert_error_field(r, "instances[1]");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H100-80GB\",\"instances\":["
	    "{\"profile\":\"3g.20gb\",\"start\":0}]}",
	    uuid_of(fx, 501));
	assert_error_field(r, "instances[0].profile");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H100-80GB\",\"mig_enabled\":false,"
	    "\"instances\":[{\"profile\":\"1g.10gb\",\"start\":0}]}",
	    uuid_of(fx, 501));
	assert_error_field(r, "mig_enabled");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes/bad-1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"L40S-48GB\",\"mig_enabled\":true}",
	    uuid_of(fx, 501));
	assert_error_field(r, "mig_enabled");
	assert_string_equal(state_of(fx), before);

	/* nodes and clusters */
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes",
	    "{\"name\":\"bad-2\",\"cluster\":\"nope\"}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "cluster");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes",
	    "{\"name\":\"bad-1\",\"cluster\":\"bad\"}");
	assert_problem(r, 409, "conflict");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes",
	    "{\"name\":\"Bad_Node\",\"cluster\":\"bad\",\"cpu_millicores\":-1,"
	    "\"labels\":{\"bad key!\":\"x\",\"ok\":\"not ok!\",\"n\":1}}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "name");
	assert_error_field(r, "cpu_millicores");
	assert_error_field(r, "labels.bad key!");
	assert_error_field(r, "labels.ok");
	assert_error_field(r, "labels.n");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"bad\"}");
	assert_problem(r, 409, "conflict");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters", "{\"name\":\"-x\",\"zone\":1}");
	assert_error_field(r, "name");
	assert_error_field(r, "zone");
	r = fx_request(fx, fx->admin_token, "DELETE", "/v1/clusters/bad", NULL);
	assert_problem(r, 409, "conflict");
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/nodes/bad-1",
	    "{\"status\":\"ready\",\"cluster\":\"x\"}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "status");
	assert_error_field(r, "cluster");
	r = fx_request_h(fx, fx->admin_token, "PATCH", "/v1/nodes/bad-1",
	    ((const char *[]){ "If-Match: \"7\"", NULL }), "{\"hostname\":\"h\"}");
	assert_problem(r, 412, "precondition_failed");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/nodes/nope", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/gpus/GPU-nope", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "/v1/gpus/%s", uuid_of(fx, 999)),
	    NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/clusters/nope", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", uuid_of(fx, 500)),
	    "{\"health\":\"sick\",\"mig_enabled\":\"yes\"}");
	assert_error_field(r, "health");
	assert_error_field(r, "mig_enabled");
	assert_string_equal(state_of(fx), before);

	/* simulate: malformed spec text, unknown profile, counts */
	{
		static const char *const bad_text[] = { "H100-80GB/3g.40gb", "H100-80GB3g.40gb=1",
			"=1", "H100-80GB/3g.40gb=0", "H100-80GB/3g.40gb=01", "H100-80GB/3g.40gb=x",
			"H100-80GB/ 3g.40gb=1", "" };

		for (size_t i = 0; i < sizeof(bad_text) / sizeof(bad_text[0]); i++) {
			r = simulate(fx, fx->admin_token,
			    fx_str(fx, "{\"items\":[\"H100-80GB/1g.10gb=1\",\"%s\"]}",
				bad_text[i]));
			assert_problem(r, 422, "validation_failed");
			assert_non_null(strstr(r->body, "items[1]"));
		}
	}
	r = simulate(fx, fx->admin_token, "{\"items\":[\"H100-80GB/3g.20gb=1\"]}");
	assert_problem(r, 422, "validation_failed");
	assert_error_field(r, "items[0].profile");
	r = simulate(fx, fx->admin_token, "{\"items\":[\"A100/3g.20gb=1\"]}");
	assert_error_field(r, "items[0].model");
	r = simulate(fx, fx->admin_token,
	    "{\"items\":[{\"model\":\"H100-80GB\",\"profile\":\"full\",\"count\":0,\"x\":1}]}");
	assert_error_field(r, "items[0].count");
	assert_error_field(r, "items[0].x");
	r = simulate(fx, fx->admin_token, "{\"items\":[]}");
	assert_error_field(r, "items");
	r = simulate(fx, fx->admin_token,
	    "{\"items\":[\"H100-80GB/1g.10gb=4000\",\"H100-80GB/full=100\"]}");
	assert_error_field(r, "items");
	r = simulate(fx, fx->admin_token, "{\"items\":[7]}");
	assert_error_field(r, "items[0]");
	r = simulate(fx, fx->admin_token,
	    "{\"items\":[\"H100-80GB/full=1\"],\"cluster\":\"nope\"}");
	assert_error_field(r, "cluster");
	r = simulate(fx, fx->admin_token, "{\"items\":\"H100-80GB/full=1\"}");
	assert_error_field(r, "items");
	assert_string_equal(state_of(fx), before);
}

/* ---- GPU details ---- */

static void
test_gpu_get_patch(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *gpu = uuid_of(fx, 0xa600), *upper;

	mk_cluster(fx, "gp");
	mk_node(fx, "gp", "gp-1", NULL);
	mk_gpu(fx, "gp-1", 3, 0xa600, "A100-40GB", "[{\"profile\":\"3g.20gb\",\"start\":4}]");
	mk_gpu(fx, "gp-1", 4, 0xa601, "A100-40GB", NULL);

	/* by UUID, in either case */
	upper = "GPU-0000A600-0000-4000-8000-00000000A600";
	r = fx_request(fx, fx->admin_token, "GET", fx_str(fx, "/v1/gpus/%s", upper), NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "uuid", gpu);
	assert_json_str(r->json, "node", "gp-1");
	assert_json_str(r->json, "cluster", "gp");
	assert_json_int(r->json, "index", 3);
	assert_json_int(r->json, "memory_mib", 40960);
	assert_json_int(r->json, "memory_slices", 8);
	assert_json_int(r->json, "used_mask", 0xf0);
	assert_json_int(r->json, "free_slices", 4);
	assert_json_str(r->json, "layout[0].state", "ready");
	assert_json_null(r->json, "layout[0].pool_id");
	assert_string_equal(r->etag, "\"1\"");

	/* MIG mode changes only on an empty GPU */
	r = fx_request(fx, fx->admin_token, "PATCH", fx_str(fx, "/v1/gpus/%s", gpu),
	    "{\"mig_enabled\":false}");
	assert_problem(r, 409, "conflict");
	r = fx_request_h(fx, fx->admin_token, "PATCH",
	    fx_str(fx, "/v1/gpus/%s", uuid_of(fx, 0xa601)),
	    ((const char *[]){ "If-Match: \"1\"", NULL }), "{\"mig_enabled\":true}");
	assert_status(r, 200);
	assert_true(json_object_get_boolean(fx_json(r->json, "mig_enabled")));
	assert_string_equal(r->etag, "\"2\"");
	r = fx_request_h(fx, fx->admin_token, "PATCH",
	    fx_str(fx, "/v1/gpus/%s", uuid_of(fx, 0xa601)),
	    ((const char *[]){ "If-Match: \"1\"", NULL }), "{\"health\":\"degraded\"}");
	assert_problem(r, 412, "precondition_failed");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/capacity?cluster=gp", NULL);
	assert_json_int(cap_model(r, "A100-40GB"), "gpus.mig_enabled", 2);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'gpu.update' "
			     "AND object_id = $1 AND (before->>'mig_enabled')::bool = false "
			     "AND (after->>'mig_enabled')::bool = true",
			     uuid_of(fx, 0xa601)),
	    1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'gpu.create' "
			     "AND object_id = $1 AND after->'layout'->0->>'profile' = '3g.20gb'",
			     gpu),
	    1);

	/* node PATCH: labels replace, hostname, resources */
	r = fx_request(fx, fx->admin_token, "PATCH", "/v1/nodes/gp-1",
	    "{\"labels\":{\"zone\":\"c\"},\"cpu_millicores\":1000}");
	assert_status(r, 200);
	assert_json_str(r->json, "labels.zone", "c");
	assert_json_int(r->json, "cpu_millicores", 1000);
	assert_json_int(r->json, "memory_bytes", 1099511627776LL);
	assert_json_int(r->json, "generation", 2);
	assert_json_int(r->json, "gpu_count", 2);
}

/* ---- access ---- */

static void
test_access(void **state)
{
	struct fixture *fx = *state;
	const char *op = fixture_create_user(fx, "cap-operator", "operator");
	const char *bill = fixture_create_user(fx, "cap-billing", "billing");
	const char *user = fixture_create_user(fx, "cap-user", "none");
	const char *gpu = uuid_of(fx, 700);
	struct gp_client_response *r;
	const char *before;
	struct {
		const char *method, *path, *body;
		long op, bill, user;
	} cases[] = {
		{ "GET", "/v1/catalog/models", NULL, 200, 200, 200 },
		{ "GET", "/v1/catalog/models/H100-80GB", NULL, 200, 200, 200 },
		{ "GET", "/v1/clusters", NULL, 200, 200, 403 },
		{ "GET", "/v1/clusters/acc", NULL, 200, 200, 403 },
		{ "GET", "/v1/nodes", NULL, 200, 200, 403 },
		{ "GET", "/v1/nodes/acc-1", NULL, 200, 200, 403 },
		{ "GET", "/v1/nodes/acc-1/gpus", NULL, 200, 200, 403 },
		{ "GET", "/v1/gpus", NULL, 200, 200, 403 },
		{ "GET", fx_str(fx, "/v1/gpus/%s", gpu), NULL, 200, 200, 403 },
		{ "GET", "/v1/capacity", NULL, 200, 200, 403 },
		{ "POST", "/v1/capacity/simulate", "{\"items\":[\"H100-80GB/full=1\"]}", 200, 200,
		    403 },
		{ "POST", "/v1/clusters", "{\"name\":\"acc-x\"}", 201, 403, 403 },
		{ "PATCH", "/v1/clusters/acc", "{\"region\":\"us\"}", 200, 403, 403 },
		{ "POST", "/v1/nodes", "{\"name\":\"acc-2\",\"cluster\":\"acc\"}", 201, 403, 403 },
		{ "PATCH", "/v1/nodes/acc-1", "{\"hostname\":\"acc-1.b\"}", 200, 403, 403 },
		{ "POST", "/v1/nodes/acc-1/cordon", NULL, 200, 403, 403 },
		{ "POST", "/v1/nodes/acc-1/drain", NULL, 200, 403, 403 },
		{ "POST", "/v1/nodes/acc-1/uncordon", NULL, 200, 403, 403 },
		{ "POST", "/v1/nodes/acc-1/gpus",
		    fx_str(fx, "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H200-141GB\"}",
			uuid_of(fx, 701)),
		    201, 403, 403 },
		{ "PATCH", fx_str(fx, "/v1/gpus/%s", gpu), "{\"health\":\"degraded\"}", 200, 403,
		    403 },
		{ "DELETE", "/v1/clusters/acc-x", NULL, 204, 403, 403 },
	};

	mk_cluster(fx, "acc");
	mk_node(fx, "acc", "acc-1", NULL);
	mk_gpu(fx, "acc-1", 0, 700, "H100-80GB", NULL);

	/* refused callers change nothing; no token is 401 everywhere but nothing is public */
	before = state_of(fx);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = req_any(fx, NULL, cases[i].method, cases[i].path, cases[i].body);
		assert_problem(r, 401, "unauthorized");
		r = req_any(fx, user, cases[i].method, cases[i].path, cases[i].body);
		if (cases[i].user == 403)
			assert_problem(r, 403, "forbidden");
		else
			assert_status(r, cases[i].user);
		r = req_any(fx, bill, cases[i].method, cases[i].path, cases[i].body);
		if (cases[i].bill == 403)
			assert_problem(r, 403, "forbidden");
		else
			assert_status(r, cases[i].bill);
	}
	assert_string_equal(state_of(fx), before);
	/* the operator may do all of it, in this order */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		r = req_any(fx, op, cases[i].method, cases[i].path, cases[i].body);
		assert_status(r, cases[i].op);
	}
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE actor = 'cap-operator' "
			     "AND object_type IN ('cluster', 'node', 'gpu')"),
	    10);
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(action, ',' ORDER BY id) FROM audit_log "
				"WHERE actor = 'cap-operator' AND object_type IN ('cluster', 'node', 'gpu')"),
	    "cluster.create,cluster.update,node.create,node.update,node.cordon,node.drain,"
	    "node.uncordon,gpu.create,gpu.update,cluster.delete");
}

/* ---- the database's own guards ---- */

static void
test_database_guards(void **state)
{
	struct fixture *fx = *state;
	const char *g, *g2;

	mk_cluster(fx, "sql");
	mk_node(fx, "sql", "sql-1", NULL);
	mk_gpu(fx, "sql-1", 0, 800, "H100-80GB", "[{\"profile\":\"3g.40gb\",\"start\":4}]");
	mk_gpu(fx, "sql-1", 1, 801, "L40S-48GB", NULL);
	g = fx_str(fx, "%lld",
	    (long long)fx_sql_int64(fx, "SELECT id FROM gpus WHERE uuid = $1", uuid_of(fx, 800)));
	g2 = fx_str(fx, "%lld",
	    (long long)fx_sql_int64(fx, "SELECT id FROM gpus WHERE uuid = $1", uuid_of(fx, 801)));

	/* invariant 1: an overlapping live allocation is refused by the exclusion constraint */
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size) "
				    "VALUES (%s, '1g.10gb', 5, 1)",
				    g)),
	    "23P01");
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size) "
				    "VALUES (%s, 'full', 0, 8)",
				    g)),
	    "23P01");
	/* ... as are two overlapping rows in one statement */
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size) "
				    "VALUES (%s, '2g.20gb', 0, 2), (%s, '1g.20gb', 0, 2)",
				    g, g)),
	    "23P01");
	/* invariant 2: starts and sizes from the catalog */
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size) "
				    "VALUES (%s, '2g.20gb', 1, 2)",
				    g)),
	    "23514");
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size) "
				    "VALUES (%s, '2g.20gb', 0, 3)",
				    g)),
	    "23514");
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size) "
				    "VALUES (%s, '3g.71gb', 0, 4)",
				    g)),
	    "23514");
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size) "
				    "VALUES (%s, 'full', 0, 8)",
				    g2)),
	    "23514");
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size) "
				    "VALUES (%s, '1g.10gb', -1, 1)",
				    g)),
	    "23514");
	assert_string_equal(try_sql(fx,
				fx_str(fx, "UPDATE allocations SET start = 2 WHERE gpu_id = %s",
				    g)),
	    "23514");
	assert_string_equal(fx_sql_text(fx, "SELECT layout FROM gpus WHERE id = $1", g),
	    "3g.40gb@4");

	/* a released allocation frees its slices; the mirror follows every change */
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size) "
				    "VALUES (%s, 'full', 0, 1)",
				    g2)),
	    "ok");
	assert_string_equal(fx_sql_text(fx, "SELECT layout FROM gpus WHERE id = $1", g2), "full@0");
	fx_sql_exec(fx,
	    "UPDATE allocations SET state = 'released', released_at = now() WHERE gpu_id = $1", g);
	assert_string_equal(fx_sql_text(fx,
				"SELECT layout || ':' || used_mask FROM gpus WHERE id = $1", g),
	    ":0");
	assert_string_equal(try_sql(fx,
				fx_str(fx,
				    "INSERT INTO allocations (gpu_id, profile, start, size, state) "
				    "VALUES (%s, '4g.40gb', 0, 4, 'ready'), (%s, '3g.40gb', 4, 4, 'ready')",
				    g, g)),
	    "ok");
	assert_string_equal(fx_sql_text(fx,
				"SELECT layout || ':' || used_mask FROM gpus WHERE id = $1", g),
	    "4g.40gb@0,3g.40gb@4:255");
	fx_sql_exec(fx, "DELETE FROM allocations WHERE gpu_id = $1 AND profile = '4g.40gb'", g);
	assert_string_equal(fx_sql_text(fx,
				"SELECT layout || ':' || used_mask FROM gpus WHERE id = $1", g),
	    "3g.40gb@4:240");
	/* the capacity view reads the mirror: 3 used, 4 free, none stranded */
	{
		struct gp_client_response *r = capacity(fx, "sql");

		assert_json_int(cap_model(r, "H100-80GB"), "compute_slices.used", 3);
		assert_json_int(cap_model(r, "H100-80GB"), "compute_slices.stranded", 0);
		assert_int_equal(prof(cap_model(r, "H100-80GB"), "3g.40gb", "allocated"), 1);
		assert_int_equal(prof(cap_model(r, "L40S-48GB"), "full", "allocated"), 1);
	}
	/* GPU index range and UUID form are checked by the database too */
	assert_string_equal(try_sql(fx, "UPDATE gpus SET gpu_index = 16"), "23514");
	assert_string_equal(try_sql(fx,
				fx_str(fx, "UPDATE gpus SET uuid = 'GPU-ABC' WHERE id = %s", g)),
	    "23514");
	/* the class counts followed every change above */
	assert_classes_consistent(fx);
	fx_sql_exec(fx,
	    "UPDATE allocations SET state = 'released', released_at = now() WHERE gpu_id = $1", g);
	fx_sql_exec(fx, "DELETE FROM allocations WHERE gpu_id = $1", g2);
	assert_classes_consistent(fx);
}

/* ---- /metrics ---- */

static void
test_metrics(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	int64_t total, stranded, placeable3g;
	struct json_object *m;

	mk_cluster(fx, "met");
	mk_node(fx, "met", "met-1", NULL);
	mk_gpu(fx, "met-1", 0, 900, "H100-80GB",
	    "[{\"profile\":\"3g.40gb\",\"start\":0},{\"profile\":\"3g.40gb\",\"start\":4}]");
	r = fx_request(fx, fx->admin_token, "GET", "/v1/capacity", NULL);
	m = cap_model(r, "H100-80GB");
	total = fx_json_int(m, "gpus.total");
	stranded = fx_json_int(m, "compute_slices.stranded");
	placeable3g = prof(m, "3g.40gb", "placeable");
	assert_true(total >= 1);
	assert_true(stranded >= 1);

	r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	assert_status(r, 200);
	assert_non_null(strstr(r->body, "# TYPE gpupool_capacity_gpus gauge"));
	assert_non_null(strstr(r->body,
	    fx_str(fx, "gpupool_capacity_gpus{model=\"H100-80GB\"} %lld\n", (long long)total)));
	/* sum() over a label is the whole: used + free + stranded = the total */
	{
#define SERIES(text) atoll(strstr(r->body, text) + strlen(text))
		long long used =
		    SERIES("gpupool_capacity_compute_slices{model=\"H100-80GB\",kind=\"used\"} ");
		long long freee =
		    SERIES("gpupool_capacity_compute_slices{model=\"H100-80GB\",kind=\"free\"} ");
		long long str = SERIES(
		    "gpupool_capacity_compute_slices{model=\"H100-80GB\",kind=\"stranded\"} ");
		long long all = SERIES("gpupool_capacity_compute_slices_all{model=\"H100-80GB\"} ");
		long long mused =
		    SERIES("gpupool_capacity_memory_slices{model=\"H100-80GB\",kind=\"used\"} ");
		long long mfree =
		    SERIES("gpupool_capacity_memory_slices{model=\"H100-80GB\",kind=\"free\"} ");
		long long mall = SERIES("gpupool_capacity_memory_slices_all{model=\"H100-80GB\"} ");
#undef SERIES

		assert_true(all > 0);
		assert_int_equal(used + freee + str, all);
		assert_int_equal(mused + mfree, mall);
		assert_null(strstr(r->body, "state=\""));
		assert_null(strstr(r->body, "kind=\"total\""));
	}
	assert_non_null(strstr(r->body,
	    fx_str(fx,
		"gpupool_capacity_compute_slices{model=\"H100-80GB\",kind=\"stranded\"} %lld\n",
		(long long)stranded)));
	assert_non_null(strstr(r->body,
	    fx_str(fx,
		"gpupool_capacity_profile_placeable{model=\"H100-80GB\",profile=\"3g.40gb\"} %lld\n",
		(long long)placeable3g)));
	assert_non_null(strstr(r->body,
	    "gpupool_capacity_profile_allocated{model=\"H100-80GB\",profile=\"full\"} "));
	assert_non_null(
	    strstr(r->body, "gpupool_capacity_memory_slices{model=\"H100-80GB\",kind=\"free\"} "));
	fixture_promtool_check(fx, r->body, r->body_len);
	/* models without GPUs are not listed */
	assert_null(strstr(r->body, "model=\"T4-16GB\""));
}

/*
 * A layout's figures are remembered per process (service/layout_cache.c),
 * keyed by model, MIG mode and layout text. The same text means different
 * slices on two models (1g.10gb holds 2 memory slices on an A100-40GB, 1
 * on an A100-80GB): each model must get its own figures, on the first
 * (computing) and on the second (remembered) read alike, in capacity and
 * in simulation; and a GPU whose layout changes is counted by its new
 * layout, then by its old one again.
 */
static void
check_lc_a100s(struct fixture *fx, bool a80_has_3g)
{
	struct gp_client_response *r = capacity(fx, "lc");
	struct json_object *m;

	m = cap_model(r, "A100-40GB");
	assert_json_int(m, "gpus.total", 1);
	assert_json_int(m, "memory_slices.used", 2);
	assert_json_int(m, "compute_slices.used", 1);
	/* slice 7 takes no 1g.5gb: at most 3g.20gb@4 + 2g.10gb@2, 5 of 6 */
	assert_json_int(m, "compute_slices.stranded", 1);
	assert_int_equal(prof(m, "1g.10gb", "allocated"), 1);
	assert_int_equal(prof(m, "1g.10gb", "placeable"), 3);
	assert_int_equal(prof(m, "1g.5gb", "placeable"), 5);
	assert_int_equal(prof(m, "3g.20gb", "placeable"), 1);
	assert_int_equal(prof(m, "full", "placeable"), 0);

	/* the A100-80GBs: 1g.10gb@0 (later plus 3g.40gb@4) and an empty one
	 * (its share: 1 full, 7 1g.10gb, 4 1g.20gb, 2 3g.40gb, 1 4g.40gb) */
	m = cap_model(r, "A100-80GB");
	assert_json_int(m, "gpus.total", 2);
	assert_int_equal(prof(m, "1g.10gb", "allocated"), 1);
	assert_int_equal(prof(m, "full", "placeable"), 1);
	assert_int_equal(prof(m, "4g.40gb", "placeable"), 1);
	if (!a80_has_3g) {
		/* 1g.10gb@0 holds one slice here: 7 free, 6 more 1g.10gb, 3 more 1g.20gb */
		assert_json_int(m, "memory_slices.used", 1);
		assert_json_int(m, "compute_slices.used", 1);
		assert_json_int(m, "compute_slices.stranded", 0);
		assert_int_equal(prof(m, "3g.40gb", "allocated"), 0);
		assert_int_equal(prof(m, "1g.10gb", "placeable"), 6 + 7);
		assert_int_equal(prof(m, "1g.20gb", "placeable"), 3 + 4);
		assert_int_equal(prof(m, "3g.40gb", "placeable"), 1 + 2);
	} else {
		/* plus 3g.40gb@4: slices 1-3 free, 3 compute slices left */
		assert_json_int(m, "memory_slices.used", 5);
		assert_json_int(m, "compute_slices.used", 4);
		assert_json_int(m, "compute_slices.stranded", 0);
		assert_int_equal(prof(m, "3g.40gb", "allocated"), 1);
		assert_int_equal(prof(m, "1g.10gb", "placeable"), 3 + 7);
		assert_int_equal(prof(m, "1g.20gb", "placeable"), 1 + 4);
		assert_int_equal(prof(m, "3g.40gb", "placeable"), 0 + 2);
	}
}

static void
test_layout_cache(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	const char *a80 = uuid_of(fx, 1101);

	mk_cluster(fx, "lc");
	mk_node(fx, "lc", "lc-1", NULL);
	mk_gpu(fx, "lc-1", 0, 1100, "A100-40GB", "[{\"profile\":\"1g.10gb\",\"start\":0}]");
	mk_gpu(fx, "lc-1", 1, 1101, "A100-80GB", "[{\"profile\":\"1g.10gb\",\"start\":0}]");
	mk_gpu(fx, "lc-1", 2, 1102, "A100-80GB", NULL);
	assert_string_equal(fx_sql_text(fx, "SELECT layout FROM gpus WHERE uuid = $1", a80),
	    "1g.10gb@0");
	for (int pass = 0; pass < 2; pass++)
		check_lc_a100s(fx, false);

	/* simulation ranks each model's GPUs by that model's figures: the 1g
	 * packs next to the 1g.10gb already there, at the start that keeps a
	 * 3g spot (A100-40GB: slices 2-3; A100-80GB: slice 1) */
	for (int pass = 0; pass < 2; pass++) {
		r = simulate(fx, fx->admin_token,
		    "{\"cluster\":\"lc\",\"items\":[\"A100-40GB/1g.10gb=1\","
		    "\"A100-80GB/1g.10gb=1\"]}");
		assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
		assert_json_str(r->json, "placements[0].gpu_uuid", uuid_of(fx, 1100));
		assert_json_int(r->json, "placements[0].start", 2);
		assert_json_int(r->json, "placements[0].size", 2);
		assert_json_str(r->json, "placements[1].gpu_uuid", a80);
		assert_json_int(r->json, "placements[1].start", 1);
		assert_json_int(r->json, "placements[1].size", 1);
	}

	/* a new layout on the A100-80GB, then the old one again */
	fx_sql_exec(fx,
	    "INSERT INTO allocations (gpu_id, profile, start, size, state) "
	    "SELECT id, '3g.40gb', 4, 4, 'ready' FROM gpus WHERE uuid = $1",
	    a80);
	assert_string_equal(fx_sql_text(fx, "SELECT layout FROM gpus WHERE uuid = $1", a80),
	    "1g.10gb@0,3g.40gb@4");
	check_lc_a100s(fx, true);
	/* a 3g.40gb now goes to the empty A100-80GB */
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"lc\",\"items\":[\"A100-80GB/3g.40gb=1\"]}");
	assert_true(json_object_get_boolean(fx_json(r->json, "fits")));
	assert_json_str(r->json, "placements[0].gpu_uuid", uuid_of(fx, 1102));
	fx_sql_exec(fx,
	    "UPDATE allocations SET state = 'released' WHERE profile = '3g.40gb' "
	    "AND gpu_id = (SELECT id FROM gpus WHERE uuid = $1)",
	    a80);
	check_lc_a100s(fx, false);
	r = simulate(fx, fx->admin_token,
	    "{\"cluster\":\"lc\",\"items\":[\"A100-80GB/3g.40gb=1\"]}");
	assert_json_str(r->json, "placements[0].gpu_uuid", a80);
	assert_json_int(r->json, "placements[0].start", 4);

	r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	assert_status(r, 200);
	assert_non_null(strstr(r->body, "# TYPE gpupool_capacity_layout_cache_entries gauge\n"));
	assert_null(strstr(r->body, "gpupool_capacity_layout_cache_entries 0\n"));
	assert_classes_consistent(fx);
}

/* DELETE of a cluster racing a PATCH: the delete must not go through on
 * the stale copy it read (and audited); it answers 412 instead. */
struct delete_call {
	const char *url;
	const char *token;
	long status;
};

static void *
delete_cluster_thread(void *arg)
{
	struct delete_call *d = arg;
	struct gp_client *c = gp_client_create(d->url, d->token);
	struct gp_client_response r;

	if (c == NULL)
		return NULL;
	if (gp_client_request(c, "DELETE", "/v1/clusters/racy", NULL, 0, NULL, &r) == 0)
		d->status = r.status;
	gp_client_response_free(&r);
	gp_client_destroy(c);
	return NULL;
}

static void
test_cluster_delete_race(void **state)
{
	struct fixture *fx = *state;
	struct delete_call d = { fx->server->base_url, fx->admin_token, 0 };
	pthread_t t;

	mk_cluster(fx, "racy");
	/* a concurrent writer holds the row with a newer generation */
	fx_sql_exec(fx, "BEGIN");
	fx_sql_exec(fx,
	    "UPDATE clusters SET region = 'moved', generation = generation + 1 "
	    "WHERE name = 'racy'");
	assert_int_equal(pthread_create(&t, NULL, delete_cluster_thread, &d), 0);
	usleep(500000); /* the DELETE reads generation 1 and waits for the row */
	fx_sql_exec(fx, "COMMIT");
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(d.status, 412);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM clusters WHERE name = 'racy'"), 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'cluster.delete' "
			     "AND object_id = 'racy'"),
	    0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_catalog),
		cmocka_unit_test(test_cluster_delete_race),
		cmocka_unit_test(test_mixed_fleet),
		cmocka_unit_test(test_simulate),
		cmocka_unit_test(test_simulate_choice),
		cmocka_unit_test(test_simulate_search),
		cmocka_unit_test(test_filters),
		cmocka_unit_test(test_cordon),
		cmocka_unit_test(test_bad_input),
		cmocka_unit_test(test_gpu_get_patch),
		cmocka_unit_test(test_access),
		cmocka_unit_test(test_database_guards),
		cmocka_unit_test(test_metrics),
		cmocka_unit_test(test_layout_cache),
		cmocka_unit_test(test_classes_counted_at_commit),
		cmocka_unit_test(test_class_changes_counted_at_commit),
	};

	return fixture_run_tests(tests);
}
