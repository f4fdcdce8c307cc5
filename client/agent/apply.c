/*
 * apply.c - the desired-state document and applying it.
 */
#include <stdio.h>
#include <string.h>

#include "apply.h"
#include "core/log.h"
#include "util.h"

static const char *
str_or(struct json_object *o, const char *k, const char *def)
{
	struct json_object *v;
	if (json_object_object_get_ex(o, k, &v) && json_object_is_type(v, json_type_string))
		return json_object_get_string(v);
	return def;
}

int
desired_parse(struct json_object *doc, struct desired *out, char *err, size_t errlen)
{
	memset(out, 0, sizeof(*out));
	struct json_object *v, *gpus;
	if (doc == NULL || !json_object_is_type(doc, json_type_object) ||
	    !json_object_object_get_ex(doc, "generation", &v) ||
	    !json_object_is_type(v, json_type_int)) {
		snprintf(err, errlen, "desired state without an integer generation");
		return -1;
	}
	out->generation = json_object_get_int64(v);
	if (!json_object_object_get_ex(doc, "gpus", &gpus) ||
	    !json_object_is_type(gpus, json_type_array)) {
		snprintf(err, errlen, "desired state without a gpus array");
		return -1;
	}
	for (size_t i = 0; i < json_object_array_length(gpus); i++) {
		if (out->ngpus >= AG_MAX_GPUS) {
			snprintf(err, errlen, "more than %d GPUs", AG_MAX_GPUS);
			return -1;
		}
		struct json_object *g = json_object_array_get_idx(gpus, i), *insts;
		struct desired_gpu *dg = &out->gpus[out->ngpus++];
		ag_strlcpy(dg->uuid, str_or(g, "uuid", ""), sizeof(dg->uuid));
		dg->index = -1;
		if (json_object_object_get_ex(g, "index", &v))
			dg->index = json_object_get_int(v);
		if (json_object_object_get_ex(g, "mig_enabled", &v))
			dg->mig_enabled = json_object_get_boolean(v);
		if (dg->uuid[0] == '\0' && dg->index < 0) {
			snprintf(err, errlen, "gpus[%zu] has neither uuid nor index", i);
			return -1;
		}
		if (!json_object_object_get_ex(g, "instances", &insts) || insts == NULL)
			continue;
		if (!json_object_is_type(insts, json_type_array)) {
			snprintf(err, errlen, "gpus[%zu].instances is not an array", i);
			return -1;
		}
		for (size_t k = 0; k < json_object_array_length(insts); k++) {
			if (dg->ninst >= AG_MAX_INSTANCES) {
				snprintf(err, errlen, "gpus[%zu]: more than %d instances", i,
				    AG_MAX_INSTANCES);
				return -1;
			}
			struct json_object *io = json_object_array_get_idx(insts, k);
			struct desired_instance *di = &dg->inst[dg->ninst++];
			ag_strlcpy(di->profile, str_or(io, "profile", "full"), sizeof(di->profile));
			di->start = 0;
			di->size = 0;
			if (json_object_object_get_ex(io, "start", &v))
				di->start = json_object_get_int(v);
			if (json_object_object_get_ex(io, "size", &v))
				di->size = json_object_get_int(v);
			if (json_object_object_get_ex(io, "allocation", &v) && v != NULL)
				ag_strlcpy(di->allocation, json_object_get_string(v),
				    sizeof(di->allocation));
			if (di->start < 0 || di->start > 16 || di->size < 0 || di->size > 16) {
				snprintf(err, errlen, "gpus[%zu].instances[%zu]: bad placement", i,
				    k);
				return -1;
			}
		}
	}
	return 0;
}

void
plan_gpu(const struct ag_instance *actual, int nactual, const struct desired_instance *want,
    int nwant, struct gpu_plan *plan)
{
	memset(plan, 0, sizeof(*plan));
	bool kept[AG_MAX_INSTANCES] = { false };
	for (int a = 0; a < nactual; a++) {
		int match = -1;
		for (int w = 0; w < nwant; w++)
			if (!kept[w] && want[w].start == actual[a].start &&
			    strcmp(want[w].profile, actual[a].profile) == 0) {
				match = w;
				break;
			}
		if (match >= 0)
			kept[match] = true;
		else
			plan->destroy[plan->ndestroy++] = a;
	}
	for (int w = 0; w < nwant; w++)
		if (!kept[w])
			plan->create[plan->ncreate++] = w;
}

static void
add_error(struct json_object *errors, const char *gpu, const char *profile, int start,
    const char *msg)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "gpu", json_object_new_string(gpu));
	json_object_object_add(o, "profile", profile ? json_object_new_string(profile) : NULL);
	json_object_object_add(o, "start", start >= 0 ? json_object_new_int(start) : NULL);
	json_object_object_add(o, "message", json_object_new_string(msg));
	json_object_array_add(errors, o);
	log_warn(NULL, "apply failed", "gpu", gpu, "profile", profile ? profile : "", "error", msg);
}

static const struct ag_gpu *
find_gpu(const struct ag_node *node, const struct desired_gpu *dg)
{
	for (int i = 0; i < node->ngpus; i++)
		if (dg->uuid[0] != '\0' && strcmp(node->gpus[i].uuid, dg->uuid) == 0)
			return &node->gpus[i];
	if (dg->uuid[0] == '\0')
		for (int i = 0; i < node->ngpus; i++)
			if (node->gpus[i].index == dg->index)
				return &node->gpus[i];
	return NULL;
}

int
apply_desired(struct ag_backend *b, const struct ag_node *node, const struct desired *d,
    struct whole_state *whole, struct json_object *errors)
{
	return apply_desired_changed(b, node, d, whole, errors, NULL);
}

