"""Done when, on the Intel fixtures: the real ``gpusight`` reads the xe and i915 machines through
``GPUSIGHT_SYSFS_ROOT``/``GPUSIGHT_FDINFO_ROOT`` while their counters move, with real processes holding the DRM
clients, and shows utilization, memory, power, temperature, clocks and per-process memory and usage in ``--json``
and in the TUI (a real pty, 160x45 and 80x24)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_cluster_e2e import visible

from support.intel_tree import GIB, ClientSpec, IntelMachine, i915_a770_machine, xe_max1550_machine
from support.procs import fake_trainer
from support.terminal import PtyTerminal, gpusight_argv

SIZES = [(160, 45), (80, 24)]


def words(output: bytes) -> str:
    """The words the terminal drew, each run of blanks (and each escape sequence) as one blank."""
    return re.sub(r"\s+", " ", visible(output))


def environment(machine: IntelMachine) -> dict[str, str]:
    """gpusight's environment on ``machine`` (the fake NVML, on the library path, says there is no driver)."""
    return {**os.environ, **machine.env(), "GPUSIGHT_PARTIAL_OUTPUT": "0"}


def test_json_on_the_xe_machine_shows_every_figure_and_the_trainer_once(tmp_path: Path) -> None:
    machine = xe_max1550_machine(tmp_path / "machine")
    with fake_trainer(tmp_path) as trainer:
        workers = trainer.workers
        machine.add_client(ClientSpec(trainer.pid, 7, machine.cards[2].slot, 40, 24 * GIB, compute_busy=0.8,
                                      holders=tuple(workers)))
        with machine.running(0.05):
            out = subprocess.run([sys.executable, "-m", "gpusight", "--json", "--backend", "intel"],
                                 capture_output=True, text=True, env=environment(machine), timeout=120, check=True)
    snapshot = json.loads(out.stdout)
    devices = snapshot["devices"]
    assert [d["name"] for d in devices] == ["Intel Data Center GPU Max 1550"] * 4
    busy = devices[2]
    assert (busy["vendor"], busy["kernel_driver"]) == ("intel", "xe")
    assert busy["utilization_gpu_percent"] == pytest.approx(80.0, abs=1.0)
    assert busy["memory_used_bytes"] == 24 * GIB and busy["memory_total_bytes"] == 128 * GIB
    assert 250.0 < busy["power_watts"] < 550.0 and busy["power_limit_watts"] == 600.0
    assert (busy["temperature_celsius"], busy["temperature_memory_celsius"]) == (57.0, 63.0)
    assert busy["clock_sm_mhz"] == 1350
    assert snapshot["driver"] is None and {d["kernel_driver"] for d in snapshot["devices"]} == {"xe"}
    gpu_rows = [p for p in snapshot["processes"] if p["gpu_memory_bytes"]]
    assert [(p["pid"], p["device_index"], p["gpu_memory_bytes"]) for p in gpu_rows] == [(trainer.pid, 2, 24 * GIB)]
    assert gpu_rows[0]["sm_percent"] == pytest.approx(80.0, abs=1.0)
    assert {p["pid"] for p in snapshot["processes"] if p["role"] == "dataloader_worker"} == set(workers)
    assert not snapshot["errors"]


def test_json_on_the_i915_machine(tmp_path: Path) -> None:
    machine = i915_a770_machine(tmp_path)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        machine.add_client(ClientSpec(sleeper.pid, 5, machine.cards[0].slot, 3, 5 * GIB, compute_busy=0.4,
                                      video_busy=0.3))
        with machine.running(0.05):
            out = subprocess.run([sys.executable, "-m", "gpusight", "--json"], capture_output=True, text=True,
                                 env=environment(machine), timeout=120, check=True)
    finally:
        sleeper.kill()
        sleeper.wait()
    snapshot = json.loads(out.stdout)
    (device,) = snapshot["devices"]
    assert (device["name"], device["kernel_driver"]) == ("Intel Arc A770", "i915")
    # i915 counts nanoseconds: the fixture moves them in 50 ms steps while gpusight divides by its own clock
    assert device["utilization_gpu_percent"] == pytest.approx(40.0, abs=10.0)
    assert device["memory_used_bytes"] == 5 * GIB and device["memory_total_bytes"] is None
    assert 100.0 < device["power_watts"] < 250.0 and device["clock_sm_mhz"] == 2100
    (process,) = [p for p in snapshot["processes"] if p["pid"] == sleeper.pid]
    assert process["sm_percent"] == pytest.approx(40.0, abs=10.0)
    assert process["decoder_percent"] == pytest.approx(30.0, abs=10.0)


ROW_GAP = r"(?: \S+){0,4}"
"""Between a process's pid and its GPU memory on its row: its user and job (``root job 1``) once the host side has
named them, nothing before; bounded, so that the pid and the figures are read from one row."""


def xe_expected(pid: int) -> list[str]:
    """What the screen shows of the xe machine's busy card and its process (cycle counters: exact usage)."""
    return ["Data Cent", r"util 80%", r"24/128GiB", r"\d+/600W", r"temp 57C", r"1350MHz", rf"{pid}{ROW_GAP} 24GiB 80%"]


ABOUT_40 = r"[34]\d(?!\d)"
"""A usage of 40 % read from nanosecond counters that the fixture moves in 50 ms steps (a 0.25 s poll sees four to
six steps). No ``%`` after it: a redraw writes a row only up to its last changed cell, so an unchanged ``%`` is not
written again."""


def i915_expected(pid: int) -> list[str]:
    """The same for the i915 card, whose usage is read within a few percent."""
    return [r"Arc A770", rf"util {ABOUT_40}", r"\d+/190W", r"2100MHz", rf"{pid}{ROW_GAP} 5GiB {ABOUT_40}"]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize(("make", "card", "memory", "expected"),
                         [(xe_max1550_machine, 2, 24 * GIB, xe_expected),
                          (i915_a770_machine, 0, 5 * GIB, i915_expected)], ids=["xe", "i915"])
def test_tui_shows_the_intel_machine(tmp_path: Path, size: tuple[int, int], make: Callable[[Path], IntelMachine],
                                     card: int, memory: int, expected: Callable[[int], list[str]]) -> None:
    machine = make(tmp_path)
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    busy = 0.8 if machine.driver == "xe" else 0.4
    try:
        machine.add_client(ClientSpec(sleeper.pid, 5, machine.cards[card].slot, 9, memory, compute_busy=busy))
        texts = expected(sleeper.pid)
        with machine.running(0.05), PtyTerminal(gpusight_argv("--interval", "0.25"), size,
                                                env=environment(machine)) as term:
            term.wait_for(lambda: all(re.search(t, words(bytes(term.output))) for t in texts),
                          f"{texts} on the screen", 60)
            assert term.quit() == 0
    finally:
        sleeper.kill()
        sleeper.wait()
