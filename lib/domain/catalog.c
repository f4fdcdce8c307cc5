/*
 * catalog.c - the GPU catalog: parsing the JSON facts into fixed structs
 * and looking models and profiles up by id, product name and PCI id.
 *
 * Parsing is strict (unknown fields, bad types, impossible placements are
 * errors) because every placement decision trusts these numbers.
 */
#include "domain/catalog.h"
#include "domain/catalog_data.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/arena.h"
#include "core/json.h"

#define CATALOG_MAX_MODELS 64
#define CATALOG_MAX_STRINGS 16 /* product names, PCI ids per model */
#define CATALOG_MAX_FACTS 256
#define CATALOG_TEXT_MAX 1024

struct catalog {
	struct arena *arena; /* owns models, strings, facts */
	struct gpu_model *models;
	int nmodels;
	const char **facts;
	int nfacts;
};

/* Model ids and profile names appear in SpecAndCount text ("M/P=N") and
 * in Kubernetes resource names, so keep them to a safe alphabet. */
static bool
catalog_name_ok(const char *s, const char *extra)
{
	if (s[0] == '\0')
		return false;
	for (const char *p = s; *p != '\0'; p++) {
		if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
		    (*p >= '0' && *p <= '9'))
			continue;
		if (strchr(extra, *p) == NULL)
			return false;
	}
	return true;
}

static bool
catalog_pci_id_ok(const char *s)
{
	if (strlen(s) != 10 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X'))
		return false;
	for (int i = 2; i < 10; i++) {
		char ch = s[i];

		if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') ||
			(ch >= 'A' && ch <= 'F')))
			return false;
	}
	return true;
}

/* Read a non-empty array of strings at key into arena-owned copies. */
static int
catalog_parse_strings(struct jfields *f, struct arena *keep, const char *key, const char ***out,
    int *nout)
{
	struct json_object *arr = NULL;
	const char **v;
	size_t n;

	if (jf_array(f, key, true, &arr) < 0)
		return -1;
	n = json_object_array_length(arr);
	if (n == 0 || n > CATALOG_MAX_STRINGS)
		return gp_error_field(f->err, jf_path(f, key), "must hold 1 to %d strings",
		    CATALOG_MAX_STRINGS);
	v = arena_alloc(keep, n * sizeof(*v));
	for (size_t i = 0; i < n; i++) {
		struct json_object *s = json_object_array_get_idx(arr, i);
		const char *str;

		if (!json_object_is_type(s, json_type_string) ||
		    json_object_get_string_len(s) == 0 ||
		    json_object_get_string_len(s) >= CATALOG_TEXT_MAX)
			return gp_error_field(f->err, jf_path(f, key),
			    "element %zu must be a non-empty string", i);
		str = json_object_get_string(s);
		if (strlen(str) != (size_t)json_object_get_string_len(s))
			return gp_error_field(f->err, jf_path(f, key),
			    "element %zu must not contain NUL characters", i);
		v[i] = arena_strdup(keep, str);
	}
	*out = v;
	*nout = (int)n;
	return 0;
}

static int
catalog_parse_placements(struct jfields *f, const struct gpu_model *m, struct mig_profile *p)
{
	struct json_object *arr = NULL;
	size_t n;

	if (jf_array(f, "placements", true, &arr) < 0)
		return -1;
	n = json_object_array_length(arr);
	if (n == 0 || n > CATALOG_MAX_SLICES)
		return gp_error_field(f->err, jf_path(f, "placements"), "must hold 1 to %d starts",
		    CATALOG_MAX_SLICES);
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(arr, i);
		int64_t s;

		if (!json_object_is_type(v, json_type_int))
			return gp_error_field(f->err, jf_path(f, "placements"),
			    "element %zu must be an integer", i);
		s = json_object_get_int64(v);
		if (s < 0 || s + p->memory_slices > m->memory_slices)
			return gp_error_field(f->err, jf_path(f, "placements"),
			    "start %lld does not leave room for %d slices on a %d-slice GPU",
			    (long long)s, p->memory_slices, m->memory_slices);
		if (i > 0 && s <= p->placements[i - 1])
			return gp_error_field(f->err, jf_path(f, "placements"),
			    "starts must be strictly ascending");
		p->placements[i] = (int)s;
	}
	p->nplacements = (int)n;
	return 0;
}

