/*
 * fake_nvml.c: a scenario-driven fake of libnvidia-ml.so.1 for gpusight's tests.
 *
 * The real pynvml (ctypes) calls into this library exactly as it would call the NVIDIA one; only
 * the answers come from a text file. Built by tests/support/fake_nvml.py with
 *     cc -shared -fPIC -O2 -Wl,-soname,libnvidia-ml.so.1 -o libnvidia-ml.so.1 fake_nvml.c -lpthread -lm
 *
 * Environment
 *   FAKE_NVML_SCENARIO  path of the scenario file. Read with getenv on every call; the file is parsed
 *                       again whenever its path, inode, mtime or size changes, so a test can rewrite it
 *                       mid-run (write to a temporary name and rename it over the old one).
 *                       Unset: nvmlInit answers NVML_ERROR_DRIVER_NOT_LOADED (a machine without a
 *                       running driver). Set but unreadable: NVML_ERROR_UNKNOWN.
 *   FAKE_NVML_CALL_LOG  optional path; every entry point appends one line "<symbol> <device> <tid>\n"
 *                       (device index or -1, tid = Linux thread id) so tests can count calls and see
 *                       which thread made them. nvmlDeviceGetProcessUtilization also logs
 *                       "nvmlDeviceGetProcessUtilization.lastSeen <device> <tid> <lastSeenTimeStamp>".
 *                       A call that blocks (call_delay_ms, pcie_delay_ms) logs "<symbol>.delay <device> <tid> <ms>"
 *                       as it starts to wait, and nvmlShutdown logs "nvmlShutdown -1 <tid> <in flight>": how
 *                       many calls were blocked at that moment (a shutdown under a running call logs > 0).
 *
 * Scenario format: one statement per line, words separated by blanks, '#' starts a comment line.
 *   Global keys
 *     driver_version <text>            nvmlSystemGetDriverVersion
 *     cuda_driver_version <int>        nvmlSystemGetCudaDriverVersion(_v2), e.g. 12040
 *     nvml_version <text>              nvmlSystemGetNVMLVersion
 *     init_error <code>                nvmlInit/nvmlInit_v2/nvmlInitWithFlags return this code
 *     device_count <n>                 default: 1 + the highest device index mentioned
 *     pcie_delay_ms <n>                nvmlDeviceGetPcieThroughput sleeps this long (lock not held)
 *     call_delay_ms <n>                every per-device call (nvmlDeviceGetHandleByIndex and all device
 *                                      queries) sleeps this long before it answers (lock not held), like
 *                                      a driver that hangs; it then answers from the scenario as it is
 *   Per-device keys: "device <index> <key> <value...>". A key that is never given makes the matching
 *   call answer NVML_ERROR_NOT_SUPPORTED.
 *     name <text...> | uuid <text>
 *     pci_bus_id <text>                                   nvmlDeviceGetPciInfo_v3 busId (domain, bus and device
 *                                                         parsed from it when it reads DDDDDDDD:BB:DD.F)
 *     minor <n>                                           nvmlDeviceGetMinorNumber
 *     util_gpu | util_mem <percent>                       nvmlDeviceGetUtilizationRates
 *     mem_total | mem_used | mem_reserved <bytes>         nvmlDeviceGetMemoryInfo(_v2); v1 "used"
 *                                                         includes reserved, v2 reports it apart
 *     power_mw | power_limit_mw <mW>                      power usage / enforced limit
 *     temp <C> | fan <percent> | pstate <0..15>
 *     clock_sm | clock_mem <MHz>                          nvmlDeviceGetClockInfo (GRAPHICS reads clock_sm)
 *     energy_mj <mJ>                                      nvmlDeviceGetTotalEnergyConsumption, field 83
 *     throttle <mask>                                     clocks event / throttle reasons (0x.. allowed)
 *     pcie_tx_bytes | pcie_rx_bytes <bytes>               cumulative counters, fields 197 / 198
 *     pcie_counter_time_us <us>                           timestamp of those field values (default: now)
 *     pcie_tx_rate | pcie_rx_rate <bytes/s>               a rate the fake integrates into fields 197 / 198
 *                                                         (added to pcie_tx_bytes / pcie_rx_bytes if given)
 *     nvlink_tx_kib | nvlink_rx_kib <KiB>                 cumulative NVLink data counters, fields 138 / 139
 *                                                         (NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX/RX); only
 *                                                         scopeId UINT_MAX (all links) is answered, a single
 *                                                         link's scope gets INVALID_ARGUMENT
 *     nvlink_tx_rate | nvlink_rx_rate <bytes/s>           a rate integrated into fields 138 / 139 (in KiB)
 *     pcie_tx_kbps | pcie_rx_kbps <KB/s>                  nvmlDeviceGetPcieThroughput
 *     ecc_mode <0|1> | ecc_uncorrected <count>            ECC mode; volatile uncorrected total
 *     mig_mode <0|1>
 *     compute_capability <major> <minor>
 *     gpm_supported <0|1>                                 nvmlGpmQueryDeviceSupport (absent: 0)
 *     gpm <metric id> <value>                             value nvmlGpmMetricsGet reports for the id (the
 *                                                         value at the later sample's time)
 *     lost <0|1>                                          every per-device call: GPU_IS_LOST (15)
 *     error <call> <code>                                 that call returns <code> (see CALL NAMES)
 *     compute_proc <pid> <bytes|na> | graphics_proc <pid> <bytes|na>   running processes
 *     proc_util <pid> <sm> <mem> <timestamp us>           nvmlDeviceGetProcessUtilization samples
 *     proc_util_live <pid> <mem> <sm value>               one sample per call, stamped with the call's time
 *                                                         (when that is after lastSeenTimeStamp)
 *   CALL NAMES for "error": handle name uuid utilization memory memory_v2 power power_limit
 *     temperature temperature_v fan clock pstate energy energy_field throttle clocks_event_reasons
 *     pcie_throughput field_values pcie_counters ecc_mode ecc_errors mig_mode compute_capability
 *     compute_procs graphics_procs process_utilization gpm_support gpm_sample gpm_metrics nvlink_counters
 *     pci_info minor.
 *   "memory" also fails memory_v2, "temperature" also temperature_v, "throttle" also
 *   clocks_event_reasons; pcie_counters, nvlink_counters and energy_field are per-field returns inside
 *   field values.
 *
 * Health and video engines (per-device keys; a key left out makes its call answer NOT_SUPPORTED):
 *     ecc_corrected | ecc_corrected_aggregate | ecc_uncorrected_aggregate <count>
 *                                                         nvmlDeviceGetTotalEccErrors for (corrected, volatile),
 *                                                         (corrected, aggregate), (uncorrected, aggregate); with
 *                                                         ECC on, a count left out reads 0
 *     remap_corrected | remap_uncorrected <rows> | remap_pending | remap_failed <0|1>
 *                                                         nvmlDeviceGetRemappedRows (remap_corrected gates it)
 *     retired_sbe | retired_dbe <pages> | retired_pending <0|1>
 *                                                         nvmlDeviceGetRetiredPages (per cause; page addresses
 *                                                         are made up) and ...PendingStatus; leave them out on
 *                                                         A100 and later, which remap rows instead
 *     pcie_gen | pcie_gen_max | pcie_width | pcie_width_max <n>
 *                                                         nvmlDeviceGetCurrPcieLinkGeneration, ...MaxPcieLink-
 *                                                         Generation, ...CurrPcieLinkWidth, ...MaxPcieLinkWidth
 *     pcie_replay <count>                                 nvmlDeviceGetPcieReplayCounter
 *     nvlink_crc_flit | nvlink_crc_data | nvlink_replay | nvlink_recovery <count>
 *                                                         field values 38 / 45 / 52 / 59 (the _TOTAL NVLink
 *                                                         error counters, summed over the links)
 *     enc_util | dec_util | jpg_util | ofa_util <percent>  nvmlDeviceGet{Encoder,Decoder,Jpg,Ofa}Utilization
 *                                                         (sampling period answered: 167000 us)
 *     proc_codec <pid> <enc> <dec>                        encUtil / decUtil of that pid's utilization samples
 *     event_types <mask>                                  nvmlDeviceGetSupportedEventTypes (0x8 = Xid)
 *     xid <seq> <code> [<gi> <ci>]                        an Xid event: each (device, seq) is delivered once to
 *                                                         every event set the device is registered in, by
 *                                                         nvmlEventSetWait_v2 (gi/ci default 0xFFFFFFFF); add one
 *                                                         mid-run by rewriting the scenario with a new seq
 *   Event sets: nvmlEventSetCreate / nvmlDeviceRegisterEvents (error call "register_events") /
 *   nvmlEventSetWait_v2 / nvmlEventSetFree. The wait answers an undelivered Xid of a registered device,
 *   else GPU_IS_LOST when a registered device is lost, else it looks again every 50 ms with the lock
 *   released (counted as in flight) and answers TIMEOUT after the timeout. A look stats the scenario
 *   file and parses it only when it changed, and a parse clears and copies only the devices the
 *   scenario names: a real driver's wait blocks in the kernel, and a fake that woke every 10 ms and
 *   copied 4 MB at each rewrite of a moving scenario cost more CPU than gpusight's Xid thread. Each wait logs
 *   "nvmlEventSetWait_v2 -1 <tid>" as it starts. CALL NAMES for "error" added: ecc_counts remapped_rows
 *   retired_pages pcie_link pcie_replay encoder decoder jpg ofa event_types register_events nvlink_errors.
 *
 * Values that change with time: wherever a per-device key takes one number (every key of the list above
 *   that is a plain value, a "gpm" value, the <sm> of proc_util_live and the *_rate keys), the number may
 *   be replaced by a wave of the wall clock (CLOCK_REALTIME, so separate processes reading the same
 *   scenario see the same value at the same moment):
 *     square HIGH LOW ON_MS OFF_MS [PHASE_MS]   HIGH for ON_MS, then LOW for OFF_MS, repeating
 *     sine MID AMPLITUDE PERIOD_MS [PHASE_MS]   MID + AMPLITUDE * sin(2 pi t / PERIOD_MS)
 *   PHASE_MS delays the wave (the value at t is the unshifted value at t - PHASE_MS); t counts from
 *   1700000000 s since the Unix epoch. Integer answers are rounded and never below 0. A rate's counter
 *   is its base value plus the rate integrated from that instant, so every process reads the same counter.
 *   A malformed wave leaves the key out (NOT_SUPPORTED).
 *
 * MIG (multi-instance GPU). "device <i> mig_mode 1" turns MIG on; its MIG devices are given by
 *   "device <i> mig <k> <key> <value...>", k = the MIG device index 0..max_mig_devices-1 (a slot never
 *   mentioned is empty: nvmlDeviceGetMigDeviceHandleByIndex answers NVML_ERROR_NOT_FOUND there):
 *     device <i> max_mig_devices <n>     nvmlDeviceGetMaxMigDeviceCount (default 7 when mig_mode is given)
 *     mig <k> gi <id> | ci <id>          nvmlDeviceGetGpuInstanceId / nvmlDeviceGetComputeInstanceId
 *     mig <k> uuid <MIG-...>             nvmlDeviceGetUUID on the MIG handle
 *     mig <k> name <text...>             nvmlDeviceGetName, as the driver writes it: "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
 *     mig <k> mem_total | mem_used <bytes>   nvmlDeviceGetMemoryInfo(_v2) on the MIG handle (reserved 0)
 *     mig <k> sm_count <n>               nvmlDeviceGetAttributes_v2 multiprocessorCount
 *     mig <k> slices <gi slices> <ci slices> <memory MB>   gpuInstanceSliceCount, computeInstanceSliceCount,
 *                                        memorySizeMB of nvmlDeviceGetAttributes_v2 (absent: NOT_SUPPORTED)
 *     mig <k> compute_proc <pid> <bytes|na>   nvmlDeviceGetComputeRunningProcesses on the MIG handle, with
 *                                        gpuInstanceId/computeInstanceId set; the parent's list is the sum of
 *                                        all of them (plus its own compute_proc lines), as for a privileged user
 *     mig <k> gpm <metric id> <value>    what nvmlGpmMetricsGet reports between two nvmlGpmMigSampleGet samples
 *                                        of this GPU instance (needs the parent's gpm_supported 1)
 *     mig <k> error <call> <code>        that call on the MIG handle returns <code> (calls: name uuid memory
 *                                        memory_v2 compute_procs gi ci attributes handle parent gpm_sample)
 *   An unprivileged user is "device <i> error compute_procs 4": the parent's list answers NO_PERMISSION
 *   while the MIG handles' lists still answer.
 *   MIG handles are distinct pointers (one per parent and slot) that the fake maps back to both. What the
 *   fake relies on, from nvml.h (12.x) and NVML's API reference:
 *   - nvmlDeviceGetUtilizationRates: "On MIG-enabled GPUs, querying device utilization rates is not
 *     currently supported": NOT_SUPPORTED on a MIG-enabled parent and on MIG handles. The same for
 *     nvmlDeviceGetProcessUtilization (per-process samples are not kept in MIG mode).
 *   - nvmlDeviceGetComputeRunningProcesses / nvmlDeviceGetMemoryInfo: "In MIG mode, if device handle is
 *     provided, the API returns aggregate information, only if the caller has appropriate privileges.
 *     Per-instance information can be queried by using specific MIG device handles."
 *   - nvmlDeviceGetMigDeviceHandleByIndex: NOT_FOUND where no MIG device exists at the index;
 *     nvmlDeviceGetGpuInstanceId / ComputeInstanceId: NOT_SUPPORTED on a handle that is not a MIG device.
 *   - Temperature, power, clocks, fan, ECC, PCIe, fields and the other whole-GPU readings belong to the
 *     parent: every other call on a MIG handle answers NOT_SUPPORTED.
 *   - GPM per GPU instance: nvmlGpmMigSampleGet(parent, gpuInstanceId, sample) (Hopper and later); a
 *     GPU instance id the parent does not have gets INVALID_ARGUMENT.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int nvmlReturn_t;
typedef void *nvmlDevice_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999,
};

#define MAX_DEVICES 64
#define MAX_PROCS 256
#define MAX_SAMPLES 256
#define MAX_ERRORS 32
#define MAX_GPM 64
#define TEXT_LEN 96
#define NA_VALUE 0xFFFFFFFFFFFFFFFFULL

/* ---- structures with the layouts pynvml 13 passes ---- */
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
#define NVML_MEMORY_V2 0x02000028u
typedef struct { unsigned int version; int sensorType; int temperature; } nvmlTemperature_t;
#define NVML_TEMPERATURE_V1 0x100000Cu
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
    unsigned int pid;
    unsigned long long timeStamp;
    unsigned int smUtil, memUtil, encUtil, decUtil;
} nvmlProcessUtilizationSample_t;
typedef union {
    double dVal;
    unsigned int uiVal;
    unsigned long ulVal;
    unsigned long long ullVal;
    long long sllVal;
    int siVal;
    unsigned short usVal;
} nvmlValue_t;
typedef struct {
    unsigned int fieldId, scopeId;
    long long timestamp, latencyUsec;
    int valueType;
    nvmlReturn_t nvmlReturn;
    nvmlValue_t value;
} nvmlFieldValue_t;
#define NVML_VALUE_TYPE_UNSIGNED_LONG_LONG 3
#define FI_TOTAL_ENERGY 83
#define FI_PCIE_TX_BYTES 197
#define FI_PCIE_RX_BYTES 198
#define FI_NVLINK_TX_KIB 138 /* NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX: cumulative KiB; scopeId = link or UINT_MAX */
#define FI_NVLINK_RX_KIB 139
#define ALL_LINKS 0xFFFFFFFFu
typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;
typedef struct { unsigned int version, isSupportedDevice; } nvmlGpmSupport_t;
typedef struct { const char *shortName, *longName, *unit; } nvmlGpmMetricInfo_t;
typedef struct {
    unsigned int metricId;
    nvmlReturn_t nvmlReturn;
    double value;
    nvmlGpmMetricInfo_t metricInfo;
} nvmlGpmMetric_t;
#define NVML_GPM_METRIC_MAX 477
typedef struct fake_gpm_sample fake_gpm_sample;
typedef struct {
    unsigned int version, numMetrics;
    fake_gpm_sample *sample1, *sample2;
    nvmlGpmMetric_t metrics[NVML_GPM_METRIC_MAX];
} nvmlGpmMetricsGet_t;

