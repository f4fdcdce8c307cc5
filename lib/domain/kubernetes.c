/*
 * kubernetes.c - DeviceClass names, CEL selectors and their split, the
 * YAML writer (see kubernetes.h).
 */
#include "kubernetes.h"

#include <json-c/json.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define SEL_PREFIX                                                                       \
	"device.driver == '" K8S_DRIVER "' && device.attributes['" K8S_DRIVER "'].type " \
	"in ['gpu', 'mig'] && device.attributes['" K8S_DRIVER "'].uuid in ["
#define SEL_SUFFIX "]"

bool
k8s_uuid_ok(const char *uuid)
{
	size_t n = 0;

	for (const char *p = uuid; *p != '\0'; p++, n++) {
		char c = *p;

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			c == '-' || c == '/'))
			return false;
	}
	return n >= 1 && n <= K8S_UUID_MAX;
}

const char *
k8s_class_name(struct arena *a, const char *project, const char *pool, int chunk)
{
	if (chunk == 0)
		return arena_printf(a, K8S_CLASS_PREFIX "%s.%s", project, pool);
	return arena_printf(a, K8S_CLASS_PREFIX "%s.%s.%d", project, pool, chunk + 1);
}

bool
k8s_dns_subdomain(const char *s)
{
	size_t n = strlen(s), label = 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];

		if (c == '.') {
			if (label == 0 || s[i - 1] == '-')
				return false;
			label = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
			return false;
		if (c == '-' && label == 0)
			return false;
		label++;
	}
	return label > 0 && s[n - 1] != '-';
}

size_t
k8s_selector_len(const char *const *uuids, int n)
{
	size_t len = strlen(SEL_PREFIX) + strlen(SEL_SUFFIX);

	for (int i = 0; i < n; i++)
		len += strlen(uuids[i]) + 2 + (i > 0 ? 2 : 0); /* 'uuid' and ", " between */
	return len;
}

const char *
k8s_selector(struct arena *a, const char *const *uuids, int n)
{
	size_t len = k8s_selector_len(uuids, n), used = 0;
	char *s = arena_alloc(a, len + 1);
	int w;

	/* every write bounded by what is left; the length was computed above */
	w = snprintf(s, len + 1, "%s", SEL_PREFIX);
	for (int i = 0; i < n && w >= 0 && (size_t)w <= len - used; i++) {
		used += (size_t)w;
		w = snprintf(s + used, len + 1 - used, "%s'%s'", i > 0 ? ", " : "", uuids[i]);
	}
	if (w < 0 || (size_t)w > len - used)
		return NULL;
	used += (size_t)w;
	w = snprintf(s + used, len + 1 - used, "%s", SEL_SUFFIX);
	return w < 0 || (size_t)w > len - used ? NULL : s;
}

int
k8s_selector_split(const char *const *uuids, int n, size_t max, int *starts, int max_runs)
{
	size_t base = strlen(SEL_PREFIX) + strlen(SEL_SUFFIX), len = base;
	int runs = 1, in_run = 0;

	if (max_runs < 1 || base > max)
		return -1;
	starts[0] = 0;
	for (int i = 0; i < n; i++) {
		size_t item = strlen(uuids[i]) + 2;

		if (base + item > max)
			return -1; /* fits in no expression */
		if (len + item + (in_run > 0 ? 2 : 0) > max) {
			if (runs == max_runs)
				return -1;
			starts[runs++] = i;
			len = base;
			in_run = 0;
		}
		len += item + (in_run > 0 ? 2 : 0);
		in_run++;
	}
	return runs;
}

/* ---- YAML ---- */

static void
pad(struct strbuf *b, int indent)
{
	strbuf_printf(b, "%*s", indent, "");
}

