/*
 * db_capacity.c - clusters, nodes, GPUs, allocations and the set-based
 * reads the capacity views and the placement engine start from.
 */
#include "db_capacity.h"
#include "core/problem.h"
#include "db_internal.h"
#include "db_sql.h"

#include <string.h>

#define CLUSTER_COLS                                                                       \
	"c.id, c.name, c.region, c.description, "                                          \
	"(SELECT count(*) FROM nodes n WHERE n.cluster_id = c.id), "                       \
	"(SELECT coalesce(sum(k.gpus), 0) FROM gpu_classes k WHERE k.cluster_id = c.id), " \
	"c.generation, " EPOCH_US("c.created_at") ", " EPOCH_US("c.updated_at")

#define NODE_COLS                                                             \
	"n.id, n.cluster_id, c.name, n.name, n.hostname, n.status, "          \
	"n.status_reason, n.cpu_millicores, n.memory_bytes, n.labels::text, " \
	"CASE WHEN cardinality(gi.models) = 1 THEN gi.models[1] END, "        \
	"to_json(gi.models)::text, gi.count, n.agent_version, " EPOCH_US(     \
	    "n.agent_heartbeat_at") ", n.generation, n.observed_generation, " EPOCH_US("n.created_at") ", " EPOCH_US("n.updated_at")

#define NODE_FROM                                                                 \
	"FROM nodes n JOIN clusters c ON c.id = n.cluster_id "                    \
	"CROSS JOIN LATERAL (SELECT count(*) AS count, "                          \
	"coalesce(array_agg(DISTINCT g.model ORDER BY g.model), '{}') AS models " \
	"FROM gpus g WHERE g.node_id = n.id) gi "

#define GPU_COLS                                                                \
	"g.id, g.node_id, g.cluster_id, n.name, c.name, g.node_status, "        \
	"g.gpu_index, g.uuid, g.model, g.memory_mib, g.mig_enabled, g.health, " \
	"g.health_reason, g.layout, g.used_mask, g.generation, " EPOCH_US(      \
	    "g.created_at") ", " EPOCH_US("g.updated_at")

#define GPU_FROM                                        \
	"FROM gpus g JOIN nodes n ON n.id = g.node_id " \
	"JOIN clusters c ON c.id = g.cluster_id "

#define ALLOC_COLS                                                         \
	"a.id, a.gpu_id, a.profile, a.start, a.size, a.state, a.pool_id, " \
	"a.device_uuid, " EPOCH_US("a.created_at")

DB_STMT(stmt_cap_cluster_insert,
    "INSERT INTO clusters (name, region, description) VALUES ($1, $2, $3) RETURNING id");
DB_STMT(stmt_cap_cluster_by_id, "SELECT " CLUSTER_COLS " FROM clusters c WHERE c.id = $1");
DB_STMT(stmt_cap_cluster_get, "SELECT " CLUSTER_COLS " FROM clusters c WHERE c.name = $1");
DB_STMT(stmt_cap_cluster_id, "SELECT id FROM clusters WHERE name = $1");
DB_STMT(stmt_cap_clusters_list,
    "SELECT " CLUSTER_COLS " FROM clusters c WHERE c.id > $1 ORDER BY c.id LIMIT $2");
DB_STMT(stmt_cap_cluster_update,
    "UPDATE clusters SET region = coalesce($2, region), "
    "description = coalesce($3, description), generation = generation + 1, "
    "updated_at = now() WHERE id = $1 AND ($4::int8 = 0 OR generation = $4::int8) "
    "RETURNING id");
/* released pools let go of the cluster; a live one bound to it refuses the delete (23503) */
DB_STMT(stmt_cap_cluster_delete,
    "WITH un AS (UPDATE pools SET cluster_id = NULL WHERE cluster_id = $1 "
    "AND status = 'released' AND EXISTS (SELECT 1 FROM clusters WHERE id = $1 "
    "AND generation = $2)) "
    "DELETE FROM clusters WHERE id = $1 AND generation = $2 RETURNING id");

DB_STMT(stmt_cap_node_insert,
    "INSERT INTO nodes (cluster_id, name, hostname, cpu_millicores, memory_bytes, labels) "
    "VALUES ($1, $2, $3, $4, $5, $6::jsonb) RETURNING id");
