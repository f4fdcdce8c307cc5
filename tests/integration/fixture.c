/*
 * fixture.c - integration test fixture: throwaway PostgreSQL clusters
 * and databases, gpupoold child processes found through their
 * "listening" log line, the admin bootstrap, and HTTP, CLI, SQL and
 * JSON helpers that fail the calling cmocka test with a useful message.
 */
#define _XOPEN_SOURCE 700 /* nftw */

#include "fixture.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <grp.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/json.h"
#include "core/timeutil.h"

#ifndef GPUPOOLD_PATH
#error "GPUPOOLD_PATH must name the gpupoold binary"
#endif
#ifndef GPUPOOL_CLI_PATH
#error "GPUPOOL_CLI_PATH must name the gpupool binary"
#endif
#ifndef FIXTURE_PG_BINDIR
#define FIXTURE_PG_BINDIR "/usr/lib/postgresql/15/bin"
#endif

#define FX_START_TIMEOUT_MS 60000
#define FX_STOP_TIMEOUT_MS 30000
#define FX_CLI_TIMEOUT_MS 60000
#define FX_TOOL_TIMEOUT_MS 120000
#define FX_LOG_TAIL 60
#define FX_MAX_ENV 32
#define FX_MAX_ARGS 64

struct fx_cluster {
	char host[PATH_MAX]; /* socket directory */
	char port[16];
	char user[64];
	bool owned; /* started (and to be stopped) by us */
	bool running;
	char base[PATH_MAX]; /* owned: the directory holding everything */
	char datadir[PATH_MAX];
	char logfile[PATH_MAX];
	bool drop_root; /* run initdb/pg_ctl as run_uid/run_gid */
	uid_t run_uid;
	gid_t run_gid;
};

struct fx_private {
	struct fx_cluster pg;
	PGconn *sql; /* lazily opened on the test database */
	bool db_created;
	const char *const *server_env;
	int nseq; /* log files and unique names */
	int unique;
	bool keep;
	pid_t agents[64]; /* agents started by fx_agent_spawn, 0 once stopped */
	int nagents;
};

static bool fixture_teardown_failed;

/* ---- small utilities ---- */

static void
fx_sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
		;
}

static int64_t
fx_now_ms(void)
{
	return time_mono_us() / 1000;
}

const char *
fx_str(struct fixture *fx, const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	s = arena_vprintf(fx->arena, fmt, ap);
	va_end(ap);
	return s;
}

const char *
fx_unique(struct fixture *fx, const char *prefix)
{
	return fx_str(fx, "%s-%d", prefix, ++fx->priv->unique);
}

static int
fx_random_hex(char *out, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char raw[8];

	if (len < sizeof(raw) * 2 + 1 || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		return -1;
	for (size_t i = 0; i < sizeof(raw); i++) {
		out[2 * i] = hex[raw[i] >> 4];
		out[2 * i + 1] = hex[raw[i] & 15];
	}
	out[sizeof(raw) * 2] = '\0';
	return 0;
}

/* The whole file in arena memory ("" when it cannot be read). */
static char *
fx_read_file(struct arena *a, const char *path, size_t *lenp)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 4096, len = 0;
	char *buf, *nb;

	if (lenp != NULL)
		*lenp = 0;
	if (f == NULL)
		return arena_strdup(a, "");
	buf = malloc(cap);
	while (buf != NULL) {
		size_t n = fread(buf + len, 1, cap - len - 1, f);

		len += n;
		if (n == 0)
			break;
		if (cap - len - 1 == 0) {
			cap *= 2;
			nb = realloc(buf, cap);
			if (nb == NULL) {
				free(buf);
				buf = NULL;
			} else {
				buf = nb;
			}
		}
	}
	fclose(f);
	if (buf == NULL)
		return arena_strdup(a, "");
	nb = arena_strndup(a, buf, len);
	free(buf);
	if (lenp != NULL)
		*lenp = len;
	return nb;
}

static int
fx_write_file(const char *path, const char *data)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t len = strlen(data);
	int ret = -1;

	if (fd < 0)
		return -1;
	while (len > 0) {
		ssize_t n = write(fd, data, len);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			goto fail;
		}
		data += n;
		len -= (size_t)n;
	}
	ret = 0;
fail:
	if (close(fd) != 0)
		ret = -1;
	return ret;
}

static int
fx_rm_cb(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	if (remove(path) != 0 && errno != ENOENT)
		fprintf(stderr, "fixture: could not remove %s: %s\n", path, strerror(errno));
	return 0;
}

static void
fx_rm_rf(const char *path)
{
	if (path[0] != '\0')
		nftw(path, fx_rm_cb, 16, FTW_DEPTH | FTW_PHYS);
}

static void
fx_print_file_tail(const char *path, int max_lines)
{
	struct arena *a = arena_create();
	size_t len;
	char *s = fx_read_file(a, path, &len);
	const char *start = s;
	int lines = 0;

	if (max_lines > 0) {
		for (size_t i = len; i > 0; i--) {
			if (s[i - 1] == '\n' && i != len && ++lines >= max_lines) {
				start = s + i;
				break;
			}
		}
	}
	fprintf(stderr, "----- %s%s -----\n%s", path, start != s ? " (tail)" : "", start);
	if (len > 0 && s[len - 1] != '\n')
		fputc('\n', stderr);
	fprintf(stderr, "----- end of %s -----\n", path);
	arena_destroy(a);
}

void
fixture_server_dump_log(const struct fx_server *srv, int max_lines)
{
	if (srv != NULL && srv->log_path[0] != '\0')
		fx_print_file_tail(srv->log_path, max_lines);
}

/* Print what the servers logged lately; used before failing a test. */
static void
fx_dump_servers(struct fixture *fx)
{
	if (fx == NULL)
		return;
	for (int i = 0; i < FIXTURE_MAX_SERVERS; i++) {
		if (fx->servers[i].pid > 0)
			fixture_server_dump_log(&fx->servers[i], FX_LOG_TAIL);
	}
}

/* ---- child processes ---- */

struct fx_spawn {
	const char *const *argv;
	const char *const *env;  /* "KEY=VALUE" sets, "KEY" unsets */
	const char *stdin_path;  /* NULL: /dev/null */
	const char *stdout_path; /* NULL: inherit */
	const char *stderr_path; /* NULL: same as stdout_path */
	bool drop_root;
	uid_t uid;
	gid_t gid;
};

static void
fx_child_apply_env(const char *const *env)
{
	char key[256];

	for (; env != NULL && *env != NULL; env++) {
		const char *eq = strchr(*env, '=');

		if (eq == NULL) {
			unsetenv(*env);
			continue;
		}
		if ((size_t)(eq - *env) >= sizeof(key))
			_exit(126);
		memcpy(key, *env, (size_t)(eq - *env));
		key[eq - *env] = '\0';
		if (setenv(key, eq + 1, 1) != 0)
			_exit(126);
	}
}

static void
fx_child_redirect(const char *path, int fd, int flags)
{
	int nfd;

	if (path == NULL)
		return;
	nfd = open(path, flags, 0644);
	if (nfd < 0 || dup2(nfd, fd) < 0)
		_exit(126);
	if (nfd != fd)
		close(nfd);
}

static pid_t
fx_spawn_start(const struct fx_spawn *sp)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid != 0)
		return pid;
	/* child: die with the test process, whatever happens to it */
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(126);
	signal(SIGPIPE, SIG_DFL);
	fx_child_redirect(sp->stdin_path ? sp->stdin_path : "/dev/null", STDIN_FILENO, O_RDONLY);
	fx_child_redirect(sp->stdout_path, STDOUT_FILENO, O_WRONLY | O_CREAT | O_APPEND);
	if (sp->stderr_path != NULL)
		fx_child_redirect(sp->stderr_path, STDERR_FILENO, O_WRONLY | O_CREAT | O_APPEND);
	else if (sp->stdout_path != NULL && dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
		_exit(126);
	fx_child_apply_env(sp->env);
	if (sp->drop_root) {
		if (setgroups(0, NULL) != 0 || setgid(sp->gid) != 0 || setuid(sp->uid) != 0)
			_exit(126);
	}
	execv(sp->argv[0], (char *const *)sp->argv);
	fprintf(stderr, "fixture: could not run %s: %s\n", sp->argv[0], strerror(errno));
	_exit(127);
}