/* ---- scenario state ---- */
enum key_id {
    K_UTIL_GPU, K_UTIL_MEM, K_MEM_TOTAL, K_MEM_USED, K_MEM_RESERVED, K_POWER, K_POWER_LIMIT, K_TEMP,
    K_FAN, K_CLOCK_SM, K_CLOCK_MEM, K_PSTATE, K_ENERGY, K_THROTTLE, K_PCIE_TX_BYTES, K_PCIE_RX_BYTES,
    K_PCIE_TIME, K_PCIE_TX_KBPS, K_PCIE_RX_KBPS, K_ECC_MODE, K_ECC_UNCORRECTED, K_MIG_MODE,
    K_GPM_SUPPORTED, K_LOST, K_PCIE_TX_RATE, K_PCIE_RX_RATE, K_NVLINK_TX_KIB, K_NVLINK_RX_KIB,
    K_NVLINK_TX_RATE, K_NVLINK_RX_RATE, K_MINOR,
    /* health and video engines */
    K_ECC_CORR, K_ECC_CORR_AGG, K_ECC_UNC_AGG, K_REMAP_CORR, K_REMAP_UNC, K_REMAP_PENDING, K_REMAP_FAILED,
    K_RETIRED_SBE, K_RETIRED_DBE, K_RETIRED_PENDING, K_PCIE_GEN, K_PCIE_GEN_MAX, K_PCIE_WIDTH, K_PCIE_WIDTH_MAX,
    K_PCIE_REPLAY, K_NVLINK_CRC_FLIT, K_NVLINK_CRC_DATA, K_NVLINK_REPLAY, K_NVLINK_RECOVERY, K_ENC_UTIL,
    K_DEC_UTIL, K_JPG_UTIL, K_OFA_UTIL, K_EVENT_TYPES,
    K_MAX_MIG, /* MIG */
    K_COUNT
};
static const char *const KEY_NAMES[K_COUNT] = {
    "util_gpu", "util_mem", "mem_total", "mem_used", "mem_reserved", "power_mw", "power_limit_mw", "temp",
    "fan", "clock_sm", "clock_mem", "pstate", "energy_mj", "throttle", "pcie_tx_bytes", "pcie_rx_bytes",
    "pcie_counter_time_us", "pcie_tx_kbps", "pcie_rx_kbps", "ecc_mode", "ecc_uncorrected", "mig_mode",
    "gpm_supported", "lost", "pcie_tx_rate", "pcie_rx_rate", "nvlink_tx_kib", "nvlink_rx_kib",
    "nvlink_tx_rate", "nvlink_rx_rate", "minor",
    /* health and video engines */
    "ecc_corrected", "ecc_corrected_aggregate", "ecc_uncorrected_aggregate", "remap_corrected", "remap_uncorrected",
    "remap_pending", "remap_failed", "retired_sbe", "retired_dbe", "retired_pending", "pcie_gen", "pcie_gen_max",
    "pcie_width", "pcie_width_max", "pcie_replay", "nvlink_crc_flit", "nvlink_crc_data", "nvlink_replay",
    "nvlink_recovery", "enc_util", "dec_util", "jpg_util", "ofa_util", "event_types",
    "max_mig_devices", /* MIG */
};

/* A value that may change with the wall clock (see "Values that change with time" above). */
enum wave_kind { W_CONST, W_SQUARE, W_SINE };
typedef struct {
    int kind;
    unsigned long long constant;            /* W_CONST: the integer as given (hex allowed); a: the same as a double */
    double a, b, c, d, phase_ms;            /* square: high low on_ms off_ms; sine: mid amplitude period_ms */
} fake_wave;
#define FAKE_EPOCH_S 1700000000LL           /* rates are integrated into counters from this instant */
#define MAX_WORDS 12

typedef struct { unsigned int pid; unsigned long long mem; } fake_proc;
typedef struct { unsigned int pid, mem; fake_wave sm; } fake_live_util;
typedef struct { char call[32]; int code; } fake_error;
/* health: an injected Xid event, and a process's encoder/decoder percent */
#define MAX_XIDS 64
typedef struct { unsigned long long seq, code; unsigned int gi, ci; } fake_xid;
typedef struct { unsigned int pid, enc, dec; } fake_codec;

/* ---- MIG: one MIG device (a compute instance in a GPU instance) of a parent GPU ---- */
#define MAX_MIG 8
#define MAX_MIG_PROCS 32
#define MAX_MIG_GPM 16
typedef struct {
    int present;
    char name[TEXT_LEN], uuid[TEXT_LEN];
    int has_name, has_uuid, has_gi, has_ci, has_sm_count, has_slices, has_mem;
    unsigned int gi, ci, sm_count, gi_slices, ci_slices;
    unsigned long long memory_mb, mem_total, mem_used;
    int n_compute, n_gpm, n_errors;
    fake_proc compute[MAX_MIG_PROCS];
    unsigned int gpm_ids[MAX_MIG_GPM];
    fake_wave gpm_values[MAX_MIG_GPM];
    fake_error errors[MAX_ERRORS];
} fake_mig;

