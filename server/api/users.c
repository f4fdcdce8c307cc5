/*
 * users.c - user administration (admin only).
 */
#include "users.h"

#include "auth/password.h"
#include "auth/token.h"
#include "db/db_users.h"

#include <string.h>

static struct json_object *
user_json(const struct user_row *u)
{
	struct json_object *o = json_object_new_object();

	json_add_int(o, "id", u->id);
	json_add_str(o, "username", u->username);
	json_add_str(o, "role", u->role);
	json_add_bool(o, "disabled", u->disabled);
	json_add_int(o, "generation", u->generation);
	json_add_time(o, "created_at", u->created_us);
	json_add_time(o, "updated_at", u->updated_us);
	return o;
}

static bool
username_valid(const char *s)
{
	size_t n = strlen(s);

	if (n < 1 || n > 63)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');

		if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-')))
			return false;
	}
	return true;
}

static void
check_password(struct jfields *f, const char *password)
{
	if (password != NULL && strlen(password) < PASSWORD_MIN_LEN)
		gp_error_field(f->err, "password", "must be at least %d characters",
		    PASSWORD_MIN_LEN);
}

struct user_create {
	struct request *req;
	const char *username;
	const char *phc;
	const char *role;
	struct user_row row;
};

static int
user_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct user_create *c = arg;

	if (db_user_insert(db, c->req->arena, c->username, c->phc, c->role, &c->row, err) < 0)
		return -1;
	return api_audit(db, c->req, "user.create", "user", c->username, 0, NULL,
	    json_own(c->req->arena, user_json(&c->row)), err);
}

int
api_users_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body;
	struct jfields f;
	struct user_create c;
	const char *password = NULL;
	enum role role;
	char phc[PASSWORD_HASH_MAX];

	/* the body holds a password or the answer a new token */
	arena_set_sensitive(req->arena);
	memset(&c, 0, sizeof(c));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "username", true, 63, &c.username) == 0 && !username_valid(c.username))
		gp_error_field(err, "username",
		    "must be 1-63 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit");
	jf_string(&f, "password", true, PASSWORD_MAX_LEN, &password);
	check_password(&f, password);
	if (jf_string(&f, "role", false, 16, &c.role) == 0 && c.role != NULL &&
	    role_parse(c.role, &role) < 0)
		gp_error_field(err, "role", "must be one of admin, operator, billing, none");
	if (jf_finish(&f) < 0)
		return -1;
	if (c.role == NULL)
		c.role = "none";
	if (password_hash(password, phc, sizeof(phc)) < 0)
		return gp_error_set(err, 500, "internal", "could not hash the password");
	c.req = req;
	c.phc = phc;
	if (db_tx(db_thread(), user_create_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 201, user_json(&c.row));
	api_etag(req, res, c.row.generation);
	response_header(res, "Location", arena_printf(req->arena, "/v1/users/%s", c.row.username));
	return 0;
}

int
api_users_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct user_row *rows;
	struct json_object *items;
	int limit, n;
	int64_t cursor;

	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (db_users_list(db_thread(), req->arena, cursor, limit + 1, &rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, user_json(&rows[i]));
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

int
api_users_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct user_row u;
	bool found;

	if (db_user_get(db_thread(), req->arena, req->params[0], &u, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such user");
	response_json(req, res, 200, user_json(&u));
	api_etag(req, res, u.generation);
	return 0;
}

struct user_patch {
	struct request *req;
	const char *role;
	bool disabled;
	bool has_disabled;
	const char *phc;
	struct api_if_match if_match;
	struct user_row before;
	struct user_row row;
};

static int
user_patch_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct user_patch *c = arg;
	bool found, stale;
	int64_t guard;

	if (db_user_get(db, c->req->arena, c->req->params[0], &c->before, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such user");
	if (api_if_match_check(&c->if_match, c->before.generation, "user", &guard, err) < 0)
		return -1;
	if (db_user_update(db, c->req->arena, c->req->params[0], c->role,
		c->has_disabled ? &c->disabled : NULL, c->phc, guard, &c->row, &found, &stale,
		err) < 0)
		return -1;
	if (stale)
		return gp_error_set(err, 412, "precondition_failed",
		    "the user changed since it was read (ETag mismatch)");
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such user");
	/* a disabled user or a new password ends every session */
	if ((c->has_disabled && c->disabled) || c->phc != NULL)
		if (db_tokens_revoke_user(db, c->row.id, err) < 0)
			return -1;
	return api_audit(db, c->req, "user.update", "user", c->row.username, 0,
	    json_own(c->req->arena, user_json(&c->before)),
	    json_own(c->req->arena, user_json(&c->row)), err);
}

/* a user's members a merge patch cannot remove (RFC 7396) */
static const char *const user_patch_keys[] = { "role", "disabled", "password", NULL };

int
api_users_patch(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body;
	struct jfields f;
	struct user_patch c;
	const char *password = NULL;
	enum role role;
	char phc[PASSWORD_HASH_MAX];

	/* the body holds a password or the answer a new token */
	arena_set_sensitive(req->arena);
	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.if_match, err) < 0)
		return -1;
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	(void)api_patch_not_null(req, body, user_patch_keys, err);
	if (jf_string(&f, "role", false, 16, &c.role) == 0 && c.role != NULL &&
	    role_parse(c.role, &role) < 0)
		gp_error_field(err, "role", "must be one of admin, operator, billing, none");
	jf_bool(&f, "disabled", false, &c.disabled, &c.has_disabled);
	jf_string(&f, "password", false, PASSWORD_MAX_LEN, &password);
	check_password(&f, password);
	if (jf_finish(&f) < 0)
		return -1;
	if (password != NULL) {
		if (password_hash(password, phc, sizeof(phc)) < 0)
			return gp_error_set(err, 500, "internal", "could not hash the password");
		c.phc = phc;
	}
	c.req = req;
	if (db_tx(db_thread(), user_patch_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 200, user_json(&c.row));
	api_etag(req, res, c.row.generation);
	return 0;
}
