"""`gpusight --check`: the real CLI in a subprocess on the fake NVML, the demo and recordings; exit statuses by advice."""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpusight.advice.config import Thresholds
from gpusight.check import fit_thresholds, fitted_names
from gpusight.demo.source import DemoSource
from gpusight.snapshot.serialize import snapshot_from_dict, snapshot_to_json
from support.fake_nvml import FakeGpu, FakeScenario, count_calls, fake_nvml_env

GIB = 1 << 30
HW_THERMAL = 0x40
"""Clocks-event reason bit of a hardware thermal slowdown."""


def gpusight(env, *args, timeout=60):
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def nvml_env(tmp_path, fake_nvml_lib, *gpus, call_log=None):
    path = FakeScenario(gpus=list(gpus)).write(tmp_path / "scenario.txt")
    return fake_nvml_env(fake_nvml_lib, path, call_log)


def hot_gpu(**changes):
    return FakeGpu(util_gpu=95, temp=91, clock_sm=900, throttle=HW_THERMAL, mem_used=40 * GIB, **changes)


def free_gpu():
    return FakeGpu(util_gpu=0, util_mem=0, mem_used=300 << 20, power_mw=60_000)


def write_demo_recording(path: Path, scenario: str, count: int) -> Path:
    """``count`` snapshots of a demo scenario, half a second apart, as a recording."""
    clock = itertools.count()
    source = DemoSource(scenario, seed=5, clock=lambda: 1_750_000_000.0 + next(clock) * 0.5)
    path.write_text("".join(snapshot_to_json(source.poll()) + "\n" for _ in range(count)), encoding="utf-8")
    return path


# ---- live data on the fake NVML ----

def test_a_throttled_gpu_exits_1_with_the_throttling_advice(tmp_path, fake_nvml_lib):
    env = nvml_env(tmp_path, fake_nvml_lib, hot_gpu(name="Hot \x1b[31mGPU"), free_gpu())

    out = gpusight(env, "--check", "--duration", "3", "--interval", "0.2")

    assert out.returncode == 1, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("gpusight check: 3 s of live data, 2 GPUs, polled every 0.2 s")
    # 3 s is shorter than the rules' times: said in plain words, with what each was set to
    assert "; rules shortened to fit the 3 s checked: averages over 2.8 s, not window_s 30 s," in lines[0]
    assert "; advice judged on the window as a whole at its end, without the live screen's holds (longer than the " \
           "data: hold_s 15 s," in lines[0]
    assert any(line.startswith("WARN     gpu0: GPU 0 is thermal/hardware throttled") for line in lines)
    assert any("hw_thermal" in line and line.strip().startswith("evidence:") for line in lines)
    assert any(line.strip().startswith("action:") for line in lines)
    assert lines[-1] == "result: 0 critical, 1 warn, 1 info; exit 1"
    assert "\x1b" not in out.stdout


def test_a_free_gpu_exits_0(tmp_path, fake_nvml_lib):
    env = nvml_env(tmp_path, fake_nvml_lib, free_gpu())

    out = gpusight(env, "--check", "--duration", "2", "--interval", "0.2")

    assert out.returncode == 0, out.stdout + out.stderr
    assert "INFO     gpu0: GPU 0 is free" in out.stdout
    assert out.stdout.splitlines()[-1] == "result: 0 critical, 0 warn, 1 info; exit 0"


def test_gpus_and_the_config_file_are_respected(tmp_path, fake_nvml_lib):
    env = nvml_env(tmp_path, fake_nvml_lib, hot_gpu(), free_gpu())
    config = tmp_path / "config.toml"
    config.write_text("[advice]\nfree_hold_s = 1000\n", encoding="utf-8")

    only_free = gpusight(env, "--check", "--duration", "2", "--interval", "0.2", "--gpus", "1", "--config", str(config))

    assert only_free.returncode == 0, only_free.stdout + only_free.stderr
    assert "1 GPU," in only_free.stdout.splitlines()[0]
    assert "gpu0" not in only_free.stdout
    assert "free_hold_s 1000 s" in only_free.stdout.splitlines()[0]  # the config's hold, cut to fit


def test_json_prints_the_final_snapshot_and_exits_by_its_advice(tmp_path, fake_nvml_lib):
    env = nvml_env(tmp_path, fake_nvml_lib, hot_gpu(nvlink_tx_rate=6e9, nvlink_rx_rate=2e9))

    out = gpusight(env, "--check", "--json", "--duration", "2", "--interval", "0.2")

    assert out.returncode == 1, out.stderr
    snapshot = snapshot_from_dict(json.loads(out.stdout), complete=True)
    assert [(a.id, a.severity) for a in snapshot.advice] == [("throttling:gpu0", "warn")]
    device = snapshot.devices[0]
    assert device.nvlink_tx_bytes_per_s == pytest.approx(6e9, rel=0.05)
    assert device.nvlink_rx_bytes_per_s == pytest.approx(2e9, rel=0.05)
    assert out.stderr.startswith("gpusight check: 2 s of live data")


