/*
 * claims.h - what the Kubernetes scheduler allocated (gpupool-k8s): every
 * ResourceClaim that requests a gpupool DeviceClass and has an allocation
 * (status.allocation.devices.results[]: driver, pool, device name) and pods
 * (status.reservedFor), mapped to device UUIDs through the ResourceSlices
 * (the device's "uuid" attribute, as NVIDIA's DRA driver publishes it), as
 * workload profiles: [{"device_uuid","namespace","pod"}].
 */
#ifndef GP_K8S_CLAIMS_H
#define GP_K8S_CLAIMS_H

#include <json-c/json.h>

#include "kube.h"

struct claims_result {
	int claims;   /* claims of gpupool classes with an allocation */
	int profiles; /* pod <-> device pairs */
	int unmapped; /* results whose device no ResourceSlice names (or without a uuid) */
	char error[512];
};

/*
 * The profiles array (caller owns it) from the API, or NULL with
 * res->error set when a list failed.
 */
struct json_object *claims_profiles(struct kube *k, struct claims_result *res);

/* The same from a ResourceSliceList and a ResourceClaimList (unit tests). */
struct json_object *claims_profiles_from(struct json_object *slices, struct json_object *claims,
    struct claims_result *res);

#endif
