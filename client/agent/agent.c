/*
 * agent.c - the gpupool-agent loop: enrollment, long-poll, push, apply,
 * status, heartbeat, metrics, profiles, backoff.
 *
 * State dir (created 0700): token (node token, 0600), push-secret (0600),
 * agent.json (enrolled node, the SHA-256 of the enrollment token used, the
 * whole-GPU holdings), and the fake backend's files. Secrets are never
 * logged.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent.h"
#include "apply.h"
#include "backend.h"
#include "core/log.h"
#include "dcgm.h"
#include "gp_client.h"
#include "push.h"
#include "report.h"
#include "util.h"

#define MAX_PENDING_XIDS 64
#define METRICS_BATCH 5000

struct agent {
	const struct agent_config *cfg;
	struct ag_backend *b;
	pthread_mutex_t mu;
	pthread_cond_t cv;

	/* credentials (under mu) */
	char token[512];
	char secret[256];
	char enrolled_with[65]; /* SHA-256 hex of the enrollment token used */
	bool unauthorized;      /* a 401 seen: re-enroll or exit */
	int repoll;             /* bumped on (re-)enrollment: poll from 0 again */

	/* node state (under mu) */
	struct ag_node node;
	struct whole_state whole;
	struct ag_xid xq[AG_MAX_GPUS][MAX_PENDING_XIDS]; /* XIDs not yet reported */
	int nxq[AG_MAX_GPUS];
	long long applied_gen;
	struct json_object *errors; /* of the last apply */
	bool status_dirty;

	/* reporter only */
	char last_status_fp[65];
	long long last_status_ms;
	char last_profiles_fp[65];
	long long last_profiles_ms;
	struct json_object *samples;
	long long dropped_samples;
	bool metrics_missing_logged;
	struct dcgm_device dcgm[DCGM_MAX_DEVICES];
	int ndcgm;
	bool dcgm_ok;

	struct push_server *push;
};

static volatile sig_atomic_t g_stop;
static volatile bool g_stop_b;

static void
on_signal(int sig)
{
	(void)sig;
	g_stop = 1;
	g_stop_b = true;
}

/* ---------------------------------------------------------------- files */

static void
path_of(const struct agent *a, const char *name, char *out, size_t len)
{
	snprintf(out, len, "%s/%s", a->cfg->state_dir, name);
}

static bool
read_secret_file(const struct agent *a, const char *name, char *out, size_t len)
{
	char p[4096];
	path_of(a, name, p, sizeof(p));
	char *s = ag_read_file(p, NULL);
	if (s == NULL)
		return false;
	ag_strlcpy(out, ag_trim(s), len);
	memset(s, 0, strlen(s));
	free(s);
	return out[0] != '\0';
}

static int
write_secret_file(const struct agent *a, const char *name, const char *value)
{
	char p[4096];
	path_of(a, name, p, sizeof(p));
	return ag_write_file(p, value, strlen(value), 0600);
}

static void
save_agent_json(struct agent *a)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "node_name", json_object_new_string(a->cfg->node_name));
	json_object_object_add(o, "server", json_object_new_string(a->cfg->server));
	json_object_object_add(o, "enrolled_with", json_object_new_string(a->enrolled_with));
	json_object_object_add(o, "applied_generation", json_object_new_int64(a->applied_gen));
	struct json_object *w = json_object_new_array();
	for (int i = 0; i < AG_MAX_GPUS; i++) {
		for (int k = 0; k < a->whole.ninst[i]; k++) {
			struct ag_instance *in = &a->whole.inst[i][k];
			struct json_object *e = json_object_new_object();
			json_object_object_add(e, "slot", json_object_new_int(i));
			json_object_object_add(e, "gpu", json_object_new_string(a->whole.uuid[i]));
			json_object_object_add(e, "profile", json_object_new_string(in->profile));
			json_object_object_add(e, "start", json_object_new_int(in->start));
			json_object_object_add(e, "size", json_object_new_int(in->size));
			json_object_array_add(w, e);
		}
	}
	json_object_object_add(o, "whole", w);
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN);
	char p[4096];
	path_of(a, "agent.json", p, sizeof(p));
	if (ag_write_file(p, s, strlen(s), 0600) != 0)
		log_warn(NULL, "cannot write agent.json", "path", p);
	json_object_put(o);
}

