"""The chart time grid: per-period maxima, gaps, windows, zoom levels, resets, bounds and immutable views."""

from __future__ import annotations

import tracemalloc

import pytest

from gpusight.sampling.timegrid import (
    CHART_METRICS,
    LEVEL_COLUMNS,
    MAX_COLUMN_SECONDS,
    MIN_COLUMN_SECONDS,
    ZOOM_FACTORS,
    LevelView,
    TimeGrid,
)
from gpusight.snapshot.model import DeviceSample, Snapshot

POWER = "power_watts"


def snap(t: float, *devices: DeviceSample) -> Snapshot:
    return Snapshot(timestamp=t, source="demo", devices=devices)


def gpu(index: int, power: float | None = None, **metrics: float | None) -> DeviceSample:
    return DeviceSample(index=index, power_watts=power, **metrics)  # type: ignore[arg-type]


def fill(grid: TimeGrid, polls: list[tuple[float, float | None]], index: int = 0) -> None:
    for t, power in polls:
        grid.append(snap(t, gpu(index, power)))


def by_slot(level: LevelView, index: int, metric: str = POWER) -> dict[int, float | None]:
    """Every column this view sees, as slot -> value."""
    columns = level.columns[: level.count] + ([level.current] if level.current is not None else [])
    return {column.slot: column.value(index, CHART_METRICS.index(metric)) for column in columns}


# --- one column: the maximum of its polls, None only when nothing is known ---------------------------------


@pytest.mark.parametrize(
    ("polls", "expected"),
    [
        pytest.param([(0.0, 10.0), (0.25, 90.0), (0.5, 20.0), (0.75, 15.0)], [90.0], id="one-poll-spike-survives"),
        pytest.param([(0.0, 90.0), (0.1, 1.0), (0.2, 1.0), (0.9, 1.0)], [90.0], id="spike-first"),
        pytest.param([(0.99, 90.0), (0.1, 1.0)], [90.0], id="out-of-order-within-the-column"),
        pytest.param([(0.0, None), (0.3, 5.0), (0.6, None)], [5.0], id="none-never-wins"),
        pytest.param([(0.0, None), (0.5, 0.0)], [0.0], id="zero-is-a-number"),
        pytest.param([(0.0, None), (0.5, None)], [None], id="only-none-reads-none"),
        pytest.param([(0.5, 1.0), (1.5, 2.0), (2.5, 3.0)], [1.0, 2.0, 3.0], id="one-poll-per-column"),
        pytest.param([(0.5, 1.0), (3.5, 4.0)], [1.0, None, None, 4.0], id="gap-reads-none"),
        pytest.param([(0.5, 1.0), (1.2, None), (2.5, 3.0)], [1.0, None, 3.0], id="unknown-column-between"),
        pytest.param([(0.1, 7.0), (5.9, 8.0)], [7.0, None, None, None, None, 8.0], id="long-gap"),
    ],
)
def test_a_column_holds_the_maximum_of_its_polls(polls, expected):
    grid = TimeGrid(1.0)
    fill(grid, polls)
    assert grid.view.series(0, 0, POWER, len(expected), paged=False) == expected


def test_every_chart_metric_is_kept_and_others_are_not():
    grid = TimeGrid(1.0)
    values = {"utilization_gpu_percent": 75.0, "memory_used_bytes": 2.0**33, "power_watts": 250.0,
              "temperature_celsius": 66.0, "temperature_junction_celsius": 79.0, "pcie_rx_bytes_per_s": 2.0**20, "pcie_tx_bytes_per_s": 2.0**21,
              "clock_sm_mhz": 1980.0, "fan_percent": 40.0, "sm_active_percent": 90.0, "tensor_active_percent": 12.5,
              "dram_active_percent": 33.0, "decoder_percent": 93.0}
    assert set(values) == set(CHART_METRICS)
    grid.append(snap(0.0, DeviceSample(index=0, **values, utilization_memory_percent=10.0)))  # type: ignore[arg-type]
    for metric, value in values.items():
        assert grid.view.series(0, 0, metric, 1) == [value]
    with pytest.raises(KeyError):
        grid.view.series(0, 0, "utilization_memory_percent", 1)


