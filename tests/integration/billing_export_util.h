/*
 * billing_export_util.h - shared by the billing export tests: queue an
 * export, wait for it, download it, and compute a file's SHA-256.
 */
#ifndef GP_TEST_BILLING_EXPORT_UTIL_H
#define GP_TEST_BILLING_EXPORT_UTIL_H

#include "billing_seed.h"

#include <openssl/sha.h>
#include <time.h>

static inline void
exp_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* Lower-case hex SHA-256 of len bytes, in fixture memory. */
static inline const char *
exp_sha256(struct fixture *fx, const char *data, size_t len)
{
	unsigned char d[SHA256_DIGEST_LENGTH];
	char hex[2 * SHA256_DIGEST_LENGTH + 1];

	SHA256((const unsigned char *)data, len, d);
	for (int i = 0; i < SHA256_DIGEST_LENGTH; i++)
		snprintf(hex + 2 * i, 3, "%02x", d[i]);
	return fx_str(fx, "%s", hex);
}

/* POST an export (body JSON) as token; returns its id (asserts 202). */
static inline int64_t
exp_create(struct fixture *fx, const char *token, const char *body)
{
	struct gp_client_response *r =
	    fx_request(fx, token, "POST", "/v1/billing/exports", "%s", body);

	assert_status(r, 202);
	assert_json_str(r->json, "state", "queued");
	return fx_json_int(r->json, "id");
}

/* Wait (up to timeout_ms) until export id is done or failed; returns its JSON. */
static inline struct json_object *
exp_wait(struct fixture *fx, int64_t id, int timeout_ms)
{
	const char *path = fx_str(fx, "/v1/billing/exports/%lld", (long long)id);
	struct gp_client_response *r = NULL;

	for (int waited = 0; waited <= timeout_ms; waited += 50) {
		const char *st;

		r = fx_request(fx, fx->admin_token, "GET", path, NULL);
		assert_status(r, 200);
		st = fx_json_str(r->json, "state");
		if (strcmp(st, "done") == 0 || strcmp(st, "failed") == 0)
			return r->json;
		exp_sleep_ms(50);
	}
	fail_msg("export %lld not done after %d ms", (long long)id, timeout_ms);
	return NULL;
}

/* Download export id (asserts 200); the response. */
static inline struct gp_client_response *
exp_download(struct fixture *fx, int64_t id)
{
	struct gp_client_response *r = fx_request(fx, fx->admin_token, "GET",
	    fx_str(fx, "/v1/billing/exports/%lld/download", (long long)id), NULL);

	assert_status(r, 200);
	return r;
}

#endif
