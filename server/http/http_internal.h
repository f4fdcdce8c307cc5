/*
 * http_internal.h - what the files of http/ share: the server, its
 * connections and exchanges (server.c), the request view
 * (request_view.c) and the connection registry (conns.c). Only http/
 * includes it; it is the only header that names libmicrohttpd.
 */
#ifndef GP_HTTP_INTERNAL_H
#define GP_HTTP_INTERNAL_H

#include "server.h"

#include "core/arena.h"

#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

/* Open connections per address, or requests in flight per client. */
struct addr_count {
	struct addr_count *next;
	int n;
	char key[INET6_ADDRSTRLEN];
};

#define HTTP_COUNT_BUCKETS 1024

struct count_table {
	struct addr_count *bucket[HTTP_COUNT_BUCKETS];
};

/* Per TCP connection (MHD's socket context). */
struct conn_state {
	struct conn_state *prev, *next; /* the registry, under http_server.lock */
	int fd;
	atomic_llong deadline_us; /* monotonic; 0: none (a request is being served) */
	atomic_bool reading_head; /* nothing sent yet: a 408 may go out */
	bool begun;               /* has it begun a request yet? */
	bool killed;              /* shut down by the sweeper (under lock) */
	bool trusted_peer;        /* the peer is a trusted proxy */
	bool counted;             /* counted in peers (under lock) */
	int refuse;               /* 0, or 429 / 503: answer that to its first request */
	char peer[INET6_ADDRSTRLEN];
};

struct http_server {
	struct MHD_Daemon *daemon;
	struct http_config cfg;
	http_dispatch_fn dispatch;
	http_resume_fn resume;
	atomic_int in_flight; /* requests between first callback and completion */
	atomic_int fresh;     /* connections accepted that have not begun a request */
	atomic_int handed;    /* handed to MHD while stopping, not yet started by it */
	atomic_bool stopping;
	/* slow-client defence */
	pthread_mutex_t lock;
	pthread_cond_t sweep_cond;
	pthread_t sweeper;
	bool sweeper_started;
	bool sweep_stop;            /* under lock */
	struct conn_state *conns;   /* under lock */
	int open;                   /* connections, under lock */
	struct count_table peers;   /* open connections per peer address, under lock */
	struct count_table clients; /* requests in flight per proxied client, under lock */
};

/* An oversized body is drained up to this many times the limit. */
#define HTTP_DRAIN_FACTOR 8

struct exchange {
	struct arena *arena;
	struct http_server *server;
	char *body;
	size_t len;
	size_t cap;
	bool too_large;
	bool dispatched;
	size_t expected;      /* Content-Length, 0 when unknown */
	size_t dropped;       /* body bytes read past the limit */
	size_t expected_over; /* > 0: too large to drain */
	int64_t started_us;
	struct conn_state *cs;  /* NULL when MHD gave no socket context */
	const char *client_key; /* counted in clients until completion, or NULL */
	int refuse;             /* 0, or the status to answer instead of dispatching */
	/* kept here, not on the stack, so that a deferred answer can use them */
	struct request req;
	struct response res;
	bool deferred; /* suspended, waiting for http_resume */
	atomic_bool resumed;
};

/* request_view.c */
size_t http_unescape_safe(void *cls, struct MHD_Connection *conn, char *s);
bool http_request_id_valid(const char *s);
const char *http_request_id_new(struct arena *a);
bool http_cidr_match(const struct http_config *cfg, uint32_t addr);
const char *http_client_ip(struct arena *a, const struct http_config *cfg,
    struct MHD_Connection *conn);
void http_fill_request(struct exchange *x, struct MHD_Connection *conn, const char *url,
    const char *method, struct request *req);

/* conns.c */
int http_count_add(struct count_table *t, const char *key, int delta);
void http_count_free(struct count_table *t);
struct conn_state *http_conn_state_of(struct MHD_Connection *conn);
void http_conn_deadline(struct conn_state *cs, int seconds);
void http_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode toe);
void *http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn);
void *http_sweep_main(void *arg);
void http_reserve_files(unsigned int connections);

#endif