DB_STMT(stmt_cap_node_by_id, "SELECT " NODE_COLS " " NODE_FROM "WHERE n.id = $1");
DB_STMT(stmt_cap_node_get, "SELECT " NODE_COLS " " NODE_FROM "WHERE n.name = $1");
/*
 * The lock order (docs/architecture.md) puts GPUs before nodes: a node's
 * status reaches its GPUs through a trigger, so its GPUs are locked first,
 * in id order, then the node (the scalar subquery runs before the row
 * lock is taken).
 */
DB_STMT(stmt_cap_node_lock,
    "WITH g AS MATERIALIZED (SELECT x.id FROM gpus x WHERE x.node_id = "
    "(SELECT id FROM nodes WHERE name = $1) ORDER BY x.id FOR NO KEY UPDATE) "
    "SELECT n.id FROM nodes n WHERE n.name = $1 AND (SELECT count(*) FROM g) >= 0 "
    "FOR NO KEY UPDATE OF n");
DB_STMT(stmt_cap_nodes_list,
    "SELECT " NODE_COLS " " NODE_FROM "WHERE n.id > $1 AND ($3::int8 IS NULL OR n.cluster_id = $3) "
    "AND ($4::text IS NULL OR n.status = $4) "
    "AND ($5::text IS NULL OR EXISTS (SELECT 1 FROM gpus x WHERE x.node_id = n.id "
    "AND x.model = $5)) "
    "AND ($6::jsonb IS NULL OR n.labels @> $6::jsonb) "
    "ORDER BY n.id LIMIT $2");
DB_STMT(stmt_cap_node_update,
    "UPDATE nodes SET hostname = coalesce($2, hostname), "
    "cpu_millicores = CASE WHEN $3::int8 < 0 THEN cpu_millicores ELSE $3::int8 END, "
    "memory_bytes = CASE WHEN $4::int8 < 0 THEN memory_bytes ELSE $4::int8 END, "
    "labels = coalesce($5::jsonb, labels), generation = generation + 1, updated_at = now() "
    "WHERE id = $1 AND ($6::int8 = 0 OR generation = $6::int8) RETURNING id");
DB_STMT(stmt_cap_node_set_status,
    "UPDATE nodes SET status = $2, status_reason = $3, generation = generation + 1, "
    "updated_at = now() WHERE id = $1 RETURNING id");

DB_STMT(stmt_cap_gpu_insert,
    "INSERT INTO gpus (node_id, gpu_index, uuid, model, memory_mib, mig_enabled) "
    "VALUES ($1, $2, $3, $4, $5, $6) RETURNING id");
DB_STMT(stmt_cap_gpu_by_id, "SELECT " GPU_COLS " " GPU_FROM "WHERE g.id = $1");
DB_STMT(stmt_cap_gpu_get, "SELECT " GPU_COLS " " GPU_FROM "WHERE g.uuid = $1");
DB_STMT(stmt_cap_gpu_lock, "SELECT id FROM gpus WHERE uuid = $1 FOR NO KEY UPDATE");
DB_STMT(stmt_cap_gpus_list,
    "SELECT " GPU_COLS " " GPU_FROM "WHERE g.id > $1 AND ($3::int8 IS NULL OR g.node_id = $3) "
    "AND ($4::int8 IS NULL OR g.cluster_id = $4) "
    "AND ($5::text IS NULL OR g.model = $5) AND ($6::text IS NULL OR g.health = $6) "
    "AND ($7::bool IS NULL OR g.mig_enabled = $7) "
    "AND ($8::int8 IS NULL OR EXISTS (SELECT 1 FROM allocations al "
    "JOIN pools q ON q.id = al.pool_id WHERE al.gpu_id = g.id AND al.state <> 'released' "
    "AND q.project_id = $8 AND ($9::text IS NULL OR q.name = $9))) "
    "ORDER BY g.id LIMIT $2");
DB_STMT(stmt_cap_gpu_update,
    "UPDATE gpus SET health = coalesce($2, health), "
    "health_reason = CASE WHEN $3::bool THEN $4 ELSE health_reason END, "
    "mig_enabled = coalesce($5::bool, mig_enabled), generation = generation + 1, "
    "updated_at = now() WHERE id = $1 AND ($6::int8 = 0 OR generation = $6::int8) "
    "RETURNING id");

DB_STMT(stmt_cap_alloc_insert,
    "INSERT INTO allocations (gpu_id, profile, start, size, state) "
    "VALUES ($1, $2, $3, $4, $5)");
