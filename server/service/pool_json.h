/*
 * pool_json.h - the JSON shapes of pools, pool requests, allocations and
 * item lists. The handlers reply with them and the approval workflow
 * writes them into audit rows, so a reply and its audit row agree.
 */
#ifndef GP_SERVICE_POOL_JSON_H
#define GP_SERVICE_POOL_JSON_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/json.h"
#include "db/db_pools.h"
#include "domain/pool.h"
#include "domain/spec.h"

/* Parse an item list stored by the database (JSON text) into out (POOL_MAX_ITEMS). */
int pools_items_parse(const char *json, struct spec_count *out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/* A JSON array of SpecAndCount objects; text form in arena memory. */
struct json_object *pools_items_json(const struct spec_count *items, int n);
const char *pools_items_text(struct arena *a, const struct spec_count *items, int n);

/* {"node","gpu_uuid","gpu_index","model","profile","start","size","state","resource_name",...} */
struct json_object *pools_alloc_json(const char *node, const char *gpu_uuid, int gpu_index,
    const char *model, const char *profile, int start, int size, const char *state,
    const char *device_uuid);

/* A pool with the given allocations (rows of other pools are skipped). */
struct json_object *pools_pool_json(const struct pool_row *p, const struct pool_alloc_row *a,
    int na);

/* A pool request; history (may be NULL) adds "history". */
struct json_object *pools_request_json(const struct pool_request_row *r,
    const struct pool_request_event *history, int nhistory);

/* Stored item-list text as JSON, [] when it does not parse (the caller's 500s log it). */
struct json_object *pools_stored_items_json(const char *text);

#endif
