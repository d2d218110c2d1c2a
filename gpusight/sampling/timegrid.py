"""Chart history on a time grid: each column stands for a fixed period, whatever the polling rate.

The grid is generic over what it stores: rows (by default GPUs, keyed by NVML index) and their metrics (by
default :data:`CHART_METRICS`). :mod:`~gpusight.sampling.speed_history` keeps the processes' speed on one too.

A column holds, per GPU, the maximum of every poll that fell in its period for each of
:data:`CHART_METRICS` (the minimum for a clock), so a one-poll spike is never lost and a faster poll does not make the charts
move faster. The grid keeps several zoom levels at once (by default 1 s, 10 s and 1 min per
column, for the last hour, six hours and day), each bounded, so a day of 8 GPUs fits in a few MiB.

Only the sampler thread writes: :meth:`TimeGrid.append` returns an immutable :class:`ChartView`
that any thread may read while the grid goes on. Completed columns are never changed; a view
shares the grid's append-only column list and reads only the part that existed when it was made.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from gpusight.snapshot.model import Snapshot

CHART_METRICS: tuple[str, ...] = (
    "utilization_gpu_percent",
    "memory_used_bytes",
    "power_watts",
    "temperature_celsius",
    "temperature_junction_celsius",
    "pcie_rx_bytes_per_s",
    "pcie_tx_bytes_per_s",
    "clock_sm_mhz",
    "fan_percent",
    "sm_active_percent",
    "tensor_active_percent",
    "dram_active_percent",
    "decoder_percent",
)
"""DeviceSample fields kept on the grid, in storage order: the five histories of every layout, then the
detail screen's extra charts, then the video decoder (charted while busy)."""

LOWEST_WINS: frozenset[str] = frozenset({"clock_sm_mhz"})
"""Metrics whose column keeps the lowest poll instead of the highest (a clock dip is the event worth seeing)."""

DEFAULT_COLUMN_SECONDS = 1.0
"""Period of one column at the closest zoom level."""

MIN_COLUMN_SECONDS = 0.1
"""Shortest column period accepted (the sampler's shortest interval)."""

MAX_COLUMN_SECONDS = 600.0
"""Longest column period accepted at the closest zoom level."""

ZOOM_FACTORS: tuple[int, ...] = (1, 10, 60)
"""Column period of each zoom level, in multiples of the closest level's."""

LEVEL_COLUMNS: tuple[int, ...] = (3600, 2160, 1440)
"""Columns kept per zoom level: with 1 s columns, the last hour, six hours and day."""

_NAN = math.nan


@dataclass(frozen=True, slots=True, eq=False)
class GridMetrics:
    """What one grid stores for each row: its metrics in storage order, and which keep their lowest poll."""

    names: tuple[str, ...]
    """Metric names in storage order."""
    lowest_wins: frozenset[str] = frozenset()
    """Metrics whose column keeps the lowest poll instead of the highest."""
    max_rows: int | None = None
    """Most rows a column keeps (None: no limit). Rows polled last come first, so the rows dropped from a
    column that saw more within its period are those that left before its last poll."""

    @property
    def width(self) -> int:
        """Values stored per row."""
        return len(self.names)

    def position(self, metric: str) -> int:
        """Where ``metric`` sits among a row's values; KeyError for a metric the grid does not keep."""
        try:
            return self.names.index(metric)
        except ValueError:
            raise KeyError(f"untracked chart metric {metric!r}") from None

    @property
    def lowest_at(self) -> tuple[bool, ...]:
        """Per position, True for a metric whose lowest poll wins."""
        return tuple(name in self.lowest_wins for name in self.names)


DEVICE_GRID = GridMetrics(CHART_METRICS, LOWEST_WINS)
"""The GPU charts' metrics."""


@dataclass(frozen=True, slots=True, eq=False)
class Column:
    """One period of the grid: the per-GPU maxima of every poll within it. Never changed once made."""

    slot: int
    """Which period: ``floor(timestamp / column seconds)``."""
    devices: tuple[int, ...]
    """Keys of the rows stored (NVML indexes of the GPUs on the device grid), in ``values`` order."""
    values: array[float]
    """``len(devices) * width`` float32 values, row-major; NaN where unknown."""
    width: int = len(CHART_METRICS)
    """Values per row (the grid's metric count)."""

    def value(self, device_index: int, metric_position: int) -> float | None:
        """The stored maximum of one row's metric, or None when unknown or the row is not in this column."""
        position = _positions(self.devices).get(device_index)
        if position is None:
            return None
        value = self.values[position * self.width + metric_position]
        return None if value != value else value


@lru_cache(maxsize=64)
def _positions(devices: tuple[int, ...]) -> dict[int, int]:
    """Where each GPU's values start in a column of this device tuple."""
    return {index: position for position, index in enumerate(devices)}


