/*
 * dispatch.c - every check that precedes a handler, in one place:
 * route match (404/405), bearer authentication (401), global role (403),
 * content type (415), Idempotency-Key claim and replay; then the handler,
 * the problem+json conversion of its error, and the metrics.
 */
#include "dispatch.h"
#include "routes.h"
#include "ui.h"
#include "metrics.h"

#include "auth/node_cache.h"
#include "auth/token.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "db/db_agent.h"
#include "db/db_idempotency.h"
#include "db/db_users.h"
#include "workers/notifier.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define IDEMPOTENCY_KEY_MAX 200
/* how long a duplicate waits for the answer of the request holding its key */
#define IDEMPOTENCY_WAIT_US (500 * 1000)
#define IDEMPOTENCY_POLL_US (10 * 1000)
#define TOKEN_TOUCH_INTERVAL_US (60 * 1000000LL)

/* Match path against "/a/{}/b"; fills params. */
static bool
route_match(const char *pattern, const char *path, struct request *req, bool capture)
{
	const char *p = pattern, *s = path;
	int n = 0;

	while (*p != '\0' && *s != '\0') {
		if (p[0] == '{' && p[1] == '}') {
			const char *end = strchr(s, '/');
			size_t len = end ? (size_t)(end - s) : strlen(s);

			if (len == 0 || n >= REQUEST_MAX_PARAMS)
				return false;
			if (capture)
				req->params[n] = arena_strndup(req->arena, s, len);
			n++;
			p += 2;
			s += len;
			continue;
		}
		if (*p != *s)
			return false;
		p++;
		s++;
	}
	if (*p != '\0' || *s != '\0')
		return false;
	if (capture)
		req->nparams = n;
	return true;
}

#define FIND_ROUTE_OPTIONS (-2) /* an OPTIONS request answered by find_route itself */

/* The request's Origin when GPUPOOL_CORS_ORIGINS lists it exactly, else NULL. */
static const char *
cors_origin(struct request *req)
{
	const char *list = api_app(req) != NULL ? api_app(req)->cors_origins : NULL;
	const char *o = req->header(req, "Origin");
	size_t ol;

	if (list == NULL || o == NULL)
		return NULL;
	ol = strlen(o);
	while (*list != '\0') {
		const char *end = strchr(list, ',');
		size_t n = end != NULL ? (size_t)(end - list) : strlen(list);

		if (n == ol && strncmp(list, o, n) == 0)
			return o;
		list += n;
		if (*list == ',')
			list++;
	}
	return NULL;
}

/*
 * CORS (off unless GPUPOOL_CORS_ORIGINS is set): an allowed origin gets
 * Access-Control-Allow-Origin on every answer, and a preflight (OPTIONS
 * with Access-Control-Request-Method) the methods and headers it may use.
 * Bearer tokens, not cookies: no credentials mode.
 */
static void
cors_headers(struct request *req, struct response *res, const char *allow)
{
	const char *o = cors_origin(req);

	if (o == NULL)
		return;
	response_header(res, "Access-Control-Allow-Origin", o);
	response_header(res, "Vary", "Origin");
	response_header(res, "Access-Control-Expose-Headers",
	    "ETag, Location, Retry-After, X-Request-Id, Idempotent-Replayed, Accept-Patch");
	if (allow != NULL && req->header(req, "Access-Control-Request-Method") != NULL) {
		response_header(res, "Access-Control-Allow-Methods", allow);
		response_header(res, "Access-Control-Allow-Headers",
		    "Authorization, Content-Type, Idempotency-Key, If-Match, If-None-Match, "
		    "X-Request-Id");
		response_header(res, "Access-Control-Max-Age", "600");
	}
}

