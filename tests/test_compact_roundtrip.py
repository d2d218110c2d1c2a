"""The compact format gives back exactly what was written: every field of every dataclass, None, any string."""

import dataclasses

import pytest

from gpusight.demo.source import DemoSource
from gpusight.recordings.compact import CompactRecording, CompactWriter, read_compact
from gpusight.recordings.compact.layout import model_layout
from gpusight.recordings.formats import RecordingProblem
from gpusight.recordings.opening import open_recorder, open_seekable, read_recording
from gpusight.snapshot.model import Advice, DeviceSample, HostSample, ProcessSample, Severity, Snapshot, SourceKind
from gpusight.snapshot.serialize import snapshot_to_dict
from tests.support.compact import every_field_snapshots

START = 1_750_000_000.0


def write(path, snapshots) -> None:
    writer = CompactWriter(path)
    for snapshot in snapshots:
        writer.write(snapshot)
    writer.close()


def read_back(path) -> list:
    items = list(read_recording(path))
    problems = [i for i in items if isinstance(i, RecordingProblem)]
    assert problems == []
    return items


def dataclass_values(value, seen):
    """Record (class, field) -> set of reprs of the values found anywhere in ``value``."""
    if dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            inner = getattr(value, f.name)
            seen.setdefault((type(value), f.name), set()).add(repr(inner))
            dataclass_values(inner, seen)
    elif isinstance(value, tuple):
        for item in value:
            dataclass_values(item, seen)


def test_every_field_of_every_dataclass_round_trips(tmp_path):
    snapshots = every_field_snapshots(40)
    seen: dict = {}
    for snapshot in snapshots:
        dataclass_values(snapshot, seen)
    for (cls, name), values in seen.items():  # the data really sets every field to something other than its default
        field = next(f for f in dataclasses.fields(cls) if f.name == name)
        default = field.default if field.default is not dataclasses.MISSING else (
            field.default_factory() if field.default_factory is not dataclasses.MISSING else object())
        assert values - {repr(default)}, f"{cls.__name__}.{name} never differs from its default"
    every_class = {t.cls for t in model_layout()}
    assert every_class <= {cls for cls, _ in seen} | {Snapshot}
    path = tmp_path / "all.gtr"
    write(path, snapshots)
    back = read_back(path)
    assert [snapshot_to_dict(s) for s in back] == [snapshot_to_dict(s) for s in snapshots]
    assert back == snapshots


def test_none_stays_none_and_zero_stays_zero(tmp_path):
    def device(value):
        return DeviceSample(0, utilization_gpu_percent=value, power_watts=value, memory_used_bytes=None if value is None else 0)

    values = [None, 0.0, None, 0.0, 0.0, None, -0.0, 5.0, None]
    snapshots = [Snapshot(START + i, SourceKind.NVML, devices=(device(v),)) for i, v in enumerate(values)]
    path = tmp_path / "none.gtr"
    write(path, snapshots)
    back = read_back(path)
    assert [s.devices[0].utilization_gpu_percent for s in back] == values
    assert [s.devices[0].memory_used_bytes for s in back] == [None if v is None else 0 for v in values]
    assert [str(s.devices[0].power_watts) for s in back] == [str(v) for v in values]  # -0.0 keeps its sign


def test_values_outside_the_quantum_round_trip_exactly(tmp_path):
    awkward = [0.1 + 0.2, 1e-300, 1e300, 123.4567891, float("inf"), 699.999, 3.0, 2**60 + 0.0]
    snapshots = [
        Snapshot(START + i * 0.001 + 1e-7, SourceKind.NVML, devices=(DeviceSample(0, power_watts=v, temperature_celsius=v),),
                 host=HostSample(cpu_percent_per_core=(v, 12.5, 0.1 * i), load_average=(v, v, 0.01)))
        for i, v in enumerate(awkward)
    ]
    path = tmp_path / "awkward.gtr"
    write(path, snapshots)
    back = read_back(path)
    assert [(s.timestamp, s.devices[0].power_watts, s.host.cpu_percent_per_core, s.host.load_average) for s in back] == [
        (s.timestamp, s.devices[0].power_watts, s.host.cpu_percent_per_core, s.host.load_average) for s in snapshots]


