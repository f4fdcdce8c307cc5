/*
 * problem.h - the problem codes of the API as an enum. A code is text
 * only in the problem document a client reads (struct gp_error's code,
 * written by gp_problem_set); code that decides on an error compares
 * with gp_error_is, not with strcmp. Each code has the one HTTP status
 * it is answered with.
 */
#ifndef GP_CORE_PROBLEM_H
#define GP_CORE_PROBLEM_H

#include <stdbool.h>

#include "core/error.h"

enum gp_problem {
	GP_PROBLEM_MALFORMED_JSON,        /* 400 */
	GP_PROBLEM_UNAUTHORIZED,          /* 401 */
	GP_PROBLEM_INVALID_CREDENTIALS,   /* 401 */
	GP_PROBLEM_FORBIDDEN,             /* 403 */
	GP_PROBLEM_NOT_FOUND,             /* 404 */
	GP_PROBLEM_METHOD_NOT_ALLOWED,    /* 405 */
	GP_PROBLEM_CONFLICT,              /* 409 */
	GP_PROBLEM_INSUFFICIENT_CAPACITY, /* 409 */
	GP_PROBLEM_IDEMPOTENCY_CONFLICT,  /* 409 */
	GP_PROBLEM_PRECONDITION_FAILED,   /* 412 */
	GP_PROBLEM_PAYLOAD_TOO_LARGE,     /* 413 */
	GP_PROBLEM_UNSUPPORTED_MEDIA,     /* 415 */
	GP_PROBLEM_VALIDATION_FAILED,     /* 422 */
	GP_PROBLEM_QUOTA_EXCEEDED,        /* 422 */
	GP_PROBLEM_IDEMPOTENCY_MISMATCH,  /* 422 */
	GP_PROBLEM_RATE_LIMITED,          /* 429 */
	GP_PROBLEM_INTERNAL,              /* 500 */
	GP_PROBLEM_UNAVAILABLE,           /* 503 database_unavailable */
	GP_PROBLEM_CONTENTION,            /* 503 */
	GP_PROBLEM_TIMEOUT,               /* 503 */
	GP_PROBLEM_PERIOD_CLOSED,         /* 409 billing: the period is closed */
	GP_PROBLEM_PERIOD_NOT_ENDED,      /* 409 billing: month end + grace not reached */
	GP_PROBLEM_RATE_IN_EFFECT,        /* 409 billing: would change billed hours */
};

/* The code as the problem document spells it, and its HTTP status. */
const char *gp_problem_code(enum gp_problem p);
int gp_problem_status(enum gp_problem p);

/* The problem of a code; -1 when the code is not one of the enum's. */
int gp_problem_parse(const char *code, enum gp_problem *out);

/* Fill err with problem p (its status and code) and a printf-style message; returns -1. */
int gp_problem_set(struct gp_error *err, enum gp_problem p, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* True when err carries problem p. */
bool gp_error_is(const struct gp_error *err, enum gp_problem p);

#endif