/* Wait for pid up to timeout_ms; 0 with the decoded status, -1 on timeout. */
static int
fx_wait_pid(pid_t pid, long timeout_ms, int *status)
{
	int64_t deadline = fx_now_ms() + timeout_ms;
	long nap = 1;
	int ws;

	for (;;) {
		pid_t got = waitpid(pid, &ws, WNOHANG);

		if (got == pid)
			break;
		if (got < 0 && errno != EINTR) {
			*status = -1;
			return 0;
		}
		if (fx_now_ms() > deadline)
			return -1;
		fx_sleep_ms(nap);
		if (nap < 20)
			nap *= 2;
	}
	if (WIFEXITED(ws))
		*status = WEXITSTATUS(ws);
	else if (WIFSIGNALED(ws))
		*status = 128 + WTERMSIG(ws);
	else
		*status = -1;
	return 0;
}

/*
 * Run argv to completion with stdin from input, stdout and stderr into
 * files under the temp dir, read back into *out. -1 on timeout (the
 * child is killed) or when it could not be started.
 */
static int
fx_run(struct fixture *fx, const char *const *argv, const char *const *env, const char *input,
    long timeout_ms, bool drop_root, struct fx_proc *out)
{
	struct fx_spawn sp = { .argv = argv, .env = env, .drop_root = drop_root };
	const char *in_path = NULL, *out_path, *err_path;
	int seq = ++fx->priv->nseq;
	pid_t pid;
	int status;

	memset(out, 0, sizeof(*out));
	out->status = -1;
	out_path = fx_str(fx, "%s/run-%d.out", fx->tmpdir, seq);
	err_path = fx_str(fx, "%s/run-%d.err", fx->tmpdir, seq);
	if (input != NULL) {
		in_path = fx_str(fx, "%s/run-%d.in", fx->tmpdir, seq);
		if (fx_write_file(in_path, input) != 0) {
			fprintf(stderr, "fixture: could not write %s: %s\n", in_path,
			    strerror(errno));
			return -1;
		}
	}
	if (drop_root) {
		sp.uid = fx->priv->pg.run_uid;
		sp.gid = fx->priv->pg.run_gid;
		/* the unprivileged child must be able to write its output files */
		if (fx_write_file(out_path, "") != 0 || fx_write_file(err_path, "") != 0 ||
		    chown(out_path, sp.uid, sp.gid) != 0 || chown(err_path, sp.uid, sp.gid) != 0 ||
		    (in_path != NULL && chown(in_path, sp.uid, sp.gid) != 0)) {
			fprintf(stderr, "fixture: could not prepare output files: %s\n",
			    strerror(errno));
			return -1;
		}
	}
	sp.stdin_path = in_path;
	sp.stdout_path = out_path;
	sp.stderr_path = err_path;
	pid = fx_spawn_start(&sp);
	if (pid < 0) {
		fprintf(stderr, "fixture: fork failed: %s\n", strerror(errno));
		return -1;
	}
	if (fx_wait_pid(pid, timeout_ms, &status) != 0) {
		kill(pid, SIGKILL);
		fx_wait_pid(pid, 5000, &status);
		out->out = fx_read_file(fx->arena, out_path, NULL);
		out->err = fx_read_file(fx->arena, err_path, NULL);
		fprintf(stderr,
		    "fixture: %s did not finish within %ld ms\nstdout:\n%s\nstderr:\n%s\n", argv[0],
		    timeout_ms, out->out, out->err);
		return -1;
	}
	out->status = status;
	out->out = fx_read_file(fx->arena, out_path, NULL);
	out->err = fx_read_file(fx->arena, err_path, NULL);
	if (in_path != NULL)
		unlink(in_path);
	return 0;
}

static void
fx_print_proc(const char *what, const struct fx_proc *p)
{
	fprintf(stderr,
	    "fixture: %s exited with status %d\n--- stdout ---\n%s\n--- stderr ---\n%s\n", what,
	    p->status, p->out ? p->out : "", p->err ? p->err : "");
}

/* ---- PostgreSQL clusters and databases ---- */

static void
fx_pg_conninfo(const struct fx_cluster *pg, const char *dbname, const char **keys,
    const char **vals)
{
	keys[0] = "host";
	vals[0] = pg->host;
	keys[1] = "port";
	vals[1] = pg->port;
	keys[2] = "user";
	vals[2] = pg->user;
	keys[3] = "dbname";
	vals[3] = dbname;
	keys[4] = "connect_timeout";
	vals[4] = "10";
	keys[5] = "application_name";
	vals[5] = "gpupool-test-fixture";
	keys[6] = NULL;
	vals[6] = NULL;
}

/* Run one utility statement in the maintenance database. */
static int
fx_pg_admin(const struct fx_cluster *pg, const char *sql)
{
	const char *keys[8], *vals[8];
	PGconn *conn;
	PGresult *res;
	int ret = -1;

	fx_pg_conninfo(pg, "postgres", keys, vals);
	conn = PQconnectdbParams(keys, vals, 0);
	if (PQstatus(conn) != CONNECTION_OK) {
		fprintf(stderr, "fixture: could not connect to PostgreSQL in %s port %s: %s",
		    pg->host, pg->port, PQerrorMessage(conn));
		goto fail;
	}
	res = PQexec(conn, sql);
	if (PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK)
		ret = 0;
	else
		fprintf(stderr, "fixture: %s: %s", sql, PQerrorMessage(conn));
	PQclear(res);
fail:
	PQfinish(conn);
	return ret;
}

/* Where initdb and pg_ctl live: $GPUPOOL_TEST_PGBIN or the build-time default. */
static const char *
fx_pg_bindir(void)
{
	const char *d = getenv("GPUPOOL_TEST_PGBIN");

	return d != NULL && d[0] != '\0' ? d : FIXTURE_PG_BINDIR;
}

static int
fx_pg_ctl(struct fixture *fx, const char *action)
{
	struct fx_cluster *pg = &fx->priv->pg;
	const char *pg_ctl = fx_str(fx, "%s/pg_ctl", fx_pg_bindir());
	const char *argv_start[] = { pg_ctl, "-D", pg->datadir, "-l", pg->logfile, "-w", "-t",
		"120", "start", NULL };
	const char *argv_stop[] = { pg_ctl, "-D", pg->datadir, "-m", "fast", "-w", "-t", "120",
		"stop", NULL };
	const char *const *argv = strcmp(action, "start") == 0 ? argv_start : argv_stop;
	struct fx_proc p;

	if (fx_run(fx, argv, NULL, NULL, FX_TOOL_TIMEOUT_MS, pg->drop_root, &p) != 0 ||
	    p.status != 0) {
		fx_print_proc(fx_str(fx, "pg_ctl %s", action), &p);
		fx_print_file_tail(pg->logfile, 40);
		return -1;
	}
	pg->running = strcmp(action, "start") == 0;
	return 0;
}

