"""Overhead of ``gpusight.torch.watch`` per training step: its share of a 10 ms step, and of a 50 ms model step.

Four measurements, each repeated and reported as the median (and the spread) of the repeats:

1. *Per-step cost*: a loop over an in-memory iterable with an empty body, bare and wrapped (with
   publishing on, every 0.25 s as by default; in 1-3 the FLOP count and the profiling are off, see 4). The difference per step is the wrapper's fixed cost.
2. *Publish cost*: one status record written (window statistics, loader settings, CUDA probe,
   JSON, temporary file, rename), timed over many writes. At most four happen per second.
3. *10 ms steps, A/B*: a DataLoader over a TensorDataset with a body that busy-waits 10 ms, bare,
   wrapped and bare again, interleaved; the wall time per step is compared directly, and the two bare
   runs show how much of a difference the machine's noise alone makes.

4. *Speed meter on a 50 ms model step*: an MLP trained with SGD on CPU torch (one thread; real matrix
   multiplications, not sleep), stepped through ``watch()`` as by default (throughput read from the batch, the
   FLOPs counted on one early step, and one step in every ``MEASURED_PROFILE_EVERY`` profiled, so that many
   profiled steps are timed). Each step is timed from batch to batch; the counted and the profiled steps' extra time
   over the median plain step is their cost (the first profiled step, which starts the profiler library,
   separately), and a profiled step's cost is amortised over ``DEFAULT_PROFILE_EVERY`` steps, the default. The
   fixed per-step cost with the throughput read is measured as in 1, with (features, labels) tensor batches.

The worst-case share of a 10 ms step is ``per-step cost / 10 ms + publish cost x publishes per
second x 10 ms / 10 ms``, i.e. the fixed cost plus the publishing amortised over the steps between
two records. For the 50 ms step the counted step (once per run) and a profiled step (once every
``DEFAULT_PROFILE_EVERY`` steps) are amortised on top. Run: ``python benchmarks/torch_overhead.py [--quick]``;
it prints a Markdown report.
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
from typing import Any

import psutil
import torch
from torch.utils.data import DataLoader, TensorDataset

import gpusight
import gpusight.torch as gt
from gpusight.torch.meter import COUNT_STEP, DEFAULT_PROFILE_EVERY, FIRST_PROFILED_STEP
from gpusight.torch.watch import DEFAULT_PUBLISH_INTERVAL

STEP_SECONDS = 0.010
"""The synthetic step the target is stated for."""
TIMING_ONLY: dict[str, Any] = {"flops": None, "profile_every": None}
"""``watch()`` arguments for measurements 1-3: timing only, as before the speed meter (measured in 4)."""
MODEL_STEP_SECONDS = 0.050
"""The model step the speed meter's target is stated for (the MLP below takes about this long on one core)."""
MLP_WIDTH, MLP_DEPTH, MLP_BATCH = 1024, 4, 128
"""The benchmark model: hidden width, hidden layers and batch size."""
MEASURED_PROFILE_EVERY = 10
"""Profile one step in this many in measurement 4, to time many profiled steps; their cost is then amortised over
``DEFAULT_PROFILE_EVERY``."""


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
        batches = gt.watch(data, directory=directory, **TIMING_ONLY)
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
        batches = gt.watch(loader, directory=directory, publish_interval=1e-12, **TIMING_ONLY)
        seconds, count = loop_seconds(batches, None)
        batches.close()
        quiet = gt.watch(loader, publish=False, **TIMING_ONLY)
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
        batches = gt.watch(loader, directory=directory, **TIMING_ONLY)
        seconds, count = loop_seconds(batches, lambda: busy(STEP_SECONDS))
        batches.close()
        wrapped.append(seconds / count * 1e3)
        seconds, count = loop_seconds(loader, lambda: busy(STEP_SECONDS))
        control.append(seconds / count * 1e3)
    return bare, wrapped, control


def throughput_cost_ns(directory: Path, steps: int, repeats: int) -> tuple[list[float], list[float]]:
    """Nanoseconds per empty step over (features, labels) tensor batches, bare and with ``watch()`` reading the
    samples per step (no FLOP count, no profiling), one value per repeat each."""
    batch = (torch.zeros(8, 4), torch.zeros(8, dtype=torch.long))
    data = [batch] * steps
    bare, wrapped = [], []
    for _ in range(repeats):
        seconds, count = loop_seconds(data, None)
        bare.append(seconds / count * 1e9)
        batches = gt.watch(data, directory=directory, flops=None, profile_every=None)
        seconds, count = loop_seconds(batches, None)
        batches.close()
        wrapped.append(seconds / count * 1e9)
    return bare, wrapped


