/*
 * common.c - helpers shared by the handlers: bodies, pagination,
 * cursors, If-Match/ETag, audit rows, ids in paths.
 */
#include "api.h"

#include "core/timeutil.h"
#include "crypto/digest.h"
#include "db/db_audit.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct app *
api_app(const struct request *req)
{
	return req->ctx;
}

enum role
api_role(const struct request *req)
{
	return (enum role)req->principal.role;
}

bool
api_sees_all_projects(const struct request *req)
{
	return role_sees_all_projects(api_role(req));
}

#define PAGE_DEFAULT 50
#define PAGE_MAX 500

int
api_body(struct request *req, struct json_object **out, struct gp_error *err)
{
	return json_parse_object(req->arena, req->body, req->body_len, out, err);
}

bool
api_content_type_is(const struct request *req, const char *type)
{
	const char *ct = req->header(req, "Content-Type");
	size_t n = strlen(type);

	if (ct == NULL)
		return false;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	/* RFC 9110 8.3.1: type/subtype, then optional whitespace and ";" parameters */
	if (strncasecmp(ct, type, n) != 0)
		return false;
	ct += n;
	while (*ct == ' ' || *ct == '\t')
		ct++;
	return *ct == '\0' || *ct == ';';
}

bool
api_merge_patch(const struct request *req)
{
	return strcmp(req->method, "PATCH") == 0 &&
	    api_content_type_is(req, "application/merge-patch+json");
}

int
api_patch_not_null(struct request *req, struct json_object *body, const char *const *keys,
    struct gp_error *err)
{
	int rc = 0;

	if (!api_merge_patch(req))
		return 0;
	for (size_t i = 0; keys[i] != NULL; i++) {
		struct json_object *v;

		if (json_object_object_get_ex(body, keys[i], &v) && v == NULL)
			rc = gp_error_field(err, keys[i],
			    "cannot be removed: null in a merge patch removes a member, and "
			    "this one always has a value");
	}
	return rc;
}

static bool
parse_int64(const char *s, int64_t *out)
{
	char *end;
	long long v;

	if (s == NULL || *s == '\0' || *s == ' ' || *s == '+')
		return false;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return false;
	*out = v;
	return true;
}

/*
 * What a cursor is bound to: the concrete path (a project's members, not
 * another's) and its filters, canonical: every query argument but cursor
 * and limit, by name, each name once with its first value, length-prefixed
 * so that no two listings give the same text.
 */
static const char *
cursor_listing(struct request *req)
{
	int n = 0, m = 0;
	const char *const *names = req->query_names != NULL ? req->query_names(req, &n) : NULL;
	const char **sorted = arena_alloc(req->arena, sizeof(*sorted) * (size_t)(n > 0 ? n : 1));
	const char *out = arena_printf(req->arena, "%zu:%s?", strlen(req->path ? req->path : ""),
	    req->path ? req->path : "");

	for (int i = 0; i < n; i++) {
		int j;

		if (strcmp(names[i], "cursor") == 0 || strcmp(names[i], "limit") == 0)
			continue;
		for (j = m; j > 0 && strcmp(sorted[j - 1], names[i]) > 0; j--)
			sorted[j] = sorted[j - 1];
		if (j > 0 && strcmp(sorted[j - 1], names[i]) == 0) {
			/* sent twice: once is enough (the first value counts) */
			memmove(&sorted[j], &sorted[j + 1], sizeof(*sorted) * (size_t)(m - j));
			continue;
		}
		sorted[j] = names[i];
		m++;
	}
	for (int i = 0; i < m; i++) {
		const char *v = req->query(req, sorted[i]);

		v = v != NULL ? v : "";
		out = arena_printf(req->arena, "%s%zu:%s=%zu:%s;", out, strlen(sorted[i]),
		    sorted[i], strlen(v), v);
	}
	return out;
}

/*
 * The id of the cursor key: the first 8 hex digits of HMAC(key, "key id"),
 * carried in every cursor so that a cursor names the key that signed it.
 */
static void
cursor_key_id(const char *key, char *kid)
{
	char full[65];

	digest_hmac_sha256_hex(key, strlen(key), "key id", 6, full);
	memcpy(kid, full, 8);
	kid[8] = '\0';
}

