"""Done when, across vendors: an input-bound trainer gets its advice on an AMD and on an Intel fixture machine, and a
mixed NVIDIA + AMD machine shows both vendors' GPUs, numbered NVIDIA first, in ``--json`` and on the screen.

Everything runs the real ``gpusight``: the NVIDIA GPUs come from the project's fake NVML, the AMD and Intel ones from
fixture sysfs and fdinfo trees whose counters move while it reads them; the trainers are real processes whose real
DataLoader-like workers burn CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from test_amdgpu_e2e import words

from support.amd_tree import GIB, mi300x_machine
from support.fake_nvml import FakeGpu, FakeScenario, fake_nvml_env
from support.intel_tree import MAX1550_SLOTS, ClientSpec, xe_max1550_machine
from support.procs import fake_trainer, sleeper
from support.terminal import PtyTerminal, gpusight_argv


def _gpusight_json(env: dict[str, str], *args: str, timeout: float = 120) -> dict:
    done = subprocess.run(gpusight_argv("--json", *args), capture_output=True, text=True, env=env, timeout=timeout)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _input_bound_advice(data: dict, trainer_pid: int) -> dict:
    """The input-pipeline advice about the trainer (few_workers where a lone busy worker has a core to spare)."""
    found = [a for a in data["advice"] if a["id"].startswith(("input_bound:", "few_workers:"))]
    assert len(found) == 1, [a["id"] for a in data["advice"]]
    advice = found[0]
    assert str(trainer_pid) in advice["evidence"] + advice["title"] + advice["scope"]
    return advice


def test_an_input_bound_trainer_on_an_amd_gpu_gets_its_advice(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path / "amd", count=2)
    machine.frozen.add(0)  # GPU 0 starves at 18 % while its trainer's worker burns a core
    machine.set_figures(0, busy=18, mem_busy=6, vram_used=20 * GIB, power_w=210, junction=48, memory=45, level=1)
    with fake_trainer(tmp_path, workers=("busy",)) as trainer:
        machine.open_client([trainer.pid], 7, 0, 41, 20 * GIB, {"compute": 0.17})
        with machine.moving(0.1):
            env = {**os.environ, **machine.env(), "XDG_CONFIG_HOME": str(tmp_path / "config")}
            data = _gpusight_json(env, "--duration", "20", "--interval", "0.5")
        [worker] = [p for p in data["processes"] if p["role"] == "dataloader_worker"]
        assert worker["trainer_pid"] == trainer.pid
        advice = _input_bound_advice(data, trainer.pid)
    assert data["devices"][0]["vendor"] == "amd" and "18" in advice["evidence"]
    assert "pin_memory" in advice["action"] or "num_workers" in advice["action"]


def test_an_input_bound_trainer_on_an_intel_gpu_gets_its_advice(tmp_path: Path) -> None:
    machine = xe_max1550_machine(tmp_path / "intel")
    with fake_trainer(tmp_path, workers=("busy",)) as trainer:
        machine.add_client(ClientSpec(trainer.pid, 9, MAX1550_SLOTS[1], 51, 24 * GIB, compute_busy=0.18))
        with machine.running(0.1):
            env = {**os.environ, **machine.env(), "XDG_CONFIG_HOME": str(tmp_path / "config")}
            data = _gpusight_json(env, "--duration", "20", "--interval", "0.5")
        advice = _input_bound_advice(data, trainer.pid)
    gpu = data["devices"][1]
    assert gpu["vendor"] == "intel" and gpu["kernel_driver"] == "xe"
    assert advice["scope"] in ("gpu1", f"pid{trainer.pid}") or "GPU 1" in advice["evidence"] + advice["title"]


def _mixed_machine(tmp_path: Path, fake_nvml_lib: Path, trainer_pid: int, server_pid: int) -> dict[str, str]:
    """Two H100s from the fake NVML (a trainer on GPU 1) beside two MI300X (a server's client on the second)."""
    scenario = FakeScenario(gpus=[
        FakeGpu(util_gpu=91, mem_used=10 * GIB),
        FakeGpu(util_gpu=64, mem_used=30 * GIB, compute_processes=[(trainer_pid, 30 * GIB)],
                process_samples=[(trainer_pid, 60, 20, 0)]),
    ]).write(tmp_path / "scenario.txt")
    machine = mi300x_machine(tmp_path / "amd", count=2)
    machine.open_client([server_pid], 5, 1, 61, 40 * GIB, {"gfx": 0.3})
    machine.tick(0.0)
    return {**fake_nvml_env(fake_nvml_lib, scenario), **machine.env()}


def test_a_mixed_nvidia_and_amd_machine_shows_both_numbered_nvidia_first(tmp_path: Path, fake_nvml_lib: Path) -> None:
    with fake_trainer(tmp_path, workers=("sleep",)) as trainer, sleeper() as server:
        env = _mixed_machine(tmp_path, fake_nvml_lib, trainer.pid, server.pid)
        data = _gpusight_json(env)
        only_nvml = _gpusight_json(env, "--backend", "nvml")
        chosen = _gpusight_json(env, "--gpus", "3,0")
    devices = data["devices"]
    assert [(d["index"], d["vendor"]) for d in devices] == [(0, "nvidia"), (1, "nvidia"), (2, "amd"), (3, "amd")]
    assert devices[0]["name"] == "NVIDIA H100 80GB HBM3" and devices[3]["name"] == "AMD Instinct MI300X"
    assert data["driver"]["driver_version"] and devices[2]["kernel_driver_version"] == "6.10.5"
    rows = {p["pid"]: p for p in data["processes"] if p["role"] == "gpu"}
    assert rows[trainer.pid]["device_index"] == 1 and rows[server.pid]["device_index"] == 3
    assert rows[server.pid]["gpu_memory_bytes"] == 40 * GIB
    assert not [e for e in data["errors"] if "driver" in e["message"].lower()], data["errors"]
    assert [d["vendor"] for d in only_nvml["devices"]] == ["nvidia", "nvidia"]
    assert [(d["index"], d["vendor"]) for d in chosen["devices"]] == [(3, "amd"), (0, "nvidia")]


def test_the_screen_of_a_mixed_machine_shows_both_vendors(tmp_path: Path, fake_nvml_lib: Path) -> None:
    with fake_trainer(tmp_path, workers=("sleep",)) as trainer, sleeper() as server:
        env = _mixed_machine(tmp_path, fake_nvml_lib, trainer.pid, server.pid)
        env["GPUSIGHT_PARTIAL_OUTPUT"] = "0"
        with PtyTerminal(gpusight_argv("--interval", "0.5"), (160, 45), env=env) as terminal:
            wanted = ["H100", "3 MI300X", "/192GiB", "/750W", str(trainer.pid), str(server.pid)]
            terminal.wait_for(lambda: all(w in words(bytes(terminal.output)) for w in wanted),
                              f"{wanted}: both vendors' GPUs and processes on the screen", 60)
            assert terminal.quit() == 0
