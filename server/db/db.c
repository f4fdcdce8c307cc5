/*
 * db.c - per-thread libpq connections, prepared statements, transactions
 * with retry and SQLSTATE mapping. The only file that opens connections.
 */
#include "db.h"
#include "db_idempotency.h"
#include "db_internal.h"

#include "core/log.h"
#include "core/metrics_registry.h"
#include "core/timeutil.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DB_MAX_PREPARED 256
#define DB_TX_ATTEMPTS 10 /* NOWAIT lock conflicts (55P03) end in a few ms: room to retry */
#define DB_RECONNECT_BACKOFF_US 200000
/* how long a lost COMMIT's outcome is looked for: tries, 200 ms apart */
#define DB_RESOLVE_TRIES 25

struct db {
	PGconn *conn;
	const struct db_stmt *prepared[DB_MAX_PREPARED];
	int nprepared;
	bool in_tx;
	bool retryable;        /* last error was 40001/40P01/55P03 */
	bool exclusion;        /* last error was 23P01 */
	bool committed;        /* db_exec_commit ended the transaction */
	bool commit_sent;      /* the transaction's COMMIT went out */
	bool conn_lost;        /* last error: the connection is gone */
	bool terminated;       /* ... and the server said so (57P01) before running anything */
	struct idem_key *idem; /* db_idem_arm: claimed by every db_tx */
	const struct idem_key *claim; /* a key the running transaction claimed */
	/* a db_tx whose BEGIN (and SET) goes out with its first statement */
	const char *begin_sql;
	const char *begin_set;
	int64_t last_failed_connect_us;
	uint64_t failed_gen; /* connect_gen when the failed attempt began */
	char constraint[64];
	unsigned int seed;
};

static struct db_config config;
static char config_options[128];
static pthread_key_t db_key;
static pthread_once_t db_key_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t stat_errors;
static atomic_uint_fast64_t stat_reconnects;
/*
 * Successful connections, counted: a thread in its reconnect back-off
 * waits on connect_cond and retries at once when the count moves (the
 * database is back for some thread, so it is for this one too).
 */
static pthread_mutex_t connect_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t connect_cond;
static pthread_once_t connect_cond_once = PTHREAD_ONCE_INIT;
static atomic_uint_fast64_t connect_gen;
/* test hooks, debug builds only: GPUPOOL_TEST_CRASH_AFTER_COMMIT, GPUPOOL_TEST_LOSE_COMMIT_REPLY */
static bool crash_after_commit;
static bool lose_commit_reply;

static void
db_free(void *p)
{
	struct db *db = p;

	if (db == NULL)
		return;
	if (db->conn != NULL)
		PQfinish(db->conn);
	free(db);
}

static void
db_key_create(void)
{
	pthread_key_create(&db_key, db_free);
}

void
db_init(const struct db_config *cfg)
{
	config = *cfg;
	if (config.statement_timeout_ms <= 0)
		config.statement_timeout_ms = 5000;
	if (config.connect_timeout_s <= 0)
		config.connect_timeout_s = 3;
	if (config.application_name == NULL)
		config.application_name = "gpupoold";
	snprintf(config_options, sizeof(config_options),
	    "-c statement_timeout=%d -c search_path=public -c TimeZone=UTC -c jit=off",
	    config.statement_timeout_ms);
	pthread_once(&db_key_once, db_key_create);
#ifndef NDEBUG
	/*
	 * Test hooks for a transaction that claimed an Idempotency-Key
	 * (tests/integration/test_exactly_once.c): die by SIGKILL right
	 * after it commits, before anything is answered; or drop the
	 * connection as if COMMIT's answer had been lost on the way, so
	 * that the outcome must be looked up. Compiled out of release builds
	 * (NDEBUG): a production server cannot be told to crash.
	 */
	{
		const char *v = getenv("GPUPOOL_TEST_CRASH_AFTER_COMMIT");

		crash_after_commit = v != NULL && strcmp(v, "1") == 0;
		v = getenv("GPUPOOL_TEST_LOSE_COMMIT_REPLY");
		lose_commit_reply = v != NULL && strcmp(v, "1") == 0;
	}
#endif
}

