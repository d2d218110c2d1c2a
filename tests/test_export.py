"""Exporting a snapshot: the file set, its contents, safe Markdown, unique names and atomic writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.sampling.history import DEVICE_METRICS, HOST_METRICS, History
from gpusight.snapshot.model import (
    Advice,
    DeviceSample,
    DriverInfo,
    ErrorNote,
    HostSample,
    ProcessRole,
    ProcessSample,
    Snapshot,
)
from gpusight.snapshot.serialize import snapshot_from_dict
from gpusight.snapshot_export.export_set import ExportError, export_snapshot
from gpusight.snapshot_export.markdown import render_markdown

GIB = 2**30


def make_snapshot(t: float, util: float | None = 50.0, hostile: str = "python train.py") -> Snapshot:
    """Two GPUs, one trainer with two workers, advice and an error, at time ``t``."""
    return Snapshot(
        timestamp=t,
        source="demo",
        label="demo: input-bound (simulated)",
        host=HostSample(hostname="node7", cpu_percent_per_core=(40.0, 60.0), memory_used_bytes=8 * GIB),
        driver=DriverInfo("550.54.15", "12.4", "12.550"),
        devices=(
            DeviceSample(
                0,
                name="NVIDIA H100 80GB HBM3",
                utilization_gpu_percent=util,
                memory_used_bytes=40 * GIB,
                memory_total_bytes=80 * GIB,
                power_watts=300.0,
                throttle_reasons=("sw_power_cap",),
            ),
            DeviceSample(1, name="NVIDIA A100-SXM4-40GB", lost=True, error="GPU is lost"),
        ),
        processes=(
            ProcessSample(
                4242,
                device_index=0,
                name="python",
                cmdline=hostile,
                user="alice",
                gpu_memory_bytes=20 * GIB,
                num_workers=2,
                create_time=1.5,
            ),
            ProcessSample(4243, role=ProcessRole.DATALOADER_WORKER, device_index=0, trainer_pid=4242),
            ProcessSample(4244, role=ProcessRole.DATALOADER_WORKER, device_index=0, trainer_pid=4242),
            ProcessSample(5000, device_index=0, note="access denied", gpu_memory_bytes=GIB),
        ),
        advice=(
            Advice(
                "input_bound:gpu0",
                "warn",
                "gpu0",
                "GPU waits for data",
                "GPU util 35% while 2 workers run at 100% CPU",
                "raise num_workers to 8",
            ),
        ),
        errors=(ErrorNote("gpu1", "GPU fell off the bus (NVML_ERROR_GPU_IS_LOST)"),),
    )


def make_history(samples: int = 5) -> tuple[History, Snapshot]:
    """A history of ``samples`` snapshots (GPU util 10, 20, ... with one missing) and the last snapshot."""
    history = History(capacity=max(100, samples))
    last = None
    for i in range(samples):
        last = make_snapshot(1_700_000_000.0 + i, util=None if i == 1 else 10.0 * (i + 1))
        history.append(last)
    return history, last


def test_export_writes_svg_json_and_markdown_with_one_stem(tmp_path):
    history, snap = make_history()
    target = tmp_path / "new" / "dir"
    result = export_snapshot(target, snap, history, "<svg>screen</svg>")
    assert [p.suffix for p in result.paths] == [".svg", ".json", ".md", ".html"]
    assert len({p.stem for p in result.paths}) == 1
    assert result.paths[0].stem.startswith("gpusight-")
    assert sorted(target.iterdir()) == sorted(result.paths)
    assert result.paths[0].read_text() == "<svg>screen</svg>"


def test_json_holds_the_snapshot_and_the_history_window(tmp_path):
    history, snap = make_history()
    result = export_snapshot(tmp_path, snap, history, None)
    assert [p.suffix for p in result.paths] == [".json", ".md", ".html"]
    document = json.loads(result.paths[0].read_text())
    assert snapshot_from_dict(document, complete=True) == snap
    recorded = document["history"]
    assert recorded["timestamps"] == [1_700_000_000.0 + i for i in range(5)]
    devices = {d["index"]: d["series"] for d in recorded["devices"]}
    assert sorted(devices) == [0, 1]
    for series in devices.values():
        assert sorted(series) == sorted(DEVICE_METRICS)
        assert all(len(values) == 5 for values in series.values())
    assert devices[0]["utilization_gpu_percent"] == [10.0, None, 30.0, 40.0, 50.0]
    assert devices[1]["power_watts"] == [None] * 5
    assert sorted(recorded["host"]) == sorted(HOST_METRICS)
    assert recorded["host"]["cpu_percent"] == [50.0] * 5


def test_report_lists_devices_processes_advice_errors_and_history_summary():
    history, snap = make_history()
    report = render_markdown(snap, history)
    assert "NVIDIA H100 80GB HBM3" in report and "NVIDIA A100-SXM4-40GB" in report
    assert "node7" in report and "demo: input-bound (simulated)" in report
    assert "| Scope | Metric | Min | Mean | Max |" in report
    mean = f"{(10 + 30 + 40 + 50) / 4:.0f}%"  # the missing sample is left out
    assert f"| gpu0 | `utilization_gpu_percent` | 10% | {mean} | 50% |" in report
    assert "| host | `cpu_percent` | 50% | 50% | 50% |" in report
    process_rows = [line for line in report.splitlines() if "4242" in line]
    assert len(process_rows) == 1 and "| 2 |" in process_rows[0]
    assert report.index("| 0 | 4242 |") < report.index("| 0 | 5000 |")
    assert "raise num\\_workers to 8" in report and "GPU waits for data" in report
    assert "NVML\\_ERROR\\_GPU\\_IS\\_LOST" in report


def test_hostile_text_is_escaped_in_the_report():
    hostile = "evil | injected | cell\x1b[31m [link](http://x) <script>\nnext"
    history = History(capacity=10)
    snap = make_snapshot(1_700_000_000.0, hostile=hostile)
    history.append(snap)
    report = render_markdown(snap, history)
    assert "\x1b" not in report
    row = next(line for line in report.splitlines() if "4242" in line)
    assert "evil \\| injected \\| cell \\[link\\](http://x) \\<script\\>?next" in row
    assert row.count(" | ") == 8  # nine cells: the pipes inside the command did not add any


def test_two_exports_in_the_same_second_get_distinct_names(tmp_path):
    history, snap = make_history()
    first = export_snapshot(tmp_path, snap, history, "<svg/>")
    second = export_snapshot(tmp_path, snap, history, "<svg/>")
    third = export_snapshot(tmp_path, snap, history, None)
    names = {p.name for p in first.paths + second.paths + third.paths}
    assert len(names) == 11
    assert len(list(tmp_path.iterdir())) == 11
    for export in (first, second, third):  # each Markdown report links its own HTML report, whatever stem it got
        markdown = next(p for p in export.paths if p.suffix == ".md")
        html = next(p for p in export.paths if p.suffix == ".html")
        assert f"]({html.name})" in markdown.read_text()


def test_a_directory_under_a_regular_file_raises_export_error(tmp_path):
    history, snap = make_history()
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    for target in (blocker / "sub", blocker):
        with pytest.raises(ExportError, match=f"cannot export to {target}") as caught:
            export_snapshot(target, snap, history, "<svg/>")
        assert "\n" not in str(caught.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


_WRITE_WITH_FILE_SIZE_LIMIT = """
import json, resource, signal, sys
from pathlib import Path
from gpusight.snapshot_export.export_set import ExportError, export_snapshot
sys.path.insert(0, sys.argv[2])
from test_export import make_history
history, snap = make_history(80)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (16384, 16384))
try:
    export_snapshot(Path(sys.argv[1]), snap, history, "<svg/>")
    print("written")
except ExportError as exc:
    print(exc)
"""


def test_a_write_failing_midway_leaves_neither_partial_nor_temporary_files(tmp_path):
    # RLIMIT_FSIZE makes the large JSON write fail part-way with EFBIG, on any file system.
    done = subprocess.run(
        [sys.executable, "-c", _WRITE_WITH_FILE_SIZE_LIMIT, str(tmp_path), str(Path(__file__).parent)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"cannot export to {tmp_path}/gpusight-") and ".json" in done.stdout
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def tiny_tmpfs(tmp_path):
    """A 64 KiB tmpfs mount, or a skip where mounting is not permitted."""
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount_point)],
        check=False,
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)


def test_a_full_disk_raises_export_error_and_cleans_up(tiny_tmpfs):
    history, snap = make_history(2000)
    with pytest.raises(ExportError, match="No space left on device"):
        export_snapshot(tiny_tmpfs, snap, history, "<svg/>")
    assert list(tiny_tmpfs.iterdir()) == []
