"""The running benchmark machine: the fake NVML, 64 real processes and a mover that keeps the figures moving.

The mover is a thread of the benchmark process, outside every measured process tree. About every
0.1 s it rewrites the scenario file (atomically; the fake re-reads it when it changes) with the
figures of ``waves.py`` for the time since the last :meth:`Mover.restart`, and every 5 s it replaces
one of the sleeping processes with a new one, so the GPUs' process lists change during a run. Each
tool run starts with a restart, so every tool sees the same figures and the same process turnover at
the same moment of its life. In the constant mode it writes the old, unchanging scenario once.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from scenario import build_bench_nvml, fake_nvml_env
from waves import PROCESS_COUNT, make_scenario

WRITE_PERIOD_S = 0.1
"""Time between two rewrites of the scenario in the moving mode."""

CHURN_PERIOD_S = 5.0
"""Time between two process replacements in the moving mode."""

CHURN_STRIDE = 13
"""Slot step between two replacements (coprime with 64, so every GPU's list changes in turn)."""


@dataclass(frozen=True)
class MoverStats:
    """What the mover did since its last restart."""

    moving: bool
    """True for the moving scenario, False for the constant one."""
    writes: int
    """Scenario files written."""
    churned: int
    """Processes replaced."""


def spawn_sleeper() -> subprocess.Popen[bytes]:
    """A real process for a GPU to list."""
    return subprocess.Popen(["sleep", "86400"], stdin=subprocess.DEVNULL)


class Mover:
    """Rewrites ``path`` from a thread: moving figures and process turnover, or the constant scenario."""

    def __init__(self, path: Path, write_period_s: float = WRITE_PERIOD_S, churn_period_s: float = CHURN_PERIOD_S):
        self.path = path
        """The scenario file."""
        self.write_period_s = write_period_s
        """Time between two rewrites."""
        self.churn_period_s = churn_period_s
        """Time between two process replacements."""
        self.sleepers = [spawn_sleeper() for _ in range(PROCESS_COUNT)]
        """The processes the GPUs list, by slot."""
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._moving = True
        self._started = time.monotonic()
        self._writes = 0
        self._churned = 0
        self._write(None)
        self._thread = threading.Thread(target=self._loop, name="bench-mover", daemon=True)
        self._thread.start()

    @property
    def pids(self) -> list[int]:
        """Pids of the current processes, by slot."""
        return [proc.pid for proc in self.sleepers]

    def restart(self, moving: bool = True) -> None:
        """Start the figures and the turnover again from time 0 (``moving``) or write the constant scenario."""
        with self._lock:
            self._moving = moving
            self._started = time.monotonic()
            self._writes = self._churned = 0
            self._write(0.0 if moving else None)

    def stats(self) -> MoverStats:
        """What happened since the last restart."""
        with self._lock:
            return MoverStats(self._moving, self._writes, self._churned)

    def _loop(self) -> None:
        while not self._stop.wait(self.write_period_s):
            with self._lock:
                if not self._moving:
                    continue
                t = time.monotonic() - self._started
                while (self._churned + 1) * self.churn_period_s <= t:
                    self._churn()
                self._write(t)

    def _churn(self) -> None:
        """Replace one process: the new one is listed and the old one gone from the list before it is killed."""
        slot = (self._churned * CHURN_STRIDE) % PROCESS_COUNT
        old, self.sleepers[slot] = self.sleepers[slot], spawn_sleeper()
        self._churned += 1
        self._write(time.monotonic() - self._started)
        old.kill()
        old.wait()

    def _write(self, t: float | None) -> None:
        make_scenario(t, self.pids, int(time.time() * 1e6)).write(self.path)
        self._writes += 1

    def close(self) -> None:
        """Stop the thread and kill every process."""
        self._stop.set()
        self._thread.join()
        for proc in self.sleepers:
            proc.kill()
        for proc in self.sleepers:
            proc.wait()


@dataclass(frozen=True)
class BenchMachine:
    """A running benchmark machine: the fake library and the mover of its scenario file."""

    library: Path
    """The built fake ``libnvidia-ml.so.1``."""
    mover: Mover
    """Keeps the scenario file moving."""

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` plus what makes a child load the fake NVML with this scenario."""
        return fake_nvml_env(self.library, self.mover.path, base=base)


@contextmanager
def bench_machine(workdir: Path) -> Iterator[BenchMachine]:
    """Build the fake, start the processes and the mover (moving from now); stop them all afterwards."""
    library = build_bench_nvml(workdir / "nvml")
    mover = Mover(workdir / "scenario.txt")
    try:
        mover.restart(moving=True)
        yield BenchMachine(library, mover)
    finally:
        mover.close()