static void
load_agent_json(struct agent *a)
{
	char p[4096];
	path_of(a, "agent.json", p, sizeof(p));
	char *s = ag_read_file(p, NULL);
	if (s == NULL)
		return;
	struct json_object *o = json_tokener_parse(s), *v, *w;
	free(s);
	if (o == NULL)
		return;
	if (json_object_object_get_ex(o, "enrolled_with", &v))
		ag_strlcpy(a->enrolled_with, json_object_get_string(v), sizeof(a->enrolled_with));
	if (json_object_object_get_ex(o, "whole", &w) && json_object_is_type(w, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(w); i++) {
			struct json_object *e = json_object_array_get_idx(w, i);
			int slot = -1;
			if (json_object_object_get_ex(e, "slot", &v))
				slot = json_object_get_int(v);
			if (slot < 0 || slot >= AG_MAX_GPUS ||
			    a->whole.ninst[slot] >= AG_MAX_INSTANCES)
				continue;
			struct ag_instance *in = &a->whole.inst[slot][a->whole.ninst[slot]++];
			memset(in, 0, sizeof(*in));
			if (json_object_object_get_ex(e, "gpu", &v)) {
				ag_strlcpy(a->whole.uuid[slot], json_object_get_string(v),
				    sizeof(a->whole.uuid[slot]));
				ag_strlcpy(in->uuid, json_object_get_string(v), sizeof(in->uuid));
			}
			if (json_object_object_get_ex(e, "profile", &v))
				ag_strlcpy(in->profile, json_object_get_string(v),
				    sizeof(in->profile));
			if (json_object_object_get_ex(e, "start", &v))
				in->start = json_object_get_int(v);
			if (json_object_object_get_ex(e, "size", &v))
				in->size = json_object_get_int(v);
			in->gi_id = -1;
		}
	}
	json_object_put(o);
}

/* ---------------------------------------------------------------- state */

/* Discover into a->node (mu held); new XIDs are queued for the status. */
static int
refresh(struct agent *a)
{
	char err[AG_ERR_MAX];
	struct ag_node n;
	if (a->b->ops->discover(a->b, &n, err, sizeof(err)) != 0) {
		log_warn(NULL, "discovery failed", "error", err);
		return -1;
	}
	apply_whole_into(&a->whole, &n);
	for (int i = 0; i < n.ngpus && i < AG_MAX_GPUS; i++) {
		for (int k = 0; k < n.gpus[i].nxids; k++) {
			if (a->nxq[i] >= MAX_PENDING_XIDS)
				break;
			a->xq[i][a->nxq[i]++] = n.gpus[i].xids[k];
			char x[16];
			snprintf(x, sizeof(x), "%d", n.gpus[i].xids[k].xid);
			log_warn(NULL, "XID event", "gpu", n.gpus[i].uuid, "xid", x);
			a->status_dirty = true;
		}
	}
	a->node = n;
	return 0;
}

static long long
agent_submit(void *ctx, struct json_object *doc, char *err, size_t errlen)
{
	struct agent *a = ctx;
	struct desired d;
	if (desired_parse(doc, &d, err, errlen) != 0) {
		log_warn(NULL, "malformed desired state", "error", err);
		return -1;
	}
	pthread_mutex_lock(&a->mu);
	if (d.generation <= a->applied_gen) {
		long long g = a->applied_gen;
		pthread_mutex_unlock(&a->mu);
		return g;
	}
	char gen[32];
	snprintf(gen, sizeof(gen), "%lld", d.generation);
	if (refresh(a) != 0) {
		/* no hardware view: do not claim this generation */
		long long g = a->applied_gen;
		pthread_mutex_unlock(&a->mu);
		snprintf(err, errlen, "discovery failed");
		return g;
	}
	struct json_object *errors = json_object_new_array();
	int changes = apply_desired(a->b, &a->node, &d, &a->whole, errors);
	(void)refresh(a);
	json_object_put(a->errors);
	a->errors = errors;
	a->applied_gen = d.generation;
	a->status_dirty = true;
	save_agent_json(a);
	char ch[16], ne[16];
	snprintf(ch, sizeof(ch), "%d", changes);
	snprintf(ne, sizeof(ne), "%zu", json_object_array_length(errors));
	log_info(NULL, "applied desired state", "generation", gen, "changes", ch, "errors", ne);
	pthread_cond_broadcast(&a->cv);
	long long g = a->applied_gen;
	pthread_mutex_unlock(&a->mu);
	return g;
}

static bool
agent_secret(void *ctx, char *buf, size_t len)
{
	struct agent *a = ctx;
	pthread_mutex_lock(&a->mu);
	bool ok = a->secret[0] != '\0';
	ag_strlcpy(buf, a->secret, len);
	pthread_mutex_unlock(&a->mu);
	return ok;
}

/* ---------------------------------------------------------------- http */

static long long
backoff_ms(int fails)
{
	long long d = 1000LL << (fails < 5 ? fails : 5); /* 1 s .. 32 s */
	if (d > 30000)
		d = 30000;
	return d / 2 + ag_rand((unsigned)(d / 2) + 1); /* jitter: [d/2, d] */
}

