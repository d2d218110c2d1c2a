"""What gpusight wrote under its old name, gputop: read, so that files and settings from before the rename still work.

Up to version 0.1.0 the monitor was called gputop. Nothing is written under that name any more, but what it
wrote is still read: compact recordings that start with its magic, a config file in its config directory,
status records that trainers started before the upgrade still publish, TensorBoard event files of an earlier
conversion, and its environment variables. This is the one module that names it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

NAME = "gputop"
"""The old name: the config directory, the status-record directories, the TensorBoard suffix."""

COMPACT_MAGIC = b"\x89GPUTOP\r\n\x1a\n"
"""The first bytes of a compact recording (and of each of its segments) written under the old name."""

STATUS_RECORD_KIND = "gputop.trainer_status"
"""The ``kind`` of a trainer status record published under the old name."""

TENSORBOARD_SUFFIX = ".gputop"
"""How the names of event files of a conversion made under the old name end."""

ENV_PREFIX = "GPUTOP_"
"""How the old name's environment variables start (``GPUTOP_PARTIAL_OUTPUT``, ``GPUTOP_STATS_FILE``)."""


def environment_name(name: str, environ: Mapping[str, str] = os.environ) -> str:
    """The variable that sets ``name`` (``GPUSIGHT_...``): ``name`` itself unless only its old name's is set."""
    old = ENV_PREFIX + name.removeprefix("GPUSIGHT_")
    return old if name not in environ and name.startswith("GPUSIGHT_") and old in environ else name


def environment_value(name: str, environ: Mapping[str, str] = os.environ) -> str | None:
    """The value of the environment variable ``name`` (``GPUSIGHT_...``), else of its old name's, else None."""
    return environ.get(environment_name(name, environ))
