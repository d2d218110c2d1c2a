"""A brief run of the performance benchmark (benchmarks/run.py) without peers, to keep it working.

It checks that every part ran and produced sane, non-empty measurements, and that the live UI's
GPUTOP_STATS_FILE hook reported its sampler statistics; it judges no timing.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.timeout(120)
def test_benchmark_runs_briefly_and_writes_its_report(tmp_path):
    report = tmp_path / "RESULTS.md"
    raw = tmp_path / "raw.json"
    command = [
        sys.executable, str(REPO / "benchmarks" / "run.py"), "--no-peers", "--sizes", "80x24", "--warmup", "1.5",
        "--measure", "2", "--runs", "1", "--day-hours", "0.05", "--output", str(report), "--json", str(raw),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=110, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]

    data = json.loads(raw.read_text())
    (record,) = data["records"]
    assert record["tool"] == "gputop" and record["size"] == [80, 24]
    measured = record["result"]
    assert measured["cpu_ms_per_s"] > 0
    assert measured["bytes_per_s"] > 0
    assert measured["peak_rss_bytes"] > 10 << 20
    assert measured["first_frame_s"] is not None, "the last GPU's utilization never reached the terminal"
    assert measured["exit_status"] == 0, "gputop did not quit cleanly on 'q'"

    stats = record["stats"]
    assert stats is not None, "GPUTOP_STATS_FILE was not written"
    assert stats["interval_s"] == 0.25
    assert stats["polls"] >= 2
    assert stats["max_gap_s"] > 0
    assert stats["snapshots_shown"] >= 1
    assert stats["first_frame_s"] is not None and stats["first_frame_s"] > 0

    assert len(data["once_s"]) == 1
    assert set(data["import_s"]) == {"gputop", "gputop.cli", "gputop.ui.app"}
    day = data["day"]
    assert day["samples"] == 720 and day["devices"] == 8 and day["processes"] == 64
    assert day["rss_end"] > 0
    assert day["grid_columns"][0] in (180, 181)  # 720 samples 0.25 s apart span 180 or 181 one-second periods
    assert day["grid_traced_bytes"] > 0

    text = report.read_text()
    assert "| gputop | 80x24 |" in text
    assert "## Targets (issue #6)" in text
    assert "nvitop" not in text.split("## Scenario")[0], "peers were not asked for, so none is listed"

    again = tmp_path / "AGAIN.md"
    rewrite = [sys.executable, str(REPO / "benchmarks" / "run.py"), "--from-json", str(raw), "--output", str(again)]
    result = subprocess.run(rewrite, capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert again.read_text() == text
