/*
 * json.c - strict parsing and typed readers (see json.h).
 */
#include "json.h"
#include "timeutil.h"

#include <errno.h>
#include <string.h>

static void
json_put_cb(void *p)
{
	json_object_put(p);
}

struct json_object *
json_own(struct arena *a, struct json_object *obj)
{
	if (obj != NULL)
		arena_defer(a, json_put_cb, obj);
	return obj;
}

const char *
json_to_arena(struct arena *a, struct json_object *obj, size_t *len)
{
	size_t n;
	const char *s = json_object_to_json_string_length(obj,
		JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &n);
	char *d = arena_strndup(a, s, n);

	if (len != NULL)
		*len = n;
	return d;
}

/*
 * RFC 3629 UTF-8: no overlong forms, no surrogates, nothing above
 * U+10FFFF. json-c's own check only looks at the byte pattern and lets
 * those through to PostgreSQL, which then refuses them. Returns the
 * offset of the first bad byte, or len when all is well.
 */
static size_t
utf8_check(const unsigned char *s, size_t len)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		uint32_t cp, min;
		size_t n;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			n = 1;
			cp = c & 0x1F;
			min = 0x80;
		} else if ((c & 0xF0) == 0xE0) {
			n = 2;
			cp = c & 0x0F;
			min = 0x800;
		} else if ((c & 0xF8) == 0xF0) {
			n = 3;
			cp = c & 0x07;
			min = 0x10000;
		} else {
			return i;
		}
		if (len - i <= n)
			return i;
		for (size_t k = 1; k <= n; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return i;
			cp = (cp << 6) | (uint32_t)(s[i + k] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return i;
		i += n + 1;
	}
	return len;
}

int
json_parse_object(struct arena *a, const char *body, size_t len,
		  struct json_object **out, struct gp_error *err)
{
	struct json_tokener *tok;
	struct json_object *obj;
	enum json_tokener_error jerr;
	bool ended = false;
	size_t end;

	if (body == NULL || len == 0)
		return gp_error_set(err, 400, "malformed_json", "the request body is empty");
	if (len > INT32_MAX)
		return gp_error_set(err, 413, "payload_too_large", "the request body is too large");
	end = utf8_check((const unsigned char *)body, len);
	if (end != len)
		return gp_error_set(err, 400, "malformed_json",
				    "the body is not valid UTF-8 at byte %zu", end);
	tok = json_tokener_new_ex(JSON_MAX_DEPTH);
	if (tok == NULL)
		return gp_error_set(err, 500, "internal", "could not allocate a JSON parser");
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
	obj = json_tokener_parse_ex(tok, body, (int)len);
	jerr = json_tokener_get_error(tok);
	end = json_tokener_get_parse_end(tok);
	if (jerr == json_tokener_continue) {
		/* a number or literal may end exactly at the end of the input: say it is over */
		obj = json_tokener_parse_ex(tok, "", 1);
		jerr = json_tokener_get_error(tok);
		end = len;
		ended = true;
	}
	json_tokener_free(tok);
	if (jerr != json_tokener_success) {
		json_object_put(obj);
		if (ended)
			return gp_error_set(err, 400, "malformed_json", "the JSON body is truncated");
		if (jerr == json_tokener_error_depth)
			return gp_error_set(err, 400, "malformed_json",
					    "the JSON body is nested deeper than %d levels", JSON_MAX_DEPTH);
		return gp_error_set(err, 400, "malformed_json", "the body is not valid JSON: %s at byte %zu",
				    json_tokener_error_desc(jerr), end);
	}
	json_own(a, obj);
	/* only JSON whitespace may follow (not NUL, which strchr would match) */
	while (end < len && (body[end] == ' ' || body[end] == '\t' || body[end] == '\r' ||
			     body[end] == '\n'))
		end++;
	if (end != len)
		return gp_error_set(err, 400, "malformed_json",
				    "unexpected data after the JSON value at byte %zu", end);
	if (obj == NULL || !json_object_is_type(obj, json_type_object)) {
		/* obj is NULL for a JSON null */
		gp_error_set(err, 422, "validation_failed", "the body must be a JSON object");
		return gp_error_field(err, "", "must be a JSON object");
	}
	*out = obj;
	return 0;
}

void
jf_init(struct jfields *f, struct arena *a, struct json_object *obj,
	const char *path, struct gp_error *err)
{
	memset(f, 0, sizeof(*f));
	f->arena = a;
	f->obj = obj;
	f->path = path ? path : "";
	f->err = err;
}

const char *
jf_path(struct jfields *f, const char *key)
{
	if (f->path[0] == '\0')
		return key;
	return arena_printf(f->arena, "%s.%s", f->path, key);
}

