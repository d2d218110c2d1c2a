"""The package as a user gets it: the wheel and the sdist build, the wheel installs into a fresh virtual environment
and runs from there (its stylesheets and the report's uPlot inside), and ``pipx install .`` works.

Nothing here imports the checkout: every command runs the installed copy, from a folder outside the repository.
Building and installing fetch the build backend and the dependencies from the package index, as for a user.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from gpusight import __version__
from support.recordings import write_demo_recording

REPO = Path(__file__).resolve().parents[1]
INSTALL_TIMEOUT_S = 900
"""Installing fetches the dependencies: generous, for a slow index."""


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything that would point Python at the checkout."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    return {**env, "PYTHONNOUSERSITE": "1", **extra}


def run(command: list[str], cwd: Path, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in ``cwd``; fail the test with its output when it fails."""
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=clean_env(**env))
    assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel, built as a publisher builds them (the wheel from the sdist, in isolation)."""
    out = tmp_path_factory.mktemp("dist")
    source = tmp_path_factory.mktemp("source") / "gpusight"
    # A copy of the tracked files only: build products and caches of the checkout must not leak in.
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    for name in tracked:
        target = source / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / name, target)
    run([sys.executable, "-m", "build", "--outdir", str(out), str(source)], cwd=out, timeout=INSTALL_TIMEOUT_S)
    return out


def test_the_sdist_and_the_wheel_carry_the_license_the_metadata_and_the_package_data(dist):
    [wheel] = dist.glob(f"gpusight-{__version__}-py3-none-any.whl")
    [sdist] = dist.glob(f"gpusight-{__version__}.tar.gz")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"gpusight-{__version__}.dist-info/METADATA").decode()
        entry_points = archive.read(f"gpusight-{__version__}.dist-info/entry_points.txt").decode()
    for data in ("gpusight/ui/gpusight.tcss", "gpusight/ui/cluster/cluster.tcss", "gpusight/py.typed",
                 "gpusight/run_report/assets/uPlot.iife.min.js", "gpusight/run_report/assets/uPlot.min.css",
                 "gpusight/run_report/assets/report.css", "gpusight/run_report/assets/report.js"):
        assert data in names, data
    assert f"gpusight-{__version__}.dist-info/licenses/LICENSE" in names
    assert "License-Expression: MIT" in metadata
    assert "License-File: LICENSE" in metadata
    assert "Classifier: Environment :: GPU :: NVIDIA CUDA" in metadata
    assert "Project-URL: Changelog," in metadata
    for requirement in ("textual", "rich", "nvidia-ml-py", "psutil", "prometheus_client", "zstandard"):
        assert f"Requires-Dist: {requirement}" in metadata, requirement
    assert "Requires-Dist: torch" in metadata and 'extra == "torch"' in metadata
    assert "gpusight = gpusight.cli:main" in entry_points and "gps = gpusight.cli:main" in entry_points
    with tarfile.open(sdist) as archive:
        members = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    assert {"LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "gpusight/ui/gpusight.tcss"} <= members


def test_the_wheel_installs_into_a_fresh_venv_and_runs(dist, tmp_path):
    [wheel] = dist.glob("gpusight-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bin_dir = env_dir / "bin"
    run([str(bin_dir / "python"), "-m", "pip", "install", "--quiet", str(wheel)], cwd=tmp_path, timeout=INSTALL_TIMEOUT_S)
    where = run([str(bin_dir / "python"), "-c", "import gpusight; print(gpusight.__file__)"], cwd=tmp_path)
    assert where.stdout.startswith(str(env_dir)), where.stdout

    version = run([str(bin_dir / "gpusight"), "--version"], cwd=tmp_path)
    assert version.stdout.startswith(f"gpusight {__version__}\n")
    once = run([str(bin_dir / "gps"), "--demo", "--once"], cwd=tmp_path)
    assert once.stdout.startswith(f"gpusight {__version__}") and "demo: mixed (simulated)" in once.stdout

    # The export renders the screen with the app's stylesheet, found inside the installed package.
    export = run([str(bin_dir / "gps"), "--demo", "--once", "--export", str(tmp_path / "export")], cwd=tmp_path, timeout=300)
    [svg] = (tmp_path / "export").glob("*.svg")
    assert "GPU" in svg.read_text(encoding="utf-8") and "exported:" in export.stderr

    recording = write_demo_recording(tmp_path / "run.gtop", 120)
    report = tmp_path / "run.html"
    run([str(bin_dir / "gpusight"), "--report", str(recording), "-o", str(report)], cwd=tmp_path, timeout=300)
    html = report.read_text(encoding="utf-8")
    assert "uPlot" in html and "Copyright (c)" in html  # uPlot inlined, with its MIT notice
    assert "<script src=" not in html and "<link " not in html  # self-contained: nothing fetched
    assert html.count("<style>") >= 1


def test_pipx_installs_the_checkout(tmp_path):
    pipx = shutil.which("pipx") or str(Path(sys.executable).with_name("pipx"))
    if not Path(pipx).exists():
        pytest.skip("pipx is not installed (pip install pipx)")
    home, bin_dir = tmp_path / "pipx-home", tmp_path / "pipx-bin"
    env = {"PIPX_HOME": str(home), "PIPX_BIN_DIR": str(bin_dir), "PIPX_MAN_DIR": str(tmp_path / "pipx-man")}
    source = tmp_path / "checkout"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    run([pipx, "install", str(source)], cwd=tmp_path, timeout=INSTALL_TIMEOUT_S, **env)
    version = run([str(bin_dir / "gpusight"), "--version"], cwd=tmp_path, **env)
    assert version.stdout.startswith(f"gpusight {__version__}\n")
    once = run([str(bin_dir / "gps"), "--demo", "--once"], cwd=tmp_path, **env)
    assert "demo: mixed (simulated)" in once.stdout