DB_STMT(stmt_cap_allocs_live,
    "SELECT " ALLOC_COLS " FROM allocations a "
    "WHERE a.gpu_id = ANY ($1::int8[]) AND a.state <> 'released' "
    "ORDER BY a.gpu_id, a.start");

DB_STMT(stmt_cap_classes,
    "SELECT model, mig_enabled, healthy, node_ready, layout, sum(gpus) FROM gpu_classes "
    "WHERE gpus > 0 AND ($1::int8 IS NULL OR cluster_id = $1) "
    "AND ($2::text IS NULL OR model = $2) "
    "GROUP BY 1, 2, 3, 4, 5");
/*
 * The placeable classes of some models, summed over clusters or in one:
 * the fleet reading of simulation and approvals alike (service/fleet.c).
 */
DB_STMT(stmt_cap_placeable_classes,
    "SELECT model, mig_enabled, layout, sum(gpus) FROM gpu_classes "
    "WHERE model = ANY ($1::text[]) AND healthy AND node_ready AND gpus > 0 "
    "GROUP BY 1, 2, 3");
DB_STMT(stmt_cap_placeable_classes_cluster,
    "SELECT model, mig_enabled, layout, gpus FROM gpu_classes "
    "WHERE cluster_id = $2 AND model = ANY ($1::text[]) AND healthy AND node_ready "
    "AND gpus > 0");

/* NULL for 0: "no filter" parameters. */
static const char *
param_id_or_null(struct arena *a, int64_t v)
{
	return v != 0 ? db_param_int(a, v) : NULL;
}

/* ---- clusters ---- */

static void
cluster_from_row(struct arena *a, const PGresult *r, int row, struct cluster_row *c)
{
	c->id = db_int64(r, row, 0);
	c->name = db_text(a, r, row, 1);
	c->region = db_text(a, r, row, 2);
	c->description = db_text(a, r, row, 3);
	c->nodes = db_int64(r, row, 4);
	c->gpus = db_int64(r, row, 5);
	c->generation = db_int64(r, row, 6);
	c->created_us = db_int64(r, row, 7);
	c->updated_us = db_int64(r, row, 8);
}

static int
cluster_reload(struct db *db, struct arena *a, int64_t id, struct cluster_row *out,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_cap_cluster_by_id, 1, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL, "cluster vanished");
	cluster_from_row(a, r, 0, out);
	return 0;
}

int
db_cluster_insert(struct db *db, struct arena *a, const char *name, const char *region,
    const char *description, struct cluster_row *out, struct gp_error *err)
{
	const char *p[3] = { name, region, description };
	PGresult *r = db_exec(db, a, &stmt_cap_cluster_insert, 3, p, err);

	if (r == NULL) {
		if (err->status == 409)
			gp_problem_set(err, GP_PROBLEM_CONFLICT,
			    "a cluster named %s already exists", name);
		return -1;
	}
	return cluster_reload(db, a, db_int64(r, 0, 0), out, err);
}

int
db_cluster_get(struct db *db, struct arena *a, const char *name, struct cluster_row *out,
    bool *found, struct gp_error *err)
{
	const char *p[1] = { name };
	PGresult *r = db_exec(db, a, &stmt_cap_cluster_get, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		cluster_from_row(a, r, 0, out);
	return 0;
}

int
db_cluster_id(struct db *db, struct arena *a, const char *name, int64_t *id, struct gp_error *err)
{
	const char *p[1] = { name };
	PGresult *r = db_exec(db, a, &stmt_cap_cluster_id, 1, p, err);

	if (r == NULL)
		return -1;
	*id = PQntuples(r) == 1 ? db_int64(r, 0, 0) : 0;
	return 0;
}

int
db_clusters_list(struct db *db, struct arena *a, int64_t after_id, int limit,
    struct cluster_row **out, int *n, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, after_id), db_param_int(a, limit) };
	PGresult *r = db_exec(db, a, &stmt_cap_clusters_list, 2, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		cluster_from_row(a, r, i, &(*out)[i]);
	return 0;
}

int
db_cluster_update(struct db *db, struct arena *a, int64_t id, const char *region,
    const char *description, int64_t expected_generation, struct cluster_row *out, bool *stale,
    struct gp_error *err)
{
	const char *p[4] = { db_param_int(a, id), region, description,
		db_param_int(a, expected_generation) };
	PGresult *r = db_exec(db, a, &stmt_cap_cluster_update, 4, p, err);