def test_a_gpu_lost_during_the_check_exits_2(tmp_path, fake_nvml_lib):
    env = nvml_env(tmp_path, fake_nvml_lib, free_gpu(), FakeGpu(lost=True))

    out = gpusight(env, "--check", "--duration", "1", "--interval", "0.2")

    assert out.returncode == 2, out.stdout + out.stderr
    assert "LOST     gpu1: the GPU stopped answering during the check" in out.stdout
    assert out.stdout.splitlines()[-1].endswith("exit 2")


def test_no_driver_exits_3_at_once_with_the_reason(tmp_path, fake_nvml_lib):
    env = fake_nvml_env(fake_nvml_lib, None)

    out = gpusight(env, "--check", "--duration", "600", timeout=60)

    assert out.returncode == 3
    assert out.stdout == ""
    assert out.stderr.strip() == ("gpusight: cannot check: NVIDIA driver not loaded: the kernel module is not running "
                                  "(NVML_ERROR_DRIVER_NOT_LOADED); try gpusight --demo to see simulated GPUs")


@pytest.mark.parametrize("args", [
    ["--check"],  # no --duration
    ["--check", "--duration", "1", "--no-advice"],
    ["--check", "--duration", "1", "--once"],
    ["--check", "--duration", "-1"],
    ["--check", "--duration", "1", "--bogus"],
    ["--chec", "--duration", "1", "--interval", "0"],  # an abbreviation is still check mode
])
def test_usage_errors_in_check_mode_exit_3(tmp_path, fake_nvml_lib, args):
    env = nvml_env(tmp_path, fake_nvml_lib, free_gpu())

    out = gpusight(env, *args)

    assert out.returncode == 3, out.stderr
    assert "error:" in out.stderr


def test_usage_errors_outside_check_mode_keep_argparse_status_2(tmp_path, fake_nvml_lib):
    out = gpusight(nvml_env(tmp_path, fake_nvml_lib, free_gpu()), "--json", "--bogus")

    assert out.returncode == 2


def test_a_gpu_that_does_not_exist_exits_3(tmp_path, fake_nvml_lib):
    out = gpusight(nvml_env(tmp_path, fake_nvml_lib, free_gpu()), "--check", "--duration", "1", "--gpus", "5")

    assert out.returncode == 3
    assert "5" in out.stderr


