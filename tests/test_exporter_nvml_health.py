"""From the NVML calls (the fake library under real pynvml) to the exporter's series: a GPU with three MIG instances
and their processes, Xid 79 and 48, a pending row remap, a Gen3 x8 link on a Gen5 x16 card and a busy decoder, each
through a real ``gpusight --serve`` (scenarios: tests/support/mig.py and tests/support/health_scenarios.py)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gpusight import metric_names as names
from support import health_scenarios
from support.exporter import promtool_problems, serving
from support.fake_nvml import FakeScenario, fake_nvml_env
from support.mig import MIB, MIG3, mig3_scenario


def _scrape(lib: Path, scenario: FakeScenario, tmp: Path, needle: str) -> tuple[str, dict[str, list[Sample]]]:
    """The first scrape with a line starting with ``needle`` (GPM figures need two polls), and its families."""
    path = scenario.write(tmp / "scenario.txt")
    with serving(["--interval", "0.3", "--hostname", "node-07"], fake_nvml_env(lib, path)) as exporter:
        deadline = time.monotonic() + 30
        text = exporter.scrape()
        while not any(line.startswith(needle) for line in text.splitlines()) and time.monotonic() < deadline:
            time.sleep(0.2)
            text = exporter.scrape()
    families: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        families.setdefault(family.name, []).extend(s for s in family.samples if not s.name.endswith("_created"))
    return text, families


def _gpu(samples: list[Sample], gpu: str = "0") -> list[float]:
    return [s.value for s in samples if s.labels[names.LABEL_GPU] == gpu and names.LABEL_GPU_I_ID not in s.labels]


@pytest.fixture()
def sleepers() -> Iterator[list[int]]:
    processes = [subprocess.Popen(["sleep", "60"]) for _ in MIG3]
    yield [p.pid for p in processes]
    for process in processes:
        process.kill()
        process.wait()


def test_three_mig_instances_with_their_processes(tmp_path, fake_nvml_lib, sleepers) -> None:
    needle = f'{names.SM_ACTIVE.name}{{{names.LABEL_DRIVER}="550.54.15",{names.LABEL_GPU_I_ID}='
    text, families = _scrape(fake_nvml_lib, mig3_scenario(sleepers), tmp_path, needle)
    used = {s.labels[names.LABEL_GPU_I_ID]: s for s in families[names.FB_USED.name] if names.LABEL_GPU_I_ID in s.labels}
    assert {gi: s.labels[names.LABEL_GPU_I_PROFILE] for gi, s in used.items()} == {
        str(spec.gpu_instance_id): spec.profile for spec in MIG3}
    for spec in MIG3:
        assert used[str(spec.gpu_instance_id)].value == spec.memory_used_bytes // MIB
    active = {s.labels[names.LABEL_GPU_I_ID]: s.value for s in families[names.SM_ACTIVE.name]
              if names.LABEL_GPU_I_ID in s.labels}
    assert active == {str(spec.gpu_instance_id): pytest.approx(spec.gpm[2] / 100) for spec in MIG3}
    placed = {s.labels[names.LABEL_GPU_I_ID] for s in families[names.PROCESS_MEMORY.name]}
    assert placed == {str(spec.gpu_instance_id) for spec in MIG3}
    assert promtool_problems(text) == []


@pytest.mark.parametrize(("scenario", "needle", "expected"), [
    (health_scenarios.xid(), names.XID_COUNT.name + "_total{",
     {names.XID_ERRORS.name: 48.0, names.DRAIN.name: 1.0}),
    (health_scenarios.remap_pending(), names.ROW_REMAP_PENDING.name + "{",
     {names.ROW_REMAP_PENDING.name: 1.0, names.UNCORRECTABLE_REMAPPED_ROWS.name: 1.0, names.DRAIN.name: 1.0}),
    (health_scenarios.pcie_degraded(), names.PCIE_LINK_WIDTH.name + "{",
     {names.PCIE_LINK_GEN.name: 3.0, names.PCIE_LINK_WIDTH.name: 8.0, names.PCIE_MAX_LINK_GEN.name: 5.0,
      names.PCIE_MAX_LINK_WIDTH.name: 16.0, names.PCIE_REPLAY.name: 57.0, names.DRAIN.name: 1.0}),
    (health_scenarios.decoder_busy(), names.DEC_UTIL.name + "{",
     {names.DEC_UTIL.name: 97.0, names.ENC_UTIL.name: 0.0, names.JPEG_UTIL.name: 40.0, names.DRAIN.name: 0.0}),
], ids=["xid 79 and 48", "remap pending", "pcie gen3 x8", "decoder busy"])
def test_health_and_video_series(tmp_path, fake_nvml_lib, scenario, needle, expected) -> None:
    text, families = _scrape(fake_nvml_lib, scenario, tmp_path, needle)
    assert {name: _gpu(families.get(name, [])) for name in expected} == {name: [v] for name, v in expected.items()}
    assert promtool_problems(text) == []


def test_the_xid_counter_counts_each_xid_of_the_fake(tmp_path, fake_nvml_lib) -> None:
    _, families = _scrape(fake_nvml_lib, health_scenarios.xid(), tmp_path, 'xid="48"')
    counted = {s.labels[names.LABEL_XID]: s.value for s in families[names.XID_COUNT.name]
               if s.labels[names.LABEL_GPU] == "0"}
    assert counted == {"79": 1.0, "48": 1.0}
