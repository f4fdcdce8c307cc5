/*
 * db.h - PostgreSQL access: one connection per thread, transactions with
 * retry, and the mapping of SQLSTATEs to API errors.
 *
 * Each thread that calls db_thread() gets its own connection, created
 * lazily and re-created (with statements re-prepared) when it breaks.
 * While PostgreSQL is unreachable every call fails with 503
 * "database_unavailable" and Retry-After; service resumes by itself.
 */
#ifndef GP_DB_DB_H
#define GP_DB_DB_H

#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"

struct db;

struct db_config {
	const char *url;          /* libpq conninfo or URI */
	int statement_timeout_ms; /* per statement */
	int connect_timeout_s;
	const char *application_name;
};

/* Process-wide set-up; copies cfg. Call once before any thread uses db_thread(). */
void db_init(const struct db_config *cfg);

/* The calling thread's handle (connects lazily); never NULL. */
struct db *db_thread(void);

/* Close the calling thread's connection (worker exit). */
void db_thread_close(void);

typedef int (*db_tx_fn)(struct db *db, void *arg, struct gp_error *err);

/*
 * Run fn inside BEGIN/COMMIT. BEGIN is not a round trip of its own: it
 * goes out in one pipeline with fn's first statement (a fn that runs no
 * statement sends nothing). When fn or COMMIT fails with a
 * serialization failure or deadlock (40001/40P01) the transaction is
 * retried with jittered backoff (fn must be re-runnable). fn returns 0
 * to commit or -1 (with err set) to roll back.
 */
int db_tx(struct db *db, db_tx_fn fn, void *arg, struct gp_error *err)
    __attribute__((warn_unused_result));

/* db_tx_ex() flags */
#define DB_TX_RETRY_EXCLUSION 0x1u /* also retry on 23P01 (exclusion_violation) */
#define DB_TX_GENERIC_PLANS 0x2u   /* SET LOCAL plan_cache_mode = force_generic_plan */

/*
 * db_tx with flags. DB_TX_RETRY_EXCLUSION treats an exclusion-constraint
 * violation like a serialization failure: the transaction is rolled back
 * and fn runs again (it must re-read what it decided from). For work
 * whose decision a concurrent writer can invalidate, such as placing
 * allocations (allocations_no_overlap): a lost race is retried, never
 * answered as an error; after the last attempt it is a 409 conflict.
 * DB_TX_GENERIC_PLANS makes the transaction's prepared statements (and
 * the plpgsql they fire) use their generic plans, sent with BEGIN and the
 * first statement in the same round trip: for hot transactions of big multi-CTE statements whose
 * re-planning costs more than executing them (the approval); every
 * statement run in it must have a good generic plan (no "$1 IS NULL OR"
 * optional filters).
 */
int db_tx_ex(struct db *db, unsigned flags, db_tx_fn fn, void *arg, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Inside a db_tx function: true when a statement of the transaction
 * failed (or the connection is gone), so that the transaction can only
 * roll back.
 */
bool db_tx_aborted(struct db *db);

/* Same with SERIALIZABLE isolation. */
int db_tx_serializable(struct db *db, db_tx_fn fn, void *arg, struct gp_error *err)
    __attribute__((warn_unused_result));

/* SELECT 1 on this thread's connection (reconnecting if needed). */
int db_ping(struct db *db, struct gp_error *err) __attribute__((warn_unused_result));

/* Counters for /metrics. */
uint64_t db_stat_errors(void);
uint64_t db_stat_reconnects(void);

struct strbuf;

/* The two counters above for /metrics: a collector (core/metrics_registry.h; arg unused). */
void db_metrics_collect(struct strbuf *b, struct arena *a, void *arg);

/* The name of the constraint behind the last 23xxx error on db, or "". */
const char *db_last_constraint(const struct db *db);

#endif
