"""The advice side panel and its one-line summary for narrow terminals.

Shows the snapshot's faults (e.g. "NVML not found") as warnings first, then the live advice,
most severe first, each with scope, title, evidence and the action to take; a job's scope names
its GPUs (``job3 on GPUs 0-7``). A replay names where its advice comes from: as recorded, or
re-evaluated when the recording carries none. All text is built as ``rich.text.Text`` from escaped
strings, so nothing in it is read as markup.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from rich.console import Console
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from gpusight.advice.config import Thresholds
from gpusight.job_text import jobs_by_id, scope_label
from gpusight.sampling.frame import Frame
from gpusight.sampling.steering import PlaybackState
from gpusight.snapshot.model import Advice, ErrorNote, JobSample, Severity, Snapshot
from gpusight.textsafe import safe_text
from gpusight.ui.main.panel import PanelContext
from gpusight.ui.widgets.format import severity_rank

TEXT_REFRESH_SECONDS = 2.0
"""Least time between two redraws of the advice text when only its numbers changed."""

SEVERITY_LABELS = {Severity.CRITICAL: "CRIT", Severity.WARN: "WARN", Severity.INFO: "INFO"}
"""Badge text of each severity."""

ADVICE_COMPONENTS = {
    "advice--critical",
    "advice--warn",
    "advice--info",
    "advice--scope",
    "advice--title",
    "advice--evidence",
    "advice--action",
    "advice--key",
}
"""Component classes of the advice widgets (styled in gpusight.tcss)."""

StyleLookup = Callable[[str], Style]
"""Maps a part name (``"warn"``, ``"title"``, ...) to its style."""

RECORDED = "recorded"
"""A replay's advice as the recording carries it."""
REEVALUATED = "re-evaluated"
"""A replay's advice from the rules run again on the replayed data (the recording carries none)."""

CALM_LINES = {
    None: "No advice: nothing looks wrong.",
    RECORDED: "No advice was recorded at this moment.",
    REEVALUATED: "No advice yet: this recording carries none, so the rules are re-evaluated on the replayed data; "
    f"they judge once their windows ({Thresholds().window_s:g} s by default) have filled.",
}
"""The panel's line when there is nothing to show, by where the advice comes from."""


def advice_origin(playback: PlaybackState | None) -> str | None:
    """Where a replay's advice comes from (:data:`RECORDED` or :data:`REEVALUATED`); None for live and demo data."""
    if playback is None:
        return None
    return RECORDED if playback.advice_recorded else REEVALUATED


def sorted_advice(advice: tuple[Advice, ...]) -> list[Advice]:
    """Advice most severe first (stable within a severity)."""
    return sorted(advice, key=lambda item: severity_rank(item.severity))


def advice_text(
    advice: tuple[Advice, ...],
    errors: tuple[ErrorNote, ...],
    jobs: Mapping[int, JobSample],
    style: StyleLookup,
    ascii_mode: bool = False,
    origin: str | None = None,
) -> Text:
    """The panel's body: errors as warnings, then advice items; a calm line when there is nothing.

    ``jobs`` (by id) lets a job's scope name its GPUs; ``origin`` (see :func:`advice_origin`) picks the calm line.
    """
    return joined(advice_items(advice, errors, jobs, style, ascii_mode), style, origin)


def joined(items: list[Text], style: StyleLookup, origin: str | None = None) -> Text:
    """``items`` a blank line apart; the calm line for ``origin`` (see :func:`advice_origin`) when there are none."""
    if not items:
        return Text(CALM_LINES[origin], style=style("evidence"))
    return Text("\n\n").join(items)


def advice_items(
    advice: tuple[Advice, ...],
    errors: tuple[ErrorNote, ...],
    jobs: Mapping[int, JobSample],
    style: StyleLookup,
    ascii_mode: bool = False,
) -> list[Text]:
    """One text per error (as a warning), then per advice item, most severe first."""
    arrow = "->" if ascii_mode else "→"
    items: list[Text] = []
    for note in errors:
        text = Text()
        items.append(text)
        text.append(" WARN ", style=style("warn"))
        text.append(f" {safe_text(note.scope)}", style=style("scope"))
        text.append(f"\n{safe_text(note.message)}")
    for item in sorted_advice(advice):
        text = Text()
        items.append(text)
        severity = item.severity if item.severity in SEVERITY_LABELS else Severity.INFO
        text.append(f" {SEVERITY_LABELS[severity]} ", style=style(severity))
        text.append(f" {safe_text(scope_label(item.scope, jobs))} ", style=style("scope"))
        text.append(safe_text(item.title), style=style("title"))
        if item.evidence:
            text.append(f"\n{safe_text(item.evidence)}", style=style("evidence"))
        if item.action:
            text.append(f"\n{arrow} ", style=style("action"))
            text.append(safe_text(item.action), style=style("action"))
    return items


