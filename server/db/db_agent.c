/*
 * db_agent.c - node agents (migration 0010): tokens, enrollment, the
 * desired-state document, status reports, heartbeats, liveness. The
 * work that touches the fleet runs in the SQL functions of 0010, which
 * take their locks in the global order (docs/architecture.md).
 */
#include "db_agent.h"
#include "db_agent_write.h"
#include "db_internal.h"
#include "db_sql.h"

#include <stdio.h>
#include <string.h>

DB_STMT(stmt_agent_token_auth,
    "SELECT t.node_id FROM node_tokens t WHERE t.digest = $1 AND t.revoked_at IS NULL");
DB_STMT(stmt_agent_enroll_create,
    "WITH t AS (INSERT INTO enrollment_tokens (cluster_id, digest, prefix, created_by, expires_at, "
    "node_name, adopt_manual) "
    "VALUES ($1, $2, $3, nullif($5::int8, 0), now() + make_interval(secs => $4::int), $6, $7) "
    "RETURNING id, cluster_id, prefix, created_at, expires_at, node_name, adopt_manual) "
    "SELECT json_build_object('id', t.id, 'cluster', c.name, 'prefix', t.prefix, "
    "'created_at', t.created_at, 'expires_at', t.expires_at, 'node_name', t.node_name, "
    "'adopt_manual', t.adopt_manual)::text "
    "FROM t JOIN clusters c ON c.id = t.cluster_id");
DB_STMT(stmt_agent_enroll_list,
    "SELECT coalesce(json_agg(json_build_object('id', t.id, 'cluster', c.name, "
    "'prefix', t.prefix, 'created_at', t.created_at, 'expires_at', t.expires_at, "
    "'used_at', t.used_at, 'node', n.name, 'node_name', t.node_name, 'adopt_manual', "
    "t.adopt_manual, 'revoked_at', t.revoked_at, 'state', "
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
    "SELECT node_id, adopted::text FROM agent_enroll($1, $2, $3, $4, $5, $6, $7, $8, $9::jsonb, "
    "$10, $11, make_interval(secs => $12::int))");
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
    "SELECT coalesce(json_object_agg(g.uuid, json_build_object('model', g.model, "
    "'mig_enabled', g.mig_enabled)), '{}')::text FROM gpus g WHERE g.node_id = $1");
DB_STMT(stmt_agent_status, "SELECT agent_apply_status($1, $2, $3, $4::jsonb, $5::jsonb)::text");
DB_STMT(stmt_agent_heartbeat, "SELECT agent_heartbeat($1, $2)");
DB_STMT(stmt_agent_heartbeats, "SELECT node_id, generation FROM agent_heartbeats($1, $2)");
DB_STMT(stmt_agent_liveness, "SELECT agent_liveness_sweep(make_interval(secs => $1::int))");
DB_STMT(stmt_agent_mig_layout,
    "SELECT coalesce(json_agg(json_build_object('index', g.gpu_index, 'mig_enabled', "
    "g.mig_enabled, 'devices', coalesce((SELECT json_object_agg(x.profile, x.n) FROM ("
    "SELECT a.profile, count(*) AS n FROM allocations a WHERE a.gpu_id = g.id "
    "AND a.state IN ('reserved', 'provisioning', 'ready', 'failed') AND a.profile <> 'full' "
    "GROUP BY a.profile ORDER BY a.profile) x), '{}'::json)) ORDER BY g.gpu_index), '[]')::text "
    "FROM nodes n LEFT JOIN gpus g ON g.node_id = n.id WHERE n.name = $1 GROUP BY n.id");
DB_STMT(stmt_agent_node_id, "SELECT id FROM nodes WHERE name = $1");
DB_STMT(stmt_outbox_claim,
    "SELECT node_id, attempts, callback_url, push_secret FROM "
    "outbox_claim($1, make_interval(secs => $2::int)) ORDER BY node_id");
/*
 * The distinct (gpu_uuid, device_uuid) pairs of a batch ($2, [{"i",
 * "gpu_uuid","device_uuid"}], i from 1): the node's GPU of each (NULL: not
 * the node's) and metric_check()'s verdict on it (inlined: its argument is
 * a parameter), with the partitions' window the COPY may write to
 * ($3 retention days back to tomorrow, as metric_ingest() kept).
 */
