/*
 * test_k8s_controller.c - gpupool-k8s end to end: real gpupoold and
 * PostgreSQL, real gpupool-agent processes (fake backend), the controller,
 * and the stand-in Kubernetes API server (tests/k8s/apiserver.mjs: server-
 * side apply with field managers, label selectors, the real Status errors,
 * kubernetes-models validation of every applied object, TLS with a test CA
 * made here with openssl, client-certificate and bearer-token auth).
 *
 * What is checked: the first sync applies the List and prunes a stale
 * managed object but never an unmanaged one; every request follows the API
 * conventions (PATCH, application/apply-patch+yaml, fieldManager=gpupool,
 * force=true, the REST path of its kind); an approval reaches the cluster
 * through the long-poll, not a timer (the controller waits 30 s per poll);
 * a release deletes the class; API server errors back off and recover; an
 * in-cluster controller re-reads its rotated token file.
 */
#include "fixture.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *op, *ml, *cv, *owner;
static const char *dir; /* certificates, kubeconfig, tokens */
static pid_t standin, ctl, agents[2];
static int api_port;
static struct gp_client *hooks; /* the stand-in's /_standin/ hooks (plain HTTP) */

#define CLUSTER "kc"

static long long
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int
free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t l = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);

	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(s, (struct sockaddr *)&a, &l) != 0)
		fail_msg("no free port");
	close(s);
	return ntohs(a.sin_port);
}

static void
write_file(const char *path, const char *text)
{
	char tmp[1024];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	assert_non_null(f);
	fputs(text, f);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(rename(tmp, path), 0); /* as the kubelet swaps a projected token */
}

static int
read_port(const char *path, int seconds)
{
	for (int i = 0; i < seconds * 10; i++) {
		FILE *f = fopen(path, "r");
		int port = 0;

		if (f != NULL) {
			if (fscanf(f, "%d", &port) != 1)
				port = 0;
			fclose(f);
			if (port > 0)
				return port;
		}
		usleep(100000);
	}
	fail_msg("no port in %s", path);
	return 0;
}

static pid_t
spawn(const char *log, const char *const *env, char *const *argv)
{
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		dup2(fd, 1);
		dup2(fd, 2);
		for (int i = 0; env != NULL && env[i] != NULL; i += 2)
			setenv(env[i], env[i + 1], 1);
		execv(argv[0], argv);
		_exit(127);
	}
	return pid;
}

