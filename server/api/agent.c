/*
 * agent.c - node agents (docs/agent.md): enrollment tokens (operators),
 * enrollment, the node token's own routes (under /v1/agent: desired state by
 * long-poll, status, heartbeat, token rotation), revoking a node's token
 * and the mig-parted view of a node's layout. The node of an agent
 * request always comes from its token (req->principal.node_id). The
 * handlers parse, authorize, call one entry of service/agent_service.h
 * and reply; the status report is parsed in agent_status.c.
 */
#include "agent.h"
#include "dispatch.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <json-c/json.h>
#include <netdb.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "auth/node_cache.h"
#include "auth/token.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "core/timeutil.h"
#include "crypto/digest.h"
#include "db/db_agent.h"
#include "domain/callback.h"
#include "domain/catalog.h"
#include "service/agent_service.h"
#include "workers/heartbeat_queue.h"

#define ENROLL_TTL_DEFAULT_S 3600
#define ENROLL_TTL_MAX_S (7 * 86400)
#define AGENT_WAIT_MAX_S 60
#define AGENT_CALLBACK_ADDRS 16 /* addresses of a callback host name checked at most */

/* The caller, for the workflows' audit rows. */
static struct service_actor
request_actor(const struct request *req)
{
	struct service_actor a = { req->principal.user_id, req->principal.username,
		req->request_id };

	return a;
}

/* ---- enrollment tokens (operators) ---- */

/* A node name as nodes.name allows it. */
static bool
node_name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n > 253 || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
		return false;
	for (; *s; s++)
		if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) || *s == '-' ||
			*s == '.'))
			return false;
	return true;
}

int
api_enroll_tokens_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body = NULL, *o;
	struct enroll_token_new t;
	struct service_actor who = request_actor(req);
	const char *json = NULL;
	struct jfields f;
	char token[TOKEN_MAX_LEN];
	unsigned char digest[TOKEN_DIGEST_LEN];
	int64_t ttl = ENROLL_TTL_DEFAULT_S;
	int rc = -1;

	arena_set_sensitive(req->arena);
	memset(&t, 0, sizeof(t));
	t.cluster = req->params[0];
	if (req->body_len > 0) {
		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		jf_int(&f, "expires_in_seconds", false, 60, ENROLL_TTL_MAX_S, &ttl, NULL);
		jf_string(&f, "node_name", false, 253, &t.node_name);
		jf_bool(&f, "adopt_manual", false, &t.adopt_manual, NULL);
		if (jf_finish(&f) < 0)
			return -1;
		if (t.node_name != NULL && !node_name_valid(t.node_name))
			return gp_error_field(err, "node_name",
			    "must be a node name: lower-case letters, digits, '-' and '.'");
		if (t.adopt_manual && t.node_name == NULL)
			return gp_error_field(err, "adopt_manual",
			    "needs node_name: a token adopts only the node it names");
	}
	if (token_generate("gpe", token, sizeof(token)) < 0)
		return gp_error_set(err, 500, "internal", "could not generate a token");
	token_digest(token, strlen(token), digest);
	t.digest = digest;
	t.prefix = arena_strndup(req->arena, token, 8);
	t.ttl_s = (int)ttl;
	if (service_enroll_token_create(db_thread(), req->arena, &who, &t, &json, err) < 0)
		goto out;
	o = json_tokener_parse(json);
	json_add_str(o, "token", token);
	response_json(req, res, 201, o);
	response_header(res, "Cache-Control", "no-store");
	rc = 0;
out:
	token_wipe(token, sizeof(token));
	return rc;
}

int
api_enroll_tokens_list(struct request *req, struct response *res, struct gp_error *err)
{
	const char *json = NULL;
	struct json_object *o;

	if (service_enroll_tokens_list(db_thread(), req->arena, req->params[0], &json, err) < 0)
		return -1;
	o = json_object_new_object();
	json_object_object_add(o, "items", json_tokener_parse(json));
	json_object_object_add(o, "next_cursor", NULL);
	response_json(req, res, 200, o);
	return 0;
}

