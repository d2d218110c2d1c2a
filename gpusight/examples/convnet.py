"""A small convnet trained on synthetic images, instrumented with gpusight.torch: the job gpusight was checked with on real GPUs.

Three set-ups show the advice at work (``docs/real-gpu.md`` has the recordings)::

    python -m gpusight.examples.convnet --slow-ms 1 --num-workers 1                      # input-bound
    python -m gpusight.examples.convnet --slow-ms 1 --num-workers 14 --pin-memory \\
        --persistent-workers --prefetch-factor 4 --precision bf16                      # fed, mixed precision
    python -m gpusight.examples.serve & python -m gpusight.examples.convnet ...             # two processes, one GPU

Each sample is a ``uint8`` image computed from its index (as a decoder would hand it over) after
``--slow-ms`` of CPU work; the GPU normalises it. ``--precision fp32`` trains in float32 with TF32
switched off, so the tensor cores stay idle; ``tf32`` keeps PyTorch's defaults for float32 (TF32
convolutions on Ampere and later); ``bf16`` trains under ``torch.autocast`` in bfloat16.
``--step-log FILE`` appends ``<monotonic seconds> <steps done>`` twice a second, so a step rate can be
measured over any time window from outside.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from typing import TextIO

import torch
from torch import nn
from torch.utils.data import Dataset

import gpusight.torch as gpusight_torch
from gpusight.examples import burn_cpu, run_until_interrupted
from gpusight.examples.train import CLASSES, check_loader_args, make_loader, pick_device

STEP_LOG_PERIOD_S = 0.5
"""Seconds between two lines of ``--step-log``."""


class SyntheticImages(Dataset[tuple[torch.Tensor, int]]):
    """``uint8`` images of ``size`` x ``size`` pixels computed from their index, costing ``slow_ms`` of CPU each."""

    def __init__(self, length: int, size: int, slow_ms: float) -> None:
        """A dataset of ``length`` images."""
        self.length = length
        """Number of samples per epoch."""
        self.size = size
        """Image height and width in pixels."""
        self.slow_ms = slow_ms
        """CPU time burnt per sample, in milliseconds (decoding and augmentation)."""

    def __len__(self) -> int:
        """Samples per epoch."""
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        """Image ``index`` (3 x size x size, uint8) and its class, after the configured CPU work."""
        burn_cpu(self.slow_ms)
        generator = torch.Generator().manual_seed(index)
        label = index % CLASSES
        image = torch.randint(0, 192, (3, self.size, self.size), dtype=torch.uint8, generator=generator)
        band = self.size // CLASSES
        image[:, label * band:(label + 1) * band, :] += 63  # something learnable
        return image, label


def conv_block(inputs: int, outputs: int, stride: int) -> nn.Sequential:
    """3x3 convolution, batch norm and ReLU."""
    return nn.Sequential(
        nn.Conv2d(inputs, outputs, 3, stride=stride, padding=1, bias=False),
        nn.BatchNorm2d(outputs),
        nn.ReLU(inplace=True),
    )


def build_convnet(width: int) -> nn.Sequential:
    """Four stages of two 3x3 convolutions (``width`` to ``8 * width`` channels), pooled into a linear classifier."""
    layers: list[nn.Module] = [conv_block(3, width, 1)]
    channels = width
    for stage in range(4):
        out = width * 2**stage
        layers += [conv_block(channels, out, 1 if stage == 0 else 2), conv_block(out, out, 1)]
        channels = out
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(channels, CLASSES)]
    return nn.Sequential(*layers)


def normalise(images: torch.Tensor) -> torch.Tensor:
    """``uint8`` images to float32 in [-1, 1], channels-last."""
    return (images.float() / 127.5 - 1.0).contiguous(memory_format=torch.channels_last)


def set_precision(precision: str) -> torch.dtype | None:
    """Configure float32 maths for ``precision`` and return the autocast dtype (None for fp32 and tf32).

    ``fp32`` turns TF32 off for matrix products and convolutions, so no tensor core is used; ``tf32``
    leaves PyTorch's defaults (TF32 convolutions).
    """
    if precision == "fp32":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return torch.bfloat16 if precision == "bf16" else None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line knobs."""
    parser = argparse.ArgumentParser(
        prog="python -m gpusight.examples.convnet",
        description="A small convnet trained on synthetic images, instrumented with gpusight.torch.",
    )
    parser.add_argument("--slow-ms", type=float, default=0.0, help="CPU milliseconds burnt per sample (decode cost)")
    parser.add_argument("--num-workers", type=int, default=0, help="DataLoader worker processes")
    parser.add_argument("--batch-size", type=int, default=256, help="images per batch")
    parser.add_argument("--image-size", type=int, default=96, help="image height and width in pixels")
    parser.add_argument("--width", type=int, default=96, help="channels of the first stage (x8 in the last)")
    parser.add_argument("--pin-memory", action="store_true", help="DataLoader pin_memory=True")
    parser.add_argument("--persistent-workers", action="store_true", help="keep workers between epochs")
    parser.add_argument("--prefetch-factor", type=int, default=None, help="batches prefetched per worker")
    parser.add_argument("--precision", choices=("fp32", "tf32", "bf16"), default="tf32",
                        help="fp32 (TF32 off: no tensor cores), tf32 (PyTorch's defaults) or bf16 autocast")
    parser.add_argument("--samples", type=int, default=65536, help="samples per epoch")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="where to train")
    parser.add_argument("--step-log", type=argparse.FileType("a"), default=None, metavar="FILE",
                        help="append '<monotonic seconds> <steps>' lines twice a second")
    parser.add_argument("--report-every", type=float, default=5.0, help="seconds between progress lines")
    args = parser.parse_args(argv)
    if args.slow_ms < 0 or args.num_workers < 0:
        parser.error("--slow-ms and --num-workers must not be negative")
    for name in ("batch_size", "image_size", "width", "samples"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.image_size < CLASSES:
        parser.error(f"--image-size must be at least {CLASSES}")
    check_loader_args(parser, args)
    return args


class StepLog:
    """Appends ``<monotonic seconds> <steps>`` to a file at most every ``STEP_LOG_PERIOD_S``."""

    def __init__(self, stream: TextIO | None) -> None:
        """Log to ``stream``; None logs nothing."""
        self.stream = stream
        """Where lines go, or None."""
        self._next = 0.0

    def step(self, now: float, steps: int, force: bool = False) -> None:
        """Note that ``steps`` steps were done at ``now``; a line is written when due (or ``force``)."""
        if self.stream is None or (now < self._next and not force):
            return
        self.stream.write(f"{now:.4f} {steps}\n")
        self.stream.flush()
        self._next = now + STEP_LOG_PERIOD_S


def train(args: argparse.Namespace) -> int:
    """Train until ``--steps`` or ``--duration`` (or Ctrl-C); return the number of steps done."""
    device = pick_device(args.device)
    autocast_dtype = set_precision(args.precision)
    model = build_convnet(args.width).to(device, memory_format=torch.channels_last)  # type: ignore[call-overload]  # torch's stubs omit memory_format
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loader = make_loader(args, SyntheticImages(args.samples, args.image_size, args.slow_ms))
    batches = gpusight_torch.watch(loader, name="convnet", model=model)
    print(f"training on {device} ({args.precision}, torch {torch.__version__}); status: {batches.status_path}", flush=True)
    log = StepLog(args.step_log)
    started = time.monotonic()
    next_report = started + args.report_every
    step = 0
    done = False
    while not done:
        for images, labels in batches:
            images = normalise(images.to(device, non_blocking=True))
            labels = labels.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
                loss = nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()  # type: ignore[no-untyped-call]  # torch leaves Tensor.backward unannotated
            optimizer.step()
            step += 1
            now = time.monotonic()
            log.step(now, step)
            if now >= next_report:
                stats = batches.stats()
                rate = f"{stats.steps_per_second:.1f}" if stats.steps_per_second is not None else "?"
                wait = f"{stats.input_wait_fraction * 100:.0f}" if stats.input_wait_fraction is not None else "?"
                print(f"step {step}  {rate} steps/s  input wait {wait} %  loss {loss.item():.3f}", flush=True)
                next_report = now + args.report_every
            done = (args.steps is not None and step >= args.steps) or (
                args.duration is not None and now - started >= args.duration)
            if done:
                break
    if device.type == "cuda":
        torch.cuda.synchronize()
    log.step(time.monotonic(), step, force=True)
    print(f"done: {step} steps in {time.monotonic() - started:.1f} s", flush=True)
    batches.close()
    return step


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse the knobs and train; 130 after Ctrl-C."""
    args = parse_args(argv)
    return run_until_interrupted(lambda: train(args))


if __name__ == "__main__":
    sys.exit(main())
