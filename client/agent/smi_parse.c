/*
 * smi_parse.c - parsers of nvidia-smi's text output.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "smi_parse.h"
#include "util.h"

#define SMI_MAX_COLS 512

/* Split one CSV line of nvidia-smi (", " separated, no quoting) in place. */
static int
split_csv(char *line, char **cols, int max)
{
	int n = 0;
	char *p = line;
	while (n < max) {
		char *c = strchr(p, ',');
		if (c != NULL)
			*c = '\0';
		cols[n++] = ag_trim(p);
		if (c == NULL)
			break;
		p = c + 1;
	}
	return n;
}

/* A header name without its unit: "memory.total [MiB]" -> "memory.total". */
static void
header_name(char *h)
{
	char *b = strchr(h, '[');
	if (b != NULL)
		*b = '\0';
	ag_trim(h);
}

static bool
na(const char *v)
{
	return v == NULL || v[0] == '\0' || v[0] == '[' || strcmp(v, "N/A") == 0;
}

/* A number, units after it ignored ("71.15 W", "81559 MiB"); false on N/A. */
static bool
num(const char *v, double *out)
{
	if (na(v))
		return false;
	char *end;
	double d = strtod(v, &end);
	if (end == v)
		return false;
	*out = d;
	return true;
}

static int
col_of(char **hdr, int nh, const char *name)
{
	for (int i = 0; i < nh; i++)
		if (strcmp(hdr[i], name) == 0)
			return i;
	return -1;
}

static const char *
recovery_from_smi(const char *v)
{
	/* nvidia-smi prints None, Reset, Reboot, Drain P2P, Drain and Reset */
	if (na(v) || strcasecmp(v, "None") == 0)
		return "none";
	if (strcasecmp(v, "Reset") == 0 || strcasecmp(v, "GPU Reset") == 0)
		return "gpu_reset";
	if (strcasecmp(v, "Reboot") == 0 || strcasecmp(v, "Node Reboot") == 0)
		return "node_reboot";
	if (strcasecmp(v, "Drain P2P") == 0)
		return "drain_p2p";
	if (strcasecmp(v, "Drain and Reset") == 0)
		return "drain_and_reset";
	return "none";
}

int
smi_parse_query_gpu(const char *text, struct ag_node *node)
{
	char *copy = strdup(text);
	if (copy == NULL)
		return -1;
	char **hdr = calloc(SMI_MAX_COLS, sizeof(char *));
	char **val = calloc(SMI_MAX_COLS, sizeof(char *));
	int nh = 0, rc = -1;
	node->ngpus = 0;
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line != NULL && hdr && val;
	     line = strtok_r(NULL, "\n", &save)) {
		if (ag_trim(line)[0] == '\0')
			continue;
		if (strstr(line, "Unable to determine the device handle") != NULL)
			continue; /* a lost GPU (smi_parse_lost), not a row */
		if (nh == 0) {
			nh = split_csv(line, hdr, SMI_MAX_COLS);
			for (int i = 0; i < nh; i++)
				header_name(hdr[i]);
			if (col_of(hdr, nh, "index") < 0 || col_of(hdr, nh, "uuid") < 0)
				goto out;
			rc = 0;
			continue;
		}
		int nv = split_csv(line, val, SMI_MAX_COLS);
		if (nv != nh || node->ngpus >= AG_MAX_GPUS)
			continue;
		struct ag_gpu *g = &node->gpus[node->ngpus];
		ag_gpu_init(g);
#define COL(name) (col_of(hdr, nh, name) >= 0 ? val[col_of(hdr, nh, name)] : NULL)
		double d;
		if (!num(COL("index"), &d))
			continue;
		g->index = (int)d;
		ag_strlcpy(g->uuid, COL("uuid"), sizeof(g->uuid));
		if (!na(COL("name")))
			ag_strlcpy(g->product_name, COL("name"), sizeof(g->product_name));
		if (!na(COL("pci.bus_id")))
			ag_strlcpy(g->bus_id, COL("pci.bus_id"), sizeof(g->bus_id));
		if (!na(COL("pci.device_id")))
			ag_strlcpy(g->pci_device_id, COL("pci.device_id"),
			    sizeof(g->pci_device_id));
		if (num(COL("memory.total"), &d)) {
			g->memory_mib = (int)d;
			g->memory_total_mib = (long long)d;
		}
		if (num(COL("memory.used"), &d))
			g->memory_used_mib = (long long)d;
		const char *mig = COL("mig.mode.current");
		g->mig_enabled = mig != NULL && strcasecmp(mig, "Enabled") == 0;
		if (num(COL("ecc.errors.corrected.volatile.total"), &d))
			g->ecc_corrected = (long long)d;
		if (num(COL("ecc.errors.uncorrected.volatile.total"), &d))
			g->ecc_uncorrected = (long long)d;
		double c = 0, u = 0;
		bool hc = num(COL("remapped_rows.correctable"), &c);
		bool hu = num(COL("remapped_rows.uncorrectable"), &u);
		if (hc || hu)
			g->remapped_rows = (int)(c + u);
		const char *rf = COL("remapped_rows.failure");
		g->remapped_rows_failure = rf != NULL && strcasecmp(rf, "Yes") == 0;
		ag_strlcpy(g->recovery_action, recovery_from_smi(COL("gpu_recovery_action")),
		    sizeof(g->recovery_action));
		if (num(COL("power.draw"), &d))
			g->power_w = d;
		if (num(COL("temperature.gpu"), &d))
			g->temperature_c = d;
		if (num(COL("utilization.gpu"), &d))
			g->sm_active = d / 100.0;
#undef COL
		node->ngpus++;
		rc = node->ngpus;
	}
