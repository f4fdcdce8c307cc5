/*
 * layout_cache.c - the process-wide table of layout figures (see
 * layout_cache.h): open addressing over a power-of-two array of entry
 * pointers, under one mutex held only to look up or insert (figures are
 * computed outside it, and copied out, so no entry pointer escapes).
 * Entries are never removed before layout_cache_reset.
 */
#include "layout_cache.h"
#include "core/log.h"
#include "domain/placement.h"

#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define LAYOUT_CACHE_SLOTS (2 * LAYOUT_CACHE_MAX) /* a power of two: at most half full */

/*
 * One malloc: the key, then the figures at figures_offset, so that a
 * lookup's comparison reads the entry's first cache line only.
 */
struct layout_entry {
	uint32_t hash;
	bool mig_enabled;
	uint16_t figures_offset;
	const struct gpu_model *model;
	char layout[]; /* the key's text */
};

static const struct layout_figures *
entry_figures(const struct layout_entry *e)
{
	return (const struct layout_figures *)(const void *)((const char *)e + e->figures_offset);
}

static struct {
	pthread_mutex_t lock;
	struct layout_entry **slots; /* LAYOUT_CACHE_SLOTS, allocated on first insert */
	int n;
} cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* FNV-1a over the text, the model's address and the mode. */
static uint32_t
layout_hash(const struct gpu_model *m, bool mig_enabled, const char *layout)
{
	uint32_t h = 2166136261u;
	uintptr_t p = (uintptr_t)m;

	for (const unsigned char *s = (const unsigned char *)layout; *s != '\0'; s++)
		h = (h ^ *s) * 16777619u;
	for (size_t i = 0; i < sizeof(p); i++, p >>= 8)
		h = (h ^ (uint32_t)(p & 0xff)) * 16777619u;
	h = (h ^ (mig_enabled ? 1u : 0u)) * 16777619u;
	/* MurmurHash3's finalizer: FNV's low bits, the ones masked, mix poorly */
	h ^= h >> 16;
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	return h ^ (h >> 16);
}

/* The slot holding the key, or the empty slot where it would go. Lock held. */
static struct layout_entry **
layout_slot(const struct gpu_model *m, bool mig_enabled, const char *layout, uint32_t h)
{
	uint32_t mask = LAYOUT_CACHE_SLOTS - 1;

	for (uint32_t i = h & mask;; i = (i + 1) & mask) {
		struct layout_entry *e = cache.slots[i];

		if (e == NULL ||
		    (e->hash == h && e->model == m && e->mig_enabled == mig_enabled &&
			strcmp(e->layout, layout) == 0))
			return &cache.slots[i];
	}
}

static void
layout_compute(const struct gpu_model *m, bool mig_enabled, const char *layout,
    struct layout_figures *f)
{
	struct placement_gpu *g = &f->cls.g;

	memset(f, 0, sizeof(*f));
	placement_gpu_init(g, m, 0, 0, 0, mig_enabled);
	f->valid = placement_layout_apply(g, layout) == 0;
	f->memory_used = __builtin_popcount(g->used_mask);
	f->stranded = f->valid ? placement_gpu_stranded(g) : 0;
	for (int i = 0; i <= m->nprofiles; i++)
		f->headroom[i] =
		    (uint8_t)placement_gpu_headroom(g, i == 0 ? NULL : &m->profiles[i - 1]);
	placement_class_rank(&f->cls);
}

void
layout_cache_get(const struct gpu_model *m, bool mig_enabled, const char *layout,
    struct layout_figures *out)
{
	uint32_t h = layout_hash(m, mig_enabled, layout);
	struct layout_entry **slot, *e;
	size_t len, off;

	pthread_mutex_lock(&cache.lock);
	if (cache.slots != NULL) {
		slot = layout_slot(m, mig_enabled, layout, h);
		if (*slot != NULL) {
			*out = *entry_figures(*slot);
			pthread_mutex_unlock(&cache.lock);
			return;
		}
	}
	pthread_mutex_unlock(&cache.lock);

	layout_compute(m, mig_enabled, layout, out);
	len = strlen(layout);
	off = (offsetof(struct layout_entry, layout) + len + 1 + _Alignof(struct layout_figures) -
		  1) /
	    _Alignof(struct layout_figures) * _Alignof(struct layout_figures);
	if (off > UINT16_MAX)
		return; /* no such layout text exists; not remembered */
	e = malloc(off + sizeof(*out));
	if (e == NULL)
		return;
	e->model = m;
	e->mig_enabled = mig_enabled;
	e->hash = h;
	e->figures_offset = (uint16_t)off;
	memcpy(e->layout, layout, len + 1);
	memcpy((char *)e + off, out, sizeof(*out));
	pthread_mutex_lock(&cache.lock);
	if (cache.slots == NULL)
		cache.slots = calloc(LAYOUT_CACHE_SLOTS, sizeof(*cache.slots));
	if (cache.slots != NULL && cache.n < LAYOUT_CACHE_MAX) {
		slot = layout_slot(m, mig_enabled, layout, h);
		if (*slot == NULL) { /* another thread may have been first */
			*slot = e;
			cache.n++;
			e = NULL;
		}
	}
	pthread_mutex_unlock(&cache.lock);
	free(e);
}

int
layout_cache_gpu(const struct gpu_model *m, bool mig_enabled, const char *layout, int64_t id,
    int64_t node_id, int index, const char *uuid, struct placement_gpu *g)
{
	struct layout_figures f;

	layout_cache_get(m, mig_enabled, layout, &f);
	if (!f.valid) {
		log_warn(NULL, "gpu layout breaks a hardware rule; not placing on it", "gpu", uuid,
		    "layout", layout);
		return -1;
	}
	*g = f.cls.g;
	g->id = id;
	g->node_id = node_id;
	g->index = index;
	return 0;
}

int
layout_cache_size(void)
{
	int n;

	pthread_mutex_lock(&cache.lock);
	n = cache.n;
	pthread_mutex_unlock(&cache.lock);
	return n;
}

void
layout_cache_reset(void)
{
	pthread_mutex_lock(&cache.lock);
	if (cache.slots != NULL) {
		for (int i = 0; i < LAYOUT_CACHE_SLOTS; i++)
			free(cache.slots[i]);
		free(cache.slots);
	}
	cache.slots = NULL;
	cache.n = 0;
	pthread_mutex_unlock(&cache.lock);
}
