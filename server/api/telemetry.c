/*
 * telemetry.c - what node agents send besides their status (GPU samples,
 * workload profiles) and what users read of it: a GPU's metric series,
 * alerts (with acknowledgement) and workload profiles (docs/agent.md,
 * "Telemetry").
 */
#include "telemetry.h"

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
	struct metric_row *rows; /* the samples that passed on their own */
	size_t *index;           /* each one's index in the batch */
	int *pair;               /* each one's (gpu_uuid, device_uuid) in pairs */
	int n;
	struct metric_pair *pairs; /* distinct */
	int npairs;
	const char *pairs_json; /* [{"i","gpu_uuid","device_uuid"}] of pairs, i from 1 */
	int64_t stored;
	struct json_object *rejected; /* [{"index","reason"}] */
	int64_t nrejected;
	size_t checked_listed; /* rejected's length after the checks alone (a retried tx) */
	int64_t checked_count;
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
 * dropped alone, and one outside the partitions kept (retention days back
 * to tomorrow) is not stored. The batch's distinct (GPU, device) pairs are
 * checked in one statement; the rows go in with one COPY.
 */
static int
metrics_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct metrics_tx *t = arg;
	struct arena *a = t->req->arena;
	int64_t lo = 0, hi = 0;
	int k = 0;

	/* run again after a conflict: the checks' rejections alone */
	t->nrejected = t->checked_count;
	if (json_object_array_length(t->rejected) > t->checked_listed)
		json_object_array_del_idx(t->rejected, t->checked_listed,
		    json_object_array_length(t->rejected) - t->checked_listed);
	t->stored = 0;
	if (t->n == 0)
		return 0;
	if (db_metric_resolve(db, a, t->req->principal.node_id, t->pairs_json, t->pairs, t->npairs,
		api_app(t->req)->metrics_retention_days, &lo, &hi, err) < 0)
		return -1;
	for (int i = 0; i < t->n; i++) {
		const struct metric_pair *p = &t->pairs[t->pair[i]];

		if (p->verdict == METRIC_FOREIGN) {
			gp_error_field(err,
			    arena_printf(a, "samples[%zu].%s", t->index[i], p->field),
			    "is not a device of this node");
			return gp_error_set(err, 422, "validation_failed",
			    "samples[%zu] is not of this node: nothing stored", t->index[i]);
		}
	}
	for (int i = 0; i < t->n; i++) {
		const struct metric_pair *p = &t->pairs[t->pair[i]];
		struct metric_row *r = &t->rows[i];

		if (p->verdict == METRIC_UNKNOWN_DEVICE) {
			reject(t, t->index[i], "device_uuid is not a device of this GPU");
			continue;
		}
		if (r->ts_us < lo || r->ts_us >= hi)
			continue;
		r->gpu_id = p->gpu_id;
		r->device_uuid = p->device_uuid != NULL ? p->device_uuid : p->gpu_uuid_stored;
		if (k != i)
			t->rows[k] = *r;
		k++;
	}
	return db_metric_copy(db, a, t->rows, k, &t->stored, err);
}

/* FNV-1a over a (gpu_uuid, device_uuid) pair; device_uuid NULL hashes apart from "" */
static uint64_t
pair_hash(const char *gpu, const char *dev)
{
	uint64_t h = UINT64_C(14695981039346656037);

	for (const char *s = gpu; *s; s++)
		h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
	h = (h ^ (dev != NULL ? 0x01 : 0x02)) * UINT64_C(1099511628211);
	for (const char *s = dev ? dev : ""; *s; s++)
		h = (h ^ (unsigned char)*s) * UINT64_C(1099511628211);
	return h;
}

static bool
str_eq(const char *x, const char *y)
{
	return x == y || (x != NULL && y != NULL && strcmp(x, y) == 0);
}

/*
 * The index in t->pairs of (gpu, dev), added when new; slots is an open
 * addressing table of nslots (a power of two, more than the samples) entries
 * holding a pair's index + 1.
 */
static int
pair_of(struct metrics_tx *t, int *slots, size_t nslots, const char *gpu, const char *dev)
{
	size_t s = (size_t)pair_hash(gpu, dev) & (nslots - 1);

	for (;; s = (s + 1) & (nslots - 1)) {
		int p = slots[s] - 1;

		if (p < 0)
			break;
		if (strcmp(t->pairs[p].gpu_uuid, gpu) == 0 && str_eq(t->pairs[p].device_uuid, dev))
			return p;
	}
	memset(&t->pairs[t->npairs], 0, sizeof(t->pairs[0]));
	t->pairs[t->npairs].gpu_uuid = gpu;
	t->pairs[t->npairs].device_uuid = dev;
	slots[s] = ++t->npairs;
	return t->npairs - 1;
}

