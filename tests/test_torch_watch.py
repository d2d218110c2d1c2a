"""gpusight.torch.watch on real DataLoaders (CPU torch): the measured wait share, the loader settings, the status record.

Ratios are checked with wide margins (a slow loader waits most of each step, a fast one hardly at
all), never absolute durations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from support.procs import wait_until

torch = pytest.importorskip("torch")
from torch.utils.data import DataLoader, Dataset, TensorDataset  # noqa: E402 - only once importorskip found torch

import gpusight.torch as gt  # noqa: E402
from gpusight.backends.host.trainer_status import TrainerStatusReader, parse_status  # noqa: E402
from gpusight.torch.window import RollingWindow  # noqa: E402


class SleepyDataset(Dataset):
    """Each sample takes ``delay`` seconds to produce."""

    def __init__(self, length: int, delay: float) -> None:
        self.length, self.delay = length, delay

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int):
        time.sleep(self.delay)
        return torch.full((4,), float(index))


@pytest.fixture
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``$XDG_RUNTIME_DIR``; the records go in its ``gpusight`` folder."""
    base = tmp_path / "run"
    base.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    return base / "gpusight"


def read_record(path: Path) -> dict:
    """The record at ``path`` as a dict (it must parse as a valid record too)."""
    raw = path.read_bytes()
    parse_status(raw)
    return json.loads(raw)


def test_a_slow_dataset_without_workers_makes_the_loop_wait_most_of_each_step():
    loader = DataLoader(SleepyDataset(8 * 12, 0.005), batch_size=8, num_workers=0)
    batches = gt.watch(loader, publish=False, publish_interval=0.05)
    count = sum(1 for _ in batches)
    stats = batches.stats()
    assert count == 12 and stats.total_steps == 12
    assert stats.input_wait_fraction is not None and stats.input_wait_fraction > 0.5
    assert stats.steps_per_second is not None and stats.steps_per_second > 0
    assert stats.step_seconds is not None and stats.wait_seconds is not None
    assert stats.wait_seconds <= stats.step_seconds


def test_a_fast_dataset_leaves_the_loop_busy_with_its_own_work():
    loader = DataLoader(TensorDataset(torch.randn(8 * 40, 4)), batch_size=8)
    batches = gt.watch(loader, publish=False, publish_interval=0.05)
    for _ in batches:
        time.sleep(0.005)  # the "training step"
    stats = batches.stats()
    assert stats.total_steps == 40
    assert stats.input_wait_fraction is not None and stats.input_wait_fraction < 0.2


def test_batches_pass_through_unchanged_and_len_is_the_loaders():
    data = torch.arange(30.0).reshape(10, 3)
    loader = DataLoader(TensorDataset(data), batch_size=4)
    batches = gt.watch(loader, publish=False)
    assert len(batches) == 3
    seen = [batch[0] for batch in batches]
    assert torch.equal(torch.cat(seen), data)
    assert [batch for batch in gt.watch([1, "two", None], publish=False)] == [1, "two", None]


def test_the_record_holds_the_loader_settings_and_is_marked_idle_after_the_epoch(runtime_dir):
    loader = DataLoader(SleepyDataset(24, 0.001), batch_size=4, num_workers=2, persistent_workers=True,
                        prefetch_factor=3, pin_memory=False)
    batches = gt.watch(loader, name="train", publish_interval=0.01)
    try:
        assert batches.status_path == runtime_dir / f"{os.getpid()}.json"
        during = None
        for _ in batches:
            during = during or read_record(batches.status_path)
        after = read_record(batches.status_path)
    finally:
        batches.close()
    assert during["active"] is True and after["active"] is False
    assert during["pid"] == os.getpid() and during["uid"] == os.geteuid()
    assert during["create_time"] == pytest.approx(psutil.Process().create_time(), abs=0.5)
    assert after["loader"] == {"num_workers": 2, "pin_memory": False, "persistent_workers": True,
                               "prefetch_factor": 3, "batch_size": 4}
    assert after["total_steps"] == 6 and after["name"] == "train"
    assert after["cuda"] is None  # CUDA unused in this process
    assert not batches.status_path.exists()  # close() removed it
    assert (runtime_dir.stat().st_mode & 0o777) == 0o700


def test_breaking_out_of_the_loop_marks_the_record_idle(runtime_dir):
    batches = gt.watch(DataLoader(TensorDataset(torch.zeros(100, 2)), batch_size=2), publish_interval=0.001)
    try:
        for step, _ in enumerate(batches):
            if step == 3:
                assert read_record(batches.status_path)["active"] is True
                break
        record = read_record(batches.status_path)
        assert record["active"] is False and record["total_steps"] == 4
    finally:
        batches.close()


