/*
 * sha256.h - SHA-256 (FIPS 180-4) for the CLI's checks of downloaded
 * files (the CLI links no crypto library).
 */
#ifndef GP_CLI_SHA256_H
#define GP_CLI_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sha256 {
	uint32_t h[8];
	uint64_t len; /* bytes so far */
	unsigned char buf[64];
	size_t nbuf;
};

void sha256_init(struct sha256 *s);
void sha256_update(struct sha256 *s, const void *data, size_t len);
/* The lower-case hex digest into hex (65 bytes). */
void sha256_final_hex(struct sha256 *s, char *hex);

#endif
