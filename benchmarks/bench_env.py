"""The environment every benchmark gives the tools it runs: a clean terminal, private config, compiled gpusight.

Shared by run.py, startup.py, exporter_cpu.py and terminal_bytes.py, so that none of them imports another benchmark
script for it (run.py imports startup.py, which once imported run.py back).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from scenario import REPO

UNSET = ("COLORTERM", "NO_COLOR", "TEXTUAL", "GPUSIGHT_STATS_FILE", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH")
"""Variables no tool may inherit from the shell that runs the benchmark."""


def base_env(workdir: Path) -> dict[str, str]:
    """The terminal environment every tool gets: xterm-256color, UTF-8, no truecolor, private config dirs.

    Byte code may be written (``PYTHONDONTWRITEBYTECODE`` is dropped) and :func:`precompile` compiles
    gpusight first, so it starts as it does after ``pip install``, which compiles the package.
    """
    env = {k: v for k, v in os.environ.items() if k not in UNSET}
    env.update(TERM="xterm-256color", LANG="C.UTF-8", LC_ALL="C.UTF-8", XDG_CONFIG_HOME=str(workdir / "config"))
    return env


def gpusight_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` for gpusight: this checkout's package comes first on the path."""
    return dict(env, PYTHONPATH=str(REPO))


def precompile(env: dict[str, str], checkout: Path = REPO) -> None:
    """Compile the gpusight modules of ``checkout`` (into their ``__pycache__`` folders, which git ignores)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(checkout / "gpusight")], env=env, check=True,
                   capture_output=True)
