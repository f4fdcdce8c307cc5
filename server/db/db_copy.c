/*
 * db_copy.c - COPY ... FROM STDIN inside the running transaction (metric
 * ingestion streams its accepted rows this way: db_agent.c).
 */
#include "db.h"
#include "db_internal.h"

#include <stdlib.h>

#include <libpq-fe.h>

/* See db_internal.h. */
int
db_copy_in(struct db *db, const char *sql, const char *data, size_t len, int64_t *rows,
    struct gp_error *err)
{
	PGconn *conn;
	PGresult *r;
	int rc = 0;

	if (db_begin_flush(db, err) < 0)
		return -1;
	conn = db_conn(db, err);
	if (conn == NULL)
		return -1;
	/* sql is a constant of db/ (a COPY ... FROM STDIN); the rows go as data */
	r = PQexec(conn, sql);
	if (r == NULL || PQresultStatus(r) != PGRES_COPY_IN) {
		db_error_from_result(db, r, err);
		PQclear(r);
		/* a COPY that did not start leaves nothing to end */
		return -1;
	}
	PQclear(r);
	/* the libpq buffer takes the rows in 256 KiB pieces (a blocking connection) */
	for (size_t off = 0; off < len && rc == 0;) {
		size_t piece = len - off < 262144 ? len - off : 262144;

		if (PQputCopyData(conn, data + off, (int)piece) != 1)
			rc = -1;
		off += piece;
	}
	if (PQputCopyEnd(conn, rc == 0 ? NULL : "gpupoold: sending the rows failed") != 1)
		rc = -1;
	while ((r = PQgetResult(conn)) != NULL) {
		if (PQresultStatus(r) == PGRES_COMMAND_OK) {
			if (rows != NULL)
				*rows = strtoll(PQcmdTuples(r), NULL, 10);
		} else if (!gp_error_isset(err)) {
			db_error_from_result(db, r, err);
			rc = -1;
		}
		PQclear(r);
	}
	if (rc < 0 && !gp_error_isset(err))
		db_error_from_result(db, NULL, err);
	return rc;
}
