"""What a run report says about hardware health and MIG: each GPU's health findings over the run (judged by
:func:`gpusight.facts.health.assess`, as the live surfaces judge them) with its worst moment, the Xid events the
recorded snapshots carried (deduplicated: each snapshot repeats the latest ones), and each MIG instance seen.

Bounded like the rest of the report: at most :data:`MAX_XID_EVENTS` events and :data:`MAX_INSTANCES` instances
are kept, and the rest are counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpusight.facts.health import HealthLevel, assess
from gpusight.facts.xid_catalog import xid_info
from gpusight.run_report.markup import TEXT_LENGTH
from gpusight.snapshot.model import DeviceSample, MigDeviceSample, ProcessRole, Snapshot
from gpusight.textsafe import safe_text

MAX_XID_EVENTS = 500
"""Xid events kept; later ones are counted."""

MAX_INSTANCES = 64
"""MIG instances kept; later ones are counted."""

MAX_INSTANCE_PIDS = 32
"""Process ids kept per MIG instance."""


@dataclass(frozen=True, slots=True)
class HealthFindingRun:
    """One health finding of one GPU over the run."""

    key: str
    """The finding's key, e.g. ``"remap_pending"``."""
    level: HealthLevel
    """Its worst level during the run."""
    title: str
    """Its latest title (safe text)."""
    evidence: str
    """Its latest evidence (safe text)."""
    action: str
    """Its latest action (safe text)."""
    first_seen: float
    """First snapshot that had it."""
    last_seen: float
    """Last snapshot that had it."""


@dataclass(frozen=True, slots=True)
class GpuHealthRun:
    """One GPU's health over the run."""

    index: int
    """NVML index."""
    worst_level: HealthLevel
    """The worst level any snapshot reached."""
    worst_score: int | None
    """The lowest health score; None when its health was never read."""
    worst_at: float | None
    """When the lowest score was first reached."""
    last_score: int | None
    """The score in the last snapshot that read its health."""
    findings: tuple[HealthFindingRun, ...]
    """Every finding seen, worst level first."""


@dataclass(frozen=True, slots=True)
class XidRun:
    """One Xid event in the run."""

    device_index: int
    """The GPU it hit."""
    timestamp: float
    """When it arrived, epoch seconds."""
    code: int
    """The Xid number."""
    meaning: str
    """Its meaning after NVIDIA's catalog."""
    drains: bool
    """True when the GPU must be drained (a reset or a reboot)."""
    gpu_instance_id: int | None
    """The MIG instance it hit, when NVML said."""


@dataclass(frozen=True, slots=True)
class MigRun:
    """One MIG instance over the run."""

    device_index: int
    """Its parent GPU."""
    gpu_instance_id: int
    """Its GPU instance id."""
    compute_instance_id: int | None
    """Its compute instance id."""
    profile: str
    """Its profile (safe text), e.g. ``"3g.40gb"``; empty when unknown."""
    memory_total_bytes: int | None
    """Its memory size."""
    peak_memory_bytes: int | None
    """Most memory used at any sample."""
    mean_sm_active: float | None
    """Time-weighted mean GPM SM activity; None when never reported."""
    note: str
    """Why its activity is N/A (the latest reason, safe text); empty when none was given."""
    pids: tuple[int, ...]
    """Processes seen on it."""
    first_seen: float
    """First snapshot with it."""
    last_seen: float
    """Last snapshot with it."""


@dataclass(frozen=True, slots=True)
class RunHealth:
    """Health and MIG over a run."""

    gpus: tuple[GpuHealthRun, ...] = ()
    """GPUs whose health was read at least once, by index."""
    xids: tuple[XidRun, ...] = ()
    """Xid events in time order."""
    xids_omitted: int = 0
    """Xid events past :data:`MAX_XID_EVENTS`."""
    instances: tuple[MigRun, ...] = ()
    """MIG instances by (parent, GPU instance id)."""
    instances_omitted: int = 0
    """Instances past :data:`MAX_INSTANCES`."""


@dataclass(slots=True)
class _Gpu:
    worst_level: HealthLevel = HealthLevel.OK
    worst_score: int | None = None
    worst_at: float | None = None
    last_score: int | None = None
    findings: dict[str, HealthFindingRun] = field(default_factory=dict)


