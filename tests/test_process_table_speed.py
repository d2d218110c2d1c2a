"""The process table's speed columns: THRU/S (tokens or samples per second) and MFU/HFU, drawn by a real
ProcessTable under Textual's Pilot, and the demo's trainers shown at 80 and 160 columns."""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_process_table import TableApp
from test_ui_e2e_tmux import Tmux, alive, gpusight_command, wait_until

from gpusight.demo.source import DemoSource
from gpusight.snapshot.model import (
    FlopsSource,
    JobSample,
    ProcessSample,
    Snapshot,
    SourceKind,
    WorkloadKind,
)
from gpusight.ui.main.process_table import ProcessTable


def lines(snapshot: Snapshot, width: int = 160, height: int = 12) -> list[str]:
    """The table's lines (header first) as a terminal of ``width`` columns shows them, rows sorted by PID."""

    async def run() -> list[str]:
        app = TableApp()
        async with app.run_test(size=(width, height)) as pilot:
            table = app.query_one(ProcessTable)
            table.update_snapshot(snapshot)
            table.sort_by("pid")
            await pilot.pause()
            return [table.render_line(y).text for y in range(len(snapshot.processes) + 1)]

    return asyncio.run(run())


def cell(table: list[str], row: int, label: str) -> str:
    """The text of the right-aligned column ``label`` on line ``row``: from the end of the label before it to the end
    of its own."""
    header = table[0]
    at = header.index(label)
    return table[row][len(header[:at].rstrip()) : at + len(label)].strip()


def snap(*processes: ProcessSample, jobs: tuple[JobSample, ...] = ()) -> Snapshot:
    return Snapshot(timestamp=1_700_000_000.0, source=SourceKind.DEMO, processes=processes, jobs=jobs)


LM = ProcessSample(
    pid=101, device_index=0, cmdline="python train_lm.py", input_wait_percent=3.0, steps_per_second=1.14,
    samples_per_second=2.28, tokens_per_second=9339.0, flops_source=FlopsSource.ESTIMATE_6N,
    flops_utilization_percent=45.4, achieved_tflops=449.0, peak_tflops=989.5,
)
VISION = ProcessSample(
    pid=102, device_index=1, cmdline="python train_vit.py", input_wait_percent=2.0, steps_per_second=31.0,
    samples_per_second=248.0, flops_source=FlopsSource.COUNTED, flops_utilization_percent=4.83,
)
PLAIN = ProcessSample(pid=103, device_index=2, cmdline="python other.py", cpu_percent=12.0)


def test_throughput_says_tokens_or_samples_and_utilization_is_named_by_the_flops_source():
    table = lines(snap(LM, VISION, PLAIN))
    assert "THRU/S" in table[0] and "MFU/HFU" in table[0]
    assert cell(table, 1, "THRU/S") == "9.3k tok"
    assert cell(table, 1, "MFU/HFU") == "45% MFU"
    assert cell(table, 2, "THRU/S") == "248 smp"
    assert cell(table, 2, "MFU/HFU") == "4.8% HFU"  # counted FLOPs (recomputation included): HFU
    assert cell(table, 3, "THRU/S") == "" and cell(table, 3, "MFU/HFU") == ""  # reports nothing: blank, not 0
    assert "python other.py" in table[3]


def test_a_trainer_without_a_known_peak_shows_na_and_says_why_in_its_note():
    unknown = ProcessSample(
        pid=104, device_index=0, cmdline="python train.py", steps_per_second=2.0, samples_per_second=64.0,
        flops_source=FlopsSource.GIVEN, achieved_tflops=12.0,
        flops_utilization_note="no peak for 'NVIDIA Mystery [red]GPU\x1b[2J' in the table; pass peak_tflops=",
    )
    table = lines(snap(unknown), width=220)
    assert cell(table, 1, "MFU/HFU") == "N/A"
    assert cell(table, 1, "THRU/S") == "64 smp"
    assert "(MFU N/A: no peak for 'NVIDIA Mystery [red]GPU" in table[1]  # markup shown as text
    assert "\x1b" not in table[1]


