"""The amdgpu backend on fixture trees: card figures, files missing or garbage, a lost card, per-process usage from
moving counters, the /dev/kfd note, forked children, unreadable processes, and how ``--backend`` finds it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from gpusight.backends.amdgpu.backend import LOST_MESSAGE, UNREADABLE_HINT, AmdgpuBackend
from gpusight.backends.amdgpu.device import RAS_PERIOD_S
from gpusight.backends.amdgpu.processes import KFD_USAGE_NOTE
from gpusight.backends.interface import BackendOptions, Roots
from gpusight.backends.registry import AUTO, chosen_entries, open_backends, parse_backend_choice
from gpusight.snapshot.model import GpuReading, Vendor
from support.amd_tree import GIB, MI300X_SLOTS, AmdMachine, mi210_machine, mi300x_machine
from support.procs import kill_tree, run_python_as


class Polls:
    """An amdgpu backend on a machine, with a clock the test moves alongside the counters."""

    def __init__(self, machine: AmdMachine) -> None:
        self.machine = machine
        self.now = 0.0
        self.backend = AmdgpuBackend(Roots(machine.sysfs_root, machine.fdinfo_root), clock=lambda: self.now)

    def at(self, seconds: float) -> GpuReading:
        """The counters as ``seconds`` of work left them, read at that time."""
        self.now = seconds
        self.machine.tick(seconds)
        return self.backend.poll()


def test_eight_mi300x_in_pci_order_with_their_figures(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path)
    machine.set_figures(3, busy=87, mem_busy=31, vram_used=150 * GIB, power_w=612.5, junction=71.25, memory=64.0,
                        level=1)
    reading = AmdgpuBackend(Roots(machine.sysfs_root, machine.fdinfo_root)).poll()
    assert [d.pci_bus_id for d in reading.devices] == list(MI300X_SLOTS)  # card0, the BMC's VGA, is not one
    gpu = reading.devices[3]
    assert (gpu.index, gpu.name, gpu.vendor, gpu.kernel_driver) == (3, "AMD Instinct MI300X", Vendor.AMD, "amdgpu")
    assert (gpu.utilization_gpu_percent, gpu.utilization_memory_percent) == (87.0, 31.0)
    assert (gpu.memory_used_bytes, gpu.memory_total_bytes) == (150 * GIB, 192 * GIB)
    assert (gpu.power_watts, gpu.power_limit_watts) == (612.5, 750.0)
    assert gpu.temperature_celsius == gpu.temperature_junction_celsius == 71.25  # no edge sensor: the junction's
    assert gpu.temperature_memory_celsius == 64.0
    assert (gpu.clock_sm_mhz, gpu.clock_memory_mhz) == (1300, 1300)  # the starred pp_dpm levels
    assert gpu.fan_percent is None and gpu.energy_joules is None  # passive cooling, no energy counter
    assert gpu.health is not None
    assert (gpu.health.pcie_link_gen, gpu.health.pcie_link_width, gpu.health.pcie_link_gen_max) == (5, 16, 5)
    assert (gpu.health.ecc_aggregate_uncorrected, gpu.health.ecc_aggregate_corrected, gpu.ecc_errors_uncorrected) == (0, 0, 0)
    assert {d.kernel_driver_version for d in reading.devices} == {"6.10.5"}
    assert reading.driver is None  # the snapshot's driver is NVIDIA's alone
    assert reading.errors == ()


def test_an_mi210_named_from_its_pci_id_with_edge_sensor_hwmon_clocks_fan_and_power_input(tmp_path: Path) -> None:
    machine = mi210_machine(tmp_path)
    machine.set_figures(0, busy=40, mem_busy=10, vram_used=GIB, power_w=201.0, junction=60.0, memory=55.0, level=2)
    machine.sysfs.write(f"{machine.hwmon(0)}/energy1_input", 123_456_000_000)
    machine.sysfs.write(f"{machine.device(0)}/ras/umc_err_count", "ue: 2\nce: 7")
    machine.sysfs.write(f"{machine.device(0)}/ras/gfx_err_count", "ue: 1\nce: 0")
    machine.sysfs.write(f"{machine.device(0)}/current_link_speed", "8.0 GT/s PCIe")
    machine.sysfs.write(f"{machine.device(0)}/current_link_width", 8)
    [gpu] = AmdgpuBackend(Roots(machine.sysfs_root, machine.fdinfo_root)).poll().devices
    assert gpu.name == "AMD Instinct MI210"
    assert gpu.temperature_celsius == 52.0 and gpu.temperature_junction_celsius == 60.0
    assert gpu.power_watts == 201.0 and gpu.power_limit_watts == 300.0
    assert (gpu.clock_sm_mhz, gpu.clock_memory_mhz) == (2100, 1300)
    assert gpu.fan_percent == pytest.approx(128 / 255 * 100)
    assert gpu.energy_joules == pytest.approx(123_456.0)
    assert gpu.health is not None and (gpu.health.pcie_link_gen, gpu.health.pcie_link_width) == (3, 8)
    assert (gpu.health.ecc_aggregate_uncorrected, gpu.health.ecc_aggregate_corrected) == (3, 7)
    assert gpu.ecc_errors_uncorrected == 3


GARBAGE = ["", "garbage", "1e3", "99999999999999999999999", "\x00\x01", "nan"]


@pytest.mark.parametrize("junk", GARBAGE, ids=repr)
def test_every_file_holding_garbage_reads_as_none_never_zero(tmp_path: Path, junk: str) -> None:
    machine = mi210_machine(tmp_path)
    device, hwmon = machine.device(0), machine.hwmon(0)
    for name in ("gpu_busy_percent", "mem_busy_percent", "mem_info_vram_used", "mem_info_vram_total", "pp_dpm_sclk",
                 "pp_dpm_mclk", "current_link_speed", "current_link_width", "max_link_speed", "max_link_width",
                 "ras/umc_err_count", "ras/gfx_err_count", "ras/sdma_err_count"):
        machine.sysfs.write(f"{device}/{name}", junk)
    for name in ("power1_input", "power1_cap", "temp1_input", "temp2_input", "temp3_input", "freq1_input",
                 "freq2_input", "pwm1", "energy1_input"):
        machine.sysfs.write(f"{hwmon}/{name}", junk)
    machine.sysfs.write("module/amdgpu/version", "")
    reading = AmdgpuBackend(Roots(machine.sysfs_root, machine.fdinfo_root)).poll()
    [gpu] = reading.devices
    figures = (gpu.utilization_gpu_percent, gpu.utilization_memory_percent, gpu.memory_used_bytes, gpu.memory_total_bytes,
               gpu.power_watts, gpu.power_limit_watts, gpu.temperature_celsius, gpu.temperature_junction_celsius,
               gpu.temperature_memory_celsius, gpu.fan_percent, gpu.clock_sm_mhz, gpu.clock_memory_mhz,
               gpu.energy_joules, gpu.ecc_errors_uncorrected, gpu.health)
    assert figures == (None,) * len(figures)
    assert gpu.name == "AMD Instinct MI210" and not gpu.lost
    assert gpu.kernel_driver_version is None  # an in-kernel amdgpu publishes no version


def test_negative_figures_where_none_can_be_are_none(tmp_path: Path) -> None:
    machine = mi210_machine(tmp_path)
    device, hwmon = machine.device(0), machine.hwmon(0)
    for name in ("gpu_busy_percent", "mem_info_vram_used", "mem_info_vram_total", "current_link_width"):
        machine.sysfs.write(f"{device}/{name}", -7)
    for name in ("power1_input", "power1_cap", "freq1_input", "pwm1", "energy1_input"):
        machine.sysfs.write(f"{hwmon}/{name}", -7)
    [gpu] = AmdgpuBackend(Roots(machine.sysfs_root, machine.fdinfo_root)).poll().devices
    figures = (gpu.utilization_gpu_percent, gpu.memory_used_bytes, gpu.memory_total_bytes, gpu.power_watts,
               gpu.power_limit_watts, gpu.fan_percent, gpu.energy_joules)
    assert figures == (None,) * len(figures)
    assert gpu.clock_sm_mhz == 500  # hwmon's clock unusable: the starred pp_dpm_sclk level instead
    assert gpu.health is not None and gpu.health.pcie_link_width is None


def test_missing_files_and_a_missing_hwmon_read_as_none(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path, count=1)
    for name in ("gpu_busy_percent", "mem_busy_percent", "mem_info_vram_used", "pp_dpm_sclk", "product_name", "ras"):
        path = machine.sysfs_root / machine.device(0) / name
        subprocess.run(["rm", "-rf", str(path)], check=True)
    subprocess.run(["rm", "-rf", str(machine.sysfs_root / machine.device(0) / "hwmon")], check=True)
    subprocess.run(["rm", "-rf", str(machine.sysfs_root / "module")], check=True)
    reading = AmdgpuBackend(Roots(machine.sysfs_root, machine.fdinfo_root)).poll()
    [gpu] = reading.devices
    assert gpu.name == "AMD Instinct MI300X"  # from the PCI id table
    assert (gpu.utilization_gpu_percent, gpu.utilization_memory_percent, gpu.memory_used_bytes) == (None, None, None)
    assert (gpu.power_watts, gpu.power_limit_watts, gpu.temperature_celsius, gpu.clock_sm_mhz) == (None,) * 4
    assert gpu.memory_total_bytes == 192 * GIB and gpu.clock_memory_mhz == 900
    assert gpu.health is not None and gpu.health.ecc_aggregate_uncorrected is None
    assert gpu.kernel_driver_version is None  # an in-kernel amdgpu publishes no version


def test_a_card_that_disappears_is_lost_and_its_processes_go(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path, count=3)
    machine.open_client([os.getpid()], 5, 2, 41, 3 * GIB, {"gfx": 0.5})
    polls = Polls(machine)
    assert [p.device_index for p in polls.at(0.0).processes] == [2]
    machine.remove_card(2)
    reading = polls.at(1.0)
    assert [d.lost for d in reading.devices] == [False, False, True]
    lost = reading.devices[2]
    assert (lost.name, lost.pci_bus_id, lost.error, lost.utilization_gpu_percent) == (
        "AMD Instinct MI300X", MI300X_SLOTS[2], LOST_MESSAGE, None)
    assert [(e.scope, e.message) for e in reading.errors] == [("gpu2", LOST_MESSAGE)]
    assert reading.processes == ()


def test_ras_counters_are_read_every_period_so_an_ecc_error_shows_within_it(tmp_path: Path) -> None:
    """A dozen RAS files per card cost more than the card's figures, which are read at every poll."""
    machine = mi300x_machine(tmp_path, count=1)
    polls = Polls(machine)
    polls.at(0.0)
    machine.sysfs.write(f"{machine.device(0)}/ras/umc_err_count", "ue: 2\nce: 5")
    [soon] = polls.at(1.0).devices
    [later] = polls.at(RAS_PERIOD_S).devices

    assert soon.health is not None and (soon.health.ecc_aggregate_uncorrected, soon.ecc_errors_uncorrected) == (0, 0)
    assert later.health is not None and (later.health.ecc_aggregate_uncorrected,
                                         later.health.ecc_aggregate_corrected, later.ecc_errors_uncorrected) == (2, 5, 2)


