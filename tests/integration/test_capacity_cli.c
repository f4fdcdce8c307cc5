/*
 * test_capacity_cli.c - the capacity inventory through the gpupool CLI:
 * clusters, nodes (filters, cordon / uncordon / drain), GPUs registered
 * with MIG instances already on them and drawn as slice bars, the
 * capacity view, and capacity simulate with its exit codes. The real
 * binary against a real gpupoold, as an operator; the fleet is built in
 * order by the tests below (one group, one database), partly through the
 * API and partly through the CLI.
 *
 * The fleet (H100-80GB unless said otherwise):
 *
 *   cluster c1   node n1 (zone=a, tier=gold)
 *                  gpu 0  3g.40gb@0 2g.20gb@4 1g.10gb@6   [3g.40gb    |2g.20|1g|..]
 *                  gpu 1  full                            [full                   ]
 *                  gpu 2  empty, MIG on                   [.. .. .. .. .. .. .. ..]
 *                node n2 (zone=b)
 *                  gpu 0  3g.40gb@0 3g.40gb@4             [3g.40gb    |3g.40gb    ]
 *                  gpu 1  1g.20gb@0 3g.40gb@4             [1g.20|.. ..|3g.40gb    ]
 *   cluster c2   node n3
 *                  gpu 0  L40S-48GB, empty                [.......................]
 */
#include "fixture.h"

#include <stdio.h>
#include <string.h>

#include "core/json.h"

#define UUID_A "GPU-00000000-0000-0000-0000-0000000000a1"
#define UUID_B "GPU-00000000-0000-0000-0000-0000000000b2"
#define UUID_C "GPU-00000000-0000-0000-0000-0000000000c3"
#define UUID_D "GPU-00000000-0000-0000-0000-0000000000d4"
#define UUID_E "GPU-00000000-0000-0000-0000-0000000000e5"
#define UUID_L "GPU-00000000-0000-0000-0000-0000000000f6"

/* GPUPOOL_SERVER and GPUPOOL_TOKEN of the operator, set by the first test */
static const char *op_env[3];
static const char *op_token;

#define CLI(fx, ...) fx_cli(fx, op_env, NULL, __VA_ARGS__, NULL)

static void
assert_cli_status(const struct fx_proc *p, int status, const char *file, int line)
{
	if (p->status != status) {
		print_error("%s:%d: exit status %d, expected %d\nstdout:\n%s\nstderr:\n%s\n", file,
		    line, p->status, status, p->out, p->err);
		_fail(file, line);
	}
}
#define assert_exit(p, status) assert_cli_status(p, status, __FILE__, __LINE__)

/* Exact text comparison that shows both sides. */
static void
assert_text(const char *got, const char *expected, const char *file, int line)
{
	if (strcmp(got, expected) != 0) {
		print_error("%s:%d: output differs\n--- expected\n%s--- got\n%s---\n", file, line,
		    expected, got);
		_fail(file, line);
	}
}
#define assert_output(got, expected) assert_text(got, expected, __FILE__, __LINE__)

#define assert_contains(hay, needle)                                                             \
	do {                                                                                     \
		if (strstr((hay), (needle)) == NULL) {                                           \
			print_error("%s:%d: \"%s\" not in:\n%s\n", __FILE__, __LINE__, (needle), \
			    (hay));                                                              \
			_fail(__FILE__, __LINE__);                                               \
		}                                                                                \
	} while (0)

/* stdout of a -o json run, parsed; fails unless it is one JSON value. */
static struct json_object *
cli_json(struct fixture *fx, const struct fx_proc *p)
{
	struct json_tokener *tok = json_tokener_new();
	struct json_object *o;

	assert_non_null(tok);
	o = json_tokener_parse_ex(tok, p->out, (int)strlen(p->out));
	if (o == NULL || json_tokener_get_error(tok) != json_tokener_success)
		print_error("not JSON: %s\n", p->out);
	assert_non_null(o);
	json_tokener_free(tok);
	return json_own(fx->arena, o);
}

