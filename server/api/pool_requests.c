/*
 * pool_requests.c - the pool-request workflow: submit, list, get, and
 * the decisions approve / reject / cancel. The approval transaction
 * (docs/pools.md) re-validates the request, locks candidate GPUs, runs
 * the placement engine and applies the result in one statement; a
 * shrink or release chooses the allocations to free so that GPUs become
 * whole again.
 *
 * Candidate GPUs. A request never scans the fleet: GPUs alike in model,
 * MIG mode and layout (a layout class) are interchangeable for the
 * engine, which breaks ties by (node, index), so it is enough to load,
 * per useful class, the first few GPUs in that order. The classes of a
 * model come from a skip scan of gpus_placeable_idx, cached per process
 * for CLASS_CACHE_MAX_AGE_US (a hint only: every candidate is locked and
 * its layout re-read before the engine sees it). The fast path takes the
 * classes that pack best plus the empty GPUs, skipping GPUs and nodes
 * other approvals hold (SKIP LOCKED and a per-node advisory lock), so
 * concurrent approvals spread out instead of queueing. When that finds
 * no placement, the slow path refreshes the classes, takes enough GPUs
 * of every useful class and waits for locks: only then is the answer
 * 409 insufficient_capacity.
 */
#include "pools.h"
#include "batch.h"
#include "capacity.h"

#include "core/log.h"
#include "core/strbuf.h"
#include "core/timeutil.h"
#include "db/db_projects.h"
#include "domain/placement.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLASS_CACHE_MAX_AGE_US 1000000 /* layout classes of a model, per process */
#define CLASS_SLOW_MAX_AGE_US 50000    /* the slow path's: just re-read */
#define CLASS_CACHE_MODELS 32
#define FAST_PARTIAL_CLASSES 4 /* partly used classes the fast path tries */
#define FAST_PER_CLASS 8       /* GPUs per partly used class, fast path */
#define SLOW_PER_CLASS 256     /* GPUs per class at most, slow path */
#define EMPTY_PER_CLASS 512    /* empty GPUs per MIG mode at most */
#define SLOW_PASSES 4          /* slow-path reads while they find more GPUs */
#define JUSTIFICATION_MAX 2000
#define NOTE_MAX 2000

/* ---- layout classes ---- */

struct class_entry {
	bool mig_enabled;
	const char *layout;
	bool valid;             /* the layout parsed under the rules */
	struct placement_gpu g; /* the class as the engine sees one GPU of it */
};

/*
 * Process-wide cache of the layout classes per model. Shared by the
 * request threads under a mutex; entries are replaced whole (malloc'd
 * copies), readers get arena copies.
 */
static struct {
	pthread_mutex_t lock;
	struct {
		char model[CATALOG_NAME_MAX];
		int64_t fetched_us;
		struct class_entry *v; /* malloc: entries, then the layout strings */
		int n;
	} m[CLASS_CACHE_MODELS];
	int n;
} class_cache = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct class_entry *
class_copy(struct arena *a, const struct class_entry *v, int n)
{
	struct class_entry *out = arena_alloc(a, sizeof(*out) * (size_t)(n + 1));

	for (int i = 0; i < n; i++) {
		out[i] = v[i];
		out[i].layout = arena_strdup(a, v[i].layout);
	}
	return out;
}

static void
class_cache_store(const char *model, const struct class_entry *v, int n, int64_t now)
{
	size_t bytes = sizeof(*v) * (size_t)(n + 1);
	struct class_entry *copy;
	char *s;
	int slot;

	for (int i = 0; i < n; i++)
		bytes += strlen(v[i].layout) + 1;
	copy = malloc(bytes);
	if (copy == NULL)
		return;
	s = (char *)(copy + n + 1);
	for (int i = 0; i < n; i++) {
		size_t len = strlen(v[i].layout) + 1;

		copy[i] = v[i];
		memcpy(s, v[i].layout, len);
		copy[i].layout = s;
		s += len;
	}
	pthread_mutex_lock(&class_cache.lock);
	for (slot = 0; slot < class_cache.n; slot++)
		if (strcmp(class_cache.m[slot].model, model) == 0)
			break;
	if (slot == class_cache.n) {
		if (class_cache.n == CLASS_CACHE_MODELS) {
			pthread_mutex_unlock(&class_cache.lock);
			free(copy);
			return;
		}
		class_cache.n++;
		snprintf(class_cache.m[slot].model, sizeof(class_cache.m[slot].model), "%s", model);
		class_cache.m[slot].v = NULL;
	}
	free(class_cache.m[slot].v);
	class_cache.m[slot].v = copy;
	class_cache.m[slot].n = n;
	class_cache.m[slot].fetched_us = now;
	pthread_mutex_unlock(&class_cache.lock);
}

/* The layout classes of model m, at most max_age_us old (0: read them now). */
static int
classes_get(struct db *db, struct arena *a, const struct gpu_model *m, int64_t max_age_us,
    struct class_entry **out, int *n, struct gp_error *err)
{
	int64_t now = time_mono_us();
	struct layout_key *keys;
	struct class_entry *v;
	int nk;

	if (max_age_us > 0) {
		pthread_mutex_lock(&class_cache.lock);
		for (int i = 0; i < class_cache.n; i++) {
			if (strcmp(class_cache.m[i].model, m->id) != 0 ||
			    now - class_cache.m[i].fetched_us > max_age_us)
				continue;
			*out = class_copy(a, class_cache.m[i].v, class_cache.m[i].n);
			*n = class_cache.m[i].n;
			pthread_mutex_unlock(&class_cache.lock);
			return 0;
		}
		pthread_mutex_unlock(&class_cache.lock);
	}
	if (db_layout_classes(db, a, m->id, &keys, &nk, err) < 0)
		return -1;
	v = arena_alloc(a, sizeof(*v) * (size_t)(nk + 1));
	for (int i = 0; i < nk; i++) {
		v[i].mig_enabled = keys[i].mig_enabled;
		v[i].layout = keys[i].layout;
		placement_gpu_init(&v[i].g, m, 0, 0, 0, keys[i].mig_enabled);
		v[i].valid = capacity_layout_apply(&v[i].g, keys[i].layout) == 0;
	}
	class_cache_store(m->id, v, nk, now);
	*out = v;
	*n = nk;
	return 0;
}

/* ---- candidates and placement ---- */

struct placed {
	const struct locked_gpu *gpu;
	int item;
	const char *profile; /* "full" or a MIG profile name */
	int start;
	int size;
	bool mode_switch;
};

struct class_rank {
	const struct class_entry *c;
	int instances;
};

static int
class_rank_cmp(const void *pa, const void *pb)
{
	const struct class_rank *a = pa, *b = pb;

	if (a->instances != b->instances)
		return b->instances - a->instances; /* pack: busiest first */
	if (a->c->mig_enabled != b->c->mig_enabled)
		return a->c->mig_enabled ? -1 : 1;
	return strcmp(a->c->layout, b->c->layout);
}

/*
 * Append to w the classes to lock for the items of model m (indexes
 * idx[0..nidx) into items). fast: the FAST_PARTIAL_CLASSES busiest
 * useful classes; otherwise every useful class. held: GPUs of the
 * transaction's set already (their layout there may be fuller than
 * in the database): each class reaches that many GPUs further.
 */
static int
wants_for_model(struct db *db, struct arena *a, const struct gpu_model *m,
    const struct spec_count *items, const int *idx, int nidx, bool fast, int held,
    struct candidate_want *w, int *nw, int cap, struct gp_error *err)
{
	const struct mig_profile *profs[POOL_MAX_ITEMS];
	struct class_entry *cls;
	struct class_rank *rank;
	struct placement_gpu empty;
	int ncls, nrank = 0, need = 0, empty_limit = 0, per;

