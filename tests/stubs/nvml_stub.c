/*
 * nvml_stub.c - a stand-in libnvidia-ml.so.1 for tests: the NVML functions
 * gpupool-agent's nvml backend uses (client/agent/nvml_abi.h), with MIG
 * state kept in memory, so the backend's real code runs in CI.
 *
 * GPUs come from the JSON file named by GPUPOOL_NVML_STUB_CONFIG (see
 * tests/fixtures/nvml-stub/). When GPUPOOL_NVML_STUB_STATE names a file, the
 * MIG state is saved there after every change and loaded at nvmlInit, so
 * instances survive an agent restart as they would on hardware. GPU
 * instances follow NVML's rules: only the profile's placements, no
 * overlap, at most max instances, a GPU instance with a compute instance
 * cannot be destroyed (NVML_ERROR_IN_USE). XIDs listed in the config are
 * delivered once through nvmlEventSetWait_v2.
 *
 * Faults the tests turn on while an agent runs: the config is re-read on
 * every nvmlDeviceGetCount_v2 for each GPU's "lost": true (its handle and
 * UUID then answer NVML_ERROR_GPU_IS_LOST, as a GPU fallen off the bus
 * does) and "gi_error": N (nvmlDeviceGetGpuInstances answers NVML error N,
 * e.g. 999 NVML_ERROR_UNKNOWN).
 */
#include <json-c/json.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nvml_abi.h"

#define S_GPUS 8
#define S_GIS 8
#define S_PROFILES 8
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_IN_USE 19

struct sprofile {
	unsigned id, slices, compute, max;
	unsigned placements[8];
	int nplacements;
};

struct sgi {
	int used;
	unsigned id, profile_id, start, size, compute;
	int ci; /* compute instance exists */
	char uuid[96];
};

struct shandle {
	int kind; /* 0 GPU, 1 MIG device */
	int gpu, gi;
};

struct sgpu {
	char uuid[96], name[96];
	unsigned pci, memory_mib;
	int mig;
	struct sprofile prof[S_PROFILES];
	int nprof;
	struct sgi gi[S_GIS];
	unsigned next_id;
	unsigned long long ecc_unc, ecc_corr;
	unsigned remap_corr, remap_unc, remap_fail, recovery;
	int xids[16], nxids, xids_sent;
	int lost;     /* NVML_ERROR_GPU_IS_LOST for its handle and UUID */
	int gi_error; /* nvmlDeviceGetGpuInstances answers this error when not 0 */
	struct shandle h;
	struct shandle mh[S_GIS];
};

static struct sgpu g[S_GPUS];
static int ngpu;
static int inited;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
	int dummy;
} the_events;

static int
jint(struct json_object *o, const char *k, int def)
{
	struct json_object *v;
	return json_object_object_get_ex(o, k, &v) ? json_object_get_int(v) : def;
}

static const char *
jstr(struct json_object *o, const char *k, const char *def)
{
	struct json_object *v;
	return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : def;
}

static void
save_state(void)
{
	const char *path = getenv("GPUPOOL_NVML_STUB_STATE");
	if (path == NULL)
		return;
	struct json_object *root = json_object_new_array();
	for (int i = 0; i < ngpu; i++) {
		struct json_object *o = json_object_new_object(), *arr = json_object_new_array();
		json_object_object_add(o, "next_id", json_object_new_int((int)g[i].next_id));
		json_object_object_add(o, "xids_sent", json_object_new_int(g[i].xids_sent));
		for (int k = 0; k < S_GIS; k++) {
			struct sgi *s = &g[i].gi[k];
			if (!s->used)
				continue;
			struct json_object *e = json_object_new_object();
			json_object_object_add(e, "slot", json_object_new_int(k));
			json_object_object_add(e, "id", json_object_new_int((int)s->id));
			json_object_object_add(e, "profile_id",
			    json_object_new_int((int)s->profile_id));
			json_object_object_add(e, "start", json_object_new_int((int)s->start));
			json_object_object_add(e, "size", json_object_new_int((int)s->size));
			json_object_object_add(e, "compute", json_object_new_int((int)s->compute));
			json_object_object_add(e, "ci", json_object_new_int(s->ci));
			json_object_object_add(e, "uuid", json_object_new_string(s->uuid));
			json_object_array_add(arr, e);
		}
		json_object_object_add(o, "gis", arr);
		json_object_array_add(root, o);
	}
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	json_object_to_file(tmp, root);
	rename(tmp, path);
	json_object_put(root);
}