	*stale = false;
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		*stale = true;
		return 0;
	}
	return cluster_reload(db, a, id, out, err);
}

int
db_cluster_delete(struct db *db, int64_t id, int64_t generation, bool *stale, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[2] = { db_param_int(a, id), db_param_int(a, generation) };
	PGresult *r;
	int rc = 0;

	*stale = false;
	r = db_exec(db, a, &stmt_cap_cluster_delete, 2, p, err);
	if (r != NULL) {
		*stale = PQntuples(r) == 0;
	} else {
		if (err->status == 409)
			gp_problem_set(err, GP_PROBLEM_CONFLICT,
			    "the cluster still has nodes or a live pool bound to it; "
			    "move or remove them, or release the pool, first");
		rc = -1;
	}
	arena_destroy(a);
	return rc;
}

/* ---- nodes ---- */

static void
node_from_row(struct arena *a, const PGresult *r, int row, struct node_row *o)
{
	o->id = db_int64(r, row, 0);
	o->cluster_id = db_int64(r, row, 1);
	o->cluster = db_text(a, r, row, 2);
	o->name = db_text(a, r, row, 3);
	o->hostname = db_text(a, r, row, 4);
	o->status = db_text(a, r, row, 5);
	o->status_reason = db_text(a, r, row, 6);
	o->cpu_millicores = db_int64(r, row, 7);
	o->memory_bytes = db_int64(r, row, 8);
	o->labels_json = db_text(a, r, row, 9);
	o->gpu_model = db_text(a, r, row, 10);
	o->gpu_models_json = db_text(a, r, row, 11);
	o->gpu_count = db_int64(r, row, 12);
	o->agent_version = db_text(a, r, row, 13);
	o->agent_heartbeat_us = db_int64(r, row, 14);
	o->generation = db_int64(r, row, 15);
	o->observed_generation = db_int64(r, row, 16);
	o->created_us = db_int64(r, row, 17);
	o->updated_us = db_int64(r, row, 18);
}

static int
node_reload(struct db *db, struct arena *a, int64_t id, struct node_row *out, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_cap_node_by_id, 1, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL, "node vanished");
	node_from_row(a, r, 0, out);
	return 0;
}

int
db_node_insert(struct db *db, struct arena *a, int64_t cluster_id, const char *name,
    const char *hostname, int64_t cpu_millicores, int64_t memory_bytes, const char *labels_json,
    struct node_row *out, struct gp_error *err)
{
	const char *p[6] = { db_param_int(a, cluster_id), name, hostname,
		db_param_int(a, cpu_millicores), db_param_int(a, memory_bytes), labels_json };
	PGresult *r = db_exec(db, a, &stmt_cap_node_insert, 6, p, err);

	if (r == NULL) {
		if (err->status == 409)
			gp_problem_set(err, GP_PROBLEM_CONFLICT, "a node named %s already exists",
			    name);
		return -1;
	}
	return node_reload(db, a, db_int64(r, 0, 0), out, err);
}

/*
 * Read the one row of get for key, first taking its row lock with lock
 * when lock is not NULL. *out is NULL when there is no such row.
 */
static int
get_locked(struct db *db, struct arena *a, const struct db_stmt *lock, const struct db_stmt *get,
    const char *key, PGresult **out, struct gp_error *err)
{
	const char *p[1] = { key };
	PGresult *r;

	*out = NULL;
	if (lock != NULL) {
		r = db_exec(db, a, lock, 1, p, err);
		if (r == NULL)
			return -1;
		if (PQntuples(r) != 1)
			return 0;
	}
	r = db_exec(db, a, get, 1, p, err);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 1)
		*out = r;
	return 0;
}

int
db_node_get(struct db *db, struct arena *a, const char *name, bool for_update, struct node_row *out,
    bool *found, struct gp_error *err)
{
	PGresult *r;

	if (get_locked(db, a, for_update ? &stmt_cap_node_lock : NULL, &stmt_cap_node_get, name, &r,
		err) < 0)
		return -1;
	*found = r != NULL;
	if (*found)
		node_from_row(a, r, 0, out);
	return 0;
}