def test_the_monitors_reader_accepts_what_the_wrapper_writes(runtime_dir):
    batches = gt.watch(DataLoader(SleepyDataset(16, 0.002), batch_size=4), publish_interval=0.001)
    try:
        iterator = iter(batches)
        next(iterator)
        next(iterator)
        status = TrainerStatusReader().read(os.getpid(), psutil.Process().create_time())
        assert status is not None and status.active and status.loader_batch_size == 4
        assert status.input_wait_fraction is not None and status.input_wait_fraction > 0.5
        iterator.close()
    finally:
        batches.close()


def test_autocast_in_the_forward_pass_is_seen_through_the_model(runtime_dir):
    model = torch.nn.Linear(4, 2)
    loader = DataLoader(TensorDataset(torch.randn(40, 4)), batch_size=4)
    for amp in (True, False):
        batches = gt.watch(loader, model=model, publish_interval=0.001)
        try:
            for (features,) in batches:
                with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
                    model(features)
                time.sleep(0.002)
            assert read_record(batches.status_path)["autocast"] is amp
        finally:
            batches.close()
    assert not model._forward_pre_hooks  # close() removed the hook


def test_without_a_model_autocast_is_unknown_unless_it_wraps_the_loop(runtime_dir):
    loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=4)
    plain = gt.watch(loader, publish_interval=0.001)
    try:
        for _ in plain:
            pass
        assert read_record(plain.status_path)["autocast"] is None
        with torch.autocast("cpu", dtype=torch.bfloat16):
            for _ in plain:
                pass
        assert read_record(plain.status_path)["autocast"] is True
    finally:
        plain.close()


def test_a_directory_writable_by_others_is_refused(tmp_path):
    unsafe = tmp_path / "shared"
    unsafe.mkdir()
    unsafe.chmod(0o777)
    batches = gt.watch([1, 2, 3], directory=unsafe)
    with pytest.warns(RuntimeWarning, match="writable by other users"):
        assert list(batches) == [1, 2, 3]
    assert list(unsafe.iterdir()) == []


def test_the_record_appears_updates_and_disappears_with_the_process(tmp_path):
    base = tmp_path / "run"
    base.mkdir(mode=0o700)
    script = textwrap.dedent(
        """
        import select, sys, time
        import gpusight.torch
        def forever():
            while True:
                time.sleep(0.01)
                yield 1
        for _ in gpusight.torch.watch(forever(), publish_interval=0.05):
            if select.select([sys.stdin], [], [], 0)[0]:  # a line from the test: stop
                break
        """
    )
    env = dict(os.environ, XDG_RUNTIME_DIR=str(base))
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, env=env)
    try:
        path = base / "gpusight" / f"{child.pid}.json"
        first = wait_until(lambda: path.exists() and read_record(path), "the status record", timeout=60)
        later = wait_until(
            lambda: (r := read_record(path))["updated_at"] > first["updated_at"] and r, "an update", timeout=30
        )
        assert later["total_steps"] > first["total_steps"] and later["active"] is True
        assert 0.0 <= later["input_wait_fraction"] <= 1.0
        child.stdin.write(b"stop\n")
        child.stdin.close()
        assert child.wait(timeout=30) == 0
    finally:
        child.kill()
        child.wait()
    assert not path.exists()
    assert [p.name for p in path.parent.iterdir()] == []  # no temporary file left either


def test_the_rolling_window_forgets_old_buckets():
    window = RollingWindow(span=10.0)
    assert window.stats().input_wait_fraction is None and window.stats().steps_per_second is None
    window.add(end=100.0, elapsed=1.0, wait=0.9, steps=10)
    assert window.stats().input_wait_fraction == pytest.approx(0.9)
    window.add(end=105.0, elapsed=1.0, wait=0.1, steps=30)
    assert window.stats().input_wait_fraction == pytest.approx(0.5)
    assert window.stats().steps_per_second == pytest.approx(20.0)
    window.add(end=112.0, elapsed=2.0, wait=0.2, steps=40)  # the first bucket is now older than 10 s
    stats = window.stats()
    assert stats.input_wait_fraction == pytest.approx(0.1)
    assert (stats.steps, stats.total_steps) == (70, 80)
    assert stats.step_seconds == pytest.approx(3.0 / 70)
