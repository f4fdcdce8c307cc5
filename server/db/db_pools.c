/*
 * db_pools.c - quotas, pools, pool requests and the expiry worker's
 * claims (see db_pools.h); the approval statements are in db_approvals.c.
 */
#include "db_approvals.h"
#include "db_pools.h"
#include "core/problem.h"
#include "db_internal.h"
#include "db_sql.h"

#include <string.h>

#define POOL_COLS                                                                                                           \
	"p.id, p.project_id, pr.name, p.name, p.status, p.items::text, " EPOCH_US("p.ends_at") ", p.generation, " EPOCH_US( \
	    "p.created_at") ", " EPOCH_US("p.updated_at") ", " EPOCH_US("p.released_at") ", "                               \
											 "(SELECT c.name FROM clusters c WHERE c.id = p.cluster_id)"
#define POOL_FROM "FROM pools p JOIN projects pr ON pr.id = p.project_id "

#define REQ_COLS                                                                                                              \
	"r.id, r.project_id, pr.name, r.pool_id, p.name, r.action, r.items::text, "                                           \
	"r.justification, " EPOCH_US(                                                                                         \
	    "r.ends_at") ", r.state, coalesce(r.requested_by, 0), "                                                           \
			 "ru.username, " EPOCH_US("r.requested_at") ", " EPOCH_US(                                            \
			     "r.expires_at") ", "                                                                             \
					     "du.username, " EPOCH_US(                                                        \
						 "r.decided_at") ", r.note, r.generation, "                                   \
								 "coalesce(p.cluster_id, 0), (SELECT c.name FROM clusters c " \
								 "WHERE c.id = p.cluster_id)"
#define REQ_FROM                                                                         \
	"FROM pool_requests r JOIN projects pr ON pr.id = r.project_id "                 \
	"JOIN pools p ON p.id = r.pool_id LEFT JOIN users ru ON ru.id = r.requested_by " \
	"LEFT JOIN users du ON du.id = r.decided_by "

#define ALLOC_COLS                                                            \
	"a.id, a.pool_id, a.gpu_id, g.node_id, n.name, g.uuid, g.gpu_index, " \
	"g.model, a.profile, a.start, a.size, a.state, a.device_uuid, coalesce(a.request_id, 0)"

/* ---- quotas ---- */

DB_STMT(stmt_pools_quota_get,
    "SELECT items::text, generation, " EPOCH_US("updated_at") " FROM project_quotas "
							      "WHERE project_id = $1");
DB_STMT(stmt_pools_quota_lock,
    "SELECT items::text FROM project_quotas WHERE project_id = $1 FOR UPDATE");
DB_STMT(stmt_pools_quota_put,
    "INSERT INTO project_quotas (project_id, items) VALUES ($1, $2::jsonb) "
    "ON CONFLICT (project_id) DO UPDATE SET items = EXCLUDED.items, "
    "generation = project_quotas.generation + 1, updated_at = now() "
    "RETURNING generation, " EPOCH_US("updated_at"));
DB_STMT(stmt_pools_quota_delete,
    "DELETE FROM project_quotas WHERE project_id = $1 RETURNING project_id");
/* what the project's pools hold, per kind, canonical order */
DB_STMT(stmt_pools_usage,
    "SELECT coalesce(jsonb_agg(jsonb_build_object('model', m, 'profile', pf, 'count', c) "
    "ORDER BY m, pf), '[]')::text FROM (SELECT i->>'model' AS m, i->>'profile' AS pf, "
    "sum((i->>'count')::int) AS c FROM pools p, jsonb_array_elements(p.items) i "
    "WHERE p.project_id = $1 AND p.status <> 'released' GROUP BY 1, 2) s");

/* ---- pools ---- */

DB_STMT(stmt_pools_get, "SELECT " POOL_COLS " " POOL_FROM "WHERE p.id = $1");
DB_STMT(stmt_pools_by_name,
    "SELECT " POOL_COLS " " POOL_FROM
    "WHERE p.project_id = $1 AND p.name = $2 AND p.status <> 'released'");
DB_STMT(stmt_pools_list,
    "SELECT " POOL_COLS " " POOL_FROM
    "WHERE p.project_id = $1 AND p.id > $2 AND ($4::text IS NULL OR p.status = $4) "
    "ORDER BY p.id LIMIT $3");
