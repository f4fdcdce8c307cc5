/*
 * test_agent_apply.c - gpupool-agent's apply step against the fake
 * backend: exact placements, idempotence, destroy before create, errors,
 * fault injection, state kept across a restart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "apply.h"
#include "backend.h"
#include "util.h"

struct fx {
	char dir[256];
	char gpus[300];
	struct ag_backend_config cfg;
	struct ag_backend *b;
};

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	snprintf(f->dir, sizeof(f->dir), "/tmp/gp-agent-test-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->gpus, sizeof(f->gpus), "%s/gpus.json", f->dir);
	const char *g = "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":2},{\"model\":\"L4-24GB\","
			"\"count\":1}]}";
	assert_int_equal(ag_write_file(f->gpus, g, strlen(g), 0644), 0);
	f->cfg.node_name = "node-a";
	f->cfg.state_dir = f->dir;
	f->cfg.fake_gpus = f->gpus;
	char err[256];
	f->b = ag_backend_open("fake", &f->cfg, err, sizeof(err));
	if (f->b == NULL)
		fail_msg("fake backend: %s", err);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;
	ag_backend_close(f->b);
	char cmd[400];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", f->dir);
	if (system(cmd) != 0)
		return -1;
	free(f);
	return 0;
}

static void
discover(struct fx *f, struct ag_node *n)
{
	char err[256];
	assert_int_equal(f->b->ops->discover(f->b, n, err, sizeof(err)), 0);
}

static int
apply_json(struct fx *f, const char *doc, struct whole_state *w, struct json_object **errors)
{
	struct json_object *o = json_tokener_parse(doc);
	assert_non_null(o);
	struct desired d;
	char err[256];
	assert_int_equal(desired_parse(o, &d, err, sizeof(err)), 0);
	json_object_put(o);
	struct ag_node n;
	discover(f, &n);
	*errors = json_object_new_array();
	return apply_desired(f->b, &n, &d, w, *errors);
}

static void
test_uuids_stable(void **state)
{
	struct fx *f = *state;
	struct ag_node n1, n2;
	discover(f, &n1);
	assert_int_equal(n1.ngpus, 3);
	assert_true(n1.gpus[0].mig_enabled);
	assert_false(n1.gpus[2].mig_enabled);
	assert_string_equal(n1.gpus[0].pci_device_id, "0x233010DE");
	assert_string_not_equal(n1.gpus[0].uuid, n1.gpus[1].uuid);
	ag_backend_close(f->b);
	char err[256];
	f->b = ag_backend_open("fake", &f->cfg, err, sizeof(err));
	discover(f, &n2);
	assert_string_equal(n1.gpus[0].uuid, n2.gpus[0].uuid);
	assert_string_equal(n1.gpus[2].uuid, n2.gpus[2].uuid);
	/* another node name, other UUIDs */
	struct ag_backend_config c2 = f->cfg;
	c2.node_name = "node-b";
	char dir2[300];
	snprintf(dir2, sizeof(dir2), "%s/b", f->dir);
	assert_int_equal(mkdir(dir2, 0700), 0);
	c2.state_dir = dir2;
	struct ag_backend *b2 = ag_backend_open("fake", &c2, err, sizeof(err));
	struct ag_node n3;
	assert_int_equal(b2->ops->discover(b2, &n3, err, sizeof(err)), 0);
	assert_string_not_equal(n1.gpus[0].uuid, n3.gpus[0].uuid);
	ag_backend_close(b2);
}

static char *
doc_for(struct fx *f, const char *instances0, long long gen)
{
	struct ag_node n;
	discover(f, &n);
	char *buf = malloc(4096);
	snprintf(buf, 4096,
	    "{\"generation\":%lld,\"gpus\":[{\"uuid\":\"%s\",\"index\":0,\"mig_enabled\":true,"
	    "\"instances\":[%s]}]}",
	    gen, n.gpus[0].uuid, instances0);
	return buf;
}