/* The signature of a cursor: HMAC-SHA256(key, listing + position), 16 hex digits. */
static void
cursor_sign(struct request *req, const char *key, int64_t pos, char *sig)
{
	const char *msg =
	    arena_printf(req->arena, "%s%llx", cursor_listing(req), (unsigned long long)pos);
	char full[65];

	digest_hmac_sha256_hex(key, strlen(key), msg, strlen(msg), full);
	memcpy(sig, full, 16);
	sig[16] = '\0';
}

const char *
api_cursor_encode(struct request *req, int64_t pos)
{
	const char *key = api_app(req) != NULL ? api_app(req)->cursor_key : "";
	char sig[17], kid[9];

	/*
	 * "c<hex position>.<key id>.<signature>": opaque, URL-safe, valid
	 * only for its path and filters
	 */
	cursor_key_id(key, kid);
	cursor_sign(req, key, pos, sig);
	return arena_printf(req->arena, "c%llx.%s.%s", (unsigned long long)pos, kid, sig);
}

static bool
cursor_decode(struct request *req, const char *s, int64_t *out)
{
	const char *key = api_app(req) != NULL ? api_app(req)->cursor_key : "";
	char *end;
	unsigned long long v;
	char sig[17], kid[9];

	if (s[0] != 'c' || s[1] == '\0' || strlen(s) > 43)
		return false;
	errno = 0;
	v = strtoull(s + 1, &end, 16);
	if (errno != 0 || *end != '.' || end == s + 1 || v > (unsigned long long)INT64_MAX)
		return false;
	if (strlen(end + 1) != 8 + 1 + 16 || end[9] != '.')
		return false;
	/*
	 * the key that signed it: the current one, or the one before the last
	 * rotation until its overlap ends (then its cursors are refused)
	 */
	cursor_key_id(key, kid);
	if (strncmp(end + 1, kid, 8) != 0) {
		const struct app *app = api_app(req);

		if (app == NULL || app->cursor_key_prev[0] == '\0' ||
		    time(NULL) >= app->cursor_prev_until_s)
			return false;
		key = app->cursor_key_prev;
		cursor_key_id(key, kid);
		if (strncmp(end + 1, kid, 8) != 0)
			return false;
	}
	cursor_sign(req, key, (int64_t)v, sig);
	{
		unsigned char diff = 0; /* constant time: no early exit on a mismatch */

		for (int i = 0; i < 16; i++)
			diff |= (unsigned char)(end[10 + i] ^ sig[i]);
		if (diff != 0)
			return false;
	}
	*out = (int64_t)v;
	return true;
}

int
api_page(struct request *req, int *limit, int64_t *cursor, struct gp_error *err)
{
	const char *l = req->query(req, "limit");
	const char *c = req->query(req, "cursor");
	int64_t v;

	*limit = PAGE_DEFAULT;
	*cursor = 0;
	if (l != NULL) {
		if (!parse_int64(l, &v) || v < 1 || v > PAGE_MAX)
			return gp_error_field(err, "limit", "must be an integer from 1 to %d",
			    PAGE_MAX);
		*limit = (int)v;
	}
	if (c != NULL && !cursor_decode(req, c, cursor))
		return gp_error_field(err, "cursor",
		    "is not a cursor this server issued for this listing");
	return 0;
}

void
api_reply_list(struct request *req, struct response *res, struct json_object *items, int64_t next)
{
	struct json_object *o = json_object_new_object();

	json_object_object_add(o, "items", items);
	json_add_str(o, "next_cursor", next ? api_cursor_encode(req, next) : NULL);
	response_json(req, res, 200, o);
}

/*
 * Scan an If-Match value: "*" or a list of entity tags (RFC 9110 8.8.3,
 * 13.1.1; empty list elements are allowed, 5.6.1). -1 when it is not
 * that syntax. *star for "*"; *strong when a strong tag equals want
 * (octet by octet); *weak when only a weak one does.
 */
