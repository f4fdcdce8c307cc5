/*
 * test_agent_report.c - the JSON gpupool-agent sends has exactly the
 * field names of the shared agent protocol (docs/agent.md, issue 10):
 * enroll GPUs, status GPUs, metric samples.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "report.h"
#include "util.h"

static struct ag_node
node_fixture(void)
{
	struct ag_node n;
	memset(&n, 0, sizeof(n));
	n.ngpus = 1;
	struct ag_gpu *g = &n.gpus[0];
	ag_gpu_init(g);
	ag_strlcpy(g->uuid, "GPU-1", sizeof(g->uuid));
	ag_strlcpy(g->product_name, "NVIDIA H100 80GB HBM3", sizeof(g->product_name));
	ag_strlcpy(g->pci_device_id, "0x233010DE", sizeof(g->pci_device_id));
	g->memory_mib = 81559;
	g->mig_enabled = true;
	g->ninst = 1;
	ag_strlcpy(g->inst[0].profile, "3g.40gb", sizeof(g->inst[0].profile));
	g->inst[0].start = 4;
	g->inst[0].size = 4;
	ag_strlcpy(g->inst[0].uuid, "MIG-1", sizeof(g->inst[0].uuid));
	g->nxids = 1;
	g->xids[0].xid = 79;
	g->xids[0].ts = 1700000000;
	g->ecc_uncorrected = 3;
	g->power_w = 120.5;
	g->temperature_c = 50;
	g->memory_used_mib = 1000;
	g->memory_total_mib = 81559;
	ag_strlcpy(g->recovery_action, "gpu_reset", sizeof(g->recovery_action));
	return n;
}

/* The keys of o, sorted, comma-separated. */
static char *
keys(struct json_object *o)
{
	const char *k[64];
	int n = 0;
	json_object_object_foreach(o, key, val)
	{
		(void)val;
		k[n++] = key;
	}
	for (int i = 1; i < n; i++)
		for (int j = i; j > 0 && strcmp(k[j - 1], k[j]) > 0; j--) {
			const char *t = k[j];
			k[j] = k[j - 1];
			k[j - 1] = t;
		}
	static char buf[1024];
	buf[0] = '\0';
	for (int i = 0; i < n; i++) {
		strcat(buf, i ? "," : "");
		strcat(buf, k[i]);
	}
	return buf;
}

static void
test_enroll_shape(void **state)
{
	(void)state;
	struct ag_node n = node_fixture();
	struct json_object *a = report_enroll_gpus(&n);
	struct json_object *g = json_object_array_get_idx(a, 0);
	assert_string_equal(keys(g),
	    "index,instances,memory_mib,mig_enabled,pci_device_id,"
	    "product_name,uuid");
	struct json_object *in =
	    json_object_array_get_idx(json_object_object_get(g, "instances"), 0);
	assert_string_equal(keys(in), "profile,size,start,uuid");
	assert_int_equal(json_object_get_int(json_object_object_get(in, "start")), 4);
	json_object_put(a);
}

static void
test_status_shape(void **state)
{
	(void)state;
	struct ag_node n = node_fixture();
	struct json_object *a = report_status_gpus(&n);
	struct json_object *g = json_object_array_get_idx(a, 0);
	assert_string_equal(keys(g),
	    "ecc_uncorrected,index,instances,mig_enabled,recovery_action,"
	    "remapped_rows_failure,uuid,xid_events");
	struct json_object *x =
	    json_object_array_get_idx(json_object_object_get(g, "xid_events"), 0);
	assert_string_equal(keys(x), "ts,xid");
	assert_int_equal(json_object_get_int(json_object_object_get(x, "xid")), 79);
	/* times are the API's RFC 3339 UTC strings */
	assert_string_equal(json_object_get_string(json_object_object_get(x, "ts")),
	    "2023-11-14T22:13:20Z");
	assert_string_equal(json_object_get_string(json_object_object_get(g, "recovery_action")),
	    "gpu_reset");
	json_object_put(a);
}

static void
test_sample_shape(void **state)
{
	(void)state;
	struct ag_node n = node_fixture();
	struct json_object *a = json_object_new_array();
	report_samples(&n, 1700000001, a);
	assert_int_equal(json_object_array_length(a), 1);
	struct json_object *s = json_object_array_get_idx(a, 0);
	assert_string_equal(keys(s),
	    "device_uuid,ecc_corrected,ecc_uncorrected,gpu_uuid,last_xid,"
	    "memory_total_mib,memory_used_mib,power_w,remapped_rows,"
	    "sm_active,temperature_c,ts");
	/* unknown values are null, never a made-up 0 */
	struct json_object *v;
	assert_true(json_object_object_get_ex(s, "sm_active", &v));
	assert_null(v);
	assert_int_equal(json_object_get_int(json_object_object_get(s, "last_xid")), 79);
	assert_string_equal(json_object_get_string(json_object_object_get(s, "ts")),
	    "2023-11-14T22:13:21Z");
	assert_string_equal(json_object_get_string(json_object_object_get(s, "device_uuid")),
	    "GPU-1");
	json_object_put(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enroll_shape),
		cmocka_unit_test(test_status_shape),
		cmocka_unit_test(test_sample_shape),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
