/*
 * smi_parse.h - parsers of nvidia-smi output (pure: text in, structs out),
 * tested on real captures in tests/fixtures/nvidia-smi/.
 */
#ifndef GP_AGENT_SMI_PARSE_H
#define GP_AGENT_SMI_PARSE_H

#include "backend.h"

/* The --query-gpu columns the nvidia-smi backend asks for. Columns are
 * picked by header name, so any order or superset parses. */
#define SMI_QUERY_FIELDS                                                     \
	"index,uuid,name,pci.bus_id,pci.device_id,memory.total,memory.used," \
	"mig.mode.current,ecc.errors.corrected.volatile.total,"              \
	"ecc.errors.uncorrected.volatile.total,power.draw,temperature.gpu,utilization.gpu"
/* Asked for only where the driver lists them (`nvidia-smi --help-query-gpu`):
 * gpu_recovery_action is R550+, the remapped rows need Ampere or later. */
#define SMI_OPTIONAL_FIELDS                                                                        \
	{                                                                                          \
		"gpu_recovery_action", "remapped_rows.correctable", "remapped_rows.uncorrectable", \
		    "remapped_rows.failure"                                                        \
	}
#define SMI_NOPTIONAL 4

/*
 * `nvidia-smi --query-gpu=… --format=csv` (with the header line, units
 * allowed): one ag_gpu per row, fields not asked or "[N/A]" left unknown.
 * Returns the number of GPUs, -1 when the header lacks index or uuid.
 */
int smi_parse_query_gpu(const char *text, struct ag_node *node);

/* One MIG device of `nvidia-smi -L`: a compute instance. One that
 * covers its GPU instance is named like it ("MIG 3g.71gb"); one of
 * several in a GPU instance carries its compute slices first ("MIG
 * 1c.3g.71gb": 1 of the 3g.71gb GPU instance's slices). */
struct smi_mig_device {
	int gpu;             /* GPU index */
	int device;          /* MIG device index within that GPU */
	char profile[32];    /* "3g.40gb", "1c.3g.71gb" as printed */
	char gi_profile[32]; /* the GPU instance's profile: "3g.71gb" */
	int ci_slices;       /* 0: the whole GPU instance; else its compute slices */
	char uuid[AG_UUID_MAX];
};

/* `nvidia-smi -L`: GPU UUIDs into node (matched by index; GPUs missing
 * from node are added) and MIG devices into devs. Returns the number of
 * MIG devices. */
int smi_parse_list(const char *text, struct ag_node *node, struct smi_mig_device *devs, int max);

/* One GPU instance of `nvidia-smi mig -lgi`. */
struct smi_gi {
	int gpu;
	char profile[32]; /* "1g.10gb" ("MIG " dropped) */
	int profile_id;
	int gi_id;
	int start, size;
};

/* The PCI bus ids of the GPUs nvidia-smi reports it cannot reach ("Unable
 * to determine the device handle for GPU0000:18:00.0: GPU is lost. …")
 * with the message, as one line each. Returns how many. */
struct smi_lost {
	char bus_id[24]; /* as printed: "0000:18:00.0" */
	char message[AG_GPU_ERROR_MAX];
};
int smi_parse_lost(const char *text, struct smi_lost *out, int max);

/* Same PCI device: the bus ids compared without their domain width
 * ("00000000:18:00.0" and "0000:18:00.0"), case-insensitive. */
bool smi_same_bus(const char *a, const char *b);

/* `nvidia-smi mig -lgi`; returns the number of GPU instances. */
int smi_parse_lgi(const char *text, struct smi_gi *out, int max);

/* `nvidia-smi -q`: per GPU (in order), the MIG devices' index -> GPU
 * instance id. Returns the number of pairs; gpu is the GPU's position. */
struct smi_q_mig {
	int gpu;
	int device;
	int gi_id;
};
int smi_parse_q_mig(const char *text, struct smi_q_mig *out, int max);

/* Join the four into node: each GPU's instances with profile, placement
 * and MIG UUID. */
void smi_join(struct ag_node *node, const struct smi_gi *gis, int ngi,
    const struct smi_mig_device *devs, int ndev, const struct smi_q_mig *qm, int nq);

#endif