	for (int i = 0; i < nidx; i++) {
		const struct spec_count *s = &items[idx[i]];
		int h;

		profs[i] = spec_is_full(s) ? NULL : catalog_profile(m, s->profile);
		placement_gpu_init(&empty, m, 0, 0, 0, profs[i] != NULL && m->mig_capable);
		h = placement_gpu_headroom(&empty, profs[i]);
		need += s->count;
		empty_limit += (s->count + (h > 0 ? h : 1) - 1) / (h > 0 ? h : 1);
	}
	if (classes_get(db, a, m, fast ? CLASS_CACHE_MAX_AGE_US : CLASS_SLOW_MAX_AGE_US, &cls,
		&ncls, err) < 0)
		return -1;
	rank = arena_alloc(a, sizeof(*rank) * (size_t)(ncls + 1));
	for (int i = 0; i < ncls; i++) {
		bool useful = false;

		if (!cls[i].valid || cls[i].layout[0] == '\0')
			continue;
		for (int k = 0; k < nidx && !useful; k++)
			useful = placement_gpu_headroom(&cls[i].g, profs[k]) > 0;
		if (!useful)
			continue;
		rank[nrank].c = &cls[i];
		rank[nrank].instances = cls[i].g.full_used ? 1 : cls[i].g.instances;
		nrank++;
	}
	qsort(rank, (size_t)nrank, sizeof(*rank), class_rank_cmp);
	if (fast && nrank > FAST_PARTIAL_CLASSES)
		nrank = FAST_PARTIAL_CLASSES;
	per = need < (fast ? FAST_PER_CLASS : SLOW_PER_CLASS)
	    ? need
	    : (fast ? FAST_PER_CLASS : SLOW_PER_CLASS);
	per += held;
	empty_limit += held;
	/* empty GPUs in both modes first (whether or not the cache knows them) */
	for (int mode = 1; mode >= 0; mode--) {
		if (*nw >= cap)
			break;
		if (mode == 1 && !m->mig_capable)
			continue;
		w[*nw].model = m->id;
		w[*nw].mig_enabled = mode == 1;
		w[*nw].layout = "";
		w[*nw].limit = empty_limit < EMPTY_PER_CLASS ? empty_limit : EMPTY_PER_CLASS;
		(*nw)++;
	}
	for (int i = 0; i < nrank; i++) {
		if (*nw >= cap)
			break;
		w[*nw].model = m->id;
		w[*nw].mig_enabled = rank[i].c->mig_enabled;
		w[*nw].layout = rank[i].c->layout;
		w[*nw].limit = per;
		(*nw)++;
	}
	return 0;
}

/*
 * Lock the candidates of one pass for items[0..nitems) (fast: the
 * busiest classes and the empty GPUs, skipping what others hold; slow:
 * every useful class, waiting for locks, each class held GPUs further)
 * into rows[0..*n).
 */
static int
candidates_fetch(struct db *db, struct arena *a, const struct catalog *c,
    const struct spec_count *items, int nitems, bool fast, int held, struct locked_gpu **rows,
    int *n, struct gp_error *err)
{
	struct candidate_want *w;
	int nw = 0, wcap = nitems * (FAST_PARTIAL_CLASSES + 2) + 8;
	bool done[POOL_MAX_ITEMS];

	memset(done, 0, sizeof(done));
	if (!fast)
		wcap = 0;
	/* the slow path re-reads the classes first (they size its wants) */
	for (int i = 0; i < nitems && !fast; i++) {
		struct class_entry *cls;
		int ncls;
		bool seen = false;

		for (int j = 0; j < i; j++)
			seen = seen || strcmp(items[j].model, items[i].model) == 0;
		if (classes_get(db, a, catalog_model(c, items[i].model),
			seen ? CLASS_SLOW_MAX_AGE_US : 0, &cls, &ncls, err) < 0)
			return -1;
		wcap += ncls + 2;
	}
	w = arena_alloc(a, sizeof(*w) * (size_t)(wcap + 1));
	for (int i = 0; i < nitems; i++) {
		const struct gpu_model *m = catalog_model(c, items[i].model);
		int idx[POOL_MAX_ITEMS], nidx = 0;

		if (done[i])
			continue;
		for (int j = i; j < nitems; j++) {
			if (strcmp(items[j].model, items[i].model) == 0) {
				idx[nidx++] = j;
				done[j] = true;
			}
		}
		if (wants_for_model(db, a, m, items, idx, nidx, fast, held, w, &nw, wcap, err) < 0)
			return -1;
	}
	return db_candidates_lock(db, a, w, nw, fast, rows, n, err);
}

/*
 * The GPUs one batch places on: the engine's view of every candidate
 * locked so far, with this batch's placements applied as they are made.
 */
struct place_set {
	struct placement_gpu *gpus;
	const struct locked_gpu **rows; /* rows[i]: what gpus[i] was read as */
	int n;
	int cap;
};

/* Add the locked rows[0..n) that set does not hold yet; returns how many. */
static int
place_set_add(struct arena *a, const struct catalog *c, struct place_set *set,
    const struct locked_gpu *rows, int n)
{
	int added = 0;

	for (int i = 0; i < n; i++) {
		const struct gpu_model *m = catalog_model(c, rows[i].model);
		struct placement_gpu *g;
		int j;

		if (m == NULL)
			continue;
		for (j = 0; j < set->n; j++)
			if (set->gpus[j].id == rows[i].id)
				break;
		if (j < set->n)
			continue; /* ours already, with this batch's placements */
		if (set->n == set->cap) {
			int ncap = set->cap * 2 + 64;
			struct placement_gpu *ng = arena_alloc(a, sizeof(*ng) * (size_t)ncap);
			const struct locked_gpu **nr = arena_alloc(a, sizeof(*nr) * (size_t)ncap);

			if (set->n > 0) {
				memcpy(ng, set->gpus, sizeof(*ng) * (size_t)set->n);
				memcpy(nr, set->rows, sizeof(*nr) * (size_t)set->n);
			}
			set->gpus = ng;
			set->rows = nr;
			set->cap = ncap;
		}
		g = &set->gpus[set->n];
		placement_gpu_init(g, m, rows[i].id, rows[i].node_id, rows[i].index,
		    rows[i].mig_enabled);
		if (capacity_layout_apply(g, rows[i].layout) < 0) {
			log_warn(NULL, "gpu layout breaks a hardware rule; not placing on it",
			    "gpu", rows[i].uuid, "layout", rows[i].layout);
			continue;
		}
		set->rows[set->n++] = &rows[i];
		added++;
	}
	return added;
}

/*
 * Place items on set and apply them there. 1: placed (*out[0..*nout) in
 * arena a), 0: insufficient (missing[] per item), -1: error.
 */
static int
place_set_take(struct arena *a, const struct catalog *c, struct place_set *set,
    const struct spec_count *items, int nitems, struct placed **out, int *nout, int *missing,
    struct gp_error *err)
{
	struct placement_result res;
	struct gp_error perr;
	int total = 0;

	for (int i = 0; i < nitems; i++)
		total += items[i].count;
	memset(&res, 0, sizeof(res));
	res.cap = total;
	res.placements = arena_alloc(a, sizeof(*res.placements) * (size_t)(total + 1));
	gp_error_clear(&perr);
	if (placement_find(c, set->gpus, set->n, items, nitems, PLACEMENT_APPLY, &res, &perr) < 0) {
		if (perr.status != 409) {
			*err = perr;
			return -1;
		}
		for (int i = 0; i < nitems; i++)
			missing[i] = res.missing[i];
		return 0;
	}
	*out = arena_alloc(a, sizeof(**out) * (size_t)(res.nplacements + 1));
	for (int i = 0; i < res.nplacements; i++) {
		const struct placement *p = &res.placements[i];
		struct placed *o = &(*out)[i];

		o->gpu = set->rows[p->gpu];
		o->item = p->item;
		o->profile = p->profile != NULL ? arena_strdup(a, p->profile->name) : SPEC_FULL;
		o->start = p->start;
		o->size = p->size;
		o->mode_switch = p->mode_switch;
	}
	*nout = res.nplacements;
	return 1;
}

