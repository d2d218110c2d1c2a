"""A job's speed from its ranks: throughput summed, the slowest rank's steps, MFU as summed FLOP/s over summed peaks."""

from __future__ import annotations

import pytest

from gpusight.facts.speed import BREAKDOWN_FIELDS, job_speed, utilization_name
from gpusight.snapshot.model import FlopsSource, JobSample, ProcessRole, ProcessSample, WorkloadKind


def rank(pid: int, **fields: object) -> ProcessSample:
    """A GPU process of job 1 with ``fields``."""
    return ProcessSample(pid=pid, device_index=pid % 8, job=1, **fields)  # type: ignore[arg-type]


def job(*pids: int) -> JobSample:
    """Job 1 made of ``pids``."""
    return JobSample(id=1, kind=WorkloadKind.TRAINING, evidence="test", pids=pids, devices=())


def test_mfu_is_summed_achieved_over_summed_peaks_not_the_mean_of_ratios():
    ranks = [
        rank(1, steps_per_second=2.0, samples_per_second=64.0, achieved_tflops=300.0, peak_tflops=989.5,
             flops_source=FlopsSource.GIVEN),
        rank(2, steps_per_second=1.8, samples_per_second=57.6, achieved_tflops=100.0, peak_tflops=312.0,
             flops_source=FlopsSource.GIVEN),
    ]
    speed = job_speed(job(1, 2), ranks)
    assert speed.flops_utilization_percent == pytest.approx(400.0 / 1301.5 * 100.0)
    assert speed.steps_per_second == 1.8 and speed.samples_per_second == pytest.approx(121.6)
    assert (speed.ranks, speed.reporting, speed.utilization_name) == (2, 2, "MFU")


def test_ranks_without_figures_count_as_unknown_not_zero():
    ranks = [rank(1, steps_per_second=2.0, achieved_tflops=300.0, peak_tflops=989.5), rank(2), rank(3)]
    speed = job_speed(job(1, 2, 3), ranks)
    assert speed.flops_utilization_percent == pytest.approx(300.0 / 989.5 * 100.0)
    assert (speed.reporting, speed.tokens_per_second, speed.breakdown) == (1, None, None)
    nothing = job_speed(job(2, 3), ranks)
    assert nothing.steps_per_second is None and nothing.flops_utilization_percent is None


def test_counted_flops_name_the_utilization_hfu():
    counted = rank(1, achieved_tflops=1.0, peak_tflops=2.0, flops_source=FlopsSource.COUNTED)
    assert job_speed(job(1), [counted]).utilization_name == "HFU" == utilization_name(counted)
    assert utilization_name(rank(2)) == "MFU"


def test_workers_and_other_jobs_rows_are_left_out_and_breakdowns_average_by_part():
    parts = dict(step_data_percent=40.0, step_compute_percent=40.0, step_comm_percent=10.0, step_copy_percent=0.0,
                 step_idle_percent=10.0)
    other = dict(step_data_percent=0.0, step_compute_percent=60.0, step_comm_percent=30.0, step_copy_percent=0.0,
                 step_idle_percent=10.0)
    rows = [rank(1, **parts), ProcessSample(pid=9, role=ProcessRole.DATALOADER_WORKER, trainer_pid=1),
            rank(2, **other), rank(5, step_data_percent=100.0)]
    speed = job_speed(job(1, 2), rows)
    assert speed.breakdown is not None
    assert [label for label, _ in speed.breakdown] == [label for _, label in BREAKDOWN_FIELDS]
    assert dict(speed.breakdown)["communication"] == pytest.approx(20.0)
    assert sum(value for _, value in speed.breakdown) == pytest.approx(100.0)
