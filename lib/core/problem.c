/*
 * problem.c - problem codes and their statuses (see problem.h).
 */
#include "core/problem.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static const struct {
	const char *code;
	int status;
} problems[] = {
	[GP_PROBLEM_MALFORMED_JSON] = { "malformed_json", 400 },
	[GP_PROBLEM_UNAUTHORIZED] = { "unauthorized", 401 },
	[GP_PROBLEM_INVALID_CREDENTIALS] = { "invalid_credentials", 401 },
	[GP_PROBLEM_FORBIDDEN] = { "forbidden", 403 },
	[GP_PROBLEM_NOT_FOUND] = { "not_found", 404 },
	[GP_PROBLEM_METHOD_NOT_ALLOWED] = { "method_not_allowed", 405 },
	[GP_PROBLEM_CONFLICT] = { "conflict", 409 },
	[GP_PROBLEM_INSUFFICIENT_CAPACITY] = { "insufficient_capacity", 409 },
	[GP_PROBLEM_IDEMPOTENCY_CONFLICT] = { "idempotency_conflict", 409 },
	[GP_PROBLEM_PRECONDITION_FAILED] = { "precondition_failed", 412 },
	[GP_PROBLEM_PAYLOAD_TOO_LARGE] = { "payload_too_large", 413 },
	[GP_PROBLEM_UNSUPPORTED_MEDIA] = { "unsupported_media_type", 415 },
	[GP_PROBLEM_VALIDATION_FAILED] = { "validation_failed", 422 },
	[GP_PROBLEM_QUOTA_EXCEEDED] = { "quota_exceeded", 422 },
	[GP_PROBLEM_IDEMPOTENCY_MISMATCH] = { "idempotency_mismatch", 422 },
	[GP_PROBLEM_RATE_LIMITED] = { "rate_limited", 429 },
	[GP_PROBLEM_INTERNAL] = { "internal", 500 },
	[GP_PROBLEM_UNAVAILABLE] = { "database_unavailable", 503 },
	[GP_PROBLEM_CONTENTION] = { "contention", 503 },
	[GP_PROBLEM_TIMEOUT] = { "timeout", 503 },
	[GP_PROBLEM_PERIOD_CLOSED] = { "period_closed", 409 },
	[GP_PROBLEM_PERIOD_NOT_ENDED] = { "period_not_ended", 409 },
	[GP_PROBLEM_RATE_IN_EFFECT] = { "rate_in_effect", 409 },
};

#define NPROBLEMS ((int)(sizeof(problems) / sizeof(problems[0])))

const char *
gp_problem_code(enum gp_problem p)
{
	return (int)p >= 0 && (int)p < NPROBLEMS ? problems[p].code : "internal";
}

int
gp_problem_status(enum gp_problem p)
{
	return (int)p >= 0 && (int)p < NPROBLEMS ? problems[p].status : 500;
}

int
gp_problem_parse(const char *code, enum gp_problem *out)
{
	if (code == NULL)
		return -1;
	for (int i = 0; i < NPROBLEMS; i++) {
		if (strcmp(problems[i].code, code) == 0) {
			*out = (enum gp_problem)i;
			return 0;
		}
	}
	return -1;
}

int
gp_problem_set(struct gp_error *err, enum gp_problem p, const char *fmt, ...)
{
	char msg[sizeof(err->message)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return gp_error_set(err, gp_problem_status(p), gp_problem_code(p), "%s", msg);
}

bool
gp_error_is(const struct gp_error *err, enum gp_problem p)
{
	return gp_error_isset(err) && strcmp(err->code, gp_problem_code(p)) == 0;
}
