"""The benchmark machine's GPU figures: moving ones as a pure function of time, and the old constant ones.

8 H100-like GPUs with 8 processes each. In the moving scenario every figure a monitor charts moves:
utilization, memory-controller load, memory used, power, temperature, PCIe RX/TX and each process's
SM/memory share and GPU memory. Each (GPU, metric) pair follows its own sine wave, with periods
between 7 s and 60 s, except two GPUs: GPU 2 stalls and runs in turn (a 100/0 % square wave) and
GPU 5 idles at 10 % with a short burst to 100 % every 10 s. The waves depend on the time since the
scenario (re)started only, so every tool run sees the same figures at the same moment of its life.

The last GPU is power-capped at 690 W (the others at 700 W) and power never reaches 650 W, so "690"
followed by a W appears on a screen only once the last GPU's sampled power limit is drawn: that is
the first-frame marker for every tool.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from scenario import FakeGpu, FakeScenario

GPU_COUNT = 8
"""GPUs in the scenario."""

PROCESS_COUNT = 64
"""Real processes, 8 per GPU (slot ``s`` runs on GPU ``s // 8``)."""

PER_GPU = PROCESS_COUNT // GPU_COUNT
"""Processes per GPU."""

PCIE_DELAY_MS = 20
"""Blocking time of each nvmlDeviceGetPcieThroughput call."""

GIB = 1 << 30

POWER_LIMIT_MW = 700_000
"""Power limit of every GPU but the last."""

LAST_GPU_POWER_LIMIT_MW = 690_000
"""Power limit of the last GPU (the first-frame marker)."""

MAX_POWER_MW = 650_000
"""Power draw never goes above this, so no drawn power reading can look like the last GPU's limit."""

FIRST_FRAME_MARKER = re.compile(rb"690 ?W")
"""How gpusight (``480/690W``), nvitop (``480W / 690W``) and nvtop (``480 / 690 W``) draw the last GPU's limit."""

SQUARE_GPU = 2
"""GPU whose utilization is a square wave: 4 s at 100 %, 4 s at 0 % (a job that stalls on I/O)."""

SQUARE_PERIOD_S = 8.0
"""Period of the square wave."""

BURST_GPU = 5
"""GPU idling at 10 % with a short burst to 100 % every ``BURST_EVERY_S``."""

BURST_EVERY_S = 10.0
"""Time between the starts of two bursts."""

BURST_S = 1.5
"""Length of a burst."""

BURST_AT_S = 6.5
"""Offset of the first burst in each ``BURST_EVERY_S`` period."""

METRICS = ("util_gpu", "util_mem", "mem_used", "power", "temp", "pcie_rx", "pcie_tx", "proc_share")
"""Quantities with a wave of their own, per GPU."""


def period_s(gpu: int, metric: str) -> float:
    """Period of ``metric``'s wave on ``gpu``: a whole number of seconds from 7 to 60, different per pair."""
    return 7.0 + (gpu * 13 + METRICS.index(metric) * 29) % 54


def wave(t: float, gpu: int, metric: str) -> float:
    """``metric``'s sine on ``gpu`` at ``t`` seconds, in [-1, 1], with a phase of its own."""
    phase = 0.7 * gpu + 1.3 * METRICS.index(metric)
    return math.sin(2 * math.pi * t / period_s(gpu, metric) + phase)


def util_gpu(t: float, gpu: int) -> int:
    """GPU utilization, percent."""
    if gpu == SQUARE_GPU:
        return 100 if t % SQUARE_PERIOD_S < SQUARE_PERIOD_S / 2 else 0
    if gpu == BURST_GPU:
        return 100 if BURST_AT_S <= t % BURST_EVERY_S < BURST_AT_S + BURST_S else 10
    return round(55 + 40 * wave(t, gpu, "util_gpu"))


def moving_gpu(t: float, gpu: int, pids: Sequence[int], now_us: int) -> FakeGpu:
    """GPU ``gpu`` at ``t`` seconds with processes ``pids``; ``now_us`` stamps the per-process samples."""
    util = util_gpu(t, gpu)
    util_mem = round(util * (0.3 + 0.1 * wave(t, gpu, "util_mem")))
    mem_used = round((40 + 30 * wave(t, gpu, "mem_used")) * GIB)
    power = round(90_000 + 4_500 * util + 40_000 * wave(t, gpu, "power"))
    share = [(1 + slot) * (1.2 + wave(t, gpu, "proc_share") * (slot - PER_GPU / 2) / PER_GPU)
             for slot in range(len(pids))]
    total = sum(share) or 1.0
    return FakeGpu(
        util_gpu=util,
        util_mem=util_mem,
        mem_used=mem_used,
        power_mw=min(MAX_POWER_MW, power),
        power_limit_mw=LAST_GPU_POWER_LIMIT_MW if gpu == GPU_COUNT - 1 else POWER_LIMIT_MW,
        temp=round(50 + 15 * wave(t, gpu, "temp")),
        pcie_rx_kbps=0 if util == 0 else round(6_000_000 + 5_500_000 * wave(t, gpu, "pcie_rx")),
        pcie_tx_kbps=0 if util == 0 else round(2_000_000 + 1_800_000 * wave(t, gpu, "pcie_tx")),
        compute_processes=[(pid, round(mem_used * part / total)) for pid, part in zip(pids, share, strict=True)],
        process_samples=[(pid, round(util * part / total), round(util_mem * part / total), now_us)
                         for pid, part in zip(pids, share, strict=True)],
    )


def constant_gpu(gpu: int, pids: Sequence[int], now_us: int) -> FakeGpu:
    """GPU ``gpu`` of the old, constant scenario: busy at 40 + 7 x index % and never changing."""
    return FakeGpu(
        util_gpu=40 + 7 * gpu,
        util_mem=15 + 3 * gpu,
        mem_used=(8 + 8 * gpu) * GIB,
        power_mw=200_000 + 40_000 * gpu,
        power_limit_mw=LAST_GPU_POWER_LIMIT_MW if gpu == GPU_COUNT - 1 else POWER_LIMIT_MW,
        temp=40 + 3 * gpu,
        pcie_tx_kbps=1_000_000 + 100_000 * gpu,
        pcie_rx_kbps=4_000_000 + 200_000 * gpu,
        compute_processes=[(pid, (1 + slot) * GIB) for slot, pid in enumerate(pids)],
        process_samples=[(pid, 5 * (1 + slot), 2 * (1 + slot), now_us) for slot, pid in enumerate(pids)],
    )


def make_scenario(t: float | None, pids: Sequence[int], now_us: int) -> FakeScenario:
    """The whole machine at ``t`` seconds (None: the constant scenario); ``pids`` fill the slots in order.

    No GPU exposes the PCIe byte counters or GPM, so every tool takes the slow
    ``nvmlDeviceGetPcieThroughput`` path, which blocks ``PCIE_DELAY_MS`` per call.
    """
    gpus = []
    for gpu in range(GPU_COUNT):
        mine = pids[gpu * PER_GPU : (gpu + 1) * PER_GPU]
        gpus.append(constant_gpu(gpu, mine, now_us) if t is None else moving_gpu(t, gpu, mine, now_us))
    return FakeScenario(gpus=gpus, pcie_delay_ms=PCIE_DELAY_MS)
