"""The process table widget (tree of trainers and workers, sort, filter, hostile text) and the kill dialog."""

from __future__ import annotations

import asyncio
import functools
import subprocess

import psutil
import pytest
from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.widgets import Static

from gpusight.snapshot.model import JobSample, ProcessRole, ProcessSample, Snapshot, SourceKind, WorkloadKind
from gpusight.ui.dialogs.kill_dialog import KillDialog
from gpusight.ui.main.process_table import ProcessTable

GIB = 2**30
WIDTH, HEIGHT = 120, 20


def synchronously(test):
    """Run an async test function to completion in a fresh event loop (no asyncio plugin needed)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


def gpu(pid: int, device: int, **fields) -> ProcessSample:
    """A GPU process on ``device``."""
    return ProcessSample(pid=pid, device_index=device, **fields)


def worker(pid: int, trainer: int, device: int, **fields) -> ProcessSample:
    """A DataLoader worker of ``trainer``."""
    return ProcessSample(pid=pid, role=ProcessRole.DATALOADER_WORKER, device_index=device, trainer_pid=trainer, **fields)


def snapshot(*processes: ProcessSample) -> Snapshot:
    """A snapshot holding only ``processes``."""
    return Snapshot(timestamp=1_700_000_000.0, source=SourceKind.DEMO, processes=processes)


TRAINING = snapshot(
    gpu(
        100,
        0,
        user="alice",
        name="python",
        cmdline="python train.py --lr 0.1",
        gpu_memory_bytes=10 * GIB,
        sm_percent=90.0,
        cpu_percent=101.0,
        rss_bytes=3 * GIB,
        elapsed_seconds=3700.0,
        num_workers=2,
    ),
    worker(101, 100, 0, user="alice", name="pt_data_worker", cpu_percent=55.0, status="sleeping"),
    worker(102, 100, 0, user="alice", name="pt_data_worker", cpu_percent=75.0, status="running"),
    gpu(
        200,
        1,
        user="bob",
        name="python",
        cmdline="python eval.py",
        gpu_memory_bytes=30 * GIB,
        sm_percent=10.0,
        cpu_percent=20.0,
        elapsed_seconds=60.0,
        num_workers=1,
    ),
    worker(201, 200, 1, user="bob", name="pt_data_worker", cpu_percent=5.0, status="sleeping"),
    gpu(300, 0, note="not in this PID namespace", gpu_memory_bytes=1 * GIB),
)


class TableApp(App):
    """A bare app holding one process table."""

    def __init__(self, ascii_mode: bool = False) -> None:
        super().__init__()
        self.ascii_mode = ascii_mode
        self.selected: list[ProcessSample] = []

    def compose(self) -> ComposeResult:
        yield ProcessTable(ascii_mode=self.ascii_mode, id="table")

    def on_process_table_process_selected(self, message: ProcessTable.ProcessSelected) -> None:
        self.selected.append(message.process)


def lines(table: ProcessTable) -> list[str]:
    """The table's visible lines as plain text, header first."""
    return [table.render_line(y).text for y in range(table.scrollable_content_region.height)]


def rows(table: ProcessTable) -> list[str]:
    """The non-blank visible lines below the header."""
    return [line for line in lines(table)[1:] if line.strip()]


def pids(table: ProcessTable) -> list[int]:
    """PIDs of the displayed rows, top to bottom."""
    return [p.pid for p in table.displayed_processes()]


@synchronously
async def test_trainers_are_followed_by_their_workers_as_a_tree():
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)
        await pilot.pause()
        shown = rows(table)
        assert pids(table) == [100, 101, 102, 300, 200, 201]
        assert "python train.py --lr 0.1 [2 workers]" in shown[0]
        assert "├─ 101" in shown[1] and "pt_data_worker (sleeping)" in shown[1]
        assert "└─ 102" in shown[2] and "75%" in shown[2]
        assert "[1 worker]" in shown[4] and "└─ 201" in shown[5]
        assert "N/A" in shown[3] and "(not in this PID namespace)" in shown[3]
        assert "GPU MEM" in lines(table)[0] and "COMMAND" in lines(table)[0]


