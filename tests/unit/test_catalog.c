/*
 * test_catalog.c - the GPU catalog: the embedded data parses, every model
 * and profile holds the numbers the hardware documents, lookups work, and
 * malformed catalogs are rejected with the failing field named.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "domain/catalog.h"
#include "domain/catalog_data.h"

struct model_row {
	const char *id;
	bool mig;
	int memory_mib;
	int memory_slices;
	int compute_slices;
	int full_slices;
	int nprofiles;
	int nruns;
};

/* Transcribed from NVIDIA's MIG user guide, independently of the parser. */
static const struct model_row model_rows[] = {
	{ "A30-24GB", true, 24576, 4, 4, 4, 5, 7 },
	{ "A100-40GB", true, 40960, 8, 7, 8, 7, 14 },
	{ "A100-80GB", true, 81920, 8, 7, 8, 7, 14 },
	{ "H100-80GB", true, 81559, 8, 7, 8, 7, 14 },
	{ "H100-NVL-94GB", true, 95830, 8, 7, 8, 7, 14 },
	{ "H200-141GB", true, 143771, 8, 7, 8, 7, 14 },
	{ "L40S-48GB", false, 46068, 0, 0, 1, 0, 0 },
	{ "L4-24GB", false, 23034, 0, 0, 1, 0, 0 },
	{ "A10G-24GB", false, 23028, 0, 0, 1, 0, 0 },
	{ "T4-16GB", false, 15360, 0, 0, 1, 0, 0 },
};

struct profile_row {
	const char *model;
	const char *name;
	int id;
	int compute;
	int memory;
	int max_instances;
	bool me;
	int placements[8];
	int nplacements;
};

#define P7 { 0, 1, 2, 3, 4, 5, 6 }, 7
#define P4 { 0, 2, 4, 6 }, 4
#define P3 { 0, 2, 4 }, 3
#define P2 { 0, 4 }, 2
#define P1 { 0 }, 1

