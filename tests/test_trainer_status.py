"""The monitor's side of trainer status records: parsing, validation against the live process, and the host join.

Records are written here by hand (not with gpusight.torch), as real files in a real runtime directory,
for real processes: this test process itself and a child it starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from gpusight.backends.host.source import HostSource
from gpusight.backends.host.trainer_status import (
    MAX_RECORD_BYTES,
    StatusFormatError,
    TrainerStatusReader,
    parse_status,
)
from gpusight.snapshot.model import ProcessSample
from gpusight.trainer_record import status_dirs
from support.procs import sleeper


@pytest.fixture
def runtime_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private ``$XDG_RUNTIME_DIR`` for this test; records go in its ``gpusight`` folder."""
    base = tmp_path / "run"
    base.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    folder = base / "gpusight"
    folder.mkdir(mode=0o700)
    return folder


def record(owner: int, **overrides: object) -> dict:
    """A valid record for the live process ``owner``, with ``overrides`` applied (None removes a key)."""
    data = {
        "kind": "gpusight.trainer_status",
        "schema": 1,
        "pid": owner,
        "create_time": psutil.Process(owner).create_time(),
        "uid": os.geteuid(),
        "updated_at": time.time(),
        "active": True,
        "name": "train",
        "window_seconds": 9.5,
        "steps": 120,
        "total_steps": 5000,
        "input_wait_fraction": 0.63,
        "steps_per_second": 12.5,
        "step_seconds": 0.08,
        "wait_seconds": 0.0504,
        "loader": {"num_workers": 2, "pin_memory": False, "persistent_workers": True, "prefetch_factor": 2,
                   "batch_size": 64},
        "cuda": {"device": 0, "allocated_bytes": 3 << 30, "reserved_bytes": 4 << 30, "peak_bytes": 5 << 30},
        "autocast": True,
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def write(folder: Path, pid: int, content: dict | str | bytes) -> Path:
    """Write ``content`` (a dict is JSON-encoded) as ``<pid>.json`` in ``folder``."""
    path = folder / f"{pid}.json"
    if isinstance(content, dict):
        content = json.dumps(content)
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def me() -> tuple[int, float]:
    """This process's pid and start time."""
    return os.getpid(), psutil.Process().create_time()


def test_a_valid_record_of_a_live_process_is_read_with_every_field(runtime_dir):
    pid, started = me()
    write(runtime_dir, pid, record(pid))
    status = TrainerStatusReader().read(pid, started)
    assert status is not None
    assert (status.pid, status.active, status.name) == (pid, True, "train")
    assert status.input_wait_fraction == pytest.approx(0.63)
    assert status.steps_per_second == pytest.approx(12.5)
    assert (status.loader_num_workers, status.loader_pin_memory, status.loader_persistent_workers) == (2, False, True)
    assert (status.loader_prefetch_factor, status.loader_batch_size) == (2, 64)
    assert (status.cuda_device, status.cuda_allocated_bytes, status.cuda_reserved_bytes, status.cuda_peak_bytes) == (
        0, 3 << 30, 4 << 30, 5 << 30)
    assert status.autocast is True


def test_missing_optional_sections_are_unknown_not_zero(runtime_dir):
    pid, started = me()
    write(runtime_dir, pid, record(pid, loader=None, cuda=None, autocast=None, input_wait_fraction=None))
    status = TrainerStatusReader().read(pid, started)
    assert status is not None
    assert status.loader_num_workers is None and status.cuda_allocated_bytes is None
    assert status.autocast is None and status.input_wait_fraction is None


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        b"\xff\xfe\x00garbage",
        "[]",
        '"a string"',
        "",
        json.dumps({"kind": "something else", "schema": 1}),
    ],
    ids=["broken-json", "binary", "list", "string", "empty", "other-kind"],
)
def test_malformed_files_are_skipped(runtime_dir, content):
    pid, started = me()
    write(runtime_dir, pid, content)
    assert TrainerStatusReader().read(pid, started) is None


@pytest.mark.parametrize(
    "overrides",
    [
        {"schema": 99},
        {"pid": "4242"},
        {"active": "yes"},
        {"input_wait_fraction": 1.7},
        {"input_wait_fraction": -0.1},
        {"steps_per_second": True},
        {"loader": {"num_workers": 2.5}},
        {"loader": [1, 2]},
        {"cuda": {"allocated_bytes": "3G"}},
        {"autocast": 1},
        {"name": 12},
        {"updated_at": None},
    ],
)
def test_records_with_wrong_types_or_ranges_are_rejected(runtime_dir, overrides):
    pid, started = me()
    data = record(pid, **overrides)
    with pytest.raises(StatusFormatError):
        parse_status(json.dumps(data))
    write(runtime_dir, pid, data)
    assert TrainerStatusReader().read(pid, started) is None


def test_not_a_number_is_rejected():
    with pytest.raises(StatusFormatError):
        parse_status(json.dumps(record(os.getpid())).replace('"steps_per_second": 12.5', '"steps_per_second": NaN'))


