"""Jobs put on demo snapshots for UI tests, until the demo source groups its processes itself.

GPU processes that share a parent form one job (the demo starts DDP ranks from one torchrun parent);
ranks follow pid order in jobs of several processes. A notebook command line makes a notebook job,
``serve`` in it an inference job; anything else is training. The evidence names the parent, with
``hostile`` appended to test escaping.
"""

from __future__ import annotations

import dataclasses

from gpusight.snapshot.model import JobSample, ProcessRole, Snapshot, WorkloadKind


def with_jobs(snapshot: Snapshot, *, first_id: int = 1, hostile: str = "") -> Snapshot:
    """``snapshot`` with ``jobs`` filled and every GPU process's ``job`` and ``rank`` set."""
    groups: dict[int | None, list[int]] = {}
    for p in snapshot.processes:
        if p.role == ProcessRole.GPU and p.pid not in groups.get(p.ppid, []):
            groups.setdefault(p.ppid, []).append(p.pid)
    jobs: list[JobSample] = []
    job_of: dict[int, int] = {}
    rank_of: dict[int, int] = {}
    for number, (parent, pids) in enumerate(groups.items(), start=first_id):
        members = [p for p in snapshot.processes if p.pid in pids and p.role == ProcessRole.GPU]
        command = members[0].cmdline or ""
        kind = WorkloadKind.TRAINING
        if "ipykernel" in command:
            kind = WorkloadKind.NOTEBOOK
        elif "serve" in command:
            kind = WorkloadKind.INFERENCE
        ordered = tuple(sorted(pids))
        several = len(ordered) > 1
        jobs.append(
            JobSample(
                id=number, kind=kind, evidence=f"shared parent PID {parent}{hostile}", pids=ordered,
                devices=tuple(sorted({p.device_index for p in members if p.device_index is not None})),
                world_size=len(ordered) if several else None, launcher_pid=parent if several else None,
            )
        )
        for rank, pid in enumerate(ordered):
            job_of[pid] = number
            if several:
                rank_of[pid] = rank
    processes = tuple(
        dataclasses.replace(p, job=job_of.get(p.pid), rank=rank_of.get(p.pid)) if p.role == ProcessRole.GPU else p
        for p in snapshot.processes
    )
    return dataclasses.replace(snapshot, processes=processes, jobs=tuple(jobs))
