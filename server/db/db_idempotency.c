/*
 * db_idempotency.c - Idempotency-Key claims and stored responses.
 */
#include "db_idempotency.h"
#include "db_internal.h"

#include <stdlib.h>
#include <string.h>

DB_STMT(stmt_idem_claim,
	"INSERT INTO idempotency_keys (user_id, key, request_hash, state) "
	"VALUES ($1, $2, $3, 'in_flight') ON CONFLICT (user_id, key) DO NOTHING RETURNING 1");
DB_STMT(stmt_idem_get,
	"SELECT request_hash, state, status, content_type, etag, location, body "
	"FROM idempotency_keys WHERE user_id = $1 AND key = $2");
DB_STMT(stmt_idem_complete,
	"UPDATE idempotency_keys SET state = 'done', status = $3, content_type = $4, "
	"etag = $5, location = $6, body = $7 WHERE user_id = $1 AND key = $2");
DB_STMT(stmt_idem_release,
	"DELETE FROM idempotency_keys WHERE user_id = $1 AND key = $2 AND state = 'in_flight'");
DB_STMT(stmt_idem_expire,
	"DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1::int)");

int
db_idem_claim(struct db *db, struct arena *a, int64_t user_id, const char *key,
	      const unsigned char *hash, enum idem_claim *out,
	      struct idem_response *stored, struct gp_error *err)
{
	const char *p[3];
	int lens[3] = { 0, 0, 32 };
	int fmts[3] = { 0, 0, 1 };
	PGresult *r;

	p[0] = db_param_int(a, user_id);
	p[1] = key;
	p[2] = (const char *)hash;
	r = db_exec_ex(db, a, &stmt_idem_claim, 3, p, lens, fmts, err);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 1) {
		*out = IDEM_CLAIMED;
		return 0;
	}
	r = db_exec_ex(db, a, &stmt_idem_get, 2, p, NULL, NULL, err);
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		/* released between our insert and select: treat as in flight */
		*out = IDEM_IN_FLIGHT;
		return 0;
	}
	{
		size_t hlen = 0;
		unsigned char *h = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 0), &hlen);
		bool same = h != NULL && hlen == 32 && memcmp(h, hash, 32) == 0;

		PQfreemem(h);
		if (!same) {
			*out = IDEM_MISMATCH;
			return 0;
		}
	}
	if (strcmp(PQgetvalue(r, 0, 1), "done") != 0) {
		*out = IDEM_IN_FLIGHT;
		return 0;
	}
	*out = IDEM_REPLAY;
	stored->status = (int)db_int64(r, 0, 2);
	stored->content_type = db_text(a, r, 0, 3);
	stored->etag = db_text(a, r, 0, 4);
	stored->location = db_text(a, r, 0, 5);
	{
		size_t blen = 0;
		unsigned char *b = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 6), &blen);

		if (b == NULL)
			return gp_error_set(err, 500, "internal", "could not decode a stored response");
		stored->body = arena_strndup(a, (const char *)b, blen);
		stored->body_len = blen;
		PQfreemem(b);
	}
	return 0;
}

int
db_idem_complete(struct db *db, int64_t user_id, const char *key,
		 const struct idem_response *res, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[7];
	int lens[7] = { 0 };
	int fmts[7] = { 0, 0, 0, 0, 0, 0, 1 };
	int rc;

	p[0] = db_param_int(a, user_id);
	p[1] = key;
	p[2] = db_param_int(a, res->status);
	p[3] = res->content_type;
	p[4] = res->etag;
	p[5] = res->location;
	p[6] = res->body ? res->body : "";
	lens[6] = (int)res->body_len;
	rc = db_exec_ex(db, a, &stmt_idem_complete, 7, p, lens, fmts, err) ? 0 : -1;
	arena_destroy(a);
	return rc;
}

int
db_idem_release(struct db *db, int64_t user_id, const char *key, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[2] = { db_param_int(a, user_id), key };
	int rc = db_exec(db, a, &stmt_idem_release, 2, p, err) ? 0 : -1;

	arena_destroy(a);
	return rc;
}

int
db_idem_expire(struct db *db, int max_age_s, int64_t *deleted, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { db_param_int(a, max_age_s) };
	PGresult *r = db_exec(db, a, &stmt_idem_expire, 1, p, err);
	int rc = -1;

	if (r != NULL) {
		*deleted = strtoll(PQcmdTuples(r), NULL, 10);
		rc = 0;
	}
	arena_destroy(a);
	return rc;
}
