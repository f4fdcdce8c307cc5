/*
 * apply.h - the desired-state document and applying it to a backend.
 *
 * Applying is idempotent: instances the GPU has and the document wants
 * (same profile and placement start) are left alone, the ones not wanted
 * are destroyed first, then the missing ones are created at exactly the
 * placement named. Applying the same document twice changes nothing.
 * A GPU the document does not name is left as it is.
 */
#ifndef GP_AGENT_APPLY_H
#define GP_AGENT_APPLY_H

#include <json-c/json.h>

#include "backend.h"

struct desired_instance {
	char profile[32];
	int start;
	int size;
	char allocation[64]; /* for logs; "" when absent */
};

struct desired_gpu {
	char uuid[AG_UUID_MAX];
	int index;
	bool mig_enabled;
	struct desired_instance inst[AG_MAX_INSTANCES];
	int ninst;
};

struct desired {
	long long generation;
	struct desired_gpu gpus[AG_MAX_GPUS];
	int ngpus;
};

/* Parse a desired-state document; -1 with err on a malformed one. */
int desired_parse(struct json_object *doc, struct desired *out, char *err, size_t errlen);

/* What to do on one GPU: indexes into actual[] to destroy, into want[] to create. */
struct gpu_plan {
	int destroy[AG_MAX_INSTANCES];
	int ndestroy;
	int create[AG_MAX_INSTANCES];
	int ncreate;
};

void plan_gpu(const struct ag_instance *actual, int nactual, const struct desired_instance *want,
    int nwant, struct gpu_plan *plan);

/* Whole-GPU (non-MIG) holdings the agent keeps itself: nothing to create
 * on the hardware, but the status must show them until released. */
struct whole_state {
	struct ag_instance inst[AG_MAX_GPUS][AG_MAX_INSTANCES];
	int ninst[AG_MAX_GPUS];
	char uuid[AG_MAX_GPUS][AG_UUID_MAX];
};

/*
 * Apply d to the backend. node is the state discovered just before.
 * Failures go into errors (an array of {"gpu","profile","start",
 * "message"}); returns the number of changes made (creates + destroys +
 * MIG mode switches), -1 only when nothing could be tried.
 */
int apply_desired(struct ag_backend *b, const struct ag_node *node, const struct desired *d,
    struct whole_state *whole, struct json_object *errors);

/*
 * The same, and changed[slot] (slot: the GPU's index in node->gpus, up to
 * AG_MAX_GPUS; NULL: not wanted) turns true for each GPU whose layout it
 * changed: an instance created or destroyed, or MIG mode switched. The
 * agent's own whole-GPU bookkeeping is no layout change.
 */
int apply_desired_changed(struct ag_backend *b, const struct ag_node *node, const struct desired *d,
    struct whole_state *whole, struct json_object *errors, bool *changed);

/* Put the whole-GPU holdings into node's non-MIG GPUs (for status). */
void apply_whole_into(const struct whole_state *whole, struct ag_node *node);

#endif
