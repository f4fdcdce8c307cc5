/*
 * metrics.h - request counters and latency histograms for /metrics.
 */
#ifndef GP_API_METRICS_H
#define GP_API_METRICS_H

#include <stdint.h>

#include "core/arena.h"

/* Count one request of route idx (-1: no route matched). */
void metrics_observe(int route_idx, int status, int64_t duration_us);

/*
 * Prometheus text exposition of everything recorded, then of every
 * registered collector (core/metrics_registry.h), into arena memory.
 */
const char *metrics_render(struct arena *a, size_t *len);

#endif
