"""The cluster view (``gpusight --cluster URL``): every node and GPU a Prometheus server knows, and the fleet's advice.

The app is thin: it draws what each :class:`~gpusight.cluster.frame.ClusterFrame` says. A
:class:`~gpusight.cluster.poller.ClusterPoller` calls ``poll`` on its own thread, one call at a time, and
posts one coalescing :class:`ClusterFrameReady` per poll; the widgets update from that immutable frame
on the UI thread. The screen: a header line, the fleet table (a row per host, a compact row per GPU),
the fleet advice (beside the table on wide terminals, one line on narrow ones), the host filter, a
status block (the server's problems, panels that need ``gpusight --serve``, poll age and cost) and the
footer. Enter opens a host (:class:`~gpusight.ui.cluster.host.ClusterHostScreen`); the next polls then
fetch that host's histories.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path, PurePath
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from gpusight import old_name
from gpusight.cluster.counts import FleetCounts
from gpusight.cluster.frame import ClusterFrame
from gpusight.cluster.poller import ClusterPoller, Poll, PolledFrame
from gpusight.textsafe import safe_text
from gpusight.ui import STYLESHEET
from gpusight.ui.cluster.actions import CLUSTER_ACTIONS, cluster_help_rows
from gpusight.ui.cluster.advice import AdviceText, fleet_lead
from gpusight.ui.cluster.host import ClusterHostScreen
from gpusight.ui.cluster.table import ClusterTable
from gpusight.ui.cluster.text import missing_panels_line, poll_line
from gpusight.ui.dialogs.help_screen import HelpScreen
from gpusight.ui.terminal.guard import TerminalGuardedApp
from gpusight.ui.terminal.partial_output import activate as activate_partial_output

if TYPE_CHECKING:
    import argparse

DEFAULT_CLUSTER_INTERVAL = 2.0
"""Seconds between polls of the Prometheus server unless ``--interval`` says otherwise."""

WIDE_MIN_COLUMNS = 120
"""Terminals at least this wide show the fleet advice beside the table."""

ADVICE_WIDTH = 44
"""Columns of the fleet advice panel beside the table."""

ADVICE_BELOW_LINES = 8
"""Lines of the fleet advice panel when it is opened below the table on a narrow terminal."""

STATUS_MAX_PROBLEMS = 3
"""Problem lines shown before the rest are counted."""

STATS_FILE_ENV = "GPUSIGHT_STATS_FILE"
"""Environment variable naming a file where the cluster view writes JSON statistics on exit (for benchmarks)."""

LATENCIES_KEPT = 1000
"""Poll-to-screen times kept for the statistics."""


class ClusterFrameReady(Message):
    """A poll finished; a newer one replaces a stale one still waiting in the queue."""

    def __init__(self, polled: PolledFrame) -> None:
        super().__init__()
        self.polled = polled
        """The frame and how its poll went."""

    def can_replace(self, message: Message) -> bool:
        """True when ``message`` is an older frame, so only the newest is applied."""
        return isinstance(message, ClusterFrameReady)


class ClusterApp(TerminalGuardedApp):
    """The cluster view over ``poll`` (see :data:`gpusight.cluster.poller.Poll`), polled every ``interval`` seconds."""

    CSS_PATH: ClassVar[list[str | PurePath]] = [STYLESHEET, "cluster.tcss"]
    TITLE = "gpusight cluster"
    AUTO_FOCUS = "#fleet"
    BINDINGS: ClassVar[list[BindingType]] = [entry.binding() for entry in CLUSTER_ACTIONS]

    def __init__(self, poll: Poll, url: str, *, interval: float = DEFAULT_CLUSTER_INTERVAL, ascii_mode: bool = False) -> None:
        super().__init__()
        activate_partial_output()
        self.url = url
        """The Prometheus server's URL (shown: give it without credentials)."""
        self.ascii_mode = ascii_mode
        """Draw with ASCII only."""
        self.poller = ClusterPoller(poll, url, interval, self._deliver)
        """Calls ``poll`` on its own thread."""
        self.frame: ClusterFrame | None = None
        """The frame on screen."""
        self.polled: PolledFrame | None = None
        """The poll that made it."""
        self.frames_shown = 0
        """Frames drawn since start."""
        self.poll_to_screen: list[float] = []
        """Seconds from each poll's return to the screen refresh that showed it (the newest LATENCIES_KEPT)."""
        self._shown_at: float | None = None
        self._advice_open: bool | None = None
        self._header = Static(Text(""), id="header")
        self._table = ClusterTable(ascii_mode=ascii_mode, id="fleet")
        self._advice = AdviceText(ascii_mode=ascii_mode, id="fleet-advice")
        self._advice_box = VerticalScroll(self._advice, id="fleet-advice-box")
        self._summary = AdviceText(id="fleet-summary")
        self._filter = Input(placeholder="filter hosts by name or GPU model (Enter keeps it, Esc clears it)", id="host-filter")
        self._status = Static(Text(""), id="status")
        self._status_text = ""
        self._footer = Footer()

    # -- building ---------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """Header, fleet table | advice, filter, advice summary, status, footer."""
        yield self._header
        with Horizontal(id="cluster-body"):
            yield self._table
            yield self._advice_box
        yield self._filter
        yield self._summary
        yield self._status
        yield self._footer

    def on_mount(self) -> None:
        """Lay out, start polling (the first poll at once) and tick the poll age once a second."""
        self._filter.display = False
        self._advice_box.border_title = "Fleet advice"
        self._relayout()
        self._show_header()
        self._show_status()
        self._table.focus()
        self.poller.start()
        self.set_interval(1.0, self._show_status)
        self._install_terminal_guards()

    def on_unmount(self) -> None:
        """Stop polling and watching the terminal."""
        self.poller.stop()
        self._remove_terminal_guards()

    def on_resize(self) -> None:
        """Re-place the advice for the new width."""
        self._relayout()

    def _advice_place(self) -> str:
        """``beside`` the table, ``below`` it, or ``summary`` (one line)."""
        wide = self.size.width >= WIDE_MIN_COLUMNS
        open_ = self._advice_open if self._advice_open is not None else wide
        if not open_:
            return "summary"
        return "beside" if wide else "below"

    def _relayout(self) -> None:
        place = self._advice_place()
        body = self.query_one("#cluster-body", Horizontal)
        body.styles.layout = "vertical" if place == "below" else "horizontal"
        self._advice_box.display = place != "summary"
        self._advice_box.styles.width = ADVICE_WIDTH if place == "beside" else "1fr"
        self._advice_box.styles.height = ADVICE_BELOW_LINES if place == "below" else "1fr"
        self._summary.display = place == "summary"
        self._footer.compact = self.size.width < WIDE_MIN_COLUMNS
        if self.frame is not None:
            self._show_advice(self.frame)

    # -- frames -----------------------------------------------------------------------------

    def _deliver(self, polled: PolledFrame) -> None:
        """Poller-thread callback: hand the frame to the UI thread (newest wins)."""
        self.post_message(ClusterFrameReady(polled))

    def on_cluster_frame_ready(self, message: ClusterFrameReady) -> None:
        """Show a new frame unless paused."""
        if self.poller.paused:
            return
        self.apply(message.polled)

    def apply(self, polled: PolledFrame) -> None:
        """Draw ``polled``'s frame everywhere it shows."""
        frame = polled.frame
        self.frame, self.polled, self._shown_at = frame, polled, time.time()
        self.frames_shown += 1
        self._table.show(frame)
        self._show_advice(frame)
        self._show_header()
        self._show_status()
        screen = self.screen
        if isinstance(screen, ClusterHostScreen):
            screen.show(frame)
        self.call_after_refresh(self._note_shown, polled.finished_at)

    def _note_shown(self, finished_at: float) -> None:
        self.poll_to_screen.append(time.monotonic() - finished_at)
        del self.poll_to_screen[:-LATENCIES_KEPT]

    def _show_advice(self, frame: ClusterFrame) -> None:
        lead = fleet_lead(frame)
        if self._summary.display:
            self._summary.show(frame.fleet_advice, lead, summary=True)
        else:
            self._advice.show(frame.fleet_advice, lead)
            count = len(frame.fleet_advice)
            self._advice_box.border_title = f"Fleet advice ({count})" if count else "Fleet advice"

    def _show_header(self) -> None:
        frame = self.frame
        bar, dot = (" | ", " - ") if self.ascii_mode else (" │ ", " · ")
        text = Text()
        text.append(" gpusight cluster ", style="bold reverse")
        if self.poller.paused:  # first, so a narrow terminal never cuts it off
            text.append(" PAUSED ", style="bold reverse red")
        if frame is not None:  # the counts before the URL, so that a narrow terminal cuts the URL, not them
            nodes, down, gpus, free = FleetCounts.of(frame).parts()
            text.append(f" {nodes}")
            text.append(down, style="bold red")
            text.append(f"{dot}{gpus}{dot}{free}{bar}")
        else:
            text.append(" ")
        text.append(safe_text(self.url, 60))
        text.append(f"{bar}every {self.poller.interval:g}s")
        if frame is not None:
            text.append(f"{bar}{time.strftime('%H:%M:%S', time.localtime(frame.timestamp))}")
        self._header.update(text)

    def _show_status(self) -> None:
        """The problems, the panels that need gpusight --serve, and the poll's age and cost."""
        frame = self.frame
        text = Text()
        problems = () if frame is None else frame.problems
        for problem in problems[:STATUS_MAX_PROBLEMS]:
            text.append("! ", style="bold red")
            text.append(safe_text(problem, 300) + "\n", style="yellow")
        if len(problems) > STATUS_MAX_PROBLEMS:
            text.append(f"! and {len(problems) - STATUS_MAX_PROBLEMS} more problems\n", style="yellow")
        missing = None if frame is None else missing_panels_line(frame)
        if missing:
            text.append(missing + "\n", style="italic")
        seconds = None if self.polled is None else self.polled.seconds
        text.append(poll_line(frame, seconds, self.poller.interval, self._shown_at), style="dim")
        if self.poller.paused:
            text.append(" · paused (p resumes)", style="bold")
        if text.plain != self._status_text:
            self._status_text = text.plain
            self._status.update(text)

    # -- actions ----------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Fleet-table actions only on the fleet screen; Esc only where there is something to close."""
        on_fleet = not isinstance(self.screen, ClusterHostScreen)
        if action in ("drill", "filter", "collapse", "collapse_all", "sort", "toggle_advice"):
            return on_fleet
        if action == "leave":
            return not on_fleet or self._filter.display
        return True

    def action_pause(self) -> None:
        """Pause or resume polling."""
        self.poller.set_paused(not self.poller.paused)
        self._show_header()
        self._show_status()

    def action_drill(self) -> None:
        """Open the host under the cursor; the next polls fetch its histories."""
        host = self._table.selected_host()
        if host is None:
            self.notify("No host to open yet.", severity="warning")
            return
        screen = ClusterHostScreen(host, ascii_mode=self.ascii_mode)
        self.push_screen(screen)
        self.poller.focus_host = host
        self.poller.wake()
        if self.frame is not None:
            self.call_after_refresh(screen.show, self.frame)

    def action_leave(self) -> None:
        """Back to the fleet from a host; otherwise close the host filter."""
        if isinstance(self.screen, ClusterHostScreen):
            self.pop_screen()
            self.poller.focus_host = None
        elif self._filter.display:
            self._filter.value = ""
            self._filter.display = False
            self._table.set_filter("")
            self.set_focus(self._table)
        self.refresh_bindings()

    def action_filter(self) -> None:
        """Open the host filter."""
        self._filter.display = True
        self.set_focus(self._filter)  # at once: the keys typed right after / go to the filter, not to the actions
        self.refresh_bindings()

    def on_input_changed(self, event: Input.Changed) -> None:
        """Filter the hosts as the user types."""
        if event.input is self._filter:
            self._table.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter keeps the filter and returns to the table (an empty filter closes)."""
        if event.input is self._filter:
            if event.value:
                self.set_focus(self._table)
            else:
                self.action_leave()

    def action_collapse(self) -> None:
        """Fold or unfold the host under the cursor."""
        self._table.toggle_host()

    def action_collapse_all(self) -> None:
        """Fold every host, or unfold them all."""
        self._table.toggle_all()

    def action_sort(self, key: str) -> None:
        """Order the hosts by ``key`` (again to reverse)."""
        self._table.sort_by(key)

    def action_toggle_advice(self) -> None:
        """Show or hide the fleet advice panel."""
        self._advice_open = self._advice_place() == "summary"
        self._relayout()

    def action_help(self) -> None:
        """Show every key."""
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(cluster_help_rows()))

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The command palette: every cluster action once, then Textual's commands that none of them replaces."""
        ours = [entry for entry in CLUSTER_ACTIONS if entry.palette]
        for entry in ours:
            yield SystemCommand(entry.title, entry.describe(""), partial(self.run_action, entry.action))
        titles = {entry.title for entry in ours}
        yield from (command for command in super().get_system_commands(screen) if command.title not in titles)

    # -- statistics -------------------------------------------------------------------------

    def stats(self) -> dict[str, object]:
        """Polls, frames shown and poll-to-screen times, for benchmarks (see STATS_FILE_ENV)."""
        return {
            "interval_s": self.poller.interval,
            "polls": self.poller.polls,
            "frames_shown": self.frames_shown,
            "last_poll_s": None if self.polled is None else self.polled.seconds,
            "poll_to_screen_s": self.poll_to_screen,
            "rows_rendered": self._table.rows_rendered,
        }


def run_tui(args: argparse.Namespace) -> int:
    """``gpusight --cluster URL`` on a terminal: run the cluster view until the user quits; returns the exit status."""
    from gpusight.cluster.command import source_from_args

    source = source_from_args(args)
    interval = args.interval if args.interval is not None else DEFAULT_CLUSTER_INTERVAL
    app = ClusterApp(source.poll, source.url, interval=interval, ascii_mode=args.ascii)  # the URL without credentials
    app.run()
    stats_path = old_name.environment_value(STATS_FILE_ENV)
    if stats_path:
        Path(stats_path).write_text(json.dumps(app.stats(), indent=2) + "\n", encoding="utf-8")
    return app.return_code or 0
