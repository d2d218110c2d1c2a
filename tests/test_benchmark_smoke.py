"""A brief run of the performance benchmark (benchmarks/run.py) without peers, to keep it working.

It checks that the benchmark's mover really moves the fake NVML's figures and processes, that every
part of a short run ran on moving data at both terminal sizes and produced sane, non-empty
measurements, and that the live UI's GPUSIGHT_STATS_FILE hook reported its sampler statistics; it
judges no timing.
"""

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

from mover import Mover  # noqa: E402

SIZES = [[160, 45], [80, 24]]


def device_figures(path: Path) -> dict[str, str]:
    """``device N key`` -> value for every scalar line of a scenario file (processes left out)."""
    figures = {}
    for line in path.read_text().splitlines():
        words = line.split()
        if words[0] == "device" and words[2] not in ("compute_proc", "proc_util"):
            figures[" ".join(words[:3])] = " ".join(words[3:])
    return figures


def listed_pids(path: Path) -> set[int]:
    """Pids the scenario lists as compute processes."""
    return {int(m) for m in re.findall(r"compute_proc (\d+)", path.read_text())}


def test_mover_moves_the_figures_and_replaces_processes(tmp_path):
    scenario = tmp_path / "scenario.txt"
    mover = Mover(scenario, write_period_s=0.05, churn_period_s=0.4)
    try:
        mover.restart(moving=True)
        first, first_pids = device_figures(scenario), listed_pids(scenario)
        assert len(first_pids) == 64
        time.sleep(1.0)
        second, second_pids = device_figures(scenario), listed_pids(scenario)
        for metric in ("util_gpu", "util_mem", "mem_used", "power_mw", "temp", "pcie_rx_kbps", "pcie_tx_kbps"):
            moved = [k for k in first if k.endswith(f" {metric}") and first[k] != second[k]]
            assert moved, f"no GPU's {metric} moved in a second"
        replaced = first_pids - second_pids
        assert len(second_pids) == 64 and replaced, "no process was replaced"
        assert not any(psutil.pid_exists(pid) for pid in replaced), "a replaced process still runs"
        assert mover.stats().churned >= len(replaced)

        mover.restart(moving=False)
        constant = scenario.read_text()
        time.sleep(0.3)
        assert scenario.read_text() == constant, "the constant scenario changed"
        assert mover.stats().writes == 1
    finally:
        mover.close()
    assert not any(psutil.pid_exists(pid) for pid in second_pids), "close() left processes running"


