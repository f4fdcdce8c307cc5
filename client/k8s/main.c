/*
 * main.c - gpupool-k8s: keeps a Kubernetes cluster holding what gpupool
 * lists for it (docs/kubernetes.md). It long-polls
 * GET /v1/clusters/{cluster}/kubernetes?wait=N (If-None-Match: the List it
 * holds; gpupool answers when the List changes, or 304 at the deadline),
 * applies each object with server-side apply and deletes the managed
 * objects no longer listed (sync.c). Errors back off, jittered and capped;
 * a failed sync is retried with the List it has until one succeeds.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "claims.h"
#include "core/log.h"
#include "gp_client.h"
#include "kube.h"
#include "kubeconfig.h"
#include "sync.h"

#define EXIT_CONFIG 2

static volatile bool stopping;

static void
on_signal(int sig)
{
	(void)sig;
	stopping = true;
}

static void
usage(FILE *f)
{
	fprintf(f,
	    "usage: gpupool-k8s --server URL --cluster NAME [--token-file PATH]\n"
	    "         [--kubeconfig PATH [--context NAME] | --in-cluster [--sa-dir DIR]]\n"
	    "         [--wait S] [--resync S] [--backoff-max S] [--claims-interval S]\n"
	    "         [--no-claims] [--device-taint-rules auto|on|off] [--once] [--dry-run]\n"
	    "         [--log-level debug|info|warn|error]\n"
	    "The gpupool API token (an operator's) comes from --token-file or GPUPOOL_TOKEN.\n"
	    "Without --kubeconfig or --in-cluster: $KUBECONFIG, else in-cluster when\n"
	    "KUBERNETES_SERVICE_HOST is set.\n");
}

static int
int_arg(const char *name, const char *v, int lo, int hi)
{
	char *end;
	long n = strtol(v, &end, 10);

	if (*v == '\0' || *end != '\0' || n < lo || n > hi) {
		fprintf(stderr, "gpupool-k8s: --%s wants an integer in [%d, %d]\n", name, lo, hi);
		exit(EXIT_CONFIG);
	}
	return (int)n;
}

static long long
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void
sleep_ms(long long ms)
{
	long long end = mono_ms() + ms;

	while (!stopping) {
		long long left = end - mono_ms();
		struct timespec ts;

		if (left <= 0)
			return;
		if (left > 200)
			left = 200;
		ts.tv_sec = (time_t)(left / 1000);
		ts.tv_nsec = (long)(left % 1000) * 1000000L;
		nanosleep(&ts, NULL);
	}
}

/* Jittered exponential backoff: the n-th failure in a row waits [d/2, d], d = 0.5 s * 2^n <= cap. */
static long long
backoff_ms(int failures, int cap_s)
{
	long long d = 500;
	static unsigned seed;

	if (seed == 0)
		seed = (unsigned)mono_ms() ^ (unsigned)getpid();
	for (int i = 1; i < failures && d < (long long)cap_s * 1000; i++)
		d *= 2;
	if (d > (long long)cap_s * 1000)
		d = (long long)cap_s * 1000;
	return d / 2 + (long long)(rand_r(&seed) % (unsigned)(d / 2 + 1));
}

/*
 * Read back what the scheduler allocated from gpupool's classes and
 * report it to gpupool as the cluster's workloads (pod <-> device).
 */
static void
report_claims(struct kube *kube, struct gp_client *gp, const char *list_path)
{
	struct claims_result cr;
	struct json_object *profiles = claims_profiles(kube, &cr), *body;
	struct gp_client_response r;
	char path[700], n[32], u[32];

	if (profiles == NULL) {
		log_warn(NULL, "cannot read the ResourceClaims back", "error", cr.error);
		return;
	}
	body = json_object_new_object();
	json_object_object_add(body, "profiles", profiles);
	snprintf(path, sizeof(path), "%s/workloads", list_path);
	if (gp_client_send_json(gp, "PUT", path, body, NULL, &r) < 0 || !gp_client_ok(&r)) {
		struct gp_error err;

		gp_client_error_from_response(&r, &err);
		log_warn(NULL, "gpupool refused the cluster's workloads", "error", err.message);
	} else {
		snprintf(n, sizeof(n), "%d", cr.profiles);
		snprintf(u, sizeof(u), "%d", cr.unmapped);
		log_info(NULL, "workloads reported", "profiles", n, "unmapped", u);
	}
	gp_client_response_free(&r);
	json_object_put(body);
}

