/*
 * kubeconfig.h - where gpupool-k8s finds the Kubernetes API and how it
 * authenticates: in-cluster (a ServiceAccount's token and CA files,
 * KUBERNETES_SERVICE_HOST/PORT) or a kubeconfig file's current context
 * (server, CA, and a bearer token, a token file or a client certificate).
 *
 * The kubeconfig reader takes JSON, or the YAML subset that kubeconfigs
 * are written in (block mappings and sequences, plain and quoted scalars,
 * comments, empty flow collections "{}" and "[]"); anchors, multi-line
 * scalars and flow collections with members are refused, never guessed.
 * exec and auth-provider users are refused (docs/kubernetes.md).
 */
#ifndef GP_K8S_KUBECONFIG_H
#define GP_K8S_KUBECONFIG_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

struct kube_auth {
	char server[512];     /* https://host:port, no trailing slash */
	char ca_file[512];    /* "" when none (or ca_data) */
	char *ca_data;        /* PEM (decoded certificate-authority-data), malloc'd */
	char token[8192];     /* a bearer token given inline */
	char token_file[512]; /* re-read before each request: projected tokens rotate */
	char cert_file[512], key_file[512];
	char *cert_data, *key_data; /* PEM, malloc'd */
	bool insecure;              /* insecure-skip-tls-verify: true */
};

/* Parse the YAML subset (or JSON) into a json-c tree; NULL with why[] set. */
struct json_object *kube_yaml_parse(const char *text, char *why, size_t whylen);

/* Fill a from a kubeconfig file (its current-context, or context when not NULL). */
int kube_auth_from_kubeconfig(struct kube_auth *a, const char *path, const char *context, char *why,
    size_t whylen) __attribute__((warn_unused_result));

/*
 * Fill a for a pod: the token and CA of the ServiceAccount under dir
 * (NULL: /var/run/secrets/kubernetes.io/serviceaccount) and the API at
 * https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT.
 */
int kube_auth_in_cluster(struct kube_auth *a, const char *dir, char *why, size_t whylen)
    __attribute__((warn_unused_result));

void kube_auth_free(struct kube_auth *a);

#endif
