/*
 * load.c - the latency driver of scripts/bench-capacity.
 *
 *   bench_capacity_load http URL TOKEN METHOD PATH BODY REQUESTS CONNECTIONS [WARMUP [SECONDS]]
 *   bench_capacity_load sql CONNINFO SQL REQUESTS [WARMUP]
 *
 * http: REQUESTS requests (after WARMUP more, default 10, not counted)
 * spread over CONNECTIONS threads, each with its own keep-alive
 * connection (the shared REST client, so what the CLI does); BODY is "-"
 * for none, "@FILE" for a file's contents or the JSON text itself. Only
 * a 200 answer counts as a success. SECONDS (default 0: no limit) stops
 * a slow endpoint early: the figures are then over the requests made.
 *
 * sql: the statement REQUESTS times (after WARMUP) on one libpq
 * connection, each result read whole.
 *
 * Prints one line of figures for the script to parse:
 *
 *   requests=200 errors=0 mean_ms=1.234 p50_ms=1.200 p90_ms=1.300 p99_ms=1.500 max_ms=2.000 rps=810.0
 *
 * and exits 0 when every request succeeded, 1 otherwise.
 */
#include <errno.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gp_client.h"

#define LOAD_MAX_CONNECTIONS 64
#define LOAD_MAX_BODY (1 << 20)

struct load_thread {
	pthread_t tid;
	struct gp_client *client;
	const char *method;
	const char *path;
	const char *body;
	long first; /* index of its first sample */
	long count; /* samples it takes */
	long warmup;
	double deadline_ms; /* stop starting requests after this; 0: never */
	long done;          /* samples taken */
	double *samples;    /* shared array; each thread writes its own range */
	long errors;
	long status; /* last failing status, 0 when none */
	char error[512];
};

static double
load_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int
load_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The p-th percentile (nearest rank) of sorted v[0..n). */
static double
load_pct(const double *v, long n, double p)
{
	long rank = (long)((p / 100.0) * (double)n + 0.999999);

	if (rank < 1)
		rank = 1;
	if (rank > n)
		rank = n;
	return v[rank - 1];
}

static void
load_report(double *v, long n, long errors, double wall_ms)
{
	double sum = 0;

	qsort(v, (size_t)n, sizeof(*v), load_cmp);
	for (long i = 0; i < n; i++)
		sum += v[i];
	printf("requests=%ld errors=%ld mean_ms=%.3f p50_ms=%.3f p90_ms=%.3f p99_ms=%.3f "
	       "max_ms=%.3f rps=%.1f\n",
	    n, errors, n ? sum / (double)n : 0, load_pct(v, n, 50), load_pct(v, n, 90),
	    load_pct(v, n, 99), n ? v[n - 1] : 0, wall_ms > 0 ? 1e3 * (double)n / wall_ms : 0);
}

static long
load_parse_count(const char *s, long min, const char *what)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min) {
		fprintf(stderr, "bench_capacity_load: %s must be an integer >= %ld, not \"%s\"\n",
		    what, min, s);
		exit(2);
	}
	return v;
}

/* One request; 0 on a 200 answer. */
static int
load_one(struct load_thread *t)
{
	struct gp_client_response r;
	int rc;

	rc = gp_client_request(t->client, t->method, t->path, t->body,
	    t->body ? strlen(t->body) : 0, NULL, &r);
	if (rc != 0 || r.status != 200) {
		t->errors++;
		t->status = r.status;
		snprintf(t->error, sizeof(t->error), "%s",
		    rc != 0 ? r.error : (r.body != NULL ? r.body : ""));
		gp_client_response_free(&r);
		return -1;
	}
	gp_client_response_free(&r);
	return 0;
}

static void *
load_thread_main(void *arg)
{
	struct load_thread *t = arg;

	for (long i = 0; i < t->warmup; i++)
		(void)load_one(t);
	t->errors = 0;
	for (long i = 0; i < t->count; i++) {
		double t0 = load_now_ms();

		if (t->deadline_ms > 0 && t0 > t->deadline_ms)
			break;
		(void)load_one(t);
		t->samples[t->first + i] = load_now_ms() - t0;
		t->done++;
	}
	return NULL;
}

static char *
load_read_body(const char *arg)
{
	FILE *f;
	char *buf;
	size_t n;

	if (strcmp(arg, "-") == 0)
		return NULL;
	if (arg[0] != '@')
		return strdup(arg);
	f = fopen(arg + 1, "r");
	if (f == NULL) {
		fprintf(stderr, "bench_capacity_load: could not open %s: %s\n", arg + 1,
		    strerror(errno));
		exit(1);
	}
	buf = malloc(LOAD_MAX_BODY + 1);
	if (buf == NULL) {
		fclose(f);
		exit(1);
	}
	n = fread(buf, 1, LOAD_MAX_BODY, f);
	fclose(f);
	buf[n] = '\0';
	return buf;
}

