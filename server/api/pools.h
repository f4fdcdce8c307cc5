/*
 * pools.h - what the pool handlers share: SpecAndCount lists in and out
 * of JSON, the JSON shapes of pools, allocations and pool requests, and
 * the approval engine (pool_requests.c) that places and frees.
 */
#ifndef GP_API_POOLS_H
#define GP_API_POOLS_H

#include <stdbool.h>
#include <stdint.h>

#include "api.h"
#include "db/db_pools.h"
#include "domain/pool.h"
#include "domain/spec.h"
#include "service/pool_json.h"
#include "service/pool_service.h"

/*
 * Read a request body's item array: each entry a SpecAndCount object
 * {"model","profile","count"} or its text form "MODEL/PROFILE=COUNT",
 * validated against the catalog, no kind twice (errors "items[i]...").
 * out (POOL_MAX_ITEMS entries) gets the canonical list.
 */
int pools_items_read(struct request *req, struct json_object *arr, struct spec_count *out, int *n,
    struct gp_error *err) __attribute__((warn_unused_result));

/*
 * The pool gauges in the Prometheus text format (pending requests,
 * outbox backlog), in arena memory; NULL when the database could not be
 * read (the rest of /metrics is still served).
 */
const char *pools_metrics_text(struct arena *a);

/* handlers (routes.c routes to them) */
int api_quota_get(struct request *req, struct response *res, struct gp_error *err);
int api_quota_put(struct request *req, struct response *res, struct gp_error *err);
int api_quota_delete(struct request *req, struct response *res, struct gp_error *err);
int api_pools_list(struct request *req, struct response *res, struct gp_error *err);
int api_pools_get(struct request *req, struct response *res, struct gp_error *err);

#endif