static void
test_apply_exact_and_idempotent(void **state)
{
	struct fx *f = *state;
	struct whole_state w;
	memset(&w, 0, sizeof(w));
	struct json_object *errs;
	/* the one layout that fits: 3g at 4, 2g at 0 and 2 */
	char *doc = doc_for(f,
	    "{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4},"
	    "{\"profile\":\"2g.20gb\",\"start\":0,\"size\":2},"
	    "{\"profile\":\"2g.20gb\",\"start\":2,\"size\":2}",
	    1);
	assert_int_equal(apply_json(f, doc, &w, &errs), 3);
	assert_int_equal(json_object_array_length(errs), 0);
	json_object_put(errs);
	struct ag_node n;
	discover(f, &n);
	assert_int_equal(n.gpus[0].ninst, 3);
	assert_string_equal(n.gpus[0].inst[0].profile, "3g.40gb");
	assert_int_equal(n.gpus[0].inst[0].start, 4);
	assert_int_equal(n.gpus[0].inst[0].size, 4);
	assert_memory_equal(n.gpus[0].inst[0].uuid, "MIG-", 4);
	char uuid0[AG_UUID_MAX];
	ag_strlcpy(uuid0, n.gpus[0].inst[0].uuid, sizeof(uuid0));
	/* the same document again: nothing to do */
	assert_int_equal(apply_json(f, doc, &w, &errs), 0);
	json_object_put(errs);
	free(doc);
	/* drop one 2g, keep the rest untouched (same MIG UUID) */
	doc = doc_for(f,
	    "{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4},"
	    "{\"profile\":\"2g.20gb\",\"start\":0,\"size\":2}",
	    2);
	assert_int_equal(apply_json(f, doc, &w, &errs), 1);
	json_object_put(errs);
	free(doc);
	discover(f, &n);
	assert_int_equal(n.gpus[0].ninst, 2);
	assert_string_equal(n.gpus[0].inst[0].uuid, uuid0);
	/* survives a restart of the agent (the state file) */
	ag_backend_close(f->b);
	char err[256];
	f->b = ag_backend_open("fake", &f->cfg, err, sizeof(err));
	discover(f, &n);
	assert_int_equal(n.gpus[0].ninst, 2);
	assert_string_equal(n.gpus[0].inst[0].uuid, uuid0);
}

static void
test_destroy_before_create(void **state)
{
	struct fx *f = *state;
	struct whole_state w;
	memset(&w, 0, sizeof(w));
	struct json_object *errs;
	char *doc = doc_for(f, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}", 1);
	assert_int_equal(apply_json(f, doc, &w, &errs), 1);
	json_object_put(errs);
	free(doc);
	/* replacing the 7g by two 3g only works when the 7g goes first */
	doc = doc_for(f,
	    "{\"profile\":\"3g.40gb\",\"start\":0,\"size\":4},"
	    "{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4}",
	    2);
	assert_int_equal(apply_json(f, doc, &w, &errs), 3);
	assert_int_equal(json_object_array_length(errs), 0);
	json_object_put(errs);
	free(doc);
	struct ag_node n;
	discover(f, &n);
	assert_int_equal(n.gpus[0].ninst, 2);
}

static void
test_bad_placements_fail(void **state)
{
	struct fx *f = *state;
	struct whole_state w;
	memset(&w, 0, sizeof(w));
	struct json_object *errs;
	/* 3g at 2 is not an allowed placement; 1g.10gb at 4 + 3g at 4 overlap */
	char *doc = doc_for(f,
	    "{\"profile\":\"3g.40gb\",\"start\":2,\"size\":4},"
	    "{\"profile\":\"1g.10gb\",\"start\":4,\"size\":1},"
	    "{\"profile\":\"3g.40gb\",\"start\":4,\"size\":4},"
	    "{\"profile\":\"9g.99gb\",\"start\":0,\"size\":1}",
	    1);
	assert_int_equal(apply_json(f, doc, &w, &errs), 1);
	assert_int_equal(json_object_array_length(errs), 3);
	struct json_object *e0 = json_object_array_get_idx(errs, 0), *v;
	assert_true(json_object_object_get_ex(e0, "message", &v));
	assert_non_null(strstr(json_object_get_string(v), "not allowed"));
	assert_true(json_object_object_get_ex(e0, "start", &v));
	assert_int_equal(json_object_get_int(v), 2);
	json_object_put(errs);
	free(doc);
}