def test_the_speed_columns_show_only_while_a_trainer_reports_its_speed():
    waits = ProcessSample(pid=105, device_index=0, cmdline="python train.py", input_wait_percent=40.0,
                          steps_per_second=3.0)
    table = lines(snap(waits, PLAIN))
    assert "WAIT %" in table[0] and "STEP/S" in table[0]
    assert "THRU/S" not in table[0] and "MFU/HFU" not in table[0]
    table = lines(snap(LM, waits, PLAIN))
    assert cell(table, 3, "THRU/S") == "N/A" and cell(table, 3, "MFU/HFU") == "N/A"  # reports, but not its speed
    assert cell(table, 2, "THRU/S") == ""  # PID 103 reports nothing


def test_the_first_rank_of_a_job_shows_the_jobs_summed_throughput():
    ranks = tuple(
        ProcessSample(pid=200 + rank, device_index=rank, cmdline="python -u train.py", job=1, rank=rank,
                      steps_per_second=1.1, samples_per_second=2.2, tokens_per_second=9000.0 + rank * 1000,
                      flops_source=FlopsSource.ESTIMATE_6N, achieved_tflops=400.0 + rank * 100, peak_tflops=1000.0,
                      flops_utilization_percent=40.0 + rank * 10)
        for rank in range(2)
    )
    job = JobSample(id=1, kind=WorkloadKind.TRAINING, pids=(200, 201), devices=(0, 1), evidence="torchrun", world_size=2)
    table = lines(snap(*ranks, jobs=(job,)))
    # 9k + 10k tokens/s; the job's MFU, 900 of 2000 TFLOP/s, reads otherwise than rank 0's 40 %
    assert "(job: 19k tok/s, 45% MFU)" in table[1]
    assert "job:" not in table[2]


def demo(scenario: str) -> Snapshot:
    return DemoSource(scenario, seed=0, clock=lambda: 1_700_000_000.0).poll()


def test_the_demo_at_80_columns_keeps_mfu_and_gives_up_wait():
    table = lines(demo("mixed"), width=80)
    header = table[0]
    assert "MFU/HFU" in header and "WAIT %" not in header and "THRU/S" not in header
    assert all(len(line) <= 80 for line in table)
    utilizations = {cell(table, row, "MFU/HFU").split()[-1] for row in range(1, len(table)) if cell(table, row, "MFU/HFU")}
    assert utilizations == {"MFU", "HFU"}
    assert header.index("COMMAND") <= 80 - 10  # the command keeps its minimum


def test_the_demo_at_160_columns_shows_every_speed_column():
    table = lines(demo("mixed"), width=160, height=45)
    header = table[0]
    for label in ("WAIT %", "STEP/S", "THRU/S", "MFU/HFU"):
        assert label in header
    throughputs = [cell(table, row, "THRU/S") for row in range(1, len(table))]
    assert any(text.endswith(" tok") for text in throughputs) and any(text.endswith(" smp") for text in throughputs)


def test_numbers_from_outside_that_are_not_figures_read_na():
    odd = ProcessSample(pid=106, device_index=0, cmdline="python train.py", steps_per_second=float("nan"),
                        samples_per_second=-5.0, tokens_per_second=float("inf"), flops_utilization_percent=float("nan"))
    table = lines(snap(odd))
    assert (cell(table, 1, "STEP/S"), cell(table, 1, "THRU/S"), cell(table, 1, "MFU/HFU")) == ("N/A", "N/A", "N/A")


@pytest.fixture
def tmux() -> Iterator[Tmux]:
    server = Tmux(f"gpusight-speed-{os.getpid()}-{time.monotonic_ns()}")
    yield server
    server.kill_server()


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux (the CI script installs it)")
@pytest.mark.parametrize(("size", "labels"), [((80, 24), ("MFU/HFU",)), ((160, 45), ("WAIT %", "THRU/S", "MFU/HFU"))])
def test_the_real_demo_in_tmux_shows_speed_and_fits(tmux: Tmux, tmp_path: Path, size, labels) -> None:
    pid = tmux.start(gpusight_command("--demo", "mixed"), size, tmp_path)
    def header() -> str:
        return next((line for line in tmux.screen().splitlines() if line.startswith("GPU PID")), "")

    # alice's ranks are on top at any size; the first frames may come before tmux gives the window its size
    wait_until(lambda: "% MFU" in tmux.screen() and all(label in header() for label in labels), "the speed columns")
    screen = tmux.screen().splitlines()
    assert len(screen) <= size[1] and all(len(line) <= size[0] for line in screen)
    tmux.keys("q")
    wait_until(lambda: not alive(pid), "gpusight to exit after q")
