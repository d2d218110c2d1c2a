"""``read_recording(..., gpu_processes_only=True)``, which ``--report`` reads with: the same snapshots as a full read,
less the processes without a GPU context, from compact recordings (whose decoder steps over those rows) and JSON lines
alike."""

import dataclasses
from pathlib import Path

import pytest

from gpusight.recordings.opening import read_recording
from gpusight.snapshot.model import ProcessRole, Snapshot
from support.demo_run import Segment, record_demo_run


@pytest.mark.parametrize("name", ["run.gtr", "run.jsonl"])
def test_only_gpu_processes_and_nothing_else_differs(tmp_path: Path, name: str):
    path = tmp_path / name
    record_demo_run(path, [Segment("mixed", 90, pause=600), Segment("input-bound", 30)], interval=1.0)
    full = list(read_recording(path))
    lean = list(read_recording(path, gpu_processes_only=True))
    assert len(lean) == len(full) == 120
    workers = 0
    for whole, part in zip(full, lean, strict=True):
        assert isinstance(whole, Snapshot) and isinstance(part, Snapshot)
        kept = tuple(p for p in whole.processes if p.role == ProcessRole.GPU)
        workers += len(whole.processes) - len(kept)
        assert part == dataclasses.replace(whole, processes=kept)
    assert workers > 0  # the demo's trainers have DataLoader workers, so something was left out
