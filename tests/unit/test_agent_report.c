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
	report_samples(&n, 1700000001000LL, a);
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

/* Issue 19, finding 1: a GPU not ok says so ("state", "error"), lists
 * no instances (they are not the truth for it), and a lost one no health
 * either; an ok GPU carries no "state" (a server of before takes it). */
static void
test_status_states(void **state)
{
	(void)state;
	struct ag_node n = node_fixture();
	n.gpus[1] = n.gpus[0];
	n.ngpus = 2;
	n.gpus[0].nxids = 0;
	ag_gpu_mark(&n.gpus[0], AG_GPU_UNKNOWN,
	    "nvidia-smi mig -lgi (exit 4): Insufficient\nPermissions");
	ag_gpu_mark(&n.gpus[1], AG_GPU_LOST, "nvmlDeviceGetHandleByIndex_v2: GPU is lost");
	n.gpus[1].lost_xid = 79;
	struct json_object *a = report_status_gpus(&n);
	struct json_object *u = json_object_array_get_idx(a, 0);
	assert_string_equal(keys(u),
	    "ecc_uncorrected,error,index,mig_enabled,recovery_action,remapped_rows_failure,"
	    "state,uuid,xid_events");
	assert_string_equal(json_object_get_string(json_object_object_get(u, "state")), "unknown");
	/* control characters never travel */
	assert_string_equal(json_object_get_string(json_object_object_get(u, "error")),
	    "nvidia-smi mig -lgi (exit 4): Insufficient Permissions");
	struct json_object *l = json_object_array_get_idx(a, 1);
	assert_string_equal(keys(l), "error,index,mig_enabled,state,uuid,xid,xid_events");
	assert_string_equal(json_object_get_string(json_object_object_get(l, "state")), "lost");
	assert_int_equal(json_object_get_int(json_object_object_get(l, "xid")), 79);
	json_object_put(a);
	/* no samples for a lost GPU */
	struct json_object *samples = json_object_new_array();
	report_samples(&n, 1700000001000LL, samples);
	assert_int_equal(json_object_array_length(samples), 1);
	json_object_put(samples);
}

/* Issue 19, finding 8: a storm of 500 Xid 13 then one Xid 79 in a queue
 * of 4: coalesced per code with a count, the 79 kept; a queue full of
 * application Xids makes room for a reset-class one by dropping the
 * oldest application one; "count" is sent only above 1. */
static void
test_xid_coalesce(void **state)
{
	(void)state;
	struct ag_xid q[4];
	int n = 0;
	for (int i = 0; i < 500; i++)
		assert_true(ag_xid_add(q, &n, 4, 13, 1700000000 + i, 1));
	assert_true(ag_xid_add(q, &n, 4, 79, 1700000600, 1));
	assert_int_equal(n, 2);
	assert_int_equal(q[0].xid, 13);
	assert_int_equal(q[0].count, 500);
	assert_int_equal(q[0].ts, 1700000000);
	assert_int_equal(q[1].xid, 79);
	assert_int_equal(q[1].count, 1);
	assert_true(ag_xid_add(q, &n, 4, 31, 1, 1));
	assert_true(ag_xid_add(q, &n, 4, 43, 1, 1));
	assert_int_equal(n, 4);
	assert_true(ag_xid_add(q, &n, 4, 48, 2, 1)); /* reset class: 13 makes room */
	assert_int_equal(n, 4);
	assert_int_equal(q[0].xid, 79);
	assert_int_equal(q[3].xid, 48);
	assert_true(ag_xid_add(q, &n, 4, 45, 3, 1)); /* application: 31 makes room */
	assert_int_equal(q[0].xid, 79);
	assert_int_equal(q[1].xid, 43);
	/* what was sent leaves; what coalesced meanwhile stays */
	struct ag_xid sent = q[0];
	assert_true(ag_xid_add(q, &n, 4, 79, 4, 2));
	ag_xid_take(q, &n, &sent);
	assert_int_equal(q[0].xid, 79);
	assert_int_equal(q[0].count, 2);
	ag_xid_take(q, &n, &q[0]);
	assert_int_equal(n, 3);
	struct json_object *one = report_xid(&q[0]);
	assert_string_equal(keys(one), "ts,xid");
	json_object_put(one);
	struct ag_xid many = { .xid = 13, .ts = 1700000000, .count = 500 };
	struct json_object *o = report_xid(&many);
	assert_string_equal(keys(o), "count,ts,xid");
	assert_int_equal(json_object_get_int(json_object_object_get(o, "count")), 500);
	json_object_put(o);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_enroll_shape),
		cmocka_unit_test(test_status_shape),
		cmocka_unit_test(test_sample_shape),
		cmocka_unit_test(test_status_states),
		cmocka_unit_test(test_xid_coalesce),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
