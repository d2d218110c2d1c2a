"""Find or fetch the peer monitors: nvitop from PyPI into its own venv, nvtop from Debian's contrib section.

Everything goes into a cache folder outside the repository (``$XDG_CACHE_HOME/gpusight-bench``, by
default ``~/.cache/gpusight-bench``). Nothing is installed system-wide: nvtop's package is downloaded
with ``apt-get download`` against a private copy of the package lists and unpacked with ``dpkg -x``.
A peer that cannot be had is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

DEBIAN_CONTRIB_SOURCE = """Types: deb
URIs: http://deb.debian.org/debian
Suites: {suite} {suite}-updates
Components: main contrib
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""
"""deb822 source used for the private package lists (Debian main + contrib)."""


NVITOP_VERSION = "1.7.2"
"""nvitop release the benchmark installs (pinned, so runs on different days compare)."""

NVITOP_DEFAULT_INTERVAL_S = 2.0
"""nvitop's refresh interval without ``--interval`` (its ``--help`` says 2)."""

NVTOP_DEFAULT_INTERVAL_S = 1.0
"""nvtop's refresh interval without ``-d`` (its built-in delay is 1000 ms)."""


@dataclass(frozen=True)
class Peer:
    """A monitor ready to run (gpusight or a peer), or the reason it is not."""

    name: str
    """``gpusight``, ``nvitop`` or ``nvtop``."""
    argv: tuple[str, ...] | None
    """Command that runs it at its default interval, or None when unavailable."""
    version: str | None
    """Version it reports."""
    default_interval_s: float | None
    """Refresh interval it runs at without an interval option."""
    reason: str | None = None
    """Why it is unavailable."""
    tenths: bool = False
    """True when it takes the interval as ``-d`` in tenths of a second (nvtop), else as ``--interval`` seconds."""

    def command(self, interval_s: float | None) -> tuple[tuple[str, ...], float]:
        """Its command line at ``interval_s`` (None: its default) and the interval it really runs at."""
        assert self.argv is not None and self.default_interval_s is not None, f"{self.name} is unavailable"
        if interval_s is None:
            return self.argv, self.default_interval_s
        if not self.tenths:
            return (*self.argv, "--interval", f"{interval_s:g}"), interval_s
        tenths = max(1, round(interval_s * 10))
        return (*self.argv, "-d", str(tenths)), tenths / 10


def cache_dir() -> Path:
    """Folder for the peers (created)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    path = base / "gpusight-bench"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _run(command: list[str], cwd: Path | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


def get_nvitop() -> Peer:
    """nvitop from the cache's venv, created with ``pip install nvitop==NVITOP_VERSION`` when missing."""
    home = cache_dir() / "nvitop-venv"
    python = home / "bin" / "python"
    binary = home / "bin" / "nvitop"
    if not binary.exists():
        print("benchmark: installing nvitop from PyPI into", home, file=sys.stderr)
        try:
            venv.create(home, with_pip=True)
            result = _run([str(python), "-m", "pip", "install", "--quiet", f"nvitop=={NVITOP_VERSION}"])
        except (OSError, subprocess.SubprocessError) as exc:
            return Peer("nvitop", None, None, None, f"cannot create a venv: {exc}")
        if result.returncode != 0 or not binary.exists():
            return Peer("nvitop", None, None, None, f"pip install nvitop=={NVITOP_VERSION} failed: "
                        + _last_line(result.stderr))
    version = _run([str(python), "-c", "import nvitop; print(nvitop.__version__)"]).stdout.strip() or None
    return Peer("nvitop", (str(binary),), version, NVITOP_DEFAULT_INTERVAL_S)


def get_nvtop() -> Peer:
    """nvtop unpacked from Debian's package in the cache, downloaded when missing."""
    root = cache_dir() / "nvtop-root"
    binary = root / "usr" / "bin" / "nvtop"
    if not binary.exists():
        reason = _fetch_nvtop(root)
        if reason is not None:
            return Peer("nvtop", None, None, None, reason)
    result = _run([str(binary), "--version"], timeout=30)
    version = (result.stdout.strip() or result.stderr.strip()).split()[-1] if result.returncode == 0 else None
    return Peer("nvtop", (str(binary),), version, NVTOP_DEFAULT_INTERVAL_S, tenths=True)


def _fetch_nvtop(root: Path) -> str | None:
    """Download and unpack nvtop into ``root``; the reason on failure, else None."""
    if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
        return "needs apt-get and dpkg (Debian or Ubuntu)"
    apt = cache_dir() / "apt"
    for sub in ("lists/partial", "archives/partial", "sources"):
        (apt / sub).mkdir(parents=True, exist_ok=True)
    suite = _debian_suite()
    if suite is None:
        return "not a Debian system (no VERSION_CODENAME in /etc/os-release)"
    (apt / "sources" / "debian-contrib.sources").write_text(DEBIAN_CONTRIB_SOURCE.format(suite=suite))
    options = [
        "-o", "Dir::Etc::SourceList=/dev/null",
        "-o", f"Dir::Etc::SourceParts={apt / 'sources'}",
        "-o", f"Dir::State::Lists={apt / 'lists'}",
        "-o", f"Dir::Cache::Archives={apt / 'archives'}",
    ]
    print("benchmark: downloading nvtop from Debian contrib into", root, file=sys.stderr)
    try:
        update = _run(["apt-get", *options, "update"])
        if update.returncode != 0:
            return "apt-get update failed: " + _last_line(update.stderr)
        download = _run(["apt-get", *options, "download", "nvtop"], cwd=apt)
        packages = sorted(apt.glob("nvtop_*.deb"))
        if download.returncode != 0 or not packages:
            return "apt-get download nvtop failed: " + _last_line(download.stderr)
        unpack = _run(["dpkg", "-x", str(packages[-1]), str(root)])
        if unpack.returncode != 0:
            return "dpkg -x failed: " + _last_line(unpack.stderr)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"cannot fetch nvtop: {exc}"
    return None


def _debian_suite() -> str | None:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VERSION_CODENAME="):
            return line.split("=", 1)[1].strip().strip('"') or None
    return None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
