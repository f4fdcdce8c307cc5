/*
 * backend_smi.c - the nvidia-smi backend: discovery and health from
 * `nvidia-smi --query-gpu=… --format=csv`, `-L`, `-q` and
 * `nvidia-smi mig -lgi`; MIG changes through `nvidia-smi mig` with the
 * placement given (`-cgi PROFILE_ID:START -C`, `-gi ID -dci`, `-gi ID
 * -dgi`). With --dry-run the MIG commands are printed, never run, and
 * discovery only reads.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "backend.h"
#include "domain/catalog.h"
#include "smi_parse.h"
#include "util.h"

struct smi {
	char bin[1024];
	bool dry_run;
	struct catalog *cat;
	struct ag_node last; /* the last discovery: GI ids and profiles */
};

/* Run "bin args" (no shell metacharacters come from outside: args are
 * built from integers), the output into a malloc'd string. */
static char *
smi_run(struct smi *s, const char *args, int *status)
{
	char cmd[2048];
	snprintf(cmd, sizeof(cmd), "%s %s 2>&1", s->bin, args);
	FILE *p = popen(cmd, "r");
	if (p == NULL)
		return NULL;
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	while (buf != NULL) {
		size_t r = fread(buf + n, 1, cap - n - 1, p);
		n += r;
		if (r == 0)
			break;
		if (n + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL)
				break;
			buf = nb;
			cap *= 2;
		}
	}
	int st = pclose(p);
	if (status != NULL)
		*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (buf != NULL)
		buf[n] = '\0';
	return buf;
}

static int
smi_discover(struct ag_backend *b, struct ag_node *node, char *err, size_t errlen)
{
	struct smi *s = b->priv;
	int st;
	char *q = smi_run(s, "--query-gpu=" SMI_QUERY_FIELDS " --format=csv", &st);
	if (q == NULL || st != 0 || smi_parse_query_gpu(q, node) < 0) {
		snprintf(err, errlen, "nvidia-smi --query-gpu failed: %.160s", q ? q : "");
		free(q);
		return -1;
	}
	free(q);
	struct smi_mig_device devs[AG_MAX_GPUS * AG_MAX_INSTANCES];
	struct smi_gi gis[AG_MAX_GPUS * AG_MAX_INSTANCES];
	struct smi_q_mig qm[AG_MAX_GPUS * AG_MAX_INSTANCES];
	int ndev = 0, ngi = 0, nq = 0;
	char *l = smi_run(s, "-L", &st);
	if (l != NULL && st == 0)
		ndev = smi_parse_list(l, node, devs, AG_MAX_GPUS * AG_MAX_INSTANCES);
	free(l);
	bool any_mig = false;
	for (int i = 0; i < node->ngpus; i++)
		any_mig |= node->gpus[i].mig_enabled;
	if (any_mig) {
		char *g = smi_run(s, "mig -lgi", &st);
		if (g != NULL && st == 0)
			ngi = smi_parse_lgi(g, gis, AG_MAX_GPUS * AG_MAX_INSTANCES);
		free(g);
		char *qq = smi_run(s, "-q", &st);
		if (qq != NULL && st == 0)
			nq = smi_parse_q_mig(qq, qm, AG_MAX_GPUS * AG_MAX_INSTANCES);
		free(qq);
	}
	smi_join(node, gis, ngi, devs, ndev, qm, nq);
	s->last = *node;
	return 0;
}

static const struct mig_profile *
smi_profile(struct smi *s, int gpu_index, const char *profile, char *err, size_t errlen)
{
	for (int i = 0; i < s->last.ngpus; i++) {
		struct ag_gpu *g = &s->last.gpus[i];
		if (g->index != gpu_index)
			continue;
		const struct gpu_model *m = catalog_model_by_pci_id(s->cat, g->pci_device_id);
		if (m == NULL)
			m = catalog_model_by_product(s->cat, g->product_name);
		const struct mig_profile *p = m ? catalog_profile(m, profile) : NULL;
		if (p == NULL)
			snprintf(err, errlen, "GPU %d (%s) offers no MIG profile %s", gpu_index,
			    g->product_name, profile);
		return p;
	}
	snprintf(err, errlen, "no GPU with index %d", gpu_index);
	return NULL;
}

static int
smi_mig(struct smi *s, const char *args, char *err, size_t errlen)
{
	if (s->dry_run) {
		printf("dry-run: %s %s\n", s->bin, args);
		fflush(stdout);
		return 0;
	}
	int st;
	char *out = smi_run(s, args, &st);
	if (out == NULL || st != 0) {
		snprintf(err, errlen, "nvidia-smi %s: %.160s", args, out ? ag_trim(out) : "failed");
		free(out);
		return -1;
	}
	free(out);
	return 0;
}

