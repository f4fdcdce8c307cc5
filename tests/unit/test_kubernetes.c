/*
 * test_kubernetes.c - the pure parts of the Kubernetes objects: class
 * names (DNS-1123, unambiguous), the CEL selector and its split at the
 * API server's 10 KiB limit (exactly at the boundary), UUIDs that may
 * enter CEL, and the block-style YAML writer.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>

#include "domain/kubernetes.h"

static void
test_class_names(void **state)
{
	struct arena *a = arena_create();
	char long63[64];

	(void)state;
	assert_string_equal(k8s_class_name(a, "ml", "train", 0), "gpupool.ml.train");
	assert_string_equal(k8s_class_name(a, "ml", "train", 1), "gpupool.ml.train.2");
	/* project "a-b" pool "c" and project "a" pool "b-c": the dot keeps them apart */
	assert_string_not_equal(k8s_class_name(a, "a-b", "c", 0), k8s_class_name(a, "a", "b-c", 0));
	/* a pool named like a chunk suffix cannot collide: pool names have no dots */
	assert_string_not_equal(k8s_class_name(a, "a", "b", 1), k8s_class_name(a, "a", "2", 0));
	memset(long63, 'x', 63);
	long63[63] = '\0';
	for (int c = 0; c < 3; c++) {
		const char *n = k8s_class_name(a, long63, long63, c == 2 ? 999999 : c);

		assert_true(k8s_dns_subdomain(n));
		/* the quota key's prefix stays a DNS subdomain too */
		assert_true(
		    k8s_dns_subdomain(arena_printf(a, "%s.deviceclass.resource.k8s.io", n)));
	}
	assert_false(k8s_dns_subdomain(""));
	assert_false(k8s_dns_subdomain("a..b"));
	assert_false(k8s_dns_subdomain("-a"));
	assert_false(k8s_dns_subdomain("a-.b"));
	assert_false(k8s_dns_subdomain("A.b"));
	assert_true(k8s_dns_subdomain("gpu.nvidia.com"));
	arena_destroy(a);
}

static void
test_uuid_ok(void **state)
{
	char big[K8S_UUID_MAX + 2];

	(void)state;
	assert_true(k8s_uuid_ok("GPU-0f9c3e2a-1b2c-4d5e-8f90-123456789abc"));
	assert_true(k8s_uuid_ok("MIG-GPU-0f9c3e2a-1b2c-4d5e-8f90-123456789abc/1/0"));
	assert_false(k8s_uuid_ok(""));
	assert_false(k8s_uuid_ok("MIG-x' || true || '"));
	assert_false(k8s_uuid_ok("a\\b"));
	assert_false(k8s_uuid_ok("a b"));
	memset(big, 'a', sizeof(big) - 1);
	big[K8S_UUID_MAX] = '\0';
	assert_true(k8s_uuid_ok(big));
	big[K8S_UUID_MAX] = 'a';
	big[K8S_UUID_MAX + 1] = '\0';
	assert_false(k8s_uuid_ok(big));
}

static void
test_selector(void **state)
{
	struct arena *a = arena_create();
	const char *u[] = { "GPU-1", "MIG-2" };

	(void)state;
	assert_string_equal(k8s_selector(a, u, 2),
	    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type in "
	    "['gpu', 'mig'] && device.attributes['gpu.nvidia.com'].uuid in ['GPU-1', 'MIG-2']");
	assert_string_equal(k8s_selector(a, u, 0),
	    "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type in "
	    "['gpu', 'mig'] && device.attributes['gpu.nvidia.com'].uuid in []");
	for (int n = 0; n <= 2; n++)
		assert_int_equal(k8s_selector_len(u, n), strlen(k8s_selector(a, u, n)));
	arena_destroy(a);
}

/* n UUIDs of 40 bytes ("MIG-" and 36), then the last one padded by extra bytes. */
static const char **
uuids(struct arena *a, int n, int extra)
{
	const char **v = arena_alloc(a, sizeof(*v) * (size_t)n);

	for (int i = 0; i < n; i++)
		v[i] = arena_printf(a, "MIG-%08x-0000-4000-8000-%012d%s", (unsigned)i, i,
		    i == n - 1 ? arena_printf(a, "%.*s", extra, "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz")
			       : "");
	return v;
}