static int
stop(pid_t pid)
{
	int st = 0;

	if (pid <= 0)
		return 0;
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static pid_t
agent_start(struct fixture *fx, const char *name, const char *token)
{
	const char *gpus = fx_str(fx, "%s/gpus-%s.json", fx->tmpdir, name);
	const char *state = fx_str(fx, "%s/agent-%s", fx->tmpdir, name);
	const char *listen = fx_str(fx, "127.0.0.1:%d", free_port());
	char *argv[] = { (char *)AGENT_PATH, "--server", fx->server->base_url, "--node-name",
		(char *)name, "--state-dir", (char *)state, "--backend", "fake", "--fake-gpus",
		(char *)gpus, "--enroll-token", (char *)token, "--listen", (char *)listen,
		"--poll-interval", "5", "--heartbeat-interval", "1", NULL };

	write_file(gpus, "{\"gpus\":[{\"model\":\"H100-80GB\",\"count\":2}]}");
	return spawn(fx_str(fx, "%s/%s.log", fx->tmpdir, name), NULL, argv);
}

/* gpupool-k8s with extra arguments (after the common ones) and environment. */
static pid_t
controller_start(struct fixture *fx, const char *const *env, const char *a1, const char *a2,
    const char *a3, const char *a4)
{
	char *argv[] = { (char *)K8S_PATH, "--server", fx->server->base_url, "--cluster", CLUSTER,
		"--token-file", (char *)fx_str(fx, "%s/gpupool-token", dir), "--wait", "30",
		"--backoff-max", "2", (char *)a1, (char *)a2, (char *)a3, (char *)a4, NULL };

	return spawn(fx_str(fx, "%s/gpupool-k8s.log", fx->tmpdir), env, argv);
}

static void
sh(struct fixture *fx, const char *cmd)
{
	int st = system(fx_str(fx, "cd '%s' && { %s; } >>openssl.log 2>&1", dir, cmd));

	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		fail_msg("failed: %s", cmd);
}

/* A test CA, the stand-in's server certificate (127.0.0.1) and a client certificate. */
static void
make_certs(struct fixture *fx)
{
	sh(fx,
	    "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 "
	    "-subj /CN=gpupool-test-ca");
	sh(fx,
	    "openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1");
	sh(fx,
	    "printf 'subjectAltName=IP:127.0.0.1\\n' > srv.ext && openssl x509 -req -in srv.csr "
	    "-CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 2 -extfile srv.ext");
	sh(fx,
	    "openssl req -newkey rsa:2048 -nodes -keyout cli.key -out cli.csr -subj /CN=gpupool-k8s");
	sh(fx,
	    "openssl x509 -req -in cli.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out cli.crt "
	    "-days 2");
}

static struct json_object *
hook(struct fixture *fx, const char *method, const char *path, const char *body)
{
	struct gp_client_response r;
	struct json_object *o;

	(void)fx;
	if (gp_client_request(hooks, method, path, body, body ? strlen(body) : 0, NULL, &r) < 0 ||
	    r.status != 200)
		fail_msg("stand-in hook %s %s: %ld %s", method, path, r.status, r.error);
	o = json_object_get(r.json);
	gp_client_response_free(&r);
	return o; /* leaked until exit: a test's worth */
}

/* The stand-in's object of kind named name (NULL when absent). */
static struct json_object *
object(struct fixture *fx, const char *kind, const char *name)
{
	struct json_object *all = hook(fx, "GET", "/_standin/objects", NULL);

	for (size_t i = 0; i < json_object_array_length(all); i++) {
		struct json_object *o = json_object_array_get_idx(all, i);

		if (strcmp(fx_json_str(o, "kind"), kind) == 0 &&
		    strcmp(fx_json_str(o, "metadata.name"), name) == 0)
			return o;
	}
	return NULL;
}

/* Poll (deadline s seconds) until the object is present (want) or gone (!want); ms taken. */
static long long
wait_object(struct fixture *fx, const char *kind, const char *name, bool want, int s)
{
	long long t0 = now_ms();

	while (now_ms() - t0 < (long long)s * 1000) {
		if ((object(fx, kind, name) != NULL) == want)
			return now_ms() - t0;
		usleep(20000);
	}
	fixture_server_dump_log(fx->server, 30);
	system(fx_str(fx, "tail -n 30 '%s/gpupool-k8s.log' >&2", fx->tmpdir));
	fail_msg("%s %s still %s after %d s", kind, name, want ? "absent" : "present", s);
	return -1;
}

static void
wait_count(struct fixture *fx, int64_t want, const char *sql, const char *p1)
{
	int64_t got = -1;

	for (int i = 0; i < 600; i++) {
		got = fx_sql_int64(fx, sql, p1);
		if (got == want)
			return;
		usleep(50000);
	}
	fixture_server_dump_log(fx->server, 40);
	fail_msg("timed out: %s gave %lld, want %lld", sql, (long long)got, (long long)want);
}

#define LIVE_OF                                                                         \
	"SELECT count(*) FROM allocations a JOIN pools p ON p.id = a.pool_id "          \
	"JOIN projects pr ON pr.id = p.project_id WHERE pr.name || '/' || p.name = $1 " \
	"AND a.state = 'ready' AND a.device_uuid IS NOT NULL"

static void
approve(struct fixture *fx, const char *project, const char *action, const char *pool,
    const char *items)
{
	struct gp_client_response *r;
	int64_t id;

	if (items != NULL)
		r = fx_request(fx, owner, "POST",
		    fx_str(fx, "/v1/projects/%s/pool-requests", project),
		    "{\"action\":\"%s\",\"pool\":\"%s\",\"items\":%s,\"justification\":\"k8s\"}",
		    action, pool, items);
	else
		r = fx_request(fx, owner, "POST",
		    fx_str(fx, "/v1/projects/%s/pool-requests", project),
		    "{\"action\":\"%s\",\"pool\":\"%s\"}", action, pool);
	assert_status(r, 201);
	id = fx_json_int(r->json, "id");
	assert_status(fx_request(fx, op, "POST",
			  fx_str(fx, "/v1/pool-requests/%lld/approve", (long long)id), "{}"),
	    200);
}

/* The stand-in's recorded requests. */
static struct json_object *
requests(struct fixture *fx)
{
	return hook(fx, "GET", "/_standin/requests", NULL);
}

static int
group_setup(void **state)
{
	struct fixture *fx;
	struct gp_client_response *r;
	const char *pf, *hpf;

	if (fixture_create(NULL, &fx) < 0)
		return -1;
	*state = fx;
	op = fixture_create_user(fx, "op", "operator");
	ml = fixture_create_user(fx, "mlu", "none");
	cv = fixture_create_user(fx, "cvu", "none");
	owner = fixture_create_user(fx, "own", "none");
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"ml\",\"display_name\":\"ml\",\"namespaces\":[\"ml-train\"]}");
	if (r->status != 201)
		return -1;
	r = fx_request(fx, fx->admin_token, "POST", "/v1/projects",
	    "{\"name\":\"cv\",\"display_name\":\"cv\",\"namespaces\":[\"cv\"]}");
	if (r->status != 201)
		return -1;
	fx_request(fx, fx->admin_token, "PUT", "/v1/projects/ml/members/own",
	    "{\"role\":\"owner\"}");
	fx_request(fx, fx->admin_token, "PUT", "/v1/projects/cv/members/own",
	    "{\"role\":\"owner\"}");
	fx_request(fx, fx->admin_token, "PUT", "/v1/projects/ml/members/mlu",
	    "{\"role\":\"member\"}");
	fx_request(fx, fx->admin_token, "PUT", "/v1/projects/cv/members/cvu",
	    "{\"role\":\"member\"}");

	dir = fx_str(fx, "%s/k8s", fx->tmpdir);
	if (mkdir(dir, 0700) != 0)
		return -1;
	make_certs(fx);
	write_file(fx_str(fx, "%s/api-token", dir), "first-token\n");
	write_file(fx_str(fx, "%s/gpupool-token", dir), fx_str(fx, "%s\n", op));

	/* the stand-in: TLS, client certificates of the test CA or the bearer token */
	pf = fx_str(fx, "%s/port", dir);
	hpf = fx_str(fx, "%s/hooks-port", dir);
	{
		char *argv[] = { (char *)GP_SOURCE_DIR "/tests/k8s/run-node",
			(char *)GP_SOURCE_DIR "/tests/k8s/apiserver.mjs", "--tls", "--cert",
			(char *)fx_str(fx, "%s/srv.crt", dir), "--key",
			(char *)fx_str(fx, "%s/srv.key", dir), "--client-ca",
			(char *)fx_str(fx, "%s/ca.crt", dir), "--token-file",
			(char *)fx_str(fx, "%s/api-token", dir), "--port-file", (char *)pf,
			"--hooks-port-file", (char *)hpf, NULL };

		standin = spawn(fx_str(fx, "%s/apiserver.log", fx->tmpdir), NULL, argv);
	}
	/* npm ci may run first on a fresh tree */
	api_port = read_port(pf, 240);
	hooks = gp_client_create(fx_str(fx, "http://127.0.0.1:%d", read_port(hpf, 30)), NULL);
	if (hooks == NULL)
		return -1;

	/* the cluster and its agents */
	if (fx_request(fx, op, "POST", "/v1/clusters", "{\"name\":\"" CLUSTER "\"}")->status != 201)
		return -1;
	for (int i = 0; i < 2; i++) {
		r = fx_request(fx, op, "POST", "/v1/clusters/" CLUSTER "/enrollment-tokens",
		    "{\"expires_in_seconds\":600}");
		if (r->status != 201)
			return -1;
		agents[i] =
		    agent_start(fx, i == 0 ? "kc-a" : "kc-b", fx_json_str(r->json, "token"));
	}
	wait_count(fx, 4,
	    "SELECT count(*) FROM gpus g JOIN clusters c ON c.id = g.cluster_id WHERE c.name = $1",
	    CLUSTER);
	return 0;
}

