"""The Prometheus metric and label names that gpusight serves (``--serve``) and reads (``--cluster``), declared once.

Device metrics carry dcgm-exporter's names, units and labels, so dashboards built for dcgm-exporter work
unchanged; gpusight's own metrics carry the ``gpusight_`` prefix. ``docs/exporter.md`` lists the mapping.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True, slots=True)
class MetricName:
    """One metric family: its name, type, help text and the labels beyond the ones every series of its kind has."""

    name: str
    """The family's name as exposed (without a counter's ``_total``: dcgm-exporter's counters have none)."""
    kind: Literal["gauge", "counter"]
    """Prometheus type."""
    help: str
    """The ``# HELP`` text, with the unit."""
    labels: tuple[str, ...] = ()
    """Labels of its own, after the common ones (``DEVICE_LABELS`` for device metrics, ``HOST_LABELS`` for the rest)."""


# -- labels -----------------------------------------------------------------------------------------------------

LABEL_GPU = "gpu"
"""NVML index of the GPU, as a string."""
LABEL_UUID = "UUID"
"""The GPU's ``GPU-...`` UUID (dcgm-exporter's default spelling)."""
LABEL_PCI_BUS_ID = "pci_bus_id"
"""The GPU's PCI bus id."""
LABEL_DEVICE = "device"
"""``nvidiaN``, N being the GPU's minor number."""
LABEL_MODEL = "modelName"
"""The GPU's product name."""
LABEL_HOSTNAME = "Hostname"
"""The node's name (dcgm-exporter 3.x/4.x before May 2026)."""
LABEL_HOSTNAME_NEW = "hostname"
"""The node's name as dcgm-exporter writes it since May 2026 (its PR #655); gpusight writes both, reads either."""
LABEL_DRIVER = "DCGM_FI_DRIVER_VERSION"
"""The driver version."""
LABEL_GPU_I_ID = "GPU_I_ID"
"""A MIG GPU instance id, as dcgm-exporter labels every series of a MIG instance; absent on whole GPUs."""
LABEL_GPU_I_PROFILE = "GPU_I_PROFILE"
"""A MIG instance's profile, e.g. ``3g.40gb`` (dcgm-exporter's label); absent on whole GPUs."""
MIG_LABELS = (LABEL_GPU_I_ID, LABEL_GPU_I_PROFILE)
"""The labels a MIG instance's series carry after its parent GPU's ``DEVICE_LABELS``."""
LABEL_XID = "xid"
"""An Xid number, e.g. ``79``."""

DEVICE_LABELS = (LABEL_GPU, LABEL_UUID, LABEL_PCI_BUS_ID, LABEL_DEVICE, LABEL_MODEL, LABEL_HOSTNAME,
                 LABEL_HOSTNAME_NEW, LABEL_DRIVER)
"""The labels of every device series, in this order."""
HOST_LABELS = (LABEL_HOSTNAME, LABEL_HOSTNAME_NEW)
"""The labels of every gpusight host, job, process and advice series."""
GPU_LABELS = (LABEL_GPU, LABEL_UUID)
"""The labels naming a GPU on gpusight's own per-GPU series, after ``HOST_LABELS``."""

