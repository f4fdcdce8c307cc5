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

/*
 * Duplicate member names and member names with NUL. json-c keeps the last of two equal keys
 * without saying so; a request that names a field twice is ambiguous,
 * so it is refused. One pass over input already known to be strict JSON
 * (at most JSON_MAX_DEPTH levels): a stack of containers, each object
 * with a hash set of its keys (raw bytes between the quotes, so "a" and
 * "\u0061" count as different; escapes are rare in member names).
 * json-c keeps member names as C strings: "pool\u0000" would become
 * "pool" and slip past this check and jf_finish(), so a name with an
 * escaped NUL (the only character json-c cannot keep in a name; strict
 * mode refuses raw control characters) is refused too.
 */
struct key_ref {
	uint32_t off;
	uint32_t len; /* 0: empty slot (keys get len + 1) */
};

struct dup_frame {
	bool object;
	bool want_key;
	int index;           /* arrays: the current element */
	struct key_ref cur;  /* objects: the current member's key */
	struct key_ref *tab; /* open addressing, cap a power of 2 */
	uint32_t cap;
	uint32_t n;
};

static uint32_t
key_hash(const char *s, uint32_t len)
{
	uint32_t h = 2166136261u;

	for (uint32_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

/* Add key k to frame f; false when it is there already. */
static bool
key_add(struct arena *a, const char *body, struct dup_frame *f, struct key_ref k)
{
	uint32_t i;

	if ((f->n + 1) * 2 > f->cap) {
		uint32_t cap = f->cap ? f->cap * 2 : 16;
		struct key_ref *tab = arena_alloc(a, sizeof(*tab) * cap);

		memset(tab, 0, sizeof(*tab) * cap);
		for (uint32_t j = 0; j < f->cap; j++) {
			if (f->tab[j].len == 0)
				continue;
			i = key_hash(body + f->tab[j].off, f->tab[j].len - 1) & (cap - 1);
			while (tab[i].len != 0)
				i = (i + 1) & (cap - 1);
			tab[i] = f->tab[j];
		}
		f->tab = tab;
		f->cap = cap;
	}
	i = key_hash(body + k.off, k.len) & (f->cap - 1);
	while (f->tab[i].len != 0) {
		if (f->tab[i].len - 1 == k.len &&
		    memcmp(body + f->tab[i].off, body + k.off, k.len) == 0)
			return false;
		i = (i + 1) & (f->cap - 1);
	}
	f->tab[i].off = k.off;
	f->tab[i].len = k.len + 1;
	f->n++;
	return true;
}

/* The member path of a duplicate key ("labels.zone", "items[1].model"). */
static const char *
dup_path(struct arena *a, const char *body, const struct dup_frame *st, int top, struct key_ref k)
{
	char *p = arena_printf(a, "%s", "");

	for (int i = 0; i < top; i++) {
		if (st[i].object)
			p = arena_printf(a, "%s%s%.*s", p, p[0] ? "." : "", (int)st[i].cur.len,
			    body + st[i].cur.off);
		else
			p = arena_printf(a, "%s[%d]", p, st[i].index);
	}
	return arena_printf(a, "%s%s%.*s", p, p[0] ? "." : "", (int)k.len, body + k.off);
}

static int
duplicate_keys(struct arena *a, const char *body, size_t len, struct gp_error *err)
{
	struct dup_frame st[JSON_MAX_DEPTH + 2];
	int top = -1;

	for (size_t i = 0; i < len; i++) {
		char c = body[i];

		if (c == '"') {
			struct key_ref k = { (uint32_t)(i + 1), 0 };

			bool nul = false;

			for (i++; i < len && body[i] != '"'; i++) {
				/* RFC 8259 7: control characters are escaped in strings;
				 * json-c's strict mode lets them through */
				if ((unsigned char)body[i] < 0x20)
					return gp_error_set(err, 400, "malformed_json",
					    "the body is not valid JSON: a control character "
					    "(0x%02x) in a string at byte %zu",
					    (unsigned)(unsigned char)body[i], i);
				if (body[i] != '\\')
					continue;
				if (len - i > 5 && body[i + 1] == 'u' &&
				    memcmp(body + i + 2, "0000", 4) == 0)
					nul = true;
				i++;
			}
			k.len = (uint32_t)(i - k.off);
			if (top >= 0 && st[top].object && st[top].want_key) {
				st[top].want_key = false;
				st[top].cur = k;
				if (nul)
					return gp_error_field(err, dup_path(a, body, st, top, k),
					    "member names must not contain NUL characters");
				if (!key_add(a, body, &st[top], k))
					return gp_error_field(err, dup_path(a, body, st, top, k),
					    "appears more than once in its object");
			}
		} else if (c == '\'') {
			/* RFC 8259 7: strings are double-quoted; json-c's strict mode
			 * takes single quotes too */
			return gp_error_set(err, 400, "malformed_json",
			    "the body is not valid JSON: a single-quoted string at byte %zu", i);
		} else if (c == 'N' || c == 'I') {
			/* NaN, Infinity, -Infinity: json-c's strict mode takes them,
			 * RFC 8259 6 does not (fuzz_json: NaN is not equal to itself
			 * once serialized and parsed again) */
			return gp_error_set(err, 400, "malformed_json",
			    "the body is not valid JSON: NaN and Infinity are not numbers of JSON "
			    "(byte %zu)",
			    i);
		} else if (c == '{' || c == '[') {
			if (top + 1 >= (int)(sizeof(st) / sizeof(st[0])))
				return 0; /* deeper than the parser allows: not reached */
			top++;
			memset(&st[top], 0, sizeof(st[top]));
			st[top].object = c == '{';
			st[top].want_key = c == '{';
		} else if (c == '}' || c == ']') {
			/*
			 * never below the outermost frame: the parser accepted the
			 * body, but this scan reads only double-quoted strings, so
			 * brackets inside anything else it let through must not
			 * move it out of st[] (fuzz_json found index -1)
			 */
			if (top >= 0)
				top--;
		} else if (c == ',' && top >= 0) {
			if (st[top].object)
				st[top].want_key = true;
			else
				st[top].index++;
		}
	}
	return 0;
}

int
json_parse_object(struct arena *a, const char *body, size_t len, struct json_object **out,
    struct gp_error *err)
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
			return gp_error_set(err, 400, "malformed_json",
			    "the JSON body is truncated");
		if (jerr == json_tokener_error_depth)
			return gp_error_set(err, 400, "malformed_json",
			    "the JSON body is nested deeper than %d levels", JSON_MAX_DEPTH);
		return gp_error_set(err, 400, "malformed_json",
		    "the body is not valid JSON: %s at byte %zu", json_tokener_error_desc(jerr),
		    end);
	}
	json_own(a, obj);
	/* only JSON whitespace may follow (not NUL, which strchr would match) */
	while (end < len &&
	    (body[end] == ' ' || body[end] == '\t' || body[end] == '\r' || body[end] == '\n'))
		end++;
	if (end != len)
		return gp_error_set(err, 400, "malformed_json",
		    "unexpected data after the JSON value at byte %zu", end);
	if (obj == NULL || !json_object_is_type(obj, json_type_object)) {
		/* obj is NULL for a JSON null */
		gp_error_set(err, 422, "validation_failed", "the body must be a JSON object");
		return gp_error_field(err, "", "must be a JSON object");
	}
	if (duplicate_keys(a, body, len, err) < 0)
		return -1;
	*out = obj;
	return 0;
}