int
api_enroll_tokens_delete(struct request *req, struct response *res, struct gp_error *err)
{
	struct service_actor who = request_actor(req);
	int64_t id = 0;

	if (api_param_id(req, 1, &id, err) < 0 ||
	    service_enroll_token_revoke(db_thread(), req->arena, &who, req->params[0], id, err) < 0)
		return -1;
	response_empty(res, 204);
	return 0;
}

/* ---- enrollment (the agent, with an enrollment token) ---- */

bool
agent_gpu_uuid_valid(const char *s)
{
	/* GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, lower-case hex */
	static const char pat[] = "GPU-........-....-....-....-............";

	if (strlen(s) != sizeof(pat) - 1)
		return false;
	for (size_t i = 0; i < sizeof(pat) - 1; i++) {
		if (pat[i] == '.') {
			if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
				return false;
		} else if (s[i] != pat[i]) {
			return false;
		}
	}
	return true;
}

bool
agent_printable(const char *s)
{
	for (; *s; s++)
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return false;
	return true;
}

/* One instance of a discovered GPU: a checked MIG instance, or NULL (warning). */
static struct json_object *
enroll_instance(struct request *req, struct json_object *in, const char *path,
    const struct gpu_model *m, bool mig, struct json_object *warnings, struct gp_error *err)
{
	struct jfields f;
	const char *profile = NULL, *uuid = NULL;
	int64_t start = -1, size = -1;
	const struct mig_profile *p;
	struct json_object *o;

	if (!json_object_is_type(in, json_type_object)) {
		gp_error_field(err, path, "must be an object");
		return NULL;
	}
	jf_init(&f, req->arena, in, path, err);
	jf_string(&f, "profile", true, 32, &profile);
	jf_int(&f, "start", true, 0, 7, &start, NULL);
	jf_int(&f, "size", true, 1, 8, &size, NULL);
	jf_string(&f, "uuid", false, 100, &uuid);
	if (jf_finish(&f) < 0)
		return NULL;
	if (strcmp(profile, "full") == 0)
		return NULL; /* a whole GPU is the agent's own bookkeeping */
	p = (m != NULL && mig) ? catalog_profile(m, profile) : NULL;
	if (p == NULL || !catalog_profile_allows(p, (int)start) || p->memory_slices != size) {
		json_object_array_add(warnings,
		    json_object_new_string(arena_printf(req->arena,
			"%s: %s@%lld is not a placement of this GPU: not recorded", path, profile,
			(long long)start)));
		return NULL;
	}
	o = json_object_new_object();
	json_add_str(o, "profile", profile);
	json_add_int(o, "start", start);
	json_add_int(o, "size", size);
	json_add_str(o, "uuid", uuid);
	return o;
}

/* One discovered GPU, checked against the catalog; NULL when skipped. */
static struct json_object *
enroll_gpu(struct request *req, struct json_object *in, const char *path,
    struct json_object *warnings, struct gp_error *err)
{
	const struct catalog *cat = api_app(req)->catalog;
	struct jfields f;
	const char *uuid = NULL, *product = NULL, *pci = NULL;
	int64_t index = -1, memory = 0;
	bool mig = false;
	struct json_object *insts = NULL, *o, *out;
	const struct gpu_model *m = NULL;
	int before = err->nfields;

