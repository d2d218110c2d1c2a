"""The HTML report of a real recorded run, rendered by a real headless Chromium (Debian's ``chromium``).

The run is recorded by the real app (``gpusight --demo stalls --record``); the page is loaded from a ``file://`` URL
with background networking off. ``--dump-dom`` gives the DOM after the page's scripts ran: every section, a canvas
per chart, the advice lanes, ``data-ready`` set and no script error written into the page. A screenshot must not be
blank. Skipped, with the reason, when chromium is not installed.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.recordings.jsonl.writer import JsonlWriter
from gpusight.run_report.html import SECTIONS, asset
from gpusight.snapshot.model import Advice, DeviceSample, ProcessSample, Severity, Snapshot, SourceKind
from support.chromium import CHROMIUM, INSTALL, chromium, screenshot
from support.png import png_pixels
from support.speed_run import SpeedPlan, record_speed_run

pytestmark = pytest.mark.skipif(CHROMIUM is None, reason=INSTALL)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The report of a 10-second run recorded by the real app (demo ``stalls``: a trainer that stalls, advice)."""
    directory = tmp_path_factory.mktemp("report")
    recording = directory / "stalls.jsonl"
    subprocess.run([sys.executable, "-m", "gpusight", "--demo", "stalls", "--record", str(recording), "--duration", "10",
                    "--interval", "0.5"], check=True, capture_output=True, timeout=120)
    result = subprocess.run([sys.executable, "-m", "gpusight", "--report", str(recording)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return Path(result.stdout.strip())


def test_every_section_and_chart_renders_without_script_errors(report: Path) -> None:
    result = chromium(report, "--dump-dom")
    dom = result.stdout
    assert result.returncode == 0, result.stderr[-2000:]
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None
    assert 'data-ready="true"' in body.group(0), body.group(0)
    assert "data-error" not in body.group(0)
    assert re.search(r'<pre id="js-errors" hidden="">\s*</pre>', dom)
    for section in SECTIONS:
        assert f'<section id="{section}">' in dom
    charts = int(re.search(r'data-charts="(\d+)"', body.group(0)).group(1))  # type: ignore[union-attr]
    assert dom.count("<canvas") == charts
    drawn = re.findall(r'<div class="chart" id="chart-(gpu|host)[^"]*">(?:(?!<div class="chart").)*?<canvas', dom, re.S)
    assert len(drawn) == 2 * 5 + 2  # two GPUs with five charts each, two host charts (job speed charts aside)
    assert int(re.search(r'data-lanes="(\d+)"', dom).group(1)) >= 1  # type: ignore[union-attr]
    assert 'class="bar warn"' in dom or 'class="bar info"' in dom


def test_hostile_text_from_the_recording_stays_text(tmp_path: Path) -> None:
    evil = '</script><img id="pwned" src=x onerror="document.title=1"><b id="bold">\u2028'
    process = ProcessSample(pid=5, device_index=0, user=evil, cmdline=evil, name=evil, create_time=1.0)
    advice = Advice("input_bound:gpu0", Severity.WARN, "gpu0", evil, evil, evil)
    recording = tmp_path / "evil.jsonl"
    recorder = JsonlWriter(recording)
    for i in range(30):
        recorder.write(Snapshot(timestamp=1_795_000_000.0 + i, source=SourceKind.REPLAY, label=evil,
                                devices=(DeviceSample(index=0, name=evil, utilization_gpu_percent=50.0),),
                                processes=(process,), advice=(advice,)))
    recorder.close()
    subprocess.run([sys.executable, "-m", "gpusight", "--report", str(recording)], check=True, capture_output=True,
                   timeout=120)
    dom = chromium(tmp_path / "evil.html", "--dump-dom").stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None and 'data-ready="true"' in body.group(0) and "data-error" not in body.group(0)
    assert "<img id=" not in dom and "<b id=" not in dom  # no element was made from the text
    assert '&lt;img id="pwned"' in dom  # it is shown as text


def test_screenshot_is_not_blank(report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "report.png"
    screenshot(report, shot, (1200, 1600))
    width, height, rows = png_pixels(shot)
    assert (width, height) == (1200, 1600)
    colours = {row[x:x + 3] for row in rows[::8] for x in range(0, len(row), 24)}
    assert len(colours) > 20  # text, chart lines and bands in several colours, not a blank page
    assert sum(1 for row in rows if len(set(row)) > 1) > height // 4  # content on many rows


def test_no_network_request(report: Path, tmp_path: Path) -> None:
    page = report.read_text()
    assert not re.search(r"""(?:src|href|action)\s*=\s*["']?\s*(?:https?:)?//""", page, re.IGNORECASE)
    assert "default-src 'none'" in page  # the Content-Security-Policy forbids every fetch
    ours = page.replace(asset("uPlot.iife.min.js"), "")
    assert not re.search(r"""(?:import\s*\(|fetch\s*\(|XMLHttpRequest|new\s+WebSocket|https?://)""", ours)
    # At run time: Chromium's network log of loading the page names only Chromium's own service hosts.
    log = tmp_path / "net.json"
    result = chromium(report, f"--log-net-log={log}", "--dump-dom")
    assert 'data-ready="true"' in result.stdout
    urls = set(re.findall(r'"url":"([^"]*)"', log.read_text()))
    foreign = {url for url in urls if not re.match(r"https?://[a-z0-9.-]*\b(google|googleapis|gstatic)\.com[/:]", url)}
    assert foreign == set()


@pytest.fixture(scope="module")
def speed_pages(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The report of a run whose training job publishes its speed, and its comparison with a faster run."""
    directory = tmp_path_factory.mktemp("speed")
    record_speed_run(directory / "before.gtr")
    record_speed_run(directory / "after.jsonl", SpeedPlan(steps=2.6, slowest=2.5, breakdown=(5.0, 80.0, 8.0, 2.0, 5.0)))
    for args in (["before.gtr"], ["before.gtr", "after.jsonl"]):
        subprocess.run([sys.executable, "-m", "gpusight", "--report", *args], check=True, capture_output=True,
                       timeout=120, cwd=directory)
    return directory / "before.html", directory / "before-vs-after.html"


def test_speed_charts_render_stacked_breakdown_included(speed_pages: tuple[Path, Path], tmp_path: Path) -> None:
    report, _ = speed_pages
    dom = chromium(report, "--dump-dom").stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None and 'data-ready="true"' in body.group(0) and "data-error" not in body.group(0)
    assert re.search(r'<pre id="js-errors" hidden="">\s*</pre>', dom)
    for chart in ("steps", "samples", "tokens", "utilization", "breakdown"):
        drawn = dom.split(f'id="chart-job0-{chart}"', 1)[1].split('<div class="chart"', 1)[0]
        assert "<canvas" in drawn, chart
    breakdown = dom.split('id="chart-job0-breakdown"', 1)[1].split('<div class="chart"', 1)[0]
    assert breakdown.count('class="u-series') >= 7  # time, the hidden base and the five parts
    shot = tmp_path / "speed.png"
    screenshot(report, shot, (1200, 1600))
    width, height, rows = png_pixels(shot)
    assert len({row[x:x + 3] for row in rows[::8] for x in range(0, len(row), 24)}) > 20


def test_comparison_page_renders(speed_pages: tuple[Path, Path], tmp_path: Path) -> None:
    _, comparison = speed_pages
    dom = chromium(comparison, "--dump-dom").stdout
    assert "<th>Steps/s median</th><td>1.9</td><td>2.5</td><td>1.32x</td>" in dom
    shot = tmp_path / "compare.png"
    screenshot(comparison, shot, (1000, 1400))
    width, height, rows = png_pixels(shot)
    assert sum(1 for row in rows if len(set(row)) > 1) > height // 4  # content on many rows, not a blank page
