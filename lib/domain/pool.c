/*
 * pool.c - the pool request state machine, pool status rules, item list
 * arithmetic, quota checks and the shrink selection (see pool.h).
 */
#include "domain/pool.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
pool_request_transition(enum pool_request_state from, enum pool_request_state to,
    struct gp_error *err)
{
	bool ok = false;

	switch (from) {
	case POOL_REQUEST_PENDING:
		ok = to == POOL_REQUEST_APPROVED || to == POOL_REQUEST_REJECTED ||
		    to == POOL_REQUEST_CANCELLED || to == POOL_REQUEST_EXPIRED;
		break;
	case POOL_REQUEST_APPROVED:
		ok = to == POOL_REQUEST_FULFILLED || to == POOL_REQUEST_FAILED;
		break;
	default:
		break;
	}
	if (ok)
		return 0;
	return gp_error_set(err, 409, "conflict", "the request is %s; it cannot become %s",
	    pool_request_state_name(from), pool_request_state_name(to));
}

bool
pool_status_holds(enum pool_status s)
{
	return s == POOL_STATUS_PROVISIONING || s == POOL_STATUS_ACTIVE ||
	    s == POOL_STATUS_DEGRADED;
}

int
pool_status_accepts(enum pool_status s, enum pool_action a, const char *pool_name,
    struct gp_error *err)
{
	if (a == POOL_ACTION_CREATE) {
		if (s == POOL_STATUS_PENDING)
			return 0;
		return gp_error_set(err, 409, "conflict", "pool %s is %s, not pending creation",
		    pool_name, pool_status_name(s));
	}
	if (pool_status_holds(s))
		return 0;
	return gp_error_set(err, 409, "conflict", "pool %s is %s; it cannot %s", pool_name,
	    pool_status_name(s), pool_action_name(a));
}

static int
spec_cmp_kind(const void *pa, const void *pb)
{
	const struct spec_count *a = pa, *b = pb;
	int r = strcmp(a->model, b->model);

	return r != 0 ? r : strcmp(a->profile, b->profile);
}

int
pool_items_canonical(struct spec_count *items, int n)
{
	int k = 0;

	if (n <= 0)
		return 0;
	qsort(items, (size_t)n, sizeof(*items), spec_cmp_kind);
	for (int i = 0; i < n; i++) {
		if (k > 0 && spec_same_kind(&items[k - 1], &items[i])) {
			items[k - 1].count += items[i].count;
			continue;
		}
		items[k++] = items[i];
	}
	return k;
}

int
pool_items_check(const struct catalog *c, const struct spec_count *items, int n, const char *field,
    struct spec_count *out, struct gp_error *err)
{
	char path[64];
	bool bad = false;

	if (n < 1)
		return gp_error_field(err, field, "must list at least one item");
	if (n > POOL_MAX_ITEMS)
		return gp_error_field(err, field, "must list at most %d items", POOL_MAX_ITEMS);
	for (int i = 0; i < n; i++) {
		snprintf(path, sizeof(path), "%s[%d]", field, i);
		if (spec_validate(&items[i], c, path, NULL, NULL, err) < 0) {
			bad = true;
			continue;
		}
		for (int j = 0; j < i; j++) {
			if (spec_same_kind(&items[j], &items[i])) {
				gp_error_field(err, path, "%s/%s is listed twice", items[i].model,
				    items[i].profile);
				bad = true;
				break;
			}
		}
	}
	if (bad)
		return -1;
	memcpy(out, items, sizeof(*out) * (size_t)n);
	qsort(out, (size_t)n, sizeof(*out), spec_cmp_kind);
	return 0;
}

int
pool_items_count(const struct spec_count *items, int n, const char *model, const char *profile)
{
	for (int i = 0; i < n; i++)
		if (strcmp(items[i].model, model) == 0 && strcmp(items[i].profile, profile) == 0)
			return items[i].count;
	return 0;
}

int
pool_items_add(const struct spec_count *a, int na, const struct spec_count *b, int nb,
    struct spec_count *out, int *nout, struct gp_error *err)
{
	int i = 0, j = 0, k = 0;

	while (i < na || j < nb) {
		int r;

		if (k >= POOL_MAX_ITEMS)
			return gp_error_field(err, "items", "a pool may hold at most %d kinds",
			    POOL_MAX_ITEMS);
		r = i >= na ? 1 : j >= nb ? -1 : spec_cmp_kind(&a[i], &b[j]);
		if (r < 0) {
			out[k++] = a[i++];
		} else if (r > 0) {
			out[k++] = b[j++];
		} else {
			out[k] = a[i];
			if (a[i].count > SPEC_COUNT_MAX - b[j].count)
				return gp_error_field(err, "items",
				    "%s/%s would exceed %d instances", a[i].model, a[i].profile,
				    SPEC_COUNT_MAX);
			out[k++].count = a[i++].count + b[j++].count;
		}
	}
	*nout = k;
	return 0;
}