	if (!json_object_is_type(in, json_type_object)) {
		gp_error_field(err, path, "must be an object");
		return NULL;
	}
	jf_init(&f, req->arena, in, path, err);
	jf_string(&f, "uuid", true, 64, &uuid);
	jf_int(&f, "index", true, 0, 15, &index, NULL);
	jf_string(&f, "product_name", true, 128, &product);
	jf_string(&f, "pci_device_id", false, 32, &pci);
	jf_int(&f, "memory_mib", false, 1, 1 << 24, &memory, NULL);
	jf_bool(&f, "mig_enabled", false, &mig, NULL);
	jf_array(&f, "instances", false, &insts);
	if (jf_finish(&f) < 0 && err->nfields > before)
		return NULL;
	if (!agent_gpu_uuid_valid(uuid)) {
		gp_error_field(err, jf_path(&f, "uuid"), "must be GPU-<uuid> in lower-case hex");
		return NULL;
	}
	m = catalog_model_by_product(cat, product);
	if (m == NULL && pci != NULL)
		m = catalog_model_by_pci_id(cat, pci);
	if (m == NULL) {
		json_object_array_add(warnings,
		    json_object_new_string(arena_printf(req->arena,
			"%s: unknown GPU model \"%s\" (PCI id %s): not registered; add it to the "
			"GPU catalog",
			path, agent_printable(product) ? product : "?",
			pci && agent_printable(pci) ? pci : "?")));
		return NULL;
	}
	if (mig && !m->mig_capable) {
		json_object_array_add(warnings,
		    json_object_new_string(arena_printf(req->arena,
			"%s: %s has no MIG; recorded with MIG off", path, m->id)));
		mig = false;
	}
	out = json_object_new_object();
	json_add_str(out, "uuid", uuid);
	json_add_int(out, "index", index);
	json_add_str(out, "model", m->id);
	json_add_int(out, "memory_mib", memory > 0 ? memory : m->memory_mib);
	json_add_bool(out, "mig_enabled", mig);
	o = json_object_new_array();
	if (insts != NULL) {
		if (json_object_array_length(insts) > AGENT_MAX_INSTANCES) {
			gp_error_field(err, jf_path(&f, "instances"), "at most %d instances",
			    AGENT_MAX_INSTANCES);
			json_object_put(o);
			json_object_put(out);
			return NULL;
		}
		for (size_t i = 0; i < json_object_array_length(insts); i++) {
			struct json_object *io =
			    enroll_instance(req, json_object_array_get_idx(insts, i),
				arena_printf(req->arena, "%s.instances[%zu]", path, i), m, mig,
				warnings, err);

			if (io != NULL)
				json_object_array_add(o, io);
		}
	}
	json_object_object_add(out, "instances", o);
	return out;
}

static bool
callback_url_valid(const char *s)
{
	if (strncmp(s, "http://", 7) != 0 && strncmp(s, "https://", 8) != 0)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s <= 0x20 || *s == 0x7f)
			return false;
	return true;
}

/*
 * May the server push to this callback URL (GPUPOOL_AGENT_CALLBACK_ALLOW)?
 * Its host must be the enrolling peer's own address or listed; a host
 * name must resolve only to such addresses (or be listed by name).
 * NULL when allowed, else why not.
 */