/* ---- shared pieces ---- */

static int
request_load_visible(struct db *db, struct request *req, int64_t id, struct pool_request_row *out,
    enum project_role *prole, struct gp_error *err)
{
	struct project_row proj;
	struct gp_error e;
	bool found;

	if (db_request_get(db, req->arena, id, out, &found, err) < 0)
		return -1;
	gp_error_clear(&e);
	if (!found ||
	    api_project_access(db, req, out->project, PROJECT_READ, &proj, prole, &e) < 0) {
		if (found && e.status >= 500) {
			*err = e;
			return -1;
		}
		return gp_error_set(err, 404, "not_found", "no such pool request: %lld",
		    (long long)id);
	}
	return 0;
}

/* ---- submit ---- */

struct submit {
	enum pool_action action;
	const char *action_name;
	const char *pool;
	const char *justification;
	int64_t ends_us;
	bool has_ends;
	struct spec_count items[POOL_MAX_ITEMS];
	int nitems;
};

static int
submit_parse(struct request *req, struct submit *s, struct gp_error *err)
{
	struct json_object *body, *arr = NULL;
	struct jfields f;

	memset(s, 0, sizeof(*s));
	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_string(&f, "action", true, 16, &s->action_name) == 0 &&
	    pool_action_parse(s->action_name, &s->action) < 0)
		gp_error_field(err, "action", "must be one of create, expand, shrink, release");
	if (jf_string(&f, "pool", true, 63, &s->pool) == 0 && !api_dns_label(s->pool))
		gp_error_field(err, "pool",
		    "must be a DNS label: lower-case letters, digits and '-'");
	jf_array(&f, "items", false, &arr);
	jf_string(&f, "justification", false, JUSTIFICATION_MAX, &s->justification);
	jf_time(&f, "ends_at", false, &s->ends_us, &s->has_ends);
	if (gp_error_isset(err)) {
		(void)jf_finish(&f);
		return -1;
	}
	if (s->action == POOL_ACTION_RELEASE) {
		if (arr != NULL && json_object_array_length(arr) > 0)
			gp_error_field(err, "items",
			    "a release names no items: it frees the whole pool");
	} else if (arr == NULL) {
		gp_error_field(err, "items", "is required for %s", s->action_name);
	} else if (pools_items_read(req, arr, s->items, &s->nitems, err) < 0) {
		s->nitems = 0;
	}
	if (s->has_ends && s->action != POOL_ACTION_CREATE)
		gp_error_field(err, "ends_at", "only a create request sets the pool's end time");
	else if (s->has_ends && s->ends_us <= time_now_us())
		gp_error_field(err, "ends_at", "must be in the future");
	if (jf_finish(&f) < 0)
		return -1;
	if (s->justification == NULL)
		s->justification = "";
	return 0;
}

static int
quota_check_now(struct db *db, struct arena *a, int64_t project_id, bool lock,
    const struct spec_count *add, int nadd, struct json_object **item, struct gp_error *err)
{
	struct spec_count quota[POOL_MAX_ITEMS], usage[POOL_MAX_ITEMS];
	const char *qtext = NULL, *utext = NULL;
	int nq = 0, nu = 0, bad;
	bool has;

	if (lock) {
		if (db_quota_lock(db, a, project_id, &has, &qtext, err) < 0)
			return -1;
	} else if (db_quota_get(db, a, project_id, &has, &qtext, NULL, NULL, err) < 0) {
		return -1;
	}
	if (!has)
		return 0;
	if (db_project_usage(db, a, project_id, &utext, err) < 0 ||
	    pools_items_parse(qtext, quota, &nq, err) < 0 ||
	    pools_items_parse(utext, usage, &nu, err) < 0)
		return -1;
	if (pool_quota_check(true, quota, nq, usage, nu, add, nadd, &bad, err) == 0)
		return 0;
	if (item != NULL && bad >= 0) {
		struct json_object *o = json_object_new_object();

		json_add_str(o, "model", add[bad].model);
		json_add_str(o, "profile", add[bad].profile);
		json_add_int(o, "count", add[bad].count);
		json_add_int(o, "limit",
		    pool_items_count(quota, nq, add[bad].model, add[bad].profile));
		json_add_int(o, "used",
		    pool_items_count(usage, nu, add[bad].model, add[bad].profile));
		*item = json_own(a, o);
	}
	return -1;
}

/*
 * An error answer with extra members: the problem document of err plus
 * key: val (ownership of val passes here).
 */
static int
reply_problem_with(struct request *req, struct response *res, const struct gp_error *err,
    const char *key, struct json_object *val)
{
	struct json_object *o;

	response_problem(req, res, err);
	o = json_tokener_parse(res->body);
	if (o == NULL) {
		json_object_put(val);
		return 0;
	}
	json_object_object_add(o, key, val);
	response_json(req, res, err->status, o);
	res->content_type = "application/problem+json";
	return 0;
}

/*
 * Submissions are group-committed like approvals: the handler validates
 * (project access, the pool for expand / shrink / release) and queues the
 * insert; a submissions worker inserts everything queued in one
 * statement sent with COMMIT (db_requests_submit_many). A create whose
 * pool name is taken is refused alone; a project with a quota is checked
 * and inserted alone, by the handler, after the batch.
 */
#define SUBMIT_BATCH_MAX 64

static atomic_uint_fast64_t stat_submit_batches;
static atomic_uint_fast64_t stat_submit_items;

struct submit_job {
	struct request *req;
	bool inline_run; /* run by its handler: the queue was stopping */
	struct submit s;
	struct project_row proj;
	struct request_submit rs;
	/* filled by the batch */
	int rc;
	struct gp_error err;
	struct submit_result res;
};

struct submit_batch {
	struct submit_job **v;
	int n;
	struct arena *a;
};

/* A submission's answer: 201, the request, its ETag and Location. */
static void
submit_answer(struct request *req, struct response *res, struct pool_request_row out,
    const char *project)
{
	out.project = project;
	response_json(req, res, 201, pools_request_json(&out, NULL, 0));
	api_etag(req, res, out.generation);
	response_header(res, "Location",
	    arena_printf(req->arena, "/v1/pool-requests/%lld", (long long)out.id));
}

static int
submit_batch_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct submit_batch *b = arg;
	const struct request_submit **rs = arena_alloc(b->a, sizeof(*rs) * (size_t)b->n);
	struct submit_result *res = arena_alloc(b->a, sizeof(*res) * (size_t)b->n);
	bool *dup = arena_alloc(b->a, sizeof(*dup) * (size_t)b->n);
	int m = 0;

	/* Idempotency-Keys first: a duplicate inserts nothing */
	for (int i = 0; i < b->n; i++) {
		if (api_idem_claim(db, b->v[i]->req, &dup[i], err) < 0)
			return -1;
		if (!dup[i])
			rs[m++] = &b->v[i]->rs;
	}
	if (m > 0 && db_requests_submit_many(db, b->a, rs, m, res, err) < 0)
		return -1;
	for (int i = 0, k = 0; i < b->n; i++) {
		struct submit_job *j = b->v[i];
		struct response answer;

		if (dup[i])
			continue;
		j->res = res[k++];
		if (j->res.conflict || j->res.needs_quota)
			continue;
		/* the answer commits with the submission */
		memset(&answer, 0, sizeof(answer));
		submit_answer(j->req, &answer, j->res.out, j->proj.name);
		if (api_idem_keep(db, j->req, &answer, err) < 0)
			return -1;
	}
	return 0;
}

