/*
 * db_pools.c - quotas, pools, pool requests, the approval statements and
 * the expiry worker's claims (see db_pools.h).
 */
#include "db_pools.h"
#include "core/problem.h"
#include "db_internal.h"
#include "db_sql.h"

#include <string.h>

/* An integer parameter of microseconds since the epoch as timestamptz; 0 is NULL. */
#define TS_PARAM(n) "('epoch'::timestamptz + nullif(" n "::int8, 0) * interval '1 microsecond')"

#define POOL_COLS                                                                                                           \
	"p.id, p.project_id, pr.name, p.name, p.status, p.items::text, " EPOCH_US("p.ends_at") ", p.generation, " EPOCH_US( \
	    "p.created_at") ", " EPOCH_US("p.updated_at") ", " EPOCH_US("p.released_at")
#define POOL_FROM "FROM pools p JOIN projects pr ON pr.id = p.project_id "

#define REQ_COLS                                                                    \
	"r.id, r.project_id, pr.name, r.pool_id, p.name, r.action, r.items::text, " \
	"r.justification, " EPOCH_US(                                               \
	    "r.ends_at") ", r.state, coalesce(r.requested_by, 0), "                 \
			 "ru.username, " EPOCH_US("r.requested_at") ", " EPOCH_US(  \
			     "r.expires_at") ", "                                   \
					     "du.username, " EPOCH_US(              \
						 "r.decided_at") ", r.note, r.generation"
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
    " INSERT INTO pools (project_id, name) SELECT $1, $3 FROM g WHERE g.ok AND $2::int8 = 0 "
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
    " $7::int8[], $8::int8[], $9::int4[], $10::text[], $11::text[], $12::text[], $13::bool[]) "
    " WITH ORDINALITY AS u (project, pool, pool_name, action, items, justification, ends, "
    " actor_id, ttl, actor, http_id, after, quota_checked, ord)"
    "), pool AS ("
    " INSERT INTO pools (id, project_id, name) OVERRIDING SYSTEM VALUE "
    " SELECT new_pool, project, pool_name FROM g WHERE ok AND new_pool IS NOT NULL ORDER BY ord "
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

/* ---- candidates ---- */

/*
 * The advisory lock (class 0x67707031, "gpp1"; key: the node id) marks a
 * node an approval is placing on; pg_try_advisory_xact_lock is
 * re-entrant within a transaction, so a re-check after a row lock wait
 * passes again.
 */
#define CAND_SELECT                                                                               \
	"SELECT g.id, g.node_id, g.gpu_index, g.model, g.mig_enabled, g.layout, g.uuid, n.name, " \
	"n.managed_by_agent "                                                                     \
	"FROM unnest($1::text[], $2::bool[], $3::text[], $4::int4[]) WITH ORDINALITY "            \
	"AS w (model, mig, layout, lim, ord) CROSS JOIN LATERAL ("                                \
	"SELECT x.id, x.node_id, x.gpu_index, x.model, x.mig_enabled, x.layout, x.uuid "          \
	"FROM gpus x WHERE x.model = w.model AND x.mig_enabled = w.mig AND x.layout = w.layout "  \
	"AND x.health = 'ok' AND x.node_status = 'ready' "
DB_STMT(stmt_pools_cand_skip,
    CAND_SELECT
    "AND pg_try_advisory_xact_lock(1735421233, (x.node_id % 2147483647)::int4) "
    "ORDER BY x.node_id, x.gpu_index, x.id LIMIT w.lim FOR NO KEY UPDATE OF x SKIP LOCKED) g "
    "JOIN nodes n ON n.id = g.node_id ORDER BY w.ord, g.node_id, g.gpu_index, g.id");
/*
 * The slow path holds the GPUs of the fast path: it must not wait for more
 * (two such waits deadlock), so it takes them NOWAIT and the transaction
 * runs again when one is held (55P03, db.c).
 */
DB_STMT(stmt_pools_cand_wait,
    CAND_SELECT
    "ORDER BY x.node_id, x.gpu_index, x.id LIMIT w.lim FOR NO KEY UPDATE OF x NOWAIT) g "
    "JOIN nodes n ON n.id = g.node_id ORDER BY w.ord, g.node_id, g.gpu_index, g.id");

/* The GPUs under the live allocations of some pools, locked in id order. */
DB_STMT(stmt_pools_lock_gpus,
    "SELECT count(*) FROM (SELECT g.id FROM gpus g WHERE g.id IN (SELECT a.gpu_id "
    "FROM allocations a WHERE a.pool_id = ANY ($1::int8[]) "
    "AND a.state NOT IN ('releasing', 'released')) ORDER BY g.id FOR NO KEY UPDATE) s");

