/*
 * db_idempotency.c - Idempotency-Key claims and stored answers.
 *
 * The claim is a row inserted by the mutation's own transaction, so it
 * exists exactly when the mutation committed: a server that dies before
 * its COMMIT leaves nothing behind, one that dies after it leaves a row
 * that stops the retry from running the request again. A concurrent
 * duplicate does not wait on the first's uncommitted row: the key's
 * advisory lock, tried first, tells it the key is in flight (409). The answer is stored by the request that
 * claimed the row (claimed_by), once: an UPDATE only fills a row that has
 * no answer yet.
 */
#include "db_idempotency.h"
#include "db_internal.h"

#include "core/timeutil.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/*
 * The claim first takes a transaction-scoped advisory lock on the key
 * (class 0x67706b31, "gpk1"; key: a hash of user and key), without
 * waiting: a transaction that holds the key's uncommitted row holds that
 * lock too, so a duplicate of a request still in flight is told so at
 * once (got = false: 409 with Retry-After) instead of waiting on the row
 * with its worker thread and connection, until the first commits or the
 * statement timeout. A request may claim its own key again (an approval
 * that waited for the next batch): the lock is re-entrant, the row's
 * claimed_by its own. A hash collision costs a spurious 409, never a
 * second execution (the row still decides).
 */
DB_STMT(stmt_idem_claim,
    "WITH lk AS (SELECT pg_try_advisory_xact_lock(1735420721, "
    "hashtext($1::int8::text || ':' || $2::text)) AS got), "
    "ins AS (INSERT INTO idempotency_keys AS k (user_id, key, request_hash, state, claimed_by) "
    "SELECT $1::int8, $2::text, $3::bytea, 'committed', $4::text FROM lk WHERE lk.got "
    "ON CONFLICT (user_id, key) DO UPDATE SET claimed_by = EXCLUDED.claimed_by "
    "WHERE k.state = 'committed' AND k.claimed_by = EXCLUDED.claimed_by RETURNING 1) "
    "SELECT (SELECT got FROM lk), (SELECT count(*) FROM ins)");
DB_STMT(stmt_idem_get,
    "SELECT request_hash, state, status, content_type, etag, location, body "
    "FROM idempotency_keys WHERE user_id = $1 AND key = $2");
DB_STMT(stmt_idem_claimed,
    "SELECT 1 FROM idempotency_keys WHERE user_id = $1 AND key = $2 AND claimed_by = $3");
DB_STMT(stmt_idem_store,
    "INSERT INTO idempotency_keys AS k (user_id, key, request_hash, state, claimed_by, "
    "status, content_type, etag, location, body) "
    "VALUES ($1, $2, $3, 'done', $4, $5, $6, $7, $8, $9) "
    "ON CONFLICT (user_id, key) DO UPDATE SET state = 'done', status = EXCLUDED.status, "
    "content_type = EXCLUDED.content_type, etag = EXCLUDED.etag, "
    "location = EXCLUDED.location, body = EXCLUDED.body "
    "WHERE k.state = 'committed' AND k.claimed_by = EXCLUDED.claimed_by");
DB_STMT(stmt_idem_expire,
    "DELETE FROM idempotency_keys WHERE created_at < now() - make_interval(secs => $1::int)");

static atomic_uint_fast64_t token_seq;

void
db_idem_key_init(struct idem_key *k, int64_t user_id, const char *key, const unsigned char *hash)
{
	unsigned char rnd[16];

	memset(k, 0, sizeof(*k));
	k->user_id = user_id;
	k->key = key;
	memcpy(k->hash, hash, IDEM_HASH_LEN);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		/* unique enough without the kernel's entropy: pid, clock, counter */
		uint64_t a = (uint64_t)getpid() << 32 ^ (uint64_t)time_mono_us();
		uint64_t b = atomic_fetch_add(&token_seq, 1);

		memcpy(rnd, &a, 8);
		memcpy(rnd + 8, &b, 8);
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(k->token + 2 * i, 3, "%02x", rnd[i]);
	k->state = IDEM_OPEN;
}

