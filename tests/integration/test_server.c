/*
 * test_server.c - gpupoold as a process: graceful shutdown with slow
 * requests in flight, /metrics and /readyz, refusing a schema newer than
 * the binary, "gpupoold migrate" twice and concurrently, "admin
 * create-user" on an existing user, and the per-IP connection limit.
 *
 * Extra servers are started with fixture_server_start (each test stops
 * what it started); gpupoold subcommands that must run concurrently or
 * against another database are spawned here directly.
 */
#include "fixture.h"
#include "rawhttp.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <regex.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/timeutil.h"

#ifndef GPUPOOLD_PATH
#error "GPUPOOLD_PATH must name the gpupoold binary"
#endif

extern char **environ;

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

/* ---- spawning gpupoold ourselves ---- */

struct child {
	pid_t pid;
	const char *out_path; /* stdout and stderr */
	int status;           /* exit status, 128 + signal, -1 unknown */
	const char *out;
};

/* Start gpupoold args... with GPUPOOL_DATABASE_URL=db_url, output to a file in the temp dir. */
static void
child_start(struct fixture *fx, struct child *c, const char *db_url, const char *const *args)
{
	const char *argv[16];
	char **env;
	size_t nenv = 0, n = 0;
	posix_spawn_file_actions_t fa;
	int rc;

	for (char **e = environ; *e != NULL; e++)
		nenv++;
	env = arena_alloc(fx->arena, (nenv + 4) * sizeof(*env));
	for (char **e = environ; *e != NULL; e++) {
		if (strncmp(*e, "GPUPOOL_", 8) != 0)
			env[n++] = *e;
	}
	env[n++] = (char *)fx_str(fx, "GPUPOOL_DATABASE_URL=%s", db_url);
	env[n++] = (char *)"GPUPOOL_LISTEN=127.0.0.1:0";
	env[n] = NULL;
	n = 0;
	argv[n++] = GPUPOOLD_PATH;
	for (; *args != NULL && n < 15; args++)
		argv[n++] = *args;
	argv[n] = NULL;
	c->out_path = fx_unique(fx, fx_str(fx, "%s/child", fx->tmpdir));
	c->status = -1;
	assert_int_equal(posix_spawn_file_actions_init(&fa), 0);
	assert_int_equal(posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY,
			     0),
	    0);
	assert_int_equal(posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, c->out_path,
			     O_WRONLY | O_CREAT | O_TRUNC, 0644),
	    0);
	assert_int_equal(posix_spawn_file_actions_adddup2(&fa, STDOUT_FILENO, STDERR_FILENO), 0);
	rc = posix_spawn(&c->pid, GPUPOOLD_PATH, &fa, NULL, (char *const *)argv, env);
	posix_spawn_file_actions_destroy(&fa);
	assert_int_equal(rc, 0);
}

static const char *
read_all(struct fixture *fx, const char *path)
{
	FILE *f = fopen(path, "rb");
	char buf[65536];
	size_t n;

	if (f == NULL)
		return "";
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	return arena_strdup(fx->arena, buf);
}

/* Wait for the child (timeout_ms, then SIGKILL and fail); fills status and out. */
static void
child_wait(struct fixture *fx, struct child *c, long timeout_ms)
{
	int64_t deadline = time_mono_us() + timeout_ms * 1000;
	int ws;

	for (;;) {
		pid_t got = waitpid(c->pid, &ws, WNOHANG);

		if (got == c->pid)
			break;
		if (time_mono_us() > deadline) {
			kill(c->pid, SIGKILL);
			waitpid(c->pid, &ws, 0);
			print_error("gpupoold did not finish within %ld ms:\n%s\n", timeout_ms,
			    read_all(fx, c->out_path));
			fail();
		}
		sleep_ms(5);
	}
	c->status = WIFEXITED(ws) ? WEXITSTATUS(ws) : WIFSIGNALED(ws) ? 128 + WTERMSIG(ws) : -1;
	c->out = read_all(fx, c->out_path);
}

static int
count_substr(const char *s, const char *needle)
{
	int n = 0;

	while ((s = strstr(s, needle)) != NULL) {
		n++;
		s += strlen(needle);
	}
	return n;
}

/* Point fx_request at srv for a while; returns the previous server. */
static struct fx_server *
use_server(struct fixture *fx, struct fx_server *srv)
{
	struct fx_server *prev = fx->server;

	fx->server = srv;
	return prev;
}

/* ---- /metrics and /readyz ---- */

/* The line "<series> <value>" exists; returns the value, or -1 when the series is absent. */
static long long
metric(const char *text, const char *series)
{
	size_t n = strlen(series);
	const char *p = text;

	while ((p = strstr(p, series)) != NULL) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtoll(p + n + 1, NULL, 10);
		p += n;
	}
	return -1;
}