typedef struct {
    char name[TEXT_LEN], uuid[TEXT_LEN], pci_bus_id[TEXT_LEN];
    int has_name, has_uuid, has_cc, has_pci_bus_id;
    int cc_major, cc_minor;
    fake_wave wave[K_COUNT];
    int has[K_COUNT];
    int n_errors;
    fake_error errors[MAX_ERRORS];
    int n_compute, n_graphics, n_samples, n_gpm, n_live;
    fake_proc compute[MAX_PROCS], graphics[MAX_PROCS];
    nvmlProcessUtilizationSample_t samples[MAX_SAMPLES];
    fake_live_util live[MAX_PROCS];
    unsigned int gpm_ids[MAX_GPM];
    fake_wave gpm_values[MAX_GPM];
    /* health */
    int n_xids, n_codecs;
    fake_xid xids[MAX_XIDS];
    fake_codec codecs[MAX_PROCS];
    fake_mig mig[MAX_MIG]; /* MIG devices by MIG index */
} fake_device;

typedef struct {
    int loaded;      /* 0: no scenario (env unset), -1: unreadable, 1: parsed */
    char driver_version[TEXT_LEN], nvml_version[TEXT_LEN];
    int has_driver_version, has_nvml_version, has_cuda_version;
    int cuda_version;
    int init_error;
    int device_count;
    int pcie_delay_ms;
    int call_delay_ms;
    int used; /* devices[0 .. used) are cleared and parsed; those after are never read */
    fake_device devices[MAX_DEVICES];
} fake_scenario;

struct fake_gpm_sample {
    unsigned int magic;
    int device;
    long gpu_instance; /* -1: the whole GPU (nvmlGpmSampleGet); else the GPU instance id (nvmlGpmMigSampleGet) */
    struct timespec taken;
    int n;
    unsigned int ids[MAX_GPM];
    double values[MAX_GPM];
};
#define GPM_MAGIC 0x6770ad5u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static fake_scenario current, scratch;
static char current_path[4096];
static struct stat current_stat;
static int init_count;
static int in_flight; /* calls sleeping outside the lock right now */
static char handles[MAX_DEVICES]; /* a device handle is the address of handles[index] */
static char mig_handles[MAX_DEVICES][MAX_MIG]; /* a MIG handle is the address of mig_handles[parent][mig index] */

/* ---- helpers ---- */
static void log_call_arg(const char *symbol, int device, unsigned long long arg, int with_arg) {
    const char *path = getenv("FAKE_NVML_CALL_LOG");
    if (path == NULL || *path == '\0') return;
    char line[200];
    int len = with_arg
        ? snprintf(line, sizeof line, "%s %d %ld %llu\n", symbol, device, (long)syscall(SYS_gettid), arg)
        : snprintf(line, sizeof line, "%s %d %ld\n", symbol, device, (long)syscall(SYS_gettid));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    ssize_t ignored = write(fd, line, (size_t)len);
    (void)ignored;
    close(fd);
}

static void log_call(const char *symbol, int device) { log_call_arg(symbol, device, 0, 0); }

/* Clear devices up to ``count`` that this parse has not touched yet. */
static void use_devices(fake_scenario *s, int count) {
    if (count <= s->used) return;
    memset(&s->devices[s->used], 0, (size_t)(count - s->used) * sizeof s->devices[0]);
    s->used = count;
}

static fake_device *device_at(fake_scenario *s, long index) {
    if (index < 0 || index >= MAX_DEVICES) return NULL;
    use_devices(s, (int)index + 1);
    return &s->devices[index];
}

static void copy_text(char *dst, const char *src) {
    snprintf(dst, TEXT_LEN, "%s", src);
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)(ts.tv_sec - FAKE_EPOCH_S) * 1000.0 + (double)ts.tv_nsec / 1e6;
}

/* Parse "<number>", "square HIGH LOW ON_MS OFF_MS [PHASE_MS]" or "sine MID AMPLITUDE PERIOD_MS [PHASE_MS]"
 * from n words. Returns 0 when the words do not make a value. */
static int parse_wave(char **words, int n, fake_wave *w) {
    memset(w, 0, sizeof *w);
    if (n < 1) return 0;
    int square = strcmp(words[0], "square") == 0, sine = strcmp(words[0], "sine") == 0;
    if (!square && !sine) {
        w->kind = W_CONST;
        w->constant = strtoull(words[0], NULL, 0);
        w->a = strtod(words[0], NULL);
        return 1;
    }
    int need = square ? 4 : 3;
    if (n - 1 < need) return 0;
    double v[5] = {0, 0, 0, 0, 0};
    for (int i = 0; i < need + 1 && i < n - 1; i++) v[i] = strtod(words[i + 1], NULL);
    w->kind = square ? W_SQUARE : W_SINE;
    w->a = v[0];
    w->b = v[1];
    w->c = v[2];
    w->d = square ? v[3] : 0.0;
    w->phase_ms = v[need];
    return square ? (w->c >= 0 && w->d >= 0 && w->c + w->d > 0) : w->c > 0;
}

/* The wave's value at t_ms (milliseconds since FAKE_EPOCH_S). */
static double wave_at(const fake_wave *w, double t_ms) {
    double u = t_ms - w->phase_ms;
    if (w->kind == W_SQUARE) {
        double period = w->c + w->d;
        return u - floor(u / period) * period < w->c ? w->a : w->b;
    }
    if (w->kind == W_SINE) return w->a + w->b * sin(2.0 * M_PI * u / w->c);
    return w->a;
}

/* The value now, as NVML's integer answers give it: rounded, never below 0. */
static unsigned long long wave_value(const fake_wave *w) {
    if (w->kind == W_CONST) return w->constant;
    double v = wave_at(w, now_ms());
    return v <= 0 ? 0ULL : (unsigned long long)llround(v);
}
#define VAL(d, key) wave_value(&(d)->wave[key])

/* An antiderivative of the wave (a rate per second) over milliseconds since FAKE_EPOCH_S. */
static long double wave_area(const fake_wave *w, double t_ms) {
    long double u = (long double)t_ms - w->phase_ms;
    if (w->kind == W_SQUARE) {
        long double period = (long double)w->c + w->d;
        long double cycles = floorl(u / period), r = u - cycles * period;
        long double part = r < w->c ? w->a * r : w->a * w->c + w->b * (r - w->c);
        return (cycles * (w->a * w->c + w->b * w->d) + part) / 1000.0L;
    }
    if (w->kind == W_SINE) {
        long double turn = 2.0L * (long double)M_PI;
        return (w->a * u - w->b * w->c / turn * cosl(turn * u / w->c)) / 1000.0L;
    }
    return (long double)w->a * (long double)t_ms / 1000.0L;
}

/* A cumulative counter: its base value plus the rate integrated from FAKE_EPOCH_S until now, over divisor. */
static unsigned long long counter_value(const fake_device *d, int base_key, int rate_key, long double divisor) {
    unsigned long long base = d->has[base_key] ? VAL(d, base_key) : 0ULL;
    if (!d->has[rate_key]) return base;
    const fake_wave *w = &d->wave[rate_key];
    long double added = (wave_area(w, now_ms()) - wave_area(w, 0.0)) / divisor;
    return added <= 0 ? base : base + (unsigned long long)added;
}

static int parse_health_line(fake_device *d, const char *key, char **words, int n);
/* "mig <k> <key> <value...>" of a device line, split into n words (words[0] = k). */
static void parse_mig_line(fake_device *d, char **words, int n) {
    long slot = strtol(words[0], NULL, 10);
    if (slot < 0 || slot >= MAX_MIG) return;
    fake_mig *m = &d->mig[slot];
    const char *key = words[1];
    char *a = n > 2 ? words[2] : NULL, *b = n > 3 ? words[3] : NULL, *c = n > 4 ? words[4] : NULL;
    m->present = 1;
    if (a == NULL) return;
    if (strcmp(key, "name") == 0) { /* the name's words joined by single blanks */
        m->name[0] = '\0';
        for (int i = 2; i < n; i++) {
            size_t used = strlen(m->name);
            snprintf(m->name + used, TEXT_LEN - used, "%s%s", i > 2 ? " " : "", words[i]);
        }
        m->has_name = 1;
    } else if (strcmp(key, "uuid") == 0) {
        copy_text(m->uuid, a);
        m->has_uuid = 1;
    } else if (strcmp(key, "gi") == 0) {
        m->gi = (unsigned int)strtoul(a, NULL, 10);
        m->has_gi = 1;
    } else if (strcmp(key, "ci") == 0) {
        m->ci = (unsigned int)strtoul(a, NULL, 10);
        m->has_ci = 1;
    } else if (strcmp(key, "sm_count") == 0) {
        m->sm_count = (unsigned int)strtoul(a, NULL, 10);
        m->has_sm_count = 1;
    } else if (strcmp(key, "slices") == 0 && c) {
        m->gi_slices = (unsigned int)strtoul(a, NULL, 10);
        m->ci_slices = (unsigned int)strtoul(b, NULL, 10);
        m->memory_mb = strtoull(c, NULL, 0);
        m->has_slices = 1;
    } else if (strcmp(key, "mem_total") == 0) {
        m->mem_total = strtoull(a, NULL, 0);
        m->has_mem = 1;
    } else if (strcmp(key, "mem_used") == 0) {
        m->mem_used = strtoull(a, NULL, 0);
    } else if (strcmp(key, "compute_proc") == 0 && b && m->n_compute < MAX_MIG_PROCS) {
        m->compute[m->n_compute].pid = (unsigned int)strtoul(a, NULL, 10);
        m->compute[m->n_compute].mem = strcmp(b, "na") == 0 ? NA_VALUE : strtoull(b, NULL, 0);
        m->n_compute++;
    } else if (strcmp(key, "gpm") == 0 && b && m->n_gpm < MAX_MIG_GPM) {
        m->gpm_ids[m->n_gpm] = (unsigned int)strtoul(a, NULL, 10);
        if (parse_wave(words + 3, n - 3, &m->gpm_values[m->n_gpm])) m->n_gpm++;
    } else if (strcmp(key, "error") == 0 && b && m->n_errors < MAX_ERRORS) {
        snprintf(m->errors[m->n_errors].call, sizeof m->errors[0].call, "%s", a);
        m->errors[m->n_errors].code = atoi(b);
        m->n_errors++;
    }
}