static void
mark_unauthorized(struct agent *a, const char *where)
{
	pthread_mutex_lock(&a->mu);
	if (!a->unauthorized)
		log_error(NULL, "the server rejected the node token (401)", "request", where);
	a->unauthorized = true;
	pthread_cond_broadcast(&a->cv);
	pthread_mutex_unlock(&a->mu);
}

/* Send with the current node token. Returns the HTTP status, 0 when none
 * arrived; resp must be freed by the caller. */
static long
call(struct agent *a, struct gp_client *c, const char *method, const char *path,
    struct json_object *body, struct gp_client_response *resp)
{
	char tok[512];
	pthread_mutex_lock(&a->mu);
	ag_strlcpy(tok, a->token, sizeof(tok));
	pthread_mutex_unlock(&a->mu);
	if (gp_client_set_token(c, tok[0] ? tok : NULL) != 0) {
		memset(tok, 0, sizeof(tok));
		memset(resp, 0, sizeof(*resp));
		return 0;
	}
	memset(tok, 0, sizeof(tok));
	int rc = gp_client_send_json(c, method, path, body, NULL, resp);
	if (rc != 0)
		return 0;
	if (resp->status == 401)
		mark_unauthorized(a, path);
	return resp->status;
}

static void
log_http(const char *what, const struct gp_client_response *r)
{
	struct gp_error e;
	gp_client_error_from_response(r, &e);
	char st[16];
	snprintf(st, sizeof(st), "%ld", r->status);
	log_warn(NULL, what, "status", st, "code", e.code, "detail", e.message);
}

/* ---------------------------------------------------------------- enroll */

static bool
pick_enroll_token(struct agent *a, char *out, size_t len)
{
	out[0] = '\0';
	if (read_secret_file(a, "enroll-token", out, len))
		return true;
	if (a->cfg->enroll_token != NULL && a->cfg->enroll_token[0] != '\0') {
		ag_strlcpy(out, a->cfg->enroll_token, len);
		return true;
	}
	const char *env = getenv("GPUPOOL_ENROLL_TOKEN");
	if (env != NULL && env[0] != '\0') {
		ag_strlcpy(out, env, len);
		return true;
	}
	return false;
}

static char *
default_callback(const struct agent *a, char *buf, size_t len)
{
	if (a->cfg->callback_url != NULL)
		return ag_strlcpy(buf, a->cfg->callback_url, len), buf;
	if (a->push == NULL)
		return NULL;
	char host[256];
	ag_strlcpy(host, a->cfg->listen, sizeof(host));
	char *colon = strrchr(host, ':');
	if (colon != NULL)
		*colon = '\0';
	if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0 || strcmp(host, "*") == 0)
		if (gethostname(host, sizeof(host)) != 0)
			ag_strlcpy(host, "localhost", sizeof(host));
	snprintf(buf, len, "http://%s:%d", host, push_port(a->push));
	return buf;
}

