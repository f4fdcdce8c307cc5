/*
 * db_agent_write.h - the write side of the node agents' statements: the
 * enrollment tokens, enrollment, node tokens, status reports, heartbeats
 * and workload profiles (migrations 0010, 0011; docs/agent.md), for
 * service/agent_service.h, whose one entry per workflow is their only
 * caller; api/ may not include it (scripts/check-boundaries). The reads,
 * the telemetry samples and what the workers run stay in db_agent.h.
 */
#ifndef GP_DB_DB_AGENT_WRITE_H
#define GP_DB_DB_AGENT_WRITE_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "db/db.h"

/* A new enrollment token of cluster_id; *json = {"id","cluster","expires_at",...}. */
int db_enroll_token_create(struct db *db, struct arena *a, int64_t cluster_id,
    const unsigned char *digest, const char *prefix, int expires_in_s, int64_t user_id,
    const char *node_name, bool adopt_manual, const char **json, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Revoke token id of cluster_id (*found false: none, or already used/revoked). */
int db_enroll_token_revoke(struct db *db, struct arena *a, int64_t cluster_id, int64_t id,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* Consume a usable enrollment token (in the enrollment's transaction). */
int db_enroll_token_consume(struct db *db, struct arena *a, const unsigned char *digest,
    int64_t *token_id, int64_t *cluster_id, bool *found, struct gp_error *err)
    __attribute__((warn_unused_result));

struct agent_enrollment {
	int64_t token_id, cluster_id;
	const char *node_name, *hostname, *callback_url, *agent_version;
	int64_t cpu_millicores, memory_bytes; /* < 0: not given */
	const char *gpus_json;                /* checked against the catalog */
	const unsigned char *node_digest;
	const char *push_secret;
	int grace_s; /* an agent heard from this recently is live: its node is not adopted */
};

/*
 * agent_enroll(): the node's id and its JSON (nodes API shape, plus agent
 * fields); *adopted: JSON of what the adopted node was (NULL: a new node).
 * 409 node_adopt_refused when the token may not take the node.
 */
int db_agent_enroll(struct db *db, struct arena *a, const struct agent_enrollment *e,
    int64_t *node_id, const char **node_json, const char **adopted, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Replace the node's token (rotate) or revoke every live one (revoke: token NULL). */
int db_node_token_replace(struct db *db, struct arena *a, int64_t node_id,
    const unsigned char *digest, struct gp_error *err) __attribute__((warn_unused_result));

/* The node's GPUs for a status report's checks: {"<uuid>": {"model","mig_enabled"}}. */
int db_agent_node_gpus(struct db *db, struct arena *a, int64_t node_id, const char **json,
    struct gp_error *err) __attribute__((warn_unused_result));

/* agent_apply_status(): *result JSON {"generation","ready","failed",...}. */
int db_agent_apply_status(struct db *db, struct arena *a, int64_t node_id, int64_t observed,
    const char *version, const char *gpus_json, const char *errors_json, const char **result,
    struct gp_error *err) __attribute__((warn_unused_result));

/* agent_heartbeat(): *generation the node's desired generation. */
int db_agent_heartbeat(struct db *db, struct arena *a, int64_t node_id, int64_t observed,
    int64_t *generation, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * agent_heartbeats() (migration 0029), one statement and its own
 * transaction, outside any db_tx: the heartbeats of nodes[0..n) (each
 * node once; observed[i] -1: not given) that the batch could take (a
 * node not unknown, not locked by another transaction, its observed
 * generation not advancing) are committed on return, done[i] set and
 * generation[i] the node's; the others are untouched (done[i] false) and
 * go through db_agent_heartbeat, each in a transaction of its own.
 */
int db_agent_heartbeats(struct db *db, struct arena *a, const int64_t *nodes,
    const int64_t *observed, int n, int64_t *generation, bool *done, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Replace the node's workloads (agent_apply_profiles); *violations. */
int db_agent_profiles(struct db *db, struct arena *a, int64_t node_id, const char *json,
    int64_t *violations, struct gp_error *err) __attribute__((warn_unused_result));
#endif
