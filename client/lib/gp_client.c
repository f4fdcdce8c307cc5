/*
 * gp_client.c - REST client for the gpupool API: one curl easy handle
 * per client (keep-alive reuse), bounded bodies, timeouts, optional
 * retries, JSON and problem+json decoding. The only libcurl user on the
 * client side.
 */
#include "gp_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#define CLIENT_USER_AGENT "gpupool-client/0.1"
#define CLIENT_DEFAULT_TOTAL_MS 30000L
#define CLIENT_DEFAULT_CONNECT_MS 5000L
#define CLIENT_DEFAULT_MAX_BODY ((size_t)64 << 20)
#define CLIENT_MAX_RETRY_WAIT_MS 10000L
#define CLIENT_JSON_DEPTH 64

struct gp_client {
	char *base_url;
	char *token;
	long total_ms;
	long connect_ms;
	size_t max_body;
	int retries;
	const volatile bool *abort_flag; /* true: give up the request in flight */
	CURL *curl;
};

/* Where the write and header callbacks put what arrives. */
struct client_sink {
	struct gp_client_response *out;
	size_t cap;
	size_t max;
	bool too_large;
	/* gp_client_download: a 2xx body goes here instead of out->body */
	gp_client_write_fn stream;
	void *stream_arg;
	CURL *curl;
	bool stream_failed;
};

static pthread_once_t client_once = PTHREAD_ONCE_INIT;
static CURLcode client_global_rc = CURLE_FAILED_INIT;

static void
client_global_init(void)
{
	client_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static char *
client_strdup(const char *s)
{
	size_t n = strlen(s);
	char *d = malloc(n + 1);

	if (d != NULL)
		memcpy(d, s, n + 1);
	return d;
}

static void
client_wipe_free(char *s)
{
	if (s == NULL)
		return;
	explicit_bzero(s, strlen(s));
	free(s);
}

struct gp_client *
gp_client_create(const char *base_url, const char *token)
{
	struct gp_client *c = NULL;
	size_t n;

	if (base_url == NULL)
		return NULL;
	if (strncmp(base_url, "http://", 7) != 0 && strncmp(base_url, "https://", 8) != 0)
		return NULL;
	if (pthread_once(&client_once, client_global_init) != 0 || client_global_rc != CURLE_OK)
		return NULL;
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		goto fail;
	c->base_url = client_strdup(base_url);
	if (c->base_url == NULL)
		goto fail;
	n = strlen(c->base_url);
	while (n > 0 && c->base_url[n - 1] == '/')
		c->base_url[--n] = '\0';
	if (token != NULL && token[0] != '\0') {
		c->token = client_strdup(token);
		if (c->token == NULL)
			goto fail;
	}
	c->total_ms = CLIENT_DEFAULT_TOTAL_MS;
	c->connect_ms = CLIENT_DEFAULT_CONNECT_MS;
	c->max_body = CLIENT_DEFAULT_MAX_BODY;
	c->curl = curl_easy_init();
	if (c->curl == NULL)
		goto fail;
	return c;
fail:
	gp_client_destroy(c);
	return NULL;
}

void
gp_client_destroy(struct gp_client *c)
{
	if (c == NULL)
		return;
	if (c->curl != NULL)
		curl_easy_cleanup(c->curl);
	free(c->base_url);
	client_wipe_free(c->token);
	free(c);
}

int
gp_client_set_token(struct gp_client *c, const char *token)
{
	char *t = NULL;

	if (token != NULL && token[0] != '\0') {
		t = client_strdup(token);
		if (t == NULL)
			return -1;
	}
	client_wipe_free(c->token);
	c->token = t;
	return 0;
}

const char *
gp_client_base_url(const struct gp_client *c)
{
	return c->base_url;
}

void
gp_client_set_timeouts(struct gp_client *c, long total_ms, long connect_ms)
{
	if (total_ms > 0)
		c->total_ms = total_ms;
	if (connect_ms > 0)
		c->connect_ms = connect_ms;
}

void
gp_client_set_abort_flag(struct gp_client *c, const volatile bool *flag)
{
	c->abort_flag = flag;
}

/* libcurl's progress callback (at least once a second): non-zero aborts */
static int
client_progress_cb(void *arg, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
    curl_off_t ulnow)
{
	const volatile bool *flag = arg;
	(void)dltotal;
	(void)dlnow;
	(void)ultotal;
	(void)ulnow;
	return *flag ? 1 : 0;
}

void
gp_client_set_max_body(struct gp_client *c, size_t max)
{
	if (max > 0)
		c->max_body = max;
}

void
gp_client_set_retries(struct gp_client *c, int n)
{
	c->retries = n < 0 ? 0 : n;
}

static void __attribute__((format(printf, 2, 3)))
client_set_error(struct gp_client_response *out, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(out->error, sizeof(out->error), fmt, ap);
	va_end(ap);
}

static void
client_response_init(struct gp_client_response *out)
{
	memset(out, 0, sizeof(*out));
	out->retry_after = -1;
}

void
gp_client_response_free(struct gp_client_response *out)
{
	if (out == NULL)
		return;
	if (out->json != NULL)
		json_object_put(out->json);
	free(out->body);
	client_response_init(out);
}

static size_t
client_write_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct client_sink *sink = userdata;
	struct gp_client_response *out = sink->out;
	size_t n = size * nmemb;

	if (sink->stream != NULL) {
		long code = 0;

		curl_easy_getinfo(sink->curl, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200 && code < 300) {
			if (sink->stream(data, n, sink->stream_arg) != 0) {
				sink->stream_failed = true;
				return 0;
			}
			return n;
		}
	}
	if (n > sink->max || out->body_len > sink->max - n) {
		sink->too_large = true;
		return 0;
	}
	if (out->body_len + n + 1 > sink->cap) {
		size_t cap = sink->cap ? sink->cap : 4096;
		char *nb;

		while (cap < out->body_len + n + 1)
			cap *= 2;
		nb = realloc(out->body, cap);
		if (nb == NULL)
			return 0;
		out->body = nb;
		sink->cap = cap;
	}
	memcpy(out->body + out->body_len, data, n);
	out->body_len += n;
	out->body[out->body_len] = '\0';
	return n;
}

