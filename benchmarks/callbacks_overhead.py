"""Per-step cost of the framework callbacks (``GpusightTrainerCallback``, Lightning's ``GpusightCallback``).

The callbacks' hooks are called as the frameworks call them, once per step, around a forward pass of a model that
does nothing (so the model costs next to nothing and the difference is the callback's): Hugging Face's
``on_step_begin``, a forward pass (the counting hook reads the batch's shapes) and ``on_step_end``; Lightning's
``on_train_batch_start`` with the batch and ``on_train_batch_end``. Publishing is on (every 0.25 s, as by default);
the FLOP count and the profiling are off (their cost is the meter's, in ``benchmarks/torch_overhead.py``). Each
loop runs bare and with the callback, interleaved, repeated; the median difference per step is the cost, reported
with the spread and as a share of a 50 ms step. Run: ``python benchmarks/callbacks_overhead.py``; it prints Markdown.
"""

from __future__ import annotations

import os
import platform
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from gpusight.torch.huggingface import GpusightTrainerCallback
from gpusight.torch.lightning import GpusightCallback

STEPS = 20_000
"""Steps per timed loop."""
REPEATS = 7
"""Timed loops per variant."""
MODEL_STEP_SECONDS = 0.050
"""The step the share is stated for."""
TIMING_ONLY: dict[str, Any] = {"flops": None, "profile_every": None}


class Nothing(torch.nn.Module):
    """A model whose forward pass returns its input ids."""

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return input_ids


def huggingface_loop(callback: GpusightTrainerCallback | None, model: Nothing, batch: dict[str, torch.Tensor]) -> float:
    """Seconds per step of a Trainer-like loop: the hooks a Trainer calls per optimizer step, around one forward."""
    control = SimpleNamespace(should_evaluate=False, should_save=False)
    args = SimpleNamespace(per_device_train_batch_size=8, gradient_accumulation_steps=1)
    if callback is not None:
        callback.on_train_begin(args, None, control, model=model, train_dataloader=None)
        callback.on_epoch_begin(None, None, control)
    start = time.perf_counter()
    for _ in range(STEPS):
        if callback is not None:
            callback.on_step_begin(None, None, control)
        model(**batch)
        if callback is not None:
            callback.on_step_end(None, None, control)
    elapsed = time.perf_counter() - start
    if callback is not None:
        callback.on_epoch_end(None, None, control)
        callback.on_train_end(None, None, control)
    return elapsed / STEPS


def lightning_loop(callback: GpusightCallback | None, model: Nothing, batch: dict[str, torch.Tensor]) -> float:
    """Seconds per step of a fit-loop-like loop: the hooks Lightning calls per batch, around one forward."""
    trainer = SimpleNamespace(train_dataloader=None)
    if callback is not None:
        callback.on_train_start(trainer, model)
        callback.on_train_epoch_start(trainer, model)
    start = time.perf_counter()
    for index in range(STEPS):
        if callback is not None:
            callback.on_train_batch_start(trainer, model, batch, index)
        model(**batch)
        if callback is not None:
            callback.on_train_batch_end(trainer, model, None, batch, index)
    elapsed = time.perf_counter() - start
    if callback is not None:
        callback.on_train_epoch_end(trainer, model)
        callback.on_train_end(trainer, model)
    return elapsed / STEPS


def measure(name: str, loop: Any, make: Any, directory: Path) -> str:
    """One Markdown row: the callback's median cost per step, its spread, and its share of a 50 ms step."""
    model = Nothing()
    batch = {"input_ids": torch.zeros(8, 128, dtype=torch.long), "labels": torch.zeros(8, 128, dtype=torch.long)}
    costs = []
    for _ in range(REPEATS):
        bare = loop(None, model, batch)
        measured = loop(make(directory=directory, **TIMING_ONLY), model, batch)
        costs.append(measured - bare)
    median = statistics.median(costs)
    return (f"| {name} | {median * 1e6:.1f} µs | {min(costs) * 1e6:.1f}-{max(costs) * 1e6:.1f} µs | "
            f"{median / MODEL_STEP_SECONDS * 100:.3f} % |")


def main() -> None:
    """Print the report."""
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as folder:
        directory = Path(folder) / "gpusight"
        rows = [measure("Hugging Face `GpusightTrainerCallback`", huggingface_loop, GpusightTrainerCallback, directory),
                measure("Lightning `GpusightCallback`", lightning_loop, GpusightCallback, directory)]
    print(f"torch {torch.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs "
          f"({platform.processor() or platform.machine()}); {STEPS} steps x {REPEATS} repeats, load "
          f"{os.getloadavg()[0]:.1f}\n")
    print("| callback | cost per step (median) | spread | share of a 50 ms step |")
    print("| --- | --- | --- | --- |")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
