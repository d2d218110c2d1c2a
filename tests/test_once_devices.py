"""`gpusight --once` and `--json` on a recording (the real CLI in a subprocess): a health line under each GPU, its
MIG instances with their ids, profile, memory and activity (or N/A with the reason), and its video engines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.snapshot.model import (
    DeviceHealth,
    DeviceSample,
    MigDeviceSample,
    ProcessSample,
    Snapshot,
    XidEvent,
)
from gpusight.snapshot.serialize import snapshot_from_dict, snapshot_to_json

GIB = 1 << 30
T0 = 1_750_000_000.0


def mig(gi: int, profile: str, used: float, total: float, active: float | None = None, note: str | None = None):
    """Instance ``gi`` of GPU 0."""
    return MigDeviceSample(device_index=0, mig_index=gi, gpu_instance_id=gi, compute_instance_id=0, profile=profile,
                           uuid=f"MIG-{gi}", memory_used_bytes=int(used * GIB), memory_total_bytes=int(total * GIB),
                           sm_active_percent=active, tensor_active_percent=None if active is None else 10.0,
                           dram_active_percent=None if active is None else 40.0, utilization_note=note)


def write_recording(path: Path) -> Path:
    """Two polls of a MIG GPU with three instances, a decoding GPU with Xid 48 and a GPU whose health was not read."""
    devices = (
        DeviceSample(index=0, name="H100", mig_mode=True, memory_used_bytes=40 * GIB, memory_total_bytes=80 * GIB,
                     health=DeviceHealth(xid_total=0, remap_pending=False)),
        DeviceSample(index=1, name="A100", utilization_gpu_percent=20.0, encoder_percent=3.0, decoder_percent=97.0,
                     jpeg_percent=None, health=DeviceHealth(xid_total=1, xid_recent=(XidEvent(48, T0),),
                                                            pcie_replay_count=4)),
        DeviceSample(index=2, name="T4", utilization_gpu_percent=50.0),
    )
    migs = (
        mig(1, "3g.40gb", 30.0, 40.0, active=85.0),
        mig(5, "2g.20gb", 8.0, 20.0, note="GPM MIG sampling needs Hopper \x1b[31mor later"),
        mig(13, "1g.10gb", 0.0, 10.0, note="no GPM"),
    )
    processes = (
        ProcessSample(pid=100, device_index=0, gpu_instance_id=1, compute_instance_id=0, gpu_memory_bytes=30 * GIB),
        ProcessSample(pid=200, device_index=0, gpu_instance_id=5, compute_instance_id=0, gpu_memory_bytes=8 * GIB),
        ProcessSample(pid=300, device_index=1, decoder_percent=88.0, cmdline="python decode.py"),
    )
    lines = [snapshot_to_json(Snapshot(timestamp=T0 + i, source="nvml", devices=devices, processes=processes,
                                       mig_devices=migs)) + "\n" for i in range(2)]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def gpusight(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, timeout=60)


def test_once_shows_health_mig_instances_and_video_engines(tmp_path):
    out = gpusight("--replay", str(write_recording(tmp_path / "mig.jsonl")), "--once")

    assert out.returncode == 0, out.stdout + out.stderr
    lines = [line.strip() for line in out.stdout.splitlines()]
    assert "health 100/100 ok" in lines
    assert "MIG 0.1 3g.40gb GI 1 CI 0 mem 30GiB/40GiB SM 85% TC 10% DRAM 40% pids 100" in lines
    assert "MIG 0.5 2g.20gb GI 5 CI 0 mem 8GiB/20GiB activity N/A (GPM MIG sampling needs Hopper or later) pids 200" in lines
    assert "MIG 0.13 1g.10gb GI 13 CI 0 mem 0B/10GiB activity N/A (no GPM) no processes" in lines
    assert "health 45/100 DRAIN: Xid 48: double-bit ECC error (and 1 lesser finding)" in lines
    assert "video ENC 3% DEC 97%" in lines
    assert any(line.startswith("0.1 ") and " 100 " in line for line in lines)  # the process table names the instance
    assert any(line.startswith("0.5 ") and " 200 " in line for line in lines)
    assert any(line.startswith("1 ") and line.endswith("[dec 88%] python decode.py") for line in lines)
    gpu2 = lines.index(next(line for line in lines if line.startswith("2 ")))
    assert not lines[gpu2 + 1].startswith(("health", "video", "MIG"))
    assert "\x1b" not in out.stdout


def test_json_carries_instances_health_and_engines(tmp_path):
    out = gpusight("--replay", str(write_recording(tmp_path / "mig.jsonl")), "--once", "--json")

    assert out.returncode == 0, out.stdout + out.stderr
    snapshot = snapshot_from_dict(json.loads(out.stdout))
    assert [(m.gpu_instance_id, m.profile) for m in snapshot.mig_devices] == [(1, "3g.40gb"), (5, "2g.20gb"),
                                                                              (13, "1g.10gb")]
    assert snapshot.mig_devices[1].utilization_note is not None
    assert {p.pid: p.gpu_instance_id for p in snapshot.processes} == {100: 1, 200: 5, 300: None}
    assert snapshot.processes[2].decoder_percent == 88.0
    assert snapshot.devices[1].decoder_percent == 97.0 and snapshot.devices[1].jpeg_percent is None
    health = snapshot.devices[1].health
    assert health is not None and [e.code for e in health.xid_recent] == [48] and health.pcie_replay_count == 4


@pytest.mark.parametrize("hopper", [True, False], ids=["H100 with GPM", "A100 without"])
def test_once_on_the_fake_nvml_lists_three_instances_with_their_processes(tmp_path, fake_nvml_lib, hopper):
    """From the NVML calls (fake library, real pynvml) to the --once text: each instance under its GPU."""
    from support.fake_nvml import fake_nvml_env
    from support.mig import MIG3, mig3_scenario

    sleepers = [subprocess.Popen(["sleep", "60"]) for _ in MIG3]
    try:
        pids = [p.pid for p in sleepers]
        options = {} if hopper else {"gpm": False, "name": "NVIDIA A100-SXM4-80GB"}
        scenario = mig3_scenario(pids, **options).write(tmp_path / "scenario.txt")
        out = subprocess.run([sys.executable, "-m", "gpusight", "--once"], capture_output=True, text=True, timeout=60,
                             env=fake_nvml_env(fake_nvml_lib, scenario))
    finally:
        for sleeper in sleepers:
            sleeper.kill()
            sleeper.wait()

    assert out.returncode == 0, out.stdout + out.stderr
    lines = [line.strip() for line in out.stdout.splitlines()]
    for spec, pid in zip(MIG3, pids, strict=True):
        head = f"MIG 0.{spec.gpu_instance_id} {spec.profile} GI {spec.gpu_instance_id} CI 0 mem "
        line = next((x for x in lines if x.startswith(head)), None)
        assert line is not None, out.stdout
        assert line.endswith(f"pids {pid}")
        if hopper:
            assert f"SM {spec.gpm[2]:.0f}%" in line
        else:
            assert "activity N/A (" in line
    assert any(x.startswith("health ") for x in lines)