static int
find_route(struct request *req, struct response *res, struct gp_error *err)
{
	char allow[128] = "";
	size_t off = 0;
	bool path_known = false;

	bool head = strcmp(req->method, "HEAD") == 0;

	for (int i = 0; i < api_nroutes; i++) {
		bool is_get;

		if (!route_match(api_routes[i].pattern, req->path, req, false))
			continue;
		path_known = true;
		is_get = strcmp(api_routes[i].method, "GET") == 0;
		/* HEAD runs the GET handler; libmicrohttpd sends its headers only (RFC 9110 9.3.2) */
		if (strcmp(api_routes[i].method, req->method) == 0 || (head && is_get)) {
			route_match(api_routes[i].pattern, req->path, req, true);
			req->route_pattern = api_routes[i].pattern;
			return i;
		}
		if (off < sizeof(allow)) {
			int n = snprintf(allow + off, sizeof(allow) - off, "%s%s%s",
			    off > 0 ? ", " : "", api_routes[i].method, is_get ? ", HEAD" : "");

			if (n > 0)
				off += (size_t)n;
		}
	}
	if (path_known && off < sizeof(allow)) {
		int n = snprintf(allow + off, sizeof(allow) - off, ", OPTIONS");

		if (n > 0)
			off += (size_t)n;
	}
	if (path_known && strcmp(req->method, "OPTIONS") == 0) {
		/* RFC 9110 9.3.7: what this resource allows, no body */
		response_header(res, "Allow", arena_strdup(req->arena, allow));
		/* RFC 5789 3.1: a resource that takes PATCH says which patch formats */
		if (strstr(allow, "PATCH") != NULL)
			response_header(res, "Accept-Patch", API_ACCEPT_PATCH);
		response_empty(res, 204);
		cors_headers(req, res, arena_strdup(req->arena, allow));
		return FIND_ROUTE_OPTIONS;
	}
	if (path_known) {
		response_header(res, "Allow", arena_strdup(req->arena, allow));
		gp_error_set(err, 405, "method_not_allowed", "%s is not allowed on %s", req->method,
		    req->path);
	} else {
		gp_error_set(err, 404, "not_found", "no such endpoint: %s", req->path);
	}
	return -1;
}

static int
authenticate(struct request *req, bool with_projects, struct gp_error *err)
{
	const char *h = req->header(req, "Authorization");
	unsigned char digest[TOKEN_DIGEST_LEN];
	struct token_auth ta;
	bool found = false;
	size_t len;
	enum role role;

	if (h == NULL)
		return gp_error_set(err, 401, "unauthorized", "missing bearer token");
	if (strncasecmp(h, "Bearer ", 7) != 0)
		return gp_error_set(err, 401, "unauthorized",
		    "the Authorization header must be a bearer token");
	h += 7;
	len = strlen(h);
	if (len < 10 || len > TOKEN_MAX_LEN)
		return gp_error_set(err, 401, "unauthorized", "invalid or expired token");
	token_digest(h, len, digest);
	if (strncmp(h, "gpn_", 4) == 0) {
		/* a node token: the node comes from the token, never the request */
		struct app *app = api_app(req);
		uint64_t source = app->notifier != NULL
		    ? node_cache_source(notifier_connected(app->notifier),
			  notifier_reconnects(app->notifier))
		    : 0;
		int64_t node_id = 0;

		if (!node_cache_get(app->node_cache, digest, source, &node_id)) {
			uint64_t mark = node_cache_mark(app->node_cache);

			if (db_node_token_authenticate(db_thread(), req->arena, digest, &node_id,
				&found, err) < 0)
				return -1;
			if (!found)
				return gp_error_set(err, 401, "unauthorized",
				    "invalid or revoked node token");
			node_cache_put(app->node_cache, digest, node_id, source, mark);
		}
		req->principal.node_id = node_id;
		req->principal.username = arena_printf(req->arena, "node:%lld", (long long)node_id);
		req->principal.role = ROLE_NONE;
		return 0;
	}
	if (db_token_authenticate(db_thread(), req->arena, digest, with_projects, &ta, &found,
		err) < 0)
		return -1;
	if (!found || ta.digest == NULL || !token_digest_equal(ta.digest, digest))
		return gp_error_set(err, 401, "unauthorized", "invalid or expired token");
	if (role_parse(ta.role, &role) < 0)
		role = ROLE_NONE;
	req->principal.user_id = ta.user_id;
	req->principal.token_id = ta.token_id;
	req->principal.username = ta.username;
	req->principal.role = role;
	req->principal.projects_json = ta.projects_json;
	if (time_now_us() - ta.last_used_us > TOKEN_TOUCH_INTERVAL_US) {
		struct gp_error ignored;

		if (db_token_touch(db_thread(), ta.token_id, &ignored) < 0)
			log_warn(req->request_id, "could not record token use", "error",
			    ignored.message);
	}
	return 0;
}

