"""The config file: only a regular file of at most 1 MiB is read (a FIFO, /dev/zero or a directory is reported, never
read), its [advice] and [filters] sections reach the real CLI, and the loader works on Python 3.10 with tomli."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpusight.config_file import MAX_CONFIG_BYTES, read_config

REPO = Path(__file__).resolve().parents[1]
PYTHON_310_CANDIDATES = ("/root/.pyenv/versions/3.10.13/bin/python3.10", "python3.10")
"""Where a Python 3.10 interpreter may be found (pyenv on the development machine, else PATH)."""


def gpusight(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real CLI; the timeout catches a read that never ends (the old /dev/zero behaviour)."""
    return subprocess.run([sys.executable, "-m", "gpusight", *args], capture_output=True, text=True, timeout=60, env=env)


def config_errors(out: subprocess.CompletedProcess[str]) -> list[str]:
    assert out.returncode == 0, out.stderr
    return [e["message"] for e in json.loads(out.stdout)["errors"] if e["scope"] == "config"]


@pytest.fixture
def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "config.fifo"
    os.mkfifo(path)
    return path


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda tmp, fifo: Path("/dev/zero"), "a character device"),
        (lambda tmp, fifo: fifo, "a FIFO"),
        (lambda tmp, fifo: tmp, "a directory"),
    ],
    ids=["dev-zero", "fifo", "directory"],
)
def test_only_a_regular_file_is_read_as_config(tmp_path, fifo, make, kind):
    path = make(tmp_path, fifo)
    out = gpusight("--demo", "healthy", "--json", "--config", str(path))
    [message] = config_errors(out)
    assert message == f"{path}: {kind}, not a regular file; only a regular file is read as config; config file ignored"


def test_a_config_file_over_the_cap_is_not_read(tmp_path):
    path = tmp_path / "big.toml"
    path.write_text("[advice]\nlow_util_percent = 40\n" + "# padding\n" * (MAX_CONFIG_BYTES // 10))
    assert path.stat().st_size > MAX_CONFIG_BYTES
    [message] = config_errors(gpusight("--demo", "healthy", "--json", "--config", str(path)))
    assert message == f"{path}: larger than 1 MiB, the most a config file may be; config file ignored"


def test_a_symlink_to_a_regular_file_is_read_and_one_to_a_device_is_not(tmp_path):
    real = tmp_path / "real.toml"
    real.write_text("[advice]\nlow_util_percent = 40\n")
    (tmp_path / "good.toml").symlink_to(real)
    (tmp_path / "bad.toml").symlink_to("/dev/zero")
    assert read_config(tmp_path / "good.toml") == ({"advice": {"low_util_percent": 40}}, [])
    document, [warning] = read_config(tmp_path / "bad.toml")
    assert document == {} and "a character device" in warning


def test_one_file_of_exactly_the_cap_is_read(tmp_path):
    path = tmp_path / "edge.toml"
    head = "[advice]\nfew_workers = 3\n"
    path.write_text(head + "#" * (MAX_CONFIG_BYTES - len(head) - 1) + "\n")
    assert path.stat().st_size == MAX_CONFIG_BYTES
    assert read_config(path) == ({"advice": {"few_workers": 3}}, [])


def test_advice_and_filters_sections_reach_the_cli(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[advice]\nlow_util_percent = 40\n\n[filters]\ngpus = "5,2"\nuser = "alice"\n')
    out = gpusight("--demo", "mixed", "--json", "--config", str(path))
    assert config_errors(out) == []
    data = json.loads(out.stdout)
    assert [d["index"] for d in data["devices"]] == [5, 2]
    # alice (not a user of this host: demo data may name anyone) runs on GPU 2; carol's job on GPU 5 is hidden
    assert {(p["user"], p["device_index"]) for p in data["processes"]} == {("alice", 2)}
    once = gpusight("--demo", "mixed", "--once", "--config", str(path))
    assert once.stdout.splitlines()[1] == "filters: GPUs 5,2, user alice"
    flags = gpusight("--demo", "mixed", "--json", "--config", str(path), "--gpus", "4,5", "--user", "bob")
    data = json.loads(flags.stdout)
    assert [d["index"] for d in data["devices"]] == [4, 5]
    assert {(p["user"], p["device_index"]) for p in data["processes"]} == {("bob", 4)}
    ignored = json.loads(gpusight("--demo", "mixed", "--json", "--config", str(path), "--no-filters").stdout)
    assert len(ignored["devices"]) == 8 and len({p["user"] for p in ignored["processes"]}) > 1


def _python_310() -> str:
    for candidate in PYTHON_310_CANDIDATES:
        found = shutil.which(candidate)
        if found:
            return found
    pytest.skip("no Python 3.10 interpreter on this machine (looked for " + ", ".join(PYTHON_310_CANDIDATES) + ")")


LOAD_ON_310 = r"""
import json, os, sys
from pathlib import Path
from gpusight.advice.config import thresholds_from_config
from gpusight.sampling.filters import filters_from_config
from gpusight.config_file import read_config
assert sys.version_info[:2] == (3, 10), sys.version
path = Path(sys.argv[1])
document, warnings = read_config(path)
thresholds, problems = thresholds_from_config(document, path)
filters, notes = filters_from_config(document["filters"], str(path), {"CUDA_VISIBLE_DEVICES": "1,0"})
print(json.dumps({"warnings": warnings + problems + notes, "low_util_percent": thresholds.low_util_percent,
                  "cuda_visible": filters.gpus.value, "described": filters.describe(),
                  "tomllib": "tomllib" in sys.modules, "tomli": "tomli" in sys.modules}))
"""


def test_the_config_path_works_on_python_310(tmp_path):
    interpreter = _python_310()
    env_dir = tmp_path / "venv310"
    made = subprocess.run([interpreter, "-m", "venv", str(env_dir)], capture_output=True, text=True, timeout=120)
    if made.returncode != 0:
        pytest.skip(f"cannot create a Python 3.10 virtual environment: {made.stderr.strip()[-200:]}")
    python = env_dir / "bin" / "python"
    pip = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "tomli>=1.1"],
                         capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"pip cannot install tomli for Python 3.10 here: {pip.stderr.strip()[-200:]}")
    config = tmp_path / "config.toml"
    config.write_text("[advice]\nlow_util_percent = 35\n\n[filters]\ncuda_visible = true\n")
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(REPO), "PYTHONDONTWRITEBYTECODE": "1",
           "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache")}  # compileall writes its .pyc files there, not into the checkout
    out = subprocess.run([str(python), "-c", LOAD_ON_310, str(config)], capture_output=True, text=True, env=env, timeout=60)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result == {"warnings": [], "low_util_percent": 35.0, "cuda_visible": "1,0",
                      "described": "CUDA_VISIBLE_DEVICES=1,0", "tomllib": False, "tomli": True}
    # Every module must at least compile on 3.10 (no 3.11-only syntax such as except* anywhere in the package).
    compiled = subprocess.run([str(python), "-m", "compileall", "-q", "-x", "__pycache__", str(REPO / "gpusight")],
                              capture_output=True, text=True, env=env, timeout=120)
    assert compiled.returncode == 0, compiled.stdout + compiled.stderr
