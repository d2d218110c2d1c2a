"""gpusight's device metrics against a stored example of real dcgm-exporter output (tests/data/dcgm-exporter/).

For every DCGM_ family both emit, the type must match and gpusight's series must carry the example's GPU labels,
so dashboards and queries written for dcgm-exporter keep working.
"""

from __future__ import annotations

import csv
import io
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpusight import metric_names as names
from support.exporter import serving
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env

EXAMPLE = Path(__file__).parent / "data" / "dcgm-exporter" / "metrics.txt"
"""Real dcgm-exporter scrapes (sources named at the top of the file)."""

DCGM_MIRROR = Path("/work/.mirror/NVIDIA+dcgm-exporter/repo")
"""A local mirror of dcgm-exporter's repository, where there is one (for the default counters file)."""

TYPE_EXCEPTIONS = {metric.name: "gauge" for metric in names.COUNTERS_AS_GAUGES}
"""dcgm-exporter types the energy counter and the error counts ``counter`` without ``_total``; prometheus_client can
only write a counter with ``_total`` appended, which would rename the series, so gpusight serves them as gauges of
the same names."""

FIELDS_OUTSIDE_THE_CSV = {names.CLOCK_EVENTS.name, names.NVLINK_TX.name, names.NVLINK_RX.name}
"""DCGM fields gpusight serves that dcgm-exporter's shipped counter files do not list (it serves them when a custom
counters file does); docs/exporter.md says so."""

OTHER_GPU_LABELS = {"container", "namespace", "pod", "GPU_I_ID", "GPU_I_PROFILE"}
"""Labels dcgm-exporter adds only on Kubernetes or MIG; gpusight carries pods on its process series instead."""


def _example() -> dict[str, tuple[str, set[str]]]:
    """Family name -> (type, union of the label names of its samples)."""
    return {f.name: (f.type, {label for s in f.samples for label in s.labels})
            for f in text_string_to_metric_families(EXAMPLE.read_text(encoding="utf-8"))}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, fake_nvml_lib: Path) -> dict[str, tuple[str, set[str]]]:
    path = FakeScenario(gpus=[FakeGpu(gpm_supported=1, gpm={2: 50.0, 3: 30.0, 5: 10.0, 10: 20.0, 20: 100.0, 21: 2.5}),
                              FakeGpu(nvlink_tx_rate=2e10, nvlink_rx_rate=1e10), FakeGpu()]).write(tmp_path_factory.mktemp("dcgm") / "scenario.txt")
    with serving(["--interval", "0.3"], fake_nvml_env(fake_nvml_lib, path)) as running:
        running.wait_for(names.SM_ACTIVE.name + "{")
        text = running.wait_for(names.NVLINK_RX.name + "{")
    return {f.name: (f.type, {label for s in f.samples for label in s.labels})
            for f in text_string_to_metric_families(text) if f.name.startswith("DCGM_")}


def test_the_example_is_real_dcgm_exporter_output_with_both_hostname_spellings() -> None:
    example = _example()
    labels = set().union(*(found for _, found in example.values()))
    assert {"gpu", "UUID", "device", "modelName", "Hostname", "hostname", "pci_bus_id"} <= labels
    assert example[names.ENERGY.name][0] == "counter"


def test_shared_families_have_the_same_type_and_at_least_the_examples_gpu_labels(served) -> None:
    example = _example()
    shared = sorted(set(example) & set(served))
    assert len(shared) >= 6, shared  # the test compares something
    for name in shared:
        kind, labels = example[name]
        assert served[name][0] == TYPE_EXCEPTIONS.get(name, kind), name
        assert labels - OTHER_GPU_LABELS <= served[name][1], name
    assert served[names.ENERGY.name][0] == "gauge"  # the one documented difference


def test_every_device_metric_gpusight_declares_is_served_under_a_dcgm_name(served) -> None:
    assert {m.name for m in names.DEVICE_METRICS} - set(served) == set()


def test_our_device_metrics_are_in_dcgm_exporters_counter_files_but_the_documented_three() -> None:
    try:
        text = subprocess.run(["git", "-C", str(DCGM_MIRROR), "show", "HEAD:etc/dcp-metrics-included.csv"],
                              capture_output=True, text=True, check=True, timeout=30).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"no dcgm-exporter mirror at {DCGM_MIRROR}")
    known = {row[0].lstrip("# ").strip() for row in csv.reader(io.StringIO(text)) if row and "DCGM_FI" in row[0]}
    assert {m.name for m in names.DEVICE_METRICS} - known == FIELDS_OUTSIDE_THE_CSV
