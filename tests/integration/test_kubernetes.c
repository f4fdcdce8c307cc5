/*
 * test_kubernetes.c - GET /v1/clusters/{cluster}/kubernetes and
 * GET /v1/projects/{project}/kubernetes (docs/kubernetes.md): access,
 * ETag/304, the YAML form; then every List served before and after an
 * approval, a shrink, a GPU failure and a release, a pool split over
 * several DeviceClasses, and a property run of random steps, all checked
 * against the real formats by tests/k8s/check.mjs (Kubernetes OpenAPI
 * schemas, CEL evaluated against NVIDIA-shaped ResourceSlices: each class
 * admits exactly its pool's devices, never another project's).
 *
 * Most tests simulate what an agent's status report would do (an
 * instance realized with its MIG UUID, a released one gone) with SQL
 * (realize()), so that a thousand steps fit in seconds; test_agents runs
 * real gpupool-agent processes (fake backend) and checks the Lists built
 * from the UUIDs they report.
 */
#include "fixture.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *op, *ml, *cv, *billing, *owner; /* owner: of every project */
static const char *const yaml_accept[] = { "Accept: application/yaml", NULL };

static int
group_setup(void **state)
{
	struct fixture *fx;
	struct gp_client_response *r;
	static const struct {
		const char *name, *ns;
	} projects[] = {
		{ "ml", "[\"ml-train\",\"ml-serve\"]" },
		{ "ml-x", "[\"mlx\"]" }, /* "gpupool.ml." must not admit "gpupool.ml-x." */
		{ "cv", "[\"cv\"]" },
		{ "big", "[\"big\"]" },
		{ "empty", "[\"empty\"]" },
	};

	if (fixture_create(NULL, &fx) < 0)
		return -1;
	*state = fx;
	op = fixture_create_user(fx, "op", "operator");
	ml = fixture_create_user(fx, "mlu", "none");
	cv = fixture_create_user(fx, "cvu", "none");
	billing = fixture_create_user(fx, "bill", "billing");
	owner = fixture_create_user(fx, "own", "none");
	for (size_t i = 0; i < sizeof(projects) / sizeof(projects[0]); i++) {
		r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
		    "{\"name\":\"%s\",\"display_name\":\"%s\",\"namespaces\":%s}", projects[i].name,
		    projects[i].name, projects[i].ns);
		if (r->status != 201)
			return -1;
		r = fx_request(fx, fx->admin_token, "PUT",
		    fx_str(fx, "/v1/projects/%s/members/own", projects[i].name),
		    "{\"role\":\"owner\"}");
		if (r->status != 201)
			return -1;
	}
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/ml/members/mlu",
	    "{\"role\":\"member\"}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, fx->admin_token, "PUT", "/v1/projects/cv/members/cvu",
	    "{\"role\":\"viewer\"}");
	return r->status == 201 ? 0 : -1;
}

/* ---- pools ---- */

static int64_t
decide(struct fixture *fx, const char *token, const char *project, const char *action,
    const char *pool, const char *items)
{
	struct gp_client_response *r;
	int64_t id;

	if (items != NULL)
		r = fx_request(fx, token, "POST",
		    fx_str(fx, "/v1/projects/%s/pool-requests", project),
		    "{\"action\":\"%s\",\"pool\":\"%s\",\"items\":%s,\"justification\":\"k8s\"}",
		    action, pool, items);
	else
		r = fx_request(fx, token, "POST",
		    fx_str(fx, "/v1/projects/%s/pool-requests", project),
		    "{\"action\":\"%s\",\"pool\":\"%s\"}", action, pool);
	assert_status(r, 201);
	id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	return r->status == 200 ? id : -r->status;
}

/* decide() that may fail (no capacity, nothing to shrink): the request is then cancelled. */
static void
try_decide(struct fixture *fx, const char *project, const char *action, const char *pool,
    const char *items)
{
	struct gp_client_response *r;
	int64_t id;

	if (items != NULL)
		r = fx_request(fx, owner, "POST",
		    fx_str(fx, "/v1/projects/%s/pool-requests", project),
		    "{\"action\":\"%s\",\"pool\":\"%s\",\"items\":%s,\"justification\":\"k8s\"}",
		    action, pool, items);
	else
		r = fx_request(fx, owner, "POST",
		    fx_str(fx, "/v1/projects/%s/pool-requests", project),
		    "{\"action\":\"%s\",\"pool\":\"%s\"}", action, pool);
	if (r->status != 201) {
		if (getenv("GPUPOOL_K8S_VERBOSE") != NULL)
			print_message("%s %s %s: %ld %s\n", action, project, pool, r->status,
			    r->body);
		return;
	}
	id = fx_json_int(r->json, "id");
	r = fx_request(fx, op, "POST", fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id),
	    "{}");
	if (r->status != 200 && getenv("GPUPOOL_K8S_VERBOSE") != NULL)
		print_message("approve %s %s %s: %ld %s\n", action, project, pool, r->status,
		    r->body);
	if (r->status != 200)
		fx_request(fx, owner, "POST",
		    fx_str(fx, "/v1/pool-requests/%lld/cancel", (long long)id), "{}");
}

