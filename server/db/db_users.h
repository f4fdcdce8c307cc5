/*
 * db_users.h - users, bearer tokens and failed-login counters.
 */
#ifndef GP_DB_USERS_H
#define GP_DB_USERS_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"

struct user_row {
	int64_t id;
	const char *username;
	const char *password_hash;
	const char *role;
	bool disabled;
	int64_t generation;
	int64_t created_us;
	int64_t updated_us;
};

struct token_row {
	int64_t id;
	int64_t user_id;
	const char *kind; /* "session" or "api" */
	const char *name;
	const char *prefix;
	int64_t created_us;
	int64_t expires_us;   /* 0: never */
	int64_t revoked_us;   /* 0: live */
	int64_t last_used_us; /* 0: never */
};

/* The caller behind a live token (not revoked, not expired, user enabled). */
struct token_auth {
	int64_t token_id;
	const char *kind;
	int64_t user_id;
	const char *username;
	const char *role;
	int64_t last_used_us;
	const unsigned char *digest; /* stored SHA-256, TOKEN_DIGEST_LEN bytes */
	const char *projects_json;   /* [{"name","role"}] by name, read with the token */
};

/* 0 and *found=false when no such user. */
int db_user_get(struct db *db, struct arena *a, const char *username, struct user_row *out,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* Insert; 409 conflict when the name is taken. */
int db_user_insert(struct db *db, struct arena *a, const char *username, const char *password_hash,
    const char *role, struct user_row *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Update role / disabled / password_hash (NULL = keep) when generation
 * matches (expected_generation 0 = any). *found false: no such user;
 * *stale true: generation mismatch.
 */
int db_user_update(struct db *db, struct arena *a, const char *username, const char *role,
    const bool *disabled, const char *password_hash, int64_t expected_generation,
    struct user_row *out, bool *found, bool *stale, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Replace the stored hash (rehash on login). */
int db_user_set_password(struct db *db, int64_t user_id, const char *password_hash,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Users with id > after_id, ordered by id; up to limit rows into *out. */
int db_users_list(struct db *db, struct arena *a, int64_t after_id, int limit,
    struct user_row **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * Look up a live token by SHA-256 digest; with_projects also reads the
 * user's project memberships in the same round trip (what GET /v1/me
 * answers; out->projects_json stays NULL otherwise).
 */
int db_token_authenticate(struct db *db, struct arena *a, const unsigned char *digest,
    bool with_projects, struct token_auth *out, bool *found, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Record that a token was used now. */
int db_token_touch(struct db *db, int64_t token_id, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Insert a token; expires_us 0 = never. */
int db_token_insert(struct db *db, struct arena *a, int64_t user_id, const char *kind,
    const char *name, const unsigned char *digest, const char *prefix, int64_t expires_us,
    struct token_row *out, struct gp_error *err) __attribute__((warn_unused_result));

/* A user's API tokens (not session tokens) with id > after_id. */
int db_tokens_list(struct db *db, struct arena *a, int64_t user_id, int64_t after_id, int limit,
    struct token_row **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

/* Revoke token id of user_id (any kind); *found false when none is live. */
int db_token_revoke(struct db *db, struct arena *a, int64_t user_id, int64_t token_id,
    struct token_row *out, bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/* Revoke every token of a user (disabled users, password changes). */
int db_tokens_revoke_user(struct db *db, int64_t user_id, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Reserve one login attempt for key by counting it as a failure now,
 * unless key already has max failures within the last window_s seconds
 * (an older window restarts). *granted says whether it was counted. One
 * atomic statement, so parallel attempts never get past the limit. A
 * successful attempt gives its reservation back with
 * db_login_attempt_release() or db_login_failures_clear().
 */
int db_login_attempt_reserve(struct db *db, const char *key, int window_s, int max, bool *granted,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Give back one attempt reserved for key (the attempt succeeded). */
int db_login_attempt_release(struct db *db, const char *key, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Housekeeping: delete failed-login counters whose window ended more than
 * window_s ago, and tokens that expired or were revoked more than
 * keep_s ago. *failures and *tokens get the counts deleted.
 */
int db_auth_expire(struct db *db, int window_s, int keep_s, int64_t *failures, int64_t *tokens,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Forget failures for key (after a successful login). */
int db_login_failures_clear(struct db *db, const char *key, struct gp_error *err)
    __attribute__((warn_unused_result));

#endif
