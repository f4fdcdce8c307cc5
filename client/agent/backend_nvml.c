/*
 * backend_nvml.c - the NVML backend: libnvidia-ml.so.1 loaded at run time
 * (dlopen; no build-time dependency), GPUs and MIG instances discovered,
 * GPU instances created at the exact placement the desired state names
 * (nvmlDeviceCreateGpuInstanceWithPlacement, then one compute instance
 * covering it), destroyed with their compute instances, and health (ECC,
 * remapped rows, XID events, recovery action) and telemetry read.
 *
 * A GPU instance's profile name comes from the GPU catalog: the model is
 * found by PCI device id (or product name) and the instance's NVML
 * profile id is matched against the catalog's profile ids.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "domain/catalog.h"
#include "nvml_abi.h"
#include "util.h"

struct nvml {
	void *lib;
	struct catalog *cat;
#define AG_NVML_PTR(name, ret, args) ret(*name) args;
	AG_NVML_FUNCS(AG_NVML_PTR)
#undef AG_NVML_PTR
	nvmlEventSet_t events; /* XID events of every GPU; NULL when unsupported */
	nvmlDevice_t devs[AG_MAX_GPUS];
	int ndevs;
	/* identities of the last discovery, by index: a GPU that cannot be
	 * read any more is reported lost under the identity it had */
	struct ag_gpu known[AG_MAX_GPUS];
};

static const char *
nv_err(struct nvml *n, nvmlReturn_t r)
{
	static __thread char buf[32];
	if (n->nvmlErrorString != NULL)
		return n->nvmlErrorString(r);
	snprintf(buf, sizeof(buf), "NVML error %d", r);
	return buf;
}

static const struct gpu_model *
nv_model(struct nvml *n, const struct ag_gpu *g)
{
	const struct gpu_model *m = catalog_model_by_pci_id(n->cat, g->pci_device_id);
	return m != NULL ? m : catalog_model_by_product(n->cat, g->product_name);
}

/* The compute-instance profile covering a GPU instance of compute slices c. */
static int
ci_profile_for(int c)
{
	switch (c) {
	case 1:
		return 0;
	case 2:
		return 1;
	case 3:
		return 2;
	case 4:
		return 3;
	case 7:
		return 4;
	case 8:
		return 5;
	case 6:
		return 6;
	default:
		return -1;
	}
}

/* Identity of GPU i: uuid, name, PCI id, memory, MIG mode. Returns 0, or
 * the NVML error of the UUID read. */