/* initdb + configuration + pg_ctl start in <tmpdir>/pg. */
static int
fx_pg_create_cluster(struct fixture *fx)
{
	struct fx_cluster *pg = &fx->priv->pg;
	const char *initdb[] = { fx_str(fx, "%s/initdb", fx_pg_bindir()), "-D", pg->datadir, "-U",
		"postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync", NULL };
	unsigned int portnum;
	struct fx_proc p;
	const char *conf;
	FILE *f;

	pg->owned = true;
	snprintf(pg->user, sizeof(pg->user), "postgres");
	if (snprintf(pg->base, sizeof(pg->base), "%s/pg", fx->tmpdir) >= (int)sizeof(pg->base) ||
	    snprintf(pg->host, sizeof(pg->host), "%s", pg->base) >= (int)sizeof(pg->host) ||
	    snprintf(pg->datadir, sizeof(pg->datadir), "%s/data", pg->base) >=
		(int)sizeof(pg->datadir) ||
	    snprintf(pg->logfile, sizeof(pg->logfile), "%s/postgres.log", pg->base) >=
		(int)sizeof(pg->logfile)) {
		fprintf(stderr, "fixture: the temporary directory path is too long\n");
		return -1;
	}
	if (mkdir(pg->base, 0700) != 0) {
		fprintf(stderr, "fixture: could not create %s: %s\n", pg->base, strerror(errno));
		return -1;
	}
	if (geteuid() == 0) {
		/* initdb and postgres refuse to run as root */
		struct passwd *pw = getpwnam("postgres");

		if (pw == NULL)
			pw = getpwnam("nobody");
		if (pw == NULL) {
			fprintf(stderr,
			    "fixture: running as root and no postgres or nobody user exists\n");
			return -1;
		}
		pg->drop_root = true;
		pg->run_uid = pw->pw_uid;
		pg->run_gid = pw->pw_gid;
		if (chmod(fx->tmpdir, 0711) != 0 ||
		    chown(pg->base, pg->run_uid, pg->run_gid) != 0) {
			fprintf(stderr, "fixture: could not hand %s to uid %ld: %s\n", pg->base,
			    (long)pg->run_uid, strerror(errno));
			return -1;
		}
		/* a directory above the temporary one may be private (TMPDIR in a 0700
		 * home): say so, instead of initdb's "Permission denied" */
		{
			const char *probe[] = { "/usr/bin/test", "-w", pg->base, NULL };

			if (fx_run(fx, probe, NULL, NULL, FX_TOOL_TIMEOUT_MS, true, &p) != 0 ||
			    p.status != 0) {
				fprintf(stderr,
				    "fixture: PostgreSQL runs as uid %ld, which cannot reach %s: a "
				    "directory above it is private (mode 0700?). Set TMPDIR (or "
				    "GPUPOOL_TEST_TMPDIR) to a directory every user may traverse, "
				    "such as /tmp (scripts/ctest-pg does)\n",
				    (long)pg->run_uid, pg->base);
				return -1;
			}
		}
	}
	if (fx_run(fx, initdb, NULL, NULL, FX_TOOL_TIMEOUT_MS, pg->drop_root, &p) != 0 ||
	    p.status != 0) {
		fx_print_proc("initdb", &p);
		return -1;
	}
	/* the socket directory is private, so any port number is free in it */
	if (getrandom(&portnum, sizeof(portnum), 0) != (ssize_t)sizeof(portnum))
		return -1;
	portnum = 20000u + portnum % 40000u;
	snprintf(pg->port, sizeof(pg->port), "%u", portnum);
	conf = fx_str(fx, "%s/postgresql.conf", pg->datadir);
	f = fopen(conf, "a");
	if (f == NULL) {
		fprintf(stderr, "fixture: could not open %s: %s\n", conf, strerror(errno));
		return -1;
	}
	fprintf(f,
	    "\n# gpupool test fixture\n"
	    "listen_addresses = ''\n"
	    "unix_socket_directories = '%s'\n"
	    "port = %s\n"
	    "fsync = off\n"
	    "synchronous_commit = off\n"
	    "full_page_writes = off\n"
	    "max_connections = 300\n"
	    "shared_buffers = 32MB\n"
	    "log_min_messages = warning\n",
	    pg->host, pg->port);
	if (fclose(f) != 0) {
		fprintf(stderr, "fixture: could not write %s\n", conf);
		return -1;
	}
	return fx_pg_ctl(fx, "start");
}

static int
fx_pg_setup(struct fixture *fx, bool private_pg)
{
	struct fx_cluster *pg = &fx->priv->pg;
	const char *host = getenv("GPUPOOL_TEST_PGHOST");
	const char *port = getenv("GPUPOOL_TEST_PGPORT");
	const char *user = getenv("GPUPOOL_TEST_PGUSER");
	char hex[20], esc_host[PATH_MAX * 3];
	int n;

	if (!private_pg && host != NULL && host[0] != '\0') {
		if (snprintf(pg->host, sizeof(pg->host), "%s", host) >= (int)sizeof(pg->host)) {
			fprintf(stderr, "fixture: GPUPOOL_TEST_PGHOST is too long\n");
			return -1;
		}
		snprintf(pg->port, sizeof(pg->port), "%s", port && port[0] ? port : "5432");
		snprintf(pg->user, sizeof(pg->user), "%s", user && user[0] ? user : "postgres");
		pg->running = true;
	} else if (fx_pg_create_cluster(fx) != 0) {
		return -1;
	}
	if (fx_random_hex(hex, sizeof(hex)) != 0) {
		fprintf(stderr, "fixture: no randomness for the database name\n");
		return -1;
	}
	snprintf(fx->db_name, sizeof(fx->db_name), "gp_%s", hex);
	if (fx_pg_admin(pg, fx_str(fx, "CREATE DATABASE %s", fx->db_name)) != 0)
		return -1;
	fx->priv->db_created = true;
	if (gp_client_escape(pg->host, esc_host, sizeof(esc_host)) != 0)
		return -1;
	n = snprintf(fx->db_url, sizeof(fx->db_url), "postgresql://%s@/%s?host=%s&port=%s",
	    pg->user, fx->db_name, esc_host, pg->port);
	if (n < 0 || (size_t)n >= sizeof(fx->db_url)) {
		fprintf(stderr, "fixture: the database URL is too long\n");
		return -1;
	}
	return 0;
}

static int
fx_pg_teardown(struct fixture *fx)
{
	struct fx_private *priv = fx->priv;
	int ret = 0;

	if (priv->sql != NULL) {
		PQfinish(priv->sql);
		priv->sql = NULL;
	}
	if (priv->db_created && priv->pg.running &&
	    fx_pg_admin(&priv->pg,
		fx_str(fx, "DROP DATABASE IF EXISTS %s WITH (FORCE)", fx->db_name)) != 0)
		ret = -1;
	priv->db_created = false;
	if (priv->pg.owned && priv->pg.running && fx_pg_ctl(fx, "stop") != 0)
		ret = -1;
	return ret;
}

int
fixture_pg_stop(struct fixture *fx)
{
	if (!fx->priv->pg.owned) {
		fprintf(stderr,
		    "fixture: fixture_pg_stop needs a private cluster "
		    "(fixture_group_setup_private_pg)\n");
		return -1;
	}
	if (fx->priv->sql != NULL) {
		PQfinish(fx->priv->sql);
		fx->priv->sql = NULL;
	}
	return fx_pg_ctl(fx, "stop");
}

int
fixture_pg_start(struct fixture *fx)
{
	if (!fx->priv->pg.owned) {
		fprintf(stderr, "fixture: fixture_pg_start needs a private cluster\n");
		return -1;
	}
	return fx_pg_ctl(fx, "start");
}

/* ---- SQL helpers ---- */

static void
fx_pqclear_cb(void *p)
{
	PQclear(p);
}