static int
catalog_parse_profile(struct arena *tmp, struct json_object *obj, const char *path,
    struct gpu_model *m, struct mig_profile *p, struct gp_error *err)
{
	struct jfields f;
	const char *name = NULL;
	int64_t v;

	if (!json_object_is_type(obj, json_type_object))
		return gp_error_field(err, path, "must be an object");
	jf_init(&f, tmp, obj, path, err);
	if (jf_string(&f, "name", true, CATALOG_NAME_MAX - 1, &name) < 0)
		return -1;
	if (!catalog_name_ok(name, ".+_-") || strcmp(name, "full") == 0)
		return gp_error_field(err, jf_path(&f, "name"),
		    "must be letters, digits, '.', '+', '_' or '-' and not \"full\"");
	snprintf(p->name, sizeof(p->name), "%s", name);
	if (jf_int(&f, "id", true, 0, 255, &v, NULL) < 0)
		return -1;
	p->id = (int)v;
	if (jf_int(&f, "compute_slices", true, 1, m->compute_slices, &v, NULL) < 0)
		return -1;
	p->compute_slices = (int)v;
	if (jf_int(&f, "memory_slices", true, 1, m->memory_slices, &v, NULL) < 0)
		return -1;
	p->memory_slices = (int)v;
	if (jf_int(&f, "max_instances", true, 1, CATALOG_MAX_SLICES, &v, NULL) < 0)
		return -1;
	p->max_instances = (int)v;
	if (jf_int(&f, "sm_count", true, 1, 100000, &v, NULL) < 0)
		return -1;
	p->sm_count = (int)v;
	if (jf_int(&f, "memory_mib", true, 1, m->memory_mib, &v, NULL) < 0)
		return -1;
	p->memory_mib = (int)v;
	if (catalog_parse_placements(&f, m, p) < 0)
		return -1;
	if (jf_bool(&f, "media_extensions", true, &p->media_extensions, NULL) < 0 ||
	    jf_bool(&f, "confirmed", true, &p->confirmed, NULL) < 0)
		return -1;
	return jf_finish(&f);
}

/* Collect the distinct slice runs of all profiles' placements. */
static void
catalog_derive_runs(struct gpu_model *m)
{
	m->nruns = 0;
	for (int i = 0; i < m->nprofiles; i++) {
		const struct mig_profile *p = &m->profiles[i];

		for (int j = 0; j < p->nplacements; j++) {
			uint8_t mask =
			    (uint8_t)(((1u << p->memory_slices) - 1u) << p->placements[j]);
			bool dup = false;

			for (int k = 0; k < m->nruns; k++)
				dup = dup || m->run_mask[k] == mask;
			if (dup || m->nruns >= CATALOG_MAX_RUNS)
				continue;
			m->run_mask[m->nruns] = mask;
			m->run_size[m->nruns] = (uint8_t)p->memory_slices;
			m->nruns++;
		}
	}
}

