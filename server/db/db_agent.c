/*
 * db_agent.c - node agents (migration 0010): tokens, enrollment, the
 * desired-state document, status reports, heartbeats, liveness. The
 * work that touches the fleet runs in the SQL functions of 0010, which
 * take their locks in the global order (docs/architecture.md).
 */
#include "db_agent.h"
#include "db_internal.h"
#include "db_sql.h"

#include <string.h>

DB_STMT(stmt_agent_token_auth,
    "SELECT t.node_id FROM node_tokens t WHERE t.digest = $1 AND t.revoked_at IS NULL");
DB_STMT(stmt_agent_enroll_create,
    "WITH t AS (INSERT INTO enrollment_tokens (cluster_id, digest, prefix, created_by, expires_at) "
    "VALUES ($1, $2, $3, nullif($5::int8, 0), now() + make_interval(secs => $4::int)) "
    "RETURNING id, cluster_id, prefix, created_at, expires_at) "
    "SELECT json_build_object('id', t.id, 'cluster', c.name, 'prefix', t.prefix, "
    "'created_at', t.created_at, 'expires_at', t.expires_at)::text "
    "FROM t JOIN clusters c ON c.id = t.cluster_id");
DB_STMT(stmt_agent_enroll_list,
    "SELECT coalesce(json_agg(json_build_object('id', t.id, 'cluster', c.name, "
    "'prefix', t.prefix, 'created_at', t.created_at, 'expires_at', t.expires_at, "
    "'used_at', t.used_at, 'node', n.name, 'revoked_at', t.revoked_at, 'state', "
    "CASE WHEN t.revoked_at IS NOT NULL THEN 'revoked' WHEN t.used_at IS NOT NULL THEN 'used' "
    "WHEN t.expires_at <= now() THEN 'expired' ELSE 'usable' END) ORDER BY t.id), '[]')::text "
    "FROM enrollment_tokens t JOIN clusters c ON c.id = t.cluster_id "
    "LEFT JOIN nodes n ON n.id = t.node_id WHERE t.cluster_id = $1");
DB_STMT(stmt_agent_enroll_revoke,
    "UPDATE enrollment_tokens SET revoked_at = now() WHERE cluster_id = $1 AND id = $2 "
    "AND revoked_at IS NULL AND used_at IS NULL RETURNING id");
DB_STMT(stmt_agent_enroll_consume,
    "UPDATE enrollment_tokens SET used_at = now() WHERE digest = $1 AND used_at IS NULL "
    "AND revoked_at IS NULL AND expires_at > now() RETURNING id, cluster_id");
DB_STMT(stmt_agent_enroll,
    "SELECT agent_enroll($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, $10, $11)");
/* (a second statement: the first one's writes are not in its own snapshot) */
DB_STMT(stmt_agent_node_json,
    "SELECT n.id, json_build_object('name', n.name, 'cluster', c.name, 'hostname', n.hostname, "
    "'status', n.status, 'generation', n.generation, 'managed_by_agent', n.managed_by_agent, "
    "'callback_url', n.callback_url, 'gpus', (SELECT count(*) FROM gpus g WHERE g.node_id = n.id))"
    "::text FROM nodes n JOIN clusters c ON c.id = n.cluster_id WHERE n.id = $1");
DB_STMT(stmt_agent_token_revoke_all,
    "UPDATE node_tokens SET revoked_at = now() WHERE node_id = $1 AND revoked_at IS NULL");
DB_STMT(stmt_agent_token_insert, "INSERT INTO node_tokens (node_id, digest) VALUES ($1, $2)");
DB_STMT(stmt_agent_generation, "SELECT generation FROM nodes WHERE id = $1");
DB_STMT(stmt_agent_desired,
    "SELECT n.generation, json_build_object('generation', n.generation, 'node', n.name, "
    "'gpus', coalesce((SELECT json_agg(json_build_object('uuid', g.uuid, 'index', g.gpu_index, "
    "'mig_enabled', g.mig_enabled, 'instances', coalesce((SELECT json_agg(json_build_object("
    "'profile', a.profile, 'start', a.start, 'size', a.size, 'pool', p.name, 'project', pr.name, "
    "'resource_name', CASE WHEN a.profile = 'full' THEN 'nvidia.com/gpu' "
    "ELSE 'nvidia.com/mig-' || a.profile END, 'allocation', a.id) ORDER BY a.start) "
    "FROM allocations a LEFT JOIN pools p ON p.id = a.pool_id "
    "LEFT JOIN projects pr ON pr.id = p.project_id WHERE a.gpu_id = g.id "
    "AND a.state IN ('reserved', 'provisioning', 'ready', 'failed')), '[]'::json)) "
    "ORDER BY g.gpu_index) FROM gpus g WHERE g.node_id = n.id), '[]'::json))::text "
    "FROM nodes n WHERE n.id = $1");