static const char *
callback_refusal(struct request *req, const char *url)
{
	const char *allow = api_app(req)->agent_callback_allow;
	struct callback_addr peer, addr;
	bool have_peer = req->client_ip != NULL && callback_parse_addr(req->client_ip, &peer);
	char host[256];
	struct addrinfo hints, *res = NULL;
	enum callback_verdict v = CALLBACK_ALLOWED;
	int n = 0;

	if (callback_url_host(url, host, sizeof(host)) < 0)
		return "must name a host and no user information";
	if (callback_parse_addr(host, &addr))
		v = callback_check_addr(allow, &addr, have_peer ? &peer : NULL);
	else if (callback_host_listed(allow, host))
		return NULL;
	else {
		memset(&hints, 0, sizeof(hints));
		hints.ai_family = AF_UNSPEC;
		hints.ai_socktype = SOCK_STREAM;
		if (getaddrinfo(host, NULL, &hints, &res) != 0 || res == NULL)
			return "its host does not resolve";
		for (struct addrinfo *ai = res;
		     ai != NULL && v == CALLBACK_ALLOWED && n < AGENT_CALLBACK_ADDRS;
		     ai = ai->ai_next, n++) {
			char text[INET6_ADDRSTRLEN] = "";

			if (ai->ai_family == AF_INET)
				inet_ntop(AF_INET,
				    &((const struct sockaddr_in *)(const void *)ai->ai_addr)
					 ->sin_addr,
				    text, sizeof(text));
			else if (ai->ai_family == AF_INET6)
				inet_ntop(AF_INET6,
				    &((const struct sockaddr_in6 *)(const void *)ai->ai_addr)
					 ->sin6_addr,
				    text, sizeof(text));
			if (!callback_parse_addr(text, &addr))
				v = CALLBACK_NOT_LISTED;
			else
				v = callback_check_addr(allow, &addr, have_peer ? &peer : NULL);
		}
		freeaddrinfo(res);
	}
	if (v == CALLBACK_RESTRICTED)
		return "is a link-local, metadata or unspecified address: list it explicitly in "
		       "GPUPOOL_AGENT_CALLBACK_ALLOW to allow it";
	if (v == CALLBACK_NOT_LISTED)
		return "is not the enrolling agent's own address nor listed in "
		       "GPUPOOL_AGENT_CALLBACK_ALLOW";
	return NULL;
}

int
api_agent_enroll(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *gpus = NULL, *clean, *warnings, *o;
	struct jfields f;
	struct agent_enrollment e;
	struct service_actor who = request_actor(req);
	const char *etoken = NULL, *node_json = NULL;
	int64_t node_id = 0;
	char node_token[TOKEN_MAX_LEN];
	unsigned char edigest[TOKEN_DIGEST_LEN], ndigest[TOKEN_DIGEST_LEN], secret[32];
	char secret_hex[65];
	int64_t cpu = -1, mem = -1;
	bool seen[16] = { false };
	int rc = -1;

	arena_set_sensitive(req->arena);
	memset(&e, 0, sizeof(e));
	memset(node_token, 0, sizeof(node_token));
	memset(secret_hex, 0, sizeof(secret_hex));
	if (api_body(req, &body, err) < 0)
		return -1;
	warnings = json_own(req->arena, json_object_new_array());
	clean = json_own(req->arena, json_object_new_array());
	jf_init(&f, req->arena, body, "", err);
	jf_string(&f, "enrollment_token", true, TOKEN_MAX_LEN, &etoken);
	jf_string(&f, "node_name", true, 253, &e.node_name);
	jf_string(&f, "hostname", true, 253, &e.hostname);
	jf_string(&f, "callback_url", false, 500, &e.callback_url);
	jf_string(&f, "agent_version", false, 64, &e.agent_version);
	jf_int(&f, "cpu_millicores", false, 0, INT64_C(1) << 40, &cpu, NULL);
	jf_int(&f, "memory_bytes", false, 0, INT64_C(1) << 56, &mem, NULL);
	jf_array(&f, "gpus", true, &gpus);
	jf_finish(&f);
	if (e.callback_url != NULL && !callback_url_valid(e.callback_url))
		gp_error_field(err, "callback_url", "must be an http:// or https:// URL");
	else if (e.callback_url != NULL) {
		const char *why = callback_refusal(req, e.callback_url);

		if (why != NULL)
			gp_error_field(err, "callback_url", "%s", why);
	}
	if (e.hostname != NULL && (e.hostname[0] == '\0' || !agent_printable(e.hostname)))
		gp_error_field(err, "hostname", "must be 1-253 printable characters");
	if (e.agent_version != NULL && !agent_printable(e.agent_version))
		gp_error_field(err, "agent_version", "must be printable");
	if (gpus != NULL && json_object_array_length(gpus) > AGENT_MAX_GPUS)
		gp_error_field(err, "gpus", "at most %d GPUs", AGENT_MAX_GPUS);
	else if (gpus != NULL)
		for (size_t i = 0; i < json_object_array_length(gpus); i++) {
			const char *path = arena_printf(req->arena, "gpus[%zu]", i);
			struct json_object *g = enroll_gpu(req, json_object_array_get_idx(gpus, i),
			    path, warnings, err);
			struct json_object *idx;

			if (g == NULL)
				continue;
			json_object_object_get_ex(g, "index", &idx);
			if (seen[json_object_get_int(idx)])
				gp_error_field(err, arena_printf(req->arena, "%s.index", path),
				    "two GPUs with index %d", json_object_get_int(idx));
			seen[json_object_get_int(idx)] = true;
			json_object_array_add(clean, g);
		}
	if (gp_error_isset(err) || err->nfields > 0) {
		if (!gp_error_isset(err))
			gp_error_set(err, 422, "validation_failed", "the enrollment is not valid");
		return -1;
	}
	e.cpu_millicores = cpu;
	e.memory_bytes = mem;
	e.gpus_json = json_to_arena(req->arena, clean, NULL);
	token_digest(etoken, strlen(etoken), edigest);
	if (token_generate("gpn", node_token, sizeof(node_token)) < 0 ||
	    token_random_bytes(secret, sizeof(secret)) < 0) {
		gp_error_set(err, 500, "internal", "could not generate the node's secrets");
		goto out;
	}
	digest_hex(secret, sizeof(secret), secret_hex);
	token_digest(node_token, strlen(node_token), ndigest);
	e.node_digest = ndigest;
	e.push_secret = secret_hex;
	e.grace_s = api_app(req)->agent_grace_s;
	if (service_agent_enroll(db_thread(), req->arena, &who, edigest, &e, &node_id, &node_json,
		err) < 0)
		goto out;
	/* a node taken over: its old token answers nowhere from now (others: NOTIFY) */
	node_cache_forget_node(api_app(req)->node_cache, node_id);
	o = json_object_new_object();
	json_object_object_add(o, "node", json_tokener_parse(node_json));
	json_add_str(o, "node_token", node_token);
	json_add_str(o, "push_secret", secret_hex);
	json_object_object_add(o, "warnings", json_object_get(warnings));
	response_json(req, res, 201, o);
	response_header(res, "Cache-Control", "no-store");
	log_info(req->request_id, "node enrolled", "node", e.node_name, "gpus",
	    arena_printf(req->arena, "%zu", json_object_array_length(clean)));
	rc = 0;
out:
	token_wipe(node_token, sizeof(node_token));
	token_wipe(secret, sizeof(secret));
	token_wipe(secret_hex, sizeof(secret_hex));
	return rc;
}

