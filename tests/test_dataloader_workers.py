"""Real PyTorch DataLoader workers are found under their trainer for each start method."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.backends.host.source import HostSource
from gpusight.snapshot.model import ProcessRole, ProcessSample
from support.procs import kill_tree, wait_until

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc"),
    pytest.mark.timeout(60),
]

_TRAINER = """
import sys, time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset


class SlowDataset(Dataset):
    def __len__(self):
        return 1_000_000

    def __getitem__(self, index):
        time.sleep(0.05)
        return index


if __name__ == "__main__":
    context, ready = sys.argv[1], Path(sys.argv[2])
    loader = DataLoader(SlowDataset(), batch_size=1, num_workers=2, multiprocessing_context=context)
    batches = iter(loader)
    next(batches)
    ready.write_text("ready")
    sys.stdin.read()  # keep the workers alive until the test closes the pipe
"""


def _start_methods() -> list[str]:
    """Start methods this platform offers, among fork, spawn and forkserver."""
    import multiprocessing

    offered = multiprocessing.get_all_start_methods()
    return [method for method in ("fork", "spawn", "forkserver") if method in offered]


@pytest.mark.parametrize("context", _start_methods())
def test_two_workers_are_listed_under_the_trainer(tmp_path: Path, context: str) -> None:
    script = tmp_path / "trainer.py"
    script.write_text(_TRAINER)
    ready = tmp_path / "ready"
    trainer = subprocess.Popen(
        [sys.executable, str(script), context, str(ready)], stdin=subprocess.PIPE
    )
    source = HostSource()
    try:
        wait_until(lambda: ready.exists() or trainer.poll() is not None, "the trainer", 45)
        assert trainer.poll() is None, "the trainer died"

        def both_workers():
            reading = source.poll([ProcessSample(pid=trainer.pid, device_index=0)])
            workers = [row for row in reading.processes if row.role == ProcessRole.DATALOADER_WORKER]
            return reading if len(workers) == 2 else None

        reading = wait_until(both_workers, "both workers to name themselves", 30)
    finally:
        source.close()
        assert trainer.stdin is not None
        trainer.stdin.close()
        try:
            trainer.wait(timeout=15)
        except subprocess.TimeoutExpired:
            kill_tree(trainer.pid)
            trainer.wait()

    gpu_row, *worker_rows = reading.processes
    assert gpu_row.pid == trainer.pid and gpu_row.num_workers == 2
    assert len(worker_rows) == 2
    assert [row.pid for row in worker_rows] == sorted(row.pid for row in worker_rows)
    for row in worker_rows:
        assert row.trainer_pid == trainer.pid
        assert row.device_index == 0
        assert row.name == "pt_data_worker"
        assert row.rss_bytes > 0
        if context != "forkserver":
            assert row.ppid == trainer.pid
        else:
            assert row.ppid != trainer.pid  # the forkserver is the parent