DB_STMT(stmt_metric_resolve,
    "WITH p AS (SELECT p.i, p.gpu_uuid, p.device_uuid "
    "FROM jsonb_to_recordset($2::jsonb) AS p(i int, gpu_uuid text, device_uuid text)) "
    "SELECT p.i, g.id, g.uuid, c.field, c.verdict, "
    "(extract(epoch FROM ((now() AT TIME ZONE 'UTC')::date - ($3::int - 1))::timestamp "
    "AT TIME ZONE 'UTC') * 1000000)::int8, "
    "(extract(epoch FROM ((now() AT TIME ZONE 'UTC')::date + 2)::timestamp "
    "AT TIME ZONE 'UTC') * 1000000)::int8 "
    "FROM p LEFT JOIN gpus g ON g.uuid = p.gpu_uuid AND g.node_id = $1 "
    "LEFT JOIN metric_check($1, $2::jsonb) c ON c.idx = p.i ORDER BY p.i");
/* the rows of a batch, in COPY's binary format (db_metric_copy) */
static const char sql_metric_copy[] =
    "COPY gpu_metric_samples (ts, gpu_id, device_uuid, power_w, sm_active, memory_used_mib, "
    "memory_total_mib, temperature_c, ecc_corrected, ecc_uncorrected, last_xid, remapped_rows) "
    "FROM STDIN (FORMAT binary)";
DB_STMT(stmt_metric_partitions, "SELECT metric_partitions_maintain($1, $2)");
DB_STMT(stmt_metric_rollup,
    "SELECT rows, more FROM metric_rollup_run($1, make_interval(secs => $2::int), $3)");
DB_STMT(stmt_agent_plane_prune,
    "SELECT agent_plane_prune(make_interval(days => nullif($1::int, 0)), "
    "make_interval(days => nullif($2::int, 0)), make_interval(days => nullif($3::int, 0)), $4)");
DB_STMT(stmt_alerts_idle, "SELECT alerts_idle_sweep(make_interval(secs => $1::int), $2)");
DB_STMT(stmt_gpu_metrics_raw,
    "SELECT g.id, (SELECT coalesce(json_agg(json_build_object('device_uuid', d.device_uuid, "
    "'points', d.points) ORDER BY d.device_uuid), '[]') FROM (SELECT s.device_uuid, "
    "json_agg(json_build_object('ts', s.ts, 'power_w', s.power_w, 'sm_active', s.sm_active, "
    "'memory_used_mib', s.memory_used_mib, 'memory_total_mib', s.memory_total_mib, "
    "'temperature_c', s.temperature_c, 'ecc_corrected', s.ecc_corrected, 'ecc_uncorrected', "
    "s.ecc_uncorrected, 'last_xid', s.last_xid, 'remapped_rows', s.remapped_rows) ORDER BY s.ts) "
    "AS points FROM (SELECT * FROM gpu_metric_samples x WHERE x.gpu_id = g.id "
    "AND x.ts >= to_timestamp($2::int8 / 1000000.0) AND x.ts < to_timestamp($3::int8 / 1000000.0) "
    "ORDER BY x.ts LIMIT $4) s GROUP BY s.device_uuid) d)::text "
    "FROM gpus g WHERE g.uuid = $1");
DB_STMT(stmt_gpu_metrics_step,
    "SELECT g.id, (SELECT coalesce(json_agg(json_build_object('device_uuid', d.device_uuid, "
    "'points', d.points) ORDER BY d.device_uuid), '[]') FROM (SELECT b.device_uuid, "
    "json_agg(json_build_object('ts', b.t, 'samples', b.n, 'power_w', b.p, 'power_w_max', b.pm, "
    "'sm_active', b.sm, 'memory_used_mib', b.mem, 'temperature_c', b.temp, 'ecc_uncorrected', "
    "b.ecc) ORDER BY b.t) AS points FROM (SELECT s.device_uuid, date_bin(make_interval(secs => $5), "
    "s.ts, to_timestamp(0)) AS t, count(*) AS n, avg(s.power_w) AS p, max(s.power_w) AS pm, "
    "avg(s.sm_active) AS sm, max(s.memory_used_mib) AS mem, max(s.temperature_c) AS temp, "
    "max(s.ecc_uncorrected) AS ecc FROM gpu_metric_samples s WHERE s.gpu_id = g.id "
    "AND s.ts >= to_timestamp($2::int8 / 1000000.0) AND s.ts < to_timestamp($3::int8 / 1000000.0) "
    "GROUP BY 1, 2 ORDER BY 2 LIMIT $4) b GROUP BY b.device_uuid) d)::text "
    "FROM gpus g WHERE g.uuid = $1");
