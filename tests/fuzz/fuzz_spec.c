/*
 * fuzz_spec.c - libFuzzer harness for the SpecAndCount text form
 * (spec_parse, spec_format), its check against the built-in catalog
 * (spec_validate) and the Kubernetes resource names
 * (spec_k8s_resource, spec_profile_from_k8s).
 *
 * Invariants: a parsed spec formats back to the input byte for byte
 * (the form is canonical) and parses again to the same spec; a refusal
 * is a 422 naming the field; a validated spec has 1 <= count <=
 * SPEC_COUNT_MAX; a profile's resource name maps back to that profile.
 */
#include "core/error.h"
#include "domain/catalog.h"
#include "domain/spec.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct catalog *cat;

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char text[256], buf[SPEC_TEXT_MAX], k8s[SPEC_K8S_MAX];
	struct spec_count s, again;
	const struct gpu_model *m = NULL;
	const struct mig_profile *p = NULL;
	struct gp_error err;

	if (cat == NULL) {
		memset(&err, 0, sizeof(err));
		if (catalog_load_builtin(&cat, &err) < 0)
			abort();
	}
	if (size >= sizeof(text))
		return 0;
	memcpy(text, data, size);
	text[size] = '\0';

	memset(&err, 0, sizeof(err));
	if (spec_parse(text, &s, "spec", &err) < 0) {
		if (err.status != 422 || err.nfields < 1 ||
		    strncmp(err.fields[0].field, "spec", 4) != 0)
			abort();
	} else {
		if (spec_format(&s, buf, sizeof(buf)) < 0 || strcmp(buf, text) != 0)
			abort();
		memset(&err, 0, sizeof(err));
		if (spec_parse(buf, &again, "spec", &err) < 0 || spec_compare(&s, &again) != 0 ||
		    !spec_same_kind(&s, &again))
			abort();
		memset(&err, 0, sizeof(err));
		if (spec_validate(&s, cat, "items[0]", &m, &p, &err) == 0) {
			if (m == NULL || s.count < 1 || s.count > SPEC_COUNT_MAX ||
			    (p == NULL) != spec_is_full(&s))
				abort();
			if (spec_k8s_resource(s.profile, k8s, sizeof(k8s)) == 0) {
				const char *back = spec_profile_from_k8s(m, k8s);

				if (back == NULL || strcmp(back, s.profile) != 0)
					abort();
			}
		} else if (err.status != 422) {
			abort();
		}
	}
	/* the input as a Kubernetes resource name of every model */
	for (int i = 0; i < catalog_nmodels(cat); i++)
		(void)spec_profile_from_k8s(catalog_model_at(cat, i), text);
	(void)spec_k8s_resource(text, k8s, sizeof(k8s));
	return 0;
}
