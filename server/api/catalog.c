/*
 * catalog.c - the GPU catalog as the API shows it: models, product names
 * and PCI ids (what nvidia-smi reports maps to a model), MIG profiles
 * with their placements and Kubernetes resource names. Read by any
 * authenticated user; served from the catalog embedded in the binary
 * (the same data the migration put in gpu_models and mig_profiles).
 */
#include "catalog.h"

#include "domain/catalog.h"
#include "domain/spec.h"

#include <string.h>

static struct json_object *
str_array(const char *const *v, int n)
{
	struct json_object *a = json_object_new_array();

	for (int i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_string(v[i]));
	return a;
}

static struct json_object *
model_json(const struct gpu_model *m)
{
	struct json_object *o = json_object_new_object();
	struct json_object *profs = json_object_new_array();
	char k8s[SPEC_K8S_MAX];

	json_add_str(o, "model", m->id);
	json_object_object_add(o, "product_names", str_array(m->product_names, m->nproduct_names));
	json_object_object_add(o, "pci_device_ids",
	    str_array(m->pci_device_ids, m->npci_device_ids));
	json_add_int(o, "memory_mib", m->memory_mib);
	json_add_bool(o, "mig_capable", m->mig_capable);
	json_add_int(o, "memory_slices", m->memory_slices);
	json_add_int(o, "compute_slices", m->compute_slices);
	json_add_int(o, "full_slices", m->full_slices);
	json_add_str(o, "k8s_resource",
	    spec_k8s_resource(SPEC_FULL, k8s, sizeof(k8s)) == 0 ? k8s : NULL);
	for (int i = 0; i < m->nprofiles; i++) {
		const struct mig_profile *p = &m->profiles[i];
		struct json_object *x = json_object_new_object();
		struct json_object *pl = json_object_new_array();

		json_add_str(x, "name", p->name);
		json_add_int(x, "id", p->id);
		json_add_int(x, "compute_slices", p->compute_slices);
		json_add_int(x, "memory_slices", p->memory_slices);
		json_add_int(x, "max_instances", p->max_instances);
		json_add_int(x, "sm_count", p->sm_count);
		json_add_int(x, "memory_mib", p->memory_mib);
		for (int j = 0; j < p->nplacements; j++)
			json_object_array_add(pl, json_object_new_int(p->placements[j]));
		json_object_object_add(x, "placements", pl);
		json_add_bool(x, "media_extensions", p->media_extensions);
		json_add_bool(x, "confirmed", p->confirmed);
		json_add_str(x, "k8s_resource",
		    spec_k8s_resource(p->name, k8s, sizeof(k8s)) == 0 ? k8s : NULL);
		json_object_array_add(profs, x);
	}
	json_object_object_add(o, "profiles", profs);
	return o;
}

/*
 * GET /v1/catalog/models: every model in catalog order; filters
 * product_name (as nvidia-smi names the board, any case), pci_device_id
 * and mig_capable=true|false. The cursor is the position in the catalog.
 */
int
api_catalog_models_list(struct request *req, struct response *res, struct gp_error *err)
{
	const struct catalog *c = api_app(req)->catalog;
	const char *product = req->query(req, "product_name");
	const char *pci = req->query(req, "pci_device_id");
	const char *mig = req->query(req, "mig_capable");
	const struct gpu_model *only = NULL;
	struct json_object *items;
	int limit, added = 0;
	int64_t cursor, next = 0;

	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (mig != NULL && strcmp(mig, "true") != 0 && strcmp(mig, "false") != 0)
		return gp_error_field(err, "mig_capable", "must be true or false");
	if (product != NULL && pci != NULL)
		return gp_error_field(err, "pci_device_id",
		    "give product_name or pci_device_id, not both");
	if (product != NULL)
		only = catalog_model_by_product(c, product);
	if (pci != NULL)
		only = catalog_model_by_pci_id(c, pci);
	items = json_object_new_array();
	for (int i = (int)cursor; i < catalog_nmodels(c); i++) {
		const struct gpu_model *m = catalog_model_at(c, i);

		if ((product != NULL || pci != NULL) && m != only)
			continue;
		if (mig != NULL && m->mig_capable != (strcmp(mig, "true") == 0))
			continue;
		if (added == limit) {
			next = i;
			break;
		}
		json_object_array_add(items, model_json(m));
		added++;
	}
	api_reply_list(req, res, items, next);
	return 0;
}

int
api_catalog_models_get(struct request *req, struct response *res, struct gp_error *err)
{
	const struct gpu_model *m = catalog_model(api_app(req)->catalog, req->params[0]);

	if (m == NULL)
		return gp_error_set(err, 404, "not_found", "no such model in the catalog: %s",
		    req->params[0]);
	response_json(req, res, 200, model_json(m));
	return 0;
}