static int
group_teardown(void **state)
{
	stop(ctl);
	for (int i = 0; i < 2; i++)
		stop(agents[i]);
	stop(standin);
	gp_client_destroy(hooks);
	return fixture_group_teardown(state);
}

/* curl to the stand-in's API as the test CA's client certificate; the HTTP status. */
static int
kube_call(struct fixture *fx, const char *method, const char *path_query, const char *ctype,
    const char *body)
{
	const char *out = fx_str(fx, "%s/curl.out", dir);
	FILE *f;
	int code = 0;

	write_file(fx_str(fx, "%s/curl.body", dir), body);
	sh(fx,
	    fx_str(fx,
		"curl -sS -o curl.resp -w '%%{http_code}' --cacert ca.crt --cert cli.crt "
		"--key cli.key -X %s -H 'Content-Type: %s' --data-binary @curl.body "
		"'https://127.0.0.1:%d%s' > curl.out",
		method, ctype, api_port, path_query));
	f = fopen(out, "r");
	assert_non_null(f);
	if (fscanf(f, "%d", &code) != 1)
		code = 0;
	fclose(f);
	return code;
}

static int
kubectl_apply(struct fixture *fx, const char *path, const char *manager, bool force,
    const char *body)
{
	return kube_call(fx, "PATCH",
	    fx_str(fx, "%s?fieldManager=%s%s", path, manager, force ? "&force=true" : ""),
	    "application/apply-patch+yaml", body);
}