DB_STMT(stmt_pools_allocs,
    "SELECT " ALLOC_COLS " FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
    "JOIN nodes n ON n.id = g.node_id "
    "WHERE a.pool_id = ANY ($1::int8[]) AND a.state <> 'released' "
    "AND ($2::int8 = 0 OR a.request_id = $2) "
    "ORDER BY a.pool_id, n.name, g.gpu_index, a.start");

/* ---- requests ---- */

/*
 * $13: the caller checked the quota. Otherwise nothing is inserted when
 * the project has a quota (the first column says so), and the caller
 * checks it and tries again: projects without a quota pay no round trip
 * for it.
 */
DB_STMT(stmt_pools_submit,
    "WITH g AS ("
    " SELECT $13::bool OR NOT EXISTS (SELECT 1 FROM project_quotas q WHERE q.project_id = $1) "
    " AS ok"
    "), pool AS ("
    " INSERT INTO pools (project_id, name, cluster_id) SELECT $1, $3, nullif($14::int8, 0) "
    " FROM g WHERE g.ok AND $2::int8 = 0 "
    " RETURNING id"
    "), req AS ("
    " INSERT INTO pool_requests (project_id, pool_id, action, items, justification, ends_at, "
    " requested_by, expires_at) SELECT $1, coalesce((SELECT id FROM pool), $2), $4, $5::jsonb, "
    " $6, " TS_PARAM(
	"$7") ", nullif($8::int8, 0), now() + make_interval(secs => $9::int4) "
	      " FROM g WHERE g.ok RETURNING id, pool_id, requested_at, expires_at"
	      "), ev AS ("
	      " INSERT INTO pool_request_events (request_id, at, from_state, to_state, actor_id, actor) "
	      " SELECT id, requested_at, NULL, 'pending', nullif($8::int8, 0), $10 FROM req"
	      "), au AS ("
	      " INSERT INTO audit_log (actor_id, actor, action, object_type, object_id, project_id, "
	      " request_id, after) SELECT nullif($8::int8, 0), $10, 'pool_request.submit', "
	      " 'pool_request', req.id::text, $1, $11, $12::jsonb || jsonb_build_object('id', req.id, "
	      " 'pool_id', req.pool_id) FROM req"
	      ") SELECT g.ok, req.id, req.pool_id, " EPOCH_US("req.requested_at") ", " EPOCH_US(
		  "req.expires_at") " FROM g LEFT JOIN req ON true");
/*
 * Many submissions in one statement (group commit): one array element
 * per submission, the same columns as stmt_pools_submit. Ids are drawn
 * first, so that every row inserted can be matched to its submission
 * (ord): a create whose pool name is taken inserts nothing (ON CONFLICT
 * DO NOTHING, so the others still go in), and one for a project with a
 * quota that the caller did not check inserts nothing either.
 */
DB_STMT(stmt_pools_submit_many,
    "WITH g AS ("
    " SELECT u.*, u.quota_checked OR NOT EXISTS (SELECT 1 FROM project_quotas q "
    " WHERE q.project_id = u.project) AS ok, "
    " CASE WHEN u.pool = 0 THEN nextval('pools_id_seq') END AS new_pool, "
    " nextval('pool_requests_id_seq') AS req_id "
    " FROM unnest($1::int8[], $2::int8[], $3::text[], $4::text[], $5::text[], $6::text[], "
    " $7::int8[], $8::int8[], $9::int4[], $10::text[], $11::text[], $12::text[], $13::bool[], "
    " $14::int8[]) WITH ORDINALITY AS u (project, pool, pool_name, action, items, justification, "
    " ends, actor_id, ttl, actor, http_id, after, quota_checked, cluster, ord)"
    "), pool AS ("
    " INSERT INTO pools (id, project_id, name, cluster_id) OVERRIDING SYSTEM VALUE "
    " SELECT new_pool, project, pool_name, nullif(cluster, 0) FROM g "
    " WHERE ok AND new_pool IS NOT NULL ORDER BY ord "
    " ON CONFLICT (project_id, name) WHERE status <> 'released' DO NOTHING RETURNING id"
    "), req AS ("
    " INSERT INTO pool_requests (id, project_id, pool_id, action, items, justification, ends_at, "
    " requested_by, expires_at) OVERRIDING SYSTEM VALUE "
    " SELECT g.req_id, g.project, coalesce(pool.id, g.pool), g.action, g.items::jsonb, "
    " g.justification, " TS_PARAM(
	"g.ends") ", nullif(g.actor_id, 0), "
		  " now() + make_interval(secs => g.ttl) FROM g LEFT JOIN pool ON pool.id = g.new_pool "
		  " WHERE g.ok AND (g.new_pool IS NULL OR pool.id IS NOT NULL) "
		  " RETURNING id, pool_id, requested_at, expires_at"
		  "), ev AS ("
		  " INSERT INTO pool_request_events (request_id, at, from_state, to_state, actor_id, actor) "
		  " SELECT req.id, req.requested_at, NULL, 'pending', nullif(g.actor_id, 0), g.actor "
		  " FROM req JOIN g ON g.req_id = req.id"
		  "), au AS ("
		  " INSERT INTO audit_log (actor_id, actor, action, object_type, object_id, project_id, "
		  " request_id, after) SELECT nullif(g.actor_id, 0), g.actor, 'pool_request.submit', "
		  " 'pool_request', req.id::text, g.project, g.http_id, g.after::jsonb || "
		  " jsonb_build_object('id', req.id, 'pool_id', req.pool_id) FROM req JOIN g ON g.req_id = req.id"
		  ") SELECT g.ok, req.id, req.pool_id, " EPOCH_US("req.requested_at") ", " EPOCH_US(
		      "req.expires_at") " FROM g LEFT JOIN req ON req.id = g.req_id ORDER BY g.ord");
