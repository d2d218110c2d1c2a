"""A small, real PyTorch training job with knobs that make it input-bound or compute-bound, instrumented with gpusight.torch.

Run it beside ``gpusight`` and change the knobs to watch the advice react::

    python -m gpusight.examples.train --slow-ms 4 --num-workers 0     # starved: the loop waits for data
    python -m gpusight.examples.train --slow-ms 4 --num-workers 8 --pin-memory --persistent-workers

An MLP is trained on synthetic samples generated from their index. ``--slow-ms`` burns CPU per sample
(as decoding and augmentation do), ``--io-ms`` sleeps per sample (as slow storage does). It runs on
CUDA when available (``--device auto``), otherwise on the CPU, and prints its step rate and input-wait
share every few seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import gpusight.torch as gpusight_torch
from gpusight.examples import burn_cpu, run_until_interrupted

FEATURES = 256
"""Length of each synthetic input vector."""
CLASSES = 10
"""Number of target classes."""


class SyntheticDataset(Dataset[tuple[torch.Tensor, int]]):
    """Samples computed from their index, costing ``slow_ms`` of CPU and ``io_ms`` of sleep each."""

    def __init__(self, length: int, slow_ms: float, io_ms: float) -> None:
        """A dataset of ``length`` samples with the given per-sample costs."""
        self.length = length
        """Number of samples per epoch."""
        self.slow_ms = slow_ms
        """CPU time burnt per sample, in milliseconds."""
        self.io_ms = io_ms
        """Time slept per sample, in milliseconds."""

    def __len__(self) -> int:
        """Samples per epoch."""
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        """Sample ``index``: a feature vector and its class, after the configured delays."""
        if self.io_ms > 0:
            time.sleep(self.io_ms / 1000.0)
        burn_cpu(self.slow_ms)
        generator = torch.Generator().manual_seed(index)
        label = index % CLASSES
        features = torch.randn(FEATURES, generator=generator)
        features[label] += 2.0  # something learnable
        return features, label


def build_model(width: int, depth: int) -> nn.Module:
    """An MLP of ``depth`` hidden layers of ``width`` units."""
    layers: list[nn.Module] = []
    size = FEATURES
    for _ in range(depth):
        layers += [nn.Linear(size, width), nn.ReLU()]
        size = width
    layers.append(nn.Linear(size, CLASSES))
    return nn.Sequential(*layers)


def pick_device(choice: str) -> torch.device:
    """``cuda`` or ``cpu`` from ``auto|cpu|cuda``; asking for CUDA without it is an error."""
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: CUDA is not available here")
    return torch.device(choice)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line knobs."""
    parser = argparse.ArgumentParser(
        prog="python -m gpusight.examples.train",
        description="A small PyTorch training job on synthetic data, instrumented with gpusight.torch.",
    )
    parser.add_argument("--slow-ms", type=float, default=0.0, help="CPU milliseconds burnt per sample (decode cost)")
    parser.add_argument("--io-ms", type=float, default=0.0, help="milliseconds slept per sample (storage latency)")
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--batch-size", type=int, default=32, help="samples per batch")
    parser.add_argument("--pin-memory", action="store_true", help="DataLoader pin_memory=True")
    parser.add_argument("--persistent-workers", action="store_true", help="keep workers between epochs")
    parser.add_argument("--prefetch-factor", type=int, default=None, help="batches prefetched per worker")
    parser.add_argument("--amp", action="store_true", help="mixed precision (float16 on CUDA, bfloat16 on CPU)")
    parser.add_argument("--width", type=int, default=512, help="hidden units per layer")
    parser.add_argument("--depth", type=int, default=3, help="hidden layers")
    parser.add_argument("--samples", type=int, default=4096, help="samples per epoch")
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="where to train")
    parser.add_argument("--report-every", type=float, default=2.0, help="seconds between progress lines")
    parser.add_argument("--peak-tflops", type=float, default=None,
                        help="peak TFLOP/s for the MFU/HFU (needed on CPU; on a GPU the datasheet's is used)")
    args = parser.parse_args(argv)
    for name in ("slow_ms", "io_ms", "num_workers"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must not be negative")
    for name in ("batch_size", "width", "depth", "samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    check_loader_args(parser, args)
    return args


def check_loader_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse loader knobs that contradict each other (shared by the examples)."""
    if args.samples < args.batch_size:
        parser.error("--samples must be at least --batch-size (the last partial batch is dropped)")
    if args.prefetch_factor is not None and args.num_workers == 0:
        parser.error("--prefetch-factor needs --num-workers > 0")


def make_loader(
    args: argparse.Namespace, dataset: Dataset[tuple[torch.Tensor, int]]
) -> DataLoader[tuple[torch.Tensor, int]]:
    """The DataLoader over ``dataset`` that the loader knobs describe (shared by the examples)."""
    options = {}
    if args.num_workers > 0:
        options["persistent_workers"] = args.persistent_workers
        if args.prefetch_factor is not None:
            options["prefetch_factor"] = args.prefetch_factor
    return DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.num_workers,
        pin_memory=args.pin_memory,
        drop_last=True,
        **options,
    )


def _report(step: int, loss: float, stats: gpusight_torch.WindowStats) -> str:
    """One progress line."""
    if stats.steps_per_second is None or stats.input_wait_fraction is None or stats.step_seconds is None:
        return f"step {step:6d}  loss {loss:.3f}"
    line = (
        f"step {step:6d}  {stats.steps_per_second:7.1f} steps/s  step {stats.step_seconds * 1000:7.1f} ms  "
        f"input wait {stats.input_wait_fraction * 100:3.0f} %  loss {loss:.3f}"
    )
    if stats.samples_per_second is not None:
        line += f"  {stats.samples_per_second:8.0f} samples/s"
    if stats.flops_utilization_fraction is not None and stats.flops_source is not None:
        line += f"  {stats.flops_source.utilization_name} {stats.flops_utilization_fraction * 100:.1f} %"
    return line


def train(args: argparse.Namespace) -> int:
    """Train until ``--steps`` or ``--duration`` (or Ctrl-C); return the number of steps done."""
    device = pick_device(args.device)
    model = build_model(args.width, args.depth).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    amp_dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
    scaler = torch.amp.GradScaler(device.type, enabled=args.amp and device.type == "cuda")
    loader = make_loader(args, SyntheticDataset(args.samples, args.slow_ms, args.io_ms))
    batches = gpusight_torch.watch(loader, name="train", model=model, peak_tflops=args.peak_tflops)
    print(
        f"training on {device} (torch {torch.__version__}); status record: {batches.status_path}",
        flush=True,
    )
    started = time.monotonic()
    next_report = started + args.report_every
    step, loss_value = 0, float("nan")
    done = False
    while not done:
        for features, labels in batches:
            features = features.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=amp_dtype, enabled=args.amp):
                loss = nn.functional.cross_entropy(model(features), labels)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
            scaler.step(optimizer)
            scaler.update()
            step += 1
            now = time.monotonic()
            if now >= next_report:
                loss_value = loss.item()
                print(_report(step, loss_value, batches.stats()), flush=True)
                next_report = now + args.report_every
            if (args.steps is not None and step >= args.steps) or (
                args.duration is not None and now - started >= args.duration
            ):
                done = True
                break
    print("done: " + _report(step, loss.item() if step else loss_value, batches.stats()), flush=True)
    batches.close()
    return step


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse the knobs and train; 130 after Ctrl-C."""
    args = parse_args(argv)
    return run_until_interrupted(lambda: train(args))


if __name__ == "__main__":
    sys.exit(main())
