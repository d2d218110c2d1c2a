"""``gpusight --convert IN OUT.parquet``: real ``gpusight`` processes writing tidy Parquet tables, read back with DuckDB."""

import os
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from gpusight.run_report.command import read_summary
from support.demo_run import Segment, record_demo_run

GPUSIGHT = [sys.executable, "-m", "gpusight"]


def gpusight(*args: str, **kwargs) -> subprocess.CompletedProcess:
    """Run the CLI with ``args``; output as text."""
    return subprocess.run([*GPUSIGHT, *args], capture_output=True, text=True, timeout=120, **kwargs)


@pytest.fixture(scope="module")
def recording(tmp_path_factory) -> Path:
    """Three simulated minutes of the busy demo server through the real sampler, advice engine and compact writer."""
    path = tmp_path_factory.mktemp("parquet") / "run.gtr"
    record_demo_run(path, [Segment("mixed", 180)], interval=1.0)
    return path


@pytest.fixture(scope="module")
def tables(recording, tmp_path_factory) -> Path:
    """The recording converted by a real ``gpusight --convert``."""
    out = tmp_path_factory.mktemp("out") / "run.parquet"
    result = gpusight("--convert", str(recording), str(out))
    assert result.returncode == 0, result.stderr
    assert "converted 180 snapshots" in result.stderr
    return out


def query(sql: str) -> list[tuple]:
    """Rows of a DuckDB query."""
    return duckdb.sql(sql).fetchall()


def test_duckdb_gets_the_reports_per_gpu_means(recording, tables):
    summary = read_summary(recording)
    rows = query(f"""
        SELECT index, avg(utilization_gpu_percent), avg(sm_active_percent), max(memory_used_bytes), count(*)
        FROM '{tables}/gpus.parquet' GROUP BY index ORDER BY index""")
    assert [r[0] for r in rows] == [g.index for g in summary.gpus]
    for (index, util, sm, peak, count), gpu in zip(rows, summary.gpus, strict=True):
        assert count == 180, index
        assert util == pytest.approx(gpu.mean_util, abs=1e-9), index
        assert (sm is None and gpu.mean_sm_active is None) or sm == pytest.approx(gpu.mean_sm_active, abs=1e-9)
        assert peak == gpu.peak_memory_bytes, index


def test_processes_are_one_row_per_process_per_snapshot(recording, tables):
    summary = read_summary(recording)  # every snapshot stands for one second: GPU-seconds are rows
    rows = query(f"""
        SELECT pid, first(cmdline), count(*) FROM '{tables}/processes.parquet' WHERE role = 'gpu'
        GROUP BY pid, create_time""")
    assert sorted((pid, count) for pid, _, count in rows) == sorted(
        (p.pid, round(p.gpu_hours * 3600)) for p in summary.processes)
    timestamps = query(f"SELECT count(DISTINCT timestamp) FROM '{tables}/processes.parquet'")
    assert timestamps == [(180,)]


def test_advice_is_one_row_per_event(recording, tables):
    summary = read_summary(recording)
    rows = query(f"SELECT advice_id, event, timestamp FROM '{tables}/advice.parquet' ORDER BY timestamp, advice_id")
    raised = [(a, t) for a, event, t in rows if event == "raised"]
    assert sorted(raised) == sorted((e.advice_id, e.raised) for e in summary.episodes)
    assert {event for _, event, _ in rows} <= {"raised", "cleared"}


def test_an_existing_out_is_replaced_only_with_force(recording, tmp_path):
    out = tmp_path / "run.parquet"
    assert gpusight("--convert", str(recording), str(out)).returncode == 0
    refused = gpusight("--convert", str(recording), str(out))
    assert refused.returncode == 1
    assert "exists; add --force" in refused.stderr
    replaced = gpusight("--convert", str(recording), str(out), "--force")
    assert replaced.returncode == 0, replaced.stderr
    assert sorted(p.name for p in out.iterdir()) == ["advice.parquet", "gpus.parquet", "processes.parquet"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".gpusight-")]


def test_a_folder_that_is_not_ours_is_never_replaced(recording, tmp_path):
    out = tmp_path / "data.parquet"
    out.mkdir()
    (out / "precious.csv").write_text("keep me\n")
    result = gpusight("--convert", str(recording), str(out), "--force")
    assert result.returncode == 1
    assert "not a folder of gpusight's Parquet tables" in result.stderr
    assert (out / "precious.csv").read_text() == "keep me\n"


def test_without_pyarrow_one_line_names_the_extra(recording, tmp_path):
    blocker = tmp_path / "blocker" / "pyarrow"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('pyarrow is not installed')\n")
    out = tmp_path / "run.parquet"
    result = gpusight("--convert", str(recording), str(out), env={**os.environ, "PYTHONPATH": str(blocker.parent)})
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "gpusight: writing Parquet needs pyarrow: pip install 'gpusight[parquet]'"]
    assert not out.exists()