/* What the agents' reports would do: instances realized (MIG UUIDs), released ones gone. */
static void
realize(struct fixture *fx)
{
	fx_sql_exec(fx,
	    "UPDATE allocations a SET state = 'ready', updated_at = now(), "
	    "device_uuid = CASE WHEN a.profile = 'full' THEN g.uuid ELSE 'MIG-' || "
	    "substr(md5(a.id::text), 1, 8) || '-' || substr(md5(a.id::text), 9, 4) || '-' || "
	    "substr(md5(a.id::text), 13, 4) || '-' || substr(md5(a.id::text), 17, 4) || '-' || "
	    "substr(md5(a.id::text), 21, 12) END "
	    "FROM gpus g WHERE g.id = a.gpu_id AND a.state IN ('reserved', 'provisioning') "
	    "AND g.health <> 'failed'");
	fx_sql_exec(fx,
	    "UPDATE allocations SET state = 'released', released_at = now(), updated_at = now() "
	    "WHERE state = 'releasing'");
}

/*
 * Every device the cluster's nodes have now, as NVIDIA's driver would
 * publish it, and whose it is: a ready instance of a live pool on a GPU
 * that has not failed is its pool's; a failed GPU's, one being released
 * and a free whole GPU are nobody's.
 */
static struct json_object *
truth(struct fixture *fx, const char *cluster)
{
	const char *t = fx_sql_text(fx,
	    "SELECT coalesce(json_agg(x ORDER BY x->>'uuid'), '[]')::text FROM ("
	    " SELECT json_build_object('uuid', CASE WHEN a.profile = 'full' THEN g.uuid "
	    "  ELSE a.device_uuid END, 'type', CASE WHEN a.profile = 'full' THEN 'gpu' ELSE 'mig' "
	    "  END, 'parent', g.uuid, 'profile', a.profile, 'start', a.start, 'size', a.size, "
	    "  'index', g.gpu_index, 'node', n.name, "
	    "  'pool_id', CASE WHEN live THEN a.pool_id END, "
	    "  'project', CASE WHEN live THEN pr.name END, 'failed', g.health = 'failed') AS x "
	    " FROM allocations a JOIN gpus g ON g.id = a.gpu_id JOIN nodes n ON n.id = g.node_id "
	    " JOIN clusters c ON c.id = g.cluster_id JOIN pools p ON p.id = a.pool_id "
	    " JOIN projects pr ON pr.id = p.project_id, "
	    " LATERAL (SELECT a.state = 'ready' AND g.health <> 'failed' "
	    "  AND p.status IN ('provisioning', 'active', 'degraded') AS live) l "
	    " WHERE ($1 = '' OR c.name = $1) AND a.device_uuid IS NOT NULL "
	    " AND a.state IN ('ready', 'failed', 'releasing') "
	    " UNION ALL "
	    " SELECT json_build_object('uuid', g.uuid, 'type', 'gpu', 'parent', g.uuid, 'profile', "
	    "  'full', 'start', 0, 'size', 8, 'index', g.gpu_index, 'node', n.name, 'pool_id', "
	    "  NULL, 'project', NULL, 'failed', g.health = 'failed') "
	    " FROM gpus g JOIN nodes n ON n.id = g.node_id JOIN clusters c ON c.id = g.cluster_id "
	    " WHERE ($1 = '' OR c.name = $1) AND NOT g.mig_enabled AND NOT EXISTS (SELECT 1 FROM allocations a "
	    "  WHERE a.gpu_id = g.id AND a.state <> 'released' AND a.device_uuid IS NOT NULL)) s",
	    cluster);

	return json_tokener_parse(t);
}

/* Take a test's cluster out of placement, so that the next test's pools land on its own. */
static void
cordon_cluster(struct fixture *fx, const char *cluster)
{
	char *names = strdup(fx_sql_text(fx,
	    "SELECT coalesce(string_agg(n.name, ' '), '') FROM nodes n JOIN clusters c "
	    "ON c.id = n.cluster_id WHERE c.name = $1",
	    cluster));

	assert_non_null(names);
	for (char *save = NULL, *n = strtok_r(names, " ", &save); n != NULL;
	     n = strtok_r(NULL, " ", &save))
		assert_status(fx_request(fx, op, "POST", fx_str(fx, "/v1/nodes/%s/cordon", n),
				  "{}"),
		    200);
	free(names);
}

/* ---- cases for tests/k8s/check.mjs ---- */

struct cases {
	FILE *f;
	const char *path;
	int n;
};

static void
cases_open(struct fixture *fx, struct cases *c, const char *name)
{
	c->path = fx_str(fx, "%s/%s.jsonl", fx->tmpdir, name);
	c->f = fopen(c->path, "w");
	c->n = 0;
	assert_non_null(c->f);
}

