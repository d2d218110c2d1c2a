"""Building blocks of the table-driven advice tests: synthetic devices, processes, jobs and hosts, moving signals
(waves, bursts, noise, square waves), and a driver that feeds snapshots at 4 Hz through a real History and
AdviceEngine exactly as the sampler does."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpusight.advice.engine import AdviceEngine
from gpusight.sampling.history import History
from gpusight.snapshot.model import (
    Advice,
    DeviceSample,
    HostSample,
    JobSample,
    ProcessRole,
    ProcessSample,
    Snapshot,
    WorkloadKind,
)

GIB = 2**30
HZ = 4
T0 = 1_700_000_000.0

Frame = Callable[[float], Snapshot]


def gpu(index=0, util=95.0, used=40.0, total=80.0, **fields) -> DeviceSample:
    """A device with utilization in percent and memory in GiB."""
    return DeviceSample(
        index=index,
        utilization_gpu_percent=util,
        memory_used_bytes=int(used * GIB),
        memory_total_bytes=int(total * GIB),
        **fields,
    )


def trainer(pid=100, device=0, cpu=60.0, workers=4, mem=40.0, **fields) -> ProcessSample:
    """A GPU process holding ``mem`` GiB with ``workers`` DataLoader workers."""
    fields.setdefault("user", "alice")
    fields.setdefault("cmdline", "python train.py")
    return ProcessSample(pid=pid, device_index=device, cpu_percent=cpu, num_workers=workers, gpu_memory_bytes=int(mem * GIB), **fields)


def workers(
    trainer_pid=100, device=0, cpus=(98.0, 99.0, 100.0, 97.0), first_pid=None, rss=None, wait=None
) -> tuple[ProcessSample, ...]:
    """DataLoader workers of a trainer with the given CPU percents (RSS in GiB and run-queue wait when given)."""
    first = first_pid if first_pid is not None else trainer_pid * 10
    return tuple(
        ProcessSample(
            pid=first + i,
            role=ProcessRole.DATALOADER_WORKER,
            device_index=device,
            trainer_pid=trainer_pid,
            cpu_percent=c,
            rss_bytes=None if rss is None else int(rss * GIB),
            cpu_wait_percent=wait,
        )
        for i, c in enumerate(cpus)
    )


def host(cores=16, busy=4, iowait=1.0, memory=None, used=None) -> HostSample:
    """``busy`` cores at 100 %, the rest at 3 %; host memory total/used in GiB when given."""
    return HostSample(
        cpu_percent_per_core=(100.0,) * busy + (3.0,) * (cores - busy),
        iowait_percent=iowait,
        memory_total_bytes=None if memory is None else int(memory * GIB),
        memory_used_bytes=None if used is None else int(used * GIB),
    )


def job(id=1, pids=(), devices=(), kind=WorkloadKind.TRAINING, evidence="torchrun PID 50; RANK/WORLD_SIZE set", **fields) -> JobSample:
    """A job as the collector reports it."""
    return JobSample(id=id, kind=kind, evidence=evidence, pids=tuple(pids), devices=tuple(devices), **fields)


def snapshot(t, devices, processes=(), host_sample=None, jobs=()) -> Snapshot:
    """A snapshot at ``t`` seconds after T0."""
    return Snapshot(
        timestamp=T0 + t,
        source="demo",
        host=host_sample if host_sample is not None else host(),
        devices=tuple(devices),
        processes=tuple(processes),
        jobs=tuple(jobs),
    )


def steady(devices, processes=(), host_sample=None, jobs=()) -> Frame:
    """The same readings at every poll."""
    return lambda t: snapshot(t, devices, processes, host_sample, jobs)


def run(frame: Frame, seconds: float) -> tuple[Advice, ...]:
    """Feed ``frame(t)`` at 4 Hz for ``seconds`` through History + AdviceEngine; return the final advice."""
    history, engine = History(), AdviceEngine()
    advice: tuple[Advice, ...] = ()
    for step in range(int(seconds * HZ) + 1):
        snap = frame(step / HZ)
        history.append(snap)
        advice = engine(snap, history)
    return advice


def wave(t: float, low: float, high: float, period: float, phase: float = 0.0) -> float:
    """A sine wave between ``low`` and ``high``."""
    return low + (high - low) * 0.5 * (1.0 + math.sin(2.0 * math.pi * (t / period + phase)))


def noise(t: float, low: float, high: float, seed: object = 0) -> float:
    """A deterministic random value in [low, high] for poll ``t``."""
    return random.Random(f"{seed}/{round(t * HZ)}").uniform(low, high)


def square(t: float, period: float, share_high: float = 0.5) -> bool:
    """True during the first ``share_high`` of each period (a square wave)."""
    return (t % period) < share_high * period


def burst(t: float, low: float, high: float, every: float, length: float, seed: object = 0) -> float:
    """Mostly ``low`` with noise, jumping to ``high`` for ``length`` seconds every ``every`` seconds."""
    value = high if (t % every) < length else low
    return max(0.0, min(100.0, value + noise(t, -3.0, 3.0, seed)))


@dataclass
class Case:
    """A scenario, how long to run it, and what must (or must not) come out."""

    name: str
    frame: Frame
    advice_id: str
    fires: bool
    severity: str | None = None
    evidence: tuple[str, ...] = ()
    seconds: float = 60.0
    absent: tuple[str, ...] = ()
    """Advice ids that must not appear; an entry ending in ``:`` forbids every scope of that rule."""
    action: tuple[str, ...] = ()
    """Text that must appear in the action (when it fires)."""
    not_in_action: tuple[str, ...] = ()
    """Text that must not appear in the action (when it fires)."""


def check(case: Case) -> dict[str, Advice]:
    """Run a case and assert its expectations; returns the final advice by id."""
    advice = {a.id: a for a in run(case.frame, case.seconds)}
    assert_absent(advice, case.absent)
    if not case.fires:
        assert case.advice_id not in advice, advice.get(case.advice_id)
        return advice
    assert case.advice_id in advice, sorted(advice)
    found = advice[case.advice_id]
    assert found.severity == case.severity
    assert found.scope == case.advice_id.split(":", 1)[1]
    for text in case.evidence:
        assert text in found.evidence or text in found.title, (text, found.title, found.evidence)
    for text in case.action:
        assert text in found.action, (text, found.action)
    for text in case.not_in_action:
        assert text not in found.action, (text, found.action)
    assert "\x1b" not in found.evidence + found.title + found.action
    assert found.title and found.action
    return advice


def assert_absent(advice: dict[str, Advice], forbidden: Sequence[str]) -> None:
    """No advice id in ``forbidden`` (a trailing ``:`` matches every scope of a rule) is present."""
    for banned in forbidden:
        hits = [i for i in advice if (i.startswith(banned) if banned.endswith(":") else i == banned)]
        assert not hits, (banned, {i: advice[i].title for i in hits})
