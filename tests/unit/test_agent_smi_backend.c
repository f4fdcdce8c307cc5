/*
 * test_agent_smi_backend.c - gpupool-agent's nvidia-smi backend running
 * tests/stubs/nvidia-smi (which prints the real capture's sections and
 * logs MIG commands): discovery joins -L, -q and mig -lgi; the MIG
 * commands carry the exact placement; --dry-run runs none; failures of
 * nvidia-smi come back as errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "backend.h"
#include "util.h"

static char logpath[256];

static struct ag_backend *
open_smi(bool dry)
{
	struct ag_backend_config cfg = { .node_name = "n",
		.state_dir = "/tmp",
		.smi_path = SMI_STUB,
		.dry_run = dry };
	char err[256];
	struct ag_backend *b = ag_backend_open("nvidia-smi", &cfg, err, sizeof(err));
	if (b == NULL)
		fail_msg("nvidia-smi backend: %s", err);
	return b;
}

static int
setup(void **state)
{
	(void)state;
	snprintf(logpath, sizeof(logpath), "/tmp/gp-smi-log-%d", (int)getpid());
	unlink(logpath);
	setenv("GPUPOOL_SMI_FIXTURES", FIXTURES_DIR "/nvidia-smi", 1);
	setenv("GPUPOOL_SMI_LOG", logpath, 1);
	unsetenv("GPUPOOL_SMI_FAIL");
	unsetenv("GPUPOOL_SMI_FAIL_ONCE");
	unsetenv("GPUPOOL_SMI_LOST");
	unsetenv("GPUPOOL_SMI_OLD_DRIVER");
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	unlink(logpath);
	return 0;
}

static void
test_discover(void **state)
{
	(void)state;
	struct ag_backend *b = open_smi(false);
	struct ag_node n;
	char err[256];
	assert_int_equal(b->ops->discover(b, &n, err, sizeof(err)), 0);
	assert_int_equal(n.ngpus, 1);
	assert_true(n.gpus[0].mig_enabled);
	assert_int_equal(n.gpus[0].ninst, 4);
	assert_string_equal(n.gpus[0].inst[0].profile, "3g.40gb");
	assert_int_equal(n.gpus[0].inst[0].start, 4);
	assert_string_equal(n.gpus[0].inst[0].uuid, "MIG-00000000-0000-0000-0000-000000000000");
	assert_true(n.gpus[0].power_w > 433.7 && n.gpus[0].power_w < 433.8);
	ag_backend_close(b);
}

static void
test_commands(void **state)
{
	(void)state;
	struct ag_backend *b = open_smi(false);
	struct ag_node n;
	char err[256], uuid[AG_UUID_MAX];
	assert_int_equal(b->ops->discover(b, &n, err, sizeof(err)), 0);
	/* destroy the 1g.10gb at 3 = GPU instance 10: compute instance first */
	assert_int_equal(b->ops->destroy(b, 0, "1g.10gb", 3, err, sizeof(err)), 0);
	/* create 1g.10gb (profile id 19) at 6: the stub's listing will not show
	 * it, so the backend reports that nothing appeared */
	assert_int_equal(b->ops->create(b, 0, "1g.10gb", 6, uuid, sizeof(uuid), err, sizeof(err)),
	    -1);
	assert_non_null(strstr(err, "created no 1g.10gb instance at 6"));
	char *log = ag_read_file(logpath, NULL);
	assert_non_null(log);
	assert_string_equal(log,
	    "mig -i 0 -gi 10 -dci\nmig -i 0 -gi 10 -dgi\nmig -i 0 -cgi 19:6 -C\n");
	free(log);
	/* nvidia-smi failing: its message is the error */
	setenv("GPUPOOL_SMI_FAIL", "1", 1);
	assert_int_equal(b->ops->create(b, 0, "3g.40gb", 0, uuid, sizeof(uuid), err, sizeof(err)),
	    -1);
	assert_non_null(strstr(err, "Insufficient Resources"));
	unsetenv("GPUPOOL_SMI_FAIL");
	/* never MIG mode */
	assert_int_equal(b->ops->set_mig(b, 0, false, err, sizeof(err)), -1);
	ag_backend_close(b);
}

static void
test_dry_run(void **state)
{
	(void)state;
	struct ag_backend *b = open_smi(true);
	struct ag_node n;
	char err[256], uuid[AG_UUID_MAX];
	assert_int_equal(b->ops->discover(b, &n, err, sizeof(err)), 0);
	assert_int_equal(b->ops->create(b, 0, "2g.20gb", 4, uuid, sizeof(uuid), err, sizeof(err)),
	    0);
	assert_int_equal(b->ops->destroy(b, 0, "3g.40gb", 4, err, sizeof(err)), 0);
	/* nothing ran */
	assert_null(ag_read_file(logpath, NULL));
	ag_backend_close(b);
}

