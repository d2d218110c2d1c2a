"""Immutable snapshot dataclasses.

Every metric that a GPU, driver or operating system cannot provide is ``None`` (shown as N/A),
never 0, so "unsupported" is never confused with "idle".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

SCHEMA_VERSION = 6
"""Version of the snapshot layout written to JSON output and recordings (2 added jobs and NVLink; 3 added
containers, scheduler job ids and the GPUs' PCI bus ids; 4 added training speed: throughput, FLOPs, MFU and the
step-time breakdown; 5 added MIG devices, hardware health (Xid events, ECC, remapped rows, PCIe link) and the video
engines; 6 added the vendor and kernel driver of each GPU, junction and memory temperatures, other vendors' driver
versions and why a process's GPU usage is unknown)."""


class StringEnum(str, Enum):
    """A fixed set of strings: each member equals, prints and serializes as its value.

    JSON output and comparisons with plain strings therefore see the same strings as before the
    field was an enum. ``__str__`` is the value on every Python version (``enum.StrEnum`` does
    this from 3.11 only). The values are part of the JSON contract: a reader rejects a value it
    does not know, so adding one is a layout change.
    """

    def __str__(self) -> str:
        return str.__str__(self)


class SourceKind(StringEnum):
    """Where a snapshot's data comes from (``Snapshot.source``)."""

    NVML = "nvml"
    """Live: NVML for the GPUs, psutil for the host."""
    DEMO = "demo"
    """Simulated by a demo scenario."""
    REPLAY = "replay"
    """Read back from a recording."""


class Vendor(StringEnum):
    """Who made a GPU (``DeviceSample.vendor``); each vendor is read by its own backend."""

    NVIDIA = "nvidia"
    """Read through NVML."""
    AMD = "amd"
    """Read from the amdgpu driver's sysfs, hwmon and DRM fdinfo."""
    INTEL = "intel"
    """Read from the xe or i915 driver's sysfs, hwmon and DRM fdinfo."""


class ProcessRole(StringEnum):
    """Why a process is listed (``ProcessSample.role``)."""

    GPU = "gpu"
    """It holds a GPU context."""
    DATALOADER_WORKER = "dataloader_worker"
    """It is a PyTorch DataLoader worker feeding a GPU process."""


class GpuProcessType(StringEnum):
    """The kinds of context a GPU process holds, as NVML lists them (``ProcessSample.gpu_process_type``)."""

    COMPUTE = "compute"
    """A CUDA (compute) context."""
    GRAPHICS = "graphics"
    """A graphics context."""
    COMPUTE_GRAPHICS = "compute+graphics"
    """Both: the process is in NVML's compute and graphics lists."""


class WorkloadKind(StringEnum):
    """What a job's GPU processes do (``JobSample.kind``), which decides the advice that fits them."""

    TRAINING = "training"
    """A training run: a launcher, distributed-training variables, DataLoader workers or ``gpusight.torch``."""
    INFERENCE = "inference"
    """An inference server (vLLM, TGI, Triton, SGLang, ...): load follows requests, memory is held by design."""
    NOTEBOOK = "notebook"
    """An interactive notebook kernel (Jupyter/IPython)."""
    UNKNOWN = "unknown"
    """Nothing tells: treated like training by the rules, with no serving or notebook advice."""


class FlopsSource(StringEnum):
    """Where a trainer's FLOPs per step come from (``ProcessSample.flops_source``); it names the utilization.

    Counted FLOPs are those that ran, activation recomputation included, so their share of the peak is the hardware
    FLOPs utilization (HFU); the other two count the model's FLOPs only, so theirs is the model FLOPs utilization
    (MFU, as defined in the PaLM paper, appendix B).
    """

    COUNTED = "counted"
    """Counted once by ``torch.utils.flop_counter.FlopCounterMode`` over one training step: HFU."""
    GIVEN = "given"
    """Given by the user (``flops_per_step=``): MFU."""
    ESTIMATE_6N = "6N"
    """Estimated as 6 x parameters x tokens per step (decoder-only transformers): MFU."""

    @property
    def utilization_name(self) -> str:
        """``"HFU"`` for counted FLOPs, ``"MFU"`` otherwise."""
        return "HFU" if self is FlopsSource.COUNTED else "MFU"


class MathMode(StringEnum):
    """The arithmetic a trainer's matrix multiplications use, which picks the peak FLOP/s (``ProcessSample.math_mode``)."""

    BF16 = "bf16"
    """bfloat16 (autocast or bf16 weights), dense tensor-core peak."""
    FP16 = "fp16"
    """float16, dense tensor-core peak."""
    TF32 = "tf32"
    """float32 tensors with TF32 tensor-core matmuls allowed."""
    FP32 = "fp32"
    """Plain float32."""


class BatchSizeSource(StringEnum):
    """How a trainer knows the samples in a step (``ProcessSample.batch_size_source``)."""

    BATCH = "batch"
    """The leading dimension of the batch's first tensor."""
    GIVEN = "given"
    """Given by the user or the training framework's settings."""


class BreakdownSource(StringEnum):
    """What a step-time breakdown was measured from (``ProcessSample.breakdown_source``)."""

    DEVICE = "device"
    """The profiler's GPU activities (kernels, NCCL kernels, copies), with the input wait measured by the hook."""
    HOST = "host"
    """What the host sees (no CUDA): CPU operators, collectives and copies as the CPU runs them."""


class ContainerRuntime(StringEnum):
    """What isolates a process from the host (``ContainerSample.runtime``), as its cgroup and namespaces tell."""

    DOCKER = "docker"
    """A Docker container (``docker-ID.scope`` or ``/docker/ID``)."""
    CONTAINERD = "containerd"
    """A containerd container outside Kubernetes, or one of a pod's containers run by containerd (``cri-containerd-``)."""
    CRIO = "cri-o"
    """A CRI-O container (``crio-ID.scope``), usually one of a Kubernetes pod's."""
    PODMAN = "podman"
    """A Podman container (``libpod-ID.scope``)."""
    SLURM = "slurm"
    """A Slurm job step's cgroup (``/slurm/uid_U/job_J/step_S`` or ``slurmstepd.scope/job_J``)."""
    NAMESPACE = "namespace"
    """Only its own PID namespace tells it apart (``unshare --pid``, a sandbox): no runtime is recognised."""


class Severity(StringEnum):
    """How urgent a piece of advice is (``Advice.severity``); members run from most to least severe."""

    CRITICAL = "critical"
    """Needs attention now."""
    WARN = "warn"
    """Costs throughput now and is worth fixing."""
    INFO = "info"
    """Worth knowing: spare capacity, an easy gain, or a healthy GPU."""


class ScopeKind(StringEnum):
    """What an advice scope names: the host, one job, one GPU or one process.

    A scope (``Advice.scope``) is the kind's value, followed by the job id, GPU index or pid:
    ``"host"``, ``"job3"``, ``"gpu0"``, ``"pid1234"``. Members are in the order advice is
    listed within a severity.
    """

    HOST = "host"
    """The whole machine."""
    JOB = "job"
    """One job (``JobSample.id``): processes that work together, possibly on several GPUs."""
    GPU = "gpu"
    """One GPU, by NVML index."""
    PID = "pid"
    """One process, by pid."""
    MIG = "mig"
    """One MIG device: ``"mig"``, the parent GPU's index, ``"."`` and the GPU instance id, e.g. ``"mig0.3"``.
    :meth:`parse` gives the parent's index as its number; :meth:`parse_mig` gives both."""

    def of(self, number: int | None = None) -> str:
        """The scope for job id, GPU index or pid ``number`` (none for the host), e.g. ``"gpu0"``."""
        return self.value if number is None else f"{self.value}{number}"

    @staticmethod
    def of_mig(device_index: int, gpu_instance_id: int) -> str:
        """The scope of the MIG device with GPU instance ``gpu_instance_id`` on GPU ``device_index``: ``"mig0.3"``."""
        return f"{ScopeKind.MIG.value}{device_index}.{gpu_instance_id}"

    @staticmethod
    def parse_mig(scope: str) -> tuple[int, int] | None:
        """(parent GPU index, GPU instance id) of a MIG scope such as ``"mig0.3"``; None for any other scope."""
        if not scope.startswith(ScopeKind.MIG.value):
            return None
        parent, dot, instance = scope[len(ScopeKind.MIG.value):].partition(".")
        if not dot or not all(p.isascii() and p.isdigit() for p in (parent, instance)):
            return None
        return int(parent), int(instance)

    @classmethod
    def parse(cls, scope: str) -> tuple[ScopeKind, int | None] | None:
        """(kind, number) of a scope such as ``"gpu0"`` (number None when absent); None for another form."""
        for kind in cls:
            if scope.startswith(kind.value):
                number = scope[len(kind.value) :]
                if kind is ScopeKind.MIG:
                    mig = ScopeKind.parse_mig(scope)
                    return None if mig is None else (kind, mig[0])
                if not number:
                    return kind, None
                if number.isascii() and number.isdigit():
                    return kind, int(number)
        return None


@dataclass(frozen=True, slots=True)
class DriverInfo:
    """Versions of the NVIDIA driver stack."""

    driver_version: str | None = None
    """Kernel driver version, e.g. ``"550.54.15"``."""
    cuda_driver_version: str | None = None
    """Highest CUDA version the driver supports, e.g. ``"12.4"``."""
    nvml_version: str | None = None
    """Version of the NVML library itself."""


@dataclass(frozen=True, slots=True)
class XidEvent:
    """One Xid error the driver reported for a GPU, as received through NVML's event API."""

    code: int
    """The Xid number, e.g. 79 (fallen off the bus); see :mod:`gpusight.facts.xid_catalog` for its meaning."""
    timestamp: float
    """Epoch seconds when gpusight received it (NVML's event carries no time of its own)."""
    gpu_instance_id: int | None = None
    """The MIG GPU instance it hit, when NVML says so; None for the whole GPU or where unknown."""
    compute_instance_id: int | None = None
    """The MIG compute instance it hit, when NVML says so."""


XID_RECENT_LIMIT = 16
"""How many of a GPU's latest Xid events each snapshot carries (``DeviceHealth.xid_recent``)."""


@dataclass(frozen=True, slots=True)
class DeviceHealth:
    """A GPU's hardware health at one instant: every counter is None where the GPU or driver cannot say.

    Counters are the driver's own (they never reset while the driver runs), except the Xid count, which
    gpusight counts from the moment it started listening. Judging them is :mod:`gpusight.facts.health`'s job.
    """

    xid_total: int | None = None
    """Xid events received since gpusight started listening (only grows); None where Xid events are unsupported."""
    xid_recent: tuple[XidEvent, ...] = ()
    """The latest Xid events, oldest first, at most ``XID_RECENT_LIMIT`` of them."""
    ecc_volatile_corrected: int | None = None
    """Corrected (single-bit) ECC errors since the last driver load; None where ECC is off or unsupported."""
    ecc_aggregate_corrected: int | None = None
    """Corrected ECC errors over the GPU's lifetime."""
    ecc_aggregate_uncorrected: int | None = None
    """Uncorrected (double-bit) ECC errors over the GPU's lifetime (the volatile count is
    ``DeviceSample.ecc_errors_uncorrected``)."""
    remapped_rows_correctable: int | None = None
    """Memory rows remapped after correctable errors (A100 and later); None on older GPUs."""
    remapped_rows_uncorrectable: int | None = None
    """Memory rows remapped after uncorrectable errors."""
    remap_pending: bool | None = None
    """True when a row remap waits for the next GPU reset: the GPU needs a reset before its next job."""
    remap_failed: bool | None = None
    """True when a row remap failed (the GPU is out of spare rows): replace the GPU."""
    retired_pages_single_bit: int | None = None
    """Pages retired after repeated single-bit errors (Volta and older; None where rows are remapped instead)."""
    retired_pages_double_bit: int | None = None
    """Pages retired after double-bit errors."""
    retired_pages_pending: bool | None = None
    """True when a page retirement waits for the next driver reload or GPU reset."""
    pcie_link_gen: int | None = None
    """Current PCIe link generation (GPUs drop to a low generation when idle, to save power)."""
    pcie_link_gen_max: int | None = None
    """Highest PCIe generation this GPU and its slot can run together."""
    pcie_link_width: int | None = None
    """Current PCIe link width (lanes)."""
    pcie_link_width_max: int | None = None
    """Widest PCIe link this GPU and its slot can run together."""
    pcie_replay_count: int | None = None
    """PCIe replays (retransmitted packets) since the driver loaded; a growing count means a bad link."""
    nvlink_crc_flit_errors: int | None = None
    """NVLink flow-control CRC errors, summed over the GPU's links; None without NVLink."""
    nvlink_crc_data_errors: int | None = None
    """NVLink data CRC errors, summed over the links."""
    nvlink_replay_errors: int | None = None
    """NVLink replays, summed over the links."""
    nvlink_recovery_errors: int | None = None
    """NVLink recoveries, summed over the links."""


@dataclass(frozen=True, slots=True)
class MigDeviceSample:
    """One MIG device (a compute instance inside a GPU instance of a MIG-enabled GPU) at one instant.

    NVML gives a MIG device its memory and its processes but no utilization: those figures come from GPM's
    MIG sampling on Hopper and later, and are None elsewhere, with ``utilization_note`` saying why. They are
    never 0 and never the parent's figure.
    """

    device_index: int
    """NVML index of the parent GPU."""
    mig_index: int
    """Its position among the parent's MIG devices (``nvmlDeviceGetMigDeviceHandleByIndex``)."""
    gpu_instance_id: int | None = None
    """The GPU instance id (dcgm-exporter's ``GPU_I_ID``)."""
    compute_instance_id: int | None = None
    """The compute instance id within the GPU instance."""
    profile: str | None = None
    """The instance profile as ``nvidia-smi`` and dcgm-exporter's ``GPU_I_PROFILE`` write it, e.g. ``"3g.40gb"``."""
    uuid: str | None = None
    """Its ``MIG-...`` identifier, as ``CUDA_VISIBLE_DEVICES`` accepts it."""
    cuda_index: int | None = None
    """Its number in CUDA programs under ``CUDA_VISIBLE_DEVICES`` (``--cuda-visible``); None otherwise."""
    sm_count: int | None = None
    """Streaming multiprocessors in the instance."""
    memory_used_bytes: int | None = None
    """Memory in use in the instance."""
    memory_total_bytes: int | None = None
    """The instance's memory."""
    sm_active_percent: float | None = None
    """GPM (MIG sampling, Hopper and later): percent of the instance's SM cycles with a warp resident."""
    sm_occupancy_percent: float | None = None
    """GPM: achieved warp occupancy in the instance."""
    tensor_active_percent: float | None = None
    """GPM: percent of cycles the instance's tensor cores were busy."""
    dram_active_percent: float | None = None
    """GPM: the instance's DRAM bandwidth utilization percent."""
    utilization_note: str | None = None
    """One line on why the activity figures are N/A, e.g. that NVML gives no utilization per MIG device before
    Hopper's GPM; None when they are read."""
    error: str | None = None
    """One-line reason when the MIG device could not be read."""


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One GPU at one instant."""

    index: int
    """NVML device index."""
    name: str | None = None
    """Marketing name, e.g. ``"NVIDIA H100 80GB HBM3"``."""
    uuid: str | None = None
    """Stable ``GPU-...`` identifier."""
    pci_bus_id: str | None = None
    """PCI bus id as NVML writes it, e.g. ``"00000000:3B:00.0"``."""
    minor_number: int | None = None
    """The device's minor number: it is ``/dev/nvidiaN`` (dcgm-exporter's ``device="nvidiaN"``)."""
    cuda_index: int | None = None
    """The GPU's number in CUDA programs under ``CUDA_VISIBLE_DEVICES`` (``--cuda-visible``); None otherwise."""
    lost: bool = False
    """True when the GPU fell off the bus or stopped answering; other fields are then None."""
    utilization_gpu_percent: float | None = None
    """Percent of the last sample period during which any kernel ran (not SM occupancy)."""
    utilization_memory_percent: float | None = None
    """Percent of time the memory controller was busy."""
    memory_used_bytes: int | None = None
    """Device memory in use by contexts (excludes driver-reserved memory)."""
    memory_total_bytes: int | None = None
    """Total device memory."""
    memory_reserved_bytes: int | None = None
    """Memory reserved by the driver and firmware (``nvmlDeviceGetMemoryInfo_v2``)."""
    power_watts: float | None = None
    """Current power draw."""
    power_limit_watts: float | None = None
    """Enforced power limit."""
    temperature_celsius: float | None = None
    """GPU core temperature."""
    fan_percent: float | None = None
    """Fan speed as percent of maximum; None on passively cooled boards."""
    clock_sm_mhz: int | None = None
    """Current SM clock."""
    clock_memory_mhz: int | None = None
    """Current memory clock."""
    pstate: int | None = None
    """Performance state, 0 (fastest) to 15."""
    energy_joules: float | None = None
    """Energy consumed since the driver loaded."""
    throttle_reasons: tuple[str, ...] = ()
    """Active clock-event (throttle) reasons, decoded to names such as ``"hw_thermal"``."""
    pcie_tx_bytes_per_s: float | None = None
    """PCIe bytes per second sent by the GPU to the host."""
    pcie_rx_bytes_per_s: float | None = None
    """PCIe bytes per second received by the GPU from the host."""
    ecc_errors_uncorrected: int | None = None
    """Volatile uncorrected ECC error count; None where ECC is off or unsupported."""
    mig_mode: bool | None = None
    """True when MIG is enabled; None where MIG is unsupported."""
    compute_capability: tuple[int, int] | None = None
    """CUDA compute capability (major, minor)."""
    sm_active_percent: float | None = None
    """GPM: percent of SM cycles with at least one warp resident (Hopper and later)."""
    sm_occupancy_percent: float | None = None
    """GPM: achieved warp occupancy as a percent of the maximum."""
    tensor_active_percent: float | None = None
    """GPM: percent of cycles the tensor cores were busy."""
    dram_active_percent: float | None = None
    """GPM: DRAM bandwidth utilization percent."""
    nvlink_tx_bytes_per_s: float | None = None
    """NVLink data bytes per second sent by the GPU over all its links; None without NVLink."""
    nvlink_rx_bytes_per_s: float | None = None
    """NVLink data bytes per second received by the GPU over all its links; None without NVLink."""
    encoder_percent: float | None = None
    """Video encoder (NVENC) utilization over NVML's last sampling period; None where unsupported (MIG, no NVENC)."""
    decoder_percent: float | None = None
    """Video decoder (NVDEC) utilization over NVML's last sampling period; None where unsupported."""
    jpeg_percent: float | None = None
    """JPEG decoder (NVJPG) utilization; None on GPUs without one, or where NVML cannot say."""
    ofa_percent: float | None = None
    """Optical flow accelerator (OFA) utilization; None on GPUs without one, or where NVML cannot say."""
    vendor: Vendor | None = None
    """Who made the GPU (the live source marks every device); None in recordings from before schema 6, which hold
    NVIDIA GPUs only, and from the demo's NVIDIA scenarios."""
    kernel_driver: str | None = None
    """The kernel driver that runs it where that is not NVIDIA's: ``"amdgpu"``, ``"xe"`` or ``"i915"``; None for NVIDIA
    GPUs, whose driver ``Snapshot.driver`` describes."""
    kernel_driver_version: str | None = None
    """That driver's version where it is not NVIDIA's (``Snapshot.driver`` holds NVIDIA's), e.g. amdgpu's
    ``"6.10.5"`` from ``/sys/module/amdgpu/version``; None where the driver does not say (an in-kernel driver)."""
    temperature_junction_celsius: float | None = None
    """Hottest spot on the die (AMD's junction or hotspot sensor); None where the GPU has no such sensor."""
    temperature_memory_celsius: float | None = None
    """Memory (HBM or VRAM) temperature; None where the GPU or its driver does not report one."""
    health: DeviceHealth | None = None
    """Hardware health: Xid events, ECC, remapped rows or retired pages, PCIe link and NVLink errors; None where
    nothing of it was read (the demo without faults, older recordings)."""
    error: str | None = None
    """One-line reason when the device is lost or a call failed in a way worth showing."""


