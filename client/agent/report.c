/*
 * report.c - JSON documents of the agent protocol.
 */
#include <string.h>

#include "core/timeutil.h"
#include "report.h"
#include "util.h"

struct json_object *
report_time(long long unix_s)
{
	char buf[40];
	time_format_rfc3339((int64_t)unix_s * 1000000, buf, sizeof(buf));
	return json_object_new_string(buf);
}

struct json_object *
report_time_ms(long long unix_ms)
{
	if (unix_ms % 1000 == 0)
		return report_time(unix_ms / 1000);
	char buf[40];
	time_format_rfc3339_ms((int64_t)unix_ms * 1000, buf, sizeof(buf));
	return json_object_new_string(buf);
}

static struct json_object *
instances_json(const struct ag_gpu *g)
{
	struct json_object *arr = json_object_new_array();
	for (int k = 0; k < g->ninst; k++) {
		const struct ag_instance *in = &g->inst[k];
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "profile", json_object_new_string(in->profile));
		json_object_object_add(o, "start", json_object_new_int(in->start));
		json_object_object_add(o, "size", json_object_new_int(in->size));
		json_object_object_add(o, "uuid",
		    in->uuid[0] ? json_object_new_string(in->uuid) : NULL);
		json_object_array_add(arr, o);
	}
	return arr;
}

struct json_object *
report_enroll_gpus(const struct ag_node *node)
{
	struct json_object *arr = json_object_new_array();
	for (int i = 0; i < node->ngpus; i++) {
		const struct ag_gpu *g = &node->gpus[i];
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "uuid", json_object_new_string(g->uuid));
		json_object_object_add(o, "index", json_object_new_int(g->index));
		json_object_object_add(o, "product_name", json_object_new_string(g->product_name));
		json_object_object_add(o, "pci_device_id",
		    json_object_new_string(g->pci_device_id));
		json_object_object_add(o, "memory_mib", json_object_new_int(g->memory_mib));
		json_object_object_add(o, "mig_enabled", json_object_new_boolean(g->mig_enabled));
		json_object_object_add(o, "instances", instances_json(g));
		json_object_array_add(arr, o);
	}
	return arr;
}

const char *
report_gpu_state(enum ag_gpu_state s)
{
	return s == AG_GPU_LOST ? "lost" : s == AG_GPU_UNKNOWN ? "unknown" : "ok";
}

struct json_object *
report_xid(const struct ag_xid *x)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "xid", json_object_new_int(x->xid));
	json_object_object_add(o, "ts", report_time(x->ts));
	/* "count" only when coalesced: a server of before it takes the rest */
	if (x->count > 1)
		json_object_object_add(o, "count", json_object_new_int(x->count));
	return o;
}

struct json_object *
report_status_gpus(const struct ag_node *node)
{
	struct json_object *arr = json_object_new_array();
	for (int i = 0; i < node->ngpus; i++) {
		const struct ag_gpu *g = &node->gpus[i];
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "uuid", json_object_new_string(g->uuid));
		json_object_object_add(o, "index", json_object_new_int(g->index));
		json_object_object_add(o, "mig_enabled", json_object_new_boolean(g->mig_enabled));
		/* "state" only when not ok (the default), with why */
		if (g->state != AG_GPU_OK) {
			json_object_object_add(o, "state",
			    json_object_new_string(report_gpu_state(g->state)));
			json_object_object_add(o, "error", json_object_new_string(g->error));
		}
		if (g->state == AG_GPU_LOST && g->lost_xid > 0)
			json_object_object_add(o, "xid", json_object_new_int(g->lost_xid));
		/* health only where it was read in this scan */
		if (g->state != AG_GPU_LOST && !g->stale) {
			json_object_object_add(o, "ecc_uncorrected",
			    g->ecc_uncorrected >= 0 ? json_object_new_int64(g->ecc_uncorrected)
						    : NULL);
			json_object_object_add(o, "remapped_rows_failure",
			    json_object_new_boolean(g->remapped_rows_failure));
			json_object_object_add(o, "recovery_action",
			    json_object_new_string(g->recovery_action));
		}
		struct json_object *xa = json_object_new_array();
		for (int k = 0; k < g->nxids; k++)
			json_object_array_add(xa, report_xid(&g->xids[k]));
		json_object_object_add(o, "xid_events", xa);
		/* instances are the truth for an ok GPU only */
		if (g->state == AG_GPU_OK)
			json_object_object_add(o, "instances", instances_json(g));
		json_object_array_add(arr, o);
	}
	return arr;
}

static void
add_num(struct json_object *o, const char *k, double v, bool integer)
{
	if (v < 0)
		json_object_object_add(o, k, NULL);
	else if (integer)
		json_object_object_add(o, k, json_object_new_int64((long long)v));
	else
		json_object_object_add(o, k, json_object_new_double(v));
}

void
report_samples(const struct ag_node *node, long long ts_ms, struct json_object *samples)
{
	for (int i = 0; i < node->ngpus; i++) {
		const struct ag_gpu *g = &node->gpus[i];
		if (g->state == AG_GPU_LOST || g->stale)
			continue; /* nothing was read: no sample */
		int last_xid = g->nxids > 0 ? g->xids[g->nxids - 1].xid : -1;
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "ts", report_time_ms(ts_ms));
		json_object_object_add(o, "gpu_uuid", json_object_new_string(g->uuid));
		json_object_object_add(o, "device_uuid", json_object_new_string(g->uuid));
		add_num(o, "power_w", g->power_w, false);
		add_num(o, "sm_active", g->sm_active, false);
		add_num(o, "memory_used_mib", (double)g->memory_used_mib, true);
		add_num(o, "memory_total_mib", (double)g->memory_total_mib, true);
		add_num(o, "temperature_c", g->temperature_c, false);
		add_num(o, "ecc_corrected", (double)g->ecc_corrected, true);
		add_num(o, "ecc_uncorrected", (double)g->ecc_uncorrected, true);
		add_num(o, "last_xid", last_xid, true);
		add_num(o, "remapped_rows", g->remapped_rows, true);
		json_object_array_add(samples, o);
	}
}

struct json_object *
report_discovery(const struct ag_node *node)
{
	struct json_object *root = json_object_new_object();
	struct json_object *gpus = report_enroll_gpus(node);
	struct json_object *st = report_status_gpus(node);
	/* enrich: the status fields next to the enroll ones */
	for (size_t i = 0; i < json_object_array_length(gpus); i++) {
		struct json_object *g = json_object_array_get_idx(gpus, i);
		struct json_object *s = json_object_array_get_idx(st, i);
		json_object_object_foreach(s, k, v)
		{
			if (!json_object_object_get_ex(g, k, NULL))
				json_object_object_add(g, k, json_object_get(v));
		}
		/* a GPU not ok: its instances were not read, none are claimed */
		if (!json_object_object_get_ex(s, "instances", NULL))
			json_object_object_del(g, "instances");
	}
	json_object_put(st);
	json_object_object_add(root, "gpus", gpus);
	struct json_object *samples = json_object_new_array();
	report_samples(node, ag_now() * 1000, samples);
	json_object_object_add(root, "telemetry", samples);
	return root;
}