#define assert_metric(text, series, expected)                                    \
	do {                                                                     \
		long long got_ = metric(text, series);                           \
		if (got_ != (long long)(expected))                               \
			print_error("%s: expected %lld, got %lld\n%s\n", series, \
			    (long long)(expected), got_, text);                  \
		assert_int_equal(got_, expected);                                \
	} while (0)

/* Every line is a comment or "name{labels} value", and every family is typed first. */
static void
assert_prometheus_text(const char *text)
{
	regex_t sample, help, type;
	const char *p = text;
	char line[1024];
	char typed[64][96];
	int ntyped = 0;

	assert_int_equal(regcomp(&sample,
			     "^([a-zA-Z_:][a-zA-Z0-9_:]*)(\\{([a-zA-Z_][a-zA-Z0-9_]*=\"[^\"]*\",?)*\\})? "
			     "(-?[0-9]+(\\.[0-9]+)?([eE][-+]?[0-9]+)?|\\+Inf|NaN)$",
			     REG_EXTENDED),
	    0);
	assert_int_equal(regcomp(&help, "^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .+$", REG_EXTENDED), 0);
	assert_int_equal(regcomp(&type,
			     "^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (counter|gauge|histogram|summary|untyped)$",
			     REG_EXTENDED),
	    0);
	while (*p != '\0') {
		size_t n = strcspn(p, "\n");
		regmatch_t m[2];

		assert_true(n < sizeof(line));
		memcpy(line, p, n);
		line[n] = '\0';
		p += n + (p[n] == '\n');
		if (line[0] == '\0')
			continue;
		if (regexec(&type, line, 2, m, 0) == 0) {
			assert_true(ntyped < 64);
			snprintf(typed[ntyped++], sizeof(typed[0]), "%.*s",
			    (int)(m[1].rm_eo - m[1].rm_so), line + m[1].rm_so);
			continue;
		}
		if (regexec(&help, line, 0, NULL, 0) == 0)
			continue;
		if (regexec(&sample, line, 2, m, 0) != 0) {
			print_error("not a Prometheus sample line: \"%s\"\n", line);
			fail();
		}
		{
			bool ok = false;
			size_t len = (size_t)(m[1].rm_eo - m[1].rm_so);

			for (int i = 0; i < ntyped && !ok; i++) {
				size_t tl = strlen(typed[i]);

				/* a histogram family covers _bucket, _sum and _count */
				ok = len >= tl && strncmp(line, typed[i], tl) == 0 &&
				    (len == tl || strncmp(line + tl, "_bucket", len - tl) == 0 ||
					strncmp(line + tl, "_sum", len - tl) == 0 ||
					strncmp(line + tl, "_count", len - tl) == 0);
			}
			if (!ok) {
				print_error("sample before its # TYPE: \"%s\"\n", line);
				fail();
			}
		}
	}
	regfree(&sample);
	regfree(&help);
	regfree(&type);
}

/* The bucket counts of a histogram series are cumulative and end at _count. */
static void
assert_histogram(const char *text, const char *labels, long long count)
{
	static const char *const le[] = { "0.0005", "0.001", "0.0025", "0.005", "0.01", "0.025",
		"0.05", "0.1", "0.25", "0.5", "1", "5", "+Inf" };
	long long prev = 0;

	for (size_t i = 0; i < sizeof(le) / sizeof(le[0]); i++) {
		char series[256];
		long long v;

		snprintf(series, sizeof(series),
		    "gpupool_http_request_duration_seconds_bucket{%s,le=\"%s\"}", labels, le[i]);
		v = metric(text, series);
		if (v < prev)
			print_error("%s is %lld, below the previous bucket %lld\n%s\n", series, v,
			    prev, text);
		assert_true(v >= prev);
		prev = v;
	}
	assert_int_equal(prev, count);
	{
		char series[256];

		snprintf(series, sizeof(series), "gpupool_http_request_duration_seconds_count{%s}",
		    labels);
		assert_metric(text, series, count);
	}
}