@dataclass(frozen=True, slots=True, eq=False)
class LevelView:
    """One zoom level as it was when the view was made."""

    seconds: float
    """Period of one column."""
    columns: list[Column]
    """Completed columns, oldest first, shared with the grid: only the first ``count`` belong to this view."""
    count: int
    """How many of ``columns`` this view sees."""
    current: Column | None
    """The column still filling (the newest period), or None before the first poll."""
    metrics: GridMetrics = DEVICE_GRID
    """What each row of a column holds."""

    @property
    def newest_slot(self) -> int | None:
        """Slot of the newest column, or None when there is none."""
        if self.current is not None:
            return self.current.slot
        return self.columns[self.count - 1].slot if self.count else None

    def window_start(self, width: int, paged: bool) -> int | None:
        """First slot of a ``width``-column window showing the newest column; None when empty.

        Scrolling puts the newest column at the right edge. Paging moves the window by a quarter of
        its width at a time, so between moves only the newest cell changes; the newest column then
        sits in the last quarter of the window.
        """
        newest = self.newest_slot
        if newest is None or width <= 0:
            return None
        if not paged:
            return newest - width + 1
        step = max(1, width // 4)
        return ((newest - width) // step + 1) * step

    def series(self, device_index: int, metric: str, width: int, *, paged: bool = True) -> list[float | None]:
        """``width`` values of one row's metric on the grid, oldest first; None where no poll fell or it is unknown."""
        metric_position = self.metrics.position(metric)
        out: list[float | None] = [None] * max(0, width)
        start = self.window_start(width, paged)
        if start is None:
            return out
        if self.current is not None:
            _place(out, start, self.current, device_index, metric_position)
        columns = self.columns
        for position in range(self.count - 1, -1, -1):
            column = columns[position]
            if column.slot < start:
                break
            _place(out, start, column, device_index, metric_position)
        return out


def _place(out: list[float | None], start: int, column: Column, device_index: int, metric_position: int) -> None:
    """Put ``column``'s value into ``out`` at its slot's place, if the slot is inside the window."""
    offset = column.slot - start
    if 0 <= offset < len(out):
        out[offset] = column.value(device_index, metric_position)


@dataclass(frozen=True, slots=True, eq=False)
class ChartView:
    """Every zoom level of the grid at one moment; safe to read from any thread."""

    levels: tuple[LevelView, ...]
    """Zoom levels, closest first."""

    def series(
        self, level: int, device_index: int, metric: str, width: int, *, paged: bool = True
    ) -> list[float | None]:
        """``width`` columns of one GPU's ``metric`` at zoom ``level``; see :meth:`LevelView.series`."""
        return self.levels[level].series(device_index, metric, width, paged=paged)

    def span_seconds(self, level: int, width: int) -> float:
        """How much time ``width`` columns of zoom ``level`` cover."""
        return self.levels[level].seconds * max(0, width)


class TimeGrid:
    """The writer side: folds each snapshot into every zoom level and hands out views.

    Written by one thread only (the sampler's). Each level keeps at most its capacity plus a
    quarter of completed columns; older ones are dropped by starting a new list, so views made
    earlier keep reading the old one unchanged. Every level places a poll by the same closest-level
    slot (a coarser level's slot is that slot floor-divided by its factor), so a coarse column is
    always exactly the maximum (or minimum) of the closest-level columns within it. A timestamp that goes back
    to an earlier closest-level column (a recording that jumps back, a clock stepped back) starts
    every level afresh.
    """

    def __init__(
        self,
        column_seconds: float = DEFAULT_COLUMN_SECONDS,
        zoom_factors: Sequence[int] = ZOOM_FACTORS,
        capacities: Sequence[int] = LEVEL_COLUMNS,
        metrics: GridMetrics = DEVICE_GRID,
    ) -> None:
        if not MIN_COLUMN_SECONDS <= column_seconds <= MAX_COLUMN_SECONDS:
            raise ValueError(
                f"column period must be {MIN_COLUMN_SECONDS} to {MAX_COLUMN_SECONDS} s, not {column_seconds}"
            )
        if len(zoom_factors) != len(capacities) or not zoom_factors:
            raise ValueError("each zoom level needs one capacity")
        if any(factor < 1 for factor in zoom_factors) or any(capacity < 1 for capacity in capacities):
            raise ValueError("zoom factors and capacities must be at least 1")
        self.column_seconds = column_seconds
        """Period of one column at the closest zoom level."""
        self.metrics = metrics
        """What each row holds."""
        self._levels = [
            _Level(column_seconds, factor, capacity, metrics)
            for factor, capacity in zip(zoom_factors, capacities, strict=True)
        ]
        self._devices: tuple[int, ...] = ()
        self._view = ChartView(tuple(level.view() for level in self._levels))

    @property
    def zoom_factors(self) -> tuple[int, ...]:
        """Each zoom level's column period as a multiple of ``column_seconds``."""
        return tuple(level.factor for level in self._levels)

    @property
    def capacities(self) -> tuple[int, ...]:
        """Each zoom level's number of columns kept."""
        return tuple(level.capacity for level in self._levels)

    @property
    def view(self) -> ChartView:
        """The newest view (empty before the first snapshot)."""
        return self._view

    def reset(self) -> ChartView:
        """Forget every column (a replay jumped to another time); views made earlier are unchanged. Returns the
        empty view."""
        for level in self._levels:
            level.reset()
        self._view = ChartView(tuple(level.view() for level in self._levels))
        return self._view

    def append(self, snapshot: Snapshot) -> ChartView:
        """Fold ``snapshot``'s GPUs into every level of a device grid; return the new view."""
        values = [
            _NAN if (value := getattr(device, name)) is None else float(value)
            for device in snapshot.devices
            for name in self.metrics.names
        ]
        return self.add_rows(snapshot.timestamp, tuple(device.index for device in snapshot.devices), values)

    def add_rows(self, timestamp: float, keys: tuple[int, ...], values: list[float]) -> ChartView:
        """Fold one poll into every level: the rows ``keys`` with ``values`` (row-major, NaN where unknown, one
        per metric of each row); return the new view."""
        devices = keys
        if devices == self._devices:
            devices = self._devices  # one shared tuple for every column while the rows stay the same
        self._devices = devices
        slot = math.floor(timestamp / self.column_seconds)
        newest = self._levels[0].current
        if newest is not None and slot < newest.slot:
            for level in self._levels:
                level.reset()
        for level in self._levels:
            level.add(slot // level.factor, devices, values)
        self._view = ChartView(tuple(level.view() for level in self._levels))
        return self._view


class _Level:
    """One zoom level's storage (writer side)."""

    __slots__ = ("seconds", "factor", "capacity", "metrics", "columns", "current")

    def __init__(self, column_seconds: float, factor: int, capacity: int, metrics: GridMetrics) -> None:
        self.seconds = column_seconds * factor
        self.factor = factor
        self.capacity = capacity
        self.metrics = metrics
        self.columns: list[Column] = []
        self.current: Column | None = None

    def reset(self) -> None:
        """Forget every column (into a new list: views made earlier keep the old one)."""
        self.columns, self.current = [], None

    def add(self, slot: int, devices: tuple[int, ...], values: list[float]) -> None:
        current = self.current
        width = self.metrics.width
        if current is not None and slot == current.slot:
            devices, merged = _merge(current, devices, values, self.metrics.lowest_at)
            limit = self.metrics.max_rows
            if limit is not None and len(devices) > limit:
                devices, merged = devices[:limit], merged[: limit * width]
            self.current = Column(slot, devices, array("f", merged), width)
            return
        if current is not None:
            self.columns.append(current)
            if len(self.columns) >= self.capacity + max(1, self.capacity // 4):
                self.columns = self.columns[-self.capacity :]
        self.current = Column(slot, devices, array("f", values), width)

    def view(self) -> LevelView:
        return LevelView(self.seconds, self.columns, len(self.columns), self.current, self.metrics)


def _merge(
    column: Column, devices: tuple[int, ...], values: list[float], lowest_at: tuple[bool, ...]
) -> tuple[tuple[int, ...], list[float]]:
    """The rows and values of ``column`` after one more poll of ``devices`` with ``values``.

    Each value is the larger of the two (the smaller where ``lowest_at`` is True, per metric position), a missing
    (NaN) one never winning; a row only in ``column`` keeps its values (it was seen earlier in the
    period), one only in the poll is added.
    """
    kept: Sequence[float] = column.values
    if devices != column.devices:
        devices, values, kept = _align(column, devices, values)
    # NaN is missing; a comparison with a NaN ``old`` is False, so a number is never replaced by it.
    merged = [old if new != new or old > new else new for new, old in zip(values, kept, strict=True)]
    for position in _lowest_positions(len(devices), lowest_at):
        new, old = values[position], kept[position]
        merged[position] = old if new != new or old < new else new
    return devices, merged


def _align(
    column: Column, devices: tuple[int, ...], values: list[float]
) -> tuple[tuple[int, ...], list[float], list[float]]:
    """``devices`` and ``values`` of a poll, and ``column``'s values in the same GPU order, NaN where it has none.

    Rows only in ``column`` are added at the end, with NaN as the poll's values.
    """
    width = column.width
    old = column.values
    before = _positions(column.devices)
    kept: list[float] = []
    for index in devices:
        position = before.get(index)
        kept.extend([_NAN] * width if position is None else old[position * width : (position + 1) * width])
    polled = _positions(devices)
    extra = tuple(index for index in column.devices if index not in polled)
    values = list(values)
    for index in extra:
        position = before[index]
        kept.extend(old[position * width : (position + 1) * width])
        values.extend([_NAN] * width)
    return devices + extra, values, kept


@lru_cache(maxsize=64)
def _lowest_positions(device_count: int, lowest_at: tuple[bool, ...]) -> tuple[int, ...]:
    """Where the lowest-wins metrics (True in ``lowest_at``, per metric position) sit in a column of ``device_count`` rows."""
    width = len(lowest_at)
    return tuple(
        device * width + offset
        for device in range(device_count)
        for offset, lowest in enumerate(lowest_at)
        if lowest
    )
