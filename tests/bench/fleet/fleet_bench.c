/*
 * fleet_bench.c - N simulated gpupool agents in one process (libcurl
 * multi) against one gpupoold: enrollment, every agent long-polling its
 * desired state, approval-to-agent latency, and metric ingestion.
 * scripts/bench-fleet starts the database and the server and runs this.
 *
 *   bench_fleet URL AGENT_URL ADMIN_TOKEN AGENTS HELD APPROVALS METRICS_SECONDS SERVER_PID \
 *       POSTMASTER_PID
 *
 * Prints "key value" lines: enroll_s, idle_rss_kib, idle_cpu_pct,
 * me_p50_ms, me_p99_ms, approvals, latency_p50_ms, latency_p99_ms,
 * latency_max_ms, missed, samples_per_s. The agents are simulated (no
 * backend): each enrolls one H100-80GB in MIG mode (operators' requests
 * to URL, the agents' to AGENT_URL, the agent listener); the first HELD
 * of them then long-poll with wait=60 (HELD < AGENTS where the open-file
 * limit of one process cannot hold them all). Receiving a higher
 * generation is what "the owning agent received it" means. The agents
 * connect from 127.0.1.1 to 127.0.1.64 (source addresses on loopback),
 * as a fleet comes from many hosts.
 */
#include <curl/curl.h>
#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

struct agent {
	int i;
	char token[128];
	long long gen;
	CURL *h;  /* enrollment and metrics, in multi */
	CURL *ph; /* the long-polls, in pmulti */
	struct curl_slist *hdr;
	char *buf;
	size_t len;
	int phase; /* 0 enroll-token, 1 enroll, 2 polling, 3 metrics */
	char url[256];
	char *body;
	char src[32];   /* "host!127.0.1.N": the source address, "" for the operators */
	double started; /* when the request went out (now_s) */
};

static const char *base, *agent_base, *admin;
static int agent_port;
#define NGROUPS 1024
static struct curl_slist *resolve[NGROUPS];
/*
 * Many multi handles: the enrollments and metrics in multi, the held
 * polls spread over NSHARDS more (agent i's in shard i % NSHARDS).
 * libcurl 7.88's curl_multi_remove_handle walks every connection of its
 * multi handle after a transfer that left its connection in the cache (to
 * close connect-only ones): with every poll in one handle, each
 * enrollment and each answered poll walked 20,000 connections, half of
 * the simulator's CPU (perf). A shard holds a few hundred; the polls
 * keep their connections as an agent does.
 */
#define NSHARDS 64
static CURLM *multi, *pmulti[NSHARDS];
static int running;
static double t_approve; /* when the current approval was sent, 0 when none */
static double lat[100000];
static int nlat;
static double mlat[1000000]; /* metric batches' request latencies */
static int nmlat;

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t
on_data(char *p, size_t s, size_t n, void *ud)
{
	struct agent *a = ud;
	char *nb = realloc(a->buf, a->len + s * n + 1);
	if (nb == NULL)
		return 0;
	a->buf = nb;
	memcpy(a->buf + a->len, p, s * n);
	a->len += s * n;
	a->buf[a->len] = '\0';
	return s * n;
}

