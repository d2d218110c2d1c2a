"""The benchmark machine: the project's fake NVML with 8 H100-like GPUs and 64 real sleeping processes.

PCIe throughput reads block for 20 ms each, as on real hardware, and the GPUs expose neither the
cumulative PCIe field counters nor GPM, so every tool has to take the slow
``nvmlDeviceGetPcieThroughput`` path. The library every tool loads is ``peer_nvml_shim.c`` on top of
the project's fake (tests/fakenvml/fake_nvml.c): the shim adds the calls nvitop and nvtop need at
start-up (PCI info, link width, ...) with constant, non-blocking answers.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""Repository root."""

sys.path.insert(0, str(REPO / "tests"))
from support.fake_nvml import LIBRARY_NAME, SOURCE, FakeGpu, FakeScenario, fake_nvml_env

GPU_COUNT = 8
"""GPUs in the scenario."""

PROCESS_COUNT = 64
"""Real sleeping processes, spread evenly over the GPUs."""

PCIE_DELAY_MS = 20
"""Blocking time of each nvmlDeviceGetPcieThroughput call."""

GIB = 1 << 30

LAST_GPU_UTILIZATION_TEXT = f"{40 + 7 * (GPU_COUNT - 1)}%"
"""How every tool writes the last GPU's utilization (``util_gpu`` of ``make_scenario``): on screen, all GPUs are."""

SHIM_SOURCE = Path(__file__).resolve().with_name("peer_nvml_shim.c")
"""C source of the extra entry points the peers need."""

CORE_NAME = "libfakenvml-core.so"
"""File name and SONAME of the fake core inside the benchmark's library folder."""


def build_bench_nvml(folder: Path) -> Path:
    """Compile the fake core and the shim into ``folder``; return the path of its ``libnvidia-ml.so.1``."""
    folder.mkdir(parents=True, exist_ok=True)
    compiler = os.environ.get("CC") or shutil.which("cc") or "cc"
    commands = [
        [compiler, "-shared", "-fPIC", "-O2", f"-Wl,-soname,{CORE_NAME}", "-o", str(folder / CORE_NAME),
         str(SOURCE), "-lpthread"],
        [compiler, "-shared", "-fPIC", "-O2", "-Wall", f"-Wl,-soname,{LIBRARY_NAME}", "-o", str(folder / LIBRARY_NAME),
         str(SHIM_SOURCE), "-Wl,--no-as-needed", f"-L{folder}", "-l:" + CORE_NAME, "-Wl,-rpath,$ORIGIN"],
    ]
    for command in commands:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"building the benchmark NVML failed: {' '.join(command)}\n{result.stderr}")
    return folder / LIBRARY_NAME


@dataclass(frozen=True)
class BenchMachine:
    """A running benchmark scenario: the fake library, the scenario file and the sleeping processes."""

    library: Path
    """The built fake ``libnvidia-ml.so.1``."""
    scenario: Path
    """The scenario file the fake reads."""
    pids: tuple[int, ...]
    """Pids of the sleeping processes the GPUs report."""

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``base`` plus what makes a child load the fake NVML with this scenario."""
        return fake_nvml_env(self.library, self.scenario, base=base)


def make_scenario(pids: list[int]) -> FakeScenario:
    """8 busy H100s without PCIe counters or GPM; ``pids`` spread evenly over them."""
    now_us = int(time.time() * 1e6)
    gpus = []
    per_gpu = max(1, len(pids) // GPU_COUNT)
    for index in range(GPU_COUNT):
        mine = pids[index * per_gpu : (index + 1) * per_gpu]
        gpus.append(
            FakeGpu(
                util_gpu=40 + 7 * index,
                util_mem=15 + 3 * index,
                mem_used=(8 + 8 * index) * GIB,
                power_mw=200_000 + 40_000 * index,
                temp=40 + 3 * index,
                pcie_tx_kbps=1_000_000 + 100_000 * index,
                pcie_rx_kbps=4_000_000 + 200_000 * index,
                compute_processes=[(pid, (1 + slot) * GIB) for slot, pid in enumerate(mine)],
                process_samples=[(pid, 5 * (1 + slot), 2 * (1 + slot), now_us) for slot, pid in enumerate(mine)],
            )
        )
    return FakeScenario(gpus=gpus, pcie_delay_ms=PCIE_DELAY_MS)


@contextmanager
def bench_machine(workdir: Path) -> Iterator[BenchMachine]:
    """Build the fake, start the sleeping processes and write the scenario; kill the processes afterwards."""
    library = build_bench_nvml(workdir / "nvml")
    sleepers = [subprocess.Popen(["sleep", "86400"]) for _ in range(PROCESS_COUNT)]
    try:
        scenario = make_scenario([p.pid for p in sleepers]).write(workdir / "scenario.txt")
        yield BenchMachine(library, scenario, tuple(p.pid for p in sleepers))
    finally:
        for proc in sleepers:
            proc.kill()
        for proc in sleepers:
            proc.wait()