LABEL_JOB = "gpusight_job"
"""gpusight's job number on its node (``JobSample.id``); not Prometheus's own ``job`` label."""
LABEL_CLUSTER_JOB = "cluster_job"
"""``JobSample.cluster_key``: the same on every node a job spans (empty when none)."""
LABEL_KIND = "kind"
"""A job's workload kind (training, inference, notebook, unknown)."""
LABEL_UTILIZATION = "utilization"
"""Which FLOPs utilization a series is: ``MFU`` (model FLOPs) or ``HFU`` (FLOPs counted as they ran)."""
LABEL_STEP_PART = "part"
"""A part of step time: ``data``, ``compute``, ``communication``, ``copy`` or ``idle``."""
LABEL_RANK = "rank"
"""A process's distributed rank, or its place within its job when no rank is readable."""
LABEL_PROCESS = "process"
"""A process's name (``comm``), never its command line unless ``--serve-cmdline`` opts in."""
LABEL_USER = "user"
"""The process owner's user name."""
LABEL_CONTAINER = "container"
"""Container name or short id ("" on the host)."""
LABEL_POD = "pod"
"""Kubernetes pod name ("" when none)."""
LABEL_NAMESPACE = "namespace"
"""Kubernetes namespace ("" when none)."""
LABEL_SLURM_JOB = "slurm_job_id"
"""Slurm job id ("" when none)."""
LABEL_COMMAND = "command"
"""A process's command line: only with ``--serve-cmdline``."""
LABEL_ADVICE_ID = "advice"
"""An advice id such as ``input_bound:gpu0``."""
LABEL_RULE = "rule"
"""The rule that raised advice (the id before the colon)."""
LABEL_SEVERITY = "severity"
"""critical, warn or info."""
LABEL_SUMMARY = "summary"
"""What advice means in a few words, fixed per rule (``Rule.summary``): never the figures, which would churn series."""
LABEL_SCOPE = "scope"
"""What advice is about: ``host``, ``job3``, ``gpu0``, ``pid1234``."""
LABEL_CORE = "core"
"""A CPU core's number."""
LABEL_VERSION = "version"
"""gpusight's version."""
LABEL_SOURCE = "source"
"""Where the served data comes from: ``nvml`` (live), ``demo`` (simulated) or ``replay`` (a recording)."""

# -- dcgm-exporter's device metrics -------------------------------------------------------------------------------

GPU_UTIL = MetricName("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).")
MEM_COPY_UTIL = MetricName("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).")
FB_USED = MetricName("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).")
FB_FREE = MetricName("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).")
FB_RESERVED = MetricName("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).")
POWER_USAGE = MetricName("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).")
ENERGY = MetricName("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "gauge",
                    "Total energy consumption since boot (in mJ); a counter served as a gauge to keep its name.")
"""dcgm-exporter types it ``counter`` but writes no ``_total``; prometheus_client's text format always appends
``_total`` to a counter, which would rename the series, so gpusight serves it as a gauge under the same name
(``rate()``/``increase()`` work on it alike; docs/exporter.md)."""
GPU_TEMP = MetricName("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).")
SM_CLOCK = MetricName("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).")
MEM_CLOCK = MetricName("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).")
CLOCK_EVENTS = MetricName("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge",
                          "Current clock event (throttle) reasons, NVML's bitmask.")
SM_ACTIVE = MetricName("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned.")
SM_OCCUPANCY = MetricName("DCGM_FI_PROF_SM_OCCUPANCY", "gauge", "The ratio of number of warps resident on an SM.")
TENSOR_ACTIVE = MetricName("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge",
                           "Ratio of cycles the tensor (HMMA) pipe is active.")
DRAM_ACTIVE = MetricName("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
                         "Ratio of cycles the device memory interface is active sending or receiving data.")
PCIE_TX = MetricName("DCGM_FI_PROF_PCIE_TX_BYTES", "gauge",
                     "The rate of data transmitted over the PCIe bus (in bytes per second).")
PCIE_RX = MetricName("DCGM_FI_PROF_PCIE_RX_BYTES", "gauge",
                     "The rate of data received over the PCIe bus (in bytes per second).")
NVLINK_TX = MetricName("DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge",
                       "The rate of data transmitted over NVLink, all links (in bytes per second).")
NVLINK_RX = MetricName("DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge",
                       "The rate of data received over NVLink, all links (in bytes per second).")

ENC_UTIL = MetricName("DCGM_FI_DEV_ENC_UTIL", "gauge", "Encoder utilization (in %).")
DEC_UTIL = MetricName("DCGM_FI_DEV_DEC_UTIL", "gauge", "Decoder utilization (in %).")
VIDEO_METRICS = (ENC_UTIL, DEC_UTIL)
"""dcgm-exporter's video engine metrics, each series labelled with ``DEVICE_LABELS``."""

# Health. dcgm-exporter types the error and retirement counts ``counter`` without ``_total``; like ENERGY they are
# served as gauges of the same names (prometheus_client would append ``_total``). docs/exporter.md says so.
XID_ERRORS = MetricName("DCGM_FI_DEV_XID_ERRORS", "gauge",
                        "Value of the last XID error encountered (0: none since gpusight started listening).")
