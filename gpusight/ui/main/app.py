"""The gpusight Textual application: header, GPU panels, host panel, process table and advice panel.

The sampler polls on its own thread and posts one coalescing :class:`FrameReady` message per
poll; the app draws the newest frame at most about once per refresh period (``--refresh``, never
shorter than the interval; see :mod:`gpusight.ui.terminal.draw_pacing`), and at once after a key, a resize or
a replay seek. Every widget updates from that immutable frame on the main thread and none of them
calls NVML or psutil or reads the sampler's history; the chart columns hold every poll's maximum, so
a poll that is not drawn still shows in the charts. Every panel is registered once
(:mod:`~gpusight.ui.main.registry`) and drawn through one interface (:mod:`~gpusight.ui.main.panel`). GPU panels
are mounted once (again only when the set of GPUs changes) and the layout adapts to the terminal: full charts when
there is room, two lines or one per GPU when there is not. The advice panel takes no room while it has nothing to
say (a one-line summary says so), sits beside a few GPUs, below many, and folds into the summary
line on narrow terminals.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from functools import partial
from pathlib import Path
from typing import ClassVar, TypeVar

from textual import work
from textual.app import ComposeResult, SystemCommand
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.geometry import Size
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget
from textual.widgets import Input

from gpusight.advice.rules.healthy import is_all_clear
from gpusight.sampling.filters import current_user_filter
from gpusight.sampling.frame import Frame
from gpusight.sampling.sampler import Sampler
from gpusight.sampling.steering import ChangeSpeed, Command, SeekBy, SeekEvent, SeekTo, TogglePause
from gpusight.snapshot.model import ProcessSample, Snapshot, SourceKind
from gpusight.textsafe import safe_text
from gpusight.ui import STYLESHEET
from gpusight.ui.actions import ACTIONS, READONLY_DISABLED, REPLAY_ONLY, help_rows, palette_actions, palette_help
from gpusight.ui.detail.gpu_detail import GpuDetailScreen
from gpusight.ui.detail.process_detail import ProcessDetailScreen
from gpusight.ui.dialogs.goto_dialog import GoToDialog
from gpusight.ui.dialogs.help_screen import HelpScreen
from gpusight.ui.main.advice_panel import AdvicePanel
from gpusight.ui.main.gpu_panel import MODE_LINE, GpuArea, GpuPanel, choose_layout
from gpusight.ui.main.header import HeaderBar
from gpusight.ui.main.host_panel import HostPanel, host_height
from gpusight.ui.main.panel import FramePanel, PanelContext, PanelEntry, PanelOptions, Place
from gpusight.ui.main.playback_bar import PlaybackBar
from gpusight.ui.main.process_table import ProcessTable
from gpusight.ui.main.registry import MAIN_PANELS
from gpusight.ui.main.screen import MainScreen
from gpusight.ui.messages import FrameReady
from gpusight.ui.terminal.draw_pacing import DEFAULT_REFRESH, DrawPacer
from gpusight.ui.terminal.guard import TerminalGuardedApp
from gpusight.ui.terminal.partial_output import activate as activate_partial_output
from gpusight.ui.widgets.chart_choice import ChartChoice
from gpusight.ui.widgets.footer import FittingFooter

WIDE_MIN_COLUMNS = 120
"""Terminals at least this wide show the advice panel beside the GPUs by default."""

ADVICE_BESIDE_MAX_GPUS = 2
"""With more GPUs than this, open advice sits below them, so their charts keep the full width."""

ADVICE_BELOW_MAX_LINES = 8
"""Most lines the advice panel takes below the GPUs (it scrolls beyond)."""

MAX_INTERVAL = 60.0
"""Longest polling period the ``+`` key goes to, in seconds."""

SIGNALS_LIVE_ONLY = "k: signals go only to live processes; these are {what}, so there is nothing to signal."
"""Why ``k`` does nothing in the demo and in a replay (``{what}`` names the data)."""

CHART_METRIC_LINE_ONLY = "v: picks the chart of the one-line GPU layout (narrow or short terminals); every chart shows here."
"""Why ``v`` does nothing while the GPUs have room for all their charts."""

PanelT = TypeVar("PanelT", bound=Widget)
"""A registered panel's class, for :meth:`GpusightApp._panel`."""


