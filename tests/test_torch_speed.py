"""gpusight.torch's speed figures on real CPU training loops: throughput, FLOPs per step, MFU/HFU, the breakdown.

FLOPs are checked against counts worked out by hand from the layer sizes; rates only as ratios of one another
(samples per step), never against durations.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch.utils._python_dispatch import _get_current_dispatch_mode  # noqa: E402

import gpusight.torch as gt  # noqa: E402
from gpusight.backends.host.trainer_status import parse_status  # noqa: E402
from gpusight.snapshot.model import BatchSizeSource, BreakdownSource, FlopsSource, MathMode  # noqa: E402
from gpusight.torch.breakdown import step_shares  # noqa: E402

SIZES = (48, 96, 64, 10)
BATCH = 16


def mlp() -> torch.nn.Module:
    """Linear layers of ``SIZES`` with ReLUs between them."""
    layers: list[torch.nn.Module] = []
    for index, (inputs, outputs) in enumerate(zip(SIZES, SIZES[1:], strict=False)):
        if index:
            layers.append(torch.nn.ReLU())
        layers.append(torch.nn.Linear(inputs, outputs))
    return torch.nn.Sequential(*layers)


def analytic_mlp_flops(batch: int) -> int:
    """One training step of :func:`mlp`: 2*B*in*out per Linear forward; backward twice that (weight and input
    gradients), except the first layer, whose input needs no gradient."""
    total = 0
    for index, (inputs, outputs) in enumerate(zip(SIZES, SIZES[1:], strict=False)):
        forward = 2 * batch * inputs * outputs
        total += forward + (forward if index == 0 else 2 * forward)
    return total


def train(loop, model: torch.nn.Module) -> None:
    """One SGD step per batch of (features, labels)."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for features, labels in loop:
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def batches(count: int, batch: int = BATCH) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``count`` random (features, labels) batches for :func:`mlp`."""
    return [(torch.randn(batch, SIZES[0]), torch.randint(0, SIZES[-1], (batch,))) for _ in range(count)]


def test_counted_flops_of_an_mlp_agree_with_the_analytic_count_and_name_the_utilization_hfu():
    model = mlp()
    watched = gt.watch(batches(12), model=model, publish=False, publish_interval=0.001, peak_tflops=2.0)
    train(watched, model)
    stats = watched.stats()
    expected = analytic_mlp_flops(BATCH)
    assert stats.flops_per_step == pytest.approx(expected, rel=0.02)
    assert stats.flops_source is FlopsSource.COUNTED and stats.flops_source.utilization_name == "HFU"
    assert stats.achieved_tflops == pytest.approx(expected * stats.steps_per_second / 1e12)
    assert stats.flops_utilization_fraction == pytest.approx(stats.achieved_tflops / 2.0)
    assert stats.math_mode is MathMode.FP32 and stats.peak_source == "given"


def test_samples_per_second_come_from_the_batchs_leading_dimension_or_the_given_batch_size():
    model = mlp()
    watched = gt.watch(batches(10, batch=24), model=model, publish=False, publish_interval=0.001)
    train(watched, model)
    stats = watched.stats()
    assert stats.samples_per_second / stats.steps_per_second == pytest.approx(24)
    assert stats.batch_size_source is BatchSizeSource.BATCH
    assert stats.tokens_per_second is None  # float features and 1-d labels hold no token ids

    given = gt.watch(batches(10, batch=24), model=model, publish=False, publish_interval=0.001, batch_size=96)
    train(given, model)
    stats = given.stats()
    assert stats.samples_per_second / stats.steps_per_second == pytest.approx(96)
    assert stats.batch_size_source is BatchSizeSource.GIVEN


class TinyDecoder(torch.nn.Module):
    """Embedding, one linear layer and a head over the vocabulary: a stand-in for a decoder-only language model."""

    def __init__(self, vocabulary: int = 50, width: int = 32) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocabulary, width)
        self.hidden = torch.nn.Linear(width, width)
        self.head = torch.nn.Linear(width, vocabulary)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.hidden(self.embed(input_ids))))


@dataclass
class Encoded:
    """A batch object with attributes, like a framework's model input."""

    attention_mask: torch.Tensor
    input_ids: torch.Tensor


def token_batches(count: int, batch: int = 4, length: int = 12) -> list[dict[str, object]]:
    """Dict batches with a float mask first and the token ids under ``input_ids`` (as a tokenizer gives them)."""
    return [{"attention_mask": torch.ones(batch, length),
             "encoded": Encoded(torch.ones(batch, length), torch.randint(0, 50, (batch, length))),
             "input_ids": torch.randint(0, 50, (batch, length))} for _ in range(count)]