DB_STMT(stmt_agent_node_gpus,
    "SELECT coalesce(json_agg(g.uuid ORDER BY g.gpu_index), '[]')::text FROM gpus g "
    "WHERE g.node_id = $1");
DB_STMT(stmt_agent_status, "SELECT agent_apply_status($1, $2, $3, $4::jsonb, $5::jsonb)::text");
DB_STMT(stmt_agent_heartbeat, "SELECT agent_heartbeat($1, $2)");
DB_STMT(stmt_agent_liveness, "SELECT agent_liveness_sweep(make_interval(secs => $1::int))");
DB_STMT(stmt_agent_mig_layout,
    "SELECT coalesce(json_agg(json_build_object('index', g.gpu_index, 'mig_enabled', "
    "g.mig_enabled, 'devices', coalesce((SELECT json_object_agg(x.profile, x.n) FROM ("
    "SELECT a.profile, count(*) AS n FROM allocations a WHERE a.gpu_id = g.id "
    "AND a.state IN ('reserved', 'provisioning', 'ready', 'failed') AND a.profile <> 'full' "
    "GROUP BY a.profile ORDER BY a.profile) x), '{}'::json)) ORDER BY g.gpu_index), '[]')::text "
    "FROM nodes n LEFT JOIN gpus g ON g.node_id = n.id WHERE n.name = $1 GROUP BY n.id");
DB_STMT(stmt_agent_node_id, "SELECT id FROM nodes WHERE name = $1");

int
db_node_token_authenticate(struct db *db, struct arena *a, const unsigned char *digest,
    int64_t *node_id, bool *found, struct gp_error *err)
{
	const char *p[1] = { db_param_bytea(a, digest, 32) };
	PGresult *r = db_exec(db, a, &stmt_agent_token_auth, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	*node_id = *found ? db_int64(r, 0, 0) : 0;
	return 0;
}

/* One row, one text column: its value into *out (NULL when no row). */
static int
one_text(struct db *db, struct arena *a, const struct db_stmt *st, int n, const char *const *p,
    const char **out, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, st, n, p, err);

	if (r == NULL)
		return -1;
	*out = PQntuples(r) > 0 ? db_text(a, r, 0, 0) : NULL;
	return 0;
}

int
db_enroll_token_create(struct db *db, struct arena *a, int64_t cluster_id,
    const unsigned char *digest, const char *prefix, int expires_in_s, int64_t user_id,
    const char **json, struct gp_error *err)
{
	const char *p[5] = { db_param_int(a, cluster_id), db_param_bytea(a, digest, 32), prefix,
		db_param_int(a, expires_in_s), db_param_int(a, user_id) };

	return one_text(db, a, &stmt_agent_enroll_create, 5, p, json, err);
}

int
db_enroll_tokens_list(struct db *db, struct arena *a, int64_t cluster_id, const char **json,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, cluster_id) };

	return one_text(db, a, &stmt_agent_enroll_list, 1, p, json, err);
}

int
db_enroll_token_revoke(struct db *db, struct arena *a, int64_t cluster_id, int64_t id, bool *found,
    struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, cluster_id), db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_agent_enroll_revoke, 2, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	return 0;
}

int
db_enroll_token_consume(struct db *db, struct arena *a, const unsigned char *digest,
    int64_t *token_id, int64_t *cluster_id, bool *found, struct gp_error *err)
{
	const char *p[1] = { db_param_bytea(a, digest, 32) };
	PGresult *r = db_exec(db, a, &stmt_agent_enroll_consume, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found) {
		*token_id = db_int64(r, 0, 0);
		*cluster_id = db_int64(r, 0, 1);
	}
	return 0;
}

