/*
 * db_internal.h - what the files of db/ share; never included outside db/.
 */
#ifndef GP_DB_INTERNAL_H
#define GP_DB_INTERNAL_H

#include <libpq-fe.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"

/* A named statement, prepared once per connection on first use. */
struct db_stmt {
	const char *name;
	const char *sql;
};

#define DB_STMT(var, text) static const struct db_stmt var = { #var, text }

/*
 * Execute st with text parameters (NULL = SQL NULL). The PGresult is
 * owned by arena a. Returns NULL with err filled on any failure
 * (SQLSTATE mapped: 23505/23P01 -> 409 conflict, 23514 -> 422,
 * 40001/40P01 -> retry inside db_tx, 57014/08xxx -> 503).
 */
PGresult *db_exec(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, struct gp_error *err);

/* Same with an explicit length for binary-safe values. */
PGresult *db_exec_ex(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, const int *lengths, const int *formats, struct gp_error *err);

/*
 * db_exec with every column in binary: a bytea arrives as its bytes
 * (PQgetvalue, PQgetlength), not hex-encoded at twice the size.
 */
PGresult *db_exec_binary(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, struct gp_error *err);

/*
 * db_exec, then COMMIT in the same round trip (a libpq pipeline): the
 * last statement of a db_tx function, which must return right after it
 * (db_tx sees the transaction committed). Holding row locks one round
 * trip less matters for hot rows. On failure nothing is committed and
 * err is set as db_exec would; the statement must not need its result
 * checked before committing (make it fail instead).
 */
PGresult *db_exec_commit(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, struct gp_error *err);

/* Send a pending BEGIN (and SET) on its own; 0 when none was pending. */
int db_begin_flush(struct db *db, struct gp_error *err);

/* Run literal SQL without parameters (BEGIN, migrations). */
int db_exec_simple(struct db *db, const char *sql, struct gp_error *err);

/*
 * COPY ... FROM STDIN (sql, a constant of db/) with data, len bytes in
 * the COPY's format, inside the running transaction (a pending BEGIN goes
 * out first). *rows: how many the COPY stored. -1 with err as db_exec
 * when it failed (the transaction is then failed, for db_tx to roll back).
 */
int db_copy_in(struct db *db, const char *sql, const char *data, size_t len, int64_t *rows,
    struct gp_error *err);

/* The raw connection, connecting first if needed; NULL with err on failure. */
PGconn *db_conn(struct db *db, struct gp_error *err);

/*
 * A statement whose answer is one value (a count, an id, a flag): run st
 * and read column 0 of its first row into *out (0 or false for no row or
 * NULL). -1 with err as db_exec when it failed.
 */
int db_exec_int64(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, int64_t *out, struct gp_error *err);
int db_exec_bool(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, bool *out, struct gp_error *err);

/* Column accessors: copies live in arena a. */
const char *db_text(struct arena *a, const PGresult *r, int row, int col);
int64_t db_int64(const PGresult *r, int row, int col);
bool db_bool(const PGresult *r, int row, int col);
bool db_null(const PGresult *r, int row, int col);

/* Integer to arena text for parameters. */
const char *db_param_int(struct arena *a, int64_t v);

/*
 * PostgreSQL array literals for parameters, in arena memory: strings
 * double-quoted and escaped ({"a","b\\"c"}; a NULL element is NULL), integers, booleans ({t,f}).
 * Set-based statements take their rows as parallel arrays (unnest).
 */
/* A bytea parameter in text form (\\x + hex). */
const char *db_param_bytea(struct arena *a, const unsigned char *bytes, size_t len);

const char *db_param_text_array(struct arena *a, const char *const *v, int n);
const char *db_param_int64_array(struct arena *a, const int64_t *v, int n);
const char *db_param_int_array(struct arena *a, const int *v, int n);
const char *db_param_bool_array(struct arena *a, const bool *v, int n);

/* Map a failed PGresult (or broken connection) to err; returns -1. */
int db_error_from_result(struct db *db, const PGresult *r, struct gp_error *err);

struct idem_key;

/*
 * db_idempotency.c -> db.c: the running transaction claimed k. When the
 * connection is lost after its COMMIT went out, db_tx looks k's row up
 * on a fresh connection to learn whether it committed.
 */
void db_tx_note_claim(struct db *db, const struct idem_key *k);

/* db.c -> db_idempotency.c: *found is whether k's claim committed. */
int db_idem_claim_committed(struct db *db, struct arena *a, const struct idem_key *k, bool *found,
    struct gp_error *err) __attribute__((warn_unused_result));

#endif
