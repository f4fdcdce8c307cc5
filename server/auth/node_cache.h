/*
 * node_cache.h - node tokens already authenticated, by digest, so that an
 * agent's heartbeats, metrics and polls (thousands a second in a large
 * fleet) do not each read node_tokens.
 *
 * Only what cannot be stale is kept. An entry answers while all of these
 * hold, else the token is read again:
 *   - nothing was flushed since it was stored, nor its node forgotten.
 *     Every change of node_tokens (a revocation, a rotation, an enrollment
 *     taking a node over, a node deleted) sends NOTIFY gpupool_tokens with
 *     the row's node id (migrations 0028, 0031; '' for a TRUNCATE), and
 *     each replica's notifier forgets that node (everything for '' or a
 *     payload it cannot read); a revocation on this replica also forgets
 *     at once, after its commit. A node rotating its token in a loop so
 *     empties no other node's entries;
 *   - the caller's `source` is the one the entry was stored with: the
 *     caller passes the notifier's state (node_cache_source), which changes
 *     when its LISTEN connection is lost or restored, and is 0 (nothing
 *     cached, nothing answered) while it is down: notifications sent
 *     meanwhile are lost, so nothing may be trusted;
 *   - it is younger than ttl_s (a bound for whatever the above misses).
 * A lookup that raced a flush is not stored (node_cache_mark before the
 * read, node_cache_put with the mark), as the registry's marks do.
 */
#ifndef GP_AUTH_NODE_CACHE_H
#define GP_AUTH_NODE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

struct node_cache;

/* capacity entries (a power of two is not required), ttl_s seconds. */
int node_cache_create(struct node_cache **out, int capacity, int ttl_s)
    __attribute__((warn_unused_result));
void node_cache_free(struct node_cache *c);

/*
 * The node of digest (TOKEN_DIGEST_LEN bytes), if cached and valid for
 * source (see above; 0 never answers). c NULL: false.
 */
bool node_cache_get(struct node_cache *c, const unsigned char *digest, uint64_t source,
    int64_t *node_id);

/* The flush count now: take it before reading the token. */
uint64_t node_cache_mark(struct node_cache *c);

/* Store digest -> node_id read since mark, unless a flush came in between or source is 0. */
void node_cache_put(struct node_cache *c, const unsigned char *digest, int64_t node_id,
    uint64_t source, uint64_t mark);

/* Forget everything (a token changed somewhere, or notifications were lost). */
void node_cache_flush(struct node_cache *c);

/*
 * Forget node_id's tokens only (one of its node_tokens rows changed: the
 * payload of NOTIFY gpupool_tokens, migration 0031); a lookup of any
 * token under way is not stored either (its mark is stale).
 */
void node_cache_forget_node(struct node_cache *c, int64_t node_id);

/*
 * The source value of a notifier: 0 while it is down, else changing with
 * every reconnect (reconnects counted before the connection is marked up).
 */
uint64_t node_cache_source(bool connected, uint64_t reconnects);

/* Lookups answered from the cache, and those that read the database. */
void node_cache_stats(struct node_cache *c, uint64_t *hits, uint64_t *misses);

#endif