/* The List at path as token sees it (and its YAML form when yaml), appended as a case. */
static struct json_object *
record(struct fixture *fx, struct cases *c, const char *label, const char *token, const char *path,
    const char *project, const char *cluster, bool yaml)
{
	struct gp_client_response *r = fx_request(fx, token, "GET", path, NULL), *ry = NULL;
	struct json_object *o = json_object_new_object();

	assert_status(r, 200);
	assert_string_equal(r->content_type, "application/json");
	assert_non_null(r->json);
	if (yaml) {
		ry = fx_request_h(fx, token, "GET", path, yaml_accept, NULL);
		assert_status(ry, 200);
		assert_string_equal(ry->content_type, "application/yaml");
		assert_string_not_equal(ry->etag, r->etag);
	}
	json_object_object_add(o, "label", json_object_new_string(label));
	json_object_object_add(o, "project", project ? json_object_new_string(project) : NULL);
	json_object_object_add(o, "list", json_object_get(r->json));
	json_object_object_add(o, "yaml", ry ? json_object_new_string(ry->body) : NULL);
	json_object_object_add(o, "devices", truth(fx, cluster));
	/* asked with ?device_taints=: every failed GPU's devices must be tainted */
	json_object_object_add(o, "taints",
	    json_object_new_boolean(strstr(path, "device_taints=") != NULL));
	fprintf(c->f, "%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	c->n++;
	return r->json;
}

/* The cluster's List and each project's, as an operator and as members. */
static void
record_all(struct fixture *fx, struct cases *c, const char *label, const char *cluster)
{
	record(fx, c, fx_str(fx, "%s: cluster", label), op,
	    fx_str(fx, "/v1/clusters/%s/kubernetes?device_taints=v1alpha3", cluster), NULL, cluster,
	    true);
	/* a project's List spans every cluster: all devices are its truth */
	record(fx, c, fx_str(fx, "%s: project ml", label), ml, "/v1/projects/ml/kubernetes", "ml",
	    "", true);
	record(fx, c, fx_str(fx, "%s: project cv", label), cv, "/v1/projects/cv/kubernetes", "cv",
	    "", false);
}

/* Run tests/k8s/run-check on the cases; its exit status. */
static int
run_check(struct fixture *fx, const char *path)
{
	int st = system(fx_str(fx, "%s/tests/k8s/run-check '%s'", GP_SOURCE_DIR, path));

	return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void
cases_check(struct fixture *fx, struct cases *c)
{
	assert_int_equal(fclose(c->f), 0);
	c->f = NULL;
	assert_int_equal(run_check(fx, c->path), 0);
}

/*
 * The cluster "life"'s List with one thing broken, checked by check.mjs
 * (its exit status): 0 ml's class also admits cv's device cv_dev; 1 the
 * policy's project prefix loses its dot (ml's namespaces could name
 * ml-x's classes); 2 an unknown field in a class; 3 the YAML form
 * differs from the JSON; 4 the failed GPU's DeviceTaintRule also taints a
 * healthy device of cv; -1 nothing broken.
 */
static int
tampered(struct fixture *fx, int what, const char *cv_dev)
{
	struct gp_client_response *r =
	    fx_request(fx, op, "GET", "/v1/clusters/life/kubernetes?device_taints=v1alpha3", NULL);
	struct gp_client_response *ry = fx_request_h(fx, op, "GET",
	    "/v1/clusters/life/kubernetes?device_taints=v1alpha3", yaml_accept, NULL);
	struct json_object *items = fx_json(r->json, "items"), *cs = json_object_new_object();
	const char *path = fx_str(fx, "%s/tampered-%d.jsonl", fx->tmpdir, what), *yaml = ry->body;
	FILE *f;

	for (size_t i = 0; i < json_object_array_length(items); i++) {
		struct json_object *o = json_object_array_get_idx(items, i);
		const char *kind = fx_json_str(o, "kind"), *name = fx_json_str(o, "metadata.name");

		if (what == 0 && strcmp(name, "gpupool.ml.train") == 0) {
			const char *e = fx_json_str(o, "spec.selectors[0].cel.expression");
			const char *br = strrchr(e, '[');

			json_object_object_add(fx_json(o, "spec.selectors[0].cel"), "expression",
			    json_object_new_string(
				fx_str(fx, "%.*s'%s', %s", (int)(br - e + 1), e, cv_dev, br + 1)));
		} else if (what == 1 && strcmp(kind, "ValidatingAdmissionPolicy") == 0) {
			const char *e = fx_json_str(o, "spec.validations[0].expression");
			char *t = strdup(e), *p;

			assert_non_null(t);
			while ((p = strstr(t, " + '.')")) != NULL)
				memmove(p, p + 6, strlen(p + 6) + 1);
			json_object_object_add(fx_json(o, "spec.validations[0]"), "expression",
			    json_object_new_string(t));
			free(t);
		} else if (what == 4 && strcmp(kind, "DeviceTaintRule") == 0) {
			/* the failed GPU's rule also taints a healthy GPU's device of cv */
			const char *e =
			    fx_json_str(o, "spec.deviceSelector.selectors[0].cel.expression");

			json_object_object_add(fx_json(o, "spec.deviceSelector.selectors[0].cel"),
			    "expression",
			    json_object_new_string(
				fx_str(fx, "%.*s, '%s']", (int)strlen(e) - 1, e, cv_dev)));
		} else if (what == 2 && strcmp(name, "gpupool.ml.train") == 0) {
			json_object_object_add(fx_json(o, "spec"), "selector",
			    json_object_new_array());
		}
	}
	if (what == 3)
		yaml = fx_str(fx, "%s  - \"extra\"\n", ry->body); /* one more item in the YAML */
	json_object_object_add(cs, "label",
	    json_object_new_string(fx_str(fx, "tampered %d", what)));
	json_object_object_add(cs, "project", NULL);
	json_object_object_add(cs, "list", json_object_get(r->json));
	/* the YAML form only where the JSON is as served, so each finding is the one made */
	json_object_object_add(cs, "yaml",
	    what < 0 || what == 3 ? json_object_new_string(yaml) : NULL);
	json_object_object_add(cs, "devices", truth(fx, "life"));
	json_object_object_add(cs, "taints", json_object_new_boolean(1));
	f = fopen(path, "w");
	assert_non_null(f);
	fprintf(f, "%s\n", json_object_to_json_string_ext(cs, JSON_C_TO_STRING_PLAIN));
	assert_int_equal(fclose(f), 0);
	json_object_put(cs);
	return run_check(fx, path);
}

/* The DeviceClass named name in a List, or NULL. */
static struct json_object *
find_class(struct json_object *list, const char *name)
{
	struct json_object *items = fx_json(list, "items");

	for (size_t i = 0; items != NULL && i < json_object_array_length(items); i++) {
		struct json_object *o = json_object_array_get_idx(items, i);

		if (strcmp(fx_json_str(o, "kind"), "DeviceClass") == 0 &&
		    strcmp(fx_json_str(o, "metadata.name"), name) == 0)
			return o;
	}
	return NULL;
}

static int
count_kind(struct json_object *list, const char *kind)
{
	struct json_object *items = fx_json(list, "items");
	int n = 0;

	for (size_t i = 0; items != NULL && i < json_object_array_length(items); i++)
		n += strcmp(fx_json_str(json_object_array_get_idx(items, i), "kind"), kind) == 0;
	return n;
}

/* metadata.<map>[key] of o (labels or annotations), NULL when absent. */
static const char *
meta(struct json_object *o, const char *map, const char *key)
{
	struct json_object *m = fx_json(o, map), *v;

	assert_non_null(o);
	if (m == NULL || !json_object_object_get_ex(m, key, &v))
		return NULL;
	return json_object_get_string(v);
}

static const char *
devices_of(struct json_object *list, const char *cls)
{
	const char *v = meta(find_class(list, cls), "metadata.annotations", "gpupool.io/devices");

	assert_non_null(v);
	return v;
}

/* ---- tests ---- */

/* Who may read which List; ETag and 304; the YAML form; bad input. */
static void
test_access(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r, *r2, *ry;
	char etag[128], yetag[128];
	const char *inm[2];

	fx_fleet(fx, "acc", "H100-80GB", 1, 1, true);
	fx_agents_manage(fx, "acc");
	r = fx_request(fx, NULL, "GET", "/v1/clusters/acc/kubernetes", NULL);
	assert_problem(r, 401, "unauthorized");
	r = fx_request(fx, ml, "GET", "/v1/clusters/acc/kubernetes", NULL);
	assert_problem(r, 403, "forbidden");
	r = fx_request(fx, billing, "GET", "/v1/clusters/acc/kubernetes", NULL);
	assert_problem(r, 403, "forbidden");
	r = fx_request(fx, op, "GET", "/v1/clusters/nosuch/kubernetes", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, op, "GET", "/v1/clusters/acc/kubernetes?wait=61", NULL);
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, op, "GET", "/v1/clusters/acc/kubernetes?wait=-1", NULL);
	assert_problem(r, 422, "validation_failed");
	r = fx_request(fx, op, "GET", "/v1/clusters/acc/kubernetes?after=1", NULL);
	assert_problem(r, 422, "validation_failed");
	/* another project's member: 404, as if it did not exist; unknown: 404 too */
	r = fx_request(fx, ml, "GET", "/v1/projects/cv/kubernetes", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, ml, "GET", "/v1/projects/nosuch/kubernetes", NULL);
	assert_problem(r, 404, "not_found");
	r = fx_request(fx, billing, "GET", "/v1/projects/ml/kubernetes", NULL);
	assert_status(r, 200);

	/* an empty cluster: just the policy and its binding */
	r = fx_request(fx, op, "GET", "/v1/clusters/acc/kubernetes", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "apiVersion", "v1");
	assert_json_str(r->json, "kind", "List");
	assert_int_equal(fx_json_len(r->json, "items"), 2);
	assert_json_str(r->json, "items[0].kind", "ValidatingAdmissionPolicy");
	assert_json_str(r->json, "items[1].kind", "ValidatingAdmissionPolicyBinding");
	assert_string_equal(meta(fx_json(r->json, "items[0]"), "metadata.labels",
				"app.kubernetes.io/managed-by"),
	    "gpupool");
	assert_true(strlen(r->etag) > 2);
	snprintf(etag, sizeof(etag), "%s", r->etag);
	/* a project's List: its namespaces and quotas even without a pool */
	r = fx_request(fx, ml, "GET", "/v1/projects/ml/kubernetes", NULL);
	assert_status(r, 200);
	assert_int_equal(count_kind(r->json, "Namespace"), 2);
	assert_int_equal(count_kind(r->json, "ResourceQuota"), 2);
	assert_int_equal(count_kind(r->json, "DeviceClass"), 0);

	/* 304 while unchanged, for the tag of the form asked for */
	inm[0] = fx_str(fx, "If-None-Match: %s", etag);
	inm[1] = NULL;
	r2 = fx_request_h(fx, op, "GET", "/v1/clusters/acc/kubernetes", inm, NULL);
	assert_status(r2, 304);
	assert_int_equal(r2->body_len, 0);
	ry = fx_request_h(fx, op, "GET", "/v1/clusters/acc/kubernetes", yaml_accept, NULL);
	assert_status(ry, 200);
	assert_string_equal(ry->content_type, "application/yaml");
	assert_non_null(strstr(ry->body, "kind: \"List\"\n"));
	assert_non_null(strstr(ry->body, "  - apiVersion: \"admissionregistration.k8s.io/v1\"\n"));
	snprintf(yetag, sizeof(yetag), "%s", ry->etag);
	assert_string_not_equal(yetag, etag);
	{
		const char *h[] = { "Accept: application/yaml",
			fx_str(fx, "If-None-Match: %s", yetag), NULL };

		r2 = fx_request_h(fx, op, "GET", "/v1/clusters/acc/kubernetes", h, NULL);
		assert_status(r2, 304);
	}
	/* a long-poll on an unchanged List: held to its deadline, then 304 */
	{
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		r2 = fx_request_h(fx, op, "GET", "/v1/clusters/acc/kubernetes?wait=1", inm, NULL);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		assert_status(r2, 304);
		assert_true(
		    (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >= 900);
		/* a tag it does not hold: answered at once */
		r2 = fx_request_h(fx, op, "GET", "/v1/clusters/acc/kubernetes?wait=60",
		    (const char *const[]){ "If-None-Match: \"0000000000000000\"", NULL }, NULL);
		assert_status(r2, 200);
		assert_string_equal(r2->etag, etag);
	}
	/* JSON asked first wins */
	{
		const char *h[] = { "Accept: application/json, application/yaml", NULL };

		r2 = fx_request_h(fx, op, "GET", "/v1/clusters/acc/kubernetes", h, NULL);
		assert_string_equal(r2->content_type, "application/json");
		assert_string_equal(r2->etag, etag);
	}
	/* a change: a new tag, and the old one no longer 304 */
	assert_true(decide(fx, ml, "ml", "create", "acc1", "[\"H100-80GB/1g.10gb=1\"]") > 0);
	r2 = fx_request_h(fx, op, "GET", "/v1/clusters/acc/kubernetes", inm, NULL);
	assert_status(r2, 200);
	assert_string_not_equal(r2->etag, etag);
	assert_non_null(find_class(r2->json, "gpupool.ml.acc1"));
	assert_true(decide(fx, ml, "ml", "release", "acc1", NULL) > 0);
	realize(fx);
	cordon_cluster(fx, "acc");
}

/*
 * Before and after an approval, a shrink, a GPU failure and a release:
 * every List checked by tests/k8s/check.mjs, and the facts asserted here.
 */
static void
test_lifecycle(void **state)
{
	struct fixture *fx = *state;
	struct cases c;
	struct json_object *l, *dc;
	const char *failed_uuid, *failed_dev, *expr;

	cases_open(fx, &c, "lifecycle");
	fx_fleet(fx, "life", "H100-80GB", 2, 4, true);
	fx_agents_manage(fx, "life");
	record_all(fx, &c, "empty", "life");

	assert_true(decide(fx, ml, "ml", "create", "train",
			"[\"H100-80GB/3g.40gb=2\",\"H100-80GB/1g.10gb=3\"]") > 0);
	assert_true(decide(fx, owner, "ml-x", "create", "train", "[\"H100-80GB/2g.20gb=2\"]") > 0);
	assert_true(decide(fx, owner, "cv", "create", "det",
			"[\"H100-80GB/full=1\",\"H100-80GB/1g.10gb=2\"]") > 0);
	/* approved, not yet realized: classes that admit nothing yet */
	l = record(fx, &c, "approved: cluster", op, "/v1/clusters/life/kubernetes", NULL, "life",
	    true);
	dc = find_class(l, "gpupool.ml.train");
	assert_non_null(dc);
	assert_string_equal(meta(dc, "metadata.annotations", "gpupool.io/devices"), "0");
	assert_string_equal(meta(dc, "metadata.labels", "gpupool.io/project"), "ml");
	record_all(fx, &c, "approved", "life");

	realize(fx);
	l = record(fx, &c, "realized: cluster", op, "/v1/clusters/life/kubernetes", NULL, "life",
	    true);
	assert_string_equal(devices_of(l, "gpupool.ml.train"), "5");
	assert_string_equal(devices_of(l, "gpupool.cv.det"), "3");
	assert_string_equal(devices_of(l, "gpupool.ml-x.train"), "2");
	record_all(fx, &c, "realized", "life");

	/* shrink: the instances being released leave the class before the agent acts */
	assert_true(decide(fx, ml, "ml", "shrink", "train", "[\"H100-80GB/1g.10gb=2\"]") > 0);
	l = record(fx, &c, "shrunk: cluster", op, "/v1/clusters/life/kubernetes", NULL, "life",
	    true);
	assert_string_equal(devices_of(l, "gpupool.ml.train"), "3");
	record_all(fx, &c, "shrunk", "life");
	realize(fx);
	record_all(fx, &c, "shrink realized", "life");

	/* a GPU of ml's pool fails: its devices leave the class at once */
	failed_uuid = fx_sql_text(fx,
	    "SELECT g.uuid FROM allocations a JOIN gpus g ON g.id = a.gpu_id JOIN pools p "
	    "ON p.id = a.pool_id JOIN projects pr ON pr.id = p.project_id WHERE pr.name = 'ml' "
	    "AND a.state = 'ready' ORDER BY a.id LIMIT 1");
	failed_dev = fx_sql_text(fx,
	    "SELECT a.device_uuid FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
	    "WHERE g.uuid = $1 AND a.state = 'ready' ORDER BY a.id LIMIT 1",
	    failed_uuid);
	l = fx_request(fx, op, "GET", "/v1/clusters/life/kubernetes", NULL)->json;
	expr = fx_json_str(find_class(l, "gpupool.ml.train"), "spec.selectors[0].cel.expression");
	assert_non_null(strstr(expr, failed_dev));
	assert_status(fx_request(fx, op, "PATCH", fx_str(fx, "/v1/gpus/%s", failed_uuid),
			  "{\"health\":\"failed\",\"health_reason\":\"Xid 79\"}"),
	    200);
	l = record(fx, &c, "gpu failed: cluster", op, "/v1/clusters/life/kubernetes", NULL, "life",
	    true);
	expr = fx_json_str(find_class(l, "gpupool.ml.train"), "spec.selectors[0].cel.expression");
	assert_null(strstr(expr, failed_dev));
	/* a cluster that serves DeviceTaintRules (asked for): the failed GPU's rule, NoExecute */
	assert_int_equal(count_kind(l, "DeviceTaintRule"), 0);
	l = record(fx, &c, "gpu failed: cluster with taints", op,
	    "/v1/clusters/life/kubernetes?device_taints=v1alpha3", NULL, "life", true);
	assert_int_equal(count_kind(l, "DeviceTaintRule"), 1);
	{
		struct json_object *items = fx_json(l, "items"), *rule = NULL;

		for (size_t i = 0; i < json_object_array_length(items); i++)
			if (strcmp(fx_json_str(json_object_array_get_idx(items, i), "kind"),
				"DeviceTaintRule") == 0)
				rule = json_object_array_get_idx(items, i);
		assert_non_null(rule);
		assert_string_equal(fx_json_str(rule, "apiVersion"), "resource.k8s.io/v1alpha3");
		assert_string_equal(fx_json_str(rule, "spec.taint.effect"), "NoExecute");
		assert_string_equal(meta(rule, "metadata.annotations", "gpupool.io/gpu"),
		    failed_uuid);
	}
	assert_problem(fx_request(fx, op, "GET", "/v1/clusters/life/kubernetes?device_taints=v1",
			   NULL),
	    422, "validation_failed");
	record_all(fx, &c, "gpu failed", "life");

	/* release: the class and its quota line go */
	assert_true(decide(fx, owner, "cv", "release", "det", NULL) > 0);
	l = record(fx, &c, "released: cluster", op, "/v1/clusters/life/kubernetes", NULL, "life",
	    true);
	assert_null(find_class(l, "gpupool.cv.det"));
	assert_non_null(find_class(l, "gpupool.ml.train"));
	record_all(fx, &c, "released", "life");
	realize(fx);
	record_all(fx, &c, "release realized", "life");
	cases_check(fx, &c);

	/* the checker is not vacuous: each tampering of a served List is found */
	{
		const char *cv_dev;

		assert_true(
		    decide(fx, owner, "cv", "create", "det2", "[\"H100-80GB/1g.10gb=1\"]") > 0);
		realize(fx);
		cv_dev = fx_sql_text(fx,
		    "SELECT a.device_uuid FROM allocations a JOIN pools p ON p.id = a.pool_id "
		    "WHERE p.name = 'det2' AND a.state = 'ready'");
		for (int k = 0; k < 5; k++)
			assert_int_equal(tampered(fx, k, cv_dev), 1);
		assert_int_equal(tampered(fx, -1, cv_dev), 0); /* untouched: no finding */
	}
	cordon_cluster(fx, "life");
}

/* A pool too large for one CEL expression: several classes, each under 10 KiB. */
static void
test_split(void **state)
{
	struct fixture *fx = *state;
	struct cases c;
	struct json_object *l;
	int64_t classes;

	cases_open(fx, &c, "split");
	fx_fleet(fx, "big", "H100-80GB", 5, 8, true);
	fx_agents_manage(fx, "big");
	/* 40 GPUs x 7 1g.10gb = 280 instances of 40-byte UUIDs: past one 10 KiB expression */
	assert_true(decide(fx, owner, "big", "create", "wide", "[\"H100-80GB/1g.10gb=280\"]") > 0);
	realize(fx);
	l = record(fx, &c, "split: cluster", op, "/v1/clusters/big/kubernetes", NULL, "big", true);
	classes = count_kind(l, "DeviceClass");
	assert_int_equal(classes, 2);
	assert_non_null(find_class(l, "gpupool.big.wide"));
	assert_non_null(find_class(l, "gpupool.big.wide.2"));
	record(fx, &c, "split: project", owner, "/v1/projects/big/kubernetes", "big", "", true);
	/* shrink below the limit: one class again */
	assert_true(decide(fx, owner, "big", "shrink", "wide", "[\"H100-80GB/1g.10gb=200\"]") > 0);
	realize(fx);
	l = record(fx, &c, "unsplit: cluster", op, "/v1/clusters/big/kubernetes", NULL, "big",
	    true);
	assert_int_equal(count_kind(l, "DeviceClass"), 1);
	cases_check(fx, &c);
	cordon_cluster(fx, "big");
}

/*
 * Random approve/shrink/fail/release steps (GPUPOOL_K8S_STEPS, 1000 by
 * default) on one cluster, three projects: after every step the List is
 * recorded, and check.mjs verifies that no class ever admits a device
 * that is not its pool's, another project's above all.
 */
static void
test_property(void **state)
{
	struct fixture *fx = *state;
	struct cases c;
	const char *env = getenv("GPUPOOL_K8S_STEPS");
	int steps = env != NULL ? atoi(env) : 1000, pools = 0;
	static const char *const projects[] = { "ml", "ml-x", "cv" };
	static const char *const profiles[] = { "1g.10gb", "2g.20gb", "3g.40gb", "full" };
	unsigned seed = (unsigned)time(NULL);
	struct timespec t0, t1;

	if (getenv("GPUPOOL_K8S_SEED") != NULL)
		seed = (unsigned)strtoul(getenv("GPUPOOL_K8S_SEED"), NULL, 10);
	print_message("property run: %d steps, seed %u (GPUPOOL_K8S_SEED)\n", steps, seed);
	srand(seed);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	cases_open(fx, &c, "property");
	fx_fleet(fx, "prop", "H100-80GB", 2, 4, true);
	fx_agents_manage(fx, "prop");
	for (int s = 0; s < steps; s++) {
		int what = rand() % 10;
		const char *p = projects[rand() % 3];
		const char *pool = fx_sql_text(fx,
		    "SELECT (SELECT p.name FROM pools p JOIN projects pr ON pr.id = p.project_id "
		    "WHERE pr.name = $1 AND p.status IN ('provisioning', 'active', 'degraded') "
		    "ORDER BY random() LIMIT 1)",
		    p);

		if (what < 4 || pool == NULL) { /* create */
			try_decide(fx, p, "create", fx_str(fx, "p%d", pools++),
			    fx_str(fx, "[\"H100-80GB/%s=%d\"]", profiles[rand() % 4],
				1 + rand() % 2));
		} else if (what < 6) { /* expand */
			try_decide(fx, p, "expand", pool,
			    fx_str(fx, "[\"H100-80GB/%s=1\"]", profiles[rand() % 3]));
		} else if (what < 7) { /* shrink one item of the pool */
			const char *it = fx_sql_text(fx,
			    "SELECT (SELECT i->>'profile' FROM pools p JOIN projects pr "
			    "ON pr.id = p.project_id, jsonb_array_elements(p.items) i WHERE pr.name = $1 "
			    "AND p.name = $2 AND p.status <> 'released' ORDER BY random() LIMIT 1)",
			    p, pool);

			if (it != NULL)
				try_decide(fx, p, "shrink", pool,
				    fx_str(fx, "[\"H100-80GB/%s=1\"]", it));
		} else if (what < 8) { /* a GPU fails, or a failed one comes back */
			const char *g = fx_sql_text(fx,
			    "SELECT g.uuid FROM gpus g JOIN clusters c ON c.id = g.cluster_id "
			    "WHERE c.name = 'prop' ORDER BY random() LIMIT 1");
			const char *h =
			    fx_sql_text(fx, "SELECT health FROM gpus WHERE uuid = $1", g);

			fx_request(fx, op, "PATCH", fx_str(fx, "/v1/gpus/%s", g),
			    "{\"health\":\"%s\"}", strcmp(h, "failed") == 0 ? "ok" : "failed");
		} else { /* release */
			try_decide(fx, p, "release", pool, NULL);
		}
		if (rand() % 3 != 0)
			realize(fx);
		record(fx, &c, fx_str(fx, "step %d (seed %u)", s, seed), op,
		    "/v1/clusters/prop/kubernetes?device_taints=v1alpha3", NULL, "prop",
		    s % 100 == 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	print_message("property run: %d steps in %.1f s\n", steps,
	    (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
	cases_check(fx, &c);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	print_message("property run: checked in %.1f s\n",
	    (double)(t0.tv_sec - t1.tv_sec) + (double)(t0.tv_nsec - t1.tv_nsec) / 1e9);
	fx_assert_pool_invariants(fx);
	cordon_cluster(fx, "prop");
}

/* ---- real agents ---- */

static int
free_port(void)
{
	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);

	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(s, (struct sockaddr *)&a, &l) != 0)
		fail_msg("no free port");
	close(s);
	return ntohs(a.sin_port);
}

/* gpupool-agent (fake backend, two H100s) for node name, enrolled with token. */
static pid_t
agent_start(struct fixture *fx, const char *name, const char *token)
{
	const char *gpus = fx_str(fx, "%s/gpus-%s.json", fx->tmpdir, name);
	const char *log = fx_str(fx, "%s/%s.log", fx->tmpdir, name);
	const char *dir = fx_str(fx, "%s/agent-%s", fx->tmpdir, name);
	const char *listen = fx_str(fx, "127.0.0.1:%d", free_port());
	FILE *f = fopen(gpus, "w");
	pid_t pid;

	assert_non_null(f);
	fputs("{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":2}]}", f);
	assert_int_equal(fclose(f), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		execl(AGENT_PATH, AGENT_PATH, "--server", fx->server->base_url, "--node-name", name,
		    "--state-dir", dir, "--backend", "fake", "--fake-gpus", gpus, "--enroll-token",
		    token, "--listen", listen, "--poll-interval", "5", "--heartbeat-interval", "1",
		    (char *)NULL);
		_exit(127);
	}
	return pid;
}

static void
agent_stop(pid_t pid)
{
	int st;

	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0))
		fail_msg("an agent did not stop cleanly on SIGTERM (status %d)", st);
}