int
db_nodes_list(struct db *db, struct arena *a, const struct node_filter *f, int64_t after_id,
    int limit, struct node_row **out, int *n, struct gp_error *err)
{
	const char *p[6] = { db_param_int(a, after_id), db_param_int(a, limit),
		param_id_or_null(a, f->cluster_id), f->status, f->model, f->labels_json };
	PGresult *r = db_exec(db, a, &stmt_cap_nodes_list, 6, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		node_from_row(a, r, i, &(*out)[i]);
	return 0;
}

int
db_node_update(struct db *db, struct arena *a, int64_t id, const char *hostname,
    int64_t cpu_millicores, int64_t memory_bytes, const char *labels_json,
    int64_t expected_generation, struct node_row *out, bool *stale, struct gp_error *err)
{
	const char *p[6] = { db_param_int(a, id), hostname, db_param_int(a, cpu_millicores),
		db_param_int(a, memory_bytes), labels_json, db_param_int(a, expected_generation) };
	PGresult *r = db_exec(db, a, &stmt_cap_node_update, 6, p, err);

	*stale = false;
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		*stale = true;
		return 0;
	}
	return node_reload(db, a, id, out, err);
}

int
db_node_set_status(struct db *db, struct arena *a, int64_t id, const char *status,
    const char *reason, struct node_row *out, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, id), status, reason };
	PGresult *r = db_exec(db, a, &stmt_cap_node_set_status, 3, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_problem_set(err, GP_PROBLEM_NOT_FOUND, "no such node");
	return node_reload(db, a, id, out, err);
}

/* ---- GPUs ---- */

static void
gpu_from_row(struct arena *a, const PGresult *r, int row, struct gpu_row *g)
{
	g->id = db_int64(r, row, 0);
	g->node_id = db_int64(r, row, 1);
	g->cluster_id = db_int64(r, row, 2);
	g->node = db_text(a, r, row, 3);
	g->cluster = db_text(a, r, row, 4);
	g->node_status = db_text(a, r, row, 5);
	g->index = (int)db_int64(r, row, 6);
	g->uuid = db_text(a, r, row, 7);
	g->model = db_text(a, r, row, 8);
	g->memory_mib = (int)db_int64(r, row, 9);
	g->mig_enabled = db_bool(r, row, 10);
	g->health = db_text(a, r, row, 11);
	g->health_reason = db_text(a, r, row, 12);
	g->layout = db_text(a, r, row, 13);
	g->used_mask = (int)db_int64(r, row, 14);
	g->generation = db_int64(r, row, 15);
	g->created_us = db_int64(r, row, 16);
	g->updated_us = db_int64(r, row, 17);
}

static int
gpu_reload(struct db *db, struct arena *a, int64_t id, struct gpu_row *out, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_cap_gpu_by_id, 1, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL, "gpu vanished");
	gpu_from_row(a, r, 0, out);
	return 0;
}

int
db_gpu_insert(struct db *db, struct arena *a, int64_t node_id, int index, const char *uuid,
    const char *model, int memory_mib, bool mig_enabled, struct gpu_row *out, struct gp_error *err)
{
	const char *p[6] = { db_param_int(a, node_id), db_param_int(a, index), uuid, model,
		db_param_int(a, memory_mib), mig_enabled ? "true" : "false" };
	PGresult *r = db_exec(db, a, &stmt_cap_gpu_insert, 6, p, err);

	if (r == NULL) {
		if (err->status == 409) {
			if (strcmp(db_last_constraint(db), "gpus_uuid_key") == 0)
				gp_problem_set(err, GP_PROBLEM_CONFLICT,
				    "a gpu with uuid %s is already registered", uuid);
			else
				gp_problem_set(err, GP_PROBLEM_CONFLICT,
				    "the node already has a gpu at index %d", index);
		}
		return -1;
	}
	return gpu_reload(db, a, db_int64(r, 0, 0), out, err);
}

int
db_gpu_get(struct db *db, struct arena *a, const char *uuid, bool for_update, struct gpu_row *out,
    bool *found, struct gp_error *err)
{
	PGresult *r;

	if (get_locked(db, a, for_update ? &stmt_cap_gpu_lock : NULL, &stmt_cap_gpu_get, uuid, &r,
		err) < 0)
		return -1;
	*found = r != NULL;
	if (*found)
		gpu_from_row(a, r, 0, out);
	return 0;
}