static void
submit_done(struct submit_job *j)
{
	if (!j->inline_run)
		api_wake(j->req);
}

/* The submissions worker's batch (batch.c): insert, then wake every handler. */
static void
submit_run(struct db *db, void **items, int n, void *arg)
{
	struct submit_batch b = { (struct submit_job **)items, n, arena_create() };
	struct gp_error err;

	(void)arg;
	gp_error_clear(&err);
	if (db_tx(db, submit_batch_tx, &b, &err) < 0) {
		arena_destroy(b.a);
		if (n > 1 && err.status != 503) {
			log_warn(NULL,
			    "a submission batch failed; inserting its submissions one by one",
			    "error", err.message);
			for (int i = 0; i < n; i++)
				submit_run(db, &items[i], 1, arg);
			return;
		}
		for (int i = 0; i < n; i++) {
			b.v[i]->rc = -1;
			b.v[i]->err = err;
			submit_done(b.v[i]);
		}
		return;
	}
	arena_destroy(b.a);
	atomic_fetch_add(&stat_submit_batches, 1);
	atomic_fetch_add(&stat_submit_items, (uint_fast64_t)n);
	for (int i = 0; i < n; i++)
		submit_done(b.v[i]);
}

/* The answer, on an HTTP thread once the batch inserted (or refused) it. */
static int
submit_reply(struct request *req, struct response *res, void *arg, struct gp_error *err)
{
	struct submit_job *j = arg;
	struct pool_request_row out = j->res.out;
	struct json_object *qitem = NULL;
	bool needs_quota;

	if (j->rc < 0) {
		*err = j->err;
		return -1;
	}
	if (j->res.conflict)
		return gp_error_set(err, 409, "conflict", "the project already has a pool named %s",
		    j->rs.pool_name);
	if (j->res.needs_quota) {
		struct db *db = db_thread();

		if (quota_check_now(db, req->arena, j->proj.id, false, j->s.items, j->s.nitems,
			&qitem, err) < 0) {
			if (qitem != NULL)
				return reply_problem_with(req, res, err, "item",
				    json_object_get(qitem));
			return -1;
		}
		j->rs.quota_checked = true;
		if (db_request_submit(db, req->arena, &j->rs, &out, &needs_quota, err) < 0)
			return -1;
	}
	submit_answer(req, res, out, j->proj.name);
	return 0;
}

int
api_pool_requests_submit(struct request *req, struct response *res, struct gp_error *err)
{
	struct db *db = db_thread();
	struct project_row proj;
	struct pool_row pool;
	struct request_submit rs;
	struct submit_job *j;
	struct json_object *after;
	struct submit s;
	bool found;

	if (submit_parse(req, &s, err) < 0)
		return -1;
	if (api_project_access(db, req, req->params[0], PROJECT_SUBMIT, &proj, NULL, err) < 0)
		return -1;
	memset(&rs, 0, sizeof(rs));
	if (s.action != POOL_ACTION_CREATE) {
		struct spec_count have[POOL_MAX_ITEMS], left[POOL_MAX_ITEMS];
		enum pool_status st;
		int nhave, nleft;

		if (db_pool_by_name(db, req->arena, proj.id, s.pool, &pool, &found, err) < 0)
			return -1;
		if (!found)
			return gp_error_field(err, "pool", "project %s has no pool named %s",
			    proj.name, s.pool);
		if (pool_status_parse(pool.status, &st) < 0)
			st = POOL_STATUS_RELEASED;
		if (pool_status_accepts(st, s.action, pool.name, err) < 0)
			return -1;
		if (s.action == POOL_ACTION_SHRINK) {
			if (pools_items_parse(pool.items_json, have, &nhave, err) < 0 ||
			    pool_items_subtract(have, nhave, s.items, s.nitems, left, &nleft, err) <
				0)
				return -1;
			if (nleft == 0)
				return gp_error_set(err, 409, "conflict",
				    "the shrink would leave pool %s empty; "
				    "request a release instead",
				    pool.name);
		}
		rs.pool_id = pool.id;
	}
	after = json_own(req->arena, json_object_new_object());
	json_add_str(after, "project", proj.name);
	json_add_str(after, "pool", s.pool);
	json_add_str(after, "action", s.action_name);
	json_add_str(after, "state", "pending");
	json_object_object_add(after, "items", pools_items_json(s.items, s.nitems));
	json_add_str(after, "justification", s.justification);
	rs.project_id = proj.id;
	rs.pool_name = s.pool;
	rs.action = s.action_name;
	rs.items_json = pools_items_text(req->arena, s.items, s.nitems);
	rs.justification = s.justification;
	rs.ends_us = s.has_ends ? s.ends_us : 0;
	rs.ttl_s = api_app(req)->request_ttl_s > 0 ? api_app(req)->request_ttl_s : 7 * 86400;
	rs.actor_id = req->principal.user_id;
	rs.actor = req->principal.username;
	rs.http_request_id = req->request_id;
	rs.audit_after_json = json_to_arena(req->arena, after, NULL);
	/* only growth is limited by a quota; the statement says whether there is one */
	rs.quota_checked = s.action != POOL_ACTION_CREATE && s.action != POOL_ACTION_EXPAND;
	/* the insert itself is group-committed with others (submit_run) */
	j = arena_alloc(req->arena, sizeof(*j));
	memset(j, 0, sizeof(*j));
	j->req = req;
	j->s = s;
	j->proj = proj;
	j->rs = rs;
	if (batch_push(api_app(req)->submits, j))
		return api_defer(req, submit_reply, j);
	/* shutting down: the workers are gone, insert it here */
	j->inline_run = true;
	submit_run(db, (void **)&j, 1, api_app(req));
	return submit_reply(req, res, j, err);
}

/* ---- list and get ---- */

int
api_pool_requests_list(struct request *req, struct response *res, struct gp_error *err)
{
	const char *state = req->query(req, "state");
	const char *project = req->query(req, "project");
	struct request_filter f;
	struct pool_request_row *rows;
	struct json_object *items;
	enum pool_request_state st;
	int64_t cursor;
	int limit, n;

	memset(&f, 0, sizeof(f));
	if (api_page(req, &limit, &cursor, err) < 0)
		return -1;
	if (state != NULL && pool_request_state_parse(state, &st) < 0)
		return gp_error_field(err, "state",
		    "must be one of pending, approved, fulfilled, "
		    "failed, rejected, cancelled, expired");
	if (project != NULL) {
		struct project_row p;

		if (api_project_access(db_thread(), req, project, PROJECT_READ, &p, NULL, err) < 0)
			return -1;
		f.project_id = p.id;
	}
	if (!role_sees_all_projects(api_role(req)))
		f.member_user_id = req->principal.user_id;
	f.state = state;
	if (db_requests_list(db_thread(), req->arena, &f, cursor, limit + 1, &rows, &n, err) < 0)
		return -1;
	items = json_object_new_array();
	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, pools_request_json(&rows[i], NULL, 0));
	api_reply_list(req, res, items, n > limit ? rows[limit - 1].id : 0);
	return 0;
}

int
api_pool_requests_get(struct request *req, struct response *res, struct gp_error *err)
{
	struct pool_request_row r;
	struct pool_request_event *ev;
	int64_t id;
	int nev;

	if (api_param_id(req, 0, &id, err) < 0)
		return -1;
	if (request_load_visible(db_thread(), req, id, &r, NULL, err) < 0)
		return -1;
	if (db_request_events(db_thread(), req->arena, id, &ev, &nev, err) < 0)
		return -1;
	response_json(req, res, 200, pools_request_json(&r, ev, nev));
	api_etag(req, res, r.generation);
	return 0;
}