@dataclass(slots=True)
class _Mig:
    first: MigDeviceSample
    first_seen: float
    last_seen: float
    memory_total: int | None = None
    peak_memory: int | None = None
    sm_total: float = 0.0
    sm_seconds: float = 0.0
    note: str = ""
    pids: set[int] = field(default_factory=set)


class HealthAccumulator:
    """Takes the run's snapshots in time order and keeps bounded health, Xid and MIG totals."""

    def __init__(self) -> None:
        self._gpus: dict[int, _Gpu] = {}
        self._xids: dict[tuple[int, float, int], XidRun] = {}
        self._xids_omitted = 0
        self._migs: dict[tuple[int, int], _Mig] = {}
        self._migs_omitted = 0

    def add(self, snapshot: Snapshot, seconds: float) -> None:
        """Count ``snapshot``, which stands for ``seconds``."""
        t = snapshot.timestamp
        for device in snapshot.devices:
            self._health(device, t)
        for mig in snapshot.mig_devices:
            self._mig(snapshot, mig, t, seconds)

    def _health(self, device: DeviceSample, t: float) -> None:
        if device.health is None:
            return
        gpu = self._gpus.setdefault(device.index, _Gpu())
        judged = assess(device, t)
        gpu.worst_level = max(gpu.worst_level, judged.level)
        if judged.score is not None:
            gpu.last_score = judged.score
            if gpu.worst_score is None or judged.score < gpu.worst_score:
                gpu.worst_score, gpu.worst_at = judged.score, t
        for finding in judged.findings:
            known = gpu.findings.get(finding.key)
            gpu.findings[finding.key] = HealthFindingRun(
                finding.key, finding.level if known is None else max(known.level, finding.level),
                safe_text(finding.title, TEXT_LENGTH), safe_text(finding.evidence, TEXT_LENGTH),
                safe_text(finding.action, TEXT_LENGTH), t if known is None else known.first_seen, t)
        for event in device.health.xid_recent:
            key = (device.index, event.timestamp, event.code)
            if key in self._xids:
                continue
            if len(self._xids) >= MAX_XID_EVENTS:
                self._xids_omitted += 1
                continue
            info = xid_info(event.code)
            self._xids[key] = XidRun(device.index, event.timestamp, event.code, info.meaning, info.drains,
                                     event.gpu_instance_id)

    def _mig(self, snapshot: Snapshot, mig: MigDeviceSample, t: float, seconds: float) -> None:
        if mig.gpu_instance_id is None:
            return
        key = (mig.device_index, mig.gpu_instance_id)
        run = self._migs.get(key)
        if run is None:
            if len(self._migs) >= MAX_INSTANCES:
                self._migs_omitted += 1
                return
            run = self._migs[key] = _Mig(mig, t, t)
        run.last_seen = t
        run.memory_total = mig.memory_total_bytes if mig.memory_total_bytes is not None else run.memory_total
        if mig.memory_used_bytes is not None:
            run.peak_memory = max(run.peak_memory or 0, mig.memory_used_bytes)
        if mig.sm_active_percent is not None:
            run.sm_total += mig.sm_active_percent * seconds
            run.sm_seconds += seconds
        if mig.utilization_note:
            run.note = safe_text(mig.utilization_note, TEXT_LENGTH)
        for process in snapshot.processes:
            if (process.role == ProcessRole.GPU and process.device_index == mig.device_index
                    and process.gpu_instance_id == mig.gpu_instance_id and len(run.pids) < MAX_INSTANCE_PIDS):
                run.pids.add(process.pid)

    def summary(self) -> RunHealth:
        """What was gathered."""
        gpus = tuple(
            GpuHealthRun(index, gpu.worst_level, gpu.worst_score, gpu.worst_at, gpu.last_score,
                         tuple(sorted(gpu.findings.values(), key=lambda f: (-f.level, f.first_seen, f.key))))
            for index, gpu in sorted(self._gpus.items())
        )
        instances = tuple(
            MigRun(index, gi, run.first.compute_instance_id, safe_text(run.first.profile, 24), run.memory_total,
                   run.peak_memory, run.sm_total / run.sm_seconds if run.sm_seconds > 0 else None, run.note,
                   tuple(sorted(run.pids)), run.first_seen, run.last_seen)
            for (index, gi), run in sorted(self._migs.items())
        )
        xids = tuple(sorted(self._xids.values(), key=lambda x: (x.timestamp, x.device_index, x.code)))
        return RunHealth(gpus, xids, self._xids_omitted, instances, self._migs_omitted)
