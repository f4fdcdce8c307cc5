/*
 * kubernetes.c - a cluster's or a project's Kubernetes objects as a
 * Kubernetes List (JSON, or YAML for Accept: application/yaml): per live
 * pool its DeviceClass(es), per project namespace the Namespace (with its
 * gpupool.io/project label) and a ResourceQuota, and the one
 * ValidatingAdmissionPolicy and its binding. docs/kubernetes.md explains
 * each object; domain/kubernetes.c names them and writes the selectors.
 */
#include "kubernetes.h"
#include "dispatch.h"
#include "projects.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "core/timeutil.h"
#include "db/db_capacity.h"
#include "db/db_kubernetes.h"
#include "db/db_projects.h"
#include "domain/kubernetes.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define MANAGED_BY "app.kubernetes.io/managed-by"
#define LABEL_PROJECT "gpupool.io/project"
#define POLICY_NAME "gpupool-device-classes"
#define QUOTA_NAME "gpupool-devices"
/* the NVIDIA DRA driver's own classes, which tenants may never name */
static const char *const driver_classes[] = { "gpu.nvidia.com", "mig.nvidia.com", NULL };

/* One pool's class (a pool has one per K8S_CEL_MAX of selector). */
struct k8s_class {
	const char *name;
	int64_t pool_id;
	int64_t project_id;
	int devices;
};

static struct json_object *
labels(const char *project)
{
	struct json_object *l = json_object_new_object();

	json_add_str(l, MANAGED_BY, "gpupool");
	if (project != NULL)
		json_add_str(l, LABEL_PROJECT, project);
	return l;
}

static struct json_object *
object(const char *api_version, const char *kind, const char *name, const char *ns,
    struct json_object *lab, struct json_object *annotations)
{
	struct json_object *o = json_object_new_object(), *m = json_object_new_object();

	json_add_str(o, "apiVersion", api_version);
	json_add_str(o, "kind", kind);
	json_add_str(m, "name", name);
	if (ns != NULL)
		json_add_str(m, "namespace", ns);
	json_object_object_add(m, "labels", lab);
	if (annotations != NULL)
		json_object_object_add(m, "annotations", annotations);
	json_object_object_add(o, "metadata", m);
	return o;
}

static struct json_object *
str_array(const char *const *v)
{
	struct json_object *a = json_object_new_array();

	for (int i = 0; v[i] != NULL; i++)
		json_object_array_add(a, json_object_new_string(v[i]));
	return a;
}

/* The DeviceClasses of one pool: rows[from..to) are its rows. */
static void
pool_classes(struct request *req, struct json_object *items, const struct k8s_device_row *rows,
    int from, int to, struct k8s_class **classes, int *nclasses, int *cap)
{
	struct arena *a = req->arena;
	const char **uuids = arena_alloc(a, sizeof(*uuids) * (size_t)(to - from + 1));
	int n = 0, *starts, runs;

	for (int i = from; i < to; i++) {
		if (rows[i].device_uuid == NULL)
			continue;
		if (!k8s_uuid_ok(rows[i].device_uuid)) {
			/* never put it in CEL; the pool's class then lacks it */
			log_warn(req->request_id, "device UUID not listed for Kubernetes",
			    "pool_id", arena_printf(a, "%lld", (long long)rows[i].pool_id),
			    "device_uuid", rows[i].device_uuid);
			continue;
		}
		uuids[n++] = rows[i].device_uuid;
	}
	starts = arena_alloc(a, sizeof(*starts) * (size_t)(n + 1));
	/* every uuid passed k8s_uuid_ok (<= 128 bytes), so the split cannot fail */
	runs = k8s_selector_split(uuids, n, K8S_CEL_MAX, starts, n + 1);
	for (int r = 0; r < runs; r++) {
		int s = starts[r], e = r + 1 < runs ? starts[r + 1] : n;
		struct json_object *lab = labels(rows[from].project), *ann, *spec, *sels, *sel,
				   *cel;
		struct k8s_class *c;

		if (*nclasses == *cap) {
			struct k8s_class *grown;

			*cap *= 2;
			grown = arena_alloc(a, sizeof(*grown) * (size_t)*cap);
			memcpy(grown, *classes, sizeof(*grown) * (size_t)*nclasses);
			*classes = grown;
		}
		c = &(*classes)[(*nclasses)++];
		c->name = k8s_class_name(a, rows[from].project, rows[from].pool, r);
		c->pool_id = rows[from].pool_id;
		c->project_id = rows[from].project_id;
		c->devices = e - s;
		json_add_str(lab, "gpupool.io/pool", rows[from].pool);
		json_add_str(lab, "gpupool.io/pool-id",
		    arena_printf(a, "%lld", (long long)rows[from].pool_id));
		ann = json_object_new_object();
		json_add_str(ann, "gpupool.io/devices", arena_printf(a, "%d", e - s));
		json_add_str(ann, "gpupool.io/class-part", arena_printf(a, "%d/%d", r + 1, runs));
		spec = json_object_new_object();
		sels = json_object_new_array();
		sel = json_object_new_object();
		cel = json_object_new_object();
		json_add_str(cel, "expression", k8s_selector(a, uuids + s, e - s));
		json_object_object_add(sel, "cel", cel);
		json_object_array_add(sels, sel);
		json_object_object_add(spec, "selectors", sels);
		{
			struct json_object *o =
			    object("resource.k8s.io/v1", "DeviceClass", c->name, NULL, lab, ann);

			json_object_object_add(o, "spec", spec);
			json_object_array_add(items, o);
		}
	}
}

