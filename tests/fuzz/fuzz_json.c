/*
 * fuzz_json.c - libFuzzer harness for the JSON body reader
 * (json_parse_object: strict UTF-8, depth limit, trailing data,
 * duplicate and NUL member names) and the typed field readers (jf_*),
 * walked over whatever object comes out the way a handler reads a body.
 *
 * Invariants checked beyond "no sanitizer report": a parse either
 * succeeds with an object or fails with a status of 400, 413 or 422;
 * an accepted object serializes to JSON that parses again to an equal
 * object (json-c's own output passes our checks);
 * every reader failure leaves an error with a field path.
 */
#include "core/arena.h"
#include "core/error.h"
#include "core/json.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const keys[] = { "name", "display_name", "pool", "items", "labels", "count",
	"spec", "starts_at", "ends_at", "enabled", "x", "" };

static void
walk(struct arena *a, struct json_object *obj, const char *path, int depth)
{
	struct gp_error err;
	struct jfields f;

	memset(&err, 0, sizeof(err));
	jf_init(&f, a, obj, path, &err);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *k = keys[i], *s = NULL;
		struct json_object *sub = NULL;
		int64_t n = 0, t = 0;
		bool b = false, present = false;

		switch (i % 6) {
		case 0:
			(void)jf_string(&f, k, false, 63, &s);
			if (s != NULL && strlen(s) > 63)
				abort();
			break;
		case 1:
			(void)jf_int(&f, k, false, -5, 4096, &n, &present);
			if (present && (n < -5 || n > 4096))
				abort();
			break;
		case 2:
			(void)jf_time(&f, k, false, &t, &present);
			break;
		case 3:
			(void)jf_bool(&f, k, false, &b, &present);
			break;
		case 4:
			if (jf_array(&f, k, false, &sub) == 0 && sub != NULL && depth < 4) {
				size_t len = json_object_array_length(sub);

				for (size_t j = 0; j < len && j < 8; j++) {
					struct json_object *e = json_object_array_get_idx(sub, j);

					if (json_object_is_type(e, json_type_object))
						walk(a, e,
						    arena_printf(a, "%s[%zu]", jf_path(&f, k), j),
						    depth + 1);
				}
			}
			break;
		default:
			if (jf_object(&f, k, false, &sub) == 0 && sub != NULL && depth < 4)
				walk(a, sub, jf_path(&f, k), depth + 1);
			break;
		}
	}
	(void)jf_has(&f, "name");
	if (jf_finish(&f) < 0 && (err.status != 422 || err.nfields < 1))
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a = arena_create();
	struct json_object *obj = NULL;
	struct gp_error err;

	memset(&err, 0, sizeof(err));
	if (json_parse_object(a, (const char *)data, size, &obj, &err) == 0) {
		struct json_object *again = NULL;
		const char *text;
		size_t len = 0;

		if (obj == NULL || !json_object_is_type(obj, json_type_object))
			abort();
		walk(a, obj, "", 0);
		/* what we accepted serializes to JSON we accept again, unchanged */
		text = json_to_arena(a, obj, &len);
		memset(&err, 0, sizeof(err));
		if (json_parse_object(a, text, len, &again, &err) < 0 ||
		    !json_object_equal(obj, again))
			abort();
	} else if (err.status != 400 && err.status != 413 && err.status != 422) {
		abort();
	}
	arena_destroy(a);
	return 0;
}