def test_usage_per_process_and_gpu_from_moving_counters(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path)
    me = os.getpid()
    machine.open_client([me], 5, 1, 11, 40 * GIB, {"gfx": 0.2, "compute": 0.6, "dec": 0.25})
    machine.open_client([me], 6, 1, 12, 2 * GIB, {"compute": 0.1}, new_keys=False)  # a second client, older keys
    machine.open_client([me], 7, 6, 13, 8 * GIB, {"gfx": 0.3, "enc": 0.05})
    polls = Polls(machine)
    first = polls.at(0.0)
    assert [(p.pid, p.device_index, p.sm_percent) for p in first.processes] == [(me, 1, None), (me, 6, None)]
    second = polls.at(2.0)
    on1, on6 = second.processes
    assert (on1.device_index, on1.gpu_memory_bytes) == (1, 42 * GIB)
    assert on1.sm_percent == pytest.approx(70.0)  # compute, 60 % + 10 % over two clients, busier than gfx's 20 %
    assert on1.decoder_percent == pytest.approx(25.0) and on1.encoder_percent == 0.0
    assert (on6.device_index, on6.gpu_memory_bytes, on6.gpu_usage_note) == (6, 8 * GIB, None)
    assert on6.sm_percent == pytest.approx(30.0) and on6.encoder_percent == pytest.approx(5.0)