/* ---- approve: group commit ---- */

/*
 * Approvals are group-committed. The handler queues the approval and
 * defers its answer; the approvals worker (batch.c, one thread, its own
 * connection) takes what is queued and decides all of it in one
 * transaction: lock every request and its pool (id order), validate
 * each, check quotas, place every create / expand on one set of locked
 * candidate GPUs (one approval after the other, each seeing the
 * placements before it), apply each shrink or release with a statement
 * of its own, then every create / expand in one statement sent with
 * COMMIT. An approval that is refused (404, 409, 422) changes nothing and
 * does not stop the others. Two approvals of one pool, or of one project
 * under a quota, never share a batch: the later one waits for the next.
 * When the transaction itself fails (after db_tx's retries), every
 * approval of the batch is tried again alone, so that one approval that
 * breaks cannot fail the others.
 */

#define APPROVE_BATCH_MAX 32

/* for /metrics */
static atomic_uint_fast64_t stat_batches;     /* transactions that committed a batch */
static atomic_uint_fast64_t stat_batch_items; /* approvals they decided */
static atomic_uint_fast64_t stat_slow_paths;  /* placements that needed the slow path */
static atomic_uint_fast64_t stat_split;       /* failed batches decided one by one */

enum approve_outcome {
	APPROVE_OPEN,    /* still going ahead in this batch */
	APPROVE_DONE,    /* applied (once the batch commits) */
	APPROVE_REFUSED, /* err says why; nothing changed */
	APPROVE_LATER,   /* shares a pool or quota: next batch */
};

struct approve {
	struct request *req;
	bool inline_run; /* run by its handler: the queue was stopping */
	int64_t id;
	const char *note;
	/* decided by the batch */
	enum approve_outcome outcome;
	struct gp_error err;
	enum pool_action action;
	struct approval_ctx ax;
	struct approval_apply ap;
	struct spec_count items[POOL_MAX_ITEMS];
	int nitems;
	struct spec_count pool_items[POOL_MAX_ITEMS];
	int npool;
	struct placed *placed;
	int nplaced;
	struct live_alloc *freed;
	int nfreed;
	int missing[POOL_MAX_ITEMS];
	struct json_object *quota_item;
	const char *after; /* the approved request: audit row and reply */
	size_t after_len;
};

struct approve_batch {
	struct approve **v;
	int n;
	struct arena *a; /* the batch's own scratch */
};

static bool
approve_is_grow(const struct approve *c)
{
	return c->action == POOL_ACTION_CREATE || c->action == POOL_ACTION_EXPAND;
}

static void
approve_refuse(struct approve *c, const struct gp_error *e)
{
	c->outcome = APPROVE_REFUSED;
	c->err = *e;
}

static struct json_object *
approve_allocs_json(const struct approve *c)
{
	struct json_object *arr = json_object_new_array();

	for (int i = 0; i < c->nplaced; i++) {
		const struct placed *p = &c->placed[i];

		json_object_array_add(arr,
		    pools_alloc_json(p->gpu->node, p->gpu->uuid, p->gpu->index, p->gpu->model,
			p->profile, p->start, p->size, "reserved", NULL));
	}
	for (int i = 0; i < c->nfreed; i++) {
		const struct live_alloc *f = &c->freed[i];

		json_object_array_add(arr,
		    pools_alloc_json(f->node, f->gpu_uuid, f->gpu_index, f->model, f->profile,
			f->start, f->size, "releasing", NULL));
	}
	return arr;
}

/* The request as the reply and the audit row show it once approved. */
static struct json_object *
approve_after_json(const struct approve *c)
{
	struct pool_request_row r = c->ax.req;
	struct json_object *o;

	r.state = "approved";
	r.decided_by = c->req->principal.username;
	r.decided_us = c->ax.now_us;
	r.note = c->note;
	r.generation++;
	o = pools_request_json(&r, NULL, 0);
	json_object_object_add(o, "allocations", approve_allocs_json(c));
	return o;
}

/* Re-validate a locked request; err (4xx) when it cannot be approved now. */
static int
approve_check(struct approve *c, struct gp_error *err)
{
	struct spec_count next[POOL_MAX_ITEMS];
	enum pool_request_state st;
	enum pool_status ps;
	int nnext = 0;

	if (pool_request_state_parse(c->ax.req.state, &st) < 0 ||
	    pool_request_transition(st, POOL_REQUEST_APPROVED, err) < 0)
		return -1;
	if (c->ax.req.expires_us <= c->ax.now_us)
		return gp_error_set(err, 409, "conflict", "the request expired");
	if (pool_action_parse(c->ax.req.action, &c->action) < 0 ||
	    pool_status_parse(c->ax.pool_status, &ps) < 0)
		return gp_error_set(err, 500, "internal", "a stored request is malformed");
	if (pool_status_accepts(ps, c->action, c->ax.req.pool, err) < 0)
		return -1;
	if (pools_items_parse(c->ax.req.items_json, c->items, &c->nitems, err) < 0 ||
	    pools_items_parse(c->ax.pool_items_json, c->pool_items, &c->npool, err) < 0)
		return -1;
	if (!approve_is_grow(c))
		return 0;
	if (pool_items_add(c->pool_items, c->npool, c->items, c->nitems, next, &nnext, err) < 0)
		return -1;
	if (c->ax.req.ends_us != 0 && c->ax.req.ends_us <= c->ax.now_us &&
	    c->action == POOL_ACTION_CREATE)
		return gp_error_set(err, 409, "conflict",
		    "the pool's requested end time has passed; reject the request");
	c->ap.new_items_json = pools_items_text(c->req->arena, next, nnext);
	return 0;
}

/* create / expand, once placed: what the apply statement needs. */
static void
approve_grow_fill(struct approve *c)
{
	struct arena *a = c->req->arena;
	struct approval_apply *ap = &c->ap;
	struct new_alloc *na = arena_alloc(a, sizeof(*na) * (size_t)(c->nplaced + 1));
	int64_t *sw = arena_alloc(a, sizeof(*sw) * (size_t)(c->nplaced + 1));
	const char **models = arena_alloc(a, sizeof(*models) * (size_t)(c->nitems + 1));
	const char **profiles = arena_alloc(a, sizeof(*profiles) * (size_t)(c->nitems + 1));
	int *counts = arena_alloc(a, sizeof(*counts) * (size_t)(c->nitems + 1));
	int nsw = 0;

	for (int i = 0; i < c->nplaced; i++) {
		const struct placed *p = &c->placed[i];
		int j;

		na[i].gpu_id = p->gpu->id;
		na[i].node_id = p->gpu->node_id;
		na[i].profile = p->profile;
		na[i].start = p->start;
		na[i].size = p->size;
		if (!p->mode_switch)
			continue;
		for (j = 0; j < nsw; j++)
			if (sw[j] == p->gpu->id)
				break;
		if (j == nsw)
			sw[nsw++] = p->gpu->id;
	}
	for (int i = 0; i < c->nitems; i++) {
		models[i] = c->items[i].model;
		profiles[i] = c->items[i].profile;
		counts[i] = c->items[i].count;
	}
	ap->new_status = "provisioning";
	ap->ends_us = c->ax.req.ends_us;
	ap->allocs = na;
	ap->nallocs = c->nplaced;
	ap->switch_gpu_ids = sw;
	ap->nswitch = nsw;
	ap->item_models = models;
	ap->item_profiles = profiles;
	ap->item_counts = counts;
	ap->nitems = c->nitems;
}

