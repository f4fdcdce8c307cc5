/*
 * db_sql.h - SQL fragments shared by the files of db/.
 */
#ifndef GP_DB_SQL_H
#define GP_DB_SQL_H

/* A timestamptz as integer microseconds since the epoch. */
#define EPOCH_US(col) "(extract(epoch from " col ") * 1000000)::int8"

/* An integer parameter of microseconds since the epoch as timestamptz; 0 is NULL. */
#define TS_PARAM(n) "('epoch'::timestamptz + nullif(" n "::int8, 0) * interval '1 microsecond')"

#endif
