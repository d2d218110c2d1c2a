"""The JSON contract: snapshots round-trip, wrong shapes are rejected with a reason."""

import json
from dataclasses import dataclass
from enum import Enum

import jsonschema
import pytest

from gpusight.snapshot.model import (
    SCHEMA_VERSION,
    Advice,
    DeviceSample,
    DriverInfo,
    ErrorNote,
    HostSample,
    ProcessSample,
    Snapshot,
)
from gpusight.snapshot.schema import json_schema, record_shape
from gpusight.snapshot.serialize import (
    SnapshotFormatError,
    record_from_dict,
    snapshot_from_dict,
    snapshot_to_dict,
    snapshot_to_json,
)


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


def test_what_gpusight_writes_has_every_key_of_the_schema():
    data = snapshot_to_dict(full_snapshot())
    assert snapshot_from_dict(data, complete=True) == full_snapshot()
    assert data["schema"] == SCHEMA_VERSION
    assert data["processes"][0]["trainer_pid"] is None
    assert data["devices"][0]["fan_percent"] is None


@pytest.mark.parametrize(
    "remove, place",
    [
        (lambda d: d.pop("label"), "label"),
        (lambda d: d["host"].pop("swap_total_bytes"), "host.swap_total_bytes"),
        (lambda d: d["devices"][1].pop("lost"), "devices[1].lost"),
        (lambda d: d["processes"][1].pop("role"), "processes[1].role"),
    ],
)
def test_a_missing_key_is_refused_only_when_every_key_is_required(remove, place):
    data = snapshot_to_dict(full_snapshot())
    remove(data)
    assert snapshot_from_dict(data) != full_snapshot()  # a reader falls back to the default
    with pytest.raises(SnapshotFormatError) as caught:
        snapshot_from_dict(data, complete=True)
    assert str(caught.value) == f"{place} is missing"


def test_unknown_keys_are_ignored_for_forward_compatibility():
    data = snapshot_to_dict(full_snapshot())
    data["future_key"] = {"x": 1}
    data["devices"][0]["future_metric"] = 3
    assert snapshot_from_dict(data) == full_snapshot()


MALFORMED = [
    (lambda d: d.pop("schema"), "schema"),
    (lambda d: d.update(schema=SCHEMA_VERSION + 1), "newer"),
    (lambda d: d.pop("timestamp"), "timestamp"),
    (lambda d: d["devices"][0].update(utilization_gpu_percent="high"), "utilization_gpu_percent"),
    (lambda d: d["devices"][0].update(lost="yes"), "lost"),
    (lambda d: d["devices"][0].update(throttle_reasons="hw"), "throttle_reasons"),
    (lambda d: d.update(devices={"0": {}}), "devices"),
    (lambda d: d["processes"][0].update(pid=None), "pid"),
    (lambda d: d["host"].update(cpu_percent_per_core=["a"]), r"host\.cpu_percent_per_core\[0\] must be a finite"),
    (lambda d: d.update(timestamp=-1.0), "timestamp must be between"),
    (lambda d: d.update(schema=0), "schema must be between"),
    (lambda d: d.update(host=None), "host must be a JSON object"),
    (lambda d: d["devices"][0].update(compute_capability=[9, 0, 1]), "compute_capability must be a list of 2"),
    (lambda d: d["devices"][0].update(index=0.5), r"devices\[0\]\.index must be a whole number"),
    (lambda d: d["devices"][0].update(memory_used_bytes=True), "memory_used_bytes must be a whole number"),
    (lambda d: d["processes"][1].update(name=["x"]), r"processes\[1\]\.name must be a string, not a list"),
    (lambda d: d["advice"][0].pop("title"), r"advice\[0\]\.title is missing"),
]
"""Damage to a written snapshot, and what the refusal must say."""


@pytest.mark.parametrize("mutate, message", MALFORMED)
def test_malformed_snapshots_are_rejected_with_a_reason(mutate, message):
    data = snapshot_to_dict(full_snapshot())
    mutate(data)
    with pytest.raises(SnapshotFormatError, match=message):
        snapshot_from_dict(data)


@pytest.mark.parametrize("text, shown", [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf")])
def test_non_finite_numbers_are_rejected(text, shown):
    line = snapshot_to_json(full_snapshot()).replace('"power_watts":null', f'"power_watts":{text}', 1)
    assert text in line
    with pytest.raises(SnapshotFormatError, match=f"^devices\\[0\\].power_watts must be a finite number, not {shown}$"):
        snapshot_from_dict(json.loads(line))


def test_non_object_is_rejected():
    with pytest.raises(SnapshotFormatError, match="Snapshot must be a JSON object, not a list"):
        snapshot_from_dict([1, 2])


def test_an_offending_value_is_quoted_short_and_printable():
    data = snapshot_to_dict(full_snapshot())
    data["label"] = 10**400
    with pytest.raises(SnapshotFormatError) as caught:
        snapshot_from_dict(data)
    message = str(caught.value)
    assert message.startswith("label must be a string, not 1000") and message.endswith("...")
    assert len(message) < 80



class Shade(str, Enum):
    """A string-valued enum, as the model declares fixed sets of names."""

    LIGHT = "light"
    DARK = "dark"


class Level(Enum):
    """A number-valued enum."""

    ONE = 1
    TWO = 2


@dataclass(frozen=True)
class Paint:
    """A record with enum fields, to check that any Enum field is validated by its members."""

    shade: Shade
    level: Level | None = None


def test_an_enum_field_takes_exactly_the_values_of_its_members():
    assert record_from_dict(Paint, {"shade": "dark", "level": 2}) == Paint(Shade.DARK, Level.TWO)
    assert record_from_dict(Paint, {"shade": "light", "level": None}).shade is Shade.LIGHT
    with pytest.raises(SnapshotFormatError, match="^shade must be one of 'light', 'dark', not 'grey'$"):
        record_from_dict(Paint, {"shade": "grey"})
    with pytest.raises(SnapshotFormatError, match="^level must be one of 1, 2, not true$"):
        record_from_dict(Paint, {"shade": "dark", "level": True})
    with pytest.raises(SnapshotFormatError, match="^shade must be one of .*, not a list$"):
        record_from_dict(Paint, {"shade": ["dark"]})
    assert json_schema(Paint)["$defs"]["Paint"]["properties"]["shade"] == {"enum": ["light", "dark"]}


def test_a_field_json_cannot_hold_is_refused_when_the_schema_is_derived():
    @dataclass(frozen=True)
    class Loose:
        """A dict-typed field has no fixed shape."""

        table: dict[str, int]

    with pytest.raises(TypeError, match=r"Loose.table: dict\[str, int\] cannot be written as JSON"):
        record_shape(Loose)


def test_the_json_schema_document_is_valid_and_accepts_what_gpusight_writes():
    document = json_schema()
    jsonschema.Draft202012Validator.check_schema(document)
    jsonschema.validate(json.loads(snapshot_to_json(full_snapshot())), document)


@pytest.mark.parametrize("mutate, message", MALFORMED)
def test_the_json_schema_document_refuses_what_the_validator_refuses(mutate, message):
    data = snapshot_to_dict(full_snapshot())
    mutate(data)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, json_schema())
