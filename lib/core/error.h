/*
 * error.h - recoverable errors carried up to the HTTP layer.
 *
 * The lowest layer that knows the cause fills a caller-supplied
 * struct gp_error with the HTTP status, a stable API code (see
 * docs/design.md section 6), a human message and, for validation failures,
 * the field paths that failed.
 */
#ifndef GP_CORE_ERROR_H
#define GP_CORE_ERROR_H

#include <stdbool.h>

#define GP_ERROR_MAX_FIELDS 16

struct gp_field_error {
	char field[128];
	char message[192];
};

struct gp_error {
	int status;        /* HTTP status, 0 when unset */
	char code[48];     /* stable machine code: "validation_failed" ... */
	char message[512]; /* detail, lower case, no trailing period */
	int nfields;
	struct gp_field_error fields[GP_ERROR_MAX_FIELDS];
	int retry_after; /* seconds for 429/503, 0 when unset */
};

/* Reset err to "no error". */
void gp_error_clear(struct gp_error *err);

/* Fill status, code and a printf-style message; always returns -1 so
 * callers can write "return gp_error_set(...)". err may be NULL. */
int gp_error_set(struct gp_error *err, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Append one failing field path to a validation error (422,
 * "validation_failed" unless err already has a status); returns -1. */
int gp_error_field(struct gp_error *err, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when err carries an error. */
bool gp_error_isset(const struct gp_error *err);

#endif