/* The "name" of each item of a -o json listing, joined by spaces. */
static const char *
names_of(struct fixture *fx, const struct fx_proc *p)
{
	struct json_object *items = fx_json(cli_json(fx, p), "items");
	const char *s = "";

	assert_non_null(items);
	for (size_t i = 0; i < json_object_array_length(items); i++)
		s = fx_str(fx, "%s%s%s", s, i ? " " : "",
		    fx_json_str(json_object_array_get_idx(items, i), "name"));
	return s;
}

/* The profile entry of one model in a capacity answer. */
static struct json_object *
profile_of(struct json_object *model, const char *profile)
{
	struct json_object *arr = fx_json(model, "profiles");

	for (size_t i = 0; arr != NULL && i < json_object_array_length(arr); i++) {
		struct json_object *p = json_object_array_get_idx(arr, i);

		if (strcmp(fx_json_str(p, "profile"), profile) == 0)
			return p;
	}
	fail_msg("no profile %s in the capacity answer", profile);
	return NULL;
}

static void
test_usage_errors(void **state)
{
	struct fixture *fx = *state;
	struct fx_proc *p;

	op_token = fixture_create_user(fx, "capop", "operator");
	op_env[0] = fx_str(fx, "GPUPOOL_SERVER=%s", fx->server->base_url);
	op_env[1] = fx_str(fx, "GPUPOOL_TOKEN=%s", op_token);
	op_env[2] = NULL;

	/*
	 * Malformed item text: exit 2 with the item and what is wrong, before
	 * any server is asked (none is configured here).
	 */
	p = fx_cli(fx, NULL, NULL, "capacity", "simulate", "H100-80GB/3g.40gb", NULL);
	assert_exit(p, 2);
	assert_contains(p->err,
	    "gpupool: item 1 \"H100-80GB/3g.40gb\": must look like "
	    "MODEL/PROFILE=COUNT, as H100-80GB/3g.40gb=2\n");
	assert_contains(p->err, "usage: gpupool capacity simulate MODEL/PROFILE=COUNT");
	assert_output(p->out, "");
	p = fx_cli(fx, NULL, NULL, "capacity", "simulate", "H100-80GB/3g.40gb=1",
	    "H100-80GB/1g.10gb=0", NULL);
	assert_exit(p, 2);
	assert_contains(p->err,
	    "item 2 \"H100-80GB/1g.10gb=0\": the count must be a decimal "
	    "number from 1 to 4096");
	p = fx_cli(fx, NULL, NULL, "capacity", "simulate", "H100-80GB/1g.10gb=+1", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "the count must be");
	p = fx_cli(fx, NULL, NULL, "capacity", "simulate", "H100 80GB/1g.10gb=1", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "the model must be 1 to 31 letters");
	p = fx_cli(fx, NULL, NULL, "capacity", "simulate", "H100-80GB/=1", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "the profile must be 1 to 31 letters");
	p = fx_cli(fx, NULL, NULL, "capacity", "simulate", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "missing arguments");

	p = fx_cli(fx, NULL, NULL, "nodes", "create", "n9", "--cluster", "c1", "--cpu-millicores",
	    "12cores", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "--cpu-millicores must be an integer");
	p = fx_cli(fx, NULL, NULL, "nodes", "create", "n9", "--hostname", "h", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "--cluster is required");
	p = fx_cli(fx, NULL, NULL, "nodes", "list", "--label", "zone", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "--label must be KEY=VALUE");
	p = fx_cli(fx, NULL, NULL, "nodes", "list", "--status", "sleepy", NULL);
	assert_exit(p, 2);
	p = fx_cli(fx, NULL, NULL, "clusters", "create", "c9", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "--region is required");
	p = fx_cli(fx, NULL, NULL, "gpus", "create", "n1", "--index", "16", "--uuid", UUID_A,
	    "--model", "H100-80GB", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "--index must be an integer from 0 to 15");
	p = fx_cli(fx, NULL, NULL, "gpus", "create", "n1", "--index", "1", "--uuid", UUID_A,
	    "--model", "H100-80GB", "--instance", "3g.40gb", NULL);
	assert_exit(p, 2);
	assert_contains(p->err, "--instance must be PROFILE@START");

	/* help names the exit codes of simulate */
	p = fx_cli(fx, NULL, NULL, "capacity", "simulate", "--help", NULL);
	assert_exit(p, 0);
	assert_contains(p->out, "exit status: 0 the items fit, 3 they do not fit");
	p = fx_cli(fx, NULL, NULL, "capacity", "--help", NULL);
	assert_exit(p, 0);
	assert_contains(p->out, "gpupool capacity simulate MODEL/PROFILE=COUNT");
}