/* Enroll (or re-enroll) with an enrollment token. Returns 0, or an exit code. */
static int
enroll(struct agent *a, struct gp_client *c)
{
	char tok[512], hash[65];
	if (!pick_enroll_token(a, tok, sizeof(tok))) {
		log_error(NULL,
		    "not enrolled and no enrollment token: give --enroll-token, "
		    "GPUPOOL_ENROLL_TOKEN or write it to <state-dir>/enroll-token");
		return AGENT_EXIT_AUTH;
	}
	ag_sha256_hex(tok, hash);
	if (strcmp(hash, a->enrolled_with) == 0) {
		memset(tok, 0, sizeof(tok));
		log_error(NULL,
		    "the node token was rejected and the only enrollment token at hand "
		    "was already used (tokens are one-time): create a new one with "
		    "`gpupool nodes enroll-token` and restart the agent with it");
		return AGENT_EXIT_AUTH;
	}
	struct json_object *body = json_object_new_object();
	json_object_object_add(body, "enrollment_token", json_object_new_string(tok));
	memset(tok, 0, sizeof(tok));
	char host[256] = "";
	if (gethostname(host, sizeof(host)) != 0)
		ag_strlcpy(host, a->cfg->node_name, sizeof(host));
	json_object_object_add(body, "node_name", json_object_new_string(a->cfg->node_name));
	json_object_object_add(body, "hostname", json_object_new_string(host));
	char cb[512];
	if (default_callback(a, cb, sizeof(cb)) != NULL)
		json_object_object_add(body, "callback_url", json_object_new_string(cb));
	json_object_object_add(body, "agent_version", json_object_new_string(AGENT_VERSION));
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	long pages = sysconf(_SC_PHYS_PAGES), psize = sysconf(_SC_PAGESIZE);
	if (ncpu > 0)
		json_object_object_add(body, "cpu_millicores", json_object_new_int64(ncpu * 1000));
	if (pages > 0 && psize > 0)
		json_object_object_add(body, "memory_bytes",
		    json_object_new_int64((long long)pages * psize));
	pthread_mutex_lock(&a->mu);
	int drc = refresh(a);
	struct json_object *gpus = report_enroll_gpus(&a->node);
	pthread_mutex_unlock(&a->mu);
	if (drc != 0) {
		json_object_put(gpus);
		json_object_put(body);
		return AGENT_EXIT_CONFIG;
	}
	json_object_object_add(body, "gpus", gpus);
	int fails = 0;
	for (;;) {
		if (g_stop) {
			json_object_put(body);
			return AGENT_EXIT_OK;
		}
		struct gp_client_response r;
		if (gp_client_set_token(c, NULL) != 0 ||
		    gp_client_send_json(c, "POST", "/v1/agent/enroll", body, NULL, &r) != 0) {
			log_warn(NULL, "enroll: server unreachable, retrying", "error", r.error);
			gp_client_response_free(&r);
			ag_sleep_ms(backoff_ms(fails++), &g_stop_b);
			continue;
		}
		if (r.status == 201 || r.status == 200) {
			struct json_object *nt = gp_client_json_get(r.json, "node_token");
			struct json_object *ps = gp_client_json_get(r.json, "push_secret");
			if (nt == NULL || !json_object_is_type(nt, json_type_string)) {
				log_error(NULL, "enroll: the answer has no node_token");
				gp_client_response_free(&r);
				json_object_put(body);
				return AGENT_EXIT_AUTH;
			}
			pthread_mutex_lock(&a->mu);
			ag_strlcpy(a->token, json_object_get_string(nt), sizeof(a->token));
			ag_strlcpy(a->secret, ps ? json_object_get_string(ps) : "",
			    sizeof(a->secret));
			ag_strlcpy(a->enrolled_with, hash, sizeof(a->enrolled_with));
			a->unauthorized = false;
			a->repoll++;
			a->applied_gen = 0; /* converge again from the full document */
			a->status_dirty = true;
			int w1 = write_secret_file(a, "token", a->token);
			int w2 = write_secret_file(a, "push-secret", a->secret);
			save_agent_json(a);
			pthread_cond_broadcast(&a->cv);
			pthread_mutex_unlock(&a->mu);
			struct json_object *warn = gp_client_json_get(r.json, "warnings");
			if (warn != NULL && json_object_array_length(warn) > 0)
				log_warn(NULL, "enroll warnings", "warnings",
				    json_object_to_json_string(warn));
			gp_client_response_free(&r);
			json_object_put(body);
			if (w1 != 0 || w2 != 0) {
				log_error(NULL, "cannot write the node token into the state dir");
				return AGENT_EXIT_CONFIG;
			}
			/* the enrollment token is spent: do not keep it on disk */
			char p[4096];
			path_of(a, "enroll-token", p, sizeof(p));
			(void)unlink(p);
			log_info(NULL, "enrolled", "node", a->cfg->node_name);
			return 0;
		}
		if (r.status >= 400 && r.status < 500 && r.status != 429 && r.status != 408) {
			log_http("enrollment refused", &r);
			gp_client_response_free(&r);
			json_object_put(body);
			return AGENT_EXIT_AUTH;
		}
		log_http("enroll: server error, retrying", &r);
		gp_client_response_free(&r);
		ag_sleep_ms(backoff_ms(fails++), &g_stop_b);
	}
}

/* ---------------------------------------------------------------- poller */

static void *
poller(void *arg)
{
	struct agent *a = arg;
	struct gp_client *c = gp_client_create(a->cfg->server, NULL);
	if (c == NULL)
		return NULL;
	gp_client_set_timeouts(c, (a->cfg->poll_interval + 20) * 1000L, 5000);
	long long after = 0;
	int seen_repoll = -1, fails = 0;
	while (!g_stop) {
		pthread_mutex_lock(&a->mu);
		bool wait = a->unauthorized || a->token[0] == '\0';
		if (a->repoll != seen_repoll) {
			seen_repoll = a->repoll;
			after = 0;
		}
		pthread_mutex_unlock(&a->mu);
		if (wait) {
			ag_sleep_ms(200, &g_stop_b);
			continue;
		}
		char path[128];
		snprintf(path, sizeof(path), "/v1/agent/desired-state?after=%lld&wait=%d", after,
		    a->cfg->poll_interval);
		struct gp_client_response r;
		long st = call(a, c, "GET", path, NULL, &r);
		if (st == 200 && r.json != NULL) {
			char err[256];
			long long g = agent_submit(a, r.json, err, sizeof(err));
			if (g >= 0)
				after = g;
			fails = 0;
		} else if (st == 304) {
			fails = 0;
		} else if (st == 401) {
			/* the reporter re-enrolls or exits */
		} else {
			if (st == 0)
				log_warn(NULL, "desired-state: server unreachable", "error",
				    r.error);
			else
				log_http("desired-state failed", &r);
			gp_client_response_free(&r);
			ag_sleep_ms(backoff_ms(fails++), &g_stop_b);
			continue;
		}
		gp_client_response_free(&r);
	}
	gp_client_destroy(c);
	return NULL;
}

