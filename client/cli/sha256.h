/*
 * sha256.h - SHA-256 of a stream, for the CLI's check of downloaded
 * export files (OpenSSL's EVP interface underneath).
 */
#ifndef GP_CLI_SHA256_H
#define GP_CLI_SHA256_H

#include <stddef.h>

struct sha256 {
	void *ctx; /* EVP_MD_CTX */
};

/* Start a digest; -1 when OpenSSL could not allocate one. */
int sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The lower-case hex digest into hex (65 bytes); frees the context. */
void sha256_final_hex(struct sha256 *s, char *hex);

#endif
