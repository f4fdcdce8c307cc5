/*
 * db_defrag.c - the defragmentation planner's reads and its stored plans.
 */
#include "db_defrag.h"
#include "db_internal.h"
#include "db_sql.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The GPUs in scope and their live allocations in one statement (one
 * snapshot): rows of kind 'g' (GPUs) then 'a' (allocations). The idle
 * rule is alerts_idle_sweep's (migration 0016), over $3 seconds; the
 * samples are averaged (a range scan of the window) only for allocations
 * that pass the cheaper tests first (CASE: evaluated in order). Rows come
 * unordered: sorting 300,000 of them spilled to disk in PostgreSQL (a
 * third of the read on 80,000 GPUs); db_defrag_fleet sorts in C.
 */
DB_STMT(stmt_defrag_fleet,
    "WITH g AS (SELECT g.id, g.node_id, g.cluster_id, g.gpu_index, g.model, g.uuid, "
    "n.name AS node, g.mig_enabled FROM gpus g JOIN nodes n ON n.id = g.node_id "
    "WHERE g.health = 'ok' AND g.node_status = 'ready' "
    "AND ($1::int8 IS NULL OR g.cluster_id = $1) "
    "AND ($2::text[] IS NULL OR n.name = ANY ($2::text[]))) "
    "SELECT 'g' AS kind, g.id, g.node_id, g.cluster_id, g.gpu_index, g.model, g.uuid, g.node, "
    "NULL::text, g.mig_enabled, 0::int8, 0::int8 FROM g "
    "UNION ALL "
    "SELECT 'a', a.id, a.gpu_id, 0::int8, a.start, a.profile, a.state, p.name, pr.name, "
    "CASE WHEN a.state = 'ready' AND a.pool_id IS NOT NULL AND a.profile <> 'full' "
    " AND a.updated_at <= now() - make_interval(secs => $3::int) "
    " AND NOT EXISTS (SELECT 1 FROM workload_profiles w WHERE w.allocation_id = a.id "
    "   AND w.node_id = g.node_id "
    "   AND (w.ended_at IS NULL OR w.ended_at > now() - make_interval(secs => $3::int))) "
    "THEN coalesce((SELECT avg(s.sm_active) FROM gpu_metric_samples s "
    "   WHERE s.gpu_id = a.gpu_id AND s.device_uuid = coalesce(a.device_uuid, g.uuid) "
    "   AND s.ts > now() - make_interval(secs => $3::int)), 0) < $4::float8 "
    "ELSE false END, "
    "coalesce(a.pool_id, 0), coalesce(p.project_id, 0) "
    "FROM allocations a JOIN g ON g.id = a.gpu_id "
    "LEFT JOIN pools p ON p.id = a.pool_id LEFT JOIN projects pr ON pr.id = p.project_id "
    "WHERE a.state <> 'released'");

DB_STMT(stmt_defrag_insert,
    "INSERT INTO defrag_plans (created_by, cluster_id, goal, moves, body) "
    "VALUES (nullif($1::int8, 0), nullif($2::int8, 0), $3, $4::int, $5::jsonb) "
    "RETURNING id, " EPOCH_US("created_at"));

DB_STMT(stmt_defrag_get,
    "SELECT d.id, d.goal, d.state, d.moves, d.body::text, u.username, " EPOCH_US(
	"d.created_at") " FROM defrag_plans d LEFT JOIN users u ON u.id = d.created_by WHERE d.id = $1");

static int
gpu_row_cmp(const void *x, const void *y)
{
	const struct defrag_gpu_row *a = x, *b = y;

	if (a->node_id != b->node_id)
		return a->node_id < b->node_id ? -1 : 1;
	if (a->index != b->index)
		return a->index < b->index ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

static int
alloc_row_cmp(const void *x, const void *y)
{
	const struct defrag_alloc_row *a = x, *b = y;

	if (a->gpu_id != b->gpu_id)
		return a->gpu_id < b->gpu_id ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return (a->id > b->id) - (a->id < b->id);
}

int
db_defrag_fleet(struct db *db, struct arena *a, int64_t cluster_id, const char *const *nodes,
    int nnodes, int idle_s, double threshold, struct defrag_gpu_row **gpus, int *ngpus,
    struct defrag_alloc_row **allocs, int *nallocs, struct gp_error *err)
{
	const char *p[4] = { cluster_id > 0 ? db_param_int(a, cluster_id) : NULL,
		nnodes > 0 ? db_param_text_array(a, nodes, nnodes) : NULL, db_param_int(a, idle_s),
		arena_printf(a, "%.6f", threshold) };
	PGresult *r = db_exec(db, a, &stmt_defrag_fleet, 4, p, err);
	int n, ng = 0, na = 0;

	*ngpus = 0;
	*nallocs = 0;
	if (r == NULL)
		return -1;
	n = PQntuples(r);
	*gpus = arena_alloc(a, sizeof(**gpus) * (size_t)(n + 1));
	*allocs = arena_alloc(a, sizeof(**allocs) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		if (PQgetvalue(r, i, 0)[0] == 'g') {
			struct defrag_gpu_row *g = &(*gpus)[ng++];

			g->id = db_int64(r, i, 1);
			g->node_id = db_int64(r, i, 2);
			g->cluster_id = db_int64(r, i, 3);
			g->index = (int)db_int64(r, i, 4);
			g->model = db_text(a, r, i, 5);
			g->uuid = db_text(a, r, i, 6);
			g->node = db_text(a, r, i, 7);
			g->mig_enabled = db_bool(r, i, 9);
		} else {
			struct defrag_alloc_row *o = &(*allocs)[na++];

			o->id = db_int64(r, i, 1);
			o->gpu_id = db_int64(r, i, 2);
			o->start = (int)db_int64(r, i, 4);
			o->profile = db_text(a, r, i, 5);
			o->state = db_text(a, r, i, 6);
			o->pool = db_text(a, r, i, 7);
			o->project = db_text(a, r, i, 8);
			o->idle = db_bool(r, i, 9);
			o->pool_id = db_int64(r, i, 10);
			o->project_id = db_int64(r, i, 11);
		}
	}
	qsort(*gpus, (size_t)ng, sizeof(**gpus), gpu_row_cmp);
	qsort(*allocs, (size_t)na, sizeof(**allocs), alloc_row_cmp);
	*ngpus = ng;
	*nallocs = na;
	return 0;
}

int
db_defrag_plan_insert(struct db *db, struct arena *a, int64_t user_id, int64_t cluster_id,
    const char *goal, int moves, const char *body_json, int64_t *id, int64_t *created_us,
    struct gp_error *err)
{
	const char *p[5] = { db_param_int(a, user_id), db_param_int(a, cluster_id), goal,
		db_param_int(a, moves), body_json };
	PGresult *r = db_exec(db, a, &stmt_defrag_insert, 5, p, err);

	if (r == NULL)
		return -1;
	*id = db_int64(r, 0, 0);
	*created_us = db_int64(r, 0, 1);
	return 0;
}

int
db_defrag_plan_get(struct db *db, struct arena *a, int64_t id, struct defrag_plan_row *out,
    bool *found, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_defrag_get, 1, p, err);

	*found = false;
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 0)
		return 0;
	*found = true;
	out->id = db_int64(r, 0, 0);
	out->goal = db_text(a, r, 0, 1);
	out->state = db_text(a, r, 0, 2);
	out->moves = (int)db_int64(r, 0, 3);
	out->body = db_text(a, r, 0, 4);
	out->created_by = db_text(a, r, 0, 5);
	out->created_us = db_int64(r, 0, 6);
	return 0;
}
