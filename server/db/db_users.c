/*
 * db_users.c - users, tokens and failed-login counters.
 */
#include "db_users.h"
#include "db_internal.h"
#include "db_sql.h"

#include <stdlib.h>
#include <string.h>

#define USER_COLS                                                             \
	"id, username, password_hash, role, disabled, generation, " EPOCH_US( \
	    "created_at") ", " EPOCH_US("updated_at")
#define TOKEN_COLS                                                                \
	"id, user_id, kind, name, prefix, " EPOCH_US("created_at") ", " EPOCH_US( \
	    "expires_at") ", " EPOCH_US("revoked_at") ", " EPOCH_US("last_used_at")

DB_STMT(stmt_user_get, "SELECT " USER_COLS " FROM users WHERE username = $1");
DB_STMT(stmt_user_insert,
    "INSERT INTO users (username, password_hash, role) VALUES ($1, $2, $3) "
    "RETURNING " USER_COLS);
DB_STMT(stmt_user_update,
    "UPDATE users SET role = coalesce($2, role), disabled = coalesce($3::bool, disabled), "
    "password_hash = coalesce($4, password_hash), generation = generation + 1, "
    "updated_at = now() WHERE username = $1 AND ($5::int8 = 0 OR generation = $5::int8) "
    "RETURNING " USER_COLS);
DB_STMT(stmt_user_exists, "SELECT generation FROM users WHERE username = $1");
DB_STMT(stmt_user_set_password,
    "UPDATE users SET password_hash = $2, updated_at = now() WHERE id = $1");
DB_STMT(stmt_users_list, "SELECT " USER_COLS " FROM users WHERE id > $1 ORDER BY id LIMIT $2");
#define TOKEN_AUTH_COLS \
	"SELECT t.id, t.kind, u.id, u.username, u.role, " EPOCH_US("t.last_used_at") ", t.digest"
#define TOKEN_AUTH_FROM                                    \
	" FROM tokens t JOIN users u ON u.id = t.user_id " \
	"WHERE t.digest = $1 AND t.revoked_at IS NULL "    \
	"AND (t.expires_at IS NULL OR t.expires_at > now()) AND NOT u.disabled"
DB_STMT(stmt_token_auth, TOKEN_AUTH_COLS ", NULL::text" TOKEN_AUTH_FROM);
/* the same with the caller's memberships (GET /v1/me), in one round trip */
DB_STMT(stmt_token_auth_projects,
    TOKEN_AUTH_COLS
    ", (SELECT coalesce(json_agg(json_build_object('name', p.name, "
    "'role', m.role) ORDER BY p.name), '[]')::text FROM project_members m "
    "JOIN projects p ON p.id = m.project_id WHERE m.user_id = u.id)" TOKEN_AUTH_FROM);
DB_STMT(stmt_token_touch, "UPDATE tokens SET last_used_at = now() WHERE id = $1");
DB_STMT(stmt_token_insert,
    "INSERT INTO tokens (user_id, kind, name, digest, prefix, expires_at) "
    "VALUES ($1, $2, $3, $4, $5, CASE WHEN $6::int8 = 0 THEN NULL "
    "ELSE to_timestamp($6::int8 / 1000000.0) END) RETURNING " TOKEN_COLS);
DB_STMT(stmt_tokens_list,
    "SELECT " TOKEN_COLS " FROM tokens WHERE user_id = $1 AND kind = 'api' "
    "AND revoked_at IS NULL AND id > $2 ORDER BY id LIMIT $3");
DB_STMT(stmt_token_revoke,
    "UPDATE tokens SET revoked_at = now() WHERE id = $2 AND user_id = $1 "
    "AND revoked_at IS NULL RETURNING " TOKEN_COLS);
DB_STMT(stmt_tokens_revoke_user,
    "UPDATE tokens SET revoked_at = now() WHERE user_id = $1 AND revoked_at IS NULL");
#define LOGIN_IN_WINDOW "f.window_start > now() - make_interval(secs => $2::int)"
DB_STMT(stmt_login_attempt_reserve,
    "INSERT INTO login_failures AS f (key, failures, window_start) VALUES ($1, 1, now()) "
    "ON CONFLICT (key) DO UPDATE SET "
    "failures = CASE WHEN " LOGIN_IN_WINDOW " THEN f.failures + 1 ELSE 1 END, "
    "window_start = CASE WHEN " LOGIN_IN_WINDOW " THEN f.window_start ELSE now() END "
    "WHERE NOT " LOGIN_IN_WINDOW " OR f.failures < $3::int RETURNING failures");