@dataclass(frozen=True, slots=True)
class ProcessSample:
    """A process that uses a GPU, or a DataLoader worker feeding one."""

    pid: int
    """Process id as seen in this PID namespace (NVML's PID for GPU processes)."""
    role: ProcessRole = ProcessRole.GPU
    """A GPU process or a DataLoader worker."""
    device_index: int | None = None
    """GPU the process uses; for a worker, the GPU of its trainer."""
    trainer_pid: int | None = None
    """For a DataLoader worker, the GPU process it feeds; None for GPU processes."""
    ppid: int | None = None
    """Parent process id."""
    name: str | None = None
    """Process name (``comm``); untrusted text."""
    cmdline: str | None = None
    """Full command line joined by spaces; untrusted text."""
    user: str | None = None
    """Owner's user name (or numeric uid when unknown)."""
    gpu_memory_bytes: int | None = None
    """GPU memory held by the process on ``device_index``."""
    sm_percent: float | None = None
    """Per-process SM utilization from ``nvmlDeviceGetProcessUtilization``."""
    gpu_memory_percent: float | None = None
    """Per-process memory-controller utilization."""
    gpu_process_type: GpuProcessType | None = None
    """Compute, graphics or both, for GPU processes."""
    gpu_instance_id: int | None = None
    """On a MIG-enabled GPU, the GPU instance the process runs in (its MIG device); None elsewhere."""
    compute_instance_id: int | None = None
    """On a MIG-enabled GPU, the compute instance the process runs in."""
    encoder_percent: float | None = None
    """Per-process video encoder (NVENC) utilization, where NVML's process samples give it."""
    decoder_percent: float | None = None
    """Per-process video decoder (NVDEC) utilization, where NVML's process samples give it."""
    cpu_percent: float | None = None
    """CPU use since the previous poll, 100 = one full core."""
    rss_bytes: int | None = None
    """Resident host memory."""
    elapsed_seconds: float | None = None
    """Time since the process started."""
    create_time: float | None = None
    """Epoch seconds when the process started; with ``pid`` it identifies the process."""
    status: str | None = None
    """psutil status, e.g. ``"running"``, ``"sleeping"``, ``"zombie"``."""
    num_workers: int | None = None
    """For a GPU process, how many DataLoader workers were found under it."""
    note: str | None = None
    """Why details are missing, e.g. ``"access denied"``, ``"exited"``, or that it is a host PID outside this PID
    namespace (gpusight in a container)."""
    gpu_usage_note: str | None = None
    """Why ``sm_percent`` is None although the process uses the GPU, e.g. that ROCm compute submitted through
    ``/dev/kfd`` leaves the DRM fdinfo engine counters flat."""
    input_wait_percent: float | None = None
    """Measured inside the training loop (``gpusight.torch``): percent of recent step time spent waiting for data."""
    steps_per_second: float | None = None
    """Measured inside the training loop: training steps per second over the recent window."""
    loader_num_workers: int | None = None
    """The watched DataLoader's ``num_workers`` setting, as the trainer reports it."""
    loader_pin_memory: bool | None = None
    """The watched DataLoader's ``pin_memory`` setting."""
    loader_persistent_workers: bool | None = None
    """The watched DataLoader's ``persistent_workers`` setting."""
    loader_prefetch_factor: int | None = None
    """The watched DataLoader's ``prefetch_factor`` (None with ``num_workers=0``)."""
    loader_batch_size: int | None = None
    """The watched DataLoader's ``batch_size`` (None with a custom batch sampler)."""
    cuda_allocated_bytes: int | None = None
    """``torch.cuda.memory_allocated`` as the trainer reports it: memory held by live tensors."""
    cuda_reserved_bytes: int | None = None
    """``torch.cuda.memory_reserved``: memory held by PyTorch's caching allocator."""
    cuda_peak_bytes: int | None = None
    """``torch.cuda.max_memory_allocated``: the peak of allocated memory."""
    autocast: bool | None = None
    """Whether autocast (mixed precision) is active in the trainer's forward pass; None when not known."""
    job: int | None = None
    """For a GPU process, the ``JobSample.id`` of the job it belongs to; None when not grouped."""
    rank: int | None = None
    """Its distributed rank (``RANK`` in its environment) when readable; None otherwise."""
    cpu_wait_percent: float | None = None
    """Percent of the interval since the previous poll the process was runnable but waiting for a CPU (on a run
    queue), 100 = one core's worth; its main thread's, from ``/proc/PID/schedstat``. High when its cores are
    oversubscribed: with ``cpu_percent``, what it would use with a core of its own. None where unknown (no such
    file, not Linux, first read)."""
    container: ContainerSample | None = None
    """The container, pod or Slurm job the process runs in; None when it runs directly on the host (or unknown)."""
    samples_per_second: float | None = None
    """Measured inside the training loop: samples per second over the recent window (``batch_size_source`` says
    how a step's samples are known)."""
    tokens_per_second: float | None = None
    """Measured inside the training loop: tokens per second, where the batch holds token ids (padding included)."""
    batch_size_source: BatchSizeSource | None = None
    """How the samples per step are known."""
    flops_per_step: float | None = None
    """Floating-point operations in one training step (forward, backward and optimizer) of this rank."""
    flops_source: FlopsSource | None = None
    """Where ``flops_per_step`` comes from; it names the utilization (HFU for counted FLOPs, MFU otherwise)."""
    achieved_tflops: float | None = None
    """``flops_per_step`` times steps per second, in TFLOP/s."""
    peak_tflops: float | None = None
    """Peak dense TFLOP/s of this rank's GPU for ``math_mode`` (or as the user gave it)."""
    peak_source: str | None = None
    """Where ``peak_tflops`` comes from (a datasheet, or ``"given"``); untrusted text."""
    math_mode: MathMode | None = None
    """The arithmetic of the trainer's matrix multiplications."""
    flops_utilization_percent: float | None = None
    """``achieved_tflops`` over ``peak_tflops`` in percent: MFU or HFU as ``flops_source`` names it."""
    flops_utilization_note: str | None = None
    """Why the utilization is unknown (e.g. a GPU missing from the peak table); untrusted text."""
    step_data_percent: float | None = None
    """Step-time breakdown: percent of step time the loop waited for data. The five ``step_*_percent`` sum to 100."""
    step_compute_percent: float | None = None
    """Step-time breakdown: percent of step time in computation (GPU kernels other than collectives, or host
    operators without CUDA)."""
    step_comm_percent: float | None = None
    """Step-time breakdown: percent of step time in communication (NCCL/Gloo collectives) not overlapped by compute."""
    step_copy_percent: float | None = None
    """Step-time breakdown: percent of step time in host-to-device copies not overlapped by compute or
    communication."""
    step_idle_percent: float | None = None
    """Step-time breakdown: percent of step time in which neither the data, the device nor a collective was busy
    (launch gaps, Python, synchronisation)."""
    breakdown_source: BreakdownSource | None = None
    """What the breakdown was measured from; None when no step was profiled."""


