/*
 * dcgm.h - a parser of dcgm-exporter's Prometheus text exposition: the
 * workloads (pod, namespace, container labels, which dcgm-exporter adds
 * from the kubelet's pod-resources API) and telemetry per GPU or MIG
 * device (UUID + GPU_I_ID labels).
 */
#ifndef GP_AGENT_DCGM_H
#define GP_AGENT_DCGM_H

#include "backend.h"

#define DCGM_MAX_DEVICES 64
#define DCGM_MAX_PODS 8

struct dcgm_pod {
	char ns[128];
	char pod[256];
	char container[128];
};

struct dcgm_device {
	char gpu_uuid[AG_UUID_MAX]; /* the UUID label: the parent GPU's */
	int gi_id;                  /* GPU_I_ID, -1 for a whole GPU */
	char gi_profile[32];        /* GPU_I_PROFILE, "" when absent */
	/* telemetry, < 0 when absent */
	double power_w, sm_active, temperature_c, fb_used_mib, fb_free_mib, last_xid;
	double ecc_corrected, ecc_uncorrected;
	struct dcgm_pod pods[DCGM_MAX_PODS];
	int npods;
};

/* Parse text; returns the number of devices (>= 0), -1 on a malformed line. */
int dcgm_parse(const char *text, struct dcgm_device *out, int max, char *err, size_t errlen);

/* The MIG device UUID of (gpu_uuid, gi_id) in node, or the GPU's own UUID
 * for gi_id -1; NULL when node has no such device. */
const char *dcgm_device_uuid(const struct ag_node *node, const char *gpu_uuid, int gi_id);

#endif
