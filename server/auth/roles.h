/*
 * roles.h - global and project roles (docs/design.md section 6).
 */
#ifndef GP_AUTH_ROLES_H
#define GP_AUTH_ROLES_H

#include <stdbool.h>

enum role {
	ROLE_NONE = 0, /* an ordinary user: sees only their projects */
	ROLE_BILLING = 1,
	ROLE_OPERATOR = 2,
	ROLE_ADMIN = 3,
};

enum project_role {
	PROJECT_ROLE_NONE = 0,
	PROJECT_ROLE_VIEWER = 1,
	PROJECT_ROLE_MEMBER = 2,
	PROJECT_ROLE_OWNER = 3,
};

/* "admin|operator|billing|none" -> enum; -1 when unknown. */
int role_parse(const char *s, enum role *out);
const char *role_name(enum role r);

/* "owner|member|viewer" -> enum; -1 when unknown. */
int project_role_parse(const char *s, enum project_role *out);
const char *project_role_name(enum project_role r);

/* Global roles that may read every project (admin, operator, billing). */
bool role_sees_all_projects(enum role r);

#endif
