/*
 * sync.c - server-side apply and pruning of a gpupool List (sync.h).
 * Paths follow the Kubernetes API conventions: /api/v1/... for the core
 * group, /apis/<group>/<version>/... otherwise, namespaced resources under
 * namespaces/<ns>/.
 */
#include "sync.h"

#include <stdio.h>
#include <string.h>

#include "core/log.h"

#define MANAGED_SELECTOR "app.kubernetes.io%2Fmanaged-by%3Dgpupool"
#define APPLY_QUERY "?fieldManager=gpupool&force=true"

struct kind {
	const char *api_version, *kind, *plural;
	bool namespaced;
	bool prune;    /* deleted when no longer listed */
	bool optional; /* a cluster may not serve it (404 on list: nothing to prune) */
};

static const struct kind kinds[] = {
	{ "v1", "Namespace", "namespaces", false, false, false },
	{ "v1", "ResourceQuota", "resourcequotas", true, true, false },
	{ "resource.k8s.io/v1", "DeviceClass", "deviceclasses", false, true, false },
	{ "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy",
	    "validatingadmissionpolicies", false, true, false },
	{ "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding",
	    "validatingadmissionpolicybindings", false, true, false },
	{ "resource.k8s.io/v1alpha3", "DeviceTaintRule", "devicetaintrules", false, true, true },
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

static const char *
str_at(struct json_object *o, const char *a, const char *b)
{
	struct json_object *v;

	if (o == NULL || !json_object_object_get_ex(o, a, &v))
		return NULL;
	if (b != NULL && !json_object_object_get_ex(v, b, &v))
		return NULL;
	return json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static const struct kind *
kind_of(struct json_object *obj)
{
	const char *av = str_at(obj, "apiVersion", NULL), *k = str_at(obj, "kind", NULL);

	for (size_t i = 0; av != NULL && k != NULL && i < NKINDS; i++)
		if (strcmp(kinds[i].api_version, av) == 0 && strcmp(kinds[i].kind, k) == 0)
			return &kinds[i];
	return NULL;
}

/* The collection of kind: /api/v1/<plural>, or in namespace ns when not NULL. */
static int
collection(const struct kind *k, const char *ns, char *out, size_t outlen)
{
	int n;

	if (strchr(k->api_version, '/') == NULL)
		n = snprintf(out, outlen, "/api/%s%s%s/%s", k->api_version,
		    ns != NULL ? "/namespaces/" : "", ns != NULL ? ns : "", k->plural);
	else
		n = snprintf(out, outlen, "/apis/%s%s%s/%s", k->api_version,
		    ns != NULL ? "/namespaces/" : "", ns != NULL ? ns : "", k->plural);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

/* A DNS name as Kubernetes takes it: nothing that would leave its path segment. */
static bool
name_ok(const char *s)
{
	if (s == NULL || s[0] == '\0' || strlen(s) > 253)
		return false;
	for (const char *c = s; *c != '\0'; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '-' ||
			*c == '.'))
			return false;
	return true;
}

int
sync_object_path(struct json_object *obj, char *out, size_t outlen)
{
	const struct kind *k = kind_of(obj);
	const char *name = str_at(obj, "metadata", "name"),
		   *ns = str_at(obj, "metadata", "namespace");
	size_t n;

	out[0] = '\0';
	if (k == NULL || !name_ok(name) || (k->namespaced != (ns != NULL)) ||
	    (ns != NULL && !name_ok(ns)))
		return -1;
	if (collection(k, ns, out, outlen) < 0)
		return -1;
	n = strlen(out);
	if (snprintf(out + n, outlen - n, "/%s", name) >= (int)(outlen - n))
		return -1;
	return 0;
}

static void
note_error(struct sync_result *res, const char *what, const char *path, const char *why)
{
	res->failed++;
	/* a long path or message is cut: its start says enough for a log line */
	if (res->first_error[0] == '\0' &&
	    snprintf(res->first_error, sizeof(res->first_error), "%s %s: %s", what, path, why) < 0)
		res->first_error[0] = '\0';
}

/* True when list holds an object of kind k named name (in ns). */
static bool
listed(struct json_object *items, const struct kind *k, const char *ns, const char *name)
{
	for (size_t i = 0; i < json_object_array_length(items); i++) {
		struct json_object *o = json_object_array_get_idx(items, i);
		const char *on = str_at(o, "metadata", "name"),
			   *ons = str_at(o, "metadata", "namespace");

		if (kind_of(o) == k && on != NULL && strcmp(on, name) == 0 &&
		    ((ns == NULL && ons == NULL) ||
			(ns != NULL && ons != NULL && strcmp(ns, ons) == 0)))
			return true;
	}
	return false;
}

static void
prune_kind(struct kube *k, const struct kind *kd, struct json_object *items, bool dry_run,
    struct sync_result *res)
{
	char path[1024];
	struct kube_response r;
	struct json_object *found;

	if (collection(kd, NULL, path, sizeof(path)) < 0)
		return;
	strncat(path, "?labelSelector=" MANAGED_SELECTOR, sizeof(path) - strlen(path) - 1);
	if (kube_request(k, "GET", path, NULL, NULL, &r) < 0 || r.status != 200) {
		if (!(kd->optional && r.status == 404))
			note_error(res, "list", path, kube_error_text(&r));
		kube_response_free(&r);
		return;
	}
	if (!json_object_object_get_ex(r.json, "items", &found) ||
	    !json_object_is_type(found, json_type_array)) {
		note_error(res, "list", path, "the answer has no items");
		kube_response_free(&r);
		return;
	}
	for (size_t i = 0; i < json_object_array_length(found); i++) {
		struct json_object *o = json_object_array_get_idx(found, i);
		const char *name = str_at(o, "metadata", "name"),
			   *ns = str_at(o, "metadata", "namespace");
		const char *by = NULL;
		struct json_object *meta, *labels, *v;
		char opath[1024];
		struct kube_response d;

		/* the selector chose it; check the label anyway (never delete what is not ours) */
		if (json_object_object_get_ex(o, "metadata", &meta) &&
		    json_object_object_get_ex(meta, "labels", &labels) &&
		    json_object_object_get_ex(labels, "app.kubernetes.io/managed-by", &v))
			by = json_object_get_string(v);
		if (by == NULL || strcmp(by, "gpupool") != 0 || !name_ok(name) ||
		    (ns != NULL && !name_ok(ns)) || listed(items, kd, ns, name))
			continue;
		if (collection(kd, ns, opath, sizeof(opath)) < 0)
			continue;
		strncat(opath, "/", sizeof(opath) - strlen(opath) - 1);
		strncat(opath, name, sizeof(opath) - strlen(opath) - 1);
		if (dry_run) {
			log_info(NULL, "would delete", "path", opath);
			res->deleted++;
			continue;
		}
		if (kube_request(k, "DELETE", opath, NULL, NULL, &d) < 0 ||
		    (d.status != 200 && d.status != 202 && d.status != 404)) {
			note_error(res, "delete", opath, kube_error_text(&d));
		} else {
			log_info(NULL, "deleted", "path", opath);
			res->deleted++;
		}
		kube_response_free(&d);
	}
	kube_response_free(&r);
}

int
sync_list(struct kube *k, struct json_object *list, bool dry_run, struct sync_result *res)
{
	struct json_object *items;

	memset(res, 0, sizeof(*res));
	if (!json_object_object_get_ex(list, "items", &items) ||
	    !json_object_is_type(items, json_type_array)) {
		note_error(res, "read", "List", "no items");
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(items); i++) {
		struct json_object *o = json_object_array_get_idx(items, i);
		char path[1024], full[1100];
		const char *body;
		struct kube_response r;

		if (sync_object_path(o, path, sizeof(path)) < 0) {
			note_error(res, "apply", "?",
			    "an item of an unknown kind or with a bad name");
			continue;
		}
		snprintf(full, sizeof(full), "%s" APPLY_QUERY, path);
		/*
		 * JSON is YAML: the apply patch is the object as gpupool listed it
		 * (no "\/" escapes, which a YAML 1.1 reader need not know)
		 */
		body = json_object_to_json_string_ext(o,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
		if (dry_run) {
			printf("PATCH %s\n%s\n", full, body);
			res->applied++;
			continue;
		}
		if (kube_request(k, "PATCH", full, "application/apply-patch+yaml", body, &r) < 0 ||
		    (r.status != 200 && r.status != 201)) {
			note_error(res, "apply", path, kube_error_text(&r));
		} else {
			res->applied++;
		}
		kube_response_free(&r);
	}
	if (res->failed > 0)
		return -1;
	if (k == NULL) /* --dry-run without an API: nothing to list */
		return 0;
	for (size_t i = 0; i < NKINDS; i++)
		if (kinds[i].prune)
			prune_kind(k, &kinds[i], items, dry_run, res);
	return res->failed > 0 ? -1 : 0;
}
