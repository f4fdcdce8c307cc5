/*
 * backend_smi.c - the nvidia-smi backend: discovery and health from
 * `nvidia-smi --query-gpu=… --format=csv`, `-L`, `-q` and
 * `nvidia-smi mig -lgi`; MIG changes through `nvidia-smi mig` with the
 * placement given (`-cgi PROFILE_ID:START -C`, `-gi ID -dci`, `-gi ID
 * -dgi`). With --dry-run the MIG commands are printed, never run, and
 * discovery only reads.
 *
 * nvidia-smi runs with fork and execv (execvp for a bare name) and an
 * argument vector, never through a shell. The --query-gpu fields that not
 * every driver has are asked for only where `--help-query-gpu` lists them.
 *
 * A failed read is never an empty answer: a failed `--query-gpu`, `-L` or
 * `-q` fails the discovery (the agent then reports every GPU unknown); a
 * failed `mig -lgi` makes the MIG GPUs unknown for this scan; a GPU that
 * nvidia-smi cannot reach ("Unable to determine the device handle for
 * GPU…") is lost under the identity of its last good discovery.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "core/log.h"
#include "domain/catalog.h"
#include "smi_parse.h"
#include "util.h"

#define SMI_MAX_ARGS 16

struct smi {
	char bin[1024];
	bool dry_run;
	struct catalog *cat;
	struct ag_node last;  /* the last discovery: GI ids and profiles */
	struct ag_node known; /* every GPU ever read, by bus id: identities of lost ones */
	bool probed;
	char fields[1024]; /* the --query-gpu= list this driver supports */
};

/* Run bin with args (words split at spaces: they are built from fixed
 * words and integers), stdout and stderr into a malloc'd string. */
static char *
smi_run(struct smi *s, const char *args, int *status)
{
	char words[2048];
	char *argv[SMI_MAX_ARGS + 2];
	int argc = 0;
	ag_strlcpy(words, args, sizeof(words));
	argv[argc++] = s->bin;
	char *save = NULL;
	for (char *w = strtok_r(words, " ", &save); w != NULL && argc < SMI_MAX_ARGS + 1;
	     w = strtok_r(NULL, " ", &save))
		argv[argc++] = w;
	argv[argc] = NULL;
	*status = -1;
	int fd[2];
	if (pipe(fd) != 0)
		return NULL;
	pid_t pid = fork();
	if (pid < 0) {
		close(fd[0]);
		close(fd[1]);
		return NULL;
	}
	if (pid == 0) {
		dup2(fd[1], 1);
		dup2(fd[1], 2);
		close(fd[0]);
		close(fd[1]);
		if (strchr(s->bin, '/') != NULL)
			execv(s->bin, argv);
		else
			execvp(s->bin, argv);
		_exit(127);
	}
	close(fd[1]);
	size_t cap = 65536, n = 0;
	char *buf = malloc(cap);
	for (;;) {
		if (buf != NULL && n + 1 >= cap) {
			char *nb = realloc(buf, cap * 2);
			if (nb == NULL) {
				free(buf);
				buf = NULL;
			} else {
				buf = nb;
				cap *= 2;
			}
		}
		char sink[4096];
		ssize_t r = buf != NULL ? read(fd[0], buf + n, cap - n - 1)
					: read(fd[0], sink, sizeof(sink));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		if (buf != NULL)
			n += (size_t)r;
	}
	close(fd[0]);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	if (buf != NULL)
		buf[n] = '\0';
	return buf;
}

/* The --query-gpu fields: the base ones, and the optional ones this
 * driver lists in --help-query-gpu (an old driver refuses the whole query
 * over one field it does not know). */
static void
smi_probe(struct smi *s)
{
	static const char *const opt[] = SMI_OPTIONAL_FIELDS;
	ag_strlcpy(s->fields, SMI_QUERY_FIELDS, sizeof(s->fields));
	int st;
	char *help = smi_run(s, "--help-query-gpu", &st);
	bool listed = help != NULL && st == 0 && strstr(help, "\"index\"") != NULL;
	for (int i = 0; i < SMI_NOPTIONAL; i++) {
		char quoted[64];
		snprintf(quoted, sizeof(quoted), "\"%s\"", opt[i]);
		if (listed && strstr(help, quoted) == NULL) {
			log_info(NULL, "nvidia-smi: this driver has no query field; not asked",
			    "field", opt[i]);
			continue;
		}
		size_t l = strlen(s->fields);
		snprintf(s->fields + l, sizeof(s->fields) - l, ",%s", opt[i]);
	}
	free(help);
	s->probed = true;
}

/* The identity a lost GPU had (by bus id); false when never read. */
static bool
smi_known(const struct smi *s, const char *bus, struct ag_gpu *out)
{
	for (int i = 0; i < s->known.ngpus; i++)
		if (smi_same_bus(s->known.gpus[i].bus_id, bus)) {
			*out = s->known.gpus[i];
			return true;
		}
	return false;
}

