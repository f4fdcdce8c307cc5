/*
 * agent.c - node agents (docs/agent.md): enrollment tokens (operators),
 * enrollment, the node token's own routes (under /v1/agent: desired state by
 * long-poll, status, heartbeat, token rotation), revoking a node's token
 * and the mig-parted view of a node's layout. The node of an agent
 * request always comes from its token (req->principal.node_id).
 */
#include "api.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <json-c/json.h>
#include <netdb.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/token.h"
#include "core/log.h"
#include "core/strbuf.h"
#include "core/timeutil.h"
#include "db/db_agent.h"
#include "db/db_capacity.h"
#include "domain/callback.h"
#include "domain/catalog.h"
#include "domain/health.h"

#define ENROLL_TTL_DEFAULT_S 3600
#define ENROLL_TTL_MAX_S (7 * 86400)
#define AGENT_MAX_GPUS 16
#define AGENT_MAX_INSTANCES 8
#define AGENT_MAX_XIDS 64
#define AGENT_MAX_ERRORS 64
#define AGENT_WAIT_MAX_S 60
#define AGENT_MESSAGE_MAX 500 /* agent texts users see: control characters stripped */
#define AGENT_XID_COUNT_MAX 1000000000
#define AGENT_CALLBACK_ADDRS 16 /* addresses of a callback host name checked at most */

/* ---- enrollment tokens (operators) ---- */

struct enroll_token_tx {
	struct request *req;
	const char *cluster;
	int64_t cluster_id, id;
	const unsigned char *digest;
	const char *prefix;
	int ttl_s;
	const char *node_name; /* NULL: any node */
	bool adopt_manual;     /* may adopt a node registered by hand */
	const char *json;
	bool found;
};

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

static int
cluster_lookup(struct db *db, struct enroll_token_tx *t, struct gp_error *err)
{
	if (strlen(t->cluster) > 63 ||
	    db_cluster_id(db, t->req->arena, t->cluster, &t->cluster_id, err) < 0)
		return strlen(t->cluster) > 63
		    ? gp_error_set(err, 404, "not_found", "no such cluster")
		    : -1;
	if (t->cluster_id == 0)
		return gp_error_set(err, 404, "not_found", "no such cluster: %s", t->cluster);
	return 0;
}

static int
enroll_token_create_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct enroll_token_tx *t = arg;

	if (cluster_lookup(db, t, err) < 0 ||
	    db_enroll_token_create(db, t->req->arena, t->cluster_id, t->digest, t->prefix, t->ttl_s,
		t->req->principal.user_id, t->node_name, t->adopt_manual, &t->json, err) < 0)
		return -1;
	return api_audit(db, t->req, "enrollment_token.create", "cluster", t->cluster, 0, NULL,
	    json_own(t->req->arena, json_tokener_parse(t->json)), err);
}

int
api_enroll_tokens_create(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body = NULL, *o;
	struct enroll_token_tx t;
	struct jfields f;
	char token[TOKEN_MAX_LEN];
	unsigned char digest[TOKEN_DIGEST_LEN];
	int64_t ttl = ENROLL_TTL_DEFAULT_S;
	int rc = -1;

	arena_set_sensitive(req->arena);
	memset(&t, 0, sizeof(t));
	t.req = req;
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
	if (db_tx(db_thread(), enroll_token_create_tx, &t, err) < 0)
		goto out;
	o = json_tokener_parse(t.json);
	json_add_str(o, "token", token);
	response_json(req, res, 201, o);
	response_header(res, "Cache-Control", "no-store");
	rc = 0;
out:
	token_wipe(token, sizeof(token));
	return rc;
}

static int
enroll_tokens_list_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct enroll_token_tx *t = arg;

	if (cluster_lookup(db, t, err) < 0)
		return -1;
	return db_enroll_tokens_list(db, t->req->arena, t->cluster_id, &t->json, err);
}

