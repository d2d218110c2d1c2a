"""Done when: on the AMD and Intel fixture machines, the real ``gpusight --serve`` serves the same values that
``gpusight --json`` shows, under AMD device-metrics-exporter's names for AMD GPUs and under gpusight's own for Intel.

The card files are held still (AMD) or move at a steady rate (Intel's counters), so the two reads can be compared.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from support.amd_tree import GIB, mi300x_machine
from support.exporter import promtool_problems, serving
from support.intel_tree import MAX1550_SLOTS, ClientSpec, xe_max1550_machine
from support.procs import sleeper
from support.terminal import gpusight_argv

MB = 1024**2


def _series(exposition: str, name: str) -> dict[str, float]:
    """``{labels: value}`` of every series of one metric."""
    found = {}
    for line in exposition.splitlines():
        match = re.match(rf"{re.escape(name)}(\{{[^}}]*\}})? (\S+)$", line)
        if match:
            found[match.group(1) or ""] = float(match.group(2))
    return found


def _by_gpu(exposition: str, name: str, label: str) -> dict[int, float]:
    """One metric's values by the GPU index in ``label``."""
    return {int(re.search(rf'{label}="(\d+)"', labels).group(1)): value  # type: ignore[union-attr]
            for labels, value in _series(exposition, name).items()}


def _json(env: dict[str, str]) -> dict:
    done = subprocess.run(gpusight_argv("--json"), capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_amd_gpus_are_served_with_the_values_json_shows(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path, count=4)
    for index in range(4):
        machine.frozen.add(index)
        machine.set_figures(index, busy=30 + 20 * index, mem_busy=10 + index, vram_used=(8 + 16 * index) * GIB,
                            power_w=300 + 100 * index, junction=50 + 5 * index, memory=45 + index, level=index % 3)
    with sleeper() as proc:
        machine.open_client([proc.pid], 5, 2, 81, 40 * GIB, {"compute": 0.5})
        env = {**os.environ, **machine.env()}
        shown = _json(env)
        with serving(env=env) as exporter:
            text = exporter.wait_for("gpu_gfx_activity")
    assert promtool_problems(text) == []
    devices = shown["devices"]
    assert _by_gpu(text, "gpu_gfx_activity", "gpu_id") == {d["index"]: d["utilization_gpu_percent"] for d in devices}
    assert _by_gpu(text, "gpu_umc_activity", "gpu_id") == {d["index"]: d["utilization_memory_percent"] for d in devices}
    assert _by_gpu(text, "gpu_used_vram", "gpu_id") == {d["index"]: d["memory_used_bytes"] // MB for d in devices}
    assert _by_gpu(text, "gpu_total_vram", "gpu_id") == {d["index"]: 192 * 1024 for d in devices}
    assert _by_gpu(text, "gpu_power_usage", "gpu_id") == {d["index"]: d["power_watts"] for d in devices}
    assert _by_gpu(text, "gpu_junction_temperature", "gpu_id") == {d["index"]: d["temperature_junction_celsius"]
                                                                    for d in devices}
    assert _by_gpu(text, "gpu_memory_temperature", "gpu_id") == {d["index"]: d["temperature_memory_celsius"]
                                                                  for d in devices}
    assert "gpu_edge_temperature" not in text  # MI300X has no edge sensor: not served as its junction
    system = {labels: v for labels, v in _series(text, "gpu_clock").items() if 'clock_type="system"' in labels}
    assert sorted(system.values()) == sorted(float(d["clock_sm_mhz"]) for d in devices)
    assert 'card_model="AMD Instinct MI300X"' in text and "DCGM_FI_DEV_GPU_UTIL" not in text
    [row] = [p for p in shown["processes"] if p["pid"] == proc.pid]
    assert (row["device_index"], row["gpu_memory_bytes"]) == (2, 40 * GIB)


def test_intel_gpus_are_served_under_gpusights_names_with_the_values_json_shows(tmp_path: Path) -> None:
    machine = xe_max1550_machine(tmp_path)
    with sleeper() as proc:
        machine.add_client(ClientSpec(proc.pid, 6, MAX1550_SLOTS[0], 91, 12 * GIB, compute_busy=0.4))
        with machine.running(0.05):
            env = {**os.environ, **machine.env()}
            shown = _json(env)
            with serving(["--interval", "0.5"], env=env) as exporter:
                exporter.wait_for("gpusight_gpu_power_watts")
                text = exporter.wait_for("gpusight_gpu_utilization_percent")
    assert promtool_problems(text) == []
    devices = shown["devices"]
    util = _by_gpu(text, "gpusight_gpu_utilization_percent", "gpu")
    assert util[0] == pytest.approx(40, abs=10) and util[1] == util[2] == util[3] == 0
    assert _by_gpu(text, "gpusight_gpu_memory_used_bytes", "gpu") == {d["index"]: d["memory_used_bytes"] for d in devices}
    assert _by_gpu(text, "gpusight_gpu_memory_total_bytes", "gpu") == {d["index"]: 128 * GIB for d in devices}
    assert _by_gpu(text, "gpusight_gpu_temperature_celsius", "gpu") == {d["index"]: d["temperature_celsius"] for d in devices}
    power = _by_gpu(text, "gpusight_gpu_power_watts", "gpu")
    assert power == pytest.approx({d["index"]: 300.0 + 50 * d["index"] for d in devices}, rel=0.15)
    assert 'vendor="intel"' in text and "gpu_gfx_activity" not in text and "DCGM_FI_DEV_GPU_UTIL" not in text
