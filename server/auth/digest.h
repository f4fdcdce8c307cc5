/*
 * digest.h - SHA-256 and HMAC-SHA256 as lower-case hex: the digest of a
 * billing export file (streaming), the signature of a push to a node
 * agent and the list cursors' MAC. Token digests are token.h's.
 */
#ifndef GP_AUTH_DIGEST_H
#define GP_AUTH_DIGEST_H

#include <stddef.h>

#define DIGEST_SHA256_HEX_LEN 65 /* 64 hex digits and NUL */

/* HMAC-SHA256 of msg under key into out (DIGEST_SHA256_HEX_LEN bytes; "" on failure). */
void digest_hmac_sha256_hex(const char *key, size_t keylen, const char *msg, size_t len, char *out);

/*
 * Streaming SHA-256: new, update any number of times, then final writes
 * the hex digest (DIGEST_SHA256_HEX_LEN bytes) and frees the context.
 * digest_sha256_free frees one abandoned before final (NULL: no-op).
 * new returns NULL when out of memory.
 */
struct digest_sha256;
struct digest_sha256 *digest_sha256_new(void);
void digest_sha256_update(struct digest_sha256 *c, const void *data, size_t len);
void digest_sha256_final(struct digest_sha256 *c, char *hex);
void digest_sha256_free(struct digest_sha256 *c);

#endif