def first_lines(items: list[Text], console: Console, width: int) -> list[int]:
    """The line each of ``items`` starts on when they are wrapped to ``width`` cells, a blank line apart."""
    starts, line = [], 0
    for item in items:
        starts.append(line)
        line += len(item.wrap(console, width)) + 1
    return starts


def hidden_hint(starts: list[int], top: int, height: int, focused: bool) -> str:
    """``1 of 8 shown: Tab, then Down or PgDn`` when items start outside lines ``top`` to ``top + height``; else empty.

    ASCII only, so it reads the same in ``--ascii`` mode.
    """
    shown = sum(1 for start in starts if top <= start < top + height)
    if shown == len(starts):
        return ""
    return f"{shown} of {len(starts)} shown: {'' if focused else 'Tab, then '}Down or PgDn"


def summary_text(
    advice: tuple[Advice, ...], errors: tuple[ErrorNote, ...], jobs: Mapping[int, JobSample], style: StyleLookup,
    origin: str | None = None,
) -> Text:
    """One line: counts per severity, where a replay's advice comes from, the most severe title, and the key that opens
    the panel."""
    text = Text(no_wrap=True, overflow="ellipsis")
    counts: dict[Severity, int] = {}
    for item in advice:
        counts[item.severity] = counts.get(item.severity, 0) + 1
    if errors:
        text.append(f" {len(errors)} error{'s' if len(errors) > 1 else ''} ", style=style("warn"))
        text.append(" ")
    for severity in Severity:
        if counts.get(severity):
            text.append(f" {counts[severity]} {SEVERITY_LABELS[severity]} ", style=style(severity))
            text.append(" ")
    if origin is not None:
        none = " advice: none yet" if origin == REEVALUATED else " advice: none"
        text.append(f"{origin}{'' if advice else none} ", style=style("evidence"))
    elif not advice and not errors:
        text.append("advice: nothing looks wrong ", style=style("evidence"))
    text.append("a", style=style("key"))
    text.append(" advice  ", style=style("evidence"))
    top = sorted_advice(advice)
    if errors:
        text.append(f"{safe_text(errors[0].scope)}: {safe_text(errors[0].message)}")
    elif top:
        text.append(f"{safe_text(scope_label(top[0].scope, jobs))}: {safe_text(top[0].title)}")
    return text


def outline(snapshot: Snapshot, origin: str | None = None) -> tuple[object, ...]:
    """What identifies the advice on screen, without the live numbers in evidence and actions."""
    jobs = jobs_by_id(snapshot)
    return (
        tuple((a.id, a.severity, scope_label(a.scope, jobs), a.title) for a in snapshot.advice),
        snapshot.errors,
        origin,
    )