static void
start(struct agent *a, const char *method, const char *path, const char *token, const char *body)
{
	bool poll = strncmp(path, "/v1/agent/desired-state", 23) == 0 && pmulti[0] != NULL &&
	    a->src[0] != '\0';
	CURL **hp = poll ? &a->ph : &a->h;

	if (*hp == NULL)
		*hp = curl_easy_init();
	else
		curl_easy_reset(*hp);
	CURL *h = *hp;
	curl_slist_free_all(a->hdr);
	a->hdr = NULL;
	free(a->buf);
	a->buf = NULL;
	a->len = 0;
	free(a->body);
	a->body = body ? strdup(body) : NULL;
	a->started = now_s();
	if (a->src[0] != '\0' && strncmp(path, "/v1/agent/", 10) == 0) {
		/*
		 * libcurl looks for a reusable connection among all those to
		 * the same host name, a walk over every held poll: a name per
		 * group of agents (resolved to the listener) keeps it short.
		 */
		int g = poll ? a->i % NGROUPS : a->i % 64;

		if (resolve[g] == NULL) {
			char r[96];

			snprintf(r, sizeof(r), "g%d.fleet:%d:127.0.0.1", g, agent_port);
			resolve[g] = curl_slist_append(NULL, r);
		}
		snprintf(a->url, sizeof(a->url), "http://g%d.fleet:%d%s", g, agent_port, path);
	} else {
		snprintf(a->url, sizeof(a->url), "%s%s",
		    strncmp(path, "/v1/agent/", 10) == 0 ? agent_base : base, path);
	}
	char auth[200];
	if (token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		a->hdr = curl_slist_append(a->hdr, auth);
	}
	a->hdr = curl_slist_append(a->hdr, "Content-Type: application/json");
	curl_easy_setopt(h, CURLOPT_URL, a->url);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, a->hdr);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (a->body != NULL)
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, a->body);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(h, CURLOPT_PRIVATE, a);
	curl_easy_setopt(h, CURLOPT_TIMEOUT, 90L);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	if (a->src[0] != '\0')
		curl_easy_setopt(h, CURLOPT_INTERFACE, a->src);
	if (a->src[0] != '\0' && strncmp(path, "/v1/agent/", 10) == 0)
		curl_easy_setopt(h, CURLOPT_RESOLVE, resolve[poll ? a->i % NGROUPS : a->i % 64]);
	curl_multi_add_handle(poll ? pmulti[a->i % NSHARDS] : multi, h);
	running++;
}

static void
poll_again(struct agent *a)
{
	char path[128];
	snprintf(path, sizeof(path), "/v1/agent/desired-state?after=%lld&wait=60", a->gen);
	start(a, "GET", path, a->token, NULL);
}

static int enrolled, failures, held_max;
static int enrolling; /* enrollments in flight (long-polls are not counted) */
static long long accepted;

static void
done(struct agent *a, long status)
{
	struct json_object *o = a->buf ? json_tokener_parse(a->buf) : NULL, *v;
	if (a->phase == 0) {
		if (status != 201 || !json_object_object_get_ex(o, "token", &v)) {
			fprintf(stderr, "enrollment token: HTTP %ld %s\n", status,
			    a->buf ? a->buf : "");
			failures++;
			enrolling--;
		} else {
			char body[1024];
			snprintf(body, sizeof(body),
			    "{\"enrollment_token\":\"%s\",\"node_name\":\"fleet-%d\",\"hostname\":"
			    "\"fleet-%d\",\"agent_version\":\"bench\",\"gpus\":[{\"uuid\":"
			    "\"GPU-f1ee7000-0000-4000-8000-%012d\",\"index\":0,\"product_name\":"
			    "\"NVIDIA H100 80GB HBM3\",\"pci_device_id\":\"0x233010DE\",\"memory_mib\":"
			    "81559,\"mig_enabled\":true,\"instances\":[]}]}",
			    json_object_get_string(v), a->i, a->i, a->i);
			a->phase = 1;
			start(a, "POST", "/v1/agent/enroll", NULL, body);
		}
	} else if (a->phase == 1) {
		enrolling--;
		if (status != 201 || !json_object_object_get_ex(o, "node_token", &v)) {
			fprintf(stderr, "enroll: HTTP %ld %s\n", status, a->buf ? a->buf : "");
			failures++;
		} else {
			snprintf(a->token, sizeof(a->token), "%s", json_object_get_string(v));
			enrolled++;
			if (a->i < held_max) {
				a->phase = 2;
				a->gen = 0;
				poll_again(a);
			} else {
				/* enrolled only: its handle goes (the connection stays cached) */
				a->phase = 4;
				curl_easy_cleanup(a->h);
				a->h = NULL;
			}
		}
	} else if (a->phase == 2) {
		if (status == 200 && json_object_object_get_ex(o, "generation", &v)) {
			long long g = json_object_get_int64(v);
			if (g > a->gen && a->gen > 0 && t_approve > 0 && nlat < 100000) {
				lat[nlat++] = now_s() - t_approve;
				t_approve = 0;
			}
			a->gen = g;
		} else if (status != 304) {
			failures++;
			usleep(1000);
		}
		poll_again(a);
	} else {
		if (status != 202 && status != 200) {
			failures++;
			if (failures < 5)
				fprintf(stderr, "metrics: HTTP %ld %.200s\n", status,
				    a->buf ? a->buf : "");
		} else
			accepted += 500;
		if (nmlat < 1000000)
			mlat[nmlat++] = now_s() - a->started;
		a->phase = 0; /* idle: the next batch may go */
	}
	json_object_put(o);
}

