"""gputop.collect (and the other pure modules) must never import textual or rich."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "gputop"
PURE_DIRS = ("collect", "advice", "prometheus_exporter", "cluster", "recordings", "demo", "snapshot_export", "run_report", "convert")
PURE_MODULES = ("gputop.collect.sampler", "gputop.collect.live", "gputop.demo.source", "gputop.recordings.replay",
                "gputop.recordings.opening", "gputop.oneshot", "gputop.cli", "gputop.textsafe", "gputop.units",
                "gputop.job_text", "gputop.prometheus_exporter.families", "gputop.prometheus_exporter.server",
                "gputop.prometheus_exporter.command", "gputop.cluster.source", "gputop.cluster.command")
FORBIDDEN = ("textual", "rich")


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    roots = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("folder", PURE_DIRS)
def test_pure_packages_do_not_import_ui_libraries(folder):
    files = sorted((PACKAGE / folder).rglob("*.py"))
    assert files, f"no Python files under gputop/{folder}"
    offenders = {str(f.relative_to(PACKAGE)): sorted(_imported_roots(f) & set(FORBIDDEN)) for f in files}
    offenders = {name: libs for name, libs in offenders.items() if libs}
    assert offenders == {}


def test_importing_the_pure_modules_loads_no_ui_library():
    code = (
        "import sys, importlib\n"
        f"for name in {PURE_MODULES!r}: importlib.import_module(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_importing_gputop_does_not_import_torch():
    code = "import sys, gputop, gputop.cli; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