static void
test_inventory(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r;
	struct json_object *o;
	struct fx_proc *p;

	/* clusters */
	p = CLI(fx, "clusters", "create", "c1", "--region", "eu-west-1", "--description", "first");
	assert_exit(p, 0);
	assert_contains(p->out, "NAME   REGION      NODES   GPUS   DESCRIPTION");
	assert_contains(p->out, "c1     eu-west-1   0       0      first");
	p = CLI(fx, "clusters", "create", "c2", "--region", "us-east-1");
	assert_exit(p, 0);
	p = CLI(fx, "clusters", "create", "c2", "--region", "us-east-1");
	assert_exit(p, 5);
	assert_contains(p->err, "HTTP 409");
	p = CLI(fx, "clusters", "create", "Bad_Name", "--region", "x");
	assert_exit(p, 3);
	assert_contains(p->err, "name: must be a DNS label");
	p = CLI(fx, "-o", "json", "clusters", "get", "c1");
	assert_exit(p, 0);
	assert_json_str(cli_json(fx, p), "region", "eu-west-1");

	/* nodes */
	p = CLI(fx, "nodes", "create", "n1", "--cluster", "c1", "--hostname", "gpu-n1.example",
	    "--cpu-millicores", "64000", "--memory-bytes", "549755813888", "--label", "zone=a",
	    "--label", "tier=gold");
	assert_exit(p, 0);
	assert_output(p->out,
	    "NAME   CLUSTER   STATUS   GPUS   MODEL   CPU   MEMORY   HOSTNAME         LABELS\n"
	    "n1     c1        ready    0      -       64    512Gi    gpu-n1.example   tier=gold,zone=a\n");
	p = CLI(fx, "-o", "json", "nodes", "create", "n2", "--cluster", "c1", "--cpu-millicores",
	    "500", "--label", "zone=b");
	assert_exit(p, 0);
	o = cli_json(fx, p);
	assert_json_str(o, "status", "ready");
	assert_json_str(o, "hostname", "n2");
	assert_json_int(o, "cpu_millicores", 500);
	assert_json_str(o, "labels.zone", "b");
	p = CLI(fx, "nodes", "create", "n3", "--cluster", "c2");
	assert_exit(p, 0);
	p = CLI(fx, "nodes", "create", "n4", "--cluster", "nowhere");
	assert_exit(p, 3);
	assert_contains(p->err, "cluster: no such cluster");
	p = CLI(fx, "nodes", "create", "n5", "--cluster", "c1", "--label", "bad key=x");
	assert_exit(p, 3);
	assert_contains(p->err, "is not a Kubernetes label key");

	/* GPUs through the API, with the instances already on them */
	r = fx_request(fx, op_token, "POST", "/v1/nodes/n1/gpus",
	    "{\"index\":0,\"uuid\":\"%s\",\"model\":\"H100-80GB\",\"instances\":["
	    "{\"profile\":\"1g.10gb\",\"start\":6},{\"profile\":\"3g.40gb\",\"start\":0},"
	    "{\"profile\":\"2g.20gb\",\"start\":4}]}",
	    UUID_A);
	assert_status(r, 201);
	r = fx_request(fx, op_token, "POST", "/v1/nodes/n1/gpus",
	    "{\"index\":1,\"uuid\":\"%s\",\"model\":\"H100-80GB\",\"instances\":["
	    "{\"profile\":\"full\",\"start\":0}]}",
	    UUID_B);
	assert_status(r, 201);
	r = fx_request(fx, op_token, "POST", "/v1/nodes/n2/gpus",
	    "{\"index\":0,\"uuid\":\"%s\",\"model\":\"H100-80GB\",\"instances\":["
	    "{\"profile\":\"3g.40gb\",\"start\":0},{\"profile\":\"3g.40gb\",\"start\":4}]}",
	    UUID_D);
	assert_status(r, 201);
	/* ... and through the CLI */
	p = CLI(fx, "gpus", "create", "n1", "--index", "2", "--uuid", UUID_C, "--model",
	    "H100-80GB", "--mig");
	assert_exit(p, 0);
	assert_contains(p->out, "[.. .. .. .. .. .. .. ..]");
	p = CLI(fx, "gpus", "create", "n2", "--index", "1", "--uuid", UUID_E, "--model",
	    "H100-80GB", "--instance", "3g.40gb@4", "--instance", "1g.20gb@0");
	assert_exit(p, 0);
	assert_output(p->out,
	    "NODE   INDEX   MODEL       MIG   HEALTH   LAYOUT                      FREE   UUID\n"
	    "n2     1       H100-80GB   on    ok       [1g.20|.. ..|3g.40gb    ]   2      " UUID_E
	    "\n"
	    "\n"
	    "PROFILE   START   SIZE   STATE   POOL   DEVICE\n"
	    "1g.20gb   0       2      ready   -      -\n"
	    "3g.40gb   4       4      ready   -      -\n");
	p = CLI(fx, "gpus", "create", "n3", "--index", "0", "--uuid", UUID_L, "--model",
	    "L40S-48GB");
	assert_exit(p, 0);

	/* what the hardware refuses, the server refuses: exit 1 with its words */
	p = CLI(fx, "gpus", "create", "n3", "--index", "1", "--uuid",
	    "GPU-00000000-0000-0000-0000-0000000000f7", "--model", "H100-80GB", "--instance",
	    "3g.40gb@2");
	assert_exit(p, 3);
	assert_contains(p->err, "instances[0]");
	p = CLI(fx, "gpus", "create", "n3", "--index", "1", "--uuid", UUID_A, "--model",
	    "H100-80GB");
	assert_exit(p, 5);
	assert_contains(p->err, "HTTP 409");
	p = CLI(fx, "gpus", "create", "n3", "--index", "1", "--uuid",
	    "GPU-00000000-0000-0000-0000-0000000000f8", "--model", "NVIDIA H100 80GB HBM3");
	assert_exit(p, 3);
	assert_contains(p->err,
	    "model: NVIDIA H100 80GB HBM3 is a product name; the model id "
	    "is H100-80GB");
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM gpus"), 6);

	/* the slice bars, exactly */
	p = CLI(fx, "gpus", "list", "--node", "n1");
	assert_exit(p, 0);
	assert_output(p->out,
	    "NODE   INDEX   MODEL       MIG   HEALTH   LAYOUT                      FREE   UUID\n"
	    "n1     0       H100-80GB   on    ok       [3g.40gb    |2g.20|1g|..]   1      " UUID_A
	    "\n"
	    "n1     1       H100-80GB   off   ok       [full                   ]   0      " UUID_B
	    "\n"
	    "n1     2       H100-80GB   on    ok       [.. .. .. .. .. .. .. ..]   8      " UUID_C
	    "\n");
	p = CLI(fx, "gpus", "get", UUID_A);
	assert_exit(p, 0);
	assert_output(p->out,
	    "NODE   INDEX   MODEL       MIG   HEALTH   LAYOUT                      FREE   UUID\n"
	    "n1     0       H100-80GB   on    ok       [3g.40gb    |2g.20|1g|..]   1      " UUID_A
	    "\n"
	    "\n"
	    "PROFILE   START   SIZE   STATE   POOL   DEVICE\n"
	    "3g.40gb   0       4      ready   -      -\n"
	    "2g.20gb   4       2      ready   -      -\n"
	    "1g.10gb   6       1      ready   -      -\n");
	p = CLI(fx, "gpus", "list", "--node", "n2");
	assert_exit(p, 0);
	assert_contains(p->out,
	    "n2     0       H100-80GB   on    ok       [3g.40gb    |3g.40gb    ]   0");
	p = CLI(fx, "gpus", "list", "--model", "L40S-48GB");
	assert_exit(p, 0);
	assert_output(p->out,
	    "NODE   INDEX   MODEL       MIG   HEALTH   LAYOUT                      FREE   UUID\n"
	    "n3     0       L40S-48GB   off   ok       [.......................]   1      " UUID_L
	    "\n");
	/* the JSON is the server's, unchanged (no display fields) */
	p = CLI(fx, "-o", "json", "gpus", "get", UUID_B);
	assert_exit(p, 0);
	o = cli_json(fx, p);
	assert_json_str(o, "layout[0].profile", "full");
	assert_json_int(o, "layout[0].start", 0);
	assert_json_int(o, "layout[0].size", 8);
	assert_json_absent(o, "bar");
	p = CLI(fx, "gpus", "get", "GPU-00000000-0000-0000-0000-000000000bad");
	assert_exit(p, 4);
	assert_contains(p->err, "HTTP 404");
	p = CLI(fx, "gpus", "list", "--node", "nowhere");
	assert_exit(p, 3);

	/* node filters */
	p = CLI(fx, "-o", "json", "nodes", "list");
	assert_exit(p, 0);
	assert_string_equal(names_of(fx, p), "n1 n2 n3");
	p = CLI(fx, "-o", "json", "nodes", "list", "--label", "zone=a");
	assert_string_equal(names_of(fx, p), "n1");
	p = CLI(fx, "-o", "json", "nodes", "list", "--label", "zone=a", "--label", "tier=gold");
	assert_string_equal(names_of(fx, p), "n1");
	p = CLI(fx, "-o", "json", "nodes", "list", "--label", "zone=b", "--label", "tier=gold");
	assert_string_equal(names_of(fx, p), "");
	p = CLI(fx, "-o", "json", "nodes", "list", "--cluster", "c1");
	assert_string_equal(names_of(fx, p), "n1 n2");
	p = CLI(fx, "-o", "json", "nodes", "list", "--model", "L40S-48GB");
	assert_string_equal(names_of(fx, p), "n3");
	p = CLI(fx, "-o", "json", "nodes", "list", "--model", "H100-80GB", "--cluster", "c2");
	assert_string_equal(names_of(fx, p), "");
	p = CLI(fx, "-o", "json", "nodes", "list", "--limit", "2");
	assert_exit(p, 0);
	assert_string_equal(names_of(fx, p), "n1 n2");
	p = CLI(fx, "nodes", "list", "--cluster", "c1");
	assert_exit(p, 0);
	assert_output(p->out,
	    "NAME   CLUSTER   STATUS   GPUS   MODEL       CPU    MEMORY   HOSTNAME         LABELS\n"
	    "n1     c1        ready    3      H100-80GB   64     512Gi    gpu-n1.example   tier=gold,zone=a\n"
	    "n2     c1        ready    2      H100-80GB   500m   0Gi      n2               zone=b\n");
	p = CLI(fx, "nodes", "list", "--model", "A100-40GB-typo");
	assert_exit(p, 3);
	assert_contains(p->err, "model: no such model in the catalog");
	p = CLI(fx, "clusters", "list");
	assert_exit(p, 0);
	assert_contains(p->out, "c1     eu-west-1   2       5      first");
	assert_contains(p->out, "c2     us-east-1   1       1      -");
}

