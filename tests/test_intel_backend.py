"""The Intel backend on fixture trees: each card's values under xe and i915, power from the energy counter, usage
from moving counters (nanoseconds and cycles), one count per client shared by forked processes, missing and garbage
files as None, a lost card, and how ``--backend`` finds it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpusight.backends.intel.backend import IntelBackend
from gpusight.backends.interface import Roots
from gpusight.backends.registry import BACKEND_NAMES, chosen_entries, parse_backend_choice
from gpusight.snapshot.model import Vendor
from support.intel_tree import (
    A770_SLOT,
    GIB,
    MAX1550_SLOTS,
    ClientSpec,
    IntelMachine,
    i915_a770_machine,
    xe_max1550_machine,
)
from support.procs import kill_tree, run_python_as

NOBODY = 65534


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def backend(machine: IntelMachine, clock: Clock) -> IntelBackend:
    return IntelBackend(Roots(machine.sysfs, machine.fdinfo), clock=clock)


def two_polls(machine: IntelMachine, seconds: float = 2.0) -> tuple[IntelBackend, Clock]:
    """A backend that has polled at fixture time 0 and again ``seconds`` later."""
    clock = Clock()
    intel = backend(machine, clock)
    first = intel.poll()
    assert all(d.power_watts is None for d in first.devices)  # a counter needs two readings
    clock.now += seconds
    machine.tick(seconds)
    return intel, clock


def test_xe_machine_shows_four_max_1550_with_their_sysfs_values(tmp_path: Path) -> None:
    machine = xe_max1550_machine(tmp_path)
    machine.add_client(ClientSpec(4242, 5, MAX1550_SLOTS[1], 7, 8 * GIB, compute_busy=0.75))
    intel, _ = two_polls(machine)
    reading = intel.poll()
    assert [d.pci_bus_id for d in reading.devices] == list(MAX1550_SLOTS)
    assert {d.name for d in reading.devices} == {"Intel Data Center GPU Max 1550"}
    first = reading.devices[0]
    assert (first.vendor, first.kernel_driver) == (Vendor.INTEL, "xe")
    assert first.power_limit_watts == 600.0 and first.power_watts == pytest.approx(300.0)
    assert (first.temperature_celsius, first.temperature_memory_celsius) == (55.0, 61.0)
    assert first.clock_sm_mhz == 1550 and first.memory_total_bytes == 128 * GIB
    assert first.memory_used_bytes == 0 and first.utilization_gpu_percent == 0.0
    busy = reading.devices[1]
    assert busy.memory_used_bytes == 8 * GIB and busy.utilization_gpu_percent == pytest.approx(75.0)
    assert busy.fan_percent is None  # xe gives RPM, no maximum
    assert reading.driver is None and {(d.kernel_driver, d.kernel_driver_version) for d in reading.devices} == {("xe", None)}


def test_i915_arc_a770_values_and_what_i915_does_not_say(tmp_path: Path) -> None:
    machine = i915_a770_machine(tmp_path)
    machine.add_client(ClientSpec(4243, 9, A770_SLOT, 3, 6 * GIB, compute_busy=0.5, video_busy=0.3))
    intel, _ = two_polls(machine, 4.0)
    (device,) = intel.poll().devices
    assert (device.name, device.kernel_driver, device.pci_bus_id) == ("Intel Arc A770", "i915", A770_SLOT)
    assert device.power_watts == pytest.approx(150.0) and device.power_limit_watts == 190.0
    assert device.clock_sm_mhz == 2100 and device.memory_used_bytes == 6 * GIB
    assert device.utilization_gpu_percent == pytest.approx(50.0)
    assert device.temperature_celsius is None and device.memory_total_bytes is None  # i915 publishes neither


@pytest.mark.parametrize("make", [xe_max1550_machine, i915_a770_machine])
def test_per_process_usage_from_moving_counters(tmp_path: Path, make: object) -> None:
    machine = make(tmp_path)  # type: ignore[operator]
    slot = machine.cards[0].slot
    machine.add_client(ClientSpec(5001, 4, slot, 11, 2 * GIB, compute_busy=0.6, video_busy=0.25))
    machine.add_client(ClientSpec(5002, 4, slot, 12, 1 * GIB, compute_busy=0.2))
    clock = Clock()
    intel = backend(machine, clock)
    first = {p.pid: p for p in intel.poll().processes}
    assert first[5001].sm_percent is None and first[5001].gpu_usage_note is not None
    assert first[5001].gpu_memory_bytes == 2 * GIB
    clock.now += 3.0
    machine.tick(3.0)
    reading = intel.poll()
    later = {p.pid: p for p in reading.processes}
    assert later[5001].sm_percent == pytest.approx(60.0) and later[5002].sm_percent == pytest.approx(20.0)
    assert later[5001].decoder_percent == pytest.approx(25.0) and later[5002].decoder_percent == 0.0
    assert later[5001].encoder_percent is None  # the video engine's share of encoding is unknown: not guessed
    assert later[5001].gpu_usage_note is None
    assert reading.devices[0].utilization_gpu_percent == pytest.approx(80.0)
    assert reading.devices[0].memory_used_bytes == 3 * GIB


def test_a_client_shared_by_a_real_parent_and_forked_children_counts_once(tmp_path: Path) -> None:
    parent = subprocess.Popen([sys.executable, "-c", "import os, time\n"
                               "for _ in range(2):\n    os.fork() or time.sleep(600)\n"
                               "time.sleep(600)"])
    try:
        children = _children(parent.pid, 2)
        machine = xe_max1550_machine(tmp_path)
        machine.add_client(ClientSpec(parent.pid, 6, MAX1550_SLOTS[0], 21, 4 * GIB, compute_busy=0.5,
                                      holders=tuple(children)))
        intel, _ = two_polls(machine)
        reading = intel.poll()
        assert [(p.pid, p.gpu_memory_bytes) for p in reading.processes] == [(parent.pid, 4 * GIB)]
        assert reading.processes[0].sm_percent == pytest.approx(50.0)
        assert reading.devices[0].memory_used_bytes == 4 * GIB
        assert reading.devices[0].utilization_gpu_percent == pytest.approx(50.0)
    finally:
        kill_tree(parent.pid)
        parent.wait()


def test_clients_of_another_device_are_not_counted_on_this_one(tmp_path: Path) -> None:
    machine = i915_a770_machine(tmp_path)
    machine.add_client(ClientSpec(6001, 4, "0000:00:02.0", 1, 3 * GIB, compute_busy=0.9))  # not an i915 card here
    machine.add_client(ClientSpec(6002, 4, A770_SLOT, 2, 1 * GIB, compute_busy=0.1))
    intel, _ = two_polls(machine)
    reading = intel.poll()
    assert [p.pid for p in reading.processes] == [6002]
    assert reading.devices[0].memory_used_bytes == GIB


def _children(pid: int, count: int) -> list[int]:
    import time

    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        except OSError:
            text = ""
        if len(text.split()) >= count:
            return [int(p) for p in text.split()]
        time.sleep(0.05)
    raise AssertionError("the forked children did not start")


def test_missing_and_garbage_files_are_none(tmp_path: Path) -> None:
    machine = xe_max1550_machine(tmp_path)
    device = machine.sysfs / "class/drm/card0/device"
    hwmon = device / "hwmon/hwmon3"
    for name, garbage in (("power1_max", "0"), ("power1_rated_max", "lots"), ("temp2_input", "\x1b[31m"),
                          ("temp3_input", "9999999"), ("energy1_input", "-5")):
        (hwmon / name).write_text(garbage)
    (device / "tile0/gt0/freq0/act_freq").write_text("99999999999")
    (device / "tile1/physical_vram_size_bytes").unlink()
    (machine.sysfs / "class/drm/card1/device/uevent").write_text("DRIVER=xe\nPCI_SLOT_NAME=0000:3a:00.0\nPCI_ID=x")
    shutil.rmtree(machine.sysfs / "class/drm/card1/device/hwmon")
    shutil.rmtree(machine.sysfs / "class/drm/card1/device/tile0")
    (machine.sysfs / "class/drm/card1/device/tile1/physical_vram_size_bytes").write_text("big")
    clock = Clock()
    intel = backend(machine, clock)
    intel.poll()
    clock.now += 2.0
    first, second = intel.poll().devices[:2]
    for device_sample in (first, second):
        assert device_sample.power_watts is None and device_sample.power_limit_watts is None
        assert device_sample.temperature_celsius is None and device_sample.temperature_memory_celsius is None
        assert device_sample.clock_sm_mhz is None and device_sample.memory_total_bytes is None
        assert device_sample.energy_joules is None
    assert second.name is None and second.pci_bus_id == "0000:3a:00.0"


def test_power_is_none_when_the_energy_counter_goes_backwards(tmp_path: Path) -> None:
    machine = i915_a770_machine(tmp_path)
    intel, clock = two_polls(machine, 10.0)
    assert intel.poll().devices[0].power_watts == pytest.approx(150.0)
    clock.now += 1.0
    machine.tick(1.0)  # the driver reloaded: the counter restarted lower
    assert intel.poll().devices[0].power_watts is None


def test_a_card_gone_from_sysfs_shows_lost(tmp_path: Path) -> None:
    machine = xe_max1550_machine(tmp_path)
    clock = Clock()
    intel = backend(machine, clock)
    assert not any(d.lost for d in intel.poll().devices)
    shutil.rmtree(machine.sysfs / "class/drm/card2")
    devices = intel.poll().devices
    assert [d.lost for d in devices] == [False, False, True, False]
    assert devices[2].error and devices[2].pci_bus_id == MAX1550_SLOTS[2] and devices[2].power_watts is None


_POLL_AS_NOBODY = """
import json, sys
from pathlib import Path
from gpusight.backends.interface import Roots
from gpusight.backends.intel.backend import IntelBackend
drop()
reading = IntelBackend(Roots(Path(sys.argv[1]), Path(sys.argv[2]))).poll()
print(json.dumps([reading.devices[2].utilization_gpu_percent, reading.devices[2].memory_used_bytes,
                  [e.message for e in reading.errors], [p.pid for p in reading.processes]]))