/* ---- approvals ---- */

/* the request, history, audit: shared by both approval statements */
#define APPROVE_COMMON                                                                                          \
	"rq AS ("                                                                                               \
	" UPDATE pool_requests SET state = 'approved', decided_by = nullif($15::int8, 0), "                     \
	" decided_at = now(), note = $17, generation = generation + 1 "                                         \
	" WHERE id = $1 AND state = 'pending' RETURNING id"                                                     \
	"), pl AS ("                                                                                            \
	" UPDATE pools SET items = $4::jsonb, status = $5, "                                                    \
	" ends_at = CASE WHEN $21 = 'create' THEN " TS_PARAM(                                                   \
	    "$6") " ELSE ends_at END, "                                                                         \
		  " released_at = CASE WHEN $5 = 'released' THEN now() END, "                                   \
		  " generation = generation + 1, updated_at = now() WHERE id = $2 RETURNING generation"         \
		  "), nb AS ("                                                                                  \
		  " UPDATE nodes n SET generation = n.generation + 1, updated_at = now() "                      \
		  " FROM (SELECT id FROM nodes WHERE id = ANY ($14::int8[]) ORDER BY id FOR NO KEY UPDATE) s "  \
		  " WHERE n.id = s.id RETURNING n.id, n.generation"                                             \
		  "), ob AS ("                                                                                  \
		  " INSERT INTO outbox (node_id, generation, request_id, pool_id) "                             \
		  " SELECT id, generation, $1, $2 FROM nb"                                                      \
		  "), ev AS ("                                                                                  \
		  " INSERT INTO pool_request_events (request_id, from_state, to_state, actor_id, actor, note) " \
		  " VALUES ($1, 'pending', 'approved', nullif($15::int8, 0), $16, $17)"                         \
		  "), au AS ("                                                                                  \
		  " INSERT INTO audit_log (actor_id, actor, action, object_type, object_id, project_id, "       \
		  " request_id, before, after) VALUES (nullif($15::int8, 0), $16, "                             \
		  " 'pool_request.approve', 'pool_request', $1::text, $3, $18, $19::jsonb, $20::jsonb)"         \
		  ")"

/*
 * ---- the usage ledger ----
 *
 * Every transition of usage_ledger (what billing reads) is one of these
 * fragments, and only the approval statements use them: an interval
 * opens per (pool, kind) when a create / expand is approved
 * (LEDGER_OPEN, stmt_pools_approve_many); a shrink closes the open
 * intervals of the kinds it names and reopens one with what the pool
 * keeps, a release closes every open interval (LEDGER_CLOSE,
 * LEDGER_OPEN; stmt_pools_approve_free, which the API's approvals and
 * the expiry worker's releases share). An interval is never reopened
 * or deleted.
 */
#define LEDGER_OPEN                                                                           \
	" INSERT INTO usage_ledger (pool_id, project_id, model, profile, count, started_at, " \
	" opened_by) "
#define LEDGER_CLOSE(at, by) \
	" UPDATE usage_ledger SET ended_at = greatest(" at ", started_at), closed_by = " by " "

/* the ledger's timestamp: the approval's, or the pool's end time */
#define LEDGER_TS "coalesce(" TS_PARAM("$22") ", now())"

/*
 * The parameters of stmt_pools_approve_free by name: AF_x is $(AF_x + 1).
 * The request and pool, the allocations to free, the ledger kinds that
 * close and what reopens of them, the nodes to notify, who and why.
 */
enum approve_free_param {
	AF_REQ,            /* $1 */
	AF_POOL,           /* $2 */
	AF_PROJECT,        /* $3 */
	AF_ITEMS,          /* $4 */
	AF_STATUS,         /* $5 */
	AF_ENDS,           /* $6 */
	AF_FREE_IDS,       /* $7 */
	AF_CLOSE_MODELS,   /* $8 */
	AF_CLOSE_PROFILES, /* $9 */
	AF_NFREE,          /* $10 */
	AF_KEEP_MODELS,    /* $11 */
	AF_KEEP_PROFILES,  /* $12 */
	AF_KEEP_COUNTS,    /* $13 */
	AF_NODES,          /* $14 */
	AF_ACTOR_ID,       /* $15 */
	AF_ACTOR,          /* $16 */
	AF_NOTE,           /* $17 */
	AF_HTTP_ID,        /* $18 */
	AF_BEFORE,         /* $19 */
	AF_AFTER,          /* $20 */
	AF_ACTION,         /* $21 */
	AF_AT,             /* $22 */
	AF_NPARAMS
};

