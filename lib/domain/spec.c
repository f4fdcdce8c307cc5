/*
 * spec.c - SpecAndCount: strict text form, catalog validation and the
 * Kubernetes resource names.
 */
#include "domain/spec.h"

#include "core/strbuf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SPEC_K8S_GPU "nvidia.com/gpu"
#define SPEC_K8S_MIG "nvidia.com/mig-"

/* "<field>.<key>", or key alone at the root, into buf. */
static const char *
spec_path(char *buf, size_t size, const char *field, const char *key)
{
	if (field == NULL || field[0] == '\0')
		snprintf(buf, size, "%s", key);
	else
		snprintf(buf, size, "%s.%s", field, key);
	return buf;
}

static bool
spec_name_char(char ch, bool profile)
{
	if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9'))
		return true;
	return ch == '.' || ch == '_' || ch == '-' || (profile && ch == '+');
}

/* Copy [s, s + n) into dst when it is a valid name; false otherwise. */
static bool
spec_copy_name(char *dst, const char *s, size_t n, bool profile)
{
	if (n == 0 || n >= CATALOG_NAME_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		if (!spec_name_char(s[i], profile))
			return false;
	}
	memcpy(dst, s, n);
	dst[n] = '\0';
	return true;
}

int
spec_parse(const char *text, struct spec_count *out, const char *field, struct gp_error *err)
{
	const char *fpath = (field == NULL || field[0] == '\0') ? "spec" : field;
	const char *slash, *eq;
	char *end = NULL;
	struct spec_count s;
	long n;

	memset(&s, 0, sizeof(s));
	if (text == NULL)
		return gp_error_field(err, fpath, "is required");
	slash = strchr(text, '/');
	eq = slash != NULL ? strchr(slash + 1, '=') : NULL;
	if (slash == NULL || eq == NULL)
		return gp_error_field(err, fpath,
		    "must look like MODEL/PROFILE=COUNT, as H100-80GB/3g.40gb=2");
	if (!spec_copy_name(s.model, text, (size_t)(slash - text), false))
		return gp_error_field(err, fpath,
		    "the model must be 1 to %d letters, digits, '.', '_' or '-'",
		    CATALOG_NAME_MAX - 1);
	if (!spec_copy_name(s.profile, slash + 1, (size_t)(eq - slash - 1), true))
		return gp_error_field(err, fpath,
		    "the profile must be 1 to %d letters, digits, '.', '+', '_' or '-'",
		    CATALOG_NAME_MAX - 1);
	/* strtol alone would accept spaces, signs and leading zeros */
	if (eq[1] < '1' || eq[1] > '9')
		return gp_error_field(err, fpath, "the count must be a decimal number from 1 to %d",
		    SPEC_COUNT_MAX);
	errno = 0;
	n = strtol(eq + 1, &end, 10);
	if (errno != 0 || end == eq + 1 || *end != '\0' || n < 1 || n > SPEC_COUNT_MAX)
		return gp_error_field(err, fpath, "the count must be a decimal number from 1 to %d",
		    SPEC_COUNT_MAX);
	s.count = (int)n;
	*out = s;
	return 0;
}

int
spec_format(const struct spec_count *s, char *buf, size_t size)
{
	int n = snprintf(buf, size, "%s/%s=%d", s->model, s->profile, s->count);

	return (n < 0 || (size_t)n >= size) ? -1 : 0;
}

int
spec_set(struct spec_count *s, const char *model, const char *profile, int count, const char *field,
    struct gp_error *err)
{
	char path[160];
	int rc = 0;

	memset(s, 0, sizeof(*s));
	if (model == NULL || strlen(model) >= sizeof(s->model))
		rc = gp_error_field(err, spec_path(path, sizeof(path), field, "model"),
		    "must be at most %zu bytes", sizeof(s->model) - 1);
	else
		memcpy(s->model, model, strlen(model) + 1);
	if (profile == NULL || strlen(profile) >= sizeof(s->profile))
		rc = gp_error_field(err, spec_path(path, sizeof(path), field, "profile"),
		    "must be at most %zu bytes", sizeof(s->profile) - 1);
	else
		memcpy(s->profile, profile, strlen(profile) + 1);
	s->count = count;
	return rc;
}