/* ---- node tokens: rotation (agent) and revocation (operator) ---- */

int
api_agent_token_rotate(struct request *req, struct response *res, struct gp_error *err)
{
	struct service_actor who = request_actor(req);
	char token[TOKEN_MAX_LEN];
	unsigned char digest[TOKEN_DIGEST_LEN];
	struct json_object *o;
	int rc = -1;

	arena_set_sensitive(req->arena);
	if (token_generate("gpn", token, sizeof(token)) < 0)
		return gp_error_set(err, 500, "internal", "could not generate a token");
	token_digest(token, strlen(token), digest);
	if (service_node_token_replace(db_thread(), req->arena, &who, req->principal.node_id, NULL,
		digest, err) < 0)
		goto out;
	/* the old token, here at once (others: NOTIFY); no other node's */
	node_cache_forget_node(api_app(req)->node_cache, req->principal.node_id);
	o = json_object_new_object();
	json_add_str(o, "node_token", token);
	response_json(req, res, 200, o);
	response_header(res, "Cache-Control", "no-store");
	rc = 0;
out:
	token_wipe(token, sizeof(token));
	return rc;
}

int
api_node_agent_token_revoke(struct request *req, struct response *res, struct gp_error *err)
{
	struct service_actor who = request_actor(req);

	if (strlen(req->params[0]) > 253)
		return gp_error_set(err, 404, "not_found", "no such node");
	if (service_node_token_replace(db_thread(), req->arena, &who, 0, req->params[0], NULL,
		err) < 0)
		return -1;
	node_cache_flush(api_app(req)->node_cache); /* here at once; other replicas: NOTIFY */
	response_empty(res, 204);
	return 0;
}

