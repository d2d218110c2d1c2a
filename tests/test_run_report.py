"""The run report's numbers (gpusight.run_report.summary), its HTML's escaping, and ``gpusight --report`` on real files."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import gpusight.run_report
from gpusight.recordings.formats import COMPACT_MAGIC, RecordingProblem
from gpusight.recordings.jsonl.writer import JsonlWriter
from gpusight.recordings.opening import read_recording
from gpusight.run_report.command import default_output
from gpusight.run_report.html import render_html, script_json
from gpusight.run_report.markup import hours
from gpusight.run_report.session import summarize_history
from gpusight.run_report.summary import IDLE_UTIL_PERCENT, RunAccumulator, summarize
from gpusight.sampling.history import History
from gpusight.snapshot.model import (
    Advice,
    DeviceSample,
    HostSample,
    JobSample,
    ProcessSample,
    Severity,
    Snapshot,
    SourceKind,
    WorkloadKind,
)
from gpusight.snapshot_export.markdown import render_markdown
from gpusight.textsafe import md_escape
from support.demo_run import Segment, record_demo_run

T0 = 1_795_000_000.0


def snap(t: float, utils: dict[int, float | None], *, advice: tuple[Advice, ...] = (),
         processes: tuple[ProcessSample, ...] = (), jobs: tuple[JobSample, ...] = (), lost: frozenset[int] = frozenset(),
         sm: float | None = None) -> Snapshot:
    """A snapshot at ``t`` with the given GPU utilizations (index -> percent)."""
    devices = tuple(
        DeviceSample(index=i, lost=True) if i in lost else
        DeviceSample(index=i, name=f"GPU model {i}", utilization_gpu_percent=u, memory_used_bytes=2**30,
                     memory_total_bytes=8 * 2**30, power_watts=100.0, sm_active_percent=sm)
        for i, u in sorted(utils.items())
    )
    host = HostSample(hostname="node1", cpu_percent_per_core=(20.0, 40.0), iowait_percent=5.0,
                      memory_used_bytes=4 * 2**30, memory_total_bytes=16 * 2**30)
    return Snapshot(timestamp=t, source=SourceKind.REPLAY, host=host, devices=devices, processes=processes, jobs=jobs,
                    advice=advice)


def test_time_weighted_mean_p95_and_idle_hours() -> None:
    # 100 s at 1 Hz: 90 s busy at 80 %, 10 s idle at 0 %.
    items = [snap(T0 + i, {0: 80.0 if i < 90 else 0.0}) for i in range(100)]
    gpu = summarize(items).gpus[0]
    assert gpu.mean_util == pytest.approx(72.0)
    assert gpu.p95_util == 80.0
    assert gpu.idle_hours == pytest.approx(10 / 3600)
    assert gpu.reported_hours == pytest.approx(100 / 3600)
    assert IDLE_UTIL_PERCENT == 2.0  # the advice rules' threshold, reused


def test_a_gap_adds_no_gpu_hours_and_breaks_the_lines() -> None:
    before = [snap(T0 + i, {0: 50.0}) for i in range(60)]
    after = [snap(T0 + 3600 + i, {0: 50.0}) for i in range(60)]  # the recording stopped for an hour
    summary = summarize(before + after)
    assert summary.gpus[0].reported_hours == pytest.approx(120 / 3600)
    assert summary.covered_seconds == pytest.approx(120)
    assert summary.gaps == ((T0 + 59, T0 + 3600),)
    mean = summary.series.devices[0]["utilization_gpu_percent"][1]
    assert None in mean  # a null row between the two stretches: no line across the gap
    assert mean.count(None) == 1


def test_a_clock_stepping_back_skips_snapshots_and_says_so() -> None:
    items = [snap(T0 + i, {0: 50.0}) for i in range(10)] + [snap(T0 + 5, {0: 0.0})] + [snap(T0 + 10, {0: 50.0})]
    summary = summarize(items)
    assert summary.snapshots == 11 and summary.out_of_order == 1
    assert summary.gpus[0].idle_hours == 0.0
    assert "1 snapshots not later than the one before them were skipped" in render_html(summary, "r")


def test_gpu_appearing_mid_run_lost_gpu_and_unreported_gpm() -> None:
    items = [snap(T0 + i, {0: 90.0, **({1: 10.0} if i >= 50 else {})}, lost=frozenset({0}) if i >= 80 else frozenset())
             for i in range(100)]
    summary = summarize(items)
    first, second = summary.gpus
    assert first.lost_at == T0 + 80 and first.lost_hours == pytest.approx(20 / 3600)
    assert first.reported_hours == pytest.approx(80 / 3600)
    assert second.first_seen == T0 + 50
    assert first.mean_sm_active is None  # never reported: not 0
    assert "sm_active_percent" not in summary.series.devices[0]
    html = render_html(summary, "run.jsonl")
    assert "not reported" in html


def test_a_four_second_stall_survives_downsampling_a_day() -> None:
    accumulator = RunAccumulator(max_buckets=2000)
    stall = range(40_000, 40_004)
    for i in range(86_400):
        accumulator.add(snap(T0 + i, {0: 5.0 if i in stall else 95.0}))
    summary = accumulator.summary()
    low, mean, high = summary.series.devices[0]["utilization_gpu_percent"]
    assert len(summary.series.times) <= 2000
    assert min(v for v in low if v is not None) == 5.0
    assert min(v for v in mean if v is not None) > 85.0  # the mean alone would nearly hide it
    assert summary.gpus[0].p95_util == 95.0


def test_advice_episodes_durations_and_top_findings() -> None:
    hot = Advice("throttling:gpu0", Severity.WARN, "gpu0", "GPU 0 is throttled", "87 C", "improve cooling")
    idle = Advice("idle_holding:pid7", Severity.WARN, "pid7", "PID 7 holds memory", "", "kill 7")
    well = Advice("healthy:gpu0", Severity.INFO, "gpu0", "GPU 0 is busy", "", "")
    items = []
    for i in range(200):
        advice = (well,) + ((hot,) if 20 <= i < 80 or 150 <= i < 160 else ()) + ((idle,) if 100 <= i < 110 else ())
        items.append(snap(T0 + i, {0: 90.0}, advice=advice))
    summary = summarize(items)
    throttled = [e for e in summary.episodes if e.advice_id == "throttling:gpu0"]
    assert [(e.raised, e.cleared, e.seconds) for e in throttled] == [(T0 + 20, T0 + 80, 60.0), (T0 + 150, T0 + 160, 10.0)]
    healthy = next(e for e in summary.episodes if e.advice_id == "healthy:gpu0")
    assert healthy.cleared is None  # standing at the end
    assert [f.advice_id for f in summary.findings] == ["throttling:gpu0", "idle_holding:pid7"]  # healthy is no finding
    top = summary.findings[0]
    assert (top.summary, top.seconds, top.episodes, top.action) == ("clocks throttled", 70.0, 2, "improve cooling")


def test_process_and_job_gpu_hours_peak_memory_and_ranks() -> None:
    job = JobSample(id=1, kind=WorkloadKind.TRAINING, evidence="torchrun", pids=(10, 11), devices=(0, 1))
    items = []
    for i in range(120):
        processes = (
            ProcessSample(pid=10, device_index=0, user="ann", cmdline="python train.py", gpu_memory_bytes=(i + 1) * 2**20,
                          sm_percent=50.0, create_time=1.0, job=1, rank=0),
            ProcessSample(pid=11, device_index=1, user="ann", cmdline="python train.py", gpu_memory_bytes=2**30,
                          create_time=1.0, job=1, rank=1),
        )
        items.append(snap(T0 + i, {0: 90.0, 1: 90.0}, processes=processes if i < 60 else processes[:1],
                          jobs=(job,)))
    summary = summarize(items)
    first, second = summary.processes
    assert first.pid == 10 and first.gpu_hours == pytest.approx(120 / 3600)
    assert first.sm_gpu_hours == pytest.approx(60 / 3600)
    assert first.peak_memory_bytes == 120 * 2**20
    assert second.gpu_hours == pytest.approx(60 / 3600) and second.sm_gpu_hours is None
    assert second.last_seen == T0 + 59
    (run,) = summary.jobs
    assert run.gpu_hours == pytest.approx(180 / 3600) and run.ranks == (0, 1) and run.devices == (0, 1)


def test_a_job_id_reused_by_a_later_session_is_another_job() -> None:
    """Job ids restart with every gpusight session: an appended recording's job 1 with new processes is a new job."""
    items = []
    for i in range(60):
        pid = 10 if i < 30 else 20  # the second session's job 1 is another trainer
        job = JobSample(id=1, kind=WorkloadKind.TRAINING, evidence=f"trainer {pid}", pids=(pid,), devices=(0,))
        process = ProcessSample(pid=pid, device_index=0, cmdline="python train.py", gpu_memory_bytes=pid * 2**30,
                                create_time=float(pid), job=1)
        items.append(snap(T0 + i, {0: 90.0}, processes=(process,), jobs=(job,)))
    summary = summarize(items)
    assert sorted((j.evidence, j.peak_memory_bytes) for j in summary.jobs) == [
        ("trainer 10", 10 * 2**30), ("trainer 20", 20 * 2**30)]
    assert {j.first_seen for j in summary.jobs} == {T0, T0 + 30}