DB_STMT(stmt_pools_req_get, "SELECT " REQ_COLS " " REQ_FROM "WHERE r.id = $1");
DB_STMT(stmt_pools_req_list,
    "SELECT " REQ_COLS " " REQ_FROM "WHERE r.id > $1 AND ($3::int8 = 0 OR r.project_id = $3) "
    "AND ($4::int8 = 0 OR r.project_id IN "
    "(SELECT m.project_id FROM project_members m WHERE m.user_id = $4)) "
    "AND ($5::text IS NULL OR r.state = $5) AND ($6::int8 = 0 OR r.pool_id = $6) "
    "AND ($7::text IS NULL OR r.pool_id IN "
    "(SELECT q.id FROM pools q WHERE q.project_id = $3 AND q.name = $7)) "
    "ORDER BY r.id LIMIT $2");
DB_STMT(stmt_pools_req_events,
    "SELECT " EPOCH_US("at") ", from_state, to_state, actor, note FROM pool_request_events "
			     "WHERE request_id = $1 ORDER BY id");
DB_STMT(stmt_pools_req_lock,
    "SELECT " REQ_COLS ", p.status, p.items::text, " EPOCH_US(
	"p.ends_at") ", "
		     "EXISTS (SELECT 1 FROM project_quotas q WHERE q.project_id = r.project_id), " EPOCH_US(
			 "now()") " " REQ_FROM "WHERE r.id = $1 FOR NO KEY UPDATE OF r, p");
/*
 * A batch of approvals: its requests in id order, then their pools in id
 * order (lk_r, lk_p: the one-time filter runs them before the main scan),
 * never a request's pool before the next request. The main scan's lock
 * re-reads each row's latest version (they are already held).
 */
DB_STMT(stmt_pools_req_lock_many,
    "WITH lk_r AS (SELECT id, pool_id FROM pool_requests WHERE id = ANY ($1::int8[]) "
    "ORDER BY id FOR NO KEY UPDATE), "
    "lk_p AS (SELECT id FROM pools WHERE id IN (SELECT pool_id FROM lk_r) "
    "ORDER BY id FOR NO KEY UPDATE) "
    "SELECT " REQ_COLS ", p.status, p.items::text, " EPOCH_US(
	"p.ends_at") ", "
		     "EXISTS (SELECT 1 FROM project_quotas q WHERE q.project_id = r.project_id), " EPOCH_US(
			 "now()") " " REQ_FROM "WHERE r.id = ANY ($1::int8[]) "
				  "AND (SELECT count(*) FROM lk_p) >= 0 "
				  "ORDER BY r.id FOR NO KEY UPDATE OF r, p");
