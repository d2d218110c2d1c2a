"""Immutable frames of a cluster read from a Prometheus server: what ``gpusight --cluster`` shows at one instant.

A metric that no exporter provides is None (shown as N/A), never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpusight.facts.health import HealthAssessment
from gpusight.snapshot.model import Advice, WorkloadKind


@dataclass(frozen=True, slots=True)
class ClusterMig:
    """One MIG instance of a GPU, from the series carrying ``GPU_I_ID`` (dcgm-exporter or ``gpusight --serve``)."""

    gpu_instance_id: int
    """The ``GPU_I_ID`` label."""
    profile: str | None = None
    """The ``GPU_I_PROFILE`` label, e.g. ``3g.40gb`` (untrusted: escape before display)."""
    memory_used_bytes: int | None = None
    """The instance's ``DCGM_FI_DEV_FB_USED`` (MiB) in bytes."""
    memory_total_bytes: int | None = None
    """Its used + free framebuffer, in bytes; None unless both are known."""
    sm_active_percent: float | None = None
    """Its ``DCGM_FI_PROF_SM_ACTIVE`` as a percent (GPM on Hopper and later); None where not served."""
    tensor_active_percent: float | None = None
    """Its ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` as a percent."""


@dataclass(frozen=True, slots=True)
class ClusterGpu:
    """One GPU of one node, from dcgm-exporter's metric names (served by dcgm-exporter or ``gpusight --serve``)."""

    host: str
    """The node's name (the ``Hostname``/``hostname`` label, else the scrape target's ``instance``)."""
    index: int
    """The ``gpu`` label."""
    uuid: str | None = None
    """The ``UUID`` label."""
    model: str | None = None
    """The ``modelName`` label."""
    utilization_percent: float | None = None
    """``DCGM_FI_DEV_GPU_UTIL``."""
    memory_used_bytes: int | None = None
    """``DCGM_FI_DEV_FB_USED`` (MiB) in bytes."""
    memory_total_bytes: int | None = None
    """Used + free + reserved framebuffer, in bytes; None unless FB_USED and FB_FREE are both known."""
    power_watts: float | None = None
    """``DCGM_FI_DEV_POWER_USAGE``."""
    temperature_celsius: float | None = None
    """``DCGM_FI_DEV_GPU_TEMP``."""
    sm_active_percent: float | None = None
    """``DCGM_FI_PROF_SM_ACTIVE`` as a percent."""
    tensor_active_percent: float | None = None
    """``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` as a percent."""
    pcie_tx_bytes_per_s: float | None = None
    """``DCGM_FI_PROF_PCIE_TX_BYTES``."""
    pcie_rx_bytes_per_s: float | None = None
    """``DCGM_FI_PROF_PCIE_RX_BYTES``."""
    encoder_percent: float | None = None
    """``DCGM_FI_DEV_ENC_UTIL``."""
    decoder_percent: float | None = None
    """``DCGM_FI_DEV_DEC_UTIL``."""
    health: HealthAssessment | None = None
    """Its hardware health judged from its health series (:mod:`gpusight.cluster.health`); None when it serves none."""
    mig: tuple[ClusterMig, ...] = ()
    """Its MIG instances by ``GPU_I_ID``."""
    lost: bool = False
    """``gpusight_gpu_lost`` is 1: the GPU stopped answering on its node."""
    free: bool = False
    """Free for new work, as :func:`gpusight.cluster.fleet_advice.judge_free` defines it (idle, empty, no process,
    now and over the fleet advice's window); the one figure of free GPUs every part of the cluster view counts."""


