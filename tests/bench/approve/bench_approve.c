/*
 * bench_approve.c - the load generator of scripts/bench-approve: N
 * keep-alive connections (libcurl easy handles) driven by one thread
 * through a curl multi handle, so that the generator itself costs little
 * CPU on the machine it shares with gpupoold and PostgreSQL (as pgbench's
 * client does).
 *
 *   bench_approve submit URL TOKEN CLIENTS SECONDS PROJECT_PREFIX IDS_FILE
 *	each client c submits create requests for new pools to project
 *	PROJECT_PREFIX<c % 32> for SECONDS; the ids of the 201 answers go
 *	to IDS_FILE, one per line.
 *   bench_approve approve URL TOKEN CLIENTS SECONDS IDS_FILE
 *	the clients approve the ids of IDS_FILE (each id once, shared
 *	queue) until they run out or SECONDS pass.
 *
 * Prints one line: "ok N errors E conflicts C seconds S rps R p50_ms P p99_ms Q
 * client_us U" where errors are answers other than 2xx and 409, conflicts
 * the 409s (insufficient capacity), latencies cover every answer and U is
 * the generator's own CPU time per answer (it shares the machine).
 */
#include <curl/curl.h>
#include <sys/resource.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 256
#define PROJECTS 32

struct buf {
	char *p;
	size_t len, cap;
};

struct client {
	int index;
	CURL *curl;
	char path[512];
	char req[512];
	double t0;
	long n;
	struct curl_slist *headers;
	struct buf body;
	double *lat_ms;
	size_t nlat, caplat;
	long ok, errors, conflicts;
	int64_t *ids; /* submit: ids received */
	size_t nids, capids;
	unsigned seed;
	long first_error_status;
	char first_error[256];
};

static const char *base_url;
static const char *token;
static const char *project_prefix;
static unsigned run_tag; /* makes pool names unique per run */
static double deadline;
static int64_t *queue; /* approve: ids to approve */
static size_t nqueue;
static size_t next_job;

static const char *const items[] = {
	"\"H100-80GB/1g.10gb=1\"",
	"\"H100-80GB/1g.10gb=2\"",
	"\"H100-80GB/2g.20gb=1\"",
	"\"H100-80GB/3g.40gb=1\"",
	"\"H100-80GB/1g.20gb=1\",\"H100-80GB/2g.20gb=1\"",
	"\"H100-80GB/full=1\"",
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t
on_body(char *data, size_t size, size_t n, void *arg)
{
	struct buf *b = arg;
	size_t len = size * n;

	if (b->len + len + 1 > b->cap) {
		size_t cap = (b->len + len + 1) * 2;
		char *p = realloc(b->p, cap);

		if (p == NULL)
			return 0;
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, data, len);
	b->len += len;
	b->p[b->len] = '\0';
	return len;
}

static void
push_lat(struct client *c, double ms)
{
	if (c->nlat == c->caplat) {
		c->caplat = c->caplat ? c->caplat * 2 : 4096;
		c->lat_ms = realloc(c->lat_ms, c->caplat * sizeof(*c->lat_ms));
		if (c->lat_ms == NULL) {
			fprintf(stderr, "bench_approve: out of memory\n");
			exit(1);
		}
	}
	c->lat_ms[c->nlat++] = ms;
}

static void
push_id(struct client *c, int64_t id)
{
	if (c->nids == c->capids) {
		c->capids = c->capids ? c->capids * 2 : 4096;
		c->ids = realloc(c->ids, c->capids * sizeof(*c->ids));
		if (c->ids == NULL) {
			fprintf(stderr, "bench_approve: out of memory\n");
			exit(1);
		}
	}
	c->ids[c->nids++] = id;
}

/* Start the next request of c; false when c has nothing left to do. */
static bool
client_next(struct client *c, bool submit)
{
	if (now_s() >= deadline)
		return false;
	if (submit) {
		const char *it = items[rand_r(&c->seed) % (sizeof(items) / sizeof(items[0]))];

		snprintf(c->path, sizeof(c->path), "%s/v1/projects/%s%d/pool-requests", base_url,
		    project_prefix, c->index % PROJECTS);
		snprintf(c->req, sizeof(c->req),
		    "{\"action\":\"create\",\"pool\":\"b%x-%d-%ld\",\"items\":[%s],"
		    "\"justification\":\"bench\"}",
		    run_tag, c->index, c->n++, it);
	} else {
		size_t j = next_job++;

		if (j >= nqueue)
			return false;
		snprintf(c->path, sizeof(c->path), "%s/v1/pool-requests/%lld/approve", base_url,
		    (long long)queue[j]);
		snprintf(c->req, sizeof(c->req), "{\"note\":\"bench\"}");
	}
	c->body.len = 0;
	if (c->body.p != NULL)
		c->body.p[0] = '\0';
	curl_easy_setopt(c->curl, CURLOPT_URL, c->path);
	curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, c->req);
	c->t0 = now_s();
	return true;
}

/* Record the answer c got. */
static void
client_done(struct client *c, bool submit, CURLcode rc)
{
	long status = 0;

	if (rc == CURLE_OK)
		curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &status);
	push_lat(c, (now_s() - c->t0) * 1000.0);
	if (status >= 200 && status < 300) {
		c->ok++;
		if (submit && status == 201) {
			const char *p = c->body.p ? strstr(c->body.p, "\"id\":") : NULL;

			if (p != NULL)
				push_id(c, strtoll(p + 5, NULL, 10));
		}
	} else if (status == 409) {
		c->conflicts++;
	} else {
		c->errors++;
		if (c->first_error_status == 0) {
			c->first_error_status = status != 0 ? status : -(long)rc;
			snprintf(c->first_error, sizeof(c->first_error), "%s",
			    rc != CURLE_OK  ? curl_easy_strerror(rc)
				: c->body.p ? c->body.p
					    : "");
		}
	}
}

