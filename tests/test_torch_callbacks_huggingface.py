"""End to end: a tiny GPT-2 trained by a real Hugging Face ``Trainer`` with ``GpusightTrainerCallback`` (CPU torch),
beside a real ``gpusight --json`` on the fake NVML.

The job (tests/support/hf_job.py) accumulates two micro-batches of 4 sequences of 32 tokens per optimizer step and
evaluates a slow dataset (about half its time) every 8 steps; the callback is its one line of gpusight.
"""

from __future__ import annotations

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from support.framework_jobs import framework_job, measured_record, process_row, wall_clock_step_rate
from support.procs import wait_until

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from support import hf_job  # noqa: E402  (imports the framework: after the skip)

SAMPLES_PER_STEP = hf_job.BATCH * hf_job.ACCUMULATE


def analytic_flops_per_step() -> float:
    """Forward and backward FLOPs of one optimizer step of the job's GPT-2, from its sizes.

    Every weight matrix multiplies every token: 2 FLOPs per weight and token forward, 4 backward (6N per token), with
    N = 12 x layers x width^2 (attention 4, MLP 8) plus the tied output projection (vocabulary x width). Attention
    scores and their weighted sum add 4 x sequence^2 x width per sample and layer forward, three times that with the
    backward pass. Embedding lookups, norms and the loss count no FLOPs.
    """
    config = hf_job.CONFIG
    layers, width, vocabulary = config["n_layer"], config["n_embd"], config["vocab_size"]
    tokens = SAMPLES_PER_STEP * hf_job.SEQUENCE
    weights = 12 * layers * width**2 + vocabulary * width
    attention = 3 * 4 * hf_job.SEQUENCE**2 * width * layers * SAMPLES_PER_STEP
    return 6 * weights * tokens + attention


def test_a_trainer_with_the_callback_shows_its_speed_and_flops_in_gpusight(tmp_path, fake_nvml_lib):
    with framework_job("hf_job.py", tmp_path) as job:
        # Half of the job's time goes to evaluating a slow dataset between steps; its training data is in memory, so
        # the loop itself hardly waits. Evaluation must count neither as waiting for data nor as stepping.
        record = measured_record(job, dropped=30)  # several evaluations in the window's past
        wall_rate, record = wall_clock_step_rate(job, record)
        assert record["input_wait_fraction"] < 0.15, record
        assert record["steps_per_second"] > 1.5 * wall_rate, (record, wall_rate)
        row = process_row(job, tmp_path, fake_nvml_lib)
        steps = row["steps_per_second"]
        assert steps > 0
        # An optimizer step is both micro-batches, each sequence 32 tokens; the FLOPs are the whole step's.
        assert row["samples_per_second"] == pytest.approx(steps * SAMPLES_PER_STEP, rel=0.02)
        assert row["tokens_per_second"] == pytest.approx(row["samples_per_second"] * hf_job.SEQUENCE, rel=0.02)
        assert row["batch_size_source"] == "batch"
        assert row["flops_source"] == "counted"  # the FLOPs that ran: its utilization is HFU
        assert row["flops_per_step"] == pytest.approx(analytic_flops_per_step(), rel=0.02)
        assert (row["peak_tflops"], row["peak_source"]) == (1.0, "given")
        achieved_percent = row["flops_per_step"] * steps / 1e12 / row["peak_tflops"] * 100
        assert row["flops_utilization_percent"] == pytest.approx(achieved_percent, rel=0.05)
        assert row["step_data_percent"] is not None and row["breakdown_source"] == "host"
        job.stop_training()
        wait_until(lambda: not job.record_path.exists(), "the record to go when training ends", timeout=10)
    # log_to=: the same figures in the run's tracker, against the optimizer step.
    accumulator = EventAccumulator(str(job.folder / "tensorboard"), size_guidance={"scalars": 0})
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert {"gpusight/samples_per_second", "gpusight/tokens_per_second", "gpusight/hfu_percent"} <= tags
    steps = [event.step for event in accumulator.Scalars("gpusight/samples_per_second")]
    assert steps == sorted(steps) and steps[-1] < int((job.folder / "steps").read_text())
