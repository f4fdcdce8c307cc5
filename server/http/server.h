/*
 * server.h - the HTTP daemon (libmicrohttpd, internal thread pool, epoll).
 *
 * Turns each exchange into a struct request, hands it to the dispatch
 * callback on a pool thread and sends back the struct response. Bodies
 * over max_body answer 413 without reaching the dispatcher.
 */
#ifndef GP_HTTP_SERVER_H
#define GP_HTTP_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/request.h"

/*
 * dispatch answers at once (HTTP_DONE, res filled) or later
 * (HTTP_DEFERRED): the connection waits, without holding a pool thread,
 * until some thread calls http_resume(req); then resume runs on a pool
 * thread and fills res. Until then req and res stay where they are.
 */
enum {
	HTTP_DONE = 0,
	HTTP_DEFERRED = 1
};
typedef int (*http_dispatch_fn)(struct request *req, struct response *res);
typedef void (*http_resume_fn)(struct request *req, struct response *res);

/* An IPv4 network, host byte order: addr & mask == net. */
struct http_cidr {
	uint32_t net;
	uint32_t mask;
};

#define HTTP_MAX_TRUSTED 32

struct http_config {
	const char *host; /* IPv4 literal, "127.0.0.1" */
	int port;         /* 0 picks a free port */
	int threads;
	/*
	 * Connections served; up to connection_limit / 8 + 8 more are
	 * accepted only to be answered 503 with Retry-After (Connection:
	 * close), beyond that libmicrohttpd refuses them.
	 */
	int connection_limit;
	/*
	 * Open connections per peer address (over it: 429 with Retry-After
	 * on the first request); a trusted proxy's own connections are not
	 * counted, its clients (by X-Forwarded-For) are limited to this many
	 * requests in flight each instead.
	 */
	int per_ip_limit;
	int timeout_s;        /* idle connection timeout */
	int header_timeout_s; /* a request's line and headers must arrive within this */
	int body_timeout_s;   /* and its body within this after the headers */
	size_t max_body;
	/*
	 * libmicrohttpd's memory per connection (request line, headers, the
	 * read buffer and the response headers; bodies are read in chunks
	 * into the request arena). 0: 64 KiB. It is what a held long-poll
	 * costs, most of it touched: keep it small where waits are many.
	 */
	size_t conn_memory;
	bool probe_only; /* serve only /healthz, /readyz and /metrics (404 otherwise) */
	/*
	 * Serve only the node agents' routes (/v1/agent/...) and the
	 * probes, 404 otherwise: the agent listener, whose connections and
	 * long-polls have their own limits and do not take the API's.
	 */
	bool agent_only;
	bool access_log;
	/*
	 * Proxies whose X-Forwarded-For is believed: for a connection from
	 * one of them, the client is the rightmost address of the header
	 * that is not itself a trusted proxy. Empty: the header is ignored.
	 */
	struct http_cidr trusted[HTTP_MAX_TRUSTED];
	int ntrusted;
	void *ctx; /* copied into every request->ctx */
};

/*
 * Parse "10.0.0.0/8, 192.0.2.7" (IPv4 addresses and networks, commas)
 * into out[0..*n); -1 on anything else or more than max entries.
 */
int http_parse_cidrs(const char *s, struct http_cidr *out, int max, int *n)
    __attribute__((warn_unused_result));

struct http_server;

/*
 * Start listening; *bound_port gets the port in use. -1 with errno set
 * when the address cannot be listened on (EADDRINUSE: another process
 * has it); nothing is logged for that, the caller says which setting
 * names the address.
 */
int http_start(struct http_server **out, const struct http_config *cfg, http_dispatch_fn dispatch,
    http_resume_fn resume, int *bound_port) __attribute__((warn_unused_result));

/*
 * Wake a deferred request (any thread, once per HTTP_DEFERRED). Every
 * deferred request must be resumed before http_stop's grace ends: a
 * suspended connection keeps libmicrohttpd from stopping.
 */
void http_resume(struct request *req);

/*
 * Stop accepting (clients already in the listen backlog are still served;
 * later ones are refused), answer "Connection: close" from now on, wait
 * up to grace_ms for in-flight requests and for accepted connections
 * that have not begun one, then stop the daemon and free it.
 */
void http_stop(struct http_server *s, int grace_ms);

/* Requests currently being served. */
int http_in_flight(const struct http_server *s);

#endif
