"""Random access into JSON-lines recordings (plain or gzip): an index of line offsets built by one scan.

Opening scans the whole file once (the recording reader's own line splitter, damage handling
included) and keeps, per snapshot line, its timestamp, its line number and the nearest earlier place
where reading can start: the line itself in a plain file, the gzip member it starts in when every line
is its own member (how gpusight writes ``.jsonl.gz``). A file recompressed as one big member has a single
such place, its start, so reading from a late time decompresses everything before it (the sequential
fallback). The scan reads timestamps and advice without a full parse where a line has gpusight's own key
order, and parses the line otherwise; the advice id sets of consecutive snapshots give the advice
events. Damage is reported by ``read_from`` when it is met, as a plain read does.
"""

from __future__ import annotations

import json
import math
import os
from array import array
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from gpusight.recordings.files import open_regular_file, reading
from gpusight.recordings.formats import RecordingError, RecordingProblem, StandingAdvice, advice_changes
from gpusight.recordings.jsonl.reader import jsonl_lines, line_records, read_jsonl
from gpusight.sampling.steering import AdviceEvent
from gpusight.snapshot.model import Severity, Snapshot

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress

_TIMESTAMP_KEY = b'{"timestamp":'
_ADVICE_KEY = b'"advice":['


class JsonlRecording:
    """A JSON-lines recording opened for random access (implements ``SeekableRecording``).

    Raises ``OSError`` when the file cannot be read, a :class:`RecordingError` when it holds no snapshot
    (as the compact format's ``CompactRecording`` does). ``progress`` is told how far the scan has got.
    """

    def __init__(self, path: str | os.PathLike[str], progress: ReadProgress | None = None) -> None:
        self.path = os.fspath(path)
        """The file."""
        self._times = array("d")
        self._anchors = array("q")  # file offset where reading starts for the entry
        self._anchor_lines = array("q")  # number of the first line read from there
        self._numbers = array("q")  # the entry's own line number
        self._events: list[AdviceEvent] = []
        self._scan(progress)
        if not self._times:
            raise RecordingError(f"{self.path}: no readable snapshots in this recording")
        self.first_timestamp = self._times[0]
        """Timestamp of the first readable snapshot."""
        self.last_timestamp = self._times[-1]
        """Timestamp of the last readable snapshot when opened."""

    def __len__(self) -> int:
        return len(self._times)

    def _scan(self, progress: ReadProgress | None) -> None:
        """Index every snapshot line and collect the advice events."""
        raised: StandingAdvice = {}
        anchor, anchor_line = 0, 1
        with open_regular_file(self.path) as file, reading(file, progress):
            for number, line, damage, start in jsonl_lines(file, progress=progress):
                if start is not None:
                    anchor, anchor_line = start, number
                if damage is not None:
                    continue
                found = _timestamp_and_advice(line)
                if found is None:
                    continue
                timestamp, advice = found
                self._times.append(timestamp)
                self._anchors.append(anchor)
                self._anchor_lines.append(anchor_line)
                self._numbers.append(number)
                self._events += advice_changes(timestamp, raised, advice)
                raised = advice

    def read_from(self, timestamp: float | None = None) -> Iterator[Snapshot | RecordingProblem]:
        """See ``SeekableRecording.read_from``; from a timestamp, damage before its snapshot is not reported."""
        if timestamp is None:
            with open_regular_file(self.path) as file:
                yield from read_jsonl(file)
            return
        entry = max(0, bisect_right(self._times, timestamp) - 1)
        first = self._numbers[entry]
        with open_regular_file(self.path) as file:
            file.seek(self._anchors[entry])
            lines = (line for line in jsonl_lines(file, self._anchor_lines[entry]) if line[0] >= first)
            yield from line_records(lines)

    def advice_events(self) -> Sequence[AdviceEvent]:
        """See ``SeekableRecording.advice_events``."""
        return self._events

    def close(self) -> None:
        """Nothing stays open between reads: each ``read_from`` opens the file itself and closes it when done."""


def _timestamp_and_advice(line: bytes) -> tuple[float, dict[str, tuple[Severity, str]]] | None:
    """The timestamp and the advice (id: severity, title) of a snapshot line; None when it is no snapshot.

    gpusight writes ``timestamp`` first and ``advice`` after the processes, so the fast path reads only those
    two parts; any other layout (a file rewritten by another tool) is parsed whole. A line that only looks
    right is indexed anyway: reading it reports what is wrong.
    """
    text = line.strip()
    if text.startswith(_TIMESTAMP_KEY) and text.endswith(b"}"):
        fast = _fast_fields(text)
        if fast is not None:
            return fast
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict):
        return None
    return _fields(data.get("timestamp"), data.get("advice", []))


def _fast_fields(text: bytes) -> tuple[float, dict[str, tuple[Severity, str]]] | None:
    """The fields of a line in gpusight's own key order, read without parsing the rest; None when that fails."""
    decoder = json.JSONDecoder()
    try:
        head = text[len(_TIMESTAMP_KEY): len(_TIMESTAMP_KEY) + 40].decode("ascii", "replace")
        timestamp, _ = decoder.raw_decode(head.lstrip())
        at = text.rfind(_ADVICE_KEY)
        advice: object = []
        if at >= 0:
            advice, _ = decoder.raw_decode(text[at + len(_ADVICE_KEY) - 1:].decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return _fields(timestamp, advice)


def _fields(timestamp: object, advice: object) -> tuple[float, dict[str, tuple[Severity, str]]] | None:
    """Checked timestamp and advice of a snapshot; None when they are not what a snapshot holds."""
    if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)):
        return None
    try:
        when = float(timestamp)
    except OverflowError:
        return None
    if not math.isfinite(when):
        return None
    if not isinstance(advice, list):
        return None
    found: dict[str, tuple[Severity, str]] = {}
    for item in advice:
        if not isinstance(item, dict):
            continue
        advice_id, severity, title = item.get("id"), item.get("severity"), item.get("title")
        if isinstance(advice_id, str) and isinstance(title, str) and severity in Severity.__members__.values():
            found[advice_id] = (Severity(severity), title)
    return when, found
