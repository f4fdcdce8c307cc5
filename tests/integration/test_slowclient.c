/*
 * test_slowclient.c - slow clients and crowded addresses (issue 9, item 2).
 *
 * 1,100 connections trickle header lines faster than the idle timeout
 * while /healthz is probed on the probe listener: it must answer within
 * 100 ms, the header deadline must close every slow connection soon
 * after it passes, and the API port must serve again afterwards. A body
 * trickled byte by byte meets the body deadline. Behind a trusted proxy
 * many clients share the proxy's address without shutting each other
 * out, and a client over its own limit is answered 429 with Retry-After.
 */
#include "fixture.h"
#include "rawhttp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/timeutil.h"

#define SLOW_CLIENTS 1100
#define HEADER_TIMEOUT_S 3
/* the sweeper's period, scheduling on a loaded 2-core machine */
#define CLOSE_SLACK_MS 2500

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* A port nobody listens on right now (for GPUPOOL_PROBE_LISTEN). */
static int
free_port(void)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port;

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	port = ntohs(sa.sin_port);
	close(fd);
	return port;
}

/* A connection to 127.0.0.1:port from the loopback address src. */
static int
connect_from(const char *src, int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	inet_pton(AF_INET, src, &sa.sin_addr);
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto fail;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0)
		goto fail;
	return fd;
fail:
	close(fd);
	return -1;
}