static PGresult *
fx_sql_vexec(struct fixture *fx, const char *file, int line, const char *sql, va_list ap)
{
	const char *params[32];
	const char *p;
	int nparams = 0;
	PGresult *res = NULL;
	ExecStatusType st;

	while ((p = va_arg(ap, const char *)) != NULL) {
		if (nparams >= 32) {
			print_error("fixture: more than 32 SQL parameters\n");
			_fail(file, line);
		}
		params[nparams++] = p;
	}
	for (int attempt = 0; attempt < 2; attempt++) {
		if (fx->priv->sql == NULL) {
			fx->priv->sql = PQconnectdb(fx->db_url);
		} else if (PQstatus(fx->priv->sql) != CONNECTION_OK) {
			PQreset(fx->priv->sql);
		}
		if (PQstatus(fx->priv->sql) != CONNECTION_OK)
			continue;
		res = PQexecParams(fx->priv->sql, sql, nparams, NULL, params, NULL, NULL, 0);
		if (PQstatus(fx->priv->sql) == CONNECTION_OK)
			break;
		/* the connection broke (PostgreSQL restarted): reconnect and retry once */
		PQclear(res);
		res = NULL;
	}
	if (res == NULL) {
		print_error("fixture: could not run \"%s\": %s", sql,
		    fx->priv->sql ? PQerrorMessage(fx->priv->sql) : "no connection\n");
		_fail(file, line);
	}
	arena_defer(fx->arena, fx_pqclear_cb, res);
	st = PQresultStatus(res);
	if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
		print_error("fixture: SQL failed: %s\n  %s", sql, PQresultErrorMessage(res));
		_fail(file, line);
	}
	return res;
}

static PGresult *
fx_sql_one(struct fixture *fx, const char *file, int line, const char *sql, va_list ap)
{
	PGresult *res = fx_sql_vexec(fx, file, line, sql, ap);

	if (PQntuples(res) != 1 || PQnfields(res) != 1) {
		print_error("fixture: expected one row and one column from \"%s\", got %d rows, %d columns\n",
		    sql, PQntuples(res), PQnfields(res));
		_fail(file, line);
	}
	return res;
}

int64_t
fx_sql_int64_at(struct fixture *fx, const char *file, int line, const char *sql, ...)
{
	PGresult *res;
	const char *v;
	char *end;
	long long n;
	va_list ap;

	va_start(ap, sql);
	res = fx_sql_one(fx, file, line, sql, ap);
	va_end(ap);
	if (PQgetisnull(res, 0, 0)) {
		print_error("fixture: \"%s\" returned NULL, expected an integer\n", sql);
		_fail(file, line);
	}
	v = PQgetvalue(res, 0, 0);
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno != 0 || end == v || *end != '\0') {
		print_error("fixture: \"%s\" returned \"%s\", expected an integer\n", sql, v);
		_fail(file, line);
	}
	return (int64_t)n;
}

const char *
fx_sql_text_at(struct fixture *fx, const char *file, int line, const char *sql, ...)
{
	PGresult *res;
	va_list ap;

	va_start(ap, sql);
	res = fx_sql_one(fx, file, line, sql, ap);
	va_end(ap);
	if (PQgetisnull(res, 0, 0))
		return NULL;
	return arena_strdup(fx->arena, PQgetvalue(res, 0, 0));
}

int64_t
fx_sql_exec_at(struct fixture *fx, const char *file, int line, const char *sql, ...)
{
	PGresult *res;
	const char *tuples;
	char *end;
	long long n;
	va_list ap;

	va_start(ap, sql);
	res = fx_sql_vexec(fx, file, line, sql, ap);
	va_end(ap);
	tuples = PQcmdTuples(res);
	if (tuples[0] == '\0')
		return 0;
	errno = 0;
	n = strtoll(tuples, &end, 10);
	if (errno != 0 || *end != '\0') {
		print_error("fixture: \"%s\" reported \"%s\" rows\n", sql, tuples);
		_fail(file, line);
	}
	return (int64_t)n;
}

/* ---- servers ---- */

/* The port of a "port" (or "addr"/"listen" host:port) member; 0 when none. */
static int
fx_port_of(struct json_object *o)
{
	static const char *const keys[] = { "port", "addr", "address", "listen" };
	struct json_object *v;

	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		const char *s, *colon;
		char *end;
		long n;

		if (!json_object_object_get_ex(o, keys[i], &v) || v == NULL)
			continue;
		if (json_object_is_type(v, json_type_int)) {
			n = (long)json_object_get_int64(v);
			if (n > 0 && n < 65536)
				return (int)n;
			continue;
		}
		if (!json_object_is_type(v, json_type_string))
			continue;
		s = json_object_get_string(v);
		colon = strrchr(s, ':');
		if (colon != NULL)
			s = colon + 1;
		errno = 0;
		n = strtol(s, &end, 10);
		if (errno == 0 && end != s && *end == '\0' && n > 0 && n < 65536)
			return (int)n;
	}
	return 0;
}

/*
 * Find the port in a {"msg":"listening","port":"NNNN"} log line; 0 when
 * none yet. *agent_port gets its "agent_port" (0 when absent).
 */
static int
fx_log_port(const char *log, int *agent_port)
{
	const char *line = log;
	int port = 0;

	while (port == 0) {
		const char *nl = strchr(line, '\n');
		struct json_tokener *tok;
		struct json_object *o, *msg;

		if (nl == NULL)
			break; /* no complete line left */
		if (strstr(line, "listening") != NULL && (size_t)(nl - line) < INT_MAX) {
			tok = json_tokener_new();
			if (tok == NULL)
				break;
			o = json_tokener_parse_ex(tok, line, (int)(nl - line));
			if (o != NULL && json_object_is_type(o, json_type_object) &&
			    json_object_object_get_ex(o, "msg", &msg) && msg != NULL &&
			    json_object_is_type(msg, json_type_string) &&
			    strcmp(json_object_get_string(msg), "listening") == 0) {
				struct json_object *ap;

				port = fx_port_of(o);
				if (json_object_object_get_ex(o, "agent_port", &ap) && ap != NULL)
					*agent_port = atoi(json_object_get_string(ap));
			}
			json_object_put(o);
			json_tokener_free(tok);
		}
		line = nl + 1;
	}
	return port;
}

static struct fx_server *
fx_free_slot(struct fixture *fx)
{
	for (int i = 0; i < FIXTURE_MAX_SERVERS; i++) {
		if (fx->servers[i].pid == 0)
			return &fx->servers[i];
	}
	return NULL;
}

static void
fx_server_reset(struct fx_server *srv)
{
	gp_client_destroy(srv->client);
	srv->client = NULL;
	srv->pid = 0;
	srv->port = 0;
	srv->base_url[0] = '\0';
	srv->agent_port = 0;
	srv->agent_url[0] = '\0';
}

/* True when env (NULL-terminated, may be NULL) has an entry starting with prefix. */
static bool
fx_env_sets(const char *const *env, const char *prefix)
{
	for (const char *const *e = env; e != NULL && *e != NULL; e++)
		if (strncmp(*e, prefix, strlen(prefix)) == 0)
			return true;
	return false;
}

