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
	XID_UNKNOWN,     /* not in the catalog: recorded, the GPU stays healthy */
	XID_IGNORE,      /* informational */
	XID_RESTART_APP, /* application-level: the GPU is fine */
	XID_RESET_GPU,   /* the GPU needs a reset: failed */
	XID_REBOOT,      /* the node needs a reboot: failed */
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
	const char *recovery_action; /* none|gpu_reset|node_reboot|drain_p2p|drain_and_reset|NULL */
	const int *xids;
	int nxids;
};

/* True when recovery_action is one of the five NVML values (or NULL). */
bool health_recovery_action_valid(const char *action);

/*
 * Why the report makes the GPU failed (arena text naming the first
 * cause), or NULL when it does not.
 */
const char *health_fail_reason(const struct xid_catalog *c, const struct gpu_health_report *r,
    struct arena *a);

#endif