static int
authorize(const struct route *rt, const struct request *req, struct gp_error *err)
{
	enum role role = api_role(req);

	if (req->principal.node_id != 0) {
		if (rt->allow & ALLOW_NODE)
			return 0;
		return gp_error_set(err, 403, "node_token_forbidden",
		    "a node token reaches only /v1/agent/*");
	}
	if (rt->allow & ALLOW_USER)
		return 0;
	if ((rt->allow & ALLOW_ADMIN) && role == ROLE_ADMIN)
		return 0;
	if ((rt->allow & ALLOW_OPERATOR) && role == ROLE_OPERATOR)
		return 0;
	if ((rt->allow & ALLOW_BILLING) && role == ROLE_BILLING)
		return 0;
	{
		char who[64] = "";
		size_t off = 0;
		static const struct {
			unsigned bit;
			const char *name;
		} roles[] = { { ALLOW_ADMIN, "admin" }, { ALLOW_OPERATOR, "operator" },
			{ ALLOW_BILLING, "billing" } };

		for (size_t i = 0; i < sizeof(roles) / sizeof(roles[0]); i++)
			if ((rt->allow & roles[i].bit) && off < sizeof(who)) {
				int n = snprintf(who + off, sizeof(who) - off, "%s%s",
				    off > 0 ? " or " : "", roles[i].name);

				if (n > 0)
					off += (size_t)n;
			}
		return gp_error_set(err, 403, "forbidden", "%s %s needs the global role %s",
		    req->method, req->path, off > 0 ? who : "(a node token)");
	}
}

/*
 * A body is application/json; a PATCH body may also be a JSON merge
 * patch (RFC 7396). A PATCH's 415 says which types it takes in
 * Accept-Patch (RFC 5789 3.1).
 */
static int
check_content_type(struct request *req, struct response *res, struct gp_error *err)
{
	bool patch = strcmp(req->method, "PATCH") == 0;

	if (req->body_len == 0 || api_content_type_is(req, "application/json") ||
	    (patch && api_content_type_is(req, "application/merge-patch+json")))
		return 0;
	if (patch) {
		response_header(res, "Accept-Patch", API_ACCEPT_PATCH);
		return gp_error_set(err, 415, "unsupported_media_type",
		    "a PATCH body must be application/json or application/merge-patch+json");
	}
	return gp_error_set(err, 415, "unsupported_media_type",
	    "the request body must be application/json");
}

#define QUERY_WORDS_MAX 16

/* Split a route's space-separated query list into words[] (at most QUERY_WORDS_MAX). */
static int
query_words(struct arena *a, const char *list, const char **words)
{
	int n = 0;

	while (list != NULL && *list != '\0' && n < QUERY_WORDS_MAX) {
		const char *end = strchr(list, ' ');
		size_t len = end != NULL ? (size_t)(end - list) : strlen(list);

		if (len > 0)
			words[n++] = arena_strndup(a, list, len);
		list += len;
		while (*list == ' ')
			list++;
	}
	return n;
}

