/*
 * db_projects.h - projects, their Kubernetes namespaces and members.
 */
#ifndef GP_DB_PROJECTS_H
#define GP_DB_PROJECTS_H

#include <stdbool.h>
#include <stdint.h>

#include "db.h"

struct project_row {
	int64_t id;
	const char *name;
	const char *display_name;
	int64_t generation;
	int64_t created_us;
	int64_t updated_us;
	const char *namespaces_json; /* JSON array of names, sorted */
};

struct member_row {
	int64_t user_id;
	const char *username;
	const char *role;
	int64_t created_us;
};

int db_project_get(struct db *db, struct arena *a, const char *name, struct project_row *out,
    bool *found, struct gp_error *err) __attribute__((warn_unused_result));

/*
 * db_project_get and db_member_role in one round trip: the project named
 * name and user_id's role in it (*role NULL when not a member).
 */
int db_project_get_role(struct db *db, struct arena *a, const char *name, int64_t user_id,
    struct project_row *out, bool *found, const char **role, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Insert with its namespaces (namespaces_json: a JSON array of strings). */
int db_project_insert(struct db *db, struct arena *a, const char *name, const char *display_name,
    const char *namespaces_json, struct project_row *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/*
 * Update display_name and/or namespaces (NULL = keep) when generation
 * matches (0 = any). *stale set on a generation mismatch.
 */
int db_project_update(struct db *db, struct arena *a, int64_t project_id, const char *display_name,
    const char *namespaces_json, int64_t expected_generation, struct project_row *out, bool *stale,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Projects with id > after_id; member_user_id > 0 restricts to that user's projects. */
int db_projects_list(struct db *db, struct arena *a, int64_t member_user_id, int64_t after_id,
    int limit, struct project_row **out, int *n, struct gp_error *err)
    __attribute__((warn_unused_result));

/* The user's role in the project; *role NULL when not a member. */
int db_member_role(struct db *db, struct arena *a, int64_t project_id, int64_t user_id,
    const char **role, struct gp_error *err) __attribute__((warn_unused_result));

/* Insert or change a membership; *before gets the old role or NULL. */
int db_member_put(struct db *db, struct arena *a, int64_t project_id, int64_t user_id,
    const char *role, const char **before, struct gp_error *err)
    __attribute__((warn_unused_result));

/* Remove a membership; *before NULL when there was none. */
int db_member_delete(struct db *db, struct arena *a, int64_t project_id, int64_t user_id,
    const char **before, struct gp_error *err) __attribute__((warn_unused_result));

/* Owners left in a project. */
int db_project_owner_count(struct db *db, int64_t project_id, int *out, struct gp_error *err)
    __attribute__((warn_unused_result));

/* True when the two users are members (any role) of one project. */
int db_users_share_project(struct db *db, int64_t user_a, int64_t user_b, bool *out,
    struct gp_error *err) __attribute__((warn_unused_result));

/* Members with user id > after_id. */
int db_members_list(struct db *db, struct arena *a, int64_t project_id, int64_t after_id, int limit,
    struct member_row **out, int *n, struct gp_error *err) __attribute__((warn_unused_result));

#endif