out:
	free(hdr);
	free(val);
	free(copy);
	return rc;
}

static struct ag_gpu *
gpu_by_index(struct ag_node *node, int index, bool add)
{
	for (int i = 0; i < node->ngpus; i++)
		if (node->gpus[i].index == index)
			return &node->gpus[i];
	if (!add || node->ngpus >= AG_MAX_GPUS)
		return NULL;
	struct ag_gpu *g = &node->gpus[node->ngpus++];
	ag_gpu_init(g);
	g->index = index;
	return g;
}

int
smi_parse_list(const char *text, struct ag_node *node, struct smi_mig_device *devs, int max)
{
	char *copy = strdup(text);
	if (copy == NULL)
		return 0;
	int n = 0, gpu = -1;
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		char *l = ag_trim(line);
		char *u = strstr(l, "(UUID: ");
		if (u == NULL)
			continue;
		char uuid[AG_UUID_MAX];
		ag_strlcpy(uuid, u + 7, sizeof(uuid));
		char *close = strchr(uuid, ')');
		if (close != NULL)
			*close = '\0';
		int idx;
		if (strncmp(l, "GPU ", 4) == 0 && sscanf(l + 4, "%d:", &idx) == 1) {
			gpu = idx;
			struct ag_gpu *g = gpu_by_index(node, idx, true);
			if (g == NULL)
				continue;
			ag_strlcpy(g->uuid, uuid, sizeof(g->uuid));
			char *colon = strchr(l, ':');
			if (g->product_name[0] == '\0' && colon != NULL) {
				char name[AG_NAME_MAX];
				ag_strlcpy(name, colon + 1, sizeof(name));
				char *paren = strstr(name, " (UUID");
				if (paren != NULL)
					*paren = '\0';
				ag_strlcpy(g->product_name, ag_trim(name), sizeof(g->product_name));
			}
		} else if (strncmp(l, "MIG ", 4) == 0 && gpu >= 0 && n < max) {
			/* "MIG 3g.40gb     Device  0: (UUID: MIG-…)" */
			char prof[32];
			int dev;
			if (sscanf(l + 4, "%31s Device %d:", prof, &dev) != 2)
				continue;
			devs[n].gpu = gpu;
			devs[n].device = dev;
			ag_strlcpy(devs[n].profile, prof, sizeof(devs[n].profile));
			/* "1c.3g.71gb": a compute instance of the 3g.71gb GPU instance */
			int c = 0, used = 0;
			devs[n].ci_slices = 0;
			if (sscanf(prof, "%dc.%n", &c, &used) == 1 && used > 0 && c > 0 &&
			    strchr(prof + used, '.') != NULL) {
				devs[n].ci_slices = c;
				ag_strlcpy(devs[n].gi_profile, prof + used,
				    sizeof(devs[n].gi_profile));
			} else {
				ag_strlcpy(devs[n].gi_profile, prof, sizeof(devs[n].gi_profile));
			}
			ag_strlcpy(devs[n].uuid, uuid, sizeof(devs[n].uuid));
			n++;
		}
	}
	free(copy);
	return n;
}

int
smi_parse_lost(const char *text, struct smi_lost *out, int max)
{
	static const char key[] = "Unable to determine the device handle for GPU";
	int n = 0;
	for (const char *p = strstr(text, key); p != NULL && n < max; p = strstr(p + 1, key)) {
		const char *b = p + sizeof(key) - 1;
		while (*b == ' ')
			b++;
		size_t len = strcspn(b, " \n");
		if (len > 0 && b[len - 1] == ':')
			len--; /* "GPU0000:18:00.0: GPU is lost" */
		if (len == 0 || len >= sizeof(out[n].bus_id))
			continue;
		memcpy(out[n].bus_id, b, len);
		out[n].bus_id[len] = '\0';
		size_t ml = strcspn(p, "\n");
		if (ml >= sizeof(out[n].message))
			ml = sizeof(out[n].message) - 1;
		memcpy(out[n].message, p, ml);
		out[n].message[ml] = '\0';
		ag_trim(out[n].message);
		n++;
	}
	return n;
}