static void parse_device_line(fake_scenario *s, long index, const char *key, char *rest, int *max_index) {
    fake_device *d = device_at(s, index);
    if (d == NULL || key == NULL) return;
    if (index > *max_index) *max_index = (int)index;
    if (strcmp(key, "name") == 0) { /* the name is the rest of the line, blanks included */
        copy_text(d->name, rest);
        d->has_name = 1;
        return;
    }
    char *save = NULL, *words[MAX_WORDS];
    int n = 0;
    for (char *w = strtok_r(rest, " \t", &save); w != NULL && n < MAX_WORDS; w = strtok_r(NULL, " \t", &save))
        words[n++] = w;
    char *a = n > 0 ? words[0] : NULL, *b = n > 1 ? words[1] : NULL, *c = n > 2 ? words[2] : NULL;
    char *e = n > 3 ? words[3] : NULL;
    if (a == NULL) return;
    if (strcmp(key, "uuid") == 0) {
        copy_text(d->uuid, a);
        d->has_uuid = 1;
    } else if (strcmp(key, "pci_bus_id") == 0) {
        copy_text(d->pci_bus_id, a);
        d->has_pci_bus_id = 1;
    } else if (strcmp(key, "compute_capability") == 0 && b) {
        d->cc_major = atoi(a);
        d->cc_minor = atoi(b);
        d->has_cc = 1;
    } else if (strcmp(key, "error") == 0 && b && d->n_errors < MAX_ERRORS) {
        snprintf(d->errors[d->n_errors].call, sizeof d->errors[0].call, "%s", a);
        d->errors[d->n_errors].code = atoi(b);
        d->n_errors++;
    } else if ((strcmp(key, "compute_proc") == 0 || strcmp(key, "graphics_proc") == 0) && b) {
        int compute = key[0] == 'c';
        int *n = compute ? &d->n_compute : &d->n_graphics;
        fake_proc *list = compute ? d->compute : d->graphics;
        if (*n < MAX_PROCS) {
            list[*n].pid = (unsigned int)strtoul(a, NULL, 10);
            list[*n].mem = strcmp(b, "na") == 0 ? NA_VALUE : strtoull(b, NULL, 0);
            (*n)++;
        }
    } else if (strcmp(key, "proc_util") == 0 && e && d->n_samples < MAX_SAMPLES) {
        nvmlProcessUtilizationSample_t *p = &d->samples[d->n_samples++];
        memset(p, 0, sizeof *p);
        p->pid = (unsigned int)strtoul(a, NULL, 10);
        p->smUtil = (unsigned int)strtoul(b, NULL, 10);
        p->memUtil = (unsigned int)strtoul(c, NULL, 10);
        p->timeStamp = strtoull(e, NULL, 10);
    } else if (strcmp(key, "proc_util_live") == 0 && c && d->n_live < MAX_PROCS) {
        fake_live_util *p = &d->live[d->n_live];
        p->pid = (unsigned int)strtoul(a, NULL, 10);
        p->mem = (unsigned int)strtoul(b, NULL, 10);
        if (parse_wave(words + 2, n - 2, &p->sm)) d->n_live++;
    } else if (strcmp(key, "mig") == 0 && b) {
        parse_mig_line(d, words, n);
    } else if (strcmp(key, "gpm") == 0 && b && d->n_gpm < MAX_GPM) {
        d->gpm_ids[d->n_gpm] = (unsigned int)strtoul(a, NULL, 10);
        if (parse_wave(words + 1, n - 1, &d->gpm_values[d->n_gpm])) d->n_gpm++;
    } else if (parse_health_line(d, key, words, n)) {
        return;
    } else {
        for (int k = 0; k < K_COUNT; k++)
            if (strcmp(key, KEY_NAMES[k]) == 0) d->has[k] = parse_wave(words, n, &d->wave[k]);
    }
}

static void strip_newline(char *line) {
    size_t n = strlen(line);
    while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
}

static int parse_scenario(FILE *f, fake_scenario *s) {
    memset(s, 0, offsetof(fake_scenario, devices)); /* the devices are cleared as they are named */
    s->device_count = -1;
    int max_index = -1;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        strip_newline(line);
        char *save = NULL;
        char *word = strtok_r(line, " \t", &save);
        if (word == NULL || word[0] == '#') continue;
        char *rest = save ? save : (char *)"";
        while (*rest == ' ' || *rest == '\t') rest++;
        if (strcmp(word, "device") == 0) {
            char *index = strtok_r(NULL, " \t", &save);
            char *key = strtok_r(NULL, " \t", &save);
            char *tail = save ? save : (char *)"";
            while (*tail == ' ' || *tail == '\t') tail++;
            if (index) parse_device_line(s, strtol(index, NULL, 10), key, tail, &max_index);
        } else if (strcmp(word, "driver_version") == 0) {
            copy_text(s->driver_version, rest);
            s->has_driver_version = 1;
        } else if (strcmp(word, "nvml_version") == 0) {
            copy_text(s->nvml_version, rest);
            s->has_nvml_version = 1;
        } else if (strcmp(word, "cuda_driver_version") == 0) {
            s->cuda_version = atoi(rest);
            s->has_cuda_version = 1;
        } else if (strcmp(word, "init_error") == 0) {
            s->init_error = atoi(rest);
        } else if (strcmp(word, "device_count") == 0) {
            s->device_count = atoi(rest);
        } else if (strcmp(word, "pcie_delay_ms") == 0) {
            s->pcie_delay_ms = atoi(rest);
        } else if (strcmp(word, "call_delay_ms") == 0) {
            s->call_delay_ms = atoi(rest);
        }
    }
    if (s->device_count < 0) s->device_count = max_index + 1;
    if (s->device_count > MAX_DEVICES) s->device_count = MAX_DEVICES;
    use_devices(s, s->device_count);
    return 1;
}

/* Re-read the scenario when the file changed. Called with the lock held. */
static void refresh_scenario(void) {
    const char *path = getenv("FAKE_NVML_SCENARIO");
    if (path == NULL || *path == '\0') {
        current.loaded = 0;
        current_path[0] = '\0';
        return;
    }
    struct stat st;
    if (stat(path, &st) != 0) {
        current.loaded = -1;
        current_path[0] = '\0';
        return;
    }
    if (current.loaded == 1 && strcmp(path, current_path) == 0 && st.st_ino == current_stat.st_ino &&
        st.st_size == current_stat.st_size && st.st_mtim.tv_sec == current_stat.st_mtim.tv_sec &&
        st.st_mtim.tv_nsec == current_stat.st_mtim.tv_nsec)
        return;
    FILE *f = fopen(path, "re");
    if (f == NULL) {
        current.loaded = -1;
        current_path[0] = '\0';
        return;
    }
    parse_scenario(f, &scratch);
    fclose(f);
    scratch.loaded = 1;
    memcpy(&current, &scratch, offsetof(fake_scenario, devices) + (size_t)scratch.used * sizeof scratch.devices[0]);
    snprintf(current_path, sizeof current_path, "%s", path);
    current_stat = st;
}

static int error_for(const fake_device *d, const char *call) {
    if (call == NULL) return 0;
    for (int i = 0; i < d->n_errors; i++)
        if (strcmp(d->errors[i].call, call) == 0) return d->errors[i].code;
    return 0;
}

static int error_for_mig(const fake_mig *m, const char *call) {
    if (call == NULL) return 0;
    for (int i = 0; i < m->n_errors; i++)
        if (strcmp(m->errors[i].call, call) == 0) return m->errors[i].code;
    return 0;
}

/* Block for delay_ms with the lock released, counted in in_flight. Called and returns with the lock held. */
static void block_unlocked(const char *symbol, int device, int delay_ms) {
    if (delay_ms <= 0) return;
    char name[96];
    snprintf(name, sizeof name, "%s.delay", symbol);
    log_call_arg(name, device, (unsigned long long)delay_ms, 1);
    in_flight++;
    pthread_mutex_unlock(&lock);
    struct timespec pause = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
    while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {}
    pthread_mutex_lock(&lock);
    in_flight--;
}

/* Start a per-device call: on NVML_SUCCESS the lock is held and *out is the device. */
static nvmlReturn_t begin_index(int index, const char *symbol, const char *call, const char *also,
                                fake_device **out) {
    pthread_mutex_lock(&lock);
    log_call(symbol, index);
    refresh_scenario();
    if (current.loaded == 1) {
        block_unlocked(symbol, index, current.call_delay_ms);
        refresh_scenario();
    }
    nvmlReturn_t r = NVML_SUCCESS;
    if (init_count == 0 || current.loaded != 1) r = NVML_ERROR_UNINITIALIZED;
    else if (index < 0 || index >= current.device_count) r = NVML_ERROR_INVALID_ARGUMENT;
    else if (VAL(&current.devices[index], K_LOST)) r = NVML_ERROR_GPU_IS_LOST;
    else if ((r = error_for(&current.devices[index], call)) == 0) r = error_for(&current.devices[index], also);
    if (r != NVML_SUCCESS) {
        pthread_mutex_unlock(&lock);
        return r;
    }
    *out = &current.devices[index];
    return NVML_SUCCESS;
}

static int handle_index(nvmlDevice_t device) {
    char *p = (char *)device;
    if (p < handles || p >= handles + MAX_DEVICES) return -1;
    return (int)(p - handles);
}

static nvmlReturn_t finish(nvmlReturn_t r);

/* 1 when device is a MIG handle, with its parent's index and its MIG index. */
static int mig_handle_of(nvmlDevice_t device, int *parent, int *slot) {
    char *p = (char *)device, *first = &mig_handles[0][0];
    if (p < first || p >= first + MAX_DEVICES * MAX_MIG) return 0;
    long offset = p - first;
    *parent = (int)(offset / MAX_MIG);
    *slot = (int)(offset % MAX_MIG);
    return 1;
}

static int mig_enabled(const fake_device *d) { return d->has[K_MIG_MODE] && VAL(d, K_MIG_MODE) == 1; }

static nvmlReturn_t begin(nvmlDevice_t device, const char *symbol, const char *call, const char *also,
                          fake_device **out) {
    int parent, slot;
    if (mig_handle_of(device, &parent, &slot)) { /* whole-GPU calls do not answer on a MIG handle */
        nvmlReturn_t r = begin_index(parent, symbol, NULL, NULL, out);
        return r ? r : finish(NVML_ERROR_NOT_SUPPORTED);
    }
    return begin_index(handle_index(device), symbol, call, also, out);
}

static nvmlReturn_t finish(nvmlReturn_t r) {
    pthread_mutex_unlock(&lock);
    return r;
}

