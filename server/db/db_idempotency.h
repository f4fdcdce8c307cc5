/*
 * db_idempotency.h - Idempotency-Key records (docs/design.md section 6).
 *
 * A key is claimed inside the transaction of the mutation it protects:
 * one INSERT on the (user, key) primary key, so the effect and the claim
 * commit together or not at all, and a concurrent duplicate's INSERT
 * waits for the first transaction and then sees its row. The answer is
 * stored in that same transaction where the caller knows it there (the
 * group-committed approvals and submissions), otherwise right after the
 * commit; once stored it is never replaced. Records are kept at least
 * 72 hours.
 */
#ifndef GP_DB_IDEMPOTENCY_H
#define GP_DB_IDEMPOTENCY_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

#define IDEM_HASH_LEN 32

enum idem_state {
	IDEM_OPEN,      /* not claimed (yet, or the claiming transaction rolled back) */
	IDEM_CLAIMED,   /* claimed by the running transaction */
	IDEM_COMMITTED, /* claimed by a transaction that committed */
	IDEM_DUPLICATE, /* another request holds the key: answer from its row */
};

/* One keyed request; lives in the request's arena. */
struct idem_key {
	int64_t user_id;
	const char *key;
	unsigned char hash[IDEM_HASH_LEN]; /* SHA-256 of method, path and body */
	char token[33];                    /* this request's claim: random hex */
	enum idem_state state;
};

enum idem_found {
	IDEM_NONE,     /* no row: run the request */
	IDEM_REPLAY,   /* answer stored for the same request: replay it */
	IDEM_PENDING,  /* committed, answer not stored (yet, or lost with its server) */
	IDEM_MISMATCH, /* same key, different request */
};

struct idem_response {
	int status;
	const char *content_type;
	const char *etag;
	const char *location;
	const char *body;
	size_t body_len;
};

/* Fill k for user_id, key and hash with a fresh claim token; k->state = IDEM_OPEN. */
void db_idem_key_init(struct idem_key *k, int64_t user_id, const char *key,
    const unsigned char *hash);

/*
 * What the database holds for k (a plain read, no lock). On IDEM_REPLAY
 * stored gets the answer (arena a), on IDEM_PENDING its Location, if any.
 */
int db_idem_lookup(struct db *db, struct arena *a, const struct idem_key *k, enum idem_found *out,
    struct idem_response *stored, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Inside a transaction: claim k (NULL: nothing to do). Never waits for
 * another transaction's uncommitted claim of the key (its advisory lock
 * is tried first). Sets k->state to IDEM_CLAIMED, or IDEM_DUPLICATE when
 * another request (or an earlier item of this transaction) has it or is
 * claiming it right now; a duplicate must then change nothing and be
 * answered from the key's row (none yet while the other is in flight:
 * 409 idempotency_conflict with Retry-After).
 */
int db_idem_claim(struct db *db, struct arena *a, struct idem_key *k, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Store res as k's answer: fills the row k's request claimed and that has
 * no answer yet, or, when k holds no row (nothing claimed it, or the
 * claiming transaction rolled back), inserts it. A row with an answer, or
 * claimed by another request, is left as it is. Inside a transaction or
 * on its own. k NULL: nothing to do.
 */
int db_idem_store(struct db *db, struct arena *a, const struct idem_key *k,
    const struct idem_response *res, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Every db_tx on db, until disarmed (k NULL), first claims k while k is
 * IDEM_OPEN (a duplicate makes db_tx fail with 409 idempotency_conflict
 * without running its function), and moves k to IDEM_COMMITTED when the
 * transaction commits. For the handler of a keyed request.
 */
void db_idem_arm(struct db *db, struct idem_key *k);

/* Delete records older than max_age_s; *deleted gets the count. */
int db_idem_expire(struct db *db, int max_age_s, int64_t *deleted, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