/* One sample, checked alone into *row, *gpu, *dev: true, or false with *why. */
static bool
metrics_sample(struct request *req, struct json_object *s, size_t i, int64_t now_us,
    struct metric_row *row, const char **gpu, const char **dev, const char **why)
{
	static const struct {
		const char *key;
		double min, max;
	} nums[METRIC_NUMS] = {
		[METRIC_POWER_W] = { "power_w", 0, 100000 },
		[METRIC_SM_ACTIVE] = { "sm_active", 0, 1 },
		[METRIC_MEMORY_USED_MIB] = { "memory_used_mib", 0, 1e9 },
		[METRIC_MEMORY_TOTAL_MIB] = { "memory_total_mib", 0, 1e9 },
		[METRIC_TEMPERATURE_C] = { "temperature_c", -100, 300 },
		[METRIC_ECC_CORRECTED] = { "ecc_corrected", 0, 9e18 },
		[METRIC_ECC_UNCORRECTED] = { "ecc_uncorrected", 0, 9e18 },
		[METRIC_LAST_XID] = { "last_xid", -1, 100000 },
		[METRIC_REMAPPED_ROWS] = { "remapped_rows", 0, 1e12 },
	};
	const char *path = arena_printf(req->arena, "samples[%zu]", i);
	int64_t ts = 0;
	int64_t oldest = now_us - (int64_t)api_app(req)->metrics_retention_days * 86400 * 1000000;
	struct jfields g;
	struct gp_error e;

	*gpu = *dev = NULL;
	gp_error_clear(&e);
	if (!json_object_is_type(s, json_type_object)) {
		*why = "must be an object";
		return false;
	}
	memset(row, 0, sizeof(*row));
	jf_init(&g, req->arena, s, path, &e);
	jf_epoch_or_time(&g, "ts", true, &ts, NULL);
	jf_string(&g, "gpu_uuid", true, 64, gpu);
	jf_string(&g, "device_uuid", false, 100, dev);
	for (int k = 0; k < METRIC_NUMS; k++) {
		double v = 0;
		bool present = false;

		jf_double(&g, nums[k].key, false, nums[k].min, nums[k].max, &v, &present);
		if (!present || (k == METRIC_LAST_XID && v < 0))
			continue;
		/* integer columns take the whole part, as the JSON batches did */
		row->num[k] = metric_num_integer(k) ? (double)(int64_t)v : v;
		row->has[k] = true;
	}
	jf_finish(&g);
	if (*gpu != NULL && !printable_id(*gpu, 64))
		gp_error_field(&e, jf_path(&g, "gpu_uuid"), "must be a GPU UUID");
	if (*dev != NULL && !printable_id(*dev, 100))
		gp_error_field(&e, jf_path(&g, "device_uuid"), "must be a device UUID");
	if (e.nfields > 0 || gp_error_isset(&e)) {
		*why = e.nfields > 0
		    ? arena_printf(req->arena, "%s: %s", e.fields[0].field, e.fields[0].message)
		    : arena_strdup(req->arena, e.message);
		return false;
	}
	if (ts > now_us + (int64_t)METRICS_MAX_FUTURE_S * 1000000) {
		*why = "ts is more than 300 s in the future";
		return false;
	}
	if (ts < oldest) {
		*why = "ts is older than the retention window";
		return false;
	}
	row->ts_us = ts;
	return true;
}

int
api_agent_metrics(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *samples = NULL, *o, *pj;
	struct jfields f;
	struct metrics_tx t = { .req = req };
	int64_t now = time_now_us();
	size_t n, nslots = 16;
	int *slots;

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
	while (nslots < 2 * n)
		nslots *= 2;
	slots = arena_alloc(req->arena, sizeof(*slots) * nslots);
	memset(slots, 0, sizeof(*slots) * nslots);
	t.rows = arena_alloc(req->arena, sizeof(*t.rows) * (n > 0 ? n : 1));
	t.index = arena_alloc(req->arena, sizeof(*t.index) * (n > 0 ? n : 1));
	t.pair = arena_alloc(req->arena, sizeof(*t.pair) * (n > 0 ? n : 1));
	t.pairs = arena_alloc(req->arena, sizeof(*t.pairs) * (n > 0 ? n : 1));
	t.rejected = json_own(req->arena, json_object_new_array());
	for (size_t i = 0; i < n; i++) {
		const char *why = NULL, *gpu = NULL, *dev = NULL;

		if (!metrics_sample(req, json_object_array_get_idx(samples, i), i, now,
			&t.rows[t.n], &gpu, &dev, &why)) {
			reject(&t, i, why);
			continue;
		}
		t.index[t.n] = i;
		t.pair[t.n] = pair_of(&t, slots, nslots, gpu, dev);
		t.n++;
	}
	pj = json_own(req->arena, json_object_new_array());
	for (int k = 0; k < t.npairs; k++) {
		struct json_object *c = json_object_new_object();

		json_add_int(c, "i", k + 1);
		json_add_str(c, "gpu_uuid", t.pairs[k].gpu_uuid);
		json_add_str(c, "device_uuid", t.pairs[k].device_uuid);
		json_object_array_add(pj, c);
	}
	t.pairs_json = json_to_arena(req->arena, pj, NULL);
	t.checked_listed = json_object_array_length(t.rejected);
	t.checked_count = t.nrejected;
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