static int
load_http(int argc, char **argv)
{
	struct load_thread threads[LOAD_MAX_CONNECTIONS];
	long requests, conns, warmup = 10, errors = 0, first = 0, taken = 0, seconds = 0;
	double *samples, t0, wall;
	char *body;
	int rc = 0;

	if (argc < 9 || argc > 11) {
		fprintf(stderr,
		    "usage: bench_capacity_load http URL TOKEN METHOD PATH BODY "
		    "REQUESTS CONNECTIONS [WARMUP [SECONDS]]\n");
		return 2;
	}
	requests = load_parse_count(argv[7], 1, "REQUESTS");
	conns = load_parse_count(argv[8], 1, "CONNECTIONS");
	if (argc >= 10)
		warmup = load_parse_count(argv[9], 0, "WARMUP");
	if (argc == 11)
		seconds = load_parse_count(argv[10], 0, "SECONDS");
	if (conns > LOAD_MAX_CONNECTIONS || conns > requests) {
		fprintf(stderr,
		    "bench_capacity_load: 1 to %d connections, at most one per request\n",
		    LOAD_MAX_CONNECTIONS);
		return 2;
	}
	body = load_read_body(argv[6]);
	samples = calloc((size_t)requests, sizeof(*samples));
	if (samples == NULL)
		return 1;
	memset(threads, 0, sizeof(threads));
	for (long i = 0; i < conns; i++) {
		struct load_thread *t = &threads[i];

		t->client = gp_client_create(argv[2], argv[3]);
		if (t->client == NULL) {
			fprintf(stderr, "bench_capacity_load: bad URL %s\n", argv[2]);
			return 1;
		}
		gp_client_set_timeouts(t->client, 60000, 5000);
		t->method = argv[4];
		t->path = argv[5];
		t->body = body;
		t->samples = samples;
		t->first = first;
		t->count = requests / conns + (i < requests % conns ? 1 : 0);
		t->warmup = (warmup + conns - 1) / conns;
		first += t->count;
	}
	t0 = load_now_ms();
	for (long i = 0; i < conns; i++) {
		threads[i].deadline_ms = seconds > 0 ? t0 + 1e3 * (double)seconds : 0;
		if (pthread_create(&threads[i].tid, NULL, load_thread_main, &threads[i]) != 0) {
			fprintf(stderr, "bench_capacity_load: could not start a thread\n");
			return 1;
		}
	}
	for (long i = 0; i < conns; i++)
		pthread_join(threads[i].tid, NULL);
	wall = load_now_ms() - t0;
	/* pack the samples of threads stopped early */
	for (long i = 0; i < conns; i++) {
		memmove(samples + taken, samples + threads[i].first,
		    sizeof(*samples) * (size_t)threads[i].done);
		taken += threads[i].done;
	}
	for (long i = 0; i < conns; i++) {
		errors += threads[i].errors;
		if (threads[i].errors > 0 && rc == 0) {
			fprintf(stderr, "bench_capacity_load: %s %s: HTTP %ld %.300s\n", argv[4],
			    argv[5], threads[i].status, threads[i].error);
			rc = 1;
		}
		gp_client_destroy(threads[i].client);
	}
	if (taken == 0) {
		fprintf(stderr, "bench_capacity_load: no request finished in time\n");
		return 1;
	}
	load_report(samples, taken, errors, wall);
	free(samples);
	free(body);
	return rc;
}

/* Run sql once, reading the whole result; 0 when it returned rows. */
static int
load_sql_once(PGconn *conn, const char *sql)
{
	PGresult *res = PQexec(conn, sql);
	int ok = PQresultStatus(res) == PGRES_TUPLES_OK;

	if (!ok)
		fprintf(stderr, "bench_capacity_load: %s", PQerrorMessage(conn));
	PQclear(res);
	return ok ? 0 : -1;
}

static int
load_sql(int argc, char **argv)
{
	long requests, warmup = 10, errors = 0;
	double *samples, t0;
	PGconn *conn;

	if (argc < 5 || argc > 6) {
		fprintf(stderr, "usage: bench_capacity_load sql CONNINFO SQL REQUESTS [WARMUP]\n");
		return 2;
	}
	requests = load_parse_count(argv[4], 1, "REQUESTS");
	if (argc == 6)
		warmup = load_parse_count(argv[5], 0, "WARMUP");
	conn = PQconnectdb(argv[2]);
	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "bench_capacity_load: %s", PQerrorMessage(conn));
		PQfinish(conn);
		return 1;
	}
	samples = calloc((size_t)requests, sizeof(*samples));
	if (samples == NULL) {
		PQfinish(conn);
		return 1;
	}
	for (long i = 0; i < warmup; i++)
		(void)load_sql_once(conn, argv[3]);
	t0 = load_now_ms();
	for (long i = 0; i < requests; i++) {
		double s = load_now_ms();

		if (load_sql_once(conn, argv[3]) != 0)
			errors++;
		samples[i] = load_now_ms() - s;
	}
	load_report(samples, requests, errors, load_now_ms() - t0);
	free(samples);
	PQfinish(conn);
	return errors == 0 ? 0 : 1;
}

int
main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "http") == 0)
		return load_http(argc, argv);
	if (argc >= 2 && strcmp(argv[1], "sql") == 0)
		return load_sql(argc, argv);
	fprintf(stderr,
	    "usage: bench_capacity_load http URL TOKEN METHOD PATH BODY REQUESTS "
	    "CONNECTIONS [WARMUP [SECONDS]]\n"
	    "       bench_capacity_load sql CONNINFO SQL REQUESTS [WARMUP]\n");
	return 2;
}
