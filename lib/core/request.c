/*
 * request.c - building responses: JSON bodies and RFC 9457 problems.
 */
#include "request.h"
#include "json.h"

#include <stdio.h>
#include <string.h>

void
response_header(struct response *res, const char *name, const char *value)
{
	if (res->nheaders >= RESPONSE_MAX_HEADERS)
		return;
	res->headers[res->nheaders].name = name;
	res->headers[res->nheaders].value = value;
	res->nheaders++;
}

void
response_json(struct request *req, struct response *res, int status, struct json_object *obj)
{
	json_own(req->arena, obj);
	res->status = status;
	res->content_type = "application/json";
	res->body = json_to_arena(req->arena, obj, &res->body_len);
}

static const char *
status_title(int status)
{
	switch (status) {
	case 400:
		return "Bad Request";
	case 401:
		return "Unauthorized";
	case 403:
		return "Forbidden";
	case 404:
		return "Not Found";
	case 405:
		return "Method Not Allowed";
	case 409:
		return "Conflict";
	case 411:
		return "Length Required";
	case 412:
		return "Precondition Failed";
	case 413:
		return "Content Too Large";
	case 415:
		return "Unsupported Media Type";
	case 422:
		return "Unprocessable Content";
	case 428:
		return "Precondition Required";
	case 429:
		return "Too Many Requests";
	case 500:
		return "Internal Server Error";
	case 503:
		return "Service Unavailable";
	default:
		return "Error";
	}
}

void
response_problem(struct request *req, struct response *res, const struct gp_error *err)
{
	struct json_object *o = json_object_new_object();
	int status = err->status ? err->status : 500;
	const char *code = err->code[0] ? err->code : "internal";

	json_add_str(o, "type", arena_printf(req->arena, "https://gpupool.dev/problems/%s", code));
	json_add_str(o, "title", status_title(status));
	json_add_int(o, "status", status);
	json_add_str(o, "detail", err->message[0] ? err->message : status_title(status));
	json_add_str(o, "code", code);
	if (req->request_id != NULL)
		json_add_str(o, "request_id", req->request_id);
	if (err->nfields > 0) {
		struct json_object *arr = json_object_new_array();

		for (int i = 0; i < err->nfields; i++) {
			struct json_object *e = json_object_new_object();

			json_add_str(e, "field", err->fields[i].field);
			json_add_str(e, "message", err->fields[i].message);
			json_object_array_add(arr, e);
		}
		json_object_object_add(o, "errors", arr);
	}
	response_json(req, res, status, o);
	res->content_type = "application/problem+json";
	if (err->retry_after > 0)
		response_header(res, "Retry-After",
		    arena_printf(req->arena, "%d", err->retry_after));
}

void
response_empty(struct response *res, int status)
{
	res->status = status;
	res->content_type = NULL;
	res->body = "";
	res->body_len = 0;
}

void
response_raw(struct response *res, int status, const char *content_type, const char *body,
    size_t len)
{
	res->status = status;
	res->content_type = content_type;
	res->body = body;
	res->body_len = len;
}

void
response_stream(struct response *res, int status, const char *content_type, int64_t len,
    response_read_fn read, void (*done)(void *arg), void *arg)
{
	res->status = status;
	res->content_type = content_type;
	res->body = NULL;
	res->body_len = 0;
	res->stream = read;
	res->stream_done = done;
	res->stream_arg = arg;
	res->stream_len = len;
}
