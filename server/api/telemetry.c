/*
 * telemetry.c - what node agents send besides their status (GPU samples,
 * workload profiles) and what users read of it: a GPU's metric series,
 * alerts (with acknowledgement) and workload profiles (docs/agent.md,
 * "Telemetry").
 */
#include "api.h"

#include <ctype.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/strbuf.h"
#include "core/timeutil.h"
#include "db/db_agent.h"
#include "service/agent_service.h"

#define METRICS_MAX_SAMPLES 5000
#define PROFILES_MAX 2000
#define METRICS_MAX_POINTS 10000
#define METRICS_MAX_RANGE_US (INT64_C(400) * 86400 * 1000000)

static bool
printable_id(const char *s, size_t max)
{
	size_t n = strlen(s);

	if (n == 0 || n > max)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* ---- POST /v1/agent/metrics ---- */

#define METRICS_MAX_FUTURE_S 300 /* a sample further ahead is refused (clock skew) */
#define METRICS_MAX_REJECTED 100 /* rejected samples listed in the answer at most */

struct metrics_tx {
	struct request *req;
	const char *json;  /* the samples that passed on their own */
	const char *check; /* [{"i","gpu_uuid","device_uuid"}] of those */
	int64_t stored;
	struct json_object *rejected; /* [{"index","reason"}] */
	int64_t nrejected;
};

static void
reject(struct metrics_tx *t, size_t index, const char *reason)
{
	struct json_object *o;

	t->nrejected++;
	if (json_object_array_length(t->rejected) >= METRICS_MAX_REJECTED)
		return;
	o = json_object_new_object();
	json_add_int(o, "index", (int64_t)index);
	json_add_str(o, "reason", reason);
	json_object_array_add(t->rejected, o);
}

/*
 * The node may send samples only of its own GPUs and of the instances on
 * them: one of another node's makes the whole batch 422, nothing stored
 * (a hostile node); one of a device gpupool does not know on that GPU is
 * dropped alone.
 */
static int
metrics_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct metrics_tx *t = arg;
	struct metric_verdict *v = NULL;
	struct json_object *all, *keep;
	int n = 0, k = 0;

	if (db_metric_check(db, t->req->arena, t->req->principal.node_id, t->check, &v, &n, err) <
	    0)
		return -1;
	for (int i = 0; i < n; i++)
		if (v[i].foreign) {
			gp_error_field(err,
			    arena_printf(t->req->arena, "samples[%d].%s", v[i].index, v[i].field),
			    "is not a device of this node");
			return gp_error_set(err, 422, "validation_failed",
			    "samples[%d] is not of this node: nothing stored", v[i].index);
		}
	if (n > 0) {
		all = json_own(t->req->arena, json_tokener_parse(t->json));
		keep = json_own(t->req->arena, json_object_new_array());
		for (size_t i = 0; all != NULL && i < json_object_array_length(all); i++) {
			struct json_object *s = json_object_array_get_idx(all, i), *ix;
			int idx;

			json_object_object_get_ex(s, "i", &ix);
			idx = json_object_get_int(ix);
			if (k < n && v[k].index == idx) {
				reject(t, (size_t)idx, "device_uuid is not a device of this GPU");
				while (k < n && v[k].index == idx)
					k++;
				continue;
			}
			json_object_array_add(keep, json_object_get(s));
		}
		t->json = json_to_arena(t->req->arena, keep, NULL);
	}
	return db_metric_ingest(db, t->req->arena, t->req->principal.node_id, t->json,
	    api_app(t->req)->metrics_retention_days, &t->stored, err);
}

