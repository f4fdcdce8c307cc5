/*
 * server.c - libmicrohttpd glue (the only includer of microhttpd.h).
 *
 * A request arena is created on the first callback and destroyed in
 * MHD_OPTION_NOTIFY_COMPLETED. The response is queued on the second
 * callback at the earliest: libmicrohttpd 0.9.75 answers
 * "Connection: close" to one queued on the first, which costs keep-alive.
 *
 * A dispatch that answers later (HTTP_DEFERRED) suspends the connection:
 * the pool thread goes on serving others while some other thread does
 * the work and calls http_resume(), after which libmicrohttpd calls us
 * again for that connection and the resume callback produces the
 * response on a pool thread.
 *
 * Slow clients: every connection sits in a registry with a deadline for
 * the phase it is in (the request line and headers, then the body); a
 * sweeper thread shuts down the socket of one past its deadline, so
 * that libmicrohttpd, reading end-of-file, closes it: bytes trickling
 * in reset the idle timeout but not the deadline. Connections per peer
 * address, and requests in flight per client behind a trusted proxy,
 * are counted (libmicrohttpd's per-IP limit would count the proxy).
 * That registry is conns.c; what a handler reads of a request is
 * request_view.c.
 */
#include "http_internal.h"

#include "core/log.h"
#include "core/timeutil.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* a streamed body (response_stream): what the MHD callbacks need */
struct stream_body {
	response_read_fn read;
	void (*done)(void *arg);
	void *arg;
};

static ssize_t
stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream_body *b = cls;
	long n;

	(void)pos;
	n = b->read(b->arg, buf, max);
	if (n > 0)
		return (ssize_t)n;
	return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : MHD_CONTENT_READER_END_WITH_ERROR;
}

static void
stream_free(void *cls)
{
	struct stream_body *b = cls;

	if (b->done != NULL)
		b->done(b->arg);
	free(b);
}

/* The MHD response of res (NULL on failure; a stream's done has run then). */
static struct MHD_Response *
make_response(const struct response *res)
{
	struct stream_body *b;
	struct MHD_Response *r;

	if (res->stream == NULL)
		return MHD_create_response_from_buffer(res->body_len, (void *)(uintptr_t)res->body,
		    MHD_RESPMEM_PERSISTENT);
	b = malloc(sizeof(*b));
	if (b == NULL) {
		if (res->stream_done != NULL)
			res->stream_done(res->stream_arg);
		return NULL;
	}
	b->read = res->stream;
	b->done = res->stream_done;
	b->arg = res->stream_arg;
	r = MHD_create_response_from_callback(res->stream_len < 0 ? MHD_SIZE_UNKNOWN
								  : (uint64_t)res->stream_len,
	    64 * 1024, stream_read, b, stream_free);
	if (r == NULL)
		stream_free(b);
	return r;
}

static enum MHD_Result
send_response(struct http_server *s, struct MHD_Connection *conn, const struct request *req,
    const struct response *res)
{
	struct MHD_Response *r;
	enum MHD_Result ret;

	r = make_response(res);
	if (r == NULL)
		return MHD_NO;
	if (res->content_type != NULL)
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, res->content_type);
	MHD_add_response_header(r, "X-Request-Id", req->request_id);
	for (int i = 0; i < res->nheaders; i++)
		MHD_add_response_header(r, res->headers[i].name, res->headers[i].value);
	/* draining: no further requests on this connection */
	if (atomic_load(&s->stopping))
		MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
	ret = MHD_queue_response(conn, (unsigned int)res->status, r);
	MHD_destroy_response(r);
	return ret;
}

/* 429 (this address has too many) or 503 (the server is full), Retry-After: 1. */
static void
refused(struct request *req, struct response *res, int status)
{
	struct gp_error err;

	gp_error_clear(&err);
	if (status == 429)
		gp_error_set(&err, 429, "too_many_connections",
		    "too many connections or requests from this address, try again later");
	else
		gp_error_set(&err, 503, "overloaded",
		    "the server has too many connections, try again later");
	response_problem(req, res, &err);
	response_header(res, "Retry-After", "1");
	response_header(res, "Connection", "close");
}

/* Does a probe or agent listener serve this path? */
static bool
listener_serves(const struct http_config *cfg, const char *path)
{
	if (strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0 ||
	    strcmp(path, "/metrics") == 0)
		return true;
	return cfg->agent_only && strncmp(path, "/v1/agent/", 10) == 0;
}