@synchronously
async def test_ascii_mode_draws_the_tree_without_box_characters():
    app = TableApp(ascii_mode=True)
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)
        await pilot.pause()
        text = "\n".join(lines(table))
        assert "|- 101" in text and "`- 102" in text
        assert all(ord(ch) < 128 for ch in text)


@synchronously
async def test_ascii_mode_scroll_bar_has_no_block_characters():
    many = snapshot(*(gpu(1000 + i, 0, cmdline=f"job {i}") for i in range(37)))
    app = TableApp(ascii_mode=True)
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(many)
        table.focus()
        await pilot.pause()
        assert table.show_vertical_scrollbar
        for _ in range(30):
            await pilot.press("down")
            screen = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
            assert screen.isascii(), sorted({ch for ch in screen if not ch.isascii()})


@synchronously
async def test_sorting_moves_groups_and_keeps_workers_under_their_trainer():
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)
        table.sort_by("memory")
        await pilot.pause()
        assert pids(table) == [200, 201, 100, 101, 102, 300]
        assert "GPU MEM▼" in lines(table)[0]
        table.sort_by("memory")
        await pilot.pause()
        assert pids(table) == [300, 100, 101, 102, 200, 201]
        table.sort_by("sm")
        assert pids(table) == [100, 101, 102, 200, 201, 300]  # unknown SM % goes last
        table.sort_by("user")
        assert pids(table) == [100, 101, 102, 200, 201, 300]
        table.sort_by("pid")
        table.sort_by("pid")
        assert pids(table) == [300, 200, 201, 100, 101, 102]
        with pytest.raises(ValueError):
            table.sort_by("colour")


@synchronously
async def test_filter_matches_pid_user_name_and_cmdline_case_insensitively():
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)
        table.set_filter("EVAL")
        assert pids(table) == [200, 201]
        table.set_filter("alice")
        assert pids(table) == [100, 101, 102]
        table.set_filter("102")
        assert pids(table) == [100, 102]  # the matching worker, under its trainer
        table.set_filter("no such process")
        assert pids(table) == []
        assert table.selected_process() is None
        table.set_filter("")
        assert len(pids(table)) == 6
        await pilot.pause()


@synchronously
async def test_collapsing_workers_keeps_the_count_on_the_trainer():
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)
        table.toggle_workers()
        await pilot.pause()
        assert pids(table) == [100, 300, 200]
        assert "[2 workers]" in rows(table)[0]
        table.toggle_workers()
        assert pids(table) == [100, 101, 102, 300, 200, 201]


@synchronously
async def test_hostile_names_are_shown_literally_and_never_reach_the_terminal():
    hostile = gpu(
        666,
        0,
        user="[b]mallory[/b]",
        name="x\x1b]0;owned\x07",
        cmdline="python [red]evil[/red] \x1b[2J\x1b[31mred\rnext" + " --flag" * 80,
        num_workers=3,
    )
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(snapshot(hostile))
        await pilot.pause()
        strip = table.render_line(1)
        text = strip.text
        assert "python [red]evil[/red] red?next" in text
        assert "[b]mallor…" in text
        assert text.rstrip().endswith("… [3 workers]")
        assert all("\x1b" not in seg.text and "\r" not in seg.text for seg in strip)
        for line in lines(table):
            assert cell_len(line) == table.scrollable_content_region.width


@synchronously
async def test_cursor_selection_and_enter_post_the_process():
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)
        table.focus()
        await pilot.pause()
        assert table.selected_process().pid == 100
        await pilot.press("down", "down", "enter")
        assert table.selected_process().pid == 102
        await pilot.press("end")
        assert table.selected_process().pid == 201
        await pilot.press("enter")
        await pilot.pause()
        assert [p.pid for p in app.selected] == [102, 201]
        table.sort_by("pid")
        table.sort_by("pid")
        assert table.selected_process().pid == 201  # the cursor follows the process, not the row number


@synchronously
async def test_a_click_on_a_header_sorts_by_that_column():
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)
        await pilot.pause()
        x = lines(table)[0].index("GPU MEM")
        await pilot.click(ProcessTable, offset=(x + 2, 0))
        assert table.sort_key == "memory" and table.sort_reverse
        assert pids(table)[0] == 200