/* Every request gpupool-k8s sent: the Kubernetes API conventions. */
static void
check_conventions(struct fixture *fx, const char *auth)
{
	struct json_object *rq = requests(fx);
	int patches = 0;

	for (size_t i = 0; i < json_object_array_length(rq); i++) {
		struct json_object *q = json_object_array_get_idx(rq, i);
		const char *m = fx_json_str(q, "method"), *p = fx_json_str(q, "path");

		if (fx_json_has(q, "query.fieldManager") &&
		    strcmp(fx_json_str(q, "query.fieldManager"), "kubectl") == 0)
			continue; /* the test's own "kubectl" */
		if (auth != NULL && fx_json_has(q, "auth") && fx_json(q, "auth") != NULL)
			assert_true(strcmp(fx_json_str(q, "auth"), auth) == 0 ||
			    fx_json_int(q, "status") >= 500);
		if (strcmp(m, "PATCH") == 0) {
			patches++;
			assert_string_equal(fx_json_str(q, "contentType"),
			    "application/apply-patch+yaml");
			assert_string_equal(fx_json_str(q, "query.fieldManager"), "gpupool");
			assert_string_equal(fx_json_str(q, "query.force"), "true");
			/* the body is JSON that YAML 1.1 reads too: no "\/" escapes */
			assert_null(strstr(fx_json_str(q, "body"), "\\/"));
			/* the path names the object's kind, namespace and name */
			assert_true(strncmp(p, "/apis/resource.k8s.io/v1/deviceclasses/gpupool.",
					47) == 0 ||
			    strncmp(p, "/api/v1/namespaces/", 19) == 0 ||
			    strncmp(p,
				"/apis/resource.k8s.io/v1alpha3/devicetaintrules/gpupool-failed-gpu-",
				67) == 0 ||
			    strcmp(p,
				"/apis/admissionregistration.k8s.io/v1/"
				"validatingadmissionpolicies/gpupool-device-classes") == 0 ||
			    strcmp(p,
				"/apis/admissionregistration.k8s.io/v1/"
				"validatingadmissionpolicybindings/gpupool-device-classes") == 0);
			if (strncmp(p, "/api/v1/namespaces/", 19) == 0 &&
			    strchr(p + 19, '/') != NULL)
				assert_non_null(strstr(p, "/resourcequotas/gpupool-devices"));
		} else if (strcmp(m, "GET") == 0 &&
		    strcmp(p, "/apis/resource.k8s.io/v1alpha3") == 0) {
			/* discovery: does the cluster serve DeviceTaintRules? */
			assert_false(fx_json_has(q, "query.labelSelector"));
		} else if (strcmp(m, "GET") == 0 &&
		    (strcmp(p, "/apis/resource.k8s.io/v1/resourceslices") == 0 ||
			strcmp(p, "/apis/resource.k8s.io/v1/resourceclaims") == 0)) {
			/* the read-back of allocations: every claim and slice */
			assert_false(fx_json_has(q, "query.labelSelector"));
		} else if (strcmp(m, "GET") == 0) {
			/* only the managed objects are listed */
			assert_string_equal(fx_json_str(q, "query.labelSelector"),
			    "app.kubernetes.io/managed-by=gpupool");
		} else {
			assert_string_equal(m, "DELETE");
		}
	}
	assert_true(patches > 0);
}

/* The first sync: the List applied, a stale managed class deleted, an unmanaged one kept. */
static void
test_first_sync(void **state)
{
	struct fixture *fx = *state;
	struct json_object *vap;

	hook(fx, "POST", "/_standin/objects",
	    "[{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":"
	    "{\"name\":\"gpupool.gone.p\",\"labels\":{\"app.kubernetes.io/managed-by\":"
	    "\"gpupool\"}},\"spec\":{}},"
	    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"DeviceClass\",\"metadata\":"
	    "{\"name\":\"gpu.nvidia.com\"},\"spec\":{}}]");
	write_file(fx_str(fx, "%s/kubeconfig", dir),
	    fx_str(fx,
		"# as kubectl writes it (sequences at the key's indentation)\n"
		"apiVersion: v1\n"
		"kind: Config\n"
		"clusters:\n"
		"- cluster:\n"
		"    certificate-authority: ca.crt\n"
		"    server: https://127.0.0.1:%d\n"
		"  name: test\n"
		"contexts:\n"
		"- context:\n"
		"    cluster: test\n"
		"    user: \"gpupool-k8s\"\n"
		"  name: test\n"
		"- context: {}\n"
		"  name: other\n"
		"current-context: test\n"
		"preferences: {}\n"
		"users:\n"
		"- name: gpupool-k8s\n"
		"  user:\n"
		"    client-certificate: cli.crt\n"
		"    client-key: '%s/cli.key'\n",
		api_port, dir));
	ctl = controller_start(fx, NULL, "--kubeconfig", fx_str(fx, "%s/kubeconfig", dir),
	    "--log-level", "info");
	wait_object(fx, "ValidatingAdmissionPolicyBinding", "gpupool-device-classes", true, 30);
	wait_object(fx, "DeviceClass", "gpupool.gone.p", false, 30);
	assert_non_null(object(fx, "DeviceClass", "gpu.nvidia.com"));
	vap = object(fx, "ValidatingAdmissionPolicy", "gpupool-device-classes");
	assert_non_null(vap);
	/* server-side apply recorded gpupool as the manager of what it applied */
	assert_string_equal(fx_json_str(vap, "metadata.managedFields[0].manager"), "gpupool");
	assert_string_equal(fx_json_str(vap, "metadata.managedFields[0].operation"), "Apply");
	check_conventions(fx, "cert:gpupool-k8s");
}