static void
too_large(struct request *req, struct response *res, size_t max)
{
	struct gp_error err;

	gp_error_clear(&err);
	gp_error_set(&err, 413, "payload_too_large",
	    "the request body exceeds the limit of %zu bytes", max);
	response_problem(req, res, &err);
	response_header(res, "Connection", "close");
}

static enum MHD_Result
send_exchange(struct http_server *s, struct exchange *x, struct MHD_Connection *conn)
{
	if (s->cfg.access_log) {
		char status[8], dur[32];

		snprintf(status, sizeof(status), "%d", x->res.status);
		snprintf(dur, sizeof(dur), "%.3f",
		    (double)(time_mono_us() - x->started_us) / 1000.0);
		log_info(x->req.request_id, "request", "method", x->req.method, "path", x->req.path,
		    "status", status, "duration_ms", dur, "client", x->req.client_ip);
	}
	return send_response(s, conn, &x->req, &x->res);
}

/* Dispatch (or answer 413) and queue the response; once per exchange. */
static enum MHD_Result
finish_exchange(struct http_server *s, struct exchange *x, struct MHD_Connection *conn,
    const char *url, const char *method)
{
	x->dispatched = true;
	http_conn_deadline(x->cs, 0);
	http_fill_request(x, conn, url, method, &x->req);
	memset(&x->res, 0, sizeof(x->res));
	if (x->refuse != 0) {
		refused(&x->req, &x->res, x->refuse);
	} else if (x->too_large) {
		too_large(&x->req, &x->res, s->cfg.max_body);
	} else if ((s->cfg.probe_only || s->cfg.agent_only) && !listener_serves(&s->cfg, url)) {
		struct gp_error err;

		gp_error_clear(&err);
		gp_error_set(&err, 404, "not_found",
		    s->cfg.agent_only
			? "this listener serves only the agent routes (/v1/agent/...) and the probes"
			: "this listener serves only /healthz, /readyz and /metrics");
		response_problem(&x->req, &x->res, &err);
	} else if (s->dispatch(&x->req, &x->res) == HTTP_DEFERRED) {
		x->deferred = true;
		MHD_suspend_connection(conn);
		return MHD_YES;
	}
	return send_exchange(s, x, conn);
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct http_server *s = cls;
	struct exchange *x = *con_cls;

	(void)version;
	if (x == NULL) {
		struct conn_state *cs = http_conn_state_of(conn);
		const char *cl;

		if (cs != NULL && !cs->begun) {
			cs->begun = true;
			atomic_fetch_sub(&s->fresh, 1);
		}
		x = calloc(1, sizeof(*x));
		if (x == NULL)
			return MHD_NO;
		x->arena = arena_create();
		x->server = s;
		x->started_us = time_mono_us();
		x->cs = cs;
		if (cs != NULL) {
			/* the headers are in: now the body's deadline */
			atomic_store(&cs->reading_head, false);
			http_conn_deadline(cs, s->cfg.body_timeout_s);
			x->refuse = cs->refuse;
			if (x->refuse == 0 && cs->trusted_peer && s->cfg.ntrusted > 0) {
				const char *key = http_client_ip(x->arena, &s->cfg, conn);
				int n;

				pthread_mutex_lock(&s->lock);
				n = http_count_add(&s->clients, key, 1);
				pthread_mutex_unlock(&s->lock);
				if (n > 0)
					x->client_key = key;
				if (n > s->cfg.per_ip_limit)
					x->refuse = 429;
			}
		}
		cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
		    MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl != NULL) {
			char *end;
			unsigned long long n = strtoull(cl, &end, 10);

			if (*end != '\0' || n > s->cfg.max_body) {
				x->too_large = true;
				/* a declared length past the drain bound: answer on the first chunk */
				if (*end != '\0' || n > HTTP_DRAIN_FACTOR * s->cfg.max_body)
					x->expected_over = HTTP_DRAIN_FACTOR * s->cfg.max_body;
			} else {
				x->expected = (size_t)n;
			}
		}
		atomic_fetch_add(&s->in_flight, 1);
		*con_cls = x;
		/* over a limit: answer now (libmicrohttpd then closes) */
		if (x->refuse != 0)
			return finish_exchange(s, x, conn, url, method);
		return MHD_YES;
	}
	if (*upload_data_size > 0) {
		size_t n = *upload_data_size;

		*upload_data_size = 0;
		if (x->dispatched)
			return MHD_YES;
		if (x->too_large || x->len + n > s->cfg.max_body) {
			/*
			 * Over the limit: read and drop the rest up to
			 * HTTP_DRAIN_FACTOR times the limit, so the client
			 * still reads the 413 (closing on unread data resets
			 * the connection); beyond that answer at once, and MHD
			 * closes the connection after the response.
			 */
			x->too_large = true;
			x->dropped += n;
			if (x->dropped + x->expected_over > HTTP_DRAIN_FACTOR * s->cfg.max_body)
				return finish_exchange(s, x, conn, url, method);
			return MHD_YES;
		}
		if (x->len + n + 1 > x->cap) {
			size_t cap = x->cap ? x->cap : (x->expected > 0 ? x->expected + 1 : 1024);
			char *nb;

			while (cap < x->len + n + 1)
				cap *= 2;
			nb = arena_alloc(x->arena, cap);
			if (x->len > 0)
				memcpy(nb, x->body, x->len);
			x->body = nb;
			x->cap = cap;
		}
		memcpy(x->body + x->len, upload_data, n);
		x->len += n;
		x->body[x->len] = '\0';
		return MHD_YES;
	}
	if (x->dispatched) {
		if (!x->deferred || !atomic_load(&x->resumed))
			return MHD_NO;
		/* back from http_resume: the answer is ready */
		x->deferred = false;
		s->resume(&x->req, &x->res);
		return send_exchange(s, x, conn);
	}
	return finish_exchange(s, x, conn, url, method);
}