@dataclass(frozen=True, slots=True)
class ClusterProcess:
    """One GPU process on one node, from ``gpusight_process_*`` series (only nodes running ``gpusight --serve``)."""

    host: str
    """Its node."""
    job: int
    """gpusight's job number on that node (``gpusight_job`` label)."""
    rank: str
    """The ``rank`` label."""
    gpu: int | None
    """The GPU it uses (``gpu`` label); None when not a number."""
    gpu_instance_id: int | None = None
    """The MIG instance it runs in (``GPU_I_ID`` label); None on a whole GPU."""
    name: str | None = None
    """Process name (untrusted: escape before display)."""
    user: str | None = None
    """Owner (untrusted: escape before display)."""
    container: str | None = None
    """Container name or short id; None on the host."""
    pod: str | None = None
    """Kubernetes pod; None when none."""
    namespace: str | None = None
    """Kubernetes namespace; None when none."""
    slurm_job_id: str | None = None
    """Slurm job id; None when none."""
    memory_bytes: int | None = None
    """``gpusight_process_gpu_memory_bytes``."""
    sm_percent: float | None = None
    """``gpusight_process_sm_percent``."""
    cpu_percent: float | None = None
    """``gpusight_process_cpu_percent``."""
    workers: int | None = None
    """``gpusight_dataloader_workers``."""
    workers_cpu_percent: float | None = None
    """``gpusight_dataloader_workers_cpu_percent``."""
    input_wait_percent: float | None = None
    """``gpusight_input_wait_percent`` (measured by ``gpusight.torch``)."""


@dataclass(frozen=True, slots=True)
class ClusterJob:
    """One job's part on one node (``gpusight_job_info``)."""

    host: str
    """Its node."""
    job: int
    """gpusight's job number on that node."""
    kind: WorkloadKind
    """Training, inference, notebook or unknown."""
    cluster_job: str | None = None
    """The key naming it on every node it spans (``slurm:123``, ``pod:ns/name``, ``rdzv:HASH``); None when none."""
    world_size: int | None = None
    """``gpusight_job_world_size``."""
    memory_bytes: int | None = None
    """``gpusight_job_gpu_memory_bytes``."""
    steps_per_second: float | None = None
    """``gpusight_job_steps_per_second``: its slowest rank on this node."""
    samples_per_second: float | None = None
    """``gpusight_job_samples_per_second``: its ranks on this node, summed."""
    tokens_per_second: float | None = None
    """``gpusight_job_tokens_per_second``: its ranks on this node, summed."""
    flops_per_second: float | None = None
    """``gpusight_job_flops_per_second`` (FLOP/s); None unless its peak is known too and it is not above it."""
    peak_flops_per_second: float | None = None
    """``gpusight_job_peak_flops_per_second`` (FLOP/s) of the same ranks; None unless ``flops_per_second`` is known."""
    utilization_name: str | None = None
    """``"MFU"`` or ``"HFU"`` (the ``utilization`` label) where FLOP/s are known."""
    step_time_percent: tuple[tuple[str, float], ...] | None = None
    """``gpusight_job_step_time_percent``: (part, percent) for data, compute, communication, copy and idle, in that
    order; None unless all five are known and sum to 100."""


@dataclass(frozen=True, slots=True)
class ClusterJobSpeed:
    """A job's speed across every node it spans: its nodes' figures combined (nodes reporting none are left out,
    never counted as 0)."""

    key: str
    """Its ``cluster_job``, or ``HOST/jobN`` for a job with no cluster key (untrusted: escape before display)."""
    hosts: tuple[str, ...]
    """Every node it has processes on."""
    reporting_hosts: tuple[str, ...]
    """The nodes whose ranks report steps per second."""
    steps_per_second: float | None = None
    """The slowest reporting node's steps per second."""
    samples_per_second: float | None = None
    """Summed over the nodes that report it."""
    tokens_per_second: float | None = None
    """Summed over the nodes that report it."""
    flops_per_second: float | None = None
    """Achieved FLOP/s summed over the nodes that report both FLOP/s and a peak."""
    peak_flops_per_second: float | None = None
    """The same nodes' peaks, summed."""
    flops_utilization_percent: float | None = None
    """``flops_per_second`` over ``peak_flops_per_second`` in percent: the job's MFU (or HFU) across its nodes."""
    utilization_name: str | None = None
    """``"HFU"`` when any node's FLOPs were counted as they ran, else ``"MFU"``; None when no FLOP/s are known."""
    step_time_percent: tuple[tuple[str, float], ...] | None = None
    """The nodes' step-time parts averaged part by part, as (part, percent)."""