/* Poll (30 s) until the SQL count with parameter p1 is want. */
static void
wait_count(struct fixture *fx, int64_t want, const char *sql, const char *p1)
{
	int64_t got = -1;

	for (int i = 0; i < 300; i++) {
		got = fx_sql_int64(fx, sql, p1);
		if (got == want)
			return;
		usleep(100000);
	}
	fixture_server_dump_log(fx->server, 40);
	fail_msg("timed out: %s gave %lld, want %lld", sql, (long long)got, (long long)want);
}

#define LIVE_OF                                                                         \
	"SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "          \
	"JOIN projects pr ON pr.id = p.project_id WHERE pr.name || '/' || p.name = $1 " \
	"AND a.state = 'ready' AND a.device_uuid IS NOT NULL"
#define RELEASED_OF                                                                     \
	"SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "          \
	"JOIN projects pr ON pr.id = p.project_id WHERE pr.name || '/' || p.name = $1 " \
	"AND a.state = 'released'"

/*
 * Real gpupool-agent processes create the instances: the Lists carry the
 * MIG UUIDs they report, and a release removes the class.
 */
static void
test_agents(void **state)
{
	struct fixture *fx = *state;
	struct cases c;
	struct gp_client_response *r;
	struct json_object *l;
	const char *token;
	pid_t a, b;

	cases_open(fx, &c, "agents");
	assert_status(fx_request(fx, op, "POST", "/v1/clusters", "{\"name\":\"agents\"}"), 201);
	r = fx_request(fx, op, "POST", "/v1/clusters/agents/enrollment-tokens",
	    "{\"expires_in_seconds\":600}");
	assert_status(r, 201);
	token = fx_json_str(r->json, "token");
	a = agent_start(fx, "agents-a", token);
	r = fx_request(fx, op, "POST", "/v1/clusters/agents/enrollment-tokens",
	    "{\"expires_in_seconds\":600}");
	assert_status(r, 201);
	b = agent_start(fx, "agents-b", fx_json_str(r->json, "token"));
	wait_count(fx, 4,
	    "SELECT count(*) FROM gpus g JOIN clusters c ON c.id = g.cluster_id WHERE c.name = $1",
	    "agents");

	assert_true(decide(fx, owner, "ml", "create", "ag",
			"[\"H100-80GB/3g.40gb=2\",\"H100-80GB/1g.10gb=2\"]") > 0);
	assert_true(decide(fx, owner, "cv", "create", "ag", "[\"H100-80GB/2g.20gb=2\"]") > 0);
	wait_count(fx, 4, LIVE_OF, "ml/ag");
	wait_count(fx, 2, LIVE_OF, "cv/ag");
	l = record(fx, &c, "agents ready: cluster", op, "/v1/clusters/agents/kubernetes", NULL,
	    "agents", true);
	assert_string_equal(devices_of(l, "gpupool.ml.ag"), "4");
	assert_string_equal(devices_of(l, "gpupool.cv.ag"), "2");
	record_all(fx, &c, "agents ready", "agents");

	assert_true(decide(fx, owner, "ml", "release", "ag", NULL) > 0);
	l = record(fx, &c, "agents releasing: cluster", op, "/v1/clusters/agents/kubernetes", NULL,
	    "agents", true);
	assert_null(find_class(l, "gpupool.ml.ag"));
	wait_count(fx, 4, RELEASED_OF, "ml/ag");
	record_all(fx, &c, "agents released", "agents");
	cases_check(fx, &c);

	agent_stop(a);
	agent_stop(b);
	cordon_cluster(fx, "agents");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_access),
		cmocka_unit_test(test_lifecycle),
		cmocka_unit_test(test_split),
		cmocka_unit_test(test_property),
		cmocka_unit_test(test_agents),
	};

	return fixture_exit_status(
	    cmocka_run_group_tests(tests, group_setup, fixture_group_teardown));
}