/* A query name fit for a message: printable ASCII kept, other bytes as %XX, cut at 60. */
static const char *
query_name_shown(struct arena *a, const char *name)
{
	size_t cap = 64 * 3 + 4;
	char *out = arena_alloc(a, cap), *w = out;

	for (size_t i = 0; name[i] != '\0'; i++) {
		unsigned char c = (unsigned char)name[i];

		if (i == 60) {
			memcpy(w, "...", 3);
			w += 3;
			break;
		}
		if (c < 0x20 || c >= 0x7f || c == '"' || c == '\\')
			w += snprintf(w, cap - (size_t)(w - out), "%%%02X", c);
		else
			*w++ = (char)c;
	}
	*w = '\0';
	return out;
}

/*
 * Every query parameter must be one the route takes (its "query" list,
 * the operation's parameters in api/openapi.yaml), given once: anything
 * else is 422 naming each offending parameter. Linear in the number of
 * arguments: each is compared with the route's few names and with the
 * unknown ones already reported (at most GP_ERROR_MAX_FIELDS).
 */
static int
check_query(struct request *req, const struct route *rt, struct gp_error *err)
{
	const char *words[QUERY_WORDS_MAX], *reported[GP_ERROR_MAX_FIELDS];
	int seen[QUERY_WORDS_MAX] = { 0 };
	int n = 0, nwords, nreported = 0, problems = 0;
	const char *const *names = req->query_names != NULL ? req->query_names(req, &n) : NULL;
	char takes[256] = "";
	const char *first = NULL;

	if (n == 0)
		return 0;
	nwords = query_words(req->arena, rt->query, words);
	for (int w = 0, off = 0; w < nwords && off < (int)sizeof(takes); w++) {
		int k = snprintf(takes + off, sizeof(takes) - (size_t)off, "%s%s", w ? ", " : "",
		    words[w]);

		if (k > 0)
			off += k;
	}
	for (int i = 0; i < n; i++) {
		const char *name = names[i];
		int w = 0;
		bool again = false;

		while (w < nwords && strcmp(words[w], name) != 0)
			w++;
		if (w < nwords) {
			const char *v = req->query(req, name);

			/* present without a value ("?limit", "?limit="): not the same as absent */
			if (++seen[w] == 1 && (v == NULL || v[0] == '\0')) {
				problems++;
				if (first == NULL)
					first = arena_printf(req->arena,
					    "query parameter \"%s\" has no value", name);
				gp_error_field(err, name,
				    "needs a value (an encoded NUL is none); leave it out for the default");
				continue;
			}
			/* a name the route takes: the second time is the problem, once */
			if (seen[w] != 2)
				continue;
			problems++;
			if (first == NULL)
				first = arena_printf(req->arena,
				    "query parameter \"%s\" given twice", name);
			gp_error_field(err, name, "is given more than once; give it once");
			continue;
		}
		for (int r = 0; r < nreported && !again; r++)
			again = strcmp(reported[r], name) == 0;
		if (again)
			continue;
		problems++;
		if (nreported < GP_ERROR_MAX_FIELDS)
			reported[nreported++] = name;
		if (first == NULL)
			first = arena_printf(req->arena, "unknown query parameter \"%s\"",
			    query_name_shown(req->arena, name));
		gp_error_field(err, query_name_shown(req->arena, name),
		    "is not a query parameter of %s %s (%s%s)", req->method, req->path,
		    nwords > 0 ? "it takes " : "it takes none", takes);
		if (nreported == GP_ERROR_MAX_FIELDS)
			break;
	}
	if (problems == 0)
		return 0;
	if (problems == 1)
		snprintf(err->message, sizeof(err->message), "%s", first);
	else
		snprintf(err->message, sizeof(err->message),
		    "%s, and %d more problems with the query", first, problems - 1);
	return -1;
}

/*
 * What an Idempotency-Key is bound to: method, path, If-Match (a request
 * under another precondition is another request: a 412 kept for the key
 * must not answer the retry that names the new ETag) and body.
 */
