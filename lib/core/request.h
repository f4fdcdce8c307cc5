/*
 * request.h - one HTTP exchange as the rest of the server sees it.
 *
 * http/ fills struct request from libmicrohttpd and turns struct
 * response back into an MHD response; nothing outside http/ sees MHD.
 * Every pointer in both structs lives in req->arena.
 */
#ifndef GP_CORE_REQUEST_H
#define GP_CORE_REQUEST_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "error.h"

#define REQUEST_MAX_PARAMS 4
#define RESPONSE_MAX_HEADERS 16

struct request;

typedef const char *(*request_lookup_fn)(const struct request *req, const char *name);
/* Names in the order received, a name sent twice listed twice; *n their count. */
typedef const char *const *(*request_names_fn)(const struct request *req, int *n);

struct principal {
	int64_t user_id;  /* 0 for anonymous */
	int64_t token_id; /* the token that authenticated the request */
	const char *username;
	int role;                  /* enum role from auth/roles.h */
	int64_t node_id;           /* node tokens (agent issue); 0 otherwise */
	const char *projects_json; /* memberships read with the token: [{"name","role"}] */
};

struct request {
	struct arena *arena;
	const char *method;
	const char *path; /* without the query string */
	const char *request_id;
	const char *client_ip;
	const char *body; /* NUL-terminated copy, may be NULL */
	size_t body_len;
	int64_t started_us; /* monotonic */

	request_lookup_fn header;          /* case-insensitive header lookup (its first line) */
	request_lookup_fn header_list;     /* every line of a list header, joined with ", " */
	request_lookup_fn query;           /* query-string argument lookup (the first one) */
	request_names_fn query_names;      /* the names of every query argument */
	void (*wake)(struct request *req); /* a deferred request's answer is ready (any thread) */
	void *transport;                   /* http/ private */

	/* filled by the dispatcher */
	const char *params[REQUEST_MAX_PARAMS];
	int nparams;
	const char *route_pattern;
	struct principal principal;
	void *ctx;      /* server-wide context (struct app) */
	void *deferred; /* the dispatcher's state while the answer is deferred */
};

struct response_header {
	const char *name;
	const char *value;
};

/*
 * A streamed body: http/ calls read(arg, buf, max) on a server thread
 * whenever the client can take more; it returns the bytes it wrote into
 * buf (1..max), 0 at the end, -1 on an error (the connection is cut).
 * done(arg) runs once when the response is finished or dropped.
 */
typedef long (*response_read_fn)(void *arg, char *buf, size_t max);

struct response {
	int status;
	const char *content_type;
	const char *body;
	size_t body_len;
	struct response_header headers[RESPONSE_MAX_HEADERS];
	int nheaders;
	response_read_fn stream; /* non-NULL: a streamed body instead of body */
	void (*stream_done)(void *arg);
	void *stream_arg;
	int64_t stream_len; /* Content-Length, -1 when unknown (chunked) */
};

/* Add a header; silently ignores more than RESPONSE_MAX_HEADERS. */
void response_header(struct response *res, const char *name, const char *value);

/* Serialize obj as the body (application/json). Ownership of obj passes here. */
void response_json(struct request *req, struct response *res, int status, struct json_object *obj);

/* An RFC 9457 problem+json body from err. */
void response_problem(struct request *req, struct response *res, const struct gp_error *err);

/* Empty body with status (204). */
void response_empty(struct response *res, int status);

/* Raw body already in arena memory. */
void response_raw(struct response *res, int status, const char *content_type, const char *body,
    size_t len);

/*
 * A body produced piece by piece as it is sent (downloads): memory stays
 * flat in the body's size. done(arg) always runs, also when the response
 * is never sent.
 */
void response_stream(struct response *res, int status, const char *content_type, int64_t len,
    response_read_fn read, void (*done)(void *arg), void *arg);

#endif
