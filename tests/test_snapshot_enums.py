"""Fields with a fixed set of values are enums that keep the JSON contract's strings, on Python 3.10 too.

A recording carries these values as plain strings: every string a writer has ever produced loads
as its member, and any other value is rejected with a message that lists the known ones.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpusight.demo.source import DemoSource
from gpusight.recordings.formats import RecordingProblem
from gpusight.recordings.opening import read_recording
from gpusight.snapshot.model import (
    Advice,
    GpuProcessType,
    ProcessRole,
    ProcessSample,
    ScopeKind,
    Severity,
    Snapshot,
    SourceKind,
    StringEnum,
)
from gpusight.snapshot.serialize import (
    SnapshotFormatError,
    snapshot_from_dict,
    snapshot_to_dict,
    snapshot_to_json,
)

REPO = Path(__file__).resolve().parent.parent

CONTRACT_STRINGS: list[tuple[StringEnum, str]] = [
    (SourceKind.NVML, "nvml"),
    (SourceKind.DEMO, "demo"),
    (SourceKind.REPLAY, "replay"),
    (ProcessRole.GPU, "gpu"),
    (ProcessRole.DATALOADER_WORKER, "dataloader_worker"),
    (GpuProcessType.COMPUTE, "compute"),
    (GpuProcessType.GRAPHICS, "graphics"),
    (GpuProcessType.COMPUTE_GRAPHICS, "compute+graphics"),
    (Severity.CRITICAL, "critical"),
    (Severity.WARN, "warn"),
    (Severity.INFO, "info"),
]
"""Each member and the string the JSON contract (and every recording so far) spells it as."""


def snapshot_with(member: StringEnum) -> Snapshot:
    """A snapshot whose field of ``member``'s type holds ``member``."""
    if isinstance(member, SourceKind):
        return Snapshot(timestamp=1_700_000_000.0, source=member)
    if isinstance(member, ProcessRole):
        return Snapshot(timestamp=1_700_000_000.0, source=SourceKind.NVML, processes=(ProcessSample(pid=7, role=member),))
    if isinstance(member, GpuProcessType):
        process = ProcessSample(pid=7, gpu_process_type=member)
        return Snapshot(timestamp=1_700_000_000.0, source=SourceKind.NVML, processes=(process,))
    assert isinstance(member, Severity)
    advice = Advice("healthy:gpu0", member, "gpu0", "title", "evidence", "action")
    return Snapshot(timestamp=1_700_000_000.0, source=SourceKind.NVML, advice=(advice,))


def field_of(data: dict, member: StringEnum) -> object:
    """The JSON value of ``member``'s field in a dict made by :func:`snapshot_with`."""
    if isinstance(member, SourceKind):
        return data["source"]
    if isinstance(member, ProcessRole):
        return data["processes"][0]["role"]
    if isinstance(member, GpuProcessType):
        return data["processes"][0]["gpu_process_type"]
    return data["advice"][0]["severity"]


@pytest.mark.parametrize(("member", "text"), CONTRACT_STRINGS, ids=[text for _, text in CONTRACT_STRINGS])
def test_each_member_is_written_as_its_contract_string_and_read_back_as_the_member(member, text):
    line = snapshot_to_json(snapshot_with(member))
    data = json.loads(line)
    assert field_of(data, member) == text
    back = snapshot_from_dict(data)
    assert field_of(snapshot_to_dict(back), member) is member


@pytest.mark.parametrize(("member", "text"), CONTRACT_STRINGS, ids=[text for _, text in CONTRACT_STRINGS])
def test_each_member_equals_and_prints_as_its_string(member, text):
    assert member == text and hash(member) == hash(text)
    assert (str(member), f"{member}", f"{member:>20}", format(member)) == (text, text, f"{text:>20}", text)


def test_every_member_of_every_field_enum_is_in_the_contract_table():
    listed = {member for member, _ in CONTRACT_STRINGS}
    assert listed == {*SourceKind, *ProcessRole, *GpuProcessType, *Severity}


BAD_VALUES = [
    ("source", {"source": "dcgm"}, "source must be one of 'nvml', 'demo', 'replay', not 'dcgm'"),
    ("source not a string", {"source": 3}, "source must be one of 'nvml', 'demo', 'replay', not 3"),
    ("role", {"processes": [{"pid": 1, "role": "trainer"}]},
     "processes[0].role must be one of 'gpu', 'dataloader_worker', not 'trainer'"),
    ("role null", {"processes": [{"pid": 1, "role": None}]},
     "processes[0].role must be one of 'gpu', 'dataloader_worker', not null"),
    ("process type", {"processes": [{"pid": 1}, {"pid": 2, "gpu_process_type": "mps"}]},
     "processes[1].gpu_process_type must be one of 'compute', 'graphics', 'compute+graphics', not 'mps'"),
    ("severity", {"advice": [{"id": "a", "severity": "warning", "scope": "host", "title": "t", "evidence": "e",
                              "action": "a"}]},
     "advice[0].severity must be one of 'critical', 'warn', 'info', not 'warning'"),
    ("severity in other case", {"advice": [{"id": "a", "severity": "WARN", "scope": "host", "title": "t",
                                            "evidence": "e", "action": "a"}]},
     "advice[0].severity must be one of 'critical', 'warn', 'info', not 'WARN'"),
    ("severity a number", {"advice": [{"id": "a", "severity": 1, "scope": "host", "title": "t", "evidence": "e",
                                       "action": "a"}]},
     "advice[0].severity must be one of 'critical', 'warn', 'info', not 1"),
]
"""(case, fields replacing a valid snapshot's, the message expected)."""