@dataclass(frozen=True, slots=True)
class ContainerSample:
    """Where a process runs when it is not directly on the host: its container, Kubernetes pod or Slurm job.

    Read from ``/proc/PID/cgroup`` (cgroup v1 and v2) and ``/proc/PID/status`` (``NSpid``). Each field is None
    where nothing tells it.
    """

    runtime: ContainerRuntime
    """What isolates it."""
    id: str | None = None
    """The container id in full (64 hex digits for Docker, containerd, CRI-O and Podman); None for Slurm and bare
    namespaces."""
    name: str | None = None
    """A readable name: the container's hostname (Docker's short id, a Kubernetes pod's name) when readable."""
    pod_uid: str | None = None
    """The Kubernetes pod's UID, from a ``kubepods`` cgroup path."""
    pod_namespace: str | None = None
    """The Kubernetes namespace of the pod, when readable."""
    slurm_job_id: str | None = None
    """The Slurm job id: from the cgroup path (``job_J``) or ``SLURM_JOB_ID`` in the environment."""
    pid_in_container: int | None = None
    """Its pid inside its own PID namespace (the last ``NSpid`` entry) when that differs from the host's."""


@dataclass(frozen=True, slots=True)
class JobSample:
    """GPU processes that work together, as the evidence groups them; every GPU process belongs to one job."""

    id: int
    """Small number, stable while the job runs (``job 3``); numbers are not reused within a session."""
    kind: WorkloadKind
    """What the job does: training, inference serving, a notebook, or unknown."""
    evidence: str
    """How the job was recognised and its kind told, e.g. ``"torchrun PID 4100; RANK/WORLD_SIZE set"``."""
    pids: tuple[int, ...]
    """Its GPU processes, in rank order where ranks are known, else in pid order."""
    devices: tuple[int, ...]
    """Indexes of the GPUs its processes use, ascending."""
    world_size: int | None = None
    """``WORLD_SIZE`` from the environment (ranks on every node); None when not readable."""
    launcher_pid: int | None = None
    """The launcher (torchrun, deepspeed, mpirun, ...) that started the processes, when there is one."""
    cluster_key: str | None = None
    """What names this job on every node it spans, for joining nodes in a cluster view: ``"slurm:12345"``, a pod
    ``"pod:NAMESPACE/NAME"``, or ``"rdzv:HASH"`` (a hash of the rendezvous address, port and run id, never the
    values themselves); None for a job of one machine with no such id."""