static void
load_state(void)
{
	const char *path = getenv("GPUPOOL_NVML_STUB_STATE");
	struct json_object *root = path ? json_object_from_file(path) : NULL;
	if (root == NULL)
		return;
	for (int i = 0; i < ngpu && i < (int)json_object_array_length(root); i++) {
		struct json_object *o = json_object_array_get_idx(root, (size_t)i), *arr;
		g[i].next_id = (unsigned)jint(o, "next_id", 1);
		g[i].xids_sent = jint(o, "xids_sent", 0);
		if (!json_object_object_get_ex(o, "gis", &arr))
			continue;
		for (size_t k = 0; k < json_object_array_length(arr); k++) {
			struct json_object *e = json_object_array_get_idx(arr, k);
			int slot = jint(e, "slot", -1);
			if (slot < 0 || slot >= S_GIS)
				continue;
			struct sgi *s = &g[i].gi[slot];
			s->used = 1;
			s->id = (unsigned)jint(e, "id", 0);
			s->profile_id = (unsigned)jint(e, "profile_id", 0);
			s->start = (unsigned)jint(e, "start", 0);
			s->size = (unsigned)jint(e, "size", 0);
			s->compute = (unsigned)jint(e, "compute", 0);
			s->ci = jint(e, "ci", 0);
			snprintf(s->uuid, sizeof(s->uuid), "%s", jstr(e, "uuid", ""));
		}
	}
	json_object_put(root);
}

nvmlReturn_t
nvmlInit_v2(void)
{
	pthread_mutex_lock(&mu);
	if (inited) {
		pthread_mutex_unlock(&mu);
		return NVML_SUCCESS;
	}
	const char *cfg = getenv("GPUPOOL_NVML_STUB_CONFIG");
	struct json_object *root = cfg ? json_object_from_file(cfg) : NULL, *gpus;
	if (root == NULL || !json_object_object_get_ex(root, "gpus", &gpus)) {
		json_object_put(root);
		pthread_mutex_unlock(&mu);
		return 9; /* NVML_ERROR_DRIVER_NOT_LOADED */
	}
	memset(g, 0, sizeof(g));
	ngpu = 0;
	for (size_t i = 0; i < json_object_array_length(gpus) && ngpu < S_GPUS; i++) {
		struct json_object *o = json_object_array_get_idx(gpus, i), *profs, *v;
		struct sgpu *d = &g[ngpu];
		snprintf(d->uuid, sizeof(d->uuid), "%s", jstr(o, "uuid", "GPU-stub"));
		snprintf(d->name, sizeof(d->name), "%s", jstr(o, "name", "NVIDIA Stub"));
		d->pci = (unsigned)strtoul(jstr(o, "pci_device_id", "0"), NULL, 16);
		d->memory_mib = (unsigned)jint(o, "memory_mib", 0);
		d->mig = jint(o, "mig", 0);
		d->ecc_unc = (unsigned long long)jint(o, "ecc_uncorrected", 0);
		d->ecc_corr = (unsigned long long)jint(o, "ecc_corrected", 0);
		d->remap_fail = (unsigned)jint(o, "remapped_rows_failure", 0);
		d->recovery = (unsigned)jint(o, "recovery_action", 0);
		d->next_id = 1;
		d->h.kind = 0;
		d->h.gpu = ngpu;
		if (json_object_object_get_ex(o, "xids", &v))
			for (size_t k = 0; k < json_object_array_length(v) && d->nxids < 16; k++)
				d->xids[d->nxids++] =
				    json_object_get_int(json_object_array_get_idx(v, k));
		if (json_object_object_get_ex(o, "profiles", &profs)) {
			for (size_t k = 0;
			     k < json_object_array_length(profs) && d->nprof < S_PROFILES; k++) {
				struct json_object *p = json_object_array_get_idx(profs, k), *pl;
				struct sprofile *sp = &d->prof[d->nprof++];
				sp->id = (unsigned)jint(p, "id", 0);
				sp->slices = (unsigned)jint(p, "slices", 1);
				sp->compute = (unsigned)jint(p, "compute", 1);
				sp->max = (unsigned)jint(p, "max", 1);
				if (json_object_object_get_ex(p, "placements", &pl))
					for (size_t x = 0;
					     x < json_object_array_length(pl) && x < 8; x++)
						sp->placements[sp->nplacements++] =
						    (unsigned)json_object_get_int(
							json_object_array_get_idx(pl, x));
			}
		}
		for (int k = 0; k < S_GIS; k++) {
			d->mh[k].kind = 1;
			d->mh[k].gpu = ngpu;
			d->mh[k].gi = k;
		}
		ngpu++;
	}
	json_object_put(root);
	load_state();
	inited = 1;
	pthread_mutex_unlock(&mu);
	return NVML_SUCCESS;
}

