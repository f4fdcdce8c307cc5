/*
 * metrics.h - request counters and latency histograms for /metrics.
 */
#ifndef GP_API_METRICS_H
#define GP_API_METRICS_H

#include <stdint.h>

#include "core/arena.h"

/* Count one request of route idx (-1: no route matched). */
void metrics_observe(int route_idx, int status, int64_t duration_us);

struct catalog;

/* Prometheus text exposition of everything recorded, plus the capacity
 * gauges of catalog's models, into arena memory. */
const char *metrics_render(struct arena *a, const struct catalog *catalog, size_t *len);

#endif
