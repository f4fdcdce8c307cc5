/*
 * report.h - JSON documents the agent sends: the GPUs of enroll and
 * status, metric samples, profiles (docs/agent.md, "Protocol").
 */
#ifndef GP_AGENT_REPORT_H
#define GP_AGENT_REPORT_H

#include <json-c/json.h>

#include "backend.h"

/* unix seconds as the API's RFC 3339 UTC string ("2026-01-31T12:00:00Z"). */
struct json_object *report_time(long long unix_s);
/* unix milliseconds the same way, with milliseconds when not whole. */
struct json_object *report_time_ms(long long unix_ms);

/* The "gpus" array of POST /v1/agent/enroll. */
struct json_object *report_enroll_gpus(const struct ag_node *node);

/* "ok", "unknown" or "lost". */
const char *report_gpu_state(enum ag_gpu_state s);

/* One xid_events[] entry ({"xid","ts"} and "count" when above 1). */
struct json_object *report_xid(const struct ag_xid *x);

/* The "gpus" array of PUT /v1/agent/status (health, XIDs, instances; a
 * GPU not ok carries "state" and "error", no instances). */
struct json_object *report_status_gpus(const struct ag_node *node);

/* Append one metric sample per GPU read in this scan (none for a lost or
 * stale one) to samples, stamped ts_ms (unix milliseconds). */
void report_samples(const struct ag_node *node, long long ts_ms, struct json_object *samples);

/* The whole node as one JSON object (gpupool-agent --discover). */
struct json_object *report_discovery(const struct ag_node *node);

#endif
