"""Advice thresholds: every number the rules use, with its default and reasoning, and their config section.

Users override any threshold in ``$XDG_CONFIG_HOME/gpusight/config.toml`` (default
``~/.config/gpusight/config.toml``), section ``[advice]``, e.g. ``low_util_percent = 40``; the file
itself is read by :mod:`gpusight.config_file`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpusight.config_file import config_path, read_config


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Every threshold of the advice rules (see ``docs/advice.md`` for how each rule uses them)."""

    window_s: float = 30.0
    """Averaging window for GPU and host metrics: long enough to span many training steps and
    an occasional evaluation or checkpoint pause, short enough to follow a change within a minute."""
    hold_s: float = 15.0
    """How long a condition must hold before its advice appears (rules without their own hold)."""
    clear_s: float = 10.0
    """How long a condition must be gone before its advice clears, so advice does not flicker."""
    low_util_percent: float = 50.0
    """GPU utilization (window mean) below this counts as under-used: half the time no kernel runs."""
    healthy_util_percent: float = 70.0
    """GPU utilization (window mean) at or above this, with nothing else wrong, is called healthy."""
    idle_util_percent: float = 2.0
    """GPU utilization (window mean) at or below this counts as idle (NVML reads 0-1 % at rest)."""
    cpu_saturated_percent: float = 85.0
    """A process whose CPU percent plus run-queue wait (100 = one core) reaches this is CPU-saturated;
    a DataLoader worker is single-threaded Python, so about one core is all it can use. The wait
    counts because on oversubscribed cores a process that wants a whole core reads, say, 59 % CPU
    and 41 % waiting for one."""
    cpu_wait_percent: float = 20.0
    """A trainer or its workers waiting at least this percent on a run queue share oversubscribed
    cores: advice then asks for free cores or CPU affinity before more workers."""
    input_wait_percent: float = 30.0
    """A trainer instrumented with ``gpusight.torch`` that waits at least this percent of each step
    for its next batch is input-bound. Measured inside the training loop, it overrides the
    CPU-based guess: a third of every step spent idle is worth fixing."""
    few_workers: int = 2
    """A trainer with this many DataLoader workers or fewer has "few" workers."""
    min_idle_cores: float = 4.0
    """Idle cores (window mean) needed before advising more workers: fewer would just contend."""
    min_idle_core_share: float = 0.125
    """On a host too small for ``min_idle_cores``, this share of its cores (at least one) is enough:
    on 8 cores one idle core can run one more worker; a fixed 4 would never be met there."""
    host_memory_reserve_percent: float = 10.0
    """Share of host memory left free when sizing extra DataLoader workers: each worker is a process
    holding its own copy of the dataset object, and a host that starts swapping is slower than one
    with fewer workers."""
    iowait_percent: float = 10.0
    """Host iowait (window mean, percent of all CPU time) at or above this means storage is slow;
    on 16 cores one core blocked on I/O is already 6 %."""
    headroom_memory_percent: float = 50.0
    """GPU memory use below this percent of the total, with utilization below
    ``headroom_util_percent``, leaves room for a bigger batch."""
    headroom_util_percent: float = 70.0
    """GPU utilization (window mean) below this, with low memory use, suggests a bigger batch: the
    GPU is not busy yet, even if it is not under-used enough for the other rules."""
    oom_memory_percent: float = 95.0
    """GPU memory use at or above this percent of the total risks an out-of-memory error."""
    sm_busy_percent: float = 50.0
    """GPM SM activity at or above this means the SMs are busy (mixed-precision rule)."""
    tensor_idle_percent: float = 2.0
    """GPM tensor-core activity at or below this counts as unused tensor cores."""
    launch_util_percent: float = 80.0
    """NVML utilization at or above this, with low SM activity, suggests launch-bound work."""
    launch_sm_active_percent: float = 50.0
    """GPM SM activity below this, while NVML utilization is high, means launch-bound work or few SMs
    busy; it also keeps a GPU from being called healthy. DCGM's profiling-metrics guide: SM activity
    below 0.5 likely indicates ineffective GPU use (bf16 LLM training reads about 80 %)."""
    pcie_h2d_bytes_per_s: float = 2.0e9
    """Host-to-device PCIe traffic (window mean) at or above this is heavy: a tenth of what a
    PCIe 4.0 x16 link carries with pinned memory, the rate of typical pageable copies."""
    throttle_hold_s: float = 20.0
    """How long a costly throttle reason must be active before it is reported."""
    idle_hold_s: float = 120.0
    """How long a process must hold GPU memory at idle before it is named."""
    idle_memory_bytes: int = 256 * 1024 * 1024
    """GPU memory a process must hold to be worth naming when idle (a bare CUDA context is smaller)."""
    imbalance_gap_percent: float = 25.0
    """Utilization points by which a job's busiest GPU must exceed the mean of its other GPUs."""
    straggler_gap_percent: float = 20.0
    """Utilization points by which a job's slowest rank must fall below the median of its peers: a
    DDP step is as slow as its slowest rank, so a rank 20 points behind costs every GPU a fifth."""
    straggler_peer_util_percent: float = 80.0
    """The peers' median utilization needed to call the slowest rank a straggler: ranks waiting for
    it spin in NCCL kernels and read busy; a job that is low everywhere has another problem."""
    stall_window_s: float = 60.0
    """Window searched for periodic stalls: long enough to hold several periods of a few seconds."""
    stall_util_percent: float = 10.0
    """GPU utilization at or below this on a sample counts as stalled."""
    stall_busy_percent: float = 50.0
    """Utilization the GPU must reach between stalls (its median there), so a mostly idle GPU is no square wave."""
    stall_min_s: float = 1.0
    """Shortest stall counted: shorter gaps are ordinary step boundaries."""
    stall_min_count: int = 3
    """Stalls needed in the window, so one checkpoint is not called periodic."""
    stall_regularity: float = 0.35
    """Largest coefficient of variation (std/mean) of the times between stall starts: regular stalls
    have one cause (an epoch boundary, a periodic evaluation); random dips do not."""
    stall_share_percent: float = 15.0
    """Share of the window the GPU must spend stalled for the stalls to be worth naming."""
    worker_asleep_percent: float = 20.0
    """Mean CPU per DataLoader worker below this during stalls: the workers sleep or block rather than compute."""
    comm_spread_percent: float = 10.0
    """Largest utilization spread (max - min) across a DDP job's GPUs for the all-equal pattern of a
    communication-bound job: every rank waits in the same collectives."""
    comm_nvlink_bytes_per_s: float = 20.0e9
    """NVLink traffic each way (window mean) at or above which a GPU counts as busy communicating: an
    H100's 18 links carry 450 GB/s each way, so this is a few percent sustained, far above idle."""
    comm_pcie_bytes_per_s: float = 3.0e9
    """PCIe traffic each way (window mean) at or above which a GPU without NVLink counts as busy
    communicating: all-reduce sends and receives alike, unlike input copies that only arrive."""
    comm_input_wait_percent: float = 5.0
    """A rank whose measured input wait (``gpusight.torch``) is at or above this is not purely
    communication-bound: the PyTorch profiler's TensorBoard plugin flags DataLoader time above 5 %
    of a step."""
    comm_share_percent: float = 20.0
    """Exposed communication (``gpusight.torch``'s profiled step-time breakdown: collectives not overlapped by
    compute) at or above this share of each step makes a job communication-bound. A well-bucketed DDP job hides
    most of its all-reduce behind the backward pass; a fifth of every step spent only communicating is worth
    1.25x steps/s, and the measurement replaces the guess from NVLink or PCIe traffic."""
    minor_share_percent: float = 10.0
    """A measured data wait or exposed communication below this share of each step is minor: a job with low
    MFU/HFU and only minor waits is slow in its compute itself, so it gets compute actions. A profiled idle share
    at or above it (launch gaps, Python between kernels) ranks torch.compile and CUDA graphs first."""
    healthy_mfu_token_percent: float = 30.0
    """MFU (or HFU) at or above which a token model (its trainer counts tokens: transformers) may be called
    healthy. Large transformer training reports 40-55 % MFU (PaLM 46.2 %, appendix B; Megatron-LM 52 % of
    peak on A100s); a dense transformer below 30 % leaves at least a third of what its peers reach unused."""
    healthy_mfu_percent: float = 10.0
    """MFU (or HFU) at or above which any other model (convnets, MLPs, no token count) may be called healthy.
    Such models spend much of a step in memory-bound normalization and element-wise layers: ResNet-50 does about
    25 GFLOP per training image (3 x 4.1 G multiply-adds x 2), so NVIDIA's roughly 2,500 images/s with AMP on an
    A100 is about 20 % of its 312 TFLOP/s bf16 peak; below half of that the compute is poorly used."""
    stuck_util_percent: float = 90.0
    """NVML utilization (window mean) at or above which every GPU of a job reads "busy" for the stuck-job rule: a
    collective waiting for a dead or diverged rank spins in one NCCL kernel, which NVML counts as 100 %."""
    stuck_power_percent: float = 25.0
    """Power draw (window mean) at or below this share of the power limit is near idle: an H100 SXM idles near
    70-90 W of its 700 W limit and draws 400-700 W training; one spinning kernel barely raises it."""
    stuck_sm_active_percent: float = 5.0
    """GPM SM activity (window mean) at or below this, where GPM reports it, is the ~1 % of one waiting kernel."""
    stuck_traffic_bytes_per_s: float = 1.0e8
    """PCIe and NVLink traffic each way (window mean) at or below this, where known, is none: a training step
    moves gigabytes per second of batches and gradients, a hung collective nothing."""
    serving_memory_percent: float = 50.0
    """Share of a GPU's memory an idle inference server must hold to be mentioned (KV-cache reserve)."""
    serving_idle_hold_s: float = 300.0
    """How long an inference server must sit idle before its reserved memory is mentioned: servers
    idle between bursts of requests, so only a long lull is worth a note."""
    free_memory_percent: float = 5.0
    """A GPU with no processes and at most this percent of its memory used is free."""
    free_hold_s: float = 30.0
    """How long a GPU (or a MIG instance) must stay free before it is offered."""
    decoder_busy_percent: float = 85.0
    """Video decoder (NVDEC) utilization at or above which the decoders are at their limit: NVML's figure is the
    share of time any decoder worked, so past this a pipeline that decodes on the GPU queues for them."""


