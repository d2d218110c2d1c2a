"""Reading a Prometheus API answer in bounded memory, however large it is.

:class:`AnswerReader` is fed the body as it arrives. An answer in Prometheus's own shape
(``{"status":"success","data":{"resultType":...,"result":[`` ...) is parsed one series at a time: each becomes a
:class:`Series` at once and is offered to a :class:`NodeCut`, which keeps the series of the first nodes by name
and counts the rest, so the body and its JSON are never held whole. Any other shape (an error, a proxy that
reorders keys) is read whole, up to :data:`MAX_WHOLE_ANSWER_BYTES`, and refused beyond.
"""

from __future__ import annotations

import bisect
import codecs
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpusight.cluster.settings import MAX_SERIES_BYTES, MAX_WHOLE_ANSWER_BYTES

HEAD = re.compile(r'\s*\{\s*"status"\s*:\s*"success"\s*,\s*"data"\s*:\s*\{\s*"resultType"\s*:\s*"(vector|matrix)"'
                  r'\s*,\s*"result"\s*:\s*\[')
"""The start of an answer in Prometheus's own shape, up to its first series."""

HEAD_BYTES = 4096
"""Bytes after which an answer whose start is not :data:`HEAD` is read whole instead."""

_DECODER = json.JSONDecoder()


class MalformedAnswer(Exception):
    """The answer is not Prometheus's JSON, or a series in it is not a series."""


class AnswerTooLarge(Exception):
    """An answer that cannot be read a series at a time is larger than :data:`MAX_WHOLE_ANSWER_BYTES`."""


@dataclass(frozen=True, slots=True)
class Series:
    """One series of a query's answer: its labels and its (unix time, value) points."""

    labels: dict[str, str]
    """Every label, ``__name__`` included where Prometheus kept it."""
    points: tuple[tuple[float, float], ...]
    """One point for an instant query; one per step with a sample for a range query."""

    @property
    def value(self) -> float:
        """The last point's value."""
        return self.points[-1][1]


def to_series(item: Any, kind: str) -> Series | None:
    """One result item as a :class:`Series` (None when it has no point); :class:`MalformedAnswer` if not one."""
    try:
        labels = {str(k): str(v) for k, v in item["metric"].items()}
        raw = [item["value"]] if kind == "vector" else item["values"]
        points = tuple((float(t), float(v)) for t, v in raw)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise MalformedAnswer("malformed result") from None
    return Series(labels, points) if points else None


class NodeCut:
    """Keeps the series of the first ``limit`` keys by name of each group and counts every key and series.

    ``place(labels)`` gives a series' (group, key): e.g. ("node", its host name) or ("target", its instance).
    Choosing the first keys by name keeps the same nodes in every query and every poll. A group missing
    from ``limits`` (all of them, by default) is kept whole.
    """

    def __init__(self, place: Callable[[dict[str, str]], tuple[str, str]] = lambda labels: ("", ""),
                 limits: dict[str, int] | None = None) -> None:
        self.place = place
        """(group, key) of a series' labels."""
        self.limits = dict(limits or {})
        """Most keys kept, by group."""
        self.seen: dict[str, set[str]] = {}
        """Every key seen, by group."""
        self.series_by_name: Counter[str] = Counter()
        """Series seen, by metric name (``__name__``, '' where dropped)."""
        self._kept: dict[str, list[str]] = {}
        self._series: dict[tuple[str, str], list[Series]] = {}

    def offer(self, series: Series) -> None:
        """Count ``series``; keep it when its key is among the first ``limit`` of its group so far."""
        group, key = self.place(series.labels)
        self.series_by_name[series.labels.get("__name__", "")] += 1
        self.seen.setdefault(group, set()).add(key)
        kept = self._kept.setdefault(group, [])
        held = self._series.get((group, key))
        if held is not None:
            held.append(series)
            return
        limit = self.limits.get(group)
        if limit is not None and len(kept) >= limit:
            if not kept or key > kept[-1]:
                return
            del self._series[(group, kept.pop())]
        bisect.insort(kept, key)
        self._series[(group, key)] = [series]

    def series(self) -> list[Series]:
        """The series kept, by group and key."""
        return [s for group in sorted(self._kept) for key in self._kept[group] for s in self._series[(group, key)]]

    def cut(self, group: str) -> tuple[int, int]:
        """(kept, seen) keys of ``group``."""
        return len(self._kept.get(group, ())), len(self.seen.get(group, ()))