int
pool_items_subtract(const struct spec_count *a, int na, const struct spec_count *b, int nb,
    struct spec_count *out, int *nout, struct gp_error *err)
{
	int k = 0;
	bool bad = false;

	for (int j = 0; j < nb; j++) {
		int have = pool_items_count(a, na, b[j].model, b[j].profile);

		if (have < b[j].count) {
			char path[32];

			snprintf(path, sizeof(path), "items[%d]", j);
			gp_error_field(err, path, "the pool holds %d of %s/%s, not %d", have,
			    b[j].model, b[j].profile, b[j].count);
			bad = true;
		}
	}
	if (bad) {
		err->status = 409;
		snprintf(err->code, sizeof(err->code), "conflict");
		snprintf(err->message, sizeof(err->message),
		    "the pool does not hold what the request removes");
		return -1;
	}
	for (int i = 0; i < na; i++) {
		int left = a[i].count - pool_items_count(b, nb, a[i].model, a[i].profile);

		if (left <= 0)
			continue;
		out[k] = a[i];
		out[k++].count = left;
	}
	*nout = k;
	return 0;
}

int
pool_quota_check(bool has_quota, const struct spec_count *quota, int nquota,
    const struct spec_count *usage, int nusage, const struct spec_count *add, int nadd,
    int *first_bad, struct gp_error *err)
{
	int bad = -1;

	if (first_bad != NULL)
		*first_bad = -1;
	if (!has_quota)
		return 0;
	for (int i = 0; i < nadd; i++) {
		int limit = pool_items_count(quota, nquota, add[i].model, add[i].profile);
		int used = pool_items_count(usage, nusage, add[i].model, add[i].profile);
		char path[32];

		if ((int64_t)used + add[i].count <= limit)
			continue;
		snprintf(path, sizeof(path), "items[%d]", i);
		gp_error_field(err, path,
		    "%s/%s: the quota allows %d, the project holds %d, "
		    "the request asks for %d more",
		    add[i].model, add[i].profile, limit, used, add[i].count);
		if (bad < 0)
			bad = i;
	}
	if (bad < 0)
		return 0;
	if (first_bad != NULL)
		*first_bad = bad;
	err->status = 422;
	snprintf(err->code, sizeof(err->code), "quota_exceeded");
	snprintf(err->message, sizeof(err->message),
	    "the request would take the project above its quota for %s/%s", add[bad].model,
	    add[bad].profile);
	return -1;
}

/* ---- shrink selection ---- */

struct shrink_gpu {
	int64_t gpu_id;
	int first;  /* into the sorted index */
	int n;      /* allocations on the GPU */
	int others; /* of them, kind -1 */
	int left;   /* not yet chosen */
};

/* insertion sort by the comparator: no global state, n is small */
static void
shrink_sort(const struct shrink_alloc *allocs, int *idx, int n)
{
	for (int i = 1; i < n; i++) {
		int v = idx[i], j = i - 1;

		while (j >= 0) {
			const struct shrink_alloc *a = &allocs[idx[j]], *b = &allocs[v];
			int r;

			if (a->gpu_id != b->gpu_id)
				r = a->gpu_id < b->gpu_id ? -1 : 1;
			else if (a->start != b->start)
				r = a->start > b->start ? -1 : 1;
			else
				r = a->id < b->id ? -1 : a->id > b->id;
			if (r <= 0)
				break;
			idx[j + 1] = idx[j];
			j--;
		}
		idx[j + 1] = v;
	}
}

/* What pool_shrink_choose works on: the allocations sorted and grouped by GPU. */
struct shrink_ctx {
	const struct shrink_alloc *allocs;
	int nitems;
	int *idx;  /* allocations in shrink_sort's order */
	int *need; /* per kind, still to choose */
	int *per;  /* scratch: per kind on one GPU */
	struct shrink_gpu *g;
	int ng;
	bool *chosen;
};

/* 409 conflict naming each kind the pool holds fewer of than want; 0 when it holds them all. */
static int
shrink_check_holds(const struct shrink_alloc *allocs, int n, const int *want, int nitems,
    struct gp_error *err)
{
	bool short_ = false;

	for (int i = 0; i < nitems; i++) {
		int have = 0;

		for (int j = 0; j < n; j++)
			if (allocs[j].kind == i)
				have++;
		if (have < want[i]) {
			char path[32];

			snprintf(path, sizeof(path), "items[%d]", i);
			gp_error_field(err, path, "the pool holds %d, not %d", have, want[i]);
			short_ = true;
		}
	}
	if (!short_)
		return 0;
	err->status = 409;
	snprintf(err->code, sizeof(err->code), "conflict");
	snprintf(err->message, sizeof(err->message),
	    "the pool does not hold what the request removes");
	return -1;
}

