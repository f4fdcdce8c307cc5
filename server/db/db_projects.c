/*
 * db_projects.c - projects, namespaces, memberships.
 */
#include "db_projects.h"
#include "db_internal.h"
#include "db_sql.h"

#define PROJECT_COLS                                                                                    \
	"p.id, p.name, p.display_name, p.generation, " EPOCH_US("p.created_at") ", " EPOCH_US(          \
	    "p.updated_at") ", "                                                                        \
			    "(SELECT coalesce(json_agg(n.namespace ORDER BY n.namespace), '[]')::text " \
			    "FROM project_namespaces n WHERE n.project_id = p.id)"

DB_STMT(stmt_project_get, "SELECT " PROJECT_COLS " FROM projects p WHERE p.name = $1");
/* the project and the user's role in it, in one round trip */
DB_STMT(stmt_project_get_role,
    "SELECT " PROJECT_COLS ", (SELECT m.role FROM project_members m "
    "WHERE m.project_id = p.id AND m.user_id = $2) FROM projects p WHERE p.name = $1");
DB_STMT(stmt_project_by_id, "SELECT " PROJECT_COLS " FROM projects p WHERE p.id = $1");
DB_STMT(stmt_project_insert,
    "INSERT INTO projects (name, display_name) VALUES ($1, $2) RETURNING id");
DB_STMT(stmt_namespaces_insert,
    "INSERT INTO project_namespaces (project_id, namespace) "
    "SELECT $1, value FROM jsonb_array_elements_text($2::jsonb)");
DB_STMT(stmt_namespaces_delete, "DELETE FROM project_namespaces WHERE project_id = $1");
DB_STMT(stmt_project_update,
    "UPDATE projects SET display_name = coalesce($2, display_name), "
    "generation = generation + 1, updated_at = now() "
    "WHERE id = $1 AND ($3::int8 = 0 OR generation = $3::int8) RETURNING id");
DB_STMT(stmt_projects_list_all,
    "SELECT " PROJECT_COLS " FROM projects p WHERE p.id > $1 ORDER BY p.id LIMIT $2");
DB_STMT(stmt_projects_list_member,
    "SELECT " PROJECT_COLS " FROM projects p JOIN project_members m "
    "ON m.project_id = p.id AND m.user_id = $3 WHERE p.id > $1 ORDER BY p.id LIMIT $2");
DB_STMT(stmt_member_role,
    "SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2");
DB_STMT(stmt_member_put,
    "WITH old AS (SELECT role FROM project_members WHERE project_id = $1 AND user_id = $2 "
    "FOR UPDATE), up AS (INSERT INTO project_members (project_id, user_id, role) "
    "VALUES ($1, $2, $3) ON CONFLICT (project_id, user_id) DO UPDATE SET role = EXCLUDED.role) "
    "SELECT (SELECT role FROM old)");
DB_STMT(stmt_member_delete,
    "DELETE FROM project_members WHERE project_id = $1 AND user_id = $2 RETURNING role");
DB_STMT(stmt_owner_count,
    "SELECT count(*) FROM project_members WHERE project_id = $1 AND role = 'owner'");
DB_STMT(stmt_users_share_project,
    "SELECT EXISTS (SELECT 1 FROM project_members a JOIN project_members b "
    "ON b.project_id = a.project_id WHERE a.user_id = $1 AND b.user_id = $2)");
DB_STMT(stmt_members_list,
    "SELECT m.user_id, u.username, m.role, " EPOCH_US(
	"m.created_at") " "
			"FROM project_members m JOIN users u ON u.id = m.user_id "
			"WHERE m.project_id = $1 AND m.user_id > $2 ORDER BY m.user_id LIMIT $3");

static void
project_from_row(struct arena *a, const PGresult *r, int row, struct project_row *p)
{
	p->id = db_int64(r, row, 0);
	p->name = db_text(a, r, row, 1);
	p->display_name = db_text(a, r, row, 2);
	p->generation = db_int64(r, row, 3);
	p->created_us = db_int64(r, row, 4);
	p->updated_us = db_int64(r, row, 5);
	p->namespaces_json = db_text(a, r, row, 6);
}

int
db_project_get(struct db *db, struct arena *a, const char *name, struct project_row *out,
    bool *found, struct gp_error *err)
{
	const char *p[1] = { name };
	PGresult *r = db_exec(db, a, &stmt_project_get, 1, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	if (*found)
		project_from_row(a, r, 0, out);
	return 0;
}

int
db_project_get_role(struct db *db, struct arena *a, const char *name, int64_t user_id,
    struct project_row *out, bool *found, const char **role, struct gp_error *err)
{
	const char *p[2] = { name, db_param_int(a, user_id) };
	PGresult *r = db_exec(db, a, &stmt_project_get_role, 2, p, err);

	if (r == NULL)
		return -1;
	*found = PQntuples(r) == 1;
	*role = NULL;
	if (*found) {
		project_from_row(a, r, 0, out);
		*role = db_text(a, r, 0, 7);
	}
	return 0;
}

static int
project_reload(struct db *db, struct arena *a, int64_t id, struct project_row *out,
    struct gp_error *err)
{
	const char *p[1] = { db_param_int(a, id) };
	PGresult *r = db_exec(db, a, &stmt_project_by_id, 1, p, err);

	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1)
		return gp_error_set(err, 500, "internal", "project vanished");
	project_from_row(a, r, 0, out);
	return 0;
}