/* Drive every client until all are done. */
static void
run(struct client *clients, int n, bool submit)
{
	CURLM *m = curl_multi_init();
	int running = 0;

	for (int i = 0; i < n; i++) {
		if (client_next(&clients[i], submit)) {
			curl_multi_add_handle(m, clients[i].curl);
			running++;
		}
	}
	while (running > 0) {
		CURLMsg *msg;
		int still, left;

		curl_multi_perform(m, &still);
		while ((msg = curl_multi_info_read(m, &left)) != NULL) {
			struct client *c = NULL;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&c);
			curl_multi_remove_handle(m, c->curl);
			client_done(c, submit, msg->data.result);
			if (client_next(c, submit))
				curl_multi_add_handle(m, c->curl);
			else
				running--;
		}
		if (running > 0)
			curl_multi_poll(m, NULL, 0, 100, NULL);
	}
	curl_multi_cleanup(m);
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static int
load_ids(const char *file)
{
	FILE *f = fopen(file, "r");
	long long v;
	size_t cap = 0;

	if (f == NULL) {
		perror(file);
		return -1;
	}
	while (fscanf(f, "%lld", &v) == 1) {
		if (nqueue == cap) {
			cap = cap ? cap * 2 : 4096;
			queue = realloc(queue, cap * sizeof(*queue));
			if (queue == NULL) {
				fclose(f);
				return -1;
			}
		}
		queue[nqueue++] = v;
	}
	fclose(f);
	return 0;
}

static void
usage(void)
{
	fprintf(stderr,
	    "usage: bench_approve submit URL TOKEN CLIENTS SECONDS PROJECT_PREFIX IDS_FILE\n"
	    "       bench_approve approve URL TOKEN CLIENTS SECONDS IDS_FILE\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static struct client clients[MAX_CLIENTS];
	char auth[512];
	int nclients;
	double seconds, t0, elapsed;
	bool submit;
	const char *ids_file;
	size_t total = 0;
	long ok = 0, errors = 0, conflicts = 0;
	double *all, cpu_us;
	struct rusage ru;

	if (argc < 7)
		usage();
	submit = strcmp(argv[1], "submit") == 0;
	if (!submit && strcmp(argv[1], "approve") != 0)
		usage();
	if (submit && argc != 8)
		usage();
	base_url = argv[2];
	token = argv[3];
	nclients = atoi(argv[4]);
	seconds = atof(argv[5]);
	if (nclients < 1 || nclients > MAX_CLIENTS || seconds <= 0)
		usage();
	if (submit) {
		project_prefix = argv[6];
		ids_file = argv[7];
	} else {
		ids_file = argv[6];
		if (load_ids(ids_file) < 0)
			return 1;
	}
	curl_global_init(CURL_GLOBAL_DEFAULT);
	snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
	for (int i = 0; i < nclients; i++) {
		struct client *c = &clients[i];

		c->index = i;
		c->seed = 0x9e3779b9u * (unsigned)(i + 1);
		c->curl = curl_easy_init();
		c->headers = curl_slist_append(NULL, auth);
		c->headers = curl_slist_append(c->headers, "Content-Type: application/json");
		c->headers = curl_slist_append(c->headers, "Expect:");
		curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, c->headers);
		curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &c->body);
		curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, 30L);
		curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
		curl_easy_setopt(c->curl, CURLOPT_PRIVATE, (char *)c);
	}
	t0 = now_s();
	run_tag = (unsigned)getpid() ^ ((unsigned)time(NULL) << 8);
	deadline = t0 + seconds;
	run(clients, nclients, submit);
	elapsed = now_s() - t0;
	if (submit) {
		FILE *f = fopen(ids_file, "w");

		if (f == NULL) {
			perror(ids_file);
			return 1;
		}
		for (int i = 0; i < nclients; i++)
			for (size_t k = 0; k < clients[i].nids; k++)
				fprintf(f, "%lld\n", (long long)clients[i].ids[k]);
		fclose(f);
	}
	for (int i = 0; i < nclients; i++) {
		total += clients[i].nlat;
		ok += clients[i].ok;
		errors += clients[i].errors;
		conflicts += clients[i].conflicts;
		if (clients[i].first_error_status != 0 && errors > 0)
			fprintf(stderr, "bench_approve: client %d: HTTP %ld: %.200s\n", i,
			    clients[i].first_error_status, clients[i].first_error);
	}
	all = malloc((total + 1) * sizeof(*all));
	if (all == NULL)
		return 1;
	total = 0;
	for (int i = 0; i < nclients; i++) {
		memcpy(all + total, clients[i].lat_ms, clients[i].nlat * sizeof(*all));
		total += clients[i].nlat;
	}
	qsort(all, total, sizeof(*all), cmp_double);
	getrusage(RUSAGE_SELF, &ru);
	cpu_us = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
	    (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
	printf("ok %ld errors %ld conflicts %ld seconds %.3f rps %.1f p50_ms %.3f p99_ms %.3f "
	       "client_us %.0f\n",
	    ok, errors, conflicts, elapsed, (double)(ok + conflicts) / elapsed,
	    total ? all[total / 2] : 0.0, total ? all[(size_t)((double)total * 0.99)] : 0.0,
	    total ? cpu_us / (double)total : 0.0);
	for (int i = 0; i < nclients; i++) {
		curl_slist_free_all(clients[i].headers);
		curl_easy_cleanup(clients[i].curl);
		free(clients[i].lat_ms);
		free(clients[i].ids);
		free(clients[i].body.p);
	}
	free(all);
	free(queue);
	curl_global_cleanup();
	return 0;
}