@pytest.mark.timeout(240)
def test_benchmark_runs_briefly_and_writes_its_report(tmp_path):
    report = tmp_path / "RESULTS.md"
    raw = tmp_path / "raw.json"
    command = [
        sys.executable, str(REPO / "benchmarks" / "run.py"), "--no-peers", "--sizes", "160x45,80x24",
        "--warmup", "1.5", "--measure", "2", "--record-seconds", "3", "--runs", "1", "--day-hours", "0.05",
        "--output", str(report), "--json", str(raw),
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=220, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]

    data = json.loads(raw.read_text())
    records = data["records"]
    assert {r["tool"] for r in records} == {"gpusight"}, "peers were not asked for"
    moving = [r for r in records if r["data"] == "moving"]
    assert sorted((r["size"], r["default_interval"]) for r in moving) == sorted(
        (size, default) for size in SIZES for default in (False, True))
    assert sorted(r["size"] for r in records if r["data"] == "replay") == sorted(SIZES)
    assert [r["size"] for r in records if r["data"] == "constant"] == [SIZES[0]]
    for record in records:
        measured = record["result"]
        assert measured["cpu_ms_per_s"] > 0
        assert measured["bytes_per_s"] > 0
        assert measured["peak_rss_bytes"] > 10 << 20
        assert measured["first_frame_s"] is not None, f"the first-frame marker never reached the terminal: {record}"
        assert measured["exit_status"] == 0, "gpusight did not quit cleanly on 'q'"
        stats = record["stats"]
        assert stats is not None, "GPUSIGHT_STATS_FILE was not written"
        assert stats["polls"] >= 2 and stats["max_gap_s"] > 0 and stats["snapshots_shown"] >= 1
        assert stats["first_frame_s"] is not None and stats["first_frame_s"] > 0
        if record["data"] == "constant":
            assert record["mover"]["writes"] == 1, "the constant scenario was rewritten"
        else:
            assert record["mover"]["writes"] >= 10, "the mover did not keep the scenario moving"
    assert {r["interval_s"] for r in moving if not r["default_interval"]} == {0.25}
    assert {r["interval_s"] for r in moving if r["default_interval"]} == {0.5}

    recording = data["recording"]
    assert recording["snapshots"] >= 4
    assert recording["distinct_gpu0_util"] >= 2, "gpusight recorded unchanging data"

    assert len(data["once_s"]) == 1
    assert set(data["import_s"]) == {"gpusight", "gpusight.cli", "gpusight.ui.main.app"}
    day = data["day"]
    assert day["samples"] == 720 and day["devices"] == 8 and day["processes"] == 64
    assert day["rss_end"] > 0
    assert day["grid_columns"][0] in (180, 181)  # 720 samples 0.25 s apart span 180 or 181 one-second periods
    assert day["grid_traced_bytes"] > 0

    text = report.read_text()
    for size in ("160x45", "80x24"):
        assert f"| {size} | gpusight 0.25 s |" in text
        assert f"| {size} | defaults: gpusight 0.5 s |" in text
    assert "| moving | gpusight | 80x24 |" in text and "| constant (the old scenario" in text
    assert "## Targets" in text
    assert "nvitop" not in text.split("## Headline")[0], "peers were not asked for, so none is listed"

    again = tmp_path / "AGAIN.md"
    rewrite = [sys.executable, str(REPO / "benchmarks" / "run.py"), "--from-json", str(raw), "--output", str(again)]
    result = subprocess.run(rewrite, capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert again.read_text() == text

    table = [sys.executable, str(REPO / "benchmarks" / "run.py"), "--from-json", str(raw), "--readme-table"]
    result = subprocess.run(table, capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.startswith("    python benchmarks/run.py\n")
    rows = [line for line in result.stdout.splitlines() if line.startswith("| ")]
    assert len(rows) == 5, "a header and one row per size and interval point"
    assert all(row in text.splitlines() for row in rows), "the README table differs from RESULTS.md's"


@pytest.mark.timeout(180)
def test_exporter_benchmark_runs_briefly_and_puts_its_section_into_a_report(tmp_path):
    report = tmp_path / "RESULTS.md"
    report.write_text("# results\n\n## Targets\n\nkept\n")
    raw = tmp_path / "exporter.json"
    command = [sys.executable, str(REPO / "benchmarks" / "exporter_cpu.py"), "--runs", "2", "--warmup", "1.5",
               "--measure", "2.5", "--results", str(report), "--json", str(raw)]
    result = subprocess.run(command, capture_output=True, text=True, timeout=170, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    runs = json.loads(raw.read_text())
    assert len(runs) == 2
    for serve, record in runs:
        assert (serve["mode"], record["mode"]) == ("serve", "record")
        assert serve["cpu_ms_per_s"] > 0 and record["cpu_ms_per_s"] > 0
        assert serve["scrapes"] >= 2, "the exporter was not scraped while measured"
        assert serve["body_bytes"] > 20_000 and 0 < serve["gzip_bytes"] < serve["body_bytes"]
    text = report.read_text()
    assert text.startswith("# results\n\n## Targets\n\nkept\n") and text.count("## Exporter") == 1
    assert "| 2 | record |" in text and "Median serve ÷ record" in text
    result = subprocess.run(command, capture_output=True, text=True, timeout=170, cwd=tmp_path, check=False)
    assert result.returncode == 0 and report.read_text().count("## Exporter") == 1, "the section was not replaced"
