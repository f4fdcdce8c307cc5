/*
 * arena.c - region allocator: a chain of blocks plus a cleanup list.
 */
#include "arena.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_BLOCK 8192
/*
 * The first block is small: a long-poll waits with its arena (about 400
 * bytes used), and ten thousands of them held 8 KiB each (issue 23).
 */
#define ARENA_FIRST_BLOCK 1024
#define ARENA_ALIGN 16

struct arena_block {
	struct arena_block *next;
	size_t size;
	size_t used;
	_Alignas(ARENA_ALIGN) unsigned char data[]; /* ARENA_ALIGN-aligned, as promised */
};

struct arena_cleanup {
	struct arena_cleanup *next;
	arena_cleanup_fn fn;
	void *p;
};

struct arena {
	struct arena_block *head;
	struct arena_cleanup *cleanups;
	size_t total;
	int sensitive;
};

static void *
xmalloc(size_t n)
{
	void *p = malloc(n);

	if (p == NULL) {
		fputs("{\"level\":\"fatal\",\"msg\":\"out of memory\"}\n", stderr);
		abort();
	}
	return p;
}

struct arena *
arena_create(void)
{
	struct arena *a = xmalloc(sizeof(*a));

	a->head = NULL;
	a->cleanups = NULL;
	a->total = 0;
	a->sensitive = 0;
	return a;
}

void
arena_destroy(struct arena *a)
{
	struct arena_block *b, *bn;
	struct arena_cleanup *c, *cn;

	if (a == NULL)
		return;
	for (c = a->cleanups; c != NULL; c = cn) {
		cn = c->next;
		c->fn(c->p);
	}
	for (b = a->head; b != NULL; b = bn) {
		bn = b->next;
		if (a->sensitive)
			explicit_bzero(b->data, b->used);
		free(b);
	}
	free(a);
}

void *
arena_alloc(struct arena *a, size_t size)
{
	struct arena_block *b = a->head;
	size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
	void *p;

	if (need == 0)
		need = ARENA_ALIGN;
	if (b == NULL || b->size - b->used < need) {
		size_t base = a->head == NULL ? ARENA_FIRST_BLOCK : ARENA_BLOCK;
		size_t bsize = need > ARENA_BLOCK / 2 ? need : need > base ? ARENA_BLOCK : base;

		b = xmalloc(sizeof(*b) + bsize);
		b->size = bsize;
		b->used = 0;
		if (need > ARENA_BLOCK / 2 && a->head != NULL) {
			/* big one-off: keep the current block in front */
			b->next = a->head->next;
			a->head->next = b;
		} else {
			b->next = a->head;
			a->head = b;
		}
	}
	p = b->data + b->used;
	b->used += need;
	a->total += need;
	memset(p, 0, size);
	return p;
}

char *
arena_strndup(struct arena *a, const char *s, size_t n)
{
	char *d;

	if (s == NULL)
		return NULL;
	d = arena_alloc(a, n + 1);
	memcpy(d, s, n);
	d[n] = '\0';
	return d;
}

char *
arena_strdup(struct arena *a, const char *s)
{
	if (s == NULL)
		return NULL;
	return arena_strndup(a, s, strlen(s));
}

char *
arena_vprintf(struct arena *a, const char *fmt, va_list ap)
{
	va_list ap2;
	int n;
	char *d;

	va_copy(ap2, ap);
	n = vsnprintf(NULL, 0, fmt, ap2);
	va_end(ap2);
	if (n < 0)
		return arena_strdup(a, "");
	d = arena_alloc(a, (size_t)n + 1);
	vsnprintf(d, (size_t)n + 1, fmt, ap);
	return d;
}

char *
arena_printf(struct arena *a, const char *fmt, ...)
{
	va_list ap;
	char *d;

	va_start(ap, fmt);
	d = arena_vprintf(a, fmt, ap);
	va_end(ap);
	return d;
}

void
arena_defer(struct arena *a, arena_cleanup_fn fn, void *p)
{
	struct arena_cleanup *c = arena_alloc(a, sizeof(*c));

	c->fn = fn;
	c->p = p;
	c->next = a->cleanups;
	a->cleanups = c;
}

void
arena_set_sensitive(struct arena *a)
{
	a->sensitive = 1;
}

size_t
arena_used(const struct arena *a)
{
	return a->total;
}
