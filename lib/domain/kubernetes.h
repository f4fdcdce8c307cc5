/*
 * kubernetes.h - the pure parts of gpupool's Kubernetes objects
 * (docs/kubernetes.md): DeviceClass names, the CEL selectors that admit
 * exactly a pool's devices, split so that no expression passes the API
 * server's limit, and a block-style YAML writer for the List. No I/O.
 */
#ifndef GP_DOMAIN_KUBERNETES_H
#define GP_DOMAIN_KUBERNETES_H

#include <stdbool.h>
#include <stddef.h>

#include "core/arena.h"
#include "core/strbuf.h"

struct json_object;

/* The NVIDIA DRA driver's name, also the domain of its device attributes. */
#define K8S_DRIVER "gpu.nvidia.com"

/*
 * The API server's limit on one DeviceClass CEL expression, in bytes
 * (resource.k8s.io/v1 CELSelectorExpressionMaxLength, 10 KiB).
 */
#define K8S_CEL_MAX 10240

/* The longest device UUID gpupool lists (MIG-GPU-<uuid>/<gi>/<ci> is 56). */
#define K8S_UUID_MAX 128

/* The prefix every gpupool DeviceClass name starts with (reserved). */
#define K8S_CLASS_PREFIX "gpupool."

/*
 * True when uuid may appear in a selector: 1..K8S_UUID_MAX bytes of
 * [A-Za-z0-9-/] (GPU-…, MIG-…, MIG-GPU-…/gi/ci), so that it never needs
 * escaping inside a CEL string literal.
 */
bool k8s_uuid_ok(const char *uuid);

/*
 * The name of a pool's DeviceClass: chunk 0 is "gpupool.<project>.<pool>",
 * chunk i > 0 "gpupool.<project>.<pool>.<i+1>". Project and pool names are
 * DNS labels (no dots, at most 63 bytes), so the dots make the name
 * unambiguous (no two (project, pool, chunk) give one name) and it is a
 * DNS-1123 subdomain of at most 8 + 63 + 1 + 63 + 1 + 10 bytes: no hash
 * is ever needed, and "<name>.deviceclass.resource.k8s.io" stays a valid
 * quota resource prefix (at most 253 bytes).
 */
const char *k8s_class_name(struct arena *a, const char *project, const char *pool, int chunk);

/* True when s is a DNS-1123 subdomain (1..253 bytes, dot-separated labels). */
bool k8s_dns_subdomain(const char *s);

/*
 * The CEL selector admitting exactly the devices uuids[0..n) of the
 * driver (n may be 0: it then admits nothing):
 *   device.driver == 'gpu.nvidia.com' &&
 *   device.attributes['gpu.nvidia.com'].type in ['gpu', 'mig'] &&
 *   device.attributes['gpu.nvidia.com'].uuid in ['GPU-…', 'MIG-…']
 * Every uuid must satisfy k8s_uuid_ok.
 */
const char *k8s_selector(struct arena *a, const char *const *uuids,
    int n); /* NULL: never (sized first) */

/* strlen(k8s_selector(uuids, n)), without building it. */
size_t k8s_selector_len(const char *const *uuids, int n);

/*
 * Split uuids[0..n) (in order) into consecutive runs whose selectors are
 * each at most max bytes: starts[i] is the first index of run i, and the
 * count of runs is returned (at least 1: n == 0 gives one empty run).
 * -1 when a single uuid does not fit or more than max_runs are needed.
 */
int k8s_selector_split(const char *const *uuids, int n, size_t max, int *starts, int max_runs);

/*
 * Write v as block-style YAML 1.2 (also valid YAML 1.1): mappings one
 * key per line, sequences "- " items, every string double-quoted with
 * JSON's escapes (so "true", "1" and "no" stay strings), keys plain only
 * when they cannot be read as anything but that string.
 */
void k8s_yaml(struct strbuf *b, struct json_object *v);

#endif
