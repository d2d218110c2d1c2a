"""The exporter's job speed families: throughput, FLOP/s in base units, MFU/HFU and step-time parts, bounded.

Snapshots go through a real ``prometheus_client`` registry and ``generate_latest`` and are parsed back; promtool
lints the text. ``test_a_real_trainer_record_is_served_by_gpusight_serve`` runs ``gpusight --serve`` on the fake
NVML with a live process publishing a trainer status record, as ``gpusight.torch`` does.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
from prometheus_client.samples import Sample

from gpusight import metric_names as names
from gpusight.prometheus_exporter.families import ExportOptions, SnapshotCollector
from gpusight.snapshot.model import FlopsSource, JobSample, ProcessSample, Snapshot, SourceKind, WorkloadKind
from support.exporter import serving
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.trainer_record import publishing_trainer

NOW = 1_800_000_000.0
SPEED_FAMILIES = (names.JOB_STEPS, names.JOB_SAMPLES, names.JOB_TOKENS, names.JOB_FLOPS, names.JOB_PEAK_FLOPS,
                  names.JOB_FLOPS_UTILIZATION, names.JOB_STEP_TIME)


def _registry(snapshot: Snapshot, **options: object) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(lambda: snapshot, ExportOptions(hostname="n1", **options),  # type: ignore[arg-type]
                                        clock=lambda: NOW))
    return registry


def _scrape(snapshot: Snapshot, **options: object) -> dict[str, list[Sample]]:
    text = generate_latest(_registry(snapshot, **options)).decode()
    return {f.name: f.samples for f in text_string_to_metric_families(text)}


def _rank(pid: int, device: int, job: int, rank: int, **fields: object) -> ProcessSample:
    return ProcessSample(pid, device_index=device, gpu_memory_bytes=(pid % 7 + 1) << 30, job=job, rank=rank,
                         name="python", **fields)  # type: ignore[arg-type]


def _fast(pid: int, device: int, job: int, rank: int, steps: float, achieved: float, peak: float = 989.0,
          source: FlopsSource = FlopsSource.ESTIMATE_6N, **fields: object) -> ProcessSample:
    """A rank reporting speed: 32 samples and 65 536 tokens a step, FLOP/s and a peak in TFLOP/s."""
    return _rank(pid, device, job, rank, steps_per_second=steps, samples_per_second=32 * steps,
                 tokens_per_second=65536 * steps, flops_per_step=achieved * 1e12 / steps, flops_source=source,
                 achieved_tflops=achieved, peak_tflops=peak, flops_utilization_percent=achieved / peak * 100,
                 **fields)


def _by_job(samples: list[Sample]) -> dict[str, float]:
    return {s.labels[names.LABEL_JOB]: s.value for s in samples}


def test_a_job_is_served_its_ranks_summed_speed_in_base_units_and_its_step_time_by_part() -> None:
    parts = dict(step_data_percent=38.0, step_compute_percent=50.0, step_comm_percent=8.0, step_copy_percent=2.0,
                 step_idle_percent=2.0)
    processes = (
        _fast(10, 0, 1, 0, 2.0, 400.0, **parts),
        _fast(11, 1, 1, 1, 1.5, 300.0, step_data_percent=18.0, step_compute_percent=70.0, step_comm_percent=8.0,
              step_copy_percent=2.0, step_idle_percent=2.0),
        _fast(20, 2, 2, 0, 4.0, 100.0, peak=312.0, source=FlopsSource.COUNTED),
        _rank(30, 3, 3, 0, **parts),  # between epochs: a breakdown but no steps, so no speed series at all
    )
    jobs = (JobSample(1, WorkloadKind.TRAINING, "torchrun", (10, 11), (0, 1), cluster_key="slurm:7"),
            JobSample(2, WorkloadKind.TRAINING, "parent", (20,), (2,)),
            JobSample(3, WorkloadKind.INFERENCE, "parent", (30,), (3,)))
    families = _scrape(Snapshot(NOW, SourceKind.NVML, processes=processes, jobs=jobs))
    assert _by_job(families[names.JOB_STEPS.name]) == {"1": 1.5, "2": 4.0}  # the slowest rank sets the pace
    assert _by_job(families[names.JOB_SAMPLES.name]) == {"1": 32 * 3.5, "2": 32 * 4.0}
    assert _by_job(families[names.JOB_TOKENS.name]) == {"1": 65536 * 3.5, "2": 65536 * 4.0}
    flops = {s.labels[names.LABEL_JOB]: (s.labels[names.LABEL_UTILIZATION], s.value)
             for s in families[names.JOB_FLOPS.name]}
    assert flops == {"1": ("MFU", pytest.approx(700e12)), "2": ("HFU", pytest.approx(100e12))}  # FLOP/s, not TFLOP/s
    assert _by_job(families[names.JOB_PEAK_FLOPS.name]) == {"1": pytest.approx(1978e12), "2": pytest.approx(312e12)}
    utilization = {s.labels[names.LABEL_JOB]: (s.labels[names.LABEL_UTILIZATION], s.value)
                   for s in families[names.JOB_FLOPS_UTILIZATION.name]}
    assert utilization == {"1": ("MFU", pytest.approx(700 / 1978 * 100)), "2": ("HFU", pytest.approx(100 / 312 * 100))}
    step_time = {s.labels[names.LABEL_STEP_PART]: s.value for s in families[names.JOB_STEP_TIME.name]
                 if s.labels[names.LABEL_JOB] == "1"}
    assert step_time == {"data": 28.0, "compute": 60.0, "communication": 8.0, "copy": 2.0, "idle": 2.0}
    assert sum(step_time.values()) == pytest.approx(100.0)
    assert {s.labels[names.LABEL_JOB] for s in families[names.JOB_STEP_TIME.name]} == {"1"}  # job 2 not profiled


def test_an_unknown_peak_leaves_out_flops_and_utilization_never_zero() -> None:
    rank = _rank(10, 0, 1, 0, steps_per_second=3.0, samples_per_second=96.0, flops_utilization_note="unknown GPU")
    families = _scrape(Snapshot(NOW, SourceKind.NVML, processes=(rank,),
                                jobs=(JobSample(1, WorkloadKind.TRAINING, "parent", (10,), (0,)),)))
    assert _by_job(families[names.JOB_STEPS.name]) == {"1": 3.0}
    for metric in (names.JOB_TOKENS, names.JOB_FLOPS, names.JOB_PEAK_FLOPS, names.JOB_FLOPS_UTILIZATION,
                   names.JOB_STEP_TIME):
        assert metric.name not in families


def test_speed_series_are_bounded_by_the_process_cap_and_per_job() -> None:
    processes = tuple(_fast(100 + i, i % 8, i + 1, 0, 1.0 + i, 10.0, step_data_percent=10.0,
                            step_compute_percent=90.0, step_comm_percent=0.0, step_copy_percent=0.0,
                            step_idle_percent=0.0) for i in range(40))
    jobs = tuple(JobSample(i + 1, WorkloadKind.TRAINING, "parent", (100 + i,), (i % 8,)) for i in range(40))
    families = _scrape(Snapshot(NOW, SourceKind.NVML, processes=processes, jobs=jobs), max_process_series=6)
    served = {s.labels[names.LABEL_JOB] for s in families[names.PROCESS_MEMORY.name]}
    assert len(served) == 6
    for metric in SPEED_FAMILIES:
        samples = families[metric.name]
        assert {s.labels[names.LABEL_JOB] for s in samples} == served  # only jobs with a served rank
        per_job = len(samples) / len(served)
        assert per_job == (5 if metric is names.JOB_STEP_TIME else 1)


def test_promtool_lints_the_speed_families_clean() -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian's prometheus package; see README's test command)")
    rank = _fast(10, 0, 1, 0, 2.0, 400.0, step_data_percent=38.0, step_compute_percent=50.0, step_comm_percent=8.0,
                 step_copy_percent=2.0, step_idle_percent=2.0)
    text = generate_latest(_registry(Snapshot(NOW, SourceKind.NVML, processes=(rank,), jobs=(
        JobSample(1, WorkloadKind.TRAINING, "parent", (10,), (0,)),)))).decode()
    for metric in SPEED_FAMILIES:
        assert f"# HELP {metric.name} {metric.help}\n# TYPE {metric.name} gauge\n" in text
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_real_trainer_record_is_served_by_gpusight_serve(tmp_path, fake_nvml_lib) -> None:
    with publishing_trainer(tmp_path, steps_per_second=2.5, achieved_tflops=120.0, peak_tflops=400.0,
                            breakdown={"data": 0.4, "compute": 0.5, "communication": 0.05, "copy": 0.03,
                                       "idle": 0.02}) as trainer:
        gpu = FakeGpu(util_gpu=100, mem_used=30 << 30, compute_processes=[(trainer.pid, 20 << 30)])
        env = fake_nvml_env(fake_nvml_lib, FakeScenario(gpus=[gpu]).write(tmp_path / "scenario.txt"))
        env["XDG_RUNTIME_DIR"] = str(trainer.runtime_dir)
        with serving(["--hostname", "n1", "--interval", "0.5"], env) as exporter:
            text = exporter.wait_for(names.JOB_STEP_TIME.name + "{")
    families = {f.name: f.samples for f in text_string_to_metric_families(text)}
    [steps] = families[names.JOB_STEPS.name]
    assert steps.value == 2.5 and steps.labels[names.LABEL_HOSTNAME] == "n1"
    [flops] = families[names.JOB_FLOPS.name]
    assert flops.value == pytest.approx(120e12) and flops.labels[names.LABEL_UTILIZATION] == "MFU"
    [utilization] = families[names.JOB_FLOPS_UTILIZATION.name]
    assert utilization.value == pytest.approx(30.0)
    parts = {s.labels[names.LABEL_STEP_PART]: s.value for s in families[names.JOB_STEP_TIME.name]}
    assert parts == pytest.approx({"data": 40.0, "compute": 50.0, "communication": 5.0, "copy": 3.0, "idle": 2.0})


def test_the_demo_serves_every_training_jobs_speed_and_parts_summing_to_100() -> None:
    with serving(["--demo", "--interval", "0.5"], dict(os.environ)) as exporter:
        text = exporter.wait_for(names.JOB_STEP_TIME.name + "{")
    families = {f.name: f.samples for f in text_string_to_metric_families(text)}
    steps = _by_job(families[names.JOB_STEPS.name])
    assert len(steps) >= 2 and all(value > 0 for value in steps.values())
    names_served = {s.labels[names.LABEL_UTILIZATION] for s in families[names.JOB_FLOPS_UTILIZATION.name]}
    assert names_served <= {"MFU", "HFU"} and "MFU" in names_served
    totals: dict[str, float] = {}
    for sample in families[names.JOB_STEP_TIME.name]:
        totals[sample.labels[names.LABEL_JOB]] = totals.get(sample.labels[names.LABEL_JOB], 0.0) + sample.value
    assert totals and all(total == pytest.approx(100.0, abs=0.5) for total in totals.values())
    assert set(totals) <= set(steps)  # a breakdown only for a job that reports its steps