def train_decoder(loop, model: TinyDecoder) -> None:
    """Next-token loss on each batch's ``input_ids``."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for batch in loop:
        ids = batch["input_ids"]
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def test_tokens_per_second_count_the_token_ids_and_6n_is_labelled_an_estimate():
    model = TinyDecoder()
    watched = gt.watch(token_batches(10), model=model, publish=False, publish_interval=0.001, flops="6N",
                       peak_tflops=1.0)
    train_decoder(watched, model)
    stats = watched.stats()
    assert stats.tokens_per_second / stats.steps_per_second == pytest.approx(4 * 12)
    assert stats.samples_per_second / stats.steps_per_second == pytest.approx(4)
    parameters = sum(p.numel() for p in model.parameters())
    assert stats.flops_per_step == pytest.approx(6 * parameters * 4 * 12)
    assert stats.flops_source is FlopsSource.ESTIMATE_6N and stats.flops_source.utilization_name == "MFU"


def test_the_token_ids_are_found_in_a_batch_object_too():
    model = TinyDecoder()
    data = [Encoded(torch.ones(3, 7), torch.randint(0, 50, (3, 7))) for _ in range(6)]
    watched = gt.watch(data, publish=False, publish_interval=0.001, flops=None)
    for batch in watched:
        model(batch.input_ids).sum().backward()
    stats = watched.stats()
    assert stats.tokens_per_second / stats.steps_per_second == pytest.approx(21)
    assert stats.samples_per_second / stats.steps_per_second == pytest.approx(3)


def test_6n_without_token_ids_and_an_unknown_peak_are_na_with_the_reason():
    model = mlp()
    estimated = gt.watch(batches(6), model=model, publish=False, publish_interval=0.001, flops="6N", peak_tflops=1.0)
    train(estimated, model)
    stats = estimated.stats()
    assert stats.flops_per_step is None and stats.flops_utilization_fraction is None
    assert "token ids" in stats.flops_utilization_note

    counted = gt.watch(batches(6), model=model, publish=False, publish_interval=0.001)  # CPU: no peak in any table
    train(counted, model)
    stats = counted.stats()
    assert stats.flops_per_step == pytest.approx(analytic_mlp_flops(BATCH), rel=0.02)
    assert stats.achieved_tflops is not None
    assert stats.peak_tflops is None and stats.flops_utilization_fraction is None
    assert "peak_tflops=" in stats.flops_utilization_note


def test_a_step_without_counted_flops_leaves_them_unknown_with_the_reason():
    model = torch.nn.Sequential(torch.nn.ReLU())  # elementwise only: FlopCounterMode counts nothing
    watched = gt.watch([torch.randn(4, 4, requires_grad=True) for _ in range(6)], model=model, publish=False,
                       publish_interval=0.001, peak_tflops=1.0)
    for batch in watched:
        model(batch).sum().backward()
    stats = watched.stats()
    assert stats.flops_per_step is None and stats.flops_source is None
    assert "counted no FLOPs" in stats.flops_utilization_note


def test_the_counted_step_is_left_out_of_the_throughput():
    model = mlp()
    watched = gt.watch(batches(8), model=model, publish=False, publish_interval=0.001, profile_every=None)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    slowed = 0
    for features, labels in watched:
        if _get_current_dispatch_mode() is not None:  # only the FLOP counter pushes one here
            slowed += 1
            time.sleep(2.0)  # the counted step is slow: it must not show in the rate
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    stats = watched.stats()
    assert slowed == 1
    assert stats.total_steps == 8 and stats.steps == 7
    assert stats.window_seconds < 2.0  # had the counted step been in the window, it alone would fill 2 s


def test_the_record_carries_speed_and_a_breakdown_summing_to_one(tmp_path: Path):
    model = mlp()
    watched = gt.watch(batches(30), model=model, publish_interval=0.001, peak_tflops=0.5, flops_per_step=1e9,
                       profile_every=5, directory=tmp_path / "gpusight")
    train(watched, model)
    status = parse_status(watched.status_path.read_bytes())
    record = json.loads(watched.status_path.read_bytes())
    assert status.flops_source is FlopsSource.GIVEN and status.flops_per_step == 1e9
    assert status.peak_tflops == 0.5 and status.peak_source == "given"
    assert status.flops_utilization_fraction == pytest.approx(status.achieved_tflops / 0.5)
    assert status.achieved_tflops == pytest.approx(1e9 * status.steps_per_second / 1e12)
    assert status.samples_per_second == pytest.approx(BATCH * status.steps_per_second)
    assert status.breakdown_source is BreakdownSource.HOST
    assert sum(status.breakdown.values()) == pytest.approx(1.0, abs=1e-9)
    assert status.breakdown["data"] == pytest.approx(status.input_wait_fraction)
    assert status.breakdown["compute"] > 0 and status.breakdown["copy"] == 0.0
    assert record["breakdown"]["source"] == "host"
    watched.close()


@pytest.mark.parametrize(
    ("intervals", "span", "expected"),
    [
        ([], (0, 10), {"idle": 1.0}),
        ([("compute", 2, 4)], (0, 10), {"compute": 0.2, "idle": 0.8}),
        ([("compute", 0, 6), ("compute", 1, 3)], (0, 10), {"compute": 0.6, "idle": 0.4}),  # nested: once
        ([("compute", 0, 4), ("compute", 2, 6)], (0, 10), {"compute": 0.6, "idle": 0.4}),  # overlapping: once
        ([("communication", 0, 6), ("compute", 4, 8)], (0, 10), {"compute": 0.4, "communication": 0.4, "idle": 0.2}),
        ([("copy", 0, 10), ("communication", 2, 4), ("compute", 3, 5)], (0, 10),
         {"compute": 0.2, "communication": 0.1, "copy": 0.7}),
        ([("compute", -5, 2), ("copy", 9, 20)], (0, 10), {"compute": 0.2, "copy": 0.1, "idle": 0.7}),  # clipped
        ([("compute", 12, 20)], (0, 10), {"idle": 1.0}),  # outside the span
        ([("compute", 1, 2)], (5, 5), {"idle": 1.0}),  # an empty span
    ],
)
def test_step_shares_split_a_span_by_priority(intervals, span, expected):
    shares = step_shares(intervals, *span)
    assert set(shares) == {"compute", "communication", "copy", "idle"}
    assert shares == pytest.approx({part: expected.get(part, 0.0) for part in shares})
    assert sum(shares.values()) == pytest.approx(1.0)


GLOO_JOB = """
import os, sys, time
import torch, torch.distributed as dist
import gpusight.torch as gt

