"""The profiled steps leave the training's own output alone: no profiler chatter on stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

TRAIN = """
import torch
from gpusight.torch import watch
model = torch.nn.Linear(8, 8)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for x in watch([torch.randn(4, 8) for _ in range(12)], profile_every=2, publish=False):
    model(x).sum().backward()
    optimizer.step()
    optimizer.zero_grad()
print("trained")
"""


def test_profiling_every_other_step_writes_nothing_to_stderr():
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    done = subprocess.run([sys.executable, "-c", TRAIN], capture_output=True, text=True, env=env, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "trained\n" and done.stderr == ""
