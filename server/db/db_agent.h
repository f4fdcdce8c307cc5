/*
 * db_agent.h - node agents, the reads and single-table statements api/
 * and workers/ may call: node-token authentication, the enrollment tokens
 * list, the desired-state document, the mig-parted layout, the outbox,
 * liveness, telemetry samples, alerts and profiles lists (migrations
 * 0010, 0011; docs/agent.md). The workflows' writes (enrollment, tokens,
 * status, heartbeat, profiles) are in db_agent_write.h, for service/ only.
 */
#ifndef GP_DB_DB_AGENT_H
#define GP_DB_DB_AGENT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "db/db.h"

/* The live node token with this SHA-256 digest: *node_id, *found. */
int db_node_token_authenticate(struct db *db, struct arena *a, const unsigned char *digest,
    int64_t *node_id, bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* The cluster's enrollment tokens (no secret) as a JSON array. */
int db_enroll_tokens_list(struct db *db, struct arena *a, int64_t cluster_id, const char **json,
    struct gp_error *err) __attribute__((warn_unused_result));

/* The node's desired-state generation (cheap; the long-poll's check). */
int db_agent_generation(struct db *db, struct arena *a, int64_t node_id, int64_t *generation,
    struct gp_error *err) __attribute__((warn_unused_result));

/* The desired-state document of a node and its generation, read in one snapshot. */
int db_agent_desired_state(struct db *db, struct arena *a, int64_t node_id, int64_t *generation,
    const char **doc, struct gp_error *err) __attribute__((warn_unused_result));

/* agent_liveness_sweep(): *n nodes that became unknown. */
int db_agent_liveness(struct db *db, int grace_s, int64_t *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Per GPU of node `name`: its index, MIG mode and "profile=count,..." of
 * its placed instances, as a JSON array (mig-parted config). */
int db_agent_mig_layout(struct db *db, struct arena *a, const char *node_name, bool *found,
    const char **json, struct gp_error *err) __attribute__((warn_unused_result));

/* The id of node `name` (0 when none). */
int db_node_id_by_name(struct db *db, struct arena *a, const char *name, int64_t *id,
    struct gp_error *err) __attribute__((warn_unused_result));

/* One node the pusher must push to (outbox_claim). */
struct outbox_push {
	int64_t node_id;
	int attempts;
	const char *callback_url;
	const char *push_secret; /* arena memory flagged sensitive by the caller */
};

/* Claim up to limit due outbox rows for lease_s seconds; one entry per node. */
int db_outbox_claim(struct db *db, struct arena *a, int limit, int lease_s,
    struct outbox_push **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

/* A push of generation was accepted by the node's agent. */
int db_outbox_done(struct db *db, int64_t node_id, int64_t generation, struct gp_error *err)
    __attribute__((warn_unused_result));

/* A push failed: retry after delay_ms, or give up (*gave_up) after max attempts. */
int db_outbox_retry(struct db *db, int64_t node_id, int attempts, int max, int delay_ms,
    const char *error, bool *gave_up, struct gp_error *err) __attribute__((warn_unused_result));

/* ---- telemetry (migration 0011) ---- */

/*
 * A batch's distinct (gpu_uuid, device_uuid) pairs (device_uuid NULL: the
 * GPU itself), and what db_metric_resolve() found of each.
 */
enum metric_verdict_kind {
	METRIC_OK,             /* the node's GPU, and the GPU or an instance gpupool knows on it */
	METRIC_FOREIGN,        /* another node's GPU or device: the whole batch is refused */
	METRIC_UNKNOWN_DEVICE, /* a device gpupool does not know on the node's GPU: dropped alone */
};
struct metric_pair {
	const char *gpu_uuid;
	const char *device_uuid;
	int64_t gpu_id;              /* out: the node's GPU, 0 when not the node's */
	const char *gpu_uuid_stored; /* out: its UUID as stored */
	enum metric_verdict_kind verdict;
	const char *field; /* out: gpu_uuid or device_uuid, when not METRIC_OK */
};

/*
 * Resolve n pairs of node_id's batch in one statement (metric_check()),
 * given as pairs_json too ([{"i","gpu_uuid","device_uuid"}], i from 1);
 * *lo_us, *hi_us: the partitions' window a sample must fall in (retention
 * days back, from midnight UTC, to the end of tomorrow); 0 when n is 0.
 */
int db_metric_resolve(struct db *db, struct arena *a, int64_t node_id, const char *pairs_json,
    struct metric_pair *pairs, int n, int retention_days, int64_t *lo_us, int64_t *hi_us,
    struct gp_error *err) __attribute__((warn_unused_result));

/* A sample's numbers, in the order of the columns after device_uuid. */
enum metric_num {
	METRIC_POWER_W,
	METRIC_SM_ACTIVE,
	METRIC_MEMORY_USED_MIB,
	METRIC_MEMORY_TOTAL_MIB,
	METRIC_TEMPERATURE_C,
	METRIC_ECC_CORRECTED,
	METRIC_ECC_UNCORRECTED,
	METRIC_LAST_XID,
	METRIC_REMAPPED_ROWS,
	METRIC_NUMS
};

/* Whether column k is an integer column (bigint, last_xid integer). */
static inline bool
metric_num_integer(int k)
{
	return k == METRIC_MEMORY_USED_MIB || k == METRIC_MEMORY_TOTAL_MIB ||
	    k == METRIC_ECC_CORRECTED || k == METRIC_ECC_UNCORRECTED || k == METRIC_LAST_XID ||
	    k == METRIC_REMAPPED_ROWS;
}

/* One checked sample, ready to store. */
struct metric_row {
	int64_t ts_us;
	int64_t gpu_id;
	const char *device_uuid; /* the GPU's UUID for the whole GPU */
	double num[METRIC_NUMS];
	bool has[METRIC_NUMS]; /* false: NULL (not reported) */
};

/*
 * Store n checked rows with one COPY FROM STDIN (binary) into
 * gpu_metric_samples, inside the running transaction; *stored how many.
 */
int db_metric_copy(struct db *db, struct arena *a, const struct metric_row *rows, int n,
    int64_t *stored, struct gp_error *err) __attribute__((warn_unused_result));

/* Partitions: create ahead, drop past retention; *dropped. */
int db_metric_partitions(struct db *db, int retention_days, int days_ahead, int64_t *dropped,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Recompute the hourly roll-ups from the watermark less settle_s to the
 * last complete hour, max_hours past the watermark at most; *rows, *more
 * (call again: a backlog).
 */
int db_metric_rollup(struct db *db, double idle_threshold, int settle_s, int max_hours,
    int64_t *rows, bool *more, struct gp_error *err) __attribute__((warn_unused_result));

/* Retention (days, 0: kept): delivered outbox rows, resolved alerts, ended profiles. */
int db_agent_plane_prune(struct db *db, int outbox_days, int alerts_days, int profiles_days,
    int limit, int64_t *deleted, struct gp_error *err) __attribute__((warn_unused_result));

/* Idle alerts: raise and resolve; *idle allocations now idle. */
int db_alerts_idle(struct db *db, int after_s, double threshold, int64_t *idle,
    struct gp_error *err) __attribute__((warn_unused_result));

/* A GPU's series between from and to: raw (step 0) or averaged per step
 * seconds (hourly roll-ups when step is a multiple of 3600), as JSON. */
int db_gpu_metrics(struct db *db, struct arena *a, const char *gpu_uuid, int64_t from_us,
    int64_t to_us, int step_s, int max_points, bool *found, const char **json, struct gp_error *err)
    __attribute__((warn_unused_result));

struct alert_filter {
	int64_t user_id;     /* 0: every alert (staff); else only those of the user's projects */
	const char *type;    /* NULL: any */
	const char *state;   /* "open" (default), "resolved" or "all" */
	const char *project; /* NULL: any */
	const char *node;    /* NULL: any */
	int64_t after_id;
	int limit;
};

/* Alerts as a JSON array (newest first by id), *next the cursor or 0. */
int db_alerts_list(struct db *db, struct arena *a, const struct alert_filter *f, const char **json,
    int64_t *next, struct gp_error *err) __attribute__((warn_unused_result));

/* One alert as the user may see it (user_id 0: staff); *json NULL when not,
 * *project_owner whether the user owns its project. */
int db_alert_get(struct db *db, struct arena *a, int64_t id, int64_t user_id, const char **json,
    bool *project_owner, struct gp_error *err) __attribute__((warn_unused_result));

/* Acknowledge alert id by user_id; the alert as JSON. */
int db_alert_ack(struct db *db, struct arena *a, int64_t id, int64_t user_id, const char **json,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Open alerts per type as JSON object {"type": n} (the /metrics gauge). */
int db_alerts_active(struct db *db, struct arena *a, const char **json, struct gp_error *err)
    __attribute__((warn_unused_result));

struct profile_filter {
	int64_t user_id; /* 0: all (staff); else only the user's projects */
	const char *project, *node, *pool;
	bool current; /* only workloads still seen */
	int64_t after_id;
	int limit;
};

/* Workload profiles as a JSON array, *next the cursor or 0. */
int db_profiles_list(struct db *db, struct arena *a, const struct profile_filter *f,
    const char **json, int64_t *next, struct gp_error *err) __attribute__((warn_unused_result));

/* The shared secret `name` (migration 0014): candidate is stored when none
 * exists yet; *out (hex, 2*len+1 bytes, sensitive) gets the one every replica uses. */
int db_server_key(struct db *db, const char *name, const unsigned char *candidate, size_t len,
    char *out, size_t outlen, struct gp_error *err) __attribute__((warn_unused_result));

#endif
