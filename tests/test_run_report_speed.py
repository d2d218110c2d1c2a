"""The run report's training speed, and ``gpusight --report A B``, on recordings written by the real recording writer.

The recorded ranks carry the speed fields gpusight.torch publishes (tests/support/speed_run.py); the expected figures
are worked out by hand from what the ranks report: a job's steps/s is its slowest rank's, its samples/s, tokens/s
and FLOP/s the sums, its MFU the summed achieved FLOP/s over the summed peaks.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from gpusight.recordings.opening import open_recorder, read_recording
from gpusight.run_report.summary import summarize
from gpusight.run_report.training import BREAKDOWN_LABELS
from gpusight.snapshot.model import FlopsSource
from support.demo_run import Segment, record_demo_run
from support.speed_run import T0, SpeedPlan, record_speed_run, speed_snapshot


def _gpusight(*args: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusight", *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=120)


def _two_phase_run(path: Path) -> Path:
    """80 s with the slowest rank at 1 step/s and data wait 40 %, then 20 s at 3 steps/s and data wait 10 %."""
    slow = SpeedPlan(steps=1.5, slowest=1.0, breakdown=(40.0, 45.0, 10.0, 2.0, 3.0))
    fast = SpeedPlan(steps=3.5, slowest=3.0, breakdown=(10.0, 75.0, 10.0, 2.0, 3.0))
    recorder = open_recorder(path)
    for i in range(100):
        recorder.write(speed_snapshot(slow if i < 80 else fast, T0 + i))
    recorder.close()
    return path


@pytest.mark.parametrize("name", ["run.gtr", "run.jsonl"])
def test_job_speed_over_a_recorded_run(tmp_path: Path, name: str) -> None:
    summary = summarize(read_recording(_two_phase_run(tmp_path / name)))
    trainer, server = sorted(summary.jobs, key=lambda j: j.id)
    assert server.speed is None  # the inference job reports no speed: none is made up
    speed = trainer.speed
    assert speed is not None and speed.seconds == pytest.approx(100)
    steps = speed.figures["steps_per_second"]
    assert steps.mean == pytest.approx((80 * 1.0 + 20 * 3.0) / 100)  # the slowest rank's pace, weighted by time
    assert (steps.p10, steps.median, steps.p90) == (pytest.approx(1.0), pytest.approx(1.0), pytest.approx(3.0))
    samples = speed.figures["samples_per_second"]
    assert samples.median == pytest.approx((1.5 + 1.0) * 32)  # summed over the two ranks
    assert speed.figures["tokens_per_second"].median == pytest.approx((1.5 + 1.0) * 32 * 512)
    achieved = (1.5 + 1.0) * 1.5e14 / 1e12
    assert speed.figures["achieved_tflops"].median == pytest.approx(achieved)
    assert speed.figures["flops_utilization_percent"].median == pytest.approx(achieved / (2 * 989.5) * 100)
    assert speed.utilization_name == "MFU" and speed.flops_sources == ("6N",) and speed.math_modes == ("bf16",)
    assert speed.peak_tflops == pytest.approx(2 * 989.5) and speed.flops_per_step == 1.5e14
    assert speed.peak_sources == ("NVIDIA H100 datasheet (SXM)",)
    shares = dict(speed.breakdown or ())
    assert shares["data wait"] == pytest.approx((80 * 40 + 20 * 10) / 100)
    assert sum(shares.values()) == pytest.approx(100.0)
    stacked = [sum(speed.series[label][1][i] or 0.0 for label in BREAKDOWN_LABELS)
               for i in range(len(summary.series.times)) if speed.series["data wait"][1][i] is not None]
    assert stacked and all(total == pytest.approx(100.0) for total in stacked)  # every bucket's parts sum to 100 %


def test_the_report_page_shows_speed_sources_and_breakdown(tmp_path: Path) -> None:
    record_speed_run(tmp_path / "run.gtr")
    result = _gpusight("--report", tmp_path / "run.gtr", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    page = (tmp_path / "run.html").read_text()
    section = page.split('<section id="speed">', 1)[1].split("</section>", 1)[0]
    assert "Job 1 (training) on GPUs 0,1, ranks 0,1" in section and "Job 2" not in section
    assert re.search(r"<th>Steps/s</th>(<td>1\.9</td>){4}", section)
    assert re.search(r"<th>Samples/s</th>(<td>125</td>){4}", section)  # (2.0 + 1.9) x 32 = 124.8
    assert re.search(r"<th>MFU</th>(<td>29\.6%</td>){4}", section)  # 3.9 x 150 TFLOP / 1979 TFLOP/s
    assert "<b>1.5e+14</b> (source: the 6·N·tokens estimate: MFU)" in section
    assert "<b>1,979 TFLOP/s summed over the ranks</b> (source: NVIDIA H100 datasheet (SXM))" in section
    assert "math mode: <b>bf16</b>" in section and "measured from: device" in section
    assert "data wait 38.0%" in section and "communication 5.0%" in section
    for chart in ("job0-steps", "job0-samples", "job0-tokens", "job0-utilization", "job0-breakdown"):
        assert f'id="chart-{chart}"' in section
    data = page.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert '"id":"job0-breakdown","title":"Step-time breakdown","unit":"%","stacked":true' in data


def test_counted_flops_are_named_hfu_and_an_unknown_peak_says_why(tmp_path: Path) -> None:
    plan = SpeedPlan(flops_source=FlopsSource.COUNTED, peak_tflops=None, breakdown=None, tokens_per_sample=None)
    record_speed_run(tmp_path / "run.jsonl", plan)
    summary = summarize(read_recording(tmp_path / "run.jsonl"))
    speed = summary.jobs[0].speed
    assert speed is not None and speed.figures["flops_utilization_percent"].mean is None  # N/A, not 0
    assert speed.breakdown is None and "tokens_per_second" not in speed.series
    assert _gpusight("--report", tmp_path / "run.jsonl", cwd=tmp_path).returncode == 0
    section = (tmp_path / "run.html").read_text().split('<section id="speed">', 1)[1].split("</section>", 1)[0]
    assert "<th>HFU</th><td>N/A</td>" in section and "counted by FlopCounterMode, recomputation included: HFU" in section
    assert "HFU N/A: no peak known for this GPU" in section
    assert "Step-time breakdown: not measured" in section and 'id="chart-job0-tokens"' not in section


def test_a_recording_without_speed_says_so(tmp_path: Path) -> None:
    record_demo_run(tmp_path / "run.jsonl", [Segment("serving", 20)])
    assert _gpusight("--report", tmp_path / "run.jsonl", cwd=tmp_path).returncode == 0
    section = (tmp_path / "run.html").read_text().split('<section id="speed">', 1)[1]
    assert "No job in this run reports its training speed" in section.split("</section>", 1)[0]


def test_two_runs_compared_side_by_side_in_html_and_markdown(tmp_path: Path) -> None:
    record_speed_run(tmp_path / "before.gtr")
    faster = SpeedPlan(steps=2.6, slowest=2.5, breakdown=(5.0, 80.0, 8.0, 2.0, 5.0))
    record_speed_run(tmp_path / "after.jsonl.gz", faster)
    result = _gpusight("--report", tmp_path / "before.gtr", tmp_path / "after.jsonl.gz", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    html_path, md_path = tmp_path / "before-vs-after.html", tmp_path / "before-vs-after.md"
    assert result.stdout == f"{html_path}\n{md_path}\n" and result.stderr == ""
    markdown = md_path.read_text()
    assert "Main job: Job 1 (training) on GPUs 0,1, ranks 0,1: the training job reporting speed" in markdown
    assert "| Steps/s median | 1.9 | 2.5 | 1.32x |" in markdown  # the slowest ranks: 1.9 and 2.5
    assert "| Samples/s median | 125 | 163 | 1.31x |" in markdown
    assert "| MFU median | 29.6% | 38.7% | 1.31x |" in markdown
    assert "| Step time: data wait | 38% | 5% | 0.13x |" in markdown
    assert "| Math mode | bf16 | bf16 |  |" in markdown
    assert "| GPU-hours held by processes | 0.10 | 0.10 | 1.00x |" in markdown
    assert "| Mean util (over GPUs) | 76.7% | 76.7% | 1.00x |" in markdown
    page = html_path.read_text()
    assert "<th>Steps/s median</th><td>1.9</td><td>2.5</td><td>1.32x</td>" in page
    assert page.count('class="stack"') == 2 and "Read with care" not in page


def test_a_comparison_warns_where_the_runs_differ(tmp_path: Path) -> None:
    record_speed_run(tmp_path / "a.gtr")
    record_speed_run(tmp_path / "b.gtr", replace(SpeedPlan(), flops_source=FlopsSource.COUNTED, flops_per_step=2e14,
                                                   gpu_name="NVIDIA A100-SXM4-80GB"))
    result = _gpusight("--report", tmp_path / "a.gtr", tmp_path / "b.gtr", "-o", tmp_path / "cmp.html", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout.splitlines() == [str(tmp_path / "cmp.html"), str(tmp_path / "cmp.md")]
    markdown = (tmp_path / "cmp.md").read_text()
    assert "the GPUs differ: A NVIDIA H100 80GB HBM3; B NVIDIA A100-SXM4-80GB" in markdown
    assert "A's utilization is MFU and B's HFU" in markdown
    assert "FLOPs per step differ (1.5e+14 and 2e+14)" in markdown
    assert "| MFU/HFU median |" in markdown


def test_a_comparison_with_a_run_without_speed_still_compares_the_busy_figures(tmp_path: Path) -> None:
    record_speed_run(tmp_path / "a.gtr")
    record_demo_run(tmp_path / "b.jsonl", [Segment("serving", 30)])
    result = _gpusight("--report", tmp_path / "a.gtr", tmp_path / "b.jsonl", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("gpusight: note: b.jsonl: ") and result.stderr.count("\n") == 1
    assert "no job reports its training speed" in result.stderr
    markdown = (tmp_path / "a-vs-b.md").read_text()
    assert "B: no job reports its training speed (instrument the loop with gpusight.torch)" in markdown
    assert "| Steps/s median | 1.9 | N/A | N/A |" in markdown
    assert re.search(r"\| Mean util \(over GPUs\) \| 76\.7% \| \d+(\.\d)?% \| \d\.\d\dx \|", markdown)


@pytest.mark.parametrize("b_content", [None, b"", b"not json at all\n"])
def test_a_comparison_of_a_missing_or_corrupt_recording_is_one_line_and_status_1(tmp_path: Path,
                                                                                   b_content: bytes | None) -> None:
    record_speed_run(tmp_path / "a.gtr", SpeedPlan(seconds=10))
    b = tmp_path / "b.jsonl"
    if b_content is not None:
        b.write_bytes(b_content)
    result = _gpusight("--report", tmp_path / "a.gtr", b, cwd=tmp_path)
    assert result.returncode == 1 and result.stderr.count("\n") == 1 and result.stdout == ""
    expected = "cannot read recording" if b_content is None else "no readable snapshot"
    assert result.stderr.startswith("gpusight: ") and expected in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gtr"] + (["b.jsonl"] if b_content is not None else [])


def test_report_usage_errors(tmp_path: Path) -> None:
    record_speed_run(tmp_path / "a.gtr", SpeedPlan(seconds=5))
    three = _gpusight("--report", tmp_path / "a.gtr", tmp_path / "a.gtr", tmp_path / "a.gtr", cwd=tmp_path)
    assert three.returncode == 2 and "--report takes one recording, or two to compare" in three.stderr
    same = _gpusight("--report", tmp_path / "a.gtr", tmp_path / "a.gtr", "-o", tmp_path / "a.gtr", cwd=tmp_path)
    assert same.returncode == 1 and "would replace the recording" in same.stderr
    help_text = " ".join(_gpusight("--help", cwd=tmp_path).stdout.split())
    assert "--report A B (one recording or two, no more): compare two runs side by side" in help_text


def test_hostile_peak_sources_and_notes_stay_text(tmp_path: Path) -> None:
    evil = "</script><img src=x onerror=alert(1)>|**bold**|\x1b[31m"
    recorder = open_recorder(tmp_path / "evil.jsonl")
    for i in range(20):
        snapshot = speed_snapshot(SpeedPlan(peak_tflops=None), T0 + i)
        processes = tuple(replace(p, peak_source=evil, flops_utilization_note=evil) if p.job == 1 else p
                          for p in snapshot.processes)
        recorder.write(replace(snapshot, processes=processes))
    recorder.close()
    record_speed_run(tmp_path / "b.gtr")
    assert _gpusight("--report", tmp_path / "evil.jsonl", cwd=tmp_path).returncode == 0
    page = (tmp_path / "evil.html").read_text()
    assert "<img src=x" not in page and "\x1b" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page.split('<section id="speed">', 1)[1]
    assert _gpusight("--report", tmp_path / "evil.jsonl", tmp_path / "b.gtr", cwd=tmp_path).returncode == 0
    markdown = (tmp_path / "evil-vs-b.md").read_text()
    row = next(line for line in markdown.splitlines() if line.startswith("| Peak source |"))
    assert len(re.findall(r"(?<!\\)\|", row)) == 5 and "\x1b" not in row  # its pipes are escaped: no extra cell
    assert "<img src=x" not in (tmp_path / "evil-vs-b.html").read_text()
