"""``gpusight --convert FILE --to tensorboard DIR``, read back by TensorBoard's own loader and served by TensorBoard."""

import json
import os
import random
import re
import struct
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c as tensorboard_masked_crc32c

from gpusight.convert.tfevents import crc32c, masked_crc32c
from gpusight.recordings.opening import open_recorder
from gpusight.snapshot.model import DeviceSample, HostSample, ProcessSample, Snapshot, SourceKind
from gpusight.tracker_scalars import GIB

GPUSIGHT = [sys.executable, "-m", "gpusight"]
START = 1_800_000_000.0
"""Timestamp of the first snapshot."""


def float32(value: float) -> float:
    """``value`` as TensorBoard stores a ``simple_value``."""
    return struct.unpack("<f", struct.pack("<f", value))[0]


def snapshot(number: int) -> Snapshot:
    """Snapshot ``number``: GPU 0 moving (its power unknown in snapshot 1), GPU 1 lost, a trainer measuring input wait."""
    gpu0 = DeviceSample(
        index=0, name="NVIDIA H100 80GB HBM3", utilization_gpu_percent=10.0 * number, memory_used_bytes=(number + 1) * GIB,
        power_watts=None if number == 1 else 300.5 + number, temperature_celsius=60.0, sm_active_percent=42.5,
        tensor_active_percent=None, pcie_rx_bytes_per_s=2.5e9, pcie_tx_bytes_per_s=1.0e6,
    )
    host = HostSample(cpu_percent_per_core=(10.0, 30.0 + number), iowait_percent=1.5, memory_used_bytes=64 * GIB)
    trainer = ProcessSample(pid=4242, device_index=0, input_wait_percent=35.0 + number, steps_per_second=12.5)
    other = ProcessSample(pid=4343, device_index=0)
    return Snapshot(timestamp=START + 0.5 * number, source=SourceKind.NVML, host=host,
                    devices=(gpu0, DeviceSample(index=1, lost=True)), processes=(trainer, other))


@pytest.fixture(params=["run.jsonl.gz", "run.gtr"])
def recording(tmp_path, request) -> Path:
    """Three snapshots in a recording: gzip-compressed JSON lines, or the compact format."""
    path = tmp_path / request.param
    recorder = open_recorder(path)
    for number in range(3):
        recorder.write(snapshot(number))
    recorder.close()
    return path


def convert(recording: Path, directory: Path, *extra: str) -> subprocess.CompletedProcess:
    """Run ``gpusight --convert RECORDING --to tensorboard DIRECTORY``."""
    return subprocess.run([*GPUSIGHT, "--convert", str(recording), "--to", "tensorboard", str(directory), *extra],
                          capture_output=True, text=True, timeout=120)


def load(directory: Path) -> EventAccumulator:
    """TensorBoard's own reader over ``directory``, every scalar kept."""
    accumulator = EventAccumulator(str(directory), size_guidance={"scalars": 0})
    accumulator.Reload()
    return accumulator


def test_crc32c_matches_the_standard_check_value_and_tensorboards_own():
    assert crc32c(b"123456789") == 0xE3069283
    rng = random.Random(7)
    for size in [0, 1, 7, 8, 9, 15, 16, 17, 1000, 4099]:
        data = rng.randbytes(size)
        assert masked_crc32c(data) == tensorboard_masked_crc32c(data), size


def test_tensorboard_reads_every_scalar_with_time_and_step(tmp_path, recording):
    out = convert(recording, tmp_path / "tb")
    assert out.returncode == 0, out.stderr
    assert re.fullmatch(rf"gpusight: converted 3 snapshots from {re.escape(str(recording))} \((jsonl\.gz|compact), [0-9.]+ k?B\) to "
                        rf"{re.escape(str(tmp_path / 'tb'))}/events\.out\.tfevents\.\d+\..+\.gpusight \(tensorboard, [0-9.]+ k?B\); "
                        r"0 damaged parts skipped\n", out.stderr)
    accumulator = load(tmp_path / "tb")
    assert accumulator.FirstEventTimestamp() == START  # the run starts at its first snapshot, not in 1970
    assert sorted(accumulator.Tags()["scalars"]) == sorted([
        "gpu0/utilization_percent", "gpu0/memory_used_gib", "gpu0/power_watts", "gpu0/temperature_celsius",
        "gpu0/sm_active_percent", "gpu0/pcie_rx_mb_per_s", "gpu0/pcie_tx_mb_per_s",
        "host/cpu_percent", "host/iowait_percent", "host/memory_used_gib",
        "pid4242/input_wait_percent", "pid4242/steps_per_second",
    ])  # nothing for the lost GPU, the unknown tensor activity or the process that measures nothing

    def series(tag):
        return [(event.wall_time, event.step, event.value) for event in accumulator.Scalars(tag)]

    times = [START, START + 0.5, START + 1.0]
    assert series("gpu0/utilization_percent") == [(times[n], n, 10.0 * n) for n in range(3)]
    assert series("gpu0/power_watts") == [(times[0], 0, 300.5), (times[2], 2, 302.5)]  # unknown: not written, not 0
    assert series("gpu0/memory_used_gib") == [(times[n], n, n + 1.0) for n in range(3)]
    assert series("gpu0/pcie_rx_mb_per_s") == [(times[n], n, 2500.0) for n in range(3)]
    assert series("host/cpu_percent") == [(times[n], n, float32((10.0 + 30.0 + n) / 2)) for n in range(3)]
    assert series("host/memory_used_gib") == [(times[n], n, 64.0) for n in range(3)]
    assert series("pid4242/input_wait_percent") == [(times[n], n, 35.0 + n) for n in range(3)]