static const struct profile_row profile_rows[] = {
	{ "A30-24GB", "1g.6gb", 14, 1, 1, 4, false, { 0, 1, 2, 3 }, 4 },
	{ "A30-24GB", "1g.6gb+me", 21, 1, 1, 1, true, { 0, 1, 2, 3 }, 4 },
	{ "A30-24GB", "2g.12gb", 5, 2, 2, 2, false, { 0, 2 }, 2 },
	{ "A30-24GB", "2g.12gb+me", 6, 2, 2, 1, true, { 0, 2 }, 2 },
	{ "A30-24GB", "4g.24gb", 0, 4, 4, 1, false, P1 },
	{ "A100-40GB", "1g.5gb", 19, 1, 1, 7, false, P7 },
	{ "A100-40GB", "1g.5gb+me", 20, 1, 1, 1, true, P7 },
	{ "A100-40GB", "1g.10gb", 15, 1, 2, 4, false, P4 },
	{ "A100-40GB", "2g.10gb", 14, 2, 2, 3, false, P3 },
	{ "A100-40GB", "3g.20gb", 9, 3, 4, 2, false, P2 },
	{ "A100-40GB", "4g.20gb", 5, 4, 4, 1, false, P1 },
	{ "A100-40GB", "7g.40gb", 0, 7, 8, 1, false, P1 },
	{ "A100-80GB", "1g.10gb", 19, 1, 1, 7, false, P7 },
	{ "A100-80GB", "1g.10gb+me", 20, 1, 1, 1, true, P7 },
	{ "A100-80GB", "1g.20gb", 15, 1, 2, 4, false, P4 },
	{ "A100-80GB", "2g.20gb", 14, 2, 2, 3, false, P3 },
	{ "A100-80GB", "3g.40gb", 9, 3, 4, 2, false, P2 },
	{ "A100-80GB", "4g.40gb", 5, 4, 4, 1, false, P1 },
	{ "A100-80GB", "7g.80gb", 0, 7, 8, 1, false, P1 },
	{ "H100-80GB", "1g.10gb", 19, 1, 1, 7, false, P7 },
	{ "H100-80GB", "1g.10gb+me", 20, 1, 1, 1, true, P7 },
	{ "H100-80GB", "1g.20gb", 15, 1, 2, 4, false, P4 },
	{ "H100-80GB", "2g.20gb", 14, 2, 2, 3, false, P3 },
	{ "H100-80GB", "3g.40gb", 9, 3, 4, 2, false, P2 },
	{ "H100-80GB", "4g.40gb", 5, 4, 4, 1, false, P1 },
	{ "H100-80GB", "7g.80gb", 0, 7, 8, 1, false, P1 },
	{ "H100-NVL-94GB", "1g.12gb", 19, 1, 1, 7, false, P7 },
	{ "H100-NVL-94GB", "1g.12gb+me", 20, 1, 1, 1, true, P7 },
	{ "H100-NVL-94GB", "1g.24gb", 15, 1, 2, 4, false, P4 },
	{ "H100-NVL-94GB", "2g.24gb", 14, 2, 2, 3, false, P3 },
	{ "H100-NVL-94GB", "3g.47gb", 9, 3, 4, 2, false, P2 },
	{ "H100-NVL-94GB", "4g.47gb", 5, 4, 4, 1, false, P1 },
	{ "H100-NVL-94GB", "7g.94gb", 0, 7, 8, 1, false, P1 },
	{ "H200-141GB", "1g.18gb", 19, 1, 1, 7, false, P7 },
	{ "H200-141GB", "1g.18gb+me", 20, 1, 1, 1, true, P7 },
	{ "H200-141GB", "1g.35gb", 15, 1, 2, 4, false, P4 },
	{ "H200-141GB", "2g.35gb", 14, 2, 2, 3, false, P3 },
	{ "H200-141GB", "3g.71gb", 9, 3, 4, 2, false, P2 },
	{ "H200-141GB", "4g.71gb", 5, 4, 4, 1, false, P1 },
	{ "H200-141GB", "7g.141gb", 0, 7, 8, 1, false, P1 },
};

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static int
setup(void **state)
{
	struct catalog *c = NULL;
	struct gp_error err;

	gp_error_clear(&err);
	if (catalog_load_builtin(&c, &err) < 0) {
		fprintf(stderr, "catalog: %s %s\n", err.message,
		    err.nfields > 0 ? err.fields[0].field : "");
		return -1;
	}
	*state = c;
	return 0;
}

static int
teardown(void **state)
{
	catalog_free(*state);
	return 0;
}

static void
test_embedded_copy(void **state)
{
	(void)state;
	assert_true(gp_catalog_json_len > 1000);
	assert_int_equal(gp_catalog_json[gp_catalog_json_len], '\0');
	assert_int_equal(strlen(gp_catalog_json), gp_catalog_json_len);
	assert_non_null(strstr(gp_catalog_json, "\"facts_for_tests\""));
}

static void
test_models(void **state)
{
	const struct catalog *c = *state;

	assert_int_equal(catalog_nmodels(c), NELEM(model_rows));
	for (int i = 0; i < NELEM(model_rows); i++) {
		const struct model_row *r = &model_rows[i];
		const struct gpu_model *m = catalog_model(c, r->id);

		assert_non_null(m);
		assert_ptr_equal(m, catalog_model_at(c, i));
		assert_string_equal(m->id, r->id);
		assert_int_equal(m->mig_capable, r->mig);
		assert_int_equal(m->memory_mib, r->memory_mib);
		assert_int_equal(m->memory_slices, r->memory_slices);
		assert_int_equal(m->compute_slices, r->compute_slices);
		assert_int_equal(m->full_slices, r->full_slices);
		assert_int_equal(m->nprofiles, r->nprofiles);
		assert_int_equal(m->nruns, r->nruns);
		assert_true(m->nproduct_names >= 1);
		assert_true(m->npci_device_ids >= 1);
	}
	assert_null(catalog_model_at(c, -1));
	assert_null(catalog_model_at(c, NELEM(model_rows)));
	assert_null(catalog_model(c, "h100-80gb")); /* ids are exact */
	assert_null(catalog_model(c, "H100"));
	assert_null(catalog_model(c, ""));
	assert_null(catalog_model(c, NULL));
}

