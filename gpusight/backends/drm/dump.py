"""Copy what the amdgpu and Intel backends read into a tar archive, for a mismatch report or a new test fixture.

``python -m gpusight.backends.drm.dump gpu-tree.tar.gz`` writes ``sys/...`` (each AMD or Intel card's small sysfs
files, its hwmon sensors, KFD's topology and per-process VRAM, the drivers' module versions) and ``proc/<pid>/fd/<fd>``
links with their ``proc/<pid>/fdinfo/<fd>`` for every DRM or KFD descriptor this user can see. Unpacked, the two
folders are a ``GPUSIGHT_SYSFS_ROOT`` and a ``GPUSIGHT_FDINFO_ROOT``. No command line, environment or file content
other than those sysfs and fdinfo files is copied.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

from gpusight.backends.drm.clients import DRM_PREFIX, KFD_PATH
from gpusight.backends.drm.sysfs import MAX_FILE_BYTES, find_cards
from gpusight.backends.interface import Roots

DRIVERS = frozenset({"amdgpu", "xe", "i915"})
"""The kernel drivers whose cards are copied."""
CARD_DEPTH = 4
"""How deep below a card's ``device`` folder files are copied (``tile0/gt0/freq0/cur_freq`` is 4 down)."""
SKIPPED = frozenset({"subsystem", "driver", "firmware_node", "iommu", "iommu_group", "physfn", "virtfn0", "power",
                     "msi_irqs", "consumer", "supplier", "drm", "graphics", "mem_info_preempt_used", "config", "rom",
                     "resource", "vbios_version_history"})
"""Links and folders not followed, and files not read (binary, huge or back-links into the rest of sysfs)."""


def _small_files(folder: Path, depth: int) -> Iterator[Path]:
    """Regular files up to ``depth`` folders down, without following links out of ``folder``."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name in SKIPPED or entry.name.startswith("resource") or entry.name.endswith("_history"):
            continue
        path = Path(entry.path)
        if entry.is_file(follow_symlinks=False):
            yield path
        elif depth > 0 and (entry.is_dir(follow_symlinks=False) or entry.name.startswith("hwmon")):
            yield from _small_files(path, depth - 1)


def _read(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read(MAX_FILE_BYTES)
    except OSError:
        return None


def _add_file(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    archive.addfile(info, io.BytesIO(data))


def _add_link(archive: tarfile.TarFile, name: str, target: str) -> None:
    info = tarfile.TarInfo(name)
    info.type = tarfile.SYMTYPE
    info.linkname = target
    archive.addfile(info)


def sysfs_files(roots: Roots) -> Iterator[Path]:
    """Every sysfs file the dump copies."""
    for card in find_cards(roots.sysfs, DRIVERS):
        yield from _small_files(card.device, CARD_DEPTH)
        for path in _small_files(roots.sysfs / "class" / "drm" / card.name, 3):  # i915's gt_*_freq_mhz and gt/ are here
            if not path.is_relative_to(card.device):  # a fixture's device folder is a folder, not sysfs's link
                yield path
    yield from _small_files(roots.sysfs / "class" / "kfd" / "kfd", 4)
    for driver in sorted(DRIVERS):
        yield roots.sysfs / "module" / driver / "version"


def dump(roots: Roots, out: Path) -> tuple[int, int]:
    """Write the archive; (sysfs files copied, DRM or KFD descriptors copied)."""
    files = descriptors = 0
    with tarfile.open(out, "w:gz") as archive:
        for path in sysfs_files(roots):
            data = _read(path)
            if data is not None:
                _add_file(archive, "sys/" + str(path.relative_to(roots.sysfs)), data)
                files += 1
        for pid in sorted((n for n in os.listdir(roots.fdinfo) if n.isdigit()), key=int):
            fd_dir = roots.fdinfo / pid / "fd"
            try:
                fds = sorted(os.listdir(fd_dir), key=lambda n: int(n) if n.isdigit() else -1)
            except OSError:
                continue
            for fd in fds:
                try:
                    target = os.readlink(fd_dir / fd)
                except OSError:
                    continue
                if target.startswith(DRM_PREFIX) or target == KFD_PATH:
                    _add_link(archive, f"proc/{pid}/fd/{fd}", target)
                    data = _read(roots.fdinfo / pid / "fdinfo" / fd)
                    if data is not None:
                        _add_file(archive, f"proc/{pid}/fdinfo/{fd}", data)
                    descriptors += 1
    return files, descriptors


def main(argv: list[str] | None = None) -> int:
    """The command: write the archive named on the command line, and say what it holds."""
    parser = argparse.ArgumentParser(prog="python -m gpusight.backends.drm.dump", description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the .tar.gz to write")
    args = parser.parse_args(argv)
    try:
        files, descriptors = dump(Roots.from_environment(), args.out)
    except OSError as exc:
        print(f"cannot write {args.out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {args.out}: {files} sysfs files, {descriptors} DRM/KFD descriptors "
          "(unpack it and point GPUSIGHT_SYSFS_ROOT at sys/ and GPUSIGHT_FDINFO_ROOT at proc/)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