static void
request_hash(struct request *req, unsigned char *out)
{
	const char *im = req->header_list != NULL ? req->header_list(req, "If-Match")
						  : req->header(req, "If-Match");
	const char *pre = im != NULL ? arena_printf(req->arena, "If-Match: %s\n", im) : "";
	size_t plen = strlen(req->method) + strlen(req->path) + 2 + strlen(pre);
	char *buf = arena_alloc(req->arena, plen + req->body_len + 1);

	snprintf(buf, plen + 1, "%s\n%s\n%s", req->method, req->path, pre);
	if (req->body_len > 0)
		memcpy(buf + plen, req->body, req->body_len);
	token_digest(buf, plen + req->body_len, out);
}

static const char *
header_value(const struct response *res, const char *name)
{
	for (int i = 0; i < res->nheaders; i++)
		if (strcasecmp(res->headers[i].name, name) == 0)
			return res->headers[i].value;
	return NULL;
}

/* What the dispatcher keeps of a request while its handler runs or waits. */
struct deferred {
	int route;
	struct idem_key *idem; /* NULL: no Idempotency-Key */
	api_cont_fn cont;
	api_wait_fn wait; /* api_defer_until's continuation instead of cont */
	enum deferred_outcome outcome;
	void *arg;
};

static void
idempotency_replay(struct response *res, const struct idem_response *stored)
{
	memset(res, 0, sizeof(*res));
	response_raw(res, stored->status, stored->content_type, stored->body, stored->body_len);
	if (stored->etag != NULL)
		response_header(res, "ETag", stored->etag);
	if (stored->location != NULL)
		response_header(res, "Location", stored->location);
	response_header(res, "Idempotent-Replayed", "true");
}

/*
 * Answer from k's row: 1 when res holds the replay, 0 when there is no
 * row (run the request), -1 with err: 422 for another request under the
 * key, 409 (Retry-After) while the request that holds it has committed
 * but not stored its answer yet (it is about to; or its server died).
 * A row without an answer is waited for a little.
 */
static int
idempotency_answer(struct request *req, struct response *res, const struct idem_key *k,
    struct gp_error *err)
{
	int64_t deadline = time_mono_us() + IDEMPOTENCY_WAIT_US;
	struct idem_response stored;
	enum idem_found found;

	for (;;) {
		if (db_idem_lookup(db_thread(), req->arena, k, &found, &stored, err) < 0)
			return -1;
		if (found != IDEM_PENDING || time_mono_us() >= deadline)
			break;
		{
			struct timespec ts = { 0, IDEMPOTENCY_POLL_US * 1000L };

			nanosleep(&ts, NULL);
		}
	}
	switch (found) {
	case IDEM_NONE:
		return 0;
	case IDEM_REPLAY:
		idempotency_replay(res, &stored);
		return 1;
	case IDEM_MISMATCH:
		return gp_error_set(err, 422, "idempotency_mismatch",
		    "this Idempotency-Key was used with a different request");
	case IDEM_PENDING:
		break;
	}
	if (stored.location != NULL)
		response_header(res, "Location", stored.location);
	err->retry_after = 1;
	return gp_error_set(err, 409, "idempotency_conflict",
	    "a request with this Idempotency-Key was carried out and its answer is not "
	    "stored yet");
}

/* Returns 1 when the response was produced from the store, 0 to run the handler. */
static int
idempotency_begin(struct request *req, struct response *res, const char *key, struct idem_key **out,
    struct gp_error *err)
{
	unsigned char hash[TOKEN_DIGEST_LEN];
	struct idem_key *k;

	if (strlen(key) == 0 || strlen(key) > IDEMPOTENCY_KEY_MAX)
		return gp_error_field(err, "Idempotency-Key", "must be 1 to %d characters",
		    IDEMPOTENCY_KEY_MAX);
	request_hash(req, hash);
	k = arena_alloc(req->arena, sizeof(*k));
	db_idem_key_init(k, req->principal.user_id, key, hash);
	*out = k;
	return idempotency_answer(req, res, k, err);
}

