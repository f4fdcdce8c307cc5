/*
 * auth.c - login, /v1/me and API tokens.
 */
#include "auth.h"

#include "auth/password.h"
#include "auth/token.h"
#include "core/log.h"
#include "core/timeutil.h"
#include "db/db_projects.h"
#include "db/db_users.h"

#include <stdio.h>
#include <string.h>

#define TOKEN_NAME_MAX 100
#define TOKEN_MAX_LIFETIME_US (366LL * 86400 * 1000000)

/* Same answer for unknown users and bad passwords; spends the same work. */
static const char dummy_phc[] = "$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHRzb21lc2FsdA$"
				"mZfoUVOAqzX7nHxl2l9nWwRs2EWnEeyqX5oGQ1KS5oA";

/*
 * Reserve this attempt against the per-user and per-address limits: it
 * counts as a failure from now on unless the login succeeds. Reserving
 * first (atomically, in the database) keeps parallel guesses, on any
 * number of threads and replicas, within the limit.
 */
static int
login_attempt_reserve(struct db *db, struct app *app, const char *ukey, const char *ikey,
    struct gp_error *err)
{
	bool user_ok = false, ip_ok = false;

	/* the address first: a throttled address writes no counter for
	 * every user name it sprays */
	if (db_login_attempt_reserve(db, ikey, app->login_window_s, app->login_max_ip_failures,
		&ip_ok, err) < 0)
		return -1;
	if (ip_ok) {
		if (db_login_attempt_reserve(db, ukey, app->login_window_s,
			app->login_max_user_failures, &user_ok, err) < 0 ||
		    (!user_ok && db_login_attempt_release(db, ikey, err) < 0))
			return -1;
	}
	if (!user_ok || !ip_ok) {
		gp_error_set(err, 429, "rate_limited", "too many failed logins, try again later");
		err->retry_after = app->login_window_s;
		return -1;
	}
	return 0;
}

struct session_create {
	struct request *req;
	const struct user_row *user;
	const unsigned char *digest;
	const char *prefix;
	int64_t expires_us;
	struct token_row *row;
};

/* A login token and its audit row, in one transaction. */
static int
session_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct session_create *c = arg;
	struct json_object *after;

	if (db_token_insert(db, c->req->arena, c->user->id, "session", "login", c->digest,
		c->prefix, c->expires_us, c->row, err) < 0)
		return -1;
	after = json_own(c->req->arena, json_object_new_object());
	json_add_str(after, "username", c->user->username);
	json_add_str(after, "prefix", c->prefix);
	json_add_time(after, "expires_at", c->row->expires_us);
	return api_audit(db, c->req, "session.create", "token",
	    arena_printf(c->req->arena, "%lld", (long long)c->row->id), 0, NULL, after, err);
}

int
api_login(struct request *req, struct response *res, struct gp_error *err)
{
	struct app *app = api_app(req);
	struct db *db = db_thread();
	struct json_object *body, *o;
	struct jfields f;
	const char *username = NULL, *password = NULL, *ukey, *ikey;
	struct user_row u;
	struct token_row t;
	bool found = false, ok;
	char token[TOKEN_MAX_LEN];
	unsigned char digest[TOKEN_DIGEST_LEN];
	int rc = -1;

	/* the body holds a password or the answer a new token */
	arena_set_sensitive(req->arena);
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	jf_string(&f, "username", true, 64, &username);
	jf_string(&f, "password", true, PASSWORD_MAX_LEN, &password);
	if (jf_finish(&f) < 0)
		return -1;
	ukey = arena_printf(req->arena, "user:%s", username);
	ikey = arena_printf(req->arena, "ip:%s", req->client_ip);
	if (login_attempt_reserve(db, app, ukey, ikey, err) < 0)
		return -1;
	if (db_user_get(db, req->arena, username, &u, &found, err) < 0)
		return -1;
	ok = password_verify(found ? u.password_hash : dummy_phc, password);
	if (!found || !ok || u.disabled) {
		/* the reserved attempts stay counted as failures */
		log_info(req->request_id, "login failed", "username", username);
		return gp_error_set(err, 401, "invalid_credentials",
		    "invalid user name or password");
	}
	if (password_needs_rehash(u.password_hash)) {
		char phc[PASSWORD_HASH_MAX];

		if (password_hash(password, phc, sizeof(phc)) == 0 &&
		    db_user_set_password(db, u.id, phc, err) < 0)
			return -1;
	}
	if (db_login_failures_clear(db, ukey, err) < 0 ||
	    db_login_attempt_release(db, ikey, err) < 0)
		return -1;
	if (token_generate("gpp", token, sizeof(token)) < 0)
		return gp_error_set(err, 500, "internal", "could not generate a token");
	token_digest(token, strlen(token), digest);
	{
		struct session_create sc = {
			.req = req,
			.user = &u,
			.digest = digest,
			.prefix = arena_strndup(req->arena, token, 8),
			.expires_us = time_now_us() + (int64_t)app->session_ttl_s * 1000000,
			.row = &t,
		};

		/* the session is the caller's from here on: audit it as theirs */
		req->principal.user_id = u.id;
		req->principal.username = u.username;
		if (db_tx(db, session_create_tx, &sc, err) < 0)
			goto fail;
	}
	o = json_object_new_object();
	json_add_str(o, "token", token);
	json_add_time(o, "expires_at", t.expires_us);
	json_add_str(o, "username", u.username);
	json_add_str(o, "role", u.role);
	response_json(req, res, 200, o);
	response_header(res, "Cache-Control", "no-store");
	rc = 0;
fail:
	token_wipe(token, sizeof(token));
	return rc;
}