/* ---- desired state: at once, or a long-poll ---- */

struct desired_wait {
	int64_t node_id;
	int64_t after;
};

static int
query_int(struct request *req, const char *name, int64_t min, int64_t max, int64_t def,
    int64_t *out, struct gp_error *err)
{
	const char *v = req->query(req, name);
	char *end = NULL;
	long long x;

	*out = def;
	if (v == NULL)
		return 0;
	x = strtoll(v, &end, 10);
	if (v[0] == '\0' || *end != '\0' || x < min || x > max) {
		gp_error_field(err, name, "must be an integer from %lld to %lld", (long long)min,
		    (long long)max);
		return gp_error_set(err, 422, "validation_failed", "bad query parameter %s", name);
	}
	*out = x;
	return 0;
}

/*
 * Answer 200 with the document when its generation is not `after`: past
 * it, or behind it (the database was restored from a backup: the agent
 * must learn the current document, never wait for a generation that will
 * not come); else 304.
 */
static int
desired_answer(struct request *req, struct response *res, const struct desired_wait *w, bool *sent,
    struct gp_error *err)
{
	int64_t gen = 0;
	const char *doc = NULL;

	*sent = false;
	if (service_agent_desired(db_thread(), req->arena, w->node_id, w->after, &gen, &doc, err) <
	    0)
		return -1;
	if (doc != NULL) {
		response_raw(res, 200, "application/json", doc, strlen(doc));
		*sent = true;
	} else {
		response_empty(res, 304);
	}
	api_etag(req, res, gen);
	return 0;
}

static int
desired_woken(struct request *req, struct response *res, void *arg, enum deferred_outcome outcome,
    struct gp_error *err)
{
	bool sent;

	(void)outcome; /* woken, timed out or stopping: answer what is there now */
	return desired_answer(req, res, arg, &sent, err);
}

int
api_agent_desired_state(struct request *req, struct response *res, struct gp_error *err)
{
	struct desired_wait *w = arena_alloc(req->arena, sizeof(*w));
	int64_t wait_s = 0;
	bool sent = false;
	const char *key;
	uint64_t mark;

	w->node_id = req->principal.node_id;
	if (query_int(req, "after", 0, INT64_MAX, 0, &w->after, err) < 0 ||
	    query_int(req, "wait", 0, AGENT_WAIT_MAX_S, 0, &wait_s, err) < 0)
		return -1;
	key = arena_printf(req->arena, "node:%lld", (long long)w->node_id);
	/* before the read: a commit it misses has woken key by the time we wait */
	mark = api_wait_mark(req, key);
	if (desired_answer(req, res, w, &sent, err) < 0)
		return -1;
	if (sent || wait_s == 0)
		return 0;
	if (api_app(req)->poll_test_gap_ms > 0) /* tests: widen the read-to-wait gap */
		nanosleep(&(struct timespec){ api_app(req)->poll_test_gap_ms / 1000,
			      (long)(api_app(req)->poll_test_gap_ms % 1000) * 1000000L },
		    NULL);
	/*
	 * nothing new: wait for a wake of node:<id> (any replica) or the
	 * deadline; a node holds one poll here, a new one answers the old
	 */
	return api_defer_until_exclusive(req, res, key, mark, time_mono_us() + wait_s * 1000000,
	    desired_woken, w, err);
}

/* ---- heartbeat (the status report: agent_status.c) ---- */

/*
 * Heartbeats are group-committed (workers/heartbeat_queue.c): the
 * handler validates and queues; a heartbeats worker commits the common
 * ones of everything queued in one statement, an alone worker each of
 * the others in its own transaction (node unknown or held by another
 * transaction, observed generation advancing, node gone), and the
 * request is woken with the answer. Only while the server stops does a
 * heartbeat run here, as every heartbeat did before.
 */