DB_STMT(stmt_pools_approve_free,
    "WITH fr AS ("
    " UPDATE allocations a SET state = 'releasing', release_request_id = $1, updated_at = now() "
    " FROM (SELECT id FROM allocations WHERE id = ANY ($7::int8[]) ORDER BY id "
    " FOR NO KEY UPDATE) lk "
    " WHERE a.id = lk.id AND a.pool_id = $2 AND a.state NOT IN ('releasing', 'released') "
    " RETURNING a.id"
    "), lc AS (" LEDGER_CLOSE(LEDGER_TS,
	"$1") " WHERE pool_id = $2 AND ended_at IS NULL AND ($21 = 'release' OR (model, profile) IN "
	      " (SELECT * FROM unnest($8::text[], $9::text[]))) RETURNING id"
	      "), lo AS (" LEDGER_OPEN " SELECT $2, $3, u.model, u.profile, u.count, " LEDGER_TS
	      ", $1 "
	      " FROM unnest($11::text[], $12::text[], $13::int4[]) AS u (model, profile, count) "
	      " WHERE u.count > 0"
	      "), " APPROVE_COMMON
	      " SELECT pools_check((SELECT count(*) FROM rq) = 1, 'the request') "
	      "AND pools_check((SELECT count(*) FROM fr) = $10::int, 'the allocations'), "
	      "(SELECT generation FROM pl), " EPOCH_US("now()"));

/*
 * Many create / expand approvals in one statement (group commit): $1-$12
 * one element per approval, $13-$18 per allocation, $19-$24 per ledger
 * interval, $25 the affected nodes, $26-$28 one outbox row per node and
 * approval, $29 the GPUs whose MIG mode switches, $30 and $31 how many
 * requests and allocations must change, $32 each allocation's state
 * (ready on a node without an agent), $33 each pool's status afterwards. Every approval names its own
 * pool (the caller sees to it), so no row is updated twice.
 */
/*
 * The parameters of stmt_pools_approve_many by name: AM_x is $(AM_x + 1).
 * Per approval (AM_REQ .. AM_HTTP_ID), per allocation (AM_ALLOC_*), per
 * ledger interval (AM_LEDGER_*), per outbox row (AM_OUTBOX_*), and the
 * counts the statement checks itself against.
 */
enum approve_many_param {
	AM_REQ,            /* $1 */
	AM_POOL,           /* $2 */
	AM_PROJECT,        /* $3 */
	AM_ITEMS,          /* $4 */
	AM_ACTION,         /* $5 */
	AM_ENDS,           /* $6 */
	AM_NOTE,           /* $7 */
	AM_BEFORE,         /* $8 */
	AM_AFTER,          /* $9 */
	AM_ACTOR_ID,       /* $10 */
	AM_ACTOR,          /* $11 */
	AM_HTTP_ID,        /* $12 */
	AM_ALLOC_GPU,      /* $13 */
	AM_ALLOC_PROFILE,  /* $14 */
	AM_ALLOC_START,    /* $15 */
	AM_ALLOC_SIZE,     /* $16 */
	AM_ALLOC_POOL,     /* $17 */
	AM_ALLOC_REQ,      /* $18 */
	AM_LEDGER_POOL,    /* $19 */
	AM_LEDGER_PROJECT, /* $20 */
	AM_LEDGER_MODEL,   /* $21 */
	AM_LEDGER_PROFILE, /* $22 */
	AM_LEDGER_COUNT,   /* $23 */
	AM_LEDGER_REQ,     /* $24 */
	AM_NODES,          /* $25 */
	AM_OUTBOX_NODE,    /* $26 */
	AM_OUTBOX_REQ,     /* $27 */
	AM_OUTBOX_POOL,    /* $28 */
	AM_SWITCH,         /* $29 */
	AM_NREQUESTS,      /* $30 */
	AM_NALLOCS,        /* $31 */
	AM_ALLOC_STATE,    /* $32 */
	AM_STATUS,         /* $33 */
	AM_NPARAMS
};

