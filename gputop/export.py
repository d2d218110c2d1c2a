"""Exporting what is on screen: an SVG screenshot, the snapshot plus chart history as JSON, and a Markdown report.

The three files share one stem, ``gputop-YYYYmmdd-HHMMSS`` (with ``-N`` added when that name is
taken). Each is written to a temporary file in the target directory, flushed to disk and renamed
into place, so a file with a final name is always complete; on failure the temporary files are removed
and :class:`ExportError` says, in one line, which path failed and why.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputop.collect.history import DEVICE_METRICS, HOST_METRICS, History
from gputop.collect.model import Snapshot
from gputop.collect.serialize import snapshot_to_dict
from gputop.report import render_report

__all__ = ["ExportError", "ExportResult", "export_snapshot", "history_to_dict", "render_report"]

SUFFIXES = (".svg", ".json", ".md")
"""Extensions of the files in one export set."""


class ExportError(Exception):
    """An export failed; the message (one line) names the path and the reason."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """The files an export wrote."""

    paths: tuple[Path, ...]
    """Written files: the SVG (when a screenshot was given), the JSON and the Markdown report."""


def _finite(values: list[float | None]) -> list[float | None]:
    return [None if v is None or not math.isfinite(v) else v for v in values]


def history_to_dict(history: History) -> dict[str, Any]:
    """The chart window as plain data: timestamps, per-device series and host series (null when missing)."""
    return {
        "timestamps": history.timestamps(),
        "devices": [
            {"index": index, "series": {m: _finite(history.device(index, m)) for m in DEVICE_METRICS}}
            for index in history.device_indexes()
        ],
        "host": {m: _finite(history.host(m)) for m in HOST_METRICS},
    }


def _describe(path: Path, exc: OSError) -> str:
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"cannot export to {path}: {reason}"


def _free_stem(directory: Path, now: float) -> str:
    base = time.strftime("gputop-%Y%m%d-%H%M%S", time.localtime(now))
    stem, n = base, 0
    while any((directory / (stem + suffix)).exists() for suffix in SUFFIXES):
        n += 1
        stem = f"{base}-{n}"
    return stem


def _write_temp(directory: Path, stem: str, text: str) -> Path:
    """Write ``text`` to a new temporary file in ``directory``, flushed to disk; remove it on failure."""
    fd, name = tempfile.mkstemp(prefix=f".{stem}.", suffix=".tmp", dir=directory)
    temp = Path(name)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return temp


def _sync_directory(directory: Path) -> None:
    """Flush the renames to disk; file systems that cannot sync a directory are left as they are."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def export_snapshot(directory: Path, snapshot: Snapshot, history: History, svg: str | None) -> ExportResult:
    """Write the export set for ``snapshot`` and ``history`` (and the ``svg`` screenshot) into ``directory``.

    The directory is created if missing. Raises :class:`ExportError` when anything cannot be written.
    """
    directory = Path(directory)
    document = snapshot_to_dict(snapshot)
    document["history"] = history_to_dict(history)
    contents: list[tuple[str, str]] = []
    if svg is not None:
        contents.append((".svg", svg))
    contents.append((".json", json.dumps(document, separators=(",", ":"), allow_nan=False) + "\n"))
    contents.append((".md", render_report(snapshot, history)))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(_describe(directory, exc)) from exc
    stem = _free_stem(directory, time.time())
    written: list[tuple[Path, Path]] = []
    target = directory
    try:
        for suffix, text in contents:
            target = directory / (stem + suffix)
            written.append((_write_temp(directory, stem, text), target))
        for temp, final in written:
            target = final
            os.replace(temp, final)
    except OSError as exc:
        for temp, _ in written:
            temp.unlink(missing_ok=True)
        raise ExportError(_describe(target, exc)) from exc
    _sync_directory(directory)
    return ExportResult(tuple(final for _, final in written))