/* An approval reaches the cluster through the long-poll; a release deletes the class. */
static void
test_approval_and_release(void **state)
{
	struct fixture *fx = *state;
	struct json_object *dc;
	const char *uuid;
	long long ms;

	long long t0, ready = 0, applied = 0;
	const char *vap_path = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/"
			       "gpupool-device-classes";
	const char *vap_change =
	    "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
	    "\"ValidatingAdmissionPolicy\",\"metadata\":{\"name\":\"gpupool-device-classes\"},"
	    "\"spec\":{\"failurePolicy\":\"Ignore\"}}";

	/*
	 * Someone weakens the policy with kubectl: without force, the stand-in
	 * refuses (gpupool owns the field); with force it takes the field over.
	 * gpupool's next apply (force) takes it back.
	 */
	assert_int_equal(kubectl_apply(fx, vap_path, "kubectl", false, vap_change), 409);
	/* an update from a stale read: resourceVersion conflict, as the real server answers */
	assert_int_equal(kube_call(fx, "PUT", fx_str(fx, "%s?fieldManager=kubectl", vap_path),
			     "application/json",
			     "{\"apiVersion\":\"admissionregistration.k8s.io/v1\",\"kind\":"
			     "\"ValidatingAdmissionPolicy\",\"metadata\":{\"name\":"
			     "\"gpupool-device-classes\",\"resourceVersion\":\"1\"},\"spec\":{}}"),
	    409);
	/* a body of no patch type: 415 */
	assert_int_equal(kube_call(fx, "PATCH", fx_str(fx, "%s?fieldManager=kubectl", vap_path),
			     "text/plain", "{}"),
	    415);
	assert_int_equal(kubectl_apply(fx, vap_path, "kubectl", true, vap_change), 200);
	assert_string_equal(fx_json_str(object(fx, "ValidatingAdmissionPolicy",
					    "gpupool-device-classes"),
				"spec.failurePolicy"),
	    "Ignore");
	t0 = now_ms();
	approve(fx, "ml", "create", "train", "[\"H100-80GB/3g.40gb=2\"]");
	/*
	 * The class appears at once (no device yet); the agents realize the
	 * instances (their own long-poll) and report their UUIDs: the List
	 * changes then, and the stand-in's class must follow. The controller
	 * holds a 30 s poll, so a timer would take up to 30 s; a second is the
	 * expectation, 5 s leaves room for a loaded machine.
	 */
	while (now_ms() - t0 < 30000 && applied == 0) {
		struct json_object *o = object(fx, "DeviceClass", "gpupool.ml.train"), *v;

		if (ready == 0 && fx_sql_int64(fx, LIVE_OF, "ml/train") == 2)
			ready = now_ms();
		if (o != NULL &&
		    json_object_object_get_ex(fx_json(o, "metadata.annotations"),
			"gpupool.io/devices", &v) &&
		    strcmp(json_object_get_string(v), "2") == 0)
			applied = now_ms();
		usleep(20000);
	}
	assert_true(ready > 0 && applied > 0);
	print_message("instances ready %lld ms after the approval, class with both devices "
		      "applied %lld ms later\n",
	    ready - t0, applied - ready);
	assert_true(applied - ready < 5000);
	/* the sync of the approval applied the policy too: failurePolicy is gpupool's again */
	assert_string_equal(fx_json_str(object(fx, "ValidatingAdmissionPolicy",
					    "gpupool-device-classes"),
				"spec.failurePolicy"),
	    "Fail");
	dc = object(fx, "DeviceClass", "gpupool.ml.train");
	uuid = fx_sql_text(fx,
	    "SELECT min(a.device_uuid) FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = $1 AND a.state = 'ready'",
	    "train");
	assert_non_null(strstr(fx_json_str(dc, "spec.selectors[0].cel.expression"), uuid));
	{
		struct json_object *v;

		assert_true(json_object_object_get_ex(fx_json(dc, "metadata.labels"),
		    "gpupool.io/pool", &v));
		assert_string_equal(json_object_get_string(v), "train");
	}

	approve(fx, "ml", "release", "train", NULL);
	ms = wait_object(fx, "DeviceClass", "gpupool.ml.train", false, 30);
	print_message("class deleted %lld ms after the release was approved\n", ms);
	assert_true(ms < 5000);
	check_conventions(fx, "cert:gpupool-k8s");
}

