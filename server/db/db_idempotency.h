/*
 * db_idempotency.h - Idempotency-Key records (docs/design.md section 6).
 *
 * A key is claimed before the handler runs and completed with the
 * response afterwards; a replay returns the stored response byte for
 * byte. Records are kept at least 72 hours.
 */
#ifndef GP_DB_IDEMPOTENCY_H
#define GP_DB_IDEMPOTENCY_H

#include <stddef.h>
#include <stdint.h>

#include "db.h"

enum idem_claim {
	IDEM_CLAIMED,   /* new key: run the request */
	IDEM_REPLAY,    /* done before with the same body: replay */
	IDEM_IN_FLIGHT, /* another request holds the key */
	IDEM_MISMATCH,  /* same key, different request */
};

struct idem_response {
	int status;
	const char *content_type;
	const char *etag;
	const char *location;
	const char *body;
	size_t body_len;
};

/*
 * Claim (user_id, key) for a request whose SHA-256 is hash[32]. On
 * IDEM_CLAIMED this connection holds a session lock on the key until
 * db_idem_complete() or db_idem_release(); a key left in flight by a
 * session that has ended is claimed again.
 */
int db_idem_claim(struct db *db, struct arena *a, int64_t user_id, const char *key,
    const unsigned char *hash, enum idem_claim *out, struct idem_response *stored,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Store the response of a claimed key. */
int db_idem_complete(struct db *db, int64_t user_id, const char *key,
    const struct idem_response *res, struct gp_error *err) __attribute__((warn_unused_result));

/* Drop a claim whose request failed without a storable answer (5xx). */
int db_idem_release(struct db *db, int64_t user_id, const char *key, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Delete records older than max_age_s; *deleted gets the count. */
int db_idem_expire(struct db *db, int max_age_s, int64_t *deleted, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
