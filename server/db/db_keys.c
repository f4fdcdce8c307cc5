/*
 * db_keys.c - rotation of the list cursors' HMAC key. The current key is
 * the server_keys row "cursor" (created by the first server that starts,
 * db_server_key); a rotation renames it "cursor_previous" and inserts a
 * new "cursor", whose created_at is the moment of the rotation: servers
 * accept cursors of the previous key for GPUPOOL_CURSOR_KEY_OVERLAP
 * seconds after it, then refuse them.
 */
#include "db_keys.h"
#include "db_internal.h"

#include <stdio.h>
#include <string.h>

DB_STMT(stmt_keys_drop_previous, "DELETE FROM server_keys WHERE name = 'cursor_previous'");
DB_STMT(stmt_keys_retire,
    "UPDATE server_keys SET name = 'cursor_previous' WHERE name = 'cursor' RETURNING 1");
DB_STMT(stmt_keys_insert,
    "INSERT INTO server_keys (name, secret) VALUES ('cursor', $1) "
    "RETURNING encode(secret, 'hex')");
DB_STMT(stmt_keys_previous,
    "SELECT encode(p.secret, 'hex'), extract(epoch FROM c.created_at)::int8 "
    "FROM server_keys p JOIN server_keys c ON c.name = 'cursor' WHERE p.name = 'cursor_previous'");

struct rotate {
	const unsigned char *candidate;
	size_t len;
	char *out;
	size_t outlen;
};

static int
rotate_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct rotate *ro = arg;
	struct arena *a = arena_create();
	const char *p[1];
	PGresult *r;
	int rc = -1;

	arena_set_sensitive(a);
	if (db_exec(db, a, &stmt_keys_drop_previous, 0, NULL, err) == NULL ||
	    db_exec(db, a, &stmt_keys_retire, 0, NULL, err) == NULL)
		goto out;
	p[0] = db_param_bytea(a, ro->candidate, ro->len);
	r = db_exec(db, a, &stmt_keys_insert, 1, p, err);
	if (r == NULL)
		goto out;
	if (PQntuples(r) != 1 || strlen(PQgetvalue(r, 0, 0)) >= ro->outlen) {
		gp_error_set(err, 500, "internal", "the new cursor key was not stored");
		goto out;
	}
	snprintf(ro->out, ro->outlen, "%s", PQgetvalue(r, 0, 0));
	rc = 0;
out:
	arena_destroy(a);
	return rc;
}

int
db_cursor_key_rotate(struct db *db, const unsigned char *candidate, size_t len, char *out,
    size_t outlen, struct gp_error *err)
{
	struct rotate ro = { candidate, len, out, outlen };

	return db_tx(db, rotate_tx, &ro, err);
}

int
db_cursor_key_previous(struct db *db, char *out, size_t outlen, int64_t *rotated_at_s, bool *found,
    struct gp_error *err)
{
	struct arena *a = arena_create();
	PGresult *r;
	int rc = -1;

	arena_set_sensitive(a);
	*found = false;
	r = db_exec(db, a, &stmt_keys_previous, 0, NULL, err);
	if (r != NULL) {
		rc = 0;
		if (PQntuples(r) == 1 && strlen(PQgetvalue(r, 0, 0)) < outlen) {
			snprintf(out, outlen, "%s", PQgetvalue(r, 0, 0));
			*rotated_at_s = db_int64(r, 0, 1);
			*found = true;
		}
	}
	arena_destroy(a);
	return rc;
}