/* ---------------------------------------------------------------- reporter */

static struct json_object *
status_doc(struct agent *a, int *sent_xids, char *fp)
{
	struct json_object *gpus = report_status_gpus(&a->node);
	struct json_object *noxid = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(gpus) && i < AG_MAX_GPUS; i++) {
		struct json_object *g = json_object_array_get_idx(gpus, i);
		struct json_object *xa = json_object_new_array();
		for (int k = 0; k < a->nxq[i]; k++) {
			struct json_object *x = json_object_new_object();
			json_object_object_add(x, "xid", json_object_new_int(a->xq[i][k].xid));
			json_object_object_add(x, "ts", report_time(a->xq[i][k].ts));
			json_object_array_add(xa, x);
		}
		sent_xids[i] = a->nxq[i];
		json_object_object_add(g, "xid_events", xa);
		struct json_object *copy = NULL;
		json_object_deep_copy(g, &copy, NULL);
		json_object_object_del(copy, "xid_events");
		json_object_array_add(noxid, copy);
	}
	struct json_object *doc = json_object_new_object();
	json_object_object_add(doc, "observed_generation", json_object_new_int64(a->applied_gen));
	json_object_object_add(doc, "agent_version", json_object_new_string(AGENT_VERSION));
	json_object_object_add(doc, "gpus", gpus);
	struct json_object *errs = NULL;
	if (a->errors != NULL)
		json_object_deep_copy(a->errors, &errs, NULL);
	json_object_object_add(doc, "errors", errs ? errs : json_object_new_array());
	/* fingerprint: everything but the XIDs (those are sent when queued) */
	struct json_object *f = json_object_new_object();
	json_object_object_add(f, "g", json_object_new_int64(a->applied_gen));
	json_object_object_add(f, "gpus", noxid);
	json_object_object_add(f, "errors", json_object_get(json_object_object_get(doc, "errors")));
	ag_sha256_hex(json_object_to_json_string_ext(f, JSON_C_TO_STRING_PLAIN), fp);
	json_object_put(f);
	return doc;
}

/* Status when changed or due, else a heartbeat. Returns false on failure. */
static bool
report_tick(struct agent *a, struct gp_client *c)
{
	int sent[AG_MAX_GPUS] = { 0 };
	char fp[65];
	pthread_mutex_lock(&a->mu);
	(void)refresh(a);
	struct json_object *doc = status_doc(a, sent, fp);
	bool xids = false;
	for (int i = 0; i < AG_MAX_GPUS; i++)
		xids |= sent[i] > 0;
	bool send = a->status_dirty || xids || strcmp(fp, a->last_status_fp) != 0 ||
	    ag_mono_ms() - a->last_status_ms >= a->cfg->status_interval * 1000LL;
	long long gen = a->applied_gen;
	pthread_mutex_unlock(&a->mu);
	struct gp_client_response r;
	long st;
	if (send) {
		st = call(a, c, "PUT", "/v1/agent/status", doc, &r);
		json_object_put(doc);
		if (st == 200 || st == 204) {
			pthread_mutex_lock(&a->mu);
			for (int i = 0; i < AG_MAX_GPUS; i++) {
				memmove(a->xq[i], a->xq[i] + sent[i],
				    sizeof(a->xq[i][0]) * (size_t)(a->nxq[i] - sent[i]));
				a->nxq[i] -= sent[i];
			}
			ag_strlcpy(a->last_status_fp, fp, sizeof(a->last_status_fp));
			a->last_status_ms = ag_mono_ms();
			if (gen == a->applied_gen)
				a->status_dirty = false;
			pthread_mutex_unlock(&a->mu);
			gp_client_response_free(&r);
			return true;
		}
	} else {
		json_object_put(doc);
		struct json_object *hb = json_object_new_object();
		json_object_object_add(hb, "observed_generation", json_object_new_int64(gen));
		st = call(a, c, "POST", "/v1/agent/heartbeat", hb, &r);
		json_object_put(hb);
		if (st == 200 || st == 204) {
			gp_client_response_free(&r);
			return true;
		}
	}
	if (st == 0)
		log_warn(NULL,
		    send ? "status: server unreachable" : "heartbeat: server unreachable", "error",
		    r.error);
	else if (st != 401)
		log_http(send ? "status failed" : "heartbeat failed", &r);
	gp_client_response_free(&r);
	return false;
}