static void
test_faults(void **state)
{
	struct fx *f = *state;
	char path[400];
	snprintf(path, sizeof(path), "%s/fake-faults.json", f->dir);
	const char *faults =
	    "{\"gpus\":[{\"index\":1,\"xids\":[79,13],\"ecc_uncorrected\":2,"
	    "\"recovery_action\":\"gpu_reset\"}],"
	    "\"fail_apply\":[{\"gpu\":0,\"profile\":\"1g.10gb\",\"start\":6,\"message\":\"boom\"}],"
	    "\"pods\":[{\"device_uuid\":\"MIG-x\",\"namespace\":\"ns\",\"pod\":\"p\",\"container\":\"c\"}]}";
	assert_int_equal(ag_write_file(path, faults, strlen(faults), 0644), 0);
	struct ag_node n;
	discover(f, &n);
	assert_int_equal(n.gpus[1].nxids, 2);
	assert_int_equal(n.gpus[1].xids[0].xid, 79);
	assert_int_equal(n.gpus[1].ecc_uncorrected, 2);
	assert_string_equal(n.gpus[1].recovery_action, "gpu_reset");
	assert_int_equal(n.gpus[0].nxids, 0);
	/* XIDs are handed over once, even across a restart */
	discover(f, &n);
	assert_int_equal(n.gpus[1].nxids, 0);
	ag_backend_close(f->b);
	char err[256];
	f->b = ag_backend_open("fake", &f->cfg, err, sizeof(err));
	discover(f, &n);
	assert_int_equal(n.gpus[1].nxids, 0);
	struct whole_state w;
	memset(&w, 0, sizeof(w));
	struct json_object *errs;
	char *doc = doc_for(f,
	    "{\"profile\":\"1g.10gb\",\"start\":6,\"size\":1},"
	    "{\"profile\":\"1g.10gb\",\"start\":5,\"size\":1}",
	    1);
	assert_int_equal(apply_json(f, doc, &w, &errs), 1);
	assert_int_equal(json_object_array_length(errs), 1);
	json_object_put(errs);
	free(doc);
	struct ag_profile prof[4];
	int np = 0;
	assert_int_equal(f->b->ops->profiles(f->b, prof, 4, &np), 0);
	assert_int_equal(np, 1);
	assert_string_equal(prof[0].ns, "ns");
}

static void
test_whole_gpu_bookkeeping(void **state)
{
	struct fx *f = *state;
	struct ag_node n;
	discover(f, &n);
	struct whole_state w;
	memset(&w, 0, sizeof(w));
	char doc[1024];
	snprintf(doc, sizeof(doc),
	    "{\"generation\":3,\"gpus\":[{\"uuid\":\"%s\",\"index\":2,\"mig_enabled\":false,"
	    "\"instances\":[{\"profile\":\"full\",\"start\":0,\"size\":1}]}]}",
	    n.gpus[2].uuid);
	struct json_object *errs;
	assert_int_equal(apply_json(f, doc, &w, &errs), 1);
	assert_int_equal(json_object_array_length(errs), 0);
	json_object_put(errs);
	discover(f, &n);
	apply_whole_into(&w, &n);
	assert_int_equal(n.gpus[2].ninst, 1);
	assert_string_equal(n.gpus[2].inst[0].uuid, n.gpus[2].uuid);
}