static void
heartbeat_wake(void *req)
{
	api_wake(req);
}

static int
heartbeat_answer(struct request *req, struct response *res, struct heartbeat_job *j,
    struct gp_error *err)
{
	struct json_object *o;

	if (j->failed) {
		*err = j->err;
		return -1;
	}
	if (!j->done) {
		if (service_agent_heartbeat(db_thread(), req->arena, j->node_id, j->observed,
			&j->generation, err) < 0)
			return -1;
	}
	o = json_object_new_object();
	json_add_int(o, "generation", j->generation);
	response_json(req, res, 200, o);
	return 0;
}

/* After the batch, on an HTTP thread. */
static int
heartbeat_reply(struct request *req, struct response *res, void *arg, struct gp_error *err)
{
	return heartbeat_answer(req, res, arg, err);
}

int
api_agent_heartbeat(struct request *req, struct response *res, struct gp_error *err)
{
	struct heartbeat_job *j = arena_alloc(req->arena, sizeof(*j));
	struct json_object *body;
	struct jfields f;

	memset(j, 0, sizeof(*j));
	j->node_id = req->principal.node_id;
	j->observed = -1;
	if (req->body_len > 0) {
		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		jf_int(&f, "observed_generation", false, 0, INT64_MAX, &j->observed, NULL);
		if (jf_finish(&f) < 0)
			return -1;
	}
	j->arena = req->arena;
	j->wake = heartbeat_wake;
	j->waiter = req;
	if (heartbeat_queue_push(api_app(req)->heartbeats, j))
		return api_defer(req, heartbeat_reply, j);
	/* no queue (stopping): alone, on this thread */
	return heartbeat_answer(req, res, j, err);
}

/* ---- the node's layout as a mig-parted config ---- */

int
api_node_mig_config(struct request *req, struct response *res, struct gp_error *err)
{
	const char *json = NULL;
	bool found = false;
	struct json_object *gpus;
	struct strbuf sb, *b = &sb;

	if (strlen(req->params[0]) > 253)
		return gp_error_set(err, 404, "not_found", "no such node");
	if (db_agent_mig_layout(db_thread(), req->arena, req->params[0], &found, &json, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such node: %s", req->params[0]);
	gpus = json_own(req->arena, json_tokener_parse(json));
	strbuf_init(b, req->arena, 1024);
	strbuf_printf(b,
	    "# mig-parted (NVIDIA/mig-parted) config for node %s, from gpupool's placements.\n"
	    "# mig-parted places instances itself: the exact placements gpupool chose are\n"
	    "# applied by gpupool-agent; this file matches them in profile and count.\n"
	    "version: v1\nmig-configs:\n  gpupool:\n",
	    req->params[0]);
	for (size_t i = 0; gpus != NULL && i < json_object_array_length(gpus); i++) {
		struct json_object *g = json_object_array_get_idx(gpus, i), *v, *devs;

		if (!json_object_object_get_ex(g, "index", &v) ||
		    json_object_get_type(v) != json_type_int)
			continue;
		strbuf_printf(b, "    - devices: [%d]\n", json_object_get_int(v));
		json_object_object_get_ex(g, "mig_enabled", &v);
		strbuf_printf(b, "      mig-enabled: %s\n",
		    json_object_get_boolean(v) ? "true" : "false");
		if (json_object_object_get_ex(g, "devices", &devs) &&
		    json_object_object_length(devs) > 0) {
			strbuf_printf(b, "      mig-devices:\n");
			json_object_object_foreach(devs, k, n)
			    strbuf_printf(b, "        \"%s\": %d\n", k, json_object_get_int(n));
		}
	}
	response_raw(res, 200, "application/yaml", b->p, strlen(b->p));
	return 0;
}
