"""Training speed put on demo snapshots for UI tests: what a trainer instrumented with ``gpusight.torch`` reports.

Deterministic in the snapshot's timestamp, so a frozen demo draws the same picture on every run: the throughput
and the data wait swing over a minute, the five step-time parts always sum to 100.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

from gpusight.demo.frozen import PREFILL_STEP, FrozenClock
from gpusight.demo.source import DemoSource, prefill_seconds
from gpusight.recordings.opening import open_recorder
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.snapshot.model import BreakdownSource, FlopsSource, MathMode, ProcessRole, ProcessSample, Snapshot

PEAK_SOURCE = "NVIDIA H100 SXM datasheet [b]x[/b]"
"""Where the reported peak comes from, with markup that must show as text."""


def speed_of(process: ProcessSample, timestamp: float) -> ProcessSample:
    """``process`` reporting a bf16 trainer's speed at ``timestamp`` (counted FLOPs: HFU)."""
    swing = math.sin(timestamp / 60.0 * 2 * math.pi)
    steps = 4.0 + 1.5 * swing
    data = 30.0 - 20.0 * swing
    flops_per_step = 6.0e13
    achieved = flops_per_step * steps / 1e12
    return dataclasses.replace(
        process,
        steps_per_second=steps,
        samples_per_second=steps * 32,
        tokens_per_second=steps * 32 * 2048,
        batch_size_source=None,
        flops_per_step=flops_per_step,
        flops_source=FlopsSource.COUNTED,
        achieved_tflops=achieved,
        peak_tflops=989.0,
        peak_source=PEAK_SOURCE,
        math_mode=MathMode.BF16,
        flops_utilization_percent=achieved / 989.0 * 100.0,
        step_data_percent=data,
        step_compute_percent=85.0 - data,
        step_comm_percent=8.0,
        step_copy_percent=4.0,
        step_idle_percent=3.0,
        breakdown_source=BreakdownSource.DEVICE,
    )


def trainer_pid(snapshot: Snapshot) -> int:
    """The pid given speed by :func:`with_speed`: the lowest GPU process pid."""
    return min(p.pid for p in snapshot.processes if p.role == ProcessRole.GPU)


def with_speed(snapshot: Snapshot) -> Snapshot:
    """``snapshot`` with its lowest-pid GPU process reporting speed (every row of that pid)."""
    pid = trainer_pid(snapshot)
    processes = tuple(speed_of(p, snapshot.timestamp) if p.pid == pid and p.role == ProcessRole.GPU else p
                      for p in snapshot.processes)
    return dataclasses.replace(snapshot, processes=processes)


class SpeedSource:
    """A demo source whose lowest-pid trainer reports speed."""

    def __init__(self, source: DemoSource) -> None:
        self.source = source

    def poll(self) -> Snapshot:
        return with_speed(self.source.poll())

    def close(self) -> None:
        self.source.close()


def frozen_speed_sampler(scenario: str, interval: float = 3600.0) -> Sampler:
    """Like :func:`gpusight.demo.frozen.frozen_demo_sampler` (no advice), with a trainer reporting speed."""
    clock = FrozenClock()
    sampler = Sampler(SpeedSource(DemoSource(scenario, seed=0, clock=clock)), interval=interval, history=History(600))
    for _ in range(round(prefill_seconds(scenario) / PREFILL_STEP)):
        sampler.poll_once()
    clock.running = False
    return sampler


RECORDING_START = 1_763_856_000.0
"""2025-11-23 00:00:00 UTC: where :func:`record_speed` starts."""


def record_speed(path: Path, seconds: int) -> Path:
    """``seconds`` of the mixed demo, once a second, with a reporting trainer, recorded into ``path``."""
    now = [RECORDING_START]
    recorder = open_recorder(path)
    sampler = Sampler(SpeedSource(DemoSource("mixed", seed=1, clock=lambda: now[0])), 1.0, History(600),
                      recorder=recorder)
    for step in range(seconds):
        now[0] = RECORDING_START + step
        sampler.poll_once()
    recorder.close()
    return path