/* True when the API server lists devicetaintrules in resource.k8s.io/v1alpha3. */
static bool
serves_taint_rules(struct kube *kube)
{
	struct kube_response r;
	struct json_object *res;
	bool found = false;

	if (kube_request(kube, "GET", "/apis/resource.k8s.io/v1alpha3", NULL, NULL, &r) == 0 &&
	    r.status == 200 && r.json != NULL &&
	    json_object_object_get_ex(r.json, "resources", &res))
		for (size_t i = 0; i < json_object_array_length(res); i++) {
			struct json_object *n;

			if (json_object_object_get_ex(json_object_array_get_idx(res, i), "name",
				&n) &&
			    strcmp(json_object_get_string(n), "devicetaintrules") == 0)
				found = true;
		}
	kube_response_free(&r);
	return found;
}

static char *
read_token(const char *path)
{
	FILE *f = fopen(path, "r");
	char buf[4096];
	size_t n;

	if (f == NULL)
		return NULL;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' '))
		buf[--n] = '\0';
	return strdup(buf);
}

int
main(int argc, char **argv)
{
	const char *server = NULL, *cluster = NULL, *token_file = NULL, *kubeconfig = NULL,
		   *context = NULL, *sa_dir = NULL;
	bool in_cluster = false, once = false, dry_run = false, claims = true;
	const char *taint_mode = "auto";
	bool taints = false;
	int wait_s = 30, resync_s = 300, backoff_cap = 60, claims_s = 30;
	enum {
		O_SERVER = 1000,
		O_CLUSTER,
		O_TOKEN,
		O_KUBECONFIG,
		O_CONTEXT,
		O_IN_CLUSTER,
		O_SA_DIR,
		O_WAIT,
		O_RESYNC,
		O_BACKOFF,
		O_ONCE,
		O_DRY,
		O_CLAIMS_INTERVAL,
		O_NO_CLAIMS,
		O_TAINTS,
		O_LOG,
		O_HELP,
	};
	static const struct option opts[] = {
		{ "server", required_argument, NULL, O_SERVER },
		{ "cluster", required_argument, NULL, O_CLUSTER },
		{ "token-file", required_argument, NULL, O_TOKEN },
		{ "kubeconfig", required_argument, NULL, O_KUBECONFIG },
		{ "context", required_argument, NULL, O_CONTEXT },
		{ "in-cluster", no_argument, NULL, O_IN_CLUSTER },
		{ "sa-dir", required_argument, NULL, O_SA_DIR },
		{ "wait", required_argument, NULL, O_WAIT },
		{ "resync", required_argument, NULL, O_RESYNC },
		{ "backoff-max", required_argument, NULL, O_BACKOFF },
		{ "once", no_argument, NULL, O_ONCE },
		{ "claims-interval", required_argument, NULL, O_CLAIMS_INTERVAL },
		{ "no-claims", no_argument, NULL, O_NO_CLAIMS },
		{ "device-taint-rules", required_argument, NULL, O_TAINTS },
		{ "dry-run", no_argument, NULL, O_DRY },
		{ "log-level", required_argument, NULL, O_LOG },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 },
	};
	struct kube_auth auth;
	struct kube *kube = NULL;
	struct gp_client *gp;
	struct json_object *list = NULL;
	char why[512], path[600], path_query[64] = "", etag[128] = "", inm[160];
	char *token = NULL;
	bool synced = false;
	int failures = 0, c, rc = 0;
	long long last_sync = 0, last_claims = 0;
	struct sigaction sa;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case O_SERVER:
			server = optarg;
			break;
		case O_CLUSTER:
			cluster = optarg;
			break;
		case O_TOKEN:
			token_file = optarg;
			break;
		case O_KUBECONFIG:
			kubeconfig = optarg;
			break;
		case O_CONTEXT:
			context = optarg;
			break;
		case O_IN_CLUSTER:
			in_cluster = true;
			break;
		case O_SA_DIR:
			sa_dir = optarg;
			break;
		case O_WAIT:
			wait_s = int_arg("wait", optarg, 0, 60);
			break;
		case O_RESYNC:
			resync_s = int_arg("resync", optarg, 1, 86400);
			break;
		case O_BACKOFF:
			backoff_cap = int_arg("backoff-max", optarg, 1, 3600);
			break;
		case O_ONCE:
			once = true;
			break;
		case O_CLAIMS_INTERVAL:
			claims_s = int_arg("claims-interval", optarg, 1, 86400);
			break;
		case O_NO_CLAIMS:
			claims = false;
			break;
		case O_TAINTS:
			if (strcmp(optarg, "auto") != 0 && strcmp(optarg, "on") != 0 &&
			    strcmp(optarg, "off") != 0) {
				fprintf(stderr,
				    "gpupool-k8s: --device-taint-rules auto, on or off\n");
				return EXIT_CONFIG;
			}
			taint_mode = optarg;
			break;
		case O_DRY:
			dry_run = true;
			break;
		case O_LOG: {
			enum log_level lv;

			if (log_parse_level(optarg, &lv) != 0) {
				fprintf(stderr, "gpupool-k8s: bad --log-level\n");
				return EXIT_CONFIG;
			}
			log_set_level(lv);
			break;
		}
		case O_HELP:
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return EXIT_CONFIG;
		}
	}
	if (server == NULL || cluster == NULL || optind != argc) {
		usage(stderr);
		return EXIT_CONFIG;
	}
	if (token_file != NULL) {
		token = read_token(token_file);
		if (token == NULL) {
			fprintf(stderr, "gpupool-k8s: cannot read %s\n", token_file);
			return EXIT_CONFIG;
		}
	} else if (getenv("GPUPOOL_TOKEN") != NULL) {
		token = strdup(getenv("GPUPOOL_TOKEN"));
	}
	if (kubeconfig == NULL && !in_cluster && getenv("KUBECONFIG") != NULL &&
	    getenv("KUBECONFIG")[0] != '\0')
		kubeconfig = getenv("KUBECONFIG");
	if (kubeconfig == NULL && !in_cluster && getenv("KUBERNETES_SERVICE_HOST") != NULL)
		in_cluster = true;
	if (kubeconfig != NULL && in_cluster) {
		fprintf(stderr, "gpupool-k8s: --kubeconfig and --in-cluster exclude each other\n");
		return EXIT_CONFIG;
	}
	if (!dry_run || kubeconfig != NULL || in_cluster) {
		if (kubeconfig == NULL && !in_cluster) {
			fprintf(stderr,
			    "gpupool-k8s: no Kubernetes API: give --kubeconfig or "
			    "--in-cluster\n");
			return EXIT_CONFIG;
		}
		if ((kubeconfig != NULL
			    ? kube_auth_from_kubeconfig(&auth, kubeconfig, context, why,
				  sizeof(why))
			    : kube_auth_in_cluster(&auth, sa_dir, why, sizeof(why))) < 0) {
			fprintf(stderr, "gpupool-k8s: %s\n", why);
			return EXIT_CONFIG;
		}
		kube = kube_create(&auth, why, sizeof(why));
		if (kube == NULL) {
			fprintf(stderr, "gpupool-k8s: %s\n", why);
			return EXIT_CONFIG;
		}
		kube_set_abort_flag(kube, &stopping);
	}
	gp = gp_client_create(server, token);
	if (token != NULL) {
		memset(token, 0, strlen(token));
		free(token);
	}
	if (gp == NULL) {
		fprintf(stderr, "gpupool-k8s: bad --server %s\n", server);
		return EXIT_CONFIG;
	}
	{
		char esc[200];

		if (gp_client_escape(cluster, esc, sizeof(esc)) < 0) {
			fprintf(stderr, "gpupool-k8s: bad --cluster\n");
			return EXIT_CONFIG;
		}
		snprintf(path, sizeof(path), "/v1/clusters/%s/kubernetes", esc);
	}
	/*
	 * DeviceTaintRules (resource.k8s.io/v1alpha3, Kubernetes 1.34 with the
	 * DRADeviceTaints gate): asked for when the API serves them (auto, by
	 * discovery), always (on) or never (off).
	 */
	taints = strcmp(taint_mode, "on") == 0 ||
	    (strcmp(taint_mode, "auto") == 0 && kube != NULL && serves_taint_rules(kube));
	log_info(NULL, "DeviceTaintRules", "mode", taint_mode, "asked", taints ? "yes" : "no");
	if (taints)
		strncat(path_query, "&device_taints=v1alpha3",
		    sizeof(path_query) - strlen(path_query) - 1);
	gp_client_set_timeouts(gp, (long)(wait_s + 15) * 1000, 5000);
	gp_client_set_abort_flag(gp, &stopping);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	log_info(NULL, "gpupool-k8s started", "cluster", cluster, "server", server);

	while (!stopping) {
		struct gp_client_response r;
		const char *hdr[2] = { NULL, NULL };
		char full[700];
		bool need_sync;
		/* hold the poll only while the cluster holds the List (else fetch and retry now) */
		int w = synced && !once ? wait_s : 0;

		/* the claims are read back at least every --claims-interval */
		if (claims && w > claims_s)
			w = claims_s;

		snprintf(full, sizeof(full), "%s?wait=%d%s", path, w, path_query);
		if (etag[0] != '\0') {
			snprintf(inm, sizeof(inm), "If-None-Match: %s", etag);
			hdr[0] = inm;
		}
		if (gp_client_request(gp, "GET", full, NULL, 0, hdr, &r) < 0 ||
		    (r.status != 200 && r.status != 304)) {
			struct gp_error err;

			gp_client_error_from_response(&r, &err);
			gp_client_response_free(&r);
			if (stopping)
				break;
			failures++;
			log_warn(NULL, "cannot read the cluster's List from gpupool", "error",
			    err.message);
			if (once) {
				rc = 1;
				break;
			}
			sleep_ms(backoff_ms(failures, backoff_cap));
			continue;
		}
		need_sync = !synced || mono_ms() - last_sync >= (long long)resync_s * 1000;
		if (r.status == 200) {
			json_object_put(list);
			list = json_object_get(r.json);
			snprintf(etag, sizeof(etag), "%s", r.etag);
			need_sync = true;
		}
		gp_client_response_free(&r);
		if (!need_sync || list == NULL) {
			if (claims && kube != NULL && !dry_run && synced &&
			    mono_ms() - last_claims >= (long long)claims_s * 1000) {
				report_claims(kube, gp, path);
				last_claims = mono_ms();
			}
			continue;
		}
		{
			struct sync_result res;
			char a[32], d[32];

			if (sync_list(kube, list, dry_run, &res) < 0) {
				char f[32];

				synced = false;
				failures++;
				snprintf(f, sizeof(f), "%d", res.failed);
				log_warn(NULL, "sync failed", "failed", f, "error",
				    res.first_error);
				if (once) {
					rc = 1;
					break;
				}
				sleep_ms(backoff_ms(failures, backoff_cap));
				continue;
			}
			synced = true;
			failures = 0;
			last_sync = mono_ms();
			snprintf(a, sizeof(a), "%d", res.applied);
			snprintf(d, sizeof(d), "%d", res.deleted);
			log_info(NULL, "synced", "etag", etag, "applied", a, "deleted", d);
			if (claims && kube != NULL && !dry_run) {
				report_claims(kube, gp, path);
				last_claims = mono_ms();
			}
			if (once)
				break;
		}
	}
	json_object_put(list);
	gp_client_destroy(gp);
	kube_destroy(kube);
	if (kube != NULL)
		kube_auth_free(&auth);
	log_info(NULL, "gpupool-k8s stopped");
	return rc;
}
