/*
 * defrag_service.c - reading the fleet for the defragmentation planner
 * and running it (see defrag_service.h).
 */
#include "service/defrag_service.h"

#include "core/timeutil.h"

#include <stdlib.h>
#include <string.h>

struct id_ref {
	int64_t id;
	int idx;
};

static int
id_cmp(const void *x, const void *y)
{
	const struct id_ref *a = x, *b = y;

	return a->id < b->id ? -1 : a->id > b->id;
}

/* Index of the GPU with this id (refs sorted by id); -1 when none. */
static int
gpu_index_of(const struct id_ref *refs, int n, int64_t id)
{
	int lo = 0, hi = n - 1;

	while (lo <= hi) {
		int mid = (lo + hi) / 2;

		if (refs[mid].id == id)
			return refs[mid].idx;
		if (refs[mid].id < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

int
defrag_service_plan(struct db *db, struct arena *a, const struct catalog *c,
    const struct defrag_request *req, struct defrag_outcome *out, struct gp_error *err)
{
	struct placement_gpu *g;
	int64_t *group;
	struct id_ref *refs;
	struct defrag_instance *in;
	struct defrag_fleet fleet;
	struct defrag_goal goal;
	struct defrag_plan plan;
	int ng, na;
	int64_t t0 = time_mono_us(), t1, t2;

	memset(out, 0, sizeof(*out));
	if (db_defrag_fleet(db, a, req->cluster_id, req->nodes, req->nnodes, req->idle_s,
		req->threshold, &out->gpus, &out->ngpus, &out->allocs, &out->nallocs, err) < 0)
		return -1;
	ng = out->ngpus;
	na = out->nallocs;
	t1 = time_mono_us();
	out->read_ms = (double)(t1 - t0) / 1000.0;
	g = arena_alloc(a, sizeof(*g) * (size_t)(ng + 1));
	group = arena_alloc(a, sizeof(*group) * (size_t)(ng + 1));
	refs = arena_alloc(a, sizeof(*refs) * (size_t)(ng + 1));
	in = arena_alloc(a, sizeof(*in) * (size_t)(na + 1));
	for (int i = 0; i < ng; i++) {
		const struct defrag_gpu_row *r = &out->gpus[i];
		const struct gpu_model *m = catalog_model(c, r->model);

		if (m == NULL)
			return gp_error_set(err, 500, "internal",
			    "gpu %s has model %s, not in the catalog", r->uuid, r->model);
		placement_gpu_init(&g[i], m, r->id, r->node_id, r->index, r->mig_enabled);
		group[i] = r->cluster_id;
		refs[i] = (struct id_ref){ .id = r->id, .idx = i };
	}
	qsort(refs, (size_t)ng, sizeof(*refs), id_cmp);
	for (int k = 0; k < na; k++) {
		const struct defrag_alloc_row *r = &out->allocs[k];
		int gi = gpu_index_of(refs, ng, r->gpu_id);

		if (gi < 0)
			return gp_error_set(err, 500, "internal",
			    "allocation %lld on no gpu in scope", (long long)r->id);
		in[k].id = r->id;
		in[k].gpu = gi;
		in[k].start = r->start;
		in[k].tenant = r->project_id;
		in[k].movable = r->idle;
		in[k].profile = NULL;
		if (strcmp(r->profile, SPEC_FULL) != 0) {
			in[k].profile = catalog_profile(g[gi].model, r->profile);
			if (in[k].profile == NULL)
				return gp_error_set(err, 500, "internal",
				    "allocation %lld has profile %s, not of %s", (long long)r->id,
				    r->profile, g[gi].model->id);
		} else {
			in[k].movable = false;
		}
		out->movable += in[k].movable;
		/* the layout before, for the capacity figures */
		if (placement_gpu_add(&g[gi], in[k].profile, r->start, err) < 0)
			return -1;
	}
	out->max_moves = req->max_moves >= 0 ? req->max_moves : (na / 100 > 0 ? na / 100 : 1);
	fleet = (struct defrag_fleet){ .gpus = g,
		.group = group,
		.ngpus = ng,
		.insts = in,
		.ninsts = na };
	goal = (struct defrag_goal){ .kind = req->kind,
		.items = req->items,
		.nitems = req->nitems,
		.max_moves = out->max_moves };
	if (defrag_plan(c, &fleet, &goal, &plan, err) < 0)
		return -1;
	t2 = time_mono_us();
	out->plan_ms = (double)(t2 - t1) / 1000.0;

	/* copy what the answer needs into the arena; the plan is freed */
	out->nmoves = plan.nmoves;
	out->moves = arena_alloc(a, sizeof(*out->moves) * (size_t)(plan.nmoves + 1));
	if (plan.nmoves > 0) /* (no moves: plan.moves may be NULL, which memcpy must not get) */
		memcpy(out->moves, plan.moves, sizeof(*out->moves) * (size_t)plan.nmoves);
	out->placeable_before = plan.placeable_before;
	out->placeable_after = plan.placeable_after;
	memcpy(out->item_before, plan.item_before, sizeof(out->item_before));
	memcpy(out->item_after, plan.item_after, sizeof(out->item_after));
	out->free_gpus_before = plan.free_gpus_before;
	out->free_gpus_after = plan.free_gpus_after;
	out->moves_exhausted = plan.moves_exhausted;
	out->tenants = arena_alloc(a, sizeof(*out->tenants) * (size_t)(plan.ntenants + 1));
	for (int t = 0; t < plan.ntenants; t++)
		for (int k = 0; k < na; k++)
			if (out->allocs[k].project_id == plan.tenants[t]) {
				out->tenants[out->ntenants++] = out->allocs[k].project;
				break;
			}
	/* capacity of each model in scope, before and after */
	out->models = arena_alloc(a, sizeof(*out->models) * (size_t)(catalog_nmodels(c) + 1));
	for (int mi = 0; mi < catalog_nmodels(c); mi++) {
		const struct gpu_model *m = catalog_model_at(c, mi);
		struct defrag_model_capacity *mc = &out->models[out->nmodels];

		placement_capacity(m, g, ng, &mc->before);
		if (mc->before.gpus == 0)
			continue;
		placement_capacity(m, plan.after, ng, &mc->after);
		mc->model = m;
		out->nmodels++;
	}
	defrag_plan_free(&plan);
	out->capacity_ms = (double)(time_mono_us() - t2) / 1000.0;
	return 0;
}
