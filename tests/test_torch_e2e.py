"""End to end: the real example training job (CPU torch) beside a real ``gpusight --json`` on the fake NVML.

The job is reported as a GPU compute process through the fake library; gpusight must join the job's
own status record (input wait, steps/s, loader settings) to that process, ignore corrupt and stale
records of other processes, and show the measured columns in the process table.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from textual.app import App, ComposeResult

from gpusight.backends.host.trainer_status import StatusFormatError, parse_status
from gpusight.snapshot.model import ProcessSample, Snapshot, SourceKind
from gpusight.ui.main.process_table import ProcessTable
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.procs import kill_tree, sleeper, wait_until

pytest.importorskip("torch")

GIB = 1 << 30


def gpusight(env: dict, *args: str, timeout: float = 90) -> dict:
    """Run ``gpusight --json ARGS`` and return its snapshot."""
    out = subprocess.run([sys.executable, "-m", "gpusight", "--json", *args], capture_output=True, text=True, env=env, check=False,
                         timeout=timeout)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def current_record(path: Path) -> dict | None:
    """The record at ``path`` when it exists and parses, else None."""
    try:
        raw = path.read_bytes()
        parse_status(raw)
    except (OSError, StatusFormatError):
        return None
    return json.loads(raw)


@pytest.fixture
def runtime_base(tmp_path: Path) -> Path:
    """A private directory to serve as ``$XDG_RUNTIME_DIR`` for the job and for gpusight."""
    base = tmp_path / "run"
    base.mkdir(mode=0o700)
    return base


@pytest.fixture
def starved_job(runtime_base: Path) -> Iterator[subprocess.Popen]:
    """The example job with a dataset that sleeps 25 ms per sample and no workers: it waits most of each step.

    Sleeping (not burning CPU) keeps the trainer's CPU low, so the outside-in heuristics alone would
    not call it input-bound: only the measured wait can. The 200 ms of sleep per step and one torch
    thread keep the wait above half of each step even when the machine is busy with other tests.
    """
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime_base), OMP_NUM_THREADS="1")
    job = subprocess.Popen(
        [sys.executable, "-m", "gpusight.examples.train", "--io-ms", "25", "--num-workers", "0", "--batch-size", "8",
         "--width", "32", "--depth", "1", "--duration", "300", "--report-every", "60"],
        env=env, stdout=subprocess.DEVNULL,
    )
    try:
        path = runtime_base / "gpusight" / f"{job.pid}.json"
        wait_until(lambda: (r := current_record(path)) and r["active"] and r["window_seconds"] >= 1.0,
                   "the job's status record", timeout=90)
        yield job
    finally:
        kill_tree(job.pid)
        job.wait()


def write_config(tmp_path: Path) -> Path:
    """An XDG config home whose advice thresholds hold for 2 s over a 4 s window, so a short run suffices."""
    folder = tmp_path / "config" / "gpusight"
    folder.mkdir(parents=True)
    (folder / "config.toml").write_text("[advice]\nhold_s = 2.0\nwindow_s = 4.0\n")
    return tmp_path / "config"


def test_gpusight_json_carries_the_jobs_measured_fields_and_ignores_bad_records(
    tmp_path, fake_nvml_lib, runtime_base, starved_job
):
    folder = runtime_base / "gpusight"
    with sleeper() as corrupt, sleeper() as stale, sleeper() as plain:
        (folder / f"{corrupt.pid}.json").write_text('{"kind": "gpusight.trainer_status", "schema": 1, "pid": ')
        record = current_record(folder / f"{starved_job.pid}.json")
        record.update(pid=stale.pid, create_time=psutil.Process(stale.pid).create_time(), updated_at=time.time() - 600)
        (folder / f"{stale.pid}.json").write_text(json.dumps(record))
        gpus = [FakeGpu(util_gpu=18, mem_used=20 * GIB,
                        compute_processes=[(starved_job.pid, 4 * GIB), (corrupt.pid, GIB), (stale.pid, GIB),
                                           (plain.pid, GIB)])]
        env = fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=gpus).write(tmp_path / "s.txt"))
        env["XDG_RUNTIME_DIR"] = str(runtime_base)
        data = gpusight(env)
    by_pid = {p["pid"]: p for p in data["processes"]}
    job = by_pid[starved_job.pid]
    assert job["input_wait_percent"] > 50
    assert job["steps_per_second"] > 0
    assert (job["loader_num_workers"], job["loader_batch_size"], job["loader_pin_memory"]) == (0, 8, False)
    assert job["loader_prefetch_factor"] is None and job["cuda_allocated_bytes"] is None
    assert job["autocast"] is False  # seen through the model's forward hook
    for pid in (corrupt.pid, stale.pid, plain.pid):
        assert by_pid[pid]["input_wait_percent"] is None and by_pid[pid]["loader_batch_size"] is None
    assert data["errors"] == []


def test_the_advice_cites_the_measured_wait(tmp_path, fake_nvml_lib, runtime_base, starved_job):
    gpu = FakeGpu(util_gpu=18, mem_used=20 * GIB, compute_processes=[(starved_job.pid, 4 * GIB)],
                  process_samples=[(starved_job.pid, 15, 5, 10)])
    env = fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=[gpu]).write(tmp_path / "s.txt"))
    env["XDG_RUNTIME_DIR"] = str(runtime_base)
    env["XDG_CONFIG_HOME"] = str(write_config(tmp_path))
    data = gpusight(env, "--duration", "6", "--interval", "0.25")
    [job] = [p for p in data["processes"] if p["pid"] == starved_job.pid]
    wait = job["input_wait_percent"]
    assert wait > 50

    def cites(advice: dict) -> bool:
        text = advice["title"] + " " + advice["evidence"]
        percents = [float(m) for m in re.findall(r"(\d+(?:\.\d+)?)\s?%", text)]
        return str(starved_job.pid) in text + advice["scope"] and any(abs(p - wait) <= 3 for p in percents)

    assert any(cites(a) for a in data["advice"]), data["advice"]


class TableApp(App):
    """A bare app holding one process table."""

    def compose(self) -> ComposeResult:
        yield ProcessTable(id="table")


def test_the_process_table_shows_wait_and_step_rate_only_for_instrumented_trainers():
    measured = ProcessSample(pid=4242, device_index=0, cmdline="python train.py", input_wait_percent=63.4,
                             steps_per_second=7.5, loader_num_workers=2)
    plain = ProcessSample(pid=4343, device_index=1, cmdline="python other.py", cpu_percent=12.0)

    async def run() -> tuple[list[str], list[str]]:
        app = TableApp()
        async with app.run_test(size=(140, 10)) as pilot:
            table = app.query_one(ProcessTable)
            table.update_snapshot(Snapshot(timestamp=1.0, source=SourceKind.DEMO, processes=(plain,)))
            await pilot.pause()
            before = [table.render_line(y).text for y in range(3)]
            table.update_snapshot(Snapshot(timestamp=2.0, source=SourceKind.DEMO, processes=(measured, plain)))
            table.sort_by("pid")  # applies the new snapshot now
            await pilot.pause()
            after = [table.render_line(y).text for y in range(3)]
            return before, after

    before, after = asyncio.run(run())
    assert "WAIT %" not in before[0] and "STEP/S" not in before[0]
    header, first, second = after
    assert "WAIT %" in header and "STEP/S" in header
    wait_column = header.index("WAIT %")
    assert first[wait_column : wait_column + 6].strip() == "63%"
    assert first[wait_column + 7 : wait_column + 13].strip() == "7.5"
    assert second[wait_column : wait_column + 13].strip() == ""  # not instrumented: blank, not 0
    assert "python other.py" in second


def test_gpusight_json_shows_the_jobs_throughput_flops_mfu_and_breakdown(tmp_path, fake_nvml_lib, runtime_base):
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime_base), OMP_NUM_THREADS="1")
    job = subprocess.Popen(
        [sys.executable, "-m", "gpusight.examples.train", "--batch-size", "8", "--width", "32", "--depth", "1",
         "--duration", "300", "--report-every", "60", "--peak-tflops", "0.0001"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        path = runtime_base / "gpusight" / f"{job.pid}.json"
        wait_until(lambda: (r := current_record(path)) and r["active"] and r.get("breakdown")
                   and "flops_utilization_fraction" in r["speed"], "the job's speed in its record", timeout=90)
        gpu = FakeGpu(util_gpu=90, mem_used=8 * GIB, compute_processes=[(job.pid, 2 * GIB)])
        scenario = fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=[gpu]).write(tmp_path / "s.txt"))
        data = gpusight({**scenario, "XDG_RUNTIME_DIR": str(runtime_base)})
    finally:
        kill_tree(job.pid)
        job.wait()
    [trainer] = [p for p in data["processes"] if p["pid"] == job.pid]
    assert trainer["samples_per_second"] == pytest.approx(8 * trainer["steps_per_second"], rel=0.01)
    assert trainer["batch_size_source"] == "batch"
    assert trainer["flops_source"] == "counted" and trainer["flops_per_step"] > 0
    assert trainer["peak_tflops"] == 0.0001 and trainer["peak_source"] == "given" and trainer["math_mode"] == "fp32"
    assert trainer["achieved_tflops"] == pytest.approx(trainer["flops_per_step"] * trainer["steps_per_second"] / 1e12,
                                                       rel=0.01)
    assert trainer["flops_utilization_percent"] == pytest.approx(trainer["achieved_tflops"] / 0.0001 * 100, rel=0.01)
    parts = ("data", "compute", "comm", "copy", "idle")
    assert sum(trainer[f"step_{part}_percent"] for part in parts) == pytest.approx(100.0, abs=0.5)
    assert trainer["breakdown_source"] == "host"
