/*
 * unit_catalog.c - the shared pieces of the domain unit tests (see
 * unit_catalog.h).
 */
#include "unit_catalog.h"

#include "core/error.h"
#include "domain/catalog.h"

#include <stdio.h>
#include <string.h>

int
unit_catalog_setup(void **state)
{
	struct catalog *c = NULL;
	struct gp_error err;

	gp_error_clear(&err);
	if (catalog_load_builtin(&c, &err) < 0)
		return -1;
	*state = c;
	return 0;
}

int
unit_catalog_teardown(void **state)
{
	catalog_free(*state);
	return 0;
}

struct spec_count
unit_spec(const char *model, const char *profile, int count)
{
	struct spec_count s;

	memset(&s, 0, sizeof(s));
	snprintf(s.model, sizeof(s.model), "%s", model);
	snprintf(s.profile, sizeof(s.profile), "%s", profile);
	s.count = count;
	return s;
}
