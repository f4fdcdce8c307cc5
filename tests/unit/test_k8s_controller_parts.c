/*
 * test_k8s_controller_parts.c - gpupool-k8s' pure parts (client/k8s): the
 * kubeconfig reader (the YAML subset kubectl writes, JSON, what it refuses),
 * the REST path of each kind, and the ResourceClaim read-back's mapping
 * from allocation results to device UUIDs through ResourceSlices.
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

#include "claims.h"
#include "kubeconfig.h"
#include "sync.h"

static const char *
write_tmp(const char *name, const char *text)
{
	static char path[256];
	FILE *f;

	snprintf(path, sizeof(path), "/tmp/gp-k8s-unit-%d-%s", (int)getpid(), name);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	return path;
}

/* As `kubectl config view --raw` writes it. */
static const char kubectl_style[] = "apiVersion: v1\n"
				    "clusters:\n"
				    "- cluster:\n"
				    "    certificate-authority-data: LS0tLS1CRUdJTg==\n"
				    "    server: https://10.0.0.1:6443   # the API\n"
				    "  name: prod\n"
				    "- cluster:\n"
				    "    server: https://other:6443\n"
				    "  name: other\n"
				    "contexts:\n"
				    "- context:\n"
				    "    cluster: prod\n"
				    "    namespace: default\n"
				    "    user: admin@prod\n"
				    "  name: admin@prod\n"
				    "- context:\n"
				    "    cluster: other\n"
				    "    user: 'robot'\n"
				    "  name: robot\n"
				    "current-context: \"admin@prod\"\n"
				    "kind: Config\n"
				    "preferences: {}\n"
				    "users:\n"
				    "- name: admin@prod\n"
				    "  user:\n"
				    "    client-certificate: certs/admin.crt\n"
				    "    client-key: /abs/admin.key\n"
				    "- name: robot\n"
				    "  user:\n"
				    "    token: \"abc.def#ghi\"\n";

static void
test_kubeconfig_kubectl_style(void **state)
{
	struct kube_auth a;
	char why[256];
	const char *p = write_tmp("kc1", kubectl_style);

	(void)state;
	assert_int_equal(kube_auth_from_kubeconfig(&a, p, NULL, why, sizeof(why)), 0);
	assert_string_equal(a.server, "https://10.0.0.1:6443");
	assert_string_equal(a.ca_data, "-----BEGIN");             /* base64 decoded */
	assert_non_null(strstr(a.cert_file, "/certs/admin.crt")); /* next to the kubeconfig */
	assert_string_equal(a.key_file, "/abs/admin.key");
	assert_string_equal(a.token, "");
	kube_auth_free(&a);
	/* another context: its cluster and its user's token ('#' inside quotes) */
	assert_int_equal(kube_auth_from_kubeconfig(&a, p, "robot", why, sizeof(why)), 0);
	assert_string_equal(a.server, "https://other:6443");
	assert_string_equal(a.token, "abc.def#ghi");
	assert_null(a.ca_data);
	kube_auth_free(&a);
	assert_int_equal(kube_auth_from_kubeconfig(&a, p, "nosuch", why, sizeof(why)), -1);
	assert_non_null(strstr(why, "nosuch"));
	unlink(p);
}

static void
test_kubeconfig_json_and_refusals(void **state)
{
	struct kube_auth a;
	char why[256];
	const char *p;

	(void)state;
	p = write_tmp("kc2",
	    "{\"current-context\":\"c\",\"contexts\":[{\"name\":\"c\",\"context\":"
	    "{\"cluster\":\"k\",\"user\":\"u\"}}],\"clusters\":[{\"name\":\"k\","
	    "\"cluster\":{\"server\":\"https://k:443/\"}}],\"users\":[{\"name\":"
	    "\"u\",\"user\":{\"tokenFile\":\"tok\"}}]}");
	assert_int_equal(kube_auth_from_kubeconfig(&a, p, NULL, why, sizeof(why)), 0);
	assert_string_equal(a.server, "https://k:443"); /* the trailing slash dropped */
	assert_non_null(strstr(a.token_file, "/tok"));
	kube_auth_free(&a);
	unlink(p);
	/* exec plugins are not run */
	p = write_tmp("kc3",
	    "current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n"
	    "    user: u\nclusters:\n- name: k\n  cluster:\n    server: https://k\n"
	    "users:\n- name: u\n  user:\n    exec:\n      command: aws\n");
	assert_int_equal(kube_auth_from_kubeconfig(&a, p, NULL, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "exec"));
	unlink(p);
	/* YAML it does not read is refused, not guessed */
	p = write_tmp("kc4", "current-context: c\nclusters: [{name: k}]\n");
	assert_int_equal(kube_auth_from_kubeconfig(&a, p, NULL, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "line 2"));
	unlink(p);
	p = write_tmp("kc5", "a:\n  b: |\n    text\n");
	assert_int_equal(kube_auth_from_kubeconfig(&a, p, NULL, why, sizeof(why)), -1);
	unlink(p);
	p = write_tmp("kc6", "a:\n\tb: 1\n");
	assert_int_equal(kube_auth_from_kubeconfig(&a, p, NULL, why, sizeof(why)), -1);
	assert_non_null(strstr(why, "tab"));
	unlink(p);
	/* a certificate without its key */
	p = write_tmp("kc7",
	    "current-context: c\ncontexts:\n- name: c\n  context:\n    cluster: k\n"
	    "    user: u\nclusters:\n- name: k\n  cluster:\n    server: https://k\n"
	    "users:\n- name: u\n  user:\n    client-certificate: a.crt\n");
	assert_int_equal(kube_auth_from_kubeconfig(&a, p, NULL, why, sizeof(why)), -1);
	unlink(p);
}

