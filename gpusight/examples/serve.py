"""A small inference-server loop: the convnet of ``gpusight.examples.convnet`` answering batches of requests.

Run beside a training job to put two processes on one GPU::

    python -m gpusight.examples.serve --rate 400 --max-batch 32

Requests arrive at ``--rate`` per second (evenly spaced, simulated); every time the model is free it
takes up to ``--max-batch`` waiting requests, runs them in bfloat16 without gradients and waits for the
answer, as a server must before replying. It prints the mean batch size and latency every few seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import torch

from gpusight.examples import run_until_interrupted
from gpusight.examples.convnet import build_convnet, normalise
from gpusight.examples.train import pick_device


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command-line knobs."""
    parser = argparse.ArgumentParser(prog="python -m gpusight.examples.serve",
                                     description="A small inference-server loop on the example convnet.")
    parser.add_argument("--rate", type=float, default=400.0, help="requests per second")
    parser.add_argument("--max-batch", type=int, default=32, help="most requests answered in one batch")
    parser.add_argument("--image-size", type=int, default=96, help="image height and width in pixels")
    parser.add_argument("--width", type=int, default=96, help="channels of the model's first stage")
    parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")
    parser.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto", help="where to serve")
    parser.add_argument("--report-every", type=float, default=5.0, help="seconds between progress lines")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.max_batch < 1 or args.image_size < 1 or args.width < 1:
        parser.error("--rate, --max-batch, --image-size and --width must be positive")
    return args


def serve(args: argparse.Namespace) -> int:
    """Answer requests until ``--duration`` (or Ctrl-C); return the number of requests answered."""
    device = pick_device(args.device)
    model = build_convnet(args.width).to(device, memory_format=torch.channels_last).eval()  # type: ignore[call-overload]  # torch's stubs omit memory_format
    inputs = torch.randint(0, 256, (args.max_batch, 3, args.image_size, args.image_size), dtype=torch.uint8, device=device)
    print(f"serving on {device} at {args.rate:g} requests/s", flush=True)
    started = time.monotonic()
    answered = batches = 0
    latency_sum = 0.0
    next_report = started + args.report_every
    while args.duration is None or time.monotonic() - started < args.duration:
        now = time.monotonic()
        arrived = int((now - started) * args.rate)
        waiting = arrived - answered
        if waiting <= 0:
            time.sleep((answered + 1) / args.rate - (now - started))
            continue
        size = min(waiting, args.max_batch)
        with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16):
            model(normalise(inputs[:size])).argmax(dim=1).cpu()
        done = time.monotonic()
        oldest_arrival = started + answered / args.rate
        latency_sum += done - oldest_arrival
        answered += size
        batches += 1
        if done >= next_report:
            print(f"{answered} answered  mean batch {answered / batches:.1f}  "
                  f"mean worst latency {latency_sum / batches * 1000:.1f} ms", flush=True)
            next_report = done + args.report_every
    return answered


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: parse the knobs and serve; 130 after Ctrl-C."""
    args = parse_args(argv)
    return run_until_interrupted(lambda: serve(args))


if __name__ == "__main__":
    sys.exit(main())