@dataclass(frozen=True, slots=True)
class ClusterNode:
    """One node: its GPUs and whether it is still reporting."""

    host: str
    """The node's name."""
    instances: tuple[str, ...]
    """The scrape targets (``instance`` labels) that report for it."""
    up: bool
    """False when every target of the node is down (``up == 0``) or its samples have gone stale."""
    exporter: str
    """``"gpusight"`` when a ``gpusight --serve`` exporter reports for it, ``"dcgm"`` for dcgm-exporter alone."""
    gpus: tuple[ClusterGpu, ...] = ()
    """Its GPUs by index (the last values seen while it was up)."""
    last_seen: float | None = None
    """Unix time of its newest sample, when known."""
    note: str | None = None
    """One line on its state when something is wrong, e.g. ``"down since 12:03:04 (3 scrapes missed)"``."""
    cpu_percent: float | None = None
    """``gpusight_host_cpu_percent`` (only nodes running ``gpusight --serve``)."""
    iowait_percent: float | None = None
    """``gpusight_host_iowait_percent`` (only nodes running ``gpusight --serve``)."""

    @property
    def drain_gpus(self) -> int:
        """How many of its GPUs must be drained (their health says so)."""
        return sum(1 for gpu in self.gpus if gpu.health is not None and gpu.health.needs_drain)

    @property
    def free_gpus(self) -> int:
        """How many of its GPUs are free (see ``ClusterGpu.free``)."""
        return sum(1 for gpu in self.gpus if gpu.free)


@dataclass(frozen=True, slots=True)
class ClusterHistory:
    """Values of one metric for every GPU on one time grid, from one range query."""

    metric: str
    """The metric's name, e.g. ``DCGM_FI_DEV_GPU_UTIL``."""
    start: float
    """Unix time of the first point."""
    step: float
    """Seconds between points."""
    series: dict[tuple[str, int], tuple[float | None, ...]] = field(default_factory=dict)
    """(host, gpu index) -> one value per step from ``start``, in the metric's own unit (FB_USED in MiB, the
    ``DCGM_FI_PROF_*`` ratios 0-1); None where no sample was there."""


@dataclass(frozen=True, slots=True)
class ClusterFrame:
    """Everything ``gpusight --cluster`` knows at one instant, built by one poll of the Prometheus server."""

    timestamp: float
    """Unix time of the poll."""
    url: str
    """The Prometheus server's base URL."""
    nodes: tuple[ClusterNode, ...] = ()
    """Every node found, sorted by name."""
    jobs: tuple[ClusterJob, ...] = ()
    """Jobs on nodes running ``gpusight --serve``."""
    job_speeds: tuple[ClusterJobSpeed, ...] = ()
    """The speed of every job whose ranks report it, across all the nodes it spans, by key."""
    processes: tuple[ClusterProcess, ...] = ()
    """GPU processes on nodes running ``gpusight --serve``."""
    node_advice: tuple[tuple[str, Advice], ...] = ()
    """(host, advice) for the advice each node's ``gpusight --serve`` raises (``gpusight_advice``)."""
    fleet_advice: tuple[Advice, ...] = ()
    """Advice about the fleet: idle GPUs holding memory, stragglers across nodes, free GPUs per node."""
    history: tuple[ClusterHistory, ...] = ()
    """Chart data from range queries."""
    problems: tuple[str, ...] = ()
    """One clear line per problem with the server or the data: unreachable, slow, metrics missing."""
    missing_panels: tuple[str, ...] = ()
    """Lines naming the panels that need the gpusight exporter and have no data, and where, e.g.
    ``"processes, jobs, advice, host CPU: none from 2 nodes without gpusight --serve (node-7, node-9)"``; the
    cluster view shows them as they come."""
    query_seconds: float | None = None
    """How long this poll's queries took in all."""