/*
 * A successful response marked "Cache-Control: no-store" holds a secret
 * that is shown once (a new API token): it must not be kept for replays,
 * since secrets are stored only as digests. What is kept instead is the
 * answer a retry gets: 409 naming the object the first request created.
 */
static const struct response *
idempotency_replayable(struct request *req, const struct response *res, struct response *scratch)
{
	const char *cc = header_value(res, "Cache-Control");
	const char *loc = header_value(res, "Location");
	struct gp_error err;

	if (res->status >= 300 || cc == NULL || strstr(cc, "no-store") == NULL)
		return res;
	memset(scratch, 0, sizeof(*scratch));
	gp_error_clear(&err);
	gp_error_set(&err, 409, "conflict",
	    "a request with this Idempotency-Key already succeeded%s%s; its response "
	    "held a secret that is shown only once and is not replayed",
	    loc != NULL ? ", creating " : "", loc != NULL ? loc : "");
	response_problem(req, scratch, &err);
	if (loc != NULL)
		response_header(scratch, "Location", loc);
	return scratch;
}

/*
 * Store res as k's answer on db: into the row k's request claimed, or a
 * new row when none was claimed (a refusal); never over a stored answer.
 */
static int
idempotency_store(struct db *db, struct request *req, const struct idem_key *k,
    const struct response *res, struct gp_error *err)
{
	struct response scratch;
	const struct response *keep = idempotency_replayable(req, res, &scratch);
	struct idem_response stored = {
		.status = keep->status,
		.content_type = keep->content_type,
		.etag = header_value(keep, "ETag"),
		.location = header_value(keep, "Location"),
		.body = keep->body,
		.body_len = keep->body_len,
	};

	return db_idem_store(db, req->arena, k, &stored, err);
}

/*
 * After the handler: an answer below 500 is stored unless one already
 * is. A 5xx is not; there is nothing to release either, since a claim
 * exists only where the mutation committed.
 */
static void
idempotency_end(struct request *req, struct response *res, const struct idem_key *k)
{
	struct gp_error err;

	gp_error_clear(&err);
	if (res->status >= 500)
		return;
	if (idempotency_store(db_thread(), req, k, res, &err) < 0)
		log_warn(req->request_id, "could not store an idempotent response", "error",
		    err.message);
}

int
api_idem_claim(struct db *db, struct request *req, bool *dup, struct gp_error *err)
{
	struct deferred *d = req->deferred;

	*dup = false;
	if (d == NULL || d->idem == NULL)
		return 0;
	if (db_idem_claim(db, req->arena, d->idem, err) < 0)
		return -1;
	*dup = d->idem->state == IDEM_DUPLICATE;
	return 0;
}

int
api_idem_keep(struct db *db, struct request *req, const struct response *res, struct gp_error *err)
{
	struct deferred *d = req->deferred;

	if (d == NULL || d->idem == NULL || d->idem->state != IDEM_CLAIMED)
		return 0;
	return idempotency_store(db, req, d->idem, res, err);
}

int
api_defer(struct request *req, api_cont_fn cont, void *arg)
{
	struct deferred *d = req->deferred;

	d->cont = cont;
	d->arg = arg;
	return API_DEFERRED;
}

void
api_wake(struct request *req)
{
	req->wake(req);
}

/* The registry fired a long-poll's entry: note why, hand it back to http/. */
static void
wait_fire(void *arg, enum deferred_outcome outcome)
{
	struct request *req = arg;
	struct deferred *d = req->deferred;

	d->outcome = outcome;
	api_wake(req);
}

uint64_t
api_wait_mark(struct request *req, const char *key)
{
	struct deferred_registry *waits = api_app(req)->waits;

	return waits != NULL ? deferred_mark(waits, key) : 0;
}

