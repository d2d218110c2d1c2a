"""Done when, on the fake NVML: each of the issue's five cases from the NVML call to the screen, and to ``--check``.

The TUI runs in a real pty, at 160x45 and at 80x24, against the fake ``libnvidia-ml.so.1``. The cases: a GPU with
three MIG instances each with its process, Xid 79 and 48 arriving while it runs, a pending row remap, a Gen3 x8 link
on a Gen5 x16 card, and a busy decoder feeding a trainer that waits for data. The other surfaces of the same cases
are tested beside their code: ``--json`` in tests/test_nvml_mig.py and tests/test_nvml_health.py, the exporter in
tests/test_exporter_nvml_health.py, ``--check`` of the faults in tests/test_check.py; the MIG and decoder checks are
here.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from test_cluster_e2e import visible

from support import health_scenarios
from support.fake_nvml import FakeScenario, fake_nvml_env
from support.mig import MIG3, SM_ACTIVE, mig3_scenario
from support.procs import kill_tree
from support.terminal import PtyTerminal, gpusight_argv
from support.trainer_record import publishing_trainer

SIZES = [(160, 45), (80, 24)]


def words(output: bytes) -> str:
    """The words the terminal drew, with each run of blanks (and each escape sequence) as one blank."""
    return re.sub(r"\s+", " ", visible(output))


@contextmanager
def sleepers(count: int) -> Iterator[list[int]]:
    """``count`` real processes for NVML to list (only live processes are shown)."""
    procs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for _ in range(count)]
    try:
        yield [p.pid for p in procs]
    finally:
        for proc in procs:
            kill_tree(proc.pid)
            proc.wait()


def environment(tmp_path: Path, lib: Path, scenario: FakeScenario, **extra: str) -> tuple[dict[str, str], Path]:
    """gpusight's environment on ``scenario`` (whole changed lines, so words can be read out of the bytes)."""
    path = scenario.write(tmp_path / "scenario.txt")
    return {**fake_nvml_env(lib, path), "GPUSIGHT_PARTIAL_OUTPUT": "0", **extra}, path


def screen_shows(env: dict[str, str], size: tuple[int, int], *texts: str, then: FakeScenario | None = None,
                 path: Path | None = None) -> str:
    """Run the TUI until every one of ``texts`` was drawn (after ``then`` replaced the scenario, when given); what it
    drew (since the scenario was replaced, if it was)."""
    with PtyTerminal(gpusight_argv("--interval", "0.25"), size, env=env) as term:
        term.wait_for(lambda: "GPU" in words(bytes(term.output)), "the first screen", 60)
        start = 0
        if then is not None and path is not None:
            start = len(term.output)
            assert not any(t in words(bytes(term.output)) for t in texts)  # not before it happened
            then.write(path)
        term.wait_for(lambda: all(t in words(bytes(term.output[start:])) for t in texts),
                      f"{texts} on the screen", 60)
        shown = words(bytes(term.output[start:]))
        assert term.quit() == 0
    return shown


def check(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``gpusight --check`` for a few seconds."""
    return subprocess.run([sys.executable, "-m", "gpusight", "--check", "--duration", "3", "--interval", "0.25",
                           *args], capture_output=True, text=True, env=env, timeout=120, check=False)


@pytest.mark.parametrize("size", SIZES, ids=["160x45", "80x24"])
def test_three_mig_instances_with_their_processes(size, tmp_path, fake_nvml_lib):
    with sleepers(3) as pids:
        env, _ = environment(tmp_path, fake_nvml_lib, mig3_scenario(pids))
        profiles = [spec.profile for spec in MIG3]
        shown = screen_shows(env, size, *profiles, "N/A")
        if size == (160, 45):  # each instance on its own line, the processes tagged with theirs
            assert "N/A on MIG" in shown
            for spec in MIG3:
                assert f"g{spec.gpu_instance_id}.c0 {spec.profile}" in shown
                assert f"[g{spec.gpu_instance_id}.c0]" in shown


def test_an_idle_mig_instance_holding_memory_is_named_by_check(tmp_path, fake_nvml_lib):
    with sleepers(3) as pids:
        scenario = mig3_scenario(pids)
        idle = MIG3[1]
        scenario.gpus[0].mig_devices[idle.mig_index].gpm[SM_ACTIVE] = 0.0
        env, _ = environment(tmp_path, fake_nvml_lib, scenario)
        done = check(env)
    scope = f"mig0.{idle.gpu_instance_id}"
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if re.match(rf"WARN +{re.escape(scope)}:", line)]
    assert idle.profile in line and "is idle" in line
    assert "while its SMs are 0 % active" in done.stdout
    assert not any(f"mig0.{spec.gpu_instance_id}:" in done.stdout for spec in MIG3 if spec is not idle)


@pytest.mark.parametrize("size", SIZES, ids=["160x45", "80x24"])
def test_xid_79_and_48_arriving_while_it_runs(size, tmp_path, fake_nvml_lib):
    env, path = environment(tmp_path, fake_nvml_lib, health_scenarios.xid(codes=()))
    badge = "DRAIN Xid 79 +1" if size == (160, 45) else "Xid 79"
    screen_shows(env, size, badge, then=health_scenarios.xid((79, 48)), path=path)


@pytest.mark.parametrize("size", SIZES, ids=["160x45", "80x24"])
def test_a_pending_row_remap(size, tmp_path, fake_nvml_lib):
    env, _ = environment(tmp_path, fake_nvml_lib, health_scenarios.remap_pending())
    screen_shows(env, size, "DRAIN REMAP" if size == (160, 45) else "REMAP", "drain gpu0")


@pytest.mark.parametrize("size", SIZES, ids=["160x45", "80x24"])
def test_a_gen3_x8_link_on_a_gen5_x16_card(size, tmp_path, fake_nvml_lib):
    env, _ = environment(tmp_path, fake_nvml_lib, health_scenarios.pcie_degraded())
    screen_shows(env, size, "DRAIN PCIe x8" if size == (160, 45) else "PCIe x8", "drain gpu0")


def test_a_busy_decoder_feeding_a_waiting_trainer(tmp_path, fake_nvml_lib):
    with publishing_trainer(tmp_path, steps_per_second=2.0, input_wait_fraction=0.6) as trainer:
        scenario = health_scenarios.decoder_busy(trainer.pid)
        env, _ = environment(tmp_path, fake_nvml_lib, scenario, XDG_RUNTIME_DIR=str(trainer.runtime_dir))
        time.sleep(1.0)  # the first record
        screen_shows(env, (160, 45), "DEC 97%", "NVDEC")
        done = check(env)
    assert done.returncode == 1, done.stdout + done.stderr
    [line] = [line for line in done.stdout.splitlines() if re.match(r"WARN +gpu0:", line)]
    assert "NVDEC at 97" in line
    assert f"its trainer (PID {trainer.pid}) waits 60 %" in done.stdout