struct db *
db_thread(void)
{
	struct db *db;

	pthread_once(&db_key_once, db_key_create);
	db = pthread_getspecific(db_key);
	if (db == NULL) {
		db = calloc(1, sizeof(*db));
		if (db == NULL)
			fatal("out of memory");
		db->seed = (unsigned int)time_mono_us() ^ (unsigned int)(uintptr_t)db;
		pthread_setspecific(db_key, db);
	}
	return db;
}

void
db_thread_close(void)
{
	struct db *db = pthread_getspecific(db_key);

	db_free(db);
	pthread_setspecific(db_key, NULL);
}

uint64_t
db_stat_errors(void)
{
	return atomic_load(&stat_errors);
}

uint64_t
db_stat_reconnects(void)
{
	return atomic_load(&stat_reconnects);
}

void
db_metrics_collect(struct strbuf *b, struct arena *a, void *arg)
{
	(void)a;
	(void)arg;
	metrics_single(b, "gpupool_db_errors_total", "counter", "Failed database operations.",
	    "%llu", (unsigned long long)db_stat_errors());
	metrics_single(b, "gpupool_db_reconnects_total", "counter", "Database reconnections.",
	    "%llu", (unsigned long long)db_stat_reconnects());
}

const char *
db_last_constraint(const struct db *db)
{
	return db->constraint;
}

static int
db_unavailable(struct gp_error *err, const char *why)
{
	gp_error_set(err, 503, "database_unavailable",
	    "the database is unavailable, try again shortly (%s)", why);
	if (err != NULL)
		err->retry_after = 1;
	return -1;
}

/* A transaction's BEGIN went out: its connection cannot be replaced. */
static bool
db_tx_started(const struct db *db)
{
	return db->in_tx && db->begin_sql == NULL;
}

/*
 * An idle connection that has something to read has been closed by the
 * server (PostgreSQL restarted: its backend sent FATAL 57P01 and hung
 * up, which libpq takes for a notice until it reads the end of the
 * stream), so it is found dead before a statement is sent on it. One
 * poll() without waiting. These connections do not LISTEN, so nothing
 * else arrives unasked; a stray message only costs a reconnect.
 */
static bool
db_conn_stale(PGconn *conn)
{
	struct pollfd pfd = { .fd = PQsocket(conn), .events = POLLIN };

	if (pfd.fd < 0)
		return true;
	return poll(&pfd, 1, 0) != 0;
}

static void
db_connect_cond_init(void)
{
	pthread_condattr_t a;

	pthread_condattr_init(&a);
	pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	pthread_cond_init(&connect_cond, &a);
	pthread_condattr_destroy(&a);
}

/* A connection succeeded: the threads in their back-off retry now. */
static void
db_connect_succeeded(void)
{
	pthread_once(&connect_cond_once, db_connect_cond_init);
	pthread_mutex_lock(&connect_mu);
	atomic_fetch_add(&connect_gen, 1);
	pthread_cond_broadcast(&connect_cond);
	pthread_mutex_unlock(&connect_mu);
}

/*
 * The rest of this thread's reconnect back-off (at most
 * DB_RECONNECT_BACKOFF_US after its failed attempt), cut short as soon
 * as any thread connects. The request is then tried, not refused: a
 * refusal without a try answered 503 while the database was already
 * back for the other threads.
 */
static void
db_backoff_wait(const struct db *db)
{
	int64_t until = db->last_failed_connect_us + DB_RECONNECT_BACKOFF_US;
	struct timespec ts;

	if (time_mono_us() >= until || atomic_load(&connect_gen) != db->failed_gen)
		return;
	pthread_once(&connect_cond_once, db_connect_cond_init);
	/* time_mono_us is CLOCK_MONOTONIC, the condition's clock */
	ts.tv_sec = (time_t)(until / 1000000);
	ts.tv_nsec = (long)(until % 1000000) * 1000;
	pthread_mutex_lock(&connect_mu);
	while (atomic_load(&connect_gen) == db->failed_gen &&
	    pthread_cond_timedwait(&connect_cond, &connect_mu, &ts) == 0)
		;
	pthread_mutex_unlock(&connect_mu);
}

