/*
 * kube.h - requests to the Kubernetes API for gpupool-k8s (libcurl): the
 * server, CA and credentials of a struct kube_auth; the bearer token file
 * is read again before each request (projected ServiceAccount tokens
 * rotate, the kubelet rewrites the file).
 */
#ifndef GP_K8S_KUBE_H
#define GP_K8S_KUBE_H

#include <json-c/json.h>
#include <stdbool.h>

#include "kubeconfig.h"

struct kube;

struct kube_response {
	long status; /* 0: no answer (error[] says why) */
	char *body;  /* malloc'd, NUL-terminated */
	struct json_object *json;
	char error[640];
};

struct kube *kube_create(const struct kube_auth *auth, char *why, size_t whylen);
void kube_destroy(struct kube *k);

/* A request in flight is given up within about a second of *flag turning true. */
void kube_set_abort_flag(struct kube *k, const volatile bool *flag);

/*
 * method path (with its query) and an optional body of content_type.
 * Returns 0 when an answer arrived (any status), -1 otherwise; out is
 * always set and freed with kube_response_free.
 */
int kube_request(struct kube *k, const char *method, const char *path, const char *content_type,
    const char *body, struct kube_response *out);
void kube_response_free(struct kube_response *r);

/* The Status object's message of an error answer, or the transport error. */
const char *kube_error_text(const struct kube_response *r);

#endif