/* Copy a header value without surrounding blanks; values too long are dropped. */
static void
client_header_copy(char *dst, size_t dstlen, const char *val, size_t len)
{
	while (len > 0 && (*val == ' ' || *val == '\t')) {
		val++;
		len--;
	}
	while (len > 0 && strchr(" \t\r\n", val[len - 1]) != NULL)
		len--;
	if (len >= dstlen) {
		dst[0] = '\0';
		return;
	}
	memcpy(dst, val, len);
	dst[len] = '\0';
}

static int
client_parse_seconds(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < 0 || v > 86400)
		return -1;
	*out = (int)v;
	return 0;
}

static size_t
client_header_cb(char *data, size_t size, size_t nmemb, void *userdata)
{
	struct client_sink *sink = userdata;
	struct gp_client_response *out = sink->out;
	size_t n = size * nmemb;
	const char *colon;
	size_t namelen;
	char tmp[32];

	if (n >= 5 && strncmp(data, "HTTP/", 5) == 0) {
		/* a new header block (after 100 Continue): forget the last one */
		out->content_type[0] = '\0';
		out->etag[0] = '\0';
		out->request_id[0] = '\0';
		out->location[0] = '\0';
		out->retry_after = -1;
		return n;
	}
	colon = memchr(data, ':', n);
	if (colon == NULL)
		return n;
	namelen = (size_t)(colon - data);
	colon++;
#define HEADER_IS(name) (namelen == sizeof(name) - 1 && strncasecmp(data, name, namelen) == 0)
	if (HEADER_IS("Content-Type"))
		client_header_copy(out->content_type, sizeof(out->content_type), colon,
		    n - namelen - 1);
	else if (HEADER_IS("ETag"))
		client_header_copy(out->etag, sizeof(out->etag), colon, n - namelen - 1);
	else if (HEADER_IS("X-Request-Id"))
		client_header_copy(out->request_id, sizeof(out->request_id), colon,
		    n - namelen - 1);
	else if (HEADER_IS("Location"))
		client_header_copy(out->location, sizeof(out->location), colon, n - namelen - 1);
	else if (HEADER_IS("Retry-After")) {
		client_header_copy(tmp, sizeof(tmp), colon, n - namelen - 1);
		if (client_parse_seconds(tmp, &out->retry_after) != 0)
			out->retry_after = -1;
	}
#undef HEADER_IS
	return n;
}

