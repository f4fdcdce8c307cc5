/*
 * db_kubernetes.c - the pools and devices behind the Kubernetes objects
 * (see db_kubernetes.h).
 */
#include "db_kubernetes.h"
#include "db_internal.h"

/* $1 cluster id (0: all), $2 project id (0: all) */
DB_STMT(stmt_k8s_devices,
    "SELECT p.id, p.project_id, pr.name, p.name, d.uuid, "
    "(SELECT coalesce(json_agg(n.namespace ORDER BY n.namespace COLLATE \"C\"), '[]') "
    " FROM project_namespaces n WHERE n.project_id = p.project_id)::text "
    "FROM pools p JOIN projects pr ON pr.id = p.project_id "
    "LEFT JOIN LATERAL (SELECT CASE WHEN a.profile = 'full' THEN coalesce(a.device_uuid, g.uuid) "
    " ELSE a.device_uuid END AS uuid FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
    " WHERE a.pool_id = p.id AND a.state = 'ready' AND g.health <> 'failed' "
    " AND ($1::int8 = 0 OR g.cluster_id = $1::int8)) d ON d.uuid IS NOT NULL "
    "WHERE p.status IN ('provisioning', 'active', 'degraded') "
    "AND ($2::int8 = 0 OR p.project_id = $2::int8) "
    "AND EXISTS (SELECT 1 FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
    " WHERE a.pool_id = p.id AND a.state <> 'released' "
    " AND ($1::int8 = 0 OR g.cluster_id = $1::int8)) "
    "ORDER BY pr.name COLLATE \"C\", p.name COLLATE \"C\", p.id, d.uuid COLLATE \"C\"");

int
db_k8s_devices(struct db *db, struct arena *a, int64_t cluster_id, int64_t project_id,
    struct k8s_device_row **out, int *n, struct gp_error *err)
{
	const char *params[] = { db_param_int(a, cluster_id), db_param_int(a, project_id) };
	PGresult *r = db_exec(db, a, &stmt_k8s_devices, 2, params, err);

	*out = NULL;
	*n = 0;
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n > 0 ? *n : 1));
	for (int i = 0; i < *n; i++) {
		struct k8s_device_row *o = &(*out)[i];

		o->pool_id = db_int64(r, i, 0);
		o->project_id = db_int64(r, i, 1);
		o->project = db_text(a, r, i, 2);
		o->pool = db_text(a, r, i, 3);
		o->device_uuid = db_null(r, i, 4) ? NULL : db_text(a, r, i, 4);
		o->namespaces_json = db_text(a, r, i, 5);
	}
	return 0;
}

DB_STMT(stmt_k8s_workloads, "SELECT bad_index, violations FROM k8s_apply_workloads($1, $2::jsonb)");

int
db_k8s_workloads(struct db *db, struct arena *a, int64_t cluster_id, const char *json, int *bad,
    int64_t *violations, struct gp_error *err)
{
	const char *params[] = { db_param_int(a, cluster_id), json };
	PGresult *r = db_exec(db, a, &stmt_k8s_workloads, 2, params, err);

	if (r == NULL)
		return -1;
	*bad = (int)db_int64(r, 0, 0);
	*violations = db_int64(r, 0, 1);
	return 0;
}

DB_STMT(stmt_k8s_failed_gpus,
    "SELECT g.uuid, coalesce(json_agg(a.device_uuid ORDER BY a.device_uuid COLLATE \"C\") "
    "FILTER (WHERE a.device_uuid IS NOT NULL AND a.device_uuid <> g.uuid), '[]')::text "
    "FROM gpus g LEFT JOIN allocations a ON a.gpu_id = g.id AND a.state <> 'released' "
    "WHERE g.cluster_id = $1 AND g.health = 'failed' GROUP BY g.uuid "
    "ORDER BY g.uuid COLLATE \"C\"");

int
db_k8s_failed_gpus(struct db *db, struct arena *a, int64_t cluster_id, struct k8s_failed_gpu **out,
    int *n, struct gp_error *err)
{
	const char *params[] = { db_param_int(a, cluster_id) };
	PGresult *r = db_exec(db, a, &stmt_k8s_failed_gpus, 1, params, err);

	*out = NULL;
	*n = 0;
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n > 0 ? *n : 1));
	for (int i = 0; i < *n; i++) {
		(*out)[i].uuid = db_text(a, r, i, 0);
		(*out)[i].devices_json = db_text(a, r, i, 1);
	}
	return 0;
}