/*
 * The multi handle is driven by its sockets (epoll and
 * curl_multi_socket_action): with tens of thousands of held polls,
 * curl_multi_perform and curl_multi_poll would walk every connection on
 * each turn and the benchmark, not the server, would set the pace.
 */
static int ep = -1;
static double deadline[1 + NSHARDS]; /* curl's timers (now_s), -1: none; [1 + k] shard k's */
static CURLM *main_multi;            /* multi, while simple() swaps it */

/* multi handle w: 0 multi, 1 + k shard k */
static CURLM *
mh(int w)
{
	return w == 0 ? main_multi : pmulti[w - 1];
}

static int
on_socket(CURL *h, curl_socket_t fd, int what, void *ud, void *sockp)
{
	struct epoll_event ev = { 0 };
	int which = (int)(intptr_t)ud;

	(void)h;
	ev.data.u64 = (uint64_t)(uint32_t)fd | (uint64_t)which << 32;
	if (what == CURL_POLL_REMOVE) {
		epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
		return 0;
	}
	ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
	if (sockp == NULL) {
		curl_multi_assign(mh(which), fd, (void *)1);
		if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
			epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev);
	} else if (epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev) < 0) {
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	}
	return 0;
}

static int
on_timer(CURLM *m, long ms, void *ud)
{
	(void)m;
	deadline[(intptr_t)ud] = ms < 0 ? -1 : now_s() + (double)ms / 1000;
	return 0;
}

static void
finished_in(CURLM *mh)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(mh, &left)) != NULL) {
		struct agent *a;
		long status = 0;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&a);
		curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
		curl_multi_remove_handle(mh, m->easy_handle);
		running--;
		done(a, m->data.result == CURLE_OK ? status : 0);
	}
}

static void
finished(void)
{
	for (int w = 0; w <= NSHARDS; w++)
		finished_in(mh(w));
}