/* Start a system-level call: on NVML_SUCCESS the lock is held. */
static nvmlReturn_t begin_system(const char *symbol) {
    pthread_mutex_lock(&lock);
    log_call(symbol, -1);
    refresh_scenario();
    if (init_count == 0 || current.loaded != 1) {
        pthread_mutex_unlock(&lock);
        return NVML_ERROR_UNINITIALIZED;
    }
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(char *dst, unsigned int length, const char *src) {
    if (dst == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

#define NEED(d, key) do { if (!(d)->has[key]) return finish(NVML_ERROR_NOT_SUPPORTED); } while (0)

/* ---- initialization ---- */
static nvmlReturn_t do_init(const char *symbol) {
    pthread_mutex_lock(&lock);
    log_call(symbol, -1);
    refresh_scenario();
    nvmlReturn_t r = NVML_SUCCESS;
    if (current.loaded == 0) r = NVML_ERROR_DRIVER_NOT_LOADED;
    else if (current.loaded < 0) r = NVML_ERROR_UNKNOWN;
    else if (current.init_error != 0) r = current.init_error;
    else init_count++;
    pthread_mutex_unlock(&lock);
    return r;
}

nvmlReturn_t nvmlInit(void) { return do_init("nvmlInit"); }
nvmlReturn_t nvmlInit_v2(void) { return do_init("nvmlInit_v2"); }
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) { (void)flags; return do_init("nvmlInitWithFlags"); }

nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&lock);
    log_call_arg("nvmlShutdown", -1, (unsigned long long)in_flight, 1);
    nvmlReturn_t r = init_count > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
    if (init_count > 0) init_count--;
    pthread_mutex_unlock(&lock);
    return r;
}

const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case 25: return "Argument version mismatch";
    default: return "Unknown Error";
    }
}

/* ---- system ---- */
nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    nvmlReturn_t r = begin_system("nvmlSystemGetDriverVersion");
    if (r) return r;
    if (!current.has_driver_version) return finish(NVML_ERROR_NOT_SUPPORTED);
    return finish(copy_string(version, length, current.driver_version));
}

nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    nvmlReturn_t r = begin_system("nvmlSystemGetNVMLVersion");
    if (r) return r;
    if (!current.has_nvml_version) return finish(NVML_ERROR_NOT_SUPPORTED);
    return finish(copy_string(version, length, current.nvml_version));
}

static nvmlReturn_t cuda_version(const char *symbol, int *version) {
    nvmlReturn_t r = begin_system(symbol);
    if (r) return r;
    if (!current.has_cuda_version) return finish(NVML_ERROR_NOT_SUPPORTED);
    *version = current.cuda_version;
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return cuda_version("nvmlSystemGetCudaDriverVersion", v); }
nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return cuda_version("nvmlSystemGetCudaDriverVersion_v2", v); }

nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    nvmlReturn_t r = begin_system("nvmlDeviceGetCount_v2");
    if (r) return r;
    *count = (unsigned int)current.device_count;
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    fake_device *d;
    nvmlReturn_t r = begin_index((int)index, "nvmlDeviceGetHandleByIndex_v2", "handle", NULL, &d);
    if (r) return r;
    *device = &handles[index];
    return finish(NVML_SUCCESS);
}

/* ---- MIG: MIG device handles and what answers on them (see "MIG" in the header) ---- */
/* pynvml's c_nvmlDeviceAttributes has no version member: multiprocessorCount comes first */
typedef struct { unsigned int multiprocessorCount, sharedCopyEngineCount, sharedDecoderCount,
                 sharedEncoderCount, sharedJpegCount, sharedOfaCount, gpuInstanceSliceCount,
                 computeInstanceSliceCount; unsigned long memorySizeMB; } nvmlDeviceAttributes_t;

static unsigned int max_mig_devices(const fake_device *d) {
    if (d->has[K_MAX_MIG]) { unsigned long long n = VAL(d, K_MAX_MIG); return n > MAX_MIG ? MAX_MIG : (unsigned int)n; }
    return d->has[K_MIG_MODE] ? 7 : 0;
}

/* Start a call on a MIG handle: on NVML_SUCCESS the lock is held, *out is the MIG device and *parent_out its parent.
 * A handle whose slot is empty now (instances reconfigured) answers INVALID_ARGUMENT. */
static nvmlReturn_t begin_mig(nvmlDevice_t device, const char *symbol, const char *call, fake_mig **out,
                              fake_device **parent_out) {
    int parent, slot;
    if (!mig_handle_of(device, &parent, &slot)) {
        pthread_mutex_lock(&lock);
        log_call(symbol, handle_index(device));
        pthread_mutex_unlock(&lock);
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    fake_device *d;
    nvmlReturn_t r = begin_index(parent, symbol, NULL, NULL, &d);
    if (r) return r;
    fake_mig *m = &d->mig[slot];
    if (!mig_enabled(d) || !m->present || (unsigned int)slot >= max_mig_devices(d))
        return finish(NVML_ERROR_INVALID_ARGUMENT);
    if ((r = error_for_mig(m, call)) != 0) return finish(r);
    *out = m;
    if (parent_out) *parent_out = d;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetMaxMigDeviceCount", "mig_mode", NULL, &d);
    if (r) return r;
    if (!d->has[K_MIG_MODE] && !d->has[K_MAX_MIG]) return finish(NVML_ERROR_NOT_SUPPORTED);
    *count = max_mig_devices(d);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetMigDeviceHandleByIndex", "mig_mode", NULL, &d);
    if (r) return r;
    if (!mig_enabled(d)) return finish(NVML_ERROR_NOT_SUPPORTED);
    if (index >= max_mig_devices(d) || mig == NULL) return finish(NVML_ERROR_INVALID_ARGUMENT);
    fake_mig *m = &d->mig[index];
    if (!m->present) return finish(NVML_ERROR_NOT_FOUND);
    if ((r = error_for_mig(m, "handle")) != 0) return finish(r);
    *mig = &mig_handles[handle_index(device)][index];
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig) {
    int parent, slot;
    int mig = mig_handle_of(device, &parent, &slot);
    pthread_mutex_lock(&lock);
    log_call("nvmlDeviceIsMigDeviceHandle", mig ? parent : handle_index(device));
    pthread_mutex_unlock(&lock);
    if (!mig && handle_index(device) < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = (unsigned int)mig;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t device, nvmlDevice_t *parent) {
    fake_mig *m;
    fake_device *d;
    nvmlReturn_t r = begin_mig(device, "nvmlDeviceGetDeviceHandleFromMigDeviceHandle", "parent", &m, &d);
    if (r) return r;
    *parent = &handles[d - current.devices];
    return finish(NVML_SUCCESS);
}

static nvmlReturn_t mig_id(nvmlDevice_t device, const char *symbol, int compute, unsigned int *id) {
    int parent, slot;
    if (!mig_handle_of(device, &parent, &slot)) { /* a whole GPU is no MIG device */
        fake_device *d;
        nvmlReturn_t r = begin(device, symbol, NULL, NULL, &d);
        return r ? r : finish(NVML_ERROR_NOT_SUPPORTED);
    }
    fake_mig *m;
    nvmlReturn_t r = begin_mig(device, symbol, compute ? "ci" : "gi", &m, NULL);
    if (r) return r;
    if (!(compute ? m->has_ci : m->has_gi)) return finish(NVML_ERROR_NOT_SUPPORTED);
    *id = compute ? m->ci : m->gi;
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    return mig_id(device, "nvmlDeviceGetGpuInstanceId", 0, id);
}

nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    return mig_id(device, "nvmlDeviceGetComputeInstanceId", 1, id);
}

/* Attributes answer on MIG handles only in the fake (a whole GPU's are not modelled). */
nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes) {
    int parent, slot;
    if (!mig_handle_of(device, &parent, &slot)) {
        fake_device *d;
        nvmlReturn_t r = begin(device, "nvmlDeviceGetAttributes_v2", NULL, NULL, &d);
        return r ? r : finish(NVML_ERROR_NOT_SUPPORTED);
    }
    fake_mig *m;
    nvmlReturn_t r = begin_mig(device, "nvmlDeviceGetAttributes_v2", "attributes", &m, NULL);
    if (r) return r;
    if (!m->has_sm_count && !m->has_slices) return finish(NVML_ERROR_NOT_SUPPORTED);
    memset(attributes, 0, sizeof *attributes);
    attributes->multiprocessorCount = m->sm_count;
    attributes->gpuInstanceSliceCount = m->gi_slices;
    attributes->computeInstanceSliceCount = m->ci_slices;
    attributes->memorySizeMB = (unsigned long)m->memory_mb;
    return finish(NVML_SUCCESS);
}

/* MIG-handle forms of name, UUID, memory and compute processes (called from those entry points). */
static nvmlReturn_t mig_text(nvmlDevice_t device, const char *symbol, int uuid, char *out, unsigned int length) {
    fake_mig *m;
    nvmlReturn_t r = begin_mig(device, symbol, uuid ? "uuid" : "name", &m, NULL);
    if (r) return r;
    if (!(uuid ? m->has_uuid : m->has_name)) return finish(NVML_ERROR_NOT_SUPPORTED);
    return finish(copy_string(out, length, uuid ? m->uuid : m->name));
}

static nvmlReturn_t mig_memory(nvmlDevice_t device, const char *symbol, const char *call,
                               unsigned long long *total, unsigned long long *used) {
    fake_mig *m;
    nvmlReturn_t r = begin_mig(device, symbol, call, &m, NULL);
    if (r) return r;
    if (strcmp(call, "memory_v2") == 0 && (r = error_for_mig(m, "memory")) != 0) return finish(r);
    if (!m->has_mem) return finish(NVML_ERROR_NOT_SUPPORTED);
    *total = m->mem_total;
    *used = m->mem_used;
    return NVML_SUCCESS; /* lock still held: the caller fills its struct, then finishes */
}

static int mig_proc_count(const fake_device *d) {
    int n = 0;
    if (!mig_enabled(d)) return 0;
    for (unsigned int k = 0; k < max_mig_devices(d); k++) if (d->mig[k].present) n += d->mig[k].n_compute;
    return n;
}

/* Write the compute processes of MIG device m (or, m NULL, of every MIG device of d) from infos[0]. */
static int mig_fill_procs(const fake_device *d, const fake_mig *m, nvmlProcessInfo_t *infos) {
    int k = 0;
    for (unsigned int slot = 0; slot < max_mig_devices(d); slot++) {
        const fake_mig *g = &d->mig[slot];
        if (!g->present || (m != NULL && g != m)) continue;
        for (int i = 0; i < g->n_compute; i++, k++) {
            infos[k].pid = g->compute[i].pid;
            infos[k].usedGpuMemory = g->compute[i].mem;
            infos[k].gpuInstanceId = g->has_gi ? g->gi : 0xFFFFFFFFu;
            infos[k].computeInstanceId = g->has_ci ? g->ci : 0xFFFFFFFFu;
        }
    }
    return k;
}