DB_STMT(stmt_pools_req_close,
    "WITH rq AS ("
    " UPDATE pool_requests SET state = $2, decided_by = nullif($3::int8, 0), "
    " decided_at = now(), note = $5, generation = generation + 1 "
    " WHERE id = $1 AND state = 'pending' RETURNING id, project_id, pool_id, action"
    "), pl AS ("
    " UPDATE pools SET status = 'released', released_at = now(), generation = generation + 1, "
    " updated_at = now() WHERE id = (SELECT pool_id FROM rq WHERE action = 'create') "
    " AND status = 'pending' RETURNING id"
    "), ev AS ("
    " INSERT INTO pool_request_events (request_id, from_state, to_state, actor_id, actor, note) "
    " SELECT id, 'pending', $2, nullif($3::int8, 0), $4, $5 FROM rq"
    "), au AS ("
    " INSERT INTO audit_log (actor_id, actor, action, object_type, object_id, project_id, "
    " request_id, before, after) SELECT nullif($3::int8, 0), $4, $7, 'pool_request', "
    " id::text, project_id, $6, $8::jsonb, $8::jsonb || jsonb_build_object('state', $2::text, "
    " 'note', $5::text) FROM rq"
    ") SELECT count(*) FROM rq");

/* ---- metrics ---- */

DB_STMT(stmt_pools_gauges,
    "SELECT (SELECT count(*) FROM pool_requests WHERE state = 'pending'), "
    "(SELECT count(*) FROM outbox WHERE delivered_at IS NULL)");

/* ---- expiry ---- */

/*
 * One pending request past its lifetime, locked (SKIP LOCKED: two
 * replicas' passes take different ones); it is then closed as a reject
 * is (stmt_pools_req_close), with the same audit document.
 */
DB_STMT(stmt_pools_expire_due,
    "SELECT id FROM pool_requests WHERE state = 'pending' AND expires_at <= now() "
    "ORDER BY expires_at, id LIMIT 1 FOR UPDATE SKIP LOCKED");
DB_STMT(stmt_pools_claim_due,
    "WITH due AS ("
    " SELECT id, project_id FROM pools WHERE ends_at <= now() "
    " AND status IN ('provisioning', 'active', 'degraded') "
    " ORDER BY ends_at, id LIMIT 1 FOR NO KEY UPDATE SKIP LOCKED"
    "), rq AS ("
    " INSERT INTO pool_requests (project_id, pool_id, action, justification, expires_at) "
    " SELECT project_id, id, 'release', 'the pool reached its end time', now() FROM due "
    " RETURNING id, requested_at"
    "), ev AS ("
    " INSERT INTO pool_request_events (request_id, at, to_state, note) "
    " SELECT id, requested_at, 'pending', 'submitted by the expiry worker' FROM rq"
    ") SELECT due.id, rq.id FROM due, rq");
DB_STMT(stmt_pools_unmanaged, "SELECT pools_confirm_unmanaged_releases()");

/*
 * The pool statuses' one settle path is pools_settle (migration 0019):
 * pools_settle_due hands it the releasing and provisioning pools, which
 * it locks in id order (the global lock order, docs/architecture.md).
 */
DB_STMT(stmt_pools_settle, "SELECT pools_settle_due()");

/* ---- quotas ---- */

int
db_quota_get(struct db *db, struct arena *a, int64_t project_id, bool *has, const char **items_json,
    int64_t *generation, int64_t *updated_us, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, project_id) };
	PGresult *r = db_exec(db, a, &stmt_pools_quota_get, 1, p, err);

	if (r == NULL)
		return -1;
	*has = PQntuples(r) == 1;
	*items_json = *has ? db_text(a, r, 0, 0) : NULL;
	if (generation != NULL)
		*generation = *has ? db_int64(r, 0, 1) : 0;
	if (updated_us != NULL)
		*updated_us = *has ? db_int64(r, 0, 2) : 0;
	return 0;
}

int
db_quota_lock(struct db *db, struct arena *a, int64_t project_id, bool *has,
    const char **items_json, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, project_id) };
	PGresult *r = db_exec(db, a, &stmt_pools_quota_lock, 1, p, err);

	if (r == NULL)
		return -1;
	*has = PQntuples(r) == 1;
	*items_json = *has ? db_text(a, r, 0, 0) : NULL;
	return 0;
}

int
db_quota_put(struct db *db, struct arena *a, int64_t project_id, const char *items_json,
    int64_t *generation, int64_t *updated_us, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, project_id), items_json };
	PGresult *r = db_exec(db, a, &stmt_pools_quota_put, 2, p, err);

	if (r == NULL)
		return -1;
	*generation = db_int64(r, 0, 0);
	*updated_us = db_int64(r, 0, 1);
	return 0;
}

