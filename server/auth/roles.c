/*
 * roles.c - role names.
 */
#include "roles.h"

#include <string.h>

static const char *const role_names[] = { "none", "billing", "operator", "admin" };
static const char *const project_role_names[] = { "none", "viewer", "member", "owner" };

int
role_parse(const char *s, enum role *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcmp(s, role_names[i]) == 0) {
			*out = (enum role)i;
			return 0;
		}
	}
	return -1;
}

const char *
role_name(enum role r)
{
	return (unsigned)r < 4 ? role_names[r] : "none";
}

int
project_role_parse(const char *s, enum project_role *out)
{
	for (int i = 1; i < 4; i++) {
		if (strcmp(s, project_role_names[i]) == 0) {
			*out = (enum project_role)i;
			return 0;
		}
	}
	return -1;
}

const char *
project_role_name(enum project_role r)
{
	return (unsigned)r < 4 ? project_role_names[r] : "none";
}

bool
role_sees_all_projects(enum role r)
{
	return r == ROLE_ADMIN || r == ROLE_OPERATOR || r == ROLE_BILLING;
}
