/*
 * digest.c - SHA-256 and HMAC-SHA256 over libcrypto (see digest.h).
 */
#include "digest.h"

#include "token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdlib.h>
#include <string.h>

void
digest_hmac_sha256_hex(const char *key, size_t keylen, const char *msg, size_t len, char *out)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;

	out[0] = '\0';
	if (HMAC(EVP_sha256(), key, (int)keylen, (const unsigned char *)msg, len, md, &mdlen) ==
		NULL ||
	    mdlen != 32)
		return;
	token_hex(md, mdlen, out);
	OPENSSL_cleanse(md, sizeof(md));
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

	if (EVP_DigestFinal_ex(c->md, d, &n) != 1 || n != 32)
		memset(d, 0, n = 32);
	token_hex(d, n, hex);
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
