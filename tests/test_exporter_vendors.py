"""AMD and Intel GPUs served by a real ``gpusight --serve --replay``: AMD's under AMD device-metrics-exporter's names,
labels and units, Intel's under gpusight's own names, a mixed machine with both, nothing served for N/A."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gpusight import metric_names as names
from support.exporter import promtool_problems, serving
from support.vendor_devices import GIB, amd_gpu, intel_gpu, nvidia_gpu, write_recording

DOCS = Path(__file__).parent.parent / "docs" / "exporter.md"

MACHINES = {
    "amd": (amd_gpu(0), amd_gpu(1, name="AMD Instinct MI210", temperature_celsius=45.0, power_limit_watts=None,
                               health=None, clock_memory_mhz=None)),
    "intel": (intel_gpu(0), intel_gpu(1, name="Intel(R) Arc(TM) A770 Graphics", temperature_celsius=None)),
    "mixed": (nvidia_gpu(0), amd_gpu(1), intel_gpu(2)),
}


def _serve(path: Path, machine: str) -> dict[str, list[Sample]]:
    recording = write_recording(path, MACHINES[machine], time.time())
    with serving(["--replay", str(recording), "--loop", "--hostname", "node-3"]) as exporter:
        text = exporter.wait_for("gpusight_snapshot_age_seconds")
    assert promtool_problems(text) == []
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, list[Sample]]]:
    """Each machine's scrape, by family (promtool accepts each)."""
    return {machine: _serve(tmp_path_factory.mktemp(machine) / "node.jsonl", machine) for machine in MACHINES}


def _by_gpu(samples: list[Sample], label: str = names.LABEL_AMD_GPU_ID) -> dict[str, float]:
    return {s.labels[label]: s.value for s in samples}


@pytest.mark.parametrize(("metric", "expected"), [
    (names.AMD_GFX_ACTIVITY, {"0": 87.0, "1": 87.0}),
    (names.AMD_UMC_ACTIVITY, {"0": 41.0, "1": 41.0}),
    (names.AMD_USED_VRAM, {"0": 100 * 1024.0, "1": 100 * 1024.0}),
    (names.AMD_TOTAL_VRAM, {"0": 192 * 1024.0, "1": 192 * 1024.0}),
    (names.AMD_FREE_VRAM, {"0": 92 * 1024.0, "1": 92 * 1024.0}),
    (names.AMD_POWER_USAGE, {"0": 612.0, "1": 612.0}),
    (names.AMD_ENERGY, {"0": 123456.5e6, "1": 123456.5e6}),
    (names.AMD_EDGE_TEMP, {"1": 45.0}),
    (names.AMD_JUNCTION_TEMP, {"0": 71.0, "1": 71.0}),
    (names.AMD_MEMORY_TEMP, {"0": 58.0, "1": 58.0}),
    (names.AMD_PCIE_SPEED, {"0": 32.0}),
    (names.AMD_PCIE_MAX_SPEED, {"0": 32.0}),
])
def test_amd_gpus_are_served_under_amds_names_in_amds_units(served, metric: names.MetricName,
                                                            expected: dict[str, float]) -> None:
    samples = served["amd"][metric.name]
    assert _by_gpu(samples) == expected  # an MI300X has no edge sensor: absent, never 0
    assert {s.labels[names.LABEL_AMD_CARD_MODEL] for s in samples} <= {"AMD Instinct MI300X", "AMD Instinct MI210"}
    assert {s.labels[names.LABEL_HOSTNAME_NEW] for s in samples} == {"node-3"}


def test_amd_clocks_carry_amds_clock_type_and_the_rest_gets_gpusights_names(served) -> None:
    amd = served["amd"]
    clocks = {(s.labels[names.LABEL_AMD_GPU_ID], s.labels[names.LABEL_CLOCK_TYPE]): s.value
              for s in amd[names.AMD_CLOCK.name]}
    assert clocks == {("0", "system"): 2100.0, ("0", "memory"): 1300.0, ("1", "system"): 2100.0}
    assert _by_gpu(amd[names.OWN_POWER_LIMIT.name], names.LABEL_GPU) == {"0": 750.0}
    assert {s.labels[names.LABEL_VENDOR] for s in amd[names.OWN_POWER_LIMIT.name]} == {"amd"}


def test_no_dcgm_name_is_served_for_amd_or_intel_gpus(served) -> None:
    for machine in ("amd", "intel"):
        assert [name for name in served[machine] if name.startswith("DCGM_")] == []
    own = {m.name for m in names.OWN_DEVICE_METRICS}
    assert {name for name in served["amd"] if name in own} == {names.OWN_POWER_LIMIT.name}  # AMD's has no name


@pytest.mark.parametrize(("metric", "expected"), [
    (names.OWN_GPU_UTIL, {"0": 64.0, "1": 64.0}),
    (names.OWN_MEM_USED, {"0": 20.0 * GIB, "1": 20.0 * GIB}),
    (names.OWN_MEM_TOTAL, {"0": 128.0 * GIB, "1": 128.0 * GIB}),
    (names.OWN_MEM_FREE, {"0": 108.0 * GIB, "1": 108.0 * GIB}),
    (names.OWN_POWER, {"0": 410.0, "1": 410.0}),
    (names.OWN_ENERGY, {"0": 5000.0, "1": 5000.0}),
    (names.OWN_TEMP, {"0": 55.0}),
    (names.OWN_CLOCK, {"0": 1.6e9, "1": 1.6e9}),
])
def test_intel_gpus_are_served_under_gpusights_names(served, metric: names.MetricName,
                                                     expected: dict[str, float]) -> None:
    samples = served["intel"][metric.name]
    assert _by_gpu(samples, names.LABEL_GPU) == expected
    assert {s.labels[names.LABEL_VENDOR] for s in samples} == {"intel"}


def test_what_intel_cannot_read_is_absent_never_zero(served) -> None:
    for metric in (names.OWN_MEM_UTIL, names.OWN_JUNCTION_TEMP, names.OWN_MEMORY_TEMP, names.OWN_FAN):
        assert metric.name not in served["intel"]


def test_a_mixed_machine_serves_each_family_for_its_own_gpus(served) -> None:
    mixed = served["mixed"]
    assert _by_gpu(mixed[names.GPU_UTIL.name], names.LABEL_GPU) == {"0": 90.0}
    assert _by_gpu(mixed[names.NVLINK_TX.name], names.LABEL_GPU) == {"0": 1e10}
    assert _by_gpu(mixed[names.AMD_GFX_ACTIVITY.name]) == {"1": 87.0}
    assert _by_gpu(mixed[names.OWN_GPU_UTIL.name], names.LABEL_GPU) == {"2": 64.0}
    assert _by_gpu(mixed[names.GPU_LOST.name], names.LABEL_GPU) == {"0": 0.0, "1": 0.0, "2": 0.0}


def test_every_amd_and_own_device_name_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert [m.name for m in names.AMD_DEVICE_METRICS + names.OWN_DEVICE_METRICS
            if f"`{m.name}`" not in text and f"`{m.name}{{" not in text] == []