/* The faults of the config file as it is now (re-read: tests change it). */
static void
reload_faults(void)
{
	const char *cfg = getenv("GPUPOOL_NVML_STUB_CONFIG");
	struct json_object *root = cfg ? json_object_from_file(cfg) : NULL, *gpus;
	if (root == NULL || !json_object_object_get_ex(root, "gpus", &gpus)) {
		json_object_put(root);
		return;
	}
	pthread_mutex_lock(&mu);
	for (int i = 0; i < ngpu && i < (int)json_object_array_length(gpus); i++) {
		struct json_object *o = json_object_array_get_idx(gpus, (size_t)i), *v;
		g[i].lost = json_object_object_get_ex(o, "lost", &v) && json_object_get_boolean(v);
		g[i].gi_error = jint(o, "gi_error", 0);
	}
	pthread_mutex_unlock(&mu);
	json_object_put(root);
}

nvmlReturn_t
nvmlShutdown(void)
{
	return NVML_SUCCESS;
}

const char *
nvmlErrorString(nvmlReturn_t r)
{
	switch (r) {
	case NVML_SUCCESS:
		return "Success";
	case NVML_ERROR_INVALID_ARGUMENT:
		return "Invalid Argument";
	case NVML_ERROR_NOT_SUPPORTED:
		return "Not Supported";
	case NVML_ERROR_NOT_FOUND:
		return "Not Found";
	case NVML_ERROR_INSUFFICIENT_SIZE:
		return "Insufficient Size";
	case NVML_ERROR_IN_USE:
		return "In use by another client";
	case NVML_ERROR_GPU_IS_LOST:
		return "GPU is lost";
	case NVML_ERROR_INSUFFICIENT_RESOURCES:
		return "Insufficient Resources";
	default:
		return "Unknown Error";
	}
}

static struct shandle *
H(nvmlDevice_t d)
{
	return (struct shandle *)(void *)d;
}

static struct sgpu *
gpu_of(nvmlDevice_t d)
{
	if (!inited || d == NULL)
		return NULL;
	struct shandle *h = H(d);
	return h->gpu >= 0 && h->gpu < ngpu ? &g[h->gpu] : NULL;
}

