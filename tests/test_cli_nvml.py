"""`gpusight --once` / `--json` end to end: a real gpusight process, the fake libnvidia-ml.so.1 and real GPU processes."""

import getpass
import json
import os
import subprocess
import sys

import jsonschema
import pytest

from gpusight.snapshot.schema import json_schema
from gpusight.snapshot.serialize import snapshot_from_dict
from support.fake_nvml import DRIVER_NOT_LOADED, FakeGpu, FakeScenario, fake_nvml_env
from support.procs import sleeper

GIB = 1 << 30


def gpusight(env, *args, timeout=60):
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, env=env, timeout=timeout)


@pytest.fixture
def two_gpus_with_a_process(tmp_path, fake_nvml_lib):
    with sleeper("--config", "my run.yaml") as proc:
        scenario = FakeScenario(gpus=[
            FakeGpu(name="NVIDIA H100 80GB HBM3", uuid="GPU-aaaa", util_gpu=87, util_mem=41, mem_used=30 * GIB,
                    mem_total=80 * GIB, power_mw=612_000, power_limit_mw=700_000, temp=71, throttle=0x4,
                    pcie_tx_kbps=1000, pcie_rx_kbps=2000,
                    compute_processes=[(proc.pid, 12 * GIB)], process_samples=[(proc.pid, 64, 22, 10)]),
            FakeGpu(name="NVIDIA A100-SXM4-40GB", uuid="GPU-bbbb", util_gpu=3, mem_used=1 * GIB, mem_total=40 * GIB,
                    power_mw=55_000, power_limit_mw=400_000, temp=33, fan=41, compute_capability=(8, 0)),
        ])
        path = scenario.write(tmp_path / "scenario.txt")
        yield proc, fake_nvml_env(fake_nvml_lib, path)


def test_json_reports_the_scenario_values_and_the_real_process(two_gpus_with_a_process):
    proc, env = two_gpus_with_a_process
    out = gpusight(env, "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    snapshot_from_dict(data, complete=True)
    assert data["source"] == "nvml"
    assert data["driver"] == {"driver_version": "550.54.15", "cuda_driver_version": "12.4", "nvml_version": "12.550.54.15"}
    gpu0, gpu1 = data["devices"]
    assert (gpu0["name"], gpu0["uuid"], gpu0["utilization_gpu_percent"], gpu0["utilization_memory_percent"]) == \
        ("NVIDIA H100 80GB HBM3", "GPU-aaaa", 87, 41)
    assert (gpu0["memory_used_bytes"], gpu0["memory_total_bytes"]) == (30 * GIB, 80 * GIB)
    assert (gpu0["power_watts"], gpu0["power_limit_watts"], gpu0["temperature_celsius"]) == (612, 700, 71)
    assert gpu0["fan_percent"] is None  # not supported by this board: null, never 0
    assert gpu1["fan_percent"] == 41
    assert gpu0["throttle_reasons"] == ["sw_power_cap"]
    assert (gpu0["pcie_tx_bytes_per_s"], gpu0["pcie_rx_bytes_per_s"]) == (1000 * 1024, 2000 * 1024)
    assert gpu0["tensor_active_percent"] is None  # no GPM in this scenario
    [process] = [p for p in data["processes"] if p["pid"] == proc.pid]
    assert process["role"] == "gpu" and process["trainer_pid"] is None
    assert process["device_index"] == 0
    assert process["gpu_memory_bytes"] == 12 * GIB
    assert process["sm_percent"] == 64
    assert process["user"] == getpass.getuser()
    assert "'my run.yaml'" in process["cmdline"]
    assert process["rss_bytes"] > 0
    assert data["errors"] == []


def test_json_from_nvml_passes_the_published_json_schema(two_gpus_with_a_process):
    _, env = two_gpus_with_a_process
    out = gpusight(env, "--json")
    assert out.returncode == 0, out.stderr
    jsonschema.validate(json.loads(out.stdout), json_schema())


def test_once_prints_the_table_with_devices_and_processes(two_gpus_with_a_process):
    proc, env = two_gpus_with_a_process
    out = gpusight(env, "--once")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "driver 550.54.15" in lines[0] and "CUDA 12.4" in lines[0]
    [gpu0] = [line for line in lines if line.startswith("0   NVIDIA H100")]
    assert "87%" in gpu0 and "30GiB/80GiB" in gpu0 and "612W/700W" in gpu0 and "71C" in gpu0 and "sw_power_cap" in gpu0
    [gpu1] = [line for line in lines if line.startswith("1   NVIDIA A100")]
    assert "41%" in gpu1 and "3%" in gpu1
    [row] = [line for line in lines if f" {proc.pid} " in line]
    assert "12GiB" in row and "64%" in row and "my run.yaml" in row


def test_without_any_nvidia_library_host_data_and_one_clear_reason(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "FAKE_NVML_SCENARIO")}
    probe = subprocess.run([sys.executable, "-c", "import ctypes; ctypes.CDLL('libnvidia-ml.so.1')"], env=env, capture_output=True)
    if probe.returncode == 0:
        pytest.skip("this machine has a real libnvidia-ml.so.1")
    out = gpusight(env, "--once")
    assert out.returncode == 0, out.stderr
    assert "HOST  CPU" in out.stdout and "cores" in out.stdout
    [reason] = [line for line in out.stdout.splitlines() if line.strip().startswith("nvml:")]
    assert "not found" in reason
    assert "Traceback" not in out.stderr
    data = json.loads(gpusight(env, "--json").stdout)
    assert data["driver"] is None and data["devices"] == []
    assert data["host"]["cpu_percent_per_core"] and data["host"]["memory_total_bytes"] > 0


