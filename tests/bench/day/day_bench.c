/*
 * day_bench.c - a mixed day against one gpupoold (scripts/bench-day): all
 * kinds of work at once, in one process driven by one thread (libcurl
 * multi on epoll, as bench_fleet), so that the simulator costs little of
 * the machine it shares with gpupoold and PostgreSQL.
 *
 *   bench_day URL AGENT_URL ADMIN_TOKEN AGENTS CLIENTS SECONDS SERVER_PID POSTMASTER_PID
 *
 * - AGENTS simulated agents (one H100-80GB in MIG mode each) enroll, then
 *   behave as gpupool-agent does at its default intervals: a long-poll of
 *   the desired state held (wait=30), a heartbeat every 10 s, a metric
 *   batch every 15 s (one sample of its GPU), a full status every 300 s,
 *   and a status right after each new generation (its instances as the
 *   document lists them, so allocations become ready and releases
 *   complete). Each kind is spread evenly over its period (agent i's
 *   heartbeat at i x 10 s / AGENTS within the period).
 * - CLIENTS operators, each in a loop: submit a create of 2 x 1g.10gb and
 *   approve it, submit and approve a shrink by one of the pool it created
 *   LAG (BENCH_DAY_POOL_LAG, 4) cycles before, submit and approve the
 *   release of the pool it created 2 x LAG cycles before (an operator
 *   shrinks and releases pools that have lived a while, not one whose
 *   agent is still reporting it ready; LAG 0: the same pool at once).
 *   Every approval's latency is measured, and the time from its answer to
 *   the owning agent receiving the new generation (approval -> agent).
 * - one client pages the dashboard's capacity API (GET /v1/gpus?limit=200,
 *   cursor after cursor, from the start again at the end);
 * - one client exports period 2026-10 as FOCUS again and again (POST
 *   /v1/billing/exports, GET until done, download);
 * - the accrual worker runs on its own (scripts/bench-day shortens its
 *   interval).
 *
 * With BENCH_DAY_GO=path the agents are enrolled, then the program prints
 * "enrolled_ready 1" and waits (polls held, nothing else sent) until path
 * exists: scripts/bench-day runs its baselines meanwhile.
 *
 * Prints "key value" lines (see the end of main). Answers >= 500 and
 * transport failures are counted, never retried silently.
 */
#include <curl/curl.h>
#include <json-c/json.h>
#include <dirent.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define HB_PERIOD 10.0
#define METRICS_PERIOD 15.0
#define STATUS_PERIOD 300.0
#define POLL_WAIT 30
#define SLOTS 384   /* agents' short requests in flight at most */
#define NGROUPS 256 /* host names the held polls are spread over */
#define MAX_CLIENTS 64

enum kind {
	K_ENROLL_TOKEN,
	K_ENROLL,
	K_POLL,
	K_HEARTBEAT,
	K_STATUS,
	K_METRICS,
	K_SUBMIT,
	K_APPROVE,
	K_CAPACITY,
	K_EXPORT_CREATE,
	K_EXPORT_GET,
	K_EXPORT_DOWNLOAD,
	K_SETUP,
	K_NKINDS
};

static const char *kind_name[K_NKINDS] = { "enroll_token", "enroll", "poll", "heartbeat", "status",
	"metrics", "submit", "approve", "capacity", "export_create", "export_get",
	"export_download", "setup" };

struct lat {
	double *v;
	size_t n, cap;
};

struct req {
	CURL *h;
	struct curl_slist *hdr;
	char *buf;
	size_t len, cap;
	bool keep; /* download: count bytes, keep nothing */
	size_t bytes;
	char *body;
	enum kind kind;
	int who; /* agent index, client index */
	double t0;
	char url[512];
	bool busy;
};

struct agent {
	char token[96];
	long long gen;
	struct req poll;
	char *status; /* the last status body (from the last document) */
	bool status_due;
	unsigned starts; /* the instances of its last document: bit n, one starting at slice n */
	/*
	 * Approved changes this agent has not seen yet: an instance at start
	 * to appear (present) or go, since t (the approval's answer). A
	 * document that shows it ends the wait; a change the agent's document
	 * showed before the approval's answer arrived counts 0 ms.
	 */
	struct pend {
		double t;
		int start;
		bool present;
	} pend[8];
	int npend;
};

struct client {
	struct req r;
	int step; /* 0 submit create, 1 approve, 2 submit shrink, 3 approve, 4 submit release, 5 approve */
	long long id;
	int cycle;
	double wait_until;
};

static const char *base, *agent_base, *admin;
static int agent_port, nagents, nclients;
static int pool_lag = 4; /* BENCH_DAY_POOL_LAG */
static double think_s;   /* BENCH_DAY_THINK_MS: a client's pause after each answer */
static double day_t0;    /* the day's start (now_s), 0 before */
static struct agent *ag;
static struct client cl[MAX_CLIENTS];
static struct req slots[SLOTS], pager, exporter;
static struct curl_slist *resolve[NGROUPS];
/*
 * The held polls in NSHARDS multi handles of their own (agent i's in
 * shard i % NSHARDS), everything else in multi: libcurl 7.88's
 * curl_multi_remove_handle walks every connection of its multi handle
 * after each transfer that kept its connection (bench_fleet).
 */
