"""The numbers of a run, accumulated snapshot by snapshot into bounded structures (see ``docs/report.md``).

:class:`RunAccumulator` takes the snapshots of a recording (or of a session's history) in time order and never keeps
them: per GPU it keeps time-weighted sums and a utilization histogram, per metric a :class:`BucketSeries`, per
process and job a few totals, per advice id its episodes. :meth:`RunAccumulator.summary` turns that into the
immutable :class:`RunSummary` that the HTML and Markdown reports both print, so both show the same numbers.

Time: each snapshot stands for the time until the next one. A pause longer than :data:`GAP_FACTOR` times the usual
interval (and at least :data:`GAP_MIN_SECONDS`) is a gap, the recording stopped and resumed: the snapshot before it
counts for the usual interval only, so a gap adds no GPU-hours and no advice duration.
"""

from __future__ import annotations

import statistics
from array import array
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpusight.advice.config import Thresholds
from gpusight.advice.rules import HEALTHY, SUMMARIES
from gpusight.facts.speed import job_speed
from gpusight.recordings.formats import RecordingProblem
from gpusight.run_report.health import HealthAccumulator, RunHealth
from gpusight.run_report.markup import TEXT_LENGTH
from gpusight.run_report.series import BucketGrid, BucketSeries
from gpusight.run_report.training import (
    MAX_SPEED_JOBS,
    JobSpeedAccumulator,
    JobSpeedRun,
    publishes_speed,
    reports_speed,
)
from gpusight.snapshot.model import Advice, DeviceSample, JobSample, ProcessRole, ProcessSample, Severity, Snapshot
from gpusight.textsafe import safe_text

IDLE_UTIL_PERCENT = Thresholds().idle_util_percent
"""A GPU is idle in a sample when its utilization is at or below this: the advice rules' own idle threshold."""

GAP_MIN_SECONDS = 5.0
"""A pause between snapshots is a gap only when it is at least this long."""

GAP_FACTOR = 4.0
"""... and longer than this many times the usual interval (the median of the first intervals)."""

FIRST_GAP_SECONDS = 60.0
"""Before any interval is known, a pause longer than this is a gap."""

SEVERITY_WEIGHT = {Severity.CRITICAL: 4.0, Severity.WARN: 2.0, Severity.INFO: 1.0}
"""How findings rank: severity weight times how long the advice stood."""

TOP_FINDINGS = 3
"""Findings in the summary."""

MAX_EPISODES = 2000
"""Advice episodes kept for the timeline; later ones are counted, not listed."""

MAX_PROBLEMS = 200
"""Recording problems listed; later ones are counted."""

MAX_GAPS = 500
"""Gaps listed; later ones are counted."""

MAX_RANKS = 64
"""Distinct ranks kept per job."""

ACTION_LENGTH = 1000
"""Advice actions (shown whole in the top findings) are cut to this many characters."""

DEVICE_SERIES = (
    "utilization_gpu_percent",
    "sm_active_percent",
    "tensor_active_percent",
    "memory_used_bytes",
    "power_watts",
    "temperature_celsius",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
    "encoder_percent",
    "decoder_percent",
)
"""DeviceSample fields plotted per GPU."""

HOST_SERIES = ("cpu_percent", "iowait_percent", "memory_used_bytes")
"""Host series plotted: mean CPU over cores, iowait, memory used."""

_HISTOGRAM_BINS = 1001  # utilization in tenths of a percent, 0.0 to 100.0


@dataclass(frozen=True, slots=True)
class GpuSummary:
    """One GPU over the run."""

    index: int
    """NVML index."""
    name: str
    """Its name (safe text), empty when never reported."""
    first_seen: float
    """First snapshot it appeared in."""
    last_seen: float
    """Last snapshot it appeared in."""
    reported_hours: float
    """Hours its utilization was known (lost time, gaps and unknown samples excluded)."""
    mean_util: float | None
    """Time-weighted mean utilization in percent; None when never reported."""
    p95_util: float | None
    """Time-weighted 95th percentile of utilization (to 0.1 %); None when never reported."""
    idle_hours: float
    """Hours with utilization at or below :data:`IDLE_UTIL_PERCENT`."""
    mean_sm_active: float | None
    """Time-weighted mean GPM SM activity; None when the GPU never reported it."""
    mean_tensor_active: float | None
    """Time-weighted mean GPM tensor activity; None when never reported."""
    memory_total_bytes: int | None
    """Its memory size, when reported."""
    peak_memory_bytes: int | None
    """Most memory used at any sample."""
    lost_hours: float
    """Hours it was marked lost."""
    lost_at: float | None
    """When it was first seen lost; None when never."""