static int
catalog_parse_model(struct arena *tmp, struct arena *keep, struct json_object *obj,
    const char *path, struct gpu_model *m, struct gp_error *err)
{
	struct jfields f;
	struct json_object *profiles = NULL;
	const char *id = NULL;
	int64_t v;
	bool present;
	size_t n;

	if (!json_object_is_type(obj, json_type_object))
		return gp_error_field(err, path, "must be an object");
	jf_init(&f, tmp, obj, path, err);
	if (jf_string(&f, "model", true, CATALOG_NAME_MAX - 1, &id) < 0)
		return -1;
	if (!catalog_name_ok(id, "._-"))
		return gp_error_field(err, jf_path(&f, "model"),
		    "must be letters, digits, '.', '_' or '-'");
	snprintf(m->id, sizeof(m->id), "%s", id);
	if (catalog_parse_strings(&f, keep, "product_names", &m->product_names,
		&m->nproduct_names) < 0 ||
	    catalog_parse_strings(&f, keep, "pci_device_ids", &m->pci_device_ids,
		&m->npci_device_ids) < 0)
		return -1;
	for (int i = 0; i < m->npci_device_ids; i++) {
		if (!catalog_pci_id_ok(m->pci_device_ids[i]))
			return gp_error_field(err, jf_path(&f, "pci_device_ids"),
			    "element %d must look like 0x233010DE", i);
	}
	if (jf_int(&f, "memory_mib", true, 1, INT32_MAX, &v, NULL) < 0)
		return -1;
	m->memory_mib = (int)v;
	if (jf_bool(&f, "mig_capable", true, &m->mig_capable, NULL) < 0)
		return -1;
	if (jf_int(&f, "memory_slices", m->mig_capable, m->mig_capable ? 1 : 0,
		m->mig_capable ? CATALOG_MAX_SLICES : 0, &v, &present) < 0)
		return -1;
	m->memory_slices = present ? (int)v : 0;
	if (jf_int(&f, "compute_slices", m->mig_capable, m->mig_capable ? 1 : 0,
		m->mig_capable ? CATALOG_MAX_SLICES : 0, &v, &present) < 0)
		return -1;
	m->compute_slices = present ? (int)v : 0;
	m->full_slices = m->mig_capable ? m->memory_slices : 1;
	if (jf_array(&f, "profiles", true, &profiles) < 0)
		return -1;
	n = json_object_array_length(profiles);
	if (m->mig_capable && (n == 0 || n > CATALOG_MAX_PROFILES))
		return gp_error_field(err, jf_path(&f, "profiles"),
		    "a MIG-capable model must list 1 to %d profiles", CATALOG_MAX_PROFILES);
	if (!m->mig_capable && n != 0)
		return gp_error_field(err, jf_path(&f, "profiles"),
		    "a model that is not MIG-capable has no profiles");
	for (size_t i = 0; i < n; i++) {
		struct mig_profile *p = &m->profiles[i];
		const char *ppath = arena_printf(tmp, "%s.profiles[%zu]", path, i);

		p->index = (int)i;
		if (catalog_parse_profile(tmp, json_object_array_get_idx(profiles, i), ppath, m, p,
			err) < 0)
			return -1;
		for (size_t j = 0; j < i; j++) {
			if (strcmp(m->profiles[j].name, p->name) == 0)
				return gp_error_field(err, arena_printf(tmp, "%s.name", ppath),
				    "duplicates profile %zu", j);
		}
		m->nprofiles = (int)i + 1;
	}
	if (jf_finish(&f) < 0)
		return -1;
	catalog_derive_runs(m);
	return 0;
}

static int
catalog_parse_facts(struct jfields *f, struct catalog *c)
{
	struct json_object *arr = NULL;
	size_t n;

	if (jf_array(f, "facts_for_tests", false, &arr) < 0)
		return -1;
	if (arr == NULL)
		return 0;
	n = json_object_array_length(arr);
	if (n > CATALOG_MAX_FACTS)
		return gp_error_field(f->err, "facts_for_tests", "must hold at most %d facts",
		    CATALOG_MAX_FACTS);
	c->facts = arena_alloc(c->arena, (n + 1) * sizeof(*c->facts));
	for (size_t i = 0; i < n; i++) {
		struct json_object *s = json_object_array_get_idx(arr, i);

		if (!json_object_is_type(s, json_type_string))
			return gp_error_field(f->err, "facts_for_tests",
			    "element %zu must be a string", i);
		c->facts[i] = arena_strdup(c->arena, json_object_get_string(s));
	}
	c->nfacts = (int)n;
	return 0;
}