/* shrink / release: choose what to free. */
static int
approve_free(struct db *db, struct approve *c, bool release, struct gp_error *err)
{
	struct arena *a = c->req->arena;
	struct approval_apply *ap = &c->ap;
	struct spec_count *next = arena_alloc(a, sizeof(*next) * POOL_MAX_ITEMS);
	struct live_alloc *live;
	struct shrink_alloc *sa;
	bool *chosen;
	int64_t *ids, *nodes;
	const char **models, **profiles;
	int *counts, *want, nnext = 0, nlive, k = 0;

	if (!release) {
		if (pool_items_subtract(c->pool_items, c->npool, c->items, c->nitems, next, &nnext,
			err) < 0)
			return -1;
		if (nnext == 0)
			return gp_error_set(err, 409, "conflict",
			    "the shrink would leave the pool "
			    "empty; reject it and request a release");
	}
	if (db_pool_live_allocations(db, a, c->ax.req.pool_id, !release, &live, &nlive, err) < 0)
		return -1;
	sa = arena_alloc(a, sizeof(*sa) * (size_t)(nlive + 1));
	chosen = arena_alloc(a, sizeof(*chosen) * (size_t)(nlive + 1));
	want = arena_alloc(a, sizeof(*want) * (size_t)(c->nitems + 1));
	for (int i = 0; i < nlive; i++) {
		sa[i].id = live[i].id;
		sa[i].gpu_id = live[i].gpu_id;
		sa[i].start = live[i].start;
		sa[i].kind = -1;
		if (live[i].pool_id != c->ax.req.pool_id)
			continue;
		if (release) {
			chosen[i] = true;
			continue;
		}
		for (int j = 0; j < c->nitems; j++)
			if (strcmp(c->items[j].model, live[i].model) == 0 &&
			    strcmp(c->items[j].profile, live[i].profile) == 0)
				sa[i].kind = j;
	}
	for (int j = 0; j < c->nitems; j++)
		want[j] = c->items[j].count;
	if (!release && pool_shrink_choose(sa, nlive, want, c->nitems, chosen, err) < 0)
		return -1;
	ids = arena_alloc(a, sizeof(*ids) * (size_t)(nlive + 1));
	nodes = arena_alloc(a, sizeof(*nodes) * (size_t)(nlive + 1));
	c->freed = arena_alloc(a, sizeof(*c->freed) * (size_t)(nlive + 1));
	for (int i = 0; i < nlive; i++) {
		if (!chosen[i])
			continue;
		ids[k] = live[i].id;
		nodes[k] = live[i].node_id;
		c->freed[k++] = live[i];
	}
	c->nfreed = k;
	models = arena_alloc(a, sizeof(*models) * (size_t)(c->nitems + 1));
	profiles = arena_alloc(a, sizeof(*profiles) * (size_t)(c->nitems + 1));
	counts = arena_alloc(a, sizeof(*counts) * (size_t)(c->nitems + 1));
	for (int i = 0; i < c->nitems; i++) {
		models[i] = c->items[i].model;
		profiles[i] = c->items[i].profile;
		counts[i] = pool_items_count(next, nnext, c->items[i].model, c->items[i].profile);
	}
	ap->new_items_json = pools_items_text(a, next, nnext);
	ap->new_status = release ? "releasing" : c->ax.pool_status;
	ap->free_ids = ids;
	ap->nfree = k;
	ap->free_node_ids = nodes;
	ap->nfree_nodes = k;
	ap->keep_models = models;
	ap->keep_profiles = profiles;
	ap->keep_counts = counts;
	ap->nkeep = release ? 0 : c->nitems;
	return 0;
}

/* Who, why and the audit documents: the same for every action. */
static void
approve_fill_common(struct approve *c)
{
	struct request *req = c->req;
	struct approval_apply *ap = &c->ap;

	ap->request_id = c->id;
	ap->pool_id = c->ax.req.pool_id;
	ap->project_id = c->ax.req.project_id;
	ap->action = c->ax.req.action;
	ap->actor_id = req->principal.user_id;
	ap->actor = req->principal.username;
	ap->note = c->note;
	ap->http_request_id = req->request_id;
	ap->audit_before_json = json_to_arena(req->arena,
	    json_own(req->arena, pools_request_json(&c->ax.req, NULL, 0)), NULL);
	c->after =
	    json_to_arena(req->arena, json_own(req->arena, approve_after_json(c)), &c->after_len);
	ap->audit_after_json = c->after;
}

/*
 * A step of approval c failed with e: when a statement failed, the
 * transaction is lost and the whole batch fails (db_tx retries it);
 * otherwise c alone is refused.
 */
static int
approve_step_failed(struct db *db, struct approve *c, const struct gp_error *e,
    struct gp_error *err)
{
	if (db_tx_aborted(db) || e->status >= 500) {
		*err = *e;
		return -1;
	}
	approve_refuse(c, e);
	return 0;
}

/* Place every open create / expand of the batch, in batch order. */
static int
approve_place_all(struct db *db, struct approve_batch *b, struct gp_error *err)
{
	const struct catalog *cat = api_app(b->v[0]->req)->catalog;
	struct spec_count *sum = arena_alloc(b->a, sizeof(*sum) * POOL_MAX_ITEMS);
	struct place_set set;
	struct locked_gpu *rows;
	int nsum = 0, nrows;

	memset(&set, 0, sizeof(set));
	/* one candidate read for what the whole batch asks for */
	for (int i = 0; i < b->n; i++) {
		const struct approve *c = b->v[i];

		if (c->outcome != APPROVE_OPEN || !approve_is_grow(c))
			continue;
		for (int j = 0; j < c->nitems; j++) {
			int k;

			for (k = 0; k < nsum; k++)
				if (strcmp(sum[k].model, c->items[j].model) == 0 &&
				    strcmp(sum[k].profile, c->items[j].profile) == 0)
					break;
			if (k < nsum)
				sum[k].count += c->items[j].count;
			else if (nsum < POOL_MAX_ITEMS)
				sum[nsum++] = c->items[j];
		}
	}
	if (nsum == 0)
		return 0;
	if (candidates_fetch(db, b->a, cat, sum, nsum, true, 0, &rows, &nrows, err) < 0)
		return -1;
	place_set_add(b->a, cat, &set, rows, nrows);
	for (int i = 0; i < b->n; i++) {
		struct approve *c = b->v[i];
		struct gp_error e;
		int rc;

		if (c->outcome != APPROVE_OPEN || !approve_is_grow(c))
			continue;
		gp_error_clear(&e);
		rc = place_set_take(b->a, cat, &set, c->items, c->nitems, &c->placed, &c->nplaced,
		    c->missing, &e);
		/*
		 * The slow path: every useful class, waiting for locks, past the
		 * GPUs the set holds (earlier approvals of this batch may have
		 * filled them). A GPU whose lock it waited for may have changed
		 * class meanwhile (another transaction placed on it and
		 * committed) and drop out of the answer; the classes read again
		 * then show where it went. So it goes on while it finds GPUs the
		 * set lacks: only then is the answer insufficient capacity.
		 */
		for (int pass = 0; rc == 0 && pass < SLOW_PASSES; pass++) {
			if (pass == 0)
				atomic_fetch_add(&stat_slow_paths, 1);
			if (candidates_fetch(db, b->a, cat, c->items, c->nitems, false, set.n,
				&rows, &nrows, err) < 0)
				return -1;
			if (place_set_add(b->a, cat, &set, rows, nrows) == 0 && pass > 0)
				break;
			rc = place_set_take(b->a, cat, &set, c->items, c->nitems, &c->placed,
			    &c->nplaced, c->missing, &e);
		}
		if (rc < 0) {
			if (approve_step_failed(db, c, &e, err) < 0)
				return -1;
			continue;
		}
		if (rc == 0) {
			gp_error_set(&e, 409, "insufficient_capacity",
			    "the free capacity cannot hold every item of the request");
			approve_refuse(c, &e);
		}
	}
	return 0;
}

