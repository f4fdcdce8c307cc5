/*
 * json.h - strict JSON input and typed field readers over json-c.
 *
 * Bodies are parsed with a depth limit, UTF-8 validation and a check
 * that the whole input was consumed. A struct jfields reads one object:
 * each getter checks presence and type and records the key as seen;
 * jf_finish() then rejects every key that was not read. Failures are
 * appended to the caller's struct gp_error with the field path.
 */
#ifndef GP_CORE_JSON_H
#define GP_CORE_JSON_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "arena.h"
#include "error.h"

#define JSON_MAX_DEPTH 16
#define JF_MAX_KEYS 48

/*
 * Parse len bytes as one JSON object. On success *out is owned by the
 * arena (released at arena_destroy). On failure fills err with
 * 400 malformed_json (not strict UTF-8, not JSON, deeper than
 * JSON_MAX_DEPTH, anything but whitespace after the value) or 422
 * validation_failed with the field "" (the body itself) when the value
 * is valid JSON but not an object, or with the member's path when an
 * object names a member twice or a member name holds an escaped NUL
 * (json-c would cut the name there), and returns -1.
 */
int json_parse_object(struct arena *a, const char *body, size_t len, struct json_object **out,
    struct gp_error *err);

/* Hand obj to the arena: json_object_put() at arena_destroy. Returns obj. */
struct json_object *json_own(struct arena *a, struct json_object *obj);

/* Serialize obj compactly into arena memory. */
const char *json_to_arena(struct arena *a, struct json_object *obj, size_t *len);

struct jfields {
	struct arena *arena;
	struct json_object *obj;
	const char *path; /* "" at the root, "items[2]" below */
	struct gp_error *err;
	const char *seen[JF_MAX_KEYS];
	int nseen;
};

/* Start reading obj found at path ("" for the body). */
void jf_init(struct jfields *f, struct arena *a, struct json_object *obj, const char *path,
    struct gp_error *err);

/* The full path of key under f ("name", "items[0].model"). */
const char *jf_path(struct jfields *f, const char *key);

/*
 * Getters: return 0 when the field is valid or absent-and-optional
 * (then *present is false / *out untouched), -1 after recording an error.
 * JSON null counts as absent.
 */
int jf_string(struct jfields *f, const char *key, bool required, size_t maxlen, const char **out);
int jf_int(struct jfields *f, const char *key, bool required, int64_t min, int64_t max,
    int64_t *out, bool *present);
int jf_bool(struct jfields *f, const char *key, bool required, bool *out, bool *present);
int jf_time(struct jfields *f, const char *key, bool required, int64_t *out_us, bool *present);
/* A JSON number (integer or not) within [min, max]. */
int jf_double(struct jfields *f, const char *key, bool required, double min, double max,
    double *out, bool *present);
/* A time as RFC 3339 text or as an integer of seconds since the epoch. */
int jf_epoch_or_time(struct jfields *f, const char *key, bool required, int64_t *out_us,
    bool *present);
int jf_array(struct jfields *f, const char *key, bool required, struct json_object **out);
int jf_object(struct jfields *f, const char *key, bool required, struct json_object **out);

/* True when key is present in the object (null included). */
bool jf_has(struct jfields *f, const char *key);

/* Reject unread keys ("unknown field"); returns -1 when err is set at all. */
int jf_finish(struct jfields *f);

/* Add string/int/bool/null members without the json_object_new_* noise. */
void json_add_str(struct json_object *o, const char *key, const char *val);
void json_add_int(struct json_object *o, const char *key, int64_t val);
void json_add_bool(struct json_object *o, const char *key, bool val);
void json_add_time(struct json_object *o, const char *key, int64_t us);

/* Nullable members: JSON null for NULL / 0 (a time not set yet), the value otherwise. */
void json_add_null(struct json_object *o, const char *key);
void json_add_time_or_null(struct json_object *o, const char *key, int64_t us);

#endif