static void
test_split_boundary(void **state)
{
	struct arena *a = arena_create();
	int starts[8], n = 1, extra;
	const char **v;

	(void)state;
	/* the most 40-byte UUIDs that fit, then pad the last to exactly K8S_CEL_MAX */
	while (k8s_selector_len(uuids(a, n + 1, 0), n + 1) <= K8S_CEL_MAX)
		n++;
	extra = (int)(K8S_CEL_MAX - k8s_selector_len(uuids(a, n, 0), n));
	assert_true(extra >= 0 && extra < 44);
	v = uuids(a, n, extra);
	assert_int_equal(k8s_selector_len(v, n), K8S_CEL_MAX);
	assert_int_equal(strlen(k8s_selector(a, v, n)), K8S_CEL_MAX);
	assert_int_equal(k8s_selector_split(v, n, K8S_CEL_MAX, starts, 8), 1);
	assert_int_equal(starts[0], 0);
	/* one byte more: two expressions, the last UUID alone in the second */
	v = uuids(a, n, extra + 1);
	assert_int_equal(k8s_selector_len(v, n), K8S_CEL_MAX + 1);
	assert_int_equal(k8s_selector_split(v, n, K8S_CEL_MAX, starts, 8), 2);
	assert_int_equal(starts[1], n - 1);
	assert_true(k8s_selector_len(v, n - 1) <= K8S_CEL_MAX);
	/* a large pool: every run fits, runs cover everything in order */
	v = uuids(a, 1000, 0);
	{
		int runs = k8s_selector_split(v, 1000, K8S_CEL_MAX, starts, 8), total = 0;

		assert_true(runs >= 4 && runs <= 8);
		for (int r = 0; r < runs; r++) {
			int e = r + 1 < runs ? starts[r + 1] : 1000;

			assert_true(k8s_selector_len(v + starts[r], e - starts[r]) <= K8S_CEL_MAX);
			/* greedy: the next UUID would not have fitted */
			if (r + 1 < runs)
				assert_true(k8s_selector_len(v + starts[r], e - starts[r] + 1) >
				    K8S_CEL_MAX);
			total += e - starts[r];
		}
		assert_int_equal(total, 1000);
		assert_int_equal(k8s_selector_split(v, 1000, K8S_CEL_MAX, starts, 2), -1);
	}
	/* nothing: one run that admits nothing; a limit below the frame: -1 */
	assert_int_equal(k8s_selector_split(v, 0, K8S_CEL_MAX, starts, 8), 1);
	assert_int_equal(k8s_selector_split(v, 1, 100, starts, 8), -1);
	arena_destroy(a);
}

static void
test_yaml(void **state)
{
	struct arena *a = arena_create();
	struct strbuf b;
	struct json_object *o = json_tokener_parse(
	    "{\"apiVersion\":\"v1\",\"items\":[{\"metadata\":{\"name\":\"x\",\"labels\":"
	    "{\"app.kubernetes.io/managed-by\":\"gpupool\",\"yes\":\"no\"}},\"n\":[1,true,null],"
	    "\"e\":{},\"l\":[],\"q\":\"a\\\"b\\\\c\\nd\"},[\"s\"]],\"metadata\":{}}");

	(void)state;
	strbuf_init(&b, a, 64);
	k8s_yaml(&b, o);
	assert_string_equal(b.p,
	    "apiVersion: \"v1\"\n"
	    "items:\n"
	    "  - metadata:\n"
	    "      name: \"x\"\n"
	    "      labels:\n"
	    "        app.kubernetes.io/managed-by: \"gpupool\"\n"
	    "        \"yes\": \"no\"\n"
	    "    \"n\":\n" /* YAML 1.1 reads a plain n as false */
	    "      - 1\n"
	    "      - true\n"
	    "      - null\n"
	    "    e: {}\n"
	    "    l: []\n"
	    "    q: \"a\\\"b\\\\c\\nd\"\n"
	    "  - - \"s\"\n"
	    "metadata: {}\n");
	json_object_put(o);
	arena_destroy(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_class_names),
		cmocka_unit_test(test_uuid_ok),
		cmocka_unit_test(test_selector),
		cmocka_unit_test(test_split_boundary),
		cmocka_unit_test(test_yaml),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
