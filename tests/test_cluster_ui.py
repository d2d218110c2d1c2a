"""The cluster view (``gpusight --cluster``) driven by a Pilot over real ClusterFrames built in code.

The app takes its data from a ``poll`` callable (``ClusterSource.poll`` in use); here it is a
:class:`Player` that hands out scripted frames, sleeping where a test needs a slow server.
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import re
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from rich.console import Console
from test_ui_app import screen_text, wait_for
from textual.pilot import Pilot
from textual.widgets import Static

from gpusight.cluster.frame import ClusterFrame, ClusterNode
from gpusight.cluster.poller import ClusterPoller, PolledFrame
from gpusight.ui.cluster.actions import CLUSTER_ACTIONS, cluster_help_rows
from gpusight.ui.cluster.app import ClusterApp
from gpusight.ui.cluster.host import ClusterHostScreen
from gpusight.ui.cluster.table import HOST_ROW, ClusterTable
from gpusight.ui.dialogs.help_screen import HelpScreen
from support.cluster_frames import URL, fleet, host_name, small_cluster, unreachable
from support.timezone import utc  # noqa: F401  (autouse: every test here runs in UTC)

SIZES = [(80, 24), (160, 45)]
REPO = Path(__file__).resolve().parent.parent


class Player:
    """A poll function handing out ``frames`` in turn (the last one again and again), ``delay`` seconds each."""

    def __init__(self, *frames: ClusterFrame, delay: float = 0.0) -> None:
        self.frames = list(frames)
        self.delay = delay
        self.focus: list[str | None] = []
        self.running = 0
        self.most_at_once = 0
        self._lock = threading.Lock()

    def __call__(self, focus_host: str | None) -> ClusterFrame:
        with self._lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
            self.focus.append(focus_host)
        time.sleep(self.delay)
        with self._lock:
            self.running -= 1
            return self.frames.pop(0) if len(self.frames) > 1 else self.frames[0]


def run(app: ClusterApp, size: tuple[int, int], body: Callable[[ClusterApp, Pilot], Awaitable[None]]) -> None:
    async def main() -> None:
        async with app.run_test(size=size) as pilot:
            await wait_for(pilot, lambda: app.frames_shown >= 1)
            await pilot.pause()
            await body(app, pilot)

    asyncio.run(main())


def table_text(app: ClusterApp) -> str:
    """Every row of the fleet table (not only the visible ones)."""
    table = app.query_one(ClusterTable)
    return "\n".join(table._row_strip(row).text for row in table._rows)


def statics_text(screen: ClusterHostScreen) -> str:
    """The text of every Static on ``screen``, scrolled out of view or not."""
    console = Console(width=200, record=True, file=io.StringIO())
    for widget in screen.query(Static):
        console.print(widget.content)
    return console.export_text()


def cursor_to(app: ClusterApp, key: tuple[str, int]) -> None:
    table = app.query_one(ClusterTable)
    table.move_cursor(next(i for i, row in enumerate(table._rows) if row.key == key))


# -- the poller -----------------------------------------------------------------------------


def test_poller_never_overlaps_a_slow_poll() -> None:
    player = Player(small_cluster(), delay=0.15)
    results: list[PolledFrame] = []
    poller = ClusterPoller(player, URL, 0.01, results.append)
    poller.start()
    deadline = time.monotonic() + 10
    while len(results) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    poller.stop()
    assert len(results) >= 4
    assert player.most_at_once == 1
    assert all(result.seconds >= 0.15 > poller.interval for result in results)


def test_poller_turns_a_raising_poll_into_a_problem_line() -> None:
    def broken(focus_host: str | None) -> ClusterFrame:
        raise RuntimeError("boom")

    results: list[PolledFrame] = []
    poller = ClusterPoller(broken, URL, 3600, results.append)
    poller.start()
    deadline = time.monotonic() + 10
    while not results and time.monotonic() < deadline:
        time.sleep(0.01)
    poller.stop()
    assert results[0].frame.problems == ("poll failed: RuntimeError: boom",)
    assert results[0].frame.url == URL


def test_poller_paused_does_not_poll_and_resumes_at_once() -> None:
    player = Player(small_cluster())
    results: list[PolledFrame] = []
    poller = ClusterPoller(player, URL, 3600, results.append)
    poller.set_paused(True)
    poller.start()
    time.sleep(0.3)
    assert results == []
    poller.focus_host = "node-002"
    poller.set_paused(False)
    deadline = time.monotonic() + 10
    while not results and time.monotonic() < deadline:
        time.sleep(0.01)
    poller.stop()
    assert [r.focus_host for r in results] == ["node-002"]
    assert player.focus == ["node-002"]


# -- the fleet screen -----------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_fleet_screen_shows_every_node_and_what_is_wrong(size: tuple[int, int]) -> None:
    async def body(app: ClusterApp, pilot: Pilot) -> None:
        rows = table_text(app)
        for number in (1, 2, 3, 4):
            assert host_name(number) in rows
        assert "DOWN" in rows and "down since 14:12:50 (3 scrapes missed)" in rows
        assert "dcgm only" in rows
        assert "8 GPUs, 2 free" in rows
        assert app.query_one(ClusterTable).row_count == 4 + 32
        text = screen_text(app)
        assert "! node-003 stopped reporting: 3 scrapes missed" in text
        assert "processes, jobs, advice, host CPU: none from 1 node" in text
        assert "last poll 22:13:20 · queries 0.21 s" in text
        assert "4 nodes (1 down)" in text
        if size[0] >= 120:
            assert "Straggler: node-002 is" in text
            assert "node advice: 1 WARN, 1 INFO on 2 hosts" in text
        else:
            assert "1 WARN" in text and "1 INFO" in text

    run(ClusterApp(Player(small_cluster()), URL, interval=3600), size, body)


def test_down_node_rows_are_dimmed() -> None:
    async def body(app: ClusterApp, pilot: Pilot) -> None:
        table = app.query_one(ClusterTable)
        down = next(row for row in table._rows if row.key == (host_name(3), 0))
        up = next(row for row in table._rows if row.key == (host_name(1), 0))
        assert down.down and not up.down
        dim = table._row_strip(down)
        assert any(seg.style is not None and seg.style.dim for seg in dim)
        assert not any(seg.style is not None and seg.style.dim for seg in table._row_strip(up))

    run(ClusterApp(Player(small_cluster()), URL, interval=3600), (160, 45), body)


def test_hostile_names_are_escaped() -> None:
    frame = small_cluster()
    evil = ClusterNode(host="evil[red]\x1b[2Jhost", instances=("x",), up=False, exporter="dcgm", note="bad\x07[b]note")
    frame = dataclasses.replace(frame, nodes=(*frame.nodes, evil), problems=("scrape of [bold]x\x1b[31m failed",))

    async def body(app: ClusterApp, pilot: Pilot) -> None:
        text = screen_text(app) + table_text(app)
        assert "\x1b" not in text and "\x07" not in text
        assert "evil[red]" in text and "[b]note" in text
        assert "scrape of [bold]x" in text

    run(ClusterApp(Player(frame), URL, interval=3600), (160, 45), body)


def test_unreachable_server_at_start_then_recovers() -> None:
    player = Player(unreachable(), small_cluster())

    async def body(app: ClusterApp, pilot: Pilot) -> None:
        assert "unreachable: connection refused" in screen_text(app)
        assert app.query_one(ClusterTable).row_count == 0
        app.poller.wake()
        await wait_for(pilot, lambda: app.frames_shown >= 2)
        await pilot.pause()
        assert "unreachable" not in screen_text(app)
        assert app.query_one(ClusterTable).row_count == 36

    run(ClusterApp(player, URL, interval=3600), (80, 24), body)


def test_slow_poll_is_named_and_polls_never_overlap() -> None:
    player = Player(small_cluster(), delay=0.3)

    async def body(app: ClusterApp, pilot: Pilot) -> None:
        await wait_for(pilot, lambda: app.frames_shown >= 3)
        await pilot.pause()
        assert "(slower than the 0.1 s interval)" in screen_text(app)
        took = re.search(r"poll took (\d+(?:\.\d)?) s", screen_text(app))
        assert took is not None and float(took.group(1)) >= 0.3  # the delay, and more on a loaded machine
        assert player.most_at_once == 1

    run(ClusterApp(player, URL, interval=0.1), (160, 45), body)


# -- keys -----------------------------------------------------------------------------------


def test_pause_stops_polling_and_says_so() -> None:
    async def body(app: ClusterApp, pilot: Pilot) -> None:
        await pilot.press("p")
        await pilot.pause()
        assert app.poller.paused and "PAUSED" in screen_text(app).split("\n", 1)[0]
        polls = app.poller.polls
        await pilot.pause(0.3)
        assert app.poller.polls <= polls + 1  # at most the poll under way when p was pressed
        await pilot.press("p")
        await pilot.pause()
        assert not app.poller.paused and "PAUSED" not in screen_text(app)

    run(ClusterApp(Player(small_cluster()), URL, interval=0.05), (80, 24), body)


def test_filter_fold_and_sort() -> None:
    async def body(app: ClusterApp, pilot: Pilot) -> None:
        table = app.query_one(ClusterTable)
        await pilot.press("slash", "0", "0", "4")
        await pilot.pause()
        assert table.row_count == 9 and table.selected_host() == host_name(4)
        await pilot.press("enter")  # keeps the filter, back to the table
        assert app.focused is table and table.filter_text == "004"
        await pilot.press("escape")
        await pilot.pause()
        assert table.row_count == 36 and table.filter_text == ""
        await pilot.press("home", "c")
        assert table.is_collapsed(host_name(1)) and table.row_count == 28
        await pilot.press("space")
        assert not table.is_collapsed(host_name(1))
        await pilot.press("x")
        assert table.row_count == 4
        await pilot.press("x")
        assert table.row_count == 36
        await pilot.press("u")
        hosts = [row.host for row in table._rows if row.key[1] == HOST_ROW]
        assert (table.sort_key, table.sort_reverse) == ("util", True)
        busiest = sorted(small_cluster().nodes, key=lambda n: -sum(g.utilization_percent or 0 for g in n.gpus))
        assert hosts == [node.host for node in busiest]
        await pilot.press("n")
        assert [row.host for row in table._rows if row.key[1] == HOST_ROW] == [host_name(n) for n in (1, 2, 3, 4)]
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert "fold / unfold the host under the cursor" in screen_text(app)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("q")
        await pilot.pause()
        assert app.return_code == 0

    run(ClusterApp(Player(small_cluster()), URL, interval=3600), (160, 45), body)


# -- the host screen ------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_enter_drills_into_a_host_and_esc_comes_back(size: tuple[int, int]) -> None:
    player = Player(small_cluster())

    async def body(app: ClusterApp, pilot: Pilot) -> None:
        cursor_to(app, (host_name(2), 5))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ClusterHostScreen) and app.screen.shown_frame is not None)
        await wait_for(pilot, lambda: host_name(2) in player.focus)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ClusterHostScreen) and screen.host == host_name(2)
        text = statics_text(screen)
        assert "pod serving/vllm-0" in text and "slurm 4242" in text
        assert "vllm [red]serve[/]" in text and "\x1b" not in text
        assert "slurm:4242" in text and "Idle GPU holding memory" in text
        speed = next(line for line in text.splitlines() if "slurm:4242" in line and "steps/s" in line)
        assert "1.1 steps/s" in speed and "577k tokens/s" in speed  # this node's
        assert "40% MFU (2/2 nodes)" in speed  # the job's across both nodes: (3.3 + 3.0) / (2 x 8 x 0.989) PFLOP/s
        wide = size[0] >= 120  # kind, world size and GPU memory make way for the speed on narrow terminals
        assert ("inference" in text, "WORLD" in text) == (wide, wide)
        charts = screen_text(app)
        assert "util 0-100%" in charts and "GPU 7" in charts
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, ClusterHostScreen)
        assert app.poller.focus_host is None

    run(ClusterApp(player, URL, interval=3600), size, body)


def test_dcgm_only_host_says_which_panels_need_the_gpusight_exporter() -> None:
    async def body(app: ClusterApp, pilot: Pilot) -> None:
        cursor_to(app, (host_name(4), HOST_ROW))
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ClusterHostScreen) and app.screen.shown_frame is not None)
        await pilot.pause()
        text = screen_text(app)
        assert "Processes, jobs and advice need gpusight --serve on this node" in text
        assert "dcgm-exporter only" in text
        assert "Jobs" not in text

    run(ClusterApp(Player(small_cluster()), URL, interval=3600), (160, 45), body)


# -- a fleet of 800 GPUs --------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_800_gpus_update_only_the_rows_on_screen(size: tuple[int, int]) -> None:
    frames = [fleet(step=step) for step in range(3)]

    async def body(app: ClusterApp, pilot: Pilot) -> None:
        table = app.query_one(ClusterTable)
        assert table.row_count == 900
        await pilot.pause()
        before = table.rows_rendered
        for frame in frames[1:]:
            app.apply(PolledFrame(frame, 0.5, None, time.monotonic()))
            await pilot.pause()
        rendered = table.rows_rendered - before
        visible = table.scrollable_content_region.height
        assert 0 < rendered <= 2 * visible  # the changed rows on screen, never all 900
        await pilot.press("end")
        await pilot.pause()
        assert table.selected_key() == (host_name(100), 7)
        assert host_name(100) in screen_text(app)

    run(ClusterApp(Player(frames[0]), URL, interval=3600), size, body)


@pytest.mark.parametrize("size", [(20, 5), (1, 1), (40, 10)])
def test_tiny_terminals_do_not_crash(size: tuple[int, int]) -> None:
    async def body(app: ClusterApp, pilot: Pilot) -> None:
        await pilot.press("enter")
        await pilot.pause()
        await pilot.resize_terminal(10, 3)
        await pilot.pause()
        await pilot.press("escape", "x", "slash", "a")
        await pilot.pause()
        assert app.is_running

    run(ClusterApp(Player(small_cluster()), URL, interval=3600), size, body)


# -- snapshots ------------------------------------------------------------------------------


async def settle(pilot: Pilot) -> None:
    app = pilot.app
    assert isinstance(app, ClusterApp)
    await wait_for(pilot, lambda: app.frames_shown >= 1)
    await pilot.pause()


async def open_host(pilot: Pilot, key: tuple[str, int]) -> None:
    await settle(pilot)
    app = pilot.app
    assert isinstance(app, ClusterApp)
    cursor_to(app, key)
    await pilot.press("enter")
    await wait_for(pilot, lambda: isinstance(app.screen, ClusterHostScreen) and app.screen.shown_frame is not None)
    await pilot.pause()


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_fleet(snap_compare, size: tuple[int, int]) -> None:
    assert snap_compare(ClusterApp(Player(small_cluster()), URL, interval=3600), terminal_size=size, run_before=settle)


@pytest.mark.parametrize("size", SIZES)
def test_snapshot_host(snap_compare, size: tuple[int, int]) -> None:
    async def before(pilot: Pilot) -> None:
        await open_host(pilot, (host_name(2), HOST_ROW))

    assert snap_compare(ClusterApp(Player(small_cluster()), URL, interval=3600), terminal_size=size, run_before=before)


def test_snapshot_dcgm_host(snap_compare) -> None:
    async def before(pilot: Pilot) -> None:
        await open_host(pilot, (host_name(4), HOST_ROW))

    assert snap_compare(ClusterApp(Player(small_cluster()), URL, interval=3600), terminal_size=(80, 24), run_before=before)


def test_snapshot_800_gpus(snap_compare) -> None:
    assert snap_compare(ClusterApp(Player(fleet()), URL, interval=3600), terminal_size=(160, 45), run_before=settle)


def test_snapshot_unreachable(snap_compare) -> None:
    assert snap_compare(ClusterApp(Player(unreachable()), URL, interval=3600), terminal_size=(80, 24), run_before=settle)


# -- the actions table ----------------------------------------------------------------------


def test_every_cluster_action_has_its_method_and_one_set_of_keys() -> None:
    keys = [key for entry in CLUSTER_ACTIONS for key in entry.keys.split(",")]
    assert len(keys) == len(set(keys))
    for entry in CLUSTER_ACTIONS:
        assert callable(getattr(ClusterApp, f"action_{entry.name}", None)), entry.name


def test_docs_list_every_key_as_the_help_screen_does() -> None:
    text = (REPO / "docs" / "cluster.md").read_text(encoding="utf-8")
    for keys, description in cluster_help_rows():
        assert f"| {keys} | {description} |" in text


def test_ascii_mode_draws_no_box_or_block_characters() -> None:
    async def body(app: ClusterApp, pilot: Pilot) -> None:
        text = screen_text(app)
        for glyph in ("│", "·", "▾", "▸", "█", "▁"):
            assert glyph not in text.split("\n", 1)[0] + table_text(app), glyph
        assert "|" in text and "v node-001" in text

    run(ClusterApp(Player(small_cluster()), URL, interval=3600, ascii_mode=True), (160, 45), body)
