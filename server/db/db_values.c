/*
 * db_values.c - reading result values and writing statement parameters
 * in PostgreSQL's text format (db.h): the conversions every db_*.c file
 * shares, apart from the connection and transaction machinery of db.c.
 */
#include "db.h"
#include "db_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *
db_text(struct arena *a, const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return NULL;
	return arena_strndup(a, PQgetvalue(r, row, col), (size_t)PQgetlength(r, row, col));
}

int64_t
db_int64(const PGresult *r, int row, int col)
{
	if (PQgetisnull(r, row, col))
		return 0;
	return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

bool
db_bool(const PGresult *r, int row, int col)
{
	return !PQgetisnull(r, row, col) && PQgetvalue(r, row, col)[0] == 't';
}

bool
db_null(const PGresult *r, int row, int col)
{
	return PQgetisnull(r, row, col);
}

const char *
db_param_int(struct arena *a, int64_t v)
{
	return arena_printf(a, "%lld", (long long)v);
}

const char *
db_param_text_array(struct arena *a, const char *const *v, int n)
{
	size_t len = 3;
	char *buf, *p;

	for (int i = 0; i < n; i++)
		len += v[i] != NULL ? 2 * strlen(v[i]) + 3 : 5;
	buf = p = arena_alloc(a, len);
	*p++ = '{';
	for (int i = 0; i < n; i++) {
		if (i > 0)
			*p++ = ',';
		if (v[i] == NULL) {
			memcpy(p, "NULL", 4);
			p += 4;
			continue;
		}
		*p++ = '"';
		for (const char *s = v[i]; *s != '\0'; s++) {
			if (*s == '"' || *s == '\\')
				*p++ = '\\';
			*p++ = *s;
		}
		*p++ = '"';
	}
	*p++ = '}';
	*p = '\0';
	return buf;
}

const char *
db_param_int64_array(struct arena *a, const int64_t *v, int n)
{
	char *buf = arena_alloc(a, 3 + (size_t)n * 21), *p = buf;

	*p++ = '{';
	for (int i = 0; i < n; i++) {
		int64_t x = v[i];
		char tmp[24];
		int k = 0;
		bool neg = x < 0;
		uint64_t u = neg ? (uint64_t)0 - (uint64_t)x : (uint64_t)x;

		if (i > 0)
			*p++ = ',';
		do {
			tmp[k++] = (char)('0' + (int)(u % 10));
			u /= 10;
		} while (u != 0);
		if (neg)
			*p++ = '-';
		while (k > 0)
			*p++ = tmp[--k];
	}
	*p++ = '}';
	*p = '\0';
	return buf;
}

const char *
db_param_int_array(struct arena *a, const int *v, int n)
{
	int64_t *w = arena_alloc(a, sizeof(*w) * (size_t)(n + 1));

	for (int i = 0; i < n; i++)
		w[i] = v[i];
	return db_param_int64_array(a, w, n);
}

const char *
db_param_bool_array(struct arena *a, const bool *v, int n)
{
	char *buf = arena_alloc(a, 3 + (size_t)n * 2), *p = buf;

	*p++ = '{';
	for (int i = 0; i < n; i++) {
		if (i > 0)
			*p++ = ',';
		*p++ = v[i] ? 't' : 'f';
	}
	*p++ = '}';
	*p = '\0';
	return buf;
}

int
db_exec_int64(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, int64_t *out, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, st, nparams, values, err);

	*out = r != NULL && PQntuples(r) > 0 ? db_int64(r, 0, 0) : 0;
	return r != NULL ? 0 : -1;
}

int
db_exec_bool(struct db *db, struct arena *a, const struct db_stmt *st, int nparams,
    const char *const *values, bool *out, struct gp_error *err)
{
	PGresult *r = db_exec(db, a, st, nparams, values, err);

	*out = r != NULL && PQntuples(r) > 0 && db_bool(r, 0, 0);
	return r != NULL ? 0 : -1;
}