int
db_quota_delete(struct db *db, struct arena *a, int64_t project_id, bool *existed,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, project_id) };
	PGresult *r = db_exec(db, a, &stmt_pools_quota_delete, 1, p, err);

	if (r == NULL)
		return -1;
	*existed = PQntuples(r) > 0;
	return 0;
}

int
db_project_usage(struct db *db, struct arena *a, int64_t project_id, const char **items_json,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, project_id) };
	PGresult *r = db_exec(db, a, &stmt_pools_usage, 1, p, err);

	if (r == NULL)
		return -1;
	*items_json = db_text(a, r, 0, 0);
	return 0;
}

/* ---- pools ---- */

/* A pool status column; a status this binary does not know reads as released. */
static enum pool_status
status_col(const PGresult *r, int row, int col)
{
	enum pool_status st;

	if (pool_status_parse(PQgetvalue(r, row, col), &st) < 0)
		st = POOL_STATUS_RELEASED;
	return st;
}

static void
pool_from_row(struct arena *a, const PGresult *r, int row, int c, struct pool_row *o)
{
	o->id = db_int64(r, row, c + 0);
	o->project_id = db_int64(r, row, c + 1);
	o->project = db_text(a, r, row, c + 2);
	o->name = db_text(a, r, row, c + 3);
	o->status = status_col(r, row, c + 4);
	o->items_json = db_text(a, r, row, c + 5);
	o->ends_us = db_int64(r, row, c + 6);
	o->generation = db_int64(r, row, c + 7);
	o->created_us = db_int64(r, row, c + 8);
	o->updated_us = db_int64(r, row, c + 9);
	o->released_us = db_int64(r, row, c + 10);
	o->cluster = db_text(a, r, row, c + 11);
}

int
db_pool_get(struct db *db, struct arena *a, int64_t id, struct pool_row *out, bool *found,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_pools_get, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		pool_from_row(a, r, 0, 0, out);
	return 0;
}

int
db_pool_by_name(struct db *db, struct arena *a, int64_t project_id, const char *name,
    struct pool_row *out, bool *found, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, project_id), name };
	PGresult *r = db_exec(db, a, &stmt_pools_by_name, 2, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		pool_from_row(a, r, 0, 0, out);
	return 0;
}

int
db_pools_list(struct db *db, struct arena *a, int64_t project_id, const enum pool_status *status,
    int64_t after_id, int limit, struct pool_row **out, int *n, struct gp_error *err)
{
	const char *p[4] = { db_param_int(a, project_id), db_param_int(a, after_id),
		db_param_int(a, limit), status != NULL ? pool_status_name(*status) : NULL };
	PGresult *r = db_exec(db, a, &stmt_pools_list, 4, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		pool_from_row(a, r, i, 0, &(*out)[i]);
	return 0;
}

int
db_pool_allocations(struct db *db, struct arena *a, const int64_t *ids, int nids,
    int64_t request_id, struct pool_alloc_row **out, int *n, struct gp_error *err)
{
	const char *p[2] = { db_param_int64_array(a, ids, nids), db_param_int(a, request_id) };
	PGresult *r;

	*n = 0;
	*out = NULL;
	if (nids == 0)
		return 0;
	r = db_exec(db, a, &stmt_pools_allocs, 2, p, err);
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct pool_alloc_row *o = &(*out)[i];

		o->id = db_int64(r, i, 0);
		o->pool_id = db_int64(r, i, 1);
		o->gpu_id = db_int64(r, i, 2);
		o->node_id = db_int64(r, i, 3);
		o->node = db_text(a, r, i, 4);
		o->gpu_uuid = db_text(a, r, i, 5);
		o->gpu_index = (int)db_int64(r, i, 6);
		o->model = db_text(a, r, i, 7);
		o->profile = db_text(a, r, i, 8);
		o->start = (int)db_int64(r, i, 9);
		o->size = (int)db_int64(r, i, 10);
		if (allocation_state_parse(PQgetvalue(r, i, 11), &o->state) < 0)
			o->state = ALLOCATION_FAILED;
		o->device_uuid = db_text(a, r, i, 12);
		o->request_id = db_int64(r, i, 13);
	}
	return 0;
}

/* ---- requests ---- */

