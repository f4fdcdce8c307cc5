/*
 * backend_fake.c - simulated GPUs for tests, demos and fleets.
 *
 * The GPUs come from --fake-gpus FILE ({"gpus":[{"model":"H100-80GB",
 * "count":2}]}), their UUIDs derived from the node name and index so they
 * are stable across restarts. MIG instances are realized in memory and in
 * <state-dir>/fake-state.json (like hardware, they survive an agent
 * restart), with the exact placement rules of the model in the GPU
 * catalog: a placement not allowed, overlapping another instance or past
 * the profile's limit fails as NVML would.
 *
 * Faults come from a file the tests write (<state-dir>/fake-faults.json
 * unless --fake-faults names another), re-read on every discover:
 *   {"gpus":[{"index":0,"xids":[79],"ecc_uncorrected":1,
 *             "remapped_rows_failure":true,"recovery_action":"gpu_reset"}],
 *    "fail_apply":[{"gpu":0,"profile":"3g.40gb","start":4,"message":"…"}],
 *    "pods":[{"device_uuid":"MIG-…","namespace":"ns","pod":"p","container":"c"}]}
 * Each XID listed is reported once (the count reported is kept in the
 * state file), as NVML's event queue would hand it over; repeated codes
 * are coalesced with a count. A GPU with "lost": true cannot be read at
 * all (reported lost with NVML's "GPU is lost", its Xids still handed
 * over); one with "unknown": true has its instances unreadable for the
 * scan (reported unknown). Both are undone by removing them. A top-level
 * "discovery_error": "…" fails every discovery with that message.
 */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "domain/catalog.h"
#include "util.h"

struct fake_gpu {
	const struct gpu_model *model;
	struct ag_gpu g; /* identity + instances */
	int created;     /* instances ever created: seeds MIG UUIDs */
	int xids_reported;
};

struct fake {
	struct catalog *cat;
	char node[256];
	char state_path[4096];
	char faults_path[4096];
	struct fake_gpu gpus[AG_MAX_GPUS];
	int ngpus;
};

static int
fake_save(struct fake *f)
{
	struct json_object *root = json_object_new_object();
	struct json_object *arr = json_object_new_array();
	for (int i = 0; i < f->ngpus; i++) {
		struct fake_gpu *fg = &f->gpus[i];
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "mig_enabled",
		    json_object_new_boolean(fg->g.mig_enabled));
		json_object_object_add(o, "created", json_object_new_int(fg->created));
		json_object_object_add(o, "xids_reported", json_object_new_int(fg->xids_reported));
		struct json_object *ia = json_object_new_array();
		for (int k = 0; k < fg->g.ninst; k++) {
			struct ag_instance *in = &fg->g.inst[k];
			struct json_object *io = json_object_new_object();
			json_object_object_add(io, "profile", json_object_new_string(in->profile));
			json_object_object_add(io, "start", json_object_new_int(in->start));
			json_object_object_add(io, "size", json_object_new_int(in->size));
			json_object_object_add(io, "uuid", json_object_new_string(in->uuid));
			json_object_object_add(io, "gi_id", json_object_new_int(in->gi_id));
			json_object_array_add(ia, io);
		}
		json_object_object_add(o, "instances", ia);
		json_object_array_add(arr, o);
	}
	json_object_object_add(root, "gpus", arr);
	const char *s = json_object_to_json_string_ext(root, JSON_C_TO_STRING_PLAIN);
	int rc = ag_write_file(f->state_path, s, strlen(s), 0600);
	json_object_put(root);
	return rc;
}

