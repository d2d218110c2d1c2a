"""Memory after a simulated long run: a day of 4 Hz snapshots pushed through the sampler's history, chart grid
and advice.

Run as a child process with the fake NVML in its environment: it takes one real snapshot of the
benchmark machine (NVML plus psutil), then feeds varied copies of it, 0.25 s apart in snapshot time,
through a ``Sampler`` with the stock ``History``, ``TimeGrid`` and ``AdviceEngine``. Every four
simulated hours the process ids change, as when a new training run starts. Then the same day goes
through a ``TimeGrid`` alone under ``tracemalloc``, which gives the memory the grid holds at the end.
Prints one JSON line: resident memory at the start, after the history filled, and at the end, the
wall time spent, and the grid's columns per zoom level and traced bytes.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import time
import tracemalloc
from pathlib import Path

from gpusight.advice.engine import AdviceEngine
from gpusight.backends.live import LiveSource
from gpusight.sampling.history import History
from gpusight.sampling.sampler import Sampler
from gpusight.sampling.timegrid import TimeGrid
from gpusight.snapshot.model import Snapshot, SourceKind

DAY_SAMPLES = 24 * 3600 * 4
"""Snapshots in a day at 4 Hz."""

STEP_S = 0.25
"""Snapshot time between two samples."""

PID_ROTATION_SAMPLES = 4 * 3600 * 4
"""Samples between two changes of every process id (a new training run every four hours)."""

PID_SHIFT = 100_000
"""Added to every process id at each rotation."""

WAVE_STEPS = 240
"""Samples in one cycle of the simulated GPU utilization (a minute at 4 Hz)."""


def rss_bytes() -> int:
    """Resident memory of this process (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


class SimulatedDay:
    """A snapshot source that replays ``base`` with moving values, timestamps and process ids."""

    kind = SourceKind.DEMO
    """Value of ``Snapshot.source`` for faults met while polling (the day is simulated, like the demo)."""

    def __init__(self, base: Snapshot) -> None:
        self.base = base
        """The real snapshot the day is made of."""
        self.count = 0
        """Snapshots produced so far."""
        self._device_waves = [
            tuple(
                dataclasses.replace(d, utilization_gpu_percent=100.0 * ((step / WAVE_STEPS + d.index / 8) % 1.0))
                for d in base.devices
            )
            for step in range(WAVE_STEPS)
        ]
        self._shift = 0
        self._processes = base.processes

    def poll(self) -> Snapshot:
        """The next snapshot, ``STEP_S`` later than the previous one."""
        i = self.count
        self.count += 1
        shift = (i // PID_ROTATION_SAMPLES) * PID_SHIFT
        if shift != self._shift:
            self._shift = shift
            self._processes = tuple(dataclasses.replace(p, pid=p.pid + shift) for p in self.base.processes)
        return dataclasses.replace(
            self.base,
            timestamp=self.base.timestamp + i * STEP_S,
            devices=self._device_waves[i % WAVE_STEPS],
            processes=self._processes,
        )

    def close(self) -> None:
        """Nothing to release."""


def grid_bytes(base: Snapshot, samples: int) -> int:
    """Bytes a ``TimeGrid`` holds after ``samples`` snapshots of the simulated day, traced by ``tracemalloc``."""
    day = SimulatedDay(base)
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        grid = TimeGrid()
        for _ in range(samples):
            grid.append(day.poll())
        del day
        after, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return after - before


def main() -> None:
    """Parse ``--samples`` and print the JSON result line."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=int, default=DAY_SAMPLES, help="snapshots to push (default: one day at 4 Hz)")
    args = parser.parse_args()
    live = LiveSource()
    live.poll()
    time.sleep(0.3)
    base = live.poll()
    live.close()
    history = History()
    sampler = Sampler(SimulatedDay(base), STEP_S, history, advisor=AdviceEngine(), grid=TimeGrid())
    start_rss = rss_bytes()
    filled_rss = None
    started = time.perf_counter()
    for i in range(args.samples):
        sampler.poll_once()
        if i + 1 == history.capacity:
            filled_rss = rss_bytes()
    elapsed = time.perf_counter() - started
    end_rss = rss_bytes()
    columns = [level.count + (level.current is not None) for level in sampler.grid.view.levels]
    traced = grid_bytes(base, args.samples)
    print(json.dumps({
        "samples": args.samples,
        "simulated_hours": args.samples * STEP_S / 3600,
        "devices": len(base.devices),
        "processes": len(base.processes),
        "history_capacity": history.capacity,
        "rss_start": start_rss,
        "rss_filled": filled_rss,
        "rss_end": end_rss,
        "wall_s": elapsed,
        "grid_columns": columns,
        "grid_traced_bytes": traced,
    }))


if __name__ == "__main__":
    main()
