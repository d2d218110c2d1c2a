"""gpusight's job and process metrics: keyed by job and rank, never by PID, and capped in number."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from prometheus_client.core import GaugeMetricFamily

from gpusight import metric_names as names
from gpusight.prometheus_exporter.labels import COMMAND_LABEL_MAX, label_value
from gpusight.snapshot.model import ContainerRuntime, ContainerSample, JobSample, ProcessRole, ProcessSample, Snapshot

MAX_PROCESS_SERIES = 256
"""Most GPU processes given series per scrape; the largest in GPU memory are kept (``gpusight_series_dropped``)."""


@dataclass(frozen=True, slots=True)
class ProcessRow:
    """One GPU process on one GPU as served: its key labels and the workers feeding it."""

    job: str
    """``gpusight_job`` label value ("" when the process is in no job)."""
    rank: str
    """``rank`` label value: RANK when known, else the process's place within its job."""
    process: ProcessSample
    """The GPU process."""
    workers: tuple[ProcessSample, ...]
    """Its DataLoader workers."""

    @property
    def key(self) -> list[str]:
        """The labels every per-process series carries after the host's: job, rank, GPU."""
        gpu = "" if self.process.device_index is None else str(self.process.device_index)
        return [self.job, self.rank, gpu]


def process_rows(snapshot: Snapshot, limit: int = MAX_PROCESS_SERIES) -> tuple[list[ProcessRow], int]:
    """The GPU processes to serve, largest GPU memory first, at most ``limit``; and how many were left out.

    A process whose (job, rank, GPU) key repeats one already served is left out too (and counted).
    """
    workers: dict[int, list[ProcessSample]] = {}
    for p in snapshot.processes:
        if p.role is ProcessRole.DATALOADER_WORKER and p.trainer_pid is not None:
            workers.setdefault(p.trainer_pid, []).append(p)
    places = {pid: place for job in snapshot.jobs for place, pid in enumerate(job.pids)}
    gpu_processes = [p for p in snapshot.processes if p.role is ProcessRole.GPU]
    loose = {pid: place for place, pid in enumerate(sorted({p.pid for p in gpu_processes if p.job is None}))}
    ordered = sorted(gpu_processes, key=lambda p: -(p.gpu_memory_bytes or 0))
    rows: list[ProcessRow] = []
    seen: set[tuple[str, ...]] = set()
    for p in ordered:
        place = p.rank if p.rank is not None else places.get(p.pid, loose.get(p.pid, 0))
        row = ProcessRow("" if p.job is None else str(p.job), str(place), p, tuple(workers.get(p.pid, ())))
        if len(rows) >= limit or tuple(row.key) in seen:
            continue
        seen.add(tuple(row.key))
        rows.append(row)
    rows.sort(key=lambda row: row.key)  # a stable order: a family whose values did not change is written the same
    return rows, len(ordered) - len(rows)


def _container_labels(container: ContainerSample | None) -> list[str]:
    """container, pod, namespace and slurm_job_id label values."""
    if container is None:
        return ["", "", "", ""]
    in_pod = container.pod_uid is not None or container.pod_namespace is not None
    if container.id:
        name: str | None = container.id[:12]
    elif container.runtime is ContainerRuntime.NAMESPACE:
        name = "pidns"  # a PID namespace of its own and no runtime known: as the process table writes it
    else:
        name = None if in_pod else container.name
    return [label_value(name), label_value(container.name if in_pod else None),
            label_value(container.pod_namespace), label_value(container.slurm_job_id)]


