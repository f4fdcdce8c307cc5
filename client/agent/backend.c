/*
 * backend.c - the backend registry and helpers shared by the backends.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "util.h"

struct ag_backend *
ag_backend_open(const char *name, const struct ag_backend_config *cfg, char *err, size_t errlen)
{
	if (strcmp(name, "fake") == 0)
		return ag_backend_fake_open(cfg, err, errlen);
	if (strcmp(name, "nvidia-smi") == 0)
		return ag_backend_smi_open(cfg, err, errlen);
	if (strcmp(name, "nvml") == 0)
		return ag_backend_nvml_open(cfg, err, errlen);
	snprintf(err, errlen, "unknown backend \"%s\" (fake, nvidia-smi or nvml)", name);
	return NULL;
}

void
ag_backend_close(struct ag_backend *b)
{
	if (b != NULL)
		b->ops->free(b);
}

void
ag_gpu_init(struct ag_gpu *g)
{
	memset(g, 0, sizeof(*g));
	g->ecc_uncorrected = -1;
	g->ecc_corrected = -1;
	g->remapped_rows = -1;
	snprintf(g->recovery_action, sizeof(g->recovery_action), "none");
	g->power_w = -1;
	g->sm_active = -1;
	g->temperature_c = -1;
	g->memory_used_mib = -1;
	g->memory_total_mib = -1;
}

static uint64_t
fnv1a(const char *s, uint64_t h)
{
	for (; *s != '\0'; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return h;
}

static uint64_t
mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

void
ag_derive_uuid(const char *prefix, const char *seed, char *out, size_t outlen)
{
	uint64_t a = mix(fnv1a(seed, 14695981039346656037ULL));
	uint64_t b = mix(a ^ fnv1a(seed, 0x9e3779b97f4a7c15ULL));
	snprintf(out, outlen, "%s-%08x-%04x-%04x-%04x-%012llx", prefix, (unsigned)(a >> 32),
	    (unsigned)((a >> 16) & 0xffff), (unsigned)(a & 0xffff), (unsigned)(b >> 48),
	    (unsigned long long)(b & 0xffffffffffffULL));
}

const char *
ag_recovery_action_name(int v)
{
	switch (v) {
	case 1:
		return "gpu_reset";
	case 2:
		return "node_reboot";
	case 3:
		return "drain_p2p";
	case 4:
		return "drain_and_reset";
	default:
		return "none";
	}
}

void
ag_gpu_mark(struct ag_gpu *g, enum ag_gpu_state state, const char *why)
{
	g->state = state;
	snprintf(g->error, sizeof(g->error), "%s", why != NULL ? why : "");
	for (char *c = g->error; *c != '\0'; c++)
		if ((unsigned char)*c < 0x20 || *c == 0x7f)
			*c = ' ';
	g->ninst = 0;
	if (state != AG_GPU_LOST)
		return; /* unknown: health and telemetry were read, the instances not */
	g->power_w = -1;
	g->sm_active = -1;
	g->temperature_c = -1;
	g->memory_used_mib = -1;
	g->memory_total_mib = -1;
}

bool
ag_xid_is_reset_class(int xid)
{
	static const int reset[] = { 48, 63, 64, 74, 79, 92, 94, 95, 109, 110, 119, 120, 136, 140,
		143, 154, 156, 158 };
	for (size_t i = 0; i < sizeof(reset) / sizeof(reset[0]); i++)
		if (reset[i] == xid)
			return true;
	return false;
}

bool
ag_xid_add(struct ag_xid *q, int *n, int max, int xid, long long ts, int count)
{
	if (count < 1)
		count = 1;
	for (int i = 0; i < *n; i++) {
		if (q[i].xid == xid) {
			q[i].count =
			    q[i].count > 1000000000 - count ? 1000000000 : q[i].count + count;
			return true;
		}
	}
	if (*n >= max) {
		int victim = -1;
		for (int i = 0; i < *n && victim < 0; i++)
			if (!ag_xid_is_reset_class(q[i].xid))
				victim = i;
		if (victim < 0) /* only reset-class codes, all distinct: cannot be */
			return false;
		memmove(&q[victim], &q[victim + 1], sizeof(q[0]) * (size_t)(*n - victim - 1));
		(*n)--;
	}
	q[*n].xid = xid;
	q[*n].ts = ts;
	q[*n].count = count;
	(*n)++;
	return true;
}

void
ag_xid_take(struct ag_xid *q, int *n, const struct ag_xid *sent)
{
	for (int i = 0; i < *n; i++) {
		if (q[i].xid != sent->xid)
			continue;
		q[i].count -= sent->count;
		if (q[i].count <= 0) {
			memmove(&q[i], &q[i + 1], sizeof(q[0]) * (size_t)(*n - i - 1));
			(*n)--;
		}
		return;
	}
}
