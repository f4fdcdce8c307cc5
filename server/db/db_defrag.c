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

/* progress: pending, running, done, skipped, failed (a planned plan: all pending) */
#define DEFRAG_PROGRESS                                                                            \
	"(SELECT CASE WHEN count(*) = 0 AND d.state IN ('cancelled', 'expired') THEN "             \
	"ARRAY[0, 0, 0, d.moves, 0] WHEN count(*) = 0 THEN ARRAY[d.moves, 0, 0, 0, 0] ELSE ARRAY[" \
	"count(*) FILTER (WHERE m.state = 'pending'), count(*) FILTER (WHERE m.state IN "          \
	"('reserving', 'creating', 'destroying')), count(*) FILTER (WHERE m.state = 'done'), "     \
	"count(*) FILTER (WHERE m.state = 'skipped'), count(*) FILTER (WHERE m.state = 'failed')]" \
	" END FROM defrag_moves m WHERE m.plan_id = d.id)::text"

DB_STMT(stmt_defrag_get,
    "SELECT d.id, d.goal, d.state, d.moves, d.body::text, u.username, " EPOCH_US(
	"d.created_at") ", d.error, " DEFRAG_PROGRESS
			" FROM defrag_plans d LEFT JOIN users u ON u.id = d.created_by WHERE d.id = $1");

DB_STMT(stmt_defrag_list,
    "SELECT d.id, d.goal, d.state, d.moves, NULL, u.username, " EPOCH_US(
	"d.created_at") ", d.error, " DEFRAG_PROGRESS ", d.body->>'cluster', "
			"coalesce(d.body->'items', '[]')::text "
			"FROM defrag_plans d LEFT JOIN users u ON u.id = d.created_by "
			"WHERE ($1::int8 = 0 OR d.id < $1) AND ($2::text IS NULL OR d.state = $2) "
			"ORDER BY d.id DESC LIMIT $3");

DB_STMT(stmt_defrag_moves,
    "SELECT ordinal, state, reason, coalesce(new_allocation_id, 0), old_uuid, new_uuid, " EPOCH_US(
	"updated_at") " FROM defrag_moves WHERE plan_id = $1 ORDER BY ordinal");
DB_STMT(stmt_defrag_apply, "SELECT defrag_apply($1, $2, $3::int)");
DB_STMT(stmt_defrag_cancel, "SELECT defrag_cancel($1)");
DB_STMT(stmt_defrag_runnable,
    "SELECT id FROM defrag_plans WHERE (state = 'applying' OR state = 'cancelled') "
    "AND applied_at IS NOT NULL AND finished_at IS NULL ORDER BY id");
DB_STMT(stmt_defrag_step, "SELECT defrag_step($1, $2::float8, $3::int)");

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

/* created_by, created_at, error and progress: columns 5-8 of get and list */
static void
plan_row_tail(struct arena *a, PGresult *r, int i, struct defrag_plan_row *o)
{
	const char *pg;

	o->created_by = db_text(a, r, i, 5);
	o->created_us = db_int64(r, i, 6);
	o->error = db_text(a, r, i, 7);
	o->cluster = NULL;
	o->items = NULL;
	memset(o->progress, 0, sizeof(o->progress));
	pg = PQgetvalue(r, i, 8); /* "{1,2,3,4,5}" */
	if (pg[0] == '{')
		(void)sscanf(pg, "{%d,%d,%d,%d,%d}", &o->progress[0], &o->progress[1],
		    &o->progress[2], &o->progress[3], &o->progress[4]);
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
	plan_row_tail(a, r, 0, out);
	return 0;
}

int
db_defrag_moves(struct db *db, struct arena *a, int64_t id, struct defrag_move_row **out, int *n,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_defrag_moves, 1, p, err);

	*n = 0;
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct defrag_move_row *m = &(*out)[i];

		m->ordinal = (int)db_int64(r, i, 0);
		m->state = db_text(a, r, i, 1);
		m->reason = db_text(a, r, i, 2);
		m->new_allocation = db_int64(r, i, 3);
		m->old_uuid = db_text(a, r, i, 4);
		m->new_uuid = db_text(a, r, i, 5);
		m->updated_us = db_int64(r, i, 6);
	}
	return 0;
}

int
db_defrag_plans_list(struct db *db, struct arena *a, int64_t before, const char *state, int limit,
    struct defrag_plan_row **out, int *n, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, before), state, db_param_int(a, limit) };
	PGresult *r = db_exec(db, a, &stmt_defrag_list, 3, p, err);

	*n = 0;
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct defrag_plan_row *o = &(*out)[i];

		o->id = db_int64(r, i, 0);
		o->goal = db_text(a, r, i, 1);
		o->state = db_text(a, r, i, 2);
		o->moves = (int)db_int64(r, i, 3);
		o->body = NULL;
		plan_row_tail(a, r, i, o);
		o->cluster = db_text(a, r, i, 9);
		o->items = db_text(a, r, i, 10);
	}
	return 0;
}

static int
one_text(struct db *db, struct arena *a, const struct db_stmt *st, int np, const char **p,
    const char **out, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, st, np, p, err);

	if (r == NULL)
		return -1;
	*out = db_text(a, r, 0, 0);
	return 0;
}

int
db_defrag_apply(struct db *db, struct arena *a, int64_t id, int64_t user_id, int ttl_s,
    const char **outcome, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, id), db_param_int(a, user_id),
		db_param_int(a, ttl_s) };

	return one_text(db, a, &stmt_defrag_apply, 3, p, outcome, err);
}

int
db_defrag_cancel(struct db *db, struct arena *a, int64_t id, const char **outcome,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };

	return one_text(db, a, &stmt_defrag_cancel, 1, p, outcome, err);
}

int
db_defrag_runnable(struct db *db, struct arena *a, int64_t **ids, int *n, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, &stmt_defrag_runnable, 0, NULL, err);

	*n = 0;
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*ids = arena_alloc(a, sizeof(**ids) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		(*ids)[i] = db_int64(r, i, 0);
	return 0;
}

int
db_defrag_step(struct db *db, struct arena *a, int64_t id, double threshold, int timeout_s,
    const char **outcome, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, id), arena_printf(a, "%.6f", threshold),
		db_param_int(a, timeout_s) };

	return one_text(db, a, &stmt_defrag_step, 3, p, outcome, err);
}
