/*
 * strbuf.c - arena-backed growing text buffer.
 */
#include <ctype.h>
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void
strbuf_init(struct strbuf *b, struct arena *a, size_t cap)
{
	b->arena = a;
	b->cap = cap > 16 ? cap : 16;
	b->p = arena_alloc(a, b->cap);
	b->len = 0;
}

void
strbuf_printf(struct strbuf *b, const char *fmt, ...)
{
	va_list ap;
	int n;

	for (;;) {
		va_start(ap, fmt);
		n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
		va_end(ap);
		if (n < 0)
			return;
		if ((size_t)n < b->cap - b->len) {
			b->len += (size_t)n;
			return;
		}
		{
			size_t cap = b->cap * 2 + (size_t)n;
			char *np = arena_alloc(b->arena, cap);

			memcpy(np, b->p, b->len);
			b->p = np;
			b->cap = cap;
		}
	}
}

size_t
text_edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b), row[65];

	if (la > 64 || lb > 64)
		return (size_t)-1;
	for (size_t j = 0; j <= lb; j++)
		row[j] = j;
	for (size_t i = 1; i <= la; i++) {
		size_t diag = row[0];

		row[0] = i;
		for (size_t j = 1; j <= lb; j++) {
			size_t up = row[j];
			size_t best = diag +
			    (tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]));

			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}