/* Forget the connection: the next statement opens a fresh one at once. */
static void
db_drop(struct db *db)
{
	if (db->conn != NULL) {
		PQfinish(db->conn);
		db->conn = NULL;
		atomic_fetch_add(&stat_reconnects, 1);
	}
	db->nprepared = 0;
	db->last_failed_connect_us = 0;
}

PGconn *
db_conn(struct db *db, struct gp_error *err)
{
	char timeout[16];
	const char *keys[] = { "dbname", "application_name", "options", "connect_timeout", NULL };
	const char *vals[5];
	uint64_t gen;

	if (db->conn != NULL && PQstatus(db->conn) == CONNECTION_OK &&
	    (db_tx_started(db) || !db_conn_stale(db->conn)))
		return db->conn;
	if (db_tx_started(db)) {
		db->conn_lost = true;
		db_unavailable(err, "connection lost in a transaction");
		return NULL;
	}
	if (db->last_failed_connect_us != 0)
		db_backoff_wait(db);
	gen = atomic_load(&connect_gen);
	if (db->conn != NULL) {
		PQfinish(db->conn);
		db->conn = NULL;
		atomic_fetch_add(&stat_reconnects, 1);
	}
	db->nprepared = 0;
	snprintf(timeout, sizeof(timeout), "%d", config.connect_timeout_s);
	vals[0] = config.url;
	vals[1] = config.application_name;
	vals[2] = config_options;
	vals[3] = timeout;
	vals[4] = NULL;
	db->conn = PQconnectdbParams(keys, vals, 1);
	if (db->conn == NULL || PQstatus(db->conn) != CONNECTION_OK) {
		char msg[256];

		snprintf(msg, sizeof(msg), "%s",
		    db->conn ? PQerrorMessage(db->conn) : "out of memory");
		/* a multi-host URL gets one line per host tried: keep them all */
		for (char *nl = strchr(msg, '\n'); nl != NULL; nl = strchr(nl, '\n'))
			*nl = nl[1] != '\0' ? ';' : '\0';
		log_warn(NULL, "could not connect to the database", "error", msg);
		if (db->conn != NULL) {
			PQfinish(db->conn);
			db->conn = NULL;
		}
		db->last_failed_connect_us = time_mono_us();
		db->failed_gen = gen;
		atomic_fetch_add(&stat_errors, 1);
		db_unavailable(err, "could not connect");
		return NULL;
	}
	db->last_failed_connect_us = 0;
	db_connect_succeeded();
	return db->conn;
}

static void
db_result_clear(void *p)
{
	PQclear(p);
}

int
db_error_from_result(struct db *db, const PGresult *r, struct gp_error *err)
{
	const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
	const char *constraint = r ? PQresultErrorField(r, PG_DIAG_CONSTRAINT_NAME) : NULL;
	const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;

	atomic_fetch_add(&stat_errors, 1);
	snprintf(db->constraint, sizeof(db->constraint), "%s", constraint ? constraint : "");
	db->retryable = false;
	db->exclusion = state != NULL && strcmp(state, "23P01") == 0;
	if (db->conn == NULL || PQstatus(db->conn) != CONNECTION_OK || state == NULL ||
	    strncmp(state, "08", 2) == 0 || strcmp(state, "57P01") == 0 ||
	    strcmp(state, "57P02") == 0 || strcmp(state, "57P03") == 0) {
		db->conn_lost = true;
		db->terminated = state != NULL && strcmp(state, "57P01") == 0;
		return db_unavailable(err, "connection lost");
	}
	/*
	 * 55P03: a lock taken with NOWAIT was held. Transactions that must not
	 * wait while they hold locks (the lock order, docs/architecture.md)
	 * take them so, and run again like after a serialization failure.
	 */
	if (strcmp(state, "40001") == 0 || strcmp(state, "40P01") == 0 ||
	    strcmp(state, "55P03") == 0) {
		db->retryable = true;
		return gp_error_set(err, 409, "conflict",
		    "the transaction conflicted with another, retry the request");
	}
	if (strcmp(state, "23505") == 0 || strcmp(state, "23P01") == 0)
		return gp_error_set(err, 409, "conflict", "%s", msg ? msg : "conflict");
	if (strcmp(state, "23503") == 0)
		return gp_error_set(err, 409, "conflict",
		    "the object is still referenced or refers to a missing object");
	if (strncmp(state, "23", 2) == 0 || strncmp(state, "22", 2) == 0)
		return gp_error_set(err, 422, "validation_failed", "%s",
		    msg ? msg : "invalid value");
	if (strcmp(state, "57014") == 0) {
		gp_error_set(err, 503, "timeout", "the database did not answer in time");
		if (err != NULL)
			err->retry_after = 1;
		return -1;
	}
	log_error(NULL, "database error", "sqlstate", state, "error", msg ? msg : "");
	return gp_error_set(err, 500, "internal", "internal database error");
}