static void
request_from_row(struct arena *a, const PGresult *r, int row, struct pool_request_row *o)
{
	o->id = db_int64(r, row, 0);
	o->project_id = db_int64(r, row, 1);
	o->project = db_text(a, r, row, 2);
	o->pool_id = db_int64(r, row, 3);
	o->pool = db_text(a, r, row, 4);
	if (pool_action_parse(PQgetvalue(r, row, 5), &o->action) < 0)
		o->action = POOL_ACTION_RELEASE;
	o->items_json = db_text(a, r, row, 6);
	o->justification = db_text(a, r, row, 7);
	o->ends_us = db_int64(r, row, 8);
	if (pool_request_state_parse(PQgetvalue(r, row, 9), &o->state) < 0)
		o->state = POOL_REQUEST_FAILED;
	o->requested_by_id = db_int64(r, row, 10);
	o->requested_by = db_text(a, r, row, 11);
	o->requested_us = db_int64(r, row, 12);
	o->expires_us = db_int64(r, row, 13);
	o->decided_by = db_text(a, r, row, 14);
	o->decided_us = db_int64(r, row, 15);
	o->note = db_text(a, r, row, 16);
	o->generation = db_int64(r, row, 17);
	o->cluster_id = db_int64(r, row, 18);
	o->cluster = db_text(a, r, row, 19);
}

#define REQ_NCOLS 20

/* The submitted request as row `row` (id, pool, times) and s describe it. */
static void
submitted_row(const PGresult *r, int row, const struct request_submit *s,
    struct pool_request_row *out)
{
	memset(out, 0, sizeof(*out));
	out->id = db_int64(r, row, 1);
	out->pool_id = db_int64(r, row, 2);
	out->requested_us = db_int64(r, row, 3);
	out->expires_us = db_int64(r, row, 4);
	out->project_id = s->project_id;
	out->pool = s->pool_name;
	out->action = s->action;
	out->items_json = s->items_json;
	out->justification = s->justification;
	out->ends_us = s->ends_us;
	out->state = POOL_REQUEST_PENDING;
	out->requested_by_id = s->actor_id;
	out->requested_by = s->actor;
	out->generation = 1;
	out->cluster_id = s->cluster_id;
}

/*
 * A create bound to a cluster deleted after the submission looked it up:
 * the foreign key of pools.cluster_id fails the insert, which is the
 * caller's field, not a conflict.
 */
static void
submit_cluster_gone(struct db *db, struct gp_error *err)
{
	if (err->status == 409 && strcmp(db_last_constraint(db), "pools_cluster_id_fkey") == 0) {
		gp_error_clear(err);
		gp_error_field(err, "cluster", "the cluster no longer exists");
	}
}

int
db_request_submit(struct db *db, struct arena *a, const struct request_submit *s,
    struct pool_request_row *out, bool *needs_quota, struct gp_error *err)
{
	const char *p[14];
	PGresult *r;

	p[0] = db_param_int(a, s->project_id);
	p[1] = db_param_int(a, s->pool_id);
	p[2] = s->pool_name;
	p[3] = pool_action_name(s->action);
	p[4] = s->items_json;
	p[5] = s->justification;
	p[6] = db_param_int(a, s->ends_us);
	p[7] = db_param_int(a, s->actor_id);
	p[8] = db_param_int(a, s->ttl_s);
	p[9] = s->actor;
	p[10] = s->http_request_id;
	p[11] = s->audit_after_json;
	p[12] = s->quota_checked ? "true" : "false";
	p[13] = db_param_int(a, s->cluster_id);
	*needs_quota = false;
	r = db_exec(db, a, &stmt_pools_submit, 14, p, err);
	if (r == NULL) {
		if (err->status == 409 &&
		    strcmp(db_last_constraint(db), "pools_project_name_key") == 0)
			gp_problem_set(err, GP_PROBLEM_CONFLICT,
			    "the project already has a pool named %s", s->pool_name);
		submit_cluster_gone(db, err);
		return -1;
	}
	if (PQntuples(r) != 1)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL, "the request was not inserted");
	if (!db_bool(r, 0, 0)) {
		*needs_quota = true;
		return 0;
	}
	submitted_row(r, 0, s, out);
	return 0;
}