static int
if_match_scan(const char *h, const char *want, bool *star, bool *strong, bool *weak)
{
	size_t wl = strlen(want);
	const char *p = h;
	int n = 0;

	*star = *strong = *weak = false;
	for (;;) {
		while (*p == ' ' || *p == '\t' || *p == ',')
			p++;
		if (*p == '\0')
			break;
		if (*p == '*') {
			*star = true;
			p++;
		} else {
			bool w = strncmp(p, "W/", 2) == 0;
			const char *tag;

			if (w)
				p += 2;
			if (*p != '"')
				return -1;
			tag = ++p;
			/* etagc: %x21 / %x23-7E / obs-text */
			while (*p != '"') {
				unsigned char c = (unsigned char)*p;

				if (c < 0x21 || c == 0x7f)
					return -1;
				p++;
			}
			if ((size_t)(p - tag) == wl && memcmp(tag, want, wl) == 0) {
				if (w)
					*weak = true;
				else
					*strong = true;
			}
			p++;
		}
		n++;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p != ',' && *p != '\0')
			return -1;
	}
	/* "*" stands alone */
	return n == 0 || (*star && n > 1) ? -1 : 0;
}

int
api_if_match(struct request *req, struct api_if_match *m, struct gp_error *err)
{
	const char *h = req->header_list != NULL ? req->header_list(req, "If-Match")
						 : req->header(req, "If-Match");
	bool strong, weak;

	memset(m, 0, sizeof(*m));
	if (h == NULL)
		return 0;
	if (if_match_scan(h, "", &m->any, &strong, &weak) < 0)
		return gp_error_set(err, 412, "precondition_failed",
		    "If-Match must be \"*\" or a list of entity tags (RFC 9110 13.1.1)");
	m->value = h;
	return 0;
}

int
api_if_match_check(const struct api_if_match *m, int64_t generation, const char *what,
    int64_t *guard, struct gp_error *err)
{
	char want[24];
	bool star, strong, weak;

	*guard = 0;
	if (m->value == NULL || m->any)
		return 0;
	snprintf(want, sizeof(want), "%lld", (long long)generation);
	if (if_match_scan(m->value, want, &star, &strong, &weak) < 0 || !strong) {
		if (weak)
			/* RFC 9110 13.1.1: If-Match compares strongly, a weak tag never matches */
			return gp_error_set(err, 412, "precondition_failed",
			    "If-Match needs a strong ETag (without W/): the %s is at \"%s\"", what,
			    want);
		return gp_error_set(err, 412, "precondition_failed",
		    "the %s changed since it was read: its ETag is \"%s\", not one If-Match lists",
		    what, want);
	}
	*guard = generation;
	return 0;
}

void
api_etag(struct request *req, struct response *res, int64_t generation)
{
	response_header(res, "ETag", arena_printf(req->arena, "\"%lld\"", (long long)generation));
}

int
api_audit(struct db *db, struct request *req, const char *action, const char *object_type,
    const char *object_id, int64_t project_id, struct json_object *before,
    struct json_object *after, struct gp_error *err)
{
	struct audit_entry e;

	memset(&e, 0, sizeof(e));
	e.actor_id = req->principal.user_id;
	e.actor = req->principal.username;
	e.action = action;
	e.object_type = object_type;
	e.object_id = object_id;
	e.project_id = project_id;
	e.request_id = req->request_id;
	e.before_json = before ? json_to_arena(req->arena, before, NULL) : NULL;
	e.after_json = after ? json_to_arena(req->arena, after, NULL) : NULL;
	return db_audit_insert(db, req->arena, &e, err);
}

int
api_param_id(struct request *req, int idx, int64_t *out, struct gp_error *err)
{
	if (idx >= req->nparams || !parse_int64(req->params[idx], out) || *out < 1)
		return gp_error_set(err, 404, "not_found", "no such object");
	return 0;
}

int
api_query_time(struct request *req, const char *name, int64_t *out, struct gp_error *err)
{
	const char *v = req->query(req, name);

	*out = 0;
	if (v == NULL)
		return 0;
	if (time_parse_rfc3339(v, out) < 0)
		return gp_error_field(err, name, "must be an RFC 3339 timestamp");
	return 0;
}

bool
api_dns_label(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 63 || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return false;
	return true;
}
