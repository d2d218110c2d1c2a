/*
 * peer_nvml_shim.c: the benchmark's libnvidia-ml.so.1, i.e. the project's fake NVML
 * (tests/fakenvml/fake_nvml.c, built as libfakenvml-core.so) plus the entry points nvitop and nvtop
 * need but gpusight never calls. Every tool in the benchmark loads this same library.
 *
 * The extra calls answer constants for an H100 SXM (PCIe Gen5 x16, max clocks, temperature
 * thresholds, idle encoder/decoder, persistence mode on, default compute mode, no display), a PCI bus
 * id derived from the device index, the power management limit as the scenario's enforced limit, and
 * the v1 spellings of calls the fake has in later versions. They are cheap: none of them sleeps. Symbols
 * not defined here resolve to the fake core through this library's DT_NEEDED entry, which is also
 * where dlsym() on this library's handle looks next.
 */
#include <stdio.h>
#include <string.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;

enum { NVML_SUCCESS = 0, NVML_ERROR_INVALID_ARGUMENT = 2, NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_INSUFFICIENT_SIZE = 7 };

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    char busId[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    unsigned int reserved0, reserved1, reserved2, reserved3;
} nvmlPciInfo_v1_t;

typedef struct { unsigned int pid; unsigned long long usedGpuMemory; } nvmlProcessInfo_v1_t;
typedef struct { unsigned int pid; unsigned long long usedGpuMemory; unsigned int gpuInstanceId, computeInstanceId; } nvmlProcessInfo_v2_t;

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count);
nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v2_t *);
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v2_t *);
nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t, unsigned int *);

#define H100_PCI_DEVICE_ID 0x233010DEu
#define MAX_PROCESSES 1024

/* Index of a handle the fake handed out, or -1. */
static int index_of(nvmlDevice_t device) {
    unsigned int count = 0;
    if (nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS) return -1;
    for (unsigned int i = 0; i < count; i++) {
        nvmlDevice_t handle;
        if (nvmlDeviceGetHandleByIndex_v2(i, &handle) == NVML_SUCCESS && handle == device) return (int)i;
    }
    return -1;
}

nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

static nvmlReturn_t pci_info(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    int index = index_of(device);
    if (index < 0 || pci == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    memset(pci, 0, sizeof *pci);
    pci->bus = 0x18u + 0x10u * (unsigned int)index;
    pci->pciDeviceId = H100_PCI_DEVICE_ID;
    pci->pciSubSystemId = 0x16C110DEu;
    snprintf(pci->busId, sizeof pci->busId, "00000000:%02X:00.0", pci->bus);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "0000:%02X:00.0", pci->bus);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) { return pci_info(device, pci); }
nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) { return pci_info(device, pci); }

nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_v1_t *pci) {
    nvmlPciInfo_t full;
    nvmlReturn_t r = pci_info(device, &full);
    if (r != NVML_SUCCESS) return r;
    memset(pci, 0, sizeof *pci);
    memcpy(pci->busId, full.busIdLegacy, sizeof pci->busId);
    pci->domain = full.domain;
    pci->bus = full.bus;
    pci->device = full.device;
    pci->pciDeviceId = full.pciDeviceId;
    pci->pciSubSystemId = full.pciSubSystemId;
    return NVML_SUCCESS;
}

static nvmlReturn_t constant(nvmlDevice_t device, unsigned int *out, unsigned int value) {
    if (out == NULL || index_of(device) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *out = value;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { return constant(d, v, 5); }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t d, unsigned int *v) { return constant(d, v, 5); }
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { return constant(d, v, 16); }
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t d, unsigned int *v) { return constant(d, v, 16); }

static nvmlReturn_t idle_engine(nvmlDevice_t device, unsigned int *utilization, unsigned int *period_us) {
    nvmlReturn_t r = constant(device, utilization, 0);
    if (r != NVML_SUCCESS) return r;
    if (period_us != NULL) *period_us = 167000;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p) { return idle_engine(d, u, p); }
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t d, unsigned int *u, unsigned int *p) { return idle_engine(d, u, p); }

nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    static const unsigned int mhz[] = {1980, 1980, 2619, 1755}; /* graphics, SM, memory, video */
    if (type < 0 || type > 3) return NVML_ERROR_NOT_SUPPORTED;
    return constant(device, clock, mhz[type]);
}

nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, int type, unsigned int *temp) {
    static const unsigned int celsius[] = {92, 89, 95, 87}; /* shutdown, slowdown, memory max, GPU max */
    if (type < 0 || type > 3) return NVML_ERROR_NOT_SUPPORTED;
    return constant(device, temp, celsius[type]);
}

nvmlReturn_t nvmlDeviceGetDisplayActive(nvmlDevice_t d, unsigned int *v) { return constant(d, v, 0); }
nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, unsigned int *v) { return constant(d, v, 1); }
nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, unsigned int *v) { return constant(d, v, 0); }
nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t d, unsigned int *v) { return nvmlDeviceGetEnforcedPowerLimit(d, v); }

/* Driver models (WDDM/TCC) exist on Windows only; Linux drivers answer NOT_SUPPORTED. */
nvmlReturn_t nvmlDeviceGetDriverModel(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    (void)current;
    (void)pending;
    return index_of(d) < 0 ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_NOT_SUPPORTED;
}

typedef nvmlReturn_t (*process_call)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_v2_t *);

/* The v1 process list: the fake's v2 list with each entry cut to pid and memory. */
static nvmlReturn_t processes_v1(process_call call, nvmlDevice_t device, unsigned int *count, nvmlProcessInfo_v1_t *out) {
    nvmlProcessInfo_v2_t full[MAX_PROCESSES];
    unsigned int have = MAX_PROCESSES;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    nvmlReturn_t r = call(device, &have, full);
    if (r != NVML_SUCCESS) return r;
    if (out == NULL || *count < have) {
        *count = have;
        return have == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned int i = 0; i < have; i++) {
        out[i].pid = full[i].pid;
        out[i].usedGpuMemory = full[i].usedGpuMemory;
    }
    *count = have;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    return processes_v1(nvmlDeviceGetComputeRunningProcesses_v3, d, n, p);
}

nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t d, unsigned int *n, nvmlProcessInfo_v1_t *p) {
    return processes_v1(nvmlDeviceGetGraphicsRunningProcesses_v3, d, n, p);
}
