/*
 * capacity.c - capacity views: GET /v1/capacity (per model: GPUs, memory
 * and compute slices, stranded slices, per-profile allocated and
 * placeable), POST /v1/capacity/simulate (would these items fit now, and
 * where; changes nothing), the /metrics gauges.
 *
 * Figures are computed per layout class (GPUs alike in model, MIG mode,
 * health, node readiness and layout) and multiplied by the class size,
 * so the cost follows the number of distinct layouts, not of GPUs; what
 * a layout means is worked out once per process (layout_cache.c). A
 * simulation places through service/fleet.c, the fleet reading approvals
 * use too.
 */
#include "core/problem.h"
#include "capacity.h"

#include "core/strbuf.h"
#include "core/log.h"
#include "db/db_capacity.h"
#include "service/fleet.h"
#include "service/layout_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- figures ---- */

static void
class_add(struct model_capacity *mc, const struct layout_class *cl)
{
	const struct gpu_model *m = mc->model;
	struct layout_figures f;
	const struct placement_gpu *g = &f.cls.g;
	int64_t n = cl->count;
	bool placeable;
	int ctotal = m->mig_capable ? m->compute_slices : 1;
	int mtotal = m->mig_capable ? m->memory_slices : m->full_slices;

	layout_cache_get(m, cl->mig_enabled, cl->layout, &f);
	placeable = f.valid && cl->healthy && cl->node_ready;
	mc->gpus_total += n;
	mc->gpus_healthy += cl->healthy ? n : 0;
	mc->gpus_mig_enabled += cl->mig_enabled ? n : 0;
	mc->gpus_placeable += placeable ? n : 0;
	mc->compute_total += n * ctotal;
	mc->memory_total += n * mtotal;
	mc->memory_used += n * f.memory_used;
	if (g->full_used)
		mc->compute_used += n * ctotal;
	else
		mc->compute_used += n * g->compute_used;
	mc->compute_stranded += n * f.stranded;
	mc->allocated[0] += g->full_used ? n : 0;
	for (int i = 0; i < m->nprofiles; i++)
		mc->allocated[1 + i] += n * g->profile_count[i];
	if (!placeable)
		return;
	mc->memory_available += n * (mtotal - f.memory_used);
	for (int i = 0; i <= m->nprofiles; i++)
		mc->placeable[i] += n * f.headroom[i];
}

int
capacity_compute(struct db *db, struct arena *a, const struct catalog *c, int64_t cluster_id,
    const char *model, struct model_capacity **out, struct gp_error *err)
{
	int nm = catalog_nmodels(c), n;
	struct model_capacity *mc = arena_alloc(a, sizeof(*mc) * (size_t)(nm + 1));
	struct layout_class *cl;

	for (int i = 0; i < nm; i++)
		mc[i].model = catalog_model_at(c, i);
	if (db_capacity_classes(db, a, cluster_id, model, &cl, &n, err) < 0)
		return -1;
	for (int i = 0; i < n; i++) {
		int j;

		for (j = 0; j < nm; j++)
			if (strcmp(mc[j].model->id, cl[i].model) == 0)
				break;
		if (j < nm)
			class_add(&mc[j], &cl[i]);
	}
	*out = mc;
	return 0;
}

/* ---- lookups shared by the inventory handlers ---- */

int
capacity_cluster_id(struct db *db, struct arena *a, const char *name, const char *field,
    int64_t *id, struct gp_error *err)
{
	*id = 0;
	if (name == NULL)
		return 0;
	if (strlen(name) > 63)
		return gp_error_field(err, field, "no such cluster");
	if (db_cluster_id(db, a, name, id, err) < 0)
		return -1;
	if (*id == 0)
		return gp_error_field(err, field, "no such cluster: %s", name);
	return 0;
}

int
capacity_model_param(const struct catalog *c, const char *model, const char *field,
    struct gp_error *err)
{
	if (model == NULL || catalog_model(c, model) != NULL)
		return 0;
	if (strlen(model) < 64 && catalog_model_by_product(c, model) != NULL)
		return gp_error_field(err, field, "%s is a product name; the model id is %s", model,
		    catalog_model_by_product(c, model)->id);
	return gp_error_field(err, field, "no such model in the catalog (see /v1/catalog/models)");
}

/* ---- GET /v1/capacity ---- */