#define NSHARDS 64
static CURLM *multi, *pmulti[NSHARDS];
static int ep = -1;
static double deadline[1 + NSHARDS]; /* curl's timers (now_s), -1: none */

/* multi handle w: 0 multi, 1 + k shard k */
static CURLM *
mh(int w)
{
	return w == 0 ? multi : pmulti[w - 1];
}
static struct lat lats[K_NKINDS], agent_lat;
static long counts[K_NKINDS], fails_5xx[K_NKINDS], fails_other[K_NKINDS], fails_conn[K_NKINDS],
    conflicts;
static long enrolled, enrolling;
static long samples_stored, capacity_rows, exports_done, export_rows, export_bytes;
static double export_s;
static char cursor[512];
static long long export_id;
static double export_t0, export_poll_at;
static bool paused;   /* waiting for BENCH_DAY_GO: no scheduled work */
static int *status_q; /* agents with status_due, in the order they became due */
static int status_q_head, status_q_len;

static void
status_push(int i)
{
	status_q[(status_q_head + status_q_len) % nagents] = i;
	status_q_len++;
}

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
lat_add(struct lat *l, double v)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 1024;
		l->v = realloc(l->v, l->cap * sizeof(double));
	}
	l->v[l->n++] = v;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double
pct(struct lat *l, double p)
{
	if (l->n == 0)
		return -1;
	qsort(l->v, l->n, sizeof(double), cmp);
	size_t i = (size_t)(p * (double)l->n);
	return l->v[i < l->n ? i : l->n - 1] * 1000;
}

static size_t
on_data(char *p, size_t s, size_t n, void *ud)
{
	struct req *r = ud;
	size_t k = s * n;

	r->bytes += k;
	if (!r->keep)
		return k;
	if (r->len + k + 1 > r->cap) {
		r->cap = (r->len + k + 1) * 2;
		r->buf = realloc(r->buf, r->cap);
	}
	memcpy(r->buf + r->len, p, k);
	r->len += k;
	r->buf[r->len] = '\0';
	return k;
}

/*
 * Sends r: method, path on the API (agent < 0) or on the agent listener
 * from agent's source address; body is copied.
 */
static void
start(struct req *r, enum kind kind, int who, int agent, const char *method, const char *path,
    const char *token, const char *body)
{
	char auth[160];

	if (r->h == NULL)
		r->h = curl_easy_init();
	else
		curl_easy_reset(r->h);
	curl_slist_free_all(r->hdr);
	r->hdr = NULL;
	r->len = 0;
	r->bytes = 0;
	r->keep = kind != K_EXPORT_DOWNLOAD;
	if (r->buf != NULL)
		r->buf[0] = '\0';
	free(r->body);
	r->body = body ? strdup(body) : NULL;
	r->kind = kind;
	r->who = who;
	r->busy = true;
	r->t0 = now_s();
	if (agent >= 0) {
		/*
		 * libcurl looks for a reusable connection among those to the
		 * same host name: a name per group keeps that walk short
		 */
		int g = kind == K_POLL ? agent % NGROUPS : agent % 64;

		if (resolve[g] == NULL) {
			char s[96];

			snprintf(s, sizeof(s), "g%d.day:%d:127.0.0.1", g, agent_port);
			resolve[g] = curl_slist_append(NULL, s);
		}
		snprintf(r->url, sizeof(r->url), "http://g%d.day:%d%s", g, agent_port, path);
		curl_easy_setopt(r->h, CURLOPT_RESOLVE, resolve[g]);
		char src[32];
		snprintf(src, sizeof(src), "host!127.0.1.%d", agent % 64 + 1);
		curl_easy_setopt(r->h, CURLOPT_INTERFACE, src);
	} else {
		snprintf(r->url, sizeof(r->url), "%s%s", base, path);
	}
	if (token != NULL) {
		snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
		r->hdr = curl_slist_append(r->hdr, auth);
	}
	r->hdr = curl_slist_append(r->hdr, "Content-Type: application/json");
	curl_easy_setopt(r->h, CURLOPT_URL, r->url);
	curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, r->hdr);
	curl_easy_setopt(r->h, CURLOPT_CUSTOMREQUEST, method);
	if (r->body != NULL)
		curl_easy_setopt(r->h, CURLOPT_POSTFIELDS, r->body);
	curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(r->h, CURLOPT_PRIVATE, r);
	curl_easy_setopt(r->h, CURLOPT_TIMEOUT, 90L);
	curl_easy_setopt(r->h, CURLOPT_NOSIGNAL, 1L);
	curl_multi_add_handle(kind == K_POLL ? pmulti[agent % NSHARDS] : multi, r->h);
}

/* A free slot for an agent's short request, NULL when all are busy. */
static struct req *
slot(void)
{
	static int next;

	for (int k = 0; k < SLOTS; k++) {
		struct req *r = &slots[(next + k) % SLOTS];

		if (!r->busy) {
			next = (next + k + 1) % SLOTS;
			return r;
		}
	}
	return NULL;
}

static void
poll_again(int i)
{
	char path[96];

	snprintf(path, sizeof(path), "/v1/agent/desired-state?after=%lld&wait=%d", ag[i].gen,
	    POLL_WAIT);
	start(&ag[i].poll, K_POLL, i, i, "GET", path, ag[i].token, NULL);
}