static nvmlReturn_t mig_running(nvmlDevice_t device, const char *symbol, int compute, unsigned int *count,
                                nvmlProcessInfo_t *infos) {
    fake_mig *m;
    fake_device *d;
    nvmlReturn_t r = begin_mig(device, symbol, "compute_procs", &m, &d);
    if (r) return r;
    if (!compute) return finish(NVML_ERROR_NOT_SUPPORTED); /* no graphics contexts on MIG */
    if (count == NULL) return finish(NVML_ERROR_INVALID_ARGUMENT);
    if (infos == NULL || *count < (unsigned int)m->n_compute) {
        *count = (unsigned int)m->n_compute;
        return finish(m->n_compute == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE);
    }
    *count = (unsigned int)mig_fill_procs(d, m, infos);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpu_instance, fake_gpm_sample *sample) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlGpmMigSampleGet", "gpm_sample", NULL, &d);
    if (r) return r;
    if (sample == NULL || sample->magic != GPM_MAGIC) return finish(NVML_ERROR_INVALID_ARGUMENT);
    if (!d->has[K_GPM_SUPPORTED] || !VAL(d, K_GPM_SUPPORTED)) return finish(NVML_ERROR_NOT_SUPPORTED);
    if (!mig_enabled(d)) return finish(NVML_ERROR_NOT_SUPPORTED);
    const fake_mig *m = NULL;
    for (unsigned int k = 0; k < max_mig_devices(d); k++)
        if (d->mig[k].present && d->mig[k].has_gi && d->mig[k].gi == gpu_instance) m = &d->mig[k];
    if (m == NULL) return finish(NVML_ERROR_INVALID_ARGUMENT);
    if ((r = error_for_mig(m, "gpm_sample")) != 0) return finish(r);
    sample->device = handle_index(device);
    sample->gpu_instance = (long)gpu_instance;
    clock_gettime(CLOCK_MONOTONIC, &sample->taken);
    sample->n = m->n_gpm;
    double t = now_ms();
    for (int k = 0; k < m->n_gpm; k++) {
        sample->ids[k] = m->gpm_ids[k];
        sample->values[k] = wave_at(&m->gpm_values[k], t);
    }
    return finish(NVML_SUCCESS);
}

/* ---- static device information ---- */
nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    fake_device *d;
    int parent, slot;
    if (mig_handle_of(device, &parent, &slot)) return mig_text(device, "nvmlDeviceGetName", 0, name, length);
    nvmlReturn_t r = begin(device, "nvmlDeviceGetName", "name", NULL, &d);
    if (r) return r;
    if (!d->has_name) return finish(NVML_ERROR_NOT_SUPPORTED);
    return finish(copy_string(name, length, d->name));
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    fake_device *d;
    int parent, slot;
    if (mig_handle_of(device, &parent, &slot)) return mig_text(device, "nvmlDeviceGetUUID", 1, uuid, length);
    nvmlReturn_t r = begin(device, "nvmlDeviceGetUUID", "uuid", NULL, &d);
    if (r) return r;
    if (!d->has_uuid) return finish(NVML_ERROR_NOT_SUPPORTED);
    return finish(copy_string(uuid, length, d->uuid));
}

nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetPciInfo_v3", "pci_info", NULL, &d);
    if (r) return r;
    if (!d->has_pci_bus_id) return finish(NVML_ERROR_NOT_SUPPORTED);
    memset(pci, 0, sizeof *pci);
    snprintf(pci->busId, sizeof pci->busId, "%s", d->pci_bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%s", d->pci_bus_id);
    unsigned int slot = 0;
    sscanf(d->pci_bus_id, "%x:%x:%x", &pci->domain, &pci->bus, &slot);
    pci->device = slot;
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetMinorNumber", "minor", NULL, &d);
    if (r) return r;
    NEED(d, K_MINOR);
    *minor = (unsigned int)VAL(d, K_MINOR);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetCudaComputeCapability", "compute_capability", NULL, &d);
    if (r) return r;
    if (!d->has_cc) return finish(NVML_ERROR_NOT_SUPPORTED);
    *major = d->cc_major;
    *minor = d->cc_minor;
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetEnforcedPowerLimit", "power_limit", NULL, &d);
    if (r) return r;
    NEED(d, K_POWER_LIMIT);
    *limit = (unsigned int)VAL(d, K_POWER_LIMIT);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, int *current_mode, int *pending) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetEccMode", "ecc_mode", NULL, &d);
    if (r) return r;
    NEED(d, K_ECC_MODE);
    *current_mode = *pending = (int)VAL(d, K_ECC_MODE);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current_mode, unsigned int *pending) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetMigMode", "mig_mode", NULL, &d);
    if (r) return r;
    NEED(d, K_MIG_MODE);
    *current_mode = *pending = (unsigned int)VAL(d, K_MIG_MODE);
    return finish(NVML_SUCCESS);
}


/* ---- dynamic device readings ---- */
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *util) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetUtilizationRates", "utilization", NULL, &d);
    if (r) return r;
    if (mig_enabled(d)) return finish(NVML_ERROR_NOT_SUPPORTED); /* MIG */
    NEED(d, K_UTIL_GPU);
    util->gpu = (unsigned int)VAL(d, K_UTIL_GPU);
    util->memory = (unsigned int)VAL(d, K_UTIL_MEM);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    fake_device *d;
    int parent, slot;
    if (mig_handle_of(device, &parent, &slot)) {
        nvmlReturn_t r = mig_memory(device, "nvmlDeviceGetMemoryInfo", "memory", &memory->total, &memory->used);
        if (r) return r;
        memory->free = memory->total - memory->used;
        return finish(NVML_SUCCESS);
    }
    nvmlReturn_t r = begin(device, "nvmlDeviceGetMemoryInfo", "memory", NULL, &d);
    if (r) return r;
    NEED(d, K_MEM_TOTAL);
    memory->total = VAL(d, K_MEM_TOTAL);
    memory->used = VAL(d, K_MEM_USED) + VAL(d, K_MEM_RESERVED);
    memory->free = memory->total - memory->used;
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    fake_device *d;
    int parent, slot;
    if (mig_handle_of(device, &parent, &slot)) {
        if (memory->version != NVML_MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        nvmlReturn_t r = mig_memory(device, "nvmlDeviceGetMemoryInfo_v2", "memory_v2", &memory->total, &memory->used);
        if (r) return r;
        memory->reserved = 0;
        memory->free = memory->total - memory->used;
        return finish(NVML_SUCCESS);
    }
    nvmlReturn_t r = begin(device, "nvmlDeviceGetMemoryInfo_v2", "memory_v2", "memory", &d);
    if (r) return r;
    if (memory->version != NVML_MEMORY_V2) return finish(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    NEED(d, K_MEM_TOTAL);
    memory->total = VAL(d, K_MEM_TOTAL);
    memory->reserved = VAL(d, K_MEM_RESERVED);
    memory->used = VAL(d, K_MEM_USED);
    memory->free = memory->total - memory->used - memory->reserved;
    return finish(NVML_SUCCESS);
}

static nvmlReturn_t read_uint(nvmlDevice_t device, const char *symbol, const char *call, int key,
                              unsigned int *out) {
    fake_device *d;
    nvmlReturn_t r = begin(device, symbol, call, NULL, &d);
    if (r) return r;
    NEED(d, key);
    *out = (unsigned int)VAL(d, key);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *mw) {
    return read_uint(device, "nvmlDeviceGetPowerUsage", "power", K_POWER, mw);
}

nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed) {
    return read_uint(device, "nvmlDeviceGetFanSpeed", "fan", K_FAN, speed);
}

nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, int sensor, unsigned int *temp) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetTemperature", "temperature", NULL, &d);
    if (r) return r;
    if (sensor != 0) return finish(NVML_ERROR_NOT_SUPPORTED);
    NEED(d, K_TEMP);
    *temp = (unsigned int)VAL(d, K_TEMP);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temp) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetTemperatureV", "temperature_v", "temperature", &d);
    if (r) return r;
    if (temp->version != NVML_TEMPERATURE_V1) return finish(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (temp->sensorType != 0) return finish(NVML_ERROR_NOT_SUPPORTED);
    NEED(d, K_TEMP);
    temp->temperature = (int)VAL(d, K_TEMP);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, int type, unsigned int *clock) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetClockInfo", "clock", NULL, &d);
    if (r) return r;
    int key = (type == 0 || type == 1) ? K_CLOCK_SM : type == 2 ? K_CLOCK_MEM : -1;
    if (key < 0) return finish(NVML_ERROR_NOT_SUPPORTED);
    NEED(d, key);
    *clock = (unsigned int)VAL(d, key);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, int *pstate) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetPerformanceState", "pstate", NULL, &d);
    if (r) return r;
    NEED(d, K_PSTATE);
    *pstate = (int)VAL(d, K_PSTATE);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *mj) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetTotalEnergyConsumption", "energy", NULL, &d);
    if (r) return r;
    NEED(d, K_ENERGY);
    *mj = VAL(d, K_ENERGY);
    return finish(NVML_SUCCESS);
}

static nvmlReturn_t reasons(nvmlDevice_t device, const char *symbol, const char *call, unsigned long long *out) {
    fake_device *d;
    nvmlReturn_t r = begin(device, symbol, call, "throttle", &d);
    if (r) return r;
    NEED(d, K_THROTTLE);
    *out = VAL(d, K_THROTTLE);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *mask) {
    return reasons(device, "nvmlDeviceGetCurrentClocksEventReasons", "clocks_event_reasons", mask);
}

nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *mask) {
    return reasons(device, "nvmlDeviceGetCurrentClocksThrottleReasons", NULL, mask);
}

nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, int error_type, int counter_type,
                                         unsigned long long *count) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetTotalEccErrors", "ecc_errors", NULL, &d);
    if (r) return r;
    if (!d->has[K_ECC_MODE] || VAL(d, K_ECC_MODE) != 1) return finish(NVML_ERROR_NOT_SUPPORTED);
    int r2 = error_for(d, "ecc_counts");
    if (r2) return finish(r2);
    int key = error_type == 1 ? (counter_type == 1 ? K_ECC_UNC_AGG : K_ECC_UNCORRECTED)
                              : (counter_type == 1 ? K_ECC_CORR_AGG : K_ECC_CORR);
    if (error_type == 1 && counter_type == 1 && !d->has[key]) key = K_ECC_UNCORRECTED; /* as before */
    *count = d->has[key] ? VAL(d, key) : 0;
    return finish(NVML_SUCCESS);
}

