/*
 * test_agent_dcgm.c - gpupool-agent's dcgm-exporter scrape parser (on
 * tests/fixtures/dcgm-exporter/) and the push signature check.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dcgm.h"
#include "push.h"
#include "util.h"

static const struct dcgm_device *
find(const struct dcgm_device *d, int n, const char *uuid_prefix, int gi)
{
	for (int i = 0; i < n; i++)
		if (d[i].gi_id == gi &&
		    strncmp(d[i].gpu_uuid, uuid_prefix, strlen(uuid_prefix)) == 0)
			return &d[i];
	return NULL;
}

static void
test_scrape_fixture(void **state)
{
	(void)state;
	char *txt = ag_read_file(FIXTURES_DIR "/dcgm-exporter/h100-mig-k8s.prom", NULL);
	assert_non_null(txt);
	struct dcgm_device d[DCGM_MAX_DEVICES];
	char err[128];
	int n = dcgm_parse(txt, d, DCGM_MAX_DEVICES, err, sizeof(err));
	free(txt);
	/* GPU 0 whole-GPU series, its GIs 2, 9, 10, and GPU 1 */
	assert_int_equal(n, 5);
	const struct dcgm_device *g0 = find(d, n, "GPU-5a9c", -1);
	assert_non_null(g0);
	assert_true(g0->power_w > 212.4 && g0->power_w < 212.5);
	assert_true(g0->temperature_c == 47);
	assert_int_equal(g0->npods, 0);
	const struct dcgm_device *gi2 = find(d, n, "GPU-5a9c", 2);
	assert_non_null(gi2);
	assert_string_equal(gi2->gi_profile, "3g.40gb");
	assert_int_equal(gi2->npods, 1);
	assert_string_equal(gi2->pods[0].ns, "team-a");
	assert_string_equal(gi2->pods[0].pod, "llm-serve-7d9f8-abcde");
	assert_string_equal(gi2->pods[0].container, "server");
	assert_true(gi2->sm_active > 0.73 && gi2->sm_active < 0.74); /* GR_ENGINE_ACTIVE */
	assert_true(gi2->fb_used_mib == 30112 && gi2->fb_free_mib == 10336);
	const struct dcgm_device *gi10 = find(d, n, "GPU-5a9c", 10);
	assert_non_null(gi10);
	assert_int_equal(gi10->npods, 0); /* no pod holds it */
	const struct dcgm_device *g1 = find(d, n, "GPU-7b1d", -1);
	assert_non_null(g1);
	assert_int_equal(g1->npods, 1); /* one pod over five series: deduplicated */
	assert_string_equal(g1->pods[0].ns, "team-b");
	assert_true(g1->last_xid == 13);
	assert_true(g1->sm_active > 0.91 && g1->sm_active < 0.92);
}

static void
test_scrape_hostile(void **state)
{
	(void)state;
	struct dcgm_device d[4];
	char err[128];
	assert_int_equal(dcgm_parse("DCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-1\" 4\n", d, 4, err,
			     sizeof(err)),
	    -1);
	assert_int_equal(dcgm_parse("DCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-1\"}\n", d, 4, err,
			     sizeof(err)),
	    -1);
	/* escapes in label values, other metrics ignored, capacity respected */
	int n =
	    dcgm_parse("up 1\nDCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-1\",pod=\"a\\\"b\",namespace=\"n\"} 40\n"
		       "DCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-2\"} 41\nDCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-3\"} 1\n"
		       "DCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-4\"} 1\nDCGM_FI_DEV_GPU_TEMP{UUID=\"GPU-5\"} 1\n",
		d, 4, err, sizeof(err));
	assert_int_equal(n, 4);
	assert_string_equal(d[0].pods[0].pod, "a\"b");
	assert_int_equal(dcgm_parse("", d, 4, err, sizeof(err)), 0);
}

static void
test_push_signature(void **state)
{
	(void)state;
	const char *secret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
	const char *body = "{\"generation\":5,\"gpus\":[]}";
	char sig[80];
	assert_int_equal(push_sign(secret, "1700000000", body, strlen(body), sig, sizeof(sig)), 0);
	assert_int_equal(strlen(sig), 67);
	const char *why;
	assert_int_equal(push_verify(secret, "1700000000", sig, body, strlen(body), 1700000100,
			     &why),
	    0);
	/* the signature covers timestamp and body */
	assert_int_equal(push_verify(secret, "1700000001", sig, body, strlen(body), 1700000100,
			     &why),
	    -1);
	assert_int_equal(push_verify(secret, "1700000000", sig, "{}", 2, 1700000100, &why), -1);
	assert_string_equal(why, "bad signature");
	/* another secret */
	assert_int_equal(push_verify("other", "1700000000", sig, body, strlen(body), 1700000100,
			     &why),
	    -1);
	/* 300 s of skew either way, not 301 */
	assert_int_equal(push_verify(secret, "1700000000", sig, body, strlen(body), 1700000300,
			     &why),
	    0);
	assert_int_equal(push_verify(secret, "1700000000", sig, body, strlen(body), 1700000301,
			     &why),
	    -1);
	assert_int_equal(push_verify(secret, "1700000000", sig, body, strlen(body), 1699999699,
			     &why),
	    -1);
	/* malformed headers */
	assert_int_equal(push_verify(secret, NULL, sig, body, strlen(body), 1700000000, &why), -1);
	assert_int_equal(push_verify(secret, "17e8", sig, body, strlen(body), 1700000000, &why),
	    -1);
	assert_int_equal(push_verify(secret, "1700000000", "v1=zz", body, strlen(body), 1700000000,
			     &why),
	    -1);
	assert_int_equal(push_verify(secret, "1700000000", sig + 3, body, strlen(body), 1700000000,
			     &why),
	    -1);
	/* a list where one value matches (secret rotation) */
	char list[200];
	snprintf(list, sizeof(list), "v1=%064d, %s", 0, sig);
	assert_int_equal(push_verify(secret, "1700000000", list, body, strlen(body), 1700000000,
			     &why),
	    0);
	/* uppercase hex is the same MAC */
	char up[80];
	snprintf(up, sizeof(up), "%s", sig);
	for (char *p = up + 3; *p; p++)
		if (*p >= 'a' && *p <= 'f')
			*p = (char)(*p - 32);
	assert_int_equal(push_verify(secret, "1700000000", up, body, strlen(body), 1700000000,
			     &why),
	    0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_scrape_fixture),
		cmocka_unit_test(test_scrape_hostile),
		cmocka_unit_test(test_push_signature),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
