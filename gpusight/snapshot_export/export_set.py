"""Exporting what is on screen: an SVG screenshot, the snapshot plus chart history as JSON, a Markdown report, and
the HTML run report of the session's history (the Markdown links it, and shows the same run summary).

The files share one stem, ``gpusight-YYYYmmdd-HHMMSS`` (with ``-N`` added when any of its names
is taken). Each is written to a temporary file in the target directory and flushed to disk, then
linked to its final name, which fails rather than replace anything: exports running at the same
moment, in threads or processes, get distinct names, and a file or symlink already at a name is left
alone. A file with a final name is always complete. On failure the temporary files are removed and
:class:`ExportError` says, in one line, which path failed and why.
"""

from __future__ import annotations

import errno
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpusight.run_report.html import render_html
from gpusight.run_report.session import summarize_history
from gpusight.sampling.history import DEVICE_METRICS, HOST_METRICS, History
from gpusight.snapshot.model import Snapshot
from gpusight.snapshot.serialize import snapshot_to_dict
from gpusight.snapshot_export.markdown import render_markdown
from gpusight.tempfiles import write_temp

SUFFIXES = (".svg", ".json", ".md", ".html")
"""Extensions of the files in one export set."""


_NO_PROCESSES = ("A session's history keeps no process list: record the session (--record FILE) and run "
                 "gpusight --report FILE for its processes and jobs.")


class ExportError(Exception):
    """An export failed; the message (one line) names the path and the reason."""


@dataclass(frozen=True, slots=True)
class ExportResult:
    """The files an export wrote."""

    paths: tuple[Path, ...]
    """Written files: the SVG (when a screenshot was given), the JSON, the Markdown report and the HTML run report."""


def _finite(values: list[float | None]) -> list[float | None]:
    return [None if v is None or not math.isfinite(v) else v for v in values]


def history_to_dict(history: History) -> dict[str, Any]:
    """The chart window as plain data: timestamps, per-device series and host series (null when missing), aligned."""
    with history.reading():
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
    base = time.strftime("gpusight-%Y%m%d-%H%M%S", time.localtime(time.time()))
    with history.reading():  # the JSON and the reports describe the same samples, however the sampler goes on
        document["history"] = history_to_dict(history)
        summary = summarize_history(history)
        report = render_markdown(snapshot, history, summary, base + ".html")
    contents: list[tuple[str, str]] = []
    if svg is not None:
        contents.append((".svg", svg))
    contents.append((".json", json.dumps(document, separators=(",", ":"), allow_nan=False) + "\n"))
    contents.append((".md", report))
    session = f"gpusight session ({snapshot.label or snapshot.source})"
    contents.append((".html", render_html(summary, session, _NO_PROCESSES)))
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ExportError(_describe(directory, exc)) from exc
    temps: list[tuple[Path, str]] = []
    try:
        for suffix, text in contents:
            try:
                temps.append((write_temp(directory, base, text), suffix))
            except OSError as exc:
                raise ExportError(_describe(directory / (base + suffix), exc)) from exc
        paths = _place_exclusively(directory, base, temps, lambda stem: _relink(temps, report, base, stem))
    finally:
        for temp, _ in temps:
            temp.unlink(missing_ok=True)
    _sync_directory(directory)
    return ExportResult(paths)


def _relink(temps: list[tuple[Path, str]], report: str, base: str, stem: str) -> None:
    """Point the Markdown report's link to the HTML report at ``stem``'s name (the set moved off ``base``)."""
    markdown = next(temp for temp, suffix in temps if suffix == ".md")
    with markdown.open("w", encoding="utf-8") as handle:
        handle.write(report.replace(f"]({base}.html)", f"]({stem}.html)").replace(f"[{base}.html]", f"[{stem}.html]"))
        handle.flush()
        os.fsync(handle.fileno())


def _place_exclusively(
    directory: Path, base: str, temps: list[tuple[Path, str]], restem: Callable[[str], None]
) -> tuple[Path, ...]:
    """Give each complete temporary file its final name, under the first stem (``base``, ``base-1``, ...)
    whose names are all free; ``restem(stem)`` is called before trying a stem other than ``base``. A name
    that exists in any form, a dangling symlink included, is never replaced or followed."""
    by_link, n = True, 0
    while True:
        stem = f"{base}-{n}" if n else base
        if n:
            try:
                restem(stem)
            except OSError as exc:
                raise ExportError(_describe(directory / (stem + ".md"), exc)) from exc
        finals = [directory / (stem + suffix) for _, suffix in temps]
        try:
            if _place_under(temps, finals, by_link):
                return tuple(finals)
        except _NoHardLinks:
            by_link = False
            continue
        n += 1


class _NoHardLinks(Exception):
    """The file system cannot make hard links (FAT, some network shares)."""


_NO_HARD_LINK_ERRORS = frozenset({errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.ENOSYS})
"""What ``link()`` fails with on a file system that has no hard links."""


def _place_under(temps: list[tuple[Path, str]], finals: list[Path], by_link: bool) -> bool:
    """Create every name in ``finals`` for its temporary file, or none of them; False when one is taken.

    A hard link is made atomically, never replaces anything and shows the complete file at once.
    Without hard links, every name is first claimed with ``O_EXCL`` and each file then renamed onto
    its claim, so there a name is briefly an empty file.
    """
    made: list[Path] = []
    final = finals[0]
    try:
        for (temp, _), final in zip(temps, finals, strict=True):
            if by_link:
                os.link(temp, final)
            else:
                os.close(os.open(final, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
            made.append(final)
        if not by_link:
            for (temp, _), final in zip(temps, finals, strict=True):
                os.replace(temp, final)
    except FileExistsError:
        _remove(made)
        return False
    except OSError as exc:
        _remove(made)
        if by_link and exc.errno in _NO_HARD_LINK_ERRORS:
            raise _NoHardLinks from exc
        raise ExportError(_describe(final, exc)) from exc
    return True


def _remove(paths: list[Path]) -> None:
    """Remove names this export had just created, when its set cannot be completed under their stem."""
    for path in paths:
        path.unlink(missing_ok=True)