static bool
client_is_json_type(const char *ct)
{
	const char *semi = strchr(ct, ';');
	size_t len = semi ? (size_t)(semi - ct) : strlen(ct);

	while (len > 0 && ct[len - 1] == ' ')
		len--;
	if (len == 16 && strncasecmp(ct, "application/json", 16) == 0)
		return true;
	return len > 5 && strncasecmp(ct + len - 5, "+json", 5) == 0;
}

/* Parse the whole body as one JSON value; leaves out->json NULL on failure. */
static void
client_parse_json(struct gp_client_response *out)
{
	struct json_tokener *tok;
	struct json_object *obj;
	size_t end;

	if (out->body_len == 0 || out->body_len > INT32_MAX ||
	    !client_is_json_type(out->content_type))
		return;
	tok = json_tokener_new_ex(CLIENT_JSON_DEPTH);
	if (tok == NULL)
		return;
	obj = json_tokener_parse_ex(tok, out->body, (int)out->body_len);
	if (obj != NULL && json_tokener_get_error(tok) == json_tokener_success) {
		end = json_tokener_get_parse_end(tok);
		while (end < out->body_len && strchr(" \t\r\n", out->body[end]) != NULL)
			end++;
		if (end == out->body_len) {
			out->json = obj;
			obj = NULL;
		}
	}
	if (obj != NULL)
		json_object_put(obj);
	json_tokener_free(tok);
}

static bool
client_has_header(const char *const *headers, const char *name)
{
	size_t n = strlen(name);

	for (; headers != NULL && *headers != NULL; headers++) {
		if (strncasecmp(*headers, name, n) == 0 && (*headers)[n] == ':')
			return true;
	}
	return false;
}

static struct curl_slist *
client_slist_add(struct curl_slist *list, const char *line, bool *failed)
{
	struct curl_slist *nl;

	if (*failed)
		return list;
	nl = curl_slist_append(list, line);
	if (nl == NULL) {
		*failed = true;
		return list;
	}
	return nl;
}

/* One attempt: 0 when a response arrived, -1 with out->error set. */
static int
client_perform(struct gp_client *c, const char *method, const char *path, const char *body,
    size_t body_len, const char *const *extra_headers, gp_client_write_fn stream, void *stream_arg,
    struct gp_client_response *out)
{
	struct client_sink sink = { .out = out,
		.cap = 0,
		.max = c->max_body,
		.too_large = false,
		.stream = stream,
		.stream_arg = stream_arg,
		.curl = c->curl };
	struct curl_slist *headers = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	char *url = NULL, *auth = NULL;
	bool failed = false;
	long nconn = 0;
	size_t ulen;
	CURLcode rc;
	CURL *h = c->curl;
	int ret = -1;

	ulen = strlen(c->base_url) + strlen(path) + 1;
	url = malloc(ulen);
	if (url == NULL || snprintf(url, ulen, "%s%s", c->base_url, path) >= (int)ulen) {
		client_set_error(out, "out of memory");
		goto fail;
	}
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->total_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->connect_ms);
	curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_USERAGENT, CLIENT_USER_AGENT);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