@synchronously
async def test_updates_are_throttled_and_applied_at_once_after_a_view_change():
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.APPLY_INTERVAL = 3600.0
        table.update_snapshot(TRAINING)
        first = pids(table)
        table.update_snapshot(snapshot(gpu(900, 0, cmdline="newcomer")))
        await pilot.pause()
        assert pids(table) == first
        table.set_filter("")
        assert pids(table) == [900]
        assert "newcomer" in rows(table)[0]


@synchronously
async def test_rows_disappear_with_their_processes_and_the_cursor_is_clamped():
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)
        table.focus()
        await pilot.press("end")
        table.update_snapshot(snapshot(*TRAINING.processes[:3]))
        table.set_filter("")
        await pilot.pause()
        assert pids(table) == [100, 101, 102]
        assert len(rows(table)) == 3
        assert table.selected_process().pid == 102


@synchronously
async def test_many_rows_scroll_with_the_cursor():
    many = snapshot(*(gpu(1000 + i, i % 8, cmdline=f"job {i}") for i in range(100)))
    app = TableApp()
    async with app.run_test(size=(WIDTH, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(many)
        table.focus()
        await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        assert table.selected_process().pid == pids(table)[-1]
        assert any(f" {pids(table)[-1]} " in line for line in rows(table))
        await pilot.press("home")
        await pilot.pause()
        assert f" {pids(table)[0]} " in rows(table)[0]


# -- kill dialog -------------------------------------------------------------------------------


class DialogApp(App):
    """An app that opens the kill dialog for one process and records how it was dismissed."""

    def __init__(self, process: ProcessSample) -> None:
        super().__init__()
        self.process = process
        self.results: list[str | None] = []

    def on_mount(self) -> None:
        self.push_screen(KillDialog(self.process), callback=self.results.append)


@pytest.fixture
def child():
    """A real sleeping child process; killed at the end if still alive."""
    proc = subprocess.Popen(["sleep", "600"])
    yield proc
    proc.kill()
    proc.wait()


def sample_of(proc: subprocess.Popen, **fields) -> ProcessSample:
    """A ProcessSample for a running child, with its real create_time unless overridden."""
    fields.setdefault("create_time", psutil.Process(proc.pid).create_time())
    fields.setdefault("cmdline", "sleep 600")
    return ProcessSample(pid=proc.pid, device_index=0, user="tester", **fields)


@pytest.mark.parametrize("keys", [("escape",), ("tab", "tab", "enter")])
@synchronously
async def test_cancelling_the_dialog_leaves_the_process_alive(child, keys):
    app = DialogApp(sample_of(child))
    async with app.run_test() as pilot:
        await pilot.pause()
        await pilot.press(*keys)
        await pilot.pause()
        assert app.results == [None]
    assert child.poll() is None


@synchronously
async def test_confirming_sends_sigterm_by_default(child):
    app = DialogApp(sample_of(child))
    async with app.run_test() as pilot:
        await pilot.pause()
        await pilot.press("tab", "enter")
        await pilot.pause()
    assert child.wait(timeout=10) == -15
    assert len(app.results) == 1 and app.results[0].startswith(f"Sent SIGTERM to PID {child.pid}")


@synchronously
async def test_sigkill_can_be_chosen_from_the_keyboard(child):
    app = DialogApp(sample_of(child))
    async with app.run_test() as pilot:
        await pilot.pause()
        await pilot.press("down", "down", "enter", "tab", "enter")
        await pilot.pause()
    assert child.wait(timeout=10) == -9
    assert app.results[0].startswith("Sent SIGKILL")


@synchronously
async def test_a_refusal_is_the_dialog_result_and_nothing_is_signalled(child):
    app = DialogApp(sample_of(child, create_time=psutil.Process(child.pid).create_time() - 5.0))
    async with app.run_test() as pilot:
        await pilot.pause()
        await pilot.press("tab", "enter")
        await pilot.pause()
    assert "reused" in app.results[0]
    assert child.poll() is None


@synchronously
async def test_the_dialog_shows_hostile_commands_literally(child):
    app = DialogApp(sample_of(child, cmdline="sleep [red]600[/red]\x1b[2J"))
    async with app.run_test() as pilot:
        await pilot.pause()
        shown = str(app.screen.query_one("#kill-command", Static).visual)
        assert "sleep [red]600[/red]" in shown and "\x1b" not in shown
        await pilot.press("escape")
    assert child.poll() is None


@synchronously
async def test_a_narrow_terminal_drops_minor_columns_to_keep_the_command_readable():
    app = TableApp()
    async with app.run_test(size=(80, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)
        await pilot.pause()
        header = lines(table)[0]
        assert "HOST MEM" not in header and "ELAPSED" not in header
        assert "GPU MEM" in header and "CPU %" in header and "COMMAND" in header
        assert "python train.py --l" in rows(table)[0] and "[2 workers]" in rows(table)[0]
        await pilot.resize_terminal(160, HEIGHT)
        await pilot.pause()
        wide = lines(table)[0]
        assert "HOST MEM" in wide and "ELAPSED" in wide and "USER" in wide


# -- jobs ---------------------------------------------------------------------------------------


def job(number: int, kind: WorkloadKind, pids: tuple[int, ...], devices: tuple[int, ...], **fields) -> JobSample:
    """A job of ``pids`` on ``devices``."""
    return JobSample(id=number, kind=kind, evidence=f"test job {number}", pids=pids, devices=devices, **fields)


JOBS = Snapshot(
    timestamp=1_700_000_000.0,
    source=SourceKind.DEMO,
    processes=(
        gpu(500, 0, job=3, rank=0, cmdline="python -u train.py", num_workers=1),
        worker(501, 500, 0, name="pt_data_worker"),
        gpu(502, 1, job=3, rank=1, cmdline="python -u train.py"),
        gpu(600, 2, job=7, cmdline="python spawn_main.py"),
        gpu(601, 3, job=7, cmdline="python spawn_main.py"),
        gpu(700, 4, job=4, cmdline="vllm serve meta-llama/Llama-3-8B"),
        gpu(800, 5, job=5, cmdline="python -m ipykernel_launcher -f kernel.json"),
        gpu(900, 6, job=9, cmdline="python eval.py"),
        gpu(950, 7, cmdline="python no_job.py"),
    ),
    jobs=(
        job(3, WorkloadKind.TRAINING, (500, 502), (0, 1), world_size=8, launcher_pid=499),
        job(4, WorkloadKind.INFERENCE, (700,), (4,)),
        job(5, WorkloadKind.NOTEBOOK, (800,), (5,)),
        job(7, WorkloadKind.UNKNOWN, (600, 601), (2, 3)),
        job(9, WorkloadKind.TRAINING, (900,), (6,)),
    ),
)


def job_cells(table: ProcessTable) -> dict[int, str]:
    """The JOB column's text of each displayed process, by pid, read from the screen lines."""
    header = lines(table)[0]
    start, end = header.index("JOB"), header.index(" GPU MEM")  # the next column starts with its padding
    return {pid: line[start:end].strip() for pid, line in zip(pids(table), rows(table), strict=True)}


@synchronously
async def test_the_job_column_names_the_job_with_its_rank_size_or_kind():
    app = TableApp()
    async with app.run_test(size=(160, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(JOBS)
        await pilot.pause()
        assert "JOB" in lines(table)[0] and "USER" in lines(table)[0]
        assert job_cells(table) == {
            500: "job 3 · rank 0/8",  # world size from the environment, not the two local processes
            501: "",  # a DataLoader worker sits under its trainer without a job of its own
            502: "job 3 · rank 1/8",
            600: "job 7 · 2 procs",
            601: "job 7 · 2 procs",
            700: "job 4 · serving",
            800: "job 5 · notebook",
            900: "job 9",
            950: "",
        }


@synchronously
async def test_without_jobs_there_is_no_job_column():
    app = TableApp()
    async with app.run_test(size=(160, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(TRAINING)  # a recording from before jobs: none
        await pilot.pause()
        assert "JOB" not in lines(table)[0]
        table.update_snapshot(JOBS, at_once=True)
        await pilot.pause()
        assert "JOB" in lines(table)[0]
        assert "job 3 · rank 0/8" in rows(table)[0]


@synchronously
async def test_a_narrow_table_writes_jobs_compactly():
    app = TableApp()
    async with app.run_test(size=(80, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(JOBS)
        await pilot.pause()
        header = lines(table)[0]
        assert "JOB" in header and "USER" not in header and "HOST MEM" not in header
        assert job_cells(table) == {
            500: "3·0/8", 501: "", 502: "3·1/8", 600: "7·2p", 601: "7·2p",
            700: "4·srv", 800: "5·nb", 900: "9", 950: "",
        }
        assert "python -u train.py [1 worker]" in rows(table)[0]
        assert all(cell_len(line) == 80 for line in lines(table))


@synchronously
async def test_job_text_too_long_for_its_column_gives_way_to_a_shorter_form_never_a_cut():
    big = Snapshot(
        timestamp=1_700_000_000.0,
        source=SourceKind.DEMO,
        processes=(gpu(10, 0, job=123, rank=13), gpu(11, 1, job=12, rank=13)),
        jobs=(
            job(123, WorkloadKind.TRAINING, (10,), (0,), world_size=16),
            job(12, WorkloadKind.TRAINING, (11,), (1,), world_size=16),
        ),
    )
    app = TableApp()
    async with app.run_test(size=(160, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(big)
        await pilot.pause()
        assert job_cells(table) == {10: "job 123·13/16", 11: "job 12·13/16"}
        await pilot.resize_terminal(80, HEIGHT)
        await pilot.pause()
        assert job_cells(table) == {10: "123", 11: "12·13/16"}


@synchronously
async def test_ascii_mode_writes_jobs_without_the_middle_dot():
    app = TableApp(ascii_mode=True)
    async with app.run_test(size=(160, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(JOBS)
        await pilot.pause()
        assert job_cells(table)[500] == "job 3 - rank 0/8"
        await pilot.resize_terminal(80, HEIGHT)
        await pilot.pause()
        assert job_cells(table)[500] == "3:0/8"
        assert all(line.isascii() for line in lines(table))


@synchronously
async def test_sorting_by_job_orders_jobs_then_ranks_and_keeps_workers_under_their_trainer():
    app = TableApp()
    async with app.run_test(size=(160, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(JOBS)
        table.sort_by("job")
        await pilot.pause()
        assert pids(table) == [500, 501, 502, 700, 800, 600, 601, 900, 950]  # no job: last
        assert "JOB▲" in lines(table)[0]
        table.sort_by("job")
        assert pids(table) == [900, 601, 600, 800, 700, 502, 500, 501, 950]


@synchronously
async def test_a_click_on_the_job_header_sorts_by_job():
    app = TableApp()
    async with app.run_test(size=(160, HEIGHT)) as pilot:
        table = app.query_one(ProcessTable)
        table.update_snapshot(JOBS)
        await pilot.pause()
        x = lines(table)[0].index("JOB")
        await pilot.click(ProcessTable, offset=(x + 1, 0))
        assert table.sort_key == "job"


@synchronously
async def test_filtering_by_job_keeps_that_job_with_its_workers():
    app = TableApp()
    async with app.run_test(size=(160, HEIGHT)):
        table = app.query_one(ProcessTable)
        table.update_snapshot(JOBS)
        table.set_filter("job 3")
        assert pids(table) == [500, 501, 502]
        table.set_filter("JOB7")
        assert pids(table) == [600, 601]
        table.set_filter("job 31")
        assert pids(table) == []


@synchronously
async def test_at_80_columns_ranks_take_the_users_place_but_lone_jobs_leave_it():
    lone = Snapshot(
        timestamp=1_700_000_000.0,
        source=SourceKind.DEMO,
        processes=(gpu(700, 0, job=1, user="alice", cmdline="python a.py"), gpu(701, 1, job=2, user="bob", cmdline="python b.py")),
        jobs=(job(1, WorkloadKind.TRAINING, (700,), (0,)), job(2, WorkloadKind.NOTEBOOK, (701,), (1,))),
    )
    for snapshot, shown, hidden in ((lone, "USER", "JOB"), (JOBS, "JOB", "USER")):  # JOBS: a job with two ranks
        app = TableApp()
        async with app.run_test(size=(80, HEIGHT)) as pilot:
            table = app.query_one(ProcessTable)
            table.update_snapshot(snapshot)
            await pilot.pause()
            header = lines(table)[0]
            assert shown in header and hidden not in header, header  # lone jobs say no more than their users
            if snapshot is JOBS:
                assert job_cells(table)[500] == "3·0/8"