int
api_enroll_tokens_list(struct request *req, struct response *res, struct gp_error *err)
{
	struct enroll_token_tx t;
	struct json_object *o;

	memset(&t, 0, sizeof(t));
	t.req = req;
	t.cluster = req->params[0];
	if (db_tx(db_thread(), enroll_tokens_list_tx, &t, err) < 0)
		return -1;
	o = json_object_new_object();
	json_object_object_add(o, "items", json_tokener_parse(t.json));
	json_object_object_add(o, "next_cursor", NULL);
	response_json(req, res, 200, o);
	return 0;
}

static int
enroll_token_revoke_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct enroll_token_tx *t = arg;

	if (cluster_lookup(db, t, err) < 0 ||
	    db_enroll_token_revoke(db, t->req->arena, t->cluster_id, t->id, &t->found, err) < 0)
		return -1;
	if (!t->found)
		return gp_error_set(err, 404, "not_found",
		    "no usable enrollment token %lld in cluster %s", (long long)t->id, t->cluster);
	return api_audit(db, t->req, "enrollment_token.revoke", "enrollment_token",
	    arena_printf(t->req->arena, "%lld", (long long)t->id), 0, NULL, NULL, err);
}

int
api_enroll_tokens_delete(struct request *req, struct response *res, struct gp_error *err)
{
	struct enroll_token_tx t;

	memset(&t, 0, sizeof(t));
	t.req = req;
	t.cluster = req->params[0];
	if (api_param_id(req, 1, &t.id, err) < 0 ||
	    db_tx(db_thread(), enroll_token_revoke_tx, &t, err) < 0)
		return -1;
	response_empty(res, 204);
	return 0;
}

/* ---- enrollment (the agent, with an enrollment token) ---- */

struct enroll_tx {
	struct request *req;
	const unsigned char *enroll_digest;
	struct agent_enrollment e;
	int64_t node_id;
	const char *node_json;
	const char *adopted; /* what the adopted node was; NULL: a new node */
};

static int
enroll_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct enroll_tx *t = arg;
	bool found = false;

	if (db_enroll_token_consume(db, t->req->arena, t->enroll_digest, &t->e.token_id,
		&t->e.cluster_id, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 401, "invalid_enrollment_token",
		    "the enrollment token is unknown, used, revoked or expired");
	t->e.grace_s = api_app(t->req)->agent_grace_s;
	if (db_agent_enroll(db, t->req->arena, &t->e, &t->node_id, &t->node_json, &t->adopted,
		err) < 0)
		return -1;
	if (t->adopted != NULL &&
	    api_audit(db, t->req, "node.adopt", "node", t->e.node_name, 0,
		json_own(t->req->arena, json_tokener_parse(t->adopted)),
		json_own(t->req->arena, json_tokener_parse(t->node_json)), err) < 0)
		return -1;
	return api_audit(db, t->req, "node.enroll", "node", t->e.node_name, 0, NULL,
	    json_own(t->req->arena, json_tokener_parse(t->node_json)), err);
}

static bool
gpu_uuid_valid(const char *s)
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