static void
gpu_uuid(char *out, size_t n, int i)
{
	snprintf(out, n, "GPU-da700000-0000-4000-8000-%012d", i);
}

/* The status body of agent i from its desired-state document (instances as listed). */
static void
build_status(int i, struct json_object *doc)
{
	struct json_object *gpus, *st = json_object_new_object(), *out = json_object_new_array();

	json_object_object_add(st, "observed_generation", json_object_new_int64(ag[i].gen));
	json_object_object_add(st, "agent_version", json_object_new_string("bench-day"));
	if (json_object_object_get_ex(doc, "gpus", &gpus)) {
		for (size_t g = 0; g < json_object_array_length(gpus); g++) {
			struct json_object *dg = json_object_array_get_idx(gpus, g), *ins, *v;
			struct json_object *og = json_object_new_object(),
					   *oi = json_object_new_array();

			json_object_object_get_ex(dg, "uuid", &v);
			json_object_object_add(og, "uuid", json_object_get(v));
			json_object_object_get_ex(dg, "index", &v);
			json_object_object_add(og, "index", json_object_get(v));
			json_object_object_add(og, "mig_enabled", json_object_new_boolean(true));
			if (json_object_object_get_ex(dg, "instances", &ins)) {
				for (size_t k = 0; k < json_object_array_length(ins); k++) {
					struct json_object *di = json_object_array_get_idx(ins, k);
					struct json_object *o = json_object_new_object(), *p, *s,
							   *z;
					char u[64];

					json_object_object_get_ex(di, "profile", &p);
					json_object_object_get_ex(di, "start", &s);
					json_object_object_get_ex(di, "size", &z);
					json_object_object_add(o, "profile", json_object_get(p));
					json_object_object_add(o, "start", json_object_get(s));
					json_object_object_add(o, "size", json_object_get(z));
					snprintf(u, sizeof(u), "MIG-day-%d-%d", i,
					    json_object_get_int(s));
					json_object_object_add(o, "uuid",
					    json_object_new_string(u));
					json_object_array_add(oi, o);
				}
			}
			json_object_object_add(og, "instances", oi);
			json_object_array_add(out, og);
		}
	}
	json_object_object_add(st, "gpus", out);
	json_object_object_add(st, "errors", json_object_new_array());
	free(ag[i].status);
	ag[i].status = strdup(json_object_to_json_string_ext(st, JSON_C_TO_STRING_PLAIN));
	json_object_put(st);
}

/* The instance starts a desired-state document lists (bit n: one at slice n). */
static unsigned
doc_starts(struct json_object *doc)
{
	struct json_object *gpus, *ins, *s;
	unsigned m = 0;

	if (!json_object_object_get_ex(doc, "gpus", &gpus))
		return 0;
	for (size_t g = 0; g < json_object_array_length(gpus); g++)
		if (json_object_object_get_ex(json_object_array_get_idx(gpus, g), "instances",
			&ins))
			for (size_t k = 0; k < json_object_array_length(ins); k++)
				if (json_object_object_get_ex(json_object_array_get_idx(ins, k),
					"start", &s) &&
				    json_object_get_int(s) >= 0 && json_object_get_int(s) < 8)
					m |= 1u << json_object_get_int(s);
	return m;
}

/* Agent i has a new document: the approved changes it shows end their wait. */
static void
pend_check(int i)
{
	int k = 0;

	while (k < ag[i].npend) {
		struct pend *p = &ag[i].pend[k];

		if (((ag[i].starts >> p->start) & 1u) == p->present) {
			lat_add(&agent_lat, now_s() - p->t);
			ag[i].pend[k] = ag[i].pend[--ag[i].npend];
		} else {
			k++;
		}
	}
}

/*
 * A client's pause: exponentially distributed around think_s (at most 4
 * times it), as operators' pauses are. A fixed pause kept the clients in
 * step: all 32 approved within the same few milliseconds, and the last
 * of each burst waited for the 31 before it.
 */
static double
think_pause(void)
{
	double u = ((double)(random() % 1000000) + 1) / 1000001.0, x = -log(u);

	return think_s * (x < 4 ? x : 4);
}

static void client_next(int c);
static void export_next(void);
static void pager_next(void);

