/*
 * test_spec.c - SpecAndCount: strict text form, catalog validation with
 * field paths, and the Kubernetes resource names.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "domain/catalog.h"
#include "domain/spec.h"

#include "unit_catalog.h"

#define NELEM(a) ((int)(sizeof(a) / sizeof((a)[0])))

static void
test_parse_valid(void **state)
{
	static const struct {
		const char *text;
		const char *model;
		const char *profile;
		int count;
	} rows[] = {
		{ "H100-80GB/3g.40gb=2", "H100-80GB", "3g.40gb", 2 },
		{ "A30-24GB/1g.6gb+me=1", "A30-24GB", "1g.6gb+me", 1 },
		{ "L40S-48GB/full=4096", "L40S-48GB", "full", 4096 },
		{ "H200-141GB/7g.141gb=10", "H200-141GB", "7g.141gb", 10 },
		{ "x/y=9", "x", "y", 9 },
		{ "A_B.c-1/p_q-r.s+t=123", "A_B.c-1", "p_q-r.s+t", 123 },
	};

	(void)state;
	for (int i = 0; i < NELEM(rows); i++) {
		struct spec_count s;
		struct gp_error err;
		char buf[SPEC_TEXT_MAX];

		gp_error_clear(&err);
		assert_int_equal(spec_parse(rows[i].text, &s, "spec", &err), 0);
		assert_false(gp_error_isset(&err));
		assert_string_equal(s.model, rows[i].model);
		assert_string_equal(s.profile, rows[i].profile);
		assert_int_equal(s.count, rows[i].count);
		assert_int_equal(spec_format(&s, buf, sizeof(buf)), 0);
		assert_string_equal(buf, rows[i].text);
	}
}

static void
test_parse_invalid(void **state)
{
	static const char *const rows[] = {
		"", "H100-80GB", "H100-80GB/3g.40gb", "H100-80GB/3g.40gb=", "=2", "/3g.40gb=2",
		"H100-80GB/=2", "H100-80GB/3g.40gb=0", "H100-80GB/3g.40gb=-1",
		"H100-80GB/3g.40gb=+1", "H100-80GB/3g.40gb= 1", "H100-80GB/3g.40gb=01",
		"H100-80GB/3g.40gb=1x", "H100-80GB/3g.40gb=4097", "H100-80GB/3g.40gb=1.0",
		"H100-80GB/3g.40gb=99999999999999999999999", "H100-80GB/3g.40gb=2 ",
		" H100-80GB/3g.40gb=2", "H100 80GB/3g.40gb=2", "H100-80GB/3g 40gb=2",
		"H100-80GB/3g.40gb=2=3", "a/b/c=1", "a=b/c=1", "H100+80GB/3g.40gb=2",
		"H100-80GB\n/3g.40gb=2", "H100-80GB/3g.40gb=0x2",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/3g.40gb=1",   /* 32-byte model */
		"H100-80GB/pppppppppppppppppppppppppppppppp=1", /* 32-byte profile */
	};

	(void)state;
	for (int i = 0; i < NELEM(rows); i++) {
		struct spec_count s;
		struct gp_error err;

		memset(&s, 0x5a, sizeof(s));
		gp_error_clear(&err);
		if (spec_parse(rows[i], &s, "quota[3]", &err) == 0)
			fail_msg("accepted \"%s\"", rows[i]);
		assert_int_equal(err.status, 422);
		assert_string_equal(err.code, "validation_failed");
		assert_int_equal(err.nfields, 1);
		assert_string_equal(err.fields[0].field, "quota[3]");
		assert_true(err.fields[0].message[0] != '\0');
		assert_int_equal((unsigned char)s.model[0], 0x5a); /* untouched on failure */
	}
	{
		struct spec_count s;
		struct gp_error err;

		gp_error_clear(&err);
		assert_int_equal(spec_parse(NULL, &s, NULL, &err), -1);
		assert_string_equal(err.fields[0].field, "spec");
	}
	/* names of exactly 31 bytes are fine */
	{
		struct spec_count s;
		struct gp_error err;

		gp_error_clear(&err);
		assert_int_equal(spec_parse("AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA/ppppppppppppppppppppppppppppppp=1",
				     &s, "x", &err),
		    0);
		assert_int_equal(strlen(s.model), 31);
		assert_int_equal(strlen(s.profile), 31);
	}
}

