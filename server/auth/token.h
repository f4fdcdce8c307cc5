/*
 * token.h - bearer tokens: random secrets, SHA-256 digests, comparisons
 * (SHA-256, HMAC and hex of other data: crypto/digest.h).
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

/* Random url-safe identifier (request ids): n characters plus NUL. */
int token_random_id(char *out, size_t n) __attribute__((warn_unused_result));

/* Wipe a secret (explicit_bzero). */
void token_wipe(void *p, size_t len);

#endif