int
db_requests_submit_many(struct db *db, struct arena *a, const struct request_submit *const *v,
    int n, bool commit, struct submit_result *res, struct gp_error *err)
{
	int64_t *i64[5];
	const char **txt[8];
	int *ttl = arena_alloc(a, sizeof(*ttl) * (size_t)(n + 1));
	bool *checked = arena_alloc(a, sizeof(*checked) * (size_t)(n + 1));
	const char *p[14];
	PGresult *r;

	for (int k = 0; k < 5; k++)
		i64[k] = arena_alloc(a, sizeof(**i64) * (size_t)(n + 1));
	for (int k = 0; k < 8; k++)
		txt[k] = arena_alloc(a, sizeof(**txt) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		i64[0][i] = v[i]->project_id;
		i64[1][i] = v[i]->pool_id;
		i64[2][i] = v[i]->ends_us;
		i64[3][i] = v[i]->actor_id;
		i64[4][i] = v[i]->cluster_id;
		txt[0][i] = v[i]->pool_name;
		txt[1][i] = pool_action_name(v[i]->action);
		txt[2][i] = v[i]->items_json;
		txt[3][i] = v[i]->justification;
		txt[4][i] = v[i]->actor;
		txt[5][i] = v[i]->http_request_id;
		txt[6][i] = v[i]->audit_after_json;
		ttl[i] = v[i]->ttl_s;
		checked[i] = v[i]->quota_checked;
	}
	p[0] = db_param_int64_array(a, i64[0], n);
	p[1] = db_param_int64_array(a, i64[1], n);
	p[2] = db_param_text_array(a, txt[0], n);
	p[3] = db_param_text_array(a, txt[1], n);
	p[4] = db_param_text_array(a, txt[2], n);
	p[5] = db_param_text_array(a, txt[3], n);
	p[6] = db_param_int64_array(a, i64[2], n);
	p[7] = db_param_int64_array(a, i64[3], n);
	p[8] = db_param_int_array(a, ttl, n);
	p[9] = db_param_text_array(a, txt[4], n);
	p[10] = db_param_text_array(a, txt[5], n);
	p[11] = db_param_text_array(a, txt[6], n);
	p[12] = db_param_bool_array(a, checked, n);
	p[13] = db_param_int64_array(a, i64[4], n);
	if (commit)
		r = db_exec_commit(db, a, &stmt_pools_submit_many, 14, p, err);
	else
		r = db_exec(db, a, &stmt_pools_submit_many, 14, p, err);
	if (r == NULL) {
		submit_cluster_gone(db, err);
		return -1;
	}
	if (PQntuples(r) != n)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL,
		    "the submissions were not all answered");
	for (int i = 0; i < n; i++) {
		memset(&res[i], 0, sizeof(res[i]));
		if (!db_bool(r, i, 0))
			res[i].needs_quota = true;
		else if (PQgetisnull(r, i, 1))
			res[i].conflict = true; /* the pool name is taken */
		else
			submitted_row(r, i, v[i], &res[i].out);
	}
	return 0;
}

int
db_request_get(struct db *db, struct arena *a, int64_t id, struct pool_request_row *out,
    bool *found, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_pools_req_get, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		request_from_row(a, r, 0, out);
	return 0;
}

int
db_requests_list(struct db *db, struct arena *a, const struct request_filter *f, int64_t after_id,
    int limit, struct pool_request_row **out, int *n, struct gp_error *err)
{
	const char *p[7] = { db_param_int(a, after_id), db_param_int(a, limit),
		db_param_int(a, f->project_id), db_param_int(a, f->member_user_id),
		f->has_state ? pool_request_state_name(f->state) : NULL,
		db_param_int(a, f->pool_id), f->pool_name };
	PGresult *r = db_exec(db, a, &stmt_pools_req_list, 7, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		request_from_row(a, r, i, &(*out)[i]);
	return 0;
}

int
db_request_events(struct db *db, struct arena *a, int64_t id, struct pool_request_event **out,
    int *n, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_pools_req_events, 1, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct pool_request_event *e = &(*out)[i];

		e->at_us = db_int64(r, i, 0);
		e->from_state = db_text(a, r, i, 1);
		e->to_state = db_text(a, r, i, 2);
		e->actor = db_text(a, r, i, 3);
		e->note = db_text(a, r, i, 4);
	}
	return 0;
}

int
db_request_lock(struct db *db, struct arena *a, int64_t id, struct approval_ctx *out, bool *found,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_pools_req_lock, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (!*found)
		return 0;
	request_from_row(a, r, 0, &out->req);
	out->pool_status = status_col(r, 0, REQ_NCOLS);
	out->pool_items_json = db_text(a, r, 0, REQ_NCOLS + 1);
	out->pool_ends_us = db_int64(r, 0, REQ_NCOLS + 2);
	out->has_quota = db_bool(r, 0, REQ_NCOLS + 3);
	out->now_us = db_int64(r, 0, REQ_NCOLS + 4);
	return 0;
}

