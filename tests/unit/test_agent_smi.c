/*
 * test_agent_smi.c - gpupool-agent's nvidia-smi parsers on the real
 * captures in tests/fixtures/nvidia-smi/ (see its README).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "smi_parse.h"
#include "util.h"

#define FIX FIXTURES_DIR "/nvidia-smi/"
#define WHOLE FIX "linux-x86_64__nvidia-h100-80gb-hbm3__590.48.01.txt"
#define MIG FIX "linux-x86_64__nvidia-h100-mig__590.48.01.txt"

/* The body of the section whose title line starts with "# <label>". */
static char *
section(const char *file, const char *label)
{
	char *txt = ag_read_file(file, NULL);
	assert_non_null(txt);
	char key[256];
	snprintf(key, sizeof(key), "\n# %s", label);
	char *p = strstr(txt, key);
	assert_non_null(p);
	/* skip the title, the "# $ command" line and the ##### rule */
	for (int i = 0; i < 3; i++) {
		p = strchr(p + 1, '\n');
		assert_non_null(p);
	}
	p++;
	char *end = strstr(p, "\n####");
	size_t n = end ? (size_t)(end - p) : strlen(p);
	char *out = malloc(n + 1);
	memcpy(out, p, n);
	out[n] = '\0';
	free(txt);
	return out;
}

static void
test_query_gpu_whole(void **state)
{
	(void)state;
	char *s = section(WHOLE, "load :: query-gpu");
	struct ag_node node;
	assert_int_equal(smi_parse_query_gpu(s, &node), 1);
	struct ag_gpu *g = &node.gpus[0];
	assert_int_equal(g->index, 0);
	assert_string_equal(g->uuid, "GPU-00000000-0000-0000-0000-000000000000");
	assert_string_equal(g->product_name, "NVIDIA H100 80GB HBM3");
	assert_string_equal(g->pci_device_id, "0x233010DE");
	assert_int_equal(g->memory_mib, 81559);
	assert_int_equal(g->memory_used_mib, 19818);
	assert_false(g->mig_enabled);
	assert_int_equal(g->ecc_uncorrected, 0);
	assert_int_equal(g->ecc_corrected, 0);
	assert_int_equal(g->remapped_rows, 0);
	assert_false(g->remapped_rows_failure);
	assert_string_equal(g->recovery_action, "none");
	assert_true(g->power_w > 631.9 && g->power_w < 632.0);
	assert_true(g->temperature_c == 59);
	assert_true(g->sm_active == 1.0);
	free(s);
}

static void
test_query_gpu_mig_na(void **state)
{
	(void)state;
	char *s = section(MIG, "idle :: query-gpu");
	struct ag_node node;
	assert_int_equal(smi_parse_query_gpu(s, &node), 1);
	struct ag_gpu *g = &node.gpus[0];
	assert_true(g->mig_enabled);
	/* [N/A] stays unknown, never 0 */
	assert_int_equal(g->remapped_rows, -1);
	assert_false(g->remapped_rows_failure);
	assert_true(g->sm_active < 0);
	assert_true(g->power_w > 71.1 && g->power_w < 71.2);
	assert_int_equal(g->memory_used_mib, 59);
	free(s);
}

static void
test_query_gpu_bad_header(void **state)
{
	(void)state;
	struct ag_node node;
	assert_int_equal(smi_parse_query_gpu("name, memory.total [MiB]\nX, 1 MiB\n", &node), -1);
	/* a row with a missing column is skipped, not misread */
	assert_int_equal(smi_parse_query_gpu("index, uuid, name\n0, GPU-a\n", &node), 0);
	/* columns in any order */
	assert_int_equal(smi_parse_query_gpu("uuid, index\nGPU-b, 3\n", &node), 1);
	assert_int_equal(node.gpus[0].index, 3);
	assert_string_equal(node.gpus[0].uuid, "GPU-b");
}

