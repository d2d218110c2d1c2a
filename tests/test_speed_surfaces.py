"""Done when, end to end: a tiny CPU model trained through each entry point (``watch``, the Hugging Face callback, the
Lightning callback) shows its throughput, FLOPs per step and MFU/HFU (against a given peak) on every surface.

Each job is a real training process with a given peak of 1 TFLOP/s, reported as a compute process of a fake GPU
(the fake NVML library). Against it run, as users would: ``gpusight --json``, the TUI in a real pty, ``gpusight
--serve`` scraped over HTTP, a headless ``--record`` read back, and ``--report`` of that recording.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families
from test_cluster_e2e import visible

from gpusight import metric_names as names
from gpusight.recordings.formats import RecordingProblem
from gpusight.recordings.opening import read_recording
from gpusight.snapshot.model import Snapshot
from support.exporter import serving
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.framework_jobs import Job, framework_job, measured_record
from support.procs import kill_tree
from support.terminal import PtyTerminal, gpusight_argv

pytest.importorskip("torch")

GIB = 1 << 30


@contextmanager
def watched_job(tmp_path: Path) -> Iterator[Job]:
    """The example trainer (``gpusight.torch.watch``) with a given peak of 1 TFLOP/s."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), OMP_NUM_THREADS="1")
    process = subprocess.Popen(
        [sys.executable, "-m", "gpusight.examples.train", "--batch-size", "16", "--width", "64", "--depth", "2",
         "--duration", "600", "--report-every", "600", "--peak-tflops", "1"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield Job(process, tmp_path, runtime)
    finally:
        kill_tree(process.pid)
        process.wait()


ENTRY_POINTS: dict[str, Callable[[Path], AbstractContextManager[Job]]] = {
    "watch": watched_job,
    "huggingface": lambda tmp_path: framework_job("hf_job.py", tmp_path),
    "lightning": lambda tmp_path: framework_job("lightning_job.py", tmp_path),
}


def env_for(job: Job, tmp_path: Path, fake_nvml_lib: Path) -> dict[str, str]:
    """gpusight's environment: a fake GPU whose compute process is the job, and the job's runtime directory."""
    gpu = FakeGpu(util_gpu=90, mem_used=20 * GIB, compute_processes=[(job.process.pid, 4 * GIB)])
    env = fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=[gpu]).write(tmp_path / "scenario.txt"))
    return {**env, "XDG_RUNTIME_DIR": str(job.runtime)}


def gpusight(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``gpusight ARGS`` run to its end."""
    done = subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, env=env,
                          check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return done


def measured_row(rows: list[dict], pid: int) -> bool:
    """Whether the job's row carries throughput, FLOPs per step and a utilization."""
    return any(row["pid"] == pid and row["samples_per_second"] and row["flops_per_step"]
               and row["flops_utilization_percent"] is not None for row in rows)


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_speed_shows_on_every_surface(entry, tmp_path, fake_nvml_lib):
    if entry != "watch":
        pytest.importorskip({"huggingface": "transformers", "lightning": "lightning"}[entry])
    with ENTRY_POINTS[entry](tmp_path) as job:
        record = measured_record(job)
        pid = job.process.pid
        env = env_for(job, tmp_path, fake_nvml_lib)
        name = "HFU" if record["speed"]["flops_source"] == "counted" else "MFU"

        # --json (taken again while the loop is away evaluating: the record then says it is not stepping)
        rows: list[dict] = []
        for _ in range(20):
            rows = json.loads(gpusight(env, "--json").stdout)["processes"]
            if measured_row(rows, pid):
                break
        assert measured_row(rows, pid), rows

        # the TUI in a real terminal: the job's row with its throughput and utilization, named as it should be
        with PtyTerminal(gpusight_argv("--interval", "0.25"), (160, 45), env=env) as term:
            def shown() -> bool:
                screen = visible(bytes(term.output))
                return "MFU/HFU" in screen and f"% {name}" in screen and re.search(r"\d[kMG]? (smp|tok)\b", screen) is not None

            term.wait_for(shown, f"the process row's throughput and {name}", 60)
            assert term.quit() == 0

        # the exporter: the job's FLOP/s, peak and utilization, named the same way
        with serving(["--interval", "0.25"], env) as exporter:
            text = exporter.wait_for(names.JOB_FLOPS_UTILIZATION.name + "{")
        families = {family.name: family.samples for family in text_string_to_metric_families(text)}
        [utilization] = families[names.JOB_FLOPS_UTILIZATION.name]
        assert utilization.labels[names.LABEL_UTILIZATION] == name and utilization.value > 0
        [peak] = families[names.JOB_PEAK_FLOPS.name]
        assert peak.value == pytest.approx(1e12)
        assert families[names.JOB_SAMPLES.name][0].value > 0

        # a recording, read back, and its report
        recording = tmp_path / "run.jsonl"
        gpusight(env, "--record", str(recording), "--duration", "4", "--interval", "0.25", "--json")
        snapshots = [item for item in read_recording(recording) if not isinstance(item, RecordingProblem)]
        assert all(isinstance(item, Snapshot) for item in snapshots) and snapshots
        recorded = [p for s in snapshots for p in s.processes if p.pid == pid and p.flops_utilization_percent]
        assert recorded and all(p.flops_per_step and p.samples_per_second for p in recorded)
        gpusight(env, "--report", str(recording))
        speed = (tmp_path / "run.html").read_text().split('<section id="speed">', 1)[1].split("</section>", 1)[0]
        assert "No job in this run reports its training speed" not in speed
        assert name in speed and "given" in speed  # the utilization's name and the given peak's source