DB_STMT(stmt_gpu_metrics_hourly,
    "SELECT g.id, (SELECT coalesce(json_agg(json_build_object('device_uuid', d.device_uuid, "
    "'points', d.points) ORDER BY d.device_uuid), '[]') FROM (SELECT b.device_uuid, "
    "json_agg(json_build_object('ts', b.t, 'samples', b.n, 'power_w', b.p, 'power_w_max', b.pm, "
    "'sm_active', b.sm, 'memory_used_mib', b.mem, 'temperature_c', b.temp, 'ecc_uncorrected', "
    "b.ecc) ORDER BY b.t) AS points FROM (SELECT h.device_uuid, date_bin(make_interval(secs => $5), "
    "h.hour, to_timestamp(0)) AS t, sum(h.samples) AS n, "
    "sum(h.power_w_avg * h.samples) / nullif(sum(h.samples), 0) AS p, max(h.power_w_max) AS pm, "
    "sum(h.sm_active_avg * h.samples) / nullif(sum(h.samples), 0) AS sm, "
    "max(h.memory_used_mib_max) AS mem, max(h.temperature_c_max) AS temp, "
    "max(h.ecc_uncorrected_max) AS ecc FROM gpu_metric_hourly h WHERE h.gpu_id = g.id "
    "AND h.hour >= to_timestamp($2::int8 / 1000000.0) AND h.hour < to_timestamp($3::int8 / 1000000.0) "
    "GROUP BY 1, 2 ORDER BY 2 LIMIT $4) b GROUP BY b.device_uuid) d)::text "
    "FROM gpus g WHERE g.uuid = $1");
DB_STMT(stmt_agent_profiles, "SELECT agent_apply_profiles($1, $2::jsonb)");
#define ALERT_JSON                                                                            \
	"json_build_object('id', a.id, 'type', a.type, 'severity', a.severity, 'message', "   \
	"a.message, 'node', n.name, 'gpu', g.uuid, 'pool', p.name, 'project', pr.name, "      \
	"'details', a.details, 'occurrences', a.occurrences, 'raised_at', a.raised_at, "      \
	"'last_seen_at', a.last_seen_at, 'resolved_at', a.resolved_at, 'acknowledged_at', "   \
	"a.acknowledged_at, 'acknowledged_by', u.username, 'state', CASE WHEN a.resolved_at " \
	"IS NOT NULL THEN 'resolved' ELSE 'open' END)"
#define ALERT_FROM                                                                                 \
	"FROM alerts a LEFT JOIN nodes n ON n.id = a.node_id LEFT JOIN gpus g ON g.id = a.gpu_id " \
	"LEFT JOIN pools p ON p.id = a.pool_id LEFT JOIN projects pr ON pr.id = a.project_id "     \
	"LEFT JOIN users u ON u.id = a.acknowledged_by "
DB_STMT(stmt_alerts_list,
    "SELECT coalesce(json_agg(x.j ORDER BY x.id DESC), '[]')::text, min(x.id), count(*) FROM ("
    "SELECT a.id, " ALERT_JSON " AS j " ALERT_FROM
    "WHERE ($1::int8 = 0 OR a.project_id IN (SELECT m.project_id FROM project_members m "
    "WHERE m.user_id = $1)) AND ($2::text IS NULL OR a.type = $2) "
    "AND ($3 = 'all' OR ($3 = 'open') = (a.resolved_at IS NULL)) "
    "AND ($4::text IS NULL OR pr.name = $4) AND ($5::text IS NULL OR n.name = $5) "
    "AND ($6::int8 = 0 OR a.id < $6) ORDER BY a.id DESC LIMIT $7) x");
DB_STMT(stmt_alert_get,
    "SELECT " ALERT_JSON "::text, EXISTS (SELECT 1 FROM project_members m WHERE "
    "m.project_id = a.project_id AND m.user_id = $2 AND m.role = 'owner') " ALERT_FROM
    "WHERE a.id = $1 AND ($2::int8 = 0 OR a.project_id IN (SELECT m.project_id FROM "
    "project_members m WHERE m.user_id = $2))");