static int
approve_cmp_project(const void *pa, const void *pb)
{
	const struct approve *a = *(struct approve *const *)pa, *b = *(struct approve *const *)pb;

	return (a->ax.req.project_id > b->ax.req.project_id) -
	    (a->ax.req.project_id < b->ax.req.project_id);
}

/* An approval's answer: the approved request, the audit row's "after". */
static void
approve_answer(struct request *req, struct response *res, const struct approve *c)
{
	response_raw(res, 200, "application/json", c->after, c->after_len);
	api_etag(req, res, c->ax.req.generation + 1);
}

/* Store c's answer for its Idempotency-Key, in the batch transaction. */
static int
approve_keep(struct db *db, struct approve *c, struct gp_error *err)
{
	struct response answer;

	memset(&answer, 0, sizeof(answer));
	approve_answer(c->req, &answer, c);
	return api_idem_keep(db, c->req, &answer, err);
}

static int
approve_batch_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct approve_batch *b = arg;
	int64_t *ids = arena_alloc(b->a, sizeof(*ids) * (size_t)b->n);
	struct arena **arenas = arena_alloc(b->a, sizeof(*arenas) * (size_t)b->n);
	struct approval_ctx *ctx = arena_alloc(b->a, sizeof(*ctx) * (size_t)b->n);
	bool *found = arena_alloc(b->a, sizeof(*found) * (size_t)b->n);
	struct approve **quota = arena_alloc(b->a, sizeof(*quota) * (size_t)b->n);
	const struct approval_apply **grow = arena_alloc(b->a, sizeof(*grow) * (size_t)b->n);
	int nquota = 0, ngrow = 0;
	bool dup;

	for (int i = 0; i < b->n; i++) {
		struct approve *c = b->v[i];

		c->outcome = APPROVE_OPEN;
		gp_error_clear(&c->err);
		memset(&c->ap, 0, sizeof(c->ap));
		c->placed = NULL;
		c->nplaced = 0;
		c->freed = NULL;
		c->nfreed = 0;
		c->quota_item = NULL;
		c->after = NULL;
		ids[i] = c->id;
		arenas[i] = c->req->arena;
		/* Idempotency-Key: a duplicate changes nothing */
		if (api_idem_claim(db, c->req, &dup, err) < 0)
			return -1;
		if (dup)
			c->outcome = APPROVE_REFUSED;
	}
	if (db_requests_lock_many(db, b->a, ids, b->n, arenas, ctx, found, err) < 0)
		return -1;
	for (int i = 0; i < b->n; i++) {
		struct approve *c = b->v[i];
		struct gp_error e;

		if (c->outcome != APPROVE_OPEN)
			continue;
		gp_error_clear(&e);
		if (!found[i]) {
			gp_error_set(&e, 404, "not_found", "no such pool request: %lld",
			    (long long)c->id);
			approve_refuse(c, &e);
			continue;
		}
		c->ax = ctx[i];
		if (approve_check(c, &e) < 0) {
			approve_refuse(c, &e);
			continue;
		}
		for (int j = 0; j < i; j++) {
			const struct approve *o = b->v[j];

			if (o->outcome == APPROVE_OPEN &&
			    (o->ax.req.pool_id == c->ax.req.pool_id ||
				(c->ax.has_quota && o->ax.req.project_id == c->ax.req.project_id)))
				c->outcome = APPROVE_LATER;
		}
		if (c->outcome == APPROVE_OPEN && c->ax.has_quota && approve_is_grow(c))
			quota[nquota++] = c;
	}
	/* quotas, each project's row locked in project order */
	qsort(quota, (size_t)nquota, sizeof(*quota), approve_cmp_project);
	for (int i = 0; i < nquota; i++) {
		struct approve *c = quota[i];
		struct gp_error e;

		gp_error_clear(&e);
		if (quota_check_now(db, c->req->arena, c->ax.req.project_id, true, c->items,
			c->nitems, &c->quota_item, &e) < 0 &&
		    approve_step_failed(db, c, &e, err) < 0)
			return -1;
	}
	/* shrinks and releases: one statement each */
	for (int i = 0; i < b->n; i++) {
		struct approve *c = b->v[i];
		struct gp_error e;

		if (c->outcome != APPROVE_OPEN || approve_is_grow(c))
			continue;
		gp_error_clear(&e);
		if (approve_free(db, c, c->action == POOL_ACTION_RELEASE, &e) < 0) {
			if (approve_step_failed(db, c, &e, err) < 0)
				return -1;
			continue;
		}
		approve_fill_common(c);
		if (db_approval_apply_ex(db, c->req->arena, &c->ap, false, err) < 0)
			return -1;
		c->outcome = APPROVE_DONE;
	}
	/* creates and expands: placed together, applied in one statement */
	if (approve_place_all(db, b, err) < 0)
		return -1;
	for (int i = 0; i < b->n; i++) {
		struct approve *c = b->v[i];

		if (c->outcome != APPROVE_OPEN || !approve_is_grow(c))
			continue;
		approve_grow_fill(c);
		approve_fill_common(c);
		grow[ngrow++] = &c->ap;
		c->outcome = APPROVE_DONE;
	}
	/* each answer commits with its approval */
	for (int i = 0; i < b->n; i++)
		if (b->v[i]->outcome == APPROVE_DONE && approve_keep(db, b->v[i], err) < 0)
			return -1;
	if (ngrow == 0)
		return 0;
	return db_approvals_apply_many(db, b->a, grow, ngrow, err);
}

static void
approve_done(struct approve *c)
{
	if (!c->inline_run)
		api_wake(c->req);
}

/* The approvals worker's batch (batch.c): decide, then wake every handler. */
static void
approve_run(struct db *db, void **items, int n, void *arg)
{
	struct app *app = arg;
	struct approve_batch b = { (struct approve **)items, n, arena_create() };
	struct approve *later[APPROVE_BATCH_MAX];
	struct gp_error err;
	int nlater = 0;

	gp_error_clear(&err);
	if (db_tx_ex(db, DB_TX_RETRY_EXCLUSION | DB_TX_GENERIC_PLANS, approve_batch_tx, &b, &err) <
	    0) {
		arena_destroy(b.a);
		if (n > 1 && err.status != 503) {
			atomic_fetch_add(&stat_split, 1);
			log_warn(NULL,
			    "an approval batch failed; deciding its approvals one by one", "error",
			    err.message);
			for (int i = 0; i < n; i++)
				approve_run(db, &items[i], 1, arg);
			return;
		}
		for (int i = 0; i < n; i++) {
			b.v[i]->outcome = APPROVE_REFUSED;
			b.v[i]->err = err;
			approve_done(b.v[i]);
		}
		return;
	}
	arena_destroy(b.a);
	atomic_fetch_add(&stat_batches, 1);
	atomic_fetch_add(&stat_batch_items, (uint_fast64_t)n);
	for (int i = 0; i < n; i++) {
		if (b.v[i]->outcome == APPROVE_LATER && nlater < APPROVE_BATCH_MAX)
			later[nlater++] = b.v[i];
		else
			approve_done(b.v[i]);
	}
	batch_push_front(app->approvals, (void *const *)later, nlater);
}

int
pool_workers_start(struct app *app)
{
	if (batch_start(&app->approvals, "approvals", app->approval_workers, APPROVE_BATCH_MAX,
		approve_run, app) < 0)
		return -1;
	if (batch_start(&app->submits, "submissions", app->approval_workers, SUBMIT_BATCH_MAX,
		submit_run, app) < 0) {
		batch_free(app->approvals);
		app->approvals = NULL;
		return -1;
	}
	return 0;
}

