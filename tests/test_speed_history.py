"""The processes' speed on the time grid: who is kept, what a column keeps, how it stays bounded, and the sampler's
frames."""

from __future__ import annotations

import dataclasses
import tracemalloc

from gpusight.facts.speed import BREAKDOWN_FIELDS
from gpusight.sampling.sampler import Sampler
from gpusight.sampling.speed_history import MAX_PROCESSES, SPEED_METRICS, SpeedHistory
from gpusight.sampling.timegrid import DEVICE_GRID, TimeGrid
from gpusight.snapshot.model import DeviceSample, ProcessRole, ProcessSample, Snapshot

PARTS = [name for name, _ in BREAKDOWN_FIELDS]


def trainer(pid: int, steps: float, data: float, **extra: object) -> ProcessSample:
    """A GPU process reporting ``steps`` per second and a breakdown with ``data`` percent of data wait."""
    return ProcessSample(
        pid=pid, device_index=0, name="train", steps_per_second=steps, samples_per_second=steps * 8,
        flops_utilization_percent=steps * 10, step_data_percent=data, step_compute_percent=90.0 - data,
        step_comm_percent=5.0, step_copy_percent=3.0, step_idle_percent=2.0, **extra,
    )


def snap(t: float, *processes: ProcessSample) -> Snapshot:
    return Snapshot(timestamp=t, source="demo", devices=(DeviceSample(index=0),), processes=processes)


def test_only_processes_that_report_speed_are_kept_by_pid() -> None:
    speeds = SpeedHistory()
    silent = ProcessSample(pid=5, device_index=0, name="notebook", gpu_memory_bytes=1)
    worker = dataclasses.replace(trainer(7, 3.0, 10.0), role=ProcessRole.DATALOADER_WORKER)
    view = speeds.append(snap(100.0, silent, trainer(9, 3.0, 10.0), worker))
    assert view.series(0, 9, "steps_per_second", 1) == [3.0]
    assert view.series(0, 9, "samples_per_second", 1) == [24.0]
    assert view.series(0, 5, "steps_per_second", 1) == [None]
    assert view.series(0, 7, "steps_per_second", 1) == [None]
    assert view.levels[0].current is not None and view.levels[0].current.devices == (9,)


def test_a_column_keeps_the_slowest_poll_and_the_largest_share_of_each_part() -> None:
    speeds = SpeedHistory(column_seconds=1.0)
    speeds.append(snap(100.0, trainer(9, 4.0, 10.0)))
    view = speeds.append(snap(100.5, trainer(9, 1.0, 60.0)))  # one slow, input-bound poll in the same second
    assert view.series(0, 9, "steps_per_second", 1) == [1.0]
    assert view.series(0, 9, "flops_utilization_percent", 1) == [10.0]
    assert view.series(0, 9, "step_data_percent", 1) == [60.0]
    assert view.series(0, 9, "step_compute_percent", 1) == [80.0]
    view = speeds.append(snap(101.0, trainer(9, 4.0, 10.0)))
    assert view.series(0, 9, "steps_per_second", 2) == [1.0, 4.0]


def test_breakdown_parts_are_kept_in_the_stacking_order() -> None:
    assert list(SPEED_METRICS.names[-len(PARTS):]) == PARTS
    assert SPEED_METRICS.lowest_wins.isdisjoint(PARTS)


def test_history_stays_bounded_while_many_processes_come_and_go() -> None:
    capacities = (120, 60, 30)
    speeds = SpeedHistory(1.0, (1, 10, 60), capacities)
    tracemalloc.start()
    for step in range(2_000):  # each second 40 trainers; every one lives 5 s, so 16,000 pids in all
        pids = range(step // 5 * 40, step // 5 * 40 + 40)
        view = speeds.append(snap(1000.0 + step, *(trainer(pid, 2.0, 10.0) for pid in pids)))
        if step == 1_000:
            halfway, _ = tracemalloc.get_traced_memory()
    end, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    for level, capacity in zip(view.levels, capacities, strict=True):
        assert level.count <= capacity + capacity // 4
        columns = level.columns[: level.count] + [level.current]
        assert all(column is not None and len(column.devices) <= MAX_PROCESSES for column in columns)
    assert len(view.levels[0].current.devices) == MAX_PROCESSES  # the lowest pids of the 40
    assert end - halfway < 512 * 1024  # no growth with the number of processes seen


def test_the_device_grid_still_keeps_its_own_metrics() -> None:
    assert TimeGrid().metrics is DEVICE_GRID
    assert SpeedHistory().view.levels[0].metrics is SPEED_METRICS


class Feed:
    """A source handing out the snapshot it is given."""

    def __init__(self) -> None:
        self.next: Snapshot | None = None

    def poll(self) -> Snapshot:
        assert self.next is not None
        return self.next

    def close(self) -> None:
        pass


def test_the_sampler_hands_the_speed_history_out_with_each_frame() -> None:
    feed = Feed()
    sampler = Sampler(feed, interval=3600.0)
    for second, steps in enumerate((3.0, 2.0, 5.0)):
        feed.next = snap(500.0 + second, trainer(42, steps, 20.0))
        sampler.poll_once()
    frame = sampler.latest_frame
    assert frame is not None and frame.speeds is not None
    assert frame.speeds.series(0, 42, "steps_per_second", 3, paged=False) == [3.0, 2.0, 5.0]