@pytest.mark.parametrize(
    ("clocks", "expected"),
    [
        pytest.param([1980, 1410, 1980], 1410.0, id="a-dip-survives"),
        pytest.param([None, 1755, None], 1755.0, id="none-never-wins"),
        pytest.param([None, None], None, id="only-none"),
    ],
)
def test_a_clock_column_keeps_its_lowest_poll(clocks, expected):
    grid = TimeGrid(1.0)
    for k, clock in enumerate(clocks):
        grid.append(snap(k * 0.2, DeviceSample(index=0, clock_sm_mhz=clock, power_watts=float(k))))
        grid.append(snap(k * 0.2 + 0.1, DeviceSample(index=1, clock_sm_mhz=clock), DeviceSample(index=0, clock_sm_mhz=clock)))
    assert grid.view.series(0, 0, "clock_sm_mhz", 1) == [expected]
    assert grid.view.series(0, 1, "clock_sm_mhz", 1) == [expected]
    assert grid.view.series(0, 0, POWER, 1) == [float(len(clocks) - 1)]


def test_values_are_single_precision_but_close():
    grid = TimeGrid(1.0)
    grid.append(snap(0.0, DeviceSample(index=0, memory_used_bytes=79_123_456_789, power_watts=312.345)))
    [memory] = grid.view.series(0, 0, "memory_used_bytes", 1)
    [power] = grid.view.series(0, 0, POWER, 1)
    assert memory == pytest.approx(79_123_456_789, rel=1e-6)
    assert power == pytest.approx(312.345, rel=1e-6)


def test_an_empty_grid_reads_none_everywhere():
    view = TimeGrid().view
    for level in range(len(ZOOM_FACTORS)):
        assert view.series(level, 0, POWER, 5) == [None] * 5
        assert view.levels[level].window_start(5, paged=True) is None
        assert view.levels[level].newest_slot is None
    assert view.series(0, 0, POWER, 0) == []


@pytest.mark.parametrize("seconds", [0.0, MIN_COLUMN_SECONDS / 2, MAX_COLUMN_SECONDS * 2, -1.0])
def test_a_column_period_out_of_range_is_refused(seconds):
    with pytest.raises(ValueError, match="column period"):
        TimeGrid(seconds)


def test_a_column_period_of_the_given_seconds():
    grid = TimeGrid(2.5)
    fill(grid, [(0.0, 1.0), (2.4, 5.0), (2.5, 3.0), (7.4, 9.0)])
    assert grid.view.series(0, 0, POWER, 3, paged=False) == [5.0, 3.0, 9.0]
    assert [level.seconds for level in grid.view.levels] == [2.5 * f for f in ZOOM_FACTORS]
    assert grid.view.span_seconds(1, 60) == 2.5 * 10 * 60


# --- window placement: paged and scrolled ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("newest", "width", "paged", "start"),
    [
        (0, 8, False, -7),
        (8, 8, False, 1),
        (7, 8, True, 0),  # the first page: newest at the right edge
        (8, 8, True, 2),  # one past the edge: the window moves a quarter (2 columns)
        (9, 8, True, 2),  # newest now in the last quarter, one from the edge
        (10, 8, True, 4),
        (100, 40, True, 70),  # newest at offset 30, the first place of the last quarter
        (109, 40, True, 70),  # ... and at the right edge
        (110, 40, True, 80),
        (5, 3, True, 3),  # a width under 4 moves one column at a time, like scrolling
        (5, 3, False, 3),
        (13, 10, True, 4),  # width 10: step 2, newest in the last 2 columns
        (14, 10, True, 6),
    ],
)
def test_window_start(newest, width, paged, start):
    grid = TimeGrid(1.0)
    grid.append(snap(newest + 0.5, gpu(0, 1.0)))
    assert grid.view.levels[0].window_start(width, paged) == start


