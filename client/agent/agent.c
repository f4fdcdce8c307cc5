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
#include "core/timeutil.h"
#include "crypto/digest.h"
#include "dcgm.h"
#include "gp_client.h"
#include "hook.h"
#include "push.h"
#include "report.h"
#include "util.h"

#define MAX_PENDING_XIDS 64 /* Xid codes queued per GPU (coalesced per code) */

struct agent {
	const struct agent_config *cfg;
	struct ag_backend *b;
	pthread_mutex_t mu;
	pthread_cond_t cv;

	/* credentials (under mu) */
	char token[512];
	char secret[256];
	char enrolled_with[65]; /* SHA-256 hex of the enrollment token used */
	bool unauthorized;      /* a 401 for the current token seen: re-enroll or exit */
	long long token_gen;    /* bumped with every new node token (0: none yet) */
	int repoll;             /* bumped on (re-)enrollment: poll from 0 again */

	/* node state (under mu) */
	struct ag_node node;
	struct whole_state whole;
	struct ag_xid xq[AG_MAX_GPUS][MAX_PENDING_XIDS]; /* XIDs not yet reported */
	int nxq[AG_MAX_GPUS];
	long long applied_gen;
	struct json_object *errors; /* of the last apply */
	bool status_dirty;
	struct desired want; /* the last document applied */
	bool reapply;        /* it touched a GPU not readable then: apply again once it is */
	bool discovery_failed;

	/* reporter only */
	char last_status_fp[65];
	long long last_status_ms;
	char last_profiles_fp[65];
	long long last_profiles_ms;
	struct json_object *samples;
	long long dropped_samples;
	size_t batch_max; /* samples per batch: halved on 413, grown back on success */
	bool metrics_missing_logged;
	struct dcgm_device dcgm[DCGM_MAX_DEVICES];
	int ndcgm;
	bool dcgm_ok;

