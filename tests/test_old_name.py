"""What the monitor wrote under its old name, gputop, still works in gpusight.

The files in ``tests/data/old-name`` were written by gputop 0.1.0 (see its README): a compact recording,
an export set's JSON and a config file. Each is used as a user would, through the command line. Status
records in the old name's folder, its environment variables and a TensorBoard conversion made under it
are exercised too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psutil

from gpusight.backends.host.trainer_status import TrainerStatusReader
from gpusight.recordings.compact import CompactRecording
from gpusight.recordings.formats import COMPACT_MAGIC, RecordingProblem
from gpusight.recordings.opening import read_recording
from gpusight.snapshot.model import SCHEMA_VERSION
from gpusight.snapshot.serialize import snapshot_from_dict

OLD = Path(__file__).parent / "data" / "old-name"
"""The files written by gputop 0.1.0."""

OLD_MAGIC = b"\x89GPUTOP\r\n\x1a\n"
"""How the old name's compact recordings start."""

GPUSIGHT = [sys.executable, "-m", "gpusight"]


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``gpusight ARGS`` with its output captured."""
    return subprocess.run([*GPUSIGHT, *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ) if env is None else env)


def test_a_compact_recording_of_the_old_name_replays():
    assert (OLD / "demo-mixed.gtop").read_bytes().startswith(OLD_MAGIC)
    items = list(read_recording(OLD / "demo-mixed.gtop"))
    assert [i for i in items if isinstance(i, RecordingProblem)] == []
    assert len(items) == 25
    assert {s.source for s in items} == {"demo"}
    done = run("--replay", str(OLD / "demo-mixed.gtop"), "--json")
    assert done.returncode == 0, done.stderr
    shown = json.loads(done.stdout)
    assert shown["source"] == "replay" and "demo-mixed.gtop" in shown["label"]
    assert len(shown["devices"]) == len(items[0].devices) == 8


def test_the_old_recording_seeks_and_reports(tmp_path):
    recording = CompactRecording(OLD / "demo-mixed.gtop")
    try:
        middle = (recording.first_timestamp + recording.last_timestamp) / 2
        first = next(s for s in recording.read_from(middle) if not isinstance(s, RecordingProblem))
        assert recording.first_timestamp < first.timestamp <= middle
    finally:
        recording.close()
    report = tmp_path / "run.html"
    done = run("--report", str(OLD / "demo-mixed.gtop"), "-o", str(report))
    assert done.returncode == 0, done.stderr
    assert "gpusight run report" in report.read_text(encoding="utf-8")


def test_appending_to_an_old_recording_adds_a_segment_of_the_new_name(tmp_path):
    recording = tmp_path / "run.gtop"
    shutil.copy(OLD / "demo-mixed.gtop", recording)
    done = run("--demo", "--record", str(recording), "--duration", "1", "--interval", "0.25", "--once")
    assert done.returncode == 0, done.stderr
    data = recording.read_bytes()
    assert data.startswith(OLD_MAGIC) and data.count(COMPACT_MAGIC) == 1
    items = list(read_recording(recording))
    assert [i for i in items if isinstance(i, RecordingProblem)] == []
    assert len(items) >= 25 + 4
    replayed = run("--replay", str(recording), "--at", "+0s", "--json")
    assert replayed.returncode == 0, replayed.stderr


def test_an_export_set_of_the_old_name_loads_and_replays():
    document = json.loads((OLD / "export-input-bound.json").read_text(encoding="utf-8"))
    snapshot = snapshot_from_dict(document)  # written under schema 3: the keys added since are missing, as they may be
    assert document["schema"] < SCHEMA_VERSION and all(p.flops_per_step is None for p in snapshot.processes)
    assert snapshot.source == "demo" and snapshot.devices
    assert document["history"]["timestamps"]
    done = run("--replay", str(OLD / "export-input-bound.json"), "--json")
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["devices"]) == len(snapshot.devices)


def test_a_config_file_in_the_old_names_folder_is_read_until_one_of_the_new_name_exists(tmp_path):
    env = dict(os.environ, XDG_CONFIG_HOME=str(tmp_path))
    (tmp_path / "gputop").mkdir()
    shutil.copy(OLD / "config.toml", tmp_path / "gputop" / "config.toml")
    done = run("--demo", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert [d["index"] for d in json.loads(done.stdout)["devices"]] == [1, 3]
    (tmp_path / "gpusight").mkdir()
    (tmp_path / "gpusight" / "config.toml").write_text("[filters]\ngpus = [2]\n", encoding="utf-8")
    done = run("--demo", "--json", env=env)
    assert [d["index"] for d in json.loads(done.stdout)["devices"]] == [2]


def test_a_status_record_published_under_the_old_name_is_read(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    folder = tmp_path / "gputop"
    folder.mkdir(mode=0o700)
    pid, started = os.getpid(), psutil.Process().create_time()
    record = {"kind": "gputop.trainer_status", "schema": 1, "pid": pid, "create_time": started, "uid": os.geteuid(),
              "updated_at": psutil.time.time(), "active": True, "input_wait_fraction": 0.4, "steps_per_second": 3.0}
    (folder / f"{pid}.json").write_text(json.dumps(record), encoding="utf-8")
    status = TrainerStatusReader().read(pid, started)
    assert status is not None and status.input_wait_fraction == 0.4


def test_the_old_names_environment_variable_still_switches_partial_output_off():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUSIGHT_", "GPUTOP_"))}
    done = run("--version", "--verbose", env=dict(env, GPUTOP_PARTIAL_OUTPUT="0"))
    assert "partial output: off" in done.stdout
    done = run("--version", "--verbose", env=env)
    assert "partial output: active" in done.stdout


def test_a_tensorboard_conversion_of_the_old_name_is_replaced_not_refused(tmp_path):
    board = tmp_path / "board"
    board.mkdir()
    earlier = board / "events.out.tfevents.1800000000.node.42.gputop"
    earlier.write_bytes(b"")
    done = run("--convert", str(OLD / "demo-mixed.gtop"), "--to", "tensorboard", str(board))
    assert done.returncode == 1 and "add --force" in done.stderr
    done = run("--convert", str(OLD / "demo-mixed.gtop"), "--to", "tensorboard", str(board), "--force")
    assert done.returncode == 0, done.stderr
    assert not earlier.exists()
    assert [p.suffix for p in board.iterdir()] == [".gpusight"]
