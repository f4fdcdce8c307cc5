/*
 * log.c - JSON line logger. One fputs per line so lines from worker
 * threads never interleave.
 */
#include "log.h"
#include "timeutil.h"

#include <json-c/json.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static enum log_level min_level = LOG_LEVEL_INFO;

static const char *const level_names[] = { "debug", "info", "warn", "error" };

void
log_set_level(enum log_level level)
{
	min_level = level;
}

int
log_parse_level(const char *name, enum log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcmp(name, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

static void
log_vevent(enum log_level level, const char *request_id, const char *msg, va_list ap)
{
	struct json_object *o;
	const char *key;
	char ts[40];

	if (level < min_level)
		return;
	o = json_object_new_object();
	time_format_rfc3339_ms(time_now_us(), ts, sizeof(ts));
	json_object_object_add(o, "ts", json_object_new_string(ts));
	json_object_object_add(o, "level", json_object_new_string(level_names[level]));
	json_object_object_add(o, "msg", json_object_new_string(msg));
	if (request_id != NULL)
		json_object_object_add(o, "request_id", json_object_new_string(request_id));
	while ((key = va_arg(ap, const char *)) != NULL) {
		const char *val = va_arg(ap, const char *);

		json_object_object_add(o, key, val ? json_object_new_string(val) : NULL);
	}
	{
		const char *line = json_object_to_json_string_ext(o,
		    JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
		size_t n = strlen(line);
		char *buf = malloc(n + 2);

		if (buf != NULL) {
			memcpy(buf, line, n);
			buf[n] = '\n';
			buf[n + 1] = '\0';
			fputs(buf, stderr);
			free(buf);
		}
	}
	json_object_put(o);
}

void
log_event(enum log_level level, const char *request_id, const char *msg, ...)
{
	va_list ap;

	va_start(ap, msg);
	log_vevent(level, request_id, msg, ap);
	va_end(ap);
}

void
fatal(const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	log_event(LOG_LEVEL_ERROR, NULL, buf, (const char *)0);
	exit(1);
}
