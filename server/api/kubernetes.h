/*
 * kubernetes.h - the objects a Kubernetes cluster must hold so that a
 * project's pods get exactly its pools' devices (docs/kubernetes.md):
 * GET /v1/clusters/{cluster}/kubernetes and
 * GET /v1/projects/{project}/kubernetes.
 */
#ifndef GP_API_KUBERNETES_H
#define GP_API_KUBERNETES_H

#include "api.h"

int api_cluster_kubernetes(struct request *req, struct response *res, struct gp_error *err);
int api_project_kubernetes(struct request *req, struct response *res, struct gp_error *err);
/* PUT /v1/clusters/{cluster}/kubernetes/workloads: gpupool-k8s' ResourceClaim read-back. */
int api_cluster_k8s_workloads(struct request *req, struct response *res, struct gp_error *err);

#endif