static struct json_object *
model_capacity_json(const struct model_capacity *mc)
{
	const struct gpu_model *m = mc->model;
	struct json_object *o = json_object_new_object();
	struct json_object *g = json_object_new_object();
	struct json_object *cs = json_object_new_object();
	struct json_object *ms = json_object_new_object();
	struct json_object *profs = json_object_new_array();

	json_add_str(o, "model", m->id);
	json_add_bool(o, "mig_capable", m->mig_capable);
	json_add_int(g, "total", mc->gpus_total);
	json_add_int(g, "healthy", mc->gpus_healthy);
	json_add_int(g, "mig_enabled", mc->gpus_mig_enabled);
	json_add_int(g, "placeable", mc->gpus_placeable);
	json_object_object_add(o, "gpus", g);
	json_add_int(cs, "total", mc->compute_total);
	json_add_int(cs, "used", mc->compute_used);
	json_add_int(cs, "free", mc->compute_total - mc->compute_used);
	json_add_int(cs, "stranded", mc->compute_stranded);
	json_object_object_add(o, "compute_slices", cs);
	json_add_int(ms, "total", mc->memory_total);
	json_add_int(ms, "used", mc->memory_used);
	json_add_int(ms, "free", mc->memory_total - mc->memory_used);
	json_add_int(ms, "available", mc->memory_available);
	json_object_object_add(o, "memory_slices", ms);
	for (int i = 0; i <= m->nprofiles; i++) {
		struct json_object *p = json_object_new_object();

		json_add_str(p, "profile", i == 0 ? SPEC_FULL : m->profiles[i - 1].name);
		json_add_int(p, "allocated", mc->allocated[i]);
		json_add_int(p, "placeable", mc->placeable[i]);
		json_object_array_add(profs, p);
	}
	json_object_object_add(o, "profiles", profs);
	return o;
}

int
api_capacity_get(struct request *req, struct response *res, struct gp_error *err)
{
	const struct catalog *c = api_app(req)->catalog;
	const char *cluster = req->query(req, "cluster");
	const char *model = req->query(req, "model");
	struct model_capacity *mc;
	struct json_object *o, *arr;
	int64_t cluster_id;

	if (capacity_model_param(c, model, "model", err) < 0)
		return -1;
	if (capacity_cluster_id(db_thread(), req->arena, cluster, "cluster", &cluster_id, err) < 0)
		return -1;
	if (capacity_compute(db_thread(), req->arena, c, cluster_id, model, &mc, err) < 0)
		return -1;
	o = json_object_new_object();
	arr = json_object_new_array();
	for (int i = 0; i < catalog_nmodels(c); i++) {
		if (mc[i].gpus_total == 0 && (model == NULL || strcmp(model, mc[i].model->id) != 0))
			continue;
		json_object_array_add(arr, model_capacity_json(&mc[i]));
	}
	json_add_str(o, "cluster", cluster);
	json_object_object_add(o, "models", arr);
	response_json(req, res, 200, o);
	return 0;
}

/* ---- POST /v1/capacity/simulate ---- */

int
capacity_read_items(struct request *req, struct json_object *arr, const struct catalog *c,
    struct spec_count **out, int *nout, struct gp_error *err)
{
	size_t n = json_object_array_length(arr);
	struct spec_count *items;
	int64_t total = 0;

	if (n == 0)
		return gp_error_field(err, "items", "must hold at least one item");
	if (n > PLACEMENT_MAX_ITEMS)
		return gp_error_field(err, "items", "must hold at most %d items",
		    PLACEMENT_MAX_ITEMS);
	items = arena_alloc(req->arena, sizeof(*items) * n);
	for (size_t i = 0; i < n; i++) {
		struct json_object *v = json_object_array_get_idx(arr, i);
		const char *path = arena_printf(req->arena, "items[%zu]", i);
		struct gp_error e;

		gp_error_clear(&e);
		if (json_object_is_type(v, json_type_string)) {
			if (spec_parse(json_object_get_string(v), &items[i], path, &e) < 0 ||
			    spec_validate(&items[i], c, path, NULL, NULL, &e) < 0)
				goto copy;
		} else if (json_object_is_type(v, json_type_object)) {
			struct jfields f;
			const char *model = NULL, *profile = NULL;
			int64_t count = 0;
			bool has;

			jf_init(&f, req->arena, v, path, &e);
			jf_string(&f, "model", true, CATALOG_NAME_MAX - 1, &model);
			jf_string(&f, "profile", true, CATALOG_NAME_MAX - 1, &profile);
			jf_int(&f, "count", true, 1, SPEC_COUNT_MAX, &count, &has);
			if (jf_finish(&f) < 0)
				goto copy;
			if (spec_set(&items[i], model, profile, (int)count, path, &e) < 0 ||
			    spec_validate(&items[i], c, path, NULL, NULL, &e) < 0)
				goto copy;
		} else {
			gp_error_field(&e, path,
			    "must be a SpecAndCount object or its text form "
			    "MODEL/PROFILE=COUNT");
		}
	copy:
		for (int k = 0; k < e.nfields; k++)
			gp_error_field(err, e.fields[k].field, "%s", e.fields[k].message);
		if (gp_error_isset(&e) && e.nfields == 0)
			gp_error_field(err, path, "%s", e.message);
		if (!gp_error_isset(&e))
			total += items[i].count;
	}
	if (gp_error_isset(err))
		return -1;
	if (total > CAPACITY_SIMULATE_MAX)
		return gp_error_field(err, "items", "ask for at most %d instances in all",
		    CAPACITY_SIMULATE_MAX);
	*out = items;
	*nout = (int)n;
	return 0;
}