/* One sample, checked alone: its clean copy, or NULL with *why. */
static struct json_object *
metrics_sample(struct request *req, struct json_object *s, size_t i, int64_t now_us,
    const char **why)
{
	static const struct {
		const char *key;
		double min, max;
		bool integer;
	} nums[] = {
		{ "power_w", 0, 100000, false },
		{ "sm_active", 0, 1, false },
		{ "memory_used_mib", 0, 1e9, true },
		{ "memory_total_mib", 0, 1e9, true },
		{ "temperature_c", -100, 300, false },
		{ "ecc_corrected", 0, 9e18, true },
		{ "ecc_uncorrected", 0, 9e18, true },
		{ "last_xid", -1, 100000, true },
		{ "remapped_rows", 0, 1e12, true },
	};
	const char *path = arena_printf(req->arena, "samples[%zu]", i);
	const char *gpu = NULL, *dev = NULL;
	int64_t ts = 0;
	int64_t oldest = now_us - (int64_t)api_app(req)->metrics_retention_days * 86400 * 1000000;
	struct jfields g;
	struct gp_error e;
	struct json_object *c;

	gp_error_clear(&e);
	if (!json_object_is_type(s, json_type_object)) {
		*why = "must be an object";
		return NULL;
	}
	jf_init(&g, req->arena, s, path, &e);
	jf_epoch_or_time(&g, "ts", true, &ts, NULL);
	jf_string(&g, "gpu_uuid", true, 64, &gpu);
	jf_string(&g, "device_uuid", false, 100, &dev);
	c = json_object_new_object();
	json_add_int(c, "i", (int64_t)i);
	json_add_int(c, "ts_us", ts);
	json_add_str(c, "gpu_uuid", gpu);
	json_add_str(c, "device_uuid", dev);
	for (size_t k = 0; k < sizeof(nums) / sizeof(nums[0]); k++) {
		double v = 0;
		bool present = false;

		jf_double(&g, nums[k].key, false, nums[k].min, nums[k].max, &v, &present);
		if (!present || (strcmp(nums[k].key, "last_xid") == 0 && v < 0))
			json_add_str(c, nums[k].key, NULL);
		else if (nums[k].integer)
			json_add_int(c, nums[k].key, (int64_t)v);
		else
			json_object_object_add(c, nums[k].key, json_object_new_double(v));
	}
	jf_finish(&g);
	if (gpu != NULL && !printable_id(gpu, 64))
		gp_error_field(&e, jf_path(&g, "gpu_uuid"), "must be a GPU UUID");
	if (dev != NULL && !printable_id(dev, 100))
		gp_error_field(&e, jf_path(&g, "device_uuid"), "must be a device UUID");
	if (e.nfields > 0 || gp_error_isset(&e)) {
		*why = e.nfields > 0
		    ? arena_printf(req->arena, "%s: %s", e.fields[0].field, e.fields[0].message)
		    : arena_strdup(req->arena, e.message);
		json_object_put(c);
		return NULL;
	}
	if (ts > now_us + (int64_t)METRICS_MAX_FUTURE_S * 1000000) {
		*why = "ts is more than 300 s in the future";
		json_object_put(c);
		return NULL;
	}
	if (ts < oldest) {
		*why = "ts is older than the retention window";
		json_object_put(c);
		return NULL;
	}
	return c;
}

int
api_agent_metrics(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *samples = NULL, *clean, *check, *o;
	struct jfields f;
	struct metrics_tx t = { .req = req };
	int64_t now = time_now_us();
	size_t n;

	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	jf_array(&f, "samples", true, &samples);
	if (jf_finish(&f) < 0)
		return -1;
	n = json_object_array_length(samples);
	if (n > METRICS_MAX_SAMPLES)
		return gp_error_field(err, "samples", "at most %d samples per batch",
		    METRICS_MAX_SAMPLES);
	clean = json_own(req->arena, json_object_new_array());
	check = json_own(req->arena, json_object_new_array());
	t.rejected = json_own(req->arena, json_object_new_array());
	for (size_t i = 0; i < n; i++) {
		const char *why = NULL;
		struct json_object *c = metrics_sample(req, json_object_array_get_idx(samples, i),
				       i, now, &why),
				   *k;

		if (c == NULL) {
			reject(&t, i, why);
			continue;
		}
		json_object_array_add(clean, c);
		k = json_object_new_object();
		json_add_int(k, "i", (int64_t)i);
		json_object_object_add(k, "gpu_uuid",
		    json_object_get(json_object_object_get(c, "gpu_uuid")));
		json_object_object_add(k, "device_uuid",
		    json_object_get(json_object_object_get(c, "device_uuid")));
		json_object_array_add(check, k);
	}
	t.json = json_to_arena(req->arena, clean, NULL);
	t.check = json_to_arena(req->arena, check, NULL);
	if (db_tx(db_thread(), metrics_tx, &t, err) < 0)
		return -1;
	o = json_object_new_object();
	json_add_int(o, "stored", t.stored);
	json_object_object_add(o, "rejected", json_object_get(t.rejected));
	json_add_int(o, "rejected_count", t.nrejected);
	/* the names before issue 19, kept for older agents */
	json_add_int(o, "accepted", t.stored);
	json_add_int(o, "dropped", (int64_t)n - t.stored);
	response_json(req, res, 200, o);
	return 0;
}

/* ---- PUT /v1/agent/profiles ---- */