@pytest.mark.parametrize("width", [4, 8, 10, 37, 120])
def test_paged_windows_move_by_a_quarter_with_the_newest_in_the_last_quarter(width):
    grid = TimeGrid(1.0)
    step = width // 4
    starts = []
    for slot in range(5 * width):
        level = grid.append(snap(slot + 0.5, gpu(0, float(slot)))).levels[0]
        start = level.window_start(width, paged=True)
        assert start is not None
        assert width - step <= slot - start < width
        assert start % step == 0
        starts.append(start)
        series = level.series(0, POWER, width, paged=True)
        assert series[slot - start] == slot
        assert series[slot - start + 1 :] == [None] * (width - 1 - (slot - start))
    moves = {b - a for a, b in zip(starts, starts[1:], strict=False)}
    assert moves == ({step} if step == 1 else {0, step})
    # Between moves only the newest cell changes: the window moved on only every ``step`` slots.
    assert sum(1 for a, b in zip(starts, starts[1:], strict=False) if a != b) == pytest.approx(len(starts) / step, abs=2)


def test_scrolled_windows_keep_the_newest_column_at_the_right_edge():
    grid = TimeGrid(1.0)
    for slot in range(30):
        view = grid.append(snap(slot + 0.25, gpu(0, float(slot))))
        series = view.series(0, 0, POWER, 8, paged=False)
        assert series[-1] == slot
        assert series == [float(s) if s >= 0 else None for s in range(slot - 7, slot + 1)]


def test_paged_and_scrolled_series_of_the_same_view():
    grid = TimeGrid(1.0)
    fill(grid, [(s + 0.5, float(s)) for s in range(9)])
    assert grid.view.series(0, 0, POWER, 8, paged=True) == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, None]
    assert grid.view.series(0, 0, POWER, 8, paged=False) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0]


# --- zoom levels ---------------------------------------------------------------------------------------------


def _wave(step: int) -> float | None:
    """A deterministic, spiky, sometimes unknown value."""
    if step % 17 == 3:
        return None
    return float((step * 7919) % 1000) / 10.0


@pytest.mark.parametrize("column_seconds", [0.1, 0.25, 1.0, 3.0, 7.0])
@pytest.mark.parametrize("start", [0.0, 1_700_000_000.05])
def test_each_coarser_column_is_the_maximum_of_the_closer_columns_within_it(column_seconds, start):
    grid = TimeGrid(column_seconds)
    poll = column_seconds / 3
    steps = int(130 * column_seconds * 10 / poll)  # thirteen 10x columns, two 60x ones
    for step in range(steps):
        devices = [gpu(0, _wave(step))]
        if step % 5:
            devices.append(gpu(1, _wave(step + 1)))
        grid.append(snap(start + step * poll, *devices))
    _check_levels_agree(grid, (0, 1, 2))


