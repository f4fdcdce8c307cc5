/*
 * catalog.h - the GPU catalog: models and their MIG profiles.
 *
 * The catalog is parsed once from JSON (the project's data/gpu-catalog.json,
 * embedded in the binary, see catalog_data.h) and is read-only afterwards,
 * so any number of threads may share it. Lookups return pointers into the
 * catalog, valid until catalog_free().
 */
#ifndef GP_DOMAIN_CATALOG_H
#define GP_DOMAIN_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"

#define CATALOG_MAX_SLICES 8    /* memory slices per GPU (a uint8_t mask) */
#define CATALOG_MAX_PROFILES 16 /* MIG profiles per model */
#define CATALOG_MAX_RUNS 32     /* distinct (start, size) runs per model */
#define CATALOG_NAME_MAX 32     /* model ids and profile names, NUL included */

/* One MIG GPU-instance profile of a model, as `nvidia-smi mig -lgip` shows it. */
struct mig_profile {
	char name[CATALOG_NAME_MAX]; /* "3g.40gb", "1g.10gb+me" */
	int index;                   /* position in gpu_model.profiles */
	int id;                      /* NVML GPU-instance profile id */
	int compute_slices;
	int memory_slices; /* length of the slice run it holds */
	int max_instances; /* per GPU */
	int sm_count;
	int memory_mib;
	int placements[CATALOG_MAX_SLICES]; /* allowed starts, ascending */
	int nplacements;
	bool media_extensions;
	bool confirmed; /* seen in a capture, not inferred */
};

/* One GPU model. Non-MIG models have no profiles and memory_slices 0. */
struct gpu_model {
	char id[CATALOG_NAME_MAX];  /* "H100-80GB" */
	const char **product_names; /* as nvidia-smi names the board */
	int nproduct_names;
	const char **pci_device_ids; /* "0x233010DE" */
	int npci_device_ids;
	int memory_mib;
	bool mig_capable;
	int memory_slices;  /* 0 for a non-MIG model */
	int compute_slices; /* 0 for a non-MIG model */
	int full_slices;    /* slice run of a whole-GPU allocation:
					 * memory_slices, or 1 for a non-MIG model */
	struct mig_profile profiles[CATALOG_MAX_PROFILES];
	int nprofiles;
	/* Distinct slice runs over all profiles' placements, as bit masks
	 * with their sizes: what "a free run usable later" means for
	 * this model. Derived at load. */
	uint8_t run_mask[CATALOG_MAX_RUNS];
	uint8_t run_size[CATALOG_MAX_RUNS];
	int nruns;
};

struct catalog;

/*
 * Parse a catalog from len bytes of JSON (not necessarily NUL-terminated).
 * Unknown fields, wrong types, duplicate ids or names, placements outside
 * the GPU and profiles on a non-MIG model are rejected. On success *out
 * is a new catalog owned by the caller (catalog_free); on failure returns
 * -1 with err filled (field paths such as "models[3].profiles[1].placements").
 */
int catalog_load(struct catalog **out, const char *json, size_t len, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Parse the catalog embedded at build time (catalog_data.h). */
int catalog_load_builtin(struct catalog **out, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Free c and everything it holds. NULL is a no-op. */
void catalog_free(struct catalog *c);

/* Number of models, and model i (0 <= i < catalog_nmodels), in file order. */
int catalog_nmodels(const struct catalog *c);
const struct gpu_model *catalog_model_at(const struct catalog *c, int i);

/* The model with this id ("H100-80GB"), exact match; NULL when unknown. */
const struct gpu_model *catalog_model(const struct catalog *c, const char *model_id);

/* The model whose product_names holds name ("NVIDIA H100 80GB HBM3"),
 * compared without regard to case; NULL when none does. */
const struct gpu_model *catalog_model_by_product(const struct catalog *c, const char *product_name);

/* The model whose pci_device_ids holds id ("0x233010de"), case-insensitive. */
const struct gpu_model *catalog_model_by_pci_id(const struct catalog *c, const char *pci_device_id);

/* The profile named name ("3g.40gb") of model m; NULL when m offers none
 * by that name ("full" is not a profile: see spec.h). */
const struct mig_profile *catalog_profile(const struct gpu_model *m, const char *name);

/* True when start is one of p's allowed placements. */
bool catalog_profile_allows(const struct mig_profile *p, int start);

/* The catalog's facts_for_tests sentences, in file order. */
int catalog_nfacts(const struct catalog *c);
const char *catalog_fact(const struct catalog *c, int i);

#endif
