"""Screen formatting shared by the panels: value pairs with units, throttle badges, bars, fitting text,
building a line from styled pieces (:class:`LineBuilder`) and cached styles for line-API widgets.

Single values go through :mod:`gpusight.units` (``N/A`` for None); this module composes them the
way the panels show them and never lets a missing value pass for zero.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip

from gpusight.snapshot.model import Severity
from gpusight.textsafe import safe_text
from gpusight.units import NA, fmt_bytes, fmt_watts

SEVERITY_ORDER: dict[Severity, int] = {severity: rank for rank, severity in enumerate(Severity)}
"""Sort rank of advice severities, most severe first."""

THROTTLE_LABELS = {
    "gpu_idle": "IDLE",
    "applications_clocks_setting": "APP CLOCKS",
    "sw_power_cap": "SW POWER CAP",
    "hw_slowdown": "HW SLOWDOWN",
    "sync_boost": "SYNC BOOST",
    "sw_thermal": "SW THERMAL",
    "hw_thermal": "HW THERMAL",
    "hw_power_brake": "HW POWER BRAKE",
    "display_clock_setting": "DISPLAY CLOCK",
}
"""Badge text of each decoded throttle reason; unknown reasons are upper-cased."""

BENIGN_THROTTLE = frozenset({"gpu_idle", "applications_clocks_setting", "display_clock_setting", "sync_boost"})
"""Throttle reasons that do not mean lost performance (shown in a quieter colour)."""

UNICODE_BAR = "█"
"""Filled cell of a horizontal bar."""

UNICODE_PARTIAL = " ▏▎▍▌▋▊▉"
"""Partial cells of a horizontal bar, in eighths."""


VENDOR_PREFIXES = ("NVIDIA ", "AMD Instinct ", "AMD ", "Intel(R) ", "Intel ")
"""What a GPU name starts with that the narrow name column can spare (the vendor is plain from the rest): the first
that matches goes, so ``AMD Instinct MI300X`` shows as ``MI300X`` and ``Intel Arc A770`` as ``Arc A770``."""


def short_gpu_name(name: str | None) -> str:
    """A GPU name without its redundant vendor prefix (``VENDOR_PREFIXES``), escaped; ``N/A`` when unknown."""
    text = safe_text(name)
    for prefix in VENDOR_PREFIXES:
        if text.startswith(prefix) and len(text) > len(prefix):
            return text[len(prefix):]
    return text or NA


def percent_of(used: float | None, total: float | None) -> float | None:
    """``used`` as a percentage of ``total``; None when either is unknown or total is zero."""
    if used is None or not total:
        return None
    return 100.0 * used / total


def memory_pair(used: float | None, total: float | None) -> str:
    """Used and total bytes, the unit written once when both share it: ``61.2/80GiB``, ``512MiB/80GiB``."""
    used_text, total_text = fmt_bytes(used), fmt_bytes(total)
    unit = total_text.lstrip("0123456789.")
    if used is not None and total is not None and unit and used_text.endswith(unit):
        used_text = used_text[: -len(unit)]
    return f"{used_text}/{total_text}"


def power_pair(power: float | None, limit: float | None) -> str:
    """Power draw and limit, e.g. ``612/700W``; ``N/A`` parts stay explicit."""
    if power is None or limit is None:
        return f"{fmt_watts(power)}/{fmt_watts(limit)}"
    return f"{power:.0f}/{limit:.0f}W"


def throttle_badges(reasons: tuple[str, ...]) -> list[tuple[str, bool]]:
    """Badge texts for throttle reasons, each with True when it costs performance.

    ``gpu_idle`` is left out: an idle GPU clocking down is not news.
    """
    badges = []
    for reason in reasons:
        if reason == "gpu_idle":
            continue
        label = THROTTLE_LABELS.get(reason) or safe_text(reason).replace("_", " ").upper()
        badges.append((label, reason not in BENIGN_THROTTLE))
    return badges


def bar_text(fraction: float | None, width: int, ascii_mode: bool = False) -> str:
    """A horizontal bar ``width`` cells wide filled to ``fraction`` (0..1); blank for None."""
    if width <= 0:
        return ""
    if fraction is None:
        return " " * width
    fraction = min(1.0, max(0.0, fraction))
    if ascii_mode:
        full = round(fraction * width)
        return "|" * full + " " * (width - full)
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = UNICODE_BAR * full + (UNICODE_PARTIAL[part] if part and full < width else "")
    return text + " " * (width - len(text))


ASCII_ELLIPSIS = "~"
"""What marks cut text in ASCII mode, where ``…`` cannot be drawn."""


def fit(text: str, width: int, ascii_mode: bool = False) -> str:
    """``text`` cut to ``width`` cells with a trailing ``…`` (``~`` in ASCII mode) when it is longer."""
    if width <= 0:
        return ""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, width - 1) + (ASCII_ELLIPSIS if ascii_mode else "…")


def fit_cell(value: str, width: int, right: bool) -> str:
    """``value`` padded or cropped to exactly ``width`` cells, aligned right or left."""
    length = cell_len(value)
    if length >= width:
        return set_cell_size(value, width)
    padding = " " * (width - length)
    return padding + value if right else value + padding


def severity_rank(severity: Severity) -> int:
    """Sort key of an advice severity (unknown severities sort last)."""
    return SEVERITY_ORDER.get(severity, len(SEVERITY_ORDER))


class LineBuilder:
    """Accumulates styled segments up to a fixed width and turns them into a ``Strip``."""

    __slots__ = ("base", "segments", "used", "width")

    def __init__(self, width: int, base: Style | None = None) -> None:
        self.width = width
        """Cells available."""
        self.base = base
        """Style of pieces added without one, and of the padding (the widget's background)."""
        self.used = 0
        """Cells filled so far."""
        self.segments: list[Segment] = []
        """What was added, in order."""

    @property
    def room(self) -> int:
        """Cells still free."""
        return self.width - self.used

    def add(self, text: str, style: Style | None = None) -> bool:
        """Append ``text`` if it fits whole; returns whether it was added."""
        size = cell_len(text)
        if size > self.room:
            return False
        if text:
            self.segments.append(Segment(text, style or self.base))
            self.used += size
        return True

    def add_cut(self, text: str, style: Style | None = None, ascii_mode: bool = False) -> None:
        """Append ``text``, shortened with ``…`` (``~`` in ASCII mode) to the room left."""
        self.add(fit(text, self.room, ascii_mode), style)

    def add_strip(self, strip: Strip) -> bool:
        """Append a pre-rendered strip (e.g. a chart row) if it fits whole."""
        if strip.cell_length > self.room:
            return False
        self.segments.extend(strip)
        self.used += strip.cell_length
        return True

    def pad_to(self, column: int, style: Style | None = None) -> None:
        """Fill with blanks up to ``column`` (no-op when already past it)."""
        if column > self.used:
            self.add(" " * min(column - self.used, self.room), style)

    def strip(self, style: Style | None = None) -> Strip:
        """The finished line, padded with ``style`` (default: the base style) to the full width."""
        return Strip(self.segments, self.used).extend_cell_length(self.width, style or self.base)


class CachedStyles:
    """Mixin for line-API widgets: component and base styles cached until the CSS or theme changes.

    Textual drops its own style cache on every ``refresh()``, so looking styles up per tick was the
    largest cost of a redraw. Put it before ``Widget`` in the bases.
    """

    _style_cache: dict[str, Style] | None = None

    def component_style(self, name: str) -> Style:
        """The full style of component class ``name`` (background included)."""
        cache = self._style_cache
        if cache is None:
            cache = self._style_cache = {}
        style = cache.get(name)
        if style is None:
            style = cache[name] = self.get_component_rich_style(name)  # type: ignore[attr-defined]
        return style

    @property
    def base_style(self) -> Style:
        """The widget's own style (its background), for padding and blank cells."""
        cache = self._style_cache
        if cache is None:
            cache = self._style_cache = {}
        style = cache.get("")
        if style is None:
            style = cache[""] = self.rich_style  # type: ignore[attr-defined]
        return style

    def notify_style_update(self) -> None:
        """Forget cached styles when the CSS, theme or pseudo-classes change."""
        super().notify_style_update()  # type: ignore[misc]
        self._style_cache = None