def _family(metric: names.MetricName, host: list[str], extra: tuple[str, ...] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(metric.name, metric.help, labels=names.HOST_LABELS + metric.labels + extra)


def mig_profiles(snapshot: Snapshot) -> dict[tuple[int, int], str | None]:
    """(parent GPU index, GPU instance id) -> the MIG instance's profile, for every instance of ``snapshot``."""
    return {(g.device_index, g.gpu_instance_id): g.profile for g in snapshot.mig_devices
            if g.gpu_instance_id is not None}


def _mig_labels(process: ProcessSample, profiles: Mapping[tuple[int, int], str | None]) -> list[str]:
    """``GPU_I_ID`` and ``GPU_I_PROFILE`` of the MIG instance ``process`` runs in; "" (no label) on a whole GPU."""
    instance = process.gpu_instance_id
    if instance is None:
        return ["", ""]
    profile = None if process.device_index is None else profiles.get((process.device_index, instance))
    return [str(instance), label_value(profile)]


def process_families(rows: list[ProcessRow], host: list[str], cmdline: bool,
                     profiles: Mapping[tuple[int, int], str | None] | None = None) -> Iterator[GaugeMetricFamily]:
    """gpusight_process_* and the DataLoader/input-wait families, one series per row where the value is known.

    A process in a MIG instance carries its ``GPU_I_ID`` and ``GPU_I_PROFILE`` (``profiles``: ``mig_profiles``)."""
    extra = (names.LABEL_COMMAND,) if cmdline else ()
    info = _family(names.PROCESS_INFO, host, names.MIG_LABELS + extra)
    memory, sm, cpu, workers, workers_cpu, wait = values = [
        _family(m, host, names.MIG_LABELS) for m in (names.PROCESS_MEMORY, names.PROCESS_SM, names.PROCESS_CPU,
                                                     names.WORKERS, names.WORKERS_CPU, names.INPUT_WAIT)]
    for row in rows:
        p = row.process
        mig = _mig_labels(p, profiles or {})
        labels = host + row.key + mig
        info_labels = (host + row.key + [label_value(p.name), label_value(p.user)] + _container_labels(p.container)
                       + mig)
        if cmdline:
            info_labels.append(label_value(p.cmdline, COMMAND_LABEL_MAX))
        info.add_metric(info_labels, 1.0)
        worker_cpu = [w.cpu_percent for w in row.workers if w.cpu_percent is not None]
        count = p.num_workers if p.num_workers is not None else (len(row.workers) or None)
        for family, value in ((memory, p.gpu_memory_bytes), (sm, p.sm_percent), (cpu, p.cpu_percent),
                              (workers, count), (workers_cpu, sum(worker_cpu) if worker_cpu else None),
                              (wait, p.input_wait_percent)):
            if value is not None:
                family.add_metric(labels, float(value))
    yield info
    yield from values


def _job_labels(job: JobSample, members: list[ProcessSample]) -> list[str]:
    """cluster_job, kind, slurm_job_id, pod and namespace of ``job`` (the first of its processes that tells)."""
    containers = [p.container for p in members if p.container is not None]

    def first(read: str) -> str:
        return next((label_value(getattr(c, read)) for c in containers if getattr(c, read)), "")

    pods = [c for c in containers if c.pod_uid is not None or c.pod_namespace is not None]
    pod = next((label_value(c.name) for c in pods if c.name), "")
    return [label_value(job.cluster_key), str(job.kind), first("slurm_job_id"), pod, first("pod_namespace")]


def job_families(snapshot: Snapshot, host: list[str]) -> Iterator[GaugeMetricFamily]:
    """gpusight_job_*: one series per job and family where the value is known."""
    info = _family(names.JOB_INFO, host)
    count = _family(names.JOB_PROCESSES, host)
    world = _family(names.JOB_WORLD_SIZE, host)
    memory = _family(names.JOB_MEMORY, host)
    for job in snapshot.jobs:
        members = [p for p in snapshot.processes if p.role is ProcessRole.GPU and p.job == job.id]
        labels = host + [str(job.id)]
        info.add_metric(labels + _job_labels(job, members), 1.0)
        count.add_metric(labels, float(len(job.pids)))
        if job.world_size is not None:
            world.add_metric(labels, float(job.world_size))
        held = [p.gpu_memory_bytes for p in members if p.gpu_memory_bytes is not None]
        if held:
            memory.add_metric(labels, float(sum(held)))
    yield from (info, count, world, memory)
