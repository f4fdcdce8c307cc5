/*
 * token.h - bearer tokens: random secrets, SHA-256 digests, comparisons.
 *
 * A token is "<prefix>_" followed by 43 base64url characters (32 random
 * bytes). Only its SHA-256 digest is stored.
 */
#ifndef GP_AUTH_TOKEN_H
#define GP_AUTH_TOKEN_H

#include <stdbool.h>
#include <stddef.h>

#define TOKEN_RANDOM_BYTES 32
#define TOKEN_DIGEST_LEN 32
#define TOKEN_MAX_LEN 64

/* Fill buf with len bytes from the kernel CSPRNG (getrandom). */
int token_random_bytes(void *buf, size_t len) __attribute__((warn_unused_result));

/* New token "gpp_..." into out (at least TOKEN_MAX_LEN bytes). */
int token_generate(const char *prefix, char *out, size_t outlen)
    __attribute__((warn_unused_result));

/* SHA-256 of s into digest[TOKEN_DIGEST_LEN]. */
void token_digest(const char *s, size_t len, unsigned char *digest);

/* Constant-time equality of two digests. */
bool token_digest_equal(const unsigned char *a, const unsigned char *b);

/* Lower-case hex of len bytes into out (2*len+1 bytes). */
void token_hex(const unsigned char *bytes, size_t len, char *out);

/* Random url-safe identifier (request ids): n characters plus NUL. */
int token_random_id(char *out, size_t n) __attribute__((warn_unused_result));

/* Lower-case hex HMAC-SHA256 of msg under key into out (65 bytes). */
void token_hmac_sha256_hex(const char *key, size_t keylen, const char *msg, size_t len, char *out);

/*
 * Streaming SHA-256 (export files): new, update any number of times,
 * then final writes the lower-case hex digest (65 bytes) and frees the
 * context. token_sha256_free frees one abandoned before final (NULL:
 * no-op). new returns NULL when out of memory.
 */
struct token_sha256;
struct token_sha256 *token_sha256_new(void);
void token_sha256_update(struct token_sha256 *c, const void *data, size_t len);
void token_sha256_final(struct token_sha256 *c, char *hex);
void token_sha256_free(struct token_sha256 *c);

/* Wipe a secret (explicit_bzero). */
void token_wipe(void *p, size_t len);

#endif