DB_STMT(stmt_login_attempt_release,
    "UPDATE login_failures SET failures = failures - 1 WHERE key = $1 AND failures > 0");
DB_STMT(stmt_login_failures_expire,
    "DELETE FROM login_failures WHERE window_start < now() - make_interval(secs => $1::int)");
DB_STMT(stmt_tokens_expire,
    "DELETE FROM tokens WHERE expires_at < now() - make_interval(secs => $1::int) "
    "OR revoked_at < now() - make_interval(secs => $1::int)");
DB_STMT(stmt_login_failures_clear, "DELETE FROM login_failures WHERE key = $1");

static void
user_from_row(struct arena *a, const PGresult *r, int row, struct user_row *u)
{
	u->id = db_int64(r, row, 0);
	u->username = db_text(a, r, row, 1);
	u->password_hash = db_text(a, r, row, 2);
	u->role = db_text(a, r, row, 3);
	u->disabled = db_bool(r, row, 4);
	u->generation = db_int64(r, row, 5);
	u->created_us = db_int64(r, row, 6);
	u->updated_us = db_int64(r, row, 7);
}

static void
token_from_row(struct arena *a, const PGresult *r, int row, struct token_row *t)
{
	t->id = db_int64(r, row, 0);
	t->user_id = db_int64(r, row, 1);
	t->kind = db_text(a, r, row, 2);
	t->name = db_text(a, r, row, 3);
	t->prefix = db_text(a, r, row, 4);
	t->created_us = db_int64(r, row, 5);
	t->expires_us = db_int64(r, row, 6);
	t->revoked_us = db_int64(r, row, 7);
	t->last_used_us = db_int64(r, row, 8);
}

int
db_user_get(struct db *db, struct arena *a, const char *username, struct user_row *out, bool *found,
    struct gp_error *err)
{
	const char *p[1] = { username };
	PGresult *r = db_exec(db, a, &stmt_user_get, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		user_from_row(a, r, 0, out);
	return 0;
}

int
db_user_insert(struct db *db, struct arena *a, const char *username, const char *password_hash,
    const char *role, struct user_row *out, struct gp_error *err)
{
	const char *p[3] = { username, password_hash, role };
	PGresult *r = db_exec(db, a, &stmt_user_insert, 3, p, err);

	if (r == NULL) {
		if (err->status == 409)
			gp_error_set(err, 409, "conflict", "a user named %s already exists",
			    username);
		return -1;
	}
	user_from_row(a, r, 0, out);
	return 0;
}

int
db_user_update(struct db *db, struct arena *a, const char *username, const char *role,
    const bool *disabled, const char *password_hash, int64_t expected_generation,
    struct user_row *out, bool *found, bool *stale, struct gp_error *err)
{
	const char *p[5];
	PGresult *r;

	p[0] = username;
	p[1] = role;
	p[2] = disabled ? (*disabled ? "true" : "false") : NULL;
	p[3] = password_hash;
	p[4] = db_param_int(a, expected_generation);
	*found = false;
	*stale = false;
	r = db_exec(db, a, &stmt_user_update, 5, p, err);
	if (r == NULL)
		return -1;
	if (PQntuples(r) == 1) {
		*found = true;
		user_from_row(a, r, 0, out);
		return 0;
	}
	r = db_exec(db, a, &stmt_user_exists, 1, p, err);
	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	*stale = *found;
	return 0;
}

int
db_user_set_password(struct db *db, int64_t user_id, const char *password_hash,
    struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[2] = { db_param_int(a, user_id), password_hash };
	int rc = db_exec(db, a, &stmt_user_set_password, 2, p, err) ? 0 : -1;

	arena_destroy(a);
	return rc;
}

int
db_users_list(struct db *db, struct arena *a, int64_t after_id, int limit, struct user_row **out,
    int *n, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, after_id), db_param_int(a, limit) };
	PGresult *r = db_exec(db, a, &stmt_users_list, 2, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		user_from_row(a, r, i, &(*out)[i]);
	return 0;
}

const char *
db_param_bytea(struct arena *a, const unsigned char *bytes, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	char *s = arena_alloc(a, 2 * len + 3);

	s[0] = '\\';
	s[1] = 'x';
	for (size_t i = 0; i < len; i++) {
		s[2 + 2 * i] = hex[bytes[i] >> 4];
		s[3 + 2 * i] = hex[bytes[i] & 15];
	}
	return s;
}