def test_hostile_text_is_escaped_in_html_and_script_json() -> None:
    evil = "</script><script>alert(1)</script>\u2028<img src=x onerror=alert(2)>"
    process = ProcessSample(pid=5, device_index=0, user="<b>mallory</b>", cmdline=evil, create_time=1.0)
    advice = Advice("input_bound:gpu0", Severity.WARN, "gpu0", evil, "", evil)
    summary = summarize([snap(T0 + i, {0: 50.0}, processes=(process,), advice=(advice,)) for i in range(30)])
    page = render_html(summary, evil)
    assert "<script>alert" not in page and "<img src=x" not in page and "<b>mallory" not in page
    assert page.count("</script>") == page.count("<script")  # only the page's own script elements close
    assert "\u2028" not in script_json({"t": evil})
    data = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert json.loads(data)["episodes"][0]["title"].startswith("</script>")


def test_problems_are_listed_and_streaming_reads_damage(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    recorder = JsonlWriter(path)
    for i in range(20):
        recorder.write(snap(T0 + i, {0: 50.0}))
    recorder.close()
    with path.open("ab") as file:
        file.write(b'{"broken": \n')
    summary = summarize(read_recording(path))
    assert summary.snapshots == 20
    assert summary.problems == (RecordingProblem(21, "not valid JSON (truncated or corrupt)"),)
    assert "line 21: not valid JSON" in render_html(summary, path.name)


def test_a_sessions_summary_from_its_history_has_the_recordings_numbers(tmp_path: Path) -> None:
    history = History()
    recording = tmp_path / "session.jsonl"
    record_demo_run(recording, [Segment("throttling", 90), Segment("idle-holding", 90)], history=history)
    session, recorded = summarize_history(history), summarize(read_recording(recording))
    assert session.snapshots == recorded.snapshots == 180
    for mine, theirs in zip(session.gpus, recorded.gpus, strict=True):
        assert (mine.index, mine.p95_util, mine.idle_hours) == (theirs.index, theirs.p95_util, theirs.idle_hours)
        assert mine.mean_util == pytest.approx(theirs.mean_util)
    assert [(f.advice_id, f.seconds, f.episodes) for f in session.findings] == [
        (f.advice_id, f.seconds, f.episodes) for f in recorded.findings]
    assert len(session.findings) == 3
    markdown = render_markdown(history.latest, history, session, "x.html")  # type: ignore[arg-type]
    section = markdown.split("## Run summary", 1)[1]
    assert "[x.html](x.html)" in section
    assert f"Idle GPU-hours: {hours(recorded.idle_gpu_hours)}" in section
    for number, finding in enumerate(recorded.findings, 1):
        assert f"{number}. **{finding.severity}: {md_escape(finding.summary)}**" in section


REAL_H100 = Path(__file__).parent / "data" / "real-h100"


def test_report_of_a_real_h100_recording() -> None:
    summary = summarize(read_recording(REAL_H100 / "input-bound.jsonl.gz"))
    (gpu,) = summary.gpus
    assert gpu.name == "NVIDIA H100 80GB HBM3"
    assert gpu.mean_sm_active is not None and gpu.mean_tensor_active is not None  # GPM, reported by the real GPU
    assert set(summary.series.devices[0]) >= {"sm_active_percent", "tensor_active_percent", "pcie_rx_bytes_per_s"}
    assert summary.problems == () and summary.gaps == ()
    assert summary.processes and summary.processes[0].peak_memory_bytes
    assert summary.findings and summary.findings[0].summary
    assert gpu.mean_util is not None and gpu.p95_util is not None and gpu.mean_util <= gpu.p95_util


def test_default_output_name() -> None:
    assert default_output(Path("/r/run.jsonl")) == Path("/r/run.html")
    assert default_output(Path("run.jsonl.gz")) == Path("run.html")
    assert default_output(Path("night.gtr")) == Path("night.html")
    assert default_output(Path("night")) == Path("night.html")
    assert default_output(Path("odd.html")) == Path("odd.html.html")


def _gpusight(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusight", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def test_cli_writes_the_report_of_a_recorded_run_and_prints_its_path(tmp_path: Path) -> None:
    recording = tmp_path / "run.jsonl.gz"
    record_demo_run(recording, [Segment("healthy", 60, pause=30), Segment("input-bound", 60)])
    result = _gpusight("--report", recording, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{tmp_path / 'run.html'}\n"
    page = (tmp_path / "run.html").read_text()
    for section in ("summary", "gpus", "host", "advice", "processes", "problems"):
        assert f'<section id="{section}">' in page
    assert re.search(r"gap: no snapshot from .* \(0:3\d\)", page)
    # uPlot is inlined, so its MIT notice must travel with it, word for word.
    notice = (Path(gpusight.run_report.__file__).parent / "assets" / "uPlot.LICENSE").read_text().strip()
    assert html.escape(notice) in page and "Copyright (c) 2022 Leon Sorokin" in page


def test_compact_and_jsonl_recordings_of_one_run_give_the_same_report_numbers(tmp_path: Path) -> None:
    segments = [Segment("throttling", 60, pause=30), Segment("imbalance", 60)]
    record_demo_run(tmp_path / "run.gtr", segments)  # the compact format, written by open_recorder
    record_demo_run(tmp_path / "run.jsonl", segments)
    with (tmp_path / "run.gtr").open("rb") as file:
        assert file.read(len(COMPACT_MAGIC)) == COMPACT_MAGIC
    compact, plain = summarize(read_recording(tmp_path / "run.gtr")), summarize(read_recording(tmp_path / "run.jsonl"))
    assert compact.snapshots == plain.snapshots == 120 and compact.problems == ()
    assert [(g.mean_util, g.p95_util, g.idle_hours) for g in compact.gpus] == [
        (g.mean_util, g.p95_util, g.idle_hours) for g in plain.gpus]
    assert [(f.advice_id, f.seconds) for f in compact.findings] == [(f.advice_id, f.seconds) for f in plain.findings]
    assert [(p.pid, p.gpu_hours) for p in compact.processes] == [(p.pid, p.gpu_hours) for p in plain.processes]
    result = _gpusight("--report", tmp_path / "run.gtr", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == f"{tmp_path / 'run.html'}\n"


@pytest.mark.parametrize("content", [b"", b"not json at all\n"])
def test_cli_empty_or_unreadable_recording_is_one_line_and_status_1(tmp_path: Path, content: bytes) -> None:
    recording = tmp_path / "bad.jsonl"
    recording.write_bytes(content)
    result = _gpusight("--report", recording, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and "no readable snapshot" in result.stderr
    assert not (tmp_path / "bad.html").exists()


def test_cli_unwritable_output_leaves_nothing(tmp_path: Path) -> None:
    recording = tmp_path / "run.jsonl"
    record_demo_run(recording, [Segment("healthy", 20)])
    locked = tmp_path / "locked"
    locked.mkdir()
    missing = _gpusight("--report", recording, "-o", tmp_path / "nowhere" / "r.html", cwd=tmp_path)
    assert missing.returncode == 1 and missing.stderr.startswith("gpusight: cannot write report")
    assert missing.stderr.count("\n") == 1
    into_directory = _gpusight("--report", recording, "-o", locked, cwd=tmp_path)
    assert into_directory.returncode == 1 and into_directory.stderr.count("\n") == 1
    assert list(locked.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["locked", "run.jsonl"]


def test_cli_refuses_to_replace_the_recording_and_usage_errors(tmp_path: Path) -> None:
    recording = tmp_path / "run.jsonl"
    record_demo_run(recording, [Segment("healthy", 10)])
    size = recording.stat().st_size
    same = _gpusight("--report", recording, "-o", recording, cwd=tmp_path)
    assert same.returncode == 1 and "would replace the recording" in same.stderr
    assert recording.stat().st_size == size
    assert _gpusight("-o", "x.html", cwd=tmp_path).returncode == 2
    assert _gpusight("--report", recording, "--demo", cwd=tmp_path).returncode == 2


def test_an_existing_report_is_replaced_only_with_force(tmp_path: Path) -> None:
    """One rule for every named output (gpusight.output_files): as --convert's OUT, --report's HTML (named with -o
    or chosen beside the recording) and a comparison's Markdown are kept unless --force is given."""
    recording, other = tmp_path / "run.jsonl", tmp_path / "other.jsonl"
    record_demo_run(recording, [Segment("healthy", 10)])
    record_demo_run(other, [Segment("input-bound", 10)])
    beside, named = tmp_path / "run.html", tmp_path / "mine.html"
    for target, flags in ((beside, ()), (named, ("-o", named))):
        target.write_text("keep me")
        refused = _gpusight("--report", recording, *flags, cwd=tmp_path)
        assert refused.returncode == 1 and refused.stdout == ""
        assert refused.stderr == f"gpusight: {target} exists; add --force to replace it\n"
        assert target.read_text() == "keep me"
        forced = _gpusight("--report", recording, *flags, "--force", cwd=tmp_path)
        assert forced.returncode == 0 and forced.stdout.strip() == str(target)
        assert target.read_text().startswith("<!DOCTYPE html>")
    markdown = tmp_path / "run-vs-other.md"
    markdown.write_text("keep me too")
    refused = _gpusight("--report", recording, other, cwd=tmp_path)
    assert refused.returncode == 1 and "run-vs-other.md exists; add --force" in refused.stderr
    assert markdown.read_text() == "keep me too" and not (tmp_path / "run-vs-other.html").exists()
    forced = _gpusight("--report", recording, other, "--force", cwd=tmp_path)
    assert forced.returncode == 0 and markdown.read_text() != "keep me too"
    assert _gpusight("--force", "--demo", cwd=tmp_path).returncode == 2  # --force alone names no output