int
api_capacity_simulate(struct request *req, struct response *res, struct gp_error *err)
{
	const struct catalog *c = api_app(req)->catalog;
	struct json_object *body, *arr = NULL, *o, *pl, *sh;
	struct jfields f;
	const char *cluster = NULL;
	struct spec_count *items = NULL;
	struct fleet_answer ans;
	int missing[PLACEMENT_MAX_ITEMS];
	int nitems = 0;
	int64_t cluster_id;
	bool fits;

	if (api_body(req, &body, err) < 0)
		return -1;
	jf_init(&f, req->arena, body, "", err);
	if (jf_array(&f, "items", true, &arr) == 0 && arr != NULL)
		(void)capacity_read_items(req, arr, c, &items, &nitems, err);
	jf_string(&f, "cluster", false, 63, &cluster);
	if (jf_finish(&f) < 0)
		return -1;
	if (capacity_cluster_id(db_thread(), req->arena, cluster, "cluster", &cluster_id, err) < 0)
		return -1;
	memset(missing, 0, sizeof(missing));
	ans.missing = missing;
	if (fleet_simulate(db_thread(), req->arena, c, cluster_id, items, nitems, &ans, err) < 0)
		return -1;
	if (ans.outcome == FLEET_FAILED) {
		*err = ans.err;
		return -1;
	}
	fits = ans.outcome == FLEET_PLACED;
	o = json_object_new_object();
	pl = json_object_new_array();
	sh = json_object_new_array();
	json_add_bool(o, "fits", fits);
	for (int i = 0; fits && i < ans.nplaced; i++) {
		const struct service_placed *p = &ans.placed[i];
		const struct locked_gpu *row = p->gpu;
		struct json_object *x = json_object_new_object();

		json_add_str(x, "model", items[p->item].model);
		json_add_str(x, "profile", items[p->item].profile);
		json_add_str(x, "node", row->node);
		json_add_str(x, "gpu_uuid", row->uuid);
		json_add_int(x, "gpu_index", row->index);
		json_add_int(x, "start", p->start);
		json_add_int(x, "size", p->size);
		json_add_bool(x, "mode_switch", p->mode_switch);
		json_add_int(x, "item", p->item);
		json_object_array_add(pl, x);
	}
	for (int i = 0; !fits && i < nitems; i++) {
		struct json_object *x;

		if (missing[i] == 0)
			continue;
		x = json_object_new_object();
		json_add_str(x, "model", items[i].model);
		json_add_str(x, "profile", items[i].profile);
		json_add_int(x, "missing", missing[i]);
		json_add_int(x, "item", i);
		json_object_array_add(sh, x);
	}
	json_object_object_add(o, "placements", pl);
	json_object_object_add(o, "short", sh);
	json_add_bool(o, "search_exhausted", ans.search_exhausted);
	response_json(req, res, 200, o);
	return 0;
}

/* ---- /metrics ---- */

/* One gauge per model and profile: mc[i].allocated, or .placeable. */
static void
profile_gauges(struct strbuf *b, const struct model_capacity *mc, int nm, const char *name,
    const char *help, bool placeable)
{
	strbuf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
	for (int i = 0; i < nm; i++) {
		const struct gpu_model *m = mc[i].model;

		if (mc[i].gpus_total == 0)
			continue;
		for (int j = 0; j <= m->nprofiles; j++)
			strbuf_printf(b, "%s{model=\"%s\",profile=\"%s\"} %lld\n", name, m->id,
			    j == 0 ? SPEC_FULL : m->profiles[j - 1].name,
			    (long long)(placeable ? mc[i].placeable[j] : mc[i].allocated[j]));
	}
}