static void
test_metrics(void **state)
{
	struct fixture *fx = *state;
	struct fx_server *srv = fixture_server_start(fx, NULL);
	struct fx_server *prev;
	struct gp_client_response *r;

	/* a fresh process: its counters hold exactly what this test sends */
	assert_non_null(srv);
	prev = use_server(fx, srv);
	for (int i = 0; i < 3; i++)
		assert_status(fx_request(fx, NULL, "GET", "/healthz", NULL), 200);
	for (int i = 0; i < 2; i++)
		assert_status(fx_request(fx, fx->admin_token, "GET", "/v1/me", NULL), 200);
	assert_problem(fx_request(fx, NULL, "GET", "/v1/me", NULL), 401, "unauthorized");
	assert_problem(fx_request(fx, fx->admin_token, "POST", "/v1/projects", "{\"name\":"), 400,
	    "malformed_json");
	assert_problem(fx_request(fx, NULL, "GET", "/v1/nope", NULL), 404, "not_found");
	assert_problem(fx_request(fx, NULL, "DELETE", "/healthz", NULL), 405, "method_not_allowed");
	assert_status(fx_request(fx, NULL, "GET", "/readyz", NULL), 200);

	r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	assert_status(r, 200);
	/* the scrape itself is counted after it is answered */
	assert_int_equal(metric(r->body,
			     "gpupool_http_requests_total{method=\"GET\",route=\"/metrics\",status=\"200\"}"),
	    -1);
	r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	assert_status(r, 200);
	assert_string_equal(r->content_type, "text/plain; version=0.0.4");
	assert_prometheus_text(r->body);
	assert_non_null(strstr(r->body, "# TYPE gpupool_http_requests_total counter\n"));
	assert_non_null(
	    strstr(r->body, "# TYPE gpupool_http_request_duration_seconds histogram\n"));
	assert_non_null(strstr(r->body, "# TYPE gpupool_db_reconnects_total counter\n"));
	assert_non_null(strstr(r->body, "# TYPE gpupool_db_errors_total counter\n"));

	assert_metric(r->body,
	    "gpupool_http_requests_total{method=\"GET\",route=\"/healthz\",status=\"200\"}", 3);
	assert_metric(r->body,
	    "gpupool_http_requests_total{method=\"GET\",route=\"/v1/me\",status=\"200\"}", 2);
	assert_metric(r->body,
	    "gpupool_http_requests_total{method=\"GET\",route=\"/v1/me\",status=\"401\"}", 1);
	assert_metric(r->body,
	    "gpupool_http_requests_total{method=\"POST\",route=\"/v1/projects\",status=\"400\"}",
	    1);
	assert_metric(r->body,
	    "gpupool_http_requests_total{method=\"GET\",route=\"/readyz\",status=\"200\"}", 1);
	assert_metric(r->body,
	    "gpupool_http_requests_total{method=\"GET\",route=\"/metrics\",status=\"200\"}", 1);
	assert_metric(r->body,
	    "gpupool_http_requests_total{method=\"other\",route=\"unmatched\",status=\"404\"}", 1);
	assert_metric(r->body,
	    "gpupool_http_requests_total{method=\"other\",route=\"unmatched\",status=\"405\"}", 1);
	/* nothing else was requested */
	assert_int_equal(count_substr(r->body, "\ngpupool_http_requests_total{"), 8);
	assert_metric(r->body,
	    "gpupool_http_requests_total{method=\"POST\",route=\"/v1/projects\",status=\"201\"}",
	    -1);

	assert_histogram(r->body, "method=\"GET\",route=\"/healthz\"", 3);
	assert_histogram(r->body, "method=\"GET\",route=\"/v1/me\"", 3);
	assert_histogram(r->body, "method=\"POST\",route=\"/v1/projects\"", 1);
	assert_histogram(r->body, "method=\"other\",route=\"unmatched\"", 2);
	assert_metric(r->body, "gpupool_db_reconnects_total", 0);
	/* the build and the process, as Prometheus client libraries export them */
	assert_non_null(strstr(r->body, "\ngpupool_build_info{version=\"0.1.0\",commit=\""));
	assert_non_null(strstr(r->body, "\n# TYPE process_cpu_seconds_total counter\n"));
#define METRIC_VALUE(name) atoll(strstr(r->body, "\n" name " ") + strlen("\n" name " "))
	assert_true(METRIC_VALUE("process_resident_memory_bytes") > 1000000);
	assert_true(METRIC_VALUE("process_open_fds") >= 3);
	assert_true(METRIC_VALUE("process_start_time_seconds") > 1700000000LL);
	assert_true(METRIC_VALUE("process_max_fds") > 0);
#undef METRIC_VALUE
	fixture_promtool_check(fx, r->body, r->body_len);

	use_server(fx, prev);
	assert_int_equal(fixture_server_stop(fx, srv), 0);
}

