/*
 * arena.h - region allocator for the request and worker lifetimes.
 *
 * Everything allocated from an arena is freed at once by arena_destroy().
 * Foreign objects (PGresult, json_object) register a cleanup with
 * arena_defer() so error paths need no hand-written frees.
 * Allocation failure is fatal (the process cannot serve without memory).
 */
#ifndef GP_CORE_ARENA_H
#define GP_CORE_ARENA_H

#include <stdarg.h>
#include <stddef.h>

struct arena;

typedef void (*arena_cleanup_fn)(void *);

/* Create an empty arena. Never returns NULL. */
struct arena *arena_create(void);

/* Free every block and run the deferred cleanups, newest first. NULL is a no-op. */
void arena_destroy(struct arena *a);

/* Zeroed memory aligned for any type; valid until arena_destroy(). */
void *arena_alloc(struct arena *a, size_t size);

/* Copy of s (NULL gives NULL). */
char *arena_strdup(struct arena *a, const char *s);

/* Copy of the first n bytes of s, NUL-terminated. */
char *arena_strndup(struct arena *a, const char *s, size_t n);

/* printf into arena memory. */
char *arena_printf(struct arena *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
char *arena_vprintf(struct arena *a, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Run fn(p) when the arena is destroyed; ownership of p passes to the arena. */
void arena_defer(struct arena *a, arena_cleanup_fn fn, void *p);

/*
 * Mark the arena as holding secrets (a request with a password or a new
 * token): arena_destroy() then wipes every block with explicit_bzero
 * before freeing it.
 */
void arena_set_sensitive(struct arena *a);

/* Bytes handed out so far (for metrics and tests). */
size_t arena_used(const struct arena *a);

#endif
