/*
 * token.c - random secrets (getrandom) and their SHA-256 (crypto/digest.h).
 */
#include "token.h"

#include "crypto/digest.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

int
token_random_bytes(void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len > 0) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -1;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void
b64url_encode(const unsigned char *in, size_t len, char *out)
{
	size_t i, o = 0;

	for (i = 0; i + 2 < len; i += 3) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8 | in[i + 2];

		out[o++] = b64url[(v >> 18) & 63];
		out[o++] = b64url[(v >> 12) & 63];
		out[o++] = b64url[(v >> 6) & 63];
		out[o++] = b64url[v & 63];
	}
	if (len - i == 1) {
		unsigned v = (unsigned)in[i] << 16;

		out[o++] = b64url[(v >> 18) & 63];
		out[o++] = b64url[(v >> 12) & 63];
	} else if (len - i == 2) {
		unsigned v = (unsigned)in[i] << 16 | (unsigned)in[i + 1] << 8;

		out[o++] = b64url[(v >> 18) & 63];
		out[o++] = b64url[(v >> 12) & 63];
		out[o++] = b64url[(v >> 6) & 63];
	}
	out[o] = '\0';
}

int
token_generate(const char *prefix, char *out, size_t outlen)
{
	unsigned char raw[TOKEN_RANDOM_BYTES];
	char enc[64];
	int n;

	if (token_random_bytes(raw, sizeof(raw)) < 0)
		return -1;
	b64url_encode(raw, sizeof(raw), enc);
	token_wipe(raw, sizeof(raw));
	n = snprintf(out, outlen, "%s_%s", prefix, enc);
	token_wipe(enc, sizeof(enc));
	return n > 0 && (size_t)n < outlen ? 0 : -1;
}

void
token_digest(const char *s, size_t len, unsigned char *digest)
{
	digest_sha256(s, len, digest);
}

bool
token_digest_equal(const unsigned char *a, const unsigned char *b)
{
	return digest_equal(a, b, TOKEN_DIGEST_LEN);
}

int
token_random_id(char *out, size_t n)
{
	unsigned char raw[32];

	if (n > sizeof(raw))
		n = sizeof(raw);
	if (token_random_bytes(raw, n) < 0)
		return -1;
	for (size_t i = 0; i < n; i++)
		out[i] = b64url[raw[i] & 63];
	out[n] = '\0';
	return 0;
}

void
token_wipe(void *p, size_t len)
{
	explicit_bzero(p, len);
}
