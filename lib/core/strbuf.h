/*
 * strbuf.h - a growing text buffer in arena memory (Prometheus pages,
 * CSV): printf-style appends, never truncates.
 */
#ifndef GP_CORE_STRBUF_H
#define GP_CORE_STRBUF_H

#include <stddef.h>

#include "arena.h"

struct strbuf {
	struct arena *arena;
	char *p; /* NUL-terminated text */
	size_t len;
	size_t cap;
};

/* Start an empty buffer of cap bytes (grows as needed) in arena a. */
void strbuf_init(struct strbuf *b, struct arena *a, size_t cap);

/* Append printf-style; the old storage stays in the arena until it is destroyed. */
void strbuf_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/*
 * Levenshtein distance of two short texts (names), case-insensitive for
 * ASCII; (size_t)-1 when either is longer than 64 bytes. For "did you
 * mean" suggestions.
 */
size_t text_edit_distance(const char *a, const char *b);

#endif