"""


def test_unreadable_processes_make_device_figures_none_with_a_note() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to run the poll as another user")
    root = Path(tempfile.mkdtemp(prefix="gpusight-intel-"))
    try:
        root.chmod(0o755)
        machine = xe_max1550_machine(root)
        machine.add_client(ClientSpec(4244, 5, MAX1550_SLOTS[2], 8, GIB, compute_busy=0.5))
        (machine.fdinfo / "999" / "fd").mkdir(parents=True)
        (machine.fdinfo / "999" / "fd").chmod(0o700)  # root's process: nobody cannot list its descriptors
        out = run_python_as(NOBODY, NOBODY, _POLL_AS_NOBODY, [str(machine.sysfs), str(machine.fdinfo)])
        assert out.returncode == 0, out.stderr
        utilization, used, errors, pids = json.loads(out.stdout)
        assert (utilization, used) == (None, None) and pids == [4244]
        assert len(errors) == 1 and "1 processes" in errors[0] and "N/A" in errors[0]
    finally:
        shutil.rmtree(root)


def test_backend_intel_is_chosen_by_name_and_found_by_auto(tmp_path: Path) -> None:
    assert "intel" in BACKEND_NAMES and parse_backend_choice("intel") == ("intel",)
    machine = i915_a770_machine(tmp_path)
    roots = Roots(machine.sysfs, machine.fdinfo)
    assert [e.name for e in chosen_entries(("auto",), roots)] == ["nvml", "intel"]
    assert [e.name for e in chosen_entries(("auto",), Roots(tmp_path / "empty", tmp_path / "empty"))] == ["nvml"]
    (machine.sysfs / "class/drm/card0/device/uevent").write_text("DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n")
    assert [e.name for e in chosen_entries(("auto",), roots)] == ["nvml", "amdgpu"]  # an AMD card now, not Intel


def test_forced_without_an_intel_card_says_so(tmp_path: Path) -> None:
    reading = IntelBackend(Roots(tmp_path / "sys", tmp_path / "proc")).poll()
    assert reading.devices == () and reading.driver is None
    assert [e.scope for e in reading.errors] == ["intel"] and "no Intel GPU" in reading.errors[0].message


def test_i915_clock_from_the_per_gt_rps_file_when_the_card_file_is_missing(tmp_path: Path) -> None:
    machine = i915_a770_machine(tmp_path)
    card = machine.sysfs / "class/drm/card0"
    (card / "gt_act_freq_mhz").unlink()
    (card / "gt/gt0").mkdir(parents=True)
    (card / "gt/gt0/rps_act_freq_mhz").write_text("1950\n")
    assert backend(machine, Clock()).poll().devices[0].clock_sm_mhz == 1950