static void
scrape_dcgm(struct agent *a)
{
	if (a->cfg->dcgm_url == NULL)
		return;
	/* split "http://host:port/metrics" into base and path */
	char base[512], path[512] = "/metrics";
	ag_strlcpy(base, a->cfg->dcgm_url, sizeof(base));
	char *scheme = strstr(base, "://");
	char *slash = scheme ? strchr(scheme + 3, '/') : NULL;
	if (slash != NULL) {
		ag_strlcpy(path, slash, sizeof(path));
		*slash = '\0';
	}
	struct gp_client *c = gp_client_create(base, NULL);
	a->dcgm_ok = false;
	if (c == NULL)
		return;
	gp_client_set_timeouts(c, 5000, 2000);
	struct gp_client_response r;
	if (gp_client_request(c, "GET", path, NULL, 0, NULL, &r) == 0 && r.status == 200) {
		char err[128];
		int n = dcgm_parse(r.body, a->dcgm, DCGM_MAX_DEVICES, err, sizeof(err));
		if (n >= 0) {
			a->ndcgm = n;
			a->dcgm_ok = true;
		} else {
			log_warn(NULL, "dcgm-exporter scrape unreadable", "error", err);
		}
	} else {
		log_warn(NULL, "dcgm-exporter scrape failed", "url", a->cfg->dcgm_url);
	}
	gp_client_response_free(&r);
	gp_client_destroy(c);
}

static bool
metrics_tick(struct agent *a, struct gp_client *c)
{
	scrape_dcgm(a);
	long long ts = ag_now();
	pthread_mutex_lock(&a->mu);
	(void)refresh(a);
	report_samples(&a->node, ts, a->samples);
	/* MIG devices: telemetry only dcgm-exporter has */
	for (int i = 0; a->dcgm_ok && i < a->ndcgm; i++) {
		struct dcgm_device *d = &a->dcgm[i];
		if (d->gi_id < 0)
			continue;
		const char *dev = dcgm_device_uuid(&a->node, d->gpu_uuid, d->gi_id);
		if (dev == NULL)
			continue;
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "ts", report_time(ts));
		json_object_object_add(o, "gpu_uuid", json_object_new_string(d->gpu_uuid));
		json_object_object_add(o, "device_uuid", json_object_new_string(dev));
		if (d->sm_active >= 0)
			json_object_object_add(o, "sm_active",
			    json_object_new_double(d->sm_active));
		if (d->fb_used_mib >= 0)
			json_object_object_add(o, "memory_used_mib",
			    json_object_new_int64((long long)d->fb_used_mib));
		if (d->fb_used_mib >= 0 && d->fb_free_mib >= 0)
			json_object_object_add(o, "memory_total_mib",
			    json_object_new_int64((long long)(d->fb_used_mib + d->fb_free_mib)));
		json_object_array_add(a->samples, o);
	}
	pthread_mutex_unlock(&a->mu);
	/* bounded buffer: the oldest go first, counted */
	size_t n = json_object_array_length(a->samples);
	if (n > (size_t)a->cfg->max_buffered_samples) {
		size_t drop = n - (size_t)a->cfg->max_buffered_samples;
		json_object_array_del_idx(a->samples, 0, drop);
		a->dropped_samples += (long long)drop;
		char d[32];
		snprintf(d, sizeof(d), "%lld", a->dropped_samples);
		log_warn(NULL, "metrics buffer full, oldest samples dropped", "dropped_total", d);
	}
	while (json_object_array_length(a->samples) > 0) {
		size_t total = json_object_array_length(a->samples);
		size_t batch = total < METRICS_BATCH ? total : METRICS_BATCH;
		struct json_object *arr = json_object_new_array();
		for (size_t i = 0; i < batch; i++)
			json_object_array_add(arr,
			    json_object_get(json_object_array_get_idx(a->samples, i)));
		struct json_object *body = json_object_new_object();
		json_object_object_add(body, "samples", arr);
		struct gp_client_response r;
		long st = call(a, c, "POST", "/v1/agent/metrics", body, &r);
		json_object_put(body);
		if (st == 202 || st == 200 || st == 404 || st == 405 || st == 400 || st == 422) {
			if (st == 404 || st == 405) {
				if (!a->metrics_missing_logged)
					log_warn(NULL,
					    "the server takes no metrics (no "
					    "/v1/agent/metrics); samples dropped");
				a->metrics_missing_logged = true;
			} else if (st == 400 || st == 422) {
				log_http("metrics refused; batch dropped", &r);
			}
			json_object_array_del_idx(a->samples, 0, batch);
			gp_client_response_free(&r);
			continue;
		}
		if (st == 0)
			log_warn(NULL, "metrics: server unreachable; kept for later", "error",
			    r.error);
		else if (st != 401)
			log_http("metrics failed; kept for later", &r);
		gp_client_response_free(&r);
		return false;
	}
	return true;
}