int
catalog_load(struct catalog **out, const char *json, size_t len, struct gp_error *err)
{
	struct arena *tmp = arena_create();
	struct catalog *c = NULL;
	struct json_object *root = NULL, *models = NULL, *units = NULL;
	struct jfields f;
	const char *about = NULL;
	size_t n;

	*out = NULL;
	if (json_parse_object(tmp, json, len, &root, err) < 0)
		goto fail;
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		gp_error_set(err, 500, "internal", "could not allocate the gpu catalog");
		goto fail;
	}
	c->arena = arena_create();
	jf_init(&f, tmp, root, "", err);
	if (jf_string(&f, "about", false, 65536, &about) < 0 ||
	    jf_object(&f, "units", false, &units) < 0 ||
	    jf_array(&f, "models", true, &models) < 0 || catalog_parse_facts(&f, c) < 0 ||
	    jf_finish(&f) < 0)
		goto fail;
	n = json_object_array_length(models);
	if (n == 0 || n > CATALOG_MAX_MODELS) {
		gp_error_field(err, "models", "must hold 1 to %d models", CATALOG_MAX_MODELS);
		goto fail;
	}
	c->models = arena_alloc(c->arena, n * sizeof(*c->models));
	for (size_t i = 0; i < n; i++) {
		const char *path = arena_printf(tmp, "models[%zu]", i);

		if (catalog_parse_model(tmp, c->arena, json_object_array_get_idx(models, i), path,
			&c->models[i], err) < 0)
			goto fail;
		for (size_t j = 0; j < i; j++) {
			if (strcasecmp(c->models[j].id, c->models[i].id) == 0) {
				gp_error_field(err, arena_printf(tmp, "%s.model", path),
				    "duplicates models[%zu]", j);
				goto fail;
			}
		}
		c->nmodels = (int)i + 1;
	}
	arena_destroy(tmp);
	*out = c;
	return 0;
fail:
	if (!gp_error_isset(err))
		gp_error_set(err, 422, "validation_failed", "the gpu catalog is not valid");
	catalog_free(c);
	arena_destroy(tmp);
	return -1;
}

int
catalog_load_builtin(struct catalog **out, struct gp_error *err)
{
	return catalog_load(out, gp_catalog_json, gp_catalog_json_len, err);
}

void
catalog_free(struct catalog *c)
{
	if (c == NULL)
		return;
	arena_destroy(c->arena);
	free(c);
}

int
catalog_nmodels(const struct catalog *c)
{
	return c->nmodels;
}

const struct gpu_model *
catalog_model_at(const struct catalog *c, int i)
{
	if (i < 0 || i >= c->nmodels)
		return NULL;
	return &c->models[i];
}

const struct gpu_model *
catalog_model(const struct catalog *c, const char *model_id)
{
	if (model_id == NULL)
		return NULL;
	for (int i = 0; i < c->nmodels; i++) {
		if (strcmp(c->models[i].id, model_id) == 0)
			return &c->models[i];
	}
	return NULL;
}

const struct gpu_model *
catalog_model_by_product(const struct catalog *c, const char *product_name)
{
	if (product_name == NULL)
		return NULL;
	for (int i = 0; i < c->nmodels; i++) {
		const struct gpu_model *m = &c->models[i];

		for (int j = 0; j < m->nproduct_names; j++) {
			if (strcasecmp(m->product_names[j], product_name) == 0)
				return m;
		}
	}
	return NULL;
}

const struct gpu_model *
catalog_model_by_pci_id(const struct catalog *c, const char *pci_device_id)
{
	if (pci_device_id == NULL)
		return NULL;
	for (int i = 0; i < c->nmodels; i++) {
		const struct gpu_model *m = &c->models[i];

		for (int j = 0; j < m->npci_device_ids; j++) {
			if (strcasecmp(m->pci_device_ids[j], pci_device_id) == 0)
				return m;
		}
	}
	return NULL;
}

const struct mig_profile *
catalog_profile(const struct gpu_model *m, const char *name)
{
	if (m == NULL || name == NULL)
		return NULL;
	for (int i = 0; i < m->nprofiles; i++) {
		if (strcmp(m->profiles[i].name, name) == 0)
			return &m->profiles[i];
	}
	return NULL;
}

bool
catalog_profile_allows(const struct mig_profile *p, int start)
{
	for (int i = 0; i < p->nplacements; i++) {
		if (p->placements[i] == start)
			return true;
	}
	return false;
}

int
catalog_nfacts(const struct catalog *c)
{
	return c->nfacts;
}

const char *
catalog_fact(const struct catalog *c, int i)
{
	if (i < 0 || i >= c->nfacts)
		return NULL;
	return c->facts[i];
}