static int
nv_identity(struct nvml *n, nvmlDevice_t d, struct ag_gpu *g, char *err, size_t errlen)
{
	nvmlReturn_t r;
	char buf[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
	if ((r = n->nvmlDeviceGetUUID(d, buf, sizeof(buf))) != NVML_SUCCESS) {
		snprintf(err, errlen, "nvmlDeviceGetUUID(%d): %s", g->index, nv_err(n, r));
		return (int)r;
	}
	ag_strlcpy(g->uuid, buf, sizeof(g->uuid));
	char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
	if (n->nvmlDeviceGetName(d, name, sizeof(name)) == NVML_SUCCESS)
		ag_strlcpy(g->product_name, name, sizeof(g->product_name));
	nvmlPciInfo_t pci;
	memset(&pci, 0, sizeof(pci));
	if (n->nvmlDeviceGetPciInfo_v3(d, &pci) == NVML_SUCCESS)
		snprintf(g->pci_device_id, sizeof(g->pci_device_id), "0x%08X", pci.pciDeviceId);
	/* memory used as nvidia-smi shows it: without the driver's reserve (the
	 * v2 call, R510+); older drivers only have v1, which counts it (on an
	 * idle H200, driver 580: v1 615 MiB used, v2 and nvidia-smi 0) */
	nvmlMemory_v2_t m2;
	nvmlMemory_t mem;
	memset(&m2, 0, sizeof(m2));
	m2.version = AG_NVML_MEMORY_V2;
	if (n->nvmlDeviceGetMemoryInfo_v2 != NULL &&
	    n->nvmlDeviceGetMemoryInfo_v2(d, &m2) == NVML_SUCCESS) {
		g->memory_mib = (int)(m2.total / (1024 * 1024));
		g->memory_total_mib = (long long)(m2.total / (1024 * 1024));
		g->memory_used_mib = (long long)(m2.used / (1024 * 1024));
	} else if (n->nvmlDeviceGetMemoryInfo != NULL &&
	    n->nvmlDeviceGetMemoryInfo(d, &mem) == NVML_SUCCESS) {
		g->memory_mib = (int)(mem.total / (1024 * 1024));
		g->memory_total_mib = (long long)(mem.total / (1024 * 1024));
		g->memory_used_mib = (long long)(mem.used / (1024 * 1024));
	}
	unsigned cur = 0, pend = 0;
	g->mig_enabled = n->nvmlDeviceGetMigMode != NULL &&
	    n->nvmlDeviceGetMigMode(d, &cur, &pend) == NVML_SUCCESS && cur == 1;
	return 0;
}

static void
nv_health(struct nvml *n, nvmlDevice_t d, struct ag_gpu *g)
{
	unsigned v;
	unsigned long long ull;
	if (n->nvmlDeviceGetPowerUsage && n->nvmlDeviceGetPowerUsage(d, &v) == NVML_SUCCESS)
		g->power_w = v / 1000.0;
	if (n->nvmlDeviceGetTemperature &&
	    n->nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &v) == NVML_SUCCESS)
		g->temperature_c = v;
	nvmlUtilization_t u;
	if (!g->mig_enabled && n->nvmlDeviceGetUtilizationRates &&
	    n->nvmlDeviceGetUtilizationRates(d, &u) == NVML_SUCCESS)
		g->sm_active = u.gpu / 100.0;
	if (n->nvmlDeviceGetTotalEccErrors) {
		if (n->nvmlDeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
			NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS)
			g->ecc_uncorrected = (long long)ull;
		if (n->nvmlDeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_CORRECTED,
			NVML_VOLATILE_ECC, &ull) == NVML_SUCCESS)
			g->ecc_corrected = (long long)ull;
	}
	unsigned corr, unc, pending, failed;
	if (n->nvmlDeviceGetRemappedRows &&
	    n->nvmlDeviceGetRemappedRows(d, &corr, &unc, &pending, &failed) == NVML_SUCCESS) {
		g->remapped_rows = (int)(corr + unc);
		g->remapped_rows_failure = failed != 0;
	}
	if (n->nvmlDeviceGetFieldValues) {
		nvmlFieldValue_t fv;
		memset(&fv, 0, sizeof(fv));
		fv.fieldId = NVML_FI_DEV_GET_GPU_RECOVERY_ACTION;
		if (n->nvmlDeviceGetFieldValues(d, 1, &fv) == NVML_SUCCESS &&
		    fv.nvmlReturn == NVML_SUCCESS)
			ag_strlcpy(g->recovery_action, ag_recovery_action_name((int)fv.value.uiVal),
			    sizeof(g->recovery_action));
	}
}

/* An error of a listing call that means "none of these here" rather
 * than "could not be read". */
static bool
nv_benign(nvmlReturn_t r)
{
	return r == NVML_SUCCESS || r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_NOT_SUPPORTED ||
	    r == NVML_ERROR_INVALID_ARGUMENT;
}

/* The GPU instances of d, with profile names from the catalog model m.
 * Returns NVML_SUCCESS, or the error that kept them from being listed
 * (the GPU is then unknown, or lost, for this scan). */
