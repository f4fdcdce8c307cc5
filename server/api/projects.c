/*
 * projects.c - projects, their namespaces and members.
 */
#include "projects.h"

#include "db/db_projects.h"
#include "db/db_users.h"

#include <string.h>

#define NAMESPACES_MAX 64

int
api_project_access(struct db *db, struct request *req, const char *name, enum project_access need,
    struct project_row *out, enum project_role *prole, struct gp_error *err)
{
	enum role role = api_role(req);
	enum project_role pr = PROJECT_ROLE_NONE;
	const char *mrole = NULL;
	bool found;

	if (db_project_get_role(db, req->arena, name, req->principal.user_id, out, &found, &mrole,
		err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such project: %s", name);
	if (mrole != NULL && project_role_parse(mrole, &pr) < 0)
		pr = PROJECT_ROLE_NONE;
	if (prole != NULL)
		*prole = pr;
	if (pr == PROJECT_ROLE_NONE && !role_sees_all_projects(role))
		return gp_error_set(err, 404, "not_found", "no such project: %s", name);
	switch (need) {
	case PROJECT_READ:
		return 0;
	case PROJECT_SUBMIT:
		if (pr >= PROJECT_ROLE_MEMBER)
			return 0;
		break;
	case PROJECT_MANAGE:
		if (pr == PROJECT_ROLE_OWNER || role == ROLE_ADMIN)
			return 0;
		break;
	}
	/* say who may, as the global 403 does (dispatch.c) */
	if (need == PROJECT_SUBMIT)
		return gp_error_set(err, 403, "forbidden",
		    "only members and owners of project %s may do this (your role: %s)", name,
		    project_role_name(pr));
	return gp_error_set(err, 403, "forbidden",
	    "only owners of project %s and the global role admin may do this (your role: %s)", name,
	    project_role_name(pr));
}

static struct json_object *
project_json(const struct project_row *p)
{
	struct json_object *o = json_object_new_object();

	json_add_int(o, "id", p->id);
	json_add_str(o, "name", p->name);
	json_add_str(o, "display_name", p->display_name);
	json_object_object_add(o, "namespaces",
	    p->namespaces_json ? json_tokener_parse(p->namespaces_json) : json_object_new_array());
	json_add_int(o, "generation", p->generation);
	json_add_time(o, "created_at", p->created_us);
	json_add_time(o, "updated_at", p->updated_us);
	return o;
}

/* Validate the namespaces array; returns its canonical JSON text. */
static const char *
read_namespaces(struct request *req, struct json_object *arr, struct gp_error *err)
{
	size_t n = json_object_array_length(arr);
	struct json_object *out;

	if (n > NAMESPACES_MAX) {
		gp_error_field(err, "namespaces", "must hold at most %d names", NAMESPACES_MAX);
		return NULL;
	}
	out = json_own(req->arena, json_object_new_array());
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(arr, i);
		const char *path = arena_printf(req->arena, "namespaces[%zu]", i);

		if (!json_object_is_type(v, json_type_string)) {
			gp_error_field(err, path, "must be a string");
			continue;
		}
		if (!api_dns_label(json_object_get_string(v))) {
			gp_error_field(err, path,
			    "must be a Kubernetes namespace name (DNS label)");
			continue;
		}
		/* compare with the names accepted so far: only those are strings */
		for (size_t j = 0; j < json_object_array_length(out); j++) {
			if (strcmp(json_object_get_string(json_object_array_get_idx(out, j)),
				json_object_get_string(v)) == 0) {
				gp_error_field(err, path, "is listed twice");
				break;
			}
		}
		json_object_array_add(out, json_object_new_string(json_object_get_string(v)));
	}
	return json_to_arena(req->arena, out, NULL);
}

struct project_create {
	struct request *req;
	const char *name;
	const char *display_name;
	const char *namespaces;
	struct project_row row;
};

static int
project_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct project_create *c = arg;

	if (db_project_insert(db, c->req->arena, c->name, c->display_name, c->namespaces, &c->row,
		err) < 0)
		return -1;
	return api_audit(db, c->req, "project.create", "project", c->row.name, c->row.id, NULL,
	    json_own(c->req->arena, project_json(&c->row)), err);
}

