/*
 * agent_status.c - POST /v1/agent/status (docs/agent.md): a node agent's
 * status report parsed and checked (GPUs, their health against the Xid
 * catalog, their MIG instances, the agent's errors), then applied by
 * service_agent_status. The node comes from the agent's token.
 */
#include "agent.h"
#include "agent_status.h"

#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domain/catalog.h"
#include "domain/health.h"
#include "service/agent_service.h"

#define AGENT_MAX_XIDS 64
#define AGENT_MAX_ERRORS 64
#define AGENT_MESSAGE_MAX 500 /* agent texts users see: control characters stripped */
#define AGENT_XID_COUNT_MAX 1000000000

/*
 * An agent's text as users see it (alerts, allocation errors): control
 * characters become spaces, at most max bytes (cut on a UTF-8 boundary).
 */
static const char *
agent_text(struct arena *a, const char *s, size_t max)
{
	size_t n = strlen(s);
	char *out;

	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	out = arena_strndup(a, s, n);
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	return out;
}

/*
 * One GPU of a status report → {"uuid","state","fail_reason","ecc_reason",
 * "degrade_reason","details","unknown_xids","instances"} for SQL.
 * "state": ok (instances are the truth), unknown (they could not be
 * listed: ignored), lost (the GPU cannot be read: failed at once).
 */
/*
 * A GPU's xid_events (at path): each appended to xlist as {xid, count},
 * those the catalog does not know to unknown as well, their codes to
 * xv[*nx..]. -1 after a field error (from before on).
 */
static int
status_xids(struct request *req, const struct xid_catalog *xc, struct json_object *xids,
    const char *path, int before, struct json_object *xlist, struct json_object *unknown, int *xv,
    int *nx, struct gp_error *err)
{
	for (size_t i = 0; xids != NULL && i < json_object_array_length(xids); i++) {
		struct json_object *e = json_object_array_get_idx(xids, i), *o;
		const char *p = arena_printf(req->arena, "%s.xid_events[%zu]", path, i);
		int64_t xid = 0, ts = 0, count = 1;
		struct jfields g;

		if (!json_object_is_type(e, json_type_object)) {
			gp_error_field(err, p, "must be an object");
			return -1;
		}
		jf_init(&g, req->arena, e, p, err);
		jf_int(&g, "xid", true, 1, 100000, &xid, NULL);
		jf_epoch_or_time(&g, "ts", false, &ts, NULL);
		jf_int(&g, "count", false, 1, AGENT_XID_COUNT_MAX, &count, NULL);
		if (jf_finish(&g) < 0 && err->nfields > before)
			return -1;
		xv[(*nx)++] = (int)xid;
		o = json_object_new_object();
		json_add_int(o, "xid", xid);
		json_add_int(o, "count", count);
		if (xid_lookup(xc, (int)xid, NULL) == XID_UNKNOWN)
			json_object_array_add(unknown, json_object_get(o));
		json_object_array_add(xlist, o);
	}
	return 0;
}

/*
 * A GPU's instances (at path; at most AGENT_MAX_INSTANCES, checked by the
 * caller) as a new array of {profile, start, size, uuid}; NULL after a
 * field error (from before on).
 */
static struct json_object *
status_instances(struct request *req, struct json_object *insts, const char *path, int before,
    struct gp_error *err)
{
	struct json_object *clean = json_object_new_array();

	for (size_t i = 0; insts != NULL && i < json_object_array_length(insts); i++) {
		struct json_object *e = json_object_array_get_idx(insts, i), *o;
		const char *p = arena_printf(req->arena, "%s.instances[%zu]", path, i);
		const char *profile = NULL, *iu = NULL;
		int64_t start = 0, size = 0;
		struct jfields g;

		if (!json_object_is_type(e, json_type_object)) {
			gp_error_field(err, p, "must be an object");
			json_object_put(clean);
			return NULL;
		}
		jf_init(&g, req->arena, e, p, err);
		jf_string(&g, "profile", true, 32, &profile);
		jf_int(&g, "start", true, 0, 7, &start, NULL);
		jf_int(&g, "size", true, 1, 8, &size, NULL);
		jf_string(&g, "uuid", false, 100, &iu);
		if ((jf_finish(&g) < 0 && err->nfields > before) || !agent_printable(profile) ||
		    (iu != NULL && !agent_printable(iu))) {
			if (err->nfields <= before)
				gp_error_field(err, p, "profile and uuid must be printable");
			json_object_put(clean);
			return NULL;
		}
		o = json_object_new_object();
		json_add_str(o, "profile", profile);
		json_add_int(o, "start", start);
		json_add_int(o, "size", size);
		json_add_str(o, "uuid", iu);
		json_object_array_add(clean, o);
	}
	return clean;
}

