"""The one rule for every file gpusight writes under a name the user gave, said once for ``--help`` and the docs.

An existing output is replaced only with ``--force``: ``--convert``'s OUT (or, with ``--to tensorboard``, an earlier
conversion in DIR) and ``--report``'s HTML and Markdown, whether named with ``-o`` or chosen beside the recording.
Outputs are written under a temporary name and moved into place once complete, so a failed run never leaves half a
file nor loses the old one. ``--record`` appends to its FILE, and ``--export`` and the ``s`` key pick a free name:
they never replace a file, so they need no ``--force``.
"""

from __future__ import annotations

from pathlib import Path

OVERWRITE_RULE = (
    "an existing output file (--convert's OUT, --to's earlier conversion, --report's HTML and Markdown, named with "
    "-o or not) is replaced only with --force, once the new one is complete; --record appends, and --export picks "
    "a free name, so neither ever replaces a file"
)
"""The rule in one sentence, as ``--help`` says it."""


def existing_output_problem(target: Path, *, force: bool) -> str | None:
    """Why ``target`` may not be written (one line), or None: it is not a regular file, or it exists and ``force``
    is not given. A missing ``target`` may always be written."""
    if not target.exists():
        return None
    if not target.is_file():
        return f"{target} is not a regular file"
    if not force:
        return f"{target} exists; add --force to replace it"
    return None