struct fx_server *
fixture_server_start(struct fixture *fx, const char *const *extra_env)
{
	const char *argv[] = { GPUPOOLD_PATH, "serve", NULL };
	const char *env[FX_MAX_ENV + 4];
	struct fx_spawn sp = { .argv = argv, .env = env };
	struct fx_server *srv = fx_free_slot(fx);
	int nenv = 0, status;
	int64_t deadline;

	if (srv == NULL) {
		fprintf(stderr, "fixture: more than %d servers\n", FIXTURE_MAX_SERVERS);
		return NULL;
	}
	env[nenv++] = fx_str(fx, "GPUPOOL_DATABASE_URL=%s", fx->db_url);
	if (!fx_env_sets(fx->priv->server_env, "GPUPOOL_LISTEN=") &&
	    !fx_env_sets(extra_env, "GPUPOOL_LISTEN="))
		env[nenv++] = "GPUPOOL_LISTEN=127.0.0.1:0";
	for (const char *const *e = fx->priv->server_env;
	     e != NULL && *e != NULL && nenv < FX_MAX_ENV; e++) {
		const char *eq = strchr(*e, '=');

		/* extra_env overrides the fixture's setting of the same name */
		if (eq != NULL &&
		    fx_env_sets(extra_env, fx_str(fx, "%.*s", (int)(eq - *e + 1), *e)))
			continue;
		env[nenv++] = *e;
	}
	for (const char *const *e = extra_env; e != NULL && *e != NULL && nenv < FX_MAX_ENV; e++)
		env[nenv++] = *e;
	env[nenv] = NULL;
	snprintf(srv->log_path, sizeof(srv->log_path), "%s/server-%d.log", fx->tmpdir,
	    ++fx->priv->nseq);
	sp.stdout_path = srv->log_path;
	srv->pid = fx_spawn_start(&sp);
	if (srv->pid < 0) {
		fprintf(stderr, "fixture: fork failed: %s\n", strerror(errno));
		srv->pid = 0;
		return NULL;
	}
	deadline = fx_now_ms() + FX_START_TIMEOUT_MS;
	for (;;) {
		struct arena *a = arena_create();

		srv->port = fx_log_port(fx_read_file(a, srv->log_path, NULL), &srv->agent_port);
		arena_destroy(a);
		if (srv->port > 0)
			break;
		if (fx_wait_pid(srv->pid, 0, &status) == 0) {
			fprintf(stderr,
			    "fixture: gpupoold serve exited with status %d before listening\n",
			    status);
			fixture_server_dump_log(srv, 0);
			srv->pid = 0;
			fx_server_reset(srv);
			return NULL;
		}
		if (fx_now_ms() > deadline) {
			fprintf(stderr,
			    "fixture: gpupoold serve did not log \"listening\" within %d ms\n",
			    FX_START_TIMEOUT_MS);
			fixture_server_dump_log(srv, 0);
			fixture_server_kill(fx, srv);
			return NULL;
		}
		fx_sleep_ms(10);
	}
	snprintf(srv->base_url, sizeof(srv->base_url), "http://127.0.0.1:%d", srv->port);
	if (srv->agent_port > 0)
		snprintf(srv->agent_url, sizeof(srv->agent_url), "http://127.0.0.1:%d",
		    srv->agent_port);
	srv->client = gp_client_create(srv->base_url, NULL);
	if (srv->client == NULL) {
		fprintf(stderr, "fixture: could not create a client for %s\n", srv->base_url);
		fixture_server_kill(fx, srv);
		return NULL;
	}
	gp_client_set_timeouts(srv->client, 60000, 5000);
	if (fx->server == NULL)
		fx->server = srv;
	return srv;
}

int
fixture_server_stop(struct fixture *fx, struct fx_server *srv)
{
	int status = -1, ret = 0;

	if (srv == NULL || srv->pid <= 0)
		return 0;
	if (kill(srv->pid, SIGTERM) != 0 && errno != ESRCH) {
		fprintf(stderr, "fixture: could not signal gpupoold: %s\n", strerror(errno));
		ret = -1;
	}
	if (fx_wait_pid(srv->pid, FX_STOP_TIMEOUT_MS, &status) != 0) {
		fprintf(stderr,
		    "fixture: gpupoold (port %d) did not exit within %d ms of SIGTERM\n", srv->port,
		    FX_STOP_TIMEOUT_MS);
		kill(srv->pid, SIGKILL);
		fx_wait_pid(srv->pid, 5000, &status);
		ret = -1;
	} else if (status != 0) {
		fprintf(stderr, "fixture: gpupoold (port %d) exited with status %d after SIGTERM\n",
		    srv->port, status);
		ret = -1;
	}
	if (ret != 0)
		fixture_server_dump_log(srv, 0);
	if (fx->server == srv)
		fx->server = NULL;
	fx_server_reset(srv);
	return ret;
}

void
fixture_server_kill(struct fixture *fx, struct fx_server *srv)
{
	int status;

	if (srv == NULL || srv->pid <= 0)
		return;
	kill(srv->pid, SIGKILL);
	fx_wait_pid(srv->pid, 10000, &status);
	if (fx->server == srv)
		fx->server = NULL;
	fx_server_reset(srv);
}

/* ---- processes the tests run ---- */

static struct fx_proc *
fx_vrun_tool(struct fixture *fx, const char *binary, const char *const *env, const char *input,
    long timeout_ms, va_list ap)
{
	const char *argv[FX_MAX_ARGS + 2];
	struct fx_proc *p = arena_alloc(fx->arena, sizeof(*p));
	const char *arg;
	int argc = 0;

	argv[argc++] = binary;
	while ((arg = va_arg(ap, const char *)) != NULL) {
		if (argc > FX_MAX_ARGS) {
			print_error("fixture: more than %d arguments\n", FX_MAX_ARGS);
			_fail(__FILE__, __LINE__);
		}
		argv[argc++] = arg;
	}
	argv[argc] = NULL;
	if (fx_run(fx, argv, env, input, timeout_ms, false, p) != 0) {
		print_error("fixture: could not run %s\n", binary);
		_fail(__FILE__, __LINE__);
	}
	return p;
}

const char *
fx_cli_home(struct fixture *fx)
{
	return fx_str(fx, "%s/home", fx->tmpdir);
}

struct fx_proc *
fx_cli(struct fixture *fx, const char *const *env, const char *input, ...)
{
	const char *full[FX_MAX_ENV + 8];
	struct fx_proc *p;
	int n = 0;
	va_list ap;

	full[n++] = fx_str(fx, "HOME=%s", fx_cli_home(fx));
	full[n++] = "XDG_CONFIG_HOME";
	full[n++] = "GPUPOOL_SERVER";
	full[n++] = "GPUPOOL_TOKEN";
	for (; env != NULL && *env != NULL && n < FX_MAX_ENV; env++)
		full[n++] = *env;
	full[n] = NULL;
	va_start(ap, input);
	p = fx_vrun_tool(fx, GPUPOOL_CLI_PATH, full, input, FX_CLI_TIMEOUT_MS, ap);
	va_end(ap);
	return p;
}

struct fx_proc *
fx_cli_argv(struct fixture *fx, const char *const *env, const char *input, const char *const *argv)
{
	const char *full[FX_MAX_ENV + 8], *args[FX_MAX_ARGS + 2];
	struct fx_proc *p = arena_alloc(fx->arena, sizeof(*p));
	int n = 0, argc = 0;

	full[n++] = fx_str(fx, "HOME=%s", fx_cli_home(fx));
	full[n++] = "XDG_CONFIG_HOME";
	full[n++] = "GPUPOOL_SERVER";
	full[n++] = "GPUPOOL_TOKEN";
	for (; env != NULL && *env != NULL && n < FX_MAX_ENV; env++)
		full[n++] = *env;
	full[n] = NULL;
	args[argc++] = GPUPOOL_CLI_PATH;
	for (; *argv != NULL; argv++) {
		if (argc > FX_MAX_ARGS) {
			print_error("fixture: more than %d arguments\n", FX_MAX_ARGS);
			_fail(__FILE__, __LINE__);
		}
		args[argc++] = *argv;
	}
	args[argc] = NULL;
	if (fx_run(fx, args, full, input, FX_CLI_TIMEOUT_MS, false, p) != 0) {
		print_error("fixture: could not run %s\n", GPUPOOL_CLI_PATH);
		_fail(__FILE__, __LINE__);
	}
	return p;
}

struct fx_proc *
fx_gpupoold(struct fixture *fx, const char *input, ...)
{
	const char *env[] = { fx_str(fx, "GPUPOOL_DATABASE_URL=%s", fx->db_url), NULL };
	struct fx_proc *p;
	va_list ap;

	va_start(ap, input);
	p = fx_vrun_tool(fx, GPUPOOLD_PATH, env, input, FX_TOOL_TIMEOUT_MS, ap);
	va_end(ap);
	return p;
}

/* ---- HTTP ---- */

static void
fx_response_free_cb(void *p)
{
	gp_client_response_free(p);
}

/*
 * With GPUPOOL_CONTRACT_LOG set (scripts/test sets it), every response a
 * test receives through fx_request is appended to that file as one JSON
 * line, for tools/contract-check.mjs to validate against api/openapi.yaml.
 */