static void
test_every_profile(void **state)
{
	const struct catalog *c = *state;
	int seen = 0;

	for (int i = 0; i < NELEM(profile_rows); i++) {
		const struct profile_row *r = &profile_rows[i];
		const struct gpu_model *m = catalog_model(c, r->model);
		const struct mig_profile *p = catalog_profile(m, r->name);

		assert_non_null(p);
		assert_string_equal(p->name, r->name);
		assert_ptr_equal(&m->profiles[p->index], p);
		assert_int_equal(p->id, r->id);
		assert_int_equal(p->compute_slices, r->compute);
		assert_int_equal(p->memory_slices, r->memory);
		assert_int_equal(p->max_instances, r->max_instances);
		assert_int_equal(p->media_extensions, r->me);
		assert_int_equal(p->nplacements, r->nplacements);
		for (int j = 0; j < r->nplacements; j++) {
			assert_int_equal(p->placements[j], r->placements[j]);
			assert_true(catalog_profile_allows(p, r->placements[j]));
		}
		for (int s = -1; s <= CATALOG_MAX_SLICES; s++) {
			bool listed = false;

			for (int j = 0; j < r->nplacements; j++)
				listed = listed || r->placements[j] == s;
			assert_int_equal(catalog_profile_allows(p, s), listed);
		}
		assert_true(p->memory_mib > 0 && p->memory_mib <= m->memory_mib);
		assert_true(p->sm_count > 0);
		seen++;
	}
	/* the table covers every profile in the catalog */
	for (int i = 0; i < catalog_nmodels(c); i++)
		seen -= catalog_model_at(c, i)->nprofiles;
	assert_int_equal(seen, 0);
}

/* Structural invariants every model must keep, whatever the file says. */
static void
test_invariants(void **state)
{
	const struct catalog *c = *state;

	for (int i = 0; i < catalog_nmodels(c); i++) {
		const struct gpu_model *m = catalog_model_at(c, i);
		bool has_whole = false;

		assert_ptr_equal(catalog_model(c, m->id), m);
		for (int j = 0; j < m->nproduct_names; j++)
			assert_ptr_equal(catalog_model_by_product(c, m->product_names[j]), m);
		for (int j = 0; j < m->npci_device_ids; j++)
			assert_ptr_equal(catalog_model_by_pci_id(c, m->pci_device_ids[j]), m);
		for (int j = 0; j < m->nprofiles; j++) {
			const struct mig_profile *p = &m->profiles[j];

			assert_int_equal(p->index, j);
			assert_ptr_equal(catalog_profile(m, p->name), p);
			assert_true(p->compute_slices <= m->compute_slices);
			assert_true(p->memory_slices <= m->memory_slices);
			for (int k = 0; k < p->nplacements; k++) {
				assert_true(p->placements[k] >= 0);
				assert_true(
				    p->placements[k] + p->memory_slices <= m->memory_slices);
				if (k > 0)
					assert_true(p->placements[k] > p->placements[k - 1]);
			}
			has_whole = has_whole ||
			    (p->memory_slices == m->memory_slices &&
				p->compute_slices == m->compute_slices);
		}
		assert_int_equal(has_whole, m->mig_capable);
		/* runs are distinct and each is a catalog placement */
		for (int j = 0; j < m->nruns; j++) {
			assert_int_equal(__builtin_popcount(m->run_mask[j]), m->run_size[j]);
			for (int k = 0; k < j; k++)
				assert_int_not_equal(m->run_mask[j], m->run_mask[k]);
		}
	}
}

static void
test_required_models(void **state)
{
	const struct catalog *c = *state;
	static const char *const required[] = {
		"H100-80GB",
		"H200-141GB",
		"A100-40GB",
		"L40S-48GB",
		"A30-24GB",
	};

	for (int i = 0; i < NELEM(required); i++)
		assert_non_null(catalog_model(c, required[i]));
	assert_false(catalog_model(c, "L40S-48GB")->mig_capable);
	assert_int_equal(catalog_model(c, "A30-24GB")->memory_slices, 4);
}

