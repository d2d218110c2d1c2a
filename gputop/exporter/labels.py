"""Label values from untrusted text: always valid UTF-8, so no process can make a scrape fail."""

from __future__ import annotations

from gputop.textsafe import safe_text

COMMAND_LABEL_MAX = 200
"""Longest ``command`` label value (``--serve-cmdline``), in characters; longer command lines are cut."""


def label_value(text: str | None, max_length: int | None = None) -> str:
    """``text`` as a label value: "" for None, control characters and escapes neutralised, never unencodable.

    Strings read from ``/proc`` carry undecodable bytes as lone surrogates (``surrogateescape``); those
    become U+FFFD here, decided for this value alone, so one odd argv never fails a whole scrape.
    """
    cleaned = safe_text(text, max_length)
    try:
        cleaned.encode("utf-8")
    except UnicodeEncodeError:
        raw = cleaned.encode("utf-8", errors="surrogateescape") if _escaped_only(cleaned) else \
            cleaned.encode("utf-8", errors="replace")
        cleaned = raw.decode("utf-8", errors="replace")
    return cleaned


def _escaped_only(text: str) -> bool:
    """True when every surrogate in ``text`` is one ``surrogateescape`` made (U+DC80 to U+DCFF)."""
    return all(not 0xD800 <= ord(c) <= 0xDFFF or 0xDC80 <= ord(c) <= 0xDCFF for c in text)