int
api_projects_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *ns = NULL;
	struct jfields f;
	struct project_create c;

	memset(&c, 0, sizeof(c));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "name", true, 63, &c.name) == 0 && !api_dns_label(c.name))
		gp_error_field(err, "name",
		    "must be a DNS label: lower-case letters, digits and '-'");
	if (jf_string(&f, "display_name", false, 200, &c.display_name) == 0 &&
	    c.display_name != NULL && c.display_name[0] == '\0')
		gp_error_field(err, "display_name", "must not be empty");
	if (jf_array(&f, "namespaces", false, &ns) == 0 && ns != NULL)
		c.namespaces = read_namespaces(req, ns, err);
	if (jf_finish(&f) < 0)
		return -1;
	if (c.display_name == NULL)
		c.display_name = c.name;
	if (c.namespaces == NULL)
		c.namespaces = "[]";
	c.req = req;
	if (db_tx(db_thread(), project_create_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 201, project_json(&c.row));
	api_etag(req, res, c.row.generation);
	response_header(res, "Location", arena_printf(req->arena, "/v1/projects/%s", c.row.name));
	return 0;
}

int
api_projects_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct project_row *rows;
	struct json_object *items;
	int limit, n;
	int64_t cursor;
	int64_t member = api_sees_all_projects(req) ? 0 : req->principal.user_id;

	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (db_projects_list(db_thread(), req->arena, member, cursor, limit + 1, &rows, &n, err) <
	    0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, project_json(&rows[i]));
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

int
api_projects_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct project_row p;

	if (api_project_access(db_thread(), req, req->params[0], PROJECT_READ, &p, NULL, err) < 0)
		return -1;
	response_json(req, res, 200, project_json(&p));
	api_etag(req, res, p.generation);
	return 0;
}

struct project_patch {
	struct request *req;
	const char *display_name;
	const char *namespaces;
	struct api_if_match if_match;
	struct project_row before;
	struct project_row row;
};

static int
project_patch_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct project_patch *c = arg;
	bool stale;
	int64_t guard;

	if (api_project_access(db, c->req, c->req->params[0], PROJECT_MANAGE, &c->before, NULL,
		err) < 0)
		return -1;
	if (api_if_match_check(&c->if_match, c->before.generation, "project", &guard, err) < 0)
		return -1;
	if (db_project_update(db, c->req->arena, c->before.id, c->display_name, c->namespaces,
		guard, &c->row, &stale, err) < 0)
		return -1;
	if (stale)
		return gp_error_set(err, 412, "precondition_failed",
		    "the project changed since it was read (ETag mismatch)");
	return api_audit(db, c->req, "project.update", "project", c->row.name, c->row.id,
	    json_own(c->req->arena, project_json(&c->before)),
	    json_own(c->req->arena, project_json(&c->row)), err);
}

int
api_projects_patch(struct request *req, struct response *res, struct gp_error *err)
{
	static const char *const keys[] = { "display_name", "namespaces", NULL };
	struct json_object *body, *ns = NULL;
	struct jfields f;
	struct project_patch c;

	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.if_match, err) < 0)
		return -1;
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	(void)api_patch_not_null(req, body, keys, err);
	if (jf_string(&f, "display_name", false, 200, &c.display_name) == 0 &&
	    c.display_name != NULL && c.display_name[0] == '\0')
		gp_error_field(err, "display_name", "must not be empty");
	if (jf_array(&f, "namespaces", false, &ns) == 0 && ns != NULL)
		c.namespaces = read_namespaces(req, ns, err);
	if (jf_finish(&f) < 0)
		return -1;
	c.req = req;
	if (db_tx(db_thread(), project_patch_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 200, project_json(&c.row));
	api_etag(req, res, c.row.generation);
	return 0;
}