static void
test_in_cluster(void **state)
{
	struct kube_auth a;
	char why[256];

	(void)state;
	unsetenv("KUBERNETES_SERVICE_HOST");
	assert_int_equal(kube_auth_in_cluster(&a, NULL, why, sizeof(why)), -1);
	setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
	setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
	assert_int_equal(kube_auth_in_cluster(&a, NULL, why, sizeof(why)), 0);
	assert_string_equal(a.server, "https://[fd00::1]:6443");
	assert_string_equal(a.token_file, "/var/run/secrets/kubernetes.io/serviceaccount/token");
	assert_string_equal(a.ca_file, "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt");
	kube_auth_free(&a);
}

static void
path_is(const char *json, const char *want)
{
	struct json_object *o = json_tokener_parse(json);
	char path[512];

	assert_non_null(o);
	if (want == NULL)
		assert_int_equal(sync_object_path(o, path, sizeof(path)), -1);
	else {
		assert_int_equal(sync_object_path(o, path, sizeof(path)), 0);
		assert_string_equal(path, want);
	}
	json_object_put(o);
}

static void
test_paths(void **state)
{
	(void)state;
	path_is("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":"
		"{\"name\":\"gpupool.ml.train\"}}",
	    "/apis/resource.k8s.io/v1/deviceclasses/gpupool.ml.train");
	path_is("{\"apiVersion\":\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":{\"name\":\"q\","
		"\"namespace\":\"ml\"}}",
	    "/api/v1/namespaces/ml/resourcequotas/q");
	path_is("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"ml\"}}",
	    "/api/v1/namespaces/ml");
	path_is("{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
		"\"ValidatingAdmissionPolicyBinding\",\"metadata\":{\"name\":\"p\"}}",
	    "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/p");
	path_is("{\"apiVersion\":\"resource.k8s.io/v1alpha3\",\"kind\":\"DeviceTaintRule\","
		"\"metadata\":{\"name\":\"t\"}}",
	    "/apis/resource.k8s.io/v1alpha3/devicetaintrules/t");
	/* refused: an unknown kind, a namespace where none belongs or none where one does,
	 * a name that would leave its path segment */
	path_is("{\"apiVersion\":\"v1\",\"kind\":\"Secret\",\"metadata\":{\"name\":\"s\","
		"\"namespace\":\"a\"}}",
	    NULL);
	path_is("{\"apiVersion\":\"v1\",\"kind\":\"ResourceQuota\",\"metadata\":{\"name\":\"q\"}}",
	    NULL);
	path_is("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":"
		"{\"name\":\"x\",\"namespace\":\"a\"}}",
	    NULL);
	path_is("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":"
		"{\"name\":\"../../secrets\"}}",
	    NULL);
	path_is("{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":"
		"{\"name\":\"a?b\"}}",
	    NULL);
}

static void
test_claims_mapping(void **state)
{
	struct json_object *slices = json_tokener_parse(
	    "{\"items\":[{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"pool\":{\"name\":\"n1\"},"
	    "\"devices\":[{\"name\":\"gpu-0\",\"attributes\":{\"uuid\":{\"string\":\"GPU-a\"}}},"
	    "{\"name\":\"gpu-0-mig-1-0-4\",\"attributes\":{\"gpu.nvidia.com/uuid\":{\"string\":"
	    "\"MIG-b\"}}}]}},"
	    "{\"spec\":{\"driver\":\"gpu.nvidia.com\",\"pool\":{\"name\":\"n2\"},"
	    "\"devices\":[{\"name\":\"gpu-0\",\"attributes\":{\"uuid\":{\"string\":\"GPU-c\"}}}]}}]}");
	struct json_object *claims = json_tokener_parse(
	    "{\"items\":["
	    /* a pool's class, two pods: two profiles; the same device name on n2 is not it */
	    "{\"metadata\":{\"namespace\":\"ml\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":"
	    "\"g\",\"exactly\":{\"deviceClassName\":\"gpupool.ml.a\"}}]}},\"status\":{"
	    "\"allocation\":{\"devices\":{\"results\":[{\"request\":\"g\",\"driver\":"
	    "\"gpu.nvidia.com\",\"pool\":\"n1\",\"device\":\"gpu-0\"}]}},\"reservedFor\":["
	    "{\"resource\":\"pods\",\"name\":\"p1\"},{\"resource\":\"pods\",\"name\":\"p2\"},"
	    "{\"apiGroup\":\"example.com\",\"resource\":\"pods\",\"name\":\"notapod\"}]}},"
	    /* a firstAvailable subrequest of a gpupool class, the qualified uuid attribute */
	    "{\"metadata\":{\"namespace\":\"ml\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":"
	    "\"g\",\"firstAvailable\":[{\"name\":\"big\",\"deviceClassName\":\"x\"},{\"name\":"
	    "\"small\",\"deviceClassName\":\"gpupool.ml.b\"}]}]}},\"status\":{\"allocation\":"
	    "{\"devices\":{\"results\":[{\"request\":\"g/small\",\"driver\":\"gpu.nvidia.com\","
	    "\"pool\":\"n1\",\"device\":\"gpu-0-mig-1-0-4\"}]}},\"reservedFor\":[{\"resource\":"
	    "\"pods\",\"name\":\"p3\"}]}},"
	    /* another class: not gpupool's */
	    "{\"metadata\":{\"namespace\":\"ml\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":"
	    "\"g\",\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\"}}]}},\"status\":{"
	    "\"allocation\":{\"devices\":{\"results\":[{\"request\":\"g\",\"driver\":"
	    "\"gpu.nvidia.com\",\"pool\":\"n2\",\"device\":\"gpu-0\"}]}},\"reservedFor\":["
	    "{\"resource\":\"pods\",\"name\":\"p4\"}]}},"
	    /* a device no slice names: counted, not reported */
	    "{\"metadata\":{\"namespace\":\"ml\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":"
	    "\"g\",\"exactly\":{\"deviceClassName\":\"gpupool.ml.a\"}}]}},\"status\":{"
	    "\"allocation\":{\"devices\":{\"results\":[{\"request\":\"g\",\"driver\":"
	    "\"gpu.nvidia.com\",\"pool\":\"n9\",\"device\":\"gpu-0\"}]}},\"reservedFor\":["
	    "{\"resource\":\"pods\",\"name\":\"p5\"}]}},"
	    /* not allocated yet */
	    "{\"metadata\":{\"namespace\":\"ml\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":"
	    "\"g\",\"exactly\":{\"deviceClassName\":\"gpupool.ml.a\"}}]}}}]}");
	struct claims_result res = { 0 };
	struct json_object *p;
	const char *s;

	(void)state;
	assert_non_null(slices);
	assert_non_null(claims);
	p = claims_profiles_from(slices, claims, &res);
	s = json_object_to_json_string_ext(p, JSON_C_TO_STRING_PLAIN);
	assert_string_equal(s,
	    "[{\"device_uuid\":\"GPU-a\",\"namespace\":\"ml\",\"pod\":\"p1\"},"
	    "{\"device_uuid\":\"GPU-a\",\"namespace\":\"ml\",\"pod\":\"p2\"},"
	    "{\"device_uuid\":\"MIG-b\",\"namespace\":\"ml\",\"pod\":\"p3\"}]");
	assert_int_equal(res.claims, 3);
	assert_int_equal(res.profiles, 3);
	assert_int_equal(res.unmapped, 1);
	json_object_put(p);
	json_object_put(slices);
	json_object_put(claims);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kubeconfig_kubectl_style),
		cmocka_unit_test(test_kubeconfig_json_and_refusals),
		cmocka_unit_test(test_in_cluster),
		cmocka_unit_test(test_paths),
		cmocka_unit_test(test_claims_mapping),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
