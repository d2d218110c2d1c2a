"""Other vendors' GPUs on every surface: the amdgpu driver beside NVIDIA's (or alone), junction and memory
temperatures, GPM as NVIDIA-only, and why a ROCm process's GPU share is N/A, in the process table and popup,
``--once``, the Markdown report and the real TUI in tmux."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest
from test_process_table_speed import cell, lines, snap, tmux  # noqa: F401  (tmux: the fixture)
from test_ui_e2e_tmux import Tmux, alive, gpusight_command, wait_until

from gpusight.demo.source import DemoSource
from gpusight.oneshot import render_once
from gpusight.sampling.history import History
from gpusight.snapshot.model import DeviceSample, ProcessSample, Snapshot, SourceKind, Vendor
from gpusight.snapshot_export.markdown import render_markdown
from gpusight.ui.detail.process_detail import process_summary

HOSTILE_NOTE = "counters flat \x1b[2J[red]via /dev/kfd[/red]"
"""A usage note as a hostile backend might write it: an escape sequence and Rich markup."""

KFD = ProcessSample(pid=201, device_index=6, cmdline="python pretrain.py", gpu_memory_bytes=2**37, cpu_percent=120.0,
                    gpu_usage_note=HOSTILE_NOTE)
BUSY = ProcessSample(pid=202, device_index=4, cmdline="python train.py", gpu_memory_bytes=2**35, sm_percent=18.0)


def demo_snapshot(scenario: str) -> Snapshot:
    """One poll of ``scenario`` at a fixed time."""
    source = DemoSource(scenario, seed=0, clock=lambda: 1_750_000_000.0)
    try:
        return source.poll()
    finally:
        source.close()


def test_process_table_says_why_the_share_is_na_escaped_and_keeps_known_shares():
    table = lines(snap(KFD, BUSY), width=200)
    assert cell(table, 1, "SM %") == "N/A"
    assert "(GPU use N/A: counters flat" in table[1] and "[red]via /dev/kfd[/red]" in table[1]
    assert "\x1b" not in table[1]
    assert cell(table, 2, "SM %") == "18%" and "GPU use" not in table[2]


def test_process_popup_says_why_the_share_is_na():
    summary = process_summary(KFD, {}, ascii_mode=False)
    assert "GPU use N/A: counters flat" in summary and "\x1b" not in summary
    assert "GPU use" not in process_summary(BUSY, {}, ascii_mode=False)


def test_once_on_amd_names_amdgpu_alone_with_junction_temperatures_and_the_kfd_reason():
    text = render_once(demo_snapshot("amd"), width=None)
    title = text.splitlines()[0]
    assert "amdgpu 6.10.5" in title and "driver" not in title and "CUDA" not in title
    details = [line.strip() for line in text.splitlines() if line.strip().startswith("amd (amdgpu)")]
    assert len(details) == 8
    assert all("temperature junction" in line and "memory" in line and "NVIDIA-only" in line for line in details)
    assert "[GPU use N/A: ROCm via /dev/kfd" in text


def test_once_on_the_mixed_machine_names_both_drivers_and_only_amd_gpus_get_the_amd_line():
    text = render_once(demo_snapshot("mixed-vendor"), width=None)
    title = text.splitlines()[0]
    assert "driver 550.90.07" in title and "CUDA 12.4" in title and "amdgpu 6.10.5" in title
    assert sum(line.strip().startswith("amd (amdgpu)") for line in text.splitlines()) == 4


def test_once_of_an_nvidia_machine_is_as_before():
    text = render_once(demo_snapshot("healthy"), width=None)
    assert "amd" not in text.splitlines()[0] and "NVIDIA-only" not in text and "junction" not in text


def test_markdown_report_names_other_drivers_extra_temperatures_and_the_usage_reason():
    device = DeviceSample(index=0, name="AMD Instinct MI300X", vendor=Vendor.AMD, kernel_driver="amdgpu",
                          kernel_driver_version="6.10.5|x\x1b[2J", temperature_junction_celsius=84.0,
                          temperature_memory_celsius=71.0)
    snapshot = Snapshot(timestamp=1_700_000_000.0, source=SourceKind.DEMO, devices=(device, replace(device, index=1)),
                        processes=(replace(KFD, device_index=0),))
    report = render_markdown(snapshot, History())
    assert "- Other drivers: amdgpu 6.10.5\\|x" in report and "- Driver:" not in report  # named once for 2 GPUs
    assert report.count("amdgpu 6.10.5") == 1
    assert "| N/A; junction 84C, memory 71C |" in report
    assert "(GPU use N/A: counters flat" in report and "\x1b" not in report


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (the CI script installs it)")
@pytest.mark.parametrize("size", [(80, 24), (160, 45)])
def test_the_real_amd_demo_in_tmux_shows_amdgpu_and_junction_temperatures_and_fits(
    tmux: Tmux, tmp_path: Path, size: tuple[int, int]  # noqa: F811 - pytest fixture
) -> None:
    pid = tmux.start(gpusight_command("--demo", "amd"), size, tmp_path)
    wait_until(lambda: "amdgpu 6.10.5" in tmux.screen() and "jct" in tmux.screen(), "the amdgpu header and jct")
    screen = tmux.screen().splitlines()
    assert len(screen) <= size[1] and all(len(line) <= size[0] for line in screen)
    assert "MI300X" in tmux.screen() and "CUDA" not in tmux.screen()
    tmux.keys("q")
    wait_until(lambda: not alive(pid), "gpusight to exit after q")


def test_the_scenarios_are_in_the_help():
    out = subprocess.run(gpusight_command("--help"), capture_output=True, text=True, timeout=60)
    assert "amd" in out.stdout and "mixed-vendor" in out.stdout