static bool
db_is_prepared(struct db *db, const struct db_stmt *st)
{
	for (int i = 0; i < db->nprepared; i++)
		if (db->prepared[i] == st)
			return true;
	return false;
}

/* Prepare st on this connection unless it already is; -1 with err on failure. */
static int
db_prepare(struct db *db, PGconn *conn, const struct db_stmt *st, struct gp_error *err)
{
	PGresult *r;

	if (db_is_prepared(db, st))
		return 0;
	r = PQprepare(conn, st->name, st->sql, 0, NULL);
	if (r == NULL || PQresultStatus(r) != PGRES_COMMAND_OK) {
		if (r != NULL && PQstatus(conn) == CONNECTION_OK)
			log_error(NULL, "could not prepare a statement", "statement", st->name,
			    "error", PQresultErrorMessage(r));
		db_error_from_result(db, r, err);
		PQclear(r);
		return -1;
	}
	PQclear(r);
	if (db->nprepared < DB_MAX_PREPARED)
		db->prepared[db->nprepared++] = st;
	return 0;
}

/*
 * One round trip (a libpq pipeline): the transaction's pending BEGIN (and
 * SET) when it has not gone out yet, st, and COMMIT when commit is set.
 * A failure aborts the rest of the pipeline; the transaction, if BEGIN
 * went through, is then left failed for db_tx to roll back.
 */
static PGresult *
db_pipeline(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, const int *lengths, const int *formats, int result_format,
    bool commit, struct gp_error *err)
{
	PGconn *conn = db_conn(db, err);
	PGresult *r, *res = NULL, *failed = NULL;
	const char *begin_sql = db->begin_sql, *begin_set = db->begin_set;
	int nq = 0, qst, stage = 0;

	if (conn == NULL)
		return NULL;
	if (db_prepare(db, conn, st, err) < 0)
		return NULL;
	/* from here on the transaction has begun, or failed to */
	db->begin_sql = NULL;
	db->begin_set = NULL;
	if (PQenterPipelineMode(conn) != 1) {
		db_error_from_result(db, NULL, err);
		return NULL;
	}
	if (begin_sql != NULL) {
		if (PQsendQueryParams(conn, begin_sql, 0, NULL, NULL, NULL, NULL, 0) != 1)
			goto send_failed;
		nq++;
		if (begin_set != NULL) {
			if (PQsendQueryParams(conn, begin_set, 0, NULL, NULL, NULL, NULL, 0) != 1)
				goto send_failed;
			nq++;
		}
	}
	qst = nq++;
	if (PQsendQueryPrepared(conn, st->name, nparams, values, lengths, formats, result_format) !=
	    1)
		goto send_failed;
	if (commit) {
		db->commit_sent = true;
		if (PQsendQueryParams(conn, "COMMIT", 0, NULL, NULL, NULL, NULL, 0) != 1)
			goto send_failed;
		nq++;
	}
	if (PQpipelineSync(conn) != 1)
		goto send_failed;
	/* each query's results end with NULL; then the sync */
	for (int q = 0; q < nq; q++) {
		while ((r = PQgetResult(conn)) != NULL) {
			ExecStatusType status = PQresultStatus(r);

			if ((status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) &&
			    res == NULL && q == qst) {
				res = r;
				continue;
			}
			if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK &&
			    status != PGRES_PIPELINE_ABORTED && failed == NULL) {
				failed = r;
				continue;
			}
			PQclear(r);
		}
		stage++;
	}
	r = PQgetResult(conn);
	if (r != NULL && PQresultStatus(r) == PGRES_PIPELINE_SYNC)
		stage++;
	PQclear(r);
	PQexitPipelineMode(conn);
	if (failed != NULL || res == NULL || stage < nq + 1) {
		if (!gp_error_isset(err))
			db_error_from_result(db, failed, err);
		PQclear(failed);
		PQclear(res);
		return NULL;
	}
	if (commit) {
		/* the test hooks act the moment a COMMIT is acknowledged, wherever it was sent */
		if (crash_after_commit && db->claim != NULL)
			raise(SIGKILL);
		if (lose_commit_reply && db->claim != NULL) {
			/* the connection breaks: the COMMIT's reply and the rows are lost */
			PQclear(res);
			db_drop(db);
			db->conn_lost = true;
			db_unavailable(err, "connection lost");
			return NULL;
		}
		db->committed = true;
	}
	arena_defer(a, db_result_clear, res);
	return res;