static int
defer_until(struct request *req, struct response *res, const char *key, uint64_t mark,
    int64_t deadline_us, bool exclusive, api_wait_fn cont, void *arg, struct gp_error *err)
{
	struct deferred *d = req->deferred;
	struct deferred_registry *waits = api_app(req)->waits;
	int rc;

	d->wait = cont;
	d->arg = arg;
	/*
	 * cont writes the whole answer, whenever it runs: what the handler
	 * left in res (a 304 with the ETag it read) must not stay under it
	 */
	memset(res, 0, sizeof(*res));
	if (waits == NULL)
		return cont(req, res, arg, DEFERRED_SHUTDOWN, err);
	rc = deferred_add_since(waits, key, mark, exclusive, deadline_us, wait_fire, req);
	if (rc < 0)
		return cont(req, res, arg, DEFERRED_SHUTDOWN, err);
	if (rc > 0) /* what the handler read is already stale: read again now */
		return cont(req, res, arg, DEFERRED_WOKEN, err);
	return API_DEFERRED;
}

int
api_defer_until(struct request *req, struct response *res, const char *key, uint64_t mark,
    int64_t deadline_us, api_wait_fn cont, void *arg, struct gp_error *err)
{
	return defer_until(req, res, key, mark, deadline_us, false, cont, arg, err);
}

int
api_defer_until_exclusive(struct request *req, struct response *res, const char *key, uint64_t mark,
    int64_t deadline_us, api_wait_fn cont, void *arg, struct gp_error *err)
{
	return defer_until(req, res, key, mark, deadline_us, true, cont, arg, err);
}

/* The handler's (or continuation's) outcome rc becomes the answer. */
/* True when the If-None-Match list names etag (weak comparison, RFC 9110 13.1.2) or is "*". */
static bool
etag_listed(const char *list, const char *etag)
{
	size_t el;

	if (strncmp(etag, "W/", 2) == 0)
		etag += 2;
	el = strlen(etag);
	while (*list != '\0') {
		const char *end;
		size_t n;

		while (*list == ' ' || *list == '\t' || *list == ',')
			list++;
		if (*list == '\0')
			break;
		if (*list == '*')
			return true;
		if (strncmp(list, "W/", 2) == 0)
			list += 2;
		end = strchr(list, ',');
		n = end != NULL ? (size_t)(end - list) : strlen(list);
		while (n > 0 && (list[n - 1] == ' ' || list[n - 1] == '\t'))
			n--;
		if (n == el && memcmp(list, etag, n) == 0)
			return true;
		list += n;
	}
	return false;
}

/* A GET (or HEAD) whose If-None-Match names the answer's ETag gets 304, no body. */
static void
not_modified(struct request *req, struct response *res)
{
	const char *inm, *etag = NULL;

	if (res->status != 200 ||
	    (strcmp(req->method, "GET") != 0 && strcmp(req->method, "HEAD") != 0))
		return;
	inm = req->header(req, "If-None-Match");
	if (inm == NULL)
		return;
	for (int i = 0; i < res->nheaders; i++)
		if (strcasecmp(res->headers[i].name, "ETag") == 0)
			etag = res->headers[i].value;
	if (etag == NULL || !etag_listed(inm, etag))
		return;
	res->status = 304;
	res->body = NULL;
	res->body_len = 0;
}

static void
dispatch_finish(struct request *req, struct response *res, int idx, struct idem_key *idem, int rc,
    struct gp_error *err)
{
	bool replayed = false;