static void
test_product_lookup(void **state)
{
	const struct catalog *c = *state;
	static const struct {
		const char *product;
		const char *model;
	} rows[] = {
		{ "NVIDIA H100 80GB HBM3", "H100-80GB" },
		{ "nvidia h100 80gb hbm3", "H100-80GB" },
		{ "NVIDIA H100 PCIe", "H100-80GB" },
		{ "NVIDIA H100 NVL", "H100-NVL-94GB" },
		{ "NVIDIA H200", "H200-141GB" },
		{ "NVIDIA H200 NVL", "H200-141GB" },
		{ "NVIDIA A100-SXM4-40GB", "A100-40GB" },
		{ "NVIDIA A100-PCIE-40GB", "A100-40GB" },
		{ "NVIDIA A100-SXM4-80GB", "A100-80GB" },
		{ "NVIDIA A100 80GB PCIe", "A100-80GB" },
		{ "NVIDIA A30", "A30-24GB" },
		{ "NVIDIA L40S", "L40S-48GB" },
		{ "NVIDIA L4", "L4-24GB" },
		{ "NVIDIA A10G", "A10G-24GB" },
		{ "Tesla T4", "T4-16GB" },
	};

	for (int i = 0; i < NELEM(rows); i++) {
		const struct gpu_model *m = catalog_model_by_product(c, rows[i].product);

		assert_non_null(m);
		assert_string_equal(m->id, rows[i].model);
	}
	assert_null(catalog_model_by_product(c, "NVIDIA H100"));
	assert_null(catalog_model_by_product(c, "NVIDIA H100 80GB HBM3 "));
	assert_null(catalog_model_by_product(c, ""));
	assert_null(catalog_model_by_product(c, NULL));
	assert_string_equal(catalog_model_by_pci_id(c, "0x233010DE")->id, "H100-80GB");
	assert_string_equal(catalog_model_by_pci_id(c, "0x233010de")->id, "H100-80GB");
	assert_string_equal(catalog_model_by_pci_id(c, "0x20B710DE")->id, "A30-24GB");
	assert_null(catalog_model_by_pci_id(c, "0x00000000"));
	assert_null(catalog_model_by_pci_id(c, NULL));
}

static void
test_profile_lookup(void **state)
{
	const struct catalog *c = *state;
	const struct gpu_model *h100 = catalog_model(c, "H100-80GB");

	assert_null(catalog_profile(h100, "full"));
	assert_null(catalog_profile(h100, "3g.20gb")); /* an A100-40GB name */
	assert_null(catalog_profile(h100, "3G.40GB"));
	assert_null(catalog_profile(h100, NULL));
	assert_null(catalog_profile(NULL, "3g.40gb"));
	assert_null(catalog_profile(catalog_model(c, "L40S-48GB"), "1g.10gb"));
	assert_string_equal(catalog_profile(h100, "1g.10gb+me")->name, "1g.10gb+me");
}

static void
test_facts(void **state)
{
	const struct catalog *c = *state;

	/* test_placement.c has one test per fact: a new fact needs a new test */
	assert_int_equal(catalog_nfacts(c), 5);
	assert_non_null(strstr(catalog_fact(c, 0), "2 x 3g + 1 x 1g does NOT fit"));
	assert_non_null(strstr(catalog_fact(c, 1), "3g.40gb + 2g.20gb + 2g.20gb"));
	assert_non_null(strstr(catalog_fact(c, 2), "4g.40gb + 3g.40gb fits"));
	assert_non_null(strstr(catalog_fact(c, 3), "1g instances at starts 0, 1 and 5"));
	assert_non_null(strstr(catalog_fact(c, 4), "Memory slice 7"));
	assert_null(catalog_fact(c, 5));
	assert_null(catalog_fact(c, -1));
}

/* ---- malformed catalogs ---- */

#define PROFILE_OK                                                                                \
	"{\"name\":\"1g.5gb\",\"id\":19,\"compute_slices\":1,\"memory_slices\":1,"                \
	"\"max_instances\":7,\"sm_count\":14,\"memory_mib\":4864,\"placements\":[0,1,2,3,4,5,6]," \
	"\"media_extensions\":false,\"confirmed\":true}"