send_failed:
	db_error_from_result(db, NULL, err);
	PQexitPipelineMode(conn);
	return NULL;
}

/*
 * After a statement outside a transaction failed: when the connection
 * was lost and the statement did not run (safe), drop it, clear err and
 * say to try once more on a fresh connection.
 */
static bool
db_retry_fresh(struct db *db, int attempt, bool safe, struct gp_error *err)
{
	if (attempt > 0 || !safe || !db->conn_lost || db->in_tx)
		return false;
	log_info(NULL, "the database connection was lost; retrying on a new one");
	db_drop(db);
	gp_error_clear(err);
	return true;
}

/* db_exec_ex with the results in result_format (0 text, 1 binary). */
static PGresult *
db_exec_fmt(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, const int *lengths, const int *formats, int result_format,
    struct gp_error *err)
{
	PGconn *conn;
	PGresult *r;
	ExecStatusType status;

	if (db->begin_sql != NULL)
		return db_pipeline(db, a, st, nparams, values, lengths, formats, result_format,
		    false, err);
	for (int attempt = 0;; attempt++) {
		db->conn_lost = false;
		db->terminated = false;
		conn = db_conn(db, err);
		if (conn == NULL)
			return NULL;
		if (db_prepare(db, conn, st, err) < 0) {
			/* nothing ran: a lost connection is replaced once */
			if (db_retry_fresh(db, attempt, true, err))
				continue;
			return NULL;
		}
		r = PQexecPrepared(conn, st->name, nparams, values, lengths, formats,
		    result_format);
		status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
		if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK)
			break;
		db_error_from_result(db, r, err);
		PQclear(r);
		/* a statement outside a transaction may have run unless the
		 * server said it ended the session first (57P01) */
		if (db_retry_fresh(db, attempt, db->terminated, err))
			continue;
		return NULL;
	}
	arena_defer(a, db_result_clear, r);
	return r;
}

PGresult *
db_exec_ex(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, const int *lengths, const int *formats, struct gp_error *err)
{
	return db_exec_fmt(db, a, st, nparams, values, lengths, formats, 0, err);
}

PGresult *
db_exec_binary(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, struct gp_error *err)
{
	return db_exec_fmt(db, a, st, nparams, values, NULL, NULL, 1, err);
}

PGresult *
db_exec(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, struct gp_error *err)
{
	return db_exec_ex(db, a, st, nparams, values, NULL, NULL, err);
}

/*
 * Prepare st if needed, then send it and COMMIT in one pipeline (one
 * round trip; with the transaction's BEGIN too when nothing ran before
 * it) and read the answers. A failed statement aborts the pipeline:
 * COMMIT is skipped and the caller's transaction is left failed for
 * db_tx to roll back.
 */
PGresult *
db_exec_commit(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, struct gp_error *err)
{
	if (!db->in_tx) {
		gp_error_set(err, 500, "internal", "db_exec_commit outside a transaction");
		return NULL;
	}
	return db_pipeline(db, a, st, nparams, values, NULL, NULL, 0, true, err);
}

/* See db_internal.h. */
int
db_begin_flush(struct db *db, struct gp_error *err)
{
	const char *begin_sql = db->begin_sql, *begin_set = db->begin_set;
	int rc;

	if (begin_sql == NULL)
		return 0;
	db->begin_sql = NULL;
	db->begin_set = NULL;
	rc = db_exec_simple(db, begin_sql, err);
	if (rc == 0 && begin_set != NULL)
		rc = db_exec_simple(db, begin_set, err);
	return rc;
}

