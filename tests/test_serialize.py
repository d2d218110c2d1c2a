"""The JSON contract: snapshots round-trip, wrong shapes are rejected with a reason."""

import json

import pytest

from gputop.collect.model import (
    SCHEMA_VERSION,
    Advice,
    DeviceSample,
    DriverInfo,
    ErrorNote,
    HostSample,
    ProcessSample,
    Snapshot,
)
from gputop.collect.serialize import SnapshotFormatError, snapshot_from_dict, snapshot_to_dict, snapshot_to_json

CONTRACT_TOP = {"schema", "timestamp", "source", "driver", "host", "devices", "processes", "advice", "errors"}
CONTRACT_HOST = {"hostname", "cpu_percent_per_core", "iowait_percent", "memory_used_bytes", "memory_total_bytes"}
CONTRACT_DEVICE = {
    "index", "name", "uuid", "cuda_index", "lost", "utilization_gpu_percent", "utilization_memory_percent", "memory_used_bytes",
    "memory_total_bytes", "power_watts", "power_limit_watts", "temperature_celsius", "fan_percent",
    "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "sm_active_percent", "tensor_active_percent", "throttle_reasons",
}
CONTRACT_PROCESS = {
    "pid", "ppid", "name", "cmdline", "user", "device_index", "gpu_memory_bytes", "sm_percent", "cpu_percent",
    "rss_bytes", "role", "trainer_pid",
}
CONTRACT_DRIVER = {"driver_version", "cuda_driver_version", "nvml_version"}
CONTRACT_ADVICE = {"id", "severity", "scope", "title", "evidence", "action"}


def full_snapshot():
    return Snapshot(
        timestamp=1700000000.25,
        source="nvml",
        host=HostSample(hostname="node1", cpu_percent_per_core=(1.5, 99.0), iowait_percent=0.5, load_average=(1.0, 2.0, 3.0),
                        memory_used_bytes=10, memory_total_bytes=20, swap_used_bytes=0, swap_total_bytes=0),
        driver=DriverInfo("550.54.15", "12.4", "12.550.54.15"),
        devices=(DeviceSample(index=0, name="NVIDIA H100", uuid="GPU-1", cuda_index=1, utilization_gpu_percent=50.0, fan_percent=None,
                              throttle_reasons=("sw_power_cap",), compute_capability=(9, 0), mig_mode=False),
                 DeviceSample(index=1, lost=True, error="GPU is lost")),
        processes=(ProcessSample(pid=42, device_index=0, gpu_memory_bytes=1 << 30, cmdline="python t.py", num_workers=1),
                   ProcessSample(pid=43, role="dataloader_worker", trainer_pid=42, device_index=0, name="pt_data_worker")),
        advice=(Advice("healthy:gpu0", "info", "gpu0", "GPU 0 is busy", "util 97 %", "nothing to change"),),
        errors=(ErrorNote("gpu1", "GPU is lost"),),
        label="live",
    )


def test_round_trip_through_json_is_exact():
    original = full_snapshot()
    assert snapshot_from_dict(json.loads(snapshot_to_json(original))) == original


def test_json_has_every_contract_key():
    data = snapshot_to_dict(full_snapshot())
    assert CONTRACT_TOP <= data.keys()
    assert data["schema"] == SCHEMA_VERSION
    assert CONTRACT_HOST <= data["host"].keys()
    assert CONTRACT_DRIVER <= data["driver"].keys()
    for device in data["devices"]:
        assert CONTRACT_DEVICE <= device.keys()
    for process in data["processes"]:
        assert CONTRACT_PROCESS <= process.keys()
    assert CONTRACT_ADVICE <= data["advice"][0].keys()
    assert data["processes"][0]["trainer_pid"] is None
    assert data["devices"][0]["fan_percent"] is None


def test_unknown_keys_are_ignored_for_forward_compatibility():
    data = snapshot_to_dict(full_snapshot())
    data["future_key"] = {"x": 1}
    data["devices"][0]["future_metric"] = 3
    assert snapshot_from_dict(data) == full_snapshot()


@pytest.mark.parametrize(
    "mutate, message",
    [
        (lambda d: d.pop("schema"), "schema"),
        (lambda d: d.update(schema=SCHEMA_VERSION + 1), "newer"),
        (lambda d: d.pop("timestamp"), "timestamp"),
        (lambda d: d["devices"][0].update(utilization_gpu_percent="high"), "utilization_gpu_percent"),
        (lambda d: d["devices"][0].update(lost="yes"), "lost"),
        (lambda d: d["devices"][0].update(throttle_reasons="hw"), "throttle_reasons"),
        (lambda d: d.update(devices={"0": {}}), "devices"),
        (lambda d: d["processes"][0].update(pid=None), "pid"),
        (lambda d: d["host"].update(cpu_percent_per_core=["a"]), "cpu_percent_per_core"),
    ],
)
def test_malformed_snapshots_are_rejected_with_a_reason(mutate, message):
    data = snapshot_to_dict(full_snapshot())
    mutate(data)
    with pytest.raises(SnapshotFormatError, match=message):
        snapshot_from_dict(data)


def test_non_object_is_rejected():
    with pytest.raises(SnapshotFormatError):
        snapshot_from_dict([1, 2])
