"""Running the tiny framework training jobs (hf_job.py, lightning_job.py) beside a real ``gpusight --json``.

Each job trains until its folder holds ``stop``, then writes ``done`` and sleeps until killed. The job's pid is
reported as a compute process of a fake GPU, so gpusight joins the job's status record to that process row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpusight.backends.host.trainer_status import StatusFormatError, parse_status
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.procs import kill_tree, wait_until

GIB = 1 << 30
SUPPORT = Path(__file__).parent


@dataclass
class Job:
    """A running framework job: its process, its folder and where its status record goes."""

    process: subprocess.Popen[bytes]
    folder: Path
    runtime: Path

    @property
    def record_path(self) -> Path:
        """The job's status record."""
        return self.runtime / "gpusight" / f"{self.process.pid}.json"

    def record(self) -> dict | None:
        """The job's current record when it exists and parses, else None."""
        try:
            raw = self.record_path.read_bytes()
            parse_status(raw)
        except (OSError, StatusFormatError):
            return None
        return json.loads(raw)

    def stop_training(self) -> None:
        """Ask the job to end training and wait until it has (its process lives on)."""
        (self.folder / "stop").write_text("stop")
        wait_until(lambda: (self.folder / "done").exists() or self.process.poll() is not None, "training to end",
                   timeout=60)
        assert self.process.poll() is None, "the job died"


@contextmanager
def framework_job(script: str, tmp_path: Path, *args: str) -> Iterator[Job]:
    """Start ``python support/SCRIPT FOLDER ARGS`` on one torch thread with a private ``$XDG_RUNTIME_DIR``."""
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    folder = tmp_path / "job"
    folder.mkdir()
    env = dict(os.environ, XDG_RUNTIME_DIR=str(runtime), OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SUPPORT.parent), env.get("PYTHONPATH")]))  # support.pace
    log = (tmp_path / "job.log").open("wb")
    process = subprocess.Popen([sys.executable, str(SUPPORT / script), str(folder), *args], env=env, stdout=log,
                               stderr=subprocess.STDOUT)
    try:
        yield Job(process, folder, runtime)
    finally:
        kill_tree(process.pid)
        process.wait()
        log.close()


def measured_record(job: Job, dropped: int = 5) -> dict:
    """Wait for an active record with a FLOP count whose window no longer holds the first ``dropped`` steps.

    (The window then covers steady training only: the job's first steps, lazy set-up and the FLOP count, are gone.)
    """
    def ready() -> dict | None:
        assert job.process.poll() is None, f"the job exited with {job.process.returncode}"
        record = job.record()
        ok = record and record["active"] and record["speed"].get("flops_per_step") \
            and record["total_steps"] - record["steps"] >= dropped
        return record if ok else None

    return wait_until(ready, "the job's measured status record", timeout=120)


def wall_clock_step_rate(job: Job, after: dict, seconds: float = 3.0) -> tuple[float, dict]:
    """Steps per second of wall-clock time (evaluation included) from record ``after`` to an active one at least
    ``seconds`` later, and that later record."""
    later = wait_until(lambda: (r := job.record()) and r["active"] and r["updated_at"] >= after["updated_at"] + seconds
                       and r, "a later record", timeout=120)
    return (later["total_steps"] - after["total_steps"]) / (later["updated_at"] - after["updated_at"]), later


def process_row(job: Job, tmp_path: Path, fake_nvml_lib: Path, tries: int = 20) -> dict:
    """The job's process row from ``gpusight --json`` once it carries measured figures.

    The record says the loop is idle while the job evaluates, and gpusight then shows no figures: a snapshot that
    caught an evaluation is taken again.
    """
    gpu = FakeGpu(util_gpu=90, mem_used=20 * GIB, compute_processes=[(job.process.pid, 4 * GIB)])
    env = fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=[gpu]).write(tmp_path / "scenario.txt"))
    env["XDG_RUNTIME_DIR"] = str(job.runtime)
    row: dict = {}
    for _ in range(tries):
        out = subprocess.run([sys.executable, "-m", "gpusight", "--json"], capture_output=True, text=True, env=env,
                             check=False, timeout=90)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        [row] = [p for p in data["processes"] if p["pid"] == job.process.pid]
        if row["steps_per_second"] is not None:
            return row
        time.sleep(0.1)
    return row
