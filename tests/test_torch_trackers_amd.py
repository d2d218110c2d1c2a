"""The torch hook's GPU metrics are vendor-neutral: on an AMD machine (the fixture tree, NVML answering "no driver")
``SystemMetrics`` logs the AMD GPU the run uses, chosen by ``CUDA_VISIBLE_DEVICES`` as ROCm's torch.cuda does."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from support.amd_tree import GIB, mi300x_machine

pytest.importorskip("torch")
pytest.importorskip("tensorboard")

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from test_torch_trackers import TRAINING  # noqa: E402


def test_system_metrics_log_the_amd_gpu_the_run_uses(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path / "amd", count=2)
    for index, busy in ((0, 12), (1, 77)):
        machine.frozen.add(index)
        machine.set_figures(index, busy=busy, mem_busy=20, vram_used=(4 + index) * GIB, power_w=400 + index,
                            junction=60, memory=55, level=2)
    runs = tmp_path / "runs"
    code = TRAINING.format(setup=textwrap.dedent(f"""
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter({str(runs)!r})
        watched = gpusight.torch.watch(loader, log_to=gpusight.torch.SystemMetrics(writer, every_seconds=0.05), publish=False)
        """).strip(), loop="watched", teardown="writer.close()", body="pass")
    env = {**os.environ, **machine.env(), "CUDA_VISIBLE_DEVICES": "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert "gpusight.torch" not in out.stderr, out.stderr  # no "no GPU metrics" warning
    accumulator = EventAccumulator(str(runs), size_guidance={"scalars": 0})
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert not any(tag.startswith("gpusight/gpu0/") for tag in tags)
    assert {event.value for event in accumulator.Scalars("gpusight/gpu1/utilization_percent")} == {77.0}
    assert {event.value for event in accumulator.Scalars("gpusight/gpu1/power_watts")} == {401.0}
    assert {event.value for event in accumulator.Scalars("gpusight/gpu1/memory_used_gib")} == {5.0}
