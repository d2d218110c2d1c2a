"""``gpusight.torch`` logging GPU metrics and the input wait into a real SummaryWriter and a real MLflow run.

A real training loop (CPU torch, a DataLoader whose batches take time) runs in a child process whose
NVML is the fake library; what it logged is read back with TensorBoard's own loader and MLflow's client.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env

pytest.importorskip("torch")
pytest.importorskip("tensorboard")
pytest.importorskip("mlflow")

import subprocess  # noqa: E402

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402

TRAINING = """
import json, sys, time
import torch
from torch.utils.data import DataLoader, Dataset
import gpusight.torch

class Slow(Dataset):
    def __len__(self):
        return 24
    def __getitem__(self, index):
        time.sleep(0.01)  # reading a sample takes time: the loop waits for data
        return torch.full((4,), float(index))

model = torch.nn.Linear(4, 1)
loader = DataLoader(Slow(), batch_size=2)
{setup}
step = 0
for epoch in range(2):
    for batch in {loop}:
        model(batch).sum().backward()
        time.sleep(0.005)
        {body}
        step += 1
{teardown}
"""


def train(tmp_path: Path, library: Path, setup: str, loop: str, teardown: str, env: dict[str, str] | None = None,
          body: str = "pass") -> str:
    """Run the training script with the fake NVML (two GPUs) and return its stdout."""
    scenario = FakeScenario(gpus=[FakeGpu(util_gpu=87, power_mw=312_500, temp=61, mem_used=3 << 30),
                                  FakeGpu(util_gpu=5, power_mw=80_000)]).write(tmp_path / "scenario")
    code = TRAINING.format(setup=textwrap.dedent(setup).strip(), loop=loop, teardown=textwrap.dedent(teardown).strip(),
                           body=body)
    environ = fake_nvml_env(library, scenario, base={**os.environ, **(env or {}), "CUDA_VISIBLE_DEVICES": "0"})
    out = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=180)
    assert out.returncode == 0, out.stderr
    assert "gpusight.torch" not in out.stderr, out.stderr  # no warning: NVML answered, the tracker took every point
    return out.stdout


def test_watch_logs_gpu_metrics_and_input_wait_into_a_summary_writer(tmp_path, fake_nvml_lib):
    runs = tmp_path / "runs"
    train(tmp_path, fake_nvml_lib, f"""
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter({str(runs)!r})
        watched = gpusight.torch.watch(loader, log_to=gpusight.torch.SystemMetrics(writer, every_seconds=0.05), publish=False)
        """, "watched", "writer.close()")
    accumulator = EventAccumulator(str(runs), size_guidance={"scalars": 0})
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert {"gpusight/gpu0/utilization_percent", "gpusight/gpu0/power_watts", "gpusight/gpu0/temperature_celsius",
            "gpusight/gpu0/memory_used_gib", "gpusight/input_wait_percent", "gpusight/steps_per_second"} <= tags
    assert not any(tag.startswith("gpusight/gpu1/") for tag in tags)  # CUDA_VISIBLE_DEVICES=0: only the GPU it uses
    utilization = accumulator.Scalars("gpusight/gpu0/utilization_percent")
    assert {event.value for event in utilization} == {87.0}
    assert {event.value for event in accumulator.Scalars("gpusight/gpu0/power_watts")} == {312.5}
    assert {event.value for event in accumulator.Scalars("gpusight/gpu0/memory_used_gib")} == {3.0}
    steps = [event.step for event in utilization]
    assert steps == sorted(steps) and len(steps) >= 2
    assert 0 <= steps[0] and steps[-1] == 23  # the last batch of the second epoch (12 a pass, counted from 0)
    assert 11 in steps  # each pass ends with a point
    wait = [event.value for event in accumulator.Scalars("gpusight/input_wait_percent")]
    assert all(0.0 < value <= 100.0 for value in wait)


def test_system_metrics_logs_every_nth_step_of_the_programs_own_count(tmp_path, fake_nvml_lib):
    runs = tmp_path / "runs"
    train(tmp_path, fake_nvml_lib, f"""
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter({str(runs)!r})
        metrics = gpusight.torch.SystemMetrics(writer, every_n_steps=5, gpus=[1], prefix="sys/")
        """, "loader", "metrics.close(); writer.close()", body="metrics.step(1000 + step)")
    accumulator = EventAccumulator(str(runs), size_guidance={"scalars": 0})
    accumulator.Reload()
    assert sorted(accumulator.Tags()["scalars"]) == sorted(
        f"sys/gpu1/{name}" for name in ("utilization_percent", "memory_utilization_percent", "memory_used_gib",
                                        "power_watts", "temperature_celsius", "sm_clock_mhz", "memory_clock_mhz"))
    utilization = accumulator.Scalars("sys/gpu1/utilization_percent")
    assert [event.step for event in utilization] == [1000, 1005, 1010, 1015, 1020]
    assert {event.value for event in utilization} == {5.0}
    assert {event.value for event in accumulator.Scalars("sys/gpu1/power_watts")} == {80.0}


def test_watch_logs_into_the_active_mlflow_run(tmp_path, fake_nvml_lib):
    store = tmp_path / "mlruns"
    env = {"MLFLOW_TRACKING_URI": store.as_uri(), "MLFLOW_ALLOW_FILE_STORE": "true"}
    out = train(tmp_path, fake_nvml_lib, """
        import mlflow
        run = mlflow.start_run()
        watched = gpusight.torch.watch(loader, log_to="mlflow", publish=False)
        """, "watched", """
        mlflow.end_run()
        print(json.dumps(run.info.run_id))
        """, env=env)
    run_id = json.loads(out)
    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=store.as_uri())
    history = client.get_metric_history(run_id, "gpusight/gpu0/utilization_percent")
    assert [metric.value for metric in history] and {metric.value for metric in history} == {87.0}
    assert [m.step for m in history] == sorted(m.step for m in history) and history[-1].step == 23
    assert {m.value for m in client.get_metric_history(run_id, "gpusight/gpu0/temperature_celsius")} == {61.0}
    assert client.get_metric_history(run_id, "gpusight/input_wait_percent")
    assert client.get_metric_history(run_id, "gpusight/gpu1/utilization_percent") == []


def test_a_failing_tracker_warns_once_and_never_reaches_the_loop():
    import gpusight.torch
    from gpusight.torch.window import WindowStats

    class Unreachable:
        """A writer whose server is gone."""

        def __init__(self):
            self.calls = 0

        def add_scalar(self, tag, scalar_value, global_step=None, walltime=None):
            self.calls += 1
            raise ConnectionError("tracking server unreachable")

    writer = Unreachable()
    stats = WindowStats(window_seconds=1.0, steps=10, total_steps=10, input_wait_fraction=0.25, steps_per_second=10.0,
                        step_seconds=0.1, wait_seconds=0.025)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gpusight.torch.SystemMetrics(writer, every_n_steps=1) as metrics:  # NVML here: no scenario, no driver
            for step in range(3):
                assert metrics.step(step, stats)
                assert metrics.flush()
    assert writer.calls == 3  # the input wait still goes out; each failure is swallowed
    assert sorted(str(w.message) for w in caught if w.category is RuntimeWarning) == [
        "gpusight.torch: logging system metrics failed: tracking server unreachable",
        "gpusight.torch: no GPU metrics: NVIDIA driver not loaded: the kernel module is not running "
        "(NVML_ERROR_DRIVER_NOT_LOADED)",
    ]


@pytest.mark.parametrize(("log_to", "error"), [("wandb", ValueError), (object(), TypeError)])
def test_an_unknown_tracker_is_refused_at_once(log_to, error):
    import gpusight.torch

    with pytest.raises(error, match='log_to must be a SummaryWriter or "mlflow"'):
        gpusight.torch.watch([1, 2], log_to=log_to, publish=False)


def test_mlflow_without_an_active_run_says_what_to_do(tmp_path, monkeypatch):
    import gpusight.torch

    monkeypatch.setenv("MLFLOW_TRACKING_URI", (tmp_path / "mlruns").as_uri())
    with pytest.raises(ValueError, match=r"needs an active MLflow run: call mlflow.start_run\(\) first"):
        list(gpusight.torch.watch([1, 2], log_to="mlflow", publish=False))


def test_importing_gpusight_and_its_torch_logging_loads_no_tracker_library():
    code = ("import sys, gpusight, gpusight.cli, gpusight.torch.system_metrics, gpusight.convert.tensorboard; "
            "print(sorted(m for m in ('mlflow', 'tensorboard', 'torch.utils.tensorboard') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "[]"


def test_watch_logs_throughput_hfu_and_the_step_time_shares_against_the_step(tmp_path, fake_nvml_lib):
    runs = tmp_path / "runs"
    train(tmp_path, fake_nvml_lib, f"""
        from torch.utils.tensorboard import SummaryWriter
        writer = SummaryWriter({str(runs)!r})
        watched = gpusight.torch.watch(loader, log_to=gpusight.torch.SystemMetrics(writer, every_seconds=0.05),
                                       publish=False, peak_tflops=0.001, profile_every=2, model=model)
        """, "watched", "writer.close()")
    accumulator = EventAccumulator(str(runs), size_guidance={"scalars": 0})
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    parts = ("data", "compute", "communication", "copy", "idle")
    assert {"gpusight/samples_per_second", "gpusight/achieved_tflops", "gpusight/hfu_percent",
            *(f"gpusight/step_time/{part}_percent" for part in parts)} <= tags
    assert "gpusight/mfu_percent" not in tags  # counted FLOPs: the utilization is named HFU
    assert "gpusight/tokens_per_second" not in tags  # float batches hold no token ids: unknown, not 0
    last = {tag: accumulator.Scalars(tag)[-1] for tag in tags if tag.startswith("gpusight/step_time/")}
    assert len({event.step for event in last.values()}) == 1  # one point, logged against one training step
    assert sum(event.value for event in last.values()) == pytest.approx(100.0, abs=1e-3)
    samples = accumulator.Scalars("gpusight/samples_per_second")[-1].value
    rate = accumulator.Scalars("gpusight/steps_per_second")[-1].value
    assert samples == pytest.approx(2 * rate, rel=1e-4)  # two samples a batch
