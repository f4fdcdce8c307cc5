/*
 * fuzz_path.c - libFuzzer harness for the HTTP path and query decoding
 * and the route table match: http_unescape_safe() (what libmicrohttpd's
 * percent-decoding of the path leaves encoded), lookup_query() (the rest
 * of a query value), http_request_id_valid() (X-Request-Id) from
 * http/request_view.c, and find_route() from api/dispatch.c over every
 * route.
 *
 * The two sources are included whole so that their static functions
 * are reachable; MHD_lookup_connection_value is renamed to a stand-in
 * that hands back the fuzzer's query value as MHD would (after the
 * unescape callback). Invariants: decoding never lengthens, never makes
 * a '/' or a NUL; a matched route's parameters are non-empty and hold
 * no '/'; an unmatched path answers 404 or 405 (with Allow).
 */
#define MHD_lookup_connection_value fuzz_lookup_value
#include "../../server/http/request_view.c"

#include "../../server/api/dispatch.c"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *fuzz_query_value;

const char *
fuzz_lookup_value(struct MHD_Connection *connection, enum MHD_ValueKind kind, const char *key)
{
	(void)connection;
	(void)key;
	return kind == MHD_GET_ARGUMENT_KIND ? fuzz_query_value : NULL;
}

static size_t
count_char(const char *s, char c)
{
	size_t n = 0;

	for (; *s != '\0'; s++)
		n += *s == c;
	return n;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct arena *a = arena_create();
	char *path = arena_strndup(a, (const char *)data, size);
	char *query, *q;
	size_t in_len = strlen(path), out_len, slashes = count_char(path, '/');
	struct request req;
	struct response res;
	struct gp_error err;
	int route;

	/* the path, then optionally "?" and one query value */
	q = strchr(path, '?');
	if (q != NULL) {
		*q++ = '\0';
		in_len = strlen(path);
		slashes = count_char(path, '/');
	}
	out_len = http_unescape_safe(NULL, NULL, path);
	if (out_len > in_len || strlen(path) != out_len || count_char(path, '/') != slashes)
		abort();

	memset(&req, 0, sizeof(req));
	memset(&res, 0, sizeof(res));
	memset(&err, 0, sizeof(err));
	req.arena = a;
	req.method = size > 0 && (data[0] & 1) ? "POST" : "GET";
	req.path = path;
	route = find_route(&req, &res, &err);
	if (route >= 0) {
		if (route >= api_nroutes || strcmp(api_routes[route].method, req.method) != 0)
			abort();
		for (int i = 0; i < req.nparams; i++)
			if (req.params[i][0] == '\0' || strchr(req.params[i], '/') != NULL)
				abort();
	} else if (err.status != 404 && err.status != 405) {
		abort();
	} else if (err.status == 405 && res.nheaders < 1) {
		abort();
	}

	if (q != NULL) {
		size_t qlen;

		(void)http_unescape_safe(NULL, NULL, q);
		qlen = strlen(q);
		fuzz_query_value = q;
		req.transport = NULL;
		query = (char *)lookup_query(&req, "x");
		if (query != NULL && strlen(query) > qlen)
			abort();
		fuzz_query_value = NULL;
		(void)http_request_id_valid(q);
	}
	arena_destroy(a);
	return 0;
}