static bool
profiles_tick(struct agent *a, struct gp_client *c)
{
	const char *source = "none";
	struct json_object *list = json_object_new_array();
	if (a->cfg->dcgm_url != NULL) {
		if (a->dcgm_ok) {
			source = "dcgm-exporter";
			pthread_mutex_lock(&a->mu);
			for (int i = 0; i < a->ndcgm; i++) {
				const char *dev = dcgm_device_uuid(&a->node, a->dcgm[i].gpu_uuid,
				    a->dcgm[i].gi_id);
				for (int k = 0; dev != NULL && k < a->dcgm[i].npods; k++) {
					struct json_object *o = json_object_new_object();
					json_object_object_add(o, "device_uuid",
					    json_object_new_string(dev));
					json_object_object_add(o, "namespace",
					    json_object_new_string(a->dcgm[i].pods[k].ns));
					json_object_object_add(o, "pod",
					    json_object_new_string(a->dcgm[i].pods[k].pod));
					json_object_object_add(o, "container",
					    json_object_new_string(a->dcgm[i].pods[k].container));
					json_object_array_add(list, o);
				}
			}
			pthread_mutex_unlock(&a->mu);
		}
	} else if (a->b->ops->profiles != NULL) {
		struct ag_profile ps[64];
		int n = 0;
		pthread_mutex_lock(&a->mu);
		int rc = a->b->ops->profiles(a->b, ps, 64, &n);
		pthread_mutex_unlock(&a->mu);
		if (rc == 0) {
			source = "fake";
			for (int i = 0; i < n; i++) {
				struct json_object *o = json_object_new_object();
				json_object_object_add(o, "device_uuid",
				    json_object_new_string(ps[i].device_uuid));
				json_object_object_add(o, "namespace",
				    json_object_new_string(ps[i].ns));
				json_object_object_add(o, "pod", json_object_new_string(ps[i].pod));
				json_object_object_add(o, "container",
				    json_object_new_string(ps[i].container));
				json_object_array_add(list, o);
			}
		}
	}
	struct json_object *body = json_object_new_object();
	json_object_object_add(body, "source", json_object_new_string(source));
	json_object_object_add(body, "profiles", list);
	char fp[65];
	ag_sha256_hex(json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN), fp);
	if (strcmp(fp, a->last_profiles_fp) == 0 &&
	    ag_mono_ms() - a->last_profiles_ms < a->cfg->status_interval * 1000LL) {
		json_object_put(body);
		return true;
	}
	struct gp_client_response r;
	long st = call(a, c, "PUT", "/v1/agent/profiles", body, &r);
	json_object_put(body);
	bool ok = st == 200 || st == 204 || st == 404 || st == 405;
	if (ok) {
		ag_strlcpy(a->last_profiles_fp, fp, sizeof(a->last_profiles_fp));
		a->last_profiles_ms = ag_mono_ms();
	} else if (st == 0) {
		log_warn(NULL, "profiles: server unreachable", "error", r.error);
	} else if (st != 401) {
		log_http("profiles failed", &r);
	}
	gp_client_response_free(&r);
	return ok;
}

/* ---------------------------------------------------------------- run */

static int
ensure_state_dir(const char *dir)
{
	struct stat st;
	if (stat(dir, &st) != 0) {
		if (mkdir(dir, 0700) != 0) {
			fprintf(stderr, "gpupool-agent: cannot create %s: %s\n", dir,
			    strerror(errno));
			return -1;
		}
		return 0;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "gpupool-agent: %s is not a directory\n", dir);
		return -1;
	}
	if ((st.st_mode & 077) != 0)
		(void)chmod(dir, st.st_mode & 0700);
	return 0;
}

