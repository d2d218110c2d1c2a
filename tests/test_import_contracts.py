"""The import-linter contracts in pyproject.toml hold, and each of them catches the imports it forbids.

``lint-imports`` runs in the README's test command; these tests run it on the package as it is, and on copies
with one forbidden import planted, so a contract that stopped checking anything would be noticed. Importing
the package itself never imports PyTorch (that is the torch extra's alone).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = "gpusight"


def lint(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the project's contracts, over the package found under ``root``."""
    if root != REPO:
        shutil.copy(REPO / "pyproject.toml", root / "pyproject.toml")
    command = [sys.executable, "-c", "import sys; from importlinter.cli import lint_imports_command as lint; sys.exit(lint())"]
    return subprocess.run([*command, "--no-cache"], cwd=root, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"})


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A copy of the package to plant imports in."""
    shutil.copytree(REPO / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def plant(root: Path, module: str, line: str) -> None:
    """Add ``line`` at the end of ``module`` (a path under the package) in the copy at ``root``."""
    path = root / PACKAGE / module
    path.write_text(path.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")


def test_the_package_keeps_every_contract():
    result = lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(("module", "line", "contract"), [
    ("snapshot/model.py", "import textual", "Data never imports the screen"),
    ("backends/host/cpu.py", "import rich", "Data never imports the screen"),
    ("recordings/replay.py", "import rich.text", "Data never imports the screen"),
    ("advice/engine.py", "import torch", "Only the torch integration"),
    ("sampling/sampler.py", f"from {PACKAGE}.recordings import playback", "The folders import in one direction"),
    ("snapshot/model.py", f"from {PACKAGE}.facts import jobs", "The folders import in one direction"),
    ("facts/jobs.py", f"from {PACKAGE}.backends import live", "The folders import in one direction"),
    ("backends/live.py", f"from {PACKAGE}.sampling import history", "The folders import in one direction"),
    ("run_report/html.py", f"from {PACKAGE}.ui import format", "The folders import in one direction"),
    ("backends/nvml/backend.py", f"from {PACKAGE}.backends.host import cpu", "know nothing of each other"),
    ("backends/amdgpu/device.py", f"from {PACKAGE}.backends.intel import names", "know nothing of each other"),
    ("backends/intel/card.py", f"from {PACKAGE}.backends.nvml import calls", "know nothing of each other"),
    ("advice/engine.py", f"from {PACKAGE}.backends.nvml import errors", "A vendor's package is closed"),
    ("backends/live.py", f"from {PACKAGE}.backends.amdgpu import kfd", "A vendor's package is closed"),
    ("prometheus_exporter/device_families.py", f"from {PACKAGE}.backends.intel.entry import NAME",
     "A vendor's package is closed"),
    ("recordings/files.py", f"from {PACKAGE}.recordings import opening", "No import circles"),
])
def test_a_planted_import_breaks_its_contract(copy, module, line, contract):
    plant(copy, module, line)
    result = lint(copy)
    assert result.returncode == 1, result.stdout + result.stderr
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken


def test_importing_the_package_does_not_import_torch():
    code = f"import sys, {PACKAGE}, {PACKAGE}.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_command_line_starts_without_the_recording_readers():
    # Every run imports gpusight.cli; the compact reader (and Zstandard) load only when a recording is read.
    code = (f"import sys, {PACKAGE}.cli; print(sorted(m for m in sys.modules if m == 'zstandard' "
            f"or m.startswith('{PACKAGE}.recordings.compact') or m == '{PACKAGE}.recordings.opening'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