static bool
printable(const char *s)
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
	if (!gpu_uuid_valid(uuid)) {
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
			path, printable(product) ? product : "?",
			pci && printable(pci) ? pci : "?")));
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
	struct enroll_tx t;
	const char *etoken = NULL;
	char node_token[TOKEN_MAX_LEN];
	unsigned char edigest[TOKEN_DIGEST_LEN], ndigest[TOKEN_DIGEST_LEN], secret[32];
	char secret_hex[65];
	int64_t cpu = -1, mem = -1;
	bool seen[16] = { false };
	int rc = -1;

	arena_set_sensitive(req->arena);
	memset(&t, 0, sizeof(t));
	memset(node_token, 0, sizeof(node_token));
	memset(secret_hex, 0, sizeof(secret_hex));
	t.req = req;
	if (api_body(req, &body, err) < 0)
		return -1;
	warnings = json_own(req->arena, json_object_new_array());
	clean = json_own(req->arena, json_object_new_array());
	jf_init(&f, req->arena, body, "", err);
	jf_string(&f, "enrollment_token", true, TOKEN_MAX_LEN, &etoken);
	jf_string(&f, "node_name", true, 253, &t.e.node_name);
	jf_string(&f, "hostname", true, 253, &t.e.hostname);
	jf_string(&f, "callback_url", false, 500, &t.e.callback_url);
	jf_string(&f, "agent_version", false, 64, &t.e.agent_version);
	jf_int(&f, "cpu_millicores", false, 0, INT64_C(1) << 40, &cpu, NULL);
	jf_int(&f, "memory_bytes", false, 0, INT64_C(1) << 56, &mem, NULL);
	jf_array(&f, "gpus", true, &gpus);
	jf_finish(&f);
	if (t.e.callback_url != NULL && !callback_url_valid(t.e.callback_url))
		gp_error_field(err, "callback_url", "must be an http:// or https:// URL");
	else if (t.e.callback_url != NULL) {
		const char *why = callback_refusal(req, t.e.callback_url);

		if (why != NULL)
			gp_error_field(err, "callback_url", "%s", why);
	}
	if (t.e.hostname != NULL && (t.e.hostname[0] == '\0' || !printable(t.e.hostname)))
		gp_error_field(err, "hostname", "must be 1-253 printable characters");
	if (t.e.agent_version != NULL && !printable(t.e.agent_version))
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
	t.e.cpu_millicores = cpu;
	t.e.memory_bytes = mem;
	t.e.gpus_json = json_to_arena(req->arena, clean, NULL);
	token_digest(etoken, strlen(etoken), edigest);
	t.enroll_digest = edigest;
	if (token_generate("gpn", node_token, sizeof(node_token)) < 0 ||
	    token_random_bytes(secret, sizeof(secret)) < 0) {
		gp_error_set(err, 500, "internal", "could not generate the node's secrets");
		goto out;
	}
	token_hex(secret, sizeof(secret), secret_hex);
	token_digest(node_token, strlen(node_token), ndigest);
	t.e.node_digest = ndigest;
	t.e.push_secret = secret_hex;
	if (db_tx(db_thread(), enroll_tx, &t, err) < 0)
		goto out;
	o = json_object_new_object();
	json_object_object_add(o, "node", json_tokener_parse(t.node_json));
	json_add_str(o, "node_token", node_token);
	json_add_str(o, "push_secret", secret_hex);
	json_object_object_add(o, "warnings", json_object_get(warnings));
	response_json(req, res, 201, o);
	response_header(res, "Cache-Control", "no-store");
	log_info(req->request_id, "node enrolled", "node", t.e.node_name, "gpus",
	    arena_printf(req->arena, "%zu", json_object_array_length(clean)));
	rc = 0;
out:
	token_wipe(node_token, sizeof(node_token));
	token_wipe(secret, sizeof(secret));
	token_wipe(secret_hex, sizeof(secret_hex));
	return rc;
}

/* ---- node tokens: rotation (agent) and revocation (operator) ---- */

struct node_token_tx {
	struct request *req;
	int64_t node_id;
	const char *node;
	const unsigned char *digest; /* NULL: revoke */
};

static int
node_token_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct node_token_tx *t = arg;

	if (t->node != NULL) {
		if (db_node_id_by_name(db, t->req->arena, t->node, &t->node_id, err) < 0)
			return -1;
		if (t->node_id == 0)
			return gp_error_set(err, 404, "not_found", "no such node: %s", t->node);
	}
	if (db_node_token_replace(db, t->req->arena, t->node_id, t->digest, err) < 0)
		return -1;
	return api_audit(db, t->req, t->digest ? "node.token_rotate" : "node.token_revoke", "node",
	    t->node ? t->node : arena_printf(t->req->arena, "%lld", (long long)t->node_id), 0, NULL,
	    NULL, err);
}