@dataclass(frozen=True, slots=True)
class HostSummary:
    """The host over the run."""

    hostname: str
    """Host name (safe text), empty when unknown."""
    mean_cpu: float | None
    """Time-weighted mean of the per-snapshot mean CPU over cores, percent."""
    mean_iowait: float | None
    """Time-weighted mean iowait, percent of CPU time."""
    peak_memory_bytes: int | None
    """Most host memory in use."""
    memory_total_bytes: int | None
    """Host memory size."""


@dataclass(frozen=True, slots=True)
class ProcessRun:
    """One GPU process (pid and start time) over the run."""

    pid: int
    """Its pid."""
    user: str
    """Owner (safe text)."""
    command: str
    """Command line or name (safe text, cut)."""
    first_seen: float
    """First snapshot it held a GPU in."""
    last_seen: float
    """Last snapshot it held a GPU in."""
    gpu_hours: float
    """Hours holding a GPU context, summed over its GPUs."""
    sm_gpu_hours: float | None
    """GPU-hours weighted by its per-process SM percent; None when never reported."""
    peak_memory_bytes: int | None
    """Most GPU memory it held at once (over all its GPUs)."""
    devices: tuple[int, ...]
    """GPUs it used."""
    job: int | None
    """Its job id (last seen)."""
    rank: int | None
    """Its distributed rank, when known."""


@dataclass(frozen=True, slots=True)
class JobRun:
    """One job over the run."""

    id: int
    """Job id."""
    kind: str
    """Training, inference, notebook or unknown."""
    evidence: str
    """How it was recognised (safe text, cut)."""
    devices: tuple[int, ...]
    """GPUs its processes used."""
    ranks: tuple[int, ...]
    """Distinct ranks seen."""
    processes: int
    """Most GPU processes it had at once."""
    first_seen: float
    """First snapshot it was in."""
    last_seen: float
    """Last snapshot it was in."""
    gpu_hours: float
    """Hours its processes held GPU contexts."""
    peak_memory_bytes: int | None
    """Most GPU memory its processes held at once."""
    speed: JobSpeedRun | None = None
    """Its training speed over the run; None when no rank reported any (not instrumented with gpusight.torch)."""


@dataclass(frozen=True, slots=True)
class AdviceEpisode:
    """One stretch during which a piece of advice stood."""

    advice_id: str
    """``rule:scope``."""
    severity: Severity
    """The highest severity it had."""
    scope: str
    """``gpu0``, ``job3``, ``host``, ..."""
    title: str
    """Its latest title (safe text)."""
    raised: float
    """When it appeared."""
    cleared: float | None
    """When it was first gone; None when it still stood at the end."""
    seconds: float
    """How long it stood (gaps excluded)."""


@dataclass(frozen=True, slots=True)
class Finding:
    """A piece of advice ranked among the run's top findings."""

    advice_id: str
    """``rule:scope``."""
    rule: str
    """The rule's name."""
    summary: str
    """The rule's fixed summary (``SUMMARIES``)."""
    severity: Severity
    """Highest severity it had."""
    scope: str
    """Where."""
    title: str
    """Latest title (safe text)."""
    action: str
    """Latest action text (safe text)."""
    seconds: float
    """Total time it stood."""
    episodes: int
    """How many times it was raised."""


@dataclass(frozen=True, slots=True)
class SeriesSet:
    """Downsampled series: bucket times and, per series, (min, mean, max) per bucket (None: no sample)."""

    times: tuple[float, ...]
    """Middle of each bucket, epoch seconds."""
    bucket_seconds: float
    """Width of each bucket."""
    devices: dict[int, dict[str, tuple[list[float | None], list[float | None], list[float | None]]]]
    """Per GPU, per :data:`DEVICE_SERIES` metric that was ever reported."""
    host: dict[str, tuple[list[float | None], list[float | None], list[float | None]]]
    """Per :data:`HOST_SERIES` metric that was ever reported."""


