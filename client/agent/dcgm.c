/*
 * dcgm.c - dcgm-exporter scrape parser.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcgm.h"
#include "util.h"

struct label {
	char name[64];
	char value[256];
};

/* Parse {a="x",b="y"} at *p; labels into ls. Returns count or -1. */
static int
parse_labels(const char **pp, struct label *ls, int max)
{
	const char *p = *pp;
	int n = 0;
	if (*p != '{')
		return 0;
	p++;
	for (;;) {
		while (*p == ' ' || *p == ',')
			p++;
		if (*p == '}') {
			p++;
			break;
		}
		char name[64];
		size_t k = 0;
		while (*p != '\0' && *p != '=' && *p != ' ' && k + 1 < sizeof(name))
			name[k++] = *p++;
		name[k] = '\0';
		while (*p == ' ')
			p++;
		if (*p != '=' || p[1] != '"')
			return -1;
		p += 2;
		char val[256];
		k = 0;
		while (*p != '\0' && *p != '"') {
			char c = *p++;
			if (c == '\\' && *p != '\0') {
				c = *p++;
				if (c == 'n')
					c = '\n';
			}
			if (k + 1 < sizeof(val))
				val[k++] = c;
		}
		val[k] = '\0';
		if (*p != '"')
			return -1;
		p++;
		if (n < max) {
			ag_strlcpy(ls[n].name, name, sizeof(ls[n].name));
			ag_strlcpy(ls[n].value, val, sizeof(ls[n].value));
			n++;
		}
	}
	*pp = p;
	return n;
}

static const char *
label(const struct label *ls, int n, const char *name)
{
	for (int i = 0; i < n; i++)
		if (strcmp(ls[i].name, name) == 0)
			return ls[i].value;
	return NULL;
}

static struct dcgm_device *
device(struct dcgm_device *out, int *n, int max, const char *uuid, int gi)
{
	for (int i = 0; i < *n; i++)
		if (out[i].gi_id == gi && strcmp(out[i].gpu_uuid, uuid) == 0)
			return &out[i];
	if (*n >= max)
		return NULL;
	struct dcgm_device *d = &out[(*n)++];
	memset(d, 0, sizeof(*d));
	ag_strlcpy(d->gpu_uuid, uuid, sizeof(d->gpu_uuid));
	d->gi_id = gi;
	d->power_w = d->sm_active = d->temperature_c = d->fb_used_mib = d->fb_free_mib = -1;
	d->last_xid = d->ecc_corrected = d->ecc_uncorrected = -1;
	return d;
}

int
dcgm_parse(const char *text, struct dcgm_device *out, int max, char *err, size_t errlen)
{
	int n = 0, lineno = 0;
	const char *p = text;
	while (*p != '\0') {
		const char *eol = strchr(p, '\n');
		size_t len = eol ? (size_t)(eol - p) : strlen(p);
		char line[4096];
		lineno++;
		if (len >= sizeof(line)) {
			p = eol ? eol + 1 : p + len;
			continue;
		}
		memcpy(line, p, len);
		line[len] = '\0';
		p = eol ? eol + 1 : p + len;
		char *l = ag_trim(line);
		if (l[0] == '\0' || l[0] == '#')
			continue;
		char metric[128];
		size_t k = 0;
		while (l[k] != '\0' && l[k] != '{' && l[k] != ' ' && k + 1 < sizeof(metric)) {
			metric[k] = l[k];
			k++;
		}
		metric[k] = '\0';
		const char *q = l + k;
		struct label ls[32];
		int nl = parse_labels(&q, ls, 32);
		if (nl < 0) {
			snprintf(err, errlen, "line %d: malformed labels", lineno);
			return -1;
		}
		char *end;
		double v = strtod(q, &end);
		if (end == q) {
			snprintf(err, errlen, "line %d: no value", lineno);
			return -1;
		}
		if (strncmp(metric, "DCGM_FI_", 8) != 0)
			continue;
		const char *uuid = label(ls, nl, "UUID");
		if (uuid == NULL || uuid[0] == '\0')
			continue;
		const char *gi = label(ls, nl, "GPU_I_ID");
		struct dcgm_device *d = device(out, &n, max, uuid, ag_parse_int(gi, 0, 1023, -1));
		if (d == NULL)
			continue;
		const char *gp = label(ls, nl, "GPU_I_PROFILE");
		if (gp != NULL)
			ag_strlcpy(d->gi_profile, gp, sizeof(d->gi_profile));
		if (strcmp(metric, "DCGM_FI_DEV_POWER_USAGE") == 0)
			d->power_w = v;
		else if (strcmp(metric, "DCGM_FI_PROF_SM_ACTIVE") == 0)
			d->sm_active = v;
		else if (strcmp(metric, "DCGM_FI_PROF_GR_ENGINE_ACTIVE") == 0 && d->sm_active < 0)
			d->sm_active = v;
		else if (strcmp(metric, "DCGM_FI_DEV_GPU_TEMP") == 0)
			d->temperature_c = v;
		else if (strcmp(metric, "DCGM_FI_DEV_FB_USED") == 0)
			d->fb_used_mib = v;
		else if (strcmp(metric, "DCGM_FI_DEV_FB_FREE") == 0)
			d->fb_free_mib = v;
		else if (strcmp(metric, "DCGM_FI_DEV_XID_ERRORS") == 0)
			d->last_xid = v;
		else if (strcmp(metric, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL") == 0)
			d->ecc_corrected = v;
		else if (strcmp(metric, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL") == 0)
			d->ecc_uncorrected = v;
		const char *pod = label(ls, nl, "pod");
		if (pod == NULL || pod[0] == '\0')
			continue;
		const char *ns = label(ls, nl, "namespace");
		const char *ct = label(ls, nl, "container");
		bool seen = false;
		for (int i = 0; i < d->npods && !seen; i++)
			seen = strcmp(d->pods[i].pod, pod) == 0 &&
			    strcmp(d->pods[i].ns, ns ? ns : "") == 0 &&
			    strcmp(d->pods[i].container, ct ? ct : "") == 0;
		if (!seen && d->npods < DCGM_MAX_PODS) {
			struct dcgm_pod *dp = &d->pods[d->npods++];
			ag_strlcpy(dp->pod, pod, sizeof(dp->pod));
			ag_strlcpy(dp->ns, ns ? ns : "", sizeof(dp->ns));
			ag_strlcpy(dp->container, ct ? ct : "", sizeof(dp->container));
		}
	}
	return n;
}

const char *
dcgm_device_uuid(const struct ag_node *node, const char *gpu_uuid, int gi_id)
{
	for (int i = 0; i < node->ngpus; i++) {
		const struct ag_gpu *g = &node->gpus[i];
		if (strcmp(g->uuid, gpu_uuid) != 0)
			continue;
		if (gi_id < 0)
			return g->uuid;
		for (int k = 0; k < g->ninst; k++)
			if (g->inst[k].gi_id == gi_id && g->inst[k].uuid[0] != '\0')
				return g->inst[k].uuid;
		return NULL;
	}
	return NULL;
}
