"""Runnable examples: ``python -m gpusight.examples.train`` is a small instrumented PyTorch training job;
``convnet`` and ``serve`` are the convnet and inference-server jobs gpusight was checked with on a real GPU."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable


def burn_cpu(milliseconds: float) -> None:
    """Keep one core busy for ``milliseconds``, as decoding and augmenting a sample would."""
    deadline = time.perf_counter() + milliseconds / 1000.0
    while time.perf_counter() < deadline:
        pass


def run_until_interrupted(body: Callable[[], object]) -> int:
    """Run an example's ``body``; exit status 0, or 130 after Ctrl-C (said on stderr, no traceback)."""
    try:
        body()
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    return 0