DB_STMT(stmt_alert_ack,
    "UPDATE alerts SET acknowledged_at = coalesce(acknowledged_at, now()), "
    "acknowledged_by = coalesce(acknowledged_by, nullif($2::int8, 0)) WHERE id = $1");
DB_STMT(stmt_alerts_active,
    "SELECT coalesce(json_object_agg(t.type, t.n), '{}')::text FROM (SELECT type, count(*) AS n "
    "FROM alerts WHERE resolved_at IS NULL GROUP BY type) t");
DB_STMT(stmt_profiles_list,
    "SELECT coalesce(json_agg(x.j ORDER BY x.id DESC), '[]')::text, min(x.id), count(*) FROM ("
    "SELECT w.id, json_build_object('id', w.id, 'node', n.name, 'device_uuid', w.device_uuid, "
    "'gpu', g.uuid, 'allocation', w.allocation_id, 'profile', al.profile, 'pool', p.name, "
    "'project', pr.name, 'namespace', w.namespace, 'pod', w.pod, 'container', w.container, "
    "'source', w.source, "
    "'first_seen_at', w.first_seen_at, 'last_seen_at', w.last_seen_at, 'ended_at', w.ended_at) "
    "AS j FROM workload_profiles w JOIN nodes n ON n.id = w.node_id "
    "LEFT JOIN gpus g ON g.id = w.gpu_id LEFT JOIN allocations al ON al.id = w.allocation_id "
    "LEFT JOIN pools p ON p.id = al.pool_id LEFT JOIN projects pr ON pr.id = p.project_id "
    "WHERE ($1::int8 = 0 OR p.project_id IN (SELECT m.project_id FROM project_members m "
    "WHERE m.user_id = $1)) AND ($2::text IS NULL OR pr.name = $2) "
    "AND ($3::text IS NULL OR n.name = $3) AND ($4::text IS NULL OR p.name = $4) "
    "AND (NOT $5 OR w.ended_at IS NULL) AND ($6::int8 = 0 OR w.id < $6) "
    "ORDER BY w.id DESC LIMIT $7) x");
DB_STMT(stmt_server_key,
    "WITH ins AS (INSERT INTO server_keys (name, secret) VALUES ($1, $2) "
    "ON CONFLICT (name) DO NOTHING RETURNING secret) "
    "SELECT encode(coalesce((SELECT secret FROM ins), "
    "(SELECT secret FROM server_keys WHERE name = $1)), 'hex')");
DB_STMT(stmt_outbox_done, "SELECT outbox_done($1, $2)");
DB_STMT(stmt_outbox_retry, "SELECT outbox_retry($1, $2, $3, $4, $5)");

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
    const char *node_name, bool adopt_manual, const char **json, struct gp_error *err)
{
	const char *p[7] = { db_param_int(a, cluster_id), db_param_bytea(a, digest, 32), prefix,
		db_param_int(a, expires_in_s), db_param_int(a, user_id), node_name,
		adopt_manual ? "true" : "false" };

	return one_text(db, a, &stmt_agent_enroll_create, 7, p, json, err);
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
    const char **node_json, const char **adopted, struct gp_error *err)
{
	const char *p[12] = { db_param_int(a, e->token_id), db_param_int(a, e->cluster_id),
		e->node_name, e->hostname, e->callback_url, e->agent_version,
		e->cpu_millicores < 0 ? NULL : db_param_int(a, e->cpu_millicores),
		e->memory_bytes < 0 ? NULL : db_param_int(a, e->memory_bytes), e->gpus_json,
		db_param_bytea(a, e->node_digest, 32), e->push_secret,
		db_param_int(a, e->grace_s) };
	PGresult *r = db_exec(db, a, &stmt_agent_enroll, 12, p, err);

	if (r == NULL) {
		/* the node is not the token's to take: its own problem type */
		if (err != NULL && err->status == 409 &&
		    strcmp(db_last_constraint(db), "node_adopt_refused") == 0) {
			char msg[sizeof(err->message)];

			snprintf(msg, sizeof(msg), "%s", err->message);
			gp_error_clear(err);
			return gp_error_set(err, 409, "node_adopt_refused", "%s", msg);
		}
		return -1;
	}
	*adopted = PQgetisnull(r, 0, 1) ? NULL : db_text(a, r, 0, 1);
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
db_agent_heartbeats(struct db *db, struct arena *a, const int64_t *nodes, const int64_t *observed,
    int n, int64_t *generation, bool *done, struct gp_error *err)
{
	const char *p[2] = { db_param_int64_array(a, nodes, n),
		db_param_int64_array(a, observed, n) };
	PGresult *r;

	for (int i = 0; i < n; i++)
		done[i] = false;
	r = db_exec(db, a, &stmt_agent_heartbeats, 2, p, err);
	if (r == NULL)
		return -1;
	for (int row = 0; row < PQntuples(r); row++) {
		int64_t id = db_int64(r, row, 0);

		for (int i = 0; i < n; i++)
			if (nodes[i] == id && !done[i]) {
				generation[i] = db_int64(r, row, 1);
				done[i] = true;
				break;
			}
	}
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

int
db_outbox_claim(struct db *db, struct arena *a, int limit, int lease_s, struct outbox_push **out,
    int *n, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, limit), db_param_int(a, lease_s) };
	PGresult *r = db_exec(db, a, &stmt_outbox_claim, 2, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		(*out)[i].node_id = db_int64(r, i, 0);
		(*out)[i].attempts = (int)db_int64(r, i, 1);
		(*out)[i].callback_url = db_text(a, r, i, 2);
		(*out)[i].push_secret = db_text(a, r, i, 3);
	}
	return 0;
}