static nvmlReturn_t
nv_instances(struct nvml *n, nvmlDevice_t d, const struct gpu_model *m, struct ag_gpu *g,
    char *what, size_t whatlen)
{
	g->ninst = 0;
	if (m == NULL || !g->mig_enabled || n->nvmlDeviceGetGpuInstances == NULL)
		return NVML_SUCCESS;
	nvmlReturn_t r;
	for (int p = 0; p < m->nprofiles; p++) {
		nvmlGpuInstance_t gis[AG_MAX_INSTANCES];
		unsigned cnt = AG_MAX_INSTANCES;
		r = n->nvmlDeviceGetGpuInstances(d, (unsigned)m->profiles[p].id, gis, &cnt);
		if (r != NVML_SUCCESS) {
			if (nv_benign(r))
				continue;
			snprintf(what, whatlen, "nvmlDeviceGetGpuInstances(%s)",
			    m->profiles[p].name);
			return r;
		}
		for (unsigned k = 0; k < cnt && g->ninst < AG_MAX_INSTANCES; k++) {
			nvmlGpuInstanceInfo_t info;
			if ((r = n->nvmlGpuInstanceGetInfo(gis[k], &info)) != NVML_SUCCESS) {
				snprintf(what, whatlen, "nvmlGpuInstanceGetInfo");
				return r;
			}
			struct ag_instance *in = &g->inst[g->ninst++];
			memset(in, 0, sizeof(*in));
			ag_strlcpy(in->profile, m->profiles[p].name, sizeof(in->profile));
			in->start = (int)info.placement.start;
			in->size = (int)info.placement.size;
			in->gi_id = (int)info.id;
		}
	}
	/* MIG device UUIDs, by GPU instance id */
	unsigned max = 0;
	if (n->nvmlDeviceGetMaxMigDeviceCount == NULL ||
	    n->nvmlDeviceGetMaxMigDeviceCount(d, &max) != NVML_SUCCESS)
		return NVML_SUCCESS;
	for (unsigned i = 0; i < max; i++) {
		nvmlDevice_t md;
		unsigned gi;
		char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
		if (n->nvmlDeviceGetMigDeviceHandleByIndex(d, i, &md) != NVML_SUCCESS ||
		    n->nvmlDeviceGetGpuInstanceId(md, &gi) != NVML_SUCCESS ||
		    n->nvmlDeviceGetUUID(md, uuid, sizeof(uuid)) != NVML_SUCCESS)
			continue;
		for (int k = 0; k < g->ninst; k++)
			if (g->inst[k].gi_id == (int)gi)
				ag_strlcpy(g->inst[k].uuid, uuid, sizeof(g->inst[k].uuid));
	}
	return NVML_SUCCESS;
}

/* Drain the XID events that arrived since the last call (no waiting). */
static void
nv_xids(struct nvml *n, struct ag_node *node)
{
	if (n->events == NULL)
		return;
	for (int guard = 0; guard < 4096; guard++) {
		nvmlEventData_t ev;
		memset(&ev, 0, sizeof(ev));
		if (n->nvmlEventSetWait_v2(n->events, &ev, 0) != NVML_SUCCESS)
			return;
		if (ev.eventType != nvmlEventTypeXidCriticalError)
			continue;
		for (int k = 0; k < node->ngpus; k++) {
			struct ag_gpu *g = &node->gpus[k];
			int i = g->index;
			if (i >= 0 && i < n->ndevs && n->devs[i] == ev.device)
				(void)ag_xid_add(g->xids, &g->nxids, AG_MAX_XIDS, (int)ev.eventData,
				    ag_now(), 1);
		}
	}
}

/* GPU i could not be read (r from what): lost under the identity it had
 * at the last good discovery; false when it never had one (nothing to
 * report it under). */
static bool
nv_lost(struct nvml *n, unsigned i, const char *what, nvmlReturn_t r, struct ag_gpu *g)
{
	if (n->known[i].uuid[0] == '\0')
		return false;
	char why[AG_GPU_ERROR_MAX];
	snprintf(why, sizeof(why), "%s: %s", what, nv_err(n, r));
	*g = n->known[i];
	g->nxids = 0;
	ag_gpu_mark(g, AG_GPU_LOST, why);
	return true;
}

/*
 * Every GPU, each on its own: one that cannot be read at all is reported
 * lost (the others keep reporting), one whose instances cannot be listed
 * unknown. Only a failure to count the GPUs fails the whole discovery.
 */