nvmlReturn_t
nvmlDeviceGetCount_v2(unsigned int *n)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	reload_faults();
	*n = (unsigned)ngpu;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d)
{
	if (!inited)
		return NVML_ERROR_UNINITIALIZED;
	if (i >= (unsigned)ngpu)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (g[i].lost)
		return NVML_ERROR_GPU_IS_LOST;
	*d = (nvmlDevice_t)(void *)&g[i].h;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetUUID(nvmlDevice_t d, char *buf, unsigned int len)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (s->lost)
		return NVML_ERROR_GPU_IS_LOST;
	const char *u = H(d)->kind == 0 ? s->uuid : s->gi[H(d)->gi].uuid;
	if (strlen(u) + 1 > len)
		return NVML_ERROR_INSUFFICIENT_SIZE;
	strcpy(buf, u);
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetName(nvmlDevice_t d, char *buf, unsigned int len)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	snprintf(buf, len, "%s", s->name);
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *p)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	memset(p, 0, sizeof(*p));
	p->pciDeviceId = s->pci;
	p->bus = (unsigned)H(d)->gpu + 0x18;
	snprintf(p->busId, sizeof(p->busId), "00000000:%02X:00.0", p->bus);
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	m->total = (unsigned long long)s->memory_mib * 1024 * 1024;
	m->used = 59ULL * 1024 * 1024;
	m->free = m->total - m->used;
	return NVML_SUCCESS;
}

/* v2 as the driver does it: the reserve is apart, "used" is what processes hold
 * (the v1 call above counts the reserve as used); a wrong version is refused */
nvmlReturn_t
nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL || m == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (m->version != AG_NVML_MEMORY_V2)
		return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
	m->total = (unsigned long long)s->memory_mib * 1024 * 1024;
	m->reserved = 59ULL * 1024 * 1024;
	m->used = 0;
	m->free = m->total - m->reserved;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *cur, unsigned int *pend)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*cur = *pend = (unsigned)s->mig;
	return NVML_SUCCESS;
}

static struct sprofile *
profile(struct sgpu *s, unsigned id)
{
	for (int i = 0; i < s->nprof; i++)
		if (s->prof[i].id == id)
			return &s->prof[i];
	return NULL;
}

nvmlReturn_t
nvmlDeviceGetGpuInstances(nvmlDevice_t d, unsigned int pid, nvmlGpuInstance_t *out, unsigned int *n)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL || !s->mig)
		return s == NULL ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
	if (s->gi_error != 0)
		return (nvmlReturn_t)s->gi_error;
	if (profile(s, pid) == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	unsigned c = 0;
	for (int k = 0; k < S_GIS; k++)
		if (s->gi[k].used && s->gi[k].profile_id == pid)
			c++;
	if (c > *n) {
		*n = c;
		pthread_mutex_unlock(&mu);
		return NVML_ERROR_INSUFFICIENT_SIZE;
	}
	c = 0;
	for (int k = 0; k < S_GIS; k++)
		if (s->gi[k].used && s->gi[k].profile_id == pid)
			out[c++] = (nvmlGpuInstance_t)(void *)&s->gi[k];
	*n = c;
	pthread_mutex_unlock(&mu);
	return NVML_SUCCESS;
}

/* The GPU and slot of a GPU-instance handle. */
static int
gi_of(nvmlGpuInstance_t h, struct sgpu **s, int *slot)
{
	struct sgi *x = (struct sgi *)(void *)h;
	for (int i = 0; i < ngpu; i++)
		if (x >= &g[i].gi[0] && x < &g[i].gi[S_GIS]) {
			*s = &g[i];
			*slot = (int)(x - g[i].gi);
			return x->used ? 0 : -1;
		}
	return -1;
}

