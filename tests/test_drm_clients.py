"""The shared DRM layer on fixture trees: fdinfo parsing, one count per client, and usage from moving counters."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.backends.drm.clients import DrmClientScanner, engine_usage
from gpusight.backends.drm.fdinfo import parse_fdinfo
from support.drm_fixture import FdinfoTree

AMDGPU_FDINFO = """pos:\t0
flags:\t02100002
mnt_id:\t24
ino:\t1147
drm-driver:\tamdgpu
drm-client-id:\t27
drm-pdev:\t0000:c1:00.0
pasid:\t32773
drm-memory-vram:\t2097152 KiB
drm-memory-gtt: \t2048 KiB
drm-memory-cpu: \t0 KiB
drm-engine-gfx:\t2400000000 ns
drm-engine-compute:\t0 ns
drm-engine-dec:\t0 ns
"""

XE_FDINFO = """pos:\t0
drm-driver:\txe
drm-client-id:\t44
drm-pdev:\t0000:03:00.0
drm-total-system:\t0
drm-total-vram0:\t1048576 KiB
drm-resident-vram0:\t1024 MiB
drm-cycles-rcs:\t500
drm-total-cycles-rcs:\t1000
drm-cycles-vcs:\t10
drm-total-cycles-vcs:\t1000
drm-engine-capacity-vcs:\t2
"""


def test_amdgpu_fdinfo_with_the_older_memory_keys_parses() -> None:
    stats = parse_fdinfo(AMDGPU_FDINFO)
    assert stats is not None
    assert (stats.driver, stats.client_id, stats.pdev) == ("amdgpu", 27, "0000:c1:00.0")
    assert stats.memory_total["vram"] == 2 * 1024**3 == stats.memory_resident["vram"]
    assert stats.engine_ns == {"gfx": 2_400_000_000, "compute": 0, "dec": 0}


def test_xe_fdinfo_cycles_and_regions_parse() -> None:
    stats = parse_fdinfo(XE_FDINFO)
    assert stats is not None
    assert stats.memory_total == {"system": 0, "vram0": 1024**3}
    assert stats.memory_resident == {"vram0": 1024**3}
    assert stats.cycles == {"rcs": 500, "vcs": 10} and stats.engine_capacity == {"vcs": 2}


@pytest.mark.parametrize("text", ["", "pos: 0\nflags: 2\n", "drm-client-id: 3\n"])
def test_a_file_that_is_not_a_drm_client_gives_nothing(text: str) -> None:
    assert parse_fdinfo(text) is None


def test_hostile_values_are_skipped_not_fatal() -> None:
    stats = parse_fdinfo("drm-driver: amdgpu\ndrm-client-id: x\ndrm-engine-gfx: -5 ns\ndrm-memory-vram: 9 PiB\n"
                         "drm-engine-compute: 1e99 ns\ndrm-total-vram: " + "9" * 400 + "\n")
    assert stats is not None and stats.client_id is None
    assert stats.engine_ns == {} and stats.memory_total == {}


def test_usage_is_the_counter_delta_over_time() -> None:
    before = parse_fdinfo(AMDGPU_FDINFO)
    after = parse_fdinfo(AMDGPU_FDINFO.replace("2400000000 ns", "3200000000 ns"))
    assert before is not None and after is not None
    assert engine_usage(before, after, 2.0) == {"gfx": pytest.approx(40.0), "compute": 0.0, "dec": 0.0}
    xe_after = parse_fdinfo(XE_FDINFO.replace("rcs:\t500", "rcs:\t1250").replace("cycles-rcs:\t1000", "cycles-rcs:\t2000"))
    xe_before = parse_fdinfo(XE_FDINFO)
    assert xe_before is not None and xe_after is not None
    assert engine_usage(xe_before, xe_after, 1.0)["rcs"] == pytest.approx(75.0)


def _child_process() -> subprocess.Popen[bytes]:
    """A real process with a real child (a DataLoader worker's shape): the child inherits its parent's descriptors."""
    code = "import subprocess, sys, time; c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); " \
           "print(c.pid, flush=True); time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)


def test_a_client_shared_by_parent_and_forked_child_counts_once_under_the_parent(tmp_path: Path) -> None:
    parent = _child_process()
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        tree = FdinfoTree(tmp_path)
        fields = {"drm-driver": "amdgpu", "drm-client-id": 9, "drm-pdev": "0000:c1:00.0",
                  "drm-memory-vram": "1024 KiB", "drm-engine-gfx": "0 ns"}
        tree.open(child, 5, fields)  # the child is listed first by pid order in some cases; the owner is still the parent
        tree.open(parent.pid, 5, fields)
        tree.open(os.getpid(), 7, {**fields, "drm-client-id": 10})
        tree.open(os.getpid(), 8, {"drm-driver": "i915", "drm-client-id": 11})
        scan = DrmClientScanner(tmp_path, frozenset({"amdgpu"})).scan()
        assert sorted((c.pid, c.stats.client_id) for c in scan.clients) == sorted([(parent.pid, 9), (os.getpid(), 10)])
    finally:
        parent.kill()
        parent.wait()


def test_kfd_holders_closed_descriptors_and_rescans(tmp_path: Path) -> None:
    times = iter([0.0, 0.5, 2.0])
    tree = FdinfoTree(tmp_path)
    pid = os.getpid()
    tree.open(pid, 3, {"drm-driver": "amdgpu", "drm-client-id": 1, "drm-engine-gfx": "0 ns"})
    tree.open_kfd(pid, 4)
    scanner = DrmClientScanner(tmp_path, frozenset({"amdgpu"}), clock=lambda: next(times))
    first = scanner.scan()
    assert first.kfd_pids == {pid} and len(first.clients) == 1 and first.clients[0].engine_percent == {}
    tree.update(pid, 3, {"drm-driver": "amdgpu", "drm-client-id": 1, "drm-engine-gfx": "250000000 ns"})
    second = scanner.scan()  # no rescan yet: the known descriptor is read again
    assert second.clients[0].engine_percent == {"gfx": pytest.approx(50.0)}
    tree.close(pid, 3)
    tree.open(pid, 6, {"drm-driver": "amdgpu", "drm-client-id": 2})
    third = scanner.scan()  # rescan: the closed one is gone, the new one found
    assert [c.stats.client_id for c in third.clients] == [2]