#if LIBCURL_VERSION_NUM >= 0x075500
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#endif
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, client_write_cb);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &sink);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, client_header_cb);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, &sink);
	if (c->abort_flag != NULL) {
		curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, client_progress_cb);
		curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)c->abort_flag);
		curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	}

	if (strcmp(method, "GET") == 0 && body == NULL) {
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	} else if (strcmp(method, "HEAD") == 0) {
		curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
	} else {
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
		if (body != NULL || strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
		    strcmp(method, "PATCH") == 0) {
			curl_easy_setopt(h, CURLOPT_POSTFIELDS, body != NULL ? body : "");
			curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE,
			    (curl_off_t)(body != NULL ? body_len : 0));
		}
	}

	headers = client_slist_add(headers, "Expect:", &failed);
	if (!client_has_header(extra_headers, "Content-Type"))
		headers = client_slist_add(headers,
		    body != NULL ? "Content-Type: application/json" : "Content-Type:", &failed);
	if (c->token != NULL && !client_has_header(extra_headers, "Authorization")) {
		size_t alen = strlen(c->token) + sizeof("Authorization: Bearer ");

		auth = malloc(alen);
		if (auth == NULL ||
		    snprintf(auth, alen, "Authorization: Bearer %s", c->token) >= (int)alen)
			failed = true;
		else
			headers = client_slist_add(headers, auth, &failed);
	}
	for (const char *const *hp = extra_headers; hp != NULL && *hp != NULL; hp++)
		headers = client_slist_add(headers, *hp, &failed);
	if (failed) {
		client_set_error(out, "out of memory");
		goto fail;
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers);

	rc = curl_easy_perform(h);
	if (rc != CURLE_OK) {
		if (sink.too_large)
			client_set_error(out, "the response body is larger than %zu bytes",
			    c->max_body);
		else if (sink.stream_failed)
			client_set_error(out, "could not store the response body");
		else
			client_set_error(out, "could not %s %s: %s", method, url,
			    errbuf[0] ? errbuf : curl_easy_strerror(rc));
		goto fail;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
	if (curl_easy_getinfo(h, CURLINFO_NUM_CONNECTS, &nconn) == CURLE_OK)
		out->connection_reused = nconn == 0;
	if (out->body == NULL) {
		out->body = calloc(1, 1);
		if (out->body == NULL) {
			client_set_error(out, "out of memory");
			goto fail;
		}
	}
	client_parse_json(out);
	ret = 0;
fail:
	/* the handle must not keep pointers into this frame */
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
	curl_slist_free_all(headers);
	client_wipe_free(auth);
	free(url);
	if (ret != 0) {
		char saved[sizeof(out->error)];

		memcpy(saved, out->error, sizeof(saved));
		gp_client_response_free(out);
		memcpy(out->error, saved, sizeof(saved));
	}
	return ret;
}

static bool
client_may_retry(const char *method, const char *const *extra_headers)
{
	if (strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0 ||
	    strcmp(method, "PUT") == 0 || strcmp(method, "DELETE") == 0)
		return true;
	return strcmp(method, "POST") == 0 && client_has_header(extra_headers, "Idempotency-Key");
}

static void
client_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static long
client_backoff_ms(int attempt, int retry_after)
{
	unsigned int r = 0;
	long base;

	if (retry_after >= 0) {
		base = (long)retry_after * 1000L;
		return base > CLIENT_MAX_RETRY_WAIT_MS ? CLIENT_MAX_RETRY_WAIT_MS : base;
	}
	base = 100L << (attempt < 6 ? attempt : 6);
	if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
		r = 0;
	base += (long)(r % (unsigned int)(base / 2 + 1));
	return base > CLIENT_MAX_RETRY_WAIT_MS ? CLIENT_MAX_RETRY_WAIT_MS : base;
}

int
gp_client_request(struct gp_client *c, const char *method, const char *path, const char *body,
    size_t body_len, const char *const *extra_headers, struct gp_client_response *out)
{
	bool retryable;
	int rc;

	client_response_init(out);
	if (c == NULL || method == NULL || path == NULL || path[0] != '/') {
		client_set_error(out, "invalid request arguments");
		return -1;
	}
	retryable = client_may_retry(method, extra_headers);
	for (int attempt = 0;; attempt++) {
		int wait_after;

		rc =
		    client_perform(c, method, path, body, body_len, extra_headers, NULL, NULL, out);
		if (!retryable || attempt >= c->retries)
			break;
		if (rc == 0 && out->status != 429 && out->status != 502 && out->status != 503 &&
		    out->status != 504)
			break;
		wait_after = rc == 0 ? out->retry_after : -1;
		gp_client_response_free(out);
		client_sleep_ms(client_backoff_ms(attempt, wait_after));
	}
	return rc;
}

int
gp_client_download(struct gp_client *c, const char *path, const char *const *extra_headers,
    gp_client_write_fn write, void *arg, struct gp_client_response *out)
{
	long saved = 0;
	int rc;

	client_response_init(out);
	if (c == NULL || path == NULL || path[0] != '/' || write == NULL) {
		client_set_error(out, "invalid request arguments");
		return -1;
	}
	/* a download may take long: no total timeout, the connect one only */
	saved = c->total_ms;
	c->total_ms = 0;
	rc = client_perform(c, "GET", path, NULL, 0, extra_headers, write, arg, out);
	c->total_ms = saved;
	return rc;
}

int
gp_client_get(struct gp_client *c, const char *path, struct gp_client_response *out)
{
	return gp_client_request(c, "GET", path, NULL, 0, NULL, out);
}