static void
fx_contract_record(const char *method, const char *path, const struct gp_client_response *r)
{
	const char *log = getenv("GPUPOOL_CONTRACT_LOG");
	struct json_object *o;
	const char *line;
	char *q;
	int fd;

	if (log == NULL || log[0] == '\0')
		return;
	o = json_object_new_object();
	json_object_object_add(o, "method", json_object_new_string(method));
	q = strdup(path);
	if (q != NULL && strchr(q, '?') != NULL)
		*strchr(q, '?') = '\0';
	json_object_object_add(o, "path", json_object_new_string(q ? q : path));
	free(q);
	json_object_object_add(o, "status", json_object_new_int((int)r->status));
	json_object_object_add(o, "content_type", json_object_new_string(r->content_type));
	json_object_object_add(o, "body",
	    r->body_len > 0 && r->body_len < 1024 * 1024
		? json_object_new_string_len(r->body, (int)r->body_len)
		: NULL);
	line = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd >= 0) {
		/* one write per line: O_APPEND keeps the lines of parallel tests whole */
		size_t len = strlen(line);
		char *buf = malloc(len + 1);

		if (buf != NULL) {
			memcpy(buf, line, len);
			buf[len] = '\n';
			if (write(fd, buf, len + 1) < 0)
				print_error(
				    "fixture: could not record a response for the contract check\n");
			free(buf);
		}
		close(fd);
	}
	json_object_put(o);
}

struct gp_client_response *
fx_request_at(struct fixture *fx, const char *file, int line, const char *token, const char *method,
    const char *path, const char *const *headers, const char *body_fmt, ...)
{
	struct gp_client_response *r = arena_alloc(fx->arena, sizeof(*r));
	const char *body = NULL;
	va_list ap;
	int rc;

	if (fx->server == NULL || fx->server->client == NULL) {
		print_error("fixture: no server is running for %s %s\n", method, path);
		_fail(file, line);
	}
	if (body_fmt != NULL) {
		va_start(ap, body_fmt);
		body = arena_vprintf(fx->arena, body_fmt, ap);
		va_end(ap);
	}
	if (gp_client_set_token(fx->server->client, token) != 0) {
		print_error("fixture: out of memory\n");
		_fail(file, line);
	}
	rc = gp_client_request(fx->server->client, method, path, body, body ? strlen(body) : 0,
	    headers, r);
	arena_defer(fx->arena, fx_response_free_cb, r);
	if (rc != 0) {
		print_error("fixture: %s %s got no response: %s\n", method, path, r->error);
		fx_dump_servers(fx);
		_fail(file, line);
	}
	fx_contract_record(method, path, r);
	return r;
}

/* ---- assertions ---- */

static void
fx_print_response(const struct gp_client_response *r)
{
	print_error("  content-type: %s, request id: %s\n  body: %.4000s\n", r->content_type,
	    r->request_id[0] ? r->request_id : "-", r->body ? r->body : "");
}

void
fx_assert_status(const struct gp_client_response *r, long expected, const char *file, int line)
{
	if (r->status == expected)
		return;
	print_error("expected HTTP %ld, got %ld\n", expected, r->status);
	fx_print_response(r);
	_fail(file, line);
}

void
fx_assert_problem(const struct gp_client_response *r, long status, const char *code,
    const char *file, int line)
{
	struct json_object *c = gp_client_json_get(r->json, "code");
	const char *got = c != NULL && json_object_is_type(c, json_type_string)
	    ? json_object_get_string(c)
	    : NULL;

	if (r->status == status && strncmp(r->content_type, "application/problem+json", 24) == 0 &&
	    got != NULL && strcmp(got, code) == 0)
		return;
	print_error("expected a problem %ld %s, got HTTP %ld code %s\n", status, code, r->status,
	    got ? got : "(none)");
	fx_print_response(r);
	_fail(file, line);
}

struct json_object *
fx_json(struct json_object *obj, const char *path)
{
	return gp_client_json_get(obj, path);
}

bool
fx_json_has(struct json_object *obj, const char *path)
{
	const char *dot = strrchr(path, '.');
	const char *br = strrchr(path, '[');
	struct json_object *parent;
	const char *key;
	char *ppath;
	bool ret;

	if (fx_json(obj, path) != NULL)
		return true;
	/* present-but-null: the parent exists and has the key */
	if (br != NULL && (dot == NULL || br > dot))
		return false; /* array elements are never null-vs-absent ambiguous here */
	if (dot == NULL) {
		parent = obj;
		key = path;
		return parent != NULL && json_object_is_type(parent, json_type_object) &&
		    json_object_object_get_ex(parent, key, NULL);
	}
	ppath = strndup(path, (size_t)(dot - path));
	if (ppath == NULL)
		return false;
	parent = fx_json(obj, ppath);
	free(ppath);
	ret = parent != NULL && json_object_is_type(parent, json_type_object) &&
	    json_object_object_get_ex(parent, dot + 1, NULL);
	return ret;
}

static void
fx_print_json(struct json_object *obj)
{
	print_error("  in: %.4000s\n",
	    obj ? json_object_to_json_string_ext(obj,
		      JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
		: "(no JSON)");
}

const char *
fx_json_str_at(struct json_object *obj, const char *path, const char *file, int line)
{
	struct json_object *v = fx_json(obj, path);

	if (v == NULL || !json_object_is_type(v, json_type_string)) {
		print_error("expected a string at \"%s\"\n", path);
		fx_print_json(obj);
		_fail(file, line);
	}
	return json_object_get_string(v);
}

int64_t
fx_json_int_at(struct json_object *obj, const char *path, const char *file, int line)
{
	struct json_object *v = fx_json(obj, path);

	if (v == NULL || !json_object_is_type(v, json_type_int)) {
		print_error("expected an integer at \"%s\"\n", path);
		fx_print_json(obj);
		_fail(file, line);
	}
	return json_object_get_int64(v);
}

size_t
fx_json_len_at(struct json_object *obj, const char *path, const char *file, int line)
{
	struct json_object *v = path[0] ? fx_json(obj, path) : obj;

	if (v == NULL || !json_object_is_type(v, json_type_array)) {
		print_error("expected an array at \"%s\"\n", path);
		fx_print_json(obj);
		_fail(file, line);
	}
	return json_object_array_length(v);
}

void
fx_assert_json_str(struct json_object *obj, const char *path, const char *expected,
    const char *file, int line)
{
	const char *got = fx_json_str_at(obj, path, file, line);

	if (strcmp(got, expected) == 0)
		return;
	print_error("expected \"%s\" at \"%s\", got \"%s\"\n", expected, path, got);
	fx_print_json(obj);
	_fail(file, line);
}

void
fx_assert_json_int(struct json_object *obj, const char *path, int64_t expected, const char *file,
    int line)
{
	int64_t got = fx_json_int_at(obj, path, file, line);

	if (got == expected)
		return;
	print_error("expected %lld at \"%s\", got %lld\n", (long long)expected, path,
	    (long long)got);
	fx_print_json(obj);
	_fail(file, line);
}

void
fx_assert_json_null(struct json_object *obj, const char *path, const char *file, int line)
{
	if (fx_json(obj, path) == NULL && fx_json_has(obj, path))
		return;
	print_error("expected null at \"%s\"\n", path);
	fx_print_json(obj);
	_fail(file, line);
}

void
fx_assert_json_absent(struct json_object *obj, const char *path, const char *file, int line)
{
	if (!fx_json_has(obj, path))
		return;
	print_error("expected no \"%s\"\n", path);
	fx_print_json(obj);
	_fail(file, line);
}

/* ---- users ---- */

const char *
fixture_login(struct fixture *fx, const char *user, const char *password)
{
	struct json_object *body = json_object_new_object();
	struct gp_client_response *r;

	json_object_object_add(body, "username", json_object_new_string(user));
	json_object_object_add(body, "password", json_object_new_string(password));
	json_own(fx->arena, body);
	r = fx_request(fx, NULL, "POST", "/v1/auth/login", "%s",
	    json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN));
	if (r->status != 200) {
		print_error("fixture: login as %s failed\n", user);
		fx_print_response(r);
		_fail(__FILE__, __LINE__);
	}
	return arena_strdup(fx->arena, fx_json_str(r->json, "token"));
}