void
pool_workers_stop(struct app *app)
{
	batch_stop(app->submits);
	batch_stop(app->approvals);
}

void
pool_workers_free(struct app *app)
{
	batch_free(app->submits);
	batch_free(app->approvals);
	app->submits = NULL;
	app->approvals = NULL;
}

void
pool_approvals_metrics(struct strbuf *b)
{
	strbuf_printf(b,
	    "# HELP gpupool_approval_batches_total Approval transactions committed "
	    "(group commit).\n# TYPE gpupool_approval_batches_total counter\n"
	    "gpupool_approval_batches_total %llu\n"
	    "# HELP gpupool_approval_batch_items_total Approvals decided by those "
	    "transactions (over batches: the mean batch size).\n"
	    "# TYPE gpupool_approval_batch_items_total counter\n"
	    "gpupool_approval_batch_items_total %llu\n"
	    "# HELP gpupool_approval_slow_paths_total Placements that read every useful "
	    "layout class after the fast candidates fell short.\n"
	    "# TYPE gpupool_approval_slow_paths_total counter\n"
	    "gpupool_approval_slow_paths_total %llu\n"
	    "# HELP gpupool_approval_batch_splits_total Failed batches whose approvals "
	    "were then decided one by one.\n"
	    "# TYPE gpupool_approval_batch_splits_total counter\n"
	    "gpupool_approval_batch_splits_total %llu\n",
	    (unsigned long long)atomic_load(&stat_batches),
	    (unsigned long long)atomic_load(&stat_batch_items),
	    (unsigned long long)atomic_load(&stat_slow_paths),
	    (unsigned long long)atomic_load(&stat_split));
	strbuf_printf(b,
	    "# HELP gpupool_submit_batches_total Pool-request submission transactions "
	    "committed (group commit).\n# TYPE gpupool_submit_batches_total counter\n"
	    "gpupool_submit_batches_total %llu\n"
	    "# HELP gpupool_submit_batch_items_total Submissions those transactions held.\n"
	    "# TYPE gpupool_submit_batch_items_total counter\n"
	    "gpupool_submit_batch_items_total %llu\n",
	    (unsigned long long)atomic_load(&stat_submit_batches),
	    (unsigned long long)atomic_load(&stat_submit_items));
}

/* The answer, on an HTTP thread once the batch decided. */
static int
approve_reply(struct request *req, struct response *res, void *arg, struct gp_error *err)
{
	struct approve *c = arg;

	if (c->outcome != APPROVE_DONE) {
		*err = c->err;
		if (!gp_error_isset(err))
			gp_error_set(err, 500, "internal", "the approval was not decided");
	}
	if (c->outcome == APPROVE_DONE) {
		/* the same document as the audit row's "after" */
		approve_answer(req, res, c);
		return 0;
	}
	if (err->status == 409 && strcmp(err->code, "insufficient_capacity") == 0) {
		struct json_object *sh = json_object_new_array();

		for (int i = 0; i < c->nitems; i++) {
			struct json_object *x;

			if (c->missing[i] == 0)
				continue;
			x = json_object_new_object();
			json_add_str(x, "model", c->items[i].model);
			json_add_str(x, "profile", c->items[i].profile);
			json_add_int(x, "missing", c->missing[i]);
			json_object_array_add(sh, x);
		}
		return reply_problem_with(req, res, err, "short", sh);
	}
	if (c->quota_item != NULL && strcmp(err->code, "quota_exceeded") == 0)
		return reply_problem_with(req, res, err, "item", json_object_get(c->quota_item));
	return -1;
}

int
api_pool_requests_approve(struct request *req, struct response *res, struct gp_error *err)
{
	struct approve *c = arena_alloc(req->arena, sizeof(*c));
	struct json_object *body;
	struct jfields f;

	memset(c, 0, sizeof(*c));
	if (api_param_id(req, 0, &c->id, err) < 0)
		return -1;
	if (req->body_len > 0) {
		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		jf_string(&f, "note", false, NOTE_MAX, &c->note);
		if (jf_finish(&f) < 0)
			return -1;
	}
	c->req = req;
	if (batch_push(api_app(req)->approvals, c))
		return api_defer(req, approve_reply, c);
	/* shutting down: the workers are gone, decide it here, alone */
	c->inline_run = true;
	approve_run(db_thread(), (void **)&c, 1, api_app(req));
	return approve_reply(req, res, c, err);
}

/* ---- reject and cancel ---- */

struct close {
	struct request *req;
	int64_t id;
	bool cancel;
	const char *note;
	struct pool_request_row out;
};

static int
close_tx(struct db *db, void *arg, struct gp_error *err)
{
	struct close *c = arg;
	struct request *req = c->req;
	struct approval_ctx ax;
	enum pool_request_state st;
	enum project_role prole = PROJECT_ROLE_NONE;
	bool found;

	if (db_request_lock(db, req->arena, c->id, &ax, &found, err) < 0)
		return -1;
	if (!found)
		return gp_error_set(err, 404, "not_found", "no such pool request: %lld",
		    (long long)c->id);
	if (c->cancel) {
		struct project_row proj;
		struct gp_error e;

		gp_error_clear(&e);
		if (api_project_access(db, req, ax.req.project, PROJECT_READ, &proj, &prole, &e) <
		    0) {
			if (e.status >= 500) {
				*err = e;
				return -1;
			}
			return gp_error_set(err, 404, "not_found", "no such pool request: %lld",
			    (long long)c->id);
		}
		if (ax.req.requested_by_id != req->principal.user_id &&
		    prole != PROJECT_ROLE_OWNER && api_role(req) != ROLE_ADMIN)
			return gp_error_set(err, 403, "forbidden",
			    "only the requester or an owner "
			    "of project %s may cancel this request",
			    proj.name);
	}
	if (pool_request_state_parse(ax.req.state, &st) < 0 ||
	    pool_request_transition(st, c->cancel ? POOL_REQUEST_CANCELLED : POOL_REQUEST_REJECTED,
		err) < 0)
		return -1;
	return db_request_close(db, req->arena, c->id, c->cancel ? "cancelled" : "rejected",
	    req->principal.user_id, req->principal.username, c->note, req->request_id,
	    c->cancel ? "pool_request.cancel" : "pool_request.reject",
	    json_to_arena(req->arena, json_own(req->arena, pools_request_json(&ax.req, NULL, 0)),
		NULL),
	    &c->out, err);
}

static int
close_request(struct request *req, struct response *res, bool cancel, struct gp_error *err)
{
	struct json_object *body;
	struct jfields f;
	struct close c;

	memset(&c, 0, sizeof(c));
	if (api_param_id(req, 0, &c.id, err) < 0)
		return -1;
	if (req->body_len > 0 || !cancel) {
		if (api_body(req, &body, err) < 0)
			return -1;
		jf_init(&f, req->arena, body, "", err);
		if (!cancel && jf_string(&f, "reason", true, NOTE_MAX, &c.note) == 0 &&
		    c.note[0] == '\0')
			gp_error_field(err, "reason", "must not be empty");
		if (jf_finish(&f) < 0)
			return -1;
	}
	c.req = req;
	c.cancel = cancel;
	if (db_tx(db_thread(), close_tx, &c, err) < 0)
		return -1;
	response_json(req, res, 200, pools_request_json(&c.out, NULL, 0));
	api_etag(req, res, c.out.generation);
	return 0;
}

int
api_pool_requests_reject(struct request *req, struct response *res, struct gp_error *err)
{
	return close_request(req, res, false, err);
}

int
api_pool_requests_cancel(struct request *req, struct response *res, struct gp_error *err)
{
	return close_request(req, res, true, err);
}