/* GPUPOOL_METRICS_TOKEN: /metrics wants that bearer and nothing else. */
static void
test_metrics_token(void **state)
{
	static const char secret[] = "metrics-secret-0123456789";
	const char *env[] = { "GPUPOOL_METRICS_TOKEN=metrics-secret-0123456789", NULL };
	struct fixture *fx = *state;
	struct fx_server *srv = fixture_server_start(fx, env);
	struct fx_server *prev;
	struct gp_client_response *r;
	char log[65536];
	size_t n;
	FILE *f;

	assert_non_null(srv);
	prev = use_server(fx, srv);
	r = fx_request(fx, NULL, "GET", "/metrics", NULL);
	assert_problem(r, 401, "unauthorized");
	assert_problem(fx_request(fx, "metrics-secret-0123456788", "GET", "/metrics", NULL), 401,
	    "unauthorized");
	/* a user's token is not the metrics token, even an admin's */
	assert_problem(fx_request(fx, fx->admin_token, "GET", "/metrics", NULL), 401,
	    "unauthorized");
	r = fx_request(fx, secret, "GET", "/metrics", NULL);
	assert_status(r, 200);
	assert_prometheus_text(r->body);
	/* the rest stays as it was */
	assert_status(fx_request(fx, NULL, "GET", "/healthz", NULL), 200);
	assert_status(fx_request(fx, fx->admin_token, "GET", "/v1/me", NULL), 200);
	use_server(fx, prev);
	f = fopen(srv->log_path, "r");
	assert_non_null(f);
	n = fread(log, 1, sizeof(log) - 1, f);
	fclose(f);
	log[n] = '\0';
	assert_null(strstr(log, secret));
	assert_int_equal(fixture_server_stop(fx, srv), 0);
	/* the default server's /metrics is open */
	assert_status(fx_request(fx, NULL, "GET", "/metrics", NULL), 200);
	/* a token too short to be a secret: gpupoold refuses to start */
	{
		const char *weak[] = { "GPUPOOL_METRICS_TOKEN=short", NULL };

		assert_null(fixture_server_start(fx, weak));
	}
}

/* One failed login from this client, with X-Forwarded-For xff. */
static void
failed_login(struct fixture *fx, const char *xff)
{
	const char *h[] = { fx_str(fx, "X-Forwarded-For: %s", xff), NULL };

	assert_problem(fx_request_h(fx, NULL, "POST", "/v1/auth/login", h,
			   "{\"username\":\"nobody-xff\",\"password\":\"wrong\"}"),
	    401, "invalid_credentials");
}

static int64_t
ip_failures(struct fixture *fx, const char *ip)
{
	return fx_sql_int64(fx,
	    "SELECT coalesce((SELECT failures FROM login_failures "
	    "WHERE key = 'ip:' || $1), 0)",
	    ip);
}

/*
 * GPUPOOL_TRUSTED_PROXIES: behind a trusted proxy the client address (per-
 * address login throttling, access log) is the rightmost X-Forwarded-For
 * entry that is not a trusted proxy; the header of anyone else is
 * ignored, and what a client writes left of its own entry never counts.
 */
static void
test_trusted_proxies(void **state)
{
	const char *env[] = { "GPUPOOL_TRUSTED_PROXIES=127.0.0.1, 10.0.0.0/8", NULL };
	struct fixture *fx = *state;
	struct fx_server *srv, *prev;
	int64_t local = ip_failures(fx, "127.0.0.1");

	/* not trusted: the header changes nothing */
	failed_login(fx, "203.0.113.99");
	assert_int_equal(ip_failures(fx, "203.0.113.99"), 0);
	assert_int_equal(ip_failures(fx, "127.0.0.1"), local + 1);

	srv = fixture_server_start(fx, env);
	assert_non_null(srv);
	prev = use_server(fx, srv);
	failed_login(fx, "203.0.113.5");
	assert_int_equal(ip_failures(fx, "203.0.113.5"), 1);
	/* a chain of trusted proxies: the first address they were given */
	failed_login(fx, "198.51.100.7, 10.1.2.3");
	assert_int_equal(ip_failures(fx, "198.51.100.7"), 1);
	/* what the client claims left of itself is not believed */
	failed_login(fx, "192.0.2.1, 203.0.113.6");
	assert_int_equal(ip_failures(fx, "203.0.113.6"), 1);
	assert_int_equal(ip_failures(fx, "192.0.2.1"), 0);
	/* an entry that is no address stops the walk at the proxy */
	failed_login(fx, "not-an-address");
	assert_int_equal(ip_failures(fx, "127.0.0.1"), local + 2);
	use_server(fx, prev);
	assert_int_equal(fixture_server_stop(fx, srv), 0);
	/* a malformed list: gpupoold refuses to start */
	{
		const char *bad[] = { "GPUPOOL_TRUSTED_PROXIES=10.0.0.0/33", NULL };

		assert_null(fixture_server_start(fx, bad));
	}
}

static void
test_readyz(void **state)
{
	struct fixture *fx = *state;
	struct gp_client_response *r = fx_request(fx, NULL, "GET", "/readyz", NULL);
	int64_t latest = fx_sql_int64(fx, "SELECT max(version) FROM schema_migrations");

	assert_status(r, 200);
	assert_string_equal(r->content_type, "application/json");
	assert_json_str(r->json, "status", "ready");
	assert_true(latest >= 1);
	assert_json_int(r->json, "schema_version", latest);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM schema_migrations"), latest);
	r = fx_request(fx, NULL, "GET", "/healthz", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "status", "ok");
}

/* ---- graceful shutdown ---- */

#define SLOW_CLIENTS 12