int
db_gpus_list(struct db *db, struct arena *a, const struct gpu_filter *f, int64_t after_id,
    int limit, struct gpu_row **out, int *n, struct gp_error *err)
{
	const char *p[9] = { db_param_int(a, after_id), db_param_int(a, limit),
		param_id_or_null(a, f->node_id), param_id_or_null(a, f->cluster_id), f->model,
		f->health,
		f->mig_enabled < 0   ? NULL
		    : f->mig_enabled ? "true"
				     : "false",
		param_id_or_null(a, f->project_id), f->pool_name };
	PGresult *r = db_exec(db, a, &stmt_cap_gpus_list, 9, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		gpu_from_row(a, r, i, &(*out)[i]);
	return 0;
}

int
db_gpu_update(struct db *db, struct arena *a, int64_t id, const char *health, bool reason_set,
    const char *health_reason, int mig_enabled, int64_t expected_generation, struct gpu_row *out,
    bool *stale, struct gp_error *err)
{
	const char *p[6] = { db_param_int(a, id), health, reason_set ? "true" : "false",
		health_reason,
		mig_enabled < 0   ? NULL
		    : mig_enabled ? "true"
				  : "false",
		db_param_int(a, expected_generation) };
	PGresult *r = db_exec(db, a, &stmt_cap_gpu_update, 6, p, err);

	*stale = false;
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		*stale = true;
		return 0;
	}
	return gpu_reload(db, a, id, out, err);
}

/* ---- allocations ---- */

int
db_allocation_insert_unmanaged(struct db *db, struct arena *a, int64_t gpu_id, const char *profile,
    int start, int size, const char *state, struct gp_error *err)
{
	const char *p[5] = { db_param_int(a, gpu_id), profile, db_param_int(a, start),
		db_param_int(a, size), state };

	if (db_exec(db, a, &stmt_cap_alloc_insert, 5, p, err) == NULL) {
		if (err->status == 409)
			gp_problem_set(err, GP_PROBLEM_CONFLICT,
			    "%s at slice %d overlaps another instance on the gpu", profile, start);
		return -1;
	}
	return 0;
}

int
db_allocations_live(struct db *db, struct arena *a, const int64_t *ids, int nids,
    struct alloc_row **out, int *n, struct gp_error *err)
{
	const char *p[1] = { db_param_int64_array(a, ids, nids) };
	PGresult *r;

	*n = 0;
	*out = NULL;
	if (nids == 0)
		return 0;
	r = db_exec(db, a, &stmt_cap_allocs_live, 1, p, err);
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct alloc_row *o = &(*out)[i];

		o->id = db_int64(r, i, 0);
		o->gpu_id = db_int64(r, i, 1);
		o->profile = db_text(a, r, i, 2);
		o->start = (int)db_int64(r, i, 3);
		o->size = (int)db_int64(r, i, 4);
		o->state = db_text(a, r, i, 5);
		o->pool_id = db_int64(r, i, 6);
		o->device_uuid = db_text(a, r, i, 7);
		o->created_us = db_int64(r, i, 8);
	}
	return 0;
}

/* ---- capacity ---- */

int
db_capacity_classes(struct db *db, struct arena *a, int64_t cluster_id, const char *model,
    struct layout_class **out, int *n, struct gp_error *err)
{
	const char *p[2] = { param_id_or_null(a, cluster_id), model };
	PGresult *r = db_exec(db, a, &stmt_cap_classes, 2, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct layout_class *c = &(*out)[i];

		c->model = db_text(a, r, i, 0);
		c->mig_enabled = db_bool(r, i, 1);
		c->healthy = db_bool(r, i, 2);
		c->node_ready = db_bool(r, i, 3);
		c->layout = db_text(a, r, i, 4);
		c->count = db_int64(r, i, 5);
	}
	return 0;
}

int
db_capacity_placeable_classes(struct db *db, struct arena *a, int64_t cluster_id,
    const char *const *models, int nmodels, struct layout_class **out, int *n, struct gp_error *err)
{
	const char *p[2] = { db_param_text_array(a, models, nmodels),
		param_id_or_null(a, cluster_id) };
	PGresult *r = cluster_id != 0
	    ? db_exec(db, a, &stmt_cap_placeable_classes_cluster, 2, p, err)
	    : db_exec(db, a, &stmt_cap_placeable_classes, 1, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct layout_class *c = &(*out)[i];

		c->model = db_text(a, r, i, 0);
		c->mig_enabled = db_bool(r, i, 1);
		c->healthy = true;
		c->node_ready = true;
		c->layout = db_text(a, r, i, 2);
		c->count = db_int64(r, i, 3);
	}
	return 0;
}