nvmlReturn_t
nvmlGpuInstanceGetInfo(nvmlGpuInstance_t h, nvmlGpuInstanceInfo_t *info)
{
	struct sgpu *s;
	int slot;
	if (gi_of(h, &s, &slot) != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	info->device = (nvmlDevice_t)(void *)&s->h;
	info->id = s->gi[slot].id;
	info->profileId = s->gi[slot].profile_id;
	info->placement.start = s->gi[slot].start;
	info->placement.size = s->gi[slot].size;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceCreateGpuInstanceWithPlacement(nvmlDevice_t d, unsigned int pid,
    const nvmlGpuInstancePlacement_t *pl, nvmlGpuInstance_t *out)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL || !s->mig)
		return s == NULL ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
	struct sprofile *p = profile(s, pid);
	if (p == NULL || pl->size != p->slices)
		return NVML_ERROR_INVALID_ARGUMENT;
	int allowed = 0;
	for (int i = 0; i < p->nplacements; i++)
		allowed |= p->placements[i] == pl->start;
	if (!allowed)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	unsigned same = 0;
	int free_slot = -1;
	for (int k = 0; k < S_GIS; k++) {
		struct sgi *x = &s->gi[k];
		if (!x->used) {
			if (free_slot < 0)
				free_slot = k;
			continue;
		}
		if (x->profile_id == pid)
			same++;
		if (pl->start < x->start + x->size && x->start < pl->start + pl->size) {
			pthread_mutex_unlock(&mu);
			return NVML_ERROR_INSUFFICIENT_RESOURCES;
		}
	}
	if (same >= p->max || free_slot < 0) {
		pthread_mutex_unlock(&mu);
		return NVML_ERROR_INSUFFICIENT_RESOURCES;
	}
	struct sgi *x = &s->gi[free_slot];
	memset(x, 0, sizeof(*x));
	x->used = 1;
	x->id = s->next_id++;
	x->profile_id = pid;
	x->start = pl->start;
	x->size = pl->size;
	x->compute = p->compute;
	snprintf(x->uuid, sizeof(x->uuid), "MIG-%.8s-stub-%04x-%04x-%012x", s->uuid + 4,
	    (unsigned)(s - g), x->id, pl->start * 16 + pl->size);
	*out = (nvmlGpuInstance_t)(void *)x;
	save_state();
	pthread_mutex_unlock(&mu);
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlGpuInstanceDestroy(nvmlGpuInstance_t h)
{
	struct sgpu *s;
	int slot;
	pthread_mutex_lock(&mu);
	if (gi_of(h, &s, &slot) != 0) {
		pthread_mutex_unlock(&mu);
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	if (s->gi[slot].ci) {
		pthread_mutex_unlock(&mu);
		return NVML_ERROR_IN_USE;
	}
	s->gi[slot].used = 0;
	save_state();
	pthread_mutex_unlock(&mu);
	return NVML_SUCCESS;
}

static const unsigned ci_slices[] = { 1, 2, 3, 4, 7, 8, 6 };

nvmlReturn_t
nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t h, unsigned int profile_,
    unsigned int eng, nvmlComputeInstanceProfileInfo_t *info)
{
	struct sgpu *s;
	int slot;
	if (gi_of(h, &s, &slot) != 0 || eng != 0 || profile_ >= 7)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (ci_slices[profile_] > s->gi[slot].compute)
		return NVML_ERROR_NOT_SUPPORTED;
	info->id = profile_;
	info->sliceCount = ci_slices[profile_];
	info->instanceCount = s->gi[slot].compute / ci_slices[profile_];
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t h, unsigned int pid,
    nvmlComputeInstance_t *out)
{
	struct sgpu *s;
	int slot;
	pthread_mutex_lock(&mu);
	if (gi_of(h, &s, &slot) != 0 || pid >= 7) {
		pthread_mutex_unlock(&mu);
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	/* the stub models the one CI covering the whole GI the agent makes */
	if (s->gi[slot].ci || ci_slices[pid] != s->gi[slot].compute) {
		pthread_mutex_unlock(&mu);
		return NVML_ERROR_INSUFFICIENT_RESOURCES;
	}
	s->gi[slot].ci = 1;
	*out = (nvmlComputeInstance_t)(void *)&s->mh[slot];
	save_state();
	pthread_mutex_unlock(&mu);
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t h, unsigned int pid,
    nvmlComputeInstance_t *out, unsigned int *n)
{
	struct sgpu *s;
	int slot;
	if (gi_of(h, &s, &slot) != 0 || pid >= 7)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned c = 0;
	if (s->gi[slot].ci && ci_slices[pid] == s->gi[slot].compute) {
		if (*n < 1)
			return NVML_ERROR_INSUFFICIENT_SIZE;
		out[c++] = (nvmlComputeInstance_t)(void *)&s->mh[slot];
	}
	*n = c;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlComputeInstanceDestroy(nvmlComputeInstance_t h)
{
	struct shandle *m = (struct shandle *)(void *)h;
	if (m == NULL || m->kind != 1 || m->gpu < 0 || m->gpu >= ngpu)
		return NVML_ERROR_INVALID_ARGUMENT;
	pthread_mutex_lock(&mu);
	struct sgi *x = &g[m->gpu].gi[m->gi];
	if (!x->used || !x->ci) {
		pthread_mutex_unlock(&mu);
		return NVML_ERROR_INVALID_ARGUMENT;
	}
	x->ci = 0;
	save_state();
	pthread_mutex_unlock(&mu);
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t d, unsigned int *n)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*n = s->mig ? 7 : 0;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t d, unsigned int idx, nvmlDevice_t *out)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL || H(d)->kind != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	unsigned c = 0;
	for (int k = 0; k < S_GIS; k++) {
		if (!s->gi[k].used || !s->gi[k].ci)
			continue;
		if (c++ == idx) {
			*out = (nvmlDevice_t)(void *)&s->mh[k];
			return NVML_SUCCESS;
		}
	}
	return NVML_ERROR_NOT_FOUND;
}

nvmlReturn_t
nvmlDeviceGetGpuInstanceId(nvmlDevice_t d, unsigned int *id)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL || H(d)->kind != 1)
		return NVML_ERROR_INVALID_ARGUMENT;
	*id = s->gi[H(d)->gi].id;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*mw = 71150;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *t)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL || sensor != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*t = 42;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	if (s->mig)
		return NVML_ERROR_NOT_SUPPORTED; /* as on real MIG GPUs */
	u->gpu = 37;
	u->memory = 5;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int counter, unsigned long long *n)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL || counter != 0)
		return NVML_ERROR_INVALID_ARGUMENT;
	*n = type == 1 ? s->ecc_unc : s->ecc_corr;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetRemappedRows(nvmlDevice_t d, unsigned int *corr, unsigned int *unc,
    unsigned int *pending, unsigned int *failed)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	*corr = s->remap_corr;
	*unc = s->remap_unc;
	*pending = 0;
	*failed = s->remap_fail;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceGetFieldValues(nvmlDevice_t d, int n, nvmlFieldValue_t *v)
{
	struct sgpu *s = gpu_of(d);
	if (s == NULL)
		return NVML_ERROR_INVALID_ARGUMENT;
	for (int i = 0; i < n; i++) {
		if (v[i].fieldId == NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) {
			v[i].nvmlReturn = NVML_SUCCESS;
			v[i].valueType = 1;
			v[i].value.uiVal = s->recovery;
		} else {
			v[i].nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
		}
	}
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlEventSetCreate(nvmlEventSet_t *set)
{
	*set = (nvmlEventSet_t)(void *)&the_events;
	return NVML_SUCCESS;
}

nvmlReturn_t
nvmlDeviceRegisterEvents(nvmlDevice_t d, unsigned long long types, nvmlEventSet_t set)
{
	(void)types;
	(void)set;
	return gpu_of(d) ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t
nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *ev, unsigned int timeout_ms)
{
	(void)set;
	(void)timeout_ms;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < ngpu; i++) {
		if (g[i].xids_sent < g[i].nxids) {
			ev->device = (nvmlDevice_t)(void *)&g[i].h;
			ev->eventType = nvmlEventTypeXidCriticalError;
			ev->eventData = (unsigned long long)g[i].xids[g[i].xids_sent++];
			ev->gpuInstanceId = 0xFFFFFFFF;
			ev->computeInstanceId = 0xFFFFFFFF;
			save_state();
			pthread_mutex_unlock(&mu);
			return NVML_SUCCESS;
		}
	}
	pthread_mutex_unlock(&mu);
	return NVML_ERROR_TIMEOUT;
}

nvmlReturn_t
nvmlEventSetFree(nvmlEventSet_t set)
{
	(void)set;
	return NVML_SUCCESS;
}
