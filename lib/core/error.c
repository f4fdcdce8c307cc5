/*
 * error.c - filling struct gp_error.
 */
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void
gp_error_clear(struct gp_error *err)
{
	if (err != NULL)
		memset(err, 0, sizeof(*err));
}

int
gp_error_set(struct gp_error *err, int status, const char *code, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return -1;
	err->status = status;
	snprintf(err->code, sizeof(err->code), "%s", code);
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return -1;
}

int
gp_error_field(struct gp_error *err, const char *field, const char *fmt, ...)
{
	struct gp_field_error *fe;
	va_list ap;

	if (err == NULL)
		return -1;
	if (err->status == 0) {
		err->status = 422;
		snprintf(err->code, sizeof(err->code), "validation_failed");
		snprintf(err->message, sizeof(err->message), "the request has invalid fields");
	}
	if (err->nfields >= GP_ERROR_MAX_FIELDS)
		return -1;
	fe = &err->fields[err->nfields++];
	snprintf(fe->field, sizeof(fe->field), "%s", field);
	va_start(ap, fmt);
	vsnprintf(fe->message, sizeof(fe->message), fmt, ap);
	va_end(ap);
	return -1;
}

bool
gp_error_isset(const struct gp_error *err)
{
	return err != NULL && err->status != 0;
}
