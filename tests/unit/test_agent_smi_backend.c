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

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_discover, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commands, setup, teardown),
		cmocka_unit_test_setup_teardown(test_dry_run, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