int
db_token_authenticate(struct db *db, struct arena *a, const unsigned char *digest,
    bool with_projects, struct token_auth *out, bool *found, struct gp_error *err)
{
	const char *p[1] = { db_param_bytea(a, digest, 32) };
	PGresult *r =
	    db_exec(db, a, with_projects ? &stmt_token_auth_projects : &stmt_token_auth, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (!*found)
		return 0;
	out->token_id = db_int64(r, 0, 0);
	out->kind = db_text(a, r, 0, 1);
	out->user_id = db_int64(r, 0, 2);
	out->username = db_text(a, r, 0, 3);
	out->role = db_text(a, r, 0, 4);
	out->last_used_us = db_int64(r, 0, 5);
	out->projects_json = db_text(a, r, 0, 7); /* NULL without with_projects */
	out->digest = NULL;
	{
		size_t n = 0;
		unsigned char *d = PQunescapeBytea((const unsigned char *)PQgetvalue(r, 0, 6), &n);

		if (d != NULL && n == 32) {
			unsigned char *copy = arena_alloc(a, n);

			memcpy(copy, d, n);
			out->digest = copy;
		}
		PQfreemem(d);
	}
	return 0;
}

int
db_token_touch(struct db *db, int64_t token_id, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { db_param_int(a, token_id) };
	int rc = db_exec(db, a, &stmt_token_touch, 1, p, err) ? 0 : -1;

	arena_destroy(a);
	return rc;
}

int
db_token_insert(struct db *db, struct arena *a, int64_t user_id, const char *kind, const char *name,
    const unsigned char *digest, const char *prefix, int64_t expires_us, struct token_row *out,
    struct gp_error *err)
{
	const char *p[6];
	PGresult *r;

	p[0] = db_param_int(a, user_id);
	p[1] = kind;
	p[2] = name;
	p[3] = db_param_bytea(a, digest, 32);
	p[4] = prefix;
	p[5] = db_param_int(a, expires_us);
	r = db_exec(db, a, &stmt_token_insert, 6, p, err);
	if (r == NULL)
		return -1;
	token_from_row(a, r, 0, out);
	return 0;
}

int
db_tokens_list(struct db *db, struct arena *a, int64_t user_id, int64_t after_id, int limit,
    struct token_row **out, int *n, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, user_id), db_param_int(a, after_id),
		db_param_int(a, limit) };
	PGresult *r = db_exec(db, a, &stmt_tokens_list, 3, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		token_from_row(a, r, i, &(*out)[i]);
	return 0;
}

int
db_token_revoke(struct db *db, struct arena *a, int64_t user_id, int64_t token_id,
    struct token_row *out, bool *found, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, user_id), db_param_int(a, token_id) };
	PGresult *r = db_exec(db, a, &stmt_token_revoke, 2, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		token_from_row(a, r, 0, out);
	return 0;
}

int
db_tokens_revoke_user(struct db *db, int64_t user_id, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { db_param_int(a, user_id) };
	int rc = db_exec(db, a, &stmt_tokens_revoke_user, 1, p, err) ? 0 : -1;

	arena_destroy(a);
	return rc;
}

int
db_login_attempt_reserve(struct db *db, const char *key, int window_s, int max, bool *granted,
    struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[3] = { key, db_param_int(a, window_s), db_param_int(a, max) };
	PGresult *r = db_exec(db, a, &stmt_login_attempt_reserve, 3, p, err);
	int rc = -1;

	if (r != NULL) {
		*granted = PQntuples(r) == 1;
		rc = 0;
	}
	arena_destroy(a);
	return rc;
}

int
db_login_attempt_release(struct db *db, const char *key, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { key };
	int rc = db_exec(db, a, &stmt_login_attempt_release, 1, p, err) ? 0 : -1;

	arena_destroy(a);
	return rc;
}

int
db_login_failures_clear(struct db *db, const char *key, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { key };
	int rc = db_exec(db, a, &stmt_login_failures_clear, 1, p, err) ? 0 : -1;

	arena_destroy(a);
	return rc;
}

int
db_auth_expire(struct db *db, int window_s, int keep_s, int64_t *failures, int64_t *tokens,
    struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p1[1] = { db_param_int(a, window_s) };
	const char *p2[1] = { db_param_int(a, keep_s) };
	PGresult *r;
	int rc = -1;

	r = db_exec(db, a, &stmt_login_failures_expire, 1, p1, err);
	if (r == NULL)
		goto fail;
	*failures = strtoll(PQcmdTuples(r), NULL, 10);
	r = db_exec(db, a, &stmt_tokens_expire, 1, p2, err);
	if (r == NULL)
		goto fail;
	*tokens = strtoll(PQcmdTuples(r), NULL, 10);
	rc = 0;
fail:
	arena_destroy(a);
	return rc;
}