/* The class name predicate of the admission policy, for the CEL string expression c. */
static const char *
class_allowed(struct arena *a, const char *c)
{
	return arena_printf(a,
	    "(variables.project != '' ? %s.startsWith('" K8S_CLASS_PREFIX
	    "' + variables.project + '.') : !(%s.startsWith('" K8S_CLASS_PREFIX
	    "') || %s.endsWith('.nvidia.com')))",
	    c, c, c);
}

/* The ValidatingAdmissionPolicy and its binding (the same in every List). */
static void
policy(struct request *req, struct json_object *items)
{
	struct arena *a = req->arena;
	struct json_object *p, *spec, *mc, *rules, *rule, *vars, *v, *vals, *val, *b, *bspec;
	static const char *const groups[] = { "resource.k8s.io", NULL };
	static const char *const versions[] = { "v1", NULL };
	static const char *const ops[] = { "CREATE", "UPDATE", NULL };
	static const char *const resources[] = { "resourceclaims", "resourceclaimtemplates", NULL };
	static const char *const actions[] = { "Deny", NULL };

	spec = json_object_new_object();
	json_add_str(spec, "failurePolicy", "Fail");
	mc = json_object_new_object();
	rules = json_object_new_array();
	rule = json_object_new_object();
	json_object_object_add(rule, "apiGroups", str_array(groups));
	json_object_object_add(rule, "apiVersions", str_array(versions));
	json_object_object_add(rule, "operations", str_array(ops));
	json_object_object_add(rule, "resources", str_array(resources));
	json_object_array_add(rules, rule);
	json_object_object_add(mc, "resourceRules", rules);
	/* a v1beta1/v1beta2 request is converted to v1 before the expressions see it */
	json_add_str(mc, "matchPolicy", "Equivalent");
	json_object_object_add(spec, "matchConstraints", mc);

	vars = json_object_new_array();
	v = json_object_new_object();
	/* claims are namespaced: namespaceObject is never null for them */
	json_add_str(v, "name", "project");
	json_add_str(v, "expression",
	    "has(namespaceObject.metadata.labels) && "
	    "'" LABEL_PROJECT "' in namespaceObject.metadata.labels ? "
	    "namespaceObject.metadata.labels['" LABEL_PROJECT "'] : ''");
	json_object_array_add(vars, v);
	v = json_object_new_object();
	json_add_str(v, "name", "requests");
	json_add_str(v, "expression",
	    "object.kind == 'ResourceClaimTemplate' ? "
	    "(has(object.spec.spec) && has(object.spec.spec.devices) && "
	    "has(object.spec.spec.devices.requests) ? object.spec.spec.devices.requests : []) : "
	    "(has(object.spec.devices) && has(object.spec.devices.requests) ? "
	    "object.spec.devices.requests : [])");
	json_object_array_add(vars, v);
	json_object_object_add(spec, "variables", vars);

	vals = json_object_new_array();
	val = json_object_new_object();
	json_add_str(val, "expression",
	    arena_printf(a,
		"variables.requests.all(r, (!has(r.exactly) || %s) && "
		"(!has(r.firstAvailable) || r.firstAvailable.all(s, %s)))",
		class_allowed(a, "r.exactly.deviceClassName"),
		class_allowed(a, "s.deviceClassName")));
	json_add_str(val, "message",
	    "a namespace labelled " LABEL_PROJECT " may request only the device classes "
	    "gpupool."
	    "<project>.<pool> of that project; other namespaces may request neither "
	    "gpupool's classes nor the NVIDIA driver's own (*.nvidia.com)");
	json_add_str(val, "reason", "Forbidden");
	json_object_array_add(vals, val);
	json_object_object_add(spec, "validations", vals);

	p = object("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", POLICY_NAME,
	    NULL, labels(NULL), NULL);
	json_object_object_add(p, "spec", spec);
	json_object_array_add(items, p);

	bspec = json_object_new_object();
	json_add_str(bspec, "policyName", POLICY_NAME);
	json_object_object_add(bspec, "validationActions", str_array(actions));
	b = object("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding",
	    POLICY_NAME, NULL, labels(NULL), NULL);
	json_object_object_add(b, "spec", bspec);
	json_object_array_add(items, b);
}

