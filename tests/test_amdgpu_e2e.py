"""Done when, on an 8x MI300X fixture with real processes: the real ``gpusight --json`` and the TUI in a real pty (at
160x45 and 80x24) show utilization, memory, power, temperature, clocks, and per-process memory and usage.

The fixture's counters and card figures move while gpusight runs (support.amd_tree); the processes are real, so
their names, users and DataLoader-like children come from the live /proc. The fake NVML answers "no driver", so
only the AMD GPUs show.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_amdgpu_backend import forked_family
from test_cluster_e2e import visible

from gpusight.backends.amdgpu.processes import KFD_USAGE_NOTE
from support.amd_tree import GIB, AmdMachine, mi300x_machine
from support.procs import kill_tree
from support.terminal import PtyTerminal, gpusight_argv

SIZES = [(160, 45), (80, 24)]


@contextmanager
def busy_node(tmp_path: Path) -> Iterator[tuple[AmdMachine, dict[str, int]]]:
    """Eight MI300X with a trainer (and two forked workers sharing its client) on GPU 2, a second trainer on GPU 6
    and a ROCm process known only through /dev/kfd on GPU 5, all moving; yields the machine and the pids by role."""
    machine = mi300x_machine(tmp_path)
    rocm = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with forked_family(2) as (trainer, workers), forked_family(0) as (other, _):
        machine.open_client([trainer, *workers], 5, 2, 71, 30 * GIB, {"compute": 0.6, "gfx": 0.1})
        machine.open_client([other], 5, 6, 72, 12 * GIB, {"gfx": 0.35})
        machine.open_kfd(rocm.pid, 4, {5: 96 * GIB})
        try:
            with machine.moving(0.05):  # polls a second apart: a tick's lag skews a usage by 5 % at most
                yield machine, {"trainer": trainer, "other": other, "rocm": rocm.pid}
        finally:
            kill_tree(rocm.pid)
            rocm.wait()


def test_json_shows_every_figure_of_the_eight_gpus_and_their_processes(tmp_path: Path) -> None:
    with busy_node(tmp_path) as (machine, pids):
        done = subprocess.run(gpusight_argv("--json", "--duration", "4", "--interval", "1"), capture_output=True,
                              text=True, env={**os.environ, **machine.env()}, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    snapshot = json.loads(done.stdout)
    devices = snapshot["devices"]
    assert [d["name"] for d in devices] == ["AMD Instinct MI300X"] * 8
    for device in devices:
        assert device["vendor"] == "amd" and device["kernel_driver"] == "amdgpu"
        assert 55 <= device["utilization_gpu_percent"] <= 95 and 20 <= device["utilization_memory_percent"] <= 40
        assert 450 <= device["power_watts"] <= 700 and device["power_limit_watts"] == 750
        assert 60 <= device["temperature_celsius"] <= 80 and 55 <= device["temperature_memory_celsius"] <= 70
        assert (device["clock_sm_mhz"], device["clock_memory_mhz"]) == (2100, 1300)
        assert device["memory_total_bytes"] == 192 * GIB and device["health"]["pcie_link_gen"] == 5
    assert devices[2]["memory_used_bytes"] == 30 * GIB + 512 * 1024**2
    assert {d["kernel_driver_version"] for d in devices} == {"6.10.5"}
    gpu_rows = {p["pid"]: p for p in snapshot["processes"] if p["device_index"] is not None}
    assert set(gpu_rows) == set(pids.values())  # the forked workers are not counted as GPU users
    trainer, other, rocm = gpu_rows[pids["trainer"]], gpu_rows[pids["other"]], gpu_rows[pids["rocm"]]
    assert (trainer["device_index"], trainer["gpu_memory_bytes"]) == (2, 30 * GIB)
    assert trainer["sm_percent"] == pytest.approx(60, abs=25)  # counters moved by a thread: timing is loose
    assert (other["device_index"], other["gpu_memory_bytes"]) == (6, 12 * GIB)
    assert other["sm_percent"] == pytest.approx(35, abs=20)
    assert (rocm["device_index"], rocm["gpu_memory_bytes"], rocm["sm_percent"]) == (5, 96 * GIB, None)
    assert rocm["gpu_usage_note"] == KFD_USAGE_NOTE
    assert trainer["user"] and trainer["name"]  # host data joined from the live /proc


def words(output: bytes) -> str:
    """What the terminal drew, each run of blanks (and each escape sequence) as one blank."""
    return re.sub(r"\s+", " ", visible(output))


@pytest.mark.parametrize("size", SIZES, ids=["160x45", "80x24"])
def test_the_screen_shows_them(size: tuple[int, int], tmp_path: Path) -> None:
    with busy_node(tmp_path) as (machine, pids):
        env = {**os.environ, **machine.env(), "GPUSIGHT_PARTIAL_OUTPUT": "0"}
        trainer_row = re.compile(rf"{pids['trainer']} .*?30GiB (\d+)")
        wanted = ["/750W", "/192GiB"]  # 80x24 has room for neither names, clocks nor a second process row
        if size == (160, 45):
            wanted += ["0 MI300X", "2100MHz", str(pids["rocm"]), "96GiB"]
        with PtyTerminal(gpusight_argv("--interval", "1"), size, env=env) as term:
            def shown() -> bool:
                text = words(bytes(term.output))
                return all(w in text for w in wanted) and trainer_row.search(text) is not None

            term.wait_for(shown, f"{wanted} and the trainer's usage on the screen", 60)
            text = words(bytes(term.output))
            assert term.quit() == 0
    usages = [int(found) for found in trainer_row.findall(text)]
    assert any(20 <= usage <= 90 for usage in usages), usages
    assert re.search(r"util \d+%", text) and re.search(r"(temp |/750W )\d+", text)