struct slow_client {
	pthread_t thread;
	const char *base_url;
	pthread_barrier_t *start;
	long status;
	char error[256];
	bool got_token;
	_Atomic int64_t sent_us;
	int64_t done_us;
};

/* One login (argon2id: tens of milliseconds of CPU), on its own connection. */
static void *
slow_client_main(void *arg)
{
	struct slow_client *s = arg;
	struct gp_client *c = gp_client_create(s->base_url, NULL);
	struct gp_client_response r;
	char body[256];

	snprintf(body, sizeof(body), "{\"username\":\"%s\",\"password\":\"%s\"}",
	    FIXTURE_ADMIN_USER, FIXTURE_ADMIN_PASSWORD);
	pthread_barrier_wait(s->start);
	if (c == NULL) {
		snprintf(s->error, sizeof(s->error), "no client");
		return NULL;
	}
	gp_client_set_timeouts(c, 30000, 5000);
	s->sent_us = time_mono_us();
	if (gp_client_request(c, "POST", "/v1/auth/login", body, strlen(body), NULL, &r) != 0)
		snprintf(s->error, sizeof(s->error), "%s", r.error);
	s->done_us = time_mono_us();
	s->status = r.status;
	s->got_token = r.status == 200 && gp_client_json_get(r.json, "token") != NULL;
	gp_client_response_free(&r);
	gp_client_destroy(c);
	return NULL;
}

/* Exited yet? (without reaping: the fixture reaps and checks the status) */
static bool
exited(pid_t pid, int *code)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid != pid)
		return false;
	*code = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
	return true;
}

/* One server, SLOW_CLIENTS logins, SIGTERM while they run. */
static void
shutdown_round(struct fixture *fx, int round)
{
	/* static: a failed assertion longjmps out while the clients still run */
	static struct slow_client clients[SLOW_CLIENTS];
	static pthread_barrier_t start;
	/*
	 * One thread: most connections wait, accepted or still in the
	 * listen backlog, while another login runs.
	 */
	static const char *const env[] = { "GPUPOOL_THREADS=1", NULL };
	struct fx_server *srv = fixture_server_start(fx, env);
	int64_t term_us, refused_us = 0, exit_us = 0;
	int port, code = -1, late = 0, fd;
	pid_t pid;
	const char *log;

	assert_non_null(srv);
	port = srv->port;
	pid = srv->pid;
	assert_int_equal(pthread_barrier_init(&start, NULL, SLOW_CLIENTS + 1), 0);
	memset(clients, 0, sizeof(clients));
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		clients[i].base_url = srv->base_url;
		clients[i].start = &start;
		assert_int_equal(pthread_create(&clients[i].thread, NULL, slow_client_main,
				     &clients[i]),
		    0);
	}
	pthread_barrier_wait(&start);
	/*
	 * Let every client connect and send. One login at a time takes a
	 * few hundred ms for all of them, so most are still waiting (in the
	 * listen backlog or accepted but not begun) when the signal comes.
	 */
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		for (int spin = 0; atomic_load(&clients[i].sent_us) == 0 && spin < 2000; spin++)
			sleep_ms(1);
	}
	sleep_ms(30);
	term_us = time_mono_us();
	assert_int_equal(kill(pid, SIGTERM), 0);

	/* new connections are refused while the old ones drain */
	for (int i = 0; i < 1000 && refused_us == 0; i++) {
		fd = raw_connect(port);
		if (fd < 0 && errno == ECONNREFUSED) {
			refused_us = time_mono_us();
			break;
		}
		if (fd >= 0)
			close(fd);
		sleep_ms(2);
	}
	assert_true(refused_us != 0);

	for (int i = 0; i < SLOW_CLIENTS; i++)
		assert_int_equal(pthread_join(clients[i].thread, NULL), 0);
	pthread_barrier_destroy(&start);
	for (int i = 0; i < 2000 && !exited(pid, &code); i++)
		sleep_ms(5);
	exit_us = time_mono_us();

	for (int i = 0; i < SLOW_CLIENTS; i++) {
		const struct slow_client *s = &clients[i];

		if (s->status != 200 || s->error[0] != '\0')
			fprintf(stderr,
			    "client %2d: sent at %+6.1f ms, done at %+6.1f ms: HTTP %ld %s\n", i,
			    (double)(s->sent_us - term_us) / 1000,
			    (double)(s->done_us - term_us) / 1000, s->status, s->error);
		if (s->done_us > refused_us)
			late++;
	}
	fprintf(stderr,
	    "round %d: SIGTERM at 0, first refused connection at %+.1f ms, "
	    "%d logins finished after it\n",
	    round, (double)(refused_us - term_us) / 1000, late);
	for (int i = 0; i < SLOW_CLIENTS; i++) {
		assert_true(clients[i].sent_us < term_us);
		assert_string_equal(clients[i].error, "");
		assert_int_equal(clients[i].status, 200);
		assert_true(clients[i].got_token);
	}
	/* the shutdown really overlapped the requests */
	assert_true(late > 0);

	/* it exited by itself, with status 0, and nobody listens any more */
	assert_int_equal(code, 0);
	fd = raw_connect(port);
	assert_true(fd < 0 && errno == ECONNREFUSED);
	log = read_all(fx, srv->log_path);
	assert_non_null(strstr(log, "\"shutting down\""));
	assert_non_null(strstr(log, "\"stopped\""));
	assert_int_equal(fixture_server_stop(fx, srv), 0);
	(void)exit_us;
	/* each login left its token */
}

