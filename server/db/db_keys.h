/*
 * db_keys.h - rotation of the list cursors' HMAC key (server_keys rows
 * "cursor", the current key, and "cursor_previous", the one before it;
 * docs/api.md "Lists and pagination", docs/operations.md).
 */
#ifndef GP_DB_DB_KEYS_H
#define GP_DB_DB_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "db/db.h"

/*
 * Rotate: the current cursor key becomes the previous one (replacing an
 * older previous key) and candidate (len bytes) the current one, in one
 * transaction. out gets the new key (hex).
 */
int db_cursor_key_rotate(struct db *db, const unsigned char *candidate, size_t len, char *out,
    size_t outlen, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * The previous cursor key (hex, into out) and when it was replaced
 * (*rotated_at_s, epoch seconds); *found false when there is none.
 */
int db_cursor_key_previous(struct db *db, char *out, size_t outlen, int64_t *rotated_at_s,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

#endif