static void
test_list_and_join(void **state)
{
	(void)state;
	char *l = section(MIG, "capabilities :: list (-L)");
	char *q = section(MIG, "load :: query (-q)");
	char *lgi = ag_read_file(FIX "h100-mig-lgi.reconstructed.txt", NULL);
	assert_non_null(lgi);
	struct ag_node node;
	memset(&node, 0, sizeof(node));
	struct smi_mig_device devs[16];
	int ndev = smi_parse_list(l, &node, devs, 16);
	assert_int_equal(ndev, 4);
	assert_int_equal(node.ngpus, 1);
	assert_string_equal(node.gpus[0].uuid, "GPU-00000000-0000-0000-0000-000000000000");
	assert_string_equal(node.gpus[0].product_name, "NVIDIA H100 80GB HBM3");
	assert_string_equal(devs[0].profile, "3g.40gb");
	assert_string_equal(devs[1].profile, "2g.20gb");
	assert_int_equal(devs[3].device, 3);
	assert_string_equal(devs[3].uuid, "MIG-00000003-0000-0000-0000-000000000003");
	struct smi_gi gis[16];
	int ngi = smi_parse_lgi(lgi, gis, 16);
	assert_int_equal(ngi, 4);
	assert_string_equal(gis[0].profile, "3g.40gb");
	assert_int_equal(gis[0].profile_id, 9);
	assert_int_equal(gis[0].gi_id, 2);
	assert_int_equal(gis[0].start, 4);
	assert_int_equal(gis[0].size, 4);
	struct smi_q_mig qm[16];
	int nq = smi_parse_q_mig(q, qm, 16);
	assert_int_equal(nq, 4);
	assert_int_equal(qm[0].gi_id, 2);
	assert_int_equal(qm[2].device, 2);
	assert_int_equal(qm[2].gi_id, 9);
	assert_int_equal(qm[3].gi_id, 10);
	node.gpus[0].mig_enabled = true;
	smi_join(&node, gis, ngi, devs, ndev, qm, nq);
	struct ag_gpu *g = &node.gpus[0];
	assert_int_equal(g->ninst, 4);
	/* 3g.40gb = GI 2 = MIG device 0 */
	assert_string_equal(g->inst[0].profile, "3g.40gb");
	assert_string_equal(g->inst[0].uuid, "MIG-00000000-0000-0000-0000-000000000000");
	/* 1g.10gb at 3 = GI 10 = MIG device 3 */
	assert_int_equal(g->inst[3].start, 3);
	assert_string_equal(g->inst[3].uuid, "MIG-00000003-0000-0000-0000-000000000003");
	free(l);
	free(q);
	free(lgi);
}

/* Compute-instance profiles in -L (an H200 in MIG mode: one 3g.71gb GPU
 * instance split into 1c.3g.71gb and 2c.3g.71gb compute instances, one
 * whole 3g.71gb, one 1g.18gb; -L text as nvidia-smi prints it, built for
 * this test): the 1c/2c devices belong to their GPU instance, whose
 * device is the first of them; three GPU instances, not five. */
