/*
 * db_kubernetes.h - what a cluster's (or a project's) Kubernetes objects
 * are made of (docs/kubernetes.md): the live pools and the devices they
 * hold now, read in one statement so that the List is one snapshot.
 */
#ifndef GP_DB_KUBERNETES_H
#define GP_DB_KUBERNETES_H

#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "db.h"

/*
 * One device of a pool, or (device_uuid NULL) a pool without a live
 * device. Rows come by project name, pool name, pool id, device UUID
 * (bytewise), one pool's rows together.
 */
struct k8s_device_row {
	int64_t pool_id;
	int64_t project_id;
	const char *project;
	const char *pool;
	const char *device_uuid;     /* NULL: the pool has no live device here */
	const char *namespaces_json; /* the project's namespaces, a sorted JSON array */
};

/*
 * The pools of cluster_id (0: every cluster) and project_id (0: every
 * project) that are provisioning, active or degraded and hold an
 * allocation there that is not released, each with its live devices: an
 * allocation that is ready on a GPU that has not failed, by the MIG
 * device's UUID the agent reported (a whole GPU's own UUID).
 */
int db_k8s_devices(struct db *db, struct arena *a, int64_t cluster_id, int64_t project_id,
    struct k8s_device_row **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

/* A failed GPU: its UUID and its allocations' device UUIDs (not released). */
struct k8s_failed_gpu {
	const char *uuid;
	const char *devices_json; /* a JSON array of MIG device UUIDs, bytewise order */
};

/* cluster_id's failed GPUs, by UUID bytewise (*n of them). */
int db_k8s_failed_gpus(struct db *db, struct arena *a, int64_t cluster_id,
    struct k8s_failed_gpu **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * gpupool-k8s' report of the workloads Kubernetes allocated devices to in
 * cluster_id (json: [{"device_uuid","namespace","pod","container"}]): each
 * node of the cluster gets its share as source "kubernetes" rows of
 * workload_profiles, then its isolation check. *bad is the index of the
 * first device that is not of the cluster (then nothing is stored), else
 * -1; *violations the isolation violations now on the cluster's nodes.
 */
int db_k8s_workloads(struct db *db, struct arena *a, int64_t cluster_id, const char *json, int *bad,
    int64_t *violations, struct gp_error *err) __attribute__((warn_unused_result));

#endif