	struct push_server *push;
	struct hook *hook; /* --after-change-hook, NULL: none (or --dry-run) */
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
	/* a push replayed after a restart is then a no-op (docs/agent.md) */
	if (json_object_object_get_ex(o, "applied_generation", &v) && json_object_get_int64(v) > 0)
		a->applied_gen = json_object_get_int64(v);
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

/* Discover into a->node (mu held); new XIDs are queued for the status.
 *
 * A failed discovery never leaves the last snapshot standing as if it
 * were new: every GPU known is reported unknown (its identity kept, no
 * instances, no health, no samples) until a discovery succeeds. A GPU
 * known before whose UUID is not found any more is reported lost. */
static int
refresh(struct agent *a)
{
	char err[AG_ERR_MAX];
	struct ag_node n;
	if (a->b->ops->discover(a->b, &n, err, sizeof(err)) != 0) {
		if (!a->discovery_failed)
			log_warn(NULL,
			    "discovery failed; every GPU reported unknown until it works", "error",
			    err);
		a->discovery_failed = true;
		char why[AG_GPU_ERROR_MAX];
		snprintf(why, sizeof(why), "discovery failed: %.160s", err);
		for (int i = 0; i < a->node.ngpus; i++) {
			struct ag_gpu *g = &a->node.gpus[i];
			g->nxids = 0;
			if (g->state == AG_GPU_LOST)
				continue;
			ag_gpu_mark(g, AG_GPU_UNKNOWN, why);
			g->stale = true;
		}
		return -1;
	}
	if (a->discovery_failed)
		log_info(NULL, "discovery works again");
	a->discovery_failed = false;
	for (int i = 0; i < a->node.ngpus; i++) {
		const struct ag_gpu *old = &a->node.gpus[i];
		bool found = false;
		for (int k = 0; k < n.ngpus && !found; k++)
			found = strcmp(n.gpus[k].uuid, old->uuid) == 0;
		if (found || old->uuid[0] == '\0' || n.ngpus >= AG_MAX_GPUS)
			continue;
		struct ag_gpu *g = &n.gpus[n.ngpus++];
		*g = *old;
		g->nxids = 0;
		g->stale = false;
		ag_gpu_mark(g, AG_GPU_LOST, "not found");
	}
	apply_whole_into(&a->whole, &n);
	for (int i = 0; i < n.ngpus && i < AG_MAX_GPUS; i++) {
		struct ag_gpu *g = &n.gpus[i];
		/* a lost GPU keeps the Xid that explained it (events come once) */
		for (int k = 0; g->state == AG_GPU_LOST && g->lost_xid == 0 && k < a->node.ngpus;
		     k++)
			if (a->node.gpus[k].state == AG_GPU_LOST &&
			    strcmp(a->node.gpus[k].uuid, g->uuid) == 0)
				g->lost_xid = a->node.gpus[k].lost_xid;
		if (g->state == AG_GPU_LOST &&
		    (i >= a->node.ngpus || a->node.gpus[i].state != AG_GPU_LOST))
			log_error(NULL, "GPU lost", "gpu", g->uuid, "error", g->error);
		for (int k = 0; k < g->nxids; k++) {
			if (!ag_xid_add(a->xq[i], &a->nxq[i], MAX_PENDING_XIDS, g->xids[k].xid,
				g->xids[k].ts, g->xids[k].count))
				log_warn(NULL, "XID queue full, event dropped", "gpu", g->uuid);
			char x[16], c[16];
			snprintf(x, sizeof(x), "%d", g->xids[k].xid);
			snprintf(c, sizeof(c), "%d", g->xids[k].count);
			log_warn(NULL, "XID event", "gpu", g->uuid, "xid", x, "count", c);
			a->status_dirty = true;
		}
	}
	a->node = n;
	return 0;
}

/* The GPUs of d that could not be read in the last scan (mu held). */
static int
deferred_gpus(const struct agent *a, const struct desired *d)
{
	int n = 0;
	for (int i = 0; i < d->ngpus; i++)
		for (int k = 0; k < a->node.ngpus; k++)
			if (strcmp(a->node.gpus[k].uuid, d->gpus[i].uuid) == 0 &&
			    a->node.gpus[k].state != AG_GPU_OK)
				n++;
	return n;
}

/* Apply a->want to the hardware (mu held); its errors replace the last. */
static int
apply_want(struct agent *a)
{
	struct json_object *errors = json_object_new_array();
	bool changed[AG_MAX_GPUS] = { false };
	int changes = apply_desired_changed(a->b, &a->node, &a->want, &a->whole, errors, changed);
	/* the GPUs whose layout changed, named as in the scan applied to */
	const char *uuids[AG_MAX_GPUS];
	char names[AG_MAX_GPUS][AG_UUID_MAX];
	int nchanged = 0;
	for (int i = 0; i < a->node.ngpus && i < AG_MAX_GPUS; i++)
		if (changed[i]) {
			ag_strlcpy(names[nchanged], a->node.gpus[i].uuid, AG_UUID_MAX);
			uuids[nchanged] = names[nchanged];
			nchanged++;
		}
	(void)refresh(a);
	json_object_put(a->errors);
	a->errors = errors;
	a->reapply = deferred_gpus(a, &a->want) > 0;
	a->status_dirty = true;
	/* never in --dry-run: a->hook is NULL there */
	hook_notify(a->hook, uuids, nchanged, a->want.generation);
	return changes;
}

/*
 * Apply a document from the poller (from_poll) or the push listener.
 * Returns the generation now applied, -1 with err for a malformed
 * document, or -2 when nothing could be applied (discovery failed: the
 * caller backs off). A push of a generation at or below the applied one
 * is a no-op (a replay); so is such an answer to a poll, except one
 * BELOW the applied generation: the server was restored from a backup and
 * its document is the truth (docs/agent.md, "Generations").
 */
static long long
agent_submit_from(struct agent *a, struct json_object *doc, bool from_poll, char *err,
    size_t errlen)
{
	struct desired d;
	if (desired_parse(doc, &d, err, errlen) != 0) {
		log_warn(NULL, "malformed desired state", "error", err);
		return -1;
	}
	pthread_mutex_lock(&a->mu);
	bool restored = from_poll && d.generation < a->applied_gen;
	if (d.generation <= a->applied_gen && !restored) {
		long long g = a->applied_gen;
		pthread_mutex_unlock(&a->mu);
		return g;
	}
	char gen[32], was[32];
	snprintf(gen, sizeof(gen), "%lld", d.generation);
	snprintf(was, sizeof(was), "%lld", a->applied_gen);
	if (restored)
		log_warn(NULL, "the server's generation is below the applied one (restored?)",
		    "generation", gen, "applied", was);
	if (refresh(a) != 0) {
		/* no hardware view: do not claim this generation */
		pthread_mutex_unlock(&a->mu);
		snprintf(err, errlen, "discovery failed");
		return -2;
	}
	a->want = d;
	int changes = apply_want(a);
	a->applied_gen = d.generation;
	save_agent_json(a);
	char ch[16], ne[16];
	snprintf(ch, sizeof(ch), "%d", changes);
	snprintf(ne, sizeof(ne), "%zu", json_object_array_length(a->errors));
	log_info(NULL, "applied desired state", "generation", gen, "changes", ch, "errors", ne);
	if (a->reapply)
		log_warn(NULL,
		    "a GPU of the desired state is unreadable: applied again once it is");
	pthread_cond_broadcast(&a->cv);
	long long g = a->applied_gen;
	pthread_mutex_unlock(&a->mu);
	return g;
}

static long long
agent_submit(void *ctx, struct json_object *doc, char *err, size_t errlen)
{
	long long g = agent_submit_from(ctx, doc, false, err, errlen);
	return g == -2 ? -1 : g;
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
	/* 1 s doubling to 30 s, jittered: [d/2, d] */
	return time_backoff(1000, fails, 30000, ag_rand(0x7fffffffu));
}

/* A 401 for the token of generation gen: true when that token is still
 * the current one (re-enrolling is then due), false for a stale 401 (a
 * request sent before a re-enrollment), which is ignored: it never undoes
 * a newer token. */
static bool
mark_unauthorized(struct agent *a, const char *where, long long gen)
{
	pthread_mutex_lock(&a->mu);
	bool current = gen == a->token_gen;
	if (current) {
		if (!a->unauthorized)
			log_error(NULL, "the server rejected the node token (401)", "request",
			    where);
		a->unauthorized = true;
		pthread_cond_broadcast(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return current;
}

/* Send with the current node token. Returns the HTTP status, 0 when none
 * arrived; resp must be freed by the caller. A 401 answering a token
 * replaced meanwhile is sent again, once, with the new one. */
static long
call(struct agent *a, struct gp_client *c, const char *method, const char *path,
    struct json_object *body, struct gp_client_response *resp)
{
	for (int attempt = 0;; attempt++) {
		char tok[512];
		pthread_mutex_lock(&a->mu);
		ag_strlcpy(tok, a->token, sizeof(tok));
		long long gen = a->token_gen;
		pthread_mutex_unlock(&a->mu);
		int rc = gp_client_set_token(c, tok[0] ? tok : NULL);
		memset(tok, 0, sizeof(tok));
		if (rc != 0) {
			memset(resp, 0, sizeof(*resp));
			return 0;
		}
		if (gp_client_send_json(c, method, path, body, NULL, resp) != 0)
			return 0;
		if (resp->status != 401 || mark_unauthorized(a, path, gen) || attempt > 0)
			return resp->status;
		gp_client_response_free(resp);
	}
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
	digest_sha256_hex(tok, strlen(tok), hash);
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
	struct ag_node readable = a->node; /* a lost GPU has nothing to enroll */
	readable.ngpus = 0;
	for (int i = 0; i < a->node.ngpus; i++)
		if (a->node.gpus[i].state != AG_GPU_LOST)
			readable.gpus[readable.ngpus++] = a->node.gpus[i];
	struct json_object *gpus = report_enroll_gpus(&readable);
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
			a->token_gen++;
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
	/* a stop must not wait out the long-poll (up to --poll-interval, 30 s
	 * by default: as long as Kubernetes' default termination grace) */
	gp_client_set_abort_flag(c, &g_stop_b);
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
			long long g = agent_submit_from(a, r.json, true, err, sizeof(err));
			if (g == -2) {
				/* nothing applied (no hardware view): back off, never
				 * a hot GET + discovery loop */
				gp_client_response_free(&r);
				ag_sleep_ms(backoff_ms(fails++), &g_stop_b);
				continue;
			}
			if (g >= 0)
				after = g;
			fails = 0;
		} else if (st == 304) {
			fails = 0;
		} else if (st == 401) {
			/* the reporter re-enrolls or exits */
		} else if (g_stop) {
			gp_client_response_free(&r); /* the long-poll given up: stopping */
			break;
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
status_doc(struct agent *a, struct ag_xid (*sent_xids)[MAX_PENDING_XIDS], int *nsent, char *fp)
{
	struct json_object *gpus = report_status_gpus(&a->node);
	struct json_object *noxid = json_object_new_array();
	for (size_t i = 0; i < json_object_array_length(gpus) && i < AG_MAX_GPUS; i++) {
		struct json_object *g = json_object_array_get_idx(gpus, i);
		struct json_object *xa = json_object_new_array();
		for (int k = 0; k < a->nxq[i]; k++) {
			json_object_array_add(xa, report_xid(&a->xq[i][k]));
			sent_xids[i][k] = a->xq[i][k];
		}
		nsent[i] = a->nxq[i];
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
	const char *fs = json_object_to_json_string_ext(f, JSON_C_TO_STRING_PLAIN);
	digest_sha256_hex(fs, strlen(fs), fp);
	json_object_put(f);
	return doc;
}

/* Status when changed or due, else a heartbeat. Returns false on failure. */
static bool
report_tick(struct agent *a, struct gp_client *c)
{
	static struct ag_xid sent[AG_MAX_GPUS][MAX_PENDING_XIDS]; /* reporter thread only */
	int nsent[AG_MAX_GPUS] = { 0 };
	char fp[65];
	pthread_mutex_lock(&a->mu);
	(void)refresh(a);
	if (a->reapply && deferred_gpus(a, &a->want) == 0) {
		log_info(NULL, "the GPUs of the desired state are readable again: applying it");
		(void)apply_want(a);
	}
	struct json_object *doc = status_doc(a, sent, nsent, fp);
	bool xids = false;
	for (int i = 0; i < AG_MAX_GPUS; i++)
		xids |= nsent[i] > 0;
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
			/* what was sent leaves the queue; events coalesced into
			 * an entry meanwhile stay (matched by code) */
			for (int i = 0; i < AG_MAX_GPUS; i++)
				for (int k = 0; k < nsent[i]; k++)
					ag_xid_take(a->xq[i], &a->nxq[i], &sent[i][k]);
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

/* How many of the oldest samples make one batch: at most max samples and
 * a body ({"samples":[…]}) of at most AGENT_METRICS_MAX_BATCH_BYTES; at
 * least one. */
static size_t
metrics_batch_len(struct json_object *samples, size_t max)
{
	size_t total = json_object_array_length(samples), n = 0;
	size_t bytes = sizeof("{\"samples\":[]}") - 1;
	if (max == 0 || max > AGENT_METRICS_MAX_BATCH_SAMPLES)
		max = AGENT_METRICS_MAX_BATCH_SAMPLES;
	while (n < total && n < max) {
		size_t len =
		    strlen(json_object_to_json_string_ext(json_object_array_get_idx(samples, n),
			JSON_C_TO_STRING_PLAIN)) +
		    1; /* the comma */
		if (n > 0 && bytes + len > AGENT_METRICS_MAX_BATCH_BYTES)
			break;
		bytes += len;
		n++;
	}
	return n;
}

/* A 200 that lists samples rejected one by one: counted in the log (they
 * are not sent again: the server said why they are wrong). */
static void
metrics_log_rejected(struct json_object *answer)
{
	struct json_object *rej = gp_client_json_get(answer, "rejected");
	struct json_object *cnt = gp_client_json_get(answer, "rejected_count");
	long long n = cnt != NULL ? json_object_get_int64(cnt)
	    : rej != NULL && json_object_is_type(rej, json_type_array)
	    ? (long long)json_object_array_length(rej)
	    : 0;
	if (n <= 0)
		return;
	char b[32], why[160] = "";
	snprintf(b, sizeof(b), "%lld", n);
	struct json_object *first = rej != NULL && json_object_is_type(rej, json_type_array)
	    ? json_object_array_get_idx(rej, 0)
	    : NULL;
	struct json_object *reason = first != NULL ? gp_client_json_get(first, "reason") : NULL;
	if (reason != NULL)
		ag_strlcpy(why, json_object_get_string(reason), sizeof(why));
	log_warn(NULL, "metrics: samples rejected by the server, not resent", "count", b,
	    "first_reason", why);
}

/*
 * metrics_sample takes one round of samples into the bounded buffer (on
 * schedule, whether the server is there or not); metrics_send sends the
 * buffer, oldest first, in batches bounded by AGENT_METRICS_MAX_BATCH_BYTES of JSON body and
 * AGENT_METRICS_MAX_BATCH_SAMPLES samples. A 413 halves the batch (down
 * to one sample) and tries again at once: the same oversized batch is
 * never sent twice. A batch the server refuses as a whole (400, 422) is
 * dropped with one log line; samples a 200 lists as "rejected" are
 * counted in the log and not resent.
 */
static void
metrics_sample(struct agent *a)
{
	scrape_dcgm(a);
	long long ts_ms = ag_now_ms();
	pthread_mutex_lock(&a->mu);
	if (refresh(a) == 0)
		report_samples(&a->node, ts_ms, a->samples);
	/* MIG devices: telemetry only dcgm-exporter has */
	for (int i = 0; a->dcgm_ok && !a->discovery_failed && i < a->ndcgm; i++) {
		struct dcgm_device *d = &a->dcgm[i];
		if (d->gi_id < 0)
			continue;
		const char *dev = dcgm_device_uuid(&a->node, d->gpu_uuid, d->gi_id);
		if (dev == NULL)
			continue;
		struct json_object *o = json_object_new_object();
		json_object_object_add(o, "ts", report_time_ms(ts_ms));
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
}

static bool
metrics_send(struct agent *a, struct gp_client *c)
{
	while (json_object_array_length(a->samples) > 0) {
		size_t batch = metrics_batch_len(a->samples, a->batch_max);
		struct json_object *arr = json_object_new_array();
		for (size_t i = 0; i < batch; i++)
			json_object_array_add(arr,
			    json_object_get(json_object_array_get_idx(a->samples, i)));
		struct json_object *body = json_object_new_object();
		json_object_object_add(body, "samples", arr);
		struct gp_client_response r;
		long st = call(a, c, "POST", "/v1/agent/metrics", body, &r);
		json_object_put(body);
		if (st == 413) {
			char b[32];
			a->batch_max = batch > 1 ? batch / 2 : 1;
			snprintf(b, sizeof(b), "%zu", a->batch_max);
			log_warn(NULL, "metrics batch too large (413); halved", "samples", b);
			gp_client_response_free(&r);
			if (batch > 1)
				continue;
			/* one sample too large: it can never go */
			json_object_array_del_idx(a->samples, 0, 1);
			a->dropped_samples++;
			continue;
		}
		if (st == 202 || st == 200 || st == 404 || st == 405 || st == 400 || st == 422) {
			if (st == 404 || st == 405) {
				if (!a->metrics_missing_logged)
					log_warn(NULL,
					    "the server takes no metrics (no "
					    "/v1/agent/metrics); samples dropped");
				a->metrics_missing_logged = true;
			} else if (st == 400 || st == 422) {
				log_http("metrics refused; batch dropped", &r);
			} else {
				metrics_log_rejected(r.json);
				/* grow back after a 413, one doubling per batch taken */
				if (a->batch_max < AGENT_METRICS_MAX_BATCH_SAMPLES)
					a->batch_max =
					    a->batch_max * 2 > AGENT_METRICS_MAX_BATCH_SAMPLES
					    ? AGENT_METRICS_MAX_BATCH_SAMPLES
					    : a->batch_max * 2;
			}
			json_object_array_del_idx(a->samples, 0, batch);
			gp_client_response_free(&r);
			continue;
		}
		char held[32];
		snprintf(held, sizeof(held), "%zu", json_object_array_length(a->samples));
		if (st == 0)
			log_warn(NULL, "metrics: server unreachable; kept for later", "error",
			    r.error, "buffered", held);
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
	char fp[DIGEST_SHA256_HEX_LEN];
	const char *bs = json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN);
	digest_sha256_hex(bs, strlen(bs), fp);
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

/* The state dir holds the node token: a real directory (never a symlink),
 * owned by the agent's user, 0700. Created when missing. */
static int
ensure_state_dir(const char *dir)
{
	struct stat st;
	if (lstat(dir, &st) != 0) {
		if (errno != ENOENT || mkdir(dir, 0700) != 0) {
			fprintf(stderr, "gpupool-agent: cannot create %s: %s\n", dir,
			    strerror(errno));
			return -1;
		}
		if (lstat(dir, &st) != 0)
			return -1;
	}
	if (S_ISLNK(st.st_mode)) {
		fprintf(stderr,
		    "gpupool-agent: %s is a symbolic link; refusing it as the state dir (name "
		    "the directory itself)\n",
		    dir);
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "gpupool-agent: %s is not a directory\n", dir);
		return -1;
	}
	if (st.st_uid != geteuid()) {
		fprintf(stderr,
		    "gpupool-agent: %s belongs to uid %u, not to this agent's uid %u; refusing "
		    "it as the state dir\n",
		    dir, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	if ((st.st_mode & 077) != 0 && chmod(dir, st.st_mode & 0700) != 0) {
		fprintf(stderr, "gpupool-agent: cannot make %s 0700: %s\n", dir, strerror(errno));
		return -1;
	}
	return 0;
}

/*
 * The backend, the after-change hook, the signals, what the state dir
 * holds (the node token: *have) and the push listener. AGENT_EXIT_OK, or
 * AGENT_EXIT_CONFIG with the reason logged.
 */
static int
agent_open(struct agent *a, bool *have)
{
	const struct agent_config *cfg = a->cfg;
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
	a->b = ag_backend_open(cfg->backend, &bc, err, sizeof(err));
	if (a->b == NULL) {
		log_error(NULL, "backend failed", "backend", cfg->backend, "error", err);
		return AGENT_EXIT_CONFIG;
	}
	if (cfg->after_change_hook != NULL && cfg->dry_run)
		log_info(NULL, "dry run: the after-change hook is never run", "hook",
		    cfg->after_change_hook);
	else if (cfg->after_change_hook != NULL) {
		a->hook = hook_start(cfg->after_change_hook, cfg->after_change_hook_timeout,
		    cfg->node_name, err, sizeof(err));
		if (a->hook == NULL) {
			log_error(NULL, "--after-change-hook refused", "error", err);
			return AGENT_EXIT_CONFIG;
		}
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	load_agent_json(a);
	*have = read_secret_file(a, "token", a->token, sizeof(a->token));
	if (*have)
		a->token_gen = 1;
	a->batch_max = AGENT_METRICS_MAX_BATCH_SAMPLES;
	(void)read_secret_file(a, "push-secret", a->secret, sizeof(a->secret));
	if (cfg->listen != NULL) {
		a->push = push_start(cfg->listen, agent_submit, agent_secret, a, err, sizeof(err));
		if (a->push == NULL) {
			log_error(NULL, "push listener failed", "error", err);
			return AGENT_EXIT_CONFIG;
		}
		char port[16];
		snprintf(port, sizeof(port), "%d", push_port(a->push));
		log_info(NULL, "push listener up", "port", port);
	}
	return AGENT_EXIT_OK;
}

/*
 * Sleep until wake, a new apply (status now: *next_hb 0) or a 401; the
 * condition variable is checked every 200 ms at most (g_stop is a flag).
 */
static void
agent_wait(struct agent *a, long long wake, int hb_fails, long long *next_hb)
{
	pthread_mutex_lock(&a->mu);
	while (!g_stop && !a->unauthorized && !(a->status_dirty && hb_fails == 0) &&
	    ag_mono_ms() < wake) {
		long long left = wake - ag_mono_ms();
		if (left > 200)
			left = 200;
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += (left > 0 ? left : 0) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&a->cv, &a->mu, &ts);
	}
	if (a->status_dirty && hb_fails == 0)
		*next_hb = 0;
	pthread_mutex_unlock(&a->mu);
}

/*
 * The main thread's ticks until stopped: heartbeat and status, metrics
 * (sampled on schedule, sent with their own back-off), workload
 * profiles, and the one re-enrollment after a 401. Its exit code.
 */
static int
agent_loop(struct agent *a, struct gp_client *c)
{
	const struct agent_config *cfg = a->cfg;
	long long metrics_ms = cfg->metrics_interval_ms > 0 ? cfg->metrics_interval_ms
							    : cfg->metrics_interval * 1000LL;
	long long hb_ms = cfg->heartbeat_interval * 1000LL;
	long long now = ag_mono_ms();
	long long next_hb = now, next_metrics = now + metrics_ms, next_send = next_metrics,
		  next_prof = now + 2000;
	int hb_fails = 0, m_fails = 0, p_fails = 0;
	while (!g_stop) {
		pthread_mutex_lock(&a->mu);
		bool unauth = a->unauthorized;
		pthread_mutex_unlock(&a->mu);
		if (unauth) {
			/* the one re-enrollment: this thread alone enrolls, the
			 * poller waits for the new token; all resume at once */
			int code = enroll(a, c);
			if (code != 0)
				return code;
			next_hb = next_metrics = next_send = next_prof = ag_mono_ms();
			hb_fails = m_fails = p_fails = 0;
		}
		now = ag_mono_ms();
		if (now >= next_hb) {
			bool ok = report_tick(a, c);
			hb_fails = ok ? 0 : hb_fails + 1;
			next_hb = ag_mono_ms() +
			    (ok ? hb_ms
				: (backoff_ms(hb_fails) < hb_ms ? backoff_ms(hb_fails) : hb_ms));
		}
		if (now >= next_metrics) {
			/* samples on schedule; sending backs off on its own */
			metrics_sample(a);
			next_metrics = ag_mono_ms() + metrics_ms;
			if (now >= next_send) {
				bool ok = metrics_send(a, c);
				m_fails = ok ? 0 : m_fails + 1;
				next_send = ok ? 0 : ag_mono_ms() + backoff_ms(m_fails);
			}
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
		agent_wait(a, wake, hb_fails, &next_hb);
	}
	return AGENT_EXIT_OK;
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
	bool have = false;
	int code = agent_open(a, &have);
	if (code != AGENT_EXIT_OK)
		goto out;
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
	code = agent_loop(a, c);
	g_stop = 1;
	g_stop_b = true;
	pthread_join(pt, NULL);
	gp_client_destroy(c);
out:
	push_stop(a->push);
	hook_stop(a->hook); /* after the appliers: nothing notifies it any more */
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