int
agent_run(const struct agent_config *cfg)
{
	if (ensure_state_dir(cfg->state_dir) != 0)
		return AGENT_EXIT_CONFIG;
	struct agent *a = calloc(1, sizeof(*a));
	if (a == NULL)
		return AGENT_EXIT_CONFIG;
	a->cfg = cfg;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->samples = json_object_new_array();
	struct ag_backend_config bc = {
		.node_name = cfg->node_name,
		.state_dir = cfg->state_dir,
		.fake_gpus = cfg->fake_gpus,
		.fake_faults = cfg->fake_faults,
		.nvml_path = cfg->nvml_path,
		.smi_path = cfg->smi_path,
		.dry_run = cfg->dry_run,
	};
	char err[AG_ERR_MAX];
	int code = AGENT_EXIT_OK;
	a->b = ag_backend_open(cfg->backend, &bc, err, sizeof(err));
	if (a->b == NULL) {
		log_error(NULL, "backend failed", "backend", cfg->backend, "error", err);
		code = AGENT_EXIT_CONFIG;
		goto out;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	load_agent_json(a);
	bool have = read_secret_file(a, "token", a->token, sizeof(a->token));
	(void)read_secret_file(a, "push-secret", a->secret, sizeof(a->secret));
	if (cfg->listen != NULL) {
		a->push = push_start(cfg->listen, agent_submit, agent_secret, a, err, sizeof(err));
		if (a->push == NULL) {
			log_error(NULL, "push listener failed", "error", err);
			code = AGENT_EXIT_CONFIG;
			goto out;
		}
		char port[16];
		snprintf(port, sizeof(port), "%d", push_port(a->push));
		log_info(NULL, "push listener up", "port", port);
	}
	struct gp_client *c = gp_client_create(cfg->server, NULL);
	if (c == NULL) {
		log_error(NULL, "bad --server URL", "server", cfg->server);
		code = AGENT_EXIT_CONFIG;
		goto out;
	}
	gp_client_set_timeouts(c, 15000, 5000);
	if (!have) {
		code = enroll(a, c);
		if (code != 0 || g_stop) {
			gp_client_destroy(c);
			goto out;
		}
	} else {
		log_info(NULL, "using the node token in the state dir", "node", cfg->node_name);
		pthread_mutex_lock(&a->mu);
		(void)refresh(a);
		pthread_mutex_unlock(&a->mu);
	}
	pthread_t pt;
	if (pthread_create(&pt, NULL, poller, a) != 0) {
		gp_client_destroy(c);
		code = AGENT_EXIT_CONFIG;
		goto out;
	}
	long long now = ag_mono_ms();
	long long next_hb = now, next_metrics = now + cfg->metrics_interval * 1000LL,
		  next_prof = now + 2000;
	int hb_fails = 0, m_fails = 0, p_fails = 0;
	while (!g_stop) {
		pthread_mutex_lock(&a->mu);
		bool unauth = a->unauthorized;
		pthread_mutex_unlock(&a->mu);
		if (unauth) {
			code = enroll(a, c);
			if (code != 0)
				break;
			next_hb = ag_mono_ms();
		}
		now = ag_mono_ms();
		if (now >= next_hb) {
			bool ok = report_tick(a, c);
			hb_fails = ok ? 0 : hb_fails + 1;
			next_hb = ag_mono_ms() +
			    (ok ? cfg->heartbeat_interval * 1000LL
				: (backoff_ms(hb_fails) < cfg->heartbeat_interval * 1000LL
					  ? backoff_ms(hb_fails)
					  : cfg->heartbeat_interval * 1000LL));
		}
		if (now >= next_metrics) {
			bool ok = metrics_tick(a, c);
			m_fails = ok ? 0 : m_fails + 1;
			next_metrics = ag_mono_ms() + cfg->metrics_interval * 1000LL +
			    (ok ? 0 : backoff_ms(m_fails));
		}
		if (now >= next_prof) {
			bool ok = profiles_tick(a, c);
			p_fails = ok ? 0 : p_fails + 1;
			next_prof = ag_mono_ms() + cfg->profiles_interval * 1000LL +
			    (ok ? 0 : backoff_ms(p_fails));
		}
		/* sleep until the next tick, a new apply (status now) or a 401 */
		long long wake = next_hb < next_metrics ? next_hb : next_metrics;
		if (next_prof < wake)
			wake = next_prof;
		pthread_mutex_lock(&a->mu);
		while (!g_stop && !a->unauthorized && !(a->status_dirty && hb_fails == 0) &&
		    ag_mono_ms() < wake) {
			struct timespec ts;
			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200 * 1000000L;
			if (ts.tv_nsec >= 1000000000L) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000L;
			}
			pthread_cond_timedwait(&a->cv, &a->mu, &ts);
		}
		if (a->status_dirty && hb_fails == 0)
			next_hb = 0;
		pthread_mutex_unlock(&a->mu);
	}
	g_stop = 1;
	g_stop_b = true;
	pthread_join(pt, NULL);
	gp_client_destroy(c);
out:
	push_stop(a->push);
	ag_backend_close(a->b);
	json_object_put(a->samples);
	json_object_put(a->errors);
	memset(a->token, 0, sizeof(a->token));
	memset(a->secret, 0, sizeof(a->secret));
	free(a);
	if (code == AGENT_EXIT_OK)
		log_info(NULL, "stopped");
	return code;
}