def test_a_rocm_process_with_flat_counters_has_no_usage_and_says_why(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path)
    rocm, idle = os.getpid(), os.getppid()
    machine.open_client([rocm], 5, 0, 21, 0, {})  # ROCm opens the render node too; its counters stay flat
    machine.open_kfd(rocm, 6, {0: 96 * GIB, 4: 10 * GIB, 5: 0})
    machine.open_client([idle], 5, 0, 22, GIB, {})  # a plain DRM client that is idle: 0 %, a real zero
    polls = Polls(machine)
    polls.at(0.0)
    reading = polls.at(1.0)
    by_place = {(p.pid, p.device_index): p for p in reading.processes}
    assert set(by_place) == {(rocm, 0), (rocm, 4), (idle, 0)}  # no row for a GPU it holds nothing on
    on0, on4, plain = by_place[(rocm, 0)], by_place[(rocm, 4)], by_place[(idle, 0)]
    assert (on0.sm_percent, on0.gpu_usage_note) == (None, KFD_USAGE_NOTE)
    assert on0.gpu_memory_bytes == 0  # fdinfo's figure where the process has a client there
    assert (on4.gpu_memory_bytes, on4.sm_percent, on4.gpu_usage_note) == (10 * GIB, None, KFD_USAGE_NOTE)
    assert (plain.sm_percent, plain.gpu_usage_note) == (0.0, None)