int
db_requests_lock_many(struct db *db, struct arena *a, const int64_t *ids, int n,
    struct arena *const *arenas, struct approval_ctx *out, bool *found, struct gp_error *err)
{
	const char *p[1] = { db_param_int64_array(a, ids, n) };
	PGresult *r = db_exec(db, a, &stmt_pools_req_lock_many, 1, p, err);

	if (r == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		found[i] = false;
	for (int row = 0; row < PQntuples(r); row++) {
		int64_t id = db_int64(r, row, 0);

		for (int i = 0; i < n; i++) {
			struct arena *ra = arenas[i];

			if (ids[i] != id || found[i])
				continue;
			found[i] = true;
			request_from_row(ra, r, row, &out[i].req);
			out[i].pool_status = status_col(r, row, REQ_NCOLS);
			out[i].pool_items_json = db_text(ra, r, row, REQ_NCOLS + 1);
			out[i].pool_ends_us = db_int64(r, row, REQ_NCOLS + 2);
			out[i].has_quota = db_bool(r, row, REQ_NCOLS + 3);
			out[i].now_us = db_int64(r, row, REQ_NCOLS + 4);
		}
	}
	return 0;
}

int
db_request_close(struct db *db, struct arena *a, int64_t id, enum pool_request_state to_state,
    int64_t actor_id, const char *actor, const char *note, const char *http_request_id,
    const char *audit_action, const char *audit_before_json, struct pool_request_row *out,
    struct gp_error *err)
{
	const char *p[8] = { db_param_int(a, id), pool_request_state_name(to_state),
		db_param_int(a, actor_id), actor, note, http_request_id, audit_action,
		audit_before_json };
	PGresult *r = db_exec(db, a, &stmt_pools_req_close, 8, p, err);
	bool found;

	if (r == NULL)
		return -1;
	if (db_int64(r, 0, 0) != 1)
		return gp_problem_set(err, GP_PROBLEM_CONFLICT, "the request is no longer pending");
	if (db_request_get(db, a, id, out, &found, err) < 0)
		return -1;
	if (!found)
		return gp_problem_set(err, GP_PROBLEM_INTERNAL, "the request vanished");
	return 0;
}

/* ---- metrics ---- */

int
db_pools_gauges(struct db *db, int64_t *pending_requests, int64_t *outbox_backlog,
    struct gp_error *err)
{
	struct arena *a = arena_create();
	PGresult *r = db_exec(db, a, &stmt_pools_gauges, 0, NULL, err);
	int rc = -1;

	if (r != NULL) {
		*pending_requests = db_int64(r, 0, 0);
		*outbox_backlog = db_int64(r, 0, 1);
		rc = 0;
	}
	arena_destroy(a);
	return rc;
}

/* ---- expiry ---- */

int
db_request_expire_due(struct db *db, struct arena *a, int64_t *id, bool *found,
    struct gp_error *err)
{
	PGresult *r = db_exec(db, a, &stmt_pools_expire_due, 0, NULL, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	*id = *found ? db_int64(r, 0, 0) : 0;
	return 0;
}

int
db_pool_claim_due(struct db *db, struct arena *a, struct pool_row *out, int64_t *request_id,
    bool *found, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, &stmt_pools_claim_due, 0, NULL, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (!*found)
		return 0;
	*request_id = db_int64(r, 0, 1);
	if (db_pool_get(db, a, db_int64(r, 0, 0), out, found, err) < 0)
		return -1;
	return 0;
}

int
db_pools_settle(struct db *db, int64_t *n, struct gp_error *err)
{
	struct arena *a = arena_create();
	PGresult *r;
	int rc = -1;

	/* releases on nodes without an agent first (migration 0018), then the statuses */
	if (db_exec(db, a, &stmt_pools_unmanaged, 0, NULL, err) == NULL) {
		arena_destroy(a);
		return -1;
	}
	r = db_exec(db, a, &stmt_pools_settle, 0, NULL, err);

	if (r != NULL) {
		*n = db_int64(r, 0, 0);
		rc = 0;
	}
	arena_destroy(a);
	return rc;
}
