/*
 * password.h - argon2id password hashing in PHC string form.
 *
 * Parameters meet the OWASP minimum (m=19456 KiB, t=2, p=1).
 */
#ifndef GP_AUTH_PASSWORD_H
#define GP_AUTH_PASSWORD_H

#include <stdbool.h>
#include <stddef.h>

#define PASSWORD_HASH_MAX 160
#define PASSWORD_MIN_LEN 8
#define PASSWORD_MAX_LEN 256

/* Hash password into out (PHC "$argon2id$v=19$m=...") with a fresh salt. */
int password_hash(const char *password, char *out, size_t outlen)
    __attribute__((warn_unused_result));

/* Constant-time verification of password against a PHC string. */
bool password_verify(const char *phc, const char *password);

/* True when phc was made with weaker parameters than the current ones. */
bool password_needs_rehash(const char *phc);

#endif
