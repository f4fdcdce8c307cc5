/*
 * projects.h - what projects.c offers: project access for every handler
 * (api_project_access) and its handlers (routes.c routes to them).
 */
#ifndef GP_API_PROJECTS_H
#define GP_API_PROJECTS_H

#include "api.h"

struct project_row;

enum project_access {
	PROJECT_READ,   /* members, admin, operator, billing */
	PROJECT_SUBMIT, /* owners and members (requests) */
	PROJECT_MANAGE, /* owners and admin */
};

/*
 * Load project `name` as the caller may see it: 404 when it does not
 * exist or the caller may not see it, 403 when visible but `need` is
 * not granted. *prole gets the caller's project role (NONE for staff).
 */
int api_project_access(struct db *db, struct request *req, const char *name,
    enum project_access need, struct project_row *out, enum project_role *prole,
    struct gp_error *err) __attribute__((warn_unused_result));

int api_projects_create(struct request *req, struct response *res, struct gp_error *err);
int api_projects_list(struct request *req, struct response *res, struct gp_error *err);
int api_projects_get(struct request *req, struct response *res, struct gp_error *err);
int api_projects_patch(struct request *req, struct response *res, struct gp_error *err);
int api_members_list(struct request *req, struct response *res, struct gp_error *err);
int api_members_put(struct request *req, struct response *res, struct gp_error *err);
int api_members_delete(struct request *req, struct response *res, struct gp_error *err);

#endif