static int
smi_create(struct ag_backend *b, int gpu_index, const char *profile, int start, char *uuid,
    size_t uuidlen, char *err, size_t errlen)
{
	struct smi *s = b->priv;
	const struct mig_profile *p = smi_profile(s, gpu_index, profile, err, errlen);
	if (p == NULL)
		return -1;
	char args[256];
	snprintf(args, sizeof(args), "mig -i %d -cgi %d:%d -C", gpu_index, p->id, start);
	if (smi_mig(s, args, err, errlen) != 0)
		return -1;
	uuid[0] = '\0';
	if (s->dry_run)
		return 0;
	struct ag_node node;
	if (smi_discover(b, &node, err, errlen) != 0)
		return -1;
	for (int i = 0; i < node.ngpus; i++) {
		if (node.gpus[i].index != gpu_index)
			continue;
		for (int k = 0; k < node.gpus[i].ninst; k++)
			if (node.gpus[i].inst[k].start == start &&
			    strcmp(node.gpus[i].inst[k].profile, profile) == 0) {
				ag_strlcpy(uuid, node.gpus[i].inst[k].uuid, uuidlen);
				return 0;
			}
	}
	snprintf(err, errlen, "nvidia-smi created no %s instance at %d on GPU %d", profile, start,
	    gpu_index);
	return -1;
}

static int
smi_destroy(struct ag_backend *b, int gpu_index, const char *profile, int start, char *err,
    size_t errlen)
{
	struct smi *s = b->priv;
	for (int i = 0; i < s->last.ngpus; i++) {
		struct ag_gpu *g = &s->last.gpus[i];
		if (g->index != gpu_index)
			continue;
		for (int k = 0; k < g->ninst; k++) {
			if (g->inst[k].start != start || strcmp(g->inst[k].profile, profile) != 0)
				continue;
			char args[256];
			snprintf(args, sizeof(args), "mig -i %d -gi %d -dci", gpu_index,
			    g->inst[k].gi_id);
			if (smi_mig(s, args, err, errlen) != 0)
				return -1;
			snprintf(args, sizeof(args), "mig -i %d -gi %d -dgi", gpu_index,
			    g->inst[k].gi_id);
			return smi_mig(s, args, err, errlen);
		}
	}
	snprintf(err, errlen, "no %s instance at start %d on GPU %d", profile, start, gpu_index);
	return -1;
}

static int
smi_set_mig(struct ag_backend *b, int gpu_index, bool enabled, char *err, size_t errlen)
{
	(void)b;
	snprintf(err, errlen,
	    "MIG mode of GPU %d must be %s by an operator (nvidia-smi -i %d -mig %d needs a GPU "
	    "reset); the agent never resets a GPU",
	    gpu_index, enabled ? "enabled" : "disabled", gpu_index, enabled ? 1 : 0);
	return -1;
}

static void
smi_free(struct ag_backend *b)
{
	struct smi *s = b->priv;
	catalog_free(s->cat);
	free(s);
	free(b);
}

static const struct ag_backend_ops smi_ops = {
	.name = "nvidia-smi",
	.discover = smi_discover,
	.create = smi_create,
	.destroy = smi_destroy,
	.set_mig = smi_set_mig,
	.profiles = NULL,
	.free = smi_free,
};

struct ag_backend *
ag_backend_smi_open(const struct ag_backend_config *cfg, char *err, size_t errlen)
{
	struct smi *s = calloc(1, sizeof(*s));
	struct ag_backend *b = calloc(1, sizeof(*b));
	struct gp_error gerr;
	gp_error_clear(&gerr);
	if (s == NULL || b == NULL || catalog_load_builtin(&s->cat, &gerr) != 0) {
		snprintf(err, errlen, "out of memory or no catalog");
		free(s);
		free(b);
		return NULL;
	}
	const char *bin = cfg->smi_path ? cfg->smi_path : "nvidia-smi";
	if (strpbrk(bin, ";&|`$<>\"'\\\n") != NULL) {
		snprintf(err, errlen, "refusing nvidia-smi path with shell characters");
		catalog_free(s->cat);
		free(s);
		free(b);
		return NULL;
	}
	ag_strlcpy(s->bin, bin, sizeof(s->bin));
	s->dry_run = cfg->dry_run;
	b->ops = &smi_ops;
	b->priv = s;
	return b;
}