def test_processes_come_and_go_and_change(tmp_path):
    def proc(pid, i):
        return ProcessSample(pid, device_index=pid % 2, name=f"p{pid}", cmdline=f"python train.py --run {pid}",
                             cpu_percent=round(10 + i * 0.3 + pid, 1), gpu_memory_bytes=(pid + i) << 20,
                             status="running" if (i + pid) % 3 else "sleeping", elapsed_seconds=round(i * 0.5, 2))

    snapshots = []
    for i in range(60):
        pids = [p for p in range(100, 110) if (p + i // 7) % 4] + [200 + i // 5]
        snapshots.append(Snapshot(START + i * 0.5, SourceKind.DEMO, processes=tuple(proc(p, i) for p in pids)))
    path = tmp_path / "procs.gtr"
    write(path, snapshots)
    assert read_back(path) == snapshots


def test_demo_run_round_trips_and_is_small(tmp_path):
    now = [START]
    source = DemoSource("mixed", seed=3, clock=lambda: now[0])
    snapshots = []
    for i in range(120):
        now[0] = START + i * 0.5
        snapshots.append(source.poll())
    path = tmp_path / "demo.gtr"
    write(path, snapshots)
    assert read_back(path) == snapshots
    jsonl = tmp_path / "demo.jsonl"
    recorder = open_recorder(jsonl)
    for snapshot in snapshots:
        recorder.write(snapshot)
    recorder.close()
    assert path.stat().st_size * 10 < jsonl.stat().st_size


def advice_at(i):
    ids = []
    if 10 <= i < 30:
        ids.append("input_bound:gpu0")
    if i >= 20 and i % 40 < 25:
        ids.append("idle:gpu1")
    return tuple(Advice(a, Severity.WARN, a.split(":")[1], f"title {a}", "e", "act") for a in ids)


def test_seeking_and_advice_events(tmp_path, monkeypatch):
    monkeypatch.setattr("gpusight.recordings.compact.writer.BLOCK_SNAPSHOTS", 16)  # many blocks in a small file
    snapshots = [Snapshot(START + i, SourceKind.DEMO, devices=(DeviceSample(0, power_watts=100.0 + i),),
                          advice=advice_at(i)) for i in range(100)]
    path = tmp_path / "seek.gtr"
    write(path, snapshots)
    recording = open_seekable(path)
    assert isinstance(recording, CompactRecording)
    try:
        assert (recording.first_timestamp, recording.last_timestamp) == (START, START + 99)
        assert len(recording.blocks) == 7
        events = [(e.timestamp - START, e.advice_id, e.raised) for e in recording.advice_events()]
        assert events == [(10, "input_bound:gpu0", True), (20, "idle:gpu1", True), (25, "idle:gpu1", False),
                          (30, "input_bound:gpu0", False), (40, "idle:gpu1", True), (65, "idle:gpu1", False),
                          (80, "idle:gpu1", True)]
        for wanted, first in [(None, 0), (START - 5, 0), (START, 0), (START + 15.5, 15), (START + 16, 16),
                              (START + 47.99, 47), (START + 99, 99), (START + 500, 99)]:
            got = list(recording.read_from(wanted))
            assert got == snapshots[first:], wanted
    finally:
        recording.close()


def test_reading_an_open_file_object(tmp_path):
    snapshots = every_field_snapshots(5)
    path = tmp_path / "f.gtr"
    write(path, snapshots)
    with open(path, "rb") as file:
        assert list(read_compact(file)) == snapshots


@pytest.mark.parametrize("name", ["run", "run.gtop", "run.JSONL.txt"])
def test_names_without_jsonl_get_the_compact_format(tmp_path, name):
    writer = open_recorder(tmp_path / name)
    assert isinstance(writer, CompactWriter)
    writer.close()


def test_readers_in_several_threads_share_one_recording(tmp_path, monkeypatch):
    import threading

    monkeypatch.setattr("gpusight.recordings.compact.writer.BLOCK_SNAPSHOTS", 10)
    snapshots = every_field_snapshots(60)
    path = tmp_path / "shared.gtr"
    write(path, snapshots)
    recording = CompactRecording(path)
    results: dict[int, list] = {}

    def read_all(slot):
        results[slot] = [list(recording.read_from(s.timestamp)) for s in snapshots[::7]]

    threads = [threading.Thread(target=read_all, args=(slot,)) for slot in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    recording.close()
    expected = [snapshots[i:] for i in range(0, 60, 7)]
    assert all(results[slot] == expected for slot in range(4))