static bool
send_all(int fd, const char *s)
{
	size_t len = strlen(s), off = 0;

	while (off < len) {
		ssize_t n = send(fd, s + off, len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		off += (size_t)n;
	}
	return true;
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* GET path on a fresh connection; the status, *us gets the time it took. */
static int
timed_get(struct arena *a, int port, const char *path, int timeout_ms, int64_t *us)
{
	struct raw_response r;
	size_t len;
	const char *req = raw_build(a, "GET", path, NULL, NULL, 0, &len);
	int64_t t0 = time_mono_us();

	memset(&r, 0, sizeof(r));
	(void)raw_exchange(a, port, req, len, timeout_ms, &r);
	*us = time_mono_us() - t0;
	return r.status;
}

#define PROBE_MAX 4096

/*
 * A prober on its own thread (a blocked probe must not stall the
 * attack): GET /healthz every 10 ms until told to stop; a probe that
 * got no answer counts as its timeout.
 */
struct prober {
	int port;
	int timeout_ms;
	atomic_bool stop;
	int n, ok, shed; /* probes, answered 200, answered 503 */
	int64_t us[PROBE_MAX];
};

static void *
prober_main(void *arg)
{
	struct prober *p = arg;

	while (!atomic_load(&p->stop) && p->n < PROBE_MAX) {
		struct arena *a = arena_create();
		int64_t us;

		int status = timed_get(a, p->port, "/healthz", p->timeout_ms, &us);

		if (status == 200)
			p->ok++;
		else if (status == 503)
			p->shed++;
		else if (us < p->timeout_ms * 1000LL)
			us = p->timeout_ms * 1000LL; /* no answer */
		p->us[p->n++] = us;
		arena_destroy(a);
		sleep_ms(10);
	}
	return NULL;
}

static void
prober_report(struct prober *p, const char *what)
{
	qsort(p->us, (size_t)p->n, sizeof(p->us[0]), cmp_i64);
	fprintf(stderr,
	    "%s under attack: %d probes, %d answered 200, %d 503, p50=%.1f ms p99=%.1f ms "
	    "max=%.1f ms\n",
	    what, p->n, p->ok, p->shed, p->n > 0 ? (double)p->us[p->n / 2] / 1000.0 : 0.0,
	    p->n > 0 ? (double)p->us[(p->n * 99) / 100] / 1000.0 : 0.0,
	    p->n > 0 ? (double)p->us[p->n - 1] / 1000.0 : 0.0);
}

struct slow_conn {
	int fd; /* -1 once closed */
	int64_t opened_us;
	int64_t closed_us;
	int64_t next_send_us;
	int lines;
	bool got_408;
};

/* Read what came; true when the server closed the connection. */
static bool
slow_read(struct slow_conn *c)
{
	char buf[512];

	for (;;) {
		ssize_t n = recv(c->fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);

		if (n > 0) {
			buf[n] = '\0';
			if (strstr(buf, " 408 ") != NULL)
				c->got_408 = true;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return false;
		if (n < 0 && errno == EINTR)
			continue;
		return true; /* EOF or reset */
	}
}

static void
test_slow_headers(void **state)
{
	struct fixture *fx = *state;
	int probe_port = free_port();
	char probe_env[64];
	const char *env[] = { probe_env, "GPUPOOL_HEADER_TIMEOUT=3", "GPUPOOL_CONNECTION_TIMEOUT=2",
		"GPUPOOL_ACCESS_LOG=off", NULL };
	struct fx_server *srv;
	struct slow_conn *conns = calloc(SLOW_CLIENTS, sizeof(*conns));
	struct pollfd *pfd = calloc(SLOW_CLIENTS, sizeof(*pfd));
	int *pidx = calloc(SLOW_CLIENTS, sizeof(*pidx));
	struct prober *probe = calloc(1, sizeof(*probe)), *api = calloc(1, sizeof(*api));
	pthread_t probe_thread, api_thread;
	int64_t t_end, max_close = 0, min_close = INT64_MAX, us;
	int open_n = 0, got_408 = 0;
	struct rlimit rl;

	assert_non_null(conns);
	assert_non_null(pfd);
	assert_non_null(pidx);
	assert_non_null(probe);
	assert_non_null(api);
	/* 1,100 sockets here, as many in gpupoold (it inherits the limit and raises its own) */
	assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
	rl.rlim_cur = rl.rlim_max;
	assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
	assert_true(rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= SLOW_CLIENTS + 256);
	snprintf(probe_env, sizeof(probe_env), "GPUPOOL_PROBE_LISTEN=127.0.0.1:%d", probe_port);
	srv = fixture_server_start(fx, env);
	assert_non_null(srv);

	/* the probe listener serves the probes and /metrics, nothing else */
	assert_int_equal(timed_get(fx->arena, probe_port, "/healthz", 5000, &us), 200);
	assert_int_equal(timed_get(fx->arena, probe_port, "/readyz", 5000, &us), 200);
	assert_int_equal(timed_get(fx->arena, probe_port, "/metrics", 5000, &us), 200);
	assert_int_equal(timed_get(fx->arena, probe_port, "/v1/pools", 5000, &us), 404);

	/*
	 * The attack: from 11 addresses (100 each, under the per-address
	 * limit), a request line, then a header line every second: faster
	 * than the 2 s idle timeout, so only a deadline ends them. The
	 * probes run meanwhile, every 10 ms each: on the probe listener,
	 * and for the record on the API port the attack targets.
	 */
	probe->port = probe_port;
	probe->timeout_ms = 2000;
	api->port = srv->port;
	api->timeout_ms = 2000;
	assert_int_equal(pthread_create(&probe_thread, NULL, prober_main, probe), 0);
	assert_int_equal(pthread_create(&api_thread, NULL, prober_main, api), 0);
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		char src[32];

		snprintf(src, sizeof(src), "127.1.%d.%d", i / 100, i % 100 + 1);
		conns[i].fd = connect_from(src, srv->port);
		assert_true(conns[i].fd >= 0);
		conns[i].opened_us = time_mono_us();
		conns[i].next_send_us = conns[i].opened_us + 1000000;
		assert_true(send_all(conns[i].fd, "GET /v1/pools HTTP/1.1\r\nHost: slow\r\n"));
		(void)fcntl(conns[i].fd, F_SETFL, O_NONBLOCK);
		/* an address's hundred every 100 ms: their deadlines fall over a second */
		if (i % 100 == 99)
			sleep_ms(100);
	}
	open_n = SLOW_CLIENTS;
	fprintf(stderr, "%d slow connections open after %.0f ms\n", SLOW_CLIENTS,
	    (double)(time_mono_us() - conns[0].opened_us) / 1000.0);
	t_end = time_mono_us() + (HEADER_TIMEOUT_S * 1000 + CLOSE_SLACK_MS + 1500) * 1000LL;
	while (open_n > 0 && time_mono_us() < t_end) {
		int64_t now = time_mono_us();
		int n = 0;

		for (int i = 0; i < SLOW_CLIENTS; i++) {
			struct slow_conn *c = &conns[i];

			if (c->fd < 0)
				continue;
			if (now >= c->next_send_us) {
				char line[64];

				snprintf(line, sizeof(line), "X-Trickle-%d: x\r\n", c->lines++);
				c->next_send_us = now + 1000000;
				(void)send(c->fd, line, strlen(line), MSG_NOSIGNAL | MSG_DONTWAIT);
			}
			pfd[n].fd = c->fd;
			pfd[n].events = POLLIN;
			pfd[n].revents = 0;
			pidx[n++] = i;
		}
		(void)poll(pfd, (nfds_t)n, 50);
		for (int k = 0; k < n; k++) {
			struct slow_conn *c = &conns[pidx[k]];

			if (pfd[k].revents == 0 || !slow_read(c))
				continue;
			c->closed_us = time_mono_us();
			got_408 += c->got_408;
			close(c->fd);
			c->fd = -1;
			open_n--;
		}
	}
	atomic_store(&probe->stop, true);
	atomic_store(&api->stop, true);
	pthread_join(probe_thread, NULL);
	pthread_join(api_thread, NULL);
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		int64_t d;

		if (conns[i].fd >= 0) {
			close(conns[i].fd);
			continue;
		}
		d = conns[i].closed_us - conns[i].opened_us;
		if (d > max_close)
			max_close = d;
		if (d < min_close)
			min_close = d;
	}
	fprintf(stderr,
	    "slow connections: %d still open; closed %.0f..%.0f ms after connecting "
	    "(header deadline %d s), %d saw a 408\n",
	    open_n, (double)(min_close == INT64_MAX ? 0 : min_close) / 1000.0,
	    (double)max_close / 1000.0, HEADER_TIMEOUT_S, got_408);
	prober_report(probe, "probe listener /healthz");
	prober_report(api, "API port /healthz");

	/* every slow connection closed by the header deadline, none long after it */
	assert_int_equal(open_n, 0);
	assert_true(min_close >= (HEADER_TIMEOUT_S * 1000 - 500) * 1000LL);
	assert_true(max_close <= (HEADER_TIMEOUT_S * 1000 + CLOSE_SLACK_MS) * 1000LL);
	/* the probes stayed quick throughout */
	assert_true(probe->n >= 20);
	assert_int_equal(probe->ok, probe->n);
	assert_true(probe->us[(probe->n * 99) / 100] <= 100000);
	assert_true(probe->us[probe->n - 1] <= 500000);
	/* and the API port serves again */
	{
		int ok = 0;

		for (int attempt = 0; attempt < 20 && ok < 5; attempt++) {
			ok = 0;
			for (int i = 0; i < 5; i++)
				ok += timed_get(fx->arena, srv->port, "/healthz", 2000, &us) == 200;
			if (ok < 5)
				sleep_ms(100);
		}
		assert_int_equal(ok, 5);
	}
	free(conns);
	free(pfd);
	free(pidx);
	free(probe);
	free(api);
	assert_int_equal(fixture_server_stop(fx, srv), 0);
}

static void
test_slow_body(void **state)
{
	static const char *const env[] = { "GPUPOOL_BODY_TIMEOUT=2", "GPUPOOL_CONNECTION_TIMEOUT=2",
		NULL };
	struct fixture *fx = *state;
	struct fx_server *srv = fixture_server_start(fx, env);
	int fd;
	int64_t t0, took;
	bool closed = false;

	assert_non_null(srv);
	fd = raw_connect(srv->port);
	assert_true(fd >= 0);
	assert_true(send_all(fd,
	    "POST /v1/projects HTTP/1.1\r\nHost: slow\r\n"
	    "Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"));
	t0 = time_mono_us();
	/* a byte every half second: the idle timeout never fires, the deadline does */
	while (!closed && time_mono_us() - t0 < 10 * 1000000LL) {
		if (send(fd, "{", 1, MSG_NOSIGNAL) != 1)
			closed = true;
		else
			closed = raw_wait_closed(fd, 500);
	}
	took = time_mono_us() - t0;
	fprintf(stderr, "trickled body closed after %.0f ms (body deadline 2 s)\n",
	    (double)took / 1000.0);
	assert_true(closed);
	assert_true(took >= 1500 * 1000LL);
	assert_true(took <= (2000 + CLOSE_SLACK_MS) * 1000LL);
	close(fd);
	assert_int_equal(fixture_server_stop(fx, srv), 0);
}

/*
 * A request whose pool thread is stuck in another handler (here on a
 * table lock) past the header deadline is served afterwards: the client
 * sent its headers in time, the server was what was slow.
 */
static void
test_stalled_thread_not_timed_out(void **state)
{
	static const char *const env[] = { "GPUPOOL_THREADS=1", "GPUPOOL_HEADER_TIMEOUT=1",
		"GPUPOOL_BODY_TIMEOUT=1", NULL };
	struct fixture *fx = *state;
	struct fx_server *srv = fixture_server_start(fx, env);
	struct raw_response ra, rb;
	char *req_a = arena_alloc(fx->arena, 512);
	int fd_a, fd_b, waited = 0;

	assert_non_null(srv);
	/* accepted (its header deadline running) before the only thread stalls */
	fd_b = raw_connect(srv->port);
	assert_true(fd_b >= 0);
	sleep_ms(200);
	fx_sql_exec(fx, "BEGIN");
	fx_sql_exec(fx, "LOCK TABLE tokens, users, projects IN ACCESS EXCLUSIVE MODE");
	snprintf(req_a, 512,
	    "GET /v1/projects HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer %s\r\n"
	    "Connection: close\r\n\r\n",
	    fx->admin_token);
	fd_a = raw_connect(srv->port);
	assert_true(fd_a >= 0);
	assert_true(send_all(fd_a, req_a));
	while (fx_sql_int64(fx,
		   "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
		   "AND datname = current_database()") < 1) {
		assert_true(++waited < 300);
		sleep_ms(10);
		/* a new look at pg_stat_activity inside our transaction */
		fx_sql_exec(fx, "SELECT pg_stat_clear_snapshot()");
	}
	/* b's request arrives whole, then waits 2.5 s for the thread */
	assert_true(
	    send_all(fd_b, "GET /healthz HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n"));
	sleep_ms(2500);
	fx_sql_exec(fx, "COMMIT");
	assert_int_equal(raw_exchange_fd(fx->arena, fd_a, "", 0, 10000, &ra), 0);
	assert_int_equal(ra.status, 200);
	assert_int_equal(raw_exchange_fd(fx->arena, fd_b, "", 0, 10000, &rb), 0);
	assert_int_equal(rb.status, 200);
	close(fd_a);
	close(fd_b);
	assert_int_equal(fixture_server_stop(fx, srv), 0);
}

/* A keep-alive request through the proxy on behalf of client xff. */
static const char *
proxied(struct fixture *fx, const char *method, const char *path, const char *xff,
    const char *extra)
{
	char *s = arena_alloc(fx->arena, 512);

	snprintf(s, 512, "%s %s HTTP/1.1\r\nHost: proxied\r\nX-Forwarded-For: %s\r\n%s\r\n", method,
	    path, xff, extra);
	return s;
}

static int
proxied_status(struct fixture *fx, int fd, const char *xff, struct raw_response *r)
{
	const char *req = proxied(fx, "GET", "/healthz", xff, "");

	memset(r, 0, sizeof(*r));
	if (raw_exchange_fd(fx->arena, fd, req, strlen(req), 5000, r) < 0)
		return 0;
	return r->status;
}

static void
test_trusted_proxy_clients(void **state)
{
	static const char *const env[] = { "GPUPOOL_TRUSTED_PROXIES=127.0.0.1",
		"GPUPOOL_MAX_CONNECTIONS_PER_IP=8", NULL };
	struct fixture *fx = *state;
	struct fx_server *srv = fixture_server_start(fx, env);
	int shared[40], busy[8], extra;
	struct raw_response r;
	char xff[32];

	assert_non_null(srv);
	/* 40 connections from the balancer, five times the per-address limit, all served */
	for (int i = 0; i < 40; i++) {
		shared[i] = raw_connect(srv->port);
		assert_true(shared[i] >= 0);
	}
	for (int i = 0; i < 40; i++) {
		snprintf(xff, sizeof(xff), "198.51.100.%d", i + 1);
		assert_int_equal(proxied_status(fx, shared[i], xff, &r), 200);
	}
	/* one client with 8 requests in flight (bodies that have not come yet) */
	for (int i = 0; i < 8; i++) {
		const char *req = proxied(fx, "POST", "/v1/projects", "203.0.113.7",
		    "Content-Type: application/json\r\nContent-Length: 64\r\n");

		busy[i] = raw_connect(srv->port);
		assert_true(busy[i] >= 0);
		assert_true(send_all(busy[i], req));
	}
	sleep_ms(300);
	/* its ninth is answered 429 with Retry-After */
	extra = raw_connect(srv->port);
	assert_true(extra >= 0);
	assert_int_equal(proxied_status(fx, extra, "203.0.113.7", &r), 429);
	assert_non_null(raw_header(fx->arena, &r, "Retry-After"));
	assert_non_null(r.json);
	{
		struct json_object *code;

		assert_true(json_object_object_get_ex(r.json, "code", &code));
		assert_string_equal(json_object_get_string(code), "too_many_connections");
	}
	close(extra);
	/* while the others behind the same balancer are not shut out */
	extra = raw_connect(srv->port);
	assert_true(extra >= 0);
	assert_int_equal(proxied_status(fx, extra, "203.0.113.8", &r), 200);
	close(extra);
	for (int i = 0; i < 40; i++) {
		snprintf(xff, sizeof(xff), "198.51.100.%d", i + 1);
		assert_int_equal(proxied_status(fx, shared[i], xff, &r), 200);
	}
	/* its requests gone, the client is served again */
	for (int i = 0; i < 8; i++)
		close(busy[i]);
	for (int attempt = 0;; attempt++) {
		extra = raw_connect(srv->port);
		assert_true(extra >= 0);
		if (proxied_status(fx, extra, "203.0.113.7", &r) == 200) {
			close(extra);
			break;
		}
		close(extra);
		assert_true(attempt < 50);
		sleep_ms(20);
	}
	for (int i = 0; i < 40; i++)
		close(shared[i]);
	assert_int_equal(fixture_server_stop(fx, srv), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_slow_headers),
		cmocka_unit_test(test_slow_body),
		cmocka_unit_test(test_stalled_thread_not_timed_out),
		cmocka_unit_test(test_trusted_proxy_clients),
	};

	return fixture_run_tests(tests);
}