static void
test_list_compute_instance_profiles(void **state)
{
	(void)state;
	const char *l =
	    "GPU 0: NVIDIA H200 (UUID: GPU-a0000000-0000-0000-0000-000000000000)\n"
	    "  MIG 1c.3g.71gb    Device  0: (UUID: MIG-d0000000-0000-0000-0000-000000000000)\n"
	    "  MIG 2c.3g.71gb    Device  1: (UUID: MIG-d1000000-0000-0000-0000-000000000000)\n"
	    "  MIG 3g.71gb       Device  2: (UUID: MIG-d2000000-0000-0000-0000-000000000000)\n"
	    "  MIG 1g.18gb       Device  3: (UUID: MIG-d3000000-0000-0000-0000-000000000000)\n";
	struct ag_node node;
	memset(&node, 0, sizeof(node));
	struct smi_mig_device devs[16];
	assert_int_equal(smi_parse_list(l, &node, devs, 16), 4);
	assert_string_equal(devs[0].profile, "1c.3g.71gb");
	assert_string_equal(devs[0].gi_profile, "3g.71gb");
	assert_int_equal(devs[0].ci_slices, 1);
	assert_int_equal(devs[1].ci_slices, 2);
	assert_string_equal(devs[2].gi_profile, "3g.71gb");
	assert_int_equal(devs[2].ci_slices, 0);
	/* GPU instances 1 (the split 3g at 0), 2 (the whole 3g at 4), 7 (1g at 3) */
	struct smi_gi gis[3] = {
		{ .gpu = 0,
		    .profile = "3g.71gb",
		    .profile_id = 9,
		    .gi_id = 1,
		    .start = 0,
		    .size = 4 },
		{ .gpu = 0,
		    .profile = "3g.71gb",
		    .profile_id = 9,
		    .gi_id = 2,
		    .start = 4,
		    .size = 4 },
		{ .gpu = 0,
		    .profile = "1g.18gb",
		    .profile_id = 19,
		    .gi_id = 7,
		    .start = 3,
		    .size = 1 },
	};
	/* -q: MIG devices 1 and 0 in GPU instance 1 (listed second first), 2 in 2, 3 in 7 */
	struct smi_q_mig qm[4] = {
		{ .gpu = 0, .device = 1, .gi_id = 1 },
		{ .gpu = 0, .device = 0, .gi_id = 1 },
		{ .gpu = 0, .device = 2, .gi_id = 2 },
		{ .gpu = 0, .device = 3, .gi_id = 7 },
	};
	node.gpus[0].mig_enabled = true;
	smi_join(&node, gis, 3, devs, 4, qm, 4);
	struct ag_gpu *g = &node.gpus[0];
	assert_int_equal(g->ninst, 3);
	assert_string_equal(g->inst[0].uuid, "MIG-d0000000-0000-0000-0000-000000000000");
	assert_string_equal(g->inst[1].uuid, "MIG-d2000000-0000-0000-0000-000000000000");
	assert_string_equal(g->inst[2].uuid, "MIG-d3000000-0000-0000-0000-000000000000");
}

/* The device-handle error of a lost GPU: its bus id and the message. */
static void
test_parse_lost(void **state)
{
	(void)state;
	struct smi_lost lost[4];
	const char *out =
	    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n"
	    "Unable to determine the device handle for GPU0000:18:00.0: GPU is lost.  "
	    "Reboot the system to recover this GPU\n";
	assert_int_equal(smi_parse_lost(out, lost, 4), 1);
	assert_string_equal(lost[0].bus_id, "GPU0000:18:00.0" + 3);
	assert_memory_equal(lost[0].message, "Unable to determine the device handle", 37);
	assert_non_null(strstr(lost[0].message, "Reboot the system to recover this GPU"));
	assert_true(smi_same_bus("00000000:18:00.0", lost[0].bus_id));
	assert_false(smi_same_bus("00000000:19:00.0", lost[0].bus_id));
	assert_int_equal(smi_parse_lost("GPU 0: fine\n", lost, 4), 0);
}

static void
test_q_whole_gpu_has_no_mig(void **state)
{
	(void)state;
	char *q = section(WHOLE, "idle :: query (-q)");
	struct smi_q_mig qm[16];
	assert_int_equal(smi_parse_q_mig(q, qm, 16), 0);
	free(q);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_query_gpu_whole),
		cmocka_unit_test(test_query_gpu_mig_na),
		cmocka_unit_test(test_query_gpu_bad_header),
		cmocka_unit_test(test_list_and_join),
		cmocka_unit_test(test_q_whole_gpu_has_no_mig),
		cmocka_unit_test(test_list_compute_instance_profiles),
		cmocka_unit_test(test_parse_lost),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