const char *
fixture_create_user(struct fixture *fx, const char *name, const char *role)
{
	struct json_object *body = json_object_new_object();
	struct gp_client_response *r;

	json_object_object_add(body, "username", json_object_new_string(name));
	json_object_object_add(body, "password", json_object_new_string(FIXTURE_PASSWORD));
	json_object_object_add(body, "role", json_object_new_string(role));
	json_own(fx->arena, body);
	r = fx_request(fx, fx->admin_token, "POST", "/v1/users", "%s",
	    json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN));
	if (r->status != 201) {
		print_error("fixture: creating user %s (%s) failed\n", name, role);
		fx_print_response(r);
		_fail(__FILE__, __LINE__);
	}
	return fixture_login(fx, name, FIXTURE_PASSWORD);
}

/* ---- lifecycle ---- */

static int
fx_bootstrap(struct fixture *fx)
{
	const char *migrate[] = { GPUPOOLD_PATH, "migrate", NULL };
	const char *create[] = { GPUPOOLD_PATH, "admin", "create-user", "--username",
		FIXTURE_ADMIN_USER, "--role", "admin", NULL };
	const char *env[] = { fx_str(fx, "GPUPOOL_DATABASE_URL=%s", fx->db_url), NULL };
	struct gp_client_response r;
	struct json_object *body, *tok;
	struct fx_proc p;
	int rc;

	if (fx_run(fx, migrate, env, NULL, FX_TOOL_TIMEOUT_MS, false, &p) != 0 || p.status != 0) {
		fx_print_proc("gpupoold migrate", &p);
		return -1;
	}
	if (fx_run(fx, create, env, FIXTURE_ADMIN_PASSWORD "\n", FX_TOOL_TIMEOUT_MS, false, &p) !=
		0 ||
	    p.status != 0) {
		fx_print_proc("gpupoold admin create-user", &p);
		return -1;
	}
	if (fixture_server_start(fx, NULL) == NULL)
		return -1;
	/* log in without cmocka assertions: setup must return, not jump */
	body = json_own(fx->arena, json_object_new_object());
	json_object_object_add(body, "username", json_object_new_string(FIXTURE_ADMIN_USER));
	json_object_object_add(body, "password", json_object_new_string(FIXTURE_ADMIN_PASSWORD));
	rc = gp_client_send_json(fx->server->client, "POST", "/v1/auth/login", body, NULL, &r);
	tok = rc == 0 && r.status == 200 ? gp_client_json_get(r.json, "token") : NULL;
	if (tok == NULL || !json_object_is_type(tok, json_type_string)) {
		fprintf(stderr, "fixture: admin login failed: %s HTTP %ld %s\n", r.error, r.status,
		    r.body ? r.body : "");
		gp_client_response_free(&r);
		fixture_server_dump_log(fx->server, 0);
		return -1;
	}
	fx->admin_token = arena_strdup(fx->arena, json_object_get_string(tok));
	gp_client_response_free(&r);
	return 0;
}

int
fixture_create(const struct fixture_options *opts, struct fixture **out)
{
	static const struct fixture_options defaults = { 0 };
	const char *tmp = getenv("GPUPOOL_TEST_TMPDIR"); /* else $TMPDIR, else /tmp */
	struct fixture *fx;
	const char *keep = getenv("GPUPOOL_TEST_KEEP");

	*out = NULL;
	if (opts == NULL)
		opts = &defaults;
	signal(SIGPIPE, SIG_IGN);
	fx = calloc(1, sizeof(*fx));
	if (fx == NULL)
		return -1;
	fx->arena = arena_create();
	fx->priv = arena_alloc(fx->arena, sizeof(*fx->priv));
	fx->priv->server_env = opts->server_env;
	fx->priv->keep = keep != NULL && keep[0] != '\0' && strcmp(keep, "0") != 0;
	if (tmp == NULL || tmp[0] == '\0')
		tmp = getenv("TMPDIR");
	/* PostgreSQL's socket path (<tmpdir>/pg/.s.PGSQL.NNNNN) must stay under 107 bytes */
	if (tmp == NULL || tmp[0] != '/' || strlen(tmp) > 60)
		tmp = "/tmp";
	if (snprintf(fx->tmpdir, sizeof(fx->tmpdir), "%s/gpfx-XXXXXX", tmp) >=
		(int)sizeof(fx->tmpdir) ||
	    mkdtemp(fx->tmpdir) == NULL) {
		fprintf(stderr, "fixture: could not create a temporary directory: %s\n",
		    strerror(errno));
		fx->tmpdir[0] = '\0';
		goto fail;
	}
	if (mkdir(fx_cli_home(fx), 0700) != 0) {
		fprintf(stderr, "fixture: could not create the CLI home: %s\n", strerror(errno));
		goto fail;
	}
	if (fx_pg_setup(fx, opts->private_pg) != 0)
		goto fail;
	if (!opts->no_server && fx_bootstrap(fx) != 0)
		goto fail;
	*out = fx;
	return 0;
fail:
	fx->priv->keep = true; /* leave the evidence */
	fixture_destroy(fx);
	return -1;
}

int
fixture_destroy(struct fixture *fx)
{
	int ret = 0;

	if (fx == NULL)
		return 0;
	for (int i = 0; i < fx->priv->nagents; i++)
		if (fx->priv->agents[i] > 0)
			(void)fx_agent_stop(fx, fx->priv->agents[i]);
	for (int i = 0; i < FIXTURE_MAX_SERVERS; i++) {
		if (fixture_server_stop(fx, &fx->servers[i]) != 0)
			ret = -1;
	}
	if (fx_pg_teardown(fx) != 0)
		ret = -1;
	if (fx->tmpdir[0] != '\0') {
		if (fx->priv->keep || ret != 0)
			fprintf(stderr, "fixture: kept %s\n", fx->tmpdir);
		else
			fx_rm_rf(fx->tmpdir);
	}
	arena_destroy(fx->arena);
	free(fx);
	return ret;
}

int
fixture_group_setup(void **state)
{
	struct fixture *fx;

	if (fixture_create(NULL, &fx) != 0)
		return -1;
	*state = fx;
	return 0;
}

int
fixture_group_setup_private_pg(void **state)
{
	const struct fixture_options opts = { .private_pg = true };
	struct fixture *fx;

	if (fixture_create(&opts, &fx) != 0)
		return -1;
	*state = fx;
	return 0;
}

int
fixture_group_teardown(void **state)
{
	if (fixture_destroy(*state) != 0) {
		fixture_teardown_failed = true;
		return -1;
	}
	return 0;
}

int
fixture_exit_status(int cmocka_result)
{
	return cmocka_result != 0 || fixture_teardown_failed ? 1 : 0;
}

void
fx_agents_manage(struct fixture *fx, const char *prefix)
{
	fx_sql_exec(fx,
	    "UPDATE nodes SET managed_by_agent = true, agent_heartbeat_at = now() + interval '1 day' "
	    "WHERE name LIKE $1",
	    fx_str(fx, "%s-%%", prefix));
}

void
fx_fleet_register(struct fixture *fx, const char *prefix, const char *model, int nodes, int gpus)
{
	static int uuid_seq = 1;
	struct gp_client_response *r;

	r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters",
	    "{\"name\":\"%s\",\"region\":\"t\"}", prefix);
	assert_status(r, 201);
	for (int n = 0; n < nodes; n++) {
		const char *node = fx_str(fx, "%s-n%d", prefix, n);

		r = fx_request(fx, fx->admin_token, "POST", "/v1/nodes",
		    "{\"name\":\"%s\",\"cluster\":\"%s\",\"hostname\":\"%s.local\","
		    "\"cpu_millicores\":64000,\"memory_bytes\":1000000000}",
		    node, prefix, node);
		assert_status(r, 201);
		for (int g = 0; g < gpus; g++) {
			r = fx_request(fx, fx->admin_token, "POST",
			    fx_str(fx, "/v1/nodes/%s/gpus", node),
			    "{\"index\":%d,\"uuid\":\"GPU-%08x-0000-4000-8000-%012x\","
			    "\"model\":\"%s\"}",
			    g, uuid_seq, uuid_seq, model);
			assert_status(r, 201);
			uuid_seq++;
		}
	}
}