/* The namespaces and quotas of one project: classes[from..to) are its classes. */
static void
project_namespaces(struct request *req, struct json_object *items, const char *project,
    const char *namespaces_json, const struct k8s_class *classes, int from, int to,
    struct json_object *quotas)
{
	struct arena *a = req->arena;
	struct json_object *nss = json_own(a, json_tokener_parse(namespaces_json));
	struct strbuf ids;

	strbuf_init(&ids, a, 64);
	for (int i = from; i < to; i++)
		if (i == from || classes[i].pool_id != classes[i - 1].pool_id)
			strbuf_printf(&ids, "%s%lld", ids.len > 0 ? "," : "",
			    (long long)classes[i].pool_id);
	for (size_t k = 0; nss != NULL && k < json_object_array_length(nss); k++) {
		const char *ns = json_object_get_string(json_object_array_get_idx(nss, k));
		struct json_object *ann = json_object_new_object(), *hard, *spec, *q;

		json_add_str(ann, "gpupool.io/pool-ids", ids.p);
		json_object_array_add(items,
		    object("v1", "Namespace", ns, NULL, labels(project), ann));
		hard = json_object_new_object();
		for (int i = from; i < to; i++)
			json_add_str(hard,
			    arena_printf(a, "%s.deviceclass.resource.k8s.io/devices",
				classes[i].name),
			    arena_printf(a, "%d", classes[i].devices));
		for (int i = 0; driver_classes[i] != NULL; i++)
			json_add_str(hard,
			    arena_printf(a, "%s.deviceclass.resource.k8s.io/devices",
				driver_classes[i]),
			    "0");
		spec = json_object_new_object();
		json_object_object_add(spec, "hard", hard);
		ann = json_object_new_object();
		json_add_str(ann, "gpupool.io/pool-ids", ids.p);
		q = object("v1", "ResourceQuota", QUOTA_NAME, ns, labels(project), ann);
		json_object_object_add(q, "spec", spec);
		json_object_array_add(quotas, q);
	}
}