#define APPROVE_MANY_HEAD                                                                                            \
	"WITH ap AS ("                                                                                               \
	" SELECT * FROM unnest($1::int8[], $2::int8[], $3::int8[], $4::text[], $5::text[], "                         \
	" $6::int8[], $7::text[], $8::text[], $9::text[], $10::int8[], $11::text[], $12::text[], "                   \
	" $33::text[]) AS u (req, pool, project, items, action, ends, note, before, after, actor_id, "               \
	" actor, http_id, status)"                                                                                   \
	"), rq AS ("                                                                                                 \
	" UPDATE pool_requests r SET state = 'approved', decided_by = nullif(ap.actor_id, 0), "                      \
	" decided_at = now(), note = ap.note, generation = r.generation + 1 "                                        \
	" FROM (SELECT id FROM pool_requests WHERE id = ANY ($1::int8[]) ORDER BY id FOR NO KEY UPDATE) lk, ap "     \
	" WHERE r.id = lk.id AND ap.req = lk.id AND r.state = 'pending' RETURNING r.id"                              \
	"), pl AS ("                                                                                                 \
	" UPDATE pools p SET items = ap.items::jsonb, status = ap.status, "                                          \
	" ends_at = CASE WHEN ap.action = 'create' THEN " TS_PARAM(                                                  \
	    "ap.ends") " ELSE p.ends_at END, "                                                                       \
		       " released_at = NULL, generation = p.generation + 1, updated_at = now() "                     \
		       " FROM (SELECT id FROM pools WHERE id = ANY ($2::int8[]) ORDER BY id FOR NO KEY UPDATE) lk, " \
		       " ap WHERE p.id = lk.id AND ap.pool = lk.id RETURNING p.id"                                   \
		       "), ins AS ("                                                                                 \
		       " INSERT INTO allocations (gpu_id, profile, start, size, state, pool_id, request_id) "        \
		       " SELECT u.gpu, u.profile, u.start, u.size, u.state, u.pool, u.req "                          \
		       " FROM unnest($13::int8[], $14::text[], $15::int4[], $16::int4[], $17::int8[], $18::int8[], " \
		       " $32::text[]) AS u (gpu, profile, start, size, pool, req, state) "                           \
		       " ORDER BY u.gpu, u.start RETURNING id"                                                       \
		       "), led AS (" LEDGER_OPEN                                                                     \
		       " SELECT u.pool, u.project, u.model, u.profile, u.count, now(), u.req "                       \
		       " FROM unnest($19::int8[], $20::int8[], $21::text[], $22::text[], $23::int4[], $24::int8[]) " \
		       " AS u (pool, project, model, profile, count, req) ORDER BY u.pool, u.model, u.profile"       \
		       "), nb AS ("                                                                                  \
		       " UPDATE nodes n SET generation = n.generation + 1, updated_at = now() "                      \
		       " FROM (SELECT id FROM nodes WHERE id = ANY ($25::int8[]) ORDER BY id FOR NO KEY UPDATE) s "  \
		       " WHERE n.id = s.id RETURNING n.id, n.generation"                                             \
		       "), ob AS ("                                                                                  \
		       " INSERT INTO outbox (node_id, generation, request_id, pool_id) "                             \
		       " SELECT nb.id, nb.generation, o.req, o.pool "                                                \
		       " FROM unnest($26::int8[], $27::int8[], $28::int8[]) AS o (node, req, pool) "                 \
		       " JOIN nb ON nb.id = o.node"                                                                  \
		       "), ev AS ("                                                                                  \
		       " INSERT INTO pool_request_events (request_id, from_state, to_state, actor_id, actor, note) " \
		       " SELECT req, 'pending', 'approved', nullif(actor_id, 0), actor, note FROM ap"                \
		       "), au AS ("                                                                                  \
		       " INSERT INTO audit_log (actor_id, actor, action, object_type, object_id, project_id, "       \
		       " request_id, before, after) SELECT nullif(actor_id, 0), actor, 'pool_request.approve', "     \
		       " 'pool_request', req::text, project, http_id, before::jsonb, after::jsonb FROM ap"           \
		       "), pa AS ("                                                                                  \
		       " INSERT INTO audit_log (actor_id, actor, action, object_type, object_id, project_id, "       \
		       " request_id, before, after) SELECT nullif(actor_id, 0), actor, 'pool.active', 'pool', "      \
		       " pool::text, project, http_id, '{\"status\":\"pending\"}'::jsonb, "                          \
		       " jsonb_build_object('status', 'active', 'reason', 'its nodes have no agent: the "            \
		       "allocations are ready at once and the operator realises them') "                             \
		       " FROM ap WHERE ap.action = 'create' AND ap.status = 'active'"                                \
		       "), "
#define APPROVE_MANY_TAIL                                                            \
	" SELECT pools_check((SELECT count(*) FROM rq) = $30::int, 'the requests') " \
	"AND pools_check((SELECT count(*) FROM pl) = $30::int, 'the pools') "        \
	"AND pools_check((SELECT count(*) FROM ins) = $31::int, 'the allocations')"
DB_STMT(stmt_pools_approve_many_switch,
    APPROVE_MANY_HEAD
    "sw AS ("
    " UPDATE gpus g SET mig_enabled = NOT g.mig_enabled, generation = g.generation + 1, "
    " updated_at = now() "
    " FROM (SELECT id FROM gpus WHERE id = ANY ($29::int8[]) ORDER BY id FOR NO KEY UPDATE) lk "
    " WHERE g.id = lk.id RETURNING g.id"
    ")" APPROVE_MANY_TAIL);