int
db_exec_simple(struct db *db, const char *sql, struct gp_error *err)
{
	PGconn *conn;
	PGresult *r;
	int rc = 0;

	if (db->begin_sql != NULL && db_begin_flush(db, err) < 0)
		return -1;
	conn = db_conn(db, err);
	if (conn == NULL)
		return -1;
	/* sql is always a constant of this program (BEGIN, SET, an embedded
	 * migration), never request data: callers with data use db_exec() */
	r = PQexec(conn, sql);
	if (r == NULL ||
	    (PQresultStatus(r) != PGRES_COMMAND_OK && PQresultStatus(r) != PGRES_TUPLES_OK)) {
		db_error_from_result(db, r, err);
		rc = -1;
	}
	PQclear(r);
	return rc;
}

static void
db_backoff(struct db *db, int attempt)
{
	struct timespec ts;
	/* 1-2 ms, doubling up to 64-128 ms */
	long us = (long)time_backoff(2000, attempt, 128000, (uint32_t)rand_r(&db->seed));

	ts.tv_sec = 0;
	ts.tv_nsec = us * 1000;
	nanosleep(&ts, NULL);
}

void
db_idem_arm(struct db *db, struct idem_key *k)
{
	db->idem = k;
}

void
db_tx_note_claim(struct db *db, const struct idem_key *k)
{
	db->claim = k;
}

/*
 * The connection was lost after the transaction's COMMIT went out: did
 * it commit? A key the transaction claimed says, read on a fresh
 * connection (PostgreSQL may take a few seconds to come back). 1:
 * committed, 0: rolled back, -1: unknown (err says why).
 */
static int
db_tx_resolve(struct db *db, struct gp_error *err)
{
	struct arena *a = arena_create();
	bool found = false;
	int rc = -1;

	for (int i = 0; i < DB_RESOLVE_TRIES && rc < 0; i++) {
		struct timespec ts = { 0, DB_RECONNECT_BACKOFF_US * 1000L };

		if (i > 0)
			nanosleep(&ts, NULL);
		db_drop(db);
		gp_error_clear(err);
		if (db_idem_claim_committed(db, a, db->claim, &found, err) == 0)
			rc = found ? 1 : 0;
	}
	arena_destroy(a);
	log_warn(NULL, "the database connection was lost while committing", "outcome",
	    rc == 1       ? "committed"
		: rc == 0 ? "rolled back"
			  : "unknown");
	return rc;
}

/* Claim the armed key in the transaction that begins; -1 (not retried) for a duplicate. */
static int
db_tx_claim_armed(struct db *db, struct gp_error *err)
{
	struct idem_key *k = db->idem;
	struct arena *a;
	int rc;

	if (k == NULL || k->state == IDEM_COMMITTED)
		return 0;
	if (k->state != IDEM_DUPLICATE) {
		a = arena_create();
		k->state = IDEM_OPEN;
		rc = db_idem_claim(db, a, k, err);
		arena_destroy(a);
		if (rc < 0)
			return -1;
	}
	if (k->state == IDEM_DUPLICATE) {
		err->retry_after = 1;
		return gp_error_set(err, 409, "idempotency_conflict",
		    "a request with this Idempotency-Key was carried out");
	}
	return 0;
}

/*
 * BEGIN (then begin_set, when not NULL) is not sent on its own: it goes
 * out in the same round trip as the transaction's first statement.
 * A transaction that loses its connection before its COMMIT went out
 * is run once more on a fresh connection (PostgreSQL restarted: the
 * old connection was dead); one that loses it after is resolved
 * through the key it claimed, if any.
 */