class AdvicePanel(VerticalScroll):
    """Scrollable list of live advice and faults.

    New, gone or changed items show at once; when only the numbers in the evidence change the
    text is refreshed at most every :data:`TEXT_REFRESH_SECONDS`, and a layout pass happens only
    when the wrapped text changes height (a layout pass repaints the whole screen).
    """

    COMPONENT_CLASSES = ADVICE_COMPONENTS
    """Styles of the severities and parts."""

    def __init__(self, *, ascii_mode: bool = False, id: str | None = None) -> None:
        super().__init__(id=id)
        self.ascii_mode = ascii_mode
        """Use ASCII arrows."""
        self._latest: tuple[Snapshot, PlaybackState | None] | None = None
        self._state: tuple[tuple[Advice, ...], tuple[ErrorNote, ...], tuple[JobSample, ...], str | None] | None = None
        self._outline: tuple[object, ...] | None = None
        self._shown_at = -float("inf")
        self._body = Static(Text("Waiting for the first snapshot."), classes="advice-body")
        self._items: list[Text] = []

    def compose(self) -> ComposeResult:
        """The body text."""
        yield self._body

    def _style(self, part: str) -> Style:
        return self.get_component_rich_style(f"advice--{part}", partial=True)

    def notify_style_update(self) -> None:
        """Rebuild the text with the new theme on the next snapshot."""
        super().notify_style_update()
        self._state = None
        self._outline = None

    def show_frame(self, frame: Frame, context: PanelContext) -> None:
        """Display the frame's advice and errors (the panel interface; see :meth:`show`)."""
        self.show(frame.snapshot, frame.playback)

    def show(self, snapshot: Snapshot, playback: PlaybackState | None = None, *, force: bool = False) -> None:
        """Display ``snapshot``'s advice and errors (kept for later while the panel is hidden); ``playback`` (a
        replay's) says whether the advice is recorded or re-evaluated."""
        self._latest = (snapshot, playback)
        if not self.display and not force:
            return
        origin = advice_origin(playback)
        state = (snapshot.advice, snapshot.errors, snapshot.jobs, origin)
        if state == self._state and not force:
            return
        shape = outline(snapshot, origin)
        now = time.monotonic()
        if not force and shape == self._outline and now - self._shown_at < TEXT_REFRESH_SECONDS:
            return
        self._state, self._outline, self._shown_at = state, shape, now
        body = self._body
        self._items = advice_items(snapshot.advice, snapshot.errors, jobs_by_id(snapshot), self._style, self.ascii_mode)
        text = joined(self._items, self._style, origin)
        body.update(text, layout=False)
        width = body.content_region.width
        if width <= 0 or body.get_content_height(self.size, self.app.size, width) != body.content_region.height:
            body.refresh(layout=True)
        count = len(snapshot.advice) + len(snapshot.errors)
        parts = [str(count)] if count else []
        parts += [origin] if origin is not None else []
        self.border_title = f"Advice ({', '.join(parts)})" if parts else "Advice"
        self.call_after_refresh(self._show_hint)

    def on_mount(self) -> None:
        """Keep the count of hidden items right as the panel scrolls."""
        self.watch(self, "scroll_y", self._show_hint, init=False)

    def on_resize(self) -> None:
        """Count the hidden items again at the new size."""
        self.call_after_refresh(self._show_hint)

    def on_focus(self) -> None:
        """The hint no longer needs to say how to get here."""
        self._show_hint()

    def on_blur(self) -> None:
        """The hint says how to get here again."""
        self._show_hint()

    def _show_hint(self) -> None:
        """Name how many items are out of sight, and how to see them, on the bottom border."""
        width = self._body.content_region.width
        if width <= 0 or not self._items:
            hint = ""
        else:
            starts = first_lines(self._items, self.app.console, width)
            hint = hidden_hint(starts, round(self.scroll_y), self.scrollable_content_region.height, self.has_focus)
        if hint != (self.border_subtitle or ""):
            self.border_subtitle = hint or None

    def reveal(self) -> None:
        """Bring the text up to date after the panel was hidden."""
        if self._latest is not None:
            self.show(*self._latest, force=True)


class AdviceSummary(Static):
    """One-line digest of the advice, shown instead of the panel when it is collapsed."""

    COMPONENT_CLASSES = ADVICE_COMPONENTS
    """Styles of the severities and parts."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(Text(""), id=id)
        self._outline: tuple[object, ...] | None = None

    def _style(self, part: str) -> Style:
        return self.get_component_rich_style(f"advice--{part}", partial=True)

    def notify_style_update(self) -> None:
        """Rebuild the text with the new theme on the next snapshot."""
        super().notify_style_update()
        self._outline = None

    def show_frame(self, frame: Frame, context: PanelContext) -> None:
        """Display the digest of the frame's advice (the panel interface; see :meth:`show`)."""
        self.show(frame.snapshot, frame.playback)

    def show(self, snapshot: Snapshot, playback: PlaybackState | None = None) -> None:
        """Display the digest of ``snapshot``'s advice when its items changed (it shows no numbers); ``playback`` (a
        replay's) says whether the advice is recorded or re-evaluated."""
        origin = advice_origin(playback)
        shape = outline(snapshot, origin)
        if shape == self._outline:
            return
        self._outline = shape
        text = summary_text(snapshot.advice, snapshot.errors, jobs_by_id(snapshot), self._style, origin)
        self.update(text, layout=False)