rank = int(sys.argv[1])
dist.init_process_group("gloo", init_method="file://" + sys.argv[2], rank=rank, world_size=2)
model = torch.nn.Linear(64, 64)
tensor = torch.randn(1_000_000)
watched = gt.watch([torch.randn(8, 64) for _ in range(12)], model=model, publish_interval=0.001, profile_every=2,
                   flops=None)
for batch in watched:
    model(batch).sum().backward()
    if rank == 1:
        time.sleep(0.1)  # the slower rank: rank 0 waits for it inside the collective
    dist.all_reduce(tensor)
print(open(watched.status_path).read())
dist.barrier()
dist.destroy_process_group()
"""


def test_a_gloo_all_reduce_job_shows_communication_measured_on_the_host(tmp_path: Path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent(GLOO_JOB))
    base = tmp_path / "run"
    base.mkdir(mode=0o700)
    env = dict(os.environ, XDG_RUNTIME_DIR=str(base), OMP_NUM_THREADS="1")
    ranks = [subprocess.Popen([sys.executable, str(script), str(rank), str(tmp_path / "rendezvous")], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in (0, 1)]
    outputs = [rank.communicate(timeout=180) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0], [err for _, err in outputs]
    first = parse_status(outputs[0][0].strip().splitlines()[-1])
    assert first.breakdown_source is BreakdownSource.HOST
    assert sum(first.breakdown.values()) == pytest.approx(1.0, abs=1e-9)
    assert first.breakdown["communication"] > 0.5  # rank 0 spends most of each step waiting in the all_reduce
    assert first.breakdown["communication"] > first.breakdown["compute"]


def test_a_loop_meter_driven_by_step_callbacks_counts_samples_tokens_and_flops():
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    meter = gt.LoopMeter(model=model, publish=False, publish_interval=0.001, peak_tflops=1.0, profile_every=None)
    meter.begin()
    for features, labels in batches(8):
        meter.batch_arrived(samples=BATCH, tokens=BATCH * 5)  # as a framework's on_step_begin: no batch at hand
        loss = torch.nn.functional.cross_entropy(model(features), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        meter.batch_requested()  # on_step_end
    meter.end()
    stats = meter.stats()
    meter.close()
    assert stats.total_steps == 8
    assert stats.samples_per_second / stats.steps_per_second == pytest.approx(BATCH)
    assert stats.tokens_per_second / stats.steps_per_second == pytest.approx(BATCH * 5)
    assert stats.flops_per_step == pytest.approx(analytic_mlp_flops(BATCH), rel=0.02)


def test_breaking_out_during_the_counted_step_leaves_no_counter_behind_and_the_next_pass_counts():
    model = mlp()
    watched = gt.watch(batches(6), model=model, publish=False, publish_interval=0.001, profile_every=None)
    for index, (features, _) in enumerate(watched):
        model(features).sum().backward()
        if index == 1:  # the step under the FLOP counter
            break
    assert _get_current_dispatch_mode() is None
    assert watched.stats().flops_per_step is None
    train(watched, model)
    assert watched.stats().flops_per_step is not None


def test_the_math_mode_follows_autocast_in_the_forward_pass_and_the_float32_matmul_precision():
    model = mlp()
    watched = gt.watch(batches(6), model=model, publish=False, publish_interval=0.001, flops=None)
    for features, _ in watched:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            model(features).float().sum().backward()
    assert watched.stats().math_mode is MathMode.BF16

    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("high")
    try:
        model = mlp()
        plain = gt.watch(batches(6), model=model, publish=False, publish_interval=0.001, flops=None)
        train(plain, model)
        assert plain.stats().math_mode is MathMode.TF32
    finally:
        torch.set_float32_matmul_precision(before)
