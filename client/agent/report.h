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

/* The "gpus" array of POST /v1/agent/enroll. */
struct json_object *report_enroll_gpus(const struct ag_node *node);

/* The "gpus" array of PUT /v1/agent/status (health, XIDs, instances). */
struct json_object *report_status_gpus(const struct ag_node *node);

/* Append one metric sample per GPU (and per MIG instance) to samples. */
void report_samples(const struct ag_node *node, long long ts, struct json_object *samples);

/* The whole node as one JSON object (gpupool-agent --discover). */
struct json_object *report_discovery(const struct ag_node *node);

#endif