@dataclass(frozen=True, slots=True)
class RunSummary:
    """Everything a run report shows."""

    snapshots: int
    """Snapshots read."""
    first_timestamp: float | None
    """First snapshot's time; None for an empty run."""
    last_timestamp: float | None
    """Last snapshot's time."""
    covered_seconds: float
    """Time the snapshots stand for (gaps excluded)."""
    interval_seconds: float | None
    """Usual interval between snapshots (median of the first ones)."""
    labels: tuple[str, ...]
    """Source labels seen (safe text), e.g. ``demo: mixed (simulated)``."""
    gpus: tuple[GpuSummary, ...]
    """Per GPU, by index."""
    host: HostSummary
    """The host."""
    processes: tuple[ProcessRun, ...]
    """GPU processes, most GPU-hours first."""
    jobs: tuple[JobRun, ...]
    """Jobs, most GPU-hours first."""
    episodes: tuple[AdviceEpisode, ...]
    """Advice episodes in order raised (at most :data:`MAX_EPISODES`)."""
    episodes_omitted: int
    """Episodes past the limit."""
    findings: tuple[Finding, ...]
    """Top findings (at most :data:`TOP_FINDINGS`), by severity weight times duration."""
    problems: tuple[RecordingProblem, ...]
    """Damaged parts of the recording (at most :data:`MAX_PROBLEMS`)."""
    problems_omitted: int
    """Problems past the limit."""
    gaps: tuple[tuple[float, float], ...]
    """(last snapshot before, first after) for each gap."""
    gaps_omitted: int
    """Gaps past the limit."""
    out_of_order: int
    """Snapshots skipped because they were not later than the one before (a clock stepped back)."""
    series: SeriesSet
    """The plotted series."""
    health: RunHealth = RunHealth()
    """Hardware health findings, Xid events and MIG instances over the run."""
    speed_jobs_omitted: int = 0
    """Jobs that reported speed after :data:`~gpusight.run_report.training.MAX_SPEED_JOBS` others did (not kept)."""

    @property
    def idle_gpu_hours(self) -> float:
        """Idle GPU-hours summed over GPUs."""
        return sum(gpu.idle_hours for gpu in self.gpus)


@dataclass(slots=True)
class _Weighted:
    """A time-weighted mean."""

    total: float = 0.0
    seconds: float = 0.0

    def add(self, value: float | None, seconds: float) -> None:
        if value is not None:
            self.total += value * seconds
            self.seconds += seconds

    def mean(self) -> float | None:
        return self.total / self.seconds if self.seconds > 0 else None


@dataclass(slots=True)
class _Gpu:
    index: int
    first_seen: float
    last_seen: float
    series: dict[str, BucketSeries]
    name: str = ""
    util: _Weighted = field(default_factory=_Weighted)
    sm: _Weighted = field(default_factory=_Weighted)
    tensor: _Weighted = field(default_factory=_Weighted)
    histogram: array = field(default_factory=lambda: array("d", [0.0]) * _HISTOGRAM_BINS)  # type: ignore[type-arg]
    idle_seconds: float = 0.0
    lost_seconds: float = 0.0
    lost_at: float | None = None
    memory_total: int | None = None
    peak_memory: int | None = None


@dataclass(slots=True)
class _Process:
    pid: int
    user: str
    command: str
    first_seen: float
    last_seen: float
    gpu_seconds: float = 0.0
    sm_seconds: float = 0.0
    sm_known: bool = False
    peak_memory: int | None = None
    devices: set[int] = field(default_factory=set)
    job: int | None = None
    rank: int | None = None


@dataclass(slots=True)
class _Job:
    id: int
    kind: str
    evidence: str
    first_seen: float
    last_seen: float
    devices: set[int] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    processes: int = 0
    gpu_seconds: float = 0.0
    peak_memory: int | None = None
    pids: frozenset[int] = frozenset()
    """Its GPU processes in the latest snapshot that listed it."""
    speed: JobSpeedAccumulator | None = None
    """Its speed, from the first snapshot in which a rank reported any."""
    speed_omitted: bool = False
    """It reported speed after :data:`MAX_SPEED_JOBS` other jobs had: not kept."""