static void
test_plan_and_parse(void **state)
{
	(void)state;
	struct ag_instance act[3] = { { "1g.10gb", 0, 1, "", 1 }, { "1g.10gb", 1, 1, "", 2 },
		{ "3g.40gb", 4, 4, "", 3 } };
	struct desired_instance want[2] = { { "3g.40gb", 4, 4, "" }, { "2g.20gb", 0, 2, "" } };
	struct gpu_plan p;
	plan_gpu(act, 3, want, 2, &p);
	assert_int_equal(p.ndestroy, 2);
	assert_int_equal(p.destroy[0], 0);
	assert_int_equal(p.destroy[1], 1);
	assert_int_equal(p.ncreate, 1);
	assert_int_equal(p.create[0], 1);
	struct desired d;
	char err[256];
	struct json_object *o = json_tokener_parse("{\"gpus\":[]}");
	assert_int_equal(desired_parse(o, &d, err, sizeof(err)), -1);
	json_object_put(o);
	o = json_tokener_parse("{\"generation\":\"7\",\"gpus\":[]}");
	assert_int_equal(desired_parse(o, &d, err, sizeof(err)), -1);
	json_object_put(o);
	o = json_tokener_parse("{\"generation\":7,\"gpus\":[{\"index\":0,\"instances\":"
			       "[{\"profile\":\"1g.10gb\",\"start\":-1,\"size\":1}]}]}");
	assert_int_equal(desired_parse(o, &d, err, sizeof(err)), -1);
	json_object_put(o);
	o = json_tokener_parse(
	    "{\"generation\":7,\"node\":\"n\",\"gpus\":[{\"uuid\":\"GPU-1\","
	    "\"index\":0,\"mig_enabled\":true,\"instances\":[{\"profile\":"
	    "\"1g.10gb\",\"start\":3,\"size\":1,\"pool\":null,\"allocation\":\"a1\"}]}]}");
	assert_int_equal(desired_parse(o, &d, err, sizeof(err)), 0);
	assert_int_equal(d.generation, 7);
	assert_int_equal(d.gpus[0].inst[0].start, 3);
	assert_string_equal(d.gpus[0].inst[0].allocation, "a1");
	json_object_put(o);
}

/* Issue 19, finding 1: a GPU whose instances were not read this scan
 * (unknown) or that cannot be read (lost) is left as it is: no instance
 * created or destroyed on it, no error (its "no instances" is not the
 * truth); once it reads ok the same document applies. */
static void
test_unreadable_gpu_left_alone(void **state)
{
	struct fx *f = *state;
	struct whole_state w;
	memset(&w, 0, sizeof(w));
	struct json_object *errs;
	char *doc = doc_for(f, "{\"profile\":\"7g.80gb\",\"start\":0,\"size\":8}", 1);
	char fpath[400];
	snprintf(fpath, sizeof(fpath), "%s/fake-faults.json", f->dir);
	const char *modes[] = { "{\"gpus\":[{\"index\":0,\"unknown\":true}]}",
		"{\"gpus\":[{\"index\":0,\"lost\":true}]}" };
	for (int i = 0; i < 2; i++) {
		assert_int_equal(ag_write_file(fpath, modes[i], strlen(modes[i]), 0644), 0);
		assert_int_equal(apply_json(f, doc, &w, &errs), 0);
		assert_int_equal(json_object_array_length(errs), 0);
		json_object_put(errs);
	}
	unlink(fpath);
	struct ag_node n;
	discover(f, &n);
	assert_int_equal(n.gpus[0].state, AG_GPU_OK);
	assert_int_equal(n.gpus[0].ninst, 0);
	assert_int_equal(apply_json(f, doc, &w, &errs), 1);
	json_object_put(errs);
	free(doc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_uuids_stable, setup, teardown),
		cmocka_unit_test_setup_teardown(test_apply_exact_and_idempotent, setup, teardown),
		cmocka_unit_test_setup_teardown(test_destroy_before_create, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_placements_fail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_faults, setup, teardown),
		cmocka_unit_test_setup_teardown(test_whole_gpu_bookkeeping, setup, teardown),
		cmocka_unit_test(test_plan_and_parse),
		cmocka_unit_test_setup_teardown(test_unreadable_gpu_left_alone, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