def model_step_times(directory: Path, steps: int) -> list[float]:
    """Seconds of each step (batch to batch) of the benchmark MLP trained through ``watch()`` with the defaults."""
    layers: list[torch.nn.Module] = []
    for _ in range(MLP_DEPTH):
        layers += [torch.nn.Linear(MLP_WIDTH, MLP_WIDTH), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(MLP_WIDTH, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    data = [(torch.randn(MLP_BATCH, MLP_WIDTH), torch.randint(0, 10, (MLP_BATCH,))) for _ in range(8)]
    batches = gt.watch((data[index % len(data)] for index in range(steps)), model=model, directory=directory,
                       profile_every=MEASURED_PROFILE_EVERY)
    times = []
    last = time.perf_counter()
    for features, labels in batches:
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        now = time.perf_counter()
        times.append(now - last)
        last = now
    batches.close()
    return times


def instrument_costs(times: list[float]) -> tuple[float, float, float, list[float]]:
    """(median plain step, counted step's extra, first profiled step's extra, later profiled steps' extra), seconds.

    A step's time as seen from the loop body ends when its body ends, so the instrument's work at the end of step
    ``i`` (stopping the counter or the profiler, reading its events) shows in step ``i + 1``'s time.
    """
    profiled = set(range(FIRST_PROFILED_STEP, len(times), MEASURED_PROFILE_EVERY))
    touched = {COUNT_STEP, COUNT_STEP + 1} | profiled | {index + 1 for index in profiled}
    plain = statistics.median(t for index, t in enumerate(times) if index not in touched and index > COUNT_STEP)

    def extra(index: int) -> float:
        return sum(times[index:index + 2]) - 2 * plain

    later = [extra(index) for index in sorted(profiled)[1:] if index + 1 < len(times)]
    return plain, extra(COUNT_STEP), extra(FIRST_PROFILED_STEP), later


def spread(values: list[float], digits: int) -> str:
    """``median (min-max)`` of ``values``."""
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main() -> None:
    """Run the three measurements and print the Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats (a smoke run)")
    args = parser.parse_args()
    empty_steps, records, ab_steps, repeats = (100_000, 500, 100, 3) if args.quick else (1_000_000, 5_000, 500, 7)
    model_steps = 20 * MEASURED_PROFILE_EVERY if args.quick else 80 * MEASURED_PROFILE_EVERY

    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder) / "gpusight"
        bare_ns, wrapped_ns = per_step_cost_ns(directory, empty_steps, repeats)
        publish_us = publish_cost_us(directory, records, repeats)
        bare_ms, wrapped_ms, control_ms = ab_step_ms(directory, ab_steps, repeats)
        plain_tensor_ns, read_ns = throughput_cost_ns(directory, empty_steps, repeats)
        torch.set_num_threads(1)
        times = model_step_times(directory, model_steps)
    plain_s, counted_s, first_profile_s, profiled_s = instrument_costs(times)

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
    print()
    report_speed_meter(statistics.median(read_ns) - statistics.median(plain_tensor_ns), plain_tensor_ns, read_ns,
                       statistics.median(publish_us), (plain_s, counted_s, first_profile_s, profiled_s), len(times))


def report_speed_meter(read_ns: float, plain_ns: list[float], wrapped_ns: list[float], publish_us: float,
                       costs: tuple[float, float, float, list[float]], steps: int) -> None:
    """Print the speed meter's section: its per-step and per-instrument costs and their share of a 50 ms step."""
    plain_s, counted_s, first_profile_s, profiled_s = costs
    profiled = statistics.median(profiled_s) if profiled_s else float("nan")
    publishes_per_step = plain_s / DEFAULT_PUBLISH_INTERVAL
    fixed_share = (read_ns * 1e-9 + publish_us * 1e-6 * publishes_per_step) / plain_s * 100
    profile_share = profiled / DEFAULT_PROFILE_EVERY / plain_s * 100
    count_share = counted_s / 10_000 / plain_s * 100
    print(f"## Speed meter on a model step ({MLP_DEPTH} x {MLP_WIDTH} MLP, batch {MLP_BATCH}, one thread, "
          f"{steps} steps)")
    print()
    print("| measurement | value | share of the measured step |")
    print("|---|---|---|")
    print(f"| plain step (median), ms | {plain_s * 1e3:.1f} | |")
    print(f"| empty step with tensor batches, bare / watch() with throughput, ns | {spread(plain_ns, 0)} / "
          f"{spread(wrapped_ns, 0)} | {read_ns:.0f} ns per step |")
    print(f"| timing + throughput + publishing, per step | {read_ns / 1e3 + publish_us * publishes_per_step:.1f} us "
          f"| {fixed_share:.4f} % |")
    print(f"| + the FLOP-counted step (once per run), extra ms | {counted_s * 1e3:.1f} | "
          f"{count_share:.4f} % over 10,000 steps |")
    print(f"| + the first profiled step (starts the profiler library, once), extra ms | {first_profile_s * 1e3:.1f} | |")
    print(f"| + each later profiled step, extra ms (median of {len(profiled_s)}; min-max "
          f"{min(profiled_s) * 1e3:.1f}-{max(profiled_s) * 1e3:.1f}) | {profiled * 1e3:.1f} | "
          f"{profile_share:.4f} % at one in {DEFAULT_PROFILE_EVERY} |")
    print()
    total = fixed_share + count_share + profile_share
    print(f"Average cost with the defaults: **{total:.3f} %** of a {plain_s * 1e3:.0f} ms step "
          f"(target: well under 1 % of a {MODEL_STEP_SECONDS * 1e3:.0f} ms step).")


if __name__ == "__main__":
    main()