static struct json_object *
status_gpu(struct request *req, struct json_object *in, const char *path, struct gp_error *err)
{
	const struct xid_catalog *xc = api_app(req)->xids;
	struct jfields f;
	const char *uuid = NULL, *action = NULL, *state = NULL, *lost_error = NULL;
	int64_t index = 0, ecc = -1, lost_xid = 0;
	bool mig = false, remap_fail = false, remap_pending = false;
	struct json_object *insts = NULL, *xids = NULL, *out, *clean, *details, *xlist, *unknown;
	struct gpu_health_report hr;
	struct gpu_health_verdict hv;
	int xv[AGENT_MAX_XIDS + 1];
	int nx = 0, before = err->nfields;

	if (!json_object_is_type(in, json_type_object)) {
		gp_error_field(err, path, "must be an object");
		return NULL;
	}
	jf_init(&f, req->arena, in, path, err);
	jf_string(&f, "uuid", true, 64, &uuid);
	jf_int(&f, "index", false, 0, 15, &index, NULL);
	jf_string(&f, "state", false, 16, &state);
	jf_string(&f, "error", false, 2000, &lost_error);
	jf_int(&f, "xid", false, 1, 100000, &lost_xid, NULL);
	jf_bool(&f, "mig_enabled", false, &mig, NULL);
	jf_int(&f, "ecc_uncorrected", false, 0, INT64_MAX, &ecc, NULL);
	jf_bool(&f, "remapped_rows_failure", false, &remap_fail, NULL);
	jf_bool(&f, "remapped_rows_pending", false, &remap_pending, NULL);
	jf_string(&f, "recovery_action", false, 32, &action);
	jf_array(&f, "xid_events", false, &xids);
	jf_array(&f, "instances", false, &insts);
	jf_finish(&f);
	if (err->nfields > before)
		return NULL;
	if (state == NULL)
		state = "ok";
	if (strcmp(state, "ok") != 0 && strcmp(state, "unknown") != 0 &&
	    strcmp(state, "lost") != 0) {
		gp_error_field(err, jf_path(&f, "state"), "must be ok, unknown or lost");
		return NULL;
	}
	if (!agent_gpu_uuid_valid(uuid)) {
		gp_error_field(err, jf_path(&f, "uuid"), "must be GPU-<uuid> in lower-case hex");
		return NULL;
	}
	if (!health_recovery_action_valid(action)) {
		gp_error_field(err, jf_path(&f, "recovery_action"),
		    "must be none, gpu_reset, node_reboot, drain_p2p or drain_and_reset");
		return NULL;
	}
	if (xids != NULL && json_object_array_length(xids) > AGENT_MAX_XIDS) {
		gp_error_field(err, jf_path(&f, "xid_events"),
		    "at most %d events (coalesce repeats with \"count\")", AGENT_MAX_XIDS);
		return NULL;
	}
	details = json_own(req->arena, json_object_new_object());
	xlist = json_object_new_array();
	unknown = json_object_new_array();
	json_object_object_add(details, "xids", xlist);
	if (status_xids(req, xc, xids, path, before, xlist, unknown, xv, &nx, err) < 0) {
		json_object_put(unknown);
		return NULL;
	}
	if (strcmp(state, "lost") == 0 && lost_xid > 0)
		xv[nx++] = (int)lost_xid;
	if (insts != NULL && json_object_array_length(insts) > AGENT_MAX_INSTANCES) {
		gp_error_field(err, jf_path(&f, "instances"), "at most %d instances",
		    AGENT_MAX_INSTANCES);
		json_object_put(unknown);
		return NULL;
	}
	/* an unknown GPU's instances could not be listed: whatever came is ignored */
	clean = status_instances(req, strcmp(state, "ok") == 0 ? insts : NULL, path, before, err);
	if (clean == NULL) {
		json_object_put(unknown);
		return NULL;
	}
	hr.ecc_uncorrected = ecc;
	hr.remapped_rows_failure = remap_fail;
	hr.remapped_rows_pending = remap_pending;
	hr.recovery_action = action;
	hr.xids = xv;
	hr.nxids = nx;
	health_assess(xc, &hr, req->arena, &hv);
	if (strcmp(state, "lost") == 0) {
		const char *why =
		    lost_error != NULL ? agent_text(req->arena, lost_error, 200) : "no error given";

		json_add_str(details, "error", why);
		if (lost_xid > 0)
			json_add_int(details, "xid", lost_xid);
		/* a lost GPU is failed whatever else the report says */
		hv.fail = lost_xid > 0 ? arena_printf(req->arena, "the GPU is lost (Xid %lld): %s",
					     (long long)lost_xid, why)
				       : arena_printf(req->arena, "the GPU is lost: %s", why);
	}
	if (json_object_array_length(unknown) > 0)
		json_object_object_add(details, "unknown_xids", json_object_get(unknown));
	if (ecc >= 0)
		json_add_int(details, "ecc_uncorrected", ecc);
	out = json_object_new_object();
	json_add_str(out, "uuid", uuid);
	json_add_str(out, "state", state);
	json_add_str(out, "fail_reason", hv.fail);
	json_add_str(out, "ecc_reason", hv.ecc);
	json_add_str(out, "degrade_reason", hv.degrade);
	json_object_object_add(out, "details", json_object_get(details));
	json_object_object_add(out, "unknown_xids", unknown);
	json_object_object_add(out, "instances", clean);
	return out;
}