/* True when Accept asks for YAML before (or without) JSON. */
static bool
wants_yaml(struct request *req)
{
	const char *acc = req->header_list(req, "Accept"), *y, *j;
	char *low;

	if (acc == NULL)
		return false;
	low = arena_strdup(req->arena, acc);
	for (char *p = low; *p != '\0'; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	y = strstr(low, "application/yaml");
	j = strstr(low, "application/json");
	return y != NULL && (j == NULL || y < j);
}

/*
 * The List for rows (one project's or a cluster's); project_only names
 * the project whose namespaces are listed even when it has no pool.
 */
/*
 * Per failed GPU a DeviceTaintRule (resource.k8s.io/v1alpha3, Kubernetes
 * 1.34 with the DRADeviceTaints feature gate): NoExecute on the devices
 * whose uuid is the GPU's (the whole GPU, its vfio twin) or one of its MIG
 * devices' (gpupool is the only MIG writer: its allocations name them all),
 * so that pods still holding them are evicted and none is scheduled there.
 */
static void
taint_rules(struct request *req, struct json_object *items, const struct k8s_failed_gpu *gpus,
    int n)
{
	struct arena *a = req->arena;

	for (int i = 0; i < n; i++) {
		const char *u = gpus[i].uuid;
		struct json_object *devs = json_own(a, json_tokener_parse(gpus[i].devices_json));
		struct json_object *lab, *ann, *o, *spec, *dsel, *sels, *sel, *cel, *taint;
		struct strbuf e;
		char *name;

		if (!k8s_uuid_ok(u))
			continue; /* never in CEL */
		strbuf_init(&e, a, 256);
		strbuf_printf(&e, "device.attributes['" K8S_DRIVER "'].uuid in ['%s'", u);
		for (size_t k = 0; devs != NULL && k < json_object_array_length(devs); k++) {
			const char *d = json_object_get_string(json_object_array_get_idx(devs, k));

			if (d != NULL && k8s_uuid_ok(d))
				strbuf_printf(&e, ", '%s'", d);
		}
		strbuf_printf(&e, "]");
		name = arena_printf(a, "gpupool-failed-%s", u);
		for (char *p = name; *p != '\0'; p++)
			if (*p >= 'A' && *p <= 'Z')
				*p = (char)(*p - 'A' + 'a');
		lab = labels(NULL);
		ann = json_object_new_object();
		json_add_str(ann, "gpupool.io/gpu", u);
		o = object("resource.k8s.io/v1alpha3", "DeviceTaintRule", name, NULL, lab, ann);
		spec = json_object_new_object();
		dsel = json_object_new_object();
		json_add_str(dsel, "driver", K8S_DRIVER);
		sels = json_object_new_array();
		sel = json_object_new_object();
		cel = json_object_new_object();
		json_add_str(cel, "expression", e.p);
		json_object_object_add(sel, "cel", cel);
		json_object_array_add(sels, sel);
		json_object_object_add(dsel, "selectors", sels);
		json_object_object_add(spec, "deviceSelector", dsel);
		taint = json_object_new_object();
		json_add_str(taint, "key", "gpupool.io/gpu-failed");
		json_add_str(taint, "value", "true");
		json_add_str(taint, "effect", "NoExecute");
		json_object_object_add(spec, "taint", taint);
		json_object_object_add(o, "spec", spec);
		json_object_array_add(items, o);
	}
}

static void
reply_list(struct request *req, struct response *res, const struct k8s_device_row *rows, int n,
    const char *project_only, const char *project_namespaces_json,
    const struct k8s_failed_gpu *failed, int nfailed)
{
	struct arena *a = req->arena;
	struct json_object *list = json_object_new_object(), *items = json_object_new_array();
	struct json_object *classes_json = json_object_new_array(),
			   *quotas = json_object_new_array();
	int cap = 16, nclasses = 0, i = 0;
	struct k8s_class *classes = arena_alloc(a, sizeof(*classes) * (size_t)cap);
	const char *body;
	size_t len;
	uint64_t h = 1469598103934665603ULL;
	bool listed_own = false;

	json_own(a, list);
	/* classes, pool by pool (rows come grouped by project, then pool) */
	while (i < n) {
		int j = i;

		while (j < n && rows[j].pool_id == rows[i].pool_id)
			j++;
		pool_classes(req, classes_json, rows, i, j, &classes, &nclasses, &cap);
		i = j;
	}
	/* namespaces and quotas, project by project */
	for (int p = 0, c = 0; p < n;) {
		int q = p, cf = c;

		while (q < n && rows[q].project_id == rows[p].project_id)
			q++;
		while (c < nclasses && classes[c].project_id == rows[p].project_id)
			c++;
		project_namespaces(req, items, rows[p].project, rows[p].namespaces_json, classes,
		    cf, c, quotas);
		if (project_only != NULL)
			listed_own = true;
		p = q;
	}
	if (project_only != NULL && !listed_own)
		project_namespaces(req, items, project_only, project_namespaces_json, classes, 0, 0,
		    quotas);
	for (size_t k = 0; k < json_object_array_length(classes_json); k++)
		json_object_array_add(items,
		    json_object_get(json_object_array_get_idx(classes_json, k)));
	for (size_t k = 0; k < json_object_array_length(quotas); k++)
		json_object_array_add(items, json_object_get(json_object_array_get_idx(quotas, k)));
	json_object_put(classes_json);
	json_object_put(quotas);
	policy(req, items);
	taint_rules(req, items, failed, nfailed);

	json_add_str(list, "apiVersion", "v1");
	json_add_str(list, "kind", "List");
	json_object_object_add(list, "metadata", json_object_new_object());
	json_object_object_add(list, "items", items);
	if (wants_yaml(req)) {
		struct strbuf b;

		strbuf_init(&b, a, 4096);
		k8s_yaml(&b, list);
		body = b.p;
		len = b.len;
		response_raw(res, 200, "application/yaml", body, len);
	} else {
		body = json_to_arena(a, list, &len);
		response_raw(res, 200, "application/json", body, len);
	}
	/* FNV-1a of the bytes sent: the JSON and the YAML form have their own tags */
	for (size_t k = 0; k < len; k++)
		h = (h ^ (unsigned char)body[k]) * 1099511628211ULL;
	response_header(res, "ETag", arena_printf(a, "\"%016llx\"", (unsigned long long)h));
	response_header(res, "Vary", "Accept");
}

/* The longest a cluster's List is held (?wait=N seconds), as an agent's desired state. */
#define K8S_WAIT_MAX_S 60

struct cluster_wait {
	int64_t cluster_id;
	bool taints; /* ?device_taints=v1alpha3: the cluster serves DeviceTaintRules */
};

static int
cluster_answer(struct request *req, struct response *res, const struct cluster_wait *w,
    struct gp_error *err)
{
	struct k8s_device_row *rows;
	struct k8s_failed_gpu *failed = NULL;
	int n, nfailed = 0;

	if (db_k8s_devices(db_thread(), req->arena, w->cluster_id, 0, &rows, &n, err) < 0)
		return -1;
	if (w->taints &&
	    db_k8s_failed_gpus(db_thread(), req->arena, w->cluster_id, &failed, &nfailed, err) < 0)
		return -1;
	reply_list(req, res, rows, n, NULL, NULL, failed, nfailed);
	return 0;
}

/* Woken (the List may have changed), timed out or stopping: answer what is there now. */
static int
cluster_woken(struct request *req, struct response *res, void *arg, enum deferred_outcome outcome,
    struct gp_error *err)
{
	const struct cluster_wait *w = arg;

	(void)outcome;
	memset(res, 0, sizeof(*res));
	/* the dispatcher turns an unchanged List into 304 (If-None-Match) */
	return cluster_answer(req, res, w, err);
}

/* True when If-None-Match names the ETag res carries. */
static bool
etag_unchanged(struct request *req, const struct response *res)
{
	const char *inm = req->header(req, "If-None-Match");

	if (inm == NULL)
		return false;
	for (int i = 0; i < res->nheaders; i++)
		/* our tags are "<16 hex digits>": a substring match is exact */
		if (strcasecmp(res->headers[i].name, "ETag") == 0)
			return strstr(inm, res->headers[i].value) != NULL;
	return false;
}

int
api_cluster_kubernetes(struct request *req, struct response *res, struct gp_error *err)
{
	struct cluster_wait *w = arena_alloc(req->arena, sizeof(*w));
	const char *wait = req->query(req, "wait"), *taints = req->query(req, "device_taints");
	const char *key;
	uint64_t mark;
	long long wait_s = 0;

	if (wait != NULL) {
		char *end = NULL;

		wait_s = strtoll(wait, &end, 10);
		if (wait[0] < '0' || wait[0] > '9' || *end != '\0' || wait_s > K8S_WAIT_MAX_S) {
			gp_error_field(err, "wait", "must be an integer from 0 to %d (seconds)",
			    K8S_WAIT_MAX_S);
			return gp_error_set(err, 422, "validation_failed",
			    "bad query parameter wait");
		}
	}
	/* only the version 1.34 serves; a later one's shape differs (docs/kubernetes.md) */
	if (taints != NULL && strcmp(taints, "v1alpha3") != 0) {
		gp_error_field(err, "device_taints", "must be v1alpha3 (Kubernetes 1.34)");
		return gp_error_set(err, 422, "validation_failed",
		    "bad query parameter device_taints");
	}
	w->taints = taints != NULL;
	if (strlen(req->params[0]) > 63 || !api_dns_label(req->params[0]))
		return gp_error_set(err, 404, "not_found", "no such cluster: %s", req->params[0]);
	if (db_cluster_id(db_thread(), req->arena, req->params[0], &w->cluster_id, err) < 0)
		return -1;
	if (w->cluster_id == 0)
		return gp_error_set(err, 404, "not_found", "no such cluster: %s", req->params[0]);
	key = arena_printf(req->arena, "k8s:%lld", (long long)w->cluster_id);
	mark = api_wait_mark(req, key); /* before the read (api_defer_until) */
	if (cluster_answer(req, res, w, err) < 0)
		return -1;
	if (wait_s == 0 || !etag_unchanged(req, res))
		return 0;
	/*
	 * The client holds this List: wait until something it is made of
	 * changes (migration 0021 notifies k8s:<cluster id> from any replica)
	 * or the deadline, then answer again (304 when still the same).
	 */
	memset(res, 0, sizeof(*res));
	return api_defer_until(req, res, key, mark, time_mono_us() + wait_s * 1000000,
	    cluster_woken, w, err);
}

int
api_project_kubernetes(struct request *req, struct response *res, struct gp_error *err)
{
	struct project_row p;
	struct k8s_device_row *rows;
	int n;

	if (api_project_access(db_thread(), req, req->params[0], PROJECT_READ, &p, NULL, err) < 0)
		return -1;
	if (db_k8s_devices(db_thread(), req->arena, 0, p.id, &rows, &n, err) < 0)
		return -1;
	reply_list(req, res, rows, n, p.name, p.namespaces_json, NULL, 0);
	return 0;
}

/* ---- PUT /v1/clusters/{cluster}/kubernetes/workloads ---- */

#define K8S_WORKLOADS_MAX 2000 /* as an agent's report (ProfilesReport) */

/* Printable, no blanks, 1..max bytes (a UUID, a pod or container name). */
static bool
token_ok(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return false;
	return true;
}

int
api_cluster_k8s_workloads(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *profiles = NULL, *clean, *o;
	struct jfields f;
	int64_t cluster_id = 0, violations = 0;
	int bad = -1;
	size_t n;

	if (strlen(req->params[0]) > 63 || !api_dns_label(req->params[0]))
		return gp_error_set(err, 404, "not_found", "no such cluster: %s", req->params[0]);
	if (db_cluster_id(db_thread(), req->arena, req->params[0], &cluster_id, err) < 0)
		return -1;
	if (cluster_id == 0)
		return gp_error_set(err, 404, "not_found", "no such cluster: %s", req->params[0]);
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	jf_array(&f, "profiles", true, &profiles);
	if (jf_finish(&f) < 0)
		return -1;
	n = json_object_array_length(profiles);
	if (n > K8S_WORKLOADS_MAX)
		return gp_error_field(err, "profiles", "at most %d workloads", K8S_WORKLOADS_MAX);
	clean = json_own(req->arena, json_object_new_array());
	for (size_t i = 0; i < n; i++) {
		struct json_object *p = json_object_array_get_idx(profiles, i), *c;
		const char *path = arena_printf(req->arena, "profiles[%zu]", i);
		const char *dev = NULL, *ns = NULL, *pod = NULL, *ctr = NULL;
		struct jfields g;
		int before = err->nfields;

		if (!json_object_is_type(p, json_type_object)) {
			gp_error_field(err, path, "must be an object");
			continue;
		}
		jf_init(&g, req->arena, p, path, err);
		jf_string(&g, "device_uuid", true, 100, &dev);
		jf_string(&g, "namespace", true, 63, &ns);
		jf_string(&g, "pod", true, 253, &pod);
		jf_string(&g, "container", false, 253, &ctr);
		jf_finish(&g);
		if (dev != NULL && !token_ok(dev, 100))
			gp_error_field(err, jf_path(&g, "device_uuid"), "must be a device UUID");
		if (ns != NULL && !api_dns_label(ns))
			gp_error_field(err, jf_path(&g, "namespace"),
			    "must be a Kubernetes namespace");
		if (pod != NULL && !token_ok(pod, 253))
			gp_error_field(err, jf_path(&g, "pod"), "must be a pod name");
		if (ctr != NULL && ctr[0] != '\0' && !token_ok(ctr, 253))
			gp_error_field(err, jf_path(&g, "container"), "must be a container name");
		if (err->nfields > before)
			continue;
		c = json_object_new_object();
		json_add_str(c, "device_uuid", dev);
		json_add_str(c, "namespace", ns);
		json_add_str(c, "pod", pod);
		json_add_str(c, "container", ctr ? ctr : "");
		json_object_array_add(clean, c);
	}
	if (gp_error_isset(err))
		return -1;
	if (db_k8s_workloads(db_thread(), req->arena, cluster_id,
		json_to_arena(req->arena, clean, NULL), &bad, &violations, err) < 0)
		return -1;
	if (bad >= 0)
		/* another cluster's device, or none at all: nothing was stored */
		return gp_error_field(err,
		    arena_printf(req->arena, "profiles[%d].device_uuid", bad),
		    "is not a device of cluster %s", req->params[0]);
	o = json_object_new_object();
	json_add_int(o, "workloads", (int64_t)n);
	json_add_int(o, "isolation_violations", violations);
	response_json(req, res, 200, o);
	return 0;
}