static int
nv_discover(struct ag_backend *b, struct ag_node *node, char *err, size_t errlen)
{
	struct nvml *n = b->priv;
	unsigned count = 0;
	nvmlReturn_t r = n->nvmlDeviceGetCount_v2(&count);
	if (r != NVML_SUCCESS) {
		snprintf(err, errlen, "nvmlDeviceGetCount_v2: %s", nv_err(n, r));
		return -1;
	}
	if (count > AG_MAX_GPUS)
		count = AG_MAX_GPUS;
	node->ngpus = 0;
	for (unsigned i = 0; i < count; i++) {
		struct ag_gpu *g = &node->gpus[node->ngpus];
		nvmlDevice_t d;
		if ((r = n->nvmlDeviceGetHandleByIndex_v2(i, &d)) != NVML_SUCCESS) {
			if (nv_lost(n, i, "nvmlDeviceGetHandleByIndex_v2", r, g))
				node->ngpus++;
			continue;
		}
		bool new_dev = (int)i >= n->ndevs || n->devs[i] != d;
		n->devs[i] = d;
		if ((int)i >= n->ndevs)
			n->ndevs = (int)i + 1;
		if (new_dev && n->events != NULL && n->nvmlDeviceRegisterEvents != NULL)
			(void)n->nvmlDeviceRegisterEvents(d, nvmlEventTypeXidCriticalError,
			    n->events);
		ag_gpu_init(g);
		g->index = (int)i;
		char ierr[AG_ERR_MAX];
		int ir = nv_identity(n, d, g, ierr, sizeof(ierr));
		if (ir != 0) {
			if (nv_lost(n, i, "nvmlDeviceGetUUID", (nvmlReturn_t)ir, g))
				node->ngpus++;
			continue;
		}
		n->known[i] = *g;
		nv_health(n, d, g);
		char what[96] = "";
		r = nv_instances(n, d, nv_model(n, g), g, what, sizeof(what));
		if (r != NVML_SUCCESS) {
			char why[AG_GPU_ERROR_MAX];
			snprintf(why, sizeof(why), "%s: %s", what, nv_err(n, r));
			ag_gpu_mark(g, r == NVML_ERROR_GPU_IS_LOST ? AG_GPU_LOST : AG_GPU_UNKNOWN,
			    why);
		}
		node->ngpus++;
	}
	nv_xids(n, node);
	/* a lost GPU's Xid, where its last events name one that explains it */
	for (int k = 0; k < node->ngpus; k++) {
		struct ag_gpu *g = &node->gpus[k];
		for (int x = 0; g->state == AG_GPU_LOST && x < g->nxids; x++)
			if (ag_xid_is_reset_class(g->xids[x].xid))
				g->lost_xid = g->xids[x].xid;
	}
	return 0;
}

static int
nv_lookup(struct nvml *n, int gpu_index, const char *profile, nvmlDevice_t *d,
    const struct mig_profile **p, char *err, size_t errlen)
{
	nvmlReturn_t r = n->nvmlDeviceGetHandleByIndex_v2((unsigned)gpu_index, d);
	if (r != NVML_SUCCESS) {
		snprintf(err, errlen, "GPU %d: %s", gpu_index, nv_err(n, r));
		return -1;
	}
	struct ag_gpu g;
	ag_gpu_init(&g);
	g.index = gpu_index;
	if (nv_identity(n, *d, &g, err, errlen) != 0)
		return -1;
	const struct gpu_model *m = nv_model(n, &g);
	*p = m ? catalog_profile(m, profile) : NULL;
	if (*p == NULL) {
		snprintf(err, errlen, "GPU %d (%s) offers no MIG profile %s", gpu_index,
		    g.product_name, profile);
		return -1;
	}
	return 0;
}