void
http_resume(struct request *req)
{
	struct exchange *x =
	    (struct exchange *)(void *)((char *)req - offsetof(struct exchange, req));

	atomic_store(&x->resumed, true);
	MHD_resume_connection(req->transport);
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct http_server *s = cls;
	struct exchange *x = *con_cls;

	(void)conn;
	(void)toe;
	if (x == NULL)
		return;
	if (x->client_key != NULL) {
		pthread_mutex_lock(&s->lock);
		(void)http_count_add(&s->clients, x->client_key, -1);
		pthread_mutex_unlock(&s->lock);
	}
	if (x->cs != NULL) {
		/* kept alive: idle, then the next request's headers */
		atomic_store(&x->cs->reading_head, true);
		http_conn_deadline(x->cs, s->cfg.timeout_s + s->cfg.header_timeout_s);
	}
	arena_destroy(x->arena);
	free(x);
	*con_cls = NULL;
	atomic_fetch_sub(&s->in_flight, 1);
}

/* libmicrohttpd's format, passed through (the attribute tells clang so) */
static void on_mhd_log(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

static void
on_mhd_log(void *cls, const char *fmt, va_list ap)
{
	char buf[512];

	(void)cls;
	vsnprintf(buf, sizeof(buf), fmt, ap);
	buf[strcspn(buf, "\n")] = '\0';
	/*
	 * A client gone mid-request (or cut off by the deadline sweeper) is
	 * routine: one line each would let a crowd of slow clients flood
	 * the log, so those go to debug.
	 */
	if (strstr(buf, "when reading request") != NULL)
		log_debug(NULL, "libmicrohttpd", "detail", buf);
	else
		log_warn(NULL, "libmicrohttpd", "detail", buf);
}

/*
 * The listening socket, bound here rather than by libmicrohttpd: a busy
 * address is then one error of ours (errno for the caller's message),
 * not libmicrohttpd's "Failed to bind to port 0" (it names the port
 * argument, 0 when the address comes as MHD_OPTION_SOCK_ADDR). Plain
 * SO_REUSEADDR (a restart reuses the port at once), never SO_REUSEPORT
 * (two servers would share the port). -1 with errno set on failure.
 */
static int
listen_socket(const struct sockaddr_in *addr, int *port)
{
	struct sockaddr_in got;
	socklen_t glen = sizeof(got);
	int one = 1, fd, e;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(fd, (const struct sockaddr *)addr, sizeof(*addr)) != 0 ||
	    listen(fd, SOMAXCONN) != 0 || getsockname(fd, (struct sockaddr *)&got, &glen) != 0) {
		e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	*port = ntohs(got.sin_port);
	return fd;
}

int
http_start(struct http_server **out, const struct http_config *cfg, http_dispatch_fn dispatch,
    http_resume_fn resume, int *bound_port)
{
	struct http_server *s = calloc(1, sizeof(*s));
	struct sockaddr_in addr;
	unsigned int mhd_limit;
	int fd, port, e;

	if (s == NULL)
		return -1;
	s->cfg = *cfg;
	s->dispatch = dispatch;
	s->resume = resume;
	/* the overflow answered 503 rather than refused at once */
	mhd_limit =
	    (unsigned int)cfg->connection_limit + (unsigned int)cfg->connection_limit / 8 + 8;
	http_reserve_files(mhd_limit);
	pthread_mutex_init(&s->lock, NULL);
	{
		pthread_condattr_t ca;

		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&s->sweep_cond, &ca);
		pthread_condattr_destroy(&ca);
	}
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t)cfg->port);
	if (inet_pton(AF_INET, cfg->host, &addr.sin_addr) != 1) {
		log_error(NULL, "could not parse the listen address", "host", cfg->host);
		errno = EINVAL;
		goto fail;
	}
	fd = listen_socket(&addr, &port);
	if (fd < 0)
		goto fail;
	s->daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_USE_ITC |
		MHD_USE_TURBO | MHD_USE_ERROR_LOG | MHD_ALLOW_SUSPEND_RESUME,
	    0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, NULL,
	    MHD_OPTION_UNESCAPE_CALLBACK, http_unescape_safe, NULL, MHD_OPTION_LISTEN_SOCKET,
	    (MHD_socket)fd, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)cfg->threads,
	    MHD_OPTION_CONNECTION_LIMIT, mhd_limit, MHD_OPTION_CONNECTION_TIMEOUT,
	    (unsigned int)cfg->timeout_s, MHD_OPTION_URI_LOG_CALLBACK, http_on_uri, s,
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    cfg->conn_memory > 0 ? cfg->conn_memory : (size_t)(64 * 1024),
	    MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_NOTIFY_CONNECTION,
	    http_on_connection, s, MHD_OPTION_END);
	if (s->daemon == NULL) {
		e = errno;
		close(fd);
		errno = e;
		goto fail;
	}
	if (pthread_create(&s->sweeper, NULL, http_sweep_main, s) != 0) {
		MHD_stop_daemon(s->daemon); /* closes fd: it was not quiesced */
		errno = EAGAIN;
		goto fail;
	}
	s->sweeper_started = true;
	*bound_port = port;
	*out = s;
	return 0;