/* without switches: leaves gpus alone, only names $29 */
DB_STMT(stmt_pools_approve_many,
    APPROVE_MANY_HEAD "nosw AS (SELECT cardinality($29::int8[]))" APPROVE_MANY_TAIL);

#define LIVE_COLS                                                                         \
	"SELECT a.id, a.gpu_id, g.node_id, n.name, g.uuid, g.gpu_index, "                 \
	"coalesce(a.pool_id, 0), g.model, a.profile, a.start, a.size FROM allocations a " \
	"JOIN gpus g ON g.id = a.gpu_id JOIN nodes n ON n.id = g.node_id "
DB_STMT(stmt_pools_live_allocs,
    LIVE_COLS "WHERE a.pool_id = $1 AND a.state NOT IN ('releasing', 'released') "
	      "ORDER BY a.gpu_id, a.start");
DB_STMT(stmt_pools_live_allocs_gpus,
    LIVE_COLS "WHERE a.gpu_id IN (SELECT b.gpu_id FROM allocations b WHERE b.pool_id = $1 "
	      "AND b.state NOT IN ('releasing', 'released')) "
	      "AND a.state NOT IN ('releasing', 'released') ORDER BY a.gpu_id, a.start");

/* ---- metrics ---- */

DB_STMT(stmt_pools_gauges,
    "SELECT (SELECT count(*) FROM pool_requests WHERE state = 'pending'), "
    "(SELECT count(*) FROM outbox WHERE delivered_at IS NULL)");

/* ---- expiry ---- */

DB_STMT(stmt_pools_expire,
    "WITH due AS ("
    " SELECT id FROM pool_requests WHERE state = 'pending' AND expires_at <= now() "
    " ORDER BY expires_at, id LIMIT $1 FOR UPDATE SKIP LOCKED"
    "), rq AS ("
    " UPDATE pool_requests r SET state = 'expired', decided_at = now(), "
    " generation = r.generation + 1 FROM due WHERE r.id = due.id "
    " RETURNING r.id, r.project_id, r.pool_id, r.action"
    "), pl AS ("
    " UPDATE pools p SET status = 'released', released_at = now(), "
    " generation = p.generation + 1, updated_at = now() FROM rq "
    " WHERE p.id = rq.pool_id AND rq.action = 'create' AND p.status = 'pending' RETURNING p.id"
    "), ev AS ("
    " INSERT INTO pool_request_events (request_id, from_state, to_state, note) "
    " SELECT id, 'pending', 'expired', 'pending longer than the request lifetime' FROM rq"
    "), au AS ("
    " INSERT INTO audit_log (action, object_type, object_id, project_id, before, after) "
    " SELECT 'pool_request.expire', 'pool_request', id::text, project_id, "
    " '{\"state\":\"pending\"}', '{\"state\":\"expired\"}' FROM rq"
    ") SELECT count(*) FROM rq");
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
}

#define REQ_NCOLS 18

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
}