static int
nv_create(struct ag_backend *b, int gpu_index, const char *profile, int start, char *uuid,
    size_t uuidlen, char *err, size_t errlen)
{
	struct nvml *n = b->priv;
	nvmlDevice_t d;
	const struct mig_profile *p;
	if (nv_lookup(n, gpu_index, profile, &d, &p, err, errlen) != 0)
		return -1;
	nvmlGpuInstancePlacement_t pl = { (unsigned)start, (unsigned)p->memory_slices };
	nvmlGpuInstance_t gi;
	nvmlReturn_t r = n->nvmlDeviceCreateGpuInstanceWithPlacement(d, (unsigned)p->id, &pl, &gi);
	if (r != NVML_SUCCESS) {
		snprintf(err, errlen, "create %s at %d:%d on GPU %d: %s", profile, start,
		    p->memory_slices, gpu_index, nv_err(n, r));
		return -1;
	}
	unsigned buf[32];
	memset(buf, 0, sizeof(buf));
	nvmlComputeInstanceProfileInfo_t *ci_info = (nvmlComputeInstanceProfileInfo_t *)buf;
	nvmlComputeInstance_t ci;
	int cip = ci_profile_for(p->compute_slices);
	if (cip < 0 ||
	    (r = n->nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, (unsigned)cip,
		 NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED, ci_info)) != NVML_SUCCESS ||
	    (r = n->nvmlGpuInstanceCreateComputeInstance(gi, ci_info->id, &ci)) != NVML_SUCCESS) {
		snprintf(err, errlen, "compute instance for %s at %d on GPU %d: %s", profile, start,
		    gpu_index, nv_err(n, r));
		(void)n->nvmlGpuInstanceDestroy(gi); /* leave nothing half made */
		return -1;
	}
	nvmlGpuInstanceInfo_t info;
	uuid[0] = '\0';
	if (n->nvmlGpuInstanceGetInfo(gi, &info) != NVML_SUCCESS)
		return 0;
	unsigned max = 0;
	if (n->nvmlDeviceGetMaxMigDeviceCount(d, &max) != NVML_SUCCESS)
		return 0;
	for (unsigned i = 0; i < max; i++) {
		nvmlDevice_t md;
		unsigned giid;
		char u[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
		if (n->nvmlDeviceGetMigDeviceHandleByIndex(d, i, &md) == NVML_SUCCESS &&
		    n->nvmlDeviceGetGpuInstanceId(md, &giid) == NVML_SUCCESS && giid == info.id &&
		    n->nvmlDeviceGetUUID(md, u, sizeof(u)) == NVML_SUCCESS) {
			ag_strlcpy(uuid, u, uuidlen);
			break;
		}
	}
	return 0;
}

static int
nv_destroy(struct ag_backend *b, int gpu_index, const char *profile, int start, char *err,
    size_t errlen)
{
	struct nvml *n = b->priv;
	nvmlDevice_t d;
	const struct mig_profile *p;
	if (nv_lookup(n, gpu_index, profile, &d, &p, err, errlen) != 0)
		return -1;
	nvmlGpuInstance_t gis[AG_MAX_INSTANCES];
	unsigned cnt = AG_MAX_INSTANCES;
	nvmlReturn_t r = n->nvmlDeviceGetGpuInstances(d, (unsigned)p->id, gis, &cnt);
	if (r != NVML_SUCCESS) {
		snprintf(err, errlen, "GPU %d: list %s: %s", gpu_index, profile, nv_err(n, r));
		return -1;
	}
	for (unsigned k = 0; k < cnt; k++) {
		nvmlGpuInstanceInfo_t info;
		if (n->nvmlGpuInstanceGetInfo(gis[k], &info) != NVML_SUCCESS ||
		    (int)info.placement.start != start)
			continue;
		/* compute instances first: every CI profile */
		for (unsigned cip = 0; cip < 8; cip++) {
			unsigned buf[32];
			memset(buf, 0, sizeof(buf));
			nvmlComputeInstanceProfileInfo_t *ci_info =
			    (nvmlComputeInstanceProfileInfo_t *)buf;
			if (n->nvmlGpuInstanceGetComputeInstanceProfileInfo(gis[k], cip,
				NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED,
				ci_info) != NVML_SUCCESS)
				continue;
			nvmlComputeInstance_t cis[8];
			unsigned ncis = 8;
			if (n->nvmlGpuInstanceGetComputeInstances(gis[k], ci_info->id, cis,
				&ncis) != NVML_SUCCESS)
				continue;
			for (unsigned c = 0; c < ncis; c++) {
				if ((r = n->nvmlComputeInstanceDestroy(cis[c])) != NVML_SUCCESS) {
					snprintf(err, errlen,
					    "destroy compute instance of %s at %d: %s", profile,
					    start, nv_err(n, r));
					return -1;
				}
			}
		}
		if ((r = n->nvmlGpuInstanceDestroy(gis[k])) != NVML_SUCCESS) {
			snprintf(err, errlen, "destroy %s at %d on GPU %d: %s", profile, start,
			    gpu_index, nv_err(n, r));
			return -1;
		}
		return 0;
	}
	snprintf(err, errlen, "no %s instance at start %d on GPU %d", profile, start, gpu_index);
	return -1;
}

