"""Jobs as ``gpusight --once`` and the Markdown report write them, in the same words as the process table.

The once table is read from a real ``python -m gpusight --replay REC --once`` over a recording with jobs.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.demo.source import DemoSource
from gpusight.job_text import gpu_list, job_label, scope_label
from gpusight.oneshot import render_once
from gpusight.recordings.jsonl.writer import JsonlWriter
from gpusight.sampling.history import History
from gpusight.snapshot.model import Advice, JobSample, ProcessRole, ProcessSample, Severity, Snapshot, WorkloadKind
from gpusight.snapshot_export.markdown import render_markdown
from support.jobs import with_jobs

HOSTILE = " \x1b[2J[red]x[/red] | `tick` <b>\x07"
"""Evidence text with a terminal escape, Rich markup, Markdown table and code syntax, HTML and a bell."""

START = 1_700_000_000.0


def mixed_with_jobs(hostile: str = "") -> Snapshot:
    """One snapshot of the mixed demo with jobs (job 1 is a 4-rank DDP job, job 3 a notebook)."""
    snapshot = with_jobs(DemoSource("mixed", seed=0, clock=lambda: START).poll(), hostile=hostile)
    advice = Advice(
        "straggler:job1", Severity.WARN, "job1", "Rank 2 holds back job 1", "GPU 2 at 57 %", "look at rank 2"
    )
    return dataclasses.replace(snapshot, advice=(advice,))


@pytest.mark.parametrize(
    ("rank", "job", "compact", "ascii_mode", "label"),
    [
        (5, JobSample(3, WorkloadKind.TRAINING, "", (1, 2), (0, 1), world_size=8), False, False, "job 3 · rank 5/8"),
        (1, JobSample(3, WorkloadKind.TRAINING, "", (1, 2), (0, 1)), False, False, "job 3 · rank 1/2"),
        (None, JobSample(3, WorkloadKind.UNKNOWN, "", (1, 2, 3), (0, 1, 2)), False, False, "job 3 · 3 procs"),
        (None, JobSample(3, WorkloadKind.TRAINING, "", (1,), (0, 1)), False, False, "job 3"),
        (0, JobSample(3, WorkloadKind.INFERENCE, "", (1, 2), (0, 1), world_size=2), False, False, "job 3 · serving"),
        (None, JobSample(3, WorkloadKind.NOTEBOOK, "", (1,), (0,)), False, False, "job 3 · notebook"),
        (5, JobSample(3, WorkloadKind.TRAINING, "", (1, 2), (0, 1), world_size=8), True, False, "3·5/8"),
        (None, JobSample(3, WorkloadKind.UNKNOWN, "", (1, 2, 3), (0, 1, 2)), True, False, "3·3p"),
        (None, JobSample(3, WorkloadKind.INFERENCE, "", (1,), (0,)), True, False, "3·srv"),
        (None, JobSample(3, WorkloadKind.NOTEBOOK, "", (1,), (0,)), True, False, "3·nb"),
        (5, JobSample(3, WorkloadKind.TRAINING, "", (1, 2), (0, 1), world_size=8), False, True, "job 3 - rank 5/8"),
        (5, JobSample(3, WorkloadKind.TRAINING, "", (1, 2), (0, 1), world_size=8), True, True, "3:5/8"),
    ],
)
def test_job_label(rank: int | None, job: JobSample, compact: bool, ascii_mode: bool, label: str) -> None:
    process = ProcessSample(pid=1, device_index=0, job=3, rank=rank)
    assert job_label(process, {3: job}, compact=compact, ascii_mode=ascii_mode) == label


def test_job_label_without_a_job_or_its_record() -> None:
    assert job_label(ProcessSample(pid=1), {}) == ""
    assert job_label(ProcessSample(pid=1, job=4, rank=2), {}) == "job 4"  # the job's record is missing


def test_gpu_list_writes_runs_as_ranges() -> None:
    assert gpu_list((0, 1, 2, 3)) == "0-3"
    assert gpu_list((6, 0, 1, 3)) == "0-1,3,6"
    assert gpu_list((2,)) == "2"
    assert gpu_list(()) == "-"


def test_scope_label_names_a_jobs_gpus_and_leaves_other_scopes_alone() -> None:
    jobs = {
        3: JobSample(3, WorkloadKind.TRAINING, "", (1, 2), (0, 1, 2, 3, 6)),
        4: JobSample(4, WorkloadKind.TRAINING, "", (5,), (5,)),
    }
    assert scope_label("job3", jobs) == "job3 on GPUs 0-3,6"
    assert scope_label("job4", jobs) == "job4 on GPU 5"
    assert scope_label("job9", jobs) == "job9"
    for scope in ("host", "gpu3", "pid3", "[red]job3"):
        assert scope_label(scope, jobs) == scope


def test_once_table_has_a_job_column_a_jobs_section_and_escaped_evidence(tmp_path: Path) -> None:
    recording = tmp_path / "jobs.jsonl"
    recorder = JsonlWriter(recording)
    recorder.write(mixed_with_jobs(HOSTILE))
    recorder.close()
    out = subprocess.run(
        [sys.executable, "-m", "gpusight", "--replay", str(recording), "--once"],
        capture_output=True, text=True, timeout=60,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    header = next(line for line in lines if line.startswith("GPU ") and "COMMAND" in line)
    assert header.index("USER") < header.index("JOB") < header.index("GPU MEM")
    gpu_rows = [line for line in lines if line[:2] in {f"{i} " for i in range(8)} and "GiB" in line and "%" in line]
    rows = {line.split()[0]: line for line in gpu_rows}
    assert "job 1 · rank 0/4" in rows["0"] and "job 1 · rank 3/4" in rows["3"]
    assert "job 3 · notebook" in rows["5"] and "job 4 " in rows["6"]
    assert all(row.index("job") == header.index("JOB") for row in rows.values())
    assert "  job 1: training, GPUs 0-3, 4 processes, world size 4, launcher PID" in out.stdout
    assert "      evidence: shared parent PID" in out.stdout and "[red]x[/red] | `tick` <b>" in out.stdout
    assert "\x1b" not in out.stdout and "\x07" not in out.stdout
    workers = [line for line in lines if "pt_data_worker" in line]
    assert workers and not any("job" in line for line in workers)


def test_once_names_the_gpus_of_a_job_scoped_advice() -> None:
    text = render_once(mixed_with_jobs(), width=120)
    assert "  [warn] job1 on GPUs 0-3: Rank 2 holds back job 1" in text


def test_once_with_jobs_but_only_a_worker_left_still_renders() -> None:
    snapshot = mixed_with_jobs()
    worker = next(p for p in snapshot.processes if p.role == ProcessRole.DATALOADER_WORKER)
    text = render_once(dataclasses.replace(snapshot, processes=(worker,)), width=120)
    header = next(line for line in text.splitlines() if line.startswith("GPU ") and "COMMAND" in line)
    assert "JOB " in header and "pt_data_worker" in text


def test_once_without_jobs_has_no_job_column() -> None:
    snapshot = dataclasses.replace(mixed_with_jobs(), jobs=())  # a recording from before jobs
    text = render_once(snapshot, width=120)
    assert " JOB " not in text and "JOBS" not in text


def test_report_has_a_jobs_section_and_the_job_of_each_process() -> None:
    snapshot = mixed_with_jobs(HOSTILE)
    history = History(capacity=10)
    history.append(snapshot)
    report = render_markdown(snapshot, history)
    header = "| GPU | PID | User | Job | GPU mem | SM % | CPU % | Elapsed | Workers | Command |"
    assert header in report
    rank0 = next(line for line in report.splitlines() if line.startswith("| 0 | ") and "| job 1" in line)
    assert "| alice | job 1 · rank 0/4 |" in rank0 and rank0.count(" | ") == header.count(" | ")
    assert "| carol | job 3 · notebook |" in report
    jobs = report.split("## Jobs", 1)[1].split("## Advice", 1)[0]
    assert "| Job | Kind | GPUs | Processes | Evidence |" in jobs
    job1 = next(line for line in jobs.splitlines() if line.startswith("| 1 |"))
    assert "| training | 0-3 | 4 processes, world size 4, launcher PID" in job1
    assert job1.count(" | ") == 4  # five cells: the pipe in the evidence did not add one
    assert "\\[red\\]x\\[/red\\] \\| \\`tick\\` \\<b\\>" in job1
    assert "\x1b" not in report and "\x07" not in report
    assert "- **warn: Rank 2 holds back job 1** (job1 on GPUs 0-3)" in report


def test_report_without_jobs_says_so_and_keeps_its_process_columns() -> None:
    snapshot = dataclasses.replace(mixed_with_jobs(), jobs=())
    history = History(capacity=10)
    history.append(snapshot)
    report = render_markdown(snapshot, history)
    assert "| GPU | PID | User | GPU mem | SM % | CPU % | Elapsed | Workers | Command |" in report
    assert report.split("## Jobs", 1)[1].split("##", 1)[0].strip() == "None known."
