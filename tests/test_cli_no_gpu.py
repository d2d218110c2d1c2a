"""Without an NVIDIA driver, every mode that samples says so and points at ``--demo``: the real ``gpusight`` on the
fake NVML, which with no scenario answers like a machine whose driver is not running, and the live screen in tmux at
80x24, where a first-time user would see it."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from test_ui_e2e_tmux import Tmux, gpusight_command, wait_until

from gpusight.cli.pipeline import DEMO_HINT
from support.terminal import gpusight_argv


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(gpusight_argv(*args), capture_output=True, text=True, timeout=60)


def test_once_without_a_driver_suggests_the_demo():
    out = _run("--once")
    assert out.returncode == 0, out.stderr
    errors = out.stdout.split("ERRORS", 1)[1]
    assert f"NVIDIA driver not loaded: the kernel module is not running (NVML_ERROR_DRIVER_NOT_LOADED); {DEMO_HINT}" in errors


def test_check_without_a_driver_suggests_the_demo():
    out = _run("--check", "--duration", "600")
    assert out.returncode == 3
    assert out.stderr.strip().endswith(DEMO_HINT)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (the CI script installs it)")
def test_the_live_screen_without_a_driver_suggests_the_demo_at_80_columns(tmp_path):
    tmux = Tmux(f"gpusight-no-gpu-{os.getpid()}")
    try:
        tmux.start(gpusight_command(), (80, 24), tmp_path)
        wait_until(lambda: "No GPU data" in tmux.screen(), "the screen without GPUs")
        wait_until(lambda: DEMO_HINT in " ".join(tmux.screen().split()), "the hint, whole (wrapped if need be)")
    finally:
        tmux.kill_server()