@contextmanager
def forked_family(children: int) -> Iterator[tuple[int, list[int]]]:
    """A real parent with ``children`` forked children (DataLoader workers' shape): (parent, children)."""
    code = ("import os, sys, time\npids = []\nfor _ in range(int(sys.argv[1])):\n    pid = os.fork()\n"
            "    if pid == 0:\n        time.sleep(120); os._exit(0)\n    pids.append(pid)\n"
            "print(' '.join(map(str, pids)), flush=True); time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(children)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.pid, [int(pid) for pid in proc.stdout.readline().split()]
    finally:
        kill_tree(proc.pid)
        proc.wait()


def test_a_client_inherited_by_forked_workers_counts_once_under_the_parent(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path, count=2)
    with forked_family(3) as (parent, workers):
        machine.open_client([*workers, parent], 5, 1, 31, 20 * GIB, {"compute": 0.5})  # workers listed first
        polls = Polls(machine)
        polls.at(0.0)
        reading = polls.at(1.0)
    assert [(p.pid, p.device_index, p.gpu_memory_bytes) for p in reading.processes] == [(parent, 1, 20 * GIB)]
    assert reading.processes[0].sm_percent == pytest.approx(50.0)


UNREADABLE_SCRIPT = """
import json, sys
from pathlib import Path
from gpusight.backends.amdgpu.backend import AmdgpuBackend
from gpusight.backends.interface import Roots
drop()
reading = AmdgpuBackend(Roots(Path(sys.argv[1]), Path(sys.argv[2]))).poll()
print(json.dumps({"errors": [[e.scope, e.message] for e in reading.errors], "pids": [p.pid for p in reading.processes]}))
"""


def test_processes_whose_descriptors_cannot_be_read_give_one_note_suggesting_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root to run the backend as another user")
    with tempfile.TemporaryDirectory() as shared:  # pytest's tmp_path lies in a folder only root may enter
        unreadable_note(Path(shared))


def unreadable_note(tmp_path: Path) -> None:
    """Run the backend as nobody on a tree where two processes' descriptors are root's alone."""
    tmp_path.chmod(0o755)
    machine = mi300x_machine(tmp_path, count=1)
    machine.open_client([os.getpid()], 5, 0, 1, GIB, {"gfx": 0.1})
    for pid in (os.getpid(), os.getppid()):
        machine.fds.open(pid, 9, {"drm-driver": "amdgpu", "drm-client-id": 2, "drm-pdev": MI300X_SLOTS[0]})
        (machine.fdinfo_root / str(pid) / "fd").chmod(0o700)  # root's, as another user's /proc/PID/fd is
    for path in [tmp_path, *tmp_path.rglob("*")]:
        if not path.is_symlink() and path.name != "fd":
            path.chmod(0o755 if path.is_dir() else 0o644)
    done = run_python_as(65534, 65534, UNREADABLE_SCRIPT, [str(machine.sysfs_root), str(machine.fdinfo_root)])
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["pids"] == []
    [(scope, message)] = result["errors"]
    assert scope == "amdgpu" and "2 processes" in message and message.endswith(UNREADABLE_HINT)


def test_auto_finds_amdgpu_where_its_cards_are_and_backend_forces_it(tmp_path: Path) -> None:
    machine = mi300x_machine(tmp_path, count=2)
    here, bare = Roots(machine.sysfs_root, machine.fdinfo_root), Roots(tmp_path / "empty", tmp_path / "empty")
    assert [e.name for e in chosen_entries((AUTO,), here)] == ["nvml", "amdgpu"]
    assert [e.name for e in chosen_entries((AUTO,), bare)] == ["nvml"]
    assert parse_backend_choice("amdgpu") == ("amdgpu",)
    forced, _ = open_backends(parse_backend_choice("amdgpu"), BackendOptions(bare))
    assert forced.name == "amdgpu"
    assert [e.scope for e in forced.poll().errors] == ["amdgpu"]  # forced on a machine without one: it says so
    joined, _ = open_backends((AUTO,), BackendOptions(here))
    reading = joined.poll()  # the fake NVML answers "no driver": only the AMD GPUs, and no NVML note
    assert [(d.index, d.vendor) for d in reading.devices] == [(0, Vendor.AMD), (1, Vendor.AMD)]
    assert reading.errors == ()
    joined.close()