int
api_agent_profiles(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *profiles = NULL, *clean, *o;
	struct jfields f;
	const char *source = NULL, *json;
	int64_t violations = 0;
	size_t n;

	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	jf_string(&f, "source", false, 32, &source);
	jf_array(&f, "profiles", true, &profiles);
	if (jf_finish(&f) < 0)
		return -1;
	n = json_object_array_length(profiles);
	if (n > PROFILES_MAX)
		return gp_error_field(err, "profiles", "at most %d workloads", PROFILES_MAX);
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
		if (dev != NULL && !printable_id(dev, 100))
			gp_error_field(err, jf_path(&g, "device_uuid"), "must be a device UUID");
		if (ns != NULL && !api_dns_label(ns))
			gp_error_field(err, jf_path(&g, "namespace"),
			    "must be a Kubernetes namespace");
		if (pod != NULL && !printable_id(pod, 253))
			gp_error_field(err, jf_path(&g, "pod"), "must be a pod name");
		if (ctr != NULL && ctr[0] != '\0' && !printable_id(ctr, 253))
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
	json = json_to_arena(req->arena, clean, NULL);
	if (service_agent_profiles(db_thread(), req->arena, req->principal.node_id, json,
		&violations, err) < 0)
		return -1;
	o = json_object_new_object();
	json_add_int(o, "workloads", (int64_t)json_object_array_length(clean));
	json_add_int(o, "isolation_violations", violations);
	response_json(req, res, 200, o);
	return 0;
}

/* ---- GET /v1/gpus/{gpu}/metrics ---- */

int
api_gpu_metrics(struct request *req, struct response *res, struct gp_error *err)
{
	char uuid[64];
	const char *step_s = req->query(req, "step");
	int64_t from = 0, to = 0, now = time_now_us();
	int step = 0;
	bool found = false;
	const char *json = NULL;
	struct json_object *o;
	size_t len = strlen(req->params[0]);

	if (len >= sizeof(uuid))
		return gp_error_set(err, 404, "not_found", "no such gpu");
	for (size_t i = 0; i <= len; i++)
		uuid[i] =
		    (char)(i < 4 ? req->params[0][i] : tolower((unsigned char)req->params[0][i]));
	if (api_query_time(req, "from", &from, err) < 0 || api_query_time(req, "to", &to, err) < 0)
		return -1;
	if (to == 0)
		to = now;
	if (from == 0)
		from = to - INT64_C(3600) * 1000000;
	if (from >= to || to - from > METRICS_MAX_RANGE_US)
		return gp_error_field(err, "from", "must be before to, at most 400 days apart");
	if (step_s != NULL && strcmp(step_s, "raw") != 0) {
		char *end = NULL;
		long v = strtol(step_s, &end, 10);

		if (step_s[0] == '\0' || *end != '\0' || v < 1 || v > 31 * 86400)
			return gp_error_field(err, "step",
			    "must be raw or a number of seconds from 1 to 2678400");
		step = (int)v;
	}
	if (db_gpu_metrics(db_thread(), req->arena, uuid, from, to, step, METRICS_MAX_POINTS,
		&found, &json, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such gpu: %s", uuid);
	o = json_object_new_object();
	json_add_str(o, "gpu", uuid);
	json_add_time(o, "from", from);
	json_add_time(o, "to", to);
	if (step == 0)
		json_add_str(o, "step", "raw");
	else
		json_add_int(o, "step", step);
	json_add_str(o, "source", step == 0 ? "samples" : step % 3600 == 0 ? "hourly" : "samples");
	{
		struct json_object *series = json_tokener_parse(json),
				   *flat = json_object_new_array();

		/* "samples": every point of every device, with its device, in time order per device */
		for (size_t i = 0; series != NULL && i < json_object_array_length(series); i++) {
			struct json_object *sr = json_object_array_get_idx(series, i), *dev, *pts;

			json_object_object_get_ex(sr, "device_uuid", &dev);
			json_object_object_get_ex(sr, "points", &pts);
			for (size_t k = 0; pts != NULL && k < json_object_array_length(pts); k++) {
				struct json_object *pt = json_object_array_get_idx(pts, k), *c;

				c = json_object_new_object();
				json_object_object_add(c, "device_uuid", json_object_get(dev));
				json_object_object_foreach(pt, key, val)
				    json_object_object_add(c, key, json_object_get(val));
				json_object_array_add(flat, c);
			}
		}
		json_object_object_add(o, "samples", flat);
		json_object_object_add(o, "series", series);
	}
	response_json(req, res, 200, o);
	return 0;
}

/* ---- alerts ---- */

int
api_alerts_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct alert_filter f = { 0 };
	const char *json = NULL;
	int64_t next = 0;

	if (api_page(req, &f.limit, &f.after_id, err) < 0)
		return -1;
	f.user_id = api_sees_all_projects(req) ? 0 : req->principal.user_id;
	f.type = req->query(req, "type");
	f.state = req->query(req, "state");
	f.project = req->query(req, "project");
	f.node = req->query(req, "node");
	if (f.state != NULL && strcmp(f.state, "open") != 0 && strcmp(f.state, "resolved") != 0 &&
	    strcmp(f.state, "all") != 0)
		return gp_error_field(err, "state", "must be open, resolved or all");
	if (f.type != NULL && !printable_id(f.type, 41))
		return gp_error_field(err, "type", "is not an alert type");
	if (db_alerts_list(db_thread(), req->arena, &f, &json, &next, err) < 0)
		return -1;
	api_reply_list(req, res, json_tokener_parse(json), next);
	return 0;
}

struct ack_tx {
	struct request *req;
	int64_t id;
	const char *json;
};

static int
ack_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct ack_tx *t = arg;
	bool owner = false;
	enum role r = api_role(t->req);

	if (db_alert_get(db, t->req->arena, t->id,
		api_sees_all_projects(t->req) ? 0 : t->req->principal.user_id, &t->json, &owner,
		err) < 0)
		return -1;
	if (t->json == NULL)
		return gp_error_set(err, 404, "not_found", "no such alert");
	if (r != ROLE_ADMIN && r != ROLE_OPERATOR && !owner)
		return gp_error_set(err, 403, "forbidden",
		    "only operators, admins and owners of the alert's project acknowledge it");
	if (db_alert_ack(db, t->req->arena, t->id, t->req->principal.user_id, &t->json, err) < 0)
		return -1;
	return api_audit(db, t->req, "alert.ack", "alert",
	    arena_printf(t->req->arena, "%lld", (long long)t->id), 0, NULL, NULL, err);
}