int
db_outbox_done(struct db *db, int64_t node_id, int64_t generation, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[2] = { db_param_int(a, node_id), db_param_int(a, generation) };
	int rc = db_exec(db, a, &stmt_outbox_done, 2, p, err) ? 0 : -1;

	arena_destroy(a);
	return rc;
}

int
db_outbox_retry(struct db *db, int64_t node_id, int attempts, int max, int delay_ms,
    const char *error, bool *gave_up, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[5] = { db_param_int(a, node_id), db_param_int(a, attempts),
		db_param_int(a, max), db_param_int(a, delay_ms), error };
	PGresult *r = db_exec(db, a, &stmt_outbox_retry, 5, p, err);
	int rc = -1;

	if (r != NULL) {
		*gave_up = db_bool(r, 0, 0);
		rc = 0;
	}
	arena_destroy(a);
	return rc;
}

/* ---- telemetry ---- */

/* One row, one int8 column into *out. */
static int
one_int(struct db *db, const struct db_stmt *st, int n, const char *const *p, int64_t *out,
    struct arena *a, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, st, n, p, err);

	if (r == NULL)
		return -1;
	*out = PQntuples(r) > 0 && !db_null(r, 0, 0) ? db_int64(r, 0, 0) : 0;
	return 0;
}

int
db_metric_resolve(struct db *db, struct arena *a, int64_t node_id, const char *pairs_json,
    struct metric_pair *pairs, int n, int retention_days, int64_t *lo_us, int64_t *hi_us,
    struct gp_error *err)
{
	const char *p[3];
	PGresult *r;

	p[0] = db_param_int(a, node_id);
	p[1] = pairs_json;
	p[2] = db_param_int(a, retention_days);
	r = db_exec(db, a, &stmt_metric_resolve, 3, p, err);
	if (r == NULL)
		return -1;
	*lo_us = *hi_us = 0;
	for (int row = 0; row < PQntuples(r); row++) {
		int i = (int)db_int64(r, row, 0) - 1;
		struct metric_pair *m;

		if (i < 0 || i >= n)
			continue;
		m = &pairs[i];
		m->gpu_id = db_null(r, row, 1) ? 0 : db_int64(r, row, 1);
		m->gpu_uuid_stored = db_null(r, row, 2) ? NULL : db_text(a, r, row, 2);
		m->field = db_null(r, row, 3) ? NULL : db_text(a, r, row, 3);
		m->verdict = db_null(r, row, 4)                     ? METRIC_OK
		    : strcmp(PQgetvalue(r, row, 4), "foreign") == 0 ? METRIC_FOREIGN
								    : METRIC_UNKNOWN_DEVICE;
		*lo_us = db_int64(r, row, 5);
		*hi_us = db_int64(r, row, 6);
	}
	return 0;
}

