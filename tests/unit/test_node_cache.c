/*
 * test_node_cache.c - the node-token cache (server/auth/node_cache.c):
 * what it answers, and everything that makes it stop answering.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "auth/node_cache.h"
#include "auth/token.h"

static void
digest_of(const char *s, unsigned char *d)
{
	token_digest(s, strlen(s), d);
}

static void
test_answers_what_was_stored(void **state)
{
	struct node_cache *c;
	unsigned char d1[TOKEN_DIGEST_LEN], d2[TOKEN_DIGEST_LEN];
	int64_t node = 0;
	uint64_t src = node_cache_source(true, 0), hits, misses;

	(void)state;
	assert_int_equal(node_cache_create(&c, 64, 60), 0);
	digest_of("gpn_one", d1);
	digest_of("gpn_two", d2);
	assert_false(node_cache_get(c, d1, src, &node));
	node_cache_put(c, d1, 7, src, node_cache_mark(c));
	assert_true(node_cache_get(c, d1, src, &node));
	assert_int_equal(node, 7);
	/* another digest is not answered */
	assert_false(node_cache_get(c, d2, src, &node));
	node_cache_stats(c, &hits, &misses);
	assert_int_equal(hits, 1);
	assert_int_equal(misses, 2);
	node_cache_free(c);
}

static void
test_what_stops_it(void **state)
{
	struct node_cache *c;
	unsigned char d[TOKEN_DIGEST_LEN];
	int64_t node = 0;
	uint64_t up = node_cache_source(true, 0), mark;

	(void)state;
	assert_int_equal(node_cache_create(&c, 64, 60), 0);
	digest_of("gpn_x", d);
	/* the notifier down: source 0 stores and answers nothing */
	assert_int_equal(node_cache_source(false, 5), 0);
	node_cache_put(c, d, 7, 0, node_cache_mark(c));
	assert_false(node_cache_get(c, d, 0, &node));
	assert_false(node_cache_get(c, d, up, &node));
	/* a flush: forgotten */
	node_cache_put(c, d, 7, up, node_cache_mark(c));
	assert_true(node_cache_get(c, d, up, &node));
	node_cache_flush(c);
	assert_false(node_cache_get(c, d, up, &node));
	/* a flush between the mark and the put (a revocation during the read): not stored */
	mark = node_cache_mark(c);
	node_cache_flush(c);
	node_cache_put(c, d, 7, up, mark);
	assert_false(node_cache_get(c, d, up, &node));
	/* stored while connected; after a reconnect (notifications lost) not answered */
	node_cache_put(c, d, 7, up, node_cache_mark(c));
	assert_true(node_cache_get(c, d, up, &node));
	assert_false(node_cache_get(c, d, node_cache_source(true, 1), &node));
	assert_false(node_cache_get(c, d, node_cache_source(false, 1), &node));
	node_cache_free(c);
	/* past its time to live */
	assert_int_equal(node_cache_create(&c, 64, 1), 0);
	node_cache_put(c, d, 7, up, node_cache_mark(c));
	assert_true(node_cache_get(c, d, up, &node));
	nanosleep(&(struct timespec){ 1, 100000000L }, NULL);
	assert_false(node_cache_get(c, d, up, &node));
	node_cache_free(c);
	/* bad sizes refused; NULL answers nothing */
	assert_int_equal(node_cache_create(&c, 2, 60), -1);
	assert_int_equal(node_cache_create(&c, 64, 0), -1);
	assert_false(node_cache_get(NULL, d, up, &node));
	node_cache_flush(NULL);
	node_cache_free(NULL);
}

/* More digests than slots: the newest stay answerable, nothing answers wrongly. */
static void
test_full(void **state)
{
	struct node_cache *c;
	unsigned char d[TOKEN_DIGEST_LEN];
	int64_t node;
	uint64_t up = node_cache_source(true, 3);
	char name[32];
	int answered = 0;

	(void)state;
	assert_int_equal(node_cache_create(&c, 16, 60), 0);
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "gpn_%d", i);
		digest_of(name, d);
		node_cache_put(c, d, i, up, node_cache_mark(c));
	}
	for (int i = 0; i < 200; i++) {
		snprintf(name, sizeof(name), "gpn_%d", i);
		digest_of(name, d);
		node = -1;
		if (node_cache_get(c, d, up, &node)) {
			assert_int_equal(node, i);
			answered++;
		}
	}
	assert_true(answered > 0 && answered <= 16);
	/* the last one stored is there */
	digest_of("gpn_199", d);
	assert_true(node_cache_get(c, d, up, &node));
	node_cache_free(c);
}

/* Forgetting a node: its tokens stop answering, the others stay; a read under way is not stored. */
static void
test_forget_node(void **state)
{
	struct node_cache *c;
	unsigned char d1[TOKEN_DIGEST_LEN], d2[TOKEN_DIGEST_LEN], d3[TOKEN_DIGEST_LEN];
	int64_t node = 0;
	uint64_t up = node_cache_source(true, 0), mark;

	(void)state;
	assert_int_equal(node_cache_create(&c, 64, 60), 0);
	digest_of("gpn_a1", d1);
	digest_of("gpn_a2", d2);
	digest_of("gpn_b", d3);
	node_cache_put(c, d1, 7, up, node_cache_mark(c));
	node_cache_put(c, d2, 7, up, node_cache_mark(c));
	node_cache_put(c, d3, 8, up, node_cache_mark(c));
	mark = node_cache_mark(c);
	node_cache_forget_node(c, 7);
	assert_false(node_cache_get(c, d1, up, &node));
	assert_false(node_cache_get(c, d2, up, &node));
	assert_true(node_cache_get(c, d3, up, &node));
	assert_int_equal(node, 8);
	/* read before the forget, stored after it: dropped (the read may be stale) */
	node_cache_put(c, d1, 7, up, mark);
	assert_false(node_cache_get(c, d1, up, &node));
	/* read again afterwards: answers */
	node_cache_put(c, d1, 7, up, node_cache_mark(c));
	assert_true(node_cache_get(c, d1, up, &node));
	assert_int_equal(node, 7);
	node_cache_forget_node(NULL, 7);
	node_cache_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_answers_what_was_stored),
		cmocka_unit_test(test_what_stops_it),
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_forget_node),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