def test_an_unreadable_recording_exits_3(tmp_path):
    out = gpusight(None, "--check", "--replay", str(tmp_path / "missing.jsonl"))

    assert out.returncode == 3
    assert "missing.jsonl" in out.stderr


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_ends_the_check_early_and_it_still_reports_and_exits_by_the_advice(tmp_path, fake_nvml_lib, sig):
    log = tmp_path / "calls.log"
    env = nvml_env(tmp_path, fake_nvml_lib, hot_gpu(), call_log=log)
    config = tmp_path / "config.toml"
    config.write_text("[advice]\nthrottle_hold_s = 0\n", encoding="utf-8")  # throttling stands from its first poll
    child = subprocess.Popen([sys.executable, "-m", "gpusight", "--check", "--duration", "600", "--interval", "0.1",
                              "--config", str(config)],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while count_calls(log, "nvmlDeviceGetUtilizationRates") < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(sig)
        stdout, stderr = child.communicate(timeout=30)
    finally:
        child.kill()
        child.wait()

    lines = stdout.splitlines()
    assert child.returncode == 1, stdout + stderr
    assert f"stopped by {sig.name} after" in lines[0]
    assert any("GPU 0 is thermal/hardware throttled" in line for line in lines)
    assert lines[-1] == "result: 0 critical, 1 warn, 0 info; exit 1"


# ---- demo and recordings ----

@pytest.mark.parametrize(("scenario", "status", "present"), [
    ("healthy", 0, "INFO     gpu0: GPU 0 is busy and nothing looks wrong"),
    ("throttling", 1, "is thermal/hardware throttled"),
])
def test_demo_data_is_checked_with_its_prefilled_history(scenario, status, present):
    out = gpusight(None, "--check", "--demo", scenario, "--duration", "1")

    assert out.returncode == status, out.stdout + out.stderr
    assert present in out.stdout
    # The two prefilled minutes count: no window is shortened, and only the live hold longer than 121 s is named.
    assert out.stdout.splitlines()[0].endswith(
        "; rule windows fit as set; advice judged on the window as a whole at its end, without the live screen's "
        "holds (longer than the data: serving_idle_hold_s 300 s)")


@pytest.mark.parametrize(("scenario", "status", "present"), [
    ("stalls", 1, r"WARN     gpu0: GPU 0 stalls every 7 s"),
    ("comm-bound", 1, r"WARN     job1: Job 1 spends \d+ % of each step communicating \(measured\)"),
    ("serving", 0, r"Idle TGI \(PID"),
])
def test_each_demo_story_stands_after_a_short_check(scenario, status, present):
    out = gpusight(None, "--check", "--demo", scenario, "--duration", "1")

    assert out.returncode == status, out.stdout + out.stderr
    assert re.search(present, out.stdout), out.stdout
    if scenario == "serving":  # prefilled 330 s: every window and hold fits
        assert out.stdout.splitlines()[0].endswith("; rule windows fit as set; advice judged on the window as a whole "
                                                   "at its end")
        assert "INFO     gpu3: GPU 3 serves in small batches" in out.stdout


def test_a_recording_is_read_to_its_end_without_waiting(tmp_path):
    recording = write_demo_recording(tmp_path / "throttling.jsonl", "throttling", 240)  # 2 minutes of data

    started = time.monotonic()
    out = gpusight(None, "--check", "--replay", str(recording), "--interval", "10")
    took = time.monotonic() - started

    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stdout.splitlines()[0].startswith(
        "gpusight check: 120 s of recording throttling.jsonl, re-evaluated by the rules as it recorded no advice "
        "(the whole recording), 4 GPUs")
    assert "thermal/hardware throttled" in out.stdout
    assert took < 240 * 10  # never paced at the interval (a hang guard, not a timing target)


def test_a_recording_checked_for_a_few_seconds_of_its_time(tmp_path):
    recording = write_demo_recording(tmp_path / "healthy.jsonl", "healthy", 240)

    out = gpusight(None, "--check", "--replay", str(recording), "--duration", "5")

    assert out.returncode == 0, out.stdout + out.stderr
    first = out.stdout.splitlines()[0]
    assert first.startswith("gpusight check: 5 s of recording healthy.jsonl")
    assert "rules shortened to fit the 5 s checked: averages over 4.5 s, not window_s 30 s" in first
    assert "advice judged on the window as a whole at its end" in first


# ---- fitting the rules' times ----

def test_only_the_windows_that_do_not_fit_are_cut_and_the_holds_longer_than_the_data_are_named():
    thresholds = Thresholds()
    names = fitted_names(thresholds)
    assert {"window_s", "stall_window_s"} <= set(names) and not [n for n in names if n.endswith("hold_s")]

    fitted, fitting = fit_thresholds(thresholds, 40.5, 0.5)  # windows up to 40 s

    assert fitting.window_cap_s == 40.0
    assert fitted.window_s == thresholds.window_s == 30.0  # fits: kept as set
    assert fitted.stall_window_s == 40.0 and dict(fitting.cut) == {"stall_window_s": 60.0}
    assert fitted.hold_s == thresholds.hold_s and fitted.idle_hold_s == thresholds.idle_hold_s  # holds are never cut
    assert dict(fitting.holds_over) == {"idle_hold_s": 120.0, "serving_idle_hold_s": 300.0}
    assert fitting.longest_stall_period_s == pytest.approx((40.5 - 1.0) / 3)
    assert (fitted.clear_s, fitted.low_util_percent) == (thresholds.clear_s, thresholds.low_util_percent)
    longest = max(getattr(thresholds, name) for name in names)
    assert fit_thresholds(thresholds, longest + 1, 0.5)[0] == thresholds
    assert fit_thresholds(thresholds, None, 0.5)[0] == thresholds


# ---- hardware health ----

def write_health_recording(path: Path, count: int = 20) -> Path:
    """A recording, half a second apart, of GPU 0 with a pending row remap, GPU 1 at Gen3 x8 on a Gen5 x16 card
    under load, GPU 2 reporting Xid 79 and then lost, and GPU 3 in good health; no recorded advice."""
    from gpusight.snapshot.model import DeviceHealth, DeviceSample, Snapshot, XidEvent

    start = 1_750_000_000.0
    lines = []
    for step in range(count):
        now = start + step * 0.5
        fell_off = DeviceHealth(xid_total=1, xid_recent=(XidEvent(79, start + 0.2),))
        third = (DeviceSample(index=2, lost=True, error="GPU is lost") if step >= 2 else
                 DeviceSample(index=2, utilization_gpu_percent=90.0, health=fell_off if step == 1 else DeviceHealth()))
        devices = (
            DeviceSample(index=0, utilization_gpu_percent=95.0, health=DeviceHealth(remap_pending=True)),
            DeviceSample(index=1, utilization_gpu_percent=95.0, health=DeviceHealth(
                pcie_link_gen=3, pcie_link_gen_max=5, pcie_link_width=8, pcie_link_width_max=16)),
            third,
            DeviceSample(index=3, utilization_gpu_percent=0.0, health=DeviceHealth(
                xid_total=0, remap_pending=False, pcie_link_gen=1, pcie_link_gen_max=5)),
        )
        lines.append(snapshot_to_json(Snapshot(timestamp=now, source="nvml", devices=devices)) + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return path


def test_a_short_check_sees_every_drain_finding_and_names_the_xid_that_lost_a_gpu(tmp_path):
    recording = write_health_recording(tmp_path / "faults.jsonl")

    out = gpusight(None, "--check", "--replay", str(recording), "--duration", "2")

    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("CRITICAL gpu0: drain gpu0 / reset needed: row remap pending") for line in lines), out.stdout
    assert any(line.startswith("CRITICAL gpu1: drain gpu1 / reset needed: PCIe link degraded") for line in lines)
    assert "link at Gen3 x8 (can run Gen5 x16)" in out.stdout
    assert "CRITICAL gpu2: drain gpu2 / reset needed: Xid 79: GPU has fallen off the bus" in lines
    assert "nvidia-smi -r" in out.stdout
    assert ("LOST     gpu2: the GPU stopped answering during the check; its last Xid: 79 (GPU has fallen off the bus)"
            in lines)
    assert "gpu3:" not in out.stdout
    assert lines[-1].endswith("exit 2")


def test_json_check_carries_the_health_advice(tmp_path):
    recording = write_health_recording(tmp_path / "faults.jsonl")

    out = gpusight(None, "--check", "--json", "--replay", str(recording), "--duration", "2")

    assert out.returncode == 2, out.stdout + out.stderr
    snapshot = snapshot_from_dict(json.loads(out.stdout))
    critical = {a.scope for a in snapshot.advice if a.severity == "critical" and a.id.startswith("health:")}
    assert critical == {"gpu0", "gpu1", "gpu2"}  # gpu2's Xid 79 stands after the GPU went lost
    assert snapshot.devices[0].health is not None and snapshot.devices[0].health.remap_pending


def test_fake_nvml_faults_end_to_end_exit_2_with_each_drain_advice(tmp_path, fake_nvml_lib):
    """From the NVML calls (fake library, real pynvml, the Xid side thread) to --check's report and exit status."""
    from support.fake_nvml import FakeHealth

    env = nvml_env(tmp_path, fake_nvml_lib,
                   FakeGpu(util_gpu=90, health=FakeHealth(remap_uncorrected=1, remap_pending=1)),
                   FakeGpu(util_gpu=90, health=FakeHealth(pcie_gen=3, pcie_gen_max=5, pcie_width=8, pcie_width_max=16)),
                   FakeGpu(util_gpu=90, health=FakeHealth(xids=[(1, 79), (2, 48)])),
                   FakeGpu(util_gpu=90))

    out = gpusight(env, "--check", "--duration", "2", "--interval", "0.2")

    assert out.returncode == 2, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert "CRITICAL gpu0: drain gpu0 / reset needed: row remap pending: reset needed" in lines
    assert "CRITICAL gpu1: drain gpu1 / reset needed: PCIe link degraded to x8 (and 1 more)" in lines
    gpu2 = "\n".join(lines[lines.index(next(line for line in lines if line.startswith("CRITICAL gpu2:"))):][:3])
    assert gpu2.startswith("CRITICAL gpu2: drain gpu2 / reset needed: Xid ") and "(and 1 more)" in gpu2, out.stdout
    assert "Xid 79 once" in gpu2 and "Xid 48 once" in gpu2 and "reboot" in gpu2
    assert "gpu3:" not in out.stdout


def test_fake_nvml_gpu_lost_after_its_xid_79_is_named_by_the_xid(tmp_path, fake_nvml_lib):
    from support.fake_nvml import FakeHealth

    scenario = tmp_path / "scenario.txt"
    FakeScenario(gpus=[FakeGpu(), FakeGpu()]).write(scenario)
    env = fake_nvml_env(fake_nvml_lib, scenario)
    child = subprocess.Popen([sys.executable, "-m", "gpusight", "--check", "--duration", "6", "--interval", "0.2"],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(2.0)
    FakeScenario(gpus=[FakeGpu(), FakeGpu(lost=True, health=FakeHealth(xids=[(1, 79)]))]).write(scenario)
    stdout, stderr = child.communicate(timeout=60)

    assert child.returncode == 2, stdout + stderr
    assert ("LOST     gpu1: the GPU stopped answering during the check; its last Xid: 79 (GPU has fallen off the bus)"
            in stdout.splitlines()), stdout
