"""``python -m gpusight.backends.drm.dump``: a fixture machine dumped and unpacked reads back the same."""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

from gpusight.backends.drm.clients import DrmClientScanner
from gpusight.backends.drm.sysfs import find_cards, hwmon_dir, hwmon_temperatures, read_int
from support.drm_fixture import FdinfoTree, SysfsTree


def _machine(root: Path) -> None:
    sysfs = SysfsTree(root / "sys")
    card = "class/drm/card1/device"
    sysfs.write(f"{card}/uevent", "DRIVER=amdgpu\nPCI_ID=1002:74A1\nPCI_SLOT_NAME=0000:c1:00.0")
    sysfs.write(f"{card}/gpu_busy_percent", 61)
    sysfs.write(f"{card}/hwmon/hwmon3/temp2_input", 71000)
    sysfs.write(f"{card}/hwmon/hwmon3/temp2_label", "junction")
    sysfs.write("class/drm/card0/device/uevent", "DRIVER=ast\nPCI_SLOT_NAME=0000:02:00.0")
    sysfs.write("class/drm/card0/device/secret_of_another_driver", "not copied")
    sysfs.write("class/kfd/kfd/proc/4242/vram_17543", 1024)
    sysfs.write("module/amdgpu/version", "6.10.5")
    tree = FdinfoTree(root / "proc")
    tree.open(os.getpid(), 9, {"drm-driver": "amdgpu", "drm-client-id": 4, "drm-pdev": "0000:c1:00.0",
                               "drm-engine-gfx": "5 ns"})
    tree.open_kfd(os.getpid(), 10)
    (root / "proc" / str(os.getpid()) / "fd").joinpath("11").symlink_to("/home/user/secret.txt")


def test_a_dump_unpacks_into_roots_that_read_the_same(tmp_path: Path) -> None:
    _machine(tmp_path / "machine")
    env = {**os.environ, "GPUSIGHT_SYSFS_ROOT": str(tmp_path / "machine" / "sys"),
           "GPUSIGHT_FDINFO_ROOT": str(tmp_path / "machine" / "proc")}
    out = subprocess.run([sys.executable, "-m", "gpusight.backends.drm.dump", str(tmp_path / "tree.tar.gz")],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "6 sysfs files, 2 DRM/KFD descriptors" in out.stdout
    with tarfile.open(tmp_path / "tree.tar.gz") as archive:
        names = archive.getnames()
        assert not any("secret" in name or "card0" in name for name in names)
        archive.extractall(tmp_path / "back", filter="tar")
    back = tmp_path / "back"
    cards = find_cards(back / "sys", frozenset({"amdgpu"}))
    assert [(c.name, c.pci_slot, c.pci_id) for c in cards] == [("card1", "0000:c1:00.0", "1002:74A1")]
    assert read_int(cards[0].device / "gpu_busy_percent") == 61
    hwmon = hwmon_dir(cards[0].device)
    assert hwmon is not None and hwmon_temperatures(hwmon) == {"junction": 71.0}
    assert read_int(back / "sys" / "class/kfd/kfd/proc/4242/vram_17543") == 1024
    scan = DrmClientScanner(back / "proc", frozenset({"amdgpu"})).scan()
    assert [(c.pid, c.stats.client_id, c.stats.engine_ns) for c in scan.clients] == [(os.getpid(), 4, {"gfx": 5})]
    assert scan.kfd_pids == {os.getpid()}


def test_an_unwritable_destination_is_one_clear_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "gpusight.backends.drm.dump", str(tmp_path / "no" / "such" / "t.tgz")],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1 and out.stderr.startswith("cannot write") and "Traceback" not in out.stderr