fail:
	e = errno;
	pthread_cond_destroy(&s->sweep_cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
	errno = e;
	return -1;
}

int
http_in_flight(const struct http_server *s)
{
	return atomic_load(&s->in_flight);
}

/*
 * Hand the connections still waiting in the listen backlog to the daemon:
 * their clients connected before the stop and are owed an answer.
 */
static void
drain_backlog(struct http_server *s, MHD_socket fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return;
	for (;;) {
		struct sockaddr_storage addr;
		socklen_t alen = sizeof(addr);
		int c = accept(fd, (struct sockaddr *)&addr, &alen);

		if (c < 0) {
			if (errno == EINTR)
				continue;
			break; /* EAGAIN: the backlog is empty */
		}
		(void)fcntl(c, F_SETFD, FD_CLOEXEC);
		/* MHD starts it later, on a pool thread: count it until then */
		atomic_fetch_add(&s->handed, 1);
		if (MHD_add_connection(s->daemon, c, (struct sockaddr *)&addr, alen) != MHD_YES) {
			atomic_fetch_sub(&s->handed, 1);
			log_warn(NULL, "could not hand over a connection while stopping");
		}
	}
}

void
http_stop(struct http_server *s, int grace_ms)
{
	MHD_socket fd;
	int waited = 0;

	if (s == NULL)
		return;
	atomic_store(&s->stopping, true);
	fd = MHD_quiesce_daemon(s->daemon);
	if (fd != MHD_INVALID_SOCKET) {
		drain_backlog(s, fd);
		/*
		 * Refuse new connections now; the descriptor itself is closed
		 * only after MHD_stop_daemon, as libmicrohttpd requires.
		 */
		shutdown(fd, SHUT_RDWR);
	}
	while ((atomic_load(&s->in_flight) > 0 || atomic_load(&s->fresh) > 0 ||
		   atomic_load(&s->handed) > 0) &&
	    waited < grace_ms) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		nanosleep(&ts, NULL);
		waited += 10;
	}
	if (s->sweeper_started) {
		pthread_mutex_lock(&s->lock);
		s->sweep_stop = true;
		pthread_cond_signal(&s->sweep_cond);
		pthread_mutex_unlock(&s->lock);
		pthread_join(s->sweeper, NULL);
	}
	MHD_stop_daemon(s->daemon);
	if (fd != MHD_INVALID_SOCKET)
		close(fd);
	http_count_free(&s->peers);
	http_count_free(&s->clients);
	pthread_cond_destroy(&s->sweep_cond);
	pthread_mutex_destroy(&s->lock);
	free(s);
}