/* nvidia-smi failing COMMAND once ("Insufficient Permissions", exit 4). */
static void
fail_once(const char *command)
{
	static char path[256];
	snprintf(path, sizeof(path), "/tmp/gp-smi-fail-%d", (int)getpid());
	assert_int_equal(ag_write_file(path, command, strlen(command), 0600), 0);
	setenv("GPUPOOL_SMI_FAIL_ONCE", path, 1);
}

/* Issue 19, finding 1: `mig -lgi` answering "Insufficient Permissions" is
 * not "no instances": the MIG GPU is unknown for this scan (before: MIG on,
 * no instances, and every allocation there failed as disappeared). */
static void
test_lgi_failure_is_unknown(void **state)
{
	(void)state;
	struct ag_backend *b = open_smi(false);
	struct ag_node n;
	char err[256];
	fail_once("mig -lgi");
	assert_int_equal(b->ops->discover(b, &n, err, sizeof(err)), 0);
	assert_int_equal(n.ngpus, 1);
	assert_int_equal(n.gpus[0].state, AG_GPU_UNKNOWN);
	assert_int_equal(n.gpus[0].ninst, 0);
	assert_non_null(strstr(n.gpus[0].error, "Insufficient Permissions"));
	assert_string_equal(n.gpus[0].uuid, "GPU-00000000-0000-0000-0000-000000000000");
	/* the next scan reads them again */
	assert_int_equal(b->ops->discover(b, &n, err, sizeof(err)), 0);
	assert_int_equal(n.gpus[0].state, AG_GPU_OK);
	assert_int_equal(n.gpus[0].ninst, 4);
	ag_backend_close(b);
}

/* A failed -L, -q or --query-gpu fails the discovery (before: an empty
 * answer, the GPU reported without its instances). */
static void
test_list_or_query_failure_fails_discovery(void **state)
{
	(void)state;
	const char *cmds[] = { "-L", "-q", "--query-gpu" };
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		struct ag_backend *b = open_smi(false);
		struct ag_node n;
		char err[256];
		fail_once(cmds[i]);
		assert_int_equal(b->ops->discover(b, &n, err, sizeof(err)), -1);
		assert_non_null(strstr(err, cmds[i]));
		assert_non_null(strstr(err, "Insufficient Permissions"));
		assert_int_equal(b->ops->discover(b, &n, err, sizeof(err)), 0);
		assert_int_equal(n.gpus[0].ninst, 4);
		ag_backend_close(b);
	}
}

/* A GPU nvidia-smi cannot reach is lost under the identity it had, with
 * the tool's message. */
static void
test_lost_gpu(void **state)
{
	(void)state;
	struct ag_backend *b = open_smi(false);
	struct ag_node n;
	char err[256];
	assert_int_equal(b->ops->discover(b, &n, err, sizeof(err)), 0);
	setenv("GPUPOOL_SMI_LOST", "1", 1);
	assert_int_equal(b->ops->discover(b, &n, err, sizeof(err)), 0);
	unsetenv("GPUPOOL_SMI_LOST");
	assert_int_equal(n.ngpus, 1);
	assert_int_equal(n.gpus[0].state, AG_GPU_LOST);
	assert_string_equal(n.gpus[0].uuid, "GPU-00000000-0000-0000-0000-000000000000");
	assert_int_equal(n.gpus[0].index, 0);
	assert_non_null(strstr(n.gpus[0].error,
	    "Unable to determine the device handle for GPU0000:00:09.0: GPU is lost"));
	assert_int_equal(n.gpus[0].ninst, 0);
	ag_backend_close(b);
}

/* A driver without gpu_recovery_action (older than R550): the field is
 * not asked for and discovery works (before: the whole query failed, so
 * the agent could not enroll). */
static void
test_old_driver_fields_probed(void **state)
{
	(void)state;
	setenv("GPUPOOL_SMI_OLD_DRIVER", "1", 1);
	struct ag_backend *b = open_smi(false);
	struct ag_node n;
	char err[256];
	int rc = b->ops->discover(b, &n, err, sizeof(err));
	unsetenv("GPUPOOL_SMI_OLD_DRIVER");
	assert_int_equal(rc, 0);
	assert_int_equal(n.ngpus, 1);
	assert_int_equal(n.gpus[0].ninst, 4);
	assert_string_equal(n.gpus[0].recovery_action, "none");
	ag_backend_close(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_discover, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commands, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dry_run, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lgi_failure_is_unknown, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_or_query_failure_fails_discovery, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_lost_gpu, setup, teardown),
		cmocka_unit_test_setup_teardown(test_old_driver_fields_probed, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