/* gpupool capacity: the table and the JSON, figures worked out by hand. */
static void
test_capacity_view(void **state)
{
	struct fixture *fx = *state;
	struct json_object *o, *m;
	struct fx_proc *p;

	p = CLI(fx, "capacity", "--model", "H100-80GB");
	assert_exit(p, 0);
	/*
	 * compute used: 6 (a) + 7 (b, whole) + 0 + 6 (d) + 4 (e) = 23;
	 * stranded: a's and d's 7th slice, and e's third free compute slice
	 * (two free memory slices hold at most two compute slices);
	 * placeable: c takes everything an empty GPU does, e has slices 2-3.
	 */
	assert_output(p->out,
	    "H100-80GB: 5 GPUs (5 healthy, 4 MIG enabled, 5 placeable)\n"
	    "  slices         total      used      free  stranded\n"
	    "  compute           35        23        12         3\n"
	    "  memory            40        29        11         -\n"
	    "  profile     allocated  placeable\n"
	    "  full                1          1\n"
	    "  1g.10gb             1          9\n"
	    "  1g.10gb+me          0          2\n"
	    "  1g.20gb             1          5\n"
	    "  2g.20gb             1          4\n"
	    "  3g.40gb             4          2\n"
	    "  4g.40gb             0          1\n"
	    "  7g.80gb             0          1\n");

	p = CLI(fx, "-o", "json", "capacity");
	assert_exit(p, 0);
	o = cli_json(fx, p);
	assert_int_equal(fx_json_len(o, "models"), 2);
	m = fx_json(o, "models[0]");
	assert_json_str(m, "model", "H100-80GB");
	assert_json_int(m, "gpus.total", 5);
	assert_json_int(m, "gpus.healthy", 5);
	assert_json_int(m, "gpus.mig_enabled", 4);
	assert_json_int(m, "compute_slices.total", 35);
	assert_json_int(m, "compute_slices.used", 23);
	assert_json_int(m, "compute_slices.free", 12);
	assert_json_int(m, "compute_slices.stranded", 3);
	assert_json_int(m, "memory_slices.total", 40);
	assert_json_int(m, "memory_slices.used", 29);
	assert_json_int(m, "memory_slices.free", 11);
	assert_json_int(profile_of(m, "3g.40gb"), "allocated", 4);
	assert_json_int(profile_of(m, "3g.40gb"), "placeable", 2);
	assert_json_int(profile_of(m, "full"), "allocated", 1);
	assert_json_int(profile_of(m, "full"), "placeable", 1);
	m = fx_json(o, "models[1]");
	assert_json_str(m, "model", "L40S-48GB");
	assert_json_int(m, "gpus.total", 1);
	assert_json_int(m, "gpus.mig_enabled", 0);
	assert_json_int(m, "compute_slices.total", 1);
	assert_json_int(m, "memory_slices.total", 1);
	assert_json_int(profile_of(m, "full"), "placeable", 1);
	assert_int_equal(fx_json_len(m, "profiles"), 1);

	/* a cluster alone */
	p = CLI(fx, "capacity", "--cluster", "c2");
	assert_exit(p, 0);
	assert_output(p->out,
	    "L40S-48GB: 1 GPUs (1 healthy, 0 MIG enabled, 1 placeable)\n"
	    "  slices        total      used      free  stranded\n"
	    "  compute           1         0         1         0\n"
	    "  memory            1         0         1         -\n"
	    "  profile    allocated  placeable\n"
	    "  full               0          1\n");
	/* a model with no GPUs is shown when asked for */
	p = CLI(fx, "-o", "json", "capacity", "--model", "A100-40GB");
	assert_exit(p, 0);
	o = cli_json(fx, p);
	assert_int_equal(fx_json_len(o, "models"), 1);
	assert_json_int(o, "models[0].gpus.total", 0);
	p = CLI(fx, "capacity", "--model", "A100-40GB", "--cluster", "c2");
	assert_exit(p, 0);
	assert_contains(p->out, "A100-40GB: 0 GPUs");
	p = CLI(fx, "capacity", "--model", "H100");
	assert_exit(p, 3);
	assert_contains(p->err, "model: no such model in the catalog");
	p = CLI(fx, "capacity", "--cluster", "c3");
	assert_exit(p, 3);
	assert_contains(p->err, "cluster: no such cluster");
}