int
db_agent_enroll(struct db *db, struct arena *a, const struct agent_enrollment *e, int64_t *node_id,
    const char **node_json, struct gp_error *err)
{
	const char *p[11] = { db_param_int(a, e->token_id), db_param_int(a, e->cluster_id),
		e->node_name, e->hostname, e->callback_url, e->agent_version,
		e->cpu_millicores < 0 ? NULL : db_param_int(a, e->cpu_millicores),
		e->memory_bytes < 0 ? NULL : db_param_int(a, e->memory_bytes), e->gpus_json,
		db_param_bytea(a, e->node_digest, 32), e->push_secret };
	PGresult *r = db_exec(db, a, &stmt_agent_enroll, 11, p, err);

	if (r == NULL)
		return -1;
	p[0] = db_text(a, r, 0, 0);
	r = db_exec(db, a, &stmt_agent_node_json, 1, p, err);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_error_set(err, 500, "internal", "enrollment returned no node");
	*node_id = db_int64(r, 0, 0);
	*node_json = db_text(a, r, 0, 1);
	return 0;
}

int
db_node_token_replace(struct db *db, struct arena *a, int64_t node_id, const unsigned char *digest,
    struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, node_id), NULL };

	if (db_exec(db, a, &stmt_agent_token_revoke_all, 1, p, err) == NULL)
		return -1;
	if (digest == NULL)
		return 0;
	p[1] = db_param_bytea(a, digest, 32);
	return db_exec(db, a, &stmt_agent_token_insert, 2, p, err) ? 0 : -1;
}

int
db_agent_generation(struct db *db, struct arena *a, int64_t node_id, int64_t *generation,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, node_id) };
	PGresult *r = db_exec(db, a, &stmt_agent_generation, 1, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_error_set(err, 401, "unauthorized", "the node of this token is gone");
	*generation = db_int64(r, 0, 0);
	return 0;
}

int
db_agent_desired_state(struct db *db, struct arena *a, int64_t node_id, int64_t *generation,
    const char **doc, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, node_id) };
	PGresult *r = db_exec(db, a, &stmt_agent_desired, 1, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_error_set(err, 401, "unauthorized", "the node of this token is gone");
	*generation = db_int64(r, 0, 0);
	*doc = db_text(a, r, 0, 1);
	return 0;
}

int
db_agent_node_gpus(struct db *db, struct arena *a, int64_t node_id, const char **json,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, node_id) };

	return one_text(db, a, &stmt_agent_node_gpus, 1, p, json, err);
}

int
db_agent_apply_status(struct db *db, struct arena *a, int64_t node_id, int64_t observed,
    const char *version, const char *gpus_json, const char *errors_json, const char **result,
    struct gp_error *err)
{
	const char *p[5] = { db_param_int(a, node_id), db_param_int(a, observed), version,
		gpus_json, errors_json };

	return one_text(db, a, &stmt_agent_status, 5, p, result, err);
}

int
db_agent_heartbeat(struct db *db, struct arena *a, int64_t node_id, int64_t observed,
    int64_t *generation, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, node_id),
		observed < 0 ? NULL : db_param_int(a, observed) };
	PGresult *r = db_exec(db, a, &stmt_agent_heartbeat, 2, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1 || db_null(r, 0, 0))
		return gp_error_set(err, 401, "unauthorized", "the node of this token is gone");
	*generation = db_int64(r, 0, 0);
	return 0;
}

int
db_agent_liveness(struct db *db, int grace_s, int64_t *n, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { db_param_int(a, grace_s) };
	PGresult *r = db_exec(db, a, &stmt_agent_liveness, 1, p, err);
	int rc = -1;

	if (r != NULL) {
		*n = db_int64(r, 0, 0);
		rc = 0;
	}
	arena_destroy(a);
	return rc;
}

int
db_agent_mig_layout(struct db *db, struct arena *a, const char *node_name, bool *found,
    const char **json, struct gp_error *err)
{
	const char *p[1] = { node_name };

	if (one_text(db, a, &stmt_agent_mig_layout, 1, p, json, err) < 0)
		return -1;
	*found = *json != NULL;
	return 0;
}

int
db_node_id_by_name(struct db *db, struct arena *a, const char *name, int64_t *id,
    struct gp_error *err)
{
	const char *p[1] = { name };
	PGresult *r = db_exec(db, a, &stmt_agent_node_id, 1, p, err);

	if (r == NULL)
		return -1;
	*id = PQntuples(r) == 1 ? db_int64(r, 0, 0) : 0;
	return 0;
}