@dataclass(frozen=True, slots=True)
class HostSample:
    """The host machine at one instant."""

    hostname: str | None = None
    """Short host name."""
    cpu_percent_per_core: tuple[float, ...] = ()
    """Busy percent of each logical core since the previous poll."""
    iowait_percent: float | None = None
    """Percent of CPU time waiting for I/O since the previous poll; None where not reported."""
    load_average: tuple[float, float, float] | None = None
    """1, 5 and 15 minute load averages."""
    memory_used_bytes: int | None = None
    """Host memory in use (total minus available)."""
    memory_total_bytes: int | None = None
    """Total host memory."""
    swap_used_bytes: int | None = None
    """Swap in use."""
    swap_total_bytes: int | None = None
    """Total swap."""


@dataclass(frozen=True, slots=True)
class ErrorNote:
    """A fault worth telling the user about, in one line."""

    scope: str
    """Where it happened: ``"nvml"``, ``"host"``, ``"gpu0"``, ``"replay"``, ..."""
    message: str
    """One-line reason, e.g. ``"NVIDIA driver not loaded (NVML_ERROR_DRIVER_NOT_LOADED)"``."""


@dataclass(frozen=True, slots=True)
class Advice:
    """One piece of live advice: what is wrong, the evidence in numbers and what to change."""

    id: str
    """Stable identifier of the rule and scope, e.g. ``"input_bound:gpu0"``."""
    severity: Severity
    """How urgent it is."""
    scope: str
    """``"host"``, ``"gpu0"``, ``"pid1234"`` and so on (see :class:`ScopeKind`)."""
    title: str
    """One-line summary."""
    evidence: str
    """The numbers behind it."""
    action: str
    """The concrete change to make."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything known at one poll: driver, host, devices, processes, advice and errors."""

    timestamp: float
    """Epoch seconds of the poll."""
    source: SourceKind
    """Live, demo or replayed data."""
    host: HostSample = field(default_factory=HostSample)
    """Host CPU and memory."""
    driver: DriverInfo | None = None
    """Driver versions; None when NVML is unavailable."""
    devices: tuple[DeviceSample, ...] = ()
    """GPUs in index order."""
    processes: tuple[ProcessSample, ...] = ()
    """GPU processes, each followed by its DataLoader workers."""
    jobs: tuple[JobSample, ...] = ()
    """The jobs the GPU processes form, by id."""
    advice: tuple[Advice, ...] = ()
    """Live advice, highest severity first."""
    errors: tuple[ErrorNote, ...] = ()
    """Faults met during this poll."""
    mig_devices: tuple[MigDeviceSample, ...] = ()
    """MIG devices of the MIG-enabled GPUs, by parent index, then MIG index."""
    label: str | None = None
    """Human description of the source, e.g. ``"demo: input-bound (simulated)"``."""
    schema: int = SCHEMA_VERSION
    """Layout version."""


@dataclass(frozen=True, slots=True)
class GpuReading:
    """What a GPU backend (NVML, amdgpu, Intel) returns from one poll, before host data is joined in."""

    driver: DriverInfo | None = None
    """Driver versions; None when NVML is unavailable."""
    devices: tuple[DeviceSample, ...] = ()
    """GPUs in index order (lost ones included, marked ``lost``)."""
    processes: tuple[ProcessSample, ...] = ()
    """GPU processes with only the backend's fields set (pid, device_index, MIG instance, memory, SM %, type)."""
    errors: tuple[ErrorNote, ...] = ()
    """Faults met during this poll."""
    mig_devices: tuple[MigDeviceSample, ...] = ()
    """MIG devices of the MIG-enabled GPUs, by parent index, then MIG index."""


@dataclass(frozen=True, slots=True)
class HostReading:
    """What the host source returns from one poll."""

    host: HostSample
    """Host CPU and memory."""
    processes: tuple[ProcessSample, ...] = ()
    """The GPU processes, enriched with psutil fields, each followed by its DataLoader workers."""
    jobs: tuple[JobSample, ...] = ()
    """The jobs the GPU processes form."""
    errors: tuple[ErrorNote, ...] = ()
    """Faults met during this poll."""