ECC_SBE_VOL = MetricName("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "gauge", "Total number of single-bit volatile ECC errors.")
ECC_DBE_VOL = MetricName("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "gauge", "Total number of double-bit volatile ECC errors.")
ECC_SBE_AGG = MetricName("DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", "gauge", "Total number of single-bit persistent ECC errors.")
ECC_DBE_AGG = MetricName("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "gauge", "Total number of double-bit persistent ECC errors.")
RETIRED_SBE = MetricName("DCGM_FI_DEV_RETIRED_SBE", "gauge", "Total number of retired pages due to single-bit errors.")
RETIRED_DBE = MetricName("DCGM_FI_DEV_RETIRED_DBE", "gauge", "Total number of retired pages due to double-bit errors.")
RETIRED_PENDING = MetricName("DCGM_FI_DEV_RETIRED_PENDING", "gauge",
                             "1 while a page retirement waits for a GPU reset or driver reload, else 0.")
ROW_REMAP_FAILURE = MetricName("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed.")
ROW_REMAP_PENDING = MetricName("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending.")
CORRECTABLE_REMAPPED_ROWS = MetricName("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "gauge",
                                       "Number of remapped rows for correctable errors.")
UNCORRECTABLE_REMAPPED_ROWS = MetricName("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "gauge",
                                         "Number of remapped rows for uncorrectable errors.")
PCIE_REPLAY = MetricName("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "gauge", "Total number of PCIe retries.")
PCIE_LINK_GEN = MetricName("DCGM_FI_DEV_PCIE_LINK_GEN", "gauge", "PCIe current link generation.")
PCIE_LINK_WIDTH = MetricName("DCGM_FI_DEV_PCIE_LINK_WIDTH", "gauge", "PCIe current link width.")
PCIE_MAX_LINK_GEN = MetricName("DCGM_FI_DEV_PCIE_MAX_LINK_GEN", "gauge", "PCIe max link generation.")
PCIE_MAX_LINK_WIDTH = MetricName("DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH", "gauge", "PCIe max link width.")
NVLINK_CRC_FLIT = MetricName("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "gauge",
                             "Total number of NVLink flow-control CRC errors.")
NVLINK_CRC_DATA = MetricName("DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", "gauge",
                             "Total number of NVLink data CRC errors.")
NVLINK_REPLAY = MetricName("DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", "gauge", "Total number of NVLink retries.")
NVLINK_RECOVERY = MetricName("DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", "gauge",
                             "Total number of NVLink recovery errors.")

HEALTH_METRICS = (XID_ERRORS, ECC_SBE_VOL, ECC_DBE_VOL, ECC_SBE_AGG, ECC_DBE_AGG, RETIRED_SBE, RETIRED_DBE,
                  RETIRED_PENDING, ROW_REMAP_FAILURE, ROW_REMAP_PENDING, CORRECTABLE_REMAPPED_ROWS,
                  UNCORRECTABLE_REMAPPED_ROWS, PCIE_REPLAY, PCIE_LINK_GEN, PCIE_LINK_WIDTH, PCIE_MAX_LINK_GEN,
                  PCIE_MAX_LINK_WIDTH, NVLINK_CRC_FLIT, NVLINK_CRC_DATA, NVLINK_REPLAY, NVLINK_RECOVERY)
"""dcgm-exporter's hardware health metrics, each series labelled with ``DEVICE_LABELS``."""

COUNTERS_AS_GAUGES = (ENERGY, ECC_SBE_VOL, ECC_DBE_VOL, ECC_SBE_AGG, ECC_DBE_AGG, RETIRED_SBE, RETIRED_DBE,
                      RETIRED_PENDING, CORRECTABLE_REMAPPED_ROWS, UNCORRECTABLE_REMAPPED_ROWS, PCIE_REPLAY,
                      NVLINK_CRC_FLIT, NVLINK_CRC_DATA, NVLINK_REPLAY, NVLINK_RECOVERY)
"""dcgm-exporter's metrics it types ``counter`` without ``_total``, which gpusight serves as gauges of the same names
(prometheus_client would append ``_total`` to a counter, renaming the series)."""

MIG_METRICS = (FB_USED, FB_FREE, SM_ACTIVE, SM_OCCUPANCY, TENSOR_ACTIVE, DRAM_ACTIVE)
"""The device metrics a MIG instance has series of, labelled ``DEVICE_LABELS`` (its parent's) and ``MIG_LABELS``."""

DEVICE_METRICS = (GPU_UTIL, MEM_COPY_UTIL, FB_USED, FB_FREE, FB_RESERVED, POWER_USAGE, ENERGY, GPU_TEMP, SM_CLOCK,
                  MEM_CLOCK, CLOCK_EVENTS, SM_ACTIVE, SM_OCCUPANCY, TENSOR_ACTIVE, DRAM_ACTIVE, PCIE_TX, PCIE_RX,
                  NVLINK_TX, NVLINK_RX)
"""The core device metrics gpusight serves under dcgm-exporter's names, each series labelled with ``DEVICE_LABELS``
(``VIDEO_METRICS`` and ``HEALTH_METRICS`` are served the same way, where NVML gives them)."""

# -- AMD device-metrics-exporter's device metrics (ROCm/device-metrics-exporter, pkg/amdgpu/gpuagent/
# gpuagent_gpu_metrics.go and docs/configuration/metricslist.md): served for AMD GPUs only ----------------------------

LABEL_AMD_GPU_ID = "gpu_id"
"""AMD's exporter's GPU number label (gpusight's GPU index, as a string)."""
LABEL_AMD_CARD_MODEL = "card_model"
"""AMD's exporter's product name label."""
LABEL_CLOCK_INDEX = "clock_index"
"""AMD's exporter's position of a clock in the GPU's clock list (gpusight: 0 system, 1 memory)."""
LABEL_CLOCK_TYPE = "clock_type"
"""AMD's exporter's clock kind, lower case: ``system`` (graphics/compute) or ``memory``."""
AMD_DEVICE_LABELS = (LABEL_AMD_GPU_ID, LABEL_AMD_CARD_MODEL, LABEL_HOSTNAME_NEW)
"""The labels of every AMD device series: the mandatory labels of AMD's exporter that gpusight can fill."""
AMD_CLOCK_LABELS = (LABEL_CLOCK_INDEX, LABEL_CLOCK_TYPE)
"""The labels ``AMD_CLOCK`` adds before ``AMD_DEVICE_LABELS``."""

AMD_GFX_ACTIVITY = MetricName("gpu_gfx_activity", "gauge", "Graphics engine usage in Percentage (0-100)")
AMD_UMC_ACTIVITY = MetricName("gpu_umc_activity", "gauge", "Memory engine usage in Percentage (0-100)")
AMD_POWER_USAGE = MetricName("gpu_power_usage", "gauge", "GPU Power usage in Watts")
AMD_ENERGY = MetricName("gpu_energy_consumed", "gauge", "Accumulated energy consumed by the GPU in uJ")
AMD_EDGE_TEMP = MetricName("gpu_edge_temperature", "gauge", "Current edge temperature in Celsius")
AMD_JUNCTION_TEMP = MetricName("gpu_junction_temperature", "gauge", "Current junction/hotspot temperature in Celsius")
AMD_MEMORY_TEMP = MetricName("gpu_memory_temperature", "gauge", "Current memory temperature in Celsius")
AMD_USED_VRAM = MetricName("gpu_used_vram", "gauge", "Used VRAM memory of the GPU (in MB)")
AMD_TOTAL_VRAM = MetricName("gpu_total_vram", "gauge", "Total VRAM memory of the GPU (in MB)")
AMD_FREE_VRAM = MetricName("gpu_free_vram", "gauge", "Free VRAM memory of the GPU (in MB)")
AMD_CLOCK = MetricName("gpu_clock", "gauge", "Current clock frequency of the GPU in MHz", AMD_CLOCK_LABELS)
AMD_PCIE_SPEED = MetricName("pcie_speed", "gauge", "Current PCIe speed in GT/s")
AMD_PCIE_MAX_SPEED = MetricName("pcie_max_speed", "gauge", "Maximum PCIe speed in GT/s")

AMD_DEVICE_METRICS = (AMD_GFX_ACTIVITY, AMD_UMC_ACTIVITY, AMD_POWER_USAGE, AMD_ENERGY, AMD_EDGE_TEMP,
                      AMD_JUNCTION_TEMP, AMD_MEMORY_TEMP, AMD_USED_VRAM, AMD_TOTAL_VRAM, AMD_FREE_VRAM, AMD_CLOCK,
                      AMD_PCIE_SPEED, AMD_PCIE_MAX_SPEED)
"""Device metrics gpusight serves for AMD GPUs under AMD device-metrics-exporter's names, help texts and units."""

# -- gpusight's own names for the device metrics of GPUs other than NVIDIA's (HOST_LABELS, GPU_LABELS, vendor) ------

LABEL_VENDOR = "vendor"
"""Who made the GPU: ``amd`` or ``intel`` (``Vendor``)."""
LABEL_CLOCK = "clock"
"""Which clock: ``compute`` or ``memory``."""
OWN_DEVICE_LABELS = HOST_LABELS + GPU_LABELS + (LABEL_VENDOR,)
"""The labels of every ``OWN_DEVICE_METRICS`` series, before its own."""

OWN_GPU_UTIL = MetricName("gpusight_gpu_utilization_percent", "gauge", "Share of time the GPU was busy (in %).")
OWN_MEM_UTIL = MetricName("gpusight_gpu_memory_utilization_percent", "gauge",
                          "Share of time the memory controller was busy (in %).")
OWN_MEM_USED = MetricName("gpusight_gpu_memory_used_bytes", "gauge", "Device memory in use.")
OWN_MEM_TOTAL = MetricName("gpusight_gpu_memory_total_bytes", "gauge", "Device memory in all.")
OWN_MEM_FREE = MetricName("gpusight_gpu_memory_free_bytes", "gauge", "Device memory free.")
OWN_POWER = MetricName("gpusight_gpu_power_watts", "gauge", "Power draw (in W).")
OWN_POWER_LIMIT = MetricName("gpusight_gpu_power_limit_watts", "gauge", "Enforced power limit (in W).")
OWN_ENERGY = MetricName("gpusight_gpu_energy_joules", "gauge",
                        "Energy consumed since the driver loaded (in J); grows, served as a gauge like DCGM's.")
OWN_TEMP = MetricName("gpusight_gpu_temperature_celsius", "gauge", "GPU (edge or package) temperature (in C).")
OWN_JUNCTION_TEMP = MetricName("gpusight_gpu_junction_temperature_celsius", "gauge",
                               "Hottest spot on the die (in C).")
OWN_MEMORY_TEMP = MetricName("gpusight_gpu_memory_temperature_celsius", "gauge", "Device memory temperature (in C).")
OWN_CLOCK = MetricName("gpusight_gpu_clock_hertz", "gauge", "Current clock frequency (in Hz).", (LABEL_CLOCK,))
OWN_FAN = MetricName("gpusight_gpu_fan_percent", "gauge", "Fan speed (in % of its maximum).")
OWN_PCIE_GEN = MetricName("gpusight_gpu_pcie_link_generation", "gauge", "Current PCIe link generation.")
OWN_PCIE_MAX_GEN = MetricName("gpusight_gpu_pcie_link_generation_max", "gauge", "Highest PCIe link generation.")

OWN_DEVICE_METRICS = (OWN_GPU_UTIL, OWN_MEM_UTIL, OWN_MEM_USED, OWN_MEM_TOTAL, OWN_MEM_FREE, OWN_POWER,
                      OWN_POWER_LIMIT, OWN_ENERGY, OWN_TEMP, OWN_JUNCTION_TEMP, OWN_MEMORY_TEMP, OWN_CLOCK, OWN_FAN,
                      OWN_PCIE_GEN, OWN_PCIE_MAX_GEN)
"""gpusight's names for the device metrics of Intel GPUs, and of AMD GPUs where AMD's exporter has no name."""

# -- gpusight's own per-GPU metrics (labelled with HOST_LABELS, GPU_LABELS and their own) ---------------------------

JPEG_UTIL = MetricName("gpusight_jpeg_utilization_percent", "gauge", "JPEG decoder (NVJPG) utilization (in %).")
OFA_UTIL = MetricName("gpusight_ofa_utilization_percent", "gauge", "Optical flow accelerator (OFA) utilization (in %).")
XID_COUNT = MetricName("gpusight_xid_errors", "counter",
                       "Xid errors received since gpusight started listening, by Xid number: only grows (\"unknown\" "
                       "counts events that came and went between scrapes). Meanings: NVIDIA's Xid catalog, "
                       "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html", (LABEL_XID,))
"""Served as ``gpusight_xid_errors_total``."""
XID_LAST = MetricName("gpusight_xid_last", "gauge",
                      "The last Xid number received (absent before any); its time is gpusight_xid_last_timestamp_seconds.")
XID_LAST_TIME = MetricName("gpusight_xid_last_timestamp_seconds", "gauge",
                           "When the last Xid was received (Unix time).")
HEALTH_SCORE = MetricName("gpusight_gpu_health_score", "gauge",
                          "Hardware health 0-100: 100 less the points of each finding (gpusight.facts.health).")
DRAIN = MetricName("gpusight_gpu_drain", "gauge",
                   "1 when the GPU must be drained (a reset or reboot is needed: Xid 79/48/94/95, pending or failed "
                   "row remap, degraded PCIe link), else 0.")

GPUSIGHT_DEVICE_METRICS = (JPEG_UTIL, OFA_UTIL, XID_COUNT, XID_LAST, XID_LAST_TIME, HEALTH_SCORE, DRAIN)
"""gpusight's own per-GPU metrics, each series labelled with ``HOST_LABELS``, ``GPU_LABELS`` and then its own labels
(as ``gpusight_gpu_lost``; no camelCase ``modelName``, which promtool's lint flags)."""

# -- gpusight's own metrics ------------------------------------------------------------------------------------------

GPU_LOST = MetricName("gpusight_gpu_lost", "gauge", "1 while the GPU has fallen off the bus or stopped answering.",
                      GPU_LABELS)
ADVICE = MetricName("gpusight_advice", "gauge", "1 for each piece of advice standing now.",
                    (LABEL_ADVICE_ID, LABEL_RULE, LABEL_SEVERITY, LABEL_SCOPE, LABEL_SUMMARY))
JOB_INFO = MetricName("gpusight_job_info", "gauge", "1 for each job running now, with what identifies it.",
                      (LABEL_JOB, LABEL_CLUSTER_JOB, LABEL_KIND, LABEL_SLURM_JOB, LABEL_POD, LABEL_NAMESPACE))
JOB_PROCESSES = MetricName("gpusight_job_processes", "gauge", "GPU processes of the job on this node.", (LABEL_JOB,))
JOB_WORLD_SIZE = MetricName("gpusight_job_world_size", "gauge", "WORLD_SIZE of the job, where readable.", (LABEL_JOB,))
JOB_MEMORY = MetricName("gpusight_job_gpu_memory_bytes", "gauge", "GPU memory the job's processes use on this node.",
                        (LABEL_JOB,))
PROCESS_INFO = MetricName("gpusight_process_info", "gauge", "1 for each GPU process, with what identifies it.",
                          (LABEL_JOB, LABEL_RANK, LABEL_GPU, LABEL_PROCESS, LABEL_USER, LABEL_CONTAINER, LABEL_POD,
                           LABEL_NAMESPACE, LABEL_SLURM_JOB))
PROCESS_MEMORY = MetricName("gpusight_process_gpu_memory_bytes", "gauge", "GPU memory the process uses.",
                            (LABEL_JOB, LABEL_RANK, LABEL_GPU))
PROCESS_SM = MetricName("gpusight_process_sm_percent", "gauge", "The process's share of the GPU's SMs (in %).",
                        (LABEL_JOB, LABEL_RANK, LABEL_GPU))
PROCESS_CPU = MetricName("gpusight_process_cpu_percent", "gauge", "CPU the process uses (in %, 100 = one core).",
                         (LABEL_JOB, LABEL_RANK, LABEL_GPU))
WORKERS = MetricName("gpusight_dataloader_workers", "gauge", "DataLoader worker processes of the process.",
                     (LABEL_JOB, LABEL_RANK, LABEL_GPU))
WORKERS_CPU = MetricName("gpusight_dataloader_workers_cpu_percent", "gauge",
                         "CPU its DataLoader workers use together (in %, 100 = one core).",
                         (LABEL_JOB, LABEL_RANK, LABEL_GPU))
INPUT_WAIT = MetricName("gpusight_input_wait_percent", "gauge",
                        "Share of step time spent waiting for the next batch, measured by gpusight.torch (in %).",
                        (LABEL_JOB, LABEL_RANK, LABEL_GPU))
JOB_STEPS = MetricName("gpusight_job_steps_per_second", "gauge",
                       "Training steps per second of the job's slowest rank on this node, measured by gpusight.torch.",
                       (LABEL_JOB,))
JOB_SAMPLES = MetricName("gpusight_job_samples_per_second", "gauge",
                         "Samples per second of the job's ranks on this node, summed (gpusight.torch).", (LABEL_JOB,))
JOB_TOKENS = MetricName("gpusight_job_tokens_per_second", "gauge",
                        "Tokens per second of the job's ranks on this node, summed, where batches hold token ids.",
                        (LABEL_JOB,))
JOB_FLOPS = MetricName("gpusight_job_flops_per_second", "gauge",
                       "FLOP/s the job's ranks on this node achieve, summed (FLOPs per step times steps per second).",
                       (LABEL_JOB, LABEL_UTILIZATION))
JOB_PEAK_FLOPS = MetricName("gpusight_job_peak_flops_per_second", "gauge",
                            "Peak dense FLOP/s of the same ranks' GPUs for their math mode, summed.",
                            (LABEL_JOB, LABEL_UTILIZATION))
JOB_FLOPS_UTILIZATION = MetricName("gpusight_job_flops_utilization_percent", "gauge",
                                   "Achieved over peak FLOP/s of the job's ranks on this node (in %): MFU, or HFU "
                                   "where FLOPs were counted as they ran.", (LABEL_JOB, LABEL_UTILIZATION))
JOB_STEP_TIME = MetricName("gpusight_job_step_time_percent", "gauge",
                           "Share of step time by part (data, compute, communication, copy, idle), averaged over the "
                           "job's profiled ranks on this node (in %).", (LABEL_JOB, LABEL_STEP_PART))
HOST_CPU = MetricName("gpusight_host_cpu_percent", "gauge", "Host CPU use averaged over all cores (in %).")
HOST_CORE_CPU = MetricName("gpusight_host_core_cpu_percent", "gauge", "CPU use of one core (in %).", (LABEL_CORE,))
HOST_IOWAIT = MetricName("gpusight_host_iowait_percent", "gauge", "Host CPU time waiting for I/O (in %).")
HOST_MEMORY_USED = MetricName("gpusight_host_memory_used_bytes", "gauge", "Host memory in use.")
HOST_MEMORY_TOTAL = MetricName("gpusight_host_memory_total_bytes", "gauge", "Host memory in all.")
SNAPSHOT_TIME = MetricName("gpusight_snapshot_timestamp_seconds", "gauge",
                           "When the snapshot served was taken (Unix time).")
SNAPSHOT_AGE = MetricName("gpusight_snapshot_age_seconds", "gauge",
                          "How old the snapshot served was at scrape time: grows while NVML hangs.")
BUILD_INFO = MetricName("gpusight_build_info", "gauge",
                        "1, labelled with gpusight's version and its data source (demo data is simulated).",
                        (LABEL_VERSION, LABEL_SOURCE))
SERIES_DROPPED = MetricName("gpusight_series_dropped", "gauge",
                            "GPU processes left out of the per-process series by the cap (the smallest in memory).")

GPUSIGHT_METRICS = (GPU_LOST, ADVICE, JOB_INFO, JOB_PROCESSES, JOB_WORLD_SIZE, JOB_MEMORY, JOB_STEPS, JOB_SAMPLES,
                    JOB_TOKENS, JOB_FLOPS, JOB_PEAK_FLOPS, JOB_FLOPS_UTILIZATION, JOB_STEP_TIME, PROCESS_INFO,
                    PROCESS_MEMORY, PROCESS_SM, PROCESS_CPU, WORKERS, WORKERS_CPU, INPUT_WAIT, HOST_CPU, HOST_CORE_CPU,
                    HOST_IOWAIT, HOST_MEMORY_USED, HOST_MEMORY_TOTAL, SNAPSHOT_TIME, SNAPSHOT_AGE, BUILD_INFO,
                    SERIES_DROPPED)
"""Every ``gpusight_`` metric, each series labelled with ``HOST_LABELS`` and then its own labels."""