#define MODEL_OK(id, profiles)                                                           \
	"{\"model\":\"" id "\",\"product_names\":[\"X " id "\"],"                        \
	"\"pci_device_ids\":[\"0x12345678\"],\"memory_mib\":40960,\"mig_capable\":true," \
	"\"memory_slices\":8,\"compute_slices\":7,\"profiles\":[" profiles "]}"

static void
test_minimal_valid(void **state)
{
	static const char json[] = "{\"models\":[" MODEL_OK("M1",
	    PROFILE_OK) ","
			"{\"model\":\"N1\",\"product_names\":[\"n\"],\"pci_device_ids\":[\"0xABCDEF01\"],"
			"\"memory_mib\":100,\"mig_capable\":false,\"profiles\":[]}]}";
	struct catalog *c = NULL;
	struct gp_error err;

	(void)state;
	gp_error_clear(&err);
	assert_int_equal(catalog_load(&c, json, strlen(json), &err), 0);
	assert_int_equal(catalog_nmodels(c), 2);
	assert_int_equal(catalog_nfacts(c), 0);
	assert_int_equal(catalog_model(c, "M1")->nruns, 7);
	assert_int_equal(catalog_model(c, "N1")->full_slices, 1);
	catalog_free(c);
	catalog_free(NULL);
}