/* A project's List: its members only; another project's member gets 404. */
static void
test_project_access(void **state)
{
	struct fixture *fx = *state;

	assert_status(fx_request(fx, ml, "GET", "/v1/projects/ml/kubernetes", NULL), 200);
	assert_problem(fx_request(fx, cv, "GET", "/v1/projects/ml/kubernetes", NULL), 404,
	    "not_found");
	assert_problem(fx_request(fx, ml, "GET", "/v1/projects/cv/kubernetes", NULL), 404,
	    "not_found");
	/* and the cluster's List is an operator's */
	assert_status(fx_request(fx, ml, "GET", "/v1/clusters/" CLUSTER "/kubernetes", NULL), 403);
	assert_problem(fx_request(fx, op, "GET", "/v1/clusters/" CLUSTER "/kubernetes?wait=61",
			   NULL),
	    422, "validation_failed");
}

/* The API server fails: the controller backs off (no hammering), then converges. */
static void
test_backoff(void **state)
{
	struct fixture *fx = *state;
	struct json_object *rq;
	size_t from = json_object_array_length(requests(fx));
	long long prev = 0, longest = 0;
	int failed = 0;

	hook(fx, "POST", "/_standin/fail", "{\"count\":25,\"status\":500}");
	approve(fx, "cv", "create", "vision", "[\"H100-80GB/2g.20gb=1\"]");
	wait_count(fx, 1, LIVE_OF, "cv/vision");
	wait_object(fx, "DeviceClass", "gpupool.cv.vision", true, 60);
	rq = requests(fx);
	for (size_t i = from; i < json_object_array_length(rq); i++) {
		struct json_object *q = json_object_array_get_idx(rq, i);
		long long t = fx_json_int(q, "t");

		if (fx_json_int(q, "status") != 500)
			continue;
		if (failed > 0 && t - prev > longest)
			longest = t - prev;
		prev = t;
		failed++;
	}
	assert_int_equal(failed, 25);
	/* 25 failures did not come in one burst: the retries waited (jittered, >= 250 ms) */
	assert_true(longest >= 250);
	print_message("25 failures, longest wait between two %lld ms\n", longest);
}

/*
 * What the scheduler allocated comes back as workloads: ResourceClaims of
 * gpupool classes (status.allocation + reservedFor) mapped to device UUIDs
 * through the ResourceSlices. A claim that got another project's device
 * (what the admission policy refuses on a real cluster; the stand-in does
 * not evaluate it) raises an isolation alert; a claim of another class is
 * not gpupool's to report. The agent's own report does not end them.
 */