/* The catalog model whose id is within 2 edits of name (or that names it as a product). */
static const struct gpu_model *
spec_nearest_model(const struct catalog *c, const char *name)
{
	const struct gpu_model *best = catalog_model_by_product(c, name);
	size_t bestd = 3;

	if (best != NULL)
		return best; /* "NVIDIA H100 80GB HBM3": the product name of a model */
	for (int i = 0; i < catalog_nmodels(c); i++) {
		const struct gpu_model *m = catalog_model_at(c, i);
		size_t d = text_edit_distance(name, m->id);

		if (d < bestd) {
			bestd = d;
			best = m;
		}
	}
	for (int i = 0; best != NULL && i < catalog_nmodels(c); i++)
		if (catalog_model_at(c, i) != best &&
		    text_edit_distance(name, catalog_model_at(c, i)->id) == bestd)
			return NULL; /* two as close: no guess */
	return best;
}

/* The profile of m within 2 edits of name, or "full". */
static const char *
spec_nearest_profile(const struct gpu_model *m, const char *name)
{
	const char *best = text_edit_distance(name, SPEC_FULL) <= 2 ? SPEC_FULL : NULL;
	size_t bestd = best != NULL ? text_edit_distance(name, SPEC_FULL) : 3;

	for (int i = 0; i < m->nprofiles; i++) {
		size_t d = text_edit_distance(name, m->profiles[i].name);

		if (d < bestd) {
			bestd = d;
			best = m->profiles[i].name;
		}
	}
	return best;
}

/* "3g.40gb" -> 3 compute slices, 40 GB (a "+me" suffix allowed); -1 when not of that form. */
static int
spec_profile_size(const char *name, int *compute, int *gb)
{
	char tail[8] = "";
	int n = 0;

	if (sscanf(name, "%dg.%dgb%n", compute, gb, &n) != 2 || n == 0 || *compute < 1 || *gb < 1)
		return -1;
	snprintf(tail, sizeof(tail), "%s", name + n);
	return tail[0] == '\0' || strcmp(tail, "+me") == 0 ? 0 : -1;
}

/*
 * For a well-formed size the model does not offer ("5g.50gb"), the
 * profiles next to it by size: the largest no bigger in compute and memory,
 * the smallest no smaller (plain profiles, no media extensions).
 */
static void
spec_nearest_sizes(const struct gpu_model *m, int compute, int gb, const char **smaller,
    const char **larger)
{
	int sc = 0, sg = 0, lc = 0, lg = 0;

	*smaller = *larger = NULL;
	for (int i = 0; i < m->nprofiles; i++) {
		const struct mig_profile *p = &m->profiles[i];
		int pc, pg;

		if (p->media_extensions || spec_profile_size(p->name, &pc, &pg) < 0)
			continue;
		if (pc <= compute && pg <= gb && (pg > sg || (pg == sg && pc > sc))) {
			*smaller = p->name;
			sc = pc;
			sg = pg;
		}
		if (pc >= compute && pg >= gb &&
		    (*larger == NULL || pg < lg || (pg == lg && pc < lc))) {
			*larger = p->name;
			lc = pc;
			lg = pg;
		}
	}
}

/* err's field for an unknown profile of m: with the nearest sizes, else the nearest name. */
static int
spec_unknown_profile(const struct gpu_model *m, const char *name, const char *path,
    struct gp_error *err)
{
	const char *smaller, *larger, *near;
	int compute, gb;