/*
 * Several rounds: whether a connection is still in the listen backlog,
 * queued inside libmicrohttpd or being read when the signal comes varies
 * from run to run.
 */
static void
test_graceful_shutdown(void **state)
{
	struct fixture *fx = *state;
	int64_t tokens = fx_sql_int64(fx, "SELECT count(*) FROM tokens");

	for (int round = 1; round <= 4; round++)
		shutdown_round(fx, round);
	/* each login left its token */
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM tokens"),
	    tokens + 4 * SLOW_CLIENTS);
}

/*
 * A client that connected before the SIGTERM but is still sending its
 * request (nothing has reached a handler yet) is waited for and answered.
 */
static void
test_shutdown_waits_for_request_on_its_way(void **state)
{
	static const char head[] = "POST /v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\n";
	struct fixture *fx = *state;
	struct fx_server *srv = fixture_server_start(fx, NULL);
	const char *body, *rest, *conn_hdr;
	struct raw_response r;
	int fd, code = -1;
	pid_t pid;

	assert_non_null(srv);
	pid = srv->pid;
	fd = raw_connect(srv->port);
	assert_true(fd >= 0);
	assert_int_equal(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
	sleep_ms(50);
	assert_int_equal(kill(pid, SIGTERM), 0);
	sleep_ms(200);
	/* still there, waiting for the rest */
	assert_false(exited(pid, &code));
	body = fx_str(fx, "{\"username\":\"%s\",\"password\":\"%s\"}", FIXTURE_ADMIN_USER,
	    FIXTURE_ADMIN_PASSWORD);
	rest = fx_str(fx, "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
	    strlen(body), body);
	assert_int_equal(raw_exchange_fd(fx->arena, fd, rest, strlen(rest), 10000, &r), 0);
	close(fd);
	if (r.status != 200)
		print_error("the half-sent login got: %s%s\n", r.head ? r.head : "(nothing)\n",
		    r.body ? r.body : "");
	assert_int_equal(r.status, 200);
	assert_non_null(fx_json(r.json, "token"));
	/* the server is draining: the connection is not to be reused */
	conn_hdr = raw_header(fx->arena, &r, "Connection");
	assert_non_null(conn_hdr);
	assert_string_equal(conn_hdr, "close");
	/* and then it goes, promptly, with status 0 */
	for (int i = 0; i < 1000 && !exited(pid, &code); i++)
		sleep_ms(5);
	assert_int_equal(code, 0);
	assert_int_equal(fixture_server_stop(fx, srv), 0);
}

/* ---- per-IP connection limit ---- */

static void
test_per_ip_limit(void **state)
{
	static const char *const env[] = { "GPUPOOL_MAX_CONNECTIONS_PER_IP=4", NULL };
	struct fixture *fx = *state;
	struct fx_server *srv = fixture_server_start(fx, env);
	int fds[8], served = 0, limited = 0;
	size_t len;
	const char *req;

	assert_non_null(srv);
	req = raw_build(fx->arena, "GET", "/healthz", NULL, NULL, 0, &len);
	for (int i = 0; i < 8; i++) {
		fds[i] = raw_connect(srv->port);
		assert_true(fds[i] >= 0); /* the kernel accepts; the server decides */
		sleep_ms(5);
	}
	/*
	 * The first four are served; the others are answered 429 with
	 * Retry-After (and closed), not refused without a word.
	 */
	for (int i = 0; i < 8; i++) {
		struct raw_response r;

		assert_int_equal(raw_exchange_fd(fx->arena, fds[i], req, len, 5000, &r), 0);
		if (r.status == 200) {
			served++;
		} else {
			assert_int_equal(r.status, 429);
			assert_non_null(raw_header(fx->arena, &r, "Retry-After"));
			limited++;
		}
	}
	fprintf(stderr, "%d connections served, %d answered 429\n", served, limited);
	assert_int_equal(served, 4);
	assert_int_equal(limited, 4);
	for (int i = 0; i < 8; i++)
		close(fds[i]);

	/* the slots come back: four at once again, and the server is fine */
	for (int attempt = 0;; attempt++) {
		int again[4], ok = 0;

		for (int i = 0; i < 4; i++)
			again[i] = raw_connect(srv->port);
		for (int i = 0; i < 4; i++) {
			struct raw_response r;

			if (again[i] >= 0 &&
			    raw_exchange_fd(fx->arena, again[i], req, len, 5000, &r) == 0 &&
			    r.status == 200)
				ok++;
			if (again[i] >= 0)
				close(again[i]);
		}
		if (ok == 4)
			break;
		assert_true(attempt < 50);
		sleep_ms(20);
	}
	assert_int_equal(fixture_server_stop(fx, srv), 0);
}

/* ---- migrations ---- */

static const char migrations_sql[] =
    "SELECT string_agg(version || ' ' || name || ' ' || applied_at, ',' ORDER BY version) "
    "FROM schema_migrations";

static void
test_migrate_twice(void **state)
{
	struct fixture *fx = *state;
	const char *before = fx_sql_text(fx, migrations_sql);
	const char *tables = fx_sql_text(fx,
	    "SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class "
	    "WHERE relnamespace = 'public'::regnamespace");
	struct fx_proc *p;

	/* the fixture migrated once already; this run must change nothing */
	assert_non_null(before);
	p = fx_gpupoold(fx, NULL, "migrate", NULL);
	if (p->status != 0)
		print_error("stdout: %s\nstderr: %s\n", p->out, p->err);
	assert_int_equal(p->status, 0);
	assert_null(strstr(p->err, "applied migration"));
	assert_null(strstr(p->out, "applied migration"));
	assert_non_null(strstr(p->err, "schema is current"));
	assert_string_equal(fx_sql_text(fx, migrations_sql), before);
	assert_string_equal(fx_sql_text(fx,
				"SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class "
				"WHERE relnamespace = 'public'::regnamespace"),
	    tables);
	/* and the server is still happy with the schema */
	assert_status(fx_request(fx, NULL, "GET", "/readyz", NULL), 200);
}

#define CONCURRENT_MIGRATES 4

static void
test_migrate_concurrent(void **state)
{
	struct fixture *fx = *state;
	const struct fixture_options opts = { .no_server = true };
	struct fixture *fresh = NULL;
	struct child kids[CONCURRENT_MIGRATES];
	static const char *const args[] = { "migrate", NULL };
	int applied = 0;
	int64_t expected = fx_sql_int64(fx, "SELECT count(*) FROM schema_migrations");
	const char *expected_list = fx_sql_text(fx,
	    "SELECT string_agg(version || ' ' || name, ',' "
	    "ORDER BY version) FROM schema_migrations");

	/* a database nobody has migrated */
	assert_int_equal(fixture_create(&opts, &fresh), 0);
	assert_int_equal(fx_sql_int64(fresh,
			     "SELECT count(*) FROM pg_class "
			     "WHERE relnamespace = 'public'::regnamespace"),
	    0);
	for (int i = 0; i < CONCURRENT_MIGRATES; i++)
		child_start(fx, &kids[i], fresh->db_url, args);
	for (int i = 0; i < CONCURRENT_MIGRATES; i++) {
		child_wait(fx, &kids[i], 60000);
		if (kids[i].status != 0)
			print_error("migrate %d exited %d:\n%s\n", i, kids[i].status, kids[i].out);
		assert_int_equal(kids[i].status, 0);
		applied += count_substr(kids[i].out, "\"applied migration\"");
	}
	/* each migration applied exactly once, by one of them */
	assert_int_equal(applied, expected);
	assert_int_equal(fx_sql_int64(fresh, "SELECT count(*) FROM schema_migrations"), expected);
	assert_int_equal(fx_sql_int64(fresh,
			     "SELECT count(DISTINCT version) FROM schema_migrations"),
	    expected);
	assert_string_equal(fx_sql_text(fresh,
				"SELECT string_agg(version || ' ' || name, ',' "
				"ORDER BY version) FROM schema_migrations"),
	    expected_list);
	/* the result is the whole schema */
	assert_int_equal(fx_sql_int64(fresh,
			     "SELECT count(*) FROM pg_class WHERE relkind = 'r' AND NOT relispartition "
			     "AND relnamespace = 'public'::regnamespace"),
	    fx_sql_int64(fx,
		"SELECT count(*) FROM pg_class WHERE relkind = 'r' AND NOT relispartition "
		"AND relnamespace = 'public'::regnamespace"));
	assert_int_equal(fx_sql_int64(fresh, "SELECT count(*) FROM users"), 0);
	assert_int_equal(fixture_destroy(fresh), 0);
}

/* ---- admin create-user ---- */

static void
test_create_user_exists(void **state)
{
	struct fixture *fx = *state;
	int64_t users = fx_sql_int64(fx, "SELECT count(*) FROM users");
	int64_t audit = fx_sql_int64(fx, "SELECT count(*) FROM audit_log");
	const char *hash = fx_sql_text(fx, "SELECT password_hash FROM users WHERE username = $1",
	    FIXTURE_ADMIN_USER);
	struct fx_proc *p;
	struct gp_client_response *r;

	p = fx_gpupoold(fx, "another-Passw0rd-entirely\n", "admin", "create-user", "--username",
	    FIXTURE_ADMIN_USER, "--role", "operator", NULL);
	assert_int_equal(p->status, 3);
	assert_non_null(strstr(p->err, "already exists"));
	/* nothing changed: same rows, same role, same password */
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM users"), users);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM audit_log"), audit);
	assert_string_equal(fx_sql_text(fx, "SELECT password_hash FROM users WHERE username = $1",
				FIXTURE_ADMIN_USER),
	    hash);
	assert_string_equal(fx_sql_text(fx, "SELECT role FROM users WHERE username = $1",
				FIXTURE_ADMIN_USER),
	    "admin");
	fixture_login(fx, FIXTURE_ADMIN_USER, FIXTURE_ADMIN_PASSWORD);

	/* a new one is created (0), then exists (3) */
	p = fx_gpupoold(fx, FIXTURE_PASSWORD "\n", "admin", "create-user", "--username", "srv-op",
	    "--role", "operator", NULL);
	if (p->status != 0)
		print_error("stderr: %s\n", p->err);
	assert_int_equal(p->status, 0);
	p = fx_gpupoold(fx, "yet-another-Passw0rd\n", "admin", "create-user", "--username",
	    "srv-op", "--role", "admin", NULL);
	assert_int_equal(p->status, 3);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM users"), users + 1);
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM audit_log WHERE action = 'user.create' "
			     "AND object_id = 'srv-op'"),
	    1);
	r = fx_request(fx, fixture_login(fx, "srv-op", FIXTURE_PASSWORD), "GET", "/v1/me", NULL);
	assert_status(r, 200);
	assert_json_str(r->json, "role", "operator");
	/* bad usage is 2, not 3 */
	p = fx_gpupoold(fx, FIXTURE_PASSWORD "\n", "admin", "create-user", "--username", "srv-x",
	    "--role", "root", NULL);
	assert_int_equal(p->status, 2);
	assert_int_equal(fx_sql_int64(fx, "SELECT count(*) FROM users"), users + 1);
}

