/*
 * kube.c - one curl handle to the Kubernetes API (kube.h).
 */
#include "kube.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KUBE_MAX_BODY (64u << 20)
#define KUBE_TIMEOUT_MS 30000L

struct kube {
	CURL *h;
	struct kube_auth auth;
	const volatile bool *abort_flag;
};

struct sink {
	char *p;
	size_t len, cap;
	bool too_big;
};

static size_t
on_write(char *data, size_t size, size_t nmemb, void *arg)
{
	struct sink *s = arg;
	size_t n = size * nmemb;

	if (s->len + n > KUBE_MAX_BODY) {
		s->too_big = true;
		return 0;
	}
	if (s->len + n + 1 > s->cap) {
		size_t cap = s->cap ? s->cap : 4096;
		char *p;

		while (cap < s->len + n + 1)
			cap *= 2;
		p = realloc(s->p, cap);
		if (p == NULL)
			return 0;
		s->p = p;
		s->cap = cap;
	}
	memcpy(s->p + s->len, data, n);
	s->len += n;
	s->p[s->len] = '\0';
	return n;
}

static int
on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	const volatile bool *flag = arg;

	(void)a;
	(void)b;
	(void)c;
	(void)d;
	return flag != NULL && *flag ? 1 : 0;
}

struct kube *
kube_create(const struct kube_auth *auth, char *why, size_t whylen)
{
	struct kube *k = calloc(1, sizeof(*k));

	if (k == NULL || (k->h = curl_easy_init()) == NULL) {
		free(k);
		snprintf(why, whylen, "cannot set up curl");
		return NULL;
	}
	k->auth = *auth;
	/* the PEM blobs are shared with auth: the caller keeps them until kube_destroy */
	return k;
}

void
kube_destroy(struct kube *k)
{
	if (k == NULL)
		return;
	curl_easy_cleanup(k->h);
	memset(k->auth.token, 0, sizeof(k->auth.token));
	free(k);
}

void
kube_set_abort_flag(struct kube *k, const volatile bool *flag)
{
	k->abort_flag = flag;
}

/* The bearer token: inline, or the file's first line (read now: it rotates). */
static int
bearer(const struct kube *k, char *out, size_t outlen)
{
	FILE *f;
	size_t n;

	out[0] = '\0';
	if (k->auth.token[0] != '\0') {
		snprintf(out, outlen, "%s", k->auth.token);
		return 0;
	}
	if (k->auth.token_file[0] == '\0')
		return 0;
	f = fopen(k->auth.token_file, "r");
	if (f == NULL)
		return -1;
	n = fread(out, 1, outlen - 1, f);
	fclose(f);
	out[n] = '\0';
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
		out[--n] = '\0';
	return 0;
}

static void
blob(CURL *h, CURLoption opt, const char *pem)
{
	struct curl_blob b = { .data = (void *)pem, .len = strlen(pem), .flags = CURL_BLOB_COPY };

	curl_easy_setopt(h, opt, &b);
}

int
kube_request(struct kube *k, const char *method, const char *path, const char *content_type,
    const char *body, struct kube_response *out)
{
	char url[4096], tok[8192], auth_line[8300], ct_line[200], errbuf[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdr = NULL;
	struct sink s = { 0 };
	CURL *h = k->h;
	CURLcode rc;

	memset(out, 0, sizeof(*out));
	if (snprintf(url, sizeof(url), "%s%s", k->auth.server, path) >= (int)sizeof(url)) {
		snprintf(out->error, sizeof(out->error), "path too long");
		return -1;
	}
	if (bearer(k, tok, sizeof(tok)) < 0) {
		snprintf(out->error, sizeof(out->error), "cannot read the token file %s",
		    k->auth.token_file);
		return -1;
	}
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, KUBE_TIMEOUT_MS);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(h, CURLOPT_USERAGENT, "gpupool-k8s");
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, (void *)k->abort_flag);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	if (k->auth.ca_data != NULL)
		blob(h, CURLOPT_CAINFO_BLOB, k->auth.ca_data);
	else if (k->auth.ca_file[0] != '\0')
		curl_easy_setopt(h, CURLOPT_CAINFO, k->auth.ca_file);
	if (k->auth.insecure) {
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (k->auth.cert_data != NULL)
		blob(h, CURLOPT_SSLCERT_BLOB, k->auth.cert_data);
	else if (k->auth.cert_file[0] != '\0')
		curl_easy_setopt(h, CURLOPT_SSLCERT, k->auth.cert_file);
	if (k->auth.key_data != NULL)
		blob(h, CURLOPT_SSLKEY_BLOB, k->auth.key_data);
	else if (k->auth.key_file[0] != '\0')
		curl_easy_setopt(h, CURLOPT_SSLKEY, k->auth.key_file);
	hdr = curl_slist_append(hdr, "Accept: application/json");
	if (tok[0] != '\0') {
		snprintf(auth_line, sizeof(auth_line), "Authorization: Bearer %s", tok);
		hdr = curl_slist_append(hdr, auth_line);
		memset(auth_line, 0, sizeof(auth_line));
		memset(tok, 0, sizeof(tok));
	}
	if (body != NULL) {
		snprintf(ct_line, sizeof(ct_line), "Content-Type: %s", content_type);
		hdr = curl_slist_append(hdr, ct_line);
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	}
	if (strcmp(method, "GET") == 0)
		curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
	else
		curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	rc = curl_easy_perform(h);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
	curl_slist_free_all(hdr);
	out->body = s.p != NULL ? s.p : strdup("");
	if (rc != CURLE_OK) {
		snprintf(out->error, sizeof(out->error), "%s",
		    s.too_big       ? "answer too large"
			: errbuf[0] ? errbuf
				    : curl_easy_strerror(rc));
		return -1;
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &out->status);
	out->json = json_tokener_parse(out->body);
	return 0;
}

void
kube_response_free(struct kube_response *r)
{
	free(r->body);
	json_object_put(r->json);
	memset(r, 0, sizeof(*r));
}

const char *
kube_error_text(const struct kube_response *r)
{
	struct json_object *m;

	if (r->status == 0)
		return r->error;
	if (r->json != NULL && json_object_object_get_ex(r->json, "message", &m))
		return json_object_get_string(m);
	return "no Status message";
}
