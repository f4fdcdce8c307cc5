/*
 * db_approvals.c - what an approval writes: the candidate GPUs it locks,
 * the statements that apply a shrink or release (approve_free) and a
 * batch of creates and expands (approve_many), with the usage ledger's
 * transitions (see db_approvals.h).
 */
#include "db_approvals.h"
#include "core/problem.h"
#include "db_internal.h"
#include "db_sql.h"

#include <string.h>

/* ---- candidates ---- */

/*
 * The advisory lock (class 0x67707031, "gpp1"; key: the node id) marks a
 * node an approval is placing on; pg_try_advisory_xact_lock is
 * re-entrant within a transaction, so a re-check after a row lock wait
 * passes again.
 */
#define CAND_SELECT                                                                               \
	"SELECT g.id, g.node_id, g.gpu_index, g.model, g.mig_enabled, g.layout, g.uuid, n.name, " \
	"n.managed_by_agent, g.cluster_id "                                                       \
	"FROM unnest($1::text[], $2::bool[], $3::text[], $4::int4[]) WITH ORDINALITY "            \
	"AS w (model, mig, layout, lim, ord) CROSS JOIN LATERAL ("                                \
	"SELECT x.id, x.node_id, x.gpu_index, x.model, x.mig_enabled, x.layout, x.uuid, "         \
	"x.cluster_id FROM gpus x WHERE x.model = w.model AND x.mig_enabled = w.mig "             \
	"AND x.layout = w.layout AND x.health = 'ok' AND x.node_status = 'ready' "                \
	"AND ($5::int8 = 0 OR x.cluster_id = $5) "
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
/* A simulation's: the same rows, locking nothing. */
DB_STMT(stmt_pools_cand_read,
    CAND_SELECT "ORDER BY x.node_id, x.gpu_index, x.id LIMIT w.lim) g "
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
/*
 * A shrink's candidates and their neighbours. The new instance of a
 * defragmentation move in flight (it replaces a live one, migration 0026)
 * is a neighbour, not the pool's: the pool counts the old one, so a shrink
 * that chose both would leave the pool one instance over its items (the
 * apply worker releases the new one when the shrink takes the old).
 */
DB_STMT(stmt_pools_live_allocs_gpus,
    "SELECT a.id, a.gpu_id, g.node_id, n.name, g.uuid, g.gpu_index, "
    "CASE WHEN defrag_shadowed(a.replaces) THEN 0 ELSE coalesce(a.pool_id, 0) END, g.model, "
    "a.profile, a.start, a.size FROM allocations a "
    "JOIN gpus g ON g.id = a.gpu_id JOIN nodes n ON n.id = g.node_id "
    "WHERE a.gpu_id IN (SELECT b.gpu_id FROM allocations b WHERE b.pool_id = $1 "
    "AND b.state NOT IN ('releasing', 'released')) "
    "AND a.state NOT IN ('releasing', 'released') ORDER BY a.gpu_id, a.start");

/* ---- candidates ---- */

int
db_candidates_lock(struct db *db, struct arena *a, const struct candidate_want *w, int nw,
    int64_t cluster_id, enum candidate_lock how, struct locked_gpu **out, int *n,
    struct gp_error *err)
{
	static const struct db_stmt *const stmts[] = {
		[CANDIDATES_SKIP] = &stmt_pools_cand_skip,
		[CANDIDATES_WAIT] = &stmt_pools_cand_wait,
		[CANDIDATES_READ] = &stmt_pools_cand_read,
	};
	const char **models = arena_alloc(a, sizeof(*models) * (size_t)(nw + 1));
	const char **layouts = arena_alloc(a, sizeof(*layouts) * (size_t)(nw + 1));
	bool *migs = arena_alloc(a, sizeof(*migs) * (size_t)(nw + 1));
	int *lims = arena_alloc(a, sizeof(*lims) * (size_t)(nw + 1));
	const char *p[5];
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
	p[4] = db_param_int(a, cluster_id);
	r = db_exec(db, a, stmts[how], 5, p, err);
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
		g->cluster_id = db_int64(r, i, 9);
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

/* The per-approval parameters of stmt_pools_approve_many (AM_REQ .. AM_HTTP_ID, AM_STATUS). */
static void
am_approval_params(struct arena *a, const struct approval_apply *const *v, int n, const char **p)
{
	int64_t *req = arena_alloc(a, sizeof(*req) * (size_t)(n + 1));
	int64_t *pool = arena_alloc(a, sizeof(*pool) * (size_t)(n + 1));
	int64_t *proj = arena_alloc(a, sizeof(*proj) * (size_t)(n + 1));
	int64_t *ends = arena_alloc(a, sizeof(*ends) * (size_t)(n + 1));
	int64_t *actor_id = arena_alloc(a, sizeof(*actor_id) * (size_t)(n + 1));
	const char **pstatus = arena_alloc(a, sizeof(*pstatus) * (size_t)(n + 1));
	const char **text[7];

	for (int k = 0; k < 7; k++)
		text[k] = arena_alloc(a, sizeof(**text) * (size_t)(n + 1));
	for (int i = 0; i < n; i++) {
		const struct approval_apply *ap = v[i];

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
	}
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
	p[AM_STATUS] = db_param_text_array(a, pstatus, n);
	p[AM_NREQUESTS] = db_param_int(a, n);
}

int
db_approvals_apply_many(struct db *db, struct arena *a, const struct approval_apply *const *v,
    int n, const struct outbox_row *more, int nmore, struct gp_error *err)
{
	int64_t *an[3], *ln[3], *on[3], *sw, *nodes;
	const char **aprof, **astate, **lmodel, **lprof;
	int *astart, *asize, *lcount;
	int na = 0, nl = 0, no = 0, nsw = 0, nnodes = 0;
	const char *p[AM_NPARAMS];
	PGresult *r;

	am_approval_params(a, v, n, p);
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
	p[AM_NALLOCS] = db_param_int(a, na);
	p[AM_ALLOC_STATE] = db_param_text_array(a, astate, na);
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