def test_driver_not_loaded_is_said_in_one_line(tmp_path, fake_nvml_lib):
    path = FakeScenario(init_error=DRIVER_NOT_LOADED).write(tmp_path / "s.txt")
    out = gpusight(fake_nvml_env(fake_nvml_lib, path), "--once")
    assert out.returncode == 0
    errors = out.stdout.split("ERRORS", 1)[1]
    assert "driver" in errors.lower() and "not loaded" in errors.lower()
    assert "HOST  CPU" in out.stdout


def test_a_lost_gpu_is_marked_while_the_other_keeps_reporting(tmp_path, fake_nvml_lib):
    path = FakeScenario(gpus=[FakeGpu(util_gpu=10), FakeGpu(lost=True)]).write(tmp_path / "s.txt")
    data = json.loads(gpusight(fake_nvml_env(fake_nvml_lib, path), "--json").stdout)
    gpu0, gpu1 = data["devices"]
    assert gpu0["lost"] is False and gpu0["utilization_gpu_percent"] == 10
    assert gpu1["lost"] is True and gpu1["utilization_gpu_percent"] is None
    assert any(e["scope"] == "gpu1" for e in data["errors"])


def test_dataloader_workers_are_listed_under_their_trainer(tmp_path, fake_nvml_lib):
    from support.procs import fake_trainer

    with fake_trainer(tmp_path, workers=("sleep", "sleep", "sleep")) as trainer:
        path = FakeScenario(gpus=[FakeGpu(compute_processes=[(trainer.pid, 8 * GIB)])]).write(tmp_path / "s.txt")
        data = json.loads(gpusight(fake_nvml_env(fake_nvml_lib, path), "--json").stdout)
        workers = [p for p in data["processes"] if p["role"] == "dataloader_worker"]
        assert sorted(w["pid"] for w in workers) == sorted(trainer.workers)
        assert all(w["trainer_pid"] == trainer.pid and w["name"] == "pt_data_worker" for w in workers)
        [row] = [p for p in data["processes"] if p["pid"] == trainer.pid]
        assert row["num_workers"] == 3
        order = [p["pid"] for p in data["processes"]]
        assert order.index(trainer.pid) < min(order.index(w["pid"]) for w in workers)


def test_input_bound_advice_names_the_trainer_whose_real_workers_burn_cpu(tmp_path, fake_nvml_lib):
    """The advice issue's end-to-end check: low GPU utilization + saturated real DataLoader workers."""
    from support.procs import fake_trainer

    with fake_trainer(tmp_path, workers=("busy",)) as trainer:
        gpu = FakeGpu(util_gpu=18, mem_used=20 * GIB, compute_processes=[(trainer.pid, 20 * GIB)],
                      process_samples=[(trainer.pid, 15, 5, 10)])
        path = FakeScenario(gpus=[gpu]).write(tmp_path / "s.txt")
        env = fake_nvml_env(fake_nvml_lib, path)
        env["XDG_CONFIG_HOME"] = str(tmp_path / "config")  # default thresholds
        # 0.5 s polls keep the monitor's own CPU use low on a 2-core machine, so the worker gets its core.
        out = gpusight(env, "--json", "--duration", "20", "--interval", "0.5", timeout=120)
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        [worker] = [p for p in data["processes"] if p["role"] == "dataloader_worker"]
        assert worker["cpu_percent"] > 80
        ids = [a["id"] for a in data["advice"]]
        # On a small host a lone saturated worker with a core to spare is few_workers' case (one more worker).
        [advice] = [a for a in data["advice"] if a["id"].startswith(("input_bound:", "few_workers:"))]
        assert str(trainer.pid) in advice["evidence"] + advice["title"] + advice["scope"], ids
        assert "18" in advice["evidence"]
        assert "pin_memory" in advice["action"]
