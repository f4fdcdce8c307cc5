/*
 * test_digest.c - lib/crypto against known vectors: SHA-256 of "" and
 * "abc" (FIPS 180-2), one-shot and streamed in pieces; HMAC-SHA256 of
 * RFC 4231 test case 2, raw and hex; hex encoding and constant-time
 * equality.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "crypto/digest.h"

#define SHA_EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SHA_ABC "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
/* RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?" */
#define HMAC_TC2 "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"

static void
test_sha256(void **state)
{
	char hex[DIGEST_SHA256_HEX_LEN];
	unsigned char md[DIGEST_SHA256_LEN];

	(void)state;
	digest_sha256_hex("", 0, hex);
	assert_string_equal(hex, SHA_EMPTY);
	digest_sha256_hex("abc", 3, hex);
	assert_string_equal(hex, SHA_ABC);
	digest_sha256("abc", 3, md);
	assert_int_equal(md[0], 0xba);
	assert_int_equal(md[31], 0xad);
}

static void
test_sha256_stream(void **state)
{
	char hex[DIGEST_SHA256_HEX_LEN];
	struct digest_sha256 *c;

	(void)state;
	c = digest_sha256_new();
	assert_non_null(c);
	digest_sha256_final(c, hex);
	assert_string_equal(hex, SHA_EMPTY);

	c = digest_sha256_new();
	assert_non_null(c);
	digest_sha256_update(c, "a", 1);
	digest_sha256_update(c, "", 0);
	digest_sha256_update(c, "bc", 2);
	digest_sha256_final(c, hex);
	assert_string_equal(hex, SHA_ABC);

	digest_sha256_free(NULL);
	c = digest_sha256_new();
	assert_non_null(c);
	digest_sha256_update(c, "abandoned", 9);
	digest_sha256_free(c);
}

static void
test_hmac_rfc4231_tc2(void **state)
{
	static const char key[] = "Jefe", msg[] = "what do ya want for nothing?";
	char hex[DIGEST_SHA256_HEX_LEN], raw_hex[DIGEST_SHA256_HEX_LEN];
	unsigned char md[DIGEST_SHA256_LEN];

	(void)state;
	digest_hmac_sha256_hex(key, strlen(key), msg, strlen(msg), hex);
	assert_string_equal(hex, HMAC_TC2);
	assert_int_equal(digest_hmac_sha256(key, strlen(key), msg, strlen(msg), md), 0);
	digest_hex(md, sizeof(md), raw_hex);
	assert_string_equal(raw_hex, HMAC_TC2);
}

static void
test_hex_equal_cleanse(void **state)
{
	static const unsigned char b[] = { 0x00, 0x0f, 0xa5, 0xff };
	unsigned char s[4] = { 1, 2, 3, 4 };
	char hex[9];

	(void)state;
	digest_hex(b, sizeof(b), hex);
	assert_string_equal(hex, "000fa5ff");
	digest_hex(b, 0, hex);
	assert_string_equal(hex, "");
	assert_true(digest_equal("abcd", "abcd", 4));
	assert_false(digest_equal("abcd", "abce", 4));
	digest_cleanse(s, sizeof(s));
	assert_memory_equal(s, "\0\0\0\0", 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256),
		cmocka_unit_test(test_sha256_stream),
		cmocka_unit_test(test_hmac_rfc4231_tc2),
		cmocka_unit_test(test_hex_equal_cleanse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
