/*
 * gp_client.h - REST client for the gpupool API (libcurl + json-c).
 *
 * Shared by the gpupool CLI, the node agent and the integration tests.
 * A struct gp_client holds the base URL, the bearer token, timeouts and
 * one curl easy handle, so consecutive requests reuse a keep-alive
 * connection. A client is not thread-safe: use one per thread.
 *
 * Every request answers a struct gp_client_response: the status, the
 * headers callers need, the raw body and, when the body is JSON, the
 * parsed tree. gp_client_request() returns -1 only when no HTTP
 * response arrived (connection refused, timeout ...); an HTTP error
 * status is a response like any other and returns 0.
 */
#ifndef GP_CLIENT_H
#define GP_CLIENT_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>

#include "core/error.h"

struct gp_client;

struct gp_client_response {
	long status;            /* HTTP status, 0 when none arrived */
	char content_type[128]; /* "" when absent */
	char etag[128];
	char request_id[128]; /* X-Request-Id */
	char location[512];
	int retry_after; /* seconds from Retry-After, -1 when absent */
	char *body;      /* NUL-terminated, malloc'd, may be empty */
	size_t body_len;
	struct json_object *json; /* parsed body, NULL when not JSON */
	bool connection_reused;   /* sent on a kept-alive connection */
	char error[256];          /* transport error when the call returned -1 */
};

/*
 * Create a client for base_url ("http://host:port", a trailing slash is
 * dropped) with an optional bearer token (NULL for none). Both strings
 * are copied. Returns NULL when base_url is not http(s) or on failure to
 * set up curl.
 */
struct gp_client *gp_client_create(const char *base_url, const char *token);

/* Release the connection and wipe the token. NULL is a no-op. */
void gp_client_destroy(struct gp_client *c);

/* Replace the bearer token (NULL clears it); the string is copied. */
int gp_client_set_token(struct gp_client *c, const char *token) __attribute__((warn_unused_result));

/* The base URL without a trailing slash. */
const char *gp_client_base_url(const struct gp_client *c);

/*
 * Whole-request and connect timeouts in milliseconds (defaults 30000
 * and 5000); 0 keeps the current value.
 */
void gp_client_set_timeouts(struct gp_client *c, long total_ms, long connect_ms);

/* Largest response body accepted (default 64 MiB); larger ones fail. */
void gp_client_set_max_body(struct gp_client *c, size_t max);

/*
 * A request in flight is given up (no response, error "aborted") within
 * about a second of *flag becoming true; NULL (the default): never. For a
 * long-poll that a process stopping must not wait out.
 */
void gp_client_set_abort_flag(struct gp_client *c, const volatile bool *flag);

/*
 * Retry a request up to n more times (default 0) when no response
 * arrived or the server answered 429, 502, 503 or 504, waiting
 * Retry-After (capped at 10 s) or an exponential backoff with jitter.
 * Only idempotent methods and POSTs carrying an Idempotency-Key are
 * retried.
 */
void gp_client_set_retries(struct gp_client *c, int n);

/*
 * Send one request. path starts with '/' and is appended to the base
 * URL as given (escape segments with gp_client_escape()). body may be
 * NULL; when it is set and extra_headers has no Content-Type,
 * "application/json" is sent. extra_headers is a NULL-terminated array
 * of "Name: value" lines, or NULL.
 *
 * out is always initialised and must be released with
 * gp_client_response_free(), whatever the result. Returns 0 when an
 * HTTP response arrived (any status), -1 with out->error set otherwise.
 */
int gp_client_request(struct gp_client *c, const char *method, const char *path, const char *body,
    size_t body_len, const char *const *extra_headers, struct gp_client_response *out)
    __attribute__((warn_unused_result));

/* Receives a downloaded body piece by piece; non-zero stops the transfer. */
typedef int (*gp_client_write_fn)(const char *data, size_t len, void *arg);

/*
 * GET path, handing a 2xx body to write as it arrives (memory flat in
 * its size; out->body stays empty); any other answer is read into out as
 * gp_client_request does. No retries, no total timeout. Returns 0 when
 * an HTTP response arrived, -1 with out->error set otherwise (also when
 * write refused a piece).
 */
int gp_client_download(struct gp_client *c, const char *path, const char *const *extra_headers,
    gp_client_write_fn write, void *arg, struct gp_client_response *out)
    __attribute__((warn_unused_result));

/* Free the body and the JSON tree and reset out. */
void gp_client_response_free(struct gp_client_response *out);

/* GET path. */
int gp_client_get(struct gp_client *c, const char *path, struct gp_client_response *out)
    __attribute__((warn_unused_result));

/* DELETE path without a body. */
int gp_client_delete(struct gp_client *c, const char *path, struct gp_client_response *out)
    __attribute__((warn_unused_result));

/*
 * Send body (a JSON value, serialized compactly; NULL sends no body)
 * with method. idempotency_key, when not NULL, goes out as the
 * Idempotency-Key header. The caller keeps ownership of body.
 */
int gp_client_send_json(struct gp_client *c, const char *method, const char *path,
    struct json_object *body, const char *idempotency_key, struct gp_client_response *out)
    __attribute__((warn_unused_result));

/* True for a 2xx status. */
bool gp_client_ok(const struct gp_client_response *r);

/*
 * Describe a failed exchange in err: the problem+json fields (status,
 * code, detail or title, errors[].field/message) when the body is a
 * problem, otherwise the status and a generic message, or the transport
 * error when no response arrived (status 0, code "transport").
 */
void gp_client_error_from_response(const struct gp_client_response *r, struct gp_error *err);

/*
 * The value at a dotted path below obj: "items[0].name", "projects",
 * "[2]" on an array. Returns NULL when a step is missing or of the wrong
 * type. The result is borrowed from obj.
 */
struct json_object *gp_client_json_get(struct json_object *obj, const char *path);

/*
 * Percent-encode s for one path segment or query value into out
 * (unreserved characters pass through). Returns -1 when out is too small.
 */
int gp_client_escape(const char *s, char *out, size_t outlen) __attribute__((warn_unused_result));

/*
 * A random idempotency key (32 hex digits) into out (at least 33
 * bytes). Returns -1 when the system has no randomness to give.
 */
int gp_client_random_key(char *out, size_t outlen) __attribute__((warn_unused_result));

#endif
