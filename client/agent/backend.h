/*
 * backend.h - what gpupool-agent knows about a node's GPUs, and the one
 * interface its backends (fake, nvidia-smi, nvml) implement.
 *
 * A backend discovers the GPUs with their MIG mode, MIG instances
 * (profile, placement start and size, MIG device UUID), health (ECC,
 * remapped rows, XID events, NVML recovery action) and telemetry, and
 * creates or destroys one GPU instance at an exact placement. The agent
 * (apply.c) decides what to create and destroy; backends never guess.
 */
#ifndef GP_AGENT_BACKEND_H
#define GP_AGENT_BACKEND_H

#include <stdbool.h>
#include <stddef.h>

#define AG_MAX_GPUS 16
#define AG_MAX_INSTANCES 8 /* per GPU: at most 7 on any MIG model */
#define AG_MAX_XIDS 32     /* Xid codes kept per GPU per scan (coalesced per code) */
#define AG_UUID_MAX 96
#define AG_NAME_MAX 96
#define AG_ERR_MAX 256

struct ag_instance {
	char profile[32];       /* "3g.40gb" */
	int start;              /* first memory slice */
	int size;               /* memory slices */
	char uuid[AG_UUID_MAX]; /* "MIG-…", or the GPU's UUID for a whole GPU */
	int gi_id;              /* GPU instance id, -1 when unknown */
};

struct ag_xid {
	int xid;
	long long ts; /* unix seconds: the first event of this code */
	int count;    /* events of this code coalesced into this entry (>= 1) */
};

/* What the agent could read of a GPU in one scan (docs/agent.md, "Fault
 * classes"): everything; its identity and health but not its instances
 * (the server keeps its allocations as they were); or nothing (the
 * identity is the one of the last good discovery). */
enum ag_gpu_state {
	AG_GPU_OK = 0,
	AG_GPU_UNKNOWN,
	AG_GPU_LOST,
};

#define AG_GPU_ERROR_MAX 201 /* the contract's 200 characters and the NUL */

struct ag_gpu {
	char uuid[AG_UUID_MAX];
	int index;
	char product_name[AG_NAME_MAX];
	char pci_device_id[24]; /* "0x233010DE" */
	int memory_mib;
	bool mig_enabled;
	struct ag_instance inst[AG_MAX_INSTANCES];
	int ninst;
	enum ag_gpu_state state;
	bool stale;                   /* unknown because discovery failed: no health either */
	char error[AG_GPU_ERROR_MAX]; /* why unknown or lost */
	int lost_xid;                 /* lost: the Xid that took it, 0 when not known */
	char bus_id[24];              /* "00000000:18:00.0", "" when unknown */
	/* health */
	long long ecc_uncorrected; /* volatile total, -1 unknown */
	long long ecc_corrected;   /* volatile total, -1 unknown */
	bool remapped_rows_failure;
	int remapped_rows;               /* correctable + uncorrectable, -1 unknown */
	char recovery_action[24];        /* none|gpu_reset|node_reboot|drain_p2p|drain_and_reset */
	struct ag_xid xids[AG_MAX_XIDS]; /* new since the last discover */
	int nxids;
	/* telemetry, < 0 when unknown */
	double power_w;
	double sm_active; /* 0..1 */
	double temperature_c;
	long long memory_used_mib;
	long long memory_total_mib;
};

struct ag_node {
	struct ag_gpu gpus[AG_MAX_GPUS];
	int ngpus;
};

/* A workload seen on a device (from dcgm-exporter or the fake backend). */
struct ag_profile {
	char device_uuid[AG_UUID_MAX];
	char ns[128];
	char pod[256];
	char container[128];
};

struct ag_backend;

struct ag_backend_ops {
	const char *name;
	/* Fill node with every GPU (health, telemetry, instances). XID events
	 * are handed over once: the next call does not repeat them. */
	int (*discover)(struct ag_backend *b, struct ag_node *node, char *err, size_t errlen);
	/* Create a GPU instance (and its compute instance) of profile at
	 * exactly start on the GPU with this index; the new MIG device's UUID
	 * into uuid. */
	int (*create)(struct ag_backend *b, int gpu_index, const char *profile, int start,
	    char *uuid, size_t uuidlen, char *err, size_t errlen);
	/* Destroy the instance of profile at start on GPU gpu_index. */
	int (*destroy)(struct ag_backend *b, int gpu_index, const char *profile, int start,
	    char *err, size_t errlen);
	/* Switch MIG mode; backends that cannot (it needs a GPU reset) fail. */
	int (*set_mig)(struct ag_backend *b, int gpu_index, bool enabled, char *err, size_t errlen);
	/* Workloads the backend itself knows of (the fake one); NULL when none. */
	int (*profiles)(struct ag_backend *b, struct ag_profile *out, int max, int *n);
	void (*free)(struct ag_backend *b);
};

struct ag_backend {
	const struct ag_backend_ops *ops;
	void *priv;
};

struct ag_backend_config {
	const char *node_name;
	const char *state_dir;
	const char *fake_gpus;   /* --fake-gpus FILE */
	const char *fake_faults; /* fault file the tests write; NULL: <state>/fake-faults.json */
	const char *nvml_path;   /* library for dlopen; NULL: libnvidia-ml.so.1 */
	const char *smi_path;    /* nvidia-smi binary; NULL: "nvidia-smi" */
	bool dry_run;            /* nvidia-smi: print MIG commands, run none */
};

/* Create a backend by name ("fake", "nvidia-smi", "nvml"); NULL with err. */
struct ag_backend *ag_backend_open(const char *name, const struct ag_backend_config *cfg, char *err,
    size_t errlen);

struct ag_backend *ag_backend_fake_open(const struct ag_backend_config *cfg, char *err,
    size_t errlen);
struct ag_backend *ag_backend_smi_open(const struct ag_backend_config *cfg, char *err,
    size_t errlen);
struct ag_backend *ag_backend_nvml_open(const struct ag_backend_config *cfg, char *err,
    size_t errlen);

void ag_backend_close(struct ag_backend *b);

/* Reset the per-discover fields of g (health and telemetry unknown). */
void ag_gpu_init(struct ag_gpu *g);

/* "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" derived from seed (stable). */
void ag_derive_uuid(const char *prefix, const char *seed, char *out, size_t outlen);

/* Mark g lost or unknown with why (truncated to the contract's 200
 * characters, control characters blanked): its instances are dropped,
 * and for a lost GPU its telemetry too. */
void ag_gpu_mark(struct ag_gpu *g, enum ag_gpu_state state, const char *why);

/* True for the Xids that need a GPU reset or a node reboot (NVIDIA's Xid
 * catalog): these are never dropped from a queue. */
bool ag_xid_is_reset_class(int xid);

/*
 * Add one event of xid at ts to q (n entries, at most max): coalesced
 * into the entry of the same code (count + 1, first ts kept); else
 * appended; when q is full, the oldest application-class entry makes
 * room (a reset-class event is never dropped; an application-class one
 * arriving at a queue full of reset-class ones is). Returns false when
 * the event was dropped.
 */
bool ag_xid_add(struct ag_xid *q, int *n, int max, int xid, long long ts, int count);

/* Take what was sent (an entry of q as it was reported) out of q: its
 * count is subtracted from the entry of that code, gone at 0. */
void ag_xid_take(struct ag_xid *q, int *n, const struct ag_xid *sent);

/* The name of NVML's recovery action value (0..4): "none" ... */
const char *ag_recovery_action_name(int v);

#endif