def test_a_directory_with_another_runs_events_is_refused(tmp_path, recording):
    directory = tmp_path / "runs"
    directory.mkdir()
    (directory / "events.out.tfevents.1700000000.host.1").write_bytes(b"")
    out = convert(recording, directory)
    assert out.returncode == 1
    assert out.stderr == (f"gpusight: {directory} holds another program's TensorBoard events "
                          f"(events.out.tfevents.1700000000.host.1); give gpusight a directory of its own, "
                          f"e.g. {directory / 'gpusight'}\n")
    assert sorted(p.name for p in directory.iterdir()) == ["events.out.tfevents.1700000000.host.1"]


def test_converting_again_needs_force_and_then_replaces_the_earlier_file(tmp_path, recording):
    directory = tmp_path / "tb"
    assert convert(recording, directory).returncode == 0
    (first,) = directory.iterdir()
    again = convert(recording, directory)
    assert again.returncode == 1
    assert again.stderr == f"gpusight: {directory} already holds a conversion ({first.name}); add --force to replace it\n"
    time.sleep(1.1)  # a new second: a new file name
    forced = convert(recording, directory, "--force")
    assert forced.returncode == 0, forced.stderr
    (second,) = directory.iterdir()
    assert second != first
    assert [event.step for event in load(directory).Scalars("gpu0/utilization_percent")] == [0, 1, 2]


def test_tensorboard_itself_serves_the_scalars(tmp_path, recording):
    assert convert(recording, tmp_path / "tb").returncode == 0
    log = tmp_path / "tensorboard.log"
    with open(log, "wb") as stderr:
        server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", str(tmp_path / "tb"),
                                   "--host", "127.0.0.1", "--port", "0"],
                                  stdout=subprocess.DEVNULL, stderr=stderr, env=dict(os.environ, PYTHONWARNINGS="ignore"))
    try:
        base = _wait_for(lambda: _served_at(log), "TensorBoard to listen", server)
        tags = _wait_for(lambda: _tags(base), "TensorBoard to load the run", server)
        assert {"gpu0/utilization_percent", "host/cpu_percent", "pid4242/input_wait_percent"} <= set(tags["."])
        query = urllib.parse.urlencode({"run": ".", "tag": "gpu0/power_watts"})
        with urllib.request.urlopen(f"{base}/data/plugin/scalars/scalars?{query}", timeout=10) as reply:
            points = json.load(reply)
        assert points == [[START, 0, 300.5], [START + 1.0, 2, 302.5]]
    finally:
        server.terminate()
        server.wait(timeout=30)


def _served_at(log: Path) -> str | None:
    """TensorBoard's address once it says where it listens."""
    found = re.search(r"at (http://127\.0\.0\.1:\d+)/", log.read_text(errors="replace"))
    return found.group(1) if found else None


def _tags(base: str) -> dict | None:
    """The scalar tags TensorBoard serves, once it has loaded any."""
    with urllib.request.urlopen(f"{base}/data/plugin/scalars/tags", timeout=10) as reply:
        tags = json.load(reply)
    return tags if tags.get(".") else None


def _wait_for(probe, what, server, timeout=90.0):
    """Poll ``probe`` until it gives a value; fail if the server exits or the time runs out."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        assert server.poll() is None, f"tensorboard exited ({server.returncode}) before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_the_day_benchmark_runs_briefly_and_writes_its_table(tmp_path):
    output = tmp_path / "results.md"
    script = Path(__file__).resolve().parents[1] / "benchmarks" / "convert_day.py"
    out = subprocess.run([sys.executable, str(script), "--snapshots", "300", "--compare", "100", "--sample", "50",
                          "--output", str(output)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    rows = [line.split(" | ") for line in output.read_text().splitlines() if line.startswith("| ") and "---" not in line]
    assert [(row[0], row[1]) for row in rows[1:3]] == [
        ("| gpusight's event writer (scalars + TFRecord + CRC-32C)", "300"),
        ("| tensorboard package's protobufs + RecordWriter", "100"),
    ]
    assert [re.sub(r" \(.*\)", "", row[0]) for row in rows[3:]] == [
        "| reading day.jsonl", "| whole conversion of day.jsonl", "| reading day.jsonl.gz", "| whole conversion of day.jsonl.gz",
        "| reading day.gtr", "| whole conversion of day.gtr"]
    assert all(row[1] == "50" for row in rows[3:])
