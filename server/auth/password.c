/*
 * password.c - argon2id via libargon2 (the only includer of argon2.h).
 */
#include "password.h"
#include "token.h"

#include <argon2.h>
#include <stdio.h>
#include <string.h>

#define PW_T_COST 2
#define PW_M_COST 19456
#define PW_PARALLELISM 1
#define PW_SALT_LEN 16
#define PW_HASH_LEN 32

int
password_hash(const char *password, char *out, size_t outlen)
{
	unsigned char salt[PW_SALT_LEN];
	int rc;

	if (token_random_bytes(salt, sizeof(salt)) < 0)
		return -1;
	rc = argon2id_hash_encoded(PW_T_COST, PW_M_COST, PW_PARALLELISM, password, strlen(password),
	    salt, sizeof(salt), PW_HASH_LEN, out, outlen);
	return rc == ARGON2_OK ? 0 : -1;
}

bool
password_verify(const char *phc, const char *password)
{
	if (phc == NULL || strncmp(phc, "$argon2id$", 10) != 0)
		return false;
	return argon2id_verify(phc, password, strlen(password)) == ARGON2_OK;
}

bool
password_needs_rehash(const char *phc)
{
	unsigned m = 0, t = 0, p = 0;

	if (sscanf(phc, "$argon2id$v=19$m=%u,t=%u,p=%u$", &m, &t, &p) != 3)
		return true;
	return m < PW_M_COST || t < PW_T_COST || p < PW_PARALLELISM;
}
