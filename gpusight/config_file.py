"""Reading the config file, ``$XDG_CONFIG_HOME/gpusight/config.toml`` (or ``--config FILE``).

The file holds an ``[advice]`` section (thresholds, see :mod:`gpusight.advice.config`), a
``[filters]`` section (see :func:`gpusight.sampling.filters.filters_from_config`) and a ``[charts]``
section (see :func:`gpusight.sampling.chart_settings.chart_settings_from_config`). Only a regular file
of at most :data:`MAX_CONFIG_BYTES` is read, so a FIFO, a device such as ``/dev/zero`` or a
directory named by mistake is reported instead of hanging or filling memory. TOML is parsed with
``tomllib`` (Python 3.11+) or the ``tomli`` package (Python 3.10). Nothing here raises: every
problem is one warning line and the file is then ignored.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpusight import old_name

MAX_CONFIG_BYTES = 1 << 20
"""Largest config file read (1 MiB); a real one is a few hundred bytes."""

_FILE_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)

CONFIG_NAME = "config.toml"
"""The config file's name in its directory."""

TomlLoads = Callable[[str], dict[str, Any]]
"""``tomllib.loads``."""


def config_path() -> Path:
    """Where the user's config file lives: ``$XDG_CONFIG_HOME/gpusight/config.toml`` (default ``~/.config``).

    Where only the old name's file exists (``$XDG_CONFIG_HOME/gputop/config.toml``), that one is read.
    """
    base = Path(os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config"))
    path = base / "gpusight" / CONFIG_NAME
    old = base / old_name.NAME / CONFIG_NAME
    return old if not os.path.lexists(path) and os.path.lexists(old) else path


def read_config(path: Path | None = None) -> tuple[dict[str, Any], list[str]]:
    """The parsed config file (``config_path()`` when None) and the warnings met reading it.

    A missing file is an empty document without a warning; an unreadable, oversized, non-regular
    or invalid file is an empty document with one warning naming the file.
    """
    path = config_path() if path is None else path
    raw, problem = _read_bounded(path)
    if problem is not None:
        return {}, [f"{path}: {problem}; config file ignored"]
    if raw is None:
        return {}, []
    parser = _toml_parser()
    if parser is None:
        return {}, [f"{path}: reading it needs Python 3.11 or the tomli package; config file ignored"]
    loads, decode_error = parser
    try:
        return loads(raw.decode("utf-8", errors="replace")), []
    except decode_error as exc:
        return {}, [f"{path}: invalid TOML ({exc}); config file ignored"]


def _read_bounded(path: Path) -> tuple[bytes | None, str | None]:
    """(content, None), (None, None) when there is no file, or (None, why it is not read)."""
    try:
        info = os.stat(path)
    except FileNotFoundError:
        return None, None
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"
    problem = _not_regular(info.st_mode)
    if problem is not None:
        return None, problem
    try:
        # O_NONBLOCK: should the name have been swapped for a FIFO since the stat, opening it must not wait.
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        return None, f"cannot read ({exc.strerror or exc})"
    with open(descriptor, "rb") as handle:
        problem = _not_regular(os.fstat(descriptor).st_mode)
        if problem is not None:
            return None, problem
        try:
            raw = handle.read(MAX_CONFIG_BYTES + 1)
        except OSError as exc:
            return None, f"cannot read ({exc.strerror or exc})"
    if len(raw) > MAX_CONFIG_BYTES:
        return None, f"larger than {MAX_CONFIG_BYTES // (1 << 20)} MiB, the most a config file may be"
    return raw, None


def _not_regular(mode: int) -> str | None:
    """Why a file of ``mode`` is not read as config, or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    kind = next((text for test, text in _FILE_KINDS if test(mode)), "a special file")
    return f"{kind}, not a regular file; only a regular file is read as config"


def _toml_parser() -> tuple[TomlLoads, type[Exception]] | None:
    """``(loads, TOMLDecodeError)`` from tomllib (3.11+) or tomli (3.10), or None when neither is installed."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads, tomllib.TOMLDecodeError
    try:
        import tomli
    except ModuleNotFoundError:
        return None
    return tomli.loads, tomli.TOMLDecodeError
