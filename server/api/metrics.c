/*
 * metrics.c - lock-free counters (C11 atomics) indexed by route and
 * status; rendered in the Prometheus text format, followed by what the
 * registered collectors write (core/metrics_registry.h).
 */
#include "metrics.h"
#include "routes.h"

#include "core/metrics_registry.h"
#include "core/strbuf.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define METRICS_MAX_ROUTES 160
#define METRICS_NBUCKETS 12

static const int tracked_status[] = {
	200, 201, 204, 304, 400, 401, 403, 404, 405, 409, 412, 413, 415, 422, 428, 429, 500, 503,
	0 /* other */
};
#define NSTATUS ((int)(sizeof(tracked_status) / sizeof(tracked_status[0])))

/* upper bounds in microseconds */
static const int64_t bucket_us[METRICS_NBUCKETS] = { 500, 1000, 2500, 5000, 10000, 25000, 50000,
	100000, 250000, 500000, 1000000, 5000000 };

static atomic_uint_fast64_t counts[METRICS_MAX_ROUTES + 1][NSTATUS];
static atomic_uint_fast64_t buckets[METRICS_MAX_ROUTES + 1][METRICS_NBUCKETS + 1];
static atomic_uint_fast64_t sum_us[METRICS_MAX_ROUTES + 1];

void
metrics_observe(int route_idx, int status, int64_t duration_us)
{
	int r = route_idx < 0 || route_idx >= METRICS_MAX_ROUTES ? METRICS_MAX_ROUTES : route_idx;
	int s = NSTATUS - 1, b = METRICS_NBUCKETS;

	for (int i = 0; i < NSTATUS - 1; i++) {
		if (tracked_status[i] == status) {
			s = i;
			break;
		}
	}
	for (int i = 0; i < METRICS_NBUCKETS; i++) {
		if (duration_us <= bucket_us[i]) {
			b = i;
			break;
		}
	}
	atomic_fetch_add_explicit(&counts[r][s], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&buckets[r][b], 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&sum_us[r], (uint_fast64_t)(duration_us > 0 ? duration_us : 0),
	    memory_order_relaxed);
}

static void
route_labels(int r, const char **method, const char **route)
{
	if (r >= api_nroutes || r == METRICS_MAX_ROUTES) {
		*method = "other"; /* no route matched: an unknown path or method */
		*route = "unmatched";
		return;
	}
	*method = api_routes[r].method;
	*route = api_routes[r].pattern;
}

const char *
metrics_render(struct arena *a, size_t *len)
{
	struct strbuf b;
	int nr = api_nroutes < METRICS_MAX_ROUTES ? api_nroutes : METRICS_MAX_ROUTES;

	strbuf_init(&b, a, 16384);
	strbuf_printf(&b,
	    "# HELP gpupool_http_requests_total HTTP requests by route and status.\n"
	    "# TYPE gpupool_http_requests_total counter\n");
	for (int r = 0; r <= METRICS_MAX_ROUTES; r++) {
		const char *method, *route;

		if (r >= nr && r != METRICS_MAX_ROUTES)
			continue;
		route_labels(r, &method, &route);
		for (int s = 0; s < NSTATUS; s++) {
			uint64_t c = atomic_load(&counts[r][s]);

			if (c == 0)
				continue;
			if (tracked_status[s] == 0)
				strbuf_printf(&b,
				    "gpupool_http_requests_total{method=\"%s\",route=\"%s\",status=\"other\"} %llu\n",
				    method, route, (unsigned long long)c);
			else
				strbuf_printf(&b,
				    "gpupool_http_requests_total{method=\"%s\",route=\"%s\",status=\"%d\"} %llu\n",
				    method, route, tracked_status[s], (unsigned long long)c);
		}
	}
	strbuf_printf(&b,
	    "# HELP gpupool_http_request_duration_seconds HTTP request latency by route.\n"
	    "# TYPE gpupool_http_request_duration_seconds histogram\n");
	for (int r = 0; r <= METRICS_MAX_ROUTES; r++) {
		const char *method, *route;
		uint64_t cum = 0;

		if (r >= nr && r != METRICS_MAX_ROUTES)
			continue;
		route_labels(r, &method, &route);
		for (int i = 0; i <= METRICS_NBUCKETS; i++)
			cum += atomic_load(&buckets[r][i]);
		if (cum == 0)
			continue;
		cum = 0;
		for (int i = 0; i < METRICS_NBUCKETS; i++) {
			cum += atomic_load(&buckets[r][i]);
			strbuf_printf(&b,
			    "gpupool_http_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"%g\"} %llu\n",
			    method, route, (double)bucket_us[i] / 1e6, (unsigned long long)cum);
		}
		cum += atomic_load(&buckets[r][METRICS_NBUCKETS]);
		strbuf_printf(&b,
		    "gpupool_http_request_duration_seconds_bucket{method=\"%s\",route=\"%s\",le=\"+Inf\"} %llu\n",
		    method, route, (unsigned long long)cum);
		strbuf_printf(&b,
		    "gpupool_http_request_duration_seconds_sum{method=\"%s\",route=\"%s\"} %.6f\n",
		    method, route, (double)atomic_load(&sum_us[r]) / 1e6);
		strbuf_printf(&b,
		    "gpupool_http_request_duration_seconds_count{method=\"%s\",route=\"%s\"} %llu\n",
		    method, route, (unsigned long long)cum);
	}
	metrics_collect(&b, a);
	*len = b.len;
	return b.p;
}