static void
test_rejects(void **state)
{
	static const struct {
		const char *json;
		const char *field; /* NULL: no field, only a message */
	} rows[] = {
		{ "", NULL },
		{ "[]", NULL },
		{ "{\"models\":[" MODEL_OK("M1", PROFILE_OK) "]} x", NULL },
		{ "{\"models\":[" MODEL_OK("M1", PROFILE_OK) "]", NULL },
		{ "{}", "models" },
		{ "{\"models\":[]}", "models" },
		{ "{\"models\":[" MODEL_OK("M1", PROFILE_OK) "],\"extra\":1}", "extra" },
		{ "{\"models\":[" MODEL_OK("M1", PROFILE_OK) "," MODEL_OK("M1", PROFILE_OK) "]}",
		    "models[1].model" },
		{ "{\"models\":[" MODEL_OK("M/1", PROFILE_OK) "]}", "models[0].model" },
		{ "{\"models\":[" MODEL_OK("M1", PROFILE_OK "," PROFILE_OK) "]}",
		    "models[0].profiles[1].name" },
		{ "{\"models\":[" MODEL_OK("M1", "") "]}", "models[0].profiles" },
		{ "{\"models\":[" MODEL_OK("M1", "{\"name\":\"full\"}") "]}",
		    "models[0].profiles[0].name" },
		{ "{\"models\":[" MODEL_OK("M1",
		      "{\"name\":\"1g.5gb\",\"id\":19,\"compute_slices\":1,"
		      "\"memory_slices\":1,\"max_instances\":7,\"sm_count\":14,\"memory_mib\":4864,"
		      "\"placements\":[0,8],\"media_extensions\":false,\"confirmed\":true}") "]}",
		    "models[0].profiles[0].placements" },
		{ "{\"models\":[" MODEL_OK("M1",
		      "{\"name\":\"3g\",\"id\":9,\"compute_slices\":3,"
		      "\"memory_slices\":4,\"max_instances\":2,\"sm_count\":14,\"memory_mib\":4864,"
		      "\"placements\":[0,5],\"media_extensions\":false,\"confirmed\":true}") "]}",
		    "models[0].profiles[0].placements" },
		{ "{\"models\":[" MODEL_OK("M1",
		      "{\"name\":\"1g\",\"id\":9,\"compute_slices\":1,"
		      "\"memory_slices\":1,\"max_instances\":2,\"sm_count\":14,\"memory_mib\":4864,"
		      "\"placements\":[2,1],\"media_extensions\":false,\"confirmed\":true}") "]}",
		    "models[0].profiles[0].placements" },
		{ "{\"models\":[" MODEL_OK("M1",
		      "{\"name\":\"9g\",\"id\":9,\"compute_slices\":9,"
		      "\"memory_slices\":1,\"max_instances\":2,\"sm_count\":14,\"memory_mib\":4864,"
		      "\"placements\":[0],\"media_extensions\":false,\"confirmed\":true}") "]}",
		    "models[0].profiles[0].compute_slices" },
		{ "{\"models\":[" MODEL_OK("M1",
		      "{\"name\":\"1g\",\"id\":9,\"compute_slices\":1,"
		      "\"memory_slices\":1,\"max_instances\":2,\"sm_count\":14,\"memory_mib\":4864,"
		      "\"placements\":[0],\"media_extensions\":\"no\",\"confirmed\":true}") "]}",
		    "models[0].profiles[0].media_extensions" },
		{ "{\"models\":[" MODEL_OK("M1",
		      "{\"name\":\"1g\",\"id\":9,\"compute_slices\":1,"
		      "\"memory_slices\":1,\"max_instances\":2,\"sm_count\":14,\"memory_mib\":4864,"
		      "\"placements\":[0],\"media_extensions\":false,\"confirmed\":true,\"x\":1}") "]}",
		    "models[0].profiles[0].x" },
		{ "{\"models\":[{\"model\":\"N1\",\"product_names\":[\"n\"],\"pci_device_ids\":[\"0xABCDEF01\"],"
		  "\"memory_mib\":100,\"mig_capable\":false,\"profiles\":[" PROFILE_OK "]}]}",
		    "models[0].profiles" },
		{ "{\"models\":[{\"model\":\"N1\",\"product_names\":[\"n\"],\"pci_device_ids\":[\"0xABCDEF01\"],"
		  "\"memory_mib\":100,\"mig_capable\":false,\"memory_slices\":8,\"profiles\":[]}]}",
		    "models[0].memory_slices" },
		{ "{\"models\":[{\"model\":\"N1\",\"product_names\":[\"n\"],\"pci_device_ids\":[\"0xABCDEF01\"],"
		  "\"memory_mib\":100,\"profiles\":[]}]}",
		    "models[0].mig_capable" },
		{ "{\"models\":[{\"model\":\"N1\",\"product_names\":[],\"pci_device_ids\":[\"0xABCDEF01\"],"
		  "\"memory_mib\":100,\"mig_capable\":false,\"profiles\":[]}]}",
		    "models[0].product_names" },
		{ "{\"models\":[{\"model\":\"N1\",\"product_names\":[\"n\"],\"pci_device_ids\":[\"10DE\"],"
		  "\"memory_mib\":100,\"mig_capable\":false,\"profiles\":[]}]}",
		    "models[0].pci_device_ids" },
		{ "{\"models\":[{\"model\":\"M1\",\"product_names\":[\"n\"],\"pci_device_ids\":[\"0xABCDEF01\"],"
		  "\"memory_mib\":100,\"mig_capable\":true,\"memory_slices\":9,\"compute_slices\":7,"
		  "\"profiles\":[]}]}",
		    "models[0].memory_slices" },
		{ "{\"models\":[" MODEL_OK("M1", PROFILE_OK) "],\"facts_for_tests\":[1]}",
		    "facts_for_tests" },
	};

	(void)state;
	for (int i = 0; i < NELEM(rows); i++) {
		struct catalog *c = (struct catalog *)&rows; /* must be reset to NULL */
		struct gp_error err;

		gp_error_clear(&err);
		if (catalog_load(&c, rows[i].json, strlen(rows[i].json), &err) == 0)
			fail_msg("row %d was accepted: %s", i, rows[i].json);
		assert_null(c);
		assert_true(gp_error_isset(&err));
		assert_true(err.message[0] != '\0');
		if (rows[i].field != NULL) {
			if (err.nfields < 1 || strcmp(err.fields[0].field, rows[i].field) != 0)
				fail_msg("row %d: expected field %s, got %s (%s)", i, rows[i].field,
				    err.nfields > 0 ? err.fields[0].field : "none", err.message);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_embedded_copy),
		cmocka_unit_test(test_models),
		cmocka_unit_test(test_every_profile),
		cmocka_unit_test(test_invariants),
		cmocka_unit_test(test_required_models),
		cmocka_unit_test(test_product_lookup),
		cmocka_unit_test(test_profile_lookup),
		cmocka_unit_test(test_facts),
		cmocka_unit_test(test_minimal_valid),
		cmocka_unit_test(test_rejects),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