static int
db_tx_run(struct db *db, const char *begin, const char *begin_set, unsigned flags, db_tx_fn fn,
    void *arg, struct gp_error *err)
{
	bool reconnected = false;

	for (int attempt = 0; attempt < DB_TX_ATTEMPTS; attempt++) {
		int rc;

		gp_error_clear(err);
		db->retryable = false;
		db->exclusion = false;
		db->committed = false;
		db->commit_sent = false;
		db->conn_lost = false;
		db->claim = NULL;
		db->begin_sql = begin;
		db->begin_set = begin_set;
		db->in_tx = true;
		rc = db_tx_claim_armed(db, err);
		if (rc == 0)
			rc = fn(db, arg, err);
		if (rc == 0 && db->begin_sql != NULL) {
			/* nothing ran: nothing to commit */
			db->begin_sql = NULL;
			db->begin_set = NULL;
			db->in_tx = false;
			return 0;
		}
		db->begin_sql = NULL;
		db->begin_set = NULL;
		if (rc == 0 && !db->committed) {
			db->commit_sent = true;
			if (db_exec_simple(db, "COMMIT", err) == 0)
				db->committed = true;
		}
		if (rc == 0 && !db->committed && !gp_error_isset(err))
			gp_error_set(err, 500, "internal", "could not commit");
		if (db->committed && lose_commit_reply && db->claim != NULL) {
			db_drop(db);
			db->committed = false;
			db->conn_lost = true;
			db_unavailable(err, "connection lost");
		}
		db->in_tx = false;
		if (!db->committed && db->commit_sent && db->conn_lost && db->claim != NULL) {
			int outcome = db_tx_resolve(db, err);

			if (outcome < 0)
				goto fail;
			if (outcome == 1) {
				gp_error_clear(err);
				db->committed = true;
			} else {
				/* it rolled back: run it again (once) */
				db->commit_sent = false;
				db->conn_lost = true;
				db_unavailable(err, "connection lost");
			}
		}
		if (db->committed) {
			if (db->idem != NULL && db->idem->state == IDEM_CLAIMED)
				db->idem->state = IDEM_COMMITTED;
			if (crash_after_commit && db->claim != NULL)
				raise(SIGKILL);
			return 0;
		}
		if (db->conn != NULL && PQstatus(db->conn) == CONNECTION_OK &&
		    PQtransactionStatus(db->conn) != PQTRANS_IDLE) {
			PGresult *r = PQexec(db->conn, "ROLLBACK");

			PQclear(r);
		}
		if (db->idem != NULL && db->idem->state == IDEM_CLAIMED)
			db->idem->state = IDEM_OPEN;
		if (db->conn_lost && !db->commit_sent && !reconnected) {
			/* the connection was dead (PostgreSQL restarted): once more, on a new one */
			reconnected = true;
			log_info(NULL,
			    "the database connection was lost; retrying the transaction");
			db_drop(db);
			attempt--;
			continue;
		}
		if (db->conn_lost && db->commit_sent)
			goto fail;
		if (!db->retryable && !(db->exclusion && (flags & DB_TX_RETRY_EXCLUSION)))
			return -1;
		db_backoff(db, attempt);
	}
	/* still conflicting after every attempt: a transient condition, so
	 * 503 (never stored for Idempotency-Key replays) rather than 409 */
	gp_error_set(err, 503, "contention",
	    "the database is busy with conflicting changes, retry the request");
	if (err != NULL)
		err->retry_after = 1;
	return -1;
fail:
	if (db->idem != NULL && db->idem->state == IDEM_CLAIMED)
		db->idem->state = IDEM_OPEN;
	return -1;
}

bool
db_tx_aborted(struct db *db)
{
	return db->conn == NULL || PQstatus(db->conn) != CONNECTION_OK ||
	    PQtransactionStatus(db->conn) == PQTRANS_INERROR;
}

int
db_tx(struct db *db, db_tx_fn fn, void *arg, struct gp_error *err)
{
	return db_tx_run(db, "BEGIN", NULL, 0, fn, arg, err);
}

int
db_tx_ex(struct db *db, unsigned flags, db_tx_fn fn, void *arg, struct gp_error *err)
{
	const char *set =
	    (flags & DB_TX_GENERIC_PLANS) ? "SET LOCAL plan_cache_mode = force_generic_plan" : NULL;

	return db_tx_run(db, "BEGIN", set, flags, fn, arg, err);
}

int
db_tx_serializable(struct db *db, db_tx_fn fn, void *arg, struct gp_error *err)
{
	return db_tx_run(db, "BEGIN ISOLATION LEVEL SERIALIZABLE", NULL, 0, fn, arg, err);
}

int
db_ping(struct db *db, struct gp_error *err)
{
	return db_exec_simple(db, "SELECT 1", err);
}