def _check_levels_agree(grid: TimeGrid, indexes: tuple[int, ...]) -> None:
    levels = grid.view.levels
    for fine_level, coarse_level in ((0, 1), (1, 2)):
        factor = ZOOM_FACTORS[coarse_level] // ZOOM_FACTORS[fine_level]
        for index in indexes:
            fine = by_slot(levels[fine_level], index)
            coarse = by_slot(levels[coarse_level], index)
            assert set(coarse) == {slot // factor for slot in fine}
            for slot, value in coarse.items():
                known = [v for s, v in fine.items() if s // factor == slot and v is not None]
                assert value == (max(known) if known else None), (index, fine_level, slot)


@pytest.mark.parametrize("column_seconds", [0.7, 1.1])
def test_polls_on_column_boundaries_fall_in_the_same_period_at_every_level(column_seconds):
    # 30 * 1.1 is 33.0: 29.99... periods of 1.1 s (column 29, part of 11 s column 2) but exactly 3 periods of
    # 11 s. Dividing by each level's own period would put such a poll in 11 s column 3 and 1.1 s column 29.
    grid = TimeGrid(column_seconds)
    for m in range(1, 1500):
        grid.append(snap(m * column_seconds, gpu(0, float(m % 97))))
    _check_levels_agree(grid, (0,))


def test_a_spike_shows_at_every_zoom_level():
    grid = TimeGrid(1.0)
    fill(grid, [(t * 0.5, 900.0 if t == 1001 else 10.0) for t in range(1400)])
    assert [max(v for v in grid.view.series(level, 0, POWER, 2000) if v is not None) for level in range(3)] == [900.0] * 3


# --- devices coming and going -------------------------------------------------------------------------------


def test_a_gpu_appearing_mid_run_reads_none_before():
    grid = TimeGrid(1.0)
    grid.append(snap(0.5, gpu(0, 1.0)))
    grid.append(snap(1.5, gpu(0, 2.0)))
    grid.append(snap(2.2, gpu(0, 3.0)))
    grid.append(snap(2.7, gpu(0, 3.0), gpu(1, 50.0)))  # mid-column
    grid.append(snap(3.5, gpu(1, 60.0), gpu(0, 4.0)))  # another order
    assert grid.view.series(0, 1, POWER, 4, paged=False) == [None, None, 50.0, 60.0]
    assert grid.view.series(0, 0, POWER, 4, paged=False) == [1.0, 2.0, 3.0, 4.0]


def test_a_gpu_leaving_mid_column_keeps_what_it_showed_in_that_column():
    grid = TimeGrid(1.0)
    grid.append(snap(3.0, gpu(0, 1.0), gpu(1, 50.0)))
    grid.append(snap(3.5, gpu(0, 2.0)))  # GPU 1 gone mid-column
    assert grid.view.series(0, 1, POWER, 1) == [50.0]
    grid.append(snap(3.7, gpu(0, 0.5), gpu(1, 20.0)))  # back within the same column: still the maximum
    grid.append(snap(3.9, gpu(0, 0.5)))
    grid.append(snap(4.5, gpu(0, 3.0)))
    assert grid.view.series(0, 1, POWER, 2, paged=False) == [50.0, None]
    assert grid.view.series(0, 0, POWER, 2, paged=False) == [2.0, 3.0]
    assert grid.view.series(1, 1, POWER, 1) == [50.0]


def test_a_gpu_that_was_never_seen_reads_none():
    grid = TimeGrid(1.0)
    fill(grid, [(0.5, 1.0), (1.5, 2.0)])
    assert grid.view.series(0, 7, POWER, 3, paged=False) == [None, None, None]


def test_a_lost_gpu_keeps_the_maximum_of_the_polls_before_it_was_lost():
    grid = TimeGrid(1.0)
    grid.append(snap(0.1, gpu(0, 300.0, temperature_celsius=80.0)))
    grid.append(snap(0.6, DeviceSample(index=0, lost=True, error="fell off the bus")))
    grid.append(snap(1.6, DeviceSample(index=0, lost=True, error="fell off the bus")))
    assert grid.view.series(0, 0, "temperature_celsius", 2, paged=False) == [80.0, None]


# --- time going backwards -----------------------------------------------------------------------------------


def test_time_going_back_to_an_earlier_column_starts_every_level_afresh():
    grid = TimeGrid(1.0)
    fill(grid, [(1000.0 + t, 100.0) for t in range(200)])
    before = grid.view
    grid.append(snap(5.5, gpu(0, 7.0)))  # a recording that jumps back, a clock stepped back
    for level, factor in zip(grid.view.levels, ZOOM_FACTORS, strict=True):
        assert level.count == 0
        assert level.newest_slot == 5 // factor
    assert grid.view.series(0, 0, POWER, 3, paged=False) == [None, None, 7.0]
    assert grid.view.series(2, 0, POWER, 3, paged=False) == [None, None, 7.0]
    assert before.series(0, 0, POWER, 3, paged=False) == [100.0] * 3  # an older view is untouched


def test_time_going_back_within_the_current_column_is_one_more_poll_of_it():
    grid = TimeGrid(1.0)
    fill(grid, [(9.5, 1.0), (10.7, 5.0), (10.2, 2.0)])
    assert grid.view.series(0, 0, POWER, 2, paged=False) == [1.0, 5.0]


# --- bounds -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("factors", "capacities"), [((1, 10), (40, 8)), ((1,), (1,)), ((1, 3), (5, 2))])
def test_completed_columns_stay_within_capacity_and_a_quarter(factors, capacities):
    grid = TimeGrid(1.0, factors, capacities)
    for t in range(10_000):
        view = grid.append(snap(t + 0.5, gpu(0, float(t))))
        for level, capacity in zip(view.levels, capacities, strict=True):
            assert level.count <= capacity + capacity // 4
            assert level.count >= min(capacity, t // level.seconds)  # trimming never cuts into the capacity
    for level, capacity in zip(grid.view.levels, capacities, strict=True):
        series = level.series(0, POWER, capacity + 1, paged=False)  # the capacity plus the column still filling
        assert None not in series
        assert series[-1] == 9999.0


def test_default_levels_over_a_long_run():
    grid = TimeGrid()
    for t in range(0, 200_000, 7):
        grid.append(snap(float(t), gpu(0, 1.0)))
    for level, capacity in zip(grid.view.levels, LEVEL_COLUMNS, strict=True):
        assert capacity <= level.count <= capacity + capacity // 4


# --- immutability -------------------------------------------------------------------------------------------


def _everything(view, width: int) -> list[list[float | None]]:
    return [
        view.series(level, index, metric, width, paged=paged)
        for level in range(len(view.levels))
        for index in (0, 1, 2)
        for metric in CHART_METRICS
        for paged in (True, False)
    ]


def test_a_view_never_changes_while_the_grid_goes_on():
    grid = TimeGrid(1.0, ZOOM_FACTORS, (120, 60, 30))
    taken = []
    t = 500.0
    for step in range(12_000):
        devices = [DeviceSample(index=0, power_watts=float(step), temperature_celsius=float(step % 90))]
        if step % 3:
            devices.append(DeviceSample(index=2, utilization_gpu_percent=float(step % 101)))
        t = 50.0 if step == 9_000 else t + 0.4  # a jump back late in the run
        view = grid.append(snap(t, *devices))
        if step in (5, 999, 2_000, 8_999):
            taken.append((view, _everything(view, 200), [level.newest_slot for level in view.levels]))
    for view, series, newest in taken:
        assert _everything(view, 200) == series
        assert [level.newest_slot for level in view.levels] == newest


# --- memory -------------------------------------------------------------------------------------------------

DAY_GRID_LIMIT = 8 << 20
"""Most memory a day of 1 s columns of 8 GPUs may take ("a day fits in a few MiB")."""


def test_a_day_of_one_second_columns_for_eight_gpus_fits_in_a_few_mib():
    variants = [
        tuple(
            DeviceSample(index=index, utilization_gpu_percent=float((k * 7 + index) % 101), memory_used_bytes=(k % 80) << 30,
                         power_watts=300.0 + k, temperature_celsius=60.0 + k % 20, pcie_rx_bytes_per_s=1e9 + k,
                         pcie_tx_bytes_per_s=2e9, clock_sm_mhz=1980 - k, fan_percent=None, sm_active_percent=50.0,
                         tensor_active_percent=10.0, dram_active_percent=20.0)
            for index in range(8)
        )
        for k in range(60)
    ]
    start = 1_700_000_000.5
    tracemalloc.start()
    try:
        grid = TimeGrid(1.0)
        for second in range(86_400):  # one poll per closest-level column, a day long
            grid.append(Snapshot(timestamp=start + second, source="demo", devices=variants[second % 60]))
        used, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    levels = grid.view.levels
    assert all(level.count >= capacity for level, capacity in zip(levels, LEVEL_COLUMNS, strict=True))  # all full
    assert used < DAY_GRID_LIMIT, f"{used / (1 << 20):.2f} MiB"