/* A double-quoted scalar: JSON's escapes are YAML's too (YAML 1.2 5.7). */
static void
yaml_quoted(struct strbuf *b, const char *s)
{
	strbuf_printf(b, "\"");
	for (const unsigned char *p = (const unsigned char *)s; *p != '\0'; p++) {
		switch (*p) {
		case '"':
			strbuf_printf(b, "\\\"");
			break;
		case '\\':
			strbuf_printf(b, "\\\\");
			break;
		case '\n':
			strbuf_printf(b, "\\n");
			break;
		case '\t':
			strbuf_printf(b, "\\t");
			break;
		case '\r':
			strbuf_printf(b, "\\r");
			break;
		default:
			if (*p < 0x20 || *p == 0x7f)
				strbuf_printf(b, "\\u%04x", *p);
			else
				strbuf_printf(b, "%c", *p);
		}
	}
	strbuf_printf(b, "\"");
}

/* A key that YAML 1.1 or 1.2 could read as a bool, null or number stays quoted. */
static bool
plain_key(const char *k)
{
	static const char *const special[] = { "y", "n", "yes", "no", "true", "false", "on", "off",
		"null", NULL };

	if (!((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z')))
		return false;
	for (const char *p = k; *p != '\0'; p++) {
		char c = *p;

		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
			c == '.' || c == '_' || c == '/' || c == '-'))
			return false;
	}
	for (int i = 0; special[i] != NULL; i++)
		if (strcasecmp(k, special[i]) == 0)
			return false;
	return true;
}

static bool
is_block(struct json_object *v)
{
	return (json_object_is_type(v, json_type_object) && json_object_object_length(v) > 0) ||
	    (json_object_is_type(v, json_type_array) && json_object_array_length(v) > 0);
}

static void
scalar(struct strbuf *b, struct json_object *v)
{
	switch (json_object_get_type(v)) {
	case json_type_null:
		strbuf_printf(b, "null");
		break;
	case json_type_boolean:
		strbuf_printf(b, "%s", json_object_get_boolean(v) ? "true" : "false");
		break;
	case json_type_int:
		strbuf_printf(b, "%lld", (long long)json_object_get_int64(v));
		break;
	case json_type_double:
		strbuf_printf(b, "%.17g", json_object_get_double(v));
		break;
	case json_type_string:
		yaml_quoted(b, json_object_get_string(v));
		break;
	case json_type_object:
		strbuf_printf(b, "{}");
		break;
	case json_type_array:
		strbuf_printf(b, "[]");
		break;
	}
}

static void seq_body(struct strbuf *b, struct json_object *a, int indent, bool inline_first);

static void
map_body(struct strbuf *b, struct json_object *o, int indent, bool inline_first)
{
	bool first = true;

	json_object_object_foreach(o, k, v)
	{
		if (!(first && inline_first))
			pad(b, indent);
		first = false;
		if (plain_key(k))
			strbuf_printf(b, "%s", k);
		else
			yaml_quoted(b, k);
		if (!is_block(v)) {
			strbuf_printf(b, ": ");
			scalar(b, v);
			strbuf_printf(b, "\n");
		} else if (json_object_is_type(v, json_type_object)) {
			strbuf_printf(b, ":\n");
			map_body(b, v, indent + 2, false);
		} else {
			strbuf_printf(b, ":\n");
			seq_body(b, v, indent + 2, false);
		}
	}
}

static void
seq_body(struct strbuf *b, struct json_object *a, int indent, bool inline_first)
{
	size_t n = json_object_array_length(a);

	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(a, i);

		if (!(i == 0 && inline_first))
			pad(b, indent);
		strbuf_printf(b, "- ");
		if (!is_block(v)) {
			scalar(b, v);
			strbuf_printf(b, "\n");
		} else if (json_object_is_type(v, json_type_object)) {
			map_body(b, v, indent + 2, true);
		} else {
			seq_body(b, v, indent + 2, true);
		}
	}
}

void
k8s_yaml(struct strbuf *b, struct json_object *v)
{
	if (!is_block(v)) {
		scalar(b, v);
		strbuf_printf(b, "\n");
	} else if (json_object_is_type(v, json_type_object)) {
		map_body(b, v, 0, false);
	} else {
		seq_body(b, v, 0, false);
	}
}
