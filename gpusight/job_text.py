"""How jobs and containers are written: a process's job (``job 3 · rank 5/8``), a job's facts, a job-scoped advice
scope, and the container, pod or Slurm job a process runs in (``docker 3f2a9c1b4d5e``).

The process table, ``gpusight --once``, the Enter popup and the Markdown report all write them with these
functions, so they agree. Pure text: this module imports neither Textual nor Rich (``--once`` stays light). The
evidence of a job and a container's name (its host name) are untrusted; callers escape what they show of them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gpusight.snapshot.model import (
    ContainerRuntime,
    ContainerSample,
    JobSample,
    ProcessSample,
    ScopeKind,
    Snapshot,
    WorkloadKind,
)

KIND_MARKS: dict[WorkloadKind, tuple[str, str]] = {
    WorkloadKind.INFERENCE: ("serving", "srv"),
    WorkloadKind.NOTEBOOK: ("notebook", "nb"),
}
"""The (full, compact) mark of the kinds that are not trainers; training and unknown jobs carry none."""


def jobs_by_id(snapshot: Snapshot) -> dict[int, JobSample]:
    """The snapshot's jobs keyed by their id."""
    return {job.id: job for job in snapshot.jobs}


def job_label(
    process: ProcessSample, jobs: Mapping[int, JobSample], *, compact: bool = False, ascii_mode: bool = False
) -> str:
    """The job of a GPU ``process`` in a few cells; "" when it has none.

    ``job 3 · rank 5/8`` (rank known; 8 is the world size, else the job's process count), ``job 3 · 8 procs``
    (several processes, ranks unknown), ``job 3`` (a job of one), ``job 4 · serving`` and ``job 5 · notebook``.
    ``compact`` writes the same as ``3·5/8``, ``3·8p``, ``3``, ``4·srv``, ``5·nb``; ``ascii_mode`` puts
    ``" - "`` (compact ``":"``) where ``" · "`` stands.
    """
    if process.job is None:
        return ""
    name = str(process.job) if compact else f"job {process.job}"
    job = jobs.get(process.job)
    detail = "" if job is None else _detail(job, process, compact)
    if not detail:
        return name
    if compact:
        return name + (":" if ascii_mode else "·") + detail
    return name + (" - " if ascii_mode else " · ") + detail


def _detail(job: JobSample, process: ProcessSample, compact: bool) -> str:
    """What follows the job id: the kind's mark, the rank, or the process count."""
    mark = KIND_MARKS.get(job.kind)
    if mark is not None:
        return mark[1] if compact else mark[0]
    if process.rank is not None:
        size = job.world_size if job.world_size is not None else len(job.pids)
        return f"{process.rank}/{size}" if compact else f"rank {process.rank}/{size}"
    if len(job.pids) > 1:
        return f"{len(job.pids)}p" if compact else f"{len(job.pids)} procs"
    return ""


def gpu_list(devices: Iterable[int]) -> str:
    """GPU indexes as short text: runs as ranges, ``"0-3,6"``; ``"-"`` for none."""
    indexes = sorted(set(devices))
    parts: list[str] = []
    start = 0
    for i in range(1, len(indexes) + 1):
        if i == len(indexes) or indexes[i] != indexes[i - 1] + 1:
            first, last = indexes[start], indexes[i - 1]
            parts.append(str(first) if first == last else f"{first}-{last}")
            start = i
    return ",".join(parts) or "-"


def job_gpus(job: JobSample) -> str:
    """``"GPU 2"`` or ``"GPUs 0-7"``: the GPUs a job uses."""
    return f"GPU{'s' if len(job.devices) != 1 else ''} {gpu_list(job.devices)}"


def job_processes(job: JobSample) -> str:
    """Its process count, with the world size and launcher when known, e.g. ``"8 processes, world size 16"``."""
    count = len(job.pids)
    parts = [f"{count} process{'es' if count != 1 else ''}"]
    if job.world_size is not None:
        parts.append(f"world size {job.world_size}")
    if job.launcher_pid is not None:
        parts.append(f"launcher PID {job.launcher_pid}")
    return ", ".join(parts)


def job_facts(job: JobSample) -> str:
    """A job's kind, GPUs and processes: ``"training, GPUs 0-7, 8 processes, world size 8, launcher PID 4100"``."""
    return f"{job.kind.value}, {job_gpus(job)}, {job_processes(job)}"


def scope_label(scope: str, jobs: Mapping[int, JobSample]) -> str:
    """An advice scope as shown: a job's scope names its GPUs, ``"job3 on GPUs 0-7"``; other scopes unchanged.

    The result holds ``scope`` as it came (untrusted); the caller escapes it.
    """
    parsed = ScopeKind.parse(scope)
    if parsed is None or parsed[0] is not ScopeKind.JOB or parsed[1] is None:
        return scope
    job = jobs.get(parsed[1])
    if job is None or not job.devices:
        return scope
    return f"{scope} on {job_gpus(job)}"


def container_labels(container: ContainerSample) -> tuple[str, ...]:
    """Ways to write where a process runs, longest first; a column shows the first that fits.

    A Kubernetes pod by its name (``trainer-worker-0``; ``pod 1b2c3d4e`` when unreadable), another container by
    runtime and short id (``docker 3f2a9c1b4d5e``, then ``3f2a9c1b4d5e``), a Slurm job as ``slurm 4242``, a bare
    PID namespace as ``pidns``. A pod's name is the container's host name: untrusted, and cut by the caller.
    """
    runtime = container.runtime
    if runtime is ContainerRuntime.NAMESPACE:
        return ("pidns",)
    if runtime is ContainerRuntime.SLURM:
        job = container.slurm_job_id or "?"
        return (f"slurm {job}", job)
    if container.pod_uid is not None:
        return (container.name,) if container.name else (f"pod {container.pod_uid[:8]}", container.pod_uid[:8])
    short = (container.id or "?")[:12]
    return (f"{runtime.value} {short}", f"{runtime.value} {short[:8]}", short, short[:8])


def container_facts(container: ContainerSample) -> str:
    """Everything known of where a process runs, on one line (untrusted: the caller escapes it).

    E.g. ``"containerd 3f2a9c1b4d5e..., pod ml-team/trainer-0 (UID 1b2c...), pid 7 inside"``.
    """
    runtime = container.runtime
    if runtime is ContainerRuntime.NAMESPACE:
        parts = ["own PID namespace"]
    elif runtime is ContainerRuntime.SLURM:
        parts = [f"Slurm job {container.slurm_job_id or '?'}"]
    else:
        parts = [f"{runtime.value} container {container.id or '?'}"]
        if container.pod_uid is not None:
            pod = f"{container.pod_namespace or '?'}/{container.name or '?'}"
            parts.append(f"pod {pod} (UID {container.pod_uid})")
        elif container.name:
            parts.append(f"host name {container.name}")
        if container.slurm_job_id is not None:
            parts.append(f"Slurm job {container.slurm_job_id}")
    if container.pid_in_container is not None:
        parts.append(f"PID {container.pid_in_container} inside")
    return ", ".join(parts)