_INT_FIELDS = frozenset({"few_workers", "idle_memory_bytes", "stall_min_count"})
_FIELDS = {f.name for f in dataclasses.fields(Thresholds)}


def load_thresholds(path: Path | None = None) -> tuple[Thresholds, list[str]]:
    """Read the ``[advice]`` section of the config file (``config_path()`` when None).

    Returns the thresholds and one warning per problem; a bad value keeps its default and a
    missing file means all defaults. Never raises.
    """
    path = config_path() if path is None else path
    document, warnings = read_config(path)
    thresholds, problems = thresholds_from_config(document, path)
    return thresholds, warnings + problems


def thresholds_from_config(document: dict[str, Any], path: Path) -> tuple[Thresholds, list[str]]:
    """The thresholds set in ``document`` (a parsed config file from ``path``) and one warning per bad entry."""
    section = document.get("advice", {})
    if not isinstance(section, dict):
        return Thresholds(), [f"{path}: [advice] must be a table; advice uses defaults"]
    warnings: list[str] = []
    overrides: dict[str, Any] = {}
    for key, value in section.items():
        problem = _check(key, value)
        if problem:
            warnings.append(f"{path}: [advice] {problem}; default kept")
        else:
            overrides[key] = float(value) if key not in _INT_FIELDS else value
    return dataclasses.replace(Thresholds(), **overrides), warnings


def _check(key: str, value: object) -> str | None:
    """Why ``key = value`` is unusable, or None when it is fine."""
    if key not in _FIELDS:
        return f"unknown key {key!r}"
    wanted = "an integer" if key in _INT_FIELDS else "a number"
    if isinstance(value, bool) or not isinstance(value, (int, float) if key not in _INT_FIELDS else int):
        return f"{key} must be {wanted}, not {type(value).__name__}"
    if not value >= 0:  # also rejects NaN
        return f"{key} must be zero or more, not {value}"
    return None