int
api_agent_token_rotate(struct request *req, struct response *res, struct gp_error *err)
{
	struct node_token_tx t = { .req = req, .node_id = req->principal.node_id };
	char token[TOKEN_MAX_LEN];
	unsigned char digest[TOKEN_DIGEST_LEN];
	struct json_object *o;
	int rc = -1;

	arena_set_sensitive(req->arena);
	if (token_generate("gpn", token, sizeof(token)) < 0)
		return gp_error_set(err, 500, "internal", "could not generate a token");
	token_digest(token, strlen(token), digest);
	t.digest = digest;
	if (db_tx(db_thread(), node_token_tx, &t, err) < 0)
		goto out;
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
	struct node_token_tx t = { .req = req, .node = req->params[0] };

	if (strlen(t.node) > 253)
		return gp_error_set(err, 404, "not_found", "no such node");
	if (db_tx(db_thread(), node_token_tx, &t, err) < 0)
		return -1;
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
	if (db_agent_generation(db_thread(), req->arena, w->node_id, &gen, err) < 0)
		return -1;
	if (gen != w->after) {
		if (db_agent_desired_state(db_thread(), req->arena, w->node_id, &gen, &doc, err) <
		    0)
			return -1;
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

	w->node_id = req->principal.node_id;
	if (query_int(req, "after", 0, INT64_MAX, 0, &w->after, err) < 0 ||
	    query_int(req, "wait", 0, AGENT_WAIT_MAX_S, 0, &wait_s, err) < 0)
		return -1;
	if (desired_answer(req, res, w, &sent, err) < 0)
		return -1;
	if (sent || wait_s == 0)
		return 0;
	/*
	 * nothing new: wait for a wake of node:<id> (any replica) or the
	 * deadline; a node holds one poll here, a new one answers the old
	 */
	return api_defer_until_exclusive(req, res,
	    arena_printf(req->arena, "node:%lld", (long long)w->node_id),
	    time_mono_us() + wait_s * 1000000, desired_woken, w, err);
}

/* ---- status and heartbeat ---- */

/*
 * An agent's text as users see it (alerts, allocation errors): control
 * characters become spaces, at most max bytes (cut on a UTF-8 boundary).
 */
static const char *
agent_text(struct arena *a, const char *s, size_t max)
{
	size_t n = strlen(s);
	char *out;

	if (n > max) {
		n = max;
		while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
			n--;
	}
	out = arena_strndup(a, s, n);
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = ' ';
	return out;
}

/*
 * One GPU of a status report → {"uuid","state","fail_reason","ecc_reason",
 * "degrade_reason","details","unknown_xids","instances"} for SQL.
 * "state": ok (instances are the truth), unknown (they could not be
 * listed: ignored), lost (the GPU cannot be read: failed at once).
 */
/*
 * A GPU's xid_events (at path): each appended to xlist as {xid, count},
 * those the catalog does not know to unknown as well, their codes to
 * xv[*nx..]. -1 after a field error (from before on).
 */
static int
status_xids(struct request *req, const struct xid_catalog *xc, struct json_object *xids,
    const char *path, int before, struct json_object *xlist, struct json_object *unknown, int *xv,
    int *nx, struct gp_error *err)
{
	for (size_t i = 0; xids != NULL && i < json_object_array_length(xids); i++) {
		struct json_object *e = json_object_array_get_idx(xids, i), *o;
		const char *p = arena_printf(req->arena, "%s.xid_events[%zu]", path, i);
		int64_t xid = 0, ts = 0, count = 1;
		struct jfields g;

		if (!json_object_is_type(e, json_type_object)) {
			gp_error_field(err, p, "must be an object");
			return -1;
		}
		jf_init(&g, req->arena, e, p, err);
		jf_int(&g, "xid", true, 1, 100000, &xid, NULL);
		jf_epoch_or_time(&g, "ts", false, &ts, NULL);
		jf_int(&g, "count", false, 1, AGENT_XID_COUNT_MAX, &count, NULL);
		if (jf_finish(&g) < 0 && err->nfields > before)
			return -1;
		xv[(*nx)++] = (int)xid;
		o = json_object_new_object();
		json_add_int(o, "xid", xid);
		json_add_int(o, "count", count);
		if (xid_lookup(xc, (int)xid, NULL) == XID_UNKNOWN)
			json_object_array_add(unknown, json_object_get(o));
		json_object_array_add(xlist, o);
	}
	return 0;
}

/*
 * A GPU's instances (at path; at most AGENT_MAX_INSTANCES, checked by the
 * caller) as a new array of {profile, start, size, uuid}; NULL after a
 * field error (from before on).
 */
static struct json_object *
status_instances(struct request *req, struct json_object *insts, const char *path, int before,
    struct gp_error *err)
{
	struct json_object *clean = json_object_new_array();

	for (size_t i = 0; insts != NULL && i < json_object_array_length(insts); i++) {
		struct json_object *e = json_object_array_get_idx(insts, i), *o;
		const char *p = arena_printf(req->arena, "%s.instances[%zu]", path, i);
		const char *profile = NULL, *iu = NULL;
		int64_t start = 0, size = 0;
		struct jfields g;

		if (!json_object_is_type(e, json_type_object)) {
			gp_error_field(err, p, "must be an object");
			json_object_put(clean);
			return NULL;
		}
		jf_init(&g, req->arena, e, p, err);
		jf_string(&g, "profile", true, 32, &profile);
		jf_int(&g, "start", true, 0, 7, &start, NULL);
		jf_int(&g, "size", true, 1, 8, &size, NULL);
		jf_string(&g, "uuid", false, 100, &iu);
		if ((jf_finish(&g) < 0 && err->nfields > before) || !printable(profile) ||
		    (iu != NULL && !printable(iu))) {
			if (err->nfields <= before)
				gp_error_field(err, p, "profile and uuid must be printable");
			json_object_put(clean);
			return NULL;
		}
		o = json_object_new_object();
		json_add_str(o, "profile", profile);
		json_add_int(o, "start", start);
		json_add_int(o, "size", size);
		json_add_str(o, "uuid", iu);
		json_object_array_add(clean, o);
	}
	return clean;
}

static struct json_object *
status_gpu(struct request *req, struct json_object *in, const char *path, struct gp_error *err)
{
	const struct xid_catalog *xc = api_app(req)->xids;
	struct jfields f;
	const char *uuid = NULL, *action = NULL, *state = NULL, *lost_error = NULL;
	int64_t index = 0, ecc = -1, lost_xid = 0;
	bool mig = false, remap_fail = false, remap_pending = false;
	struct json_object *insts = NULL, *xids = NULL, *out, *clean, *details, *xlist, *unknown;
	struct gpu_health_report hr;
	struct gpu_health_verdict hv;
	int xv[AGENT_MAX_XIDS + 1];
	int nx = 0, before = err->nfields;

	if (!json_object_is_type(in, json_type_object)) {
		gp_error_field(err, path, "must be an object");
		return NULL;
	}
	jf_init(&f, req->arena, in, path, err);
	jf_string(&f, "uuid", true, 64, &uuid);
	jf_int(&f, "index", false, 0, 15, &index, NULL);
	jf_string(&f, "state", false, 16, &state);
	jf_string(&f, "error", false, 2000, &lost_error);
	jf_int(&f, "xid", false, 1, 100000, &lost_xid, NULL);
	jf_bool(&f, "mig_enabled", false, &mig, NULL);
	jf_int(&f, "ecc_uncorrected", false, 0, INT64_MAX, &ecc, NULL);
	jf_bool(&f, "remapped_rows_failure", false, &remap_fail, NULL);
	jf_bool(&f, "remapped_rows_pending", false, &remap_pending, NULL);
	jf_string(&f, "recovery_action", false, 32, &action);
	jf_array(&f, "xid_events", false, &xids);
	jf_array(&f, "instances", false, &insts);
	jf_finish(&f);
	if (err->nfields > before)
		return NULL;
	if (state == NULL)
		state = "ok";
	if (strcmp(state, "ok") != 0 && strcmp(state, "unknown") != 0 &&
	    strcmp(state, "lost") != 0) {
		gp_error_field(err, jf_path(&f, "state"), "must be ok, unknown or lost");
		return NULL;
	}
	if (!gpu_uuid_valid(uuid)) {
		gp_error_field(err, jf_path(&f, "uuid"), "must be GPU-<uuid> in lower-case hex");
		return NULL;
	}
	if (!health_recovery_action_valid(action)) {
		gp_error_field(err, jf_path(&f, "recovery_action"),
		    "must be none, gpu_reset, node_reboot, drain_p2p or drain_and_reset");
		return NULL;
	}
	if (xids != NULL && json_object_array_length(xids) > AGENT_MAX_XIDS) {
		gp_error_field(err, jf_path(&f, "xid_events"),
		    "at most %d events (coalesce repeats with \"count\")", AGENT_MAX_XIDS);
		return NULL;
	}
	details = json_own(req->arena, json_object_new_object());
	xlist = json_object_new_array();
	unknown = json_object_new_array();
	json_object_object_add(details, "xids", xlist);
	if (status_xids(req, xc, xids, path, before, xlist, unknown, xv, &nx, err) < 0) {
		json_object_put(unknown);
		return NULL;
	}
	if (strcmp(state, "lost") == 0 && lost_xid > 0)
		xv[nx++] = (int)lost_xid;
	if (insts != NULL && json_object_array_length(insts) > AGENT_MAX_INSTANCES) {
		gp_error_field(err, jf_path(&f, "instances"), "at most %d instances",
		    AGENT_MAX_INSTANCES);
		json_object_put(unknown);
		return NULL;
	}
	/* an unknown GPU's instances could not be listed: whatever came is ignored */
	clean = status_instances(req, strcmp(state, "ok") == 0 ? insts : NULL, path, before, err);
	if (clean == NULL) {
		json_object_put(unknown);
		return NULL;
	}
	hr.ecc_uncorrected = ecc;
	hr.remapped_rows_failure = remap_fail;
	hr.remapped_rows_pending = remap_pending;
	hr.recovery_action = action;
	hr.xids = xv;
	hr.nxids = nx;
	health_assess(xc, &hr, req->arena, &hv);
	if (strcmp(state, "lost") == 0) {
		const char *why =
		    lost_error != NULL ? agent_text(req->arena, lost_error, 200) : "no error given";

		json_add_str(details, "error", why);
		if (lost_xid > 0)
			json_add_int(details, "xid", lost_xid);
		/* a lost GPU is failed whatever else the report says */
		hv.fail = lost_xid > 0 ? arena_printf(req->arena, "the GPU is lost (Xid %lld): %s",
					     (long long)lost_xid, why)
				       : arena_printf(req->arena, "the GPU is lost: %s", why);
	}
	if (json_object_array_length(unknown) > 0)
		json_object_object_add(details, "unknown_xids", json_object_get(unknown));
	if (ecc >= 0)
		json_add_int(details, "ecc_uncorrected", ecc);
	out = json_object_new_object();
	json_add_str(out, "uuid", uuid);
	json_add_str(out, "state", state);
	json_add_str(out, "fail_reason", hv.fail);
	json_add_str(out, "ecc_reason", hv.ecc);
	json_add_str(out, "degrade_reason", hv.degrade);
	json_object_object_add(out, "details", json_object_get(details));
	json_object_object_add(out, "unknown_xids", unknown);
	json_object_object_add(out, "instances", clean);
	return out;
}

static struct json_object *
status_errors(struct request *req, struct json_object *in, struct gp_error *err)
{
	struct json_object *out = json_object_new_array();
	int before = err->nfields;

	for (size_t i = 0; in != NULL && i < json_object_array_length(in); i++) {
		struct json_object *e = json_object_array_get_idx(in, i), *o;
		const char *p = arena_printf(req->arena, "errors[%zu]", i);
		const char *gpu = NULL, *profile = NULL, *msg = NULL;
		int64_t start = -1;
		struct jfields g;

		if (!json_object_is_type(e, json_type_object)) {
			gp_error_field(err, p, "must be an object");
			continue;
		}
		jf_init(&g, req->arena, e, p, err);
		jf_string(&g, "gpu", false, 64, &gpu);
		jf_string(&g, "profile", false, 32, &profile);
		jf_int(&g, "start", false, 0, 7, &start, NULL);
		jf_string(&g, "message", true, 2000, &msg);
		jf_finish(&g);
		if (err->nfields > before)
			continue;
		msg = agent_text(req->arena, msg, AGENT_MESSAGE_MAX);
		o = json_object_new_object();
		json_add_str(o, "gpu", gpu);
		json_add_str(o, "profile", profile);
		if (start >= 0)
			json_add_int(o, "start", start);
		json_add_str(o, "message", msg);
		json_object_array_add(out, o);
	}
	return out;
}

struct status_tx {
	struct request *req;
	int64_t observed;
	struct json_object *gpus; /* the checked GPUs of the report */
	const char *version, *gpus_json, *errors_json, *result;
	struct json_object *warnings;
};

/*
 * The report's instances against the GPU catalog, as enrollment checks
 * them: a MIG instance that is not a placement of its GPU's model (profile,
 * start, size) is not recorded (a warning); "full" is a whole GPU.
 */
static void
status_catalog_check(struct request *req, struct json_object *gpus, const char *models_json,
    struct json_object *warnings)
{
	const struct catalog *cat = api_app(req)->catalog;
	struct json_object *models = json_own(req->arena, json_tokener_parse(models_json));

	for (size_t i = 0; i < json_object_array_length(gpus); i++) {
		struct json_object *g = json_object_array_get_idx(gpus, i), *uuid, *insts, *info,
				   *model, *keep;
		const struct gpu_model *m;

		if (!json_object_object_get_ex(g, "uuid", &uuid) ||
		    !json_object_object_get_ex(g, "instances", &insts) || models == NULL ||
		    !json_object_object_get_ex(models, json_object_get_string(uuid), &info) ||
		    !json_object_object_get_ex(info, "model", &model))
			continue; /* not a GPU of the node: SQL ignores it */
		m = catalog_model(cat, json_object_get_string(model));
		keep = json_object_new_array();
		for (size_t k = 0; k < json_object_array_length(insts); k++) {
			struct json_object *in = json_object_array_get_idx(insts, k), *v;
			const char *profile;
			int start, size;
			const struct mig_profile *p;

			json_object_object_get_ex(in, "profile", &v);
			profile = json_object_get_string(v);
			json_object_object_get_ex(in, "start", &v);
			start = json_object_get_int(v);
			json_object_object_get_ex(in, "size", &v);
			size = json_object_get_int(v);
			p = (m != NULL && strcmp(profile, "full") != 0)
			    ? catalog_profile(m, profile)
			    : NULL;
			if (strcmp(profile, "full") == 0 ||
			    (p != NULL && catalog_profile_allows(p, start) &&
				p->memory_slices == size)) {
				json_object_array_add(keep, json_object_get(in));
				continue;
			}
			json_object_array_add(warnings,
			    json_object_new_string(arena_printf(req->arena,
				"gpus[%zu].instances[%zu]: %s@%d is not a placement of %s: not recorded",
				i, k, profile, start, m ? m->id : json_object_get_string(model))));
		}
		json_object_object_add(g, "instances", keep);
	}
}

static int
status_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct status_tx *t = arg;
	const char *models = NULL;

	if (db_agent_node_gpus(db, t->req->arena, t->req->principal.node_id, &models, err) < 0)
		return -1;
	/* (again on a retried transaction: the same checks, the same warnings) */
	t->warnings = json_own(t->req->arena, json_object_new_array());
	status_catalog_check(t->req, t->gpus, models ? models : "{}", t->warnings);
	t->gpus_json = json_to_arena(t->req->arena, t->gpus, NULL);
	return db_agent_apply_status(db, t->req->arena, t->req->principal.node_id, t->observed,
	    t->version, t->gpus_json, t->errors_json, &t->result, err);
}