int
db_idem_lookup(struct db *db, struct arena *a, const struct idem_key *k, enum idem_found *out,
    struct idem_response *stored, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, k->user_id), k->key };
	PGresult *r = db_exec(db, a, &stmt_idem_get, 2, p, err);

	if (r == NULL)
		return -1;
	memset(stored, 0, sizeof(*stored));
	if (PQntuples(r) != 1) {
		*out = IDEM_NONE;
		return 0;
	}
	{
		size_t hlen = 0;
		unsigned char *h =
		    PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 0), &hlen);
		bool same =
		    h != NULL && hlen == IDEM_HASH_LEN && memcmp(h, k->hash, IDEM_HASH_LEN) == 0;

		PQfreemem(h);
		if (!same) {
			*out = IDEM_MISMATCH;
			return 0;
		}
	}
	stored->location = db_text(a, r, 0, 5);
	if (strcmp(PQgetvalue(r, 0, 1), "done") != 0) {
		*out = IDEM_PENDING;
		return 0;
	}
	*out = IDEM_REPLAY;
	stored->status = (int)db_int64(r, 0, 2);
	stored->content_type = db_text(a, r, 0, 3);
	stored->etag = db_text(a, r, 0, 4);
	{
		size_t blen = 0;
		unsigned char *b =
		    PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 6), &blen);

		if (b == NULL)
			return gp_error_set(err, 500, "internal",
			    "could not decode a stored response");
		stored->body = arena_strndup(a, (const char *)b, blen);
		stored->body_len = blen;
		PQfreemem(b);
	}
	return 0;
}

int
db_idem_claim(struct db *db, struct arena *a, struct idem_key *k, struct gp_error *err)
{
	const char *p[4];
	int lens[4] = { 0, 0, IDEM_HASH_LEN, 0 };
	int fmts[4] = { 0, 0, 1, 0 };
	PGresult *r;

	if (k == NULL)
		return 0;
	p[0] = db_param_int(a, k->user_id);
	p[1] = k->key;
	p[2] = (const char *)k->hash;
	p[3] = k->token;
	r = db_exec_ex(db, a, &stmt_idem_claim, 4, p, lens, fmts, err);
	if (r == NULL)
		return -1;
	/* not got: in flight elsewhere; got but nothing inserted: the key's row exists */
	k->state = PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "t") == 0 &&
		strcmp(PQgetvalue(r, 0, 1), "1") == 0
	    ? IDEM_CLAIMED
	    : IDEM_DUPLICATE;
	if (k->state == IDEM_CLAIMED)
		db_tx_note_claim(db, k);
	return 0;
}

int
db_idem_claim_committed(struct db *db, struct arena *a, const struct idem_key *k, bool *found,
    struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, k->user_id), k->key, k->token };
	PGresult *r = db_exec(db, a, &stmt_idem_claimed, 3, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	return 0;
}

int
db_idem_store(struct db *db, struct arena *a, const struct idem_key *k,
    const struct idem_response *res, struct gp_error *err)
{
	const char *p[9];
	int lens[9] = { 0, 0, IDEM_HASH_LEN, 0, 0, 0, 0, 0, 0 };
	int fmts[9] = { 0, 0, 1, 0, 0, 0, 0, 0, 1 };

	if (k == NULL)
		return 0;
	p[0] = db_param_int(a, k->user_id);
	p[1] = k->key;
	p[2] = (const char *)k->hash;
	p[3] = k->token;
	p[4] = db_param_int(a, res->status);
	p[5] = res->content_type;
	p[6] = res->etag;
	p[7] = res->location;
	p[8] = res->body ? res->body : "";
	lens[8] = (int)res->body_len;
	return db_exec_ex(db, a, &stmt_idem_store, 9, p, lens, fmts, err) ? 0 : -1;
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
