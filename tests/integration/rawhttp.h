/*
 * rawhttp.h - HTTP/1.1 over a plain socket, for the integration tests
 * that must control every byte sent (bodies that are not valid UTF-8,
 * no Content-Type, chunked uploads, hostile headers) or see every
 * header that came back (WWW-Authenticate, Allow, Retry-After), and for
 * the tests that hold connections open (per-IP limits, shutdown).
 *
 * Memory: responses live in the arena passed in; nothing is freed by hand.
 */
#ifndef GP_TEST_RAWHTTP_H
#define GP_TEST_RAWHTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <json-c/json.h>

#include "core/arena.h"

struct raw_response {
	int status;       /* 0 when no status line arrived */
	const char *head; /* status line and headers, NUL-terminated */
	const char *body; /* NUL-terminated (may hold NULs before body_len) */
	size_t body_len;
	struct json_object *json; /* parsed body, NULL when not JSON; owned by the arena */
	bool closed;              /* the server closed the connection */
	int error;                /* errno of a failed connect/send/recv, 0 when none */
};

/* A blocking TCP connection to 127.0.0.1:port; -1 with errno on failure. */
int raw_connect(int port);

/*
 * Send len bytes of req on fd and read one response (until its
 * Content-Length is satisfied, or EOF) within timeout_ms. A failed send
 * still reads what the server answered. Returns 0 when a status line
 * arrived, -1 otherwise (out->error / out->closed say why).
 */
int raw_exchange_fd(struct arena *a, int fd, const char *req, size_t len, int timeout_ms,
    struct raw_response *out);

/* raw_exchange_fd on a fresh connection that is closed afterwards. */
int raw_exchange(struct arena *a, int port, const char *req, size_t len, int timeout_ms,
    struct raw_response *out);

/*
 * Build a request: method, path, extra header lines (NULL-terminated
 * "Name: value", may be NULL), then Host, Connection: close and, when
 * body is not NULL, Content-Length. *len gets the total length.
 */
char *raw_build(struct arena *a, const char *method, const char *path, const char *const *headers,
    const char *body, size_t body_len, size_t *len);

/* The value of the first header called name (case-insensitive), NULL when absent. */
const char *raw_header(struct arena *a, const struct raw_response *r, const char *name);

/*
 * Wait up to timeout_ms for the server to close fd without sending
 * anything; true when it did (EOF or reset), false when the connection
 * stayed open or data arrived.
 */
bool raw_wait_closed(int fd, int timeout_ms);

#endif
