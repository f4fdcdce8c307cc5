/*
 * sync.h - make a Kubernetes cluster hold a gpupool List (gpupool-k8s):
 * server-side apply of every listed object (field manager "gpupool",
 * force), then the deletion of every object of a managed kind labelled
 * app.kubernetes.io/managed-by=gpupool that the List no longer holds.
 * Namespaces are applied (their gpupool.io/project label) but never
 * deleted: deleting one would delete every workload in it.
 */
#ifndef GP_K8S_SYNC_H
#define GP_K8S_SYNC_H

#include <json-c/json.h>
#include <stdbool.h>

#include "kube.h"

struct sync_result {
	int applied, deleted, failed;
	char first_error[512];
};

/* The REST path of obj ("" on an unknown kind, then -1). */
int sync_object_path(struct json_object *obj, char *out, size_t outlen)
    __attribute__((warn_unused_result));

/*
 * Apply every item of list (a gpupool List) and delete what is managed and
 * unlisted. Deletion runs only when every apply succeeded (a half-applied
 * List never prunes). Returns 0 when everything succeeded, -1 otherwise.
 */
int sync_list(struct kube *k, struct json_object *list, bool dry_run, struct sync_result *res)
    __attribute__((warn_unused_result));

#endif