static void
fake_load_state(struct fake *f)
{
	char *txt = ag_read_file(f->state_path, NULL);
	if (txt == NULL)
		return;
	struct json_object *root = json_tokener_parse(txt);
	free(txt);
	struct json_object *arr;
	if (root == NULL || !json_object_object_get_ex(root, "gpus", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		json_object_put(root);
		return;
	}
	for (int i = 0; i < f->ngpus && i < (int)json_object_array_length(arr); i++) {
		struct fake_gpu *fg = &f->gpus[i];
		struct json_object *o = json_object_array_get_idx(arr, (size_t)i), *v, *ia;
		if (json_object_object_get_ex(o, "mig_enabled", &v))
			fg->g.mig_enabled = json_object_get_boolean(v) && fg->model->mig_capable;
		if (json_object_object_get_ex(o, "created", &v))
			fg->created = json_object_get_int(v);
		if (json_object_object_get_ex(o, "xids_reported", &v))
			fg->xids_reported = json_object_get_int(v);
		if (!json_object_object_get_ex(o, "instances", &ia) ||
		    !json_object_is_type(ia, json_type_array))
			continue;
		for (size_t k = 0;
		     k < json_object_array_length(ia) && fg->g.ninst < AG_MAX_INSTANCES; k++) {
			struct json_object *io = json_object_array_get_idx(ia, k);
			struct ag_instance *in = &fg->g.inst[fg->g.ninst];
			memset(in, 0, sizeof(*in));
			if (json_object_object_get_ex(io, "profile", &v))
				ag_strlcpy(in->profile, json_object_get_string(v),
				    sizeof(in->profile));
			if (json_object_object_get_ex(io, "start", &v))
				in->start = json_object_get_int(v);
			if (json_object_object_get_ex(io, "size", &v))
				in->size = json_object_get_int(v);
			if (json_object_object_get_ex(io, "uuid", &v))
				ag_strlcpy(in->uuid, json_object_get_string(v), sizeof(in->uuid));
			in->gi_id = -1;
			if (json_object_object_get_ex(io, "gi_id", &v))
				in->gi_id = json_object_get_int(v);
			fg->g.ninst++;
		}
	}
	json_object_put(root);
}

static struct json_object *
fake_faults(struct fake *f)
{
	char *txt = ag_read_file(f->faults_path, NULL);
	if (txt == NULL)
		return NULL;
	struct json_object *root = json_tokener_parse(txt);
	free(txt);
	return root;
}

static struct json_object *
faults_for_gpu(struct json_object *faults, int index)
{
	struct json_object *arr, *v;
	if (faults == NULL || !json_object_object_get_ex(faults, "gpus", &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return NULL;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *o = json_object_array_get_idx(arr, i);
		if (json_object_object_get_ex(o, "index", &v) && json_object_get_int(v) == index)
			return o;
	}
	return NULL;
}

static int
fake_discover(struct ag_backend *b, struct ag_node *node, char *err, size_t errlen)
{
	struct fake *f = b->priv;
	struct json_object *faults = fake_faults(f), *de;
	bool dirty = false;
	long long now = ag_now();
	if (faults != NULL && json_object_object_get_ex(faults, "discovery_error", &de)) {
		/* the whole read fails, as a failed nvidia-smi -q would */
		snprintf(err, errlen, "%s", json_object_get_string(de));
		json_object_put(faults);
		return -1;
	}
	node->ngpus = f->ngpus;
	for (int i = 0; i < f->ngpus; i++) {
		struct fake_gpu *fg = &f->gpus[i];
		struct ag_gpu *g = &node->gpus[i];
		ag_gpu_init(g);
		ag_strlcpy(g->uuid, fg->g.uuid, sizeof(g->uuid));
		g->index = fg->g.index;
		ag_strlcpy(g->product_name, fg->g.product_name, sizeof(g->product_name));
		ag_strlcpy(g->pci_device_id, fg->g.pci_device_id, sizeof(g->pci_device_id));
		g->memory_mib = fg->g.memory_mib;
		g->mig_enabled = fg->g.mig_enabled;
		g->ninst = fg->g.ninst;
		memcpy(g->inst, fg->g.inst, sizeof(g->inst));
		g->ecc_uncorrected = 0;
		g->ecc_corrected = 0;
		g->remapped_rows = 0;
		/* synthetic telemetry: busier with more instances */
		g->power_w = 70.0 + 60.0 * g->ninst + (double)ag_rand(100) / 10.0;
		g->sm_active = g->ninst > 0 ? 0.15 * g->ninst : 0.0;
		if (g->sm_active > 1)
			g->sm_active = 1;
		g->temperature_c = 38.0 + 4.0 * g->ninst + (double)ag_rand(20) / 10.0;
		g->memory_total_mib = fg->g.memory_mib;
		g->memory_used_mib = 59 + 512LL * g->ninst;
		struct json_object *fo = faults_for_gpu(faults, g->index), *v;
		if (fo == NULL)
			continue;
		if (json_object_object_get_ex(fo, "ecc_uncorrected", &v))
			g->ecc_uncorrected = json_object_get_int64(v);
		if (json_object_object_get_ex(fo, "ecc_corrected", &v))
			g->ecc_corrected = json_object_get_int64(v);
		if (json_object_object_get_ex(fo, "remapped_rows_failure", &v))
			g->remapped_rows_failure = json_object_get_boolean(v);
		if (json_object_object_get_ex(fo, "remapped_rows", &v))
			g->remapped_rows = json_object_get_int(v);
		if (json_object_object_get_ex(fo, "recovery_action", &v))
			ag_strlcpy(g->recovery_action, json_object_get_string(v),
			    sizeof(g->recovery_action));
		if (json_object_object_get_ex(fo, "xids", &v) &&
		    json_object_is_type(v, json_type_array)) {
			int n = (int)json_object_array_length(v);
			for (int k = fg->xids_reported; k < n; k++)
				(void)ag_xid_add(g->xids, &g->nxids, AG_MAX_XIDS,
				    json_object_get_int(json_object_array_get_idx(v, (size_t)k)),
				    now, 1);
			if (n > fg->xids_reported) {
				fg->xids_reported = n;
				dirty = true;
			}
		}
		if (json_object_object_get_ex(fo, "lost", &v) && json_object_get_boolean(v)) {
			ag_gpu_mark(g, AG_GPU_LOST, "nvmlDeviceGetHandleByIndex_v2: GPU is lost");
			for (int k = 0; k < g->nxids; k++)
				if (ag_xid_is_reset_class(g->xids[k].xid))
					g->lost_xid = g->xids[k].xid;
		} else if (json_object_object_get_ex(fo, "unknown", &v) &&
		    json_object_get_boolean(v)) {
			ag_gpu_mark(g, AG_GPU_UNKNOWN, "nvmlDeviceGetGpuInstances: Unknown Error");
		}
	}
	json_object_put(faults);
	if (dirty)
		fake_save(f);
	return 0;
}

static struct fake_gpu *
fake_gpu(struct fake *f, int index, char *err, size_t errlen)
{
	for (int i = 0; i < f->ngpus; i++)
		if (f->gpus[i].g.index == index)
			return &f->gpus[i];
	snprintf(err, errlen, "no GPU with index %d", index);
	return NULL;
}

/* A fail_apply entry of the fault file matching this create, or NULL. */
static const char *
fake_injected_failure(struct json_object *faults, int gpu, const char *profile, int start)
{
	struct json_object *arr, *v;
	if (faults == NULL || !json_object_object_get_ex(faults, "fail_apply", &arr) ||
	    !json_object_is_type(arr, json_type_array))
		return NULL;
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *o = json_object_array_get_idx(arr, i);
		if (json_object_object_get_ex(o, "gpu", &v) && json_object_get_int(v) != gpu)
			continue;
		if (json_object_object_get_ex(o, "profile", &v) &&
		    strcmp(json_object_get_string(v), profile) != 0)
			continue;
		if (json_object_object_get_ex(o, "start", &v) && json_object_get_int(v) != start)
			continue;
		if (json_object_object_get_ex(o, "message", &v))
			return json_object_get_string(v);
		return "injected failure";
	}
	return NULL;
}

static int
fake_create(struct ag_backend *b, int gpu_index, const char *profile, int start, char *uuid,
    size_t uuidlen, char *err, size_t errlen)
{
	struct fake *f = b->priv;
	struct fake_gpu *fg = fake_gpu(f, gpu_index, err, errlen);
	if (fg == NULL)
		return -1;
	if (!fg->g.mig_enabled) {
		snprintf(err, errlen, "MIG mode is disabled on GPU %d", gpu_index);
		return -1;
	}
	const struct mig_profile *p = catalog_profile(fg->model, profile);
	if (p == NULL) {
		snprintf(err, errlen, "%s offers no MIG profile %s", fg->model->id, profile);
		return -1;
	}
	if (!catalog_profile_allows(p, start)) {
		snprintf(err, errlen, "placement start %d is not allowed for %s", start, profile);
		return -1;
	}
	int same = 0;
	for (int k = 0; k < fg->g.ninst; k++) {
		struct ag_instance *in = &fg->g.inst[k];
		if (strcmp(in->profile, profile) == 0)
			same++;
		if (start < in->start + in->size && in->start < start + p->memory_slices) {
			snprintf(err, errlen,
			    "placement %d:%d overlaps the %s instance at %d:%d (insufficient resources)",
			    start, p->memory_slices, in->profile, in->start, in->size);
			return -1;
		}
	}
	if (same >= p->max_instances || fg->g.ninst >= AG_MAX_INSTANCES) {
		snprintf(err, errlen, "%s already has %d instance(s) of %s", fg->g.uuid, same,
		    profile);
		return -1;
	}
	struct json_object *faults = fake_faults(f);
	const char *inj = fake_injected_failure(faults, gpu_index, profile, start);
	if (inj != NULL) {
		snprintf(err, errlen, "%s", inj);
		json_object_put(faults);
		return -1;
	}
	json_object_put(faults);
	struct ag_instance *in = &fg->g.inst[fg->g.ninst];
	memset(in, 0, sizeof(*in));
	ag_strlcpy(in->profile, profile, sizeof(in->profile));
	in->start = start;
	in->size = p->memory_slices;
	fg->created++;
	in->gi_id = fg->created;
	char seed[512];
	snprintf(seed, sizeof(seed), "%s/%s/%d/%d", fg->g.uuid, profile, start, fg->created);
	ag_derive_uuid("MIG", seed, in->uuid, sizeof(in->uuid));
	fg->g.ninst++;
	ag_strlcpy(uuid, in->uuid, uuidlen);
	if (fake_save(f) != 0) {
		snprintf(err, errlen, "cannot write %s", f->state_path);
		return -1;
	}
	return 0;
}

static int
fake_destroy(struct ag_backend *b, int gpu_index, const char *profile, int start, char *err,
    size_t errlen)
{
	struct fake *f = b->priv;
	struct fake_gpu *fg = fake_gpu(f, gpu_index, err, errlen);
	if (fg == NULL)
		return -1;
	for (int k = 0; k < fg->g.ninst; k++) {
		if (fg->g.inst[k].start == start && strcmp(fg->g.inst[k].profile, profile) == 0) {
			memmove(&fg->g.inst[k], &fg->g.inst[k + 1],
			    sizeof(fg->g.inst[0]) * (size_t)(fg->g.ninst - k - 1));
			fg->g.ninst--;
			if (fake_save(f) != 0) {
				snprintf(err, errlen, "cannot write %s", f->state_path);
				return -1;
			}
			return 0;
		}
	}
	snprintf(err, errlen, "no %s instance at start %d on GPU %d", profile, start, gpu_index);
	return -1;
}

static int
fake_set_mig(struct ag_backend *b, int gpu_index, bool enabled, char *err, size_t errlen)
{
	struct fake *f = b->priv;
	struct fake_gpu *fg = fake_gpu(f, gpu_index, err, errlen);
	if (fg == NULL)
		return -1;
	if (enabled && !fg->model->mig_capable) {
		snprintf(err, errlen, "%s is not MIG-capable", fg->model->id);
		return -1;
	}
	if (fg->g.ninst > 0 && fg->g.mig_enabled && !enabled) {
		snprintf(err, errlen, "GPU %d still has MIG instances", gpu_index);
		return -1;
	}
	fg->g.mig_enabled = enabled;
	return fake_save(f);
}

static int
fake_profiles(struct ag_backend *b, struct ag_profile *out, int max, int *n)
{
	struct fake *f = b->priv;
	*n = 0;
	struct json_object *faults = fake_faults(f), *arr, *v;
	if (faults != NULL && json_object_object_get_ex(faults, "pods", &arr) &&
	    json_object_is_type(arr, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(arr) && *n < max; i++) {
			struct json_object *o = json_object_array_get_idx(arr, i);
			struct ag_profile *p = &out[*n];
			memset(p, 0, sizeof(*p));
			if (json_object_object_get_ex(o, "device_uuid", &v))
				ag_strlcpy(p->device_uuid, json_object_get_string(v),
				    sizeof(p->device_uuid));
			if (json_object_object_get_ex(o, "namespace", &v))
				ag_strlcpy(p->ns, json_object_get_string(v), sizeof(p->ns));
			if (json_object_object_get_ex(o, "pod", &v))
				ag_strlcpy(p->pod, json_object_get_string(v), sizeof(p->pod));
			if (json_object_object_get_ex(o, "container", &v))
				ag_strlcpy(p->container, json_object_get_string(v),
				    sizeof(p->container));
			if (p->device_uuid[0] != '\0')
				(*n)++;
		}
	}
	json_object_put(faults);
	return 0;
}

static void
fake_free(struct ag_backend *b)
{
	struct fake *f = b->priv;
	catalog_free(f->cat);
	free(f);
	free(b);
}

static const struct ag_backend_ops fake_ops = {
	.name = "fake",
	.discover = fake_discover,
	.create = fake_create,
	.destroy = fake_destroy,
	.set_mig = fake_set_mig,
	.profiles = fake_profiles,
	.free = fake_free,
};

struct ag_backend *
ag_backend_fake_open(const struct ag_backend_config *cfg, char *err, size_t errlen)
{
	if (cfg->fake_gpus == NULL) {
		snprintf(err, errlen, "--backend fake needs --fake-gpus FILE");
		return NULL;
	}
	char *txt = ag_read_file(cfg->fake_gpus, NULL);
	if (txt == NULL) {
		snprintf(err, errlen, "cannot read %s", cfg->fake_gpus);
		return NULL;
	}
	struct json_object *root = json_tokener_parse(txt);
	free(txt);
	struct json_object *arr;
	if (root == NULL || !json_object_object_get_ex(root, "gpus", &arr) ||
	    !json_object_is_type(arr, json_type_array)) {
		snprintf(err, errlen, "%s: expected {\"gpus\":[{\"model\":…,\"count\":N}]}",
		    cfg->fake_gpus);
		json_object_put(root);
		return NULL;
	}
	struct fake *f = calloc(1, sizeof(*f));
	struct ag_backend *b = calloc(1, sizeof(*b));
	struct gp_error gerr;
	gp_error_clear(&gerr);
	if (f == NULL || b == NULL || catalog_load_builtin(&f->cat, &gerr) != 0) {
		snprintf(err, errlen, "cannot load the GPU catalog: %s", gerr.message);
		goto fail;
	}
	ag_strlcpy(f->node, cfg->node_name, sizeof(f->node));
	snprintf(f->state_path, sizeof(f->state_path), "%s/fake-state.json", cfg->state_dir);
	if (cfg->fake_faults != NULL)
		ag_strlcpy(f->faults_path, cfg->fake_faults, sizeof(f->faults_path));
	else
		snprintf(f->faults_path, sizeof(f->faults_path), "%s/fake-faults.json",
		    cfg->state_dir);
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *o = json_object_array_get_idx(arr, i), *v;
		const char *model = NULL;
		int count = 1;
		if (json_object_object_get_ex(o, "model", &v))
			model = json_object_get_string(v);
		if (json_object_object_get_ex(o, "count", &v))
			count = json_object_get_int(v);
		const struct gpu_model *m = model ? catalog_model(f->cat, model) : NULL;
		if (m == NULL) {
			snprintf(err, errlen, "%s: gpus[%zu]: unknown model \"%s\"", cfg->fake_gpus,
			    i, model ? model : "");
			goto fail;
		}
		bool mig = m->mig_capable;
		if (json_object_object_get_ex(o, "mig_enabled", &v))
			mig = json_object_get_boolean(v) && m->mig_capable;
		if (count < 0 || f->ngpus + count > AG_MAX_GPUS) {
			snprintf(err, errlen, "%s: at most %d GPUs", cfg->fake_gpus, AG_MAX_GPUS);
			goto fail;
		}
		for (int k = 0; k < count; k++) {
			struct fake_gpu *fg = &f->gpus[f->ngpus];
			fg->model = m;
			ag_gpu_init(&fg->g);
			fg->g.index = f->ngpus;
			char seed[512];
			snprintf(seed, sizeof(seed), "%s/%d", cfg->node_name, fg->g.index);
			ag_derive_uuid("GPU", seed, fg->g.uuid, sizeof(fg->g.uuid));
			ag_strlcpy(fg->g.product_name,
			    m->nproduct_names > 0 ? m->product_names[0] : m->id,
			    sizeof(fg->g.product_name));
			ag_strlcpy(fg->g.pci_device_id,
			    m->npci_device_ids > 0 ? m->pci_device_ids[0] : "",
			    sizeof(fg->g.pci_device_id));
			fg->g.memory_mib = m->memory_mib;
			fg->g.mig_enabled = mig;
			f->ngpus++;
		}
	}
	json_object_put(root);
	fake_load_state(f);
	b->ops = &fake_ops;
	b->priv = f;
	return b;
fail:
	json_object_put(root);
	if (f != NULL)
		catalog_free(f->cat);
	free(f);
	free(b);
	return NULL;
}