def test_a_stale_record_is_ignored_and_a_rewritten_one_is_read_again(runtime_dir):
    pid, started = me()
    reader = TrainerStatusReader(max_age=10.0)
    write(runtime_dir, pid, record(pid, updated_at=time.time() - 60))
    assert reader.read(pid, started) is None
    write(runtime_dir, pid, record(pid, input_wait_fraction=0.25))
    status = reader.read(pid, started)
    assert status is not None and status.input_wait_fraction == pytest.approx(0.25)


def test_a_record_of_an_earlier_process_with_the_same_pid_is_ignored(runtime_dir):
    pid, started = me()
    write(runtime_dir, pid, record(pid, create_time=started - 3600))
    assert TrainerStatusReader().read(pid, started) is None


def test_a_record_naming_another_pid_or_user_is_ignored(runtime_dir):
    pid, started = me()
    write(runtime_dir, pid, record(pid, pid=pid + 1))
    assert TrainerStatusReader().read(pid, started) is None
    write(runtime_dir, pid, record(pid, uid=os.geteuid() + 1))
    assert TrainerStatusReader().read(pid, started) is None


def test_a_record_left_by_a_dead_process_is_ignored(runtime_dir):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = psutil.Process(child.pid).create_time()
        write(runtime_dir, child.pid, record(child.pid))
        assert TrainerStatusReader().read(child.pid, started) is not None
    finally:
        child.kill()
        child.wait()
    assert TrainerStatusReader().read(child.pid, started) is None


def test_symlinks_and_oversized_files_are_not_followed_or_read(runtime_dir, tmp_path):
    pid, started = me()
    target = write(tmp_path, pid, record(pid))
    (runtime_dir / f"{pid}.json").symlink_to(target)
    assert TrainerStatusReader().read(pid, started) is None
    (runtime_dir / f"{pid}.json").unlink()
    padded = json.dumps(record(pid)) + " " * MAX_RECORD_BYTES
    write(runtime_dir, pid, padded)
    assert TrainerStatusReader().read(pid, started) is None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create a file owned by another user")
def test_a_file_owned_by_another_user_is_ignored(runtime_dir):
    pid, started = me()
    path = write(runtime_dir, pid, record(pid))
    os.chown(path, 65534, 65534)
    assert TrainerStatusReader().read(pid, started) is None
    os.chown(path, os.geteuid(), os.getegid())
    assert TrainerStatusReader().read(pid, started) is not None


def test_the_current_users_runtime_dir_is_searched_first(runtime_dir):
    dirs = status_dirs(os.geteuid())
    assert dirs[0] == runtime_dir
    assert len(dirs) == len(set(dirs))
    assert runtime_dir not in status_dirs(os.geteuid() + 12345)


def test_the_host_source_joins_the_record_to_the_gpu_process(runtime_dir):
    with sleeper() as proc:
        write(runtime_dir, proc.pid, record(proc.pid))
        source = HostSource()
        try:
            reading = source.poll([ProcessSample(pid=proc.pid, device_index=0, gpu_memory_bytes=1 << 30)])
        finally:
            source.close()
    [sample] = [p for p in reading.processes if p.pid == proc.pid]
    assert sample.input_wait_percent == pytest.approx(63.0)
    assert sample.steps_per_second == pytest.approx(12.5)
    assert (sample.loader_num_workers, sample.loader_batch_size, sample.loader_persistent_workers) == (2, 64, True)
    assert (sample.cuda_allocated_bytes, sample.cuda_reserved_bytes, sample.cuda_peak_bytes) == (
        3 << 30, 4 << 30, 5 << 30)
    assert sample.autocast is True
    assert sample.gpu_memory_bytes == 1 << 30
    assert reading.errors == ()


def test_between_epochs_the_settings_stay_but_the_rates_are_unknown(runtime_dir):
    with sleeper() as proc:
        write(runtime_dir, proc.pid, record(proc.pid, active=False))
        source = HostSource()
        try:
            reading = source.poll([ProcessSample(pid=proc.pid, device_index=0)])
        finally:
            source.close()
    [sample] = [p for p in reading.processes if p.pid == proc.pid]
    assert sample.input_wait_percent is None and sample.steps_per_second is None
    assert sample.loader_num_workers == 2


def test_processes_without_a_good_record_carry_no_measured_fields(runtime_dir):
    with sleeper() as plain, sleeper() as corrupt, sleeper() as stale:
        write(runtime_dir, corrupt.pid, '{"kind": "gpusight.trainer_status", "schema": 1, "pid": ')
        write(runtime_dir, stale.pid, record(stale.pid, updated_at=time.time() - 3600))
        source = HostSource()
        try:
            reading = source.poll([ProcessSample(pid=p.pid, device_index=0) for p in (plain, corrupt, stale)])
        finally:
            source.close()
    assert len(reading.processes) == 3
    for sample in reading.processes:
        assert sample.input_wait_percent is None and sample.loader_num_workers is None and sample.autocast is None
    assert reading.errors == ()