/* The sorted allocations into runs of one GPU each. */
static void
shrink_group(struct shrink_ctx *x, int n)
{
	for (int i = 0; i < n; i++) {
		const struct shrink_alloc *a = &x->allocs[x->idx[i]];
		struct shrink_gpu *g;

		if (x->ng == 0 || x->g[x->ng - 1].gpu_id != a->gpu_id) {
			memset(&x->g[x->ng], 0, sizeof(x->g[x->ng]));
			x->g[x->ng].gpu_id = a->gpu_id;
			x->g[x->ng].first = i;
			x->ng++;
		}
		g = &x->g[x->ng - 1];
		g->n++;
		g->left++;
		if (a->kind < 0 || a->kind >= x->nitems)
			g->others++;
	}
}

/* Whether allocation i (sorted) is wanted and not chosen yet. */
static bool
shrink_wanted(const struct shrink_ctx *x, int i)
{
	const struct shrink_alloc *a = &x->allocs[x->idx[i]];

	return !x->chosen[x->idx[i]] && a->kind >= 0 && a->kind < x->nitems && x->need[a->kind] > 0;
}

static void
shrink_take(struct shrink_ctx *x, int k, int i)
{
	x->chosen[x->idx[i]] = true;
	x->need[x->allocs[x->idx[i]].kind]--;
	x->g[k].left--;
}

/* 1. A GPU whose allocations left are all wanted (it empties), fewest first; -1 if none. */
static int
shrink_emptiable(struct shrink_ctx *x)
{
	int best = -1, best_key = 0;

	for (int k = 0; k < x->ng; k++) {
		const struct shrink_gpu *g = &x->g[k];
		bool ok = g->others == 0 && g->left > 0;

		if (!ok)
			continue;
		memset(x->per, 0, sizeof(*x->per) * (size_t)x->nitems);
		for (int i = g->first; i < g->first + g->n; i++) {
			const struct shrink_alloc *a = &x->allocs[x->idx[i]];

			if (!x->chosen[x->idx[i]] && a->kind >= 0 && a->kind < x->nitems)
				x->per[a->kind]++;
		}
		for (int i = 0; i < x->nitems && ok; i++)
			if (x->per[i] > x->need[i])
				ok = false;
		if (ok && (best < 0 || g->left < best_key)) {
			best = k;
			best_key = g->left;
		}
	}
	return best;
}

/* 2. The GPU closest to empty that holds a wanted allocation; -1 if none. */
static int
shrink_closest(const struct shrink_ctx *x)
{
	int best = -1, best_key = 0;

	for (int k = 0; k < x->ng; k++) {
		const struct shrink_gpu *g = &x->g[k];
		bool has = false;

		for (int i = g->first; i < g->first + g->n && !has; i++)
			has = shrink_wanted(x, i);
		if (has && (best < 0 || g->left < best_key)) {
			best = k;
			best_key = g->left;
		}
	}
	return best;
}

/* Choose until nothing is needed; -1 (err set) when the candidates run out. */
static int
shrink_choose_all(struct shrink_ctx *x, struct gp_error *err)
{
	for (;;) {
		bool any = false;
		int best;

		for (int i = 0; i < x->nitems; i++)
			if (x->need[i] > 0)
				any = true;
		if (!any)
			return 0;
		best = shrink_emptiable(x);
		if (best >= 0) {
			const struct shrink_gpu *g = &x->g[best];

			for (int i = g->first; i < g->first + g->n; i++)
				if (!x->chosen[x->idx[i]])
					shrink_take(x, best, i);
			continue;
		}
		best = shrink_closest(x);
		if (best < 0)
			return gp_error_set(err, 500, "internal",
			    "shrink selection ran out of candidates");
		for (int i = x->g[best].first; i < x->g[best].first + x->g[best].n; i++) {
			if (shrink_wanted(x, i)) {
				shrink_take(x, best, i);
				break;
			}
		}
	}
}

int
pool_shrink_choose(const struct shrink_alloc *allocs, int n, const int *want, int nitems,
    bool *chosen, struct gp_error *err)
{
	struct shrink_ctx x = { .allocs = allocs, .nitems = nitems, .chosen = chosen };
	int rc = -1;

	x.idx = malloc(sizeof(*x.idx) * (size_t)(n + 1));
	x.need = malloc(sizeof(*x.need) * (size_t)(nitems + 1));
	x.per = malloc(sizeof(*x.per) * (size_t)(nitems + 1));
	x.g = malloc(sizeof(*x.g) * (size_t)(n + 1));
	if (x.idx == NULL || x.need == NULL || x.per == NULL || x.g == NULL) {
		gp_error_set(err, 500, "internal", "out of memory");
		goto out;
	}
	for (int i = 0; i < n; i++) {
		x.idx[i] = i;
		chosen[i] = false;
	}
	for (int i = 0; i < nitems; i++)
		x.need[i] = want[i];
	if (shrink_check_holds(allocs, n, want, nitems, err) < 0)
		goto out;
	shrink_sort(allocs, x.idx, n);
	shrink_group(&x, n);
	rc = shrink_choose_all(&x, err);
out:
	free(x.idx);
	free(x.need);
	free(x.per);
	free(x.g);
	return rc;
}
