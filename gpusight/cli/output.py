"""What the command line prints and how it fails: one-line errors, and a stdout whose reader may go away."""

from __future__ import annotations

import os
import sys

BROKEN_PIPE_EXIT_STATUS = 141
"""Exit status when the reader of stdout went away (128 + SIGPIPE, what a shell reports for C tools)."""


class CliError(Exception):
    """A problem with the command line or its inputs, reported in one line with exit status 1."""


def write_stdout(text: str) -> bool:
    """Write and flush ``text``; False when the reader closed the pipe (the export and recording still happen)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        return False
    return True


def reader_gone() -> int:
    """Stdout's reader (``head``, ``jq``, ...) closed the pipe: leave quietly, like a C tool killed by SIGPIPE.

    Stdout is pointed at /dev/null first, so the interpreter's final flush of the buffered rest
    cannot raise a second time and print a traceback.
    """
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    finally:
        os.close(devnull)
    return BROKEN_PIPE_EXIT_STATUS
