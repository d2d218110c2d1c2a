"""The run report's hardware health, Xid events, MIG instances and video engines: a recording made with the real
JSONL writer, reported by the real CLI, read as HTML and rendered by a real headless Chromium."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.recordings.jsonl.writer import JsonlWriter
from gpusight.snapshot.model import (
    DeviceHealth,
    DeviceSample,
    MigDeviceSample,
    ProcessSample,
    Snapshot,
    SourceKind,
    XidEvent,
)
from support.chromium import CHROMIUM, INSTALL, chromium

T0 = 1_795_000_000.0
GIB = 1 << 30
EVIL = '</script><img id="pwned" src=x onerror="document.title=1">'


def device(t: int) -> tuple[DeviceSample, ...]:
    """Second ``t`` of the run: GPU 0 in MIG mode, healthy; GPU 1 decoding, Xid 48 at 10 s and Xid 79 at 20 s (each
    repeated in every later snapshot, as NVML's latest events are), a remap pending from 15 s, then lost at 25 s."""
    xids = tuple(XidEvent(code, T0 + at) for code, at in ((48, 10), (79, 20)) if t >= at)
    second = (DeviceSample(index=1, name="A100", lost=True, error="GPU is lost", health=DeviceHealth(xid_recent=xids))
              if t >= 25 else
              DeviceSample(index=1, name="A100", utilization_gpu_percent=20.0, encoder_percent=2.0,
                           decoder_percent=90.0 + t % 5, health=DeviceHealth(
                               xid_total=len(xids), xid_recent=xids, remap_pending=t >= 15, pcie_link_gen=4,
                               pcie_link_gen_max=4, pcie_link_width=16, pcie_link_width_max=16)))
    first = DeviceSample(index=0, name="H100", mig_mode=True, memory_used_bytes=38 * GIB, memory_total_bytes=80 * GIB,
                         health=DeviceHealth(xid_total=0, remap_pending=False))
    return first, second


def instances(t: int) -> tuple[MigDeviceSample, ...]:
    """Two MIG instances on GPU 0: one with GPM activity, one without (the reason given, hostile)."""
    return (
        MigDeviceSample(device_index=0, mig_index=0, gpu_instance_id=1, compute_instance_id=0, profile="3g.40gb",
                        memory_used_bytes=(30 + t % 3) * GIB, memory_total_bytes=40 * GIB, sm_active_percent=80.0),
        MigDeviceSample(device_index=0, mig_index=1, gpu_instance_id=5, compute_instance_id=0, profile="2g.20gb",
                        memory_used_bytes=8 * GIB, memory_total_bytes=20 * GIB, utilization_note=EVIL),
    )


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("health")
    recording = directory / "faults.jsonl"
    writer = JsonlWriter(recording)
    process = ProcessSample(pid=4242, device_index=0, gpu_instance_id=1, compute_instance_id=0, gpu_memory_bytes=30 * GIB)
    for t in range(40):
        writer.write(Snapshot(timestamp=T0 + t, source=SourceKind.REPLAY, devices=device(t), processes=(process,),
                              mig_devices=instances(t)))
    writer.close()
    result = subprocess.run([sys.executable, "-m", "gpusight", "--report", str(recording)], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    return Path(result.stdout.strip())


def section(page: str, name: str) -> str:
    return page.split(f'<section id="{name}">', 1)[1].split("</section>", 1)[0]


def report_data(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="report-data">(.*?)</script>', page, re.S).group(1))


def test_health_section_gives_each_gpus_worst_moment_and_findings(report: Path) -> None:
    health = section(report.read_text(), "health")
    assert "GPU 0: worst" in health and "ok</span>, lowest score 100/100" in health
    gpu1 = health.split('id="health-gpu-1"', 1)[1].split("</div>", 1)[0]
    assert "drain</span>, lowest score 0/100 at " in gpu1
    for finding in ("Xid 48: double-bit ECC error", "Xid 79: GPU has fallen off the bus", "row remap pending"):
        assert finding in gpu1
    assert "nvidia-smi -r" in gpu1


def test_xid_events_are_listed_once_each_and_drawn_on_the_timeline(report: Path) -> None:
    page = report.read_text()
    table = section(page, "health").split("<h3>Xid events</h3>", 1)[1]
    assert table.count("<tr class=") == 2  # 48 and 79, though every later snapshot repeats them
    assert "<td>48</td>" in table and "<td>79</td>" in table
    lanes = [e for e in report_data(page)["episodes"] if e["id"].startswith("xid:")]
    assert [(e["id"], e["start"], e["severity"]) for e in lanes] == [("xid:gpu1", 10.0, "critical"),
                                                                      ("xid:gpu1", 20.0, "critical")]


def test_mig_instances_under_their_gpu_and_the_summary_health_column(report: Path) -> None:
    page = report.read_text()
    gpu0 = section(page, "gpus").split('id="gpu-0"', 1)[1].split('id="gpu-1"', 1)[0]
    assert "<h4>MIG instances</h4>" in gpu0
    assert "<td>0.1</td><td>3g.40gb</td><td>0</td><td>32GiB / 40GiB</td><td>80%</td><td>4242</td>" in gpu0
    assert "<td>0.5</td><td>2g.20gb</td>" in gpu0 and "N/A: &lt;/script&gt;&lt;img" in gpu0
    assert "MIG instances" not in section(page, "gpus").split('id="gpu-1"', 1)[1]
    summary = section(page, "summary")
    assert '<span class="sev-critical">drain, 0/100</span>' in summary


def test_video_engine_chart_only_for_the_gpu_that_decodes(report: Path) -> None:
    charts = {c["id"]: c for c in report_data(report.read_text())["charts"]}
    assert "gpu0-video" not in charts
    video = charts["gpu1-video"]
    assert [s["label"] for s in video["series"]] == ["Encoder (NVENC)", "Decoder (NVDEC)"]
    assert max(v for v in video["series"][1]["max"] if v is not None) == 94.0


@pytest.mark.skipif(CHROMIUM is None, reason=INSTALL)
def test_chromium_draws_the_health_section_video_chart_and_xid_lane(report: Path) -> None:
    dom = chromium(report, "--dump-dom").stdout
    body = re.search(r"<body[^>]*>", dom)
    assert body is not None and 'data-ready="true"' in body.group(0) and "data-error" not in body.group(0)
    assert re.search(r'<pre id="js-errors" hidden="">\s*</pre>', dom)
    assert '<section id="health">' in dom and "<img id=" not in dom
    video = dom.split('id="chart-gpu1-video"', 1)[1].split('<div class="chart"', 1)[0]
    assert "<canvas" in video
    lane = dom.split('title="xid:gpu1"', 1)[1].split('<div class="lane">', 1)[0]
    assert lane.count('class="bar critical"') == 2
