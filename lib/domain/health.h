/*
 * health.h - GPU health from what a node agent reports: NVIDIA's Xid
 * catalog (data/xid-catalog.json, embedded), uncorrectable ECC errors,
 * row-remapping failures and NVML's recovery action. Pure: no I/O.
 */
#ifndef GP_DOMAIN_HEALTH_H
#define GP_DOMAIN_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "core/error.h"

enum xid_action {
	XID_UNKNOWN,     /* not in the catalog: recorded (alert details), the GPU stays healthy */
	XID_IGNORE,      /* informational */
	XID_RESTART_APP, /* application-level: the GPU is fine */
	XID_RESET_GPU,   /* the GPU needs a reset: failed */
	XID_REBOOT,      /* the node needs a reboot: failed */
	XID_CONTAINED,   /* a contained fault (Xid 94, 63): degraded, the others run on */
	XID_RECOVERY,    /* the recovery action changed (Xid 154): as the action says */
};

struct xid_catalog;

/* Parse the Xid catalog JSON (data/xid-catalog.json). */
int xid_catalog_load(struct xid_catalog **out, const char *json, size_t len, struct gp_error *err)
    __attribute__((warn_unused_result));
/* The catalog embedded at build time. */
int xid_catalog_load_builtin(struct xid_catalog **out, struct gp_error *err)
    __attribute__((warn_unused_result));
void xid_catalog_free(struct xid_catalog *c);

/* The action for xid, and its name (NULL when unknown). */
enum xid_action xid_lookup(const struct xid_catalog *c, int xid, const char **name);

/* What an agent reports about one GPU's health. */
struct gpu_health_report {
	int64_t ecc_uncorrected;     /* volatile uncorrectable ECC errors; < 0 unknown */
	bool remapped_rows_failure;  /* a row remapping failed */
	bool remapped_rows_pending;  /* a row remapping waits for a reset (contained) */
	const char *recovery_action; /* none|gpu_reset|node_reboot|drain_p2p|drain_and_reset|NULL */
	const int *xids;
	int nxids;
};

/*
 * What a report means for the GPU (arena texts naming the first cause,
 * NULL when none): fail (uncontained: a reset- or reboot-class Xid, a
 * failed row remapping, a recovery action of reset or reboot), degrade
 * (contained: Xid 94 or 63, a pending row remapping, recovery action
 * drain_p2p, Xid 154 without a failing action), ecc (uncorrectable ECC
 * errors with no contained-error Xid in this report: failed unless the GPU
 * is already degraded by a contained error, whose count this is).
 */
struct gpu_health_verdict {
	const char *fail;
	const char *degrade;
	const char *ecc;
};

void health_assess(const struct xid_catalog *c, const struct gpu_health_report *r, struct arena *a,
    struct gpu_health_verdict *out);

/* True when recovery_action is one of the five NVML values (or NULL). */
bool health_recovery_action_valid(const char *action);

#endif