static void
test_simulate(void **state)
{
	struct fixture *fx = *state;
	struct json_object *o;
	struct fx_proc *p;
	int64_t allocations = fx_sql_int64(fx, "SELECT count(*) FROM allocations");

	/* the example: 2 x 3g on the empty GPU, the 1g on e's free pair */
	p = CLI(fx, "capacity", "simulate", "H100-80GB/3g.40gb=2", "H100-80GB/1g.10gb=1");
	assert_exit(p, 0);
	assert_output(p->out,
	    "fits: yes\n"
	    "\n"
	    "MODEL       PROFILE   NODE   GPU   START   SIZE   MIG SWITCH   GPU UUID\n"
	    "H100-80GB   3g.40gb   n1     2     0       4      false        " UUID_C "\n"
	    "H100-80GB   3g.40gb   n1     2     4       4      false        " UUID_C "\n"
	    "H100-80GB   1g.10gb   n2     1     2       1      false        " UUID_E "\n");
	p = CLI(fx, "-o", "json", "capacity", "simulate", "H100-80GB/3g.40gb=2",
	    "H100-80GB/1g.10gb=1");
	assert_exit(p, 0);
	o = cli_json(fx, p);
	assert_true(json_object_get_boolean(fx_json(o, "fits")));
	assert_int_equal(fx_json_len(o, "placements"), 3);
	assert_int_equal(fx_json_len(o, "short"), 0);
	assert_json_str(o, "placements[0].gpu_uuid", UUID_C);
	assert_json_int(o, "placements[1].start", 4);
	assert_json_str(o, "placements[2].node", "n2");

	/* three 3g: only two spots in the fleet; exit 7 */
	p = CLI(fx, "capacity", "simulate", "H100-80GB/3g.40gb=3");
	assert_exit(p, 7);
	assert_output(p->out,
	    "fits: no\n"
	    "\n"
	    "MODEL       PROFILE   MISSING\n"
	    "H100-80GB   3g.40gb   1\n");
	p = CLI(fx, "-o", "json", "capacity", "simulate", "H100-80GB/3g.40gb=3",
	    "H100-80GB/1g.10gb=1");
	assert_exit(p, 7);
	o = cli_json(fx, p);
	assert_false(json_object_get_boolean(fx_json(o, "fits")));
	assert_int_equal(fx_json_len(o, "placements"), 0);
	assert_int_equal(fx_json_len(o, "short"), 1);
	assert_json_str(o, "short[0].profile", "3g.40gb");
	assert_json_int(o, "short[0].missing", 1);

	/* whole GPUs: c may switch its MIG mode off; two are one too many */
	p = CLI(fx, "-o", "json", "capacity", "simulate", "H100-80GB/full=1");
	assert_exit(p, 0);
	o = cli_json(fx, p);
	assert_json_str(o, "placements[0].gpu_uuid", UUID_C);
	assert_true(json_object_get_boolean(fx_json(o, "placements[0].mode_switch")));
	p = CLI(fx, "capacity", "simulate", "H100-80GB/full=2");
	assert_exit(p, 7);

	/* by cluster */
	p = CLI(fx, "capacity", "simulate", "L40S-48GB/full=1", "--cluster", "c2");
	assert_exit(p, 0);
	assert_contains(p->out, "L40S-48GB   full      n3     0     0       1");
	p = CLI(fx, "capacity", "simulate", "H100-80GB/1g.10gb=1", "--cluster", "c2");
	assert_exit(p, 7);
	p = CLI(fx, "capacity", "simulate", "L40S-48GB/full=1", "--cluster", "c1");
	assert_exit(p, 7);

	/* the catalog is the server's: well-formed but unknown names are its 422, exit 3 */
	p = CLI(fx, "capacity", "simulate", "H100-80GB/3g.47gb=1");
	assert_exit(p, 3);
	assert_contains(p->err, "items[0].profile: model H100-80GB offers no profile \"3g.47gb\"");
	p = CLI(fx, "capacity", "simulate", "H100-80GB/1g.10gb=1", "B300/full=1");
	assert_exit(p, 3);
	assert_contains(p->err, "items[1].model: unknown gpu model \"B300\"");
	p = CLI(fx, "capacity", "simulate", "L40S-48GB/1g.10gb=1");
	assert_exit(p, 3);
	assert_contains(p->err, "not MIG-capable");

	/* simulation changes nothing */
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM allocations"), allocations);
}