bool
smi_same_bus(const char *a, const char *b)
{
	const char *ca = strchr(a, ':'), *cb = strchr(b, ':');
	return ca != NULL && cb != NULL && ca[1] != '\0' && strcasecmp(ca, cb) == 0;
}

int
smi_parse_lgi(const char *text, struct smi_gi *out, int max)
{
	char *copy = strdup(text);
	if (copy == NULL)
		return 0;
	int n = 0;
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line != NULL && n < max;
	     line = strtok_r(NULL, "\n", &save)) {
		/* "|   0  MIG 1g.10gb         19        9          2:1     |" */
		char *l = line;
		while (*l == '|' || *l == ' ')
			l++;
		int gpu, pid, gi, start, size;
		char prof[32];
		if (sscanf(l, "%d MIG %31s %d %d %d:%d", &gpu, prof, &pid, &gi, &start, &size) != 6)
			continue;
		out[n].gpu = gpu;
		ag_strlcpy(out[n].profile, prof, sizeof(out[n].profile));
		out[n].profile_id = pid;
		out[n].gi_id = gi;
		out[n].start = start;
		out[n].size = size;
		n++;
	}
	free(copy);
	return n;
}

int
smi_parse_q_mig(const char *text, struct smi_q_mig *out, int max)
{
	char *copy = strdup(text);
	if (copy == NULL)
		return 0;
	int n = 0, gpu = -1, dev = -1;
	bool in_mig = false;
	char *save = NULL;
	for (char *line = strtok_r(copy, "\n", &save); line != NULL;
	     line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "GPU ", 4) == 0 && isxdigit((unsigned char)line[4])) {
			gpu++;
			in_mig = false;
			continue;
		}
		char *l = ag_trim(line);
		if (strcmp(l, "MIG Device") == 0) {
			in_mig = true;
			dev = -1;
			continue;
		}
		if (!in_mig)
			continue;
		char *colon = strchr(l, ':');
		if (colon == NULL)
			continue;
		*colon = '\0';
		char *key = ag_trim(l), *v = ag_trim(colon + 1);
		if (strcmp(key, "Index") == 0) {
			dev = ag_parse_int(v, 0, 1023, -1);
		} else if (strcmp(key, "GPU Instance ID") == 0 && dev >= 0 && n < max) {
			out[n].gpu = gpu;
			out[n].device = dev;
			out[n].gi_id = ag_parse_int(v, 0, 1023, -1);
			n++;
		}
	}
	free(copy);
	return n;
}

/* The MIG device that stands for its GPU instance: one covering it
 * before one of its compute slices, then the lower device index. */
static bool
better_device(const struct smi_mig_device *d, const struct smi_mig_device *than)
{
	if ((d->ci_slices == 0) != (than->ci_slices == 0))
		return d->ci_slices == 0;
	return d->device < than->device;
}

void
smi_join(struct ag_node *node, const struct smi_gi *gis, int ngi, const struct smi_mig_device *devs,
    int ndev, const struct smi_q_mig *qm, int nq)
{
	for (int i = 0; i < node->ngpus; i++)
		node->gpus[i].ninst = 0;
	for (int k = 0; k < ngi; k++) {
		struct ag_gpu *g = gpu_by_index(node, gis[k].gpu, false);
		if (g == NULL || g->ninst >= AG_MAX_INSTANCES)
			continue;
		struct ag_instance *in = &g->inst[g->ninst++];
		memset(in, 0, sizeof(*in));
		ag_strlcpy(in->profile, gis[k].profile, sizeof(in->profile));
		in->start = gis[k].start;
		in->size = gis[k].size;
		in->gi_id = gis[k].gi_id;
		/* the MIG device of this GI: -q maps device index -> GI id,
		 * -L maps device index -> UUID; the GPU position in -q is its
		 * order, which is index order */
		int pos = (int)(g - node->gpus);
		/* several compute instances in one GPU instance ("1c.3g.71gb",
		 * "2c.3g.71gb"): the one covering it, else the first listed */
		int best = -1;
		for (int q = 0; q < nq; q++) {
			if (qm[q].gpu != pos || qm[q].gi_id != in->gi_id)
				continue;
			for (int d = 0; d < ndev; d++) {
				if (devs[d].gpu != g->index || devs[d].device != qm[q].device)
					continue;
				if (best < 0 || better_device(&devs[d], &devs[best]))
					best = d;
			}
		}
		if (best >= 0)
			ag_strlcpy(in->uuid, devs[best].uuid, sizeof(in->uuid));
	}
}