int
api_members_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct project_row p;
	struct member_row *rows;
	struct json_object *items;
	int limit, n;
	int64_t cursor;

	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (api_project_access(db_thread(), req, req->params[0], PROJECT_READ, &p, NULL, err) < 0)
		return -1;
	if (db_members_list(db_thread(), req->arena, p.id, cursor, limit + 1, &rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++) {
		struct json_object *o = json_object_new_object();

		json_add_str(o, "username", rows[i].username);
		json_add_str(o, "role", rows[i].role);
		json_add_time(o, "added_at", rows[i].created_us);
		json_object_array_add(items, o);
	}
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].user_id : 0);
	return 0;
}

struct member_change {
	struct request *req;
	const char *role; /* NULL: remove */
	const char *before;
	struct api_if_match if_match; /* compared with the project's ETag */
	struct project_row project;
};

static struct json_object *
member_json(const char *username, const char *role)
{
	struct json_object *o = json_object_new_object();

	json_add_str(o, "username", username);
	json_add_str(o, "role", role);
	return o;
}

static int
member_change_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct member_change *c = arg;
	struct request *req = c->req;
	struct user_row u;
	bool found;
	int owners;
	int64_t guard;

	if (api_project_access(db, req, req->params[0], PROJECT_MANAGE, &c->project, NULL, err) < 0)
		return -1;
	/* a membership is part of its project: If-Match names the project's ETag */
	if (api_if_match_check(&c->if_match, c->project.generation, "project", &guard, err) < 0)
		return -1;
	if (db_user_get(db, req->arena, req->params[1], &u, &found, err) < 0)
		return -1;
	/*
	 * Only an admin sees every account. Anyone else sees themselves
	 * and the users they share a project with; any other name answers
	 * exactly as a name nobody has, so an owner cannot probe for
	 * accounts (404 versus 201 would tell).
	 */
	if (found && api_role(req) != ROLE_ADMIN && u.id != req->principal.user_id) {
		bool shared;

		if (db_users_share_project(db, req->principal.user_id, u.id, &shared, err) < 0)
			return -1;
		found = shared;
	}
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such user: %s", req->params[1]);
	if (c->role != NULL) {
		if (db_member_put(db, req->arena, c->project.id, u.id, c->role, &c->before, err) <
		    0)
			return -1;
	} else {
		if (db_member_delete(db, req->arena, c->project.id, u.id, &c->before, err) < 0)
			return -1;
		if (c->before == NULL)
			return gp_error_set(err, 404, "not_found", "%s is not a member of %s",
			    u.username, c->project.name);
	}
	if (c->before != NULL && strcmp(c->before, "owner") == 0 &&
	    (c->role == NULL || strcmp(c->role, "owner") != 0)) {
		if (db_project_owner_count(db, c->project.id, &owners, err) < 0)
			return -1;
		if (owners == 0 && api_role(req) != ROLE_ADMIN)
			return gp_error_set(err, 409, "conflict",
			    "a project must keep at least one owner");
	}
	return api_audit(db, req, c->role ? "project.member.put" : "project.member.remove",
	    "project_member", arena_printf(req->arena, "%s/%s", c->project.name, u.username),
	    c->project.id,
	    c->before ? json_own(req->arena, member_json(u.username, c->before)) : NULL,
	    c->role ? json_own(req->arena, member_json(u.username, c->role)) : NULL, err);
}

int
api_members_put(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body;
	struct jfields f;
	struct member_change c;
	enum project_role pr;

	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.if_match, err) < 0)
		return -1;
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "role", true, 16, &c.role) == 0 && project_role_parse(c.role, &pr) < 0)
		gp_error_field(err, "role", "must be one of owner, member, viewer");
	if (jf_finish(&f) < 0)
		return -1;
	c.req = req;
	/* serializable: two owners leaving at once must not both pass the last-owner check */
	if (db_tx_serializable(db_thread(), member_change_tx, &c, err) < 0)
		return -1;
	response_json(req, res, c.before ? 200 : 201, member_json(req->params[1], c.role));
	return 0;
}

int
api_members_delete(struct request *req, struct response *res, struct gp_error *err)
{
	struct member_change c;

	memset(&c, 0, sizeof(c));
	if (api_if_match(req, &c.if_match, err) < 0)
		return -1;
	c.req = req;
	if (db_tx_serializable(db_thread(), member_change_tx, &c, err) < 0)
		return -1;
	response_empty(res, 204);
	return 0;
}
