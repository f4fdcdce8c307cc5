/*
 * strbuf.c - arena-backed growing text buffer.
 */
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
