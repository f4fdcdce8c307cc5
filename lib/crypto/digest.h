/*
 * digest.h - SHA-256, HMAC-SHA256 and lower-case hex, over libcrypto: the
 * one copy the server (token digests, billing export files, the signature
 * of a push to a node agent, the list cursors' MAC) and the clients (the
 * CLI's check of a downloaded export, the agent's check of a push and its
 * fingerprints) share. No other folder includes libcrypto's headers.
 */
#ifndef GP_CRYPTO_DIGEST_H
#define GP_CRYPTO_DIGEST_H

#include <stdbool.h>
#include <stddef.h>

#define DIGEST_SHA256_LEN 32     /* bytes of a SHA-256 digest or HMAC */
#define DIGEST_SHA256_HEX_LEN 65 /* 64 hex digits and NUL */

/* Lower-case hex of len bytes into out (2*len+1 bytes). */
void digest_hex(const unsigned char *bytes, size_t len, char *out);

/* SHA-256 of data into md[DIGEST_SHA256_LEN]. */
void digest_sha256(const void *data, size_t len, unsigned char *md);

/* SHA-256 of data as hex into out (DIGEST_SHA256_HEX_LEN bytes). */
void digest_sha256_hex(const void *data, size_t len, char *out);

/* HMAC-SHA256 of msg under key into md[DIGEST_SHA256_LEN]; -1 on failure. */
int digest_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t len,
    unsigned char *md) __attribute__((warn_unused_result));

/* HMAC-SHA256 of msg under key into out (DIGEST_SHA256_HEX_LEN bytes; "" on failure). */
void digest_hmac_sha256_hex(const char *key, size_t keylen, const char *msg, size_t len, char *out);

/* Constant-time equality of len bytes. */
bool digest_equal(const void *a, const void *b, size_t len);

/* Wipe a secret where the compiler cannot drop it. */
void digest_cleanse(void *p, size_t len);

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
