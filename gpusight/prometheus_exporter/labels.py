"""Label values from untrusted text: always valid UTF-8, so no process can make a scrape fail."""

from __future__ import annotations

import functools

from gpusight.textsafe import safe_text

_SURROGATES = 0xD800
"""First code point of the surrogate range; a lone surrogate cannot be encoded as UTF-8."""
_ESCAPES = 0xDC80
"""First of the surrogates ``surrogateescape`` uses for an undecodable byte (up to U+DCFF)."""

LABEL_CACHE_SIZE = 4096
"""Label values remembered: names, users and ids repeat from scrape to scrape."""

COMMAND_LABEL_MAX = 200
"""Longest ``command`` label value (``--serve-cmdline``), in characters; longer command lines are cut."""


@functools.lru_cache(maxsize=LABEL_CACHE_SIZE)
def label_value(text: str | None, max_length: int | None = None) -> str:
    """``text`` as a label value: "" for None, control characters and escapes neutralised, never unencodable.

    Strings read from ``/proc`` carry undecodable bytes as lone surrogates (``surrogateescape``): those bytes are
    decoded again as UTF-8 where they form it, the rest (and any other lone surrogate) become U+FFFD. Decided
    for this value alone, so one odd argv never fails a whole scrape.
    """
    cleaned = safe_text(text, max_length)
    try:
        cleaned.encode("utf-8")
    except UnicodeEncodeError:
        escaped_bytes_kept = "".join(c if not _SURROGATES <= ord(c) <= 0xDFFF or _ESCAPES <= ord(c) <= 0xDCFF
                                     else "\ufffd" for c in cleaned)
        cleaned = escaped_bytes_kept.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return cleaned