void
jf_init(struct jfields *f, struct arena *a, struct json_object *obj, const char *path,
    struct gp_error *err)
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
jf_string(struct jfields *f, const char *key, bool required, size_t maxlen, const char **out)
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
jf_int(struct jfields *f, const char *key, bool required, int64_t min, int64_t max, int64_t *out,
    bool *present)
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
	if (n < min || n > max ||
	    (n == INT64_MAX && json_object_get_uint64(v) > (uint64_t)INT64_MAX))
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
jf_double(struct jfields *f, const char *key, bool required, double min, double max, double *out,
    bool *present)
{
	struct json_object *v = jf_lookup(f, key, required);
	double d;

	if (present != NULL)
		*present = false;
	if (v == NULL)
		return required ? -1 : 0;
	if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_double))
		return gp_error_field(f->err, jf_path(f, key), "must be a number");
	d = json_object_get_double(v);
	if (!(d >= min && d <= max))
		return gp_error_field(f->err, jf_path(f, key), "must be a number from %g to %g",
		    min, max);
	*out = d;
	if (present != NULL)
		*present = true;
	return 0;
}

int
jf_epoch_or_time(struct jfields *f, const char *key, bool required, int64_t *out_us, bool *present)
{
	struct json_object *v = jf_lookup(f, key, required);
	int64_t s;

	if (present != NULL)
		*present = v != NULL;
	if (v == NULL)
		return required ? -1 : 0;
	if (json_object_is_type(v, json_type_string))
		return jf_time(f, key, required, out_us, present);
	if (!json_object_is_type(v, json_type_int))
		return gp_error_field(f->err, jf_path(f, key),
		    "must be RFC 3339 text or seconds since the epoch");
	s = json_object_get_int64(v);
	if (s < 0 || s > INT64_C(253402300799))
		return gp_error_field(f->err, jf_path(f, key), "is out of range");
	*out_us = s * 1000000;
	return 0;
}

int
jf_finish(struct jfields *f)
{
	json_object_object_foreach(f->obj, key, val)
	{
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

void
json_add_null(struct json_object *o, const char *key)
{
	json_object_object_add(o, key, NULL);
}

void
json_add_time_or_null(struct json_object *o, const char *key, int64_t us)
{
	if (us != 0)
		json_add_time(o, key, us);
	else
		json_add_null(o, key);
}