static void
test_format(void **state)
{
	struct spec_count s;
	struct gp_error err;
	char buf[SPEC_TEXT_MAX];
	char small[8];

	(void)state;
	gp_error_clear(&err);
	assert_int_equal(spec_set(&s, "H100-80GB", "3g.40gb", 2, "x", &err), 0);
	assert_int_equal(spec_format(&s, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "H100-80GB/3g.40gb=2");
	assert_int_equal(spec_format(&s, small, sizeof(small)), -1);
	assert_int_equal(strlen(small), sizeof(small) - 1);
	/* the longest names and count still fit SPEC_TEXT_MAX */
	memset(s.model, 'M', sizeof(s.model) - 1);
	s.model[sizeof(s.model) - 1] = '\0';
	memset(s.profile, 'p', sizeof(s.profile) - 1);
	s.profile[sizeof(s.profile) - 1] = '\0';
	s.count = SPEC_COUNT_MAX;
	assert_int_equal(spec_format(&s, buf, sizeof(buf)), 0);
}

/* Every model x (every profile + full) formats and parses back. */
static void
test_roundtrip_catalog(void **state)
{
	const struct catalog *c = *state;
	int n = 0;

	for (int i = 0; i < catalog_nmodels(c); i++) {
		const struct gpu_model *m = catalog_model_at(c, i);

		for (int j = -1; j < m->nprofiles; j++) {
			struct spec_count s, back;
			struct gp_error err;
			const struct gpu_model *vm = NULL;
			const struct mig_profile *vp = (const struct mig_profile *)m;
			char buf[SPEC_TEXT_MAX];

			gp_error_clear(&err);
			assert_int_equal(spec_set(&s, m->id,
					     j < 0 ? SPEC_FULL : m->profiles[j].name, j + 2, "x",
					     &err),
			    0);
			assert_int_equal(spec_format(&s, buf, sizeof(buf)), 0);
			assert_int_equal(spec_parse(buf, &back, "x", &err), 0);
			assert_int_equal(spec_compare(&s, &back), 0);
			assert_int_equal(spec_validate(&back, c, "x", &vm, &vp, &err), 0);
			assert_ptr_equal(vm, m);
			if (j < 0) {
				assert_null(vp);
				assert_true(spec_is_full(&back));
			} else {
				assert_ptr_equal(vp, &m->profiles[j]);
				assert_false(spec_is_full(&back));
			}
			n++;
		}
	}
	assert_int_equal(n, 40 + 10);
}

static void
test_validate_errors(void **state)
{
	const struct catalog *c = *state;
	static const struct {
		const char *model;
		const char *profile;
		int count;
		const char *prefix;
		int nfields;
		const char *field0;
		const char *msg0; /* substring of the first message */
		const char *field1;
	} rows[] = {
		{ "H100-80GB", "3g.40gb", 1, "items[0]", 0, NULL, NULL, NULL },
		{ "L40S-48GB", "full", 1, "items[0]", 0, NULL, NULL, NULL },
		{ "H100-80GB", "full", 4096, "", 0, NULL, NULL, NULL },
		{ "H101-80GB", "3g.40gb", 1, "items[0]", 1, "items[0].model",
		    "unknown gpu model \"H101-80GB\"", NULL },
		{ "h100-80gb", "3g.40gb", 1, "items[0]", 1, "items[0].model", "unknown gpu model",
		    NULL },
		{ "H100-80GB", "3g.20gb", 1, "items[2]", 1, "items[2].profile",
		    "model H100-80GB offers no profile \"3g.20gb\"", NULL },
		{ "H100-80GB", "FULL", 1, "items[2]", 1, "items[2].profile", "offers no profile",
		    NULL },
		{ "L40S-48GB", "1g.10gb", 1, "items[1]", 1, "items[1].profile",
		    "model L40S-48GB is not MIG-capable", NULL },
		{ "A30-24GB", "3g.40gb", 1, NULL, 1, "profile", "offers no profile", NULL },
		{ "H100-80GB", "3g.40gb", 0, "items[0]", 1, "items[0].count", "between 1 and 4096",
		    NULL },
		{ "H100-80GB", "3g.40gb", -5, "items[0]", 1, "items[0].count", "between 1", NULL },
		{ "H100-80GB", "3g.40gb", 4097, "items[0]", 1, "items[0].count", "between 1",
		    NULL },
		{ "nope", "3g.40gb", 0, "items[4]", 2, "items[4].model", "unknown",
		    "items[4].count" },
		{ "H100-80GB", "9g", 0, "q", 2, "q.profile", "offers no", "q.count" },
		/* a well-formed size the model lacks: the profiles next to it by size */
		{ "H100-80GB", "5g.50gb", 1, "items[0]", 1, "items[0].profile",
		    "model H100-80GB offers no profile \"5g.50gb\"; the nearest sizes are "
		    "\"4g.40gb\" (smaller) and \"7g.80gb\" (larger)",
		    NULL },
		{ "H100-80GB", "7g.90gb", 1, "items[0]", 1, "items[0].profile",
		    "offers no profile \"7g.90gb\"; the nearest size is \"7g.80gb\" (smaller)",
		    NULL },
		{ "A100-40GB", "1g.4gb", 1, "items[0]", 1, "items[0].profile",
		    "offers no profile \"1g.4gb\"; the nearest size is \"1g.5gb\" (larger)", NULL },
		/* a typo of a name still gets the name */
		{ "H100-80GB", "3g.40g", 1, "items[0]", 1, "items[0].profile",
		    "offers no profile \"3g.40g\"; did you mean \"3g.40gb\"?", NULL },
	};

	for (int i = 0; i < NELEM(rows); i++) {
		struct spec_count s;
		struct gp_error err;
		const struct gpu_model *m = NULL;

		gp_error_clear(&err);
		assert_int_equal(spec_set(&s, rows[i].model, rows[i].profile, rows[i].count,
				     rows[i].prefix, &err),
		    0);
		if (rows[i].nfields == 0) {
			assert_int_equal(spec_validate(&s, c, rows[i].prefix, &m, NULL, &err), 0);
			assert_non_null(m);
			continue;
		}
		assert_int_equal(spec_validate(&s, c, rows[i].prefix, &m, NULL, &err), -1);
		assert_null(m);
		assert_int_equal(err.status, 422);
		assert_string_equal(err.code, "validation_failed");
		assert_int_equal(err.nfields, rows[i].nfields);
		assert_string_equal(err.fields[0].field, rows[i].field0);
		if (strstr(err.fields[0].message, rows[i].msg0) == NULL)
			fail_msg("row %d: \"%s\" lacks \"%s\"", i, err.fields[0].message,
			    rows[i].msg0);
		if (rows[i].field1 != NULL)
			assert_string_equal(err.fields[1].field, rows[i].field1);
	}
}

static void
test_full_every_model(void **state)
{
	const struct catalog *c = *state;

	for (int i = 0; i < catalog_nmodels(c); i++) {
		struct spec_count s;
		struct gp_error err;

		gp_error_clear(&err);
		assert_int_equal(spec_set(&s, catalog_model_at(c, i)->id, "full", 1, "x", &err), 0);
		assert_int_equal(spec_validate(&s, c, "x", NULL, NULL, &err), 0);
	}
}

static void
test_set_too_long(void **state)
{
	struct spec_count s;
	struct gp_error err;
	char longname[64];

	(void)state;
	memset(longname, 'a', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	gp_error_clear(&err);
	assert_int_equal(spec_set(&s, longname, longname, 1, "items[1]", &err), -1);
	assert_int_equal(err.nfields, 2);
	assert_string_equal(err.fields[0].field, "items[1].model");
	assert_string_equal(err.fields[1].field, "items[1].profile");
	gp_error_clear(&err);
	assert_int_equal(spec_set(&s, NULL, "full", 1, NULL, &err), -1);
	assert_string_equal(err.fields[0].field, "model");
}

static void
test_compare(void **state)
{
	struct spec_count a, b;
	struct gp_error err;

	(void)state;
	gp_error_clear(&err);
	assert_int_equal(spec_set(&a, "H100-80GB", "3g.40gb", 2, "", &err), 0);
	assert_int_equal(spec_set(&b, "H100-80GB", "3g.40gb", 3, "", &err), 0);
	assert_true(spec_same_kind(&a, &b));
	assert_true(spec_compare(&a, &b) < 0);
	assert_true(spec_compare(&b, &a) > 0);
	assert_int_equal(spec_compare(&a, &a), 0);
	assert_int_equal(spec_set(&b, "H100-80GB", "1g.10gb", 2, "", &err), 0);
	assert_false(spec_same_kind(&a, &b));
	assert_true(spec_compare(&a, &b) > 0);
	assert_int_equal(spec_set(&b, "A100-40GB", "3g.40gb", 2, "", &err), 0);
	assert_false(spec_same_kind(&a, &b));
	assert_true(spec_compare(&a, &b) > 0);
}

static void
test_k8s_names(void **state)
{
	const struct catalog *c = *state;
	const struct gpu_model *h100 = catalog_model(c, "H100-80GB");
	char buf[SPEC_K8S_MAX];
	char small[16];

	assert_int_equal(spec_k8s_resource("full", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "nvidia.com/gpu");
	assert_int_equal(spec_k8s_resource("3g.40gb", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "nvidia.com/mig-3g.40gb");
	assert_int_equal(spec_k8s_resource("1g.10gb+me", buf, sizeof(buf)), 0);
	assert_string_equal(buf, "nvidia.com/mig-1g.10gb.me");
	assert_int_equal(spec_k8s_resource("3g.40gb", small, sizeof(small)), -1);
	assert_int_equal(spec_k8s_resource("full", small, 14), -1);
	assert_int_equal(spec_k8s_resource("full", small, 15), 0);
	assert_int_equal(spec_k8s_resource("", buf, sizeof(buf)), -1);

	assert_string_equal(spec_profile_from_k8s(h100, "nvidia.com/gpu"), "full");
	assert_string_equal(spec_profile_from_k8s(h100, "nvidia.com/mig-3g.40gb"), "3g.40gb");
	assert_string_equal(spec_profile_from_k8s(h100, "nvidia.com/mig-1g.10gb.me"), "1g.10gb+me");
	assert_null(spec_profile_from_k8s(h100, "nvidia.com/mig-1g.10gb+me"));
	assert_null(spec_profile_from_k8s(h100, "nvidia.com/mig-3g.20gb"));
	assert_null(spec_profile_from_k8s(h100, "nvidia.com/mig-"));
	assert_null(spec_profile_from_k8s(h100, "amd.com/gpu"));
	assert_null(spec_profile_from_k8s(h100, NULL));
	assert_string_equal(spec_profile_from_k8s(catalog_model(c, "L4-24GB"), "nvidia.com/gpu"),
	    "full");
	/* every profile of every model maps there and back */
	for (int i = 0; i < catalog_nmodels(c); i++) {
		const struct gpu_model *m = catalog_model_at(c, i);

		for (int j = 0; j < m->nprofiles; j++) {
			assert_int_equal(spec_k8s_resource(m->profiles[j].name, buf, sizeof(buf)),
			    0);
			assert_int_equal(strncmp(buf, "nvidia.com/mig-", 15), 0);
			assert_null(strchr(buf, '+'));
			assert_ptr_equal(spec_profile_from_k8s(m, buf), m->profiles[j].name);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_valid),
		cmocka_unit_test(test_parse_invalid),
		cmocka_unit_test(test_format),
		cmocka_unit_test(test_roundtrip_catalog),
		cmocka_unit_test(test_validate_errors),
		cmocka_unit_test(test_full_every_model),
		cmocka_unit_test(test_set_too_long),
		cmocka_unit_test(test_compare),
		cmocka_unit_test(test_k8s_names),
	};

	return cmocka_run_group_tests(tests, unit_catalog_setup, unit_catalog_teardown);
}
