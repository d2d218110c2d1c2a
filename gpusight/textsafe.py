"""Making untrusted text (process names, command lines, recorded strings) safe to display.

Process names and command lines are chosen by whoever started the process, so they may carry
terminal escape sequences, control characters or Rich markup. Everything shown on screen or
printed to a terminal goes through :func:`safe_text` first; Rich/Textual markup is additionally
neutralised by building ``rich.text.Text`` objects from it (never markup strings) in the UI. Text written into
Markdown (the snapshot export, the run report, a comparison) goes through :func:`md_escape`.
"""

from __future__ import annotations

import re

_ESCAPE_SEQUENCE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL or ST
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[@-Z\\-_]"  # two-byte escapes
    r"|\x9b[0-?]*[ -/]*[@-~]"  # 8-bit CSI
)
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|~&#])")
"""What Markdown would read as formatting, a link, HTML or a table cell's end: each is escaped with a backslash."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u061c\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def safe_text(text: str | None, max_length: int | None = None) -> str:
    """Return ``text`` with escape sequences removed and control characters shown as ``?``.

    Bidirectional overrides and line separators count as control characters. ``None`` gives
    an empty string. When ``max_length`` is given, longer results are cut and end in ``…``.
    """
    if not text:
        return ""
    cleaned = _CONTROL.sub("?", _ESCAPE_SEQUENCE.sub("", text))
    if max_length is not None and len(cleaned) > max_length:
        cleaned = cleaned[: max(0, max_length - 1)] + "…"
    return cleaned


def md_escape(text: str | None, max_length: int | None = None) -> str:
    """Untrusted ``text`` made safe for Markdown inline text and table cells (``|`` included), as :func:`safe_text`
    makes it safe for a terminal first."""
    return _MD_SPECIAL.sub(r"\\\1", safe_text(text, max_length))