static struct json_object *
status_errors(struct request *req, struct json_object *in, struct gp_error *err)
{
	struct json_object *out = json_object_new_array();
	int before = err->nfields;

	for (size_t i = 0; in != NULL && i < json_object_array_length(in); i++) {
		struct json_object *e = json_object_array_get_idx(in, i), *o;
		const char *p = arena_printf(req->arena, "errors[%zu]", i);
		const char *gpu = NULL, *profile = NULL, *msg = NULL;
		int64_t start = -1;
		struct jfields g;

		if (!json_object_is_type(e, json_type_object)) {
			gp_error_field(err, p, "must be an object");
			continue;
		}
		jf_init(&g, req->arena, e, p, err);
		jf_string(&g, "gpu", false, 64, &gpu);
		jf_string(&g, "profile", false, 32, &profile);
		jf_int(&g, "start", false, 0, 7, &start, NULL);
		jf_string(&g, "message", true, 2000, &msg);
		jf_finish(&g);
		if (err->nfields > before)
			continue;
		msg = agent_text(req->arena, msg, AGENT_MESSAGE_MAX);
		o = json_object_new_object();
		json_add_str(o, "gpu", gpu);
		json_add_str(o, "profile", profile);
		if (start >= 0)
			json_add_int(o, "start", start);
		json_add_str(o, "message", msg);
		json_object_array_add(out, o);
	}
	return out;
}

int
api_agent_status(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *gpus = NULL, *errors = NULL, *clean, *errs;
	struct jfields f;
	struct agent_status_report r = { .node_id = req->principal.node_id };
	struct json_object *warnings = NULL;
	const char *result = NULL;

	if (api_body(req, &body, err) < 0)
		return -1;
	clean = json_own(req->arena, json_object_new_array());
	jf_init(&f, req->arena, body, "", err);
	jf_int(&f, "observed_generation", true, 0, INT64_MAX, &r.observed, NULL);
	jf_string(&f, "agent_version", false, 64, &r.version);
	jf_array(&f, "gpus", true, &gpus);
	jf_array(&f, "errors", false, &errors);
	jf_finish(&f);
	if (r.version != NULL && !agent_printable(r.version))
		gp_error_field(err, "agent_version", "must be printable");
	if (gpus != NULL && json_object_array_length(gpus) > AGENT_MAX_GPUS)
		gp_error_field(err, "gpus", "at most %d GPUs", AGENT_MAX_GPUS);
	else
		for (size_t i = 0; gpus != NULL && i < json_object_array_length(gpus); i++) {
			struct json_object *g = status_gpu(req, json_object_array_get_idx(gpus, i),
			    arena_printf(req->arena, "gpus[%zu]", i), err);

			if (g != NULL)
				json_object_array_add(clean, g);
		}
	if (errors != NULL && json_object_array_length(errors) > AGENT_MAX_ERRORS)
		gp_error_field(err, "errors", "at most %d errors", AGENT_MAX_ERRORS);
	errs = json_own(req->arena, status_errors(req, errors, err));
	if (gp_error_isset(err) || err->nfields > 0) {
		if (!gp_error_isset(err))
			gp_error_set(err, 422, "validation_failed",
			    "the status report is not valid");
		return -1;
	}
	r.gpus = clean;
	r.errors_json = json_to_arena(req->arena, errs, NULL);
	if (service_agent_status(db_thread(), req->arena, api_app(req)->catalog, &r, &warnings,
		&result, err) < 0)
		return -1;
	{
		struct json_object *o = json_tokener_parse(result);

		if (o == NULL)
			return gp_error_set(err, 500, "internal", "the status result is not JSON");
		json_object_object_add(o, "warnings", json_object_get(warnings));
		response_json(req, res, 200, o);
	}
	return 0;
}
