"""NVML faults and process races end to end: the fake libnvidia-ml.so.1, real processes, the real CLI and app.

The unit tests in ``test_nvml_source.py`` and ``test_host_source.py`` prove each fault at the source;
these prove the whole monitor keeps running, shows what it knows, marks what it lost and says why.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

from gpusight.backends.host.source import HostSource
from gpusight.backends.live import LiveSource
from gpusight.backends.nvml.calls import REPEATED_FAILURE_POLLS
from gpusight.backends.nvml.processes import UTILIZATION_PERIOD_S
from gpusight.sampling.history import History
from gpusight.sampling.sampler import MIN_INTERVAL, Sampler
from gpusight.ui.main.app import GpusightApp
from support.fake_nvml import (
    DRIVER_NOT_LOADED,
    LIB_RM_VERSION_MISMATCH,
    NOT_SUPPORTED,
    TIMEOUT,
    FakeGpu,
    FakeScenario,
    count_calls,
    fake_nvml_env,
)
from support.procs import proc_state, sleeper, wait_until

OTHER_NAMESPACE = ("in another PID namespace (a host PID): run gpusight on the host, or with --pid=host / hostPID: true, "
                   "to see it")
"""The note on a GPU process NVML reports that this PID namespace does not hold (written out, not imported)."""

NVML_NOT_FOUND = 6
"""NVML_ERROR_NOT_FOUND: what nvmlDeviceGetProcessUtilization answers when there is no new sample."""

PER_DEVICE_CALLS = ["name", "uuid", "utilization", "memory", "memory_v2", "power", "power_limit", "temperature", "temperature_v", "fan", "clock", "pstate", "energy", "energy_field", "throttle", "clocks_event_reasons", "pcie_throughput", "field_values", "pcie_counters", "ecc_mode", "ecc_errors", "mig_mode", "compute_capability", "compute_procs", "graphics_procs", "process_utilization", "gpm_support", "gpm_sample", "gpm_metrics"]
"""Every per-device call the fake can fail (its CALL NAMES), apart from getting the handle."""

DEVICE_VALUE_KEYS = ["name", "uuid", "utilization_gpu_percent", "utilization_memory_percent", "memory_used_bytes", "memory_total_bytes", "memory_reserved_bytes", "power_watts", "power_limit_watts", "temperature_celsius", "fan_percent", "clock_sm_mhz", "clock_memory_mhz", "pstate", "energy_joules", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s", "ecc_errors_uncorrected", "mig_mode", "compute_capability", "sm_active_percent", "sm_occupancy_percent", "tensor_active_percent", "dram_active_percent"]
"""Every measured field of a device in the JSON contract."""


def gpusight(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """Run the real CLI with ``args``."""
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, env=env,
                          timeout=timeout, check=False)


def failing_everywhere(code: int) -> FakeGpu:
    """A GPU whose every per-device call (the handle apart) returns ``code``."""
    return FakeGpu(errors={call: code for call in PER_DEVICE_CALLS})


def test_every_call_not_supported_reads_null_in_json_and_na_in_the_table(tmp_path, fake_nvml_lib):
    path = FakeScenario(gpus=[failing_everywhere(NOT_SUPPORTED), FakeGpu(util_gpu=66)]).write(tmp_path / "s.txt")
    env = fake_nvml_env(fake_nvml_lib, path)

    data = json.loads(gpusight(env, "--json").stdout)
    table = gpusight(env, "--once")

    bare, normal = data["devices"]
    assert {key: bare[key] for key in DEVICE_VALUE_KEYS} == dict.fromkeys(DEVICE_VALUE_KEYS)
    assert bare["lost"] is False and bare["throttle_reasons"] == []
    assert normal["utilization_gpu_percent"] == 66
    assert data["errors"] == []  # unsupported is a normal answer, not a fault
    assert table.returncode == 0 and "Traceback" not in table.stderr
    [row] = [line for line in table.stdout.splitlines() if line.startswith("0   ")]
    assert row.count("N/A") >= 8 and "0%" not in row and " 0W" not in row


def test_a_version_mismatch_is_one_line_and_the_host_is_still_shown(tmp_path, fake_nvml_lib):
    path = FakeScenario(init_error=LIB_RM_VERSION_MISMATCH).write(tmp_path / "s.txt")

    out = gpusight(fake_nvml_env(fake_nvml_lib, path), "--once")

    assert out.returncode == 0 and "Traceback" not in out.stderr
    assert "HOST  CPU" in out.stdout and "No GPUs." in out.stdout
    [reason] = [line for line in out.stdout.split("ERRORS", 1)[1].splitlines() if line.strip()]
    assert reason.strip().startswith("nvml:") and "versions differ" in reason and "reboot" in reason


def test_timeouts_read_null_and_are_named_in_one_line_once_they_persist(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(gpus=[failing_everywhere(TIMEOUT), FakeGpu(util_gpu=20)]))
    source = make_nvml_source()

    readings = [source.poll() for _ in range(REPEATED_FAILURE_POLLS + 2)]
    nvml_scenario.write(FakeScenario(gpus=[FakeGpu(util_gpu=30), FakeGpu(util_gpu=20)]))
    recovered = [source.poll() for _ in range(2)]
    nvml_scenario.write(FakeScenario(gpus=[failing_everywhere(TIMEOUT), FakeGpu(util_gpu=20)]))
    again = [source.poll() for _ in range(REPEATED_FAILURE_POLLS)]

    assert all(r.devices[0].utilization_gpu_percent is None and not r.devices[0].lost for r in readings)
    assert all(r.devices[1].utilization_gpu_percent == 20.0 for r in readings)
    assert [len(r.errors) for r in readings[: REPEATED_FAILURE_POLLS - 1]] == [0] * (REPEATED_FAILURE_POLLS - 1)
    notes = [note for r in readings for note in r.errors]
    assert len(notes) == 1  # one line for the device, not one per call, and not repeated every poll
    assert notes[0].scope == "gpu0" and "NVML_ERROR_TIMEOUT" in notes[0].message and "\n" not in notes[0].message
    assert recovered[-1].devices[0].utilization_gpu_percent == 30.0 and recovered[-1].errors == ()
    assert [len(r.errors) for r in again] == [0] * (REPEATED_FAILURE_POLLS - 1) + [1]


def test_process_utilization_not_found_is_normal_however_long_it_lasts(nvml_scenario, make_device_reader):
    with sleeper() as proc:
        gpu = FakeGpu(compute_processes=[(proc.pid, 1 << 30)], errors={"process_utilization": NVML_NOT_FOUND})
        nvml_scenario.write(FakeScenario(gpus=[gpu]))
        reader, clock = make_device_reader()

        readings = []
        for _ in range(REPEATED_FAILURE_POLLS * 3):
            readings.append(reader.read())
            clock.now += UTILIZATION_PERIOD_S  # each poll asks for process utilization again

    assert all(notes == [] for _, _, notes in readings)
    assert all([p.pid for p in processes] == [proc.pid] for _, processes, _ in readings)
    assert readings[-1][1][0].sm_percent is None
    assert nvml_scenario.count("nvmlDeviceGetProcessUtilization") >= REPEATED_FAILURE_POLLS * 3


def test_gpu_processes_that_exit_are_zombies_or_foreign_are_labelled_truthfully(tmp_path, fake_nvml_lib):
    pid_max = int(Path("/proc/sys/kernel/pid_max").read_text())
    absent = next(pid for pid in range(pid_max - 1, 1, -1) if not psutil.pid_exists(pid))
    zombie = psutil.Popen([sys.executable, "-c", "pass"])
    call_log = tmp_path / "calls.log"
    with sleeper("alive") as alive, sleeper("leaving") as leaving:
        try:
            wait_until(lambda: proc_state(zombie.pid) == "Z", "a zombie")
            pids = [alive.pid, leaving.pid, zombie.pid, absent, pid_max + 5]
            path = FakeScenario(gpus=[FakeGpu(compute_processes=[(pid, 1 << 30) for pid in pids])]).write(
                tmp_path / "s.txt")
            env = fake_nvml_env(fake_nvml_lib, path, call_log)
            run = subprocess.Popen([sys.executable, "-m", "gpusight", "--json", "--duration", "4", "--interval", "0.1"],
                                   env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # pynvml calls the process list twice per poll (once for the count, once for the list), so four
            # calls mean a second poll has begun: the first one's /proc read saw the leaving process alive.
            wait_until(lambda: count_calls(call_log, "nvmlDeviceGetComputeRunningProcesses_v3") >= 4,
                       "gpusight's first polls", timeout=30)
            leaving.kill()
            leaving.wait()
            out, err = run.communicate(timeout=60)
        finally:
            zombie.wait()

    assert run.returncode == 0, err
    notes = {p["pid"]: p["note"] for p in json.loads(out)["processes"] if p["role"] == "gpu"}
    assert notes == {
        alive.pid: None,
        leaving.pid: "exited",
        zombie.pid: "zombie",
        absent: OTHER_NAMESPACE,
        pid_max + 5: OTHER_NAMESPACE,
    }


def screen_text(app: GpusightApp) -> str:
    """Every line of the app's current screen as plain text."""
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


