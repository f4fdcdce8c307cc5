/*
 * node_cache.c - node tokens already authenticated (node_cache.h): an
 * open-addressing table of digests under one mutex, probed at most
 * NODE_CACHE_PROBE slots from the digest's own; a full run replaces its
 * oldest entry. A flush only bumps the epoch: older entries stop
 * answering and are overwritten as new ones come; forgetting a node sets
 * its entries' epoch to 0 (one pass over the table). Either bumps
 * `changes`, which a lookup's mark must still equal for its put.
 */
#include "node_cache.h"
#include "token.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/timeutil.h"

#define NODE_CACHE_PROBE 8

struct entry {
	unsigned char digest[TOKEN_DIGEST_LEN];
	int64_t node_id;
	uint64_t source;
	uint64_t epoch;
	int64_t stored_us; /* time_mono_us(); 0: empty */
};

struct node_cache {
	pthread_mutex_t lock;
	struct entry *slots;
	size_t n;
	int64_t ttl_us;
	uint64_t epoch;   /* flushes so far: older entries do not answer */
	uint64_t changes; /* flushes and forgotten nodes so far (node_cache_mark) */
	atomic_uint_fast64_t hits, misses;
};

int
node_cache_create(struct node_cache **out, int capacity, int ttl_s)
{
	struct node_cache *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (c == NULL || capacity < NODE_CACHE_PROBE || ttl_s < 1)
		goto fail;
	c->slots = calloc((size_t)capacity, sizeof(*c->slots));
	if (c->slots == NULL)
		goto fail;
	c->n = (size_t)capacity;
	c->ttl_us = (int64_t)ttl_s * 1000000;
	c->epoch = 1;
	c->changes = 1;
	pthread_mutex_init(&c->lock, NULL);
	atomic_init(&c->hits, 0);
	atomic_init(&c->misses, 0);
	*out = c;
	return 0;
fail:
	if (c != NULL)
		free(c->slots);
	free(c);
	return -1;
}

void
node_cache_free(struct node_cache *c)
{
	if (c == NULL)
		return;
	token_wipe(c->slots, c->n * sizeof(*c->slots));
	free(c->slots);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* The digest's first slot (a digest is uniformly random already). */
static size_t
home(const struct node_cache *c, const unsigned char *digest)
{
	uint64_t h;

	memcpy(&h, digest, sizeof(h));
	return (size_t)(h % c->n);
}

bool
node_cache_get(struct node_cache *c, const unsigned char *digest, uint64_t source, int64_t *node_id)
{
	bool hit = false;

	if (c == NULL)
		return false;
	if (source != 0) {
		int64_t now = time_mono_us();
		size_t i = home(c, digest);

		pthread_mutex_lock(&c->lock);
		for (int k = 0; k < NODE_CACHE_PROBE; k++, i = (i + 1) % c->n) {
			struct entry *e = &c->slots[i];

			if (e->stored_us == 0 || !token_digest_equal(e->digest, digest))
				continue;
			if (e->epoch == c->epoch && e->source == source &&
			    now - e->stored_us < c->ttl_us) {
				*node_id = e->node_id;
				hit = true;
			}
			break;
		}
		pthread_mutex_unlock(&c->lock);
	}
	atomic_fetch_add(hit ? &c->hits : &c->misses, 1);
	return hit;
}

uint64_t
node_cache_mark(struct node_cache *c)
{
	uint64_t m;

	if (c == NULL)
		return 0;
	pthread_mutex_lock(&c->lock);
	m = c->changes;
	pthread_mutex_unlock(&c->lock);
	return m;
}

void
node_cache_put(struct node_cache *c, const unsigned char *digest, int64_t node_id, uint64_t source,
    uint64_t mark)
{
	size_t i, at;
	int64_t oldest = INT64_MAX;

	if (c == NULL || source == 0)
		return;
	i = at = home(c, digest);
	pthread_mutex_lock(&c->lock);
	if (mark != c->changes) {
		/* a token changed while it was read: the answer may be stale */
		pthread_mutex_unlock(&c->lock);
		return;
	}
	for (int k = 0; k < NODE_CACHE_PROBE; k++, i = (i + 1) % c->n) {
		struct entry *e = &c->slots[i];

		if (e->stored_us == 0 || e->epoch != c->epoch ||
		    token_digest_equal(e->digest, digest)) {
			at = i;
			break;
		}
		if (e->stored_us < oldest) {
			oldest = e->stored_us;
			at = i;
		}
	}
	memcpy(c->slots[at].digest, digest, TOKEN_DIGEST_LEN);
	c->slots[at].node_id = node_id;
	c->slots[at].source = source;
	c->slots[at].epoch = c->epoch;
	c->slots[at].stored_us = time_mono_us();
	pthread_mutex_unlock(&c->lock);
}

void
node_cache_flush(struct node_cache *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	c->epoch++;
	c->changes++;
	pthread_mutex_unlock(&c->lock);
}

void
node_cache_forget_node(struct node_cache *c, int64_t node_id)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&c->lock);
	for (size_t i = 0; i < c->n; i++)
		if (c->slots[i].stored_us != 0 && c->slots[i].node_id == node_id)
			c->slots[i].epoch = 0; /* never answers again, reused first */
	c->changes++;
	pthread_mutex_unlock(&c->lock);
}

uint64_t
node_cache_source(bool connected, uint64_t reconnects)
{
	return connected ? reconnects + 1 : 0;
}

void
node_cache_stats(struct node_cache *c, uint64_t *hits, uint64_t *misses)
{
	*hits = c != NULL ? atomic_load(&c->hits) : 0;
	*misses = c != NULL ? atomic_load(&c->misses) : 0;
}