int
api_alerts_ack(struct request *req, struct response *res, struct gp_error *err)
{
	struct ack_tx t = { .req = req };

	if (api_param_id(req, 0, &t.id, err) < 0 || db_tx(db_thread(), ack_tx, &t, err) < 0)
		return -1;
	response_json(req, res, 200, json_tokener_parse(t.json));
	return 0;
}

const char *
alerts_metrics_text(struct arena *a)
{
	static const char *const types[] = { "gpu_failed", "gpu_degraded", "xid_unknown",
		"node_unknown", "drift", "pool_degraded", "push_failed", "isolation_violation",
		"idle" };
	struct gp_error err;
	const char *json = NULL;
	struct json_object *o;
	struct strbuf b;

	gp_error_clear(&err);
	if (db_alerts_active(db_thread(), a, &json, &err) < 0 || json == NULL)
		return NULL;
	o = json_own(a, json_tokener_parse(json));
	strbuf_init(&b, a, 1024);
	strbuf_printf(&b,
	    "# HELP gpupool_alerts_active Open alerts, by type.\n"
	    "# TYPE gpupool_alerts_active gauge\n");
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		struct json_object *v = NULL;

		json_object_object_get_ex(o, types[i], &v);
		strbuf_printf(&b, "gpupool_alerts_active{type=\"%s\"} %lld\n", types[i],
		    (long long)(v ? json_object_get_int64(v) : 0));
	}
	return b.p;
}

/* ---- GET /v1/profiles ---- */

int
api_profiles_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct profile_filter f = { 0 };
	const char *json = NULL, *cur = req->query(req, "current");
	int64_t next = 0;

	if (api_page(req, &f.limit, &f.after_id, err) < 0)
		return -1;
	f.user_id = api_sees_all_projects(req) ? 0 : req->principal.user_id;
	f.project = req->query(req, "project");
	f.node = req->query(req, "node");
	f.pool = req->query(req, "pool");
	f.current = cur == NULL || strcmp(cur, "true") == 0;
	if (cur != NULL && strcmp(cur, "true") != 0 && strcmp(cur, "false") != 0)
		return gp_error_field(err, "current", "must be true or false");
	if (db_profiles_list(db_thread(), req->arena, &f, &json, &next, err) < 0)
		return -1;
	api_reply_list(req, res, json_tokener_parse(json), next);
	return 0;
}
