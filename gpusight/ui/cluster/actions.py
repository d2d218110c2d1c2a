"""Every action of the cluster view (``gpusight --cluster URL``), declared once.

``CLUSTER_ACTIONS`` drives the key bindings, the footer, the help screen and the command palette, as
:data:`gpusight.ui.actions.ACTIONS` does for the single-host monitor.
"""

from __future__ import annotations

from gpusight.ui.actions import Action


def _sort(key: str, sort_key: str, what: str) -> Action:
    """The action ordering the hosts by ``sort_key`` (described as ``what``) on ``key``."""
    return Action(action=f"sort('{sort_key}')", keys=key, key_display=key, label=f"Sort {what}", title=f"Sort hosts by {what}",
                  help=f"order hosts by {what} (again to reverse)", footer=False)


CLUSTER_ACTIONS: tuple[Action, ...] = (
    Action(action="quit", keys="q", key_display="q", label="Quit", title="Quit", help="quit"),
    Action(action="interrupt", keys="ctrl+c", key_display="Ctrl+C", label="Quit", title="Quit or copy",
           help="quit from any screen (copies instead while text is selected)", footer=False, priority=True, palette=False),
    Action(action="pause", keys="p", key_display="p", label="Pause", title="Pause / resume",
           help="pause / resume polling the Prometheus server (PAUSED in the header)"),
    Action(action="drill", keys="enter", key_display="Enter", label="Host", title="Open host",
           help="open the host under the cursor: its GPUs with history charts, processes, jobs and advice"),
    Action(action="leave", keys="escape", key_display="Esc", label="Back", title="Back",
           help="back to the fleet from a host; closes the host filter"),
    Action(action="filter", keys="slash", key_display="/", label="Filter", title="Filter hosts",
           help="show only hosts whose name (or GPU model) holds the text"),
    Action(action="collapse", keys="c,space", key_display="c", label="Fold", title="Fold host",
           help="fold / unfold the host under the cursor to its one summary row", help_keys="c / Space"),
    Action(action="collapse_all", keys="x", key_display="x", label="Fold all", title="Fold all hosts",
           help="fold every host to its summary row / unfold them all"),
    Action(action="toggle_advice", keys="a", key_display="a", label="Advice", title="Toggle fleet advice",
           help="show / hide the fleet advice panel"),
    Action(action="help", keys="question_mark", key_display="?", label="Help", title="Keys",
           help="show every key and what it does"),
    _sort("n", "name", "name"),
    _sort("u", "util", "mean GPU utilization"),
    _sort("m", "memory", "GPU memory used"),
    _sort("f", "free", "free GPUs"),
)
"""The cluster view's actions in help-screen order."""

CLUSTER_OTHER_KEYS: tuple[tuple[str, str], ...] = (
    ("Up / Down / PgUp / PgDn / Home / End", "move the cursor in the fleet table; scroll a host's screen"),
    ("Ctrl+P", "command palette: every action by name"),
)
"""Keys the widgets and Textual handle, listed on the help screen after the actions."""


def cluster_help_rows() -> list[tuple[str, str]]:
    """(keys, description) of every action and of the other keys, for the help screen."""
    return [(entry.keys_text, entry.describe("")) for entry in CLUSTER_ACTIONS] + list(CLUSTER_OTHER_KEYS)