	if (spec_profile_size(name, &compute, &gb) == 0) {
		spec_nearest_sizes(m, compute, gb, &smaller, &larger);
		if (smaller != NULL && larger != NULL)
			return gp_error_field(err, path,
			    "model %s offers no profile \"%s\"; the nearest sizes are \"%s\" "
			    "(smaller) and \"%s\" (larger)",
			    m->id, name, smaller, larger);
		if (smaller != NULL || larger != NULL)
			return gp_error_field(err, path,
			    "model %s offers no profile \"%s\"; the nearest size is \"%s\" (%s)",
			    m->id, name, smaller != NULL ? smaller : larger,
			    smaller != NULL ? "smaller" : "larger");
	}
	near = spec_nearest_profile(m, name);
	if (near != NULL)
		return gp_error_field(err, path,
		    "model %s offers no profile \"%s\"; did you mean \"%s\"?", m->id, name, near);
	return gp_error_field(err, path, "model %s offers no profile \"%s\"", m->id, name);
}

int
spec_validate(const struct spec_count *s, const struct catalog *c, const char *field,
    const struct gpu_model **model, const struct mig_profile **profile, struct gp_error *err)
{
	const struct gpu_model *m;
	const struct mig_profile *p = NULL;
	char path[160];
	int rc = 0;

	m = catalog_model(c, s->model);
	if (m == NULL) {
		const struct gpu_model *near = spec_nearest_model(c, s->model);

		if (near != NULL)
			rc = gp_error_field(err, spec_path(path, sizeof(path), field, "model"),
			    "unknown gpu model \"%s\"; did you mean \"%s\"?", s->model, near->id);
		else
			rc = gp_error_field(err, spec_path(path, sizeof(path), field, "model"),
			    "unknown gpu model \"%s\"", s->model);
	} else if (!spec_is_full(s)) {
		p = catalog_profile(m, s->profile);
		if (p == NULL && !m->mig_capable)
			rc = gp_error_field(err, spec_path(path, sizeof(path), field, "profile"),
			    "model %s is not MIG-capable: only \"full\" is offered", m->id);
		else if (p == NULL)
			rc = spec_unknown_profile(m, s->profile,
			    spec_path(path, sizeof(path), field, "profile"), err);
	}
	if (s->count < 1 || s->count > SPEC_COUNT_MAX)
		rc = gp_error_field(err, spec_path(path, sizeof(path), field, "count"),
		    "must be between 1 and %d", SPEC_COUNT_MAX);
	if (rc < 0)
		return -1;
	if (model != NULL)
		*model = m;
	if (profile != NULL)
		*profile = p;
	return 0;
}

bool
spec_is_full(const struct spec_count *s)
{
	return strcmp(s->profile, SPEC_FULL) == 0;
}

bool
spec_same_kind(const struct spec_count *a, const struct spec_count *b)
{
	return strcmp(a->model, b->model) == 0 && strcmp(a->profile, b->profile) == 0;
}

int
spec_compare(const struct spec_count *a, const struct spec_count *b)
{
	int r = strcmp(a->model, b->model);

	if (r == 0)
		r = strcmp(a->profile, b->profile);
	if (r == 0)
		r = (a->count > b->count) - (a->count < b->count);
	return r;
}

int
spec_k8s_resource(const char *profile, char *buf, size_t size)
{
	size_t pre = strlen(SPEC_K8S_MIG), n;

	if (strcmp(profile, SPEC_FULL) == 0) {
		if (size <= strlen(SPEC_K8S_GPU))
			return -1;
		memcpy(buf, SPEC_K8S_GPU, strlen(SPEC_K8S_GPU) + 1);
		return 0;
	}
	n = strlen(profile);
	if (n == 0 || pre + n >= size)
		return -1;
	memcpy(buf, SPEC_K8S_MIG, pre);
	for (size_t i = 0; i < n; i++)
		buf[pre + i] = profile[i] == '+' ? '.' : profile[i];
	buf[pre + n] = '\0';
	return 0;
}

const char *
spec_profile_from_k8s(const struct gpu_model *m, const char *resource)
{
	char name[SPEC_K8S_MAX];

	if (m == NULL || resource == NULL)
		return NULL;
	if (strcmp(resource, SPEC_K8S_GPU) == 0)
		return SPEC_FULL;
	for (int i = 0; i < m->nprofiles; i++) {
		if (spec_k8s_resource(m->profiles[i].name, name, sizeof(name)) == 0 &&
		    strcmp(name, resource) == 0)
			return m->profiles[i].name;
	}
	return NULL;
}