static void
test_claims_read_back(void **state)
{
	struct fixture *fx = *state;
	const char *u, *v, *node, *slices, *claims;
	struct gp_client_response *r;

	approve(fx, "ml", "create", "infer", "[\"H100-80GB/3g.40gb=1\"]");
	wait_count(fx, 1, LIVE_OF, "ml/infer");
	u = fx_sql_text(fx,
	    "SELECT a.device_uuid FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = $1 AND a.state = 'ready'",
	    "infer");
	v = fx_sql_text(fx,
	    "SELECT a.device_uuid FROM allocations a JOIN pools p ON p.id = a.pool_id "
	    "WHERE p.name = $1 AND a.state = 'ready'",
	    "vision");
	node = fx_sql_text(fx,
	    "SELECT n.name FROM allocations a JOIN pools p ON p.id = a.pool_id JOIN gpus g "
	    "ON g.id = a.gpu_id JOIN nodes n ON n.id = g.node_id WHERE p.name = $1 "
	    "AND a.state = 'ready'",
	    "infer");
	/* one slice per node as NVIDIA's driver publishes them (both devices on one here) */
	slices = fx_str(fx,
	    "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":"
	    "{\"name\":\"%s-gpu.nvidia.com-x\"},\"spec\":{\"driver\":\"gpu.nvidia.com\","
	    "\"nodeName\":\"%s\",\"pool\":{\"name\":\"%s\",\"generation\":1,"
	    "\"resourceSliceCount\":1},\"devices\":["
	    "{\"name\":\"gpu-0-mig-1-0-4\",\"attributes\":{\"type\":{\"string\":\"mig\"},"
	    "\"uuid\":{\"string\":\"%s\"}}},"
	    "{\"name\":\"gpu-1-mig-9-0-2\",\"attributes\":{\"type\":{\"string\":\"mig\"},"
	    "\"uuid\":{\"string\":\"%s\"}}}]}}",
	    node, node, node, u, v);
#define CLAIM(name, cls, dev, pod)                                                            \
	"{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":"     \
	"{\"name\":\"" name "\",\"namespace\":\"ml-train\"},\"spec\":{\"devices\":"           \
	"{\"requests\":[{\"name\":\"gpu\",\"exactly\":{\"deviceClassName\":\"" cls "\"}}]}}," \
	"\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"gpu\","         \
	"\"driver\":\"gpu.nvidia.com\",\"pool\":\"%s\",\"device\":\"" dev "\"}]}},"           \
	"\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"" pod "\","                       \
	"\"uid\":\"6d4c1a52-3c9b-4b8e-9a39-000000000001\"}]}}"
	claims = fx_str(fx,
	    "[" CLAIM("trainer", "gpupool.ml.infer", "gpu-0-mig-1-0-4",
		"trainer-0") "," CLAIM("intruder", "gpupool.cv.vision", "gpu-1-mig-9-0-2",
		"intruder-0") "," CLAIM("generic", "mig.nvidia.com", "gpu-0-mig-1-0-4",
		"other-0") "]",
	    node, node, node);
	hook(fx, "POST", "/_standin/objects", fx_str(fx, "[%s]", slices));
	hook(fx, "POST", "/_standin/objects", claims);
	/* any change of the List makes the controller sync, then read the claims back */
	approve(fx, "cv", "create", "nudge", "[\"H100-80GB/1g.10gb=1\"]");
	wait_count(fx, 2,
	    "SELECT count(*) FROM workload_profiles WHERE source = $1 AND ended_at IS NULL",
	    "kubernetes");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM workload_profiles w JOIN allocations a ON "
			     "a.id = w.allocation_id WHERE w.source = 'kubernetes' AND "
			     "w.ended_at IS NULL AND w.namespace = 'ml-train' AND "
			     "((w.pod = 'trainer-0' AND w.device_uuid = $1) OR "
			     "(w.pod = 'intruder-0' AND w.device_uuid = $2))",
			     u, v),
	    2);
	/* cv's device in ml's namespace: the scheduler's view raises the alert */
	wait_count(fx, 1,
	    "SELECT count(*) FROM alerts WHERE type = 'isolation_violation' AND resolved_at IS NULL "
	    "AND details->>'pod' = $1",
	    "intruder-0");
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM alerts WHERE type = 'isolation_violation' AND "
			     "resolved_at IS NULL AND details->>'pod' = $1",
			     "trainer-0"),
	    0);
	r = fx_request(fx, op, "GET", "/v1/profiles?project=ml&pool=infer", NULL);
	assert_status(r, 200);

	/* the node's agent reports nothing on its devices: the scheduler's rows stay */
	fx_sql_exec(fx, "SELECT agent_apply_profiles((SELECT id FROM nodes WHERE name = $1), '[]')",
	    node);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM workload_profiles WHERE source = $1 AND "
			     "ended_at IS NULL",
			     "kubernetes"),
	    2);

	/* the route: operators only; another cluster's device refused, nothing stored */
	assert_status(fx_request(fx, op, "POST", "/v1/clusters", "{\"name\":\"elsewhere\"}"), 201);
	r = fx_request(fx, op, "PUT", "/v1/clusters/elsewhere/kubernetes/workloads",
	    "{\"profiles\":[{\"device_uuid\":\"%s\",\"namespace\":\"ml-train\","
	    "\"pod\":\"x\"}]}",
	    u);
	assert_problem(r, 422, "validation_failed");
	assert_non_null(strstr(r->body, "profiles[0].device_uuid"));
	r = fx_request(fx, op, "PUT", "/v1/clusters/" CLUSTER "/kubernetes/workloads",
	    "{\"profiles\":[{\"device_uuid\":\"%s\",\"namespace\":\"ml-train\",\"pod\":\"a\"},"
	    "{\"device_uuid\":\"MIG-00000000-0000-0000-0000-000000000000\",\"namespace\":"
	    "\"ml-train\",\"pod\":\"b\"}]}",
	    u);
	assert_problem(r, 422, "validation_failed");
	assert_non_null(strstr(r->body, "profiles[1].device_uuid"));
	r = fx_request(fx, ml, "PUT", "/v1/clusters/" CLUSTER "/kubernetes/workloads",
	    "{\"profiles\":[]}");
	assert_status(r, 403);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM workload_profiles WHERE source = 'kubernetes' "
			     "AND pod IN ('x', 'a', 'b')"),
	    0);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM workload_profiles WHERE source = $1 AND "
			     "ended_at IS NULL",
			     "kubernetes"),
	    2);
}

/*
 * A GPU fails: the cluster serves DeviceTaintRules (the stand-in lists
 * them in its discovery), so the controller asked for them and the failed
 * GPU's NoExecute rule reaches the cluster through the long-poll (the GPU's
 * health change wakes it); back to ok, the rule is deleted.
 */