int
apply_desired_changed(struct ag_backend *b, const struct ag_node *node, const struct desired *d,
    struct whole_state *whole, struct json_object *errors, bool *changed)
{
	int changes = 0;
	char err[AG_ERR_MAX];
	for (int i = 0; i < d->ngpus; i++) {
		const struct desired_gpu *dg = &d->gpus[i];
		const struct ag_gpu *g = find_gpu(node, dg);
		if (g == NULL) {
			for (int k = 0; k < dg->ninst; k++)
				add_error(errors, dg->uuid, dg->inst[k].profile, dg->inst[k].start,
				    "no such GPU on this node");
			continue;
		}
		if (g->state != AG_GPU_OK) {
			/* its instances are not known this scan: nothing is
			 * created or destroyed there (the agent applies again
			 * once the GPU reads ok; a lost one the server fails) */
			log_warn(NULL, "GPU not readable; its layout is left as it is", "gpu",
			    g->uuid, "error", g->error);
			continue;
		}
		int slot = (int)(g - node->gpus);
		bool scratch = false;
		bool *lay = changed != NULL ? &changed[slot] : &scratch;
		bool mig = g->mig_enabled;
		if (dg->mig_enabled != mig) {
			if (!dg->mig_enabled) {
				/* leaving MIG: every instance goes first */
				for (int k = 0; k < g->ninst; k++) {
					if (b->ops->destroy(b, g->index, g->inst[k].profile,
						g->inst[k].start, err, sizeof(err)) != 0)
						add_error(errors, g->uuid, g->inst[k].profile,
						    g->inst[k].start, err);
					else {
						changes++;
						*lay = true;
					}
				}
			}
			if (b->ops->set_mig(b, g->index, dg->mig_enabled, err, sizeof(err)) != 0) {
				add_error(errors, g->uuid, NULL, -1, err);
				for (int k = 0; k < dg->ninst; k++)
					add_error(errors, g->uuid, dg->inst[k].profile,
					    dg->inst[k].start, err);
				continue;
			}
			changes++;
			*lay = true;
			mig = dg->mig_enabled;
			if (!mig) {
				/* fall through to the whole-GPU bookkeeping */
			} else {
				/* newly in MIG mode: nothing exists yet */
				struct ag_gpu empty = *g;
				empty.ninst = 0;
				struct gpu_plan plan;
				plan_gpu(empty.inst, 0, dg->inst, dg->ninst, &plan);
				for (int c = 0; c < plan.ncreate; c++) {
					const struct desired_instance *di =
					    &dg->inst[plan.create[c]];
					char uuid[AG_UUID_MAX];
					if (b->ops->create(b, g->index, di->profile, di->start,
						uuid, sizeof(uuid), err, sizeof(err)) != 0)
						add_error(errors, g->uuid, di->profile, di->start,
						    err);
					else {
						changes++;
						*lay = true;
					}
				}
				whole->ninst[slot] = 0;
				continue;
			}
		}
		if (!mig) {
			/* whole GPU: the agent's own record, uuid = the GPU's */
			int n = 0;
			for (int k = 0; k < dg->ninst && n < AG_MAX_INSTANCES; k++) {
				struct ag_instance *in = &whole->inst[slot][n++];
				memset(in, 0, sizeof(*in));
				ag_strlcpy(in->profile, dg->inst[k].profile, sizeof(in->profile));
				in->start = dg->inst[k].start;
				in->size = dg->inst[k].size;
				ag_strlcpy(in->uuid, g->uuid, sizeof(in->uuid));
				in->gi_id = -1;
			}
			if (n != whole->ninst[slot])
				changes++;
			whole->ninst[slot] = n;
			ag_strlcpy(whole->uuid[slot], g->uuid, sizeof(whole->uuid[slot]));
			continue;
		}
		whole->ninst[slot] = 0;
		struct gpu_plan plan;
		plan_gpu(g->inst, g->ninst, dg->inst, dg->ninst, &plan);
		for (int k = 0; k < plan.ndestroy; k++) {
			const struct ag_instance *in = &g->inst[plan.destroy[k]];
			if (b->ops->destroy(b, g->index, in->profile, in->start, err,
				sizeof(err)) != 0)
				add_error(errors, g->uuid, in->profile, in->start, err);
			else {
				changes++;
				*lay = true;
				log_info(NULL, "destroyed instance", "gpu", g->uuid, "profile",
				    in->profile);
			}
		}
		for (int c = 0; c < plan.ncreate; c++) {
			const struct desired_instance *di = &dg->inst[plan.create[c]];
			char uuid[AG_UUID_MAX];
			if (b->ops->create(b, g->index, di->profile, di->start, uuid, sizeof(uuid),
				err, sizeof(err)) != 0)
				add_error(errors, g->uuid, di->profile, di->start, err);
			else {
				changes++;
				*lay = true;
				log_info(NULL, "created instance", "gpu", g->uuid, "profile",
				    di->profile, "uuid", uuid);
			}
		}
	}
	return changes;
}

void
apply_whole_into(const struct whole_state *whole, struct ag_node *node)
{
	for (int i = 0; i < node->ngpus && i < AG_MAX_GPUS; i++) {
		struct ag_gpu *g = &node->gpus[i];
		if (g->mig_enabled || g->state != AG_GPU_OK || whole->ninst[i] == 0 ||
		    strcmp(whole->uuid[i], g->uuid) != 0)
			continue;
		g->ninst = whole->ninst[i];
		memcpy(g->inst, whole->inst[i], sizeof(g->inst));
	}
}