static int
nv_set_mig(struct ag_backend *b, int gpu_index, bool enabled, char *err, size_t errlen)
{
	(void)b;
	snprintf(err, errlen,
	    "MIG mode of GPU %d must be %s by an operator (it needs a GPU reset, which the agent "
	    "never does)",
	    gpu_index, enabled ? "enabled" : "disabled");
	return -1;
}

static void
nv_free(struct ag_backend *b)
{
	struct nvml *n = b->priv;
	if (n->events != NULL && n->nvmlEventSetFree != NULL)
		(void)n->nvmlEventSetFree(n->events);
	if (n->nvmlShutdown != NULL)
		(void)n->nvmlShutdown();
	if (n->lib != NULL)
		dlclose(n->lib);
	catalog_free(n->cat);
	free(n);
	free(b);
}

static const struct ag_backend_ops nvml_ops = {
	.name = "nvml",
	.discover = nv_discover,
	.create = nv_create,
	.destroy = nv_destroy,
	.set_mig = nv_set_mig,
	.profiles = NULL,
	.free = nv_free,
};

struct ag_backend *
ag_backend_nvml_open(const struct ag_backend_config *cfg, char *err, size_t errlen)
{
	struct nvml *n = calloc(1, sizeof(*n));
	struct ag_backend *b = calloc(1, sizeof(*b));
	struct gp_error gerr;
	gp_error_clear(&gerr);
	if (n == NULL || b == NULL || catalog_load_builtin(&n->cat, &gerr) != 0) {
		snprintf(err, errlen, "out of memory or no catalog");
		goto fail;
	}
	const char *path = cfg->nvml_path ? cfg->nvml_path : "libnvidia-ml.so.1";
	n->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (n->lib == NULL) {
		snprintf(err, errlen, "cannot load %s: %s (is the NVIDIA driver installed?)", path,
		    dlerror());
		goto fail;
	}
	/* every function is resolved; the ones discovery and MIG changes
	 * cannot do without are required, the health ones are optional */
#define AG_NVML_SYM(name, ret, args) *(void **)(&n->name) = dlsym(n->lib, #name);
	AG_NVML_FUNCS(AG_NVML_SYM)
#undef AG_NVML_SYM
	const char *required[] = { "nvmlInit_v2", "nvmlDeviceGetCount_v2",
		"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetUUID", "nvmlDeviceGetName",
		"nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetGpuInstances", "nvmlGpuInstanceGetInfo",
		"nvmlDeviceCreateGpuInstanceWithPlacement", "nvmlGpuInstanceDestroy",
		"nvmlGpuInstanceGetComputeInstanceProfileInfo",
		"nvmlGpuInstanceCreateComputeInstance", "nvmlGpuInstanceGetComputeInstances",
		"nvmlComputeInstanceDestroy", "nvmlDeviceGetMaxMigDeviceCount",
		"nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetGpuInstanceId" };
	for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
		if (dlsym(n->lib, required[i]) == NULL) {
			snprintf(err, errlen, "%s lacks %s (driver too old?)", path, required[i]);
			goto fail;
		}
	}
	nvmlReturn_t r = n->nvmlInit_v2();
	if (r != NVML_SUCCESS) {
		snprintf(err, errlen, "nvmlInit_v2: %s", nv_err(n, r));
		goto fail;
	}
	if (n->nvmlEventSetCreate == NULL || n->nvmlEventSetWait_v2 == NULL ||
	    n->nvmlEventSetCreate(&n->events) != NVML_SUCCESS)
		n->events = NULL;
	b->ops = &nvml_ops;
	b->priv = n;
	return b;
fail:
	if (n != NULL) {
		if (n->lib != NULL)
			dlclose(n->lib);
		catalog_free(n->cat);
	}
	free(n);
	free(b);
	return NULL;
}
