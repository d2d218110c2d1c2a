"""End to end: a tiny MLP trained by a real PyTorch Lightning ``Trainer`` with ``GpusightCallback`` (CPU torch),
beside a real ``gpusight --json`` on the fake NVML.

The job (tests/support/lightning_job.py) trains on batches of 64 in-memory samples and validates a slow dataset or
saves a slow checkpoint every 15 batches; the callback is its one line of gpusight. Lightning ships as two packages (``lightning`` and
``pytorch_lightning``), each taking only its own callbacks: each is tried.
"""

from __future__ import annotations

import pytest

from support.framework_jobs import framework_job, measured_record, process_row, wall_clock_step_rate
from support.procs import wait_until

pytest.importorskip("lightning")

from support import lightning_job  # noqa: E402  (imports the framework: after the skip)


def analytic_flops_per_step() -> float:
    """FLOPs of one step of the job's MLP (linear, ReLU, linear), from its sizes.

    A linear layer costs 2 FLOPs per weight and sample forward, as many for its weight gradient, and as many again
    for its input gradient, which only the second layer needs (the features need no gradient). Biases, the ReLU,
    the loss and SGD's update are no matrix multiplications and count no FLOPs.
    """
    first = lightning_job.INPUTS * lightning_job.HIDDEN
    second = lightning_job.HIDDEN * lightning_job.OUTPUTS
    return 2 * lightning_job.BATCH * (2 * first + 3 * second)


@pytest.mark.parametrize(("package", "away", "ending"), [("lightning", "validation", "stopped"),
                                                        ("pytorch_lightning", "checkpoint", "failed")])
def test_a_lightning_fit_with_the_callback_shows_its_speed_and_flops_in_gpusight(package, away, ending, tmp_path,
                                                                                 fake_nvml_lib):
    """Each package's callback. Every 15 batches the fit validates a slow dataset or writes a slow checkpoint; the fit
    ends as asked, or fails (the process lives on, as in a notebook: the record must go all the same)."""
    pytest.importorskip(package)
    args = [*(["--pytorch-lightning"] if package == "pytorch_lightning" else []),
            *(["--checkpoint"] if away == "checkpoint" else []), *(["--fail"] if ending == "failed" else [])]
    with framework_job("lightning_job.py", tmp_path, *args) as job:
        # About half of the job's time goes to validation or checkpoints between steps; its training data is in
        # memory, so the loop itself waits little. That time must count neither as waiting for data nor as stepping.
        record = measured_record(job, dropped=60)  # several of them in the window's past
        wall_rate, record = wall_clock_step_rate(job, record)
        assert record["input_wait_fraction"] < 0.3, record
        assert record["steps_per_second"] > 1.5 * wall_rate, (record, wall_rate)
        row = process_row(job, tmp_path, fake_nvml_lib)
        steps = row["steps_per_second"]
        assert steps > 0
        assert row["samples_per_second"] == pytest.approx(steps * lightning_job.BATCH, rel=0.02)
        assert row["batch_size_source"] == "batch"
        assert row["tokens_per_second"] is None  # float features: no token ids
        assert row["flops_source"] == "counted"
        assert row["flops_per_step"] == pytest.approx(analytic_flops_per_step(), rel=0.02)
        assert (row["peak_tflops"], row["peak_source"]) == (1.0, "given")
        achieved_percent = row["flops_per_step"] * steps / 1e12 / row["peak_tflops"] * 100
        assert row["flops_utilization_percent"] == pytest.approx(achieved_percent, rel=0.05)
        assert row["loader_batch_size"] == lightning_job.BATCH  # the training loader's settings
        assert row["step_data_percent"] is not None and row["breakdown_source"] == "host"
        job.stop_training()
        wait_until(lambda: not job.record_path.exists(), f"the record to go when training has {ending}", timeout=10)