static void
pump(double seconds)
{
	double end = now_s() + seconds;
	struct epoll_event ev[512];

	do {
		int still, n, wait = (int)((end - now_s()) * 1000);

		if (wait < 0)
			wait = 0;
		for (int k = 0; k <= NSHARDS; k++)
			if (deadline[k] >= 0 && (deadline[k] - now_s()) * 1000 < wait)
				wait = deadline[k] <= now_s()
				    ? 0
				    : (int)((deadline[k] - now_s()) * 1000);
		n = epoll_wait(ep, ev, 512, wait);
		for (int i = 0; i < n; i++)
			curl_multi_socket_action(mh((int)(ev[i].data.u64 >> 32)),
			    (curl_socket_t)(ev[i].data.u64 & 0xffffffffu),
			    (ev[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
				(ev[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
				(ev[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0),
			    &still);
		for (int k = 0; k <= NSHARDS; k++)
			if (deadline[k] >= 0 && now_s() >= deadline[k]) {
				deadline[k] = -1;
				curl_multi_socket_action(mh(k), CURL_SOCKET_TIMEOUT, 0, &still);
			}
		finished();
	} while (now_s() < end);
}

/* One blocking request with its own handle; returns the status, body in *out. */
static long
simple(const char *method, const char *path, const char *body, char **out)
{
	struct agent a;
	memset(&a, 0, sizeof(a));
	CURLM *save = multi;
	CURLM *m = curl_multi_init();
	multi = m;
	start(&a, method, path, admin, body);
	int still = 1;
	while (still) {
		curl_multi_perform(m, &still);
		int n;
		if (still)
			curl_multi_poll(m, NULL, 0, 10, &n);
	}
	long st = 0;
	curl_easy_getinfo(a.h, CURLINFO_RESPONSE_CODE, &st);
	curl_multi_remove_handle(m, a.h);
	curl_easy_cleanup(a.h);
	curl_multi_cleanup(m);
	multi = save;
	running--;
	curl_slist_free_all(a.hdr);
	free(a.body);
	if (out != NULL)
		*out = a.buf;
	else
		free(a.buf);
	return st;
}

static void
proc_sample(int pid, long *rss_kib, double *cpu_s)
{
	char p[64], line[512];
	snprintf(p, sizeof(p), "/proc/%d/status", pid);
	FILE *f = fopen(p, "r");
	*rss_kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			*rss_kib = atol(line + 6);
	if (f)
		fclose(f);
	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	f = fopen(p, "r");
	*cpu_s = -1;
	if (f && fgets(line, sizeof(line), f)) {
		char *q = strrchr(line, ')');
		unsigned long ut = 0, st = 0;
		/* fields after ")": state(3) ... utime(14) stime(15) */
		if (q &&
		    sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			&st) == 2)
			*cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	}
	if (f)
		fclose(f);
}

/* CPU seconds of pid's process (utime + stime), 0 when gone. */
static double
proc_cpu(int pid)
{
	long rss;
	double cpu;

	proc_sample(pid, &rss, &cpu);
	return cpu > 0 ? cpu : 0;
}

/* CPU seconds of the PostgreSQL server: the postmaster and its children. */
static double
pg_cpu(int postmaster)
{
	double sum = proc_cpu(postmaster);
	DIR *d = opendir("/proc");
	struct dirent *e;

	while (d != NULL && (e = readdir(d)) != NULL) {
		char p[64], line[512];
		FILE *f;
		int pid = atoi(e->d_name), ppid = 0;

		if (pid <= 0)
			continue;
		snprintf(p, sizeof(p), "/proc/%d/stat", pid);
		f = fopen(p, "r");
		if (f != NULL && fgets(line, sizeof(line), f) != NULL) {
			char *q = strrchr(line, ')');

			if (q != NULL && sscanf(q + 2, "%*c %d", &ppid) == 1 && ppid == postmaster)
				sum += proc_cpu(pid);
		}
		if (f != NULL)
			fclose(f);
	}
	if (d != NULL)
		closedir(d);
	return sum;
}

static double
self_cpu(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	    (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* Agent who's batch of 500 samples of its GPU, the last 500 seconds before ts, into b. */
static void
metrics_batch(char *b, int who, long long ts)
{
	size_t off = (size_t)sprintf(b, "{\"samples\":[");

	for (int s = 0; s < 500; s++)
		off += (size_t)sprintf(b + off,
		    "%s{\"ts\":%lld,\"gpu_uuid\":\"GPU-f1ee7000-0000-4000-8000-%012d\","
		    "\"device_uuid\":\"GPU-f1ee7000-0000-4000-8000-%012d\",\"power_w\":%d,"
		    "\"sm_active\":0.5,\"memory_used_mib\":100,\"memory_total_mib\":81559,"
		    "\"temperature_c\":40}",
		    s ? "," : "", ts - s, who, who, 100 + s % 50);
	sprintf(b + off, "]}");
}

int
main(int argc, char **argv)
{
	if (argc != 10) {
		fprintf(stderr,
		    "usage: bench_fleet URL AGENT_URL ADMIN_TOKEN AGENTS HELD APPROVALS "
		    "METRICS_SECONDS SERVER_PID POSTMASTER_PID\n");
		return 2;
	}
	base = argv[1];
	agent_base = argv[2];
	agent_port = atoi(strrchr(agent_base, ':') + 1);
	admin = argv[3];
	int n = atoi(argv[4]), approvals = atoi(argv[6]), msecs = atoi(argv[7]);
	int pid = atoi(argv[8]), pgpid = atoi(argv[9]);
	held_max = atoi(argv[5]) < n ? atoi(argv[5]) : n;
	curl_global_init(CURL_GLOBAL_ALL);
	ep = epoll_create1(EPOLL_CLOEXEC);
	for (int w = 0; w <= NSHARDS; w++) {
		CURLM *m = curl_multi_init();

		if (w == 0)
			multi = main_multi = m;
		else
			pmulti[w - 1] = m;
		deadline[w] = -1;
		curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
		curl_multi_setopt(m, CURLMOPT_SOCKETDATA, (void *)(intptr_t)w);
		curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
		curl_multi_setopt(m, CURLMOPT_TIMERDATA, (void *)(intptr_t)w);
		curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
		curl_multi_setopt(m, CURLMOPT_MAXCONNECTS,
		    w == 0 ? 256L : (long)held_max / NSHARDS + 64);
	}
	simple("POST", "/v1/clusters", "{\"name\":\"fleet\",\"region\":\"bench\"}", NULL);
	simple("POST", "/v1/projects", "{\"name\":\"fleet\",\"display_name\":\"fleet\"}", NULL);
	/* the admin submits the pool requests too: it must be a member of the project */
	simple("PUT", "/v1/projects/fleet/members/bench", "{\"role\":\"owner\"}", NULL);
	struct agent *ag = calloc((size_t)n, sizeof(*ag));
	double t0 = now_s();
	double cpu_gp0 = proc_cpu(pid), cpu_pg0 = pg_cpu(pgpid), cpu_me0 = self_cpu();
	/* enroll, 64 at a time */
	int next = 0;
	while ((enrolled + failures < n) && now_s() - t0 < 600) {
		while (next < n && enrolling < 64) {
			enrolling++;
			ag[next].i = next;
			snprintf(ag[next].src, sizeof(ag[next].src), "host!127.0.1.%d",
			    next % 64 + 1);
			ag[next].phase = 0;
			start(&ag[next], "POST", "/v1/clusters/fleet/enrollment-tokens", admin,
			    "{\"expires_in_seconds\":3600}");
			next++;
		}
		pump(0.01);
	}
	printf("agents %d\nenrolled %d\nenroll_s %.1f\nheld %d\n", n, enrolled, now_s() - t0,
	    held_max);
	/* CPU per enrollment, each side: what a 2-core machine of our own would allow */
	printf("enroll_cpu_gpupoold_ms %.3f\nenroll_cpu_pg_ms %.3f\nenroll_cpu_bench_ms %.3f\n",
	    (proc_cpu(pid) - cpu_gp0) * 1000 / (enrolled > 0 ? enrolled : 1),
	    (pg_cpu(pgpid) - cpu_pg0) * 1000 / (enrolled > 0 ? enrolled : 1),
	    (self_cpu() - cpu_me0) * 1000 / (enrolled > 0 ? enrolled : 1));
	fflush(stdout);
	/* every agent long-polls; let the first answers (generation 0 -> g) settle */
	pump(5);
	long rss0, rss1;
	double c0, c1;
	proc_sample(pid, &rss0, &c0);
	pump(10);
	proc_sample(pid, &rss1, &c1);
	printf("idle_rss_kib %ld\nidle_cpu_pct %.1f\n", rss1, (c1 - c0) / 10 * 100);
	fflush(stdout);
	/* an operator while the fleet is held: GET /v1/me, one at a time */
	{
		static double me[200];
		int nme = 0;

		for (int k = 0; k < 200; k++) {
			double t = now_s();

			if (simple("GET", "/v1/me", NULL, NULL) == 200)
				me[nme++] = now_s() - t;
			else
				failures++;
			pump(0.005);
		}
		qsort(me, (size_t)nme, sizeof(double), cmp);
		if (nme > 0)
			printf("me_ok %d\nme_p50_ms %.1f\nme_p99_ms %.1f\n", nme,
			    me[nme / 2] * 1000, me[(int)(nme * 0.99)] * 1000);
		fflush(stdout);
	}
	/* approvals: one at a time, latency to the owning agent's long-poll */
	int missed = 0;
	for (int k = 0; k < approvals; k++) {
		char body[256], *out = NULL;
		snprintf(body, sizeof(body),
		    "{\"action\":\"create\",\"pool\":\"b%d\",\"items\":[\"H100-80GB/1g.10gb=1\"],"
		    "\"justification\":\"bench\"}",
		    k);
		if (simple("POST", "/v1/projects/fleet/pool-requests", body, &out) != 201) {
			fprintf(stderr, "pool request: %s\n", out ? out : "");
			free(out);
			missed++;
			continue;
		}
		struct json_object *o = json_tokener_parse(out), *v;
		free(out);
		long long id =
		    json_object_object_get_ex(o, "id", &v) ? json_object_get_int64(v) : 0;
		json_object_put(o);
		char path[128];
		snprintf(path, sizeof(path), "/v1/pool-requests/%lld/approve", id);
		int before = nlat;
		t_approve = now_s();
		if (simple("POST", path, "{\"note\":\"bench\"}", NULL) != 200) {
			t_approve = 0;
			missed++;
			continue;
		}
		double until = now_s() + 5;
		while (nlat == before && now_s() < until)
			pump(0.001);
		if (nlat == before) {
			missed++;
			t_approve = 0;
		}
		pump(0.05);
	}
	qsort(lat, (size_t)nlat, sizeof(double), cmp);
	printf("approvals %d\nmissed %d\n", approvals, missed);
	if (nlat > 0)
		printf("latency_p50_ms %.1f\nlatency_p99_ms %.1f\nlatency_max_ms %.1f\n",
		    lat[nlat / 2] * 1000, lat[(int)(nlat * 0.99)] * 1000, lat[nlat - 1] * 1000);
	fflush(stdout);
	/*
	 * FLEET_METRICS_GO=path: say metrics_ready and wait for path to exist
	 * (scripts/bench-ingest runs its COPY baseline alone in between)
	 */
	const char *go = getenv("FLEET_METRICS_GO");
	if (go != NULL && go[0] != '\0') {
		printf("metrics_ready 1\n");
		fflush(stdout);
		while (access(go, F_OK) != 0)
			pump(0.05);
	}
	/* metrics: 500-sample batches from 32 agents at a time */
	struct agent *mx = calloc(32, sizeof(*mx));
	/*
	 * FLEET_METRICS_PREBUILT=1 (scripts/bench-ingest): the batches of the
	 * first 256 agents are built before the phase, as its COPY baseline's
	 * rows are written to a file before they are timed; unset, each batch
	 * is built when sent (its timestamps the current second's)
	 */
	const char *pre = getenv("FLEET_METRICS_PREBUILT");
	int nb = enrolled > 0 ? enrolled : 1;
	bool prebuilt = pre != NULL && strcmp(pre, "1") == 0;
	char **bodies = NULL;
	if (prebuilt) {
		nb = nb < 256 ? nb : 256;
		bodies = calloc((size_t)nb, sizeof(*bodies));
		for (int w = 0; w < nb; w++) {
			bodies[w] = malloc(500 * 300 + 64);
			metrics_batch(bodies[w], w, (long long)time(NULL));
		}
	}
	char *batch = malloc(500 * 300 + 64);
	long long sent = 0;
	double m0 = now_s();
	double mcpu_gp0 = proc_cpu(pid), mcpu_pg0 = pg_cpu(pgpid), mcpu_me0 = self_cpu();
	int rounds = 0;
	while (now_s() - m0 < msecs) {
		for (int k = 0; k < 32; k++) {
			if (mx[k].phase == 3)
				continue;
			int who = (rounds * 32 + k) % nb;
			const char *body = batch;

			if (prebuilt)
				body = bodies[who];
			else
				metrics_batch(batch, who, (long long)time(NULL));
			mx[k].phase = 3;
			mx[k].i = k;
			snprintf(mx[k].src, sizeof(mx[k].src), "host!127.0.1.%d", k % 64 + 1);
			start(&mx[k], "POST", "/v1/agent/metrics", ag[who].token, body);
			sent += 500;
		}
		rounds++;
		pump(0.001);
	}
	pump(1);
	double el = now_s() - m0;
	printf("samples_sent %lld\nsamples_accepted %lld\nsamples_per_s %.0f\nfailures %d\n", sent,
	    accepted, (double)accepted / el, failures);
	/* CPU per stored sample (µs) of gpupoold, PostgreSQL and this client; batch latency */
	if (accepted > 0)
		printf("metrics_cpu_gpupoold_us %.2f\nmetrics_cpu_pg_us %.2f\nmetrics_cpu_bench_us "
		       "%.2f\n",
		    (proc_cpu(pid) - mcpu_gp0) * 1e6 / (double)accepted,
		    (pg_cpu(pgpid) - mcpu_pg0) * 1e6 / (double)accepted,
		    (self_cpu() - mcpu_me0) * 1e6 / (double)accepted);
	if (nmlat > 0) {
		qsort(mlat, (size_t)nmlat, sizeof(double), cmp);
		printf("metrics_batch_p50_ms %.1f\nmetrics_batch_p99_ms %.1f\n",
		    mlat[nmlat / 2] * 1000, mlat[(int)(nmlat * 0.99)] * 1000);
	}
	return 0;
}