/* ---- a schema newer than the binary ---- */

static void
test_schema_too_new(void **state)
{
	struct fixture *fx = *state;
	static const char *const serve[] = { "serve", NULL };
	struct gp_client_response *r;
	struct child c;
	struct fx_proc *p;

	assert_int_equal(fx_sql_exec(fx,
			     "INSERT INTO schema_migrations (version, name) "
			     "VALUES (9999, '9999_from_the_future')"),
	    1);

	/* the running server notices: not ready */
	r = fx_request(fx, NULL, "GET", "/readyz", NULL);
	assert_problem(r, 503, "schema_mismatch");
	assert_status(fx_request(fx, NULL, "GET", "/healthz", NULL), 200);

	/* a new one refuses to start, saying why */
	fprintf(stderr, "(a gpupoold refusing to start is expected next)\n");
	assert_null(fixture_server_start(fx, NULL));
	child_start(fx, &c, fx->db_url, serve);
	child_wait(fx, &c, 30000);
	assert_int_not_equal(c.status, 0);
	assert_non_null(strstr(c.out, "newer"));
	assert_null(strstr(c.out, "\"listening\""));

	/* and migrate will not touch it */
	p = fx_gpupoold(fx, NULL, "migrate", NULL);
	assert_int_not_equal(p->status, 0);
	assert_non_null(strstr(p->err, "newer"));
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM schema_migrations WHERE version = 9999"),
	    1);

	/* back to normal */
	assert_int_equal(fx_sql_exec(fx, "DELETE FROM schema_migrations WHERE version = 9999"), 1);
	r = fx_request(fx, NULL, "GET", "/readyz", NULL);
	assert_status(r, 200);
	{
		struct fx_server *srv = fixture_server_start(fx, NULL);
		struct fx_server *prev;

		assert_non_null(srv);
		prev = use_server(fx, srv);
		assert_status(fx_request(fx, NULL, "GET", "/readyz", NULL), 200);
		use_server(fx, prev);
		assert_int_equal(fixture_server_stop(fx, srv), 0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_metrics),
		cmocka_unit_test(test_metrics_token),
		cmocka_unit_test(test_trusted_proxies),
		cmocka_unit_test(test_readyz),
		cmocka_unit_test(test_graceful_shutdown),
		cmocka_unit_test(test_shutdown_waits_for_request_on_its_way),
		cmocka_unit_test(test_per_ip_limit),
		cmocka_unit_test(test_migrate_twice),
		cmocka_unit_test(test_migrate_concurrent),
		cmocka_unit_test(test_create_user_exists),
		cmocka_unit_test(test_schema_too_new),
	};

	return fixture_run_tests(tests);
}
