/*
 * unit_catalog.h - what the domain unit tests share: the built-in GPU
 * catalog as the cmocka group state, and a SpecAndCount literal.
 */
#ifndef GP_TEST_UNIT_CATALOG_H
#define GP_TEST_UNIT_CATALOG_H

#include "domain/spec.h"

/* cmocka group setup: *state becomes the built-in catalog; -1 when it fails to load. */
int unit_catalog_setup(void **state);

/* cmocka group teardown: frees the catalog of unit_catalog_setup. */
int unit_catalog_teardown(void **state);

/* {model, profile, count} as a struct spec_count (texts truncated to their fields). */
struct spec_count unit_spec(const char *model, const char *profile, int count);

#endif