/* big-endian stores of COPY's binary format */
static char *
put_be(char *p, uint64_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--)
		*p++ = (char)(v >> (8 * i) & 0xff);
	return p;
}

static char *
put_int(char *p, int64_t v, int bytes)
{
	p = put_be(p, (uint64_t)bytes, 4);
	return put_be(p, (uint64_t)v, bytes);
}

static char *
put_double(char *p, double v)
{
	uint64_t bits;

	memcpy(&bits, &v, sizeof(bits));
	p = put_be(p, 8, 4);
	return put_be(p, bits, 8);
}

static char *
put_null(char *p)
{
	return put_be(p, UINT64_C(0xffffffff), 4);
}

/* PostgreSQL's epoch, 2000-01-01 UTC, in Unix microseconds */
#define PG_EPOCH_US (INT64_C(946684800) * 1000000)

int
db_metric_copy(struct db *db, struct arena *a, const struct metric_row *rows, int n,
    int64_t *stored, struct gp_error *err)
{
	/* per row: count, 12 lengths, 11 fixed values of at most 8 bytes, the device */
	size_t cap = 19 + 2, len;
	char *buf, *p;

	*stored = 0;
	if (n == 0)
		return 0;
	for (int i = 0; i < n; i++)
		cap += 2 + 12 * 4 + 11 * 8 + strlen(rows[i].device_uuid);
	buf = p = arena_alloc(a, cap);
	memcpy(p, "PGCOPY\n\377\r\n\0", 11);
	p += 11;
	p = put_be(p, 0, 4); /* flags */
	p = put_be(p, 0, 4); /* header extension */
	for (int i = 0; i < n; i++) {
		const struct metric_row *m = &rows[i];
		size_t dl = strlen(m->device_uuid);

		p = put_be(p, 12, 2);
		p = put_int(p, m->ts_us - PG_EPOCH_US, 8);
		p = put_int(p, m->gpu_id, 8);
		p = put_be(p, (uint64_t)dl, 4);
		memcpy(p, m->device_uuid, dl);
		p += dl;
		for (int k = 0; k < METRIC_NUMS; k++) {
			if (!m->has[k])
				p = put_null(p);
			else if (k == METRIC_LAST_XID)
				p = put_int(p, (int64_t)m->num[k], 4);
			else if (metric_num_integer(k))
				p = put_int(p, (int64_t)m->num[k], 8);
			else
				p = put_double(p, m->num[k]);
		}
	}
	p = put_be(p, UINT64_C(0xffff), 2); /* trailer */
	len = (size_t)(p - buf);
	return db_copy_in(db, sql_metric_copy, buf, len, stored, err);
}

int
db_metric_partitions(struct db *db, int retention_days, int days_ahead, int64_t *dropped,
    struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[2] = { db_param_int(a, retention_days), db_param_int(a, days_ahead) };
	int rc = one_int(db, &stmt_metric_partitions, 2, p, dropped, a, err);

	arena_destroy(a);
	return rc;
}

int
db_metric_rollup(struct db *db, double idle_threshold, int settle_s, int max_hours, int64_t *rows,
    bool *more, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[3] = { arena_printf(a, "%.6f", idle_threshold), db_param_int(a, settle_s),
		db_param_int(a, max_hours) };
	PGresult *r = db_exec(db, a, &stmt_metric_rollup, 3, p, err);

	if (r != NULL) {
		*rows = db_int64(r, 0, 0);
		*more = db_bool(r, 0, 1);
	}
	arena_destroy(a);
	return r != NULL ? 0 : -1;
}

int
db_agent_plane_prune(struct db *db, int outbox_days, int alerts_days, int profiles_days, int limit,
    int64_t *deleted, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[4] = { db_param_int(a, outbox_days), db_param_int(a, alerts_days),
		db_param_int(a, profiles_days), db_param_int(a, limit) };
	int rc = one_int(db, &stmt_agent_plane_prune, 4, p, deleted, a, err);

	arena_destroy(a);
	return rc;
}

int
db_alerts_idle(struct db *db, int after_s, double threshold, int64_t *idle, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[2] = { db_param_int(a, after_s), arena_printf(a, "%.6f", threshold) };
	int rc = one_int(db, &stmt_alerts_idle, 2, p, idle, a, err);

	arena_destroy(a);
	return rc;
}

