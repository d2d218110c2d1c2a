"""``gpusight --convert IN OUT.parquet``: a recording as three tidy Parquet tables in the folder ``OUT.parquet``.

The tables (:mod:`gpusight.convert.parquet_tables`) are written a row group at a time while the recording is read,
so memory stays bounded whatever its length. The folder is written under a temporary name beside ``OUT`` and moved
into place once complete; an existing ``OUT`` is replaced only with ``--force``, and only when it is a folder of
these tables (never another folder). pyarrow comes with the ``parquet`` extra; without it this is one line.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpusight.convert.copying import ConvertError, Tally, copy_snapshots, size_text
from gpusight.convert.parquet_tables import (
    ADVICE,
    ADVICE_COLUMNS,
    GPU_COLUMNS,
    GPUS,
    PARQUET_EXTRA,
    PROCESS_COLUMNS,
    PROCESSES,
    TIMESTAMP,
    AdviceEvents,
    Column,
    row_values,
)

if TYPE_CHECKING:
    from gpusight.recordings.progress import ReadProgress
    from gpusight.snapshot.model import Snapshot

ROW_GROUP_ROWS = 4_096
"""Rows of a table buffered before they are written as a row group."""

TABLE_FILES = tuple(f"{name}.parquet" for name in (GPUS, PROCESSES, ADVICE))
"""The files of an ``OUT.parquet`` folder."""


class _Table:
    """One table being written: its rows buffered by column, flushed as a row group when full."""

    def __init__(self, pa: Any, pq: Any, path: Path, columns: list[tuple[str, type]]) -> None:
        types = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}
        self._pa = pa
        self.schema = pa.schema([(name, types[kind]) for name, kind in columns])
        self._names = [name for name, _ in columns]
        self._buffer: list[list[object]] = [[] for _ in columns]
        self._writer = pq.ParquetWriter(str(path), self.schema, compression="zstd")

    def add(self, row: tuple[object, ...] | list[object]) -> None:
        """Buffer one row (values in column order)."""
        for buffer, value in zip(self._buffer, row, strict=True):
            buffer.append(value)
        if len(self._buffer[0]) >= ROW_GROUP_ROWS:
            self.flush()

    def flush(self) -> None:
        """Write the buffered rows as a row group."""
        if self._buffer[0]:
            arrays = [self._pa.array(values, type=field.type) for values, field in zip(self._buffer, self.schema,
                                                                                       strict=True)]
            self._writer.write_table(self._pa.Table.from_arrays(arrays, schema=self.schema))
            self._buffer = [[] for _ in self._names]

    def close(self) -> None:
        """Flush and close the file."""
        self.flush()
        self._writer.close()


def _columns(columns: tuple[Column, ...]) -> list[tuple[str, type]]:
    return [(TIMESTAMP, float), *((c.name, c.kind) for c in columns)]


def _import_pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        raise ConvertError(f"writing Parquet needs pyarrow: {PARQUET_EXTRA}") from None
    return pyarrow, pyarrow.parquet


def convert_to_parquet(source: Path, target: Path, *, force: bool,
                       progress: ReadProgress | None = None) -> tuple[Tally, str]:
    """Write the tables of ``source`` into the folder ``target``; returns the tally and what was written (for the
    summary line). Raises :class:`ConvertError`."""
    pa, pq = _import_pyarrow()
    _check_target(source, target, force=force)
    partial = target.with_name(f".gpusight-{os.getpid()}-{target.name}")
    try:
        partial.mkdir()
        tables = {
            GPUS: _Table(pa, pq, partial / TABLE_FILES[0], _columns(GPU_COLUMNS)),
            PROCESSES: _Table(pa, pq, partial / TABLE_FILES[1], _columns(PROCESS_COLUMNS)),
            ADVICE: _Table(pa, pq, partial / TABLE_FILES[2], list(ADVICE_COLUMNS)),
        }
        advice = AdviceEvents()

        def write(_: int, snapshot: Snapshot) -> None:
            t = snapshot.timestamp
            for device in snapshot.devices:
                tables[GPUS].add([t, *row_values(device, GPU_COLUMNS)])
            for process in snapshot.processes:
                tables[PROCESSES].add([t, *row_values(process, PROCESS_COLUMNS)])
            for row in advice.events(snapshot):
                tables[ADVICE].add(row)

        try:
            tally = copy_snapshots(source, write, progress)
        finally:
            for table in tables.values():
                table.close()
        _move_into_place(partial, target)
    except OSError as exc:
        raise ConvertError(f"cannot write {target}: {exc.strerror or exc}") from exc
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    size = sum(f.stat().st_size for f in target.iterdir())
    return tally, f"{target} (parquet: {', '.join(TABLE_FILES)}; {size_text(size)})"


def _check_target(source: Path, target: Path, *, force: bool) -> None:
    """Refuse an existing ``target`` without ``force``, and anything but a folder of these tables even with it."""
    if not target.exists():
        return
    if source.exists() and os.path.samefile(source, target):
        raise ConvertError(f"{target} is the recording being converted; choose another OUT")
    if not target.is_dir() or not set(os.listdir(target)) <= set(TABLE_FILES):
        raise ConvertError(f"{target} exists and is not a folder of gpusight's Parquet tables; choose another OUT")
    if not force:
        raise ConvertError(f"{target} exists; add --force to replace it")


def _move_into_place(partial: Path, target: Path) -> None:
    """Rename the finished folder to ``target``, the old one (if any) moved aside first and removed after."""
    if not target.exists():
        os.replace(partial, target)
        return
    old = target.with_name(f".gpusight-{os.getpid()}-old-{target.name}")
    os.replace(target, old)
    try:
        os.replace(partial, target)
    except OSError:
        os.replace(old, target)
        raise
    shutil.rmtree(old, ignore_errors=True)