@pytest.mark.parametrize(("case", "fields", "message"), BAD_VALUES, ids=[case for case, _, _ in BAD_VALUES])
def test_an_unknown_value_is_rejected_with_the_known_ones_listed(case, fields, message):
    data = {"schema": 1, "timestamp": 1_700_000_000.0, "source": "nvml", **fields}
    with pytest.raises(SnapshotFormatError) as raised:
        snapshot_from_dict(data)
    assert str(raised.value) == message


@pytest.mark.parametrize("value", ["\x1b]0;owned\x07", "x" * 33, "warn\n"])
def test_an_unprintable_or_long_bad_value_is_not_quoted(value):
    data = {"schema": 1, "timestamp": 1.0, "source": value}
    with pytest.raises(SnapshotFormatError) as raised:
        snapshot_from_dict(data)
    assert str(raised.value) == "source must be one of 'nvml', 'demo', 'replay'"


def test_a_recording_with_an_unknown_severity_names_the_line_and_keeps_the_rest(tmp_path):
    now = [1_700_000_000.0]
    source = DemoSource("mixed", seed=2, clock=lambda: now[0])
    good = [source.poll()]
    now[0] += 1.0
    good.append(source.poll())
    bad = json.loads(snapshot_to_json(good[0]))
    bad["advice"] = [{"id": "x:host", "severity": "fatal", "scope": "host", "title": "t", "evidence": "e", "action": "a"}]
    path = tmp_path / "recording.jsonl"
    path.write_text("\n".join([snapshot_to_json(good[0]), json.dumps(bad), snapshot_to_json(good[1])]) + "\n")

    items = list(read_recording(path))

    assert items[0] == good[0] and items[2] == good[1]
    assert isinstance(items[1], RecordingProblem)
    assert str(items[1]) == "line 2: advice[0].severity must be one of 'critical', 'warn', 'info', not 'fatal'"


SCOPES = [
    ("host", (ScopeKind.HOST, None)),
    ("gpu0", (ScopeKind.GPU, 0)),
    ("gpu12", (ScopeKind.GPU, 12)),
    ("pid4242", (ScopeKind.PID, 4242)),
    ("gpu", (ScopeKind.GPU, None)),
    ("gpux", None),
    ("gpu-1", None),
    ("gpu\u00b2", None),  # a digit to str.isdigit, not to int()
    ("hostname", None),
    ("", None),
    ("cpu0", None),
]
"""(scope, what ScopeKind.parse makes of it)."""


@pytest.mark.parametrize(("scope", "parsed"), SCOPES, ids=[repr(scope) for scope, _ in SCOPES])
def test_scope_parsing(scope, parsed):
    assert ScopeKind.parse(scope) == parsed


@pytest.mark.parametrize(("kind", "number", "scope"), [
    (ScopeKind.HOST, None, "host"), (ScopeKind.GPU, 3, "gpu3"), (ScopeKind.PID, 123456, "pid123456"),
])
def test_a_scope_made_by_its_kind_parses_back(kind, number, scope):
    assert kind.of(number) == scope
    assert ScopeKind.parse(scope) == (kind, number)


def python310() -> str | None:
    """A working Python 3.10 interpreter on this machine (on PATH or installed by pyenv), if there is one."""
    candidates = [shutil.which("python3.10"), *map(str, sorted(Path.home().glob(".pyenv/versions/3.10*/bin/python3.10")))]
    for candidate in filter(None, candidates):
        check = subprocess.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 10)"],
                               capture_output=True, timeout=60, check=False)
        if check.returncode == 0:
            return candidate
    return None


CHECK_UNDER_310 = """
import json, sys
from gpusight.snapshot.model import ProcessRole, ProcessSample, Severity, Snapshot, SourceKind
from gpusight.snapshot.serialize import snapshot_from_dict, snapshot_to_json
snapshot = Snapshot(timestamp=1.0, source=SourceKind.REPLAY, processes=(ProcessSample(pid=1, role=ProcessRole.GPU),))
back = snapshot_from_dict(json.loads(snapshot_to_json(snapshot)))
print(sys.version_info[:2], f"{Severity.WARN}", str(SourceKind.DEMO), json.loads(snapshot_to_json(back))["source"],
      back.processes[0].role is ProcessRole.GPU)
"""


def test_members_print_and_serialize_as_their_strings_under_python_3_10():
    interpreter = python310()
    if interpreter is None:
        pytest.skip("no Python 3.10 interpreter on this machine (python3.10 on PATH or under ~/.pyenv)")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run([interpreter, "-c", CHECK_UNDER_310], capture_output=True, text=True, env=env,
                            timeout=60, check=False, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["(3,", "10)", "warn", "demo", "replay", "True"]