int
db_gpu_metrics(struct db *db, struct arena *a, const char *gpu_uuid, int64_t from_us, int64_t to_us,
    int step_s, int max_points, bool *found, const char **json, struct gp_error *err)
{
	const char *p[5] = { gpu_uuid, db_param_int(a, from_us), db_param_int(a, to_us),
		db_param_int(a, max_points), db_param_int(a, step_s) };
	const struct db_stmt *st = step_s == 0 ? &stmt_gpu_metrics_raw
	    : step_s % 3600 == 0               ? &stmt_gpu_metrics_hourly
					       : &stmt_gpu_metrics_step;
	PGresult *r = db_exec(db, a, st, step_s == 0 ? 4 : 5, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	*json = *found ? db_text(a, r, 0, 1) : NULL;
	return 0;
}

int
db_agent_profiles(struct db *db, struct arena *a, int64_t node_id, const char *json,
    int64_t *violations, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, node_id), json };

	return one_int(db, &stmt_agent_profiles, 2, p, violations, a, err);
}

/* A list statement's answer: the JSON array, and the next cursor when full. */
static int
list_json(struct db *db, struct arena *a, const struct db_stmt *st, int n, const char *const *p,
    int limit, const char **json, int64_t *next, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, st, n, p, err);

	if (r == NULL)
		return -1;
	*json = db_text(a, r, 0, 0);
	*next = db_int64(r, 0, 2) == limit && !db_null(r, 0, 1) ? db_int64(r, 0, 1) : 0;
	return 0;
}

int
db_alerts_list(struct db *db, struct arena *a, const struct alert_filter *f, const char **json,
    int64_t *next, struct gp_error *err)
{
	const char *p[7] = { db_param_int(a, f->user_id), f->type, f->state ? f->state : "open",
		f->project, f->node, db_param_int(a, f->after_id), db_param_int(a, f->limit) };

	return list_json(db, a, &stmt_alerts_list, 7, p, f->limit, json, next, err);
}

int
db_alert_get(struct db *db, struct arena *a, int64_t id, int64_t user_id, const char **json,
    bool *project_owner, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, id), db_param_int(a, user_id) };
	PGresult *r = db_exec(db, a, &stmt_alert_get, 2, p, err);

	if (r == NULL)
		return -1;
	*json = PQntuples(r) == 1 ? db_text(a, r, 0, 0) : NULL;
	*project_owner = PQntuples(r) == 1 && db_bool(r, 0, 1);
	return 0;
}

int
db_alert_ack(struct db *db, struct arena *a, int64_t id, int64_t user_id, const char **json,
    struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, id), db_param_int(a, user_id) };
	bool owner;

	if (db_exec(db, a, &stmt_alert_ack, 2, p, err) == NULL)
		return -1;
	return db_alert_get(db, a, id, 0, json, &owner, err);
}

int
db_alerts_active(struct db *db, struct arena *a, const char **json, struct gp_error *err)
{
	return one_text(db, a, &stmt_alerts_active, 0, NULL, json, err);
}

int
db_profiles_list(struct db *db, struct arena *a, const struct profile_filter *f, const char **json,
    int64_t *next, struct gp_error *err)
{
	const char *p[7] = { db_param_int(a, f->user_id), f->project, f->node, f->pool,
		f->current ? "true" : "false", db_param_int(a, f->after_id),
		db_param_int(a, f->limit) };

	return list_json(db, a, &stmt_profiles_list, 7, p, f->limit, json, next, err);
}

int
db_server_key(struct db *db, const char *name, const unsigned char *candidate, size_t len,
    char *out, size_t outlen, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[2] = { name, NULL };
	PGresult *r;
	int rc = -1;

	arena_set_sensitive(a);
	p[1] = db_param_bytea(a, candidate, len);
	r = db_exec(db, a, &stmt_server_key, 2, p, err);
	if (r != NULL) {
		if (PQntuples(r) == 1 && !db_null(r, 0, 0) &&
		    strlen(PQgetvalue(r, 0, 0)) < outlen) {
			snprintf(out, outlen, "%s", PQgetvalue(r, 0, 0));
			rc = 0;
		} else {
			gp_error_set(err, 500, "internal", "no server key %s", name);
		}
	}
	arena_destroy(a);
	return rc;
}