	if (idem != NULL && idem->state == IDEM_DUPLICATE) {
		/* another request holds the key: its answer is this one's */
		gp_error_clear(err);
		memset(res, 0, sizeof(*res));
		rc = idempotency_answer(req, res, idem, err);
		if (rc == 0) {
			/* the holder rolled back meanwhile: the client may retry */
			err->retry_after = 1;
			rc = gp_error_set(err, 409, "idempotency_conflict",
			    "a request with this Idempotency-Key is still in progress");
		}
		replayed = rc == 1;
	}
	if (rc < 0 || res->status == 0) {
		if (!gp_error_isset(err))
			gp_error_set(err, 500, "internal", "the handler failed without a reason");
		if (err->status == 401)
			/* RFC 6750 3.1: a request without a token gets no error attribute */
			response_header(res, "WWW-Authenticate",
			    req->header(req, "Authorization") == NULL
				? "Bearer realm=\"gpupool\""
				: "Bearer realm=\"gpupool\", error=\"invalid_token\"");
		if (err->status >= 500)
			log_error(req->request_id, "request failed", "code", err->code, "error",
			    err->message);
		response_problem(req, res, err);
	}
	if (idem != NULL && idem->state != IDEM_DUPLICATE && !replayed)
		idempotency_end(req, res, idem);
	not_modified(req, res);
	cors_headers(req, res, NULL);
	metrics_observe(idx, res->status, time_mono_us() - req->started_us);
}

int
api_dispatch(struct request *req, struct response *res)
{
	struct gp_error err;
	const struct route *rt = NULL;
	struct deferred *d;
	struct idem_key *idem = NULL;
	const char *key = NULL;
	int idx, rc;

	gp_error_clear(&err);
	if (ui_path(req->path)) {
		/* the dashboard's files: public, static, outside the API's routes */
		ui_serve(req, res);
		not_modified(req, res);
		metrics_observe(-1, res->status, time_mono_us() - req->started_us);
		return 0;
	}
	idx = find_route(req, res, &err);
	if (idx == FIND_ROUTE_OPTIONS) {
		metrics_observe(-1, res->status, time_mono_us() - req->started_us);
		return 0;
	}
	if (idx < 0)
		goto fail;
	rt = &api_routes[idx];
	if (!(rt->allow & ALLOW_PUBLIC)) {
		if (authenticate(req, (rt->allow & AUTH_PROJECTS) != 0, &err) < 0 ||
		    authorize(rt, req, &err) < 0)
			goto fail;
	}
	if (check_content_type(req, res, &err) < 0 || check_query(req, rt, &err) < 0)
		goto fail;
	if (strcmp(req->method, "POST") == 0 && req->principal.user_id != 0)
		key = req->header(req, "Idempotency-Key");
	if (key != NULL) {
		rc = idempotency_begin(req, res, key, &idem, &err);
		if (rc < 0) {
			idem = NULL;
			goto fail;
		}
		if (rc == 1) {
			metrics_observe(idx, res->status, time_mono_us() - req->started_us);
			return 0;
		}
	}
	d = arena_alloc(req->arena, sizeof(*d));
	d->route = idx;
	d->idem = idem;
	d->cont = NULL;
	d->wait = NULL;
	req->deferred = d;
	/* every transaction the handler runs claims the key first (db.c) */
	db_idem_arm(db_thread(), idem);
	rc = rt->handler(req, res, &err);
	db_idem_arm(db_thread(), NULL);
	if (rc == API_DEFERRED)
		return API_DEFERRED;
	dispatch_finish(req, res, idx, idem, rc, &err);
	return 0;
fail:
	dispatch_finish(req, res, idx, idem, -1, &err);
	return 0;
}

void
api_dispatch_resume(struct request *req, struct response *res)
{
	struct deferred *d = req->deferred;
	struct gp_error err;
	int rc = -1;

	gp_error_clear(&err);
	/* a duplicate changed nothing: dispatch_finish answers it from the key's row */
	if (d->idem == NULL || d->idem->state != IDEM_DUPLICATE) {
		db_idem_arm(db_thread(), d->idem);
		if (d->wait != NULL)
			rc = d->wait(req, res, d->arg, d->outcome, &err);
		else
			rc = d->cont(req, res, d->arg, &err);
		db_idem_arm(db_thread(), NULL);
	}
	dispatch_finish(req, res, d->route, d->idem, rc, &err);
}