static void
done(struct req *r, long status)
{
	double el = now_s() - r->t0;
	struct json_object *o = NULL, *v;
	int i = r->who;

	r->busy = false;
	counts[r->kind]++;
	if (status == 0)
		fails_conn[r->kind]++;
	else if (status >= 500)
		fails_5xx[r->kind]++;
	if (status >= 500 || status == 0) {
		if (fails_5xx[r->kind] + fails_conn[r->kind] <= 3)
			fprintf(stderr, "bench_day: %s: HTTP %ld %.300s\n", kind_name[r->kind],
			    status, r->buf ? r->buf : "");
	}
	/* latencies: every answer but the polls', the export's progress and refused approvals */
	if (r->kind != K_POLL && r->kind != K_EXPORT_GET &&
	    (r->kind != K_APPROVE || status == 200)) {
		lat_add(&lats[r->kind], el);
		/* the slow approvals, when they happened (day.err): periodic or not */
		if (r->kind == K_APPROVE && el > 0.05 && day_t0 > 0)
			fprintf(stderr, "slow approval at %.3f s: %.1f ms\n", r->t0 - day_t0,
			    el * 1000);
	}
	if (r->keep && r->buf != NULL && r->len > 0 && r->kind != K_METRICS &&
	    r->kind != K_HEARTBEAT)
		o = json_tokener_parse(r->buf);
	switch (r->kind) {
	case K_ENROLL_TOKEN:
		if (status == 201 && json_object_object_get_ex(o, "token", &v)) {
			char body[1024], uuid[64];

			gpu_uuid(uuid, sizeof(uuid), i);
			snprintf(body, sizeof(body),
			    "{\"enrollment_token\":\"%s\",\"node_name\":\"day-%d\",\"hostname\":"
			    "\"day-%d\",\"agent_version\":\"bench-day\",\"gpus\":[{\"uuid\":\"%s\","
			    "\"index\":0,\"product_name\":\"NVIDIA H100 80GB HBM3\",\"pci_device_id\":"
			    "\"0x233010DE\",\"memory_mib\":81559,\"mig_enabled\":true,\"instances\":[]}]}",
			    json_object_get_string(v), i, i, uuid);
			start(r, K_ENROLL, i, i, "POST", "/v1/agent/enroll", NULL, body);
		} else {
			fprintf(stderr, "bench_day: enrollment token: HTTP %ld\n", status);
			fails_other[r->kind]++;
			enrolling--;
		}
		break;
	case K_ENROLL:
		enrolling--;
		if (status == 201 && json_object_object_get_ex(o, "node_token", &v)) {
			snprintf(ag[i].token, sizeof(ag[i].token), "%s", json_object_get_string(v));
			enrolled++;
			poll_again(i);
		} else {
			fprintf(stderr, "bench_day: enroll: HTTP %ld %.300s\n", status,
			    r->buf ? r->buf : "");
			fails_other[r->kind]++;
		}
		break;
	case K_POLL:
		if (status == 200 && json_object_object_get_ex(o, "generation", &v)) {
			long long g = json_object_get_int64(v);

			if (g != ag[i].gen) {
				ag[i].gen = g;
				ag[i].starts = doc_starts(o);
				pend_check(i);
				build_status(i, o);
				if (!ag[i].status_due)
					status_push(i);
				ag[i].status_due = true;
			}
		} else if (status != 304 && status != 0 && status < 500) {
			fails_other[K_POLL]++;
		}
		if (status == 0 || status >= 500)
			usleep(1000);
		poll_again(i);
		break;
	case K_HEARTBEAT:
	case K_STATUS:
		if (status != 200 && status != 204 && status != 0 && status < 500) {
			fails_other[r->kind]++;
			if (fails_other[r->kind] <= 3)
				fprintf(stderr, "bench_day: %s: HTTP %ld %.300s\n",
				    kind_name[r->kind], status, r->buf ? r->buf : "");
		}
		break;
	case K_METRICS:
		if (status == 200 || status == 202)
			samples_stored++;
		else if (status != 0 && status < 500)
			fails_other[r->kind]++;
		break;
	case K_SUBMIT:
	case K_APPROVE:
		if (r->kind == K_APPROVE && status == 200 &&
		    json_object_object_get_ex(o, "allocations", &v)) {
			double t = now_s();

			for (size_t k = 0; k < json_object_array_length(v); k++) {
				struct json_object *a = json_object_array_get_idx(v, k), *n, *st,
						   *sv;
				int node;

				if (!json_object_object_get_ex(a, "node", &n) ||
				    sscanf(json_object_get_string(n), "day-%d", &node) != 1 ||
				    node < 0 || node >= nagents ||
				    !json_object_object_get_ex(a, "start", &st) ||
				    !json_object_object_get_ex(a, "state", &sv))
					continue;
				const char *state = json_object_get_string(sv);
				int start = json_object_get_int(st);
				bool present = strcmp(state, "releasing") != 0 &&
				    strcmp(state, "released") != 0;

				if (start < 0 || start > 7)
					continue;
				if (((ag[node].starts >> start) & 1u) == present)
					lat_add(&agent_lat,
					    0); /* the agent had it before our answer */
				else if (ag[node].npend < 8)
					ag[node].pend[ag[node].npend++] =
					    (struct pend){ t, start, present };
			}
		}
		cl[i].wait_until = now_s() + think_pause();
		if (r->kind == K_SUBMIT && status == 201 &&
		    json_object_object_get_ex(o, "id", &v)) {
			cl[i].id = json_object_get_int64(v);
			cl[i].step++;
		} else if (r->kind == K_APPROVE && status == 200) {
			cl[i].step = (cl[i].step + 1) % 6;
			if (cl[i].step == 0)
				cl[i].cycle++;
		} else if (status == 409) {
			/* insufficient capacity or a collision: the same step again shortly */
			conflicts++;
			cl[i].wait_until = now_s() + 0.1;
		} else {
			if (status != 0 && status < 500)
				fails_other[r->kind]++;
			if (fails_other[r->kind] <= 3 && status < 500 && status != 0)
				fprintf(stderr, "bench_day: %s: HTTP %ld %.300s\n",
				    kind_name[r->kind], status, r->buf ? r->buf : "");
			/* the next step */
			cl[i].step = (cl[i].step / 2 * 2 + 2) % 6;
			if (cl[i].step == 0)
				cl[i].cycle++;
			cl[i].wait_until = now_s() + 0.1;
		}
		break;
	case K_CAPACITY:
		if (status == 200 && json_object_object_get_ex(o, "items", &v))
			capacity_rows += (long)json_object_array_length(v);
		else if (status != 0 && status < 500)
			fails_other[r->kind]++;
		cursor[0] = '\0';
		if (status == 200 && json_object_object_get_ex(o, "next_cursor", &v) &&
		    json_object_get_type(v) == json_type_string)
			snprintf(cursor, sizeof(cursor), "%s", json_object_get_string(v));
		break;
	case K_EXPORT_CREATE:
		if ((status == 201 || status == 202) && json_object_object_get_ex(o, "id", &v))
			export_id = json_object_get_int64(v);
		else {
			if (status != 0 && status < 500)
				fails_other[r->kind]++;
			fprintf(stderr, "bench_day: export: HTTP %ld %.300s\n", status,
			    r->buf ? r->buf : "");
			export_id = -1;
			export_poll_at = now_s() + 1;
		}
		break;
	case K_EXPORT_GET:
		if (status == 200 && json_object_object_get_ex(o, "state", &v)) {
			const char *s = json_object_get_string(v);

			if (strcmp(s, "done") == 0) {
				export_id = -export_id - 1000; /* marker: download next */
				if (json_object_object_get_ex(o, "rows", &v))
					export_rows += json_object_get_int64(v);
			} else if (strcmp(s, "failed") == 0) {
				fails_other[r->kind]++;
				export_id = -1;
			}
		} else if (status != 0 && status < 500) {
			fails_other[r->kind]++;
			export_id = -1;
		}
		break;
	case K_EXPORT_DOWNLOAD:
		if (status == 200) {
			exports_done++;
			export_bytes += (long)r->bytes;
			export_s += now_s() - export_t0;
		} else if (status != 0 && status < 500)
			fails_other[r->kind]++;
		export_id = -1;
		break;
	default:
		break;
	}
	json_object_put(o);
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
finished_in(CURLM *mm)
{
	CURLMsg *m;
	int left;

	while ((m = curl_multi_info_read(mm, &left)) != NULL) {
		struct req *r;
		long status = 0;
		CURL *h = m->easy_handle;
		CURLcode res = m->data.result;

		if (m->msg != CURLMSG_DONE)
			continue;
		curl_easy_getinfo(h, CURLINFO_PRIVATE, (char **)&r);
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
		curl_multi_remove_handle(mm, h);
		done(r, res == CURLE_OK ? status : 0);
	}
}

static void
finished(void)
{
	for (int w = 0; w <= NSHARDS; w++)
		finished_in(mh(w));
}

/* One turn of the event loop: at most ms milliseconds waiting. */
static void
turn(int ms)
{
	struct epoll_event ev[512];
	int still, n;

	for (int k = 0; k <= NSHARDS; k++)
		if (deadline[k] >= 0 && (deadline[k] - now_s()) * 1000 < ms)
			ms = deadline[k] <= now_s() ? 0 : (int)((deadline[k] - now_s()) * 1000);
	n = epoll_wait(ep, ev, 512, ms);
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
}

/* One blocking request on the API (setup): its status. */
static long
setup(const char *method, const char *path, const char *body)
{
	struct req r;

	memset(&r, 0, sizeof(r));
	start(&r, K_SETUP, 0, -1, method, path, admin, body);
	while (r.busy)
		turn(10);
	curl_easy_cleanup(r.h);
	curl_slist_free_all(r.hdr);
	free(r.body);
	free(r.buf);
	return 0;
}

static void
client_next(int c)
{
	struct client *k = &cl[c];
	char path[128], body[256];

	if (k->r.busy || now_s() < k->wait_until)
		return;
	if (k->step % 2 == 1) {
		snprintf(path, sizeof(path), "/v1/pool-requests/%lld/approve", k->id);
		start(&k->r, K_APPROVE, c, -1, "POST", path, admin, "{\"note\":\"day\"}");
		return;
	}
	/* the shrink and the release are of older pools (none yet: the step is skipped) */
	int pool = k->step == 0 ? k->cycle : k->cycle - (k->step / 2) * pool_lag;

	if (pool < 0) {
		k->step = (k->step + 2) % 6;
		if (k->step == 0)
			k->cycle++;
		return;
	}
	snprintf(path, sizeof(path), "/v1/projects/day%d/pool-requests", c % 8);
	if (k->step == 0)
		snprintf(body, sizeof(body),
		    "{\"action\":\"create\",\"pool\":\"c%d-%d\",\"items\":[\"H100-80GB/1g.10gb=2\"],"
		    "\"justification\":\"day\"}",
		    c, pool);
	else if (k->step == 2)
		snprintf(body, sizeof(body),
		    "{\"action\":\"shrink\",\"pool\":\"c%d-%d\",\"items\":[\"H100-80GB/1g.10gb=1\"],"
		    "\"justification\":\"day\"}",
		    c, pool);
	else
		snprintf(body, sizeof(body), "{\"action\":\"release\",\"pool\":\"c%d-%d\"}", c,
		    pool);
	start(&k->r, K_SUBMIT, c, -1, "POST", path, admin, body);
}

static void
pager_next(void)
{
	char path[700];

	if (pager.busy)
		return;
	if (cursor[0] != '\0') {
		char *e = curl_easy_escape(NULL, cursor, 0);

		snprintf(path, sizeof(path), "/v1/gpus?limit=200&cursor=%s", e);
		curl_free(e);
	} else {
		snprintf(path, sizeof(path), "/v1/gpus?limit=200");
	}
	start(&pager, K_CAPACITY, 0, -1, "GET", path, admin, NULL);
}

static void
export_next(void)
{
	char path[128];

	if (exporter.busy || now_s() < export_poll_at || getenv("BENCH_DAY_NO_EXPORT") != NULL)
		return;
	if (export_id == -1 || export_id == 0) {
		export_t0 = now_s();
		start(&exporter, K_EXPORT_CREATE, 0, -1, "POST", "/v1/billing/exports", admin,
		    "{\"format\":\"focus\",\"period\":\"2026-10\"}");
	} else if (export_id > 0) {
		snprintf(path, sizeof(path), "/v1/billing/exports/%lld", export_id);
		start(&exporter, K_EXPORT_GET, 0, -1, "GET", path, admin, NULL);
		export_poll_at = now_s() + 0.1;
	} else {
		snprintf(path, sizeof(path), "/v1/billing/exports/%lld/download",
		    -(export_id + 1000));
		start(&exporter, K_EXPORT_DOWNLOAD, 0, -1, "GET", path, admin, NULL);
	}
}

static void
proc_sample(int pid, long *rss_kib, double *cpu_s)
{
	char p[64], line[512];
	FILE *f;

	snprintf(p, sizeof(p), "/proc/%d/status", pid);
	f = fopen(p, "r");
	*rss_kib = -1;
	while (f && fgets(line, sizeof(line), f))
		if (strncmp(line, "VmRSS:", 6) == 0)
			*rss_kib = atol(line + 6);
	if (f)
		fclose(f);
	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	f = fopen(p, "r");
	*cpu_s = 0;
	if (f && fgets(line, sizeof(line), f)) {
		char *q = strrchr(line, ')');
		unsigned long ut = 0, st = 0;

		if (q &&
		    sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut,
			&st) == 2)
			*cpu_s = (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
	}
	if (f)
		fclose(f);
}

/* CPU seconds of the PostgreSQL server: the postmaster and its children. */
static double
pg_cpu(int postmaster)
{
	long rss;
	double sum, c;
	DIR *d = opendir("/proc");
	struct dirent *e;

	proc_sample(postmaster, &rss, &sum);
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

			if (q != NULL && sscanf(q + 2, "%*c %d", &ppid) == 1 &&
			    ppid == postmaster) {
				proc_sample(pid, &rss, &c);
				sum += c;
			}
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

/* Agent i's heartbeat, metric batch or status in a free slot; false when none is free. */
static bool
agent_send(enum kind kind, int i)
{
	struct req *r = slot();
	char body[640], uuid[64];

	if (r == NULL)
		return false;
	if (ag[i].token[0] == '\0')
		return true; /* not enrolled (counted as a failure already) */
	if (kind == K_HEARTBEAT) {
		snprintf(body, sizeof(body), "{\"observed_generation\":%lld}", ag[i].gen);
		start(r, kind, i, i, "POST", "/v1/agent/heartbeat", ag[i].token, body);
	} else if (kind == K_METRICS) {
		gpu_uuid(uuid, sizeof(uuid), i);
		snprintf(body, sizeof(body),
		    "{\"samples\":[{\"ts\":%lld,\"gpu_uuid\":\"%s\",\"device_uuid\":\"%s\","
		    "\"power_w\":%d,\"sm_active\":0.5,\"memory_used_mib\":100,"
		    "\"memory_total_mib\":81559,\"temperature_c\":40}]}",
		    (long long)time(NULL), uuid, uuid, 100 + i % 50);
		start(r, kind, i, i, "POST", "/v1/agent/metrics", ag[i].token, body);
	} else {
		if (ag[i].status == NULL) {
			gpu_uuid(uuid, sizeof(uuid), i);
			snprintf(body, sizeof(body),
			    "{\"observed_generation\":%lld,\"agent_version\":\"bench-day\","
			    "\"gpus\":[{\"uuid\":\"%s\",\"index\":0,\"mig_enabled\":true,"
			    "\"instances\":[]}],\"errors\":[]}",
			    ag[i].gen, uuid);
			ag[i].status = strdup(body);
		}
		start(r, K_STATUS, i, i, "PUT", "/v1/agent/status", ag[i].token, ag[i].status);
		ag[i].status_due = false;
	}
	return true;
}

int
main(int argc, char **argv)
{
	if (argc != 9) {
		fprintf(stderr,
		    "usage: bench_day URL AGENT_URL ADMIN_TOKEN AGENTS CLIENTS SECONDS "
		    "SERVER_PID POSTMASTER_PID\n");
		return 2;
	}
	base = argv[1];
	agent_base = argv[2];
	agent_port = atoi(strrchr(agent_base, ':') + 1);
	admin = argv[3];
	nagents = atoi(argv[4]);
	nclients = atoi(argv[5]);
	if (nclients > MAX_CLIENTS)
		nclients = MAX_CLIENTS;
	double secs = atof(argv[6]);
	const char *lag = getenv("BENCH_DAY_POOL_LAG");

	if (lag != NULL && lag[0] != '\0')
		pool_lag = atoi(lag);
	const char *think = getenv("BENCH_DAY_THINK_MS");

	if (think != NULL && think[0] != '\0')
		think_s = atof(think) / 1000.0;
	int pid = atoi(argv[7]), pgpid = atoi(argv[8]);

	curl_global_init(CURL_GLOBAL_ALL);
	ep = epoll_create1(EPOLL_CLOEXEC);
	for (int w = 0; w <= NSHARDS; w++) {
		CURLM *m = curl_multi_init();

		if (w == 0)
			multi = m;
		else
			pmulti[w - 1] = m;
		deadline[w] = -1;
		curl_multi_setopt(m, CURLMOPT_SOCKETFUNCTION, on_socket);
		curl_multi_setopt(m, CURLMOPT_SOCKETDATA, (void *)(intptr_t)w);
		curl_multi_setopt(m, CURLMOPT_TIMERFUNCTION, on_timer);
		curl_multi_setopt(m, CURLMOPT_TIMERDATA, (void *)(intptr_t)w);
		curl_multi_setopt(m, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
		curl_multi_setopt(m, CURLMOPT_MAXCONNECTS,
		    w == 0 ? (long)SLOTS + 256 : (long)nagents / NSHARDS + 64);
	}
	ag = calloc((size_t)nagents, sizeof(*ag));
	status_q = calloc((size_t)nagents, sizeof(*status_q));
	setup("POST", "/v1/clusters", "{\"name\":\"day\",\"region\":\"bench\"}");
	for (int p = 0; p < 8; p++) {
		char body[128], path[128];

		snprintf(body, sizeof(body), "{\"name\":\"day%d\",\"display_name\":\"day %d\"}", p,
		    p);
		setup("POST", "/v1/projects", body);
		snprintf(path, sizeof(path), "/v1/projects/day%d/members/bench", p);
		setup("PUT", path, "{\"role\":\"owner\"}");
	}

	/* enrollment, 64 at a time */
	double t0 = now_s();
	int next = 0;
	while (enrolled + fails_other[K_ENROLL] + fails_other[K_ENROLL_TOKEN] +
		    fails_conn[K_ENROLL] + fails_conn[K_ENROLL_TOKEN] + fails_5xx[K_ENROLL] +
		    fails_5xx[K_ENROLL_TOKEN] <
		nagents &&
	    now_s() - t0 < 900) {
		while (next < nagents && enrolling < 64) {
			struct req *r = slot();

			if (r == NULL)
				break;
			enrolling++;
			start(r, K_ENROLL_TOKEN, next, -1, "POST",
			    "/v1/clusters/day/enrollment-tokens", admin,
			    "{\"expires_in_seconds\":3600}");
			next++;
		}
		turn(10);
	}
	printf("agents %d\nenrolled %ld\nenroll_s %.1f\n", nagents, enrolled, now_s() - t0);
	/*
	 * each agent's first poll (after=0) brings its document and the agent
	 * sends a status: as gpupool-agent at its start, before the day
	 */
	for (double until = now_s() + 120; now_s() < until;) {
		long answered = 0;

		for (int i = 0; i < nagents; i++)
			answered += ag[i].gen > 0 || ag[i].token[0] == '\0';
		while (status_q_len > 0) {
			int i = status_q[status_q_head];

			if (ag[i].status_due && !agent_send(K_STATUS, i))
				break;
			status_q_head = (status_q_head + 1) % nagents;
			status_q_len--;
		}
		bool busy = false;
		for (int k = 0; k < SLOTS && !busy; k++)
			busy = slots[k].busy;
		if (answered == nagents && status_q_len == 0 && !busy)
			break;
		turn(10);
	}
	fflush(stdout);

	const char *go = getenv("BENCH_DAY_GO");
	if (go != NULL && go[0] != '\0') {
		paused = true;
		printf("enrolled_ready 1\n");
		fflush(stdout);
		while (access(go, F_OK) != 0)
			turn(50);
		paused = false;
	}
	/* the mixed day */
	for (int k = 0; k < K_NKINDS; k++) {
		lats[k].n = 0;
		counts[k] = 0;
	}
	double d0 = now_s(), gp0, pg0 = pg_cpu(pgpid), me0 = self_cpu(), next_sample = d0 + 1;

	day_t0 = d0;
	/* the operators start one by one, not all in the same millisecond */
	srandom(23);
	for (int c = 0; c < nclients; c++)
		cl[c].wait_until = d0 + think_pause();
	{
		struct timespec wall;

		clock_gettime(CLOCK_REALTIME, &wall);
		fprintf(stderr, "the day starts at %lld.%03ld (Unix time)\n",
		    (long long)wall.tv_sec, wall.tv_nsec / 1000000);
	}
	long rss, rss_max = 0;
	long long hb_done = 0, m_done = 0, s_done = 0, behind_max = 0;

	proc_sample(pid, &rss, &gp0);
	while (now_s() - d0 < secs) {
		double t = now_s() - d0;
		long long hb_due = (long long)(t * nagents / HB_PERIOD),
			  m_due = (long long)(t * nagents / METRICS_PERIOD),
			  s_due = (long long)(t * nagents / STATUS_PERIOD);

		/* statuses after a new generation first (as the agent sends them at once) */
		while (status_q_len > 0) {
			int i = status_q[status_q_head];

			if (ag[i].status_due && !agent_send(K_STATUS, i))
				break;
			status_q_head = (status_q_head + 1) % nagents;
			status_q_len--;
		}
		/* the periodic kinds interleaved, so that none starves another */
		for (;;) {
			bool sent = false, full = false;

			if (s_done < s_due) {
				if (agent_send(K_STATUS, (int)(s_done % nagents)))
					s_done++, sent = true;
				else
					full = true;
			}
			if (!full && hb_done < hb_due) {
				if (agent_send(K_HEARTBEAT, (int)(hb_done % nagents)))
					hb_done++, sent = true;
				else
					full = true;
			}
			if (!full && m_done < m_due) {
				if (agent_send(K_METRICS, (int)(m_done % nagents)))
					m_done++, sent = true;
				else
					full = true;
			}
			if (full || !sent)
				break;
		}
		if (hb_due - hb_done + m_due - m_done > behind_max)
			behind_max = hb_due - hb_done + m_due - m_done;
		for (int c = 0; c < nclients; c++)
			client_next(c);
		pager_next();
		export_next();
		turn(2);
		if (now_s() >= next_sample) {
			double c;

			proc_sample(pid, &rss, &c);
			if (rss > rss_max)
				rss_max = rss;
			next_sample += 1;
		}
	}
	double el = now_s() - d0, gp1;

	proc_sample(pid, &rss, &gp1);
	double pg1 = pg_cpu(pgpid), me1 = self_cpu();
	/* the approvals' agents still on their way: up to 5 s more */
	double until = now_s() + 5;
	for (;;) {
		bool any = false;

		for (int i = 0; i < nagents && !any; i++)
			any = ag[i].npend > 0;
		if (!any || now_s() > until)
			break;
		turn(5);
	}
	long missed = 0;
	for (int i = 0; i < nagents; i++)
		missed += ag[i].npend;

	printf("duration_s %.1f\n", el);
	printf("approvals %zu\napproval_p50_ms %.1f\napproval_p99_ms %.1f\napproval_max_ms %.1f\n",
	    lats[K_APPROVE].n, pct(&lats[K_APPROVE], 0.5), pct(&lats[K_APPROVE], 0.99),
	    pct(&lats[K_APPROVE], 1.0));
	printf("submit_p50_ms %.1f\nsubmit_p99_ms %.1f\nconflicts %ld\n", pct(&lats[K_SUBMIT], 0.5),
	    pct(&lats[K_SUBMIT], 0.99), conflicts);
	printf("agent_n %zu\nagent_p50_ms %.1f\nagent_p99_ms %.1f\nagent_max_ms %.1f\nagent_missed "
	       "%ld\n",
	    agent_lat.n, pct(&agent_lat, 0.5), pct(&agent_lat, 0.99), pct(&agent_lat, 1.0), missed);
	printf("heartbeats %ld\nheartbeat_p50_ms %.1f\nheartbeat_p99_ms %.1f\n",
	    counts[K_HEARTBEAT], pct(&lats[K_HEARTBEAT], 0.5), pct(&lats[K_HEARTBEAT], 0.99));
	printf("statuses %ld\nstatus_p50_ms %.1f\nstatus_p99_ms %.1f\n", counts[K_STATUS],
	    pct(&lats[K_STATUS], 0.5), pct(&lats[K_STATUS], 0.99));
	printf("metric_batches %ld\nsamples_per_s %.1f\nmetrics_p50_ms %.1f\nmetrics_p99_ms %.1f\n",
	    counts[K_METRICS], (double)samples_stored / el, pct(&lats[K_METRICS], 0.5),
	    pct(&lats[K_METRICS], 0.99));
	printf("polls_answered %ld\nbehind_max %lld\n", counts[K_POLL], behind_max);
	printf("capacity_pages %ld\ncapacity_rows %ld\ncapacity_p50_ms %.1f\ncapacity_p99_ms %.1f\n",
	    counts[K_CAPACITY], capacity_rows, pct(&lats[K_CAPACITY], 0.5),
	    pct(&lats[K_CAPACITY], 0.99));
	printf("exports %ld\nexport_rows %ld\nexport_bytes %ld\nexport_rows_per_s %.0f\n",
	    exports_done, export_rows, export_bytes,
	    export_s > 0 ? (double)export_rows / export_s : 0);
	printf("gpupoold_cpu_pct %.1f\npg_cpu_pct %.1f\nbench_cpu_pct %.1f\ngpupoold_rss_max_kib "
	       "%ld\n",
	    (gp1 - gp0) / el * 100, (pg1 - pg0) / el * 100, (me1 - me0) / el * 100, rss_max);
	long f5 = 0, fc = 0, fo = 0;
	for (int k = 0; k < K_NKINDS; k++) {
		f5 += fails_5xx[k];
		fc += fails_conn[k];
		fo += fails_other[k];
		if (fails_5xx[k] + fails_conn[k] + fails_other[k] > 0)
			printf("failures_%s %ld/%ld/%ld\n", kind_name[k], fails_5xx[k],
			    fails_conn[k], fails_other[k]);
	}
	printf("http_5xx %ld\ntransport_failures %ld\nunexpected_4xx %ld\n", f5, fc, fo);
	return 0;
}