int
api_agent_status(struct request *req, struct response *res, struct gp_error *err)
{
	struct json_object *body, *gpus = NULL, *errors = NULL, *clean, *errs;
	struct jfields f;
	struct status_tx t = { .req = req };

	if (api_body(req, &body, err) < 0)
		return -1;
	clean = json_own(req->arena, json_object_new_array());
	jf_init(&f, req->arena, body, "", err);
	jf_int(&f, "observed_generation", true, 0, INT64_MAX, &t.observed, NULL);
	jf_string(&f, "agent_version", false, 64, &t.version);
	jf_array(&f, "gpus", true, &gpus);
	jf_array(&f, "errors", false, &errors);
	jf_finish(&f);
	if (t.version != NULL && !printable(t.version))
		gp_error_field(err, "agent_version", "must be printable");
	if (gpus != NULL && json_object_array_length(gpus) > AGENT_MAX_GPUS)
		gp_error_field(err, "gpus", "at most %d GPUs", AGENT_MAX_GPUS);
	else
		for (size_t i = 0; gpus != NULL && i < json_object_array_length(gpus); i++) {
			struct json_object *g = status_gpu(req, json_object_array_get_idx(gpus, i),
			    arena_printf(req->arena, "gpus[%zu]", i), err);

			if (g != NULL)
				json_object_array_add(clean, g);
		}
	if (errors != NULL && json_object_array_length(errors) > AGENT_MAX_ERRORS)
		gp_error_field(err, "errors", "at most %d errors", AGENT_MAX_ERRORS);
	errs = json_own(req->arena, status_errors(req, errors, err));
	if (gp_error_isset(err) || err->nfields > 0) {
		if (!gp_error_isset(err))
			gp_error_set(err, 422, "validation_failed",
			    "the status report is not valid");
		return -1;
	}
	t.gpus = clean;
	t.errors_json = json_to_arena(req->arena, errs, NULL);
	if (db_tx(db_thread(), status_tx, &t, err) < 0)
		return -1;
	{
		struct json_object *o = json_tokener_parse(t.result);

		if (o == NULL)
			return gp_error_set(err, 500, "internal", "the status result is not JSON");
		json_object_object_add(o, "warnings", json_object_get(t.warnings));
		response_json(req, res, 200, o);
	}
	return 0;
}

struct heartbeat_tx {
	struct request *req;
	int64_t observed, generation;
};

static int
heartbeat_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct heartbeat_tx *t = arg;

	return db_agent_heartbeat(db, t->req->arena, t->req->principal.node_id, t->observed,
	    &t->generation, err);
}

int
api_agent_heartbeat(struct request *req, struct response *res, struct gp_error *err)
{
	struct heartbeat_tx t = { .req = req, .observed = -1 };
	struct json_object *body, *o;
	struct jfields f;

	if (req->body_len > 0) {
		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		jf_int(&f, "observed_generation", false, 0, INT64_MAX, &t.observed, NULL);
		if (jf_finish(&f) < 0)
			return -1;
	}
	if (db_tx(db_thread(), heartbeat_tx, &t, err) < 0)
		return -1;
	o = json_object_new_object();
	json_add_int(o, "generation", t.generation);
	response_json(req, res, 200, o);
	return 0;
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