/* Sleeps pcie_delay_ms outside the lock, like the real 20 ms sampling window. */
nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, int counter, unsigned int *value) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetPcieThroughput", "pcie_throughput", NULL, &d);
    if (r) return r;
    int key = counter == 0 ? K_PCIE_TX_KBPS : counter == 1 ? K_PCIE_RX_KBPS : -1;
    if (key < 0) return finish(NVML_ERROR_INVALID_ARGUMENT);
    NEED(d, key);
    unsigned int result = (unsigned int)VAL(d, key);
    block_unlocked("nvmlDeviceGetPcieThroughput", handle_index(device), current.pcie_delay_ms);
    finish(NVML_SUCCESS);
    *value = result;
    return NVML_SUCCESS;
}

static long long now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

static int nvlink_error_key(unsigned int field_id);

nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int count, nvmlFieldValue_t *values) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetFieldValues", "field_values", NULL, &d);
    if (r) return r;
    if (count < 0 || values == NULL) return finish(NVML_ERROR_INVALID_ARGUMENT);
    long long now = now_us();
    for (int i = 0; i < count; i++) {
        nvmlFieldValue_t *v = &values[i];
        int key = -1, rate = -1;
        long double per_unit = 1.0L;
        const char *call = NULL;
        if (v->fieldId == FI_PCIE_TX_BYTES) { key = K_PCIE_TX_BYTES; rate = K_PCIE_TX_RATE; call = "pcie_counters"; }
        else if (v->fieldId == FI_PCIE_RX_BYTES) { key = K_PCIE_RX_BYTES; rate = K_PCIE_RX_RATE; call = "pcie_counters"; }
        else if (v->fieldId == FI_NVLINK_TX_KIB) { key = K_NVLINK_TX_KIB; rate = K_NVLINK_TX_RATE; call = "nvlink_counters"; }
        else if (v->fieldId == FI_NVLINK_RX_KIB) { key = K_NVLINK_RX_KIB; rate = K_NVLINK_RX_RATE; call = "nvlink_counters"; }
        else if (v->fieldId == FI_TOTAL_ENERGY) { key = K_ENERGY; call = "energy_field"; }
        else if ((key = nvlink_error_key(v->fieldId)) >= 0) call = "nvlink_errors";
        if (rate == K_NVLINK_TX_RATE || rate == K_NVLINK_RX_RATE) per_unit = 1024.0L;
        v->latencyUsec = 0;
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG;
        v->value.ullVal = 0;
        v->timestamp = now;
        if (key < 0 || !(d->has[key] || (rate >= 0 && d->has[rate]))) { v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; continue; }
        /* the fake models the sum over all links only: a single link's scope is refused */
        if (per_unit > 1.0L && v->scopeId != ALL_LINKS) { v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT; continue; }
        v->nvmlReturn = error_for(d, call);
        if (v->nvmlReturn != NVML_SUCCESS) continue;
        v->value.ullVal = rate >= 0 ? counter_value(d, key, rate, per_unit) : VAL(d, key);
        if (key != K_ENERGY && d->has[K_PCIE_TIME]) v->timestamp = (long long)VAL(d, K_PCIE_TIME);
    }
    return finish(NVML_SUCCESS);
}

static void fill_codecs(const fake_device *d, nvmlProcessUtilizationSample_t *samples, unsigned int n);

/* ---- processes ---- */
static nvmlReturn_t running(nvmlDevice_t device, const char *symbol, int compute, unsigned int *count,
                            nvmlProcessInfo_t *infos) {
    fake_device *d;
    int parent, slot;
    if (mig_handle_of(device, &parent, &slot)) return mig_running(device, symbol, compute, count, infos);
    nvmlReturn_t r = begin(device, symbol, compute ? "compute_procs" : "graphics_procs", NULL, &d);
    if (r) return r;
    int n = compute ? d->n_compute : d->n_graphics;
    int in_mig = compute ? mig_proc_count(d) : 0; /* MIG: the parent's list sums its instances' */
    const fake_proc *list = compute ? d->compute : d->graphics;
    if (count == NULL) return finish(NVML_ERROR_INVALID_ARGUMENT);
    if (infos == NULL || *count < (unsigned int)(n + in_mig)) {
        *count = (unsigned int)(n + in_mig);
        return finish(n + in_mig == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE);
    }
    if (in_mig) mig_fill_procs(d, NULL, infos + n);
    for (int i = 0; i < n; i++) {
        infos[i].pid = list[i].pid;
        infos[i].usedGpuMemory = list[i].mem;
        infos[i].gpuInstanceId = 0xFFFFFFFFu;
        infos[i].computeInstanceId = 0xFFFFFFFFu;
    }
    *count = (unsigned int)(n + in_mig);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_t *p) {
    return running(dev, "nvmlDeviceGetComputeRunningProcesses_v3", 1, count, p);
}
nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_t *p) {
    return running(dev, "nvmlDeviceGetComputeRunningProcesses_v2", 1, count, p);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_t *p) {
    return running(dev, "nvmlDeviceGetGraphicsRunningProcesses_v3", 0, count, p);
}
nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t dev, unsigned int *count, nvmlProcessInfo_t *p) {
    return running(dev, "nvmlDeviceGetGraphicsRunningProcesses_v2", 0, count, p);
}

nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *samples,
                                             unsigned int *count, unsigned long long last_seen) {
    fake_device *d;
    log_call_arg("nvmlDeviceGetProcessUtilization.lastSeen", handle_index(device), last_seen, 1);
    nvmlReturn_t r = begin(device, "nvmlDeviceGetProcessUtilization", "process_utilization", NULL, &d);
    if (r) return r;
    if (mig_enabled(d)) return finish(NVML_ERROR_NOT_SUPPORTED); /* MIG */
    if (count == NULL) return finish(NVML_ERROR_INVALID_ARGUMENT);
    unsigned long long now = (unsigned long long)now_us();
    int live = now > last_seen ? d->n_live : 0; /* live processes have one sample, taken now */
    unsigned int n = (unsigned int)live;
    for (int i = 0; i < d->n_samples; i++)
        if (d->samples[i].timeStamp > last_seen) n++;
    if (n == 0) return finish(NVML_ERROR_NOT_FOUND);
    if (samples == NULL || *count < n) {
        *count = n;
        return finish(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    unsigned int k = 0;
    for (int i = 0; i < d->n_samples; i++)
        if (d->samples[i].timeStamp > last_seen) samples[k++] = d->samples[i];
    for (int i = 0; i < live; i++) {
        nvmlProcessUtilizationSample_t *p = &samples[k++];
        memset(p, 0, sizeof *p);
        p->pid = d->live[i].pid;
        p->timeStamp = now;
        p->smUtil = (unsigned int)wave_value(&d->live[i].sm);
        p->memUtil = d->live[i].mem;
    }
    fill_codecs(d, samples, k);
    *count = n;
    return finish(NVML_SUCCESS);
}

/* ---- GPU performance monitoring (GPM) ---- */
nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *support) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlGpmQueryDeviceSupport", "gpm_support", NULL, &d);
    if (r) return r;
    if (support->version != 1) return finish(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    support->isSupportedDevice = d->has[K_GPM_SUPPORTED] && VAL(d, K_GPM_SUPPORTED) ? 1 : 0;
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleAlloc(fake_gpm_sample **sample) {
    nvmlReturn_t r = begin_system("nvmlGpmSampleAlloc");
    if (r) return r;
    fake_gpm_sample *s = calloc(1, sizeof *s);
    if (s == NULL) return finish(NVML_ERROR_UNKNOWN);
    s->magic = GPM_MAGIC;
    s->device = -1;
    s->gpu_instance = -1;
    *sample = s;
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleFree(fake_gpm_sample *sample) {
    pthread_mutex_lock(&lock);
    log_call("nvmlGpmSampleFree", sample ? sample->device : -1);
    nvmlReturn_t r = NVML_ERROR_INVALID_ARGUMENT;
    if (sample != NULL && sample->magic == GPM_MAGIC) {
        sample->magic = 0;
        free(sample);
        r = NVML_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, fake_gpm_sample *sample) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlGpmSampleGet", "gpm_sample", NULL, &d);
    if (r) return r;
    if (sample == NULL || sample->magic != GPM_MAGIC) return finish(NVML_ERROR_INVALID_ARGUMENT);
    if (!d->has[K_GPM_SUPPORTED] || !VAL(d, K_GPM_SUPPORTED)) return finish(NVML_ERROR_NOT_SUPPORTED);
    sample->device = handle_index(device);
    sample->gpu_instance = -1;
    clock_gettime(CLOCK_MONOTONIC, &sample->taken);
    sample->n = d->n_gpm;
    memcpy(sample->ids, d->gpm_ids, sizeof sample->ids);
    double t = now_ms();
    for (int k = 0; k < d->n_gpm; k++) sample->values[k] = wave_at(&d->gpm_values[k], t);
    return finish(NVML_SUCCESS);
}

static int later(const struct timespec *a, const struct timespec *b) {
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *request) {
    fake_gpm_sample *s1 = request ? request->sample1 : NULL, *s2 = request ? request->sample2 : NULL;
    int index = (s2 != NULL && s2->magic == GPM_MAGIC) ? s2->device : -1;
    fake_device *d;
    nvmlReturn_t r = begin_index(index, "nvmlGpmMetricsGet", "gpm_metrics", NULL, &d);
    if (r) return r;
    if (request->version != 1) return finish(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    if (s1 == NULL || s1->magic != GPM_MAGIC || s1->device != s2->device || s1->gpu_instance != s2->gpu_instance || !later(&s2->taken, &s1->taken) ||
        request->numMetrics > NVML_GPM_METRIC_MAX)
        return finish(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < request->numMetrics; i++) {
        nvmlGpmMetric_t *m = &request->metrics[i];
        m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        m->value = 0.0;
        memset(&m->metricInfo, 0, sizeof m->metricInfo);
        for (int k = 0; k < s2->n; k++) {
            if (s2->ids[k] == m->metricId) {
                m->nvmlReturn = NVML_SUCCESS;
                m->value = s2->values[k];
            }
        }
    }
    return finish(NVML_SUCCESS);
}

/* ==== health: ECC, remapped rows, retired pages, PCIe link, NVLink errors, video engines, Xid events ==== */
#define FI_NVLINK_CRC_FLIT_TOTAL 38 /* NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL */
#define FI_NVLINK_CRC_DATA_TOTAL 45 /* NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL */
#define FI_NVLINK_REPLAY_TOTAL 52   /* NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL */
#define FI_NVLINK_RECOVERY_TOTAL 59 /* NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL */
#define EVENT_XID 0x8ULL            /* nvmlEventTypeXidCriticalError */
#define NVML_ERROR_TIMEOUT_CODE 10
#define ENGINE_PERIOD_US 167000u
#define MAX_EVENT_SETS 16
#define MAX_DELIVERED 1024
#define NO_INSTANCE 0xFFFFFFFFu

/* nvmlEventData_t as pynvml 13 lays it out (c_nvmlEventData_t) */
typedef struct {
    nvmlDevice_t device;
    unsigned long long eventType, eventData;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlEventData_t;

typedef struct {
    unsigned int magic;
    char registered[MAX_DEVICES];
    int n_delivered;
    struct { int device; unsigned long long seq; } delivered[MAX_DELIVERED];
} fake_event_set;
#define EVENT_SET_MAGIC 0x5e7e7e7u

static int parse_health_line(fake_device *d, const char *key, char **words, int n) {
    if (strcmp(key, "xid") == 0 && n >= 2 && d->n_xids < MAX_XIDS) {
        fake_xid *x = &d->xids[d->n_xids++];
        x->seq = strtoull(words[0], NULL, 0);
        x->code = strtoull(words[1], NULL, 0);
        x->gi = n >= 4 ? (unsigned int)strtoul(words[2], NULL, 0) : NO_INSTANCE;
        x->ci = n >= 4 ? (unsigned int)strtoul(words[3], NULL, 0) : NO_INSTANCE;
        return 1;
    }
    if (strcmp(key, "proc_codec") == 0 && n >= 3 && d->n_codecs < MAX_PROCS) {
        fake_codec *c = &d->codecs[d->n_codecs++];
        c->pid = (unsigned int)strtoul(words[0], NULL, 10);
        c->enc = (unsigned int)strtoul(words[1], NULL, 10);
        c->dec = (unsigned int)strtoul(words[2], NULL, 10);
        return 1;
    }
    return 0;
}

static void fill_codecs(const fake_device *d, nvmlProcessUtilizationSample_t *samples, unsigned int n) {
    for (unsigned int i = 0; i < n; i++)
        for (int c = 0; c < d->n_codecs; c++)
            if (d->codecs[c].pid == samples[i].pid) {
                samples[i].encUtil = d->codecs[c].enc;
                samples[i].decUtil = d->codecs[c].dec;
            }
}

static int nvlink_error_key(unsigned int field_id) {
    switch (field_id) {
    case FI_NVLINK_CRC_FLIT_TOTAL: return K_NVLINK_CRC_FLIT;
    case FI_NVLINK_CRC_DATA_TOTAL: return K_NVLINK_CRC_DATA;
    case FI_NVLINK_REPLAY_TOTAL: return K_NVLINK_REPLAY;
    case FI_NVLINK_RECOVERY_TOTAL: return K_NVLINK_RECOVERY;
    default: return -1;
    }
}

nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corr, unsigned int *unc,
                                       unsigned int *pending, unsigned int *failure) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetRemappedRows", "remapped_rows", NULL, &d);
    if (r) return r;
    NEED(d, K_REMAP_CORR);
    *corr = (unsigned int)VAL(d, K_REMAP_CORR);
    *unc = (unsigned int)VAL(d, K_REMAP_UNC);
    *pending = (unsigned int)VAL(d, K_REMAP_PENDING);
    *failure = (unsigned int)VAL(d, K_REMAP_FAILED);
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, int cause, unsigned int *count,
                                       unsigned long long *addresses) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetRetiredPages", "retired_pages", NULL, &d);
    if (r) return r;
    int key = cause == 0 ? K_RETIRED_SBE : cause == 1 ? K_RETIRED_DBE : -1;
    if (key < 0 || count == NULL) return finish(NVML_ERROR_INVALID_ARGUMENT);
    NEED(d, key);
    unsigned int pages = (unsigned int)VAL(d, key);
    if (addresses == NULL || *count < pages) {
        *count = pages;
        return finish(pages == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE);
    }
    for (unsigned int i = 0; i < pages; i++) addresses[i] = 0x100000ULL * (i + 1) + (unsigned long long)cause;
    *count = pages;
    return finish(NVML_SUCCESS);
}

nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, int *pending) { /* an enable state */
    return read_uint(device, "nvmlDeviceGetRetiredPagesPendingStatus", "retired_pages", K_RETIRED_PENDING,
                     (unsigned int *)pending);
}

nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *out) {
    return read_uint(device, "nvmlDeviceGetCurrPcieLinkGeneration", "pcie_link", K_PCIE_GEN, out);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *out) {
    return read_uint(device, "nvmlDeviceGetMaxPcieLinkGeneration", "pcie_link", K_PCIE_GEN_MAX, out);
}
nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *out) {
    return read_uint(device, "nvmlDeviceGetCurrPcieLinkWidth", "pcie_link", K_PCIE_WIDTH, out);
}
nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *out) {
    return read_uint(device, "nvmlDeviceGetMaxPcieLinkWidth", "pcie_link", K_PCIE_WIDTH_MAX, out);
}
nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *out) {
    return read_uint(device, "nvmlDeviceGetPcieReplayCounter", "pcie_replay", K_PCIE_REPLAY, out);
}

