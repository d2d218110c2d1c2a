"""Start-up costs: wall time of one-shot ``gpusight --once`` and the import time of the package and its UI."""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

IMPORT_PROBE = (
    "import sys, time\n"
    "started = time.perf_counter()\n"
    "__import__(sys.argv[1])\n"
    "print(time.perf_counter() - started)\n"
)
"""Child program that prints how long importing the module named by its argument took."""


def once_wall_s(env: dict[str, str], runs: int) -> list[float]:
    """Wall seconds of ``gpusight --once`` (stdout a pipe), one per run; raises if it fails."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "gpusight", "--once"], env=env, capture_output=True,
                                text=True, timeout=60, check=False)
        times.append(time.perf_counter() - started)
        if result.returncode != 0 or "H100" not in result.stdout:
            raise RuntimeError(f"gpusight --once failed ({result.returncode}): {result.stderr.strip()[-500:]}")
    return times


def import_s(module: str, env: dict[str, str], runs: int) -> list[float]:
    """Seconds to import ``module`` in a fresh interpreter, one per run."""
    times = []
    for _ in range(runs):
        result = subprocess.run([sys.executable, "-c", IMPORT_PROBE, module], env=env, capture_output=True,
                                text=True, timeout=60, check=True)
        times.append(float(result.stdout.strip()))
    return times


def median(values: list[float]) -> float:
    """Median of ``values``."""
    return statistics.median(values)
