/*
 * digest.c - SHA-256, HMAC-SHA256 and hex over libcrypto (see digest.h).
 */
#include "digest.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

void
digest_hex(const unsigned char *bytes, size_t len, char *out)
{
	static const char hex[] = "0123456789abcdef";

	for (size_t i = 0; i < len; i++) {
		out[2 * i] = hex[bytes[i] >> 4];
		out[2 * i + 1] = hex[bytes[i] & 15];
	}
	out[2 * len] = '\0';
}

void
digest_sha256(const void *data, size_t len, unsigned char *md)
{
	SHA256((const unsigned char *)data, len, md);
}

void
digest_sha256_hex(const void *data, size_t len, char *out)
{
	unsigned char md[DIGEST_SHA256_LEN];

	digest_sha256(data, len, md);
	digest_hex(md, sizeof(md), out);
}

int
digest_hmac_sha256(const void *key, size_t keylen, const void *msg, size_t len, unsigned char *md)
{
	unsigned char full[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	if (HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, len, full, &mdlen) ==
		NULL ||
	    mdlen != DIGEST_SHA256_LEN) {
		OPENSSL_cleanse(full, sizeof(full));
		return -1;
	}
	memcpy(md, full, DIGEST_SHA256_LEN);
	OPENSSL_cleanse(full, sizeof(full));
	return 0;
}

void
digest_hmac_sha256_hex(const char *key, size_t keylen, const char *msg, size_t len, char *out)
{
	unsigned char md[DIGEST_SHA256_LEN];

	out[0] = '\0';
	if (digest_hmac_sha256(key, keylen, msg, len, md) != 0)
		return;
	digest_hex(md, sizeof(md), out);
	OPENSSL_cleanse(md, sizeof(md));
}

bool
digest_equal(const void *a, const void *b, size_t len)
{
	return CRYPTO_memcmp(a, b, len) == 0;
}

void
digest_cleanse(void *p, size_t len)
{
	OPENSSL_cleanse(p, len);
}

/* ---- streaming SHA-256 ---- */

struct digest_sha256 {
	EVP_MD_CTX *md;
};

struct digest_sha256 *
digest_sha256_new(void)
{
	struct digest_sha256 *c = calloc(1, sizeof(*c));

	if (c == NULL)
		return NULL;
	c->md = EVP_MD_CTX_new();
	if (c->md == NULL || EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(c->md);
		free(c);
		return NULL;
	}
	return c;
}

void
digest_sha256_update(struct digest_sha256 *c, const void *data, size_t len)
{
	if (len > 0)
		(void)EVP_DigestUpdate(c->md, data, len);
}

void
digest_sha256_final(struct digest_sha256 *c, char *hex)
{
	unsigned char d[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	if (EVP_DigestFinal_ex(c->md, d, &n) != 1 || n != DIGEST_SHA256_LEN)
		memset(d, 0, n = DIGEST_SHA256_LEN);
	digest_hex(d, n, hex);
	digest_sha256_free(c);
}

void
digest_sha256_free(struct digest_sha256 *c)
{
	if (c == NULL)
		return;
	EVP_MD_CTX_free(c->md);
	free(c);
}