def test_the_app_runs_on_through_a_missing_driver_a_lost_gpu_and_its_return(nvml_scenario, make_nvml_source):
    nvml_scenario.write(FakeScenario(init_error=DRIVER_NOT_LOADED))
    nvml = make_nvml_source(init_retry_s=0.2, lost_retry_s=0.2)
    sampler = Sampler(LiveSource(gpu=nvml, host=HostSource()), MIN_INTERVAL, History(100))
    app = GpusightApp(sampler)
    seen: dict[str, str] = {}

    def two_gpus(lost: bool) -> FakeScenario:
        return FakeScenario(gpus=[FakeGpu(name="NVIDIA H100 80GB HBM3"), FakeGpu(name="NVIDIA A100-SXM4-40GB", lost=lost)])

    async def main() -> None:
        async with app.run_test(size=(160, 45)) as pilot:

            async def until(what: str, condition) -> None:
                deadline = time.monotonic() + 30
                while not condition(screen_text(app)):
                    assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{screen_text(app)}"
                    await pilot.pause(0.05)
                seen[what] = screen_text(app)

            await until("no driver", lambda text: "not loaded" in text)
            nvml_scenario.write(two_gpus(lost=False))
            await until("driver up", lambda text: "A100" in text and "H100" in text)
            nvml_scenario.write(two_gpus(lost=True))
            await until("gpu lost", lambda text: "LOST" in text)
            nvml_scenario.write(two_gpus(lost=False))
            await until("gpu back", lambda text: "LOST" not in text and "A100" in text)

    asyncio.run(main())

    assert "H100" in seen["gpu lost"]  # the other GPU kept reporting
    assert "fell off the bus" in seen["gpu lost"]  # and the reason is on screen
    assert "not loaded" not in seen["driver up"]
    assert app.return_code in (None, 0)

