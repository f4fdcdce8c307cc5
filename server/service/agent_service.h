/*
 * agent_service.h - the node agents' workflows (docs/agent.md), one entry
 * each for every caller: enrollment tokens (create, list, revoke),
 * enrollment, a node token's rotation and revocation, the desired-state
 * answer of a (long-)poll, a status report, a heartbeat and a workload
 * profiles report. Handlers (api/agent.c, api/agent_status.c,
 * api/telemetry.c) parse, authorize, call one entry and reply; what a
 * workflow writes, it writes in one transaction with its audit row.
 *
 * Enrollment, status and heartbeat stay PL/pgSQL functions (agent_enroll,
 * agent_apply_status, agent_heartbeat, agent_apply_profiles; their last
 * definitions in migrations/ 0020, 0021, 0027, 0030): each locks the node, its GPUs and its allocations in
 * the lock order of the approvals and writes several tables in one
 * statement, so that a report racing an approval or the liveness sweep
 * sees one state (a status report only what it changes: the node row
 * alone when it changes nothing, docs/agent.md). db/db_agent.c runs them; the entries below are their only
 * callers (db/db_agent_write.h is for service/ only).
 */
#ifndef GP_SERVICE_AGENT_SERVICE_H
#define GP_SERVICE_AGENT_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include <json-c/json.h>

#include "core/arena.h"
#include "core/error.h"
#include "db/db.h"
#include "db/db_agent_write.h"
#include "domain/catalog.h"
#include "service/pool_service.h"

/* A new enrollment token (the digest of its secret; the caller keeps the secret). */
struct enroll_token_new {
	const char *cluster;
	const unsigned char *digest;
	const char *prefix;
	int ttl_s;
	const char *node_name; /* NULL: any node */
	bool adopt_manual;     /* may adopt a node registered by hand */
};

/*
 * Create an enrollment token of cluster in->cluster (404 when none) and
 * its audit row; *json the token's document (no secret).
 */
int service_enroll_token_create(struct db *db, struct arena *a, const struct service_actor *who,
    const struct enroll_token_new *in, const char **json, struct gp_error *err)
    __attribute__((warn_unused_result));

/* The enrollment tokens of cluster (404 when none) as a JSON array. */
int service_enroll_tokens_list(struct db *db, struct arena *a, const char *cluster,
    const char **json, struct gp_error *err) __attribute__((warn_unused_result));

/* Revoke enrollment token id of cluster (404 when not usable) and audit it. */
int service_enroll_token_revoke(struct db *db, struct arena *a, const struct service_actor *who,
    const char *cluster, int64_t id, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Enroll a node with the enrollment token of digest enroll_digest (401
 * invalid_enrollment_token when not usable): e's token and cluster are set
 * here, the rest by the caller. Audited node.enroll (and node.adopt when
 * it took over a node); *node_id and *node_json the node.
 */
int service_agent_enroll(struct db *db, struct arena *a, const struct service_actor *who,
    const unsigned char *enroll_digest, struct agent_enrollment *e, int64_t *node_id,
    const char **node_json, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Replace the node's token by digest (rotate) or revoke every live one
 * (digest NULL), audited. The node is node (a name, 404 when none) or,
 * when node is NULL, node_id.
 */
int service_node_token_replace(struct db *db, struct arena *a, const struct service_actor *who,
    int64_t node_id, const char *node, const unsigned char *digest, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * The desired state of node_id for an agent that has generation after:
 * *generation the node's, *doc its document when that is not after (past
 * it, or behind it after a restore: the agent must learn the current
 * document), else NULL (nothing new: the caller answers 304 or waits).
 */
int service_agent_desired(struct db *db, struct arena *a, int64_t node_id, int64_t after,
    int64_t *generation, const char **doc, struct gp_error *err)
    __attribute__((warn_unused_result));

/* A checked status report (api/agent_status.c parses it). */
struct agent_status_report {
	int64_t node_id, observed;
	const char *version;
	struct json_object *gpus; /* the checked GPUs; their instances are filtered here */
	const char *errors_json;
};

/*
 * Apply a status report: its MIG instances checked against the catalog
 * for the node's GPU models (one not a placement of its GPU is not
 * recorded: a warning in *warnings, a new array in arena a), then
 * agent_apply_status; *result its JSON.
 */
int service_agent_status(struct db *db, struct arena *a, const struct catalog *cat,
    const struct agent_status_report *r, struct json_object **warnings, const char **result,
    struct gp_error *err) __attribute__((warn_unused_result));

/* A heartbeat (observed -1: not given); *generation the node's desired generation. */
int service_agent_heartbeat(struct db *db, struct arena *a, int64_t node_id, int64_t observed,
    int64_t *generation, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Heartbeats by group commit (workers/heartbeat_queue.c): the heartbeats
 * of nodes[0..n) (observed[i] -1: not given) that need nothing but
 * agent_heartbeat_at (a node not unknown, its row free, its observed
 * generation not advancing; each node's first in the array) are
 * committed in one statement, its own transaction (db_agent_heartbeats);
 * done[i] true and generation[i] the node's desired generation for
 * those. Every other one (done[i] false) must go through
 * service_agent_heartbeat, alone. -1 with err (nothing done) on a
 * database failure.
 */
int service_agent_heartbeats(struct db *db, const int64_t *nodes, const int64_t *observed, int n,
    int64_t *generation, bool *done, struct gp_error *err) __attribute__((warn_unused_result));

/* Replace the node's workloads (agent_apply_profiles); *violations. */
int service_agent_profiles(struct db *db, struct arena *a, int64_t node_id, const char *json,
    int64_t *violations, struct gp_error *err) __attribute__((warn_unused_result));

#endif
