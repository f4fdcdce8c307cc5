/*
 * capacity.h - what the capacity module offers the rest of the server:
 * per-model capacity figures, the /metrics gauges, and the filter lookups the inventory
 * handlers (clusters, nodes, gpus, capacity) share.
 */
#ifndef GP_API_CAPACITY_H
#define GP_API_CAPACITY_H

#include "api.h"
#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "db/db.h"
#include "domain/catalog.h"
#include "domain/placement.h"
#include "domain/spec.h"

struct request;

/* Most instances one simulation may ask for, all items together. */
#define CAPACITY_SIMULATE_MAX 4096

/* Capacity of one model, summed over GPUs (see docs/capacity.md). */
struct model_capacity {
	const struct gpu_model *model;
	int64_t gpus_total;
	int64_t gpus_healthy; /* health ok */
	int64_t gpus_mig_enabled;
	int64_t gpus_placeable; /* health ok on a ready node */
	int64_t compute_total;
	int64_t compute_used;
	int64_t compute_stranded;
	int64_t memory_total;
	int64_t memory_used;
	int64_t memory_available; /* free memory slices on placeable GPUs */
	/* [0]: "full"; [1 + i]: model->profiles[i] */
	int64_t allocated[CATALOG_MAX_PROFILES + 1];
	int64_t placeable[CATALOG_MAX_PROFILES + 1];
};

/*
 * Figures per catalog model: out[i] for catalog_model_at(c, i), in arena
 * memory (catalog_nmodels entries). cluster_id 0 and model NULL do not
 * filter. One grouped scan of gpus.
 */
int capacity_compute(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const char *model, struct model_capacity **out, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * The capacity gauges in the Prometheus text format, in arena memory;
 * NULL when the database could not be read (the rest of /metrics is
 * still served). Covers the models of catalog.
 */
const char *capacity_metrics_text(struct arena *a, const struct catalog *catalog);

/*
 * The id of the cluster named name, for a filter or body field `field`:
 * 0 when name is NULL, 422 on field when there is no such cluster.
 */
int capacity_cluster_id(struct db *db, struct arena *a, const char *name, const char *field,
    int64_t *id, struct gp_error *err) __attribute__((warn_unused_result));

/* A model query parameter: NULL when absent, 422 on field when unknown. */
/*
 * The items array of a request body (SpecAndCount objects or their text
 * form), validated against c: 1 to PLACEMENT_MAX_ITEMS items, at most
 * CAPACITY_SIMULATE_MAX instances in all; field errors named "items[i]...".
 */
struct json_object;
int capacity_read_items(struct request *req, struct json_object *arr, const struct catalog *c,
    struct spec_count **out, int *nout, struct gp_error *err);

int capacity_model_param(const struct catalog *c, const char *model, const char *field,
    struct gp_error *err) __attribute__((warn_unused_result));

/* handlers (routes.c routes to them) */
int api_capacity_get(struct request *req, struct response *res, struct gp_error *err);
int api_capacity_simulate(struct request *req, struct response *res, struct gp_error *err);

#endif