int
gp_client_delete(struct gp_client *c, const char *path, struct gp_client_response *out)
{
	return gp_client_request(c, "DELETE", path, NULL, 0, NULL, out);
}

int
gp_client_send_json(struct gp_client *c, const char *method, const char *path,
    struct json_object *body, const char *idempotency_key, struct gp_client_response *out)
{
	const char *headers[2] = { NULL, NULL };
	char keyhdr[192];
	const char *text = NULL;
	size_t len = 0;

	if (idempotency_key != NULL) {
		int n = snprintf(keyhdr, sizeof(keyhdr), "Idempotency-Key: %s", idempotency_key);

		if (n < 0 || (size_t)n >= sizeof(keyhdr)) {
			client_response_init(out);
			client_set_error(out, "the idempotency key is too long");
			return -1;
		}
		headers[0] = keyhdr;
	}
	if (body != NULL)
		text = json_object_to_json_string_length(body,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE, &len);
	return gp_client_request(c, method, path, text, len, headers, out);
}

bool
gp_client_ok(const struct gp_client_response *r)
{
	return r->status >= 200 && r->status < 300;
}

static const char *
client_json_str(struct json_object *o, const char *key)
{
	struct json_object *v;

	if (o == NULL || !json_object_object_get_ex(o, key, &v) ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

void
gp_client_error_from_response(const struct gp_client_response *r, struct gp_error *err)
{
	struct json_object *errors;
	const char *code, *detail;

	gp_error_clear(err);
	if (r->status == 0) {
		gp_error_set(err, 0, "transport", "%s", r->error[0] ? r->error : "no response");
		return;
	}
	code = client_json_str(r->json, "code");
	detail = client_json_str(r->json, "detail");
	if (detail == NULL || detail[0] == '\0')
		detail = client_json_str(r->json, "title");
	if (detail != NULL)
		gp_error_set(err, (int)r->status, code ? code : "unknown", "%s", detail);
	else
		gp_error_set(err, (int)r->status, code ? code : "http_error",
		    "the server answered HTTP %ld", r->status);
	if (r->json != NULL && json_object_object_get_ex(r->json, "errors", &errors) &&
	    json_object_is_type(errors, json_type_array)) {
		size_t n = json_object_array_length(errors);

		for (size_t i = 0; i < n && err->nfields < GP_ERROR_MAX_FIELDS; i++) {
			struct json_object *e = json_object_array_get_idx(errors, i);
			const char *field = client_json_str(e, "field");
			const char *msg = client_json_str(e, "message");
			struct gp_field_error *fe = &err->fields[err->nfields++];

			snprintf(fe->field, sizeof(fe->field), "%s", field ? field : "");
			snprintf(fe->message, sizeof(fe->message), "%s", msg ? msg : "");
		}
	}
}

struct json_object *
gp_client_json_get(struct json_object *obj, const char *path)
{
	const char *p = path;
	char key[256];

	while (obj != NULL && *p != '\0') {
		if (*p == '.') {
			p++;
			continue;
		}
		if (*p == '[') {
			char *end;
			long idx;

			errno = 0;
			idx = strtol(p + 1, &end, 10);
			if (errno != 0 || end == p + 1 || *end != ']' || idx < 0 ||
			    !json_object_is_type(obj, json_type_array) ||
			    (size_t)idx >= json_object_array_length(obj))
				return NULL;
			obj = json_object_array_get_idx(obj, (size_t)idx);
			p = end + 1;
		} else {
			size_t n = strcspn(p, ".[");
			struct json_object *v;

			if (n >= sizeof(key) || !json_object_is_type(obj, json_type_object))
				return NULL;
			memcpy(key, p, n);
			key[n] = '\0';
			if (!json_object_object_get_ex(obj, key, &v))
				return NULL;
			obj = v;
			p += n;
		}
	}
	return obj;
}

int
gp_client_escape(const char *s, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
			if (o + 1 >= outlen)
				return -1;
			out[o++] = (char)ch;
		} else {
			if (o + 3 >= outlen)
				return -1;
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	if (o >= outlen)
		return -1;
	out[o] = '\0';
	return 0;
}

int
gp_client_random_key(char *out, size_t outlen)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[16];

	if (outlen < sizeof(raw) * 2 + 1)
		return -1;
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -1;
	for (size_t i = 0; i < sizeof(raw); i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[sizeof(raw) * 2] = '\0';
	return 0;
}