/* Cordon, drain and uncordon, and what they do to capacity and simulation. */
static void
test_cordon(void **state)
{
	struct fixture *fx = *state;
	struct json_object *o;
	struct fx_proc *p;

	p = CLI(fx, "nodes", "cordon", "n1", "--reason", "firmware");
	assert_exit(p, 0);
	assert_contains(p->out, "n1     c1        cordoned   3      H100-80GB");
	p = CLI(fx, "-o", "json", "nodes", "get", "n1");
	o = cli_json(fx, p);
	assert_json_str(o, "status", "cordoned");
	assert_json_str(o, "status_reason", "firmware");
	assert_false(json_object_get_boolean(fx_json(o, "placeable")));
	p = CLI(fx, "-o", "json", "nodes", "list", "--status", "cordoned");
	assert_string_equal(names_of(fx, p), "n1");
	p = CLI(fx, "-o", "json", "nodes", "list", "--status", "ready");
	assert_string_equal(names_of(fx, p), "n2 n3");

	/* n1's GPUs still count, but nothing more can go there */
	p = CLI(fx, "capacity", "--model", "H100-80GB");
	assert_exit(p, 0);
	assert_output(p->out,
	    "H100-80GB: 5 GPUs (5 healthy, 4 MIG enabled, 2 placeable)\n"
	    "  slices         total      used      free  stranded\n"
	    "  compute           35        23        12         3\n"
	    "  memory            40        29        11         -\n"
	    "  profile     allocated  placeable\n"
	    "  full                1          0\n"
	    "  1g.10gb             1          2\n"
	    "  1g.10gb+me          0          1\n"
	    "  1g.20gb             1          1\n"
	    "  2g.20gb             1          1\n"
	    "  3g.40gb             4          0\n"
	    "  4g.40gb             0          0\n"
	    "  7g.80gb             0          0\n");
	p = CLI(fx, "gpus", "list", "--node", "n1", "-o", "json");
	o = cli_json(fx, p);
	assert_false(json_object_get_boolean(fx_json(o, "items[2].placeable")));

	p = CLI(fx, "capacity", "simulate", "H100-80GB/3g.40gb=1");
	assert_exit(p, 7);
	assert_contains(p->out, "H100-80GB   3g.40gb   1\n");
	p = CLI(fx, "-o", "json", "capacity", "simulate", "H100-80GB/1g.10gb=2");
	assert_exit(p, 0);
	o = cli_json(fx, p);
	assert_json_str(o, "placements[0].gpu_uuid", UUID_E);
	assert_json_str(o, "placements[1].gpu_uuid", UUID_E);
	p = CLI(fx, "capacity", "simulate", "H100-80GB/1g.10gb=3");
	assert_exit(p, 7);

	/* cordon again is a no-op; a draining node cannot be cordoned */
	p = CLI(fx, "nodes", "cordon", "n1");
	assert_exit(p, 0);
	p = CLI(fx, "nodes", "drain", "n2");
	assert_exit(p, 0);
	assert_contains(p->out, "draining");
	p = CLI(fx, "nodes", "cordon", "n2");
	assert_exit(p, 5);
	assert_contains(p->err, "HTTP 409");
	p = CLI(fx, "-o", "json", "capacity", "--model", "H100-80GB");
	o = cli_json(fx, p);
	assert_json_int(o, "models[0].gpus.placeable", 0);
	assert_json_int(profile_of(fx_json(o, "models[0]"), "1g.10gb"), "placeable", 0);
	p = CLI(fx, "capacity", "simulate", "H100-80GB/1g.10gb=1");
	assert_exit(p, 7);

	/* back to ready: everything as before */
	p = CLI(fx, "nodes", "uncordon", "n1");
	assert_exit(p, 0);
	assert_contains(p->out, "n1     c1        ready");
	p = CLI(fx, "nodes", "uncordon", "n2");
	assert_exit(p, 0);
	p = CLI(fx, "-o", "json", "capacity", "--model", "H100-80GB");
	o = cli_json(fx, p);
	assert_json_int(o, "models[0].gpus.placeable", 5);
	assert_json_int(profile_of(fx_json(o, "models[0]"), "1g.10gb"), "placeable", 9);
	p = CLI(fx, "capacity", "simulate", "H100-80GB/3g.40gb=2", "H100-80GB/1g.10gb=1");
	assert_exit(p, 0);

	p = CLI(fx, "nodes", "cordon", "n9");
	assert_exit(p, 4);
	assert_contains(p->err, "HTTP 404");
	/* the audit log has each change, by the operator */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'node.cordon'"),
	    1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_usage_errors),
		cmocka_unit_test(test_inventory),
		cmocka_unit_test(test_capacity_view),
		cmocka_unit_test(test_simulate),
		cmocka_unit_test(test_cordon),
	};

	return fixture_run_tests(tests);
}