static void
fail_and_heal(struct fixture *fx, struct fx_server *via)
{
	struct fx_server *home = fx->server;
	const char *gpu = fx_sql_text(fx,
	    "SELECT min(g.uuid) FROM gpus g JOIN clusters c ON c.id = g.cluster_id WHERE c.name = $1 "
	    "AND NOT EXISTS (SELECT 1 FROM allocations a WHERE a.gpu_id = g.id "
	    "AND a.state <> 'released')",
	    CLUSTER);
	char name[128];
	struct json_object *rule;
	long long ms;

	assert_non_null(gpu);
	snprintf(name, sizeof(name), "gpupool-failed-%s", gpu);
	for (char *p = name; *p != '\0'; p++)
		if (*p >= 'A' && *p <= 'Z')
			*p = (char)(*p - 'A' + 'a');
	fx->server = via; /* the change is made on this replica */
	assert_status(fx_request(fx, op, "PATCH", fx_str(fx, "/v1/gpus/%s", gpu),
			  "{\"health\":\"failed\",\"health_reason\":\"Xid 79\"}"),
	    200);
	fx->server = home;
	ms = wait_object(fx, "DeviceTaintRule", name, true, 30);
	print_message("DeviceTaintRule applied %lld ms after the GPU failed\n", ms);
	assert_true(ms < 5000);
	rule = object(fx, "DeviceTaintRule", name);
	assert_string_equal(fx_json_str(rule, "apiVersion"), "resource.k8s.io/v1alpha3");
	assert_string_equal(fx_json_str(rule, "spec.taint.effect"), "NoExecute");
	assert_string_equal(fx_json_str(rule, "spec.deviceSelector.driver"), "gpu.nvidia.com");
	assert_non_null(
	    strstr(fx_json_str(rule, "spec.deviceSelector.selectors[0].cel.expression"), gpu));
	fx->server = via;
	assert_status(fx_request(fx, op, "PATCH", fx_str(fx, "/v1/gpus/%s", gpu),
			  "{\"health\":\"ok\",\"health_reason\":\"replaced\"}"),
	    200);
	fx->server = home;
	ms = wait_object(fx, "DeviceTaintRule", name, false, 30);
	assert_true(ms < 5000);
	check_conventions(fx, "cert:gpupool-k8s");
}

static void
test_failed_gpu_taint(void **state)
{
	struct fixture *fx = *state;

	fail_and_heal(fx, fx->server);
}

/*
 * The controller's poll waits on one replica, the change is made on
 * another: the NOTIFY of migration 0021 wakes it all the same.
 */
static void
test_cross_replica_wake(void **state)
{
	struct fixture *fx = *state;
	struct fx_server *other = fixture_server_start(fx, NULL);

	assert_non_null(other);
	fail_and_heal(fx, other);
	assert_int_equal(fixture_server_stop(fx, other), 0);
}

/* In a pod: the ServiceAccount's token file is read again, so a rotated token works. */
static void
test_in_cluster_token_rotation(void **state)
{
	struct fixture *fx = *state;
	const char *sa = fx_str(fx, "%s/sa", dir);
	const char *port = fx_str(fx, "%d", api_port);
	const char *const env[] = { "KUBERNETES_SERVICE_HOST", "127.0.0.1",
		"KUBERNETES_SERVICE_PORT", port, NULL };
	struct json_object *rq;
	size_t from;

	assert_int_equal(stop(ctl), 0); /* a clean stop on SIGTERM, in a long-poll */
	assert_int_equal(mkdir(sa, 0700), 0);
	sh(fx, "cp ca.crt sa/ca.crt");
	write_file(fx_str(fx, "%s/token", sa), "first-token\n");
	from = json_object_array_length(requests(fx));
	ctl = controller_start(fx, env, "--in-cluster", "--sa-dir", sa, NULL);
	approve(fx, "ml", "create", "serve", "[\"H100-80GB/1g.10gb=1\"]");
	wait_count(fx, 1, LIVE_OF, "ml/serve");
	wait_object(fx, "DeviceClass", "gpupool.ml.serve", true, 30);

	/*
	 * The kubelet rotates the token: the API server takes both for a
	 * while, then only the new one (the old one expired).
	 */
	write_file(fx_str(fx, "%s/api-token", dir), "first-token\nsecond-token\n");
	write_file(fx_str(fx, "%s/token", sa), "second-token\n");
	write_file(fx_str(fx, "%s/api-token", dir), "second-token\n");
	approve(fx, "ml", "release", "serve", NULL);
	wait_object(fx, "DeviceClass", "gpupool.ml.serve", false, 30);
	rq = requests(fx);
	for (size_t i = from; i < json_object_array_length(rq); i++) {
		struct json_object *q = json_object_array_get_idx(rq, i);

		/* every request authenticated with a token, none refused */
		assert_string_equal(fx_json_str(q, "auth"), "token");
		assert_int_not_equal(fx_json_int(q, "status"), 401);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_first_sync),
		cmocka_unit_test(test_approval_and_release),
		cmocka_unit_test(test_project_access),
		cmocka_unit_test(test_backoff),
		cmocka_unit_test(test_claims_read_back),
		cmocka_unit_test(test_failed_gpu_taint),
		cmocka_unit_test(test_cross_replica_wake),
		cmocka_unit_test(test_in_cluster_token_rotation),
	};

	return fixture_exit_status(cmocka_run_group_tests(tests, group_setup, group_teardown));
}