int
api_me(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *o, *arr;

	/* the memberships came with the token: one database round trip per /v1/me */
	arr =
	    req->principal.projects_json ? json_tokener_parse(req->principal.projects_json) : NULL;
	if (arr == NULL || !json_object_is_type(arr, json_type_array)) {
		json_object_put(arr);
		return gp_error_set(err, 500, "internal", "could not read the caller's projects");
	}
	o = json_object_new_object();
	json_add_str(o, "username", req->principal.username);
	json_add_str(o, "role", role_name(api_role(req)));
	json_object_object_add(o, "projects", arr);
	response_json(req, res, 200, o);
	return 0;
}

static struct json_object *
token_json(const struct token_row *t)
{
	struct json_object *o = json_object_new_object();

	{
		char id[24];

		snprintf(id, sizeof(id), "%lld", (long long)t->id);
		json_add_str(o, "id", id);
	}
	json_add_str(o, "name", t->name);
	json_add_str(o, "prefix", t->prefix);
	json_add_time(o, "created_at", t->created_us);
	json_add_time(o, "expires_at", t->expires_us);
	json_add_time(o, "last_used_at", t->last_used_us);
	return o;
}

struct token_create {
	struct request *req;
	const char *name;
	int64_t expires_us;
	const unsigned char *digest;
	const char *prefix;
	struct token_row row;
};

static int
token_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct token_create *c = arg;
	struct json_object *after;

	if (db_token_insert(db, c->req->arena, c->req->principal.user_id, "api", c->name, c->digest,
		c->prefix, c->expires_us, &c->row, err) < 0)
		return -1;
	after = json_own(c->req->arena, token_json(&c->row));
	return api_audit(db, c->req, "token.create", "token",
	    arena_printf(c->req->arena, "%lld", (long long)c->row.id), 0, NULL, after, err);
}

int
api_tokens_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *o;
	struct jfields f;
	struct token_create c;
	char token[TOKEN_MAX_LEN];
	unsigned char digest[TOKEN_DIGEST_LEN];
	bool has_exp = false;
	int64_t now = time_now_us();
	int rc = -1;

	/* the body holds a password or the answer a new token */
	arena_set_sensitive(req->arena);
	memset(&c, 0, sizeof(c));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	jf_string(&f, "name", true, TOKEN_NAME_MAX, &c.name);
	jf_time(&f, "expires_at", false, &c.expires_us, &has_exp);
	if (has_exp && (c.expires_us <= now || c.expires_us > now + TOKEN_MAX_LIFETIME_US))
		gp_error_field(err, "expires_at", "must be in the future and within 366 days");
	if (c.name != NULL && c.name[0] == '\0')
		gp_error_field(err, "name", "must not be empty");
	if (jf_finish(&f) < 0)
		return -1;
	if (token_generate("gpp", token, sizeof(token)) < 0)
		return gp_error_set(err, 500, "internal", "could not generate a token");
	token_digest(token, strlen(token), digest);
	c.req = req;
	c.digest = digest;
	c.prefix = arena_strndup(req->arena, token, 8);
	if (db_tx(db_thread(), token_create_tx, &c, err) < 0)
		goto fail;
	o = token_json(&c.row);
	json_add_str(o, "token", token);
	response_json(req, res, 201, o);
	response_header(res, "Location",
	    arena_printf(req->arena, "/v1/tokens/%lld", (long long)c.row.id));
	response_header(res, "Cache-Control", "no-store");
	rc = 0;
fail:
	token_wipe(token, sizeof(token));
	return rc;
}

int
api_tokens_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct token_row *rows;
	struct json_object *items;
	int limit, n;
	int64_t cursor;

	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (db_tokens_list(db_thread(), req->arena, req->principal.user_id, cursor, limit + 1,
		&rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, token_json(&rows[i]));
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

struct token_revoke {
	struct request *req;
	int64_t id;
	bool found;
	struct token_row row;
};

static int
token_revoke_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct token_revoke *c = arg;

	if (db_token_revoke(db, c->req->arena, c->req->principal.user_id, c->id, &c->row, &c->found,
		err) < 0)
		return -1;
	if (!c->found)
		return gp_error_set(err, 404, "not_found", "no such token");
	return api_audit(db, c->req, "token.revoke", "token",
	    arena_printf(c->req->arena, "%lld", (long long)c->id), 0,
	    json_own(c->req->arena, token_json(&c->row)), NULL, err);
}

/* POST /v1/auth/logout: revoke the token that authenticated this request. */
int
api_logout(struct request *req, struct response *res, struct gp_error *err)
{
	struct token_revoke c;

	memset(&c, 0, sizeof(c));
	c.req = req;
	c.id = req->principal.token_id;
	if (db_tx(db_thread(), token_revoke_tx, &c, err) < 0)
		return -1;
	response_empty(res, 204);
	return 0;
}

int
api_tokens_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct token_row *rows;
	int64_t id;
	int n = 0;

	if (api_param_id(req, 0, &id, err) < 0)
		return -1;
	/* the caller's live API token with this id: the first one after id - 1 */
	if (db_tokens_list(db_thread(), req->arena, req->principal.user_id, id - 1, 1, &rows, &n,
		err) < 0)
		return -1;
	if (n != 1 || rows[0].id != id)
		return gp_error_set(err, 404, "not_found", "no such token");
	response_json(req, res, 200, token_json(&rows[0]));
	return 0;
}

int
api_tokens_delete(struct request *req, struct response *res, struct gp_error *err)
{
	struct token_revoke c;

	memset(&c, 0, sizeof(c));
	c.req = req;
	if (api_param_id(req, 0, &c.id, err) < 0)
		return -1;
	if (db_tx(db_thread(), token_revoke_tx, &c, err) < 0)
		return -1;
	response_empty(res, 204);
	return 0;
}