class Body(Horizontal):
    """The area between the header and the footer; posts :class:`BodyResized` when its size changes."""

    def on_resize(self) -> None:
        """Tell the app (which gets no resize event after the first) that the layout may need redoing."""
        self.post_message(BodyResized())


class BodyResized(Message):
    """The body changed size, usually because the terminal did."""


class GpusightApp(TerminalGuardedApp):
    """The live monitor. Runs ``sampler`` while mounted and stops it on exit."""

    CSS_PATH = STYLESHEET
    TITLE = "gpusight"
    AUTO_FOCUS = "#processes"
    """Focus the process table from the start (one focus change, so the footer is built once)."""

    BINDINGS: ClassVar[list[BindingType]] = [entry.binding() for entry in ACTIONS]

    PANELS: ClassVar[tuple[PanelEntry, ...]] = MAIN_PANELS
    """The panels drawn from each frame, in drawing order (see :mod:`~gpusight.ui.main.registry`)."""

    def __init__(
        self,
        sampler: Sampler,
        *,
        readonly: bool = False,
        ascii_mode: bool = False,
        export_dir: Path = Path("gpusight-snapshots"),
        live: bool = True,
        paged_charts: bool = True,
        refresh: float = DEFAULT_REFRESH,
    ) -> None:
        super().__init__()
        activate_partial_output()
        self.sampler = sampler
        """Source of snapshots; started on mount, stopped on exit."""
        self.live = live
        """False to show only the sampler's newest snapshot without polling (for rendering an export)."""
        self.readonly = readonly
        """Disable sending signals."""
        self.ascii_mode = ascii_mode
        """Draw charts, bars and borders with ASCII only."""
        self.export_dir = export_dir
        """Where ``s`` writes snapshot exports."""
        self.replaying = sampler.steerable
        """True when the sampler plays a recording, steered through it by the replay keys; False for live and demo."""
        self.frame: Frame | None = None
        """The frame on screen."""
        self.snapshots_applied = 0
        """How many snapshots have been shown since start."""
        self.first_frame_at: float | None = None
        """Wall-clock time (``time.time()``) of the first screen refresh that showed sampled data."""
        self._pacer = DrawPacer(refresh)
        self._held: Frame | None = None
        self._draw_timer: Timer | None = None
        self._advice_open: bool | None = None
        self._has_advice = False
        self._laid_out_for = Size(0, 0)
        self._advice_shown = False
        self._gpu_count = 0
        self._core_count = -1
        options = PanelOptions(ascii_mode=ascii_mode, refresh=refresh, paged_charts=paged_charts)
        self._panels: list[FramePanel] = []
        self._placed: list[tuple[Place, Widget]] = []
        for entry in self.PANELS:
            panel = entry.make(options)
            if not isinstance(panel, Widget):
                raise TypeError(f"a panel must be a widget: {panel!r}")
            self._panels.append(panel)
            self._placed.append((entry.place, panel))
        self._header = self._panel(HeaderBar)
        self._gpus = self._panel(GpuArea)
        self._host = self._panel(HostPanel)
        self._processes = self._panel(ProcessTable)
        self._advice = self._panel(AdvicePanel)
        self._bar = self._panel(PlaybackBar)
        self._filter = Input(placeholder="filter processes: pid, user, name, command or job 3", id="filter")
        self._footer = FittingFooter()
        self._offered: tuple[str | None, ...] = ()

    # -- building and layout ------------------------------------------------------------------

    def get_default_screen(self) -> Screen[None]:
        """The screen the monitor starts on: Textual's default, styled once at start (see MainScreen)."""
        return MainScreen()

    def _panel(self, kind: type[PanelT]) -> PanelT:
        """The registered panel of class ``kind`` (the app steers some panels besides drawing them)."""
        return next(panel for _, panel in self._placed if isinstance(panel, kind))

    def _placed_in(self, place: Place) -> list[Widget]:
        """The registered panels of ``place``, in registration order."""
        return [panel for where, panel in self._placed if where is place]

    def compose(self) -> ComposeResult:
        """Each area's registered panels: the header on top, the body (GPUs and host, the process filter, processes |
        advice), then the advice summary and the playback bar above the footer."""
        yield from self._placed_in(Place.TOP)
        with Body(id="body"):
            with Vertical(id="main"):
                yield from self._placed_in(Place.MAIN)
                yield self._filter
                yield from self._placed_in(Place.TABLE)
            yield from self._placed_in(Place.SIDE)
        yield from self._placed_in(Place.BOTTOM)
        self._footer.compact = self.size.width < WIDE_MIN_COLUMNS
        yield self._footer

    async def on_mount(self) -> None:
        """Apply styles, show the newest known snapshot, subscribe to the sampler and start it."""
        self.set_class(self.ascii_mode, "-ascii")
        self._filter.display = False
        self._bar.display = self.replaying
        if self.replaying:
            self.sampler.prepare_steering()
        self._advice.border_title = "Advice"
        self._processes.border_title = "Processes"
        self._header.show_filters(self.sampler.filters.describe())
        self._header.show(None, self.sampler.interval, self.sampler.paused)
        latest = self.sampler.latest_frame
        if latest is not None:
            await self._draw(latest)
        self._relayout()
        self._processes.focus()
        if self.live:
            self.sampler.subscribe(self._on_sampler_snapshot)
            self.sampler.start()
        self._install_terminal_guards()

    def on_unmount(self) -> None:
        """Stop polling, the watchdog and a held frame's timer."""
        self._remove_terminal_guards()
        self._held = None
        if self._draw_timer is not None:
            self._draw_timer.stop()
            self._draw_timer = None
        if self.live:
            self.sampler.stop()

    def on_resize(self) -> None:
        """Pick the layout for the first size (Textual sends later sizes to the screen only)."""
        self._relayout()

    async def on_body_resized(self) -> None:
        """The terminal changed size: draw the newest frame and re-pick the layout unless it was made for this size."""
        await self._draw_held()
        if self.size != self._laid_out_for:
            self._relayout()

    def _advice_visible(self) -> bool:
        """Whether the advice panel is open: as toggled with ``a``, else on wide terminals when it has something to say."""
        if self._advice_open is not None:
            return self._advice_open
        return self.size.width >= WIDE_MIN_COLUMNS and self._has_advice

    def _advice_place(self) -> str:
        """Where the advice panel goes: ``hidden``, ``beside`` a few GPUs, ``below`` many, or ``full`` width (narrow)."""
        if not self._advice_visible():
            return "hidden"
        if self.size.width < WIDE_MIN_COLUMNS:
            return "full"
        return "beside" if self._gpu_count <= ADVICE_BESIDE_MAX_GPUS else "below"

    def _relayout(self) -> None:
        """Place, fold or hide the advice panel (layout classes, see gpusight.tcss) and choose the GPU panels' layout
        for the rows the main column will have; the GPU area and the host panel are as tall as what they draw, the
        process table takes the rest.

        The rows are counted here, not read from the layout, because the choice comes before the layout it changes.
        """
        width, height = self._laid_out_for = self.size
        narrow = width < WIDE_MIN_COLUMNS
        place = self._advice_place()
        advice = place != "hidden"
        self._set_layout_classes({"-narrow": narrow, "-advice-open": advice, "-advice-below": place == "below"})
        if advice and not self._advice_shown:
            self.call_after_refresh(self._advice.reveal)
        self._advice_shown = advice
        self._footer.compact = narrow
        # Less the header and the footer, the advice summary (unless the panel is open), the filter and the bar.
        body = height - 2 - (0 if advice else 1) - (1 if self._filter.display else 0) - (1 if self._bar.display else 0)
        below = min(ADVICE_BELOW_MAX_LINES, max(4, body // 5)) if place == "below" else 0
        _set_height(self._advice, below or None)
        main_width = width - (self._advice_width() if place == "beside" else 0)
        body -= below
        host_rows = 1 if body < 30 else 3
        self._host.set_max_grid_rows(host_rows)
        process_min = max(4, body // 4)
        budget = max(2, body - host_height(max(0, self._core_count), main_width, host_rows) - process_min)
        # One line of the GPU area is its top border, which names the charts' time span.
        mode, rows = choose_layout(max(1, self._gpu_count), budget - 1, body // 2 - 1)
        self._gpus.apply_layout(mode, rows, budget)
        self._refresh_offers()

    def _advice_width(self) -> int:
        """Columns of the advice panel beside the GPUs: its width in the stylesheet."""
        width = self._advice.styles.width
        assert width is not None and width.cells is not None, "gpusight.tcss gives #advice a width in cells"
        return width.cells

    def _set_layout_classes(self, wanted: dict[str, bool]) -> None:
        """Add or remove the app's layout classes, then restyle the screen once if any changed.

        Textual restyles every widget of the screen for each class changed with ``set_class``: the first
        frame changes two (advice open, below the GPUs), and each pass cost about as much as the mount's.
        """
        changed = [name for name, on in wanted.items() if self.has_class(name) != on]
        for name in changed:
            self.set_class(wanted[name], name, update=False)
        if changed:
            self.update_node_styles()

    def _refresh_offers(self) -> None:
        """Rebuild the footer when an action starts or stops doing something (the layout or the data changed)."""
        offered = tuple(self.unavailable(name) for name in ("kill", "chart_metric"))
        if offered != self._offered:
            self._offered = offered
            self.refresh_bindings()

    # -- snapshots ----------------------------------------------------------------------------

    def _on_sampler_snapshot(self, frame: Frame) -> None:
        """Sampler-thread callback: hand the frame to the UI thread (newest wins)."""
        self.post_message(FrameReady(frame))

    async def on_frame_ready(self, message: FrameReady) -> None:
        """Hold a new frame (unless paused) and draw it now if the refresh period is up, else once a timer ends it."""
        if self.sampler.paused:
            return
        self._held = message.frame
        now, interval = time.monotonic(), self.sampler.interval
        if self._pacer.due_now(now, interval):
            await self._draw_held()
        elif self._draw_timer is None:
            self._draw_timer = self.set_timer(self._pacer.delay(now, interval), self._draw_held)

    async def _draw_held(self) -> None:
        """Draw the newest frame held back by the refresh period, if any (a key or a resize wants it now); nothing
        once the app is closing (its screens are gone)."""
        if self._held is not None and self._screen_stack:
            await self._draw(self._held)

    async def _draw(self, frame: Frame, *, at_once: bool = False) -> None:
        """Draw ``frame`` now (``at_once``: in every panel, none waiting for its own pace); the refresh period starts
        again and nothing older stays held."""
        self._held = None
        if self._draw_timer is not None:
            self._draw_timer.stop()
            self._draw_timer = None
        self._pacer.drew(time.monotonic())
        await self._apply(frame, at_once=at_once)

    async def _apply(self, frame: Frame, *, at_once: bool = False) -> None:
        """Lay the screen out again if the frame's shape (GPUs, cores, advice) changed, then draw the frame in every
        registered panel, in their order. The screen is not repainted in between: while the GPU area mounts panels for a
        new set of GPUs, the panels after it have not drawn this frame yet."""
        snapshot = frame.snapshot
        self.frame = frame
        self.snapshots_applied += 1
        if self.first_frame_at is None:
            self.call_after_refresh(self._note_first_frame)
        with self.batch_update():
            shape = (len(snapshot.devices), len(snapshot.host.cpu_percent_per_core), _has_advice(snapshot))
            if shape != (self._gpu_count, self._core_count, self._has_advice):
                self._gpu_count, self._core_count, self._has_advice = shape
                self._relayout()
            context = PanelContext(interval=self.sampler.interval, paused=self.sampler.paused, at_once=at_once)
            for panel in self._panels:
                drawn = panel.show_frame(frame, context)
                if drawn is not None:
                    await drawn
        self._refresh_offers()
        # A detail screen just pushed shows its first frame once it is mounted (see _show_detail); a frame that
        # comes between finds its widgets not yet composed.
        if isinstance(self.screen, (GpuDetailScreen, ProcessDetailScreen)) and self.screen.is_mounted:
            self.screen.show(frame, self._gpus.choice)

    def _note_first_frame(self) -> None:
        if self.first_frame_at is None:
            self.first_frame_at = time.time()

    # -- actions ------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide what ``--readonly`` disables; Esc clears the filter only while one is open."""
        if self.readonly and action in READONLY_DISABLED:
            return False
        if action in REPLAY_ONLY and not self.replaying:
            return False
        if action == "clear_filter":
            return self._filter.display or None
        if action in ("gpu_detail", "process_detail") and isinstance(self.screen, ProcessDetailScreen):
            return False  # no screen on top of a process's screen: Esc goes back to where Enter came from
        return True

    def unavailable(self, action: str) -> str | None:
        """Why ``action`` (a name without parameters) does nothing now, or None when it acts.

        Such an action stays bound (its key says why) but is left out of the footer, the help and the palette.
        """
        if action == "kill" and not self.readonly:
            source = None if self.snapshot is None else self.snapshot.source
            if self.replaying or source == SourceKind.REPLAY:
                return SIGNALS_LIVE_ONLY.format(what="recorded processes")
            if source == SourceKind.DEMO:
                return SIGNALS_LIVE_ONLY.format(what="the demo's simulated processes")
        if action == "chart_metric" and (
            self._gpus.mode != MODE_LINE or isinstance(self.screen, (GpuDetailScreen, ProcessDetailScreen))
        ):
            return CHART_METRIC_LINE_ONLY
        return None

    def _hidden_actions(self) -> frozenset[str]:
        """The actions that do nothing now."""
        return frozenset(entry.name for entry in ACTIONS if self.unavailable(entry.name) is not None)

    async def action_pause(self) -> None:
        """Pause or resume polling, showing the newest poll; in a replay, playback (the bar shows it)."""
        if self.replaying:
            self._steer(TogglePause())
            return
        await self._draw_held()
        if self.sampler.paused:
            self.sampler.resume()
        else:
            self.sampler.pause()
        self._header.show(self.snapshot, self.sampler.interval, self.sampler.paused)

    async def action_play_pause(self) -> None:
        """Pause or resume playback (replay only)."""
        await self.action_pause()

    def _steer(self, command: Command) -> None:
        """Steer the replay; the frames that answer are drawn at once, not at the next refresh."""
        self._pacer.steered()
        self.sampler.steer(command)

    def action_speed(self, steps: int) -> None:
        """Play ``steps`` speed steps faster (negative: slower)."""
        self._steer(ChangeSpeed(steps))

    def action_skip(self, seconds: int) -> None:
        """Jump ``seconds`` of recorded time (negative: back)."""
        self._steer(SeekBy(seconds))

    def action_advice_event(self, direction: int) -> None:
        """Jump to the next (1) or previous (-1) advice event."""
        self._steer(SeekEvent(forward=direction > 0))

    def action_go_to(self) -> None:
        """Ask for a time and jump there."""
        state = self.frame.playback if self.frame is not None else None
        if state is None or state.end is None:
            self.notify("The recording is still being indexed; try again in a moment.", severity="warning")
            return

        def done(target: float | None) -> None:
            if target is not None:
                self._steer(SeekTo(target))

        self.push_screen(GoToDialog(state.start, state.end), done)

    async def action_slower(self) -> None:
        """Double the polling interval."""
        await self._set_interval(min(MAX_INTERVAL, self.sampler.interval * 2))

    async def action_faster(self) -> None:
        """Halve the polling interval (not below the sampler's minimum)."""
        await self._set_interval(self.sampler.interval / 2)

    async def _set_interval(self, seconds: float) -> None:
        await self._draw_held()
        self.sampler.set_interval(seconds)
        self._header.show(self.snapshot, self.sampler.interval, self.sampler.paused)

    async def action_sort(self, key: str) -> None:
        """Sort the process table by ``key`` (again to reverse), with the newest frame."""
        await self._draw_held()
        self._processes.sort_by(key)

    async def action_toggle_workers(self) -> None:
        """Show or hide DataLoader worker rows."""
        await self._draw_held()
        self._processes.toggle_workers()

    async def action_filter(self) -> None:
        """Open the process filter."""
        await self._draw_held()
        self._filter.display = True
        self._filter.focus()
        self._relayout()
        self.refresh_bindings()

    def action_clear_filter(self) -> None:
        """Clear and close the process filter."""
        if not self._filter.display:
            return
        self._filter.value = ""
        self._filter.display = False
        self._processes.set_filter("")
        self._processes.focus()
        self._relayout()
        self.refresh_bindings()

    async def on_input_changed(self, event: Input.Changed) -> None:
        """Filter the process table as the user types, with the newest frame."""
        if event.input is self._filter:
            await self._draw_held()
            self._processes.set_filter(event.value)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter in the filter returns to the table (the filter stays; Esc clears it)."""
        if event.input is self._filter:
            if not event.value:
                self.action_clear_filter()
            else:
                self._processes.focus()

    async def action_toggle_advice(self) -> None:
        """Show or hide the advice panel."""
        await self._draw_held()
        self._advice_open = not self._advice_visible()
        self._relayout()

    async def action_toggle_mine(self) -> None:
        """Show only the current user's processes and the advice about them, or everyone's again."""
        filters = self.sampler.filters
        mine = current_user_filter()
        shown = self.sampler.set_filters(dataclasses.replace(filters, user=None if filters.user == mine else mine))
        self._header.show_filters(self.sampler.filters.describe())
        if shown is not None:  # shown now (paused too), not at the process table's once-a-second pace
            await self._draw(shown, at_once=True)

    def action_help(self) -> None:
        """Show every key."""
        if not isinstance(self.screen, HelpScreen):
            rows = help_rows(readonly=self.readonly, export_dir=safe_text(str(self.export_dir)), replay=self.replaying,
                             hidden=self._hidden_actions())
            self.push_screen(HelpScreen(rows))

    async def action_gpu_detail(self, device_index: int | None = None) -> None:
        """Open the detail screen of GPU ``device_index``, else of the focused GPU (the first when none is)."""
        await self._draw_held()
        focused = self.focused
        panels = self._gpus.panels
        if device_index is not None:
            index = device_index
        elif isinstance(focused, GpuPanel):
            index = focused.device_index
        elif panels:
            index = panels[0].device_index
        else:
            self.notify("No GPU to show.", severity="warning")
            return
        screen = GpuDetailScreen(index, ascii_mode=self.ascii_mode)
        if self.frame is not None:
            screen.show_fields(self.frame.snapshot)  # in its first paint; the charts wait for their sizes
        self.push_screen(screen)
        if self.frame is not None:
            self.call_after_refresh(self._show_detail, screen)

    async def action_process_detail(self) -> None:
        """Open the detail screen of the process selected in the table."""
        await self._draw_held()
        process = self._processes.selected_process()
        if process is None:
            self.notify("Select a process first.", severity="warning")
            return
        self._open_process_detail(process)

    def _open_process_detail(self, process: ProcessSample) -> None:
        if isinstance(self.screen, ProcessDetailScreen):
            return
        screen = ProcessDetailScreen(process, ascii_mode=self.ascii_mode)
        self.push_screen(screen)
        if self.frame is not None:
            self.call_after_refresh(self._show_detail, screen)

    def _show_detail(self, screen: GpuDetailScreen | ProcessDetailScreen) -> None:
        if self.frame is not None and screen.is_mounted:
            screen.show(self.frame, self._gpus.choice)

    @property
    def snapshot(self) -> Snapshot | None:
        """The snapshot on screen (the frame's)."""
        return None if self.frame is None else self.frame.snapshot

    @property
    def chart_choice(self) -> ChartChoice:
        """The charts' zoom level, motion and one-line metric."""
        return self._gpus.choice

    async def action_zoom(self) -> None:
        """Chart a longer time per column (1 s, 10 s, 1 min by default), then back to the closest."""
        await self._draw_held()
        self._set_choice(self._gpus.choice.zoomed())

    async def action_chart_metric(self) -> None:
        """Chart the next metric in the one-line layout (elsewhere, say that it charts nothing there)."""
        await self._draw_held()
        reason = self.unavailable("chart_metric")
        if reason is not None:
            self.notify(reason, severity="warning")
            return
        self._set_choice(self._gpus.choice.next_metric())

    def _set_choice(self, choice: ChartChoice) -> None:
        self._gpus.set_choice(choice)
        if isinstance(self.screen, (GpuDetailScreen, ProcessDetailScreen)) and self.frame is not None:
            self.screen.show(self.frame, choice)

    async def on_process_table_process_selected(self, event: ProcessTable.ProcessSelected) -> None:
        """Enter on a process: open its detail screen (full command line, container, job and speed)."""
        await self._draw_held()
        self._open_process_detail(event.process)

    def action_kill(self) -> None:
        """Ask to send a signal to the selected process (not in read-only mode)."""
        if self.readonly:
            self.notify("Read-only mode: sending signals is disabled.", severity="warning")
            return
        reason = self.unavailable("kill")
        if reason is not None:
            self.notify(reason, severity="warning")
            return
        process = self._processes.selected_process()
        if process is None:
            self.notify("Select a process first.", severity="warning")
            return
        from gpusight.ui.dialogs.kill_dialog import KillDialog

        def done(result: str | None) -> None:
            if result:
                self.notify(result, markup=False)

        self.push_screen(KillDialog(process), done)

    def action_export(self) -> None:
        """Write the snapshot, its history and this screen into the export directory."""
        if self.snapshot is None:
            self.notify("Nothing to export yet.", severity="warning")
            return
        self._export(self.snapshot, self.export_screenshot())

    @work(thread=True, group="export")
    def _export(self, snapshot: Snapshot, svg: str) -> None:
        """Export on a worker thread so the screen keeps updating."""
        from gpusight.snapshot_export.export_set import ExportError, export_snapshot

        try:
            result = export_snapshot(self.export_dir, snapshot, self.sampler.history, svg)
        except ExportError as exc:
            self.call_from_thread(self.notify, f"Export failed: {exc}", severity="error", markup=False)
            return
        paths = ", ".join(str(path) for path in result.paths)
        self.call_from_thread(self.notify, f"Exported: {paths}", markup=False)

    def get_system_commands(self, screen: Screen[object]) -> Iterable[SystemCommand]:
        """The command palette: every gpusight action once, then Textual's commands that none of them replaces."""
        export_dir = safe_text(str(self.export_dir))
        ours = palette_actions(readonly=self.readonly, replay=self.replaying, hidden=self._hidden_actions())
        for entry in ours:
            yield SystemCommand(entry.title, palette_help(entry, export_dir), partial(self.run_action, entry.action))
        titles = {entry.title for entry in ours}
        yield from (command for command in super().get_system_commands(screen) if command.title not in titles)


def _set_height(widget: Widget, lines: int | None) -> None:
    """Give ``widget`` a height of ``lines``, or (None) leave it to the stylesheet; a layout pass only on a change."""
    if lines is not None:
        widget.styles.height = lines
    elif widget.styles.inline.has_rule("height"):
        widget.styles.height = None


def _has_advice(snapshot: Snapshot) -> bool:
    """True when the advice panel has something to say: a fault, or advice other than "nothing looks wrong"."""
    return bool(snapshot.errors) or not all(is_all_clear(advice) for advice in snapshot.advice)