const char *
capacity_metrics_text(struct arena *a, const struct catalog *catalog)
{
	struct strbuf b;
	struct model_capacity *mc;
	struct gp_error e;
	int nm;

	if (catalog == NULL)
		return NULL;
	gp_error_clear(&e);
	if (capacity_compute(db_thread(), a, catalog, 0, NULL, &mc, &e) < 0)
		return NULL;
	nm = catalog_nmodels(catalog);
	strbuf_init(&b, a, 8192);
	/*
	 * Series whose sum() means something: a label only ever partitions a
	 * whole (used + free + stranded = the total), and subsets (healthy,
	 * MIG-enabled, placeable GPUs) are metrics of their own.
	 */
	static const struct {
		const char *name, *help;
		int field;
	} gpu_metrics[] = {
		{ "gpupool_capacity_gpus", "Physical GPUs by model.", 0 },
		{ "gpupool_capacity_gpus_healthy", "GPUs whose health is ok, by model.", 1 },
		{ "gpupool_capacity_gpus_mig_enabled", "GPUs with MIG enabled, by model.", 2 },
		{ "gpupool_capacity_gpus_placeable",
		    "GPUs new work may be placed on (healthy, node ready), by model.", 3 },
	};
	for (size_t k = 0; k < sizeof(gpu_metrics) / sizeof(gpu_metrics[0]); k++) {
		strbuf_printf(&b, "# HELP %s %s\n# TYPE %s gauge\n", gpu_metrics[k].name,
		    gpu_metrics[k].help, gpu_metrics[k].name);
		for (int i = 0; i < nm; i++) {
			int64_t v = gpu_metrics[k].field == 0 ? mc[i].gpus_total
			    : gpu_metrics[k].field == 1       ? mc[i].gpus_healthy
			    : gpu_metrics[k].field == 2       ? mc[i].gpus_mig_enabled
							      : mc[i].gpus_placeable;

			if (mc[i].gpus_total != 0)
				strbuf_printf(&b, "%s{model=\"%s\"} %lld\n", gpu_metrics[k].name,
				    mc[i].model->id, (long long)v);
		}
	}
	strbuf_printf(&b,
	    "# HELP gpupool_capacity_compute_slices_all Compute slices by model.\n"
	    "# TYPE gpupool_capacity_compute_slices_all gauge\n");
	for (int i = 0; i < nm; i++)
		if (mc[i].gpus_total != 0)
			strbuf_printf(&b,
			    "gpupool_capacity_compute_slices_all{model=\"%s\"} %lld\n",
			    mc[i].model->id, (long long)mc[i].compute_total);
	strbuf_printf(&b,
	    "# HELP gpupool_capacity_compute_slices Compute slices by model and kind: used, free "
	    "(usable by some profile) and stranded (free but unusable); they sum to the total.\n"
	    "# TYPE gpupool_capacity_compute_slices gauge\n");
	for (int i = 0; i < nm; i++) {
		const char *id = mc[i].model->id;

		if (mc[i].gpus_total == 0)
			continue;
		strbuf_printf(&b,
		    "gpupool_capacity_compute_slices{model=\"%s\",kind=\"used\"} %lld\n"
		    "gpupool_capacity_compute_slices{model=\"%s\",kind=\"free\"} %lld\n"
		    "gpupool_capacity_compute_slices{model=\"%s\",kind=\"stranded\"} %lld\n",
		    id, (long long)mc[i].compute_used, id,
		    (long long)(mc[i].compute_total - mc[i].compute_used - mc[i].compute_stranded),
		    id, (long long)mc[i].compute_stranded);
	}
	strbuf_printf(&b,
	    "# HELP gpupool_capacity_memory_slices_all Memory slices by model.\n"
	    "# TYPE gpupool_capacity_memory_slices_all gauge\n");
	for (int i = 0; i < nm; i++)
		if (mc[i].gpus_total != 0)
			strbuf_printf(&b, "gpupool_capacity_memory_slices_all{model=\"%s\"} %lld\n",
			    mc[i].model->id, (long long)mc[i].memory_total);
	strbuf_printf(&b,
	    "# HELP gpupool_capacity_memory_slices Memory slices by model and kind (used, free); "
	    "they sum to the total.\n"
	    "# TYPE gpupool_capacity_memory_slices gauge\n");
	for (int i = 0; i < nm; i++) {
		const char *id = mc[i].model->id;

		if (mc[i].gpus_total == 0)
			continue;
		strbuf_printf(&b,
		    "gpupool_capacity_memory_slices{model=\"%s\",kind=\"used\"} %lld\n"
		    "gpupool_capacity_memory_slices{model=\"%s\",kind=\"free\"} %lld\n",
		    id, (long long)mc[i].memory_used, id,
		    (long long)(mc[i].memory_total - mc[i].memory_used));
	}
	profile_gauges(&b, mc, nm, "gpupool_capacity_profile_allocated",
	    "Live instances by model and profile (full: whole GPUs).", false);
	profile_gauges(&b, mc, nm, "gpupool_capacity_profile_placeable",
	    "Further instances placeable now, each profile alone.", true);
	strbuf_printf(&b,
	    "# HELP gpupool_capacity_layout_cache_entries Layouts whose figures this process remembers (at most %d).\n"
	    "# TYPE gpupool_capacity_layout_cache_entries gauge\n"
	    "gpupool_capacity_layout_cache_entries %d\n",
	    LAYOUT_CACHE_MAX, layout_cache_size());
	return b.p;
}
