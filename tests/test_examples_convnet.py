"""The real-GPU check's jobs run on the CPU too: the convnet trains, logs its steps and publishes its status; the server answers."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

SMALL = ["--device", "cpu", "--image-size", "16", "--width", "4", "--batch-size", "4", "--samples", "32"]
"""A model and dataset small enough for a few CPU steps."""


def run(module: str, *args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``python -m module args`` to completion."""
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


@pytest.mark.parametrize("precision", ["fp32", "tf32", "bf16"])
def test_convnet_trains_logs_its_steps_and_says_where_its_status_goes(tmp_path, precision):
    env = dict(os.environ, XDG_RUNTIME_DIR=str(tmp_path))
    log = tmp_path / "steps.log"

    out = run("gpusight.examples.convnet", *SMALL, "--steps", "6", "--num-workers", "1", "--slow-ms", "1",
              "--precision", precision, "--step-log", str(log), env=env)

    assert out.returncode == 0, out.stderr
    assert f"training on cpu ({precision}" in out.stdout and "done: 6 steps" in out.stdout
    lines = [line.split() for line in log.read_text().splitlines()]
    times, steps = [float(t) for t, _ in lines], [int(s) for _, s in lines]
    assert steps[-1] == 6 and steps == sorted(steps) and times == sorted(times)
    assert str(tmp_path / "gpusight") in out.stdout  # the gpusight.torch status record's folder
    assert not list((tmp_path / "gpusight").glob("*.json"))  # removed when the job ends


def test_convnet_rejects_bad_knobs_in_one_line(tmp_path):
    out = run("gpusight.examples.convnet", *SMALL, "--image-size", "4", env=dict(os.environ))

    assert out.returncode == 2 and "--image-size must be at least 10" in out.stderr


def test_serve_answers_requests_in_batches_of_at_most_max_batch():
    out = run("gpusight.examples.serve", "--device", "cpu", "--image-size", "16", "--width", "4", "--rate", "200",
              "--max-batch", "8", "--duration", "2", "--report-every", "0.5", env=dict(os.environ))

    assert out.returncode == 0, out.stderr
    reports = [line.split() for line in out.stdout.splitlines() if "answered" in line]
    answered = [int(words[0]) for words in reports]
    batches = [float(words[words.index("batch") + 1]) for words in reports]
    assert answered and answered == sorted(answered) and answered[0] > 0
    assert all(1.0 <= batch <= 8.0 for batch in batches)
