"""Overhead of ``gpusight.torch.watch`` per training step, and its share of a 10 ms step.

Three measurements, each repeated and reported as the median (and the spread) of the repeats:

1. *Per-step cost*: a loop over an in-memory iterable with an empty body, bare and wrapped (with
   publishing on, every 0.25 s as by default). The difference per step is the wrapper's fixed cost.
2. *Publish cost*: one status record written (window statistics, loader settings, CUDA probe,
   JSON, temporary file, rename), timed over many writes. At most four happen per second.
3. *10 ms steps, A/B*: a DataLoader over a TensorDataset with a body that busy-waits 10 ms, bare,
   wrapped and bare again, interleaved; the wall time per step is compared directly, and the two bare
   runs show how much of a difference the machine's noise alone makes.

The worst-case share of a 10 ms step is ``per-step cost / 10 ms + publish cost x publishes per
second x 10 ms / 10 ms``, i.e. the fixed cost plus the publishing amortised over the steps between
two records. Run: ``python benchmarks/torch_overhead.py [--quick]``; it prints a Markdown report.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import psutil
import torch
from torch.utils.data import DataLoader, TensorDataset

import gpusight
import gpusight.torch as gt
from gpusight.torch.watch import DEFAULT_PUBLISH_INTERVAL

STEP_SECONDS = 0.010
"""The synthetic step the target is stated for."""


def busy(seconds: float) -> None:
    """Burn CPU for ``seconds`` (a stand-in for a training step that does not yield the CPU)."""
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        pass


def loop_seconds(batches: Iterable[object], body: Callable[[], None] | None) -> tuple[float, int]:
    """Wall seconds to iterate ``batches`` running ``body`` per batch, and the number of steps."""
    steps = 0
    started = time.perf_counter()
    if body is None:
        for _ in batches:
            steps += 1
    else:
        for _ in batches:
            body()
            steps += 1
    return time.perf_counter() - started, steps


def per_step_cost_ns(directory: Path, steps: int, repeats: int) -> tuple[list[float], list[float]]:
    """Nanoseconds per empty step, bare and wrapped, one value per repeat each."""
    data = list(range(steps))
    bare, wrapped = [], []
    for _ in range(repeats):
        seconds, count = loop_seconds(data, None)
        bare.append(seconds / count * 1e9)
        batches = gt.watch(data, directory=directory)
        seconds, count = loop_seconds(batches, None)
        batches.close()
        wrapped.append(seconds / count * 1e9)
    return bare, wrapped


def publish_cost_us(directory: Path, records: int, repeats: int) -> list[float]:
    """Microseconds per published record (the wrapper's own publish path, with a real DataLoader's settings)."""
    loader = DataLoader(TensorDataset(torch.zeros(records + 1, 4)), batch_size=1)
    costs = []
    for _ in range(repeats):
        # An interval this small makes every step publish, so the loop time is the publish time.
        batches = gt.watch(loader, directory=directory, publish_interval=1e-12)
        seconds, count = loop_seconds(batches, None)
        batches.close()
        quiet = gt.watch(loader, publish=False)
        base, _ = loop_seconds(quiet, None)
        costs.append((seconds - base) / count * 1e6)
    return costs


def ab_step_ms(directory: Path, steps: int, repeats: int) -> tuple[list[float], list[float], list[float]]:
    """Milliseconds per 10 ms step over a real DataLoader: bare, wrapped, and bare again (the noise floor).

    The three runs are interleaved in each repeat, so load from other processes falls on all of them.
    """
    loader = DataLoader(TensorDataset(torch.randn(steps * 8, 16)), batch_size=8)
    bare, wrapped, control = [], [], []
    for _ in range(repeats):
        seconds, count = loop_seconds(loader, lambda: busy(STEP_SECONDS))
        bare.append(seconds / count * 1e3)
        batches = gt.watch(loader, directory=directory)
        seconds, count = loop_seconds(batches, lambda: busy(STEP_SECONDS))
        batches.close()
        wrapped.append(seconds / count * 1e3)
        seconds, count = loop_seconds(loader, lambda: busy(STEP_SECONDS))
        control.append(seconds / count * 1e3)
    return bare, wrapped, control


def spread(values: list[float], digits: int) -> str:
    """``median (min-max)`` of ``values``."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    """Run the three measurements and print the Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats (a smoke run)")
    args = parser.parse_args()
    empty_steps, records, ab_steps, repeats = (100_000, 500, 100, 3) if args.quick else (1_000_000, 5_000, 500, 7)

    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder) / "gpusight"
        bare_ns, wrapped_ns = per_step_cost_ns(directory, empty_steps, repeats)
        publish_us = publish_cost_us(directory, records, repeats)
        bare_ms, wrapped_ms, control_ms = ab_step_ms(directory, ab_steps, repeats)

    step_cost_ns = statistics.median(wrapped_ns) - statistics.median(bare_ns)
    publishes_per_step = STEP_SECONDS / DEFAULT_PUBLISH_INTERVAL
    amortised_us = step_cost_ns / 1000 + statistics.median(publish_us) * publishes_per_step
    share = amortised_us / (STEP_SECONDS * 1e6) * 100
    ab_share = (statistics.median(wrapped_ms) / statistics.median(bare_ms) - 1) * 100
    noise = (statistics.median(control_ms) / statistics.median(bare_ms) - 1) * 100

    print("# gpusight.torch overhead")
    print()
    print(f"- date: {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"- machine: {platform.machine()}, {psutil.cpu_count()} logical CPUs, {platform.platform()}, "
          f"load average {os.getloadavg()[0]:.2f} at the end")
    print(f"- versions: Python {platform.python_version()}, torch {torch.__version__}, gpusight {gpusight.__version__}")
    print(f"- repeats: {repeats} (median, with min-max)")
    print()
    print("| measurement | bare | with watch() | difference |")
    print("|---|---|---|---|")
    print(f"| empty step, ns ({empty_steps:,} steps) | {spread(bare_ns, 0)} | {spread(wrapped_ns, 0)} | "
          f"{step_cost_ns:.0f} ns per step |")
    print(f"| one status record written, us ({records:,} records) | | {spread(publish_us, 1)} | at most 4 per second |")
    print(f"| 10 ms step over a DataLoader, ms ({ab_steps} steps) | {spread(bare_ms, 3)} | {spread(wrapped_ms, 3)} | "
          f"{ab_share:+.2f} % measured A/B |")
    print(f"| the same, bare again (noise floor), ms | {spread(bare_ms, 3)} | {spread(control_ms, 3)} (bare) | "
          f"{noise:+.2f} % between two bare runs |")
    print()
    print(f"Worst-case overhead for a {STEP_SECONDS * 1000:.0f} ms step: {step_cost_ns:.0f} ns fixed + "
          f"{statistics.median(publish_us):.0f} us x {publishes_per_step:.3f} publishes per step = "
          f"{amortised_us:.2f} us = **{share:.3f} %** of the step (target: below 1 %).")


if __name__ == "__main__":
    main()