void
fx_fleet(struct fixture *fx, const char *prefix, const char *model, int nodes, int gpus, bool mig)
{
	fx_fleet_register(fx, prefix, model, nodes, gpus);
	fx_sql_exec(fx, "UPDATE gpus SET mig_enabled = $1 WHERE model = $2", mig ? "true" : "false",
	    model);
}

/*
 * A defragmentation move's old allocation while its replacement lives
 * (allocations.replaces, migration 0026): the pool counts the new one in
 * its place, never both.
 */
#define FX_NOT_REPLACED                                                        \
	"AND NOT EXISTS (SELECT 1 FROM allocations s WHERE s.replaces = a.id " \
	"AND s.state NOT IN ('releasing', 'released')) "

void
fx_assert_pool_invariants(struct fixture *fx)
{
	/* no overlapping live allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM allocations a JOIN allocations b ON a.gpu_id = b.gpu_id "
			     "AND a.id < b.id AND a.state <> 'released' AND b.state <> 'released' "
			     "AND int4range(a.start, a.start + a.size) && int4range(b.start, b.start + b.size)"),
	    0);
	/* every pool's live allocations are its items */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM pools p WHERE p.status NOT IN ('pending', 'released') "
			     "AND p.items <> (SELECT coalesce(jsonb_agg(jsonb_build_object('model', m, "
			     "'profile', pf, 'count', c) ORDER BY m, pf), '[]') FROM (SELECT g.model AS m, "
			     "a.profile AS pf, count(*) AS c FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
			     "WHERE a.pool_id = p.id AND a.state NOT IN ('releasing', 'released') " FX_NOT_REPLACED
			     "GROUP BY 1, 2) s)"),
	    0);
	/* the ledger: per pool and kind, open intervals sum to the live allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM (SELECT l.pool_id, l.model, l.profile, sum(l.count) AS n "
			     "FROM usage_ledger l WHERE l.ended_at IS NULL GROUP BY 1, 2, 3) o "
			     "WHERE o.n <> (SELECT count(*) FROM allocations a JOIN gpus g ON g.id = a.gpu_id "
			     "WHERE a.pool_id = o.pool_id AND g.model = o.model AND a.profile = o.profile "
			     "AND a.state NOT IN ('releasing', 'released') " FX_NOT_REPLACED ")"),
	    0);
	/* gpus.layout mirrors the allocations */
	assert_int_equal(fx_sql_int64(fx,
			     "SELECT count(*) FROM gpus g WHERE g.layout <> coalesce((SELECT string_agg(a.profile "
			     "|| '@' || a.start, ',' ORDER BY a.start) FROM allocations a WHERE a.gpu_id = g.id "
			     "AND a.state <> 'released'), '')"),
	    0);
}

void
fixture_promtool_check(struct fixture *fx, const char *body, size_t len)
{
	const char *promtool = getenv("GPUPOOL_PROMTOOL");
	const char *path;
	FILE *f;
	int rc;

	if (promtool == NULL || promtool[0] == '\0')
		return;
	path = fx_str(fx, "%s/metrics-%d.txt", fx->tmpdir, (int)getpid());
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(body, 1, len, f), len);
	fclose(f);
	rc = system(fx_str(fx, "'%s' check metrics < '%s'", promtool, path));
	if (rc != 0)
		fprintf(stderr, "promtool check metrics failed on %s\n", path);
	assert_int_equal(rc, 0);
	fprintf(stderr, "promtool check metrics: clean (%zu bytes)\n", len);
}

/* ---- node agents ---- */

const char *
fx_enroll_token(struct fixture *fx, const char *cluster)
{
	struct gp_client_response *r = fx_request(fx, fx->admin_token, "POST",
	    fx_str(fx, "/v1/clusters/%s/enrollment-tokens", cluster),
	    "{\"expires_in_seconds\":600}");

	assert_status(r, 201);
	return fx_json_str(r->json, "token");
}

const char *
fx_enroll_mig_node(struct fixture *fx, const char *cluster, const char *name, const char *gpu_uuid)
{
	struct gp_client_response *r = fx_request(fx, fx->admin_token, "POST", "/v1/clusters",
	    "{\"name\":\"%s\",\"region\":\"eu-1\"}", cluster);

	if (r->status != 201 && r->status != 409)
		return NULL;
	r = fx_request(fx, NULL, "POST", "/v1/agent/enroll",
	    "{\"enrollment_token\":\"%s\",\"node_name\":\"%s\",\"hostname\":\"%s.example\","
	    "\"callback_url\":\"http://127.0.0.1:9/\",\"agent_version\":\"test\","
	    "\"gpus\":[{\"uuid\":\"%s\",\"index\":0,\"product_name\":\"NVIDIA H100 80GB HBM3\","
	    "\"memory_mib\":81559,\"mig_enabled\":true,\"instances\":[]}]}",
	    fx_enroll_token(fx, cluster), name, name, gpu_uuid);
	if (r->status != 201)
		return NULL;
	return fx_json_str(r->json, "node_token");
}

const char *
fx_agent_dir(struct fixture *fx, const char *name)
{
	return fx_str(fx, "%s/agent-%s", fx->tmpdir, name);
}

pid_t
fx_agent_spawn(struct fixture *fx, struct fx_server *server, const char *cluster, const char *name,
    const char *gpus_spec, const char *const *extra)
{
	const char *dir = fx_agent_dir(fx, name);
	const char *gpus = fx_str(fx, "%s/fake-gpus.json", dir);
	const char *log = fx_str(fx, "%s/agent-%s.log", fx->tmpdir, name);
	const char *token = fx_enroll_token(fx, cluster);
	const char *argv[64] = { GPUPOOL_AGENT_PATH, "--server", server->base_url, "--node-name",
		name, "--state-dir", dir, "--backend", "fake", "--fake-gpus", gpus,
		"--enroll-token", token, "--poll-interval", "2", "--heartbeat-interval", "1",
		"--metrics-interval", "2", "--profiles-interval", "2" };
	int argc = 21;
	FILE *f;
	pid_t pid;

	assert_true(fx->priv->nagents < (int)(sizeof(fx->priv->agents) / sizeof(pid_t)));
	assert_int_equal(mkdir(dir, 0700) == 0 || errno == EEXIST, 1);
	f = fopen(gpus, "w");
	assert_non_null(f);
	fputs(gpus_spec, f);
	assert_int_equal(fclose(f), 0);
	for (int i = 0; extra != NULL && extra[i] != NULL; i++) {
		assert_true(argc < 63);
		argv[argc++] = extra[i];
	}
	argv[argc] = NULL;
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		execv(GPUPOOL_AGENT_PATH, (char *const *)argv);
		_exit(127);
	}
	fx->priv->agents[fx->priv->nagents++] = pid;
	return pid;
}

int
fx_agent_stop(struct fixture *fx, pid_t pid)
{
	int st = 0;
	int64_t deadline = fx_now_ms() + 10000;

	kill(pid, SIGCONT); /* a test may have stopped it */
	kill(pid, SIGTERM);
	while (waitpid(pid, &st, WNOHANG) == 0) {
		if (fx_now_ms() > deadline) {
			kill(pid, SIGKILL);
			(void)waitpid(pid, &st, 0);
			break;
		}
		fx_sleep_ms(20);
	}
	for (int i = 0; i < fx->priv->nagents; i++)
		if (fx->priv->agents[i] == pid)
			fx->priv->agents[i] = 0;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}