class AnswerReader:
    """Parses an answer fed in chunks (:meth:`feed`), one series at a time where it can (see the module)."""

    def __init__(self, cut: NodeCut) -> None:
        self.cut = cut
        """Receives every series."""
        self.bytes = 0
        """Bytes fed so far."""
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self._text = ""
        self._kind: str | None = None
        self._whole: bytearray | None = None
        self._tail: str | None = None
        self._items = 0

    def feed(self, chunk: bytes) -> None:
        """Take the next piece of the body."""
        self.bytes += len(chunk)
        if self._whole is not None:
            self._keep_whole(chunk)
            return
        try:
            self._text += self._decoder.decode(chunk)
        except UnicodeDecodeError:
            raise MalformedAnswer("not UTF-8") from None
        if self._kind is None and not self._head(final=False):
            return
        self._parse(final=False)

    def finish(self) -> dict[str, Any] | None:
        """The answer's document once the body has ended (its ``data.result`` holds no series: they went to the cut);
        None when the body is not a JSON object."""
        if self._kind is None and self._whole is None:
            self._head(final=True)
        if self._whole is not None:
            return self._finish_whole()
        self._parse(final=True)
        if self._tail is None:
            raise MalformedAnswer("the series list never ends")
        try:
            head = '{"status":"success","data":{"resultType":"' + str(self._kind) + '","result":[]'
            document = json.loads(head + self._tail)
        except ValueError:
            raise MalformedAnswer("bad JSON after the series") from None
        return document if isinstance(document, dict) else None

    def _head(self, final: bool) -> bool:
        """Recognise Prometheus's own shape; switch to reading whole when the start is anything else."""
        match = HEAD.match(self._text)
        if match is not None:
            self._kind = match.group(1)
            self._text = self._text[match.end():]
            return True
        if final or len(self._text) >= HEAD_BYTES:
            text, self._text = self._text, ""
            self._whole = bytearray()
            self._keep_whole(text.encode() + self._decoder.getstate()[0])
        return False

    def _keep_whole(self, chunk: bytes) -> None:
        assert self._whole is not None
        if len(self._whole) + len(chunk) > MAX_WHOLE_ANSWER_BYTES:
            raise AnswerTooLarge(f"{self.bytes:,} bytes")
        self._whole += chunk

    def _finish_whole(self) -> dict[str, Any] | None:
        assert self._whole is not None
        try:
            document = json.loads(self._whole)
        except (ValueError, UnicodeDecodeError):
            return None
        self._whole = bytearray()
        if not isinstance(document, dict):
            return None
        data = document.get("data")
        if isinstance(data, dict) and isinstance(data.get("result"), list):
            for item in data["result"]:
                series = to_series(item, str(data.get("resultType")))
                if series is not None:
                    self.cut.offer(series)
            data["result"] = []
        return document

    def _parse(self, final: bool) -> None:
        """Turn every complete series in the text into a :class:`Series`; keep the incomplete rest."""
        if self._tail is not None:
            self._tail += self._text
            self._text = ""
            if len(self._tail) > MAX_SERIES_BYTES:
                raise MalformedAnswer("more than a series' worth of text after the series")
            return
        text, at = self._text, 0
        assert self._kind is not None
        while True:
            while at < len(text) and text[at] in " \t\r\n,":
                at += 1
            if at == len(text):
                break
            if text[at] == "]":
                self._tail = text[at + 1:]
                self._text = ""
                self._parse(final)
                return
            try:
                item, end = _DECODER.raw_decode(text, at)
            except ValueError:
                if final:
                    raise MalformedAnswer("a series cut off") from None
                break
            if not isinstance(item, dict):
                raise MalformedAnswer("a series that is not an object")
            series = to_series(item, self._kind)
            if series is not None:
                self.cut.offer(series)
            at = end
        self._text = text[at:]
        if len(self._text) > MAX_SERIES_BYTES:
            raise MalformedAnswer(f"a series of more than {MAX_SERIES_BYTES:,} bytes")