static struct json_object *
jf_lookup(struct jfields *f, const char *key, bool required)
{
	struct json_object *v = NULL;

	if (f->nseen < JF_MAX_KEYS)
		f->seen[f->nseen++] = key;
	if (!json_object_object_get_ex(f->obj, key, &v) || v == NULL) {
		if (required)
			gp_error_field(f->err, jf_path(f, key), "is required");
		return NULL;
	}
	return v;
}

bool
jf_has(struct jfields *f, const char *key)
{
	return json_object_object_get_ex(f->obj, key, NULL);
}

int
jf_string(struct jfields *f, const char *key, bool required, size_t maxlen,
	  const char **out)
{
	struct json_object *v = jf_lookup(f, key, required);
	size_t n;

	if (v == NULL)
		return required ? -1 : 0;
	if (!json_object_is_type(v, json_type_string))
		return gp_error_field(f->err, jf_path(f, key), "must be a string");
	n = (size_t)json_object_get_string_len(v);
	if (n > maxlen)
		return gp_error_field(f->err, jf_path(f, key), "must be at most %zu bytes", maxlen);
	if (memchr(json_object_get_string(v), '\0', n) != NULL)
		return gp_error_field(f->err, jf_path(f, key), "must not contain NUL characters");
	*out = json_object_get_string(v);
	return 0;
}

int
jf_int(struct jfields *f, const char *key, bool required, int64_t min,
       int64_t max, int64_t *out, bool *present)
{
	struct json_object *v = jf_lookup(f, key, required);
	int64_t n;

	if (present != NULL)
		*present = false;
	if (v == NULL)
		return required ? -1 : 0;
	if (!json_object_is_type(v, json_type_int))
		return gp_error_field(f->err, jf_path(f, key), "must be an integer");
	errno = 0;
	n = json_object_get_int64(v);
	if (n < min || n > max || (n == INT64_MAX && json_object_get_uint64(v) > (uint64_t)INT64_MAX))
		return gp_error_field(f->err, jf_path(f, key), "must be between %lld and %lld",
				      (long long)min, (long long)max);
	*out = n;
	if (present != NULL)
		*present = true;
	return 0;
}

int
jf_bool(struct jfields *f, const char *key, bool required, bool *out, bool *present)
{
	struct json_object *v = jf_lookup(f, key, required);

	if (present != NULL)
		*present = false;
	if (v == NULL)
		return required ? -1 : 0;
	if (!json_object_is_type(v, json_type_boolean))
		return gp_error_field(f->err, jf_path(f, key), "must be a boolean");
	*out = json_object_get_boolean(v);
	if (present != NULL)
		*present = true;
	return 0;
}

int
jf_time(struct jfields *f, const char *key, bool required, int64_t *out_us, bool *present)
{
	const char *s = NULL;

	if (present != NULL)
		*present = false;
	if (jf_string(f, key, required, 64, &s) < 0)
		return -1;
	if (s == NULL)
		return 0;
	if (time_parse_rfc3339(s, out_us) < 0)
		return gp_error_field(f->err, jf_path(f, key), "must be an RFC 3339 timestamp");
	if (present != NULL)
		*present = true;
	return 0;
}

int
jf_array(struct jfields *f, const char *key, bool required, struct json_object **out)
{
	struct json_object *v = jf_lookup(f, key, required);

	if (v == NULL)
		return required ? -1 : 0;
	if (!json_object_is_type(v, json_type_array))
		return gp_error_field(f->err, jf_path(f, key), "must be an array");
	*out = v;
	return 0;
}

int
jf_object(struct jfields *f, const char *key, bool required, struct json_object **out)
{
	struct json_object *v = jf_lookup(f, key, required);

	if (v == NULL)
		return required ? -1 : 0;
	if (!json_object_is_type(v, json_type_object))
		return gp_error_field(f->err, jf_path(f, key), "must be an object");
	*out = v;
	return 0;
}

int
jf_finish(struct jfields *f)
{
	json_object_object_foreach(f->obj, key, val) {
		bool known = false;

		(void)val;
		for (int i = 0; i < f->nseen; i++) {
			if (strcmp(f->seen[i], key) == 0) {
				known = true;
				break;
			}
		}
		if (!known)
			gp_error_field(f->err, jf_path(f, key), "is not a known field");
	}
	return gp_error_isset(f->err) ? -1 : 0;
}

void
json_add_str(struct json_object *o, const char *key, const char *val)
{
	json_object_object_add(o, key, val ? json_object_new_string(val) : NULL);
}

void
json_add_int(struct json_object *o, const char *key, int64_t val)
{
	json_object_object_add(o, key, json_object_new_int64(val));
}

void
json_add_bool(struct json_object *o, const char *key, bool val)
{
	json_object_object_add(o, key, json_object_new_boolean(val));
}

void
json_add_time(struct json_object *o, const char *key, int64_t us)
{
	char buf[40];

	if (us == 0) {
		json_object_object_add(o, key, NULL);
		return;
	}
	time_format_rfc3339(us, buf, sizeof(buf));
	json_object_object_add(o, key, json_object_new_string(buf));
}