static void
smi_remember(struct smi *s, const struct ag_gpu *g)
{
	if (g->bus_id[0] == '\0')
		return;
	for (int i = 0; i < s->known.ngpus; i++)
		if (smi_same_bus(s->known.gpus[i].bus_id, g->bus_id)) {
			s->known.gpus[i] = *g;
			return;
		}
	if (s->known.ngpus < AG_MAX_GPUS)
		s->known.gpus[s->known.ngpus++] = *g;
}

/* out (a malloc'd answer or NULL) with its exit status as one error. */
static void
smi_failed(char *err, size_t errlen, const char *what, const char *out, int st)
{
	char text[200];
	ag_strlcpy(text, out != NULL ? out : "", sizeof(text));
	snprintf(err, errlen, "nvidia-smi %s failed (exit %d): %s", what, st, ag_trim(text));
}

static int
smi_discover(struct ag_backend *b, struct ag_node *node, char *err, size_t errlen)
{
	struct smi *s = b->priv;
	if (!s->probed)
		smi_probe(s);
	int st;
	char args[1100];
	snprintf(args, sizeof(args), "--query-gpu=%s --format=csv", s->fields);
	char *q = smi_run(s, args, &st);
	struct smi_lost lost[AG_MAX_GPUS];
	int nlost = q != NULL ? smi_parse_lost(q, lost, AG_MAX_GPUS) : 0;
	int ng = q != NULL ? smi_parse_query_gpu(q, node) : -1;
	if (ng < 0 && nlost > 0 && q != NULL) {
		node->ngpus = 0; /* every GPU lost: no header at all */
		ng = 0;
	}
	if (q == NULL || ng < 0 || (st != 0 && nlost == 0)) {
		smi_failed(err, errlen, "--query-gpu", q, st);
		free(q);
		return -1;
	}
	free(q);
	struct smi_mig_device devs[AG_MAX_GPUS * AG_MAX_INSTANCES];
	struct smi_gi gis[AG_MAX_GPUS * AG_MAX_INSTANCES];
	struct smi_q_mig qm[AG_MAX_GPUS * AG_MAX_INSTANCES];
	int ndev = 0, ngi = 0, nq = 0;
	char *l = smi_run(s, "-L", &st);
	struct smi_lost lost_l[AG_MAX_GPUS];
	if (l == NULL || (st != 0 && smi_parse_lost(l, lost_l, AG_MAX_GPUS) == 0)) {
		smi_failed(err, errlen, "-L", l, st);
		free(l);
		return -1;
	}
	ndev = smi_parse_list(l, node, devs, AG_MAX_GPUS * AG_MAX_INSTANCES);
	free(l);
	bool any_mig = false;
	for (int i = 0; i < node->ngpus; i++)
		any_mig |= node->gpus[i].mig_enabled;
	char lgi_err[AG_GPU_ERROR_MAX] = "";
	if (any_mig) {
		char *g = smi_run(s, "mig -lgi", &st);
		if (g != NULL && st == 0) {
			ngi = smi_parse_lgi(g, gis, AG_MAX_GPUS * AG_MAX_INSTANCES);
		} else if (g != NULL && strstr(g, "No GPU instances found") != NULL) {
			ngi = 0; /* an answer: there are none */
		} else {
			char text[160];
			ag_strlcpy(text, g != NULL ? g : "", sizeof(text));
			snprintf(lgi_err, sizeof(lgi_err), "nvidia-smi mig -lgi (exit %d): %s", st,
			    ag_trim(text));
		}
		free(g);
		char *qq = smi_run(s, "-q", &st);
		struct smi_lost lost_q[AG_MAX_GPUS];
		if (qq == NULL || (st != 0 && smi_parse_lost(qq, lost_q, AG_MAX_GPUS) == 0)) {
			smi_failed(err, errlen, "-q", qq, st);
			free(qq);
			return -1;
		}
		nq = smi_parse_q_mig(qq, qm, AG_MAX_GPUS * AG_MAX_INSTANCES);
		free(qq);
	}
	smi_join(node, gis, ngi, devs, ndev, qm, nq);
	for (int i = 0; i < node->ngpus; i++) {
		struct ag_gpu *g = &node->gpus[i];
		if (g->mig_enabled && lgi_err[0] != '\0')
			ag_gpu_mark(g, AG_GPU_UNKNOWN, lgi_err);
		smi_remember(s, g);
	}
	/* the GPUs nvidia-smi cannot reach: lost, under the identity they had */
	for (int k = 0; k < nlost && node->ngpus < AG_MAX_GPUS; k++) {
		struct ag_gpu *g = &node->gpus[node->ngpus];
		if (!smi_known(s, lost[k].bus_id, g)) {
			log_warn(NULL, "nvidia-smi: a GPU never read is unreachable", "error",
			    lost[k].message);
			continue;
		}
		g->nxids = 0;
		ag_gpu_mark(g, AG_GPU_LOST, lost[k].message);
		node->ngpus++;
	}
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
	if (bin[0] == '\0') {
		snprintf(err, errlen, "bad nvidia-smi path \"%s\"", bin);
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