@dataclass(slots=True)
class _Episode:
    advice: Advice
    raised: float
    severity: Severity
    seconds: float = 0.0


@dataclass(slots=True)
class _AdviceTotal:
    severity: Severity
    title: str
    action: str
    scope: str
    seconds: float = 0.0
    episodes: int = 0


def _more_severe(a: Severity, b: Severity) -> Severity:
    order = list(Severity)
    return a if order.index(a) <= order.index(b) else b


def _max(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    return a if b is None else max(a, b)


class RunAccumulator:
    """Takes snapshots in time order (and recording problems) and keeps only bounded totals and buckets."""

    def __init__(self, max_buckets: int | None = None) -> None:
        self.grid = BucketGrid() if max_buckets is None else BucketGrid(max_buckets)
        """The shared time buckets of every plotted series."""
        self._pending: Snapshot | None = None
        self._deltas: list[float] = []
        self._count = 0
        self._first: float | None = None
        self._last: float | None = None
        self._covered = 0.0
        self._labels: dict[str, None] = {}
        self._hostname = ""
        self._gpus: dict[int, _Gpu] = {}
        self._host_series = {name: self.grid.series() for name in HOST_SERIES}
        self._cpu, self._iowait = _Weighted(), _Weighted()
        self._host_memory_peak: int | None = None
        self._host_memory_total: int | None = None
        self._processes: dict[tuple[int, float | None], _Process] = {}
        self._jobs: list[_Job] = []
        self._job_by_id: dict[int, _Job] = {}
        self._active: dict[str, _Episode] = {}
        self._episodes: list[AdviceEpisode] = []
        self._episodes_omitted = 0
        self._totals: dict[str, _AdviceTotal] = {}
        self._problems: list[RecordingProblem] = []
        self._problems_omitted = 0
        self._gaps: list[tuple[float, float]] = []
        self._gaps_omitted = 0
        self._out_of_order = 0
        self._speed_jobs = 0
        self._speed_jobs_omitted = 0
        self._health = HealthAccumulator()

    def add(self, item: Snapshot | RecordingProblem) -> None:
        """Take the next snapshot (or a problem met while reading)."""
        if isinstance(item, RecordingProblem):
            self._problem(item)
            return
        previous = self._pending
        if previous is not None:
            delta = item.timestamp - previous.timestamp
            if delta <= 0:
                self._out_of_order += 1
                return
            if self._is_gap(delta):
                self._commit(previous, self._interval() or 0.0)
                if len(self._gaps) < MAX_GAPS:
                    self._gaps.append((previous.timestamp, item.timestamp))
                else:
                    self._gaps_omitted += 1
                self._clear_all(previous.timestamp + (self._interval() or 0.0))
            else:
                self._commit(previous, delta)
                if len(self._deltas) < 64:
                    self._deltas.append(delta)
        self._pending = item

    def _problem(self, problem: RecordingProblem) -> None:
        if len(self._problems) < MAX_PROBLEMS:
            self._problems.append(problem)
        else:
            self._problems_omitted += 1

    def _interval(self) -> float | None:
        return statistics.median(self._deltas) if self._deltas else None

    def _is_gap(self, delta: float) -> bool:
        interval = self._interval()
        if interval is None:
            return delta > FIRST_GAP_SECONDS
        return delta > max(GAP_MIN_SECONDS, GAP_FACTOR * interval)

    def _commit(self, snapshot: Snapshot, seconds: float) -> None:
        """Count ``snapshot`` as standing for ``seconds``."""
        t = snapshot.timestamp
        self._count += 1
        self._first = t if self._first is None else self._first
        self._last = t
        self._covered += seconds
        if snapshot.label:
            self._labels.setdefault(safe_text(snapshot.label, 120))
        if snapshot.host.hostname and not self._hostname:
            self._hostname = safe_text(snapshot.host.hostname, 80)
        bucket = self.grid.bucket(t)
        for device in snapshot.devices:
            self._device(device, t, seconds, bucket)
        self._host(snapshot, seconds, bucket)
        self._processes_and_jobs(snapshot, t, seconds, bucket)
        self._advice(snapshot.advice, t, seconds)
        self._health.add(snapshot, seconds)

    def _device(self, device: DeviceSample, t: float, seconds: float, bucket: int) -> None:
        gpu = self._gpus.get(device.index)
        if gpu is None:
            gpu = self._gpus[device.index] = _Gpu(device.index, t, t, {m: self.grid.series() for m in DEVICE_SERIES})
        gpu.last_seen = t
        if device.name and not gpu.name:
            gpu.name = safe_text(device.name, 80)
        if device.lost:
            gpu.lost_seconds += seconds
            gpu.lost_at = t if gpu.lost_at is None else gpu.lost_at
            return
        for metric, series in gpu.series.items():
            value = getattr(device, metric)
            if value is not None:
                series.add(bucket, float(value))
        util = device.utilization_gpu_percent
        if util is not None:
            gpu.util.add(util, seconds)
            gpu.histogram[min(_HISTOGRAM_BINS - 1, max(0, round(util * 10)))] += seconds
            if util <= IDLE_UTIL_PERCENT:
                gpu.idle_seconds += seconds
        gpu.sm.add(device.sm_active_percent, seconds)
        gpu.tensor.add(device.tensor_active_percent, seconds)
        gpu.memory_total = _max(gpu.memory_total, device.memory_total_bytes)
        gpu.peak_memory = _max(gpu.peak_memory, device.memory_used_bytes)

    def _host(self, snapshot: Snapshot, seconds: float, bucket: int) -> None:
        host = snapshot.host
        cores = host.cpu_percent_per_core
        cpu = sum(cores) / len(cores) if cores else None
        self._cpu.add(cpu, seconds)
        self._iowait.add(host.iowait_percent, seconds)
        self._host_memory_peak = _max(self._host_memory_peak, host.memory_used_bytes)
        self._host_memory_total = _max(self._host_memory_total, host.memory_total_bytes)
        for name, value in (("cpu_percent", cpu), ("iowait_percent", host.iowait_percent),
                            ("memory_used_bytes", host.memory_used_bytes)):
            if value is not None:
                self._host_series[name].add(bucket, float(value))

    def _processes_and_jobs(self, snapshot: Snapshot, t: float, seconds: float, bucket: int) -> None:
        memory: dict[tuple[int, float | None], int] = {}
        job_memory: dict[int, int] = {}
        job_seconds: dict[int, float] = {}
        timed: dict[int, list[ProcessSample]] = {}
        for p in snapshot.processes:
            if p.role != ProcessRole.GPU:
                continue
            if p.job is not None and publishes_speed(p):
                timed.setdefault(p.job, []).append(p)
            key = (p.pid, p.create_time)
            run = self._processes.get(key)
            if run is None:
                run = self._processes[key] = _Process(
                    p.pid, safe_text(p.user, 32), safe_text(p.cmdline or p.name, TEXT_LENGTH), t, t
                )
            run.last_seen = t
            run.gpu_seconds += seconds
            if p.sm_percent is not None:
                run.sm_seconds += seconds * p.sm_percent / 100.0
                run.sm_known = True
            if p.device_index is not None:
                run.devices.add(p.device_index)
            run.job = p.job if p.job is not None else run.job
            run.rank = p.rank if p.rank is not None else run.rank
            memory[key] = memory.get(key, 0) + (p.gpu_memory_bytes or 0)
            if p.job is not None:
                job_memory[p.job] = job_memory.get(p.job, 0) + (p.gpu_memory_bytes or 0)
                job_seconds[p.job] = job_seconds.get(p.job, 0.0) + seconds
                if p.rank is not None:
                    ranks = self._job_for(snapshot, p.job, t)
                    if ranks is not None and len(ranks.ranks) < MAX_RANKS:
                        ranks.ranks.add(p.rank)
        for key, used in memory.items():
            if used:
                self._processes[key].peak_memory = _max(self._processes[key].peak_memory, used)
        for job in snapshot.jobs:
            run_job = self._job_for(snapshot, job.id, t)
            if run_job is None:
                continue
            run_job.last_seen = t
            run_job.devices.update(job.devices)
            run_job.processes = max(run_job.processes, len(job.pids))
            run_job.gpu_seconds += job_seconds.get(job.id, 0.0)
            if job_memory.get(job.id):
                run_job.peak_memory = _max(run_job.peak_memory, job_memory[job.id])
            if job.id in timed:
                self._job_speed(run_job, job, timed[job.id], seconds, bucket)

    def _job_speed(self, run: _Job, job: JobSample, ranks: list[ProcessSample], seconds: float, bucket: int) -> None:
        """Count the job's speed (``job_speed`` of its ``ranks`` that publish speed) in this snapshot."""
        if run.speed_omitted:
            return
        speed = job_speed(job, ranks)
        if not reports_speed(speed):
            return
        if run.speed is None:
            if self._speed_jobs >= MAX_SPEED_JOBS:
                self._speed_jobs_omitted += 1
                run.speed_omitted = True
                return
            self._speed_jobs += 1
            run.speed = JobSpeedAccumulator(self.grid)
        run.speed.add(speed, ranks, seconds, bucket)

    def _job_for(self, snapshot: Snapshot, job_id: int, t: float) -> _Job | None:
        """The accumulated job ``job_id`` of ``snapshot`` (created on first sight); None when the snapshot lacks it."""
        job = next((j for j in snapshot.jobs if j.id == job_id), None)
        if job is None:
            return None
        run = self._job_by_id.get(job.id)
        if run is None or run.kind != str(job.kind) or run.pids.isdisjoint(job.pids):
            # Job ids restart with every gpusight session, so an id whose processes are all new is another job.
            run = _Job(job.id, str(job.kind), safe_text(job.evidence, TEXT_LENGTH), t, t)
            self._job_by_id[job.id] = run
            self._jobs.append(run)
        run.pids = frozenset(job.pids)
        return run

    def _advice(self, advice: tuple[Advice, ...], t: float, seconds: float) -> None:
        standing = {a.id: a for a in advice}
        for advice_id in [i for i in self._active if i not in standing]:
            self._close(advice_id, t)
        for advice_id, a in standing.items():
            episode = self._active.get(advice_id)
            if episode is None:
                episode = self._active[advice_id] = _Episode(a, t, a.severity)
            episode.advice = a
            episode.severity = _more_severe(episode.severity, a.severity)
            episode.seconds += seconds

    def _clear_all(self, t: float) -> None:
        """A gap: advice standing before it ends where the last snapshot before it ends."""
        for advice_id in list(self._active):
            self._close(advice_id, t)

    def _close(self, advice_id: str, cleared: float | None) -> None:
        episode = self._active.pop(advice_id)
        a = episode.advice
        title = safe_text(a.title, TEXT_LENGTH)
        if len(self._episodes) < MAX_EPISODES:
            self._episodes.append(
                AdviceEpisode(advice_id, episode.severity, safe_text(a.scope, 40), title, episode.raised, cleared,
                              episode.seconds)
            )
        else:
            self._episodes_omitted += 1
        total = self._totals.get(advice_id)
        if total is None:
            total = self._totals[advice_id] = _AdviceTotal(episode.severity, title, "", safe_text(a.scope, 40))
        total.severity = _more_severe(total.severity, episode.severity)
        total.title = title
        total.action = safe_text(a.action, ACTION_LENGTH)
        total.seconds += episode.seconds
        total.episodes += 1

    def summary(self) -> RunSummary:
        """The run's numbers so far; the accumulator is finished by it (call once, after the last snapshot)."""
        if self._pending is not None:
            self._commit(self._pending, self._interval() or 0.0)
            self._pending = None
        for advice_id in list(self._active):
            self._close(advice_id, None)
        self._episodes.sort(key=lambda e: e.raised)
        rows = self._rows()
        return RunSummary(
            snapshots=self._count,
            first_timestamp=self._first,
            last_timestamp=self._last,
            covered_seconds=self._covered,
            interval_seconds=self._interval(),
            labels=tuple(self._labels),
            gpus=tuple(_gpu_summary(self._gpus[i]) for i in sorted(self._gpus)),
            host=HostSummary(self._hostname, self._cpu.mean(), self._iowait.mean(), self._host_memory_peak,
                             self._host_memory_total),
            processes=tuple(sorted((_process_run(p) for p in self._processes.values()),
                                   key=lambda p: (-p.gpu_hours, p.first_seen, p.pid))),
            jobs=tuple(sorted((_job_run(j, rows) for j in self._jobs), key=lambda j: (-j.gpu_hours, j.id))),
            episodes=tuple(self._episodes),
            episodes_omitted=self._episodes_omitted,
            findings=self._findings(),
            problems=tuple(self._problems),
            problems_omitted=self._problems_omitted,
            gaps=tuple(self._gaps),
            gaps_omitted=self._gaps_omitted,
            out_of_order=self._out_of_order,
            series=self._series(rows),
            health=self._health.summary(),
            speed_jobs_omitted=self._speed_jobs_omitted,
        )

    def _findings(self) -> tuple[Finding, ...]:
        ranked = []
        for advice_id, total in self._totals.items():
            rule = advice_id.split(":", 1)[0]
            if rule == HEALTHY:
                continue
            score = SEVERITY_WEIGHT[total.severity] * total.seconds
            ranked.append((score, advice_id, total, rule))
        ranked.sort(key=lambda r: (-r[0], r[1]))
        return tuple(
            Finding(advice_id, rule, SUMMARIES.get(rule, ""), t.severity, t.scope, t.title, t.action, t.seconds,
                    t.episodes)
            for _, advice_id, t, rule in ranked[:TOP_FINDINGS]
        )

    def _rows(self) -> list[int | None]:
        """The plotted buckets, with a None row at each gap (see :meth:`BucketGrid.rows`)."""
        interval = self._interval()
        gap = max(GAP_MIN_SECONDS, GAP_FACTOR * interval if interval else FIRST_GAP_SECONDS, 2.5 * self.grid.width)
        return self.grid.rows(gap)

    def _series(self, rows: list[int | None]) -> SeriesSet:
        devices = {
            index: {m: s.columns(rows) for m, s in gpu.series.items() if s.known}
            for index, gpu in sorted(self._gpus.items())
        }
        host = {m: s.columns(rows) for m, s in self._host_series.items() if s.known}
        return SeriesSet(tuple(self.grid.times(rows)), self.grid.width, devices, host)


def _percentile(histogram: array, seconds: float, share: float) -> float | None:  # type: ignore[type-arg]
    """The smallest utilization (tenths of a percent) below or at which ``share`` of the time falls."""
    if seconds <= 0:
        return None
    target, running = share * seconds, 0.0
    for tenth, weight in enumerate(histogram):
        running += weight
        if running >= target - 1e-9:
            return tenth / 10.0
    return 100.0


def _gpu_summary(gpu: _Gpu) -> GpuSummary:
    return GpuSummary(
        index=gpu.index,
        name=gpu.name,
        first_seen=gpu.first_seen,
        last_seen=gpu.last_seen,
        reported_hours=gpu.util.seconds / 3600.0,
        mean_util=gpu.util.mean(),
        p95_util=_percentile(gpu.histogram, gpu.util.seconds, 0.95),
        idle_hours=gpu.idle_seconds / 3600.0,
        mean_sm_active=gpu.sm.mean(),
        mean_tensor_active=gpu.tensor.mean(),
        memory_total_bytes=gpu.memory_total,
        peak_memory_bytes=gpu.peak_memory,
        lost_hours=gpu.lost_seconds / 3600.0,
        lost_at=gpu.lost_at,
    )


def _process_run(p: _Process) -> ProcessRun:
    return ProcessRun(p.pid, p.user, p.command, p.first_seen, p.last_seen, p.gpu_seconds / 3600.0,
                      p.sm_seconds / 3600.0 if p.sm_known else None, p.peak_memory, tuple(sorted(p.devices)), p.job,
                      p.rank)


def _job_run(j: _Job, rows: list[int | None]) -> JobRun:
    return JobRun(j.id, j.kind, j.evidence, tuple(sorted(j.devices)), tuple(sorted(j.ranks)), j.processes,
                  j.first_seen, j.last_seen, j.gpu_seconds / 3600.0, j.peak_memory,
                  None if j.speed is None else j.speed.run(rows))


def summarize(items: Iterable[Snapshot | RecordingProblem], max_buckets: int | None = None) -> RunSummary:
    """The summary of a stream of snapshots and problems (a recording as :func:`read_recording` yields it)."""
    accumulator = RunAccumulator(max_buckets)
    for item in items:
        accumulator.add(item)
    return accumulator.summary()
