/*
 * claims.c - ResourceClaim allocations as workload profiles (claims.h).
 */
#include "claims.h"

#include <stdio.h>
#include <string.h>

#define CLASS_PREFIX "gpupool."

static struct json_object *
at(struct json_object *o, const char *key)
{
	struct json_object *v;

	return o != NULL && json_object_object_get_ex(o, key, &v) ? v : NULL;
}

static const char *
str(struct json_object *o, const char *key)
{
	struct json_object *v = at(o, key);

	return v != NULL && json_object_is_type(v, json_type_string) ? json_object_get_string(v)
								     : NULL;
}

static size_t
len(struct json_object *a)
{
	return a != NULL && json_object_is_type(a, json_type_array) ? json_object_array_length(a)
								    : 0;
}

/* The device's UUID from the slices: driver, pool and device name match. */
static const char *
device_uuid(struct json_object *slices, const char *driver, const char *pool, const char *device)
{
	struct json_object *items = at(slices, "items");

	for (size_t i = 0; i < len(items); i++) {
		struct json_object *spec = at(json_object_array_get_idx(items, i), "spec");
		struct json_object *devs = at(spec, "devices");
		const char *d = str(spec, "driver"), *p = str(at(spec, "pool"), "name");

		if (d == NULL || p == NULL || strcmp(d, driver) != 0 || strcmp(p, pool) != 0)
			continue;
		for (size_t j = 0; j < len(devs); j++) {
			struct json_object *dev = json_object_array_get_idx(devs, j), *attrs, *u;
			const char *n = str(dev, "name");

			if (n == NULL || strcmp(n, device) != 0)
				continue;
			attrs = at(dev, "attributes");
			/* an unqualified name is the driver's own (driver/uuid) */
			u = at(attrs, "uuid");
			if (u == NULL) {
				char q[300];

				snprintf(q, sizeof(q), "%s/uuid", driver);
				u = at(attrs, q);
			}
			return str(u, "string");
		}
	}
	return NULL;
}

/* The class the claim's request (or "request/subrequest") names, or NULL. */
static const char *
request_class(struct json_object *claim, const char *request)
{
	struct json_object *reqs = at(at(at(claim, "spec"), "devices"), "requests");
	const char *slash = strchr(request, '/');
	size_t n = slash != NULL ? (size_t)(slash - request) : strlen(request);

	for (size_t i = 0; i < len(reqs); i++) {
		struct json_object *r = json_object_array_get_idx(reqs, i), *subs;
		const char *name = str(r, "name");

		if (name == NULL || strlen(name) != n || strncmp(name, request, n) != 0)
			continue;
		if (slash == NULL)
			return str(at(r, "exactly"), "deviceClassName");
		subs = at(r, "firstAvailable");
		for (size_t j = 0; j < len(subs); j++) {
			struct json_object *s = json_object_array_get_idx(subs, j);
			const char *sn = str(s, "name");

			if (sn != NULL && strcmp(sn, slash + 1) == 0)
				return str(s, "deviceClassName");
		}
	}
	return NULL;
}

struct json_object *
claims_profiles_from(struct json_object *slices, struct json_object *claims,
    struct claims_result *res)
{
	struct json_object *out = json_object_new_array(), *items = at(claims, "items");

	for (size_t i = 0; i < len(items); i++) {
		struct json_object *c = json_object_array_get_idx(items, i);
		struct json_object *status = at(c, "status");
		struct json_object *results =
		    at(at(at(status, "allocation"), "devices"), "results");
		struct json_object *reserved = at(status, "reservedFor");
		const char *ns = str(at(c, "metadata"), "namespace");
		bool counted = false;

		if (ns == NULL)
			continue;
		for (size_t j = 0; j < len(results); j++) {
			struct json_object *r = json_object_array_get_idx(results, j);
			const char *req = str(r, "request"), *drv = str(r, "driver"),
				   *pool = str(r, "pool"), *dev = str(r, "device"), *cls, *uuid;

			if (req == NULL || drv == NULL || pool == NULL || dev == NULL)
				continue;
			cls = request_class(c, req);
			if (cls == NULL || strncmp(cls, CLASS_PREFIX, strlen(CLASS_PREFIX)) != 0)
				continue; /* not a gpupool class: not gpupool's to report */
			if (!counted) {
				res->claims++;
				counted = true;
			}
			uuid = device_uuid(slices, drv, pool, dev);
			if (uuid == NULL) {
				res->unmapped++;
				continue;
			}
			for (size_t k = 0; k < len(reserved); k++) {
				struct json_object *who = json_object_array_get_idx(reserved, k),
						   *p;
				const char *resource = str(who, "resource"),
					   *group = str(who, "apiGroup");
				const char *pod = str(who, "name");

				if (resource == NULL || strcmp(resource, "pods") != 0 ||
				    pod == NULL || (group != NULL && group[0] != '\0'))
					continue;
				p = json_object_new_object();
				json_object_object_add(p, "device_uuid",
				    json_object_new_string(uuid));
				json_object_object_add(p, "namespace", json_object_new_string(ns));
				json_object_object_add(p, "pod", json_object_new_string(pod));
				json_object_array_add(out, p);
				res->profiles++;
			}
		}
	}
	return out;
}

static struct json_object *
list(struct kube *k, const char *path, struct claims_result *res)
{
	struct kube_response r;
	struct json_object *o;

	if (kube_request(k, "GET", path, NULL, NULL, &r) < 0 || r.status != 200 || r.json == NULL) {
		snprintf(res->error, sizeof(res->error), "GET %s: %ld %s", path, r.status,
		    kube_error_text(&r));
		kube_response_free(&r);
		return NULL;
	}
	o = json_object_get(r.json);
	kube_response_free(&r);
	return o;
}

struct json_object *
claims_profiles(struct kube *k, struct claims_result *res)
{
	struct json_object *slices, *claims, *out;

	memset(res, 0, sizeof(*res));
	slices = list(k, "/apis/resource.k8s.io/v1/resourceslices", res);
	if (slices == NULL)
		return NULL;
	claims = list(k, "/apis/resource.k8s.io/v1/resourceclaims", res);
	if (claims == NULL) {
		json_object_put(slices);
		return NULL;
	}
	out = claims_profiles_from(slices, claims, res);
	json_object_put(slices);
	json_object_put(claims);
	return out;
}
