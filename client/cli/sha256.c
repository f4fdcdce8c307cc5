/*
 * sha256.c - SHA-256 of a stream through OpenSSL's EVP interface.
 */
#include "sha256.h"

#include <openssl/evp.h>
#include <stdio.h>

int
sha256_init(struct sha256 *s)
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	s->ctx = NULL;
	if (c == NULL || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		EVP_MD_CTX_free(c);
		return -1;
	}
	s->ctx = c;
	return 0;
}

void
sha256_update(struct sha256 *s, const void *data, size_t len)
{
	if (s->ctx != NULL)
		EVP_DigestUpdate(s->ctx, data, len);
}

void
sha256_final_hex(struct sha256 *s, char *hex)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int n = 0;

	hex[0] = '\0';
	if (s->ctx == NULL)
		return;
	if (EVP_DigestFinal_ex(s->ctx, md, &n) == 1)
		for (unsigned int i = 0; i < n; i++)
			snprintf(hex + 2 * i, 3, "%02x", md[i]);
	EVP_MD_CTX_free(s->ctx);
	s->ctx = NULL;
}