static int
namespaces_claim(struct db *db, struct arena *a, int64_t project_id, const char *namespaces_json,
    struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, project_id), namespaces_json };

	if (db_exec(db, a, &stmt_namespaces_insert, 2, p, err) == NULL) {
		if (err->status == 409)
			gp_error_field(err, "namespaces",
			    "a namespace is already owned by another project");
		return -1;
	}
	return 0;
}

int
db_project_insert(struct db *db, struct arena *a, const char *name, const char *display_name,
    const char *namespaces_json, struct project_row *out, struct gp_error *err)
{
	const char *p[2] = { name, display_name };
	PGresult *r = db_exec(db, a, &stmt_project_insert, 2, p, err);
	int64_t id;

	if (r == NULL) {
		if (err->status == 409)
			gp_error_set(err, 409, "conflict", "a project named %s already exists",
			    name);
		return -1;
	}
	id = db_int64(r, 0, 0);
	if (namespaces_claim(db, a, id, namespaces_json, err) < 0)
		return -1;
	return project_reload(db, a, id, out, err);
}

int
db_project_update(struct db *db, struct arena *a, int64_t project_id, const char *display_name,
    const char *namespaces_json, int64_t expected_generation, struct project_row *out, bool *stale,
    struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, project_id), display_name,
		db_param_int(a, expected_generation) };
	PGresult *r = db_exec(db, a, &stmt_project_update, 3, p, err);

	*stale = false;
	if (r == NULL)
		return -1;
	if (PQntuples(r) != 1) {
		*stale = true;
		return 0;
	}
	if (namespaces_json != NULL) {
		if (db_exec(db, a, &stmt_namespaces_delete, 1, p, err) == NULL)
			return -1;
		if (namespaces_claim(db, a, project_id, namespaces_json, err) < 0)
			return -1;
	}
	return project_reload(db, a, project_id, out, err);
}

int
db_projects_list(struct db *db, struct arena *a, int64_t member_user_id, int64_t after_id,
    int limit, struct project_row **out, int *n, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, after_id), db_param_int(a, limit),
		db_param_int(a, member_user_id) };
	PGresult *r;

	if (member_user_id > 0)
		r = db_exec(db, a, &stmt_projects_list_member, 3, p, err);
	else
		r = db_exec(db, a, &stmt_projects_list_all, 2, p, err);
	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++)
		project_from_row(a, r, i, &(*out)[i]);
	return 0;
}

int
db_member_role(struct db *db, struct arena *a, int64_t project_id, int64_t user_id,
    const char **role, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, project_id), db_param_int(a, user_id) };
	PGresult *r = db_exec(db, a, &stmt_member_role, 2, p, err);

	if (r == NULL)
		return -1;
	*role = PQntuples(r) == 1 ? db_text(a, r, 0, 0) : NULL;
	return 0;
}

int
db_member_put(struct db *db, struct arena *a, int64_t project_id, int64_t user_id, const char *role,
    const char **before, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, project_id), db_param_int(a, user_id), role };
	PGresult *r = db_exec(db, a, &stmt_member_put, 3, p, err);

	if (r == NULL)
		return -1;
	*before = db_text(a, r, 0, 0);
	return 0;
}

int
db_member_delete(struct db *db, struct arena *a, int64_t project_id, int64_t user_id,
    const char **before, struct gp_error *err)
{
	const char *p[2] = { db_param_int(a, project_id), db_param_int(a, user_id) };
	PGresult *r = db_exec(db, a, &stmt_member_delete, 2, p, err);

	if (r == NULL)
		return -1;
	*before = PQntuples(r) == 1 ? db_text(a, r, 0, 0) : NULL;
	return 0;
}

int
db_project_owner_count(struct db *db, int64_t project_id, int *out, struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[1] = { db_param_int(a, project_id) };
	int64_t n = 0;
	int rc = db_exec_int64(db, a, &stmt_owner_count, 1, p, &n, err);

	*out = (int)n;
	arena_destroy(a);
	return rc;
}

int
db_users_share_project(struct db *db, int64_t user_a, int64_t user_b, bool *out,
    struct gp_error *err)
{
	struct arena *a = arena_create();
	const char *p[2] = { db_param_int(a, user_a), db_param_int(a, user_b) };
	int rc = db_exec_bool(db, a, &stmt_users_share_project, 2, p, out, err);

	arena_destroy(a);
	return rc;
}

int
db_members_list(struct db *db, struct arena *a, int64_t project_id, int64_t after_id, int limit,
    struct member_row **out, int *n, struct gp_error *err)
{
	const char *p[3] = { db_param_int(a, project_id), db_param_int(a, after_id),
		db_param_int(a, limit) };
	PGresult *r = db_exec(db, a, &stmt_members_list, 3, p, err);

	if (r == NULL)
		return -1;
	*n = PQntuples(r);
	*out = arena_alloc(a, sizeof(**out) * (size_t)(*n + 1));
	for (int i = 0; i < *n; i++) {
		(*out)[i].user_id = db_int64(r, i, 0);
		(*out)[i].username = db_text(a, r, i, 1);
		(*out)[i].role = db_text(a, r, i, 2);
		(*out)[i].created_us = db_int64(r, i, 3);
	}
	return 0;
}
