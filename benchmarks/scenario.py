"""The benchmark's NVML: the project's fake library plus the entry points the peers need.

The library every tool loads is ``peer_nvml_shim.c`` on top of the project's fake
(tests/fakenvml/fake_nvml.c): the shim adds the calls nvitop and nvtop need at start-up (PCI info,
link width, ...) with constant, non-blocking answers. What the GPUs report is in ``waves.py``; the
process that keeps rewriting it is ``mover.py``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""Repository root."""

sys.path.insert(0, str(REPO / "tests"))
from support.fake_nvml import LIBRARY_NAME, SOURCE, FakeGpu, FakeScenario, fake_nvml_env

__all__ = ["REPO", "FakeGpu", "FakeScenario", "build_bench_nvml", "fake_nvml_env"]

SHIM_SOURCE = Path(__file__).resolve().with_name("peer_nvml_shim.c")
"""C source of the extra entry points the peers need."""

CORE_NAME = "libfakenvml-core.so"
"""File name and SONAME of the fake core inside the benchmark's library folder."""


def build_bench_nvml(folder: Path) -> Path:
    """Compile the fake core and the shim into ``folder``; return the path of its ``libnvidia-ml.so.1``."""
    folder.mkdir(parents=True, exist_ok=True)
    compiler = os.environ.get("CC") or shutil.which("cc") or "cc"
    commands = [
        [compiler, "-shared", "-fPIC", "-O2", f"-Wl,-soname,{CORE_NAME}", "-o", str(folder / CORE_NAME),
         str(SOURCE), "-lpthread"],
        [compiler, "-shared", "-fPIC", "-O2", "-Wall", f"-Wl,-soname,{LIBRARY_NAME}", "-o", str(folder / LIBRARY_NAME),
         str(SHIM_SOURCE), "-Wl,--no-as-needed", f"-L{folder}", "-l:" + CORE_NAME, "-Wl,-rpath,$ORIGIN"],
    ]
    for command in commands:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RuntimeError(f"building the benchmark NVML failed: {' '.join(command)}\n{result.stderr}")
    return folder / LIBRARY_NAME