static nvmlReturn_t engine(nvmlDevice_t device, const char *symbol, const char *call, int key,
                           unsigned int *util, unsigned int *period_us) {
    nvmlReturn_t r = read_uint(device, symbol, call, key, util);
    if (r == NVML_SUCCESS) *period_us = ENGINE_PERIOD_US;
    return r;
}
nvmlReturn_t nvmlDeviceGetEncoderUtilization(nvmlDevice_t device, unsigned int *util, unsigned int *period) {
    return engine(device, "nvmlDeviceGetEncoderUtilization", "encoder", K_ENC_UTIL, util, period);
}
nvmlReturn_t nvmlDeviceGetDecoderUtilization(nvmlDevice_t device, unsigned int *util, unsigned int *period) {
    return engine(device, "nvmlDeviceGetDecoderUtilization", "decoder", K_DEC_UTIL, util, period);
}
nvmlReturn_t nvmlDeviceGetJpgUtilization(nvmlDevice_t device, unsigned int *util, unsigned int *period) {
    return engine(device, "nvmlDeviceGetJpgUtilization", "jpg", K_JPG_UTIL, util, period);
}
nvmlReturn_t nvmlDeviceGetOfaUtilization(nvmlDevice_t device, unsigned int *util, unsigned int *period) {
    return engine(device, "nvmlDeviceGetOfaUtilization", "ofa", K_OFA_UTIL, util, period);
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *types) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceGetSupportedEventTypes", "event_types", NULL, &d);
    if (r) return r;
    NEED(d, K_EVENT_TYPES);
    *types = VAL(d, K_EVENT_TYPES);
    return finish(NVML_SUCCESS);
}

static fake_event_set *event_sets[MAX_EVENT_SETS];

static int valid_set(const fake_event_set *set) {
    for (int i = 0; i < MAX_EVENT_SETS; i++)
        if (set != NULL && event_sets[i] == set && set->magic == EVENT_SET_MAGIC) return 1;
    return 0;
}

nvmlReturn_t nvmlEventSetCreate(fake_event_set **out) {
    nvmlReturn_t r = begin_system("nvmlEventSetCreate");
    if (r) return r;
    for (int i = 0; i < MAX_EVENT_SETS; i++) {
        if (event_sets[i] != NULL) continue;
        fake_event_set *set = calloc(1, sizeof *set);
        if (set == NULL) return finish(NVML_ERROR_UNKNOWN);
        set->magic = EVENT_SET_MAGIC;
        event_sets[i] = set;
        *out = set;
        return finish(NVML_SUCCESS);
    }
    return finish(NVML_ERROR_UNKNOWN);
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, fake_event_set *set) {
    fake_device *d;
    nvmlReturn_t r = begin(device, "nvmlDeviceRegisterEvents", "register_events", NULL, &d);
    if (r) return r;
    if (!valid_set(set)) return finish(NVML_ERROR_INVALID_ARGUMENT);
    if (!d->has[K_EVENT_TYPES] || (types & ~VAL(d, K_EVENT_TYPES)) != 0) return finish(NVML_ERROR_NOT_SUPPORTED);
    set->registered[handle_index(device)] = 1;
    return finish(NVML_SUCCESS);
}

static int delivered(const fake_event_set *set, int device, unsigned long long seq) {
    for (int i = 0; i < set->n_delivered; i++)
        if (set->delivered[i].device == device && set->delivered[i].seq == seq) return 1;
    return 0;
}

/* With the lock held: deliver one undelivered Xid, or report a lost device; -1 when there is nothing yet. */
static int next_event(fake_event_set *set, nvmlEventData_t *data) {
    int lost = 0;
    for (int i = 0; i < current.device_count; i++) {
        if (!set->registered[i]) continue;
        fake_device *d = &current.devices[i];
        for (int x = 0; x < d->n_xids; x++) {
            if (delivered(set, i, d->xids[x].seq) || set->n_delivered >= MAX_DELIVERED) continue;
            set->delivered[set->n_delivered].device = i;
            set->delivered[set->n_delivered++].seq = d->xids[x].seq;
            data->device = &handles[i];
            data->eventType = EVENT_XID;
            data->eventData = d->xids[x].code;
            data->gpuInstanceId = d->xids[x].gi;
            data->computeInstanceId = d->xids[x].ci;
            return NVML_SUCCESS;
        }
        if (VAL(d, K_LOST)) lost = 1;
    }
    return lost ? NVML_ERROR_GPU_IS_LOST : -1;
}

nvmlReturn_t nvmlEventSetWait_v2(fake_event_set *set, nvmlEventData_t *data, unsigned int timeout_ms) {
    nvmlReturn_t r = begin_system("nvmlEventSetWait_v2");
    if (r) return r;
    if (!valid_set(set) || data == NULL) return finish(NVML_ERROR_INVALID_ARGUMENT);
    double deadline = now_ms() + timeout_ms;
    for (;;) {
        refresh_scenario();
        if (init_count == 0 || current.loaded != 1) return finish(NVML_ERROR_UNINITIALIZED);
        int found = next_event(set, data);
        if (found >= 0) return finish(found);
        if (now_ms() >= deadline) return finish(NVML_ERROR_TIMEOUT_CODE);
        in_flight++;
        pthread_mutex_unlock(&lock);
        double left = deadline - now_ms();
        long pause_ms = left >= 50.0 ? 50 : left > 1.0 ? (long)left : 1;
        struct timespec pause = {0, pause_ms * 1000000L};
        nanosleep(&pause, NULL);
        pthread_mutex_lock(&lock);
        in_flight--;
    }
}

nvmlReturn_t nvmlEventSetFree(fake_event_set *set) {
    pthread_mutex_lock(&lock);
    log_call("nvmlEventSetFree", -1);
    nvmlReturn_t r = NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < MAX_EVENT_SETS; i++) {
        if (set == NULL || event_sets[i] != set) continue;
        set->magic = 0;
        free(set);
        event_sets[i] = NULL;
        r = NVML_SUCCESS;
    }
    pthread_mutex_unlock(&lock);
    return r;
}
