/*
 * nvml_abi.h - the part of NVML's C ABI gpupool-agent uses, written from
 * NVIDIA's NVML API reference (nvml.h of driver R535+): the types,
 * constants and signatures below must match libnvidia-ml.so.1 exactly.
 * The agent has no build-time dependency on NVML: backend_nvml.c resolves
 * these symbols with dlsym, and tests/stubs/nvml_stub.c implements them.
 */
#ifndef GP_AGENT_NVML_ABI_H
#define GP_AGENT_NVML_ABI_H

typedef int nvmlReturn_t; /* enum nvmlReturn_enum */
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NO_PERMISSION 4
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_ERROR_INSUFFICIENT_RESOURCES 23
#define NVML_ERROR_ARGUMENT_VERSION_MISMATCH 25

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;
typedef struct nvmlEventSet_st *nvmlEventSet_t;

#define NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

typedef struct {
	char busIdLegacy[16];
	unsigned int domain;
	unsigned int bus;
	unsigned int device;
	unsigned int pciDeviceId; /* device id << 16 | vendor id: 0x233010DE */
	unsigned int pciSubSystemId;
	char busId[32];
} nvmlPciInfo_t;

typedef struct {
	unsigned long long total;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_t;

/* nvml.h's nvmlMemory_v2_t: "used" leaves out what the driver and firmware
 * reserve (the v1 call counts it), as nvidia-smi shows it since R510 */
typedef struct {
	unsigned int version;
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
} nvmlMemory_v2_t;

/* NVML_STRUCT_VERSION(Memory, 2): the struct's size, the version in the top byte */
#define AG_NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2U << 24)))

typedef struct {
	unsigned int gpu;
	unsigned int memory;
} nvmlUtilization_t;

typedef struct {
	unsigned int start;
	unsigned int size;
} nvmlGpuInstancePlacement_t;

typedef struct {
	nvmlDevice_t device;
	unsigned int id;
	unsigned int profileId;
	nvmlGpuInstancePlacement_t placement;
} nvmlGpuInstanceInfo_t;

/* nvmlComputeInstanceProfileInfo_t (v1): id first; the agent reads only
 * the id and passes a larger zeroed buffer. */
typedef struct {
	unsigned int id;
	unsigned int sliceCount;
	unsigned int instanceCount;
	unsigned int multiprocessorCount;
	unsigned int sharedCopyEngineCount;
	unsigned int sharedDecoderCount;
	unsigned int sharedEncoderCount;
	unsigned int sharedJpegCount;
	unsigned int sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

#define NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED 0
/* compute-instance profiles by compute slices: 1,2,3,4,7,8,6 -> 0..6 */

typedef union {
	double dVal;
	int siVal;
	unsigned int uiVal;
	unsigned long ulVal;
	unsigned long long ullVal;
	signed long long sllVal;
	unsigned short usVal;
} nvmlValue_t;

typedef struct {
	unsigned int fieldId;
	unsigned int scopeId;
	long long timestamp;
	long long latencyUsec;
	int valueType; /* nvmlValueType_t */
	nvmlReturn_t nvmlReturn;
	nvmlValue_t value;
} nvmlFieldValue_t;

#define NVML_FI_DEV_GET_GPU_RECOVERY_ACTION \
	230 /* 0 none,1 reset,2 reboot,3 drain p2p,4 drain+reset */

typedef struct {
	nvmlDevice_t device;
	unsigned long long eventType;
	unsigned long long eventData; /* the XID for XidCriticalError */
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlEventData_t;

#define nvmlEventTypeXidCriticalError 0x0000000000000008ULL

#define NVML_TEMPERATURE_GPU 0
#define NVML_MEMORY_ERROR_TYPE_CORRECTED 0
#define NVML_MEMORY_ERROR_TYPE_UNCORRECTED 1
#define NVML_VOLATILE_ECC 0

/* The functions, as X(name, return, args) for the dlsym table. */
#define AG_NVML_FUNCS(X)                                                                           \
	X(nvmlInit_v2, nvmlReturn_t, (void))                                                       \
	X(nvmlShutdown, nvmlReturn_t, (void))                                                      \
	X(nvmlErrorString, const char *, (nvmlReturn_t))                                           \
	X(nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *))                                   \
	X(nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t, (unsigned int, nvmlDevice_t *))             \
	X(nvmlDeviceGetUUID, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int))                   \
	X(nvmlDeviceGetName, nvmlReturn_t, (nvmlDevice_t, char *, unsigned int))                   \
	X(nvmlDeviceGetPciInfo_v3, nvmlReturn_t, (nvmlDevice_t, nvmlPciInfo_t *))                  \
	X(nvmlDeviceGetMemoryInfo, nvmlReturn_t, (nvmlDevice_t, nvmlMemory_t *))                   \
	X(nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t, (nvmlDevice_t, nvmlMemory_v2_t *))             \
	X(nvmlDeviceGetMigMode, nvmlReturn_t, (nvmlDevice_t, unsigned int *, unsigned int *))      \
	X(nvmlDeviceGetGpuInstances, nvmlReturn_t,                                                 \
	    (nvmlDevice_t, unsigned int, nvmlGpuInstance_t *, unsigned int *))                     \
	X(nvmlGpuInstanceGetInfo, nvmlReturn_t, (nvmlGpuInstance_t, nvmlGpuInstanceInfo_t *))      \
	X(nvmlDeviceCreateGpuInstanceWithPlacement, nvmlReturn_t,                                  \
	    (nvmlDevice_t, unsigned int, const nvmlGpuInstancePlacement_t *, nvmlGpuInstance_t *)) \
	X(nvmlGpuInstanceDestroy, nvmlReturn_t, (nvmlGpuInstance_t))                               \
	X(nvmlGpuInstanceGetComputeInstanceProfileInfo, nvmlReturn_t,                              \
	    (nvmlGpuInstance_t, unsigned int, unsigned int, nvmlComputeInstanceProfileInfo_t *))   \
	X(nvmlGpuInstanceCreateComputeInstance, nvmlReturn_t,                                      \
	    (nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *))                            \
	X(nvmlGpuInstanceGetComputeInstances, nvmlReturn_t,                                        \
	    (nvmlGpuInstance_t, unsigned int, nvmlComputeInstance_t *, unsigned int *))            \
	X(nvmlComputeInstanceDestroy, nvmlReturn_t, (nvmlComputeInstance_t))                       \
	X(nvmlDeviceGetMaxMigDeviceCount, nvmlReturn_t, (nvmlDevice_t, unsigned int *))            \
	X(nvmlDeviceGetMigDeviceHandleByIndex, nvmlReturn_t,                                       \
	    (nvmlDevice_t, unsigned int, nvmlDevice_t *))                                          \
	X(nvmlDeviceGetGpuInstanceId, nvmlReturn_t, (nvmlDevice_t, unsigned int *))                \
	X(nvmlDeviceGetPowerUsage, nvmlReturn_t, (nvmlDevice_t, unsigned int *))                   \
	X(nvmlDeviceGetTemperature, nvmlReturn_t, (nvmlDevice_t, int, unsigned int *))             \
	X(nvmlDeviceGetUtilizationRates, nvmlReturn_t, (nvmlDevice_t, nvmlUtilization_t *))        \
	X(nvmlDeviceGetTotalEccErrors, nvmlReturn_t,                                               \
	    (nvmlDevice_t, int, int, unsigned long long *))                                        \
	X(nvmlDeviceGetRemappedRows, nvmlReturn_t,                                                 \
	    (nvmlDevice_t, unsigned int *, unsigned int *, unsigned int *, unsigned int *))        \
	X(nvmlDeviceGetFieldValues, nvmlReturn_t, (nvmlDevice_t, int, nvmlFieldValue_t *))         \
	X(nvmlEventSetCreate, nvmlReturn_t, (nvmlEventSet_t *))                                    \
	X(nvmlDeviceRegisterEvents, nvmlReturn_t,                                                  \
	    (nvmlDevice_t, unsigned long long, nvmlEventSet_t))                                    \
	X(nvmlEventSetWait_v2, nvmlReturn_t, (nvmlEventSet_t, nvmlEventData_t *, unsigned int))    \
	X(nvmlEventSetFree, nvmlReturn_t, (nvmlEventSet_t))

#endif
