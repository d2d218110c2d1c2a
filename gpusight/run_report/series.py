"""Downsampling a run of any length into a bounded number of time buckets, keeping each bucket's min, max and mean.

Every series of a report shares one :class:`BucketGrid`: buckets of equal width from the first timestamp. When a
sample falls past the last allowed bucket, the width doubles and neighbouring buckets merge in pairs, so a day at
1 Hz ends in at most ``max_buckets`` buckets while a five-minute run keeps its full resolution. Keeping the minimum
and maximum of each bucket (not only the mean) keeps a stall of a few seconds visible in a day-long plot: the bucket
it falls in shows its minimum near zero. A bucket with no sample is a gap (null), so lines are not drawn across a
stopped recording.
"""

from __future__ import annotations

import math
from array import array

DEFAULT_MAX_BUCKETS = 3000
"""Most buckets a report keeps: a day at 1 Hz ends in buckets of 32 to 64 seconds (1350 to 2700 points)."""

DEFAULT_BUCKET_SECONDS = 0.5
"""Starting bucket width: the default polling period, so a short run is plotted sample by sample."""


class BucketSeries:
    """One metric's buckets on a :class:`BucketGrid`: count, sum, minimum and maximum of the known values."""

    __slots__ = ("_count", "_sum", "_min", "_max")

    def __init__(self) -> None:
        self._count = array("l")
        self._sum = array("d")
        self._min = array("d")
        self._max = array("d")

    def __len__(self) -> int:
        return len(self._count)

    def add(self, bucket: int, value: float) -> None:
        """Add a known ``value`` to ``bucket`` (buckets before it that were never filled are gaps)."""
        count = self._count
        if bucket >= len(count):
            missing = bucket + 1 - len(count)
            count.extend([0] * missing)
            self._sum.extend([0.0] * missing)
            self._min.extend([math.inf] * missing)
            self._max.extend([-math.inf] * missing)
        count[bucket] += 1
        self._sum[bucket] += value
        low = self._min
        if value < low[bucket]:
            low[bucket] = value
        high = self._max
        if value > high[bucket]:
            high[bucket] = value

    def halve(self) -> None:
        """Merge buckets in pairs (the grid's width doubled)."""
        size = (len(self._count) + 1) // 2
        count, total, low, high = array("l"), array("d"), array("d"), array("d")
        for i in range(size):
            a, b = 2 * i, min(2 * i + 1, len(self._count) - 1)
            if a == b:
                count.append(self._count[a])
                total.append(self._sum[a])
                low.append(self._min[a])
                high.append(self._max[a])
                continue
            count.append(self._count[a] + self._count[b])
            total.append(self._sum[a] + self._sum[b])
            low.append(min(self._min[a], self._min[b]))
            high.append(max(self._max[a], self._max[b]))
        self._count, self._sum, self._min, self._max = count, total, low, high

    def columns(self, rows: list[int | None]) -> tuple[list[float | None], list[float | None], list[float | None]]:
        """(minimum, mean, maximum) for each bucket in ``rows``; None for a bucket without a value or a None row."""
        low: list[float | None] = []
        mean: list[float | None] = []
        high: list[float | None] = []
        for i in rows:
            if i is None or i >= len(self._count) or self._count[i] == 0:
                low.append(None)
                mean.append(None)
                high.append(None)
            else:
                low.append(self._min[i])
                mean.append(self._sum[i] / self._count[i])
                high.append(self._max[i])
        return low, mean, high

    def filled(self) -> set[int]:
        """The buckets that hold a value."""
        return {i for i, count in enumerate(self._count) if count}

    @property
    def known(self) -> bool:
        """True when any bucket has a value (False: the metric was never reported)."""
        return any(self._count)


class BucketGrid:
    """The shared time buckets: where a timestamp falls, and the series that halve together."""

    def __init__(self, max_buckets: int = DEFAULT_MAX_BUCKETS, start_width: float = DEFAULT_BUCKET_SECONDS) -> None:
        if max_buckets < 2:
            raise ValueError("max_buckets must be at least 2")
        self.max_buckets = max_buckets
        """Most buckets kept."""
        self.width = start_width
        """Current bucket width in seconds."""
        self.origin: float | None = None
        """Start of the first bucket (the first timestamp)."""
        self.size = 0
        """Buckets in use (one past the last bucket any sample fell in)."""
        self._series: list[BucketSeries] = []

    def series(self) -> BucketSeries:
        """A new series on this grid."""
        created = BucketSeries()
        self._series.append(created)
        return created

    def bucket(self, timestamp: float) -> int:
        """The bucket of ``timestamp`` (not before the origin), widening the grid when it falls past the last."""
        if self.origin is None:
            self.origin = timestamp
        index = int((timestamp - self.origin) // self.width)
        while index >= self.max_buckets:
            self.width *= 2
            for series in self._series:
                series.halve()
            self.size = (self.size + 1) // 2
            index = int((timestamp - self.origin) // self.width)
        self.size = max(self.size, index + 1)
        return max(index, 0)

    def rows(self, gap_seconds: float) -> list[int | None]:
        """The buckets any series has a value in, in order, with None between two that are more than ``gap_seconds``
        apart: plotted, lines join neighbouring samples even when the buckets are finer than the polling period, and
        break at a gap."""
        filled: set[int] = set()
        for series in self._series:
            filled |= series.filled()
        rows: list[int | None] = []
        previous: int | None = None
        for i in sorted(filled):
            if previous is not None and (i - previous) * self.width > gap_seconds:
                rows.append(None)
            rows.append(i)
            previous = i
        return rows

    def times(self, rows: list[int | None]) -> list[float]:
        """The middle of each bucket in ``rows`` (epoch seconds); a None row gets the middle of its neighbours."""
        origin = self.origin or 0.0
        middles = [None if i is None else origin + (i + 0.5) * self.width for i in rows]
        return [m if m is not None else (middles[k - 1] + middles[k + 1]) / 2  # type: ignore[operator]
                for k, m in enumerate(middles)]