int
db_request_submit(struct db *db, struct arena *a, const struct request_submit *s,
    struct pool_request_row *out, bool *needs_quota, struct gp_error *err)
{
	const char *p[13];
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
	*needs_quota = false;
	r = db_exec(db, a, &stmt_pools_submit, 13, p, err);
	if (r == NULL) {
		if (err->status == 409 &&
		    strcmp(db_last_constraint(db), "pools_project_name_key") == 0)
			gp_problem_set(err, GP_PROBLEM_CONFLICT,
			    "the project already has a pool named %s", s->pool_name);
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
	int64_t *i64[4];
	const char **txt[8];
	int *ttl = arena_alloc(a, sizeof(*ttl) * (size_t)(n + 1));
	bool *checked = arena_alloc(a, sizeof(*checked) * (size_t)(n + 1));
	const char *p[13];
	PGresult *r;

	for (int k = 0; k < 4; k++)
		i64[k] = arena_alloc(a, sizeof(**i64) * (size_t)(n + 1));
	for (int k = 0; k < 8; k++)
		txt[k] = arena_alloc(a, sizeof(**txt) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		i64[0][i] = v[i]->project_id;
		i64[1][i] = v[i]->pool_id;
		i64[2][i] = v[i]->ends_us;
		i64[3][i] = v[i]->actor_id;
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
	if (commit)
		r = db_exec_commit(db, a, &stmt_pools_submit_many, 13, p, err);
	else
		r = db_exec(db, a, &stmt_pools_submit_many, 13, p, err);
	if (r == NULL)
		return -1;
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

/* ---- candidates ---- */

int
db_candidates_lock(struct db *db, struct arena *a, const struct candidate_want *w, int nw,
    bool skip, struct locked_gpu **out, int *n, struct gp_error *err)
{
	const char **models = arena_alloc(a, sizeof(*models) * (size_t)(nw + 1));
	const char **layouts = arena_alloc(a, sizeof(*layouts) * (size_t)(nw + 1));
	bool *migs = arena_alloc(a, sizeof(*migs) * (size_t)(nw + 1));
	int *lims = arena_alloc(a, sizeof(*lims) * (size_t)(nw + 1));
	const char *p[4];
	PGresult *r;

	*n = 0;
	*out = NULL;
	if (nw == 0)
		return 0;
	for (int i = 0; i < nw; i++) {
		models[i] = w[i].model;
		layouts[i] = w[i].layout;
		migs[i] = w[i].mig_enabled;
		lims[i] = w[i].limit;
	}
	p[0] = db_param_text_array(a, models, nw);
	p[1] = db_param_bool_array(a, migs, nw);
	p[2] = db_param_text_array(a, layouts, nw);
	p[3] = db_param_int_array(a, lims, nw);
	r = db_exec(db, a, skip ? &stmt_pools_cand_skip : &stmt_pools_cand_wait, 4, p, err);
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct locked_gpu *g = &(*out)[i];

		g->id = db_int64(r, i, 0);
		g->node_id = db_int64(r, i, 1);
		g->index = (int)db_int64(r, i, 2);
		g->model = db_text(a, r, i, 3);
		g->mig_enabled = db_bool(r, i, 4);
		g->layout = db_text(a, r, i, 5);
		g->uuid = db_text(a, r, i, 6);
		g->node = db_text(a, r, i, 7);
		g->managed = db_bool(r, i, 8);
	}
	return 0;
}

/* ---- approvals ---- */

static int64_t *
distinct_ids(struct arena *a, const int64_t *ids, int n, int *nout)
{
	int64_t *v = arena_alloc(a, sizeof(*v) * (size_t)(n + 1));
	int k = 0;

	for (int i = 0; i < n; i++) {
		int j;

		for (j = 0; j < k; j++)
			if (v[j] == ids[i])
				break;
		if (j == k)
			v[k++] = ids[i];
	}
	*nout = k;
	return v;
}

int
db_approval_free_apply(struct db *db, struct arena *a, const struct approval_apply *ap, bool commit,
    struct gp_error *err)
{
	const char *p[AF_NPARAMS];
	PGresult *r;
	int nnodes = 0;
	int64_t *nodes;

	memset(p, 0, sizeof(p));
	nodes = distinct_ids(a, ap->free_node_ids, ap->nfree_nodes, &nnodes);
	p[AF_REQ] = db_param_int(a, ap->request_id);
	p[AF_POOL] = db_param_int(a, ap->pool_id);
	p[AF_PROJECT] = db_param_int(a, ap->project_id);
	p[AF_ITEMS] = ap->new_items_json;
	p[AF_STATUS] = pool_status_name(ap->new_status);
	p[AF_ENDS] = db_param_int(a, ap->ends_us);
	p[AF_FREE_IDS] = db_param_int64_array(a, ap->free_ids, ap->nfree);
	p[AF_CLOSE_MODELS] = db_param_text_array(a, ap->keep_models, ap->nkeep);
	p[AF_CLOSE_PROFILES] = db_param_text_array(a, ap->keep_profiles, ap->nkeep);
	p[AF_NFREE] = db_param_int(a, ap->nfree);
	p[AF_KEEP_MODELS] = db_param_text_array(a, ap->keep_models, ap->nkeep);
	p[AF_KEEP_PROFILES] = db_param_text_array(a, ap->keep_profiles, ap->nkeep);
	p[AF_KEEP_COUNTS] = db_param_int_array(a, ap->keep_counts, ap->nkeep);
	p[AF_NODES] = db_param_int64_array(a, nodes, nnodes);
	p[AF_ACTOR_ID] = db_param_int(a, ap->actor_id);
	p[AF_ACTOR] = ap->actor;
	p[AF_NOTE] = ap->note;
	p[AF_HTTP_ID] = ap->http_request_id;
	p[AF_BEFORE] = ap->audit_before_json;
	p[AF_AFTER] = ap->audit_after_json;
	p[AF_ACTION] = pool_action_name(ap->action);
	p[AF_AT] = db_param_int(a, ap->at_us);
	/* the statement checks itself (pools_check), so it may commit in its round trip */
	if (commit)
		r = db_exec_commit(db, a, &stmt_pools_approve_free, AF_NPARAMS, p, err);
	else
		r = db_exec(db, a, &stmt_pools_approve_free, AF_NPARAMS, p, err);
	return r == NULL ? -1 : 0;
}

int
db_approvals_apply_many(struct db *db, struct arena *a, const struct approval_apply *const *v,
    int n, const struct outbox_row *more, int nmore, struct gp_error *err)
{
	int64_t *req = arena_alloc(a, sizeof(*req) * (size_t)(n + 1));
	int64_t *pool = arena_alloc(a, sizeof(*pool) * (size_t)(n + 1));
	int64_t *proj = arena_alloc(a, sizeof(*proj) * (size_t)(n + 1));
	int64_t *ends = arena_alloc(a, sizeof(*ends) * (size_t)(n + 1));
	int64_t *actor_id = arena_alloc(a, sizeof(*actor_id) * (size_t)(n + 1));
	const char **text[7];
	int64_t *an[3], *ln[3], *on[3], *sw, *nodes;
	const char **aprof, **astate, **lmodel, **lprof, **pstatus;
	int *astart, *asize, *lcount;
	int na = 0, nl = 0, no = 0, nsw = 0, nnodes = 0;
	const char *p[AM_NPARAMS];
	PGresult *r;

	for (int k = 0; k < 7; k++)
		text[k] = arena_alloc(a, sizeof(**text) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		na += v[i]->nallocs;
		nl += v[i]->nitems;
		nsw += v[i]->nswitch;
	}
	for (int k = 0; k < 3; k++) {
		an[k] = arena_alloc(a, sizeof(*an[k]) * (size_t)(na + 1));
		ln[k] = arena_alloc(a, sizeof(*ln[k]) * (size_t)(nl + 1));
		on[k] = arena_alloc(a, sizeof(*on[k]) * (size_t)(na + nmore + 1));
	}
	aprof = arena_alloc(a, sizeof(*aprof) * (size_t)(na + 1));
	astate = arena_alloc(a, sizeof(*astate) * (size_t)(na + 1));
	pstatus = arena_alloc(a, sizeof(*pstatus) * (size_t)(n + 1));
	astart = arena_alloc(a, sizeof(*astart) * (size_t)(na + 1));
	asize = arena_alloc(a, sizeof(*asize) * (size_t)(na + 1));
	lmodel = arena_alloc(a, sizeof(*lmodel) * (size_t)(nl + 1));
	lprof = arena_alloc(a, sizeof(*lprof) * (size_t)(nl + 1));
	lcount = arena_alloc(a, sizeof(*lcount) * (size_t)(nl + 1));
	sw = arena_alloc(a, sizeof(*sw) * (size_t)(nsw + 1));
	na = nl = nsw = 0;
	for (int i = 0; i < n; i++) {
		const struct approval_apply *ap = v[i];
		int64_t *mine = arena_alloc(a, sizeof(*mine) * (size_t)(ap->nallocs + 1));
		int64_t *own;
		int nown;

		req[i] = ap->request_id;
		pool[i] = ap->pool_id;
		proj[i] = ap->project_id;
		ends[i] = ap->ends_us;
		actor_id[i] = ap->actor_id;
		text[0][i] = ap->new_items_json;
		text[1][i] = pool_action_name(ap->action);
		text[2][i] = ap->note;
		text[3][i] = ap->audit_before_json;
		text[4][i] = ap->audit_after_json;
		text[5][i] = ap->actor;
		text[6][i] = ap->http_request_id;
		pstatus[i] = pool_status_name(ap->new_status);
		for (int j = 0; j < ap->nallocs; j++) {
			an[0][na] = ap->allocs[j].gpu_id;
			an[1][na] = ap->pool_id;
			an[2][na] = ap->request_id;
			aprof[na] = ap->allocs[j].profile;
			astate[na] = ap->allocs[j].state;
			astart[na] = ap->allocs[j].start;
			asize[na] = ap->allocs[j].size;
			mine[j] = ap->allocs[j].node_id;
			na++;
		}
		for (int j = 0; j < ap->nitems; j++) {
			ln[0][nl] = ap->pool_id;
			ln[1][nl] = ap->project_id;
			ln[2][nl] = ap->request_id;
			lmodel[nl] = ap->item_models[j];
			lprof[nl] = ap->item_profiles[j];
			lcount[nl] = ap->item_counts[j];
			nl++;
		}
		for (int j = 0; j < ap->nswitch; j++)
			sw[nsw++] = ap->switch_gpu_ids[j];
		/* one outbox row per node of this approval */
		own = distinct_ids(a, mine, ap->nallocs, &nown);
		for (int j = 0; j < nown; j++) {
			on[0][no] = own[j];
			on[1][no] = ap->request_id;
			on[2][no] = ap->pool_id;
			no++;
		}
	}
	for (int i = 0; i < nmore; i++) {
		on[0][no] = more[i].node_id;
		on[1][no] = more[i].request_id;
		on[2][no] = more[i].pool_id;
		no++;
	}
	nodes = distinct_ids(a, on[0], no, &nnodes);
	p[AM_REQ] = db_param_int64_array(a, req, n);
	p[AM_POOL] = db_param_int64_array(a, pool, n);
	p[AM_PROJECT] = db_param_int64_array(a, proj, n);
	p[AM_ITEMS] = db_param_text_array(a, text[0], n);
	p[AM_ACTION] = db_param_text_array(a, text[1], n);
	p[AM_ENDS] = db_param_int64_array(a, ends, n);
	p[AM_NOTE] = db_param_text_array(a, text[2], n);
	p[AM_BEFORE] = db_param_text_array(a, text[3], n);
	p[AM_AFTER] = db_param_text_array(a, text[4], n);
	p[AM_ACTOR_ID] = db_param_int64_array(a, actor_id, n);
	p[AM_ACTOR] = db_param_text_array(a, text[5], n);
	p[AM_HTTP_ID] = db_param_text_array(a, text[6], n);
	p[AM_ALLOC_GPU] = db_param_int64_array(a, an[0], na);
	p[AM_ALLOC_PROFILE] = db_param_text_array(a, aprof, na);
	p[AM_ALLOC_START] = db_param_int_array(a, astart, na);
	p[AM_ALLOC_SIZE] = db_param_int_array(a, asize, na);
	p[AM_ALLOC_POOL] = db_param_int64_array(a, an[1], na);
	p[AM_ALLOC_REQ] = db_param_int64_array(a, an[2], na);
	p[AM_LEDGER_POOL] = db_param_int64_array(a, ln[0], nl);
	p[AM_LEDGER_PROJECT] = db_param_int64_array(a, ln[1], nl);
	p[AM_LEDGER_MODEL] = db_param_text_array(a, lmodel, nl);
	p[AM_LEDGER_PROFILE] = db_param_text_array(a, lprof, nl);
	p[AM_LEDGER_COUNT] = db_param_int_array(a, lcount, nl);
	p[AM_LEDGER_REQ] = db_param_int64_array(a, ln[2], nl);
	p[AM_NODES] = db_param_int64_array(a, nodes, nnodes);
	p[AM_OUTBOX_NODE] = db_param_int64_array(a, on[0], no);
	p[AM_OUTBOX_REQ] = db_param_int64_array(a, on[1], no);
	p[AM_OUTBOX_POOL] = db_param_int64_array(a, on[2], no);
	p[AM_SWITCH] = db_param_int64_array(a, sw, nsw);
	p[AM_NREQUESTS] = db_param_int(a, n);
	p[AM_NALLOCS] = db_param_int(a, na);
	p[AM_ALLOC_STATE] = db_param_text_array(a, astate, na);
	p[AM_STATUS] = db_param_text_array(a, pstatus, n);
	r = db_exec_commit(db, a,
	    nsw > 0 ? &stmt_pools_approve_many_switch : &stmt_pools_approve_many, AM_NPARAMS, p,
	    err);
	return r == NULL ? -1 : 0;
}

int
db_pools_lock_gpus(struct db *db, struct arena *a, const int64_t *pool_ids, int n,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int64_array(a, pool_ids, n) };

	return db_exec(db, a, &stmt_pools_lock_gpus, 1, p, err) == NULL ? -1 : 0;
}

int
db_pool_live_allocations(struct db *db, struct arena *a, int64_t pool_id, bool neighbours,
    struct live_alloc **out, int *n, struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, pool_id) };
	PGresult *r = db_exec(db, a,
	    neighbours ? &stmt_pools_live_allocs_gpus : &stmt_pools_live_allocs, 1, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		struct live_alloc *o = &(*out)[i];

		o->id = db_int64(r, i, 0);
		o->gpu_id = db_int64(r, i, 1);
		o->node_id = db_int64(r, i, 2);
		o->node = db_text(a, r, i, 3);
		o->gpu_uuid = db_text(a, r, i, 4);
		o->gpu_index = (int)db_int64(r, i, 5);
		o->pool_id = db_int64(r, i, 6);
		o->model = db_text(a, r, i, 7);
		o->profile = db_text(a, r, i, 8);
		o->start = (int)db_int64(r, i, 9);
		o->size = (int)db_int64(r, i, 10);
	}
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
db_requests_expire(struct db *db, int limit, int64_t *n, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { db_param_int(a, limit) };
	PGresult *r = db_exec(db, a, &stmt_pools_expire, 1, p, err);
	int rc = -1;

	if (r != NULL) {
		*n = db_int64(r, 0, 0);
		rc = 0;
	}
	arena_destroy(a);
	return rc;
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
