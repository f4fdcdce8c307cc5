/*
 * db_idempotency.c - Idempotency-Key claims and stored responses.
 *
 * While a request runs, its claimant holds a session advisory lock on
 * (user, key) besides the 'in_flight' row. The lock, not the row, says
 * the claimant is alive: when its server dies, PostgreSQL ends the
 * session and drops the lock, and the next request with the key takes
 * the claim over instead of answering 409 until the row expires.
 */
#include "db_idempotency.h"
#include "db_internal.h"

#include <stdlib.h>
#include <string.h>

/* two-key advisory locks: a lock space apart from the migration lock's int8 key */
#define IDEM_LOCK_ARGS "1768189028, hashtext($1::text || ':' || $2::text)"

DB_STMT(stmt_idem_lock, "SELECT pg_try_advisory_lock(" IDEM_LOCK_ARGS ")");
DB_STMT(stmt_idem_unlock, "SELECT pg_advisory_unlock(" IDEM_LOCK_ARGS ")");
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

/* Drop the claim lock; the answer is already decided, so errors only get logged by db/. */
static void
idem_unlock(struct db *db, struct arena *a, const char *const *p)
{
	struct gp_error ignored;

	gp_error_clear(&ignored);
	(void)db_exec(db, a, &stmt_idem_unlock, 2, p, &ignored);
}

int
db_idem_claim(struct db *db, struct arena *a, int64_t user_id, const char *key,
    const unsigned char *hash, enum idem_claim *out, struct idem_response *stored,
    struct gp_error *err)
{
	const char *p[3];
	int lens[3] = { 0, 0, 32 };
	int fmts[3] = { 0, 0, 1 };
	bool locked;
	PGresult *r;

	p[0] = db_param_int(a, user_id);
	p[1] = key;
	p[2] = (const char *)hash;
	/* lock first, so that nobody sees our row before we hold the lock */
	r = db_exec(db, a, &stmt_idem_lock, 2, p, err);
	if (r == NULL)
		return -1;
	locked = db_bool(r, 0, 0);
	if (locked) {
		r = db_exec_ex(db, a, &stmt_idem_claim, 3, p, lens, fmts, err);
		if (r == NULL)
			goto fail;
		if (PQntuples(r) == 1) {
			*out = IDEM_CLAIMED; /* the lock is held until complete/release */
			return 0;
		}
	}
	r = db_exec_ex(db, a, &stmt_idem_get, 2, p, NULL, NULL, err);
	if (r == NULL)
		goto fail;
	if (PQntuples(r) != 1) {
		/* released between the claim and this select: treat as in flight */
		*out = IDEM_IN_FLIGHT;
		goto unlock;
	}
	{
		size_t hlen = 0;
		unsigned char *h =
		    PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 0), &hlen);
		bool same = h != NULL && hlen == 32 && memcmp(h, hash, 32) == 0;

		PQfreemem(h);
		if (!same) {
			*out = IDEM_MISMATCH;
			goto unlock;
		}
	}
	if (strcmp(PQgetvalue(r, 0, 1), "done") != 0) {
		/*
		 * In flight. When we got the lock, the session that claimed
		 * the key has ended (its server died) and its transaction was
		 * rolled back: the request is ours to run.
		 */
		*out = locked ? IDEM_CLAIMED : IDEM_IN_FLIGHT;
		return 0;
	}
	*out = IDEM_REPLAY;
	stored->status = (int)db_int64(r, 0, 2);
	stored->content_type = db_text(a, r, 0, 3);
	stored->etag = db_text(a, r, 0, 4);
	stored->location = db_text(a, r, 0, 5);
	{
		size_t blen = 0;
		unsigned char *b =
		    PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 6), &blen);

		if (b == NULL) {
			gp_error_set(err, 500, "internal", "could not decode a stored response");
			goto fail;
		}
		stored->body = arena_strndup(a, (const char *)b, blen);
		stored->body_len = blen;
		PQfreemem(b);
	}
unlock:
	if (locked)
		idem_unlock(db, a, p);
	return 0;
fail:
	if (locked)
		idem_unlock(db, a, p);
	return -1;
}

int
db_idem_complete(struct db *db, int64_t user_id, const char *key, const struct idem_response *res,
    struct gp_error *err)
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
	/* only now, with the response committed, may another request take the key */
	idem_unlock(db, a, p);
	arena_destroy(a);
	return rc;
}

int
db_idem_release(struct db *db, int64_t user_id, const char *key, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[2] = { db_param_int(a, user_id), key };
	int rc = db_exec(db, a, &stmt_idem_release, 2, p, err) ? 0 : -1;

	idem_unlock(db, a, p);
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
